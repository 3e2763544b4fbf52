"""Atomic adds at constant indices (an Active scalar's sum, `out[0] += ...`) in a parallel CPU launch:
each chunk sums its threads' terms in a register, through an add LLVM may reassociate so that the loop
vectorises (backends/numba_syntax.py `_gkb_radd`, docs/adjoint-forms.md section 9), and adds that sum to
its private slot once (backends/numba_loops.py `_accumulators`). The result is a sum of the same terms in
another order: exact where every order is (dyadic terms), otherwise within the bound of a reordered sum,
for any chunk count, in float32 and float64. The chunks' private copies of several targets (of different
shapes and dtypes) are summed in one parallel region, in chunk order (docs/adjoint-forms.md)."""

import math

import numpy as np
import pytest
from support.sums import reordered_bound

import gradkern as gk
from gradkern.backends import numba_cpu, numba_plan
from gradkern.kernels import saxpy


@gk.kernel
def two_sums(x, out):
    i = gk.tid()
    gk.atomic_add(out, 0, x[i] * x[i])
    if i % 3 == 1:
        gk.atomic_add(out, 2, x[i])  # a second constant element, hit by some threads only


def _exact(terms: np.ndarray, start: float) -> float:
    return math.fsum([float(start), *map(float, terms)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("chunks", [1, 2, 3, 7])
def test_constant_index_sums_are_reordered_sums(monkeypatch, dtype, chunks):
    monkeypatch.setattr(numba_cpu, "SERIAL_THREADS", 0)  # the parallel entry, not its twin
    monkeypatch.setattr(numba_plan, "private_chunks", lambda copy_bytes, n0, mixed=False: min(chunks, n0))
    rng = np.random.default_rng(chunks)
    n = 1001
    for dyadic in (True, False):  # dyadic terms: every order of the sum is exact
        x = (rng.integers(-8, 9, n) / 4 if dyadic else rng.uniform(-1, 1, n)).astype(dtype)
        out = (rng.integers(-8, 9, 3) / 4 if dyadic else rng.uniform(-1, 1, 3)).astype(dtype)
        start = out.copy()
        terms0 = (x * x).astype(dtype)
        terms2 = np.where(np.arange(n) % 3 == 1, x, 0).astype(dtype)
        gk.launch(two_sums, n, x, out)
        for got, terms, s in ((out[0], terms0, start[0]), (out[2], terms2, start[2])):
            want = _exact(terms, s)
            if dyadic:
                assert float(got) == want
            else:  # n terms and the start, added with the chunks' partial sums
                assert abs(float(got) - want) <= reordered_bound(terms, s, n + chunks + 1)
    ins = gk.inspect(two_sums, x, out, dim=n)
    assert "_gkb_acc0 = _gkb_radd(_gkb_acc0, " in ins.source and "_gkb_acc1 = _gkb_radd(_gkb_acc1, " in ins.source


def test_saxpy_active_scalar_sums_in_a_register(rng):
    n = 64
    args = gk.Active(1.5), gk.Duplicated(rng.random(n), np.zeros(n)), gk.Duplicated(rng.random(n), rng.random(n))
    sums = gk.inspect(saxpy, *args, mode=gk.Reverse).active_sums["a"]
    assert "into a register whose adds may be reassociated" in sums


@gk.kernel
def scatter_many(idx, x, h, counts, grid):  # three atomic targets: float64 1-D, int64 1-D, float64 2-D
    i = gk.tid()
    gk.atomic_add(h, idx[i], x[i])
    gk.atomic_add(counts, idx[i] % 5, 1)
    gk.atomic_add(grid, (idx[i] % 3, i % 4), x[i] * x[i])


@pytest.mark.parametrize("chunks", [1, 2, 3, 7])
def test_private_copies_of_several_targets_are_summed_in_one_region_in_chunk_order(monkeypatch, chunks):
    monkeypatch.setattr(numba_cpu, "SERIAL_THREADS", 0)
    monkeypatch.setattr(numba_plan, "private_chunks", lambda copy_bytes, n0, mixed=False: min(chunks, n0))
    rng = np.random.default_rng(chunks)
    n = 403
    idx, x = rng.integers(0, 9, n), rng.uniform(-1, 1, n)
    h, counts, grid = rng.uniform(-1, 1, 9), rng.integers(0, 3, 5), rng.uniform(-1, 1, (3, 4))
    want = [h.copy(), counts.copy(), grid.copy()]
    for c in range(chunks):  # each chunk's copy: its threads' terms in thread order from zero, then added
        t = np.arange(c * n // chunks, (c + 1) * n // chunks)
        copies = [np.zeros_like(w) for w in want]
        np.add.at(copies[0], idx[t], x[t])
        np.add.at(copies[1], idx[t] % 5, 1)
        np.add.at(copies[2], (idx[t] % 3, t % 4), x[t] * x[t])
        want = [w + cp for w, cp in zip(want, copies)]
    gk.launch(scatter_many, n, idx, x, h, counts, grid)
    for got, w in zip((h, counts, grid), want):
        np.testing.assert_array_equal(got, w)
    source = gk.inspect(scatter_many, idx, x, h, counts, grid, dim=n).source
    entry = source[source.index("def scatter_many_1d("):]
    entry = entry[:entry.index("        return True\n")]  # the parallel branch (the serial path is a function)
    # one parallel region runs the chunks, one sums the copies: no np.zeros, no whole-array `+=`
    assert entry.count("_gk_prange(") == 2 and "_gk_np.zeros" not in entry, entry
