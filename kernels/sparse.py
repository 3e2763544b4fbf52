"""Sparse linear algebra in CSR format.

A CSR matrix A (m rows) is three arrays: `indptr` (m + 1,), non-decreasing,
`indptr[0] = 0`; `indices` (nnz,), the column of each stored entry; `data`
(nnz,), its value. Row i holds entries k = indptr[i] … indptr[i+1] − 1.
Column indices may be unsorted and repeated within a row (repeats add up,
as in scipy.sparse); rows may be empty. Derivatives are taken with respect
to `data` and `x`; `indptr` and `indices` are integer structure (Const)."""

import gradkern as gk

__all__ = ["spmv", "spmv_t"]


@gk.kernel
def spmv(indptr, indices, data, x, y):
    """y = A x for a CSR matrix A (overwrites y).

    `indptr`: (m + 1,) int, read; `indices`: (nnz,) int, read; `data`: (nnz,), read;
    `x`: (n,), read; `y`: (m,), written (an empty row gives 0).
    Launch: m = len(indptr) − 1 threads, one per row (each sums its row: no atomics)."""
    i = gk.tid()
    acc = 0.0
    for k in range(indptr[i], indptr[i + 1]):
        acc += data[k] * x[indices[k]]
    y[i] = acc


@gk.kernel
def spmv_t(indptr, indices, data, x, y):
    """y ← y + Aᵀ x for a CSR matrix A (accumulates: zero y first for y = Aᵀ x).

    `indptr`: (m + 1,) int, read; `indices`: (nnz,) int, read; `data`: (nnz,), read;
    `x`: (m,), read; `y`: (n,), updated in place by gk.atomic_add (row i scatters
    data[k]·x[i] into y[indices[k]]; rows share columns).
    Launch: m = len(indptr) − 1 threads, one per row of A."""
    i = gk.tid()
    xi = x[i]
    for k in range(indptr[i], indptr[i + 1]):
        gk.atomic_add(y, indices[k], data[k] * xi)
