"""Rows of benchmarks/library/library.py for gradkern.kernels.sparse, each with a
hand-written Numba primal + adjoint (Row.hand) in the style of
benchmarks/kernels/reverse_cpu.py.

The matrix: square, n // 4 rows (the driver's n = 2**22 gives 2**20 rows),
8 to 16 nonzeros per row (12 on average) at uniformly random, unsorted,
possibly repeated columns: a gather of x (spmv) or a scatter into y (spmv_t)
that misses the cache, as in a real unstructured matrix. data, x and y are
differentiated; indptr and indices are Const.

Hand-written versions (what an expert writes):
* spmv: the primal is one `prange` over rows; the adjoint is a `prange` over
  one block of rows per thread doing `ddata[k] += dy[i] x[indices[k]]` (row
  i's entries are its own) and scattering `data[k] dy[i]` into the block's
  private copy of dx, summed into dx afterwards; then dy = 0 (y is write-only).
* spmv_t: the primal scatters into one private copy of y per block of rows,
  summed into y afterwards (the CPU form of gk.atomic_add); the adjoint is a
  gather: `dx[i] += Σ data[k] dy[indices[k]]`, `ddata[k] += x[i] dy[indices[k]]`
  over `prange` of rows; dy is unchanged (y += ...: ∂y_after/∂y_before = I).

`python benchmarks/library/library_sparse.py` runs check_rows(): each hand-written
version against gk.autodiff from identical inputs and seeds."""

from __future__ import annotations

import sys
from pathlib import Path

import numba
import numpy as np
from numba import prange

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (benchpath.py)
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path
from library_rows import Row, alone  # noqa: E402

import gradkern as gk  # noqa: E402
from gradkern.kernels import sparse  # noqa: E402

ROWS_PER_N = 4  # rows = n // 4


def random_csr(rng: np.random.Generator, rows: int, cols: int, lo: int = 8, hi: int = 16):
    """indptr, indices, data of a random CSR matrix: lo..hi entries per row at uniform random columns
    (unsorted, repeats possible), values uniform in [-1, 1)."""
    counts = rng.integers(lo, hi + 1, rows)
    indptr = np.zeros(rows + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices = rng.integers(0, cols, int(indptr[-1])).astype(np.int64)
    return indptr, indices, rng.uniform(-1.0, 1.0, indices.shape[0])


def _setup(rng, n):
    m = max(n // ROWS_PER_N, 16)
    indptr, indices, data = random_csr(rng, m, m)
    return [indptr, indices, data, rng.uniform(-1.0, 1.0, m), rng.uniform(-1.0, 1.0, m)], m


def _traffic(y_updated: bool):
    """indptr, indices, data and x read once, y written (and read too when updated in place)."""
    return lambda a: sum(x.nbytes for x in a) + (a[4].nbytes if y_updated else 0)


def _blocks() -> int:
    return numba.get_num_threads()


# ---------------------------------------------------------------- spmv


@numba.njit(parallel=True)
def spmv_primal(indptr, indices, data, x, y):
    for i in prange(indptr.shape[0] - 1):
        acc = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            acc += data[k] * x[indices[k]]
        y[i] = acc


@numba.njit(parallel=True)
def spmv_adjoint(indptr, indices, data, x, ddata, dx, dy, blocks):
    m = indptr.shape[0] - 1
    part = np.zeros((blocks, dx.shape[0]))
    for b in prange(blocks):
        for i in range(b * m // blocks, (b + 1) * m // blocks):
            g = dy[i]
            dy[i] = 0.0
            for k in range(indptr[i], indptr[i + 1]):
                ddata[k] += g * x[indices[k]]
                part[b, indices[k]] += g * data[k]
    for j in prange(dx.shape[0]):
        s = dx[j]
        for b in range(blocks):
            s += part[b, j]
        dx[j] = s


def _hand_spmv(args, shadows):
    indptr, indices, data, x, y = args
    spmv_primal(indptr, indices, data, x, y)
    spmv_adjoint(indptr, indices, data, x, shadows["data"], shadows["x"], shadows["y"], _blocks())


# ---------------------------------------------------------------- spmv_t


@numba.njit(parallel=True)
def spmv_t_primal(indptr, indices, data, x, y, blocks):
    m = indptr.shape[0] - 1
    part = np.zeros((blocks, y.shape[0]))
    for b in prange(blocks):
        for i in range(b * m // blocks, (b + 1) * m // blocks):
            xi = x[i]
            for k in range(indptr[i], indptr[i + 1]):
                part[b, indices[k]] += data[k] * xi
    for j in prange(y.shape[0]):
        s = y[j]
        for b in range(blocks):
            s += part[b, j]
        y[j] = s


@numba.njit(parallel=True)
def spmv_t_adjoint(indptr, indices, data, x, ddata, dx, dy):
    for i in prange(indptr.shape[0] - 1):
        xi = x[i]
        s = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            g = dy[indices[k]]
            ddata[k] += xi * g
            s += data[k] * g
        dx[i] += s


def _hand_spmv_t(args, shadows):
    indptr, indices, data, x, y = args
    spmv_t_primal(indptr, indices, data, x, y, _blocks())
    spmv_t_adjoint(indptr, indices, data, x, shadows["data"], shadows["x"], shadows["y"])


ROWS: list[Row] = [
    Row("spmv", _setup, _traffic(False), wrt=("data", "x", "y"), hand=_hand_spmv, hand_primal=alone(spmv_primal)),
    Row("spmv_t", _setup, _traffic(True), wrt=("data", "x", "y"), hand=_hand_spmv_t,
        hand_primal=lambda a: spmv_t_primal(*a, _blocks())),
]


def check_rows(n: int = 4 * 40, seed: int = 0) -> None:
    """Every row's hand-written primal + adjoint against gk.autodiff from identical inputs and seeds
    (primal outputs and shadows agree to rtol 1e-10, atol 1e-12 of the largest magnitude: the two sum
    the same terms in different orders), and the primal against a dense NumPy product."""
    for row in ROWS:
        rng = np.random.default_rng(seed)
        args, dim = row.setup(rng, n)
        kernel = getattr(sparse, row.name)
        params = [p.name for p in kernel.ir.params]
        seeds = {p: rng.uniform(-1.0, 1.0, a.shape) for p, a in zip(params, args) if p in row.wrt}
        indptr, indices, data, x, y = args
        dense = np.zeros((dim, x.shape[0] if row.name == "spmv" else y.shape[0]))
        np.add.at(dense, (np.repeat(np.arange(dim), np.diff(indptr)), indices), data)
        want_y = dense @ x if row.name == "spmv" else y + dense.T @ x
        mine = [a.copy() for a in args]
        shadows = {p: s.copy() for p, s in seeds.items()}
        gk.autodiff(kernel, *(gk.Duplicated(a, shadows[p]) if p in shadows else gk.Const(a)
                              for p, a in zip(params, mine)), dim=dim)
        theirs = [a.copy() for a in args]
        hand = {p: s.copy() for p, s in seeds.items()}
        row.hand(theirs, hand)
        pairs = [("NumPy's y", mine[4], want_y)] + [(f"primal '{p}'", a, b) for p, a, b in zip(params, mine, theirs)]
        pairs += [(f"shadow of '{p}'", shadows[p], hand[p]) for p in seeds]
        for what, got, want in pairs:
            atol = 1e-12 * max(float(np.max(np.abs(want))), 1e-300)
            assert np.allclose(got, want, rtol=1e-10, atol=atol), f"{row.name}: {what} differs"
        print(f"{row.name}: gk.autodiff agrees with the hand-written primal + adjoint")


if __name__ == "__main__":
    check_rows()
