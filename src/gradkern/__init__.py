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
from .intrinsics import abs, atomic_add, cos, exp, floor, log, max, min, pow, sin, sqrt, tan, tanh, tid
from .kernel import DeviceFunction, KernelFunction, func, kernel
from .program.hostops import copy, fill
from .program.loop import checkpointed_loop
from .rules import RuleConfig, custom_rule

__all__ = [
    "__version__", "kernel", "func", "launch", "inspect", "Inspection", "KernelFunction", "DeviceFunction",
    "tid", "atomic_add", "sin", "cos", "tan", "exp", "log", "sqrt", "tanh", "abs", "min", "max", "pow", "floor",
    "autodiff", "autodiff_thunk", "Tape", "copy", "fill", "checkpointed_loop", "custom_rule", "RuleConfig", "jacobian",
    "AnnotationError",
    "NotDifferentiableError",
    "GradkernError", "KernelSyntaxError", "KernelTypeError", "LaunchError", "AliasingError", "RaceError",
    "BackendUnavailableError", "CacheWarning", "ProgramError", "RuleError", "InternalError", "Loc",
    "Annotation", "Const", "Active", "Duplicated", "DuplicatedNoNeed", "BatchDuplicated", "Reverse", "Forward",
]
