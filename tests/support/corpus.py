"""A corpus of small kernels that together use every construct of the kernel
language (docs/kernel-language.md), each with an input builder, a launch domain and a
pure-NumPy reference.

An entry's `make(rng, dtype)` returns the launch arguments (fresh arrays, some
of them strided, transposed or reversed views); `dim(args)` the launch domain;
`reference(*args)` updates NumPy copies of the arguments in place to what the
kernel must leave in them. `outputs` are the positions of the arrays the
kernel writes: every other array argument must come back unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import gradkern as gk

FLOATS = (np.float32, np.float64)
INTS = (np.int32, np.int64)

# Global numeric constants the kernels use: weak Python numbers, and one strongly typed NumPy scalar.
SCALE = 0.5
OFFSET = 3
NTAPS = 4
BLOCK = 4
HALF32 = np.float32(0.5)


@dataclass(frozen=True)
class Case:
    """One corpus entry."""

    name: str
    kernel: gk.KernelFunction
    make: Callable[[np.random.Generator, Any], tuple]
    dim: Callable[[tuple], Any]
    reference: Callable[..., None]
    outputs: tuple[int, ...]
    dtypes: tuple = FLOATS
    transcendental: bool = False  # uses sin/exp/pow...: backends may differ by an ulp
    reduction: bool = False  # sums whose order differs from the reference: compare with atol ~ rtol * max|y|
    noncontiguous: tuple[int, ...] = ()  # positions of arguments that are non-contiguous views
    exact: bool = False  # the reference does the same IEEE operations in the same order: bit-identical results


def uniform(rng: np.random.Generator, dtype, shape, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    return rng.uniform(lo, hi, shape).astype(dtype)


def nonzero(rng: np.random.Generator, dtype, shape, lo: float = 0.5, hi: float = 3.0) -> np.ndarray:
    """Values of random sign with lo <= |v| <= hi (safe divisors)."""
    sign = np.where(rng.integers(0, 2, shape) == 0, -1.0, 1.0)
    return (sign * rng.uniform(lo, hi, shape)).astype(dtype)


def ints(rng: np.random.Generator, dtype, shape, lo: int, hi: int) -> np.ndarray:
    return rng.integers(lo, hi, shape).astype(dtype)


# ---------------------------------------------------------------------------------------------------------------
# 1-D, early-return guards, launch domain larger than the arrays, global constants, Python scalar arguments


@gk.kernel
def axpy_guard(x, y, a, n):
    i = gk.tid()
    if i >= n:
        return
    if x[i] < -1.0:
        y[i] = -1.0 - OFFSET
        return
    y[i] = a * x[i] + SCALE * y[i] + OFFSET


def _make_axpy_guard(rng, dt):
    return uniform(rng, dt, 48, -2, 2), uniform(rng, dt, 48), float(rng.uniform(0.5, 2.0)), 40


def _ref_axpy_guard(x, y, a, n):
    xs, ys = x[:n], y[:n]
    ys[...] = np.where(xs < -1.0, -1.0 - OFFSET, a * xs + SCALE * ys + OFFSET)


# ---------------------------------------------------------------------------------------------------------------
# float arithmetic: + - * / // % (Python semantics for // and % on negative floats), unary minus


@gk.kernel
def arith_float(x, y, out):
    i = gk.tid()
    a = x[i]
    b = y[i]
    out[i, 0] = a + b
    out[i, 1] = a - b
    out[i, 2] = a * b
    out[i, 3] = a / b
    out[i, 4] = a // b
    out[i, 5] = a % b
    out[i, 6] = -a
    out[i, 7] = -(a // -b) + a % -b


def _make_arith_float(rng, dt):
    n = 48
    x, y = uniform(rng, dt, n, -5, 5), nonzero(rng, dt, n)
    x[::3] = rng.integers(-4, 5, n // 3)  # exact multiples: // and % on integral values, signed zeros
    y[::4] = rng.choice([-2.0, -1.0, 1.0, 2.0], n // 4)
    return x, y, uniform(rng, dt, (n, 8))


def _ref_arith_float(x, y, out):
    out[:, 0] = x + y
    out[:, 1] = x - y
    out[:, 2] = x * y
    out[:, 3] = x / y
    out[:, 4] = x // y
    out[:, 5] = x % y
    out[:, 6] = -x
    out[:, 7] = -(x // -y) + x % -y


# ---------------------------------------------------------------------------------------------------------------
# ** with a positive, a negative and a float exponent


@gk.kernel
def powers(x, y, out):
    i = gk.tid()
    a = x[i]
    b = y[i]
    out[i, 0] = a ** 3
    out[i, 1] = (a * a + 1.0) ** b
    out[i, 2] = a ** -2
    out[i, 3] = abs(b) ** 0.5


def _make_powers(rng, dt):
    n = 40
    return nonzero(rng, dt, n, 0.2, 4.0), nonzero(rng, dt, n), uniform(rng, dt, (n, 4))


def _ref_powers(x, y, out):
    out[:, 0] = x ** 3
    out[:, 1] = (x * x + 1.0) ** y
    out[:, 2] = x ** -2.0
    out[:, 3] = np.abs(y) ** 0.5


# ---------------------------------------------------------------------------------------------------------------
# integer arithmetic (int32/int64): // and % on negative ints, int ** int, int / int -> float


@gk.kernel
def arith_int(a, b, out, q):
    i = gk.tid()
    x = a[i]
    y = b[i]
    out[i, 0] = x + y
    out[i, 1] = x - y
    out[i, 2] = x * y
    out[i, 3] = x // y
    out[i, 4] = x % y
    out[i, 5] = -x
    out[i, 6] = x ** 2 + y ** 3
    out[i, 7] = (-x) // 7 + x % -5
    q[i] = x / y


def _make_arith_int(rng, dt):
    n = 48
    b = ints(rng, dt, n, 1, 10) * np.where(rng.integers(0, 2, n) == 0, -1, 1).astype(dt)
    return ints(rng, dt, n, -50, 51), b, ints(rng, dt, (n, 8), -9, 10), uniform(rng, np.float64, n)


def _ref_arith_int(a, b, out, q):
    x, y = a.astype(np.int64), b.astype(np.int64)
    out[:, 0] = x + y
    out[:, 1] = x - y
    out[:, 2] = x * y
    out[:, 3] = x // y
    out[:, 4] = x % y
    out[:, 5] = -x
    out[:, 6] = x ** 2 + y ** 3
    out[:, 7] = (-x) // 7 + x % -5
    q[:] = x / y


# ---------------------------------------------------------------------------------------------------------------
# comparisons (chained too), and/or/not, bool locals, conditional expressions


@gk.kernel
def compare_logic(x, y, out, n):
    i = gk.tid()
    a = x[i]
    b = y[i]
    inside = 0 < i < n - 1
    pos = a > 0.0
    r = 0.0
    if inside and (a <= b or not pos):
        r = 1.0
    if a == b or (a != b and b >= 2.0):
        r += 2.0
    if not inside:
        r += 4.0
    flag = pos and not b < -1.0
    out[i] = (a - b if flag else b * 2.0) + r


def _make_compare_logic(rng, dt):
    n = 48
    return ints(rng, dt, n, -3, 4), ints(rng, dt, n, -3, 4), uniform(rng, dt, n), n


def _ref_compare_logic(x, y, out, n):
    i = np.arange(x.size)
    inside = (0 < i) & (i < n - 1)
    pos = x > 0
    r = np.where(inside & ((x <= y) | ~pos), 1.0, 0.0)
    r = r + np.where((x == y) | ((x != y) & (y >= 2.0)), 2.0, 0.0)
    r = r + np.where(~inside, 4.0, 0.0)
    flag = pos & ~(y < -1.0)
    out[:] = np.where(flag, x - y, y * 2.0) + r.astype(x.dtype)


# ---------------------------------------------------------------------------------------------------------------
# augmented assignment to locals (float and int) and to array elements (float and int arrays)


@gk.kernel
def augassign(x, w, acc, cnt):
    i = gk.tid()
    s = x[i]
    s += 1.5
    s -= x[(i + 1) % x.shape[0]]
    s *= 2.0
    s /= w[i]
    m = i
    m += 2
    m *= 3
    m -= 1
    acc[i] += s
    acc[i] -= 0.25
    acc[i] *= 3.0
    acc[i] /= w[i]
    cnt[i] += m
    cnt[i] -= 4
    cnt[i] *= 2


def _make_augassign(rng, dt):
    n = 40
    return uniform(rng, dt, n), nonzero(rng, dt, n), uniform(rng, dt, n), ints(rng, np.int64, n, -100, 100)


def _ref_augassign(x, w, acc, cnt):
    i = np.arange(x.size)
    s = ((x + 1.5) - np.roll(x, -1)) * 2.0 / w
    acc[:] = (((acc + s) - 0.25) * 3.0) / w
    cnt[:] = ((cnt + ((i + 2) * 3 - 1)) - 4) * 2


# ---------------------------------------------------------------------------------------------------------------
# if / elif / else


@gk.kernel
def piecewise(x, out, lo, hi):
    i = gk.tid()
    v = x[i]
    if v < lo:
        out[i] = lo - v * v
    elif v < 0.0:
        out[i] = 2.0 * v
    elif v <= hi:
        out[i] = v * v * v
    else:
        out[i] = hi + (v - hi) / 2.0


def _make_piecewise(rng, dt):
    x = uniform(rng, dt, 50, -3, 3)
    x.flags.writeable = False  # a read-only input
    return x, uniform(rng, dt, 50), -1.0, 1.25


def _ref_piecewise(x, out, lo, hi):
    out[:] = np.select([x < lo, x < 0.0, x <= hi], [lo - x * x, 2.0 * x, x * x * x], hi + (x - hi) / 2.0)


# ---------------------------------------------------------------------------------------------------------------
# loops whose bounds depend on the thread index, range with one argument, negative step; strided 1-D input


@gk.kernel
def prefix_suffix(x, pre, suf):
    i = gk.tid()
    n = x.shape[0]
    s = 0.0
    for k in range(i + 1):
        s += x[k]
    pre[i] = s
    t = 0.0
    for k in range(n - 1, i - 1, -1):
        t = t * 0.5 + x[k]
    suf[i] = t


def _make_prefix_suffix(rng, dt):
    x = uniform(rng, dt, 3 * 40)[::3]  # a 1-D view with stride 3
    return x, uniform(rng, dt, 40), uniform(rng, dt, 40)


def _ref_prefix_suffix(x, pre, suf):
    n = x.size
    pre[:] = np.cumsum(x)
    k = np.arange(n)
    weights = np.where(k[None, :] >= k[:, None], 0.5 ** (k[None, :] - k[:, None]).clip(0), 0.0)
    suf[:] = weights @ x.astype(np.float64)


# ---------------------------------------------------------------------------------------------------------------
# range(i + 1, m) with a run-time bound, 2-D array


@gk.kernel
def upper_tri(a, b, out, m):
    i = gk.tid()
    s = a[i, i] * b[i]
    for k in range(i + 1, m):
        s += a[i, k] * b[k]
    out[i] = s


def _make_upper_tri(rng, dt):
    return uniform(rng, dt, (20, 28)), uniform(rng, dt, 28), uniform(rng, dt, 20), 28


def _ref_upper_tri(a, b, out, m):
    out[:] = np.triu(a.astype(np.float64)) @ b.astype(np.float64)


# ---------------------------------------------------------------------------------------------------------------
# range with three run-time arguments (positive and negative step), a static range over a global constant


@gk.kernel
def strided_loop(x, out, step):
    i = gk.tid()
    s = 0.0
    for k in range(i % step, x.shape[0], step):
        s += x[k]
    t = 0.0
    for k in range(x.shape[0] - 1 - i % step, -1, -step):
        t = t + x[k] * 0.5
    c = 0
    for k in range(NTAPS):
        c += k
    out[i] = s + c - t


def _make_strided_loop(rng, dt):
    return uniform(rng, dt, 45), uniform(rng, dt, 45), 4


def _ref_strided_loop(x, out, step):
    n = x.size
    x64 = x.astype(np.float64)
    out[:] = [x64[i % step::step].sum() + 6 - 0.5 * x64[n - 1 - i % step::-step].sum() for i in range(n)]


# ---------------------------------------------------------------------------------------------------------------
# flattened indexing a[i * n + j] with a run-time n, nested loops, min() in a loop bound


@gk.kernel
def matvec_flat(a, x, y, n):
    i = gk.tid()
    acc = 0.0
    for jb in range(0, n, BLOCK):
        for j in range(jb, min(jb + BLOCK, n)):
            acc += a[i * n + j] * x[j]
    y[i] = acc


def _make_matvec_flat(rng, dt):
    rows, n = 9, 7
    return uniform(rng, dt, rows * n), uniform(rng, dt, n), uniform(rng, dt, rows), n


def _ref_matvec_flat(a, x, y, n):
    y[:] = a.astype(np.float64).reshape(-1, n) @ x.astype(np.float64)


# ---------------------------------------------------------------------------------------------------------------
# 2-D tid, a transposed (Fortran-order) input and a strided output view


@gk.kernel
def matmul(a, b, c):
    i, j = gk.tid()
    s = 0.0
    for k in range(a.shape[1]):
        s += a[i, k] * b[k, j]
    c[i, j] = s


def _make_matmul(rng, dt):
    a = uniform(rng, dt, (12, 9))
    b = uniform(rng, dt, (10, 9)).T  # (9, 10), transposed
    c = uniform(rng, dt, (24, 20))[::2, ::2]  # (12, 10), strided
    return a, b, c


def _ref_matmul(a, b, c):
    c[...] = a.astype(np.float64) @ b.astype(np.float64)


# ---------------------------------------------------------------------------------------------------------------
# a 2-D stencil on a sliced-with-step input, written into a reversed (negative-stride) view


@gk.kernel
def laplace_strided(u, out):
    i, j = gk.tid()
    nx = u.shape[0]
    ny = u.shape[1]
    if i == 0 or j == 0 or i == nx - 1 or j == ny - 1:
        out[i, j] = u[i, j]
    else:
        out[i, j] = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]


def _make_laplace_strided(rng, dt):
    u = uniform(rng, dt, (20, 36))[::2, ::3]  # (10, 12)
    out = uniform(rng, dt, (10, 12))[::-1, :]
    return u, out


def _ref_laplace_strided(u, out):
    out[...] = u
    out[1:-1, 1:-1] = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1]


# ---------------------------------------------------------------------------------------------------------------
# 3-D tid, a transposed 3-D input, periodic neighbours via %, x.shape[2]


@gk.kernel
def smooth3d(a, w, out):
    i, j, k = gk.tid()
    nk = a.shape[2]
    left = a[i, j, (k + nk - 1) % nk]
    right = a[i, j, (k + 1) % nk]
    out[i, j, k] = w[k] * a[i, j, k] + 0.25 * (left + right) - a[i, j, k] * (i - j)


def _make_smooth3d(rng, dt):
    a = uniform(rng, dt, (6, 4, 5)).transpose(1, 2, 0)  # (4, 5, 6)
    return a, uniform(rng, dt, 6), uniform(rng, dt, (4, 5, 6))


def _ref_smooth3d(a, w, out):
    i, j, _ = np.indices(a.shape)
    out[...] = w * a + 0.25 * (np.roll(a, 1, axis=2) + np.roll(a, -1, axis=2)) - a * (i - j).astype(a.dtype)


# ---------------------------------------------------------------------------------------------------------------
# 3-D integer arrays (one a strided view), int abs/min/max, // and % with negative operands


@gk.kernel
def int_grid3d(a, out):
    i, j, k = gk.tid()
    v = a[i, j, k]
    out[i, j, k] = v * (i - j) // 3 + (v - k) % 4 - abs(v - 5) + max(v, j) - min(v, -k)


def _make_int_grid3d(rng, dt):
    a = ints(rng, dt, (4, 10, 3), -20, 21)[:, ::2, :]  # (4, 5, 3), strided
    out = ints(rng, dt, (3, 5, 4), -9, 10).transpose(2, 1, 0)  # (4, 5, 3), transposed
    return a, out


def _ref_int_grid3d(a, out):
    i, j, k = np.indices(a.shape)
    v = a.astype(np.int64)
    out[...] = v * (i - j) // 3 + (v - k) % 4 - np.abs(v - 5) + np.maximum(v, j) - np.minimum(v, -k)


# ---------------------------------------------------------------------------------------------------------------
# gk.atomic_add with repeated indices: a histogram, integer counts, a 2-D index


@gk.kernel
def histogram(idx, w, hist, counts, grid):
    i = gk.tid()
    b = idx[i]
    gk.atomic_add(hist, b, w[i])
    gk.atomic_add(counts, b, 1)
    gk.atomic_add(grid, (b % 3, i % 2), w[i] * 2.0)


def _make_histogram(rng, dt):
    n = 48
    return (ints(rng, np.int32, n, 0, 6), uniform(rng, dt, n), uniform(rng, dt, 6),
            ints(rng, np.int64, 6, 0, 10), uniform(rng, dt, (3, 2)))


def _ref_histogram(idx, w, hist, counts, grid):
    np.add.at(hist, idx, w)
    np.add.at(counts, idx, 1)
    np.add.at(grid, (idx % 3, np.arange(idx.size) % 2), w * 2.0)


# ---------------------------------------------------------------------------------------------------------------
# elementary functions through math.* and builtins


@gk.kernel
def math_funcs(x, y, out):
    i = gk.tid()
    a = x[i]
    b = y[i]
    out[i, 0] = math.sin(a)
    out[i, 1] = math.cos(a)
    out[i, 2] = math.tan(a)
    out[i, 3] = math.exp(a)
    out[i, 4] = math.log(b)
    out[i, 5] = math.sqrt(b)
    out[i, 6] = math.tanh(a)
    out[i, 7] = math.fabs(a) + abs(-b)
    out[i, 8] = min(a, b)
    out[i, 9] = max(a, b, 0.5)
    out[i, 10] = math.pow(b, a)
    out[i, 11] = math.floor(a * 3.0)


def _make_funcs(rng, dt):
    n = 40
    return uniform(rng, dt, n, -1.5, 1.5), uniform(rng, dt, n, 0.1, 3.0), uniform(rng, dt, (n, 12))


def _ref_math_funcs(x, y, out):
    out[:, 0] = np.sin(x)
    out[:, 1] = np.cos(x)
    out[:, 2] = np.tan(x)
    out[:, 3] = np.exp(x)
    out[:, 4] = np.log(y)
    out[:, 5] = np.sqrt(y)
    out[:, 6] = np.tanh(x)
    out[:, 7] = np.abs(x) + np.abs(-y)
    out[:, 8] = np.minimum(x, y)
    out[:, 9] = np.maximum(np.maximum(x, y), 0.5)
    out[:, 10] = np.power(y, x)
    out[:, 11] = np.floor(x * 3.0)


# ---------------------------------------------------------------------------------------------------------------
# elementary functions through gk.*


@gk.kernel
def gk_funcs(x, y, out):
    i = gk.tid()
    a = x[i]
    b = y[i]
    out[i, 0] = gk.sin(a) * gk.cos(b)
    out[i, 1] = gk.tan(a * 0.5) * gk.tanh(b)
    out[i, 2] = gk.exp(-gk.abs(a))
    out[i, 3] = gk.log(b) * gk.sqrt(b)
    out[i, 4] = gk.min(a, b) - gk.max(a, -b)
    out[i, 5] = gk.pow(b, 1.5) + gk.pow(b, 2)
    out[i, 6] = gk.floor(a) + gk.floor(b * 2.0)
    out[i, 7] = gk.sqrt(gk.exp(a) + gk.abs(b))


def _ref_gk_funcs(x, y, out):
    out[:, 0] = np.sin(x) * np.cos(y)
    out[:, 1] = np.tan(x * 0.5) * np.tanh(y)
    out[:, 2] = np.exp(-np.abs(x))
    out[:, 3] = np.log(y) * np.sqrt(y)
    out[:, 4] = np.minimum(x, y) - np.maximum(x, -y)
    out[:, 5] = np.power(y, 1.5) + y * y
    out[:, 6] = np.floor(x) + np.floor(y * 2.0)
    out[:, 7] = np.sqrt(np.exp(x) + np.abs(y))


def _make_gk_funcs(rng, dt):
    x, y, _ = _make_funcs(rng, dt)
    return x, y, uniform(rng, dt, (x.size, 8))


# ---------------------------------------------------------------------------------------------------------------
# int() (truncation toward zero) and float() casts, NumPy casts, an int32 local, mixed int/float arrays


@gk.kernel
def casts(x, k, fout, iout):
    i = gk.tid()
    t = int(x[i] * 4.0)
    f = float(k[i])
    small = np.int32(k[i] * 3)
    fout[i] = f / 3.0 + t + float(i)
    iout[i] = t * 2 + small + int(f * 0.5) + int(-2.5)


def _make_casts(rng, dt):
    n = 40
    return uniform(rng, dt, n, -3, 3), ints(rng, np.int32, n, -20, 21), uniform(rng, dt, n), \
        ints(rng, np.int64, n, -5, 5)


def _ref_casts(x, k, fout, iout):
    dt = x.dtype
    t = np.trunc(x * 4.0).astype(np.int64)
    f = k.astype(dt)
    fout[:] = f / 3.0 + t.astype(dt) + np.arange(x.size).astype(dt)
    iout[:] = t * 2 + (k * 3).astype(np.int32) + np.trunc(f * 0.5).astype(np.int64) - 2


# ---------------------------------------------------------------------------------------------------------------
# @gk.func device functions: an early return, one calling another, one taking an array


@gk.func
def clamp(v, lo, hi):
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


@gk.func
def smoothstep(e0, e1, v):
    t = clamp((v - e0) / (e1 - e0), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


@gk.func
def neighbour_mean(a, i):
    n = a.shape[0]
    return (a[(i + n - 1) % n] + a[i] + a[(i + 1) % n]) / 3.0


@gk.kernel
def device_calls(x, out):
    i = gk.tid()
    m = neighbour_mean(x, i)
    s = smoothstep(-1.0, 1.0, m)
    out[i] = s + clamp(x[i], -0.5, 0.5)


def _make_device_calls(rng, dt):
    return uniform(rng, dt, 44, -2.5, 2.5), uniform(rng, dt, 44)


def _ref_device_calls(x, out):
    m = (np.roll(x, 1) + x + np.roll(x, -1)) / 3.0
    t = np.clip((m - -1.0) / (1.0 - -1.0), 0.0, 1.0)
    out[:] = t * t * (3.0 - 2.0 * t) + np.clip(x, -0.5, 0.5)


# ---------------------------------------------------------------------------------------------------------------
# while loops: a float one and an integer one (Collatz)


@gk.kernel
def while_halving(x, out, steps):
    i = gk.tid()
    v = abs(x[i]) * 10.0 + 1.0
    c = 0
    while v > 1.0:
        v = v * 0.5
        c += 1
    out[i] = v
    steps[i] = c


def _make_while_halving(rng, dt):
    return uniform(rng, dt, 40, -3, 3), uniform(rng, dt, 40), ints(rng, np.int64, 40, -5, 5)


def _ref_while_halving(x, out, steps):
    v = np.abs(x) * 10.0 + 1.0
    c = np.zeros(x.size, np.int64)
    while (mask := v > 1.0).any():
        v[mask] *= 0.5
        c[mask] += 1
    out[:] = v
    steps[:] = c


@gk.kernel
def collatz(a, steps):
    i = gk.tid()
    n = a[i]
    c = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        c += 1
    steps[i] = c


def _make_collatz(rng, dt):
    return ints(rng, dt, 48, 1, 61), ints(rng, dt, 48, -5, 5)


def _ref_collatz(a, steps):
    n = a.astype(np.int64)
    c = np.zeros(a.size, np.int64)
    while (mask := n != 1).any():
        n = np.where(mask, np.where(n % 2 == 0, n // 2, 3 * n + 1), n)
        c += mask
    steps[:] = c


# ---------------------------------------------------------------------------------------------------------------
# reassigned locals (one widened from int to float), tuple swap


@gk.kernel
def reassign(x, y, out):
    i = gk.tid()
    v = i
    v = v * 2 + 1
    w = x[i]
    w = w * w - v
    a = w
    b = y[i]
    if a > b:
        a, b = b, a
    v = a * 3.0
    out[i, 0] = w
    out[i, 1] = b - a
    out[i, 2] = v


def _make_reassign(rng, dt):
    return uniform(rng, dt, 40, -8, 8), uniform(rng, dt, 40, -20, 60), uniform(rng, dt, (40, 3))


def _ref_reassign(x, y, out):
    v = (np.arange(x.size) * 2 + 1).astype(x.dtype)
    w = x * x - v
    a, b = np.minimum(w, y), np.maximum(w, y)
    out[:, 0] = w
    out[:, 1] = b - a
    out[:, 2] = a * 3.0


# ---------------------------------------------------------------------------------------------------------------
# NumPy scalar arguments of every scalar type (float of the case's dtype, int32, int64, bool)


@gk.kernel
def scalar_params(x, out, s, k32, k64, flag):
    i = gk.tid()
    base = x[i] * s
    if flag and i % 3 != 0:
        base = base + k32 * k64
    else:
        base = base - k32
    neg = not flag
    odd = i % 2 == 1
    out[i] = -base if odd and not neg else base


def _make_scalar_params(rng, dt):
    return uniform(rng, dt, 42), uniform(rng, dt, 42), np.dtype(dt).type(1.25), np.int32(-3), np.int64(7), \
        np.bool_(True)


def _ref_scalar_params(x, out, s, k32, k64, flag):
    i = np.arange(x.size)
    base = x * s
    base = np.where(flag & (i % 3 != 0), base + x.dtype.type(int(k32) * int(k64)), base - x.dtype.type(k32))
    out[:] = np.where((i % 2 == 1) & bool(flag), -base, base)


# ---------------------------------------------------------------------------------------------------------------
# 2-D launch domain larger than the arrays, guarded by x.shape; a strongly typed NumPy global constant;
# a broadcast (zero-stride) input


@gk.kernel
def guard2d(a, out):
    i, j = gk.tid()
    if i >= a.shape[0] or j >= a.shape[1]:
        return
    out[i, j] = a[i, j] * HALF32 + out[i, j]


def _make_guard2d(rng, dt):
    a = np.broadcast_to(uniform(rng, dt, 13), (10, 13))  # zero stride along axis 0, read-only
    return a, uniform(rng, dt, (10, 13))


def _ref_guard2d(a, out):
    out += a * 0.5


# ---------------------------------------------------------------------------------------------------------------
# scalar parameters reassigned in the kernel body: each thread starts from the launch value


@gk.kernel
def param_update(x, out, a, n):
    i = gk.tid()
    a = a * 2.0
    n -= 1
    out[i] = x[i] * a + n


def _make_param_update(rng, dt):
    return uniform(rng, dt, 40), uniform(rng, dt, 40), float(rng.uniform(0.5, 2.0)), 7


def _ref_param_update(x, out, a, n):
    out[:] = x * (x.dtype.type(a) * 2.0) + (n - 1)


# ---------------------------------------------------------------------------------------------------------------
# while loops with compound conditions: binary search, and a linear search whose 'and' guards the read


@gk.kernel
def searchsorted(xs, q, pos):
    i = gk.tid()
    v = q[i]
    lo = 0
    hi = xs.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if xs[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    k = 0
    while k < xs.shape[0] and xs[k] < v:
        k += 1
    pos[i, 0] = lo
    pos[i, 1] = k


def _make_searchsorted(rng, dt):
    xs = np.sort(uniform(rng, dt, 30, -2, 2))
    q = uniform(rng, dt, 36, -2.5, 2.5)
    q[::6] = xs[::5]  # queries equal to table entries
    return xs, q, ints(rng, np.int64, (36, 2), -50, -1)


def _ref_searchsorted(xs, q, pos):
    pos[:, 0] = np.searchsorted(xs, q, side="left")
    pos[:, 1] = np.searchsorted(xs, q, side="left")


# ---------------------------------------------------------------------------------------------------------------
# locals and parameters whose names are those of modules a backend might use (np, math)


@gk.kernel
def shadowing_names(x, out, math):
    i = gk.tid()
    np = x.shape[0]
    out[i] = gk.floor(x[i] * 2.0) + gk.sqrt(gk.abs(x[i])) * math + np


def _make_shadowing_names(rng, dt):
    return uniform(rng, dt, 40, -3, 3), uniform(rng, dt, 40), 1.5


def _ref_shadowing_names(x, out, scale):
    out[:] = np.floor(x * 2.0) + np.sqrt(np.abs(x)) * scale + x.shape[0]


# ---------------------------------------------------------------------------------------------------------------
# the functions of issue 19 (inverse and hyperbolic trigonometry, erf, expm1, log1p, atan2, hypot, copysign,
# fmod), gk.clamp and np.clip, gk.sign and np.sign, in gk., math. and np. spellings


@gk.kernel
def special_functions(x, y, out):
    i = gk.tid()
    u = x[i]
    v = y[i]
    out[i, 0] = gk.asin(u * 0.5) + math.acos(u * 0.4) + np.arctan(u * 3.0)
    out[i, 1] = gk.sinh(u) * math.cosh(v) + np.arcsinh(u * 4.0)
    out[i, 2] = gk.acosh(abs(v) + 2.0) + math.atanh(u * 0.3)
    out[i, 3] = gk.erf(u * 2.0) + math.expm1(v) + np.log1p(u * 0.5)
    out[i, 4] = gk.atan2(u, v) + math.hypot(u, v)
    out[i, 5] = gk.copysign(u, v) + np.fmod(u * 7.0, v)
    out[i, 6] = gk.clamp(u, -0.3, 0.4) + np.clip(v, -0.5, 0.2) * gk.sign(u) + np.sign(v - 0.1)


def _make_special_functions(rng, dt):
    n = 40
    return uniform(rng, dt, n, -0.9, 0.9), nonzero(rng, dt, n, 0.3, 1.5), uniform(rng, dt, (n, 7))


def _ref_special_functions(x, y, out):
    erf = np.vectorize(math.erf)
    out[:, 0] = np.arcsin(x * 0.5) + np.arccos(x * 0.4) + np.arctan(x * 3.0)
    out[:, 1] = np.sinh(x) * np.cosh(y) + np.arcsinh(x * 4.0)
    out[:, 2] = np.arccosh(np.abs(y) + 2.0) + np.arctanh(x * 0.3)
    out[:, 3] = erf(x * 2.0) + np.expm1(y) + np.log1p(x * 0.5)
    out[:, 4] = np.arctan2(x, y) + np.hypot(x, y)
    out[:, 5] = np.copysign(x, y) + np.fmod(x * 7.0, y)
    out[:, 6] = np.clip(x, -0.3, 0.4) + np.clip(y, -0.5, 0.2) * np.sign(x) + np.sign(y - 0.1)


# ---------------------------------------------------------------------------------------------------------------
# bitwise operators on integers: in guards (red-black parity, cell flags), in an index (a neighbour by xor),
# shifts (by amounts outside [0, 64) too: 0 or the sign), ~, on int32 and int64 and on bools


@gk.kernel
def bitwise(x, flags, out, colour, amount):
    i = gk.tid()
    f = flags[i]
    parity = (i & 1) ^ colour
    v = x[i]
    if parity == 1 and (f & 4) != 0:
        v = v * 2.0
    fluid = (f & 1) == 1
    wall = (f >> 1 & 1) == 1
    if fluid & ~wall | (fluid ^ wall) and not wall:
        v = v + x[i ^ 1]
    out[i, 0] = v
    out[i, 1] = (f << 3) | (f >> 1) ^ ~f
    out[i, 2] = (f << amount) + (f >> amount) + (-f >> amount)
    out[i, 3] = ~(i < 3)


def _make_bitwise(rng, dt):
    n = 40
    return uniform(rng, dt, n), rng.integers(-64, 64, n).astype(np.int32), uniform(rng, dt, (n, 4)), 1, 0


def _ref_bitwise(x, flags, out, colour, amount):
    i = np.arange(x.size)
    f = flags.astype(np.int64)
    v = np.where(((i & 1) ^ colour == 1) & (f & 4 != 0), x * 2.0, x)
    fluid, wall = (f & 1) == 1, (f >> 1 & 1) == 1
    out[:, 0] = np.where((fluid & ~wall | (fluid ^ wall)) & ~wall, v + x[i ^ 1], v)
    out[:, 1] = (f << 3) | (f >> 1) ^ ~f
    out[:, 2] = (f << amount) + (f >> amount) + (-f >> amount)
    out[:, 3] = np.where(i < 3, -2, -1)


# ---------------------------------------------------------------------------------------------------------------
# small vectors (gk.vec3 and friends, scalarised by the frontend): arrays of vectors as a trailing dimension,
# arithmetic with vectors and numbers, dot, cross, length, normalize, components read and written, a swap that
# reads every old component first, a conditional vector expression


@gk.kernel
def vectors(a, b, out):
    i = gk.tid()
    u = gk.load_vec3(a, i)
    v = gk.load_vec3(b, i)
    w = gk.cross(u + v, u) * 2.0 - v / 3.0
    n = gk.normalize(w)
    n.y = n.y * 1.5
    u = gk.vec3(u.y, u.x, u[2])
    out[i, 3] = gk.length(w) + gk.dot(n, u) + w.x * n[2]
    gk.store_vec3(out, i, gk.vec3(out[i, 3], u.z, -n.x) if u.x > 0.0 else w)


def _make_vectors(rng, dt):
    n = 40
    return uniform(rng, dt, (n, 3)), uniform(rng, dt, (n, 3)), uniform(rng, dt, (n, 4))


def _ref_vectors(a, b, out):
    u, v = a.copy(), b.copy()
    w = np.cross(u + v, u) * 2.0 - v / 3.0
    n = w / np.sqrt((w * w).sum(1))[:, None]
    n[:, 1] *= 1.5
    u = u[:, [1, 0, 2]]
    out[:, 3] = np.sqrt((w * w).sum(1)) + (n * u).sum(1) + w[:, 0] * n[:, 2]
    out[:, :3] = np.where((u[:, 0] > 0)[:, None], np.stack([out[:, 3], u[:, 2], -n[:, 0]], 1), w)


# ---------------------------------------------------------------------------------------------------------------
# local arrays and constant tables (frontend/unroll.py): a 1-D and a 2-D gk.local, a table of (offset, weight)
# rows indexed by the variable of an unrolled loop and by constants, len() of both, a break inside an unrolled loop;
# no dtype given: the elements follow what is stored (float32 stays float32)


STENCIL = ((-1, 0.25), (0, 0.5), (1, 0.25))


@gk.kernel
def local_tables(x, out):
    i = gk.tid()
    n = x.shape[0]
    h = gk.local((3,))
    for k in range(len(STENCIL)):
        h[k] = STENCIL[k][1] * x[(i + STENCIL[k][0] + n) % n]
    m = gk.local((2, 2))
    m[0, 0] = h[0] + h[1]
    m[1][1] = h[2] * STENCIL[2, 1]
    m[0, 1] = m[0, 0] * m[1, 1]
    acc = 0.0
    for a in range(2):
        for b in range(2):
            acc += m[a, b] * (a + 2 * b + 1)
    out[i, 0] = acc
    out[i, 1] = h[len(h) - 1] - h[0]
    first = -1.0
    for q in range(3):
        if h[q] > 0.1:
            first = h[q] * (q + 1)
            break
    out[i, 2] = first


def _make_local_tables(rng, dt):
    return uniform(rng, dt, 30), uniform(rng, dt, (30, 3))


def _ref_local_tables(x, out):
    h = np.stack([w * np.roll(x, -o) for o, w in STENCIL], 1)
    m00, m11 = h[:, 0] + h[:, 1], h[:, 2] * 0.25
    m01 = m00 * m11
    out[:, 0] = m00 * 1 + m01 * 3 + m11 * 4
    out[:, 1] = h[:, 2] - h[:, 0]
    first = np.full(x.shape, -1.0)
    for q in (2, 1, 0):  # the first q with h > 0.1 wins
        first = np.where(h[:, q] > 0.1, h[:, q] * (q + 1), first)
    out[:, 2] = first


# break and continue in a run-time-bounded for loop, a nested loop's break leaving the outer one running, for-else,
# and a while loop left by break


@gk.kernel
def break_continue(x, out, n):
    i = gk.tid()
    s = 0.0
    count = 0
    for k in range(n):
        v = x[i] * (k + 1)
        if v < -1.5:
            continue
        s += v
        count += 1
        if s > 2.0:
            break
    inner = 0.0
    for a in range(3):
        for b in range(n):
            if b > a:
                break
            inner += x[i] * (a - b)
    for k in range(n):
        if x[i] * k > 1.0:
            break
    else:
        inner += 100.0
    t = x[i]
    m = 0
    while m < 20:
        m += 1
        if t > 5.0:
            break
        t = t * 1.5 + 1.0
    out[i, 0] = s
    out[i, 1] = count
    out[i, 2] = inner
    out[i, 3] = t + m


def _make_break_continue(rng, dt):
    return uniform(rng, dt, 40, -1.0, 1.0), uniform(rng, dt, (40, 4)), 6


def _ref_break_continue(x, out, n):
    for i, xv in enumerate(x.astype(np.float64)):
        s, count = 0.0, 0
        for k in range(n):
            v = xv * (k + 1)
            if v < -1.5:
                continue
            s += v
            count += 1
            if s > 2.0:
                break
        inner = 0.0
        for a in range(3):
            for b in range(n):
                if b > a:
                    break
                inner += xv * (a - b)
        if not any(xv * k > 1.0 for k in range(n)):
            inner += 100.0
        t, m = xv, 0
        while m < 20:
            m += 1
            if t > 5.0:
                break
            t = t * 1.5 + 1.0
        out[i] = s, count, inner, t + m


# ---------------------------------------------------------------------------------------------------------------


def _first_size(args):
    return args[0].shape[0]


CORPUS: tuple[Case, ...] = (
    Case("axpy_guard", axpy_guard, _make_axpy_guard, lambda a: a[3] + 12, _ref_axpy_guard, (1,), exact=True),
    Case("arith_float", arith_float, _make_arith_float, _first_size, _ref_arith_float, (2,), exact=True),
    Case("powers", powers, _make_powers, _first_size, _ref_powers, (2,), transcendental=True),
    Case("bitwise", bitwise, _make_bitwise, _first_size, _ref_bitwise, (2,), exact=True),
    # float64 only: its cross products cancel, so float32 results have no relative-error bound (test_vectors.py
    # checks float32 with an absolute one)
    Case("vectors", vectors, _make_vectors, _first_size, _ref_vectors, (2,), dtypes=(np.float64,), transcendental=True),
    Case("local_tables", local_tables, _make_local_tables, _first_size, _ref_local_tables, (1,)),
    Case("break_continue", break_continue, _make_break_continue, _first_size, _ref_break_continue, (1,)),
    Case("special_functions", special_functions, _make_special_functions, _first_size, _ref_special_functions, (2,),
         transcendental=True),
    Case("arith_int", arith_int, _make_arith_int, _first_size, _ref_arith_int, (2, 3), dtypes=INTS, exact=True),
    Case("compare_logic", compare_logic, _make_compare_logic, _first_size, _ref_compare_logic, (2,), exact=True),
    Case("augassign", augassign, _make_augassign, lambda a: (a[0].size,), _ref_augassign, (2, 3), exact=True),
    Case("piecewise", piecewise, _make_piecewise, _first_size, _ref_piecewise, (1,), exact=True),
    Case("prefix_suffix", prefix_suffix, _make_prefix_suffix, _first_size, _ref_prefix_suffix, (1, 2),
         reduction=True, noncontiguous=(0,)),
    Case("upper_tri", upper_tri, _make_upper_tri, _first_size, _ref_upper_tri, (2,), reduction=True),
    Case("strided_loop", strided_loop, _make_strided_loop, _first_size, _ref_strided_loop, (1,), reduction=True),
    Case("matvec_flat", matvec_flat, _make_matvec_flat, lambda a: a[2].size, _ref_matvec_flat, (2,),
         reduction=True),
    Case("matmul", matmul, _make_matmul, lambda a: a[2].shape, _ref_matmul, (2,), reduction=True,
         noncontiguous=(1, 2)),
    Case("laplace_strided", laplace_strided, _make_laplace_strided, lambda a: a[0].shape, _ref_laplace_strided,
         (1,), noncontiguous=(0, 1), exact=True),
    Case("smooth3d", smooth3d, _make_smooth3d, lambda a: a[0].shape, _ref_smooth3d, (2,),
         noncontiguous=(0,), exact=True),
    Case("int_grid3d", int_grid3d, _make_int_grid3d, lambda a: a[0].shape, _ref_int_grid3d, (1,), dtypes=INTS,
         noncontiguous=(0, 1), exact=True),
    # parallel atomic adds have no defined order (on the CPU, per-chunk partial sums): floats to rounding
    Case("histogram", histogram, _make_histogram, _first_size, _ref_histogram, (2, 3, 4), reduction=True),
    Case("math_funcs", math_funcs, _make_funcs, _first_size, _ref_math_funcs, (2,), transcendental=True),
    Case("gk_funcs", gk_funcs, _make_gk_funcs, _first_size, _ref_gk_funcs, (2,), transcendental=True),
    Case("casts", casts, _make_casts, _first_size, _ref_casts, (2, 3), exact=True),
    Case("device_calls", device_calls, _make_device_calls, _first_size, _ref_device_calls, (1,), exact=True),
    Case("while_halving", while_halving, _make_while_halving, _first_size, _ref_while_halving, (1, 2), exact=True),
    Case("collatz", collatz, _make_collatz, _first_size, _ref_collatz, (1,), dtypes=INTS, exact=True),
    Case("reassign", reassign, _make_reassign, _first_size, _ref_reassign, (2,), exact=True),
    Case("scalar_params", scalar_params, _make_scalar_params, _first_size, _ref_scalar_params, (1,), exact=True),
    Case("guard2d", guard2d, _make_guard2d, lambda a: (a[0].shape[0] + 3, a[0].shape[1] + 5), _ref_guard2d, (1,),
         exact=True, noncontiguous=(0,)),
    Case("param_update", param_update, _make_param_update, _first_size, _ref_param_update, (1,), exact=True),
    Case("searchsorted", searchsorted, _make_searchsorted, lambda a: a[1].size, _ref_searchsorted, (2,),
         exact=True),
    Case("shadowing_names", shadowing_names, _make_shadowing_names, _first_size, _ref_shadowing_names, (1,),
         exact=True),
)


# Kernels shared by several test modules (race analysis, reverse mode, the HPC sweep).


@gk.kernel
def lu_update(A, k):
    i, j = gk.tid()
    if i > k and j > k:
        A[i, j] -= A[i, k] * A[k, j] / A[k, k]


@gk.kernel
def correlation_mirror(s, data, m, n):
    j1 = gk.tid()
    if j1 < m:
        s[j1 * m + j1] = 1.0
        for j2 in range(j1 + 1, m):
            acc = 0.0
            for r in range(n):
                acc += data[r * m + j1] * data[r * m + j2]
            s[j1 * m + j2] = acc
            s[j2 * m + j1] = s[j1 * m + j2]


@gk.kernel
def gemm_flat(c, A, B, n, alpha, beta):
    i = gk.tid()
    for j in range(n):
        c[i * n + j] *= beta
        for k in range(n):
            c[i * n + j] += alpha * A[i * n + k] * B[k * n + j]


@gk.kernel
def syrk(C, A, alpha, beta, m):
    i, j = gk.tid()
    if j <= i:
        C[i, j] *= beta
        for k in range(m):
            C[i, j] += alpha * A[i, k] * A[j, k]
