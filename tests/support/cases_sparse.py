"""Library cases (tests/support/library_cases.py) of gradkern.kernels.sparse."""

import numpy as np

from gradkern.kernels import sparse
from support.library_cases import LibraryCase, rand

# A 6 x 5 CSR structure with what real matrices have: empty rows (1 and 4), a column repeated within a
# row (4 in row 0, 2 in row 2: the entries add up), columns shared across rows, unsorted columns.
INDPTR = np.array([0, 3, 3, 7, 9, 9, 12], dtype=np.int64)
INDICES = np.array([4, 1, 4, 2, 0, 2, 3, 1, 0, 3, 4, 1], dtype=np.int64)
ROWS, COLS = len(INDPTR) - 1, 5
LONGEST_ROW = int(np.max(np.diff(INDPTR)))  # 4 terms in a row sum
BUSIEST_COLUMN = int(np.max(np.bincount(INDICES)))  # 3 terms scattered into one element of y


def _dense(indptr, indices, data):
    """A as a dense matrix, repeated entries summed (independent of the kernels' loops)."""
    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    A = np.zeros((len(indptr) - 1, COLS))
    np.add.at(A, (rows, indices), data)
    return A


def _spmv(indptr, indices, data, x, y):
    return [indptr, indices, data, x, _dense(indptr, indices, data) @ x]


def _spmv_t(indptr, indices, data, x, y):
    return [indptr, indices, data, x, y + _dense(indptr, indices, data).T @ x]


def _structure_is_csr_with_repeats(indptr, indices) -> bool:
    rows = [indices[indptr[i]:indptr[i + 1]] for i in range(len(indptr) - 1)]
    return (any(len(r) == 0 for r in rows) and any(len(np.unique(r)) < len(r) for r in rows)
            and any(np.any(np.diff(r) < 0) for r in rows) and len(np.unique(indices)) < len(indices))


assert _structure_is_csr_with_repeats(INDPTR, INDICES)

CASES = {
    # a row sum of LONGEST_ROW products
    "spmv": LibraryCase(sparse.spmv, lambda r, dt: [INDPTR.copy(), INDICES.copy(), rand(r, len(INDICES), dt),
                                                    rand(r, COLS, dt), rand(r, ROWS, dt)],
                        lambda a: len(a[0]) - 1, _spmv, float32_terms=2 * LONGEST_ROW),
    # y[j] gets BUSIEST_COLUMN products added to its old value; several rows add to one y[j]
    "spmv_t": LibraryCase(sparse.spmv_t, lambda r, dt: [INDPTR.copy(), INDICES.copy(), rand(r, len(INDICES), dt),
                                                        rand(r, ROWS, dt), rand(r, COLS, dt)],
                          lambda a: len(a[0]) - 1, _spmv_t, float32_terms=2 * BUSIEST_COLUMN + 1,
                          accumulates=("y",),
                          repeated=lambda a: len(np.unique(a[1])) < len(a[1]) and _structure_is_csr_with_repeats(
                              a[0], a[1])),
}
