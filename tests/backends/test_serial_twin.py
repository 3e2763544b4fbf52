"""The serial twins of backends/numba_cpu.py: a parallel launch of fewer than
GRADKERN_SERIAL_THREADS threads runs its entry compiled without parallel=True,
with the same chunks of privatised atomics in the same order, so results are
bit-identical to the parallel entry's, with atomics and without, in every mode.
(The rest of the suite runs the parallel entries: conftest.py sets the
threshold to 0.)"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from support.corpus import CORPUS

import gradkern as gk
from backends.test_hostcuda import LABELS, outputs, run, signatures
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
    assert all(spec.code.info.serial is None for spec in _cpu_specs(matvec))
    gk.launch(saxpy, 4, 1.0, np.ones(4), y)
    assert any(spec.code.info.serial for spec in _cpu_specs(saxpy))


def _cpu_specs(kernel):
    """The kernel's CPU specialisations (a launch's info is its backend's own: numba_cpu.CpuLaunch)."""
    return [spec for spec in kernel._specs.values() if hasattr(spec, "code") and spec.backend == "cpu"]


def test_twin_is_taken_below_the_threshold_only(twins):
    x, y = np.ones(300), np.zeros(300)
    assert twins(lambda: gk.launch(saxpy, 255, 1.0, x, y), 256)[1] == 1
    assert twins(lambda: gk.launch(saxpy, 256, 1.0, x, y), 256)[1] == 0
    assert twins(lambda: gk.launch(saxpy, 300, 1.0, x, y), 0)[1] == 0


# The rest of the suite runs the twins wherever a launch has one (as every launch under GRADKERN_SERIAL_THREADS
# threads does for a user; docs/testing.md, "Serial twins"): here a sample of every signature the suite has,
# in every mode (primal, fused reverse, forward, vector lanes), runs through its parallel entry and through its
# twin, which must agree bit for bit (the same chunks of privatised sums, in the same order). The signatures
# outside the sample are `full` (`python -m pytest -m full tests/backends/test_serial_twin.py` runs them).

def _parallel_sampled(label: str) -> bool:
    """One signature in six by a stable hash, and every racy launch. The vector lanes of the library's and the
    HPC ports' kernels are left out (as from tests/backends/test_hostcuda.py's sample): the parallel machinery they
    would check (prange, privatised sums in chunks) is the small kernels' lanes', on bodies whose parallel
    compile cost 10-23 s each, a third of this sample's time (session 39)."""
    lanes = label.endswith("/batch") or label.endswith("/batch-tangent")
    if lanes and label.split("/")[0] in ("library", "hpc"):
        return False
    return zlib.crc32(f"twin/{label}".encode()) % 6 == 0 or label.startswith("racy/")


@pytest.mark.parametrize("label", [pytest.param(label, marks=() if _parallel_sampled(label) else [pytest.mark.full])
                                   for label in LABELS])
def test_signature_serial_twin_equals_parallel_entry(twins, label):
    par_s, ser_s = signatures(9)[label], signatures(10)[label]  # copies test_hostcuda.py never runs (0-7)
    if label.startswith("racy/"):
        for s, threshold in ((par_s, 0), (ser_s, 10**9)):
            before = [a.copy() for a in s.args if isinstance(a, np.ndarray)]
            with pytest.raises(gk.RaceError):
                twins(lambda s=s: run(s, "cpu"), threshold)
            for a, b in zip([a for a in s.args if isinstance(a, np.ndarray)], before):
                np.testing.assert_array_equal(a, b)
        return
    par, n_par = twins(lambda: outputs(*run(par_s, "cpu")), 0)
    ser, _ = twins(lambda: outputs(*run(ser_s, "cpu")), 10**9)
    assert n_par == 0, label
    assert [w for w, _ in par] == [w for w, _ in ser], label
    for (what, p), (_, s) in zip(par, ser):
        p, s = np.asarray(p), np.asarray(s)
        assert p.dtype == s.dtype and p.shape == s.shape, (label, what)
        same = p.view(f"u{p.itemsize}") == s.view(f"u{s.itemsize}")  # bits: -0.0 and NaN payloads too
        assert same.all(), f"{label}: {what}: {int((~same).sum())} of {p.size} elements differ in their bits"
