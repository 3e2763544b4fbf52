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


def floor(x):
    """floor(x) of the argument's type (unlike math.floor, a float stays a float)."""
    return type(x)(math.floor(x)) if isinstance(x, float) else math.floor(x)
