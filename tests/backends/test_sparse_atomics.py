"""Atomic adds on the CPU without whole-array private copies (docs/adjoint-forms.md#5-atomic-adds-on-the-cpu):
rows a chunk owns (numba_plan.owned_rows: a register per outer index, added once) and sparse privatisation
(numba_plan.spilled: direct adds to the rows a chunk owns, (index, value) spill lists for the rest, added
after the loop in chunk order), against the interpreter (the serial order) and the whole-copy form.

Values are small integers and dyadic rationals where the order of a sum may change, so every sum is exact
and the results must equal the interpreter's bit for bit; with values that are not dyadic, owned rows must
equal the copies bit for bit (the same sums in the same order) and sparse privatisation the serial sum
within the bound of a reordered sum (`_reordered_bound`). The chunk count is forced by replacing
`private_chunks`, the form by SPARSE_RATIO (0: copies; inf: sparse wherever there is more than one chunk),
and launches run their parallel entry whatever their size (SERIAL_THREADS = 0)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support.sums import reordered_bound

import gradkern as gk
import gradkern.kernels as library
from gradkern.backends import numba_cpu, numba_plan
from gradkern.testing import check_grad


@gk.kernel
def scatter(x, idx, w):
    """Adds at data-dependent indices, which may repeat: one per thread, two in one branch."""
    i = gk.tid()
    gk.atomic_add(x, idx[i], w[i])
    if w[i] > 0.0:
        gk.atomic_add(x, idx[(i + 1) % idx.shape[0]], 0.5 * w[i])
    else:
        gk.atomic_add(x, 0, w[i])


@gk.kernel
def scatter_2d(y, rows, cols, w):
    i = gk.tid()
    gk.atomic_add(y, (rows[i], cols[i]), w[i])


@gk.kernel
def scatter_in_loop(x, idx, w):
    """An add in a loop: no bound per thread, so no spill lists (the copies)."""
    i = gk.tid()
    for q in range(2):
        gk.atomic_add(x, idx[(i + q) % idx.shape[0]], w[i])


@gk.kernel
def row_sums(x, a):
    """Thread (i, j) adds to x[i + 1] only: rows the chunks own."""
    i, j = gk.tid()
    gk.atomic_add(x, i + 1, a[i, j])


@gk.kernel
def two_rows(x, a):
    """Adds to x[i] and x[i + 1]: two offsets, so x keeps its copies."""
    i, j = gk.tid()
    gk.atomic_add(x, i, a[i, j])
    gk.atomic_add(x, i + 1, a[i, j])


def _dup(a: np.ndarray) -> gk.Duplicated:
    return gk.Duplicated(a, np.zeros_like(a))


@pytest.fixture(autouse=True)
def parallel_entries(monkeypatch):
    monkeypatch.setattr(numba_cpu, "SERIAL_THREADS", 0)


def _form(monkeypatch, chunks: int, ratio: float) -> None:
    monkeypatch.setattr(numba_plan, "private_chunks", lambda copy_bytes, n0, mixed=False, width=0: min(chunks, n0))
    monkeypatch.setattr(numba_plan, "SPARSE_RATIO", ratio)


def _ran_sparse(monkeypatch) -> list[str]:
    """The names of the siblings launches call from now on."""
    called: list[str] = []
    real = numba_cpu._sibling
    monkeypatch.setattr(numba_cpu, "_sibling", lambda entry, name: called.append(name) or real(entry, name))
    return called


def _reordered_bound(terms: np.ndarray, start: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """|error| of a float64 sum of `start` and k terms taken in another order: at most γ_k times the sum of
    the magnitudes, γ_k = k u / (1 - k u), u = 2^-53 (Higham, Accuracy and Stability, 2nd ed., (4.4)),
    for each order, so twice that between two orders."""
    u = 2.0 ** -53
    k = counts.astype(np.float64)
    return 2.0 * k * u / (1.0 - k * u) * (np.abs(start) + terms)


@pytest.mark.parametrize("chunks", [2, 3, 7, 10**6])
@pytest.mark.parametrize("order", ["sorted", "random", "one"])
def test_spill_lists_add_what_the_serial_loop_adds(monkeypatch, chunks, order):
    n, m = 97, 41  # odd sizes: chunks and owned row ranges of unequal widths
    rng = np.random.default_rng(chunks)
    idx = {"sorted": np.sort(rng.integers(0, m, n)), "random": rng.integers(0, m, n),
           "one": np.full(n, m - 1)}[order]  # "one": every add outside chunk 0's rows, the lists full
    w = rng.integers(-8, 9, n).astype(np.float64) / 4
    x0 = rng.integers(-4, 5, m).astype(np.float64)
    _form(monkeypatch, chunks, float("inf"))
    called = _ran_sparse(monkeypatch)
    cpu, interp = x0.copy(), x0.copy()
    gk.launch(scatter, n, cpu, idx, w)
    gk.launch(scatter, n, interp, idx, w, backend="interp")
    assert called == ["scatter_1d_sparse"]
    np.testing.assert_array_equal(cpu, interp)  # dyadic values: every order sums exactly


def test_spill_lists_are_deterministic_and_within_the_reordered_bound(monkeypatch):
    n, m = 1001, 64
    rng = np.random.default_rng(3)
    idx, w = rng.integers(0, m, n), rng.uniform(0.5, 1.5, n) * rng.choice([-1.0, 1.0], n)
    x0 = rng.uniform(-1.0, 1.0, m)
    _form(monkeypatch, 5, float("inf"))
    first, again, interp = x0.copy(), x0.copy(), x0.copy()
    gk.launch(scatter, n, first, idx, w)
    gk.launch(scatter, n, again, idx, w)
    gk.launch(scatter, n, interp, idx, w, backend="interp")
    np.testing.assert_array_equal(first, again)
    # each element's terms, their magnitudes and count, as the kernel adds them
    terms, counts = np.zeros(m), np.zeros(m)
    for i in range(n):
        adds = [(idx[i], w[i])] + ([(idx[(i + 1) % n], 0.5 * w[i])] if w[i] > 0 else [(0, w[i])])
        for at, v in adds:
            terms[at] += abs(v)
            counts[at] += 1
    assert np.all(np.abs(first - interp) <= _reordered_bound(terms, x0, counts))


@pytest.mark.parametrize("chunks", [2, 5])
def test_2d_targets_spill_every_index(monkeypatch, chunks):
    n, shape = 300, (7, 5)
    rng = np.random.default_rng(11)
    rows, cols = rng.integers(0, shape[0], n), rng.integers(0, shape[1], n)
    w = rng.integers(-8, 9, n).astype(np.float64) / 8
    _form(monkeypatch, chunks, float("inf"))
    called = _ran_sparse(monkeypatch)
    cpu, interp = np.ones(shape), np.ones(shape)
    gk.launch(scatter_2d, n, cpu, rows, cols, w)
    gk.launch(scatter_2d, n, interp, rows, cols, w, backend="interp")
    assert called == ["scatter_2d_1d_sparse"]
    np.testing.assert_array_equal(cpu, interp)


def test_fallbacks_keep_the_copies(monkeypatch):
    """An add in a loop has no bound: no sparse sibling. A launch where the pairs would cost more than the
    copies (SPARSE_RATIO 0 here), or with one chunk, runs the copies."""
    n, m = 60, 9
    rng = np.random.default_rng(5)
    idx, w = rng.integers(0, m, n), rng.integers(-8, 9, n).astype(np.float64) / 4
    assert "_sparse(" not in gk.inspect(scatter_in_loop, np.zeros(m), idx, w).source
    assert "_sparse(" in gk.inspect(scatter, np.zeros(m), idx, w).source
    for chunks, ratio in ((4, 0.0), (1, float("inf"))):
        _form(monkeypatch, chunks, ratio)
        called = _ran_sparse(monkeypatch)
        for kernel in (scatter, scatter_in_loop):
            cpu, interp = np.zeros(m), np.zeros(m)
            gk.launch(kernel, n, cpu, idx, w)
            gk.launch(kernel, n, interp, idx, w, backend="interp")
            np.testing.assert_array_equal(cpu, interp)
        assert called == []


@pytest.mark.parametrize("chunks", [1, 2, 3, 10**6])
def test_owned_rows_sum_their_rows(monkeypatch, chunks):
    """Each owned row's adds in a register whose adds LLVM may reassociate (docs/adjoint-forms.md section 9),
    added once: exact where every order is (dyadic values), within a reordered sum's bound otherwise."""
    shape = (13, 21)
    rng = np.random.default_rng(chunks)
    x0 = rng.uniform(-1.0, 1.0, shape[0] + 1)
    source = gk.inspect(row_sums, x0, rng.uniform(-1.0, 1.0, shape), dim=shape).source
    assert "_gkb_priv_x" not in source and "_gkb_row_x = _gkb_radd(_gkb_row_x, " in source
    assert "_gkb_priv_x" in gk.inspect(two_rows, x0, rng.uniform(-1.0, 1.0, shape), dim=shape).source
    _form(monkeypatch, chunks, 0.0)
    for dyadic in (True, False):
        a = rng.integers(-8, 9, shape) / 4 if dyadic else rng.uniform(-1.0, 1.0, shape)
        got = x0.copy()
        gk.launch(row_sums, shape, got, a)
        for i in range(shape[0]):  # row i's 21 adds summed, then added to x[i + 1] once
            want = math.fsum([x0[i + 1], *a[i]])
            bound = 0.0 if dyadic else reordered_bound(a[i], x0[i + 1], shape[1] + 1)
            assert abs(got[i + 1] - want) <= bound
        assert got[0] == x0[0]
    two, interp = np.full(shape[0] + 1, 0.5), np.full(shape[0] + 1, 0.5)
    ints = rng.integers(-8, 9, shape).astype(np.float64) / 4
    gk.launch(two_rows, shape, two, ints)
    gk.launch(two_rows, shape, interp, ints, backend="interp")
    np.testing.assert_array_equal(two, interp)


@pytest.mark.parametrize("ratio", [0.0, float("inf")])
@pytest.mark.parametrize("n", [1, 3, 257])
def test_l2_misfit_gradients_with_repeated_sensors(monkeypatch, ratio, n):
    """FD and dot-product tests of the misfits, sensors repeating, in both forms."""
    _form(monkeypatch, 3, ratio)
    rng = np.random.default_rng(n)
    u = rng.uniform(0.5, 1.5, n)
    sensors = np.concatenate([rng.integers(0, n, n), [n - 1, n - 1]])  # repeats for sure
    obs = rng.uniform(-1.0, 1.0, sensors.size)
    check_grad(library.l2_misfit, _dup(u), gk.Const(sensors), _dup(obs), _dup(np.full(1, 0.25)), dim=sensors.size)
    side = max(2, int(np.sqrt(n)))
    u2 = rng.uniform(0.5, 1.5, (side, side + 1))
    rows, cols = rng.integers(0, side, 2 * n), rng.integers(0, side + 1, 2 * n)
    check_grad(library.l2_misfit_2d, _dup(u2), gk.Const(rows), gk.Const(cols), _dup(rng.uniform(-1, 1, 2 * n)),
               _dup(np.full(1, 0.25)), dim=2 * n)


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (17, 4)])
def test_ger_gradients(monkeypatch, shape):
    _form(monkeypatch, 3, 0.0)
    rng = np.random.default_rng(shape[0])
    x, y = rng.uniform(0.5, 1.5, shape[0]), rng.uniform(0.5, 1.5, shape[1])
    check_grad(library.ger, gk.Active(0.7), _dup(x), _dup(y), _dup(rng.uniform(-1.0, 1.0, shape)), dim=shape)


def test_the_sparse_twin_equals_the_parallel_sibling_bit_for_bit(monkeypatch):
    """Below GRADKERN_SERIAL_THREADS a launch runs `<entry>_sparse_serial`: the same chunks in the same order."""
    n, m = 200, 30
    rng = np.random.default_rng(9)
    idx, w = rng.integers(0, m, n), rng.uniform(-1.0, 1.0, n)
    _form(monkeypatch, 3, float("inf"))
    results = []
    for threshold in (0, 10**9):
        monkeypatch.setattr(numba_cpu, "SERIAL_THREADS", threshold)
        called = _ran_sparse(monkeypatch)
        x = np.linspace(-1.0, 1.0, m)
        gk.launch(scatter, n, x, idx, w)
        results.append(x)
        assert called[-1] == ("scatter_1d_sparse" if threshold == 0 else "scatter_1d_sparse_serial")
    np.testing.assert_array_equal(results[0].view(np.uint64), results[1].view(np.uint64))
