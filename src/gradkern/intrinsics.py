"""The functions kernels call: `gk.tid`, `gk.atomic_add` and the elementary
functions. Outside a kernel the elementary functions work on Python scalars;
`tid` and `atomic_add` only have a meaning inside one."""

from __future__ import annotations

import builtins
import math

from .errors import GradkernError


def tid():
    """This thread's index in the launch domain: `i = gk.tid()` or `i, j = gk.tid()`."""
    raise GradkernError("gk.tid() can only be called inside a @gk.kernel")


def atomic_add(array, index, value):
    """`array[index] += value` atomically (the one sanctioned shared write)."""
    raise GradkernError("gk.atomic_add() can only be called inside a @gk.kernel")


sin, cos, tan, exp, log, sqrt, tanh = math.sin, math.cos, math.tan, math.exp, math.log, math.sqrt, math.tanh
abs, min, max, pow = builtins.abs, builtins.min, builtins.max, builtins.pow
asin, acos, atan, sinh, cosh = math.asin, math.acos, math.atan, math.sinh, math.cosh
asinh, acosh, atanh, erf, expm1, log1p = math.asinh, math.acosh, math.atanh, math.erf, math.expm1, math.log1p
atan2, hypot, copysign, fmod = math.atan2, math.hypot, math.copysign, math.fmod


def clamp(x, lo, hi):
    """min(max(x, lo), hi), as Warp's clamp (hi wins when lo > hi); d/dx is 1 on the closed [lo, hi]."""
    return builtins.min(builtins.max(x, lo), hi)


def sign(x):
    """-1, 0 or 1 in x's type (NaN for NaN), as np.sign; its derivative is 0."""
    if x != x:
        return x
    return type(x)((x > 0) - (x < 0))


def floor(x):
    """floor(x) of the argument's type (unlike math.floor, a float stays a float)."""
    return type(x)(math.floor(x)) if isinstance(x, float) else math.floor(x)
