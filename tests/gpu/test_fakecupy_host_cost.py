"""The host cost of CuPy launches, on fakecupy (tests/support/fakecupy.py): a CuPy call's signature is kept as
a NumPy call's is (runtime/callkey.py `_device_key`: the second call binds nothing), every check the key skips
still refuses what the full path refuses, and a program on CuPy arrays reads nothing back per step (the
host-write guard's prints compared 256 at a time, the Active scalars' derivatives summed when read:
docs/programs.md, "On a GPU: no synchronisation per step"). Each read of a device array back to the host is a
synchronisation on a GPU; the fake counts them."""

from __future__ import annotations

import numpy as np
import pytest
from support.fakecupy import FAKE, installed
from support.ported_harness import on_interpreter

import gradkern as gk
import gradkern.kernels as library
import gradkern.runtime.call as runtime_call
from gradkern.kernels.blas import saxpy


@pytest.fixture(autouse=True)
def fake():
    with installed() as cupy:
        yield cupy


@pytest.fixture
def binds(monkeypatch):
    """The number of calls prepared in full (runtime/call.py's `_launch`, `_reverse`) since the fixture was made."""
    count = [0]
    for name in ("_launch", "_reverse"):
        real = getattr(runtime_call, name)

        def counted(*a, real=real, **k):
            count[0] += 1
            return real(*a, **k)
        monkeypatch.setattr(runtime_call, name, counted)
    return count


@pytest.fixture
def reads(fake, monkeypatch):
    """Device-to-host reads (each a synchronisation on a GPU), by ndarray.get and the scalar conversions."""
    count = [0]
    for name in ("get", "item", "__float__", "__bool__", "__int__", "tolist"):
        real = getattr(fake.ndarray, name)

        def counted(self, *a, real=real, **k):
            count[0] += 1
            return real(self, *a, **k)
        monkeypatch.setattr(fake.ndarray, name, counted)
    return count


def test_a_cupy_call_is_prepared_once(fake, binds):
    x, y, dx, dy = (fake.asarray(np.random.default_rng(k).random(40)) for k in range(4))
    for _ in range(3):
        gk.launch(saxpy, 40, 1.5, x, y)
    assert binds[0] == 1
    for _ in range(3):
        gk.autodiff(saxpy, gk.Active(1.5), gk.Duplicated(x, dx), gk.Duplicated(y, dy), dim=40)
    assert binds[0] == 2
    # another array of the same geometry: the same signature
    gk.launch(saxpy, 40, 1.5, fake.zeros(40), y)
    assert binds[0] == 2


def test_the_key_refuses_what_the_full_path_refuses(fake):
    """Each call below has the geometry of a call kept before, and one check that reads its address fails: the
    key sends it to the full path, which raises, and nothing changes."""
    mem = fake.zeros(16)
    mem.data.mem.size = 64  # as if CuPy had allocated 64 bytes: the fake's NumPy buffer cannot be overrun
    y = fake.ones(4)
    gk.launch(saxpy, 4, 1.0, fake.ndarray((4,), np.float64, mem.data + 8), y)  # kept: inside, aligned
    with pytest.raises(gk.LaunchError, match="multiple of its item size"):
        gk.launch(saxpy, 4, 1.0, fake.ndarray((4,), np.float64, mem.data + 4), y)
    with pytest.raises(gk.LaunchError, match="reaches outside"):
        gk.launch(saxpy, 4, 1.0, fake.ndarray((4,), np.float64, mem.data + 40), y)
    z = fake.zeros(8)
    gk.launch(saxpy, 4, 1.0, z[:4], z[4:])  # kept: disjoint views of one allocation
    with pytest.raises(gk.AliasingError, match="overlap"):
        gk.launch(saxpy, 4, 1.0, z[:4], z[2:6])
    np.testing.assert_array_equal(y.get(), np.ones(4))
    np.testing.assert_array_equal(z.get(), np.zeros(8))


def test_the_current_device_is_checked_at_every_call(fake, monkeypatch):
    x, y = fake.ones(8), fake.ones(8)
    gk.launch(saxpy, 8, 1.0, x, y)
    monkeypatch.setattr(fake.cuda.runtime, "getDevice", lambda: 1)
    with pytest.raises(gk.LaunchError, match="lives on GPU 0 but the current device is GPU 1"):
        gk.launch(saxpy, 8, 1.0, x, y)
    np.testing.assert_array_equal(y.get(), np.full(8, 2.0))


def _allen_cahn(steps):
    def prog(u, v, E, c):
        a, b = u, v
        for _ in range(steps):
            gk.launch(library.allen_cahn_step, a.shape[0], a, b, c, 0.01)
            a, b = b, a
        gk.launch(library.sum_squares, a.shape[0], a, E)
    return prog


def test_a_program_on_cupy_reads_back_a_few_times_not_per_step(fake, reads, monkeypatch):
    """300 recorded steps with an Active scalar: the guard's 600 deferred prints of 301 launches compared in 2
    reads (256 at a time), the rest and every buffer's in 2 when the program returns; the scalar's 300
    derivatives read in 2 (256 at a time, and at the end): 6, where each step read twice before; the gradient
    is the NumPy program's (on the interpreter: docs/testing.md "Test time"), to test_gpu_programs.py's
    tolerance (the fake's per-block sums add in another order)."""
    on_interpreter(monkeypatch)
    steps, n = 300, 16
    r = np.random.default_rng(3)
    arrays = [r.uniform(0.2, 0.8, n), r.uniform(0.2, 0.8, n), np.zeros(1)]
    seeds = [r.random(n), r.random(n), np.ones(1)]
    prog = _allen_cahn(steps)
    want_shadows = [s.copy() for s in seeds]
    want = gk.autodiff(prog, *[gk.Duplicated(a.copy(), s) for a, s in zip(arrays, want_shadows)], gk.Active(0.2))
    shadows, primals = [FAKE.to(s) for s in seeds], [FAKE.to(a) for a in arrays]
    reads[0] = 0
    got = gk.autodiff(prog, *[gk.Duplicated(a, s) for a, s in zip(primals, shadows)], gk.Active(0.2))
    assert reads[0] <= 6, reads[0]
    assert type(got[3]) is float
    np.testing.assert_allclose(got[3], want[3], rtol=1e-10)
    for a, b in zip(shadows, want_shadows):
        np.testing.assert_allclose(a.get(), b, rtol=1e-10, atol=1e-13)


def test_a_host_write_found_by_a_deferred_check_names_its_launch(fake):
    """The guard compares the prints of a recorded launch's buffers later (256 at a time): a host write
    between launches 10 and 11 is still refused naming both, before the sweep changes any shadow."""
    n = 16
    r = np.random.default_rng(5)
    u, v, E = FAKE.to(r.random(n)), FAKE.to(r.random(n)), fake.zeros(1)
    du, dv, dE = FAKE.to(r.random(n)), FAKE.to(r.random(n)), fake.ones(1)
    before = [d.get() for d in (du, dv, dE)]
    alias = u[:]

    def prog(u, v, E, c):
        a, b = u, v
        for t in range(40):
            gk.launch(library.allen_cahn_step, n, a, b, c, 0.01)
            a, b = b, a
            if t == 9:
                alias[2] = 5.0  # u was written by launch 10 (t = 9 writes b = u)
        gk.launch(library.sum_squares, n, a, E)
    with pytest.raises(gk.ProgramError, match=r"host write to .*'u'.*after launch 10 .*found before launch 11"):
        gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Duplicated(E, dE), gk.Active(0.2))
    for b, d in zip(before, (du, dv, dE)):
        np.testing.assert_array_equal(d.get(), b)


@pytest.mark.parametrize("when", ["first forward", "recomputed"])
def test_a_host_write_in_a_checkpointed_step_is_still_refused(fake, when):
    """A checkpointed loop's launches defer their checks too: a host write in its first forward is refused when
    the program returns, with no shadow changed; one in a step the schedule recomputes (the step writes only
    when run again) is refused before the reverse of the segment that would read it (Loop._give_back), leaving
    a partial gradient, as the immediate check did."""
    n, steps = 16, 8
    r = np.random.default_rng(8)
    u, v, E = FAKE.to(r.random(n)), FAKE.to(r.random(n)), fake.zeros(1)
    du, dv, dE = FAKE.to(r.random(n)), FAKE.to(r.random(n)), fake.ones(1)
    before = [d.get() for d in (du, dv, dE)]
    alias = v[:]
    runs = set()

    def prog(u, v, E, c):
        def step(t):
            a, b = (u, v) if t % 2 == 0 else (v, u)
            gk.launch(library.allen_cahn_step, n, a, b, c, 0.01)
            if t == 2 and (when == "first forward" or t in runs):
                alias[3] = 5.0  # v, written by this launch, changed by the host before the next launch takes it
            runs.add(t)
        gk.checkpointed_loop(step, steps, snapshots=2)
        gk.launch(library.sum_squares, n, u, E)
    with pytest.raises(gk.ProgramError, match=r"host write to .*'v'") as err:
        gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Duplicated(E, dE), gk.Active(0.2))
    if when == "first forward":
        assert "no shadow was changed" in str(err.value)
        for b, d in zip(before, (du, dv, dE)):
            np.testing.assert_array_equal(d.get(), b)
    else:
        assert "recomputed" in str(err.value)
