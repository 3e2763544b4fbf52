"""Library cases (tests/support/library_cases.py) of gradkern.kernels.tridiagonal: the
kernels that build the systems tridiagonal_solve takes (the rule itself is
tested in tests/library/test_library.py)."""

import numpy as np

from gradkern.kernels import tridiagonal
from support.library_cases import LibraryCase, rand, scalar


def _implicit_heat_rows(a, b, c, r):
    """The bands of the dense matrix I - r L, L = the second-difference matrix with zero end rows."""
    n = b.shape[0]
    L = np.diag(np.full(n, -2.0)) + np.diag(np.ones(n - 1), 1) + np.diag(np.ones(n - 1), -1)
    L[[0, -1], :] = 0.0
    A = np.eye(n) - r * L
    sub, sup = np.zeros(n), np.zeros(n)
    sub[1:], sup[:-1] = np.diag(A, -1), np.diag(A, 1)
    return [sub, np.diag(A).copy(), sup, r]


def _implicit_heat_rows_batched(a, b, c, r):
    columns = [_implicit_heat_rows(a[:, j], b[:, j], c[:, j], r) for j in range(b.shape[1])]
    return [np.stack([col[k] for col in columns], axis=1) for k in range(3)] + [r]


CASES = {
    "implicit_heat_rows": LibraryCase(tridiagonal.implicit_heat_rows,
                                      lambda r, dt: [rand(r, 9, dt), rand(r, 9, dt), rand(r, 9, dt),
                                                     scalar(r, 0.2, 2.0)],
                                      lambda a: a[1].shape[0], _implicit_heat_rows, float32_terms=2),
    "implicit_heat_rows_batched": LibraryCase(tridiagonal.implicit_heat_rows_batched,
                                              lambda r, dt: [rand(r, (7, 3), dt), rand(r, (7, 3), dt),
                                                             rand(r, (7, 3), dt), scalar(r, 0.2, 2.0)],
                                              lambda a: a[1].shape, _implicit_heat_rows_batched, float32_terms=2),
}
