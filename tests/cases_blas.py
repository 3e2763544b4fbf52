"""Library cases (tests/library_cases.py) of gradkern.kernels.blas."""

from library_cases import LibraryCase, rand, scalar

from gradkern.kernels import blas


def _saxpy(a, x, y):
    return [a, x, a * x + y]


def _matvec(A, x, y):
    return [A, x, A @ x]


CASES = {
    "saxpy": LibraryCase(blas.saxpy, lambda r, dt: [scalar(r, 0.5, 1.5), rand(r, 7, dt), rand(r, 7, dt)],
                         lambda a: a[1].shape[0], _saxpy, float32_terms=2),
    "matvec": LibraryCase(blas.matvec, lambda r, dt: [rand(r, (5, 3), dt), rand(r, 3, dt), rand(r, 5, dt)],
                          lambda a: a[0].shape[0], _matvec, float32_terms=2 * 3),
}
