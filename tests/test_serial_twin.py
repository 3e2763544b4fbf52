"""The serial twins of backends/numba_cpu.py: a parallel launch of fewer than
GRADKERN_SERIAL_THREADS threads runs its entry compiled without parallel=True,
with the same chunks of privatised atomics in the same order, so results are
bit-identical to the parallel entry's, with atomics and without, in every mode.
(The rest of the suite runs the parallel entries: conftest.py sets the
threshold to 0.)"""

from __future__ import annotations

import numpy as np
import pytest
from corpus import CORPUS

import gradkern as gk
from gradkern.backends import numba_cpu
from gradkern.kernels import allen_cahn_step, matvec, saxpy


@gk.kernel
def scatter_energy(u, idx, e, hist):
    i = gk.tid()
    gk.atomic_add(e, 0, u[i] * u[i])
    gk.atomic_add(hist, idx[i], u[i])


@pytest.fixture
def twins(monkeypatch):
    """run(fn, threshold) -> fn's result with that threshold, and how many launches took a twin."""
    used = []
    real = numba_cpu._serial_twin

    def spy(entry, name):
        used.append(name)
        return real(entry, name)

    monkeypatch.setattr(numba_cpu, "_serial_twin", spy)

    def run(fn, threshold):
        monkeypatch.setattr(numba_cpu, "SERIAL_THREADS", threshold)
        used.clear()
        return fn(), len(used)
    return run


def _both(twins, make, fn):
    """fn on fresh copies of make()'s arrays, parallel then serial: the arrays after each, and twin counts."""
    out = []
    for threshold in (0, 10**9):
        arrays = make()
        got, n = twins(lambda arrays=arrays: fn(*arrays), threshold)
        out.append(([a.copy() for a in arrays if isinstance(a, np.ndarray)], got, n))
    (par, got_p, n_p), (ser, got_s, n_s) = out
    assert n_p == 0 and n_s > 0
    for a, b in zip(par, ser):
        np.testing.assert_array_equal(a, b)
    assert got_p == got_s
    return par


@pytest.mark.parametrize("case", [c for c in CORPUS], ids=lambda c: c.name)
def test_corpus_launch_serial_equals_parallel(twins, case):
    def make():
        return case.make(np.random.default_rng(7), case.dtypes[-1])

    dim = case.dim(make())
    out = []
    for threshold in (0, 10**9):
        args = make()
        _, n = twins(lambda args=args: gk.launch(case.kernel, dim, *args), threshold)
        out.append((args, n))
    (par, n_p), (ser, n_s) = out
    assert n_p == 0  # n_s is 0 too where the thread body has a loop (no twin): then this compares two runs
    for a, b in zip(par, ser):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)


def test_atomics_serial_equals_parallel(twins):
    def make():
        rng = np.random.default_rng(3)
        return rng.uniform(-1, 1, 64), rng.integers(0, 5, 64), np.zeros(1), np.zeros(5)
    par = _both(twins, make, lambda u, idx, e, h: gk.launch(scatter_energy, 64, u, idx, e, h))
    assert par[2][0] != 0.0


def test_atomics_reverse_serial_equals_parallel(twins):
    def make():
        rng = np.random.default_rng(4)
        u = rng.uniform(-1, 1, 64)
        return u, rng.integers(0, 5, 64), np.zeros(1), np.zeros(5), np.zeros(64), rng.uniform(-1, 1, 1), \
            rng.uniform(-1, 1, 5)

    def grad(u, idx, e, h, du, de, dh):
        return gk.autodiff(scatter_energy, gk.Duplicated(u, du), idx, gk.Duplicated(e, de), gk.Duplicated(h, dh))
    _both(twins, make, grad)


def test_active_sum_serial_equals_parallel(twins):
    """saxpy's Active a: a float sum over threads, privatised per chunk in both."""
    def make():
        rng = np.random.default_rng(5)
        return rng.uniform(-1, 1, 100), rng.uniform(-1, 1, 100), rng.uniform(-1, 1, 100), rng.uniform(-1, 1, 100)

    def grad(x, y, dx, dy):
        return gk.autodiff(saxpy, gk.Active(1.5), gk.Duplicated(x, dx), gk.Duplicated(y, dy))
    _both(twins, make, grad)


@pytest.mark.parametrize("mode", [gk.Reverse, gk.Forward], ids=["reverse", "forward"])
def test_stencil_modes_serial_equal_parallel(twins, mode):
    def make():
        rng = np.random.default_rng(6)
        return rng.uniform(0, 1, 50), np.zeros(50), rng.uniform(-1, 1, 50), rng.uniform(-1, 1, 50)

    def run(u, un, du, dun):
        gk.autodiff(allen_cahn_step, gk.Duplicated(u, du), gk.Duplicated(un, dun), 0.2, 0.01, mode=mode)
    _both(twins, make, run)


def test_no_twin_for_thread_bodies_with_loops():
    A, x, y = np.ones((4, 3)), np.ones(3), np.zeros(4)
    gk.launch(matvec, 4, A, x, y)
    assert all(spec.code.serial is None for spec in matvec._specs.values() if hasattr(spec, "code"))
    gk.launch(saxpy, 4, 1.0, np.ones(4), y)
    assert any(getattr(spec, "code", None) and spec.code.serial for spec in saxpy._specs.values())


def test_twin_is_taken_below_the_threshold_only(twins):
    x, y = np.ones(300), np.zeros(300)
    assert twins(lambda: gk.launch(saxpy, 255, 1.0, x, y), 256)[1] == 1
    assert twins(lambda: gk.launch(saxpy, 256, 1.0, x, y), 256)[1] == 0
    assert twins(lambda: gk.launch(saxpy, 300, 1.0, x, y), 0)[1] == 0
