"""Library cases (tests/support/library_cases.py) of gradkern.kernels.blas."""

import numpy as np

from gradkern.kernels import blas
from support.library_cases import LibraryCase, rand, scalar

ALIASES = {"saxpy": "axpy"}  # exported names bound to another exported kernel: tested as their target


def _axpy(a, x, y):
    return [a, x, a * x + y]


def _matvec(A, x, y):
    return [A, x, A @ x]


def _scal(a, x):
    return [a, a * x]


def _dot(x, y, out):
    out = out.copy()
    out[0] += np.dot(x, y)
    return [x, y, out]


def _gemv(alpha, A, x, beta, y):
    return [alpha, A, x, beta, alpha * (A @ x) + beta * y]


def _gemv_t(alpha, A, x, beta, y):
    return [alpha, A, x, beta, alpha * (A.T @ x) + beta * y]


def _ger(alpha, x, y, A):
    return [alpha, x, y, A + alpha * np.outer(x, y)]


def _gemv_args(r, dt, rows, cols):
    return [scalar(r, 0.5, 1.5), rand(r, (rows, cols), dt), rand(r, cols, dt), scalar(r, 0.5, 1.5), rand(r, rows, dt)]


# float32_terms: the rounding steps behind one output element (a k-term sum: k, a product: 1), the
# scalar itself rounded to float32 included (gk turns a Python float into the launch's float type).
CASES = {
    "axpy": LibraryCase(blas.axpy, lambda r, dt: [scalar(r, 0.5, 1.5), rand(r, 7, dt), rand(r, 7, dt)],
                        lambda a: a[1].shape[0], _axpy, float32_terms=3),
    "matvec": LibraryCase(blas.matvec, lambda r, dt: [rand(r, (5, 3), dt), rand(r, 3, dt), rand(r, 5, dt)],
                          lambda a: a[0].shape[0], _matvec, float32_terms=2 * 3),
    "scal": LibraryCase(blas.scal, lambda r, dt: [scalar(r, 0.5, 1.5), rand(r, 9, dt)],
                        lambda a: a[1].shape[0], _scal, float32_terms=2),
    # 12 terms summed into out[0]: every thread adds to the same element (repeats by construction)
    "dot": LibraryCase(blas.dot, lambda r, dt: [rand(r, 12, dt), rand(r, 12, dt), rand(r, 1, dt)],
                       lambda a: a[0].shape[0], _dot, float32_terms=2 * 12 + 1,
                       accumulates=("out",), repeated=lambda a: a[0].shape[0] > 1),
    # a 4-term row sum, times alpha, plus beta*y: 4 products + 4 adds + alpha, beta (rounded) and 3 more
    "gemv": LibraryCase(blas.gemv, lambda r, dt: _gemv_args(r, dt, 5, 4), lambda a: a[1].shape[0], _gemv,
                        float32_terms=2 * 4 + 5),
    # a 5-term column sum (A is 5 x 3, one thread per column)
    "gemv_t": LibraryCase(blas.gemv_t, lambda r, dt: [scalar(r, 0.5, 1.5), rand(r, (5, 3), dt), rand(r, 5, dt),
                                                      scalar(r, 0.5, 1.5), rand(r, 3, dt)],
                          lambda a: a[1].shape[1], _gemv_t, float32_terms=2 * 5 + 5),
    "ger": LibraryCase(blas.ger, lambda r, dt: [scalar(r, 0.5, 1.5), rand(r, 5, dt), rand(r, 4, dt),
                                                rand(r, (5, 4), dt)],
                       lambda a: a[3].shape, _ger, float32_terms=4),
}
