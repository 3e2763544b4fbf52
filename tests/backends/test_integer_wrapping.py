"""Integer results that wrap, and int32 operands of the unary ops, found by tests/fuzz/test_new_features_fuzz.py's
random integer expressions (docs/language.md#integer-arithmetic, docs/testing.md).

* Numba marks signed `+ - *` no-signed-wrap (`nsw`), so LLVM folded `((a - b) >> 63) % 7` to `a < b ? 6 : 0`: 0 on
  the compiled CPU backend where `a - b` wraps (INT64_MAX - -1), 6 (NumPy's) on the interpreter and hostcuda. The
  CPU backend now computes them in uint64 (`backends/numba_syntax.py`, `WRAPPING`).
* `-v` and `abs(v)` of an int32 `v` stayed int32 on the interpreter and hostcuda (INT32_MIN) but widened on the
  compiled CPU backend (2**31); ints now widen to int64 first, as the binary ops do (`ir/infer.py`)."""

from __future__ import annotations

import numpy as np
import pytest
from support.devices import HAS_GPU

import gradkern as gk
from gradkern.backends.hostcuda import compiler

BACKENDS = ["interp", "cpu",
            pytest.param("hostcuda", marks=pytest.mark.skipif(compiler() is None, reason="g++ is not on the PATH")),
            pytest.param("cuda", marks=pytest.mark.skipif(not HAS_GPU, reason="no CUDA GPU (CuPy)"))]
I64, I32 = np.iinfo(np.int64), np.iinfo(np.int32)


@gk.kernel
def sign_of_difference(a, b, res):
    i = gk.tid()
    res[i, 0] = ((a[i] - b[i]) >> 63) % 7
    res[i, 1] = ((a[i] + b[i]) >> 63) % 7
    res[i, 2] = ((a[i] * b[i]) >> 63) % 7


@gk.kernel
def negate(v, res):
    i = gk.tid()
    res[i, 0] = -v[i]
    res[i, 1] = abs(v[i])
    res[i, 2] = 0 - (-v[i])


@pytest.mark.parametrize("backend", BACKENDS)
def test_wrapped_sums_differences_and_products_keep_their_sign_bit(backend):
    a = np.array([I64.max, I64.min, I64.max, 5, 2 ** 62], np.int64)
    b = np.array([-1, 1, 1, 7, 2], np.int64)
    res = np.zeros((5, 3), np.int64)
    gk.launch(sign_of_difference, 5, a, b, res, backend=backend)
    with np.errstate(over="ignore"):
        want = np.stack([((a - b) >> 63) % 7, ((a + b) >> 63) % 7, ((a * b) >> 63) % 7], axis=1)
    np.testing.assert_array_equal(res, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_negation_and_abs_of_int32_widen_first(backend):
    v = np.array([I32.min, -5, 0, I32.max], np.int32)
    res = np.zeros((4, 3), np.int64)
    gk.launch(negate, 4, v, res, backend=backend)
    w = v.astype(np.int64)
    np.testing.assert_array_equal(res, np.stack([-w, np.abs(w), w], axis=1))


@gk.kernel
def literal_overflow(a, res):
    i = gk.tid()
    res[i, 0] = 2 << 63
    res[i, 1] = 4611686018427387904 * 4 + a[i]
    res[i, 2] = (-1 << 63) + a[i]


@pytest.mark.parametrize("backend", BACKENDS)
def test_literals_whose_result_wraps_compile(backend):
    """`2 << 63` of two literals was a Numba TypingError leaking out of the launch: CPython folded it into
    2**64 in the generated module; printed through uint64 it is NumPy's 0."""
    a = np.array([3, -1], np.int64)
    res = np.zeros((2, 3), np.int64)
    gk.launch(literal_overflow, 2, a, res, backend=backend)
    np.testing.assert_array_equal(res, [[0, 3, I64.min + 3], [0, -1, I64.max]])


def test_the_cuda_source_wraps_integer_sums_differences_products_and_negations_through_unsigned():
    """Signed overflow is undefined in C++: NVRTC may fold `((a - b) >> 63)` as LLVM did on the CPU. The CUDA
    printer spells integer + - * and unary minus through the unsigned type (backends/cuda.py, `_WRAPPING`), and
    the prelude's integer abs and powers wrap too. hostcuda compiles with -fwrapv, so its runs above cannot tell;
    this checks the spelling, and the GPU check runs the kernels on the device (docs/language.md)."""
    a, b = np.array([I64.max, 1], np.int64), np.array([-1, 2], np.int64)
    src = gk.inspect(sign_of_difference, a, b, np.zeros((2, 3), np.int64), backend="cuda").source
    for op in "-+*":
        assert "(unsigned long long)(" in src and f") {op} (unsigned long long)(" in src, op
    neg = gk.inspect(negate, np.ones(2, np.int32), np.zeros((2, 3), np.int64), backend="cuda").source
    assert "((unsigned long long)0 - (unsigned long long)(" in neg
    assert "(long long)(0ULL - (unsigned long long)x)" in neg  # _gkb_abs in the prelude
