"""gradkern: derivatives of in-place compute kernels by source transformation.

    @gk.kernel
    def saxpy(a, x, y):
        i = gk.tid()
        y[i] = a * x[i] + y[i]

    gk.launch(saxpy, n, 2.0, x, y)
"""

from . import interop  # gk.interop.torch_function, jax_function: imports neither framework
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
from .api import Inspection, Tape, autodiff, autodiff_thunk, inspect, jacobian, launch, release_memory
from .errors import (
    AliasingError,
    AnnotationError,
    BackendUnavailableError,
    CacheWarning,
    ConfigurationError,
    GradkernError,
    InternalError,
    InteropError,
    KernelSyntaxError,
    KernelTypeError,
    LaunchError,
    Loc,
    NotDifferentiableError,
    ProgramError,
    RaceError,
    RuleError,
    TapeOverflowError,
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
    cross,
    dot,
    erf,
    erfc,
    exp,
    expm1,
    float32,
    float64,
    floor,
    fmod,
    hypot,
    int32,
    int64,
    length,
    load_vec2,
    load_vec3,
    load_vec4,
    local,
    log,
    log1p,
    max,
    min,
    normalize,
    pow,
    sign,
    sin,
    sinh,
    sqrt,
    store_vec2,
    store_vec3,
    store_vec4,
    tan,
    tanh,
    tid,
    vec2,
    vec3,
    vec4,
)
from .kernel import DeviceFunction, KernelFunction, func, kernel
from .program.hostops import copy, fill
from .program.loop import checkpointed_loop
from .rules import RuleConfig, custom_rule

__all__ = [
    "__version__", "kernel", "func", "launch", "inspect", "Inspection", "KernelFunction", "DeviceFunction",
    "tid", "atomic_add", "sin", "cos", "tan", "exp", "log", "sqrt", "tanh", "abs", "min", "max", "pow", "floor",
    "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "expm1", "log1p", "atan2",
    "hypot", "copysign", "fmod", "clamp", "sign", "vec2", "vec3", "vec4", "dot", "cross", "length", "normalize",
    "load_vec2", "load_vec3", "load_vec4", "store_vec2", "store_vec3", "store_vec4",
    "local", "float32", "float64", "int32", "int64",
    "autodiff", "autodiff_thunk", "Tape", "copy", "fill", "checkpointed_loop", "custom_rule", "RuleConfig", "jacobian",
    "release_memory",
    "AnnotationError",
    "NotDifferentiableError",
    "GradkernError", "KernelSyntaxError", "KernelTypeError", "LaunchError", "AliasingError", "RaceError",
    "BackendUnavailableError", "CacheWarning", "ProgramError", "RuleError", "InteropError", "InternalError", "Loc",
    "TapeOverflowError", "ConfigurationError",
    "interop",
    "Annotation", "Const", "Active", "Duplicated", "DuplicatedNoNeed", "BatchDuplicated", "Reverse", "Forward",
]
