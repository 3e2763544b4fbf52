"""CuPy arrays host code makes while a program records (program/devicefresh.py, record.refuse_host_made;
docs/host-code.md#device-arrays-made-by-host-code), on fakecupy (tests/support/fakecupy.py), whose allocations
call CuPy's MemoryHook protocol as CuPy's pool does: a launch, checkpointed-loop launch, forward-mode launch or
rule call that would read one is refused before it runs, with every shadow and the program's arguments as they
were; one a launch overwrote whole first (`gk.copy`, `gk.fill`) is the program's, and its gradient is NumPy's;
arrays made before the call are not host code's. Found by the session-54 GPU tests: `w = u.copy()` of a CuPy `u`
ran with du = 0 where NumPy's program gives 2u. Gradients: float64 central differences' tolerance of
gk.check_grad against the NumPy run on Numba, 1e-10 relative (test_gpu_programs.py's, same kernels, other sums'
order)."""

from __future__ import annotations

import numpy as np
import pytest
from support.fakecupy import installed

import gradkern as gk
import gradkern.kernels as library


@pytest.fixture
def fake():
    with installed() as cupy:
        yield cupy


def _inputs(cp, n=16, seed=0):
    r = np.random.default_rng(seed)
    u0 = r.uniform(0.2, 0.8, n)
    return u0, cp.asarray(u0), cp.asarray(r.uniform(0.2, 0.8, n)), cp.zeros(1), cp.ones(1)


def _copy_then_loss(cp, how):
    def prog(u, E):
        if how == "copy":
            w = u.copy()
        elif how == "concatenate":
            w = cp.concatenate([u[: u.shape[0] // 2], u[u.shape[0] // 2:]])
        else:
            w = cp.asarray(u.get())  # through the host: still CuPy memory made while recording
        gk.launch(library.sum_squares, w.shape[0], w, E)
    return prog


@pytest.mark.parametrize("how", ["copy", "concatenate", "asarray"])
def test_a_launch_reading_a_host_made_array_is_refused(how, fake):
    u0, u, du, E, dE = _inputs(fake)
    before = [du.get(), dE.get(), u.get()]
    with pytest.raises(gk.ProgramError, match=r"launch 1 \(kernel 'sum_squares'\) takes 'w' .*host code made"):
        gk.autodiff(_copy_then_loss(fake, how), gk.Duplicated(u, du), gk.Duplicated(E, dE))
    for b, a in zip(before, (du, dE, u)):
        np.testing.assert_array_equal(a.get(), b)


def test_gk_copy_into_a_fresh_buffer_is_differentiated(fake):
    """The workaround the refusal names: the copy is a launch, so du = 2u, as NumPy's program gives."""
    u0, u, du, E, dE = _inputs(fake)
    du0 = du.get()

    def prog(u, E):
        w = fake.empty_like(u)
        gk.copy(w, u)  # overwrites w whole: the program's own from here
        gk.launch(library.sum_squares, w.shape[0], w, E)
    gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(E, dE))
    np.testing.assert_allclose(du.get(), du0 + 2 * u0, rtol=1e-12)  # accumulated into, as every shadow


def test_fresh_temporaries_written_whole_and_arrays_made_before_the_call_are_taken(fake):
    """A ping-pong buffer from cupy.zeros_like that the step overwrites whole, and a coefficient array made
    before the call and captured: the gradient equals NumPy's program on Numba."""
    u0 = np.random.default_rng(3).uniform(-0.9, 0.9, 32)

    def make(xp, coef):
        def prog(u, E, c):
            v = xp.zeros_like(u)
            for t in range(4):
                src, dst = (u, v) if t % 2 == 0 else (v, u)
                gk.launch(library.allen_cahn_step, u.shape[0], src, dst, c, 0.01)
            gk.launch(library.dot, u.shape[0], u, coef, E)
        return prog
    grads = []
    for xp in (np, fake):
        coef = xp.asarray(np.linspace(0.1, 0.9, 32))
        u, du, E, dE = xp.asarray(u0.copy()), xp.zeros(32), xp.zeros(1), xp.ones(1)
        g = gk.autodiff(make(xp, coef), gk.Duplicated(u, du), gk.Duplicated(E, dE), gk.Active(0.3))
        grads.append((du.get() if xp is fake else du, g[2]))
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-10)
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-10)


def test_a_host_write_to_an_argument_before_its_first_launch_is_refused(fake):
    """CuPy arguments are printed when the program starts: `u[0] = 0` before a launch takes u is found."""
    u0, u, du, E, dE = _inputs(fake)

    def prog(u, E):
        u[0] = 0.0
        gk.launch(library.sum_squares, u.shape[0], u, E)
    before = du.get()
    with pytest.raises(gk.ProgramError, match="host write to 'u'.*after the program started.*before launch 1"):
        gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(E, dE))
    np.testing.assert_array_equal(du.get(), before)


def test_checkpointed_and_forward_launches_refuse_it_too(fake):
    u0, u, du, E, dE = _inputs(fake)

    def looped(u, E):
        def step(t):
            w = u.copy()
            gk.launch(library.axpy, u.shape[0], 0.5, w, u)
        gk.checkpointed_loop(step, 3, snapshots=2)
        gk.launch(library.sum_squares, u.shape[0], u, E)
    before = du.get()
    with pytest.raises(gk.ProgramError, match="in step 0 of the checkpointed loop takes 'w'"):
        gk.autodiff(looped, gk.Duplicated(u, du), gk.Duplicated(E, dE))
    np.testing.assert_array_equal(du.get(), before)
    u0, u, du, E, dE = _inputs(fake, seed=1)
    before = [du.get(), dE.get()]
    with pytest.raises(gk.ProgramError, match="takes 'w' .*host code made"):
        gk.autodiff(_copy_then_loss(fake, "copy"), gk.Duplicated(u, du), gk.Duplicated(E, dE), mode=gk.Forward)
    for b, a in zip(before, (du, dE)):
        np.testing.assert_array_equal(a.get(), b)


def test_a_rule_reading_a_host_made_array_is_refused(fake):
    """A rule call's inputs are checked as a launch's; what it writes (`y`, made by cupy.empty_like) is its own."""
    @gk.custom_rule(writes=("y",))
    def double(x, y):
        y[...] = 2.0 * x

    @double.reverse
    def _(config, tape, x, y):
        return None, None

    u0, u, du, E, dE = _inputs(fake)

    def prog(u, E):
        w = u.copy()
        y = fake.empty_like(u)
        double(w, y)
        gk.launch(library.sum_squares, y.shape[0], y, E)
    before = du.get()
    with pytest.raises(gk.ProgramError, match=r"rule call 1 \('[\w.<>]*double'\) takes 'w'"):
        gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(E, dE))
    np.testing.assert_array_equal(du.get(), before)


@pytest.mark.parametrize("how", ["copy", "concatenate"])
def test_gpu_programs_host_copies_on_fake(how, fake):
    """tests/gpu/test_gpu_programs.py's check, which the GPU runs on CuPy: refused, shadows unchanged."""
    from support.fakecupy import FAKE

    from gpu import test_gpu_programs as programs
    programs.test_host_copies_of_device_arrays_are_differentiated_or_refused(how, FAKE)
