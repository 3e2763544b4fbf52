"""The serial twins of backends/numba_cpu.py: a parallel launch of fewer than
GRADKERN_SERIAL_THREADS threads runs its entry compiled without parallel=True,
with the same chunks of privatised atomics in the same order, so results are
bit-identical to the parallel entry's, with atomics and without, in every mode.
(The rest of the suite's launches are small, so they take the twins as a
user's small launches do: docs/testing.md, "Serial twins".)"""

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
    assert n_p == 0  # n_s is 0 too where the thread body loops and dim > 1 (LOOP_SERIAL_THREADS): two runs compared
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


def test_looped_gather_takes_the_twin_bit_for_bit(twins, monkeypatch):
    """A looped gather (transforms/gather.py: past LOOP_STATEMENTS its neighbours replayed in a loop over the
    offsets) follows the loop-free rule, as its unrolled form does: a launch under SERIAL_THREADS takes its twin,
    bit for bit its parallel entry's (docs/performance.md, "Loop bodies: one thread")."""
    from gradkern.transforms import gather

    monkeypatch.setattr(gather, "LOOP_STATEMENTS", 0)
    taken = []
    spy = numba_cpu._serial_twin
    monkeypatch.setattr(numba_cpu, "_serial_twin", lambda entry, name: taken.append(name) or spy(entry, name))

    def make():
        rng = np.random.default_rng(6)
        return rng.uniform(0, 1, 50), np.zeros(50), rng.uniform(-1, 1, 50), rng.uniform(-1, 1, 50)

    def run(u, un, du, dun):
        gk.autodiff(allen_cahn_step, gk.Duplicated(u, du), gk.Duplicated(un, dun), 0.2, 0.01)
    allen_cahn_step._specs.clear()
    try:
        par = _both(twins, make, run)
        args = [gk.Duplicated(a, np.ones(50)) for a in make()[:2]]
        source = gk.inspect(allen_cahn_step, *args, 0.2, 0.01, mode=gk.Reverse).sources["gather"]
    finally:
        allen_cahn_step._specs.clear()
    assert "_gk_gnb" in source  # the gather loops over its offsets
    assert any("_gather" in name for name in taken)  # ... and its 50-thread launch took the twin
    assert np.any(par[2] != make()[2])  # the gather wrote du


def test_loop_bodies_take_the_twin_for_one_thread_only(twins):
    """A thread body with a loop gets a twin too, run only by launches of one thread (LOOP_SERIAL_THREADS): its
    threads may be long, and two of them pay on two cores (docs/performance.md, "Loop bodies: one thread")."""
    A, x, y = np.ones((4, 3)), np.ones(3), np.zeros(4)
    gk.launch(matvec, 4, A, x, y)
    assert all(spec.code.info.serial and spec.code.info.loops for spec in _cpu_specs(matvec))
    gk.launch(saxpy, 4, 1.0, np.ones(4), y)
    assert any(spec.code.info.serial and not spec.code.info.loops for spec in _cpu_specs(saxpy))
    assert twins(lambda: gk.launch(matvec, 1, A, x, y), 256)[1] == 1
    assert twins(lambda: gk.launch(matvec, 2, A, x, y), 256)[1] == 0
    assert twins(lambda: gk.launch(matvec, 2, A, x, y), 10**9)[1] == 0
    assert twins(lambda: gk.launch(matvec, 1, A, x, y), 0)[1] == 0  # SERIAL_THREADS = 0: no twins at all


@gk.kernel
def seidel_sweep(A):
    """PolyBench seidel-2d's sweep, in place, by one thread (the red-team's dim = 1 program step)."""
    t = gk.tid()  # noqa: F841
    for i in range(1, A.shape[0] - 1):
        for j in range(1, A.shape[1] - 1):
            A[i, j] = (A[i - 1, j - 1] + A[i - 1, j] + A[i - 1, j + 1] + A[i, j - 1] + A[i, j] + A[i, j + 1]
                       + A[i + 1, j - 1] + A[i + 1, j] + A[i + 1, j + 1]) / 9.0


@gk.kernel
def loop_energy(u, w, e):
    """A loop whose adds go to an Active sum and to w's shadow: privatised targets inside a thread's loop."""
    i = gk.tid()
    for j in range(u.shape[0]):
        gk.atomic_add(e, 0, w[j] * u[j] * u[(i + j) % u.shape[0]])


def _loop_args(rng):
    return rng.uniform(-1, 1, (9, 7)), rng.uniform(-1, 1, (9, 7))


@pytest.mark.parametrize("mode", ["launch", "reverse", "forward", "split"])
def test_one_thread_loop_kernel_runs_its_twin_bit_for_bit(twins, mode):
    """dim = 1 launches of loop bodies (a Gauss-Seidel sweep in place, matvec, sums in a loop) in every mode take
    the twin, with the parallel entry's results bit for bit (the same statements in the same order)."""
    def make():
        rng = np.random.default_rng(11)
        A, dA = _loop_args(rng)
        M, x, y = rng.uniform(-1, 1, (1, 5)), rng.uniform(-1, 1, 5), np.zeros(1)
        u, w = rng.uniform(-1, 1, 6), rng.uniform(-1, 1, 6)
        return (A, dA, M, rng.uniform(-1, 1, (1, 5)), x, rng.uniform(-1, 1, 5), y, rng.uniform(-1, 1, 1),
                u, rng.uniform(-1, 1, 6), w, np.zeros(1), rng.uniform(-1, 1, 1))

    def run(A, dA, M, dM, x, dx, y, dy, u, du, w, e, de):
        if mode == "launch":
            gk.launch(seidel_sweep, 1, A)
            gk.launch(matvec, 1, M, x, y)
            gk.launch(loop_energy, 1, u, w, e)
            return None
        if mode == "split":
            fwd, rev = gk.autodiff_thunk(seidel_sweep, gk.Duplicated, dim=1)
            tape = fwd(gk.Duplicated(A, dA))
            rev(gk.Duplicated(A, dA), tape)
            fwd, rev = gk.autodiff_thunk(loop_energy, gk.Duplicated, gk.Const, gk.Duplicated, dim=1)
            tape = fwd(gk.Duplicated(u, du), w, gk.Duplicated(e, de))
            return rev(gk.Duplicated(u, du), w, gk.Duplicated(e, de), tape)
        m = gk.Reverse if mode == "reverse" else gk.Forward
        gk.autodiff(seidel_sweep, gk.Duplicated(A, dA), dim=1, mode=m)
        gk.autodiff(matvec, gk.Duplicated(M, dM), gk.Duplicated(x, dx), gk.Duplicated(y, dy), dim=1, mode=m)
        return gk.autodiff(loop_energy, gk.Duplicated(u, du), w, gk.Duplicated(e, de), dim=1, mode=m)
    par = _both(twins, make, run)
    assert not np.array_equal(par[0], _loop_args(np.random.default_rng(11))[0])  # the sweep ran


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
    if lanes and label.split("/")[0] in ("library", "hpc") or label in _COSTLY:
        return False
    return zlib.crc32(f"twin/{label}".encode()) % 6 == 0 or label.startswith("racy/")


# Drawn by the hash but `full`: the fused reverses of the library's two longest bodies cost 53 s (d2q9_step) and
# 14 s (allen_cahn_step_2d) of CPU cold, a third of this file's CI time (session 53), and d2q9_step's tangent 13 s
# (session 54). What they check stays in the sample on the same code shapes: heat_step_2d's fused reverse (a 2-D
# stencil's gather), the other stencils' tangents, and the lattice-Boltzmann body's tangent as
# local/d2q9_local/tangent, the same nine populations through local arrays (docs/testing.md, "Serial twins").
_COSTLY = {"library/d2q9_step", "library/allen_cahn_step_2d", "library/d2q9_step/tangent"}


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
