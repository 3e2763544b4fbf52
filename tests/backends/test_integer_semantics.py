"""The kernel language's integer arithmetic is NumPy's, on every backend (docs/language.md#integer-arithmetic):
`//` and `%` floor (the remainder takes the divisor's sign), `x // 0` and `x % 0` are 0, `INT64_MIN // -1` is
INT64_MIN (the negation wraps) and `x % -1` is 0, and `+ - *` wrap around in the operands' width (int32 in
int32). The interpreter, the compiled CPU backend and hostcuda (the CUDA backend's C) are each compared, bit
for bit, with NumPy's result on operand pairs that reach every edge."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import gradkern as gk
from gradkern.backends.hostcuda import compiler

BACKENDS = ["interp", "numba",
            pytest.param("hostcuda", marks=pytest.mark.skipif(compiler() is None, reason="g++ is not on the PATH"))]


@gk.kernel
def integer_ops(a, b, q, r, p, s, d, qm, rm):
    i = gk.tid()
    q[i] = a[i] // b[i]
    r[i] = a[i] % b[i]
    p[i] = a[i] * b[i]
    s[i] = a[i] + b[i]
    d[i] = a[i] - b[i]
    qm[i] = a[i] // -1  # a constant divisor: printed apart from a run-time one (backends/numba_syntax.py)
    rm[i] = a[i] % -1


@gk.kernel
def divide_by_scalar(a, q, r, m):
    i = gk.tid()
    q[i] = a[i] // m
    r[i] = a[i] % m


def _operands(dtype) -> tuple[np.ndarray, np.ndarray]:
    info = np.iinfo(dtype)
    edges = [info.min, info.min + 1, -(2 ** (info.bits // 2)) - 3, -7, -3, -1, 0, 1, 3, 7, 2 ** (info.bits // 2) + 5,
             info.max - 1, info.max]
    pairs = np.array(list(itertools.product(edges, repeat=2)), dtype=dtype)
    return pairs[:, 0].copy(), pairs[:, 1].copy()


def _numpy(a, b):
    with np.errstate(all="ignore"):  # NumPy's values for x // 0, x % 0 and INT_MIN // -1, without its warnings
        return [a // b, a % b, a * b, a + b, a - b, a // a.dtype.type(-1), a % a.dtype.type(-1)]


def _on(backend: str) -> dict:
    return {} if backend == "numba" else {"backend": backend}


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_arithmetic_is_numpys_at_every_edge(backend, dtype):
    a, b = _operands(dtype)
    outs = [np.full(a.size, 12345, dtype=dtype) for _ in range(7)]
    gk.launch(integer_ops, a.size, a, b, *outs, **_on(backend))
    for name, got, want in zip(("//", "%", "*", "+", "-", "// -1", "% -1"), outs, _numpy(a, b)):
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (backend, name, [(int(a[k]), int(b[k]), int(got[k]), int(want[k])) for k in bad[:6]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_int64_min_floor_divided_by_a_run_time_minus_one_is_int64_min(backend):
    """The compiled CPU backend gave 0 (Numba's INT64_MIN // -1), the interpreter and hostcuda INT64_MIN."""
    a = np.array([np.iinfo(np.int64).min, -7, 7, np.iinfo(np.int64).max], dtype=np.int64)
    for m in (-1, 0, 3, -3):
        q, r = np.zeros(4, np.int64), np.zeros(4, np.int64)
        gk.launch(divide_by_scalar, 4, a, q, r, m, **_on(backend))
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(q, a // np.int64(m), err_msg=f"{backend} // {m}")
            np.testing.assert_array_equal(r, a % np.int64(m), err_msg=f"{backend} % {m}")
