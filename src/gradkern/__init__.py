"""gradkern: derivatives of in-place compute kernels by source transformation.

    @gk.kernel
    def saxpy(a, x, y):
        i = gk.tid()
        y[i] = a * x[i] + y[i]

    gk.launch(saxpy, n, 2.0, x, y)
"""

from ._version import __version__
from .annotations import (
    Active,
    Annotation,
    BatchDuplicated,
    Const,
    Duplicated,
    DuplicatedNoNeed,
    Forward,
    Reverse,
)
from .api import Inspection, Tape, autodiff, autodiff_thunk, inspect, jacobian, launch
from .errors import (
    AliasingError,
    AnnotationError,
    BackendUnavailableError,
    CacheWarning,
    GradkernError,
    InternalError,
    KernelSyntaxError,
    KernelTypeError,
    LaunchError,
    Loc,
    NotDifferentiableError,
    ProgramError,
    RaceError,
    RuleError,
)
from .intrinsics import (
    abs,
    acos,
    acosh,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    atomic_add,
    clamp,
    copysign,
    cos,
    cosh,
    erf,
    exp,
    expm1,
    floor,
    fmod,
    hypot,
    log,
    log1p,
    max,
    min,
    pow,
    sign,
    sin,
    sinh,
    sqrt,
    tan,
    tanh,
    tid,
)
from .kernel import DeviceFunction, KernelFunction, func, kernel
from .program.hostops import copy, fill
from .program.loop import checkpointed_loop
from .rules import RuleConfig, custom_rule

__all__ = [
    "__version__", "kernel", "func", "launch", "inspect", "Inspection", "KernelFunction", "DeviceFunction",
    "tid", "atomic_add", "sin", "cos", "tan", "exp", "log", "sqrt", "tanh", "abs", "min", "max", "pow", "floor",
    "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "expm1", "log1p", "atan2", "hypot",
    "copysign", "fmod", "clamp", "sign",
    "autodiff", "autodiff_thunk", "Tape", "copy", "fill", "checkpointed_loop", "custom_rule", "RuleConfig", "jacobian",
    "AnnotationError",
    "NotDifferentiableError",
    "GradkernError", "KernelSyntaxError", "KernelTypeError", "LaunchError", "AliasingError", "RaceError",
    "BackendUnavailableError", "CacheWarning", "ProgramError", "RuleError", "InternalError", "Loc",
    "Annotation", "Const", "Active", "Duplicated", "DuplicatedNoNeed", "BatchDuplicated", "Reverse", "Forward",
]
