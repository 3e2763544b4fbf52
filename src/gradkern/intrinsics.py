"""The functions kernels call: `gk.tid`, `gk.atomic_add` and the elementary
functions. Outside a kernel the elementary functions work on Python scalars;
`tid` and `atomic_add` only have a meaning inside one."""

from __future__ import annotations

import builtins
import math

import numpy as np

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
erfc = math.erfc
atan2, hypot, copysign, fmod = math.atan2, math.hypot, math.copysign, math.fmod


float32, float64, int32, int64 = np.float32, np.float64, np.int32, np.int64


def local(shape, dtype=np.float64):
    """A fixed-size per-thread array, zero-initialised: inside a kernel, one scalar local per element
    (frontend/unroll.py), indexed by constants or by the variables of loops with constant bounds."""
    return np.zeros(shape, dtype)


def vec2(x, y):
    """A 2-vector: inside a kernel, two scalar locals (frontend/vectors.py); outside, a NumPy array."""
    return np.array([x, y])


def vec3(x, y, z):
    """A 3-vector (see vec2)."""
    return np.array([x, y, z])


def vec4(x, y, z, w):
    """A 4-vector (see vec2)."""
    return np.array([x, y, z, w])


def dot(a, b):
    return float(np.dot(a, b))


def cross(a, b):
    return np.cross(a, b)


def length(a):
    return math.sqrt(dot(a, a))


def normalize(a):
    """a / length(a) (no guard at 0: as Warp's, a zero vector gives NaN)."""
    return np.asarray(a) / length(a)


def _load(n):
    def load(array, *index):
        return np.array(array[(*index, slice(0, n))])
    load.__name__ = f"load_vec{n}"
    load.__doc__ = f"The vec{n} at array[*index, 0:{n}]: arrays of vectors have a trailing dimension of {n}."
    return load


def _store(n):
    def store(array, *index_and_value):
        *index, v = index_and_value
        array[(*index, slice(0, n))] = v
    store.__name__ = f"store_vec{n}"
    store.__doc__ = f"array[*index, 0:{n}] = v, a vec{n}."
    return store


load_vec2, load_vec3, load_vec4 = _load(2), _load(3), _load(4)
store_vec2, store_vec3, store_vec4 = _store(2), _store(3), _store(4)


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
