"""Scalars host code reduced from an active array inside a program (program/derived.py, docs/host-code.md,
"Scalars reduced from active arrays"): their origin is carried through host arithmetic, the scalar's own
methods and the arrays made from them, and a launch taking one is refused before anything changes; rounding
and explicit conversions are constants."""

import numpy as np
import pytest
from support.host_scalar_kernels import energy, scale_into

import gradkern as gk
from gradkern.testing import check_grad

N = 6


def _scaled(c):
    """A program whose one launch takes `c(u)`, a scalar the host computed from u."""
    def prog(u, E):
        w = np.zeros_like(u)
        gk.launch(scale_into, N, u, w, c(u))
        gk.launch(energy, N, w, E)
    return prog


def _filled(make):
    """A program launching on `make(u)`, an array the host made from a scalar computed from u."""
    def prog(u, E):
        gk.launch(energy, N, make(u), E)
    return prog


def _set(how):
    def prog(u, E):
        w = np.zeros_like(u)
        how(w, u)
        gk.launch(energy, N, w, E)
    return prog


# a scalar that stays derived (session 57 made `u.sum()`, `u.max()`, `u.dot(u)`, `u.mean()` and `u[3]` of an
# active `u` reads, which launches differentiate: tests/program/test_host_reductions.py): a median, a reduction of
# an array host code computed (np.sort)
def _d(u):
    return np.median(u)


def _fill_whole(w, u):
    w[:] = _d(u)


def _fill_method(w, u):
    w.fill(_d(u))


def _fill_element(w, u):
    w[2] = _d(u)


REFUSED = {
    # each was a silent constant before session 49 (a gradient missing d/ds), except the first four
    "abs": _scaled(lambda u: abs(-_d(u))),
    "min": _scaled(lambda u: min(_d(u), 100.0)),
    "np.sqrt": _scaled(lambda u: np.sqrt(_d(u))),
    "iteration": _scaled(lambda u: sum(np.sort(u))),
    "np.full_like": _filled(lambda u: np.full_like(u, _d(u))),
    "np.full with a dtype": _filled(lambda u: np.full(N, _d(u), dtype=np.float64)),
    "ndarray.dot": _scaled(lambda u: np.sort(u).dot(u)),
    "ndarray.mean": _scaled(lambda u: np.sort(u).mean()),
    "ndarray.std": _scaled(lambda u: u.std()),
    "ndarray.var": _scaled(lambda u: u.var()),
    "scalar.astype": _scaled(lambda u: _d(u).astype(np.float32)),
    "scalar.clip": _scaled(lambda u: _d(u).clip(0.0, 100.0)),
    "np.stack": _filled(lambda u: np.stack([_d(u)] * N)),
    "np.clip": _scaled(lambda u: np.clip(_d(u), 0.0, 100.0)),
    "a ufunc's out=": _set(lambda w, u: np.multiply(_d(u), np.ones(N), out=w.view(np.ndarray))),
    "w[:] = s": _set(_fill_whole),
    "w.fill(s)": _set(_fill_method),
    "w[2] = s": _set(_fill_element),
}


@pytest.mark.parametrize("name", list(REFUSED))
@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_a_launch_taking_what_host_code_made_from_a_derived_scalar_is_refused(rng, name, mode):
    u = rng.random(N) + 0.5
    du, E, dE = rng.random(N), np.zeros(1), np.ones(1)
    before = [x.copy() for x in (u, du, E, dE)]
    with pytest.raises(gk.ProgramError) as info:
        gk.autodiff(REFUSED[name], gk.Duplicated(u, du), gk.Duplicated(E, dE),
                    mode=gk.Forward if mode == "forward" else gk.Reverse)
    msg = str(info.value)
    assert "computed from an active array" in msg and "derivative would be lost" in msg
    assert "test_derived_scalars.py" in msg and "gradkern/program" not in msg  # the user's lines only
    for a, b in zip(before, (u, du, E, dE)):
        np.testing.assert_array_equal(a, b)  # nothing ran, no shadow changed


def test_gk_const_says_no_derivative_through_a_filled_array_is_wanted(rng):
    def prog(u, E):
        gk.launch(energy, N, gk.Const(np.full_like(u, _d(u))), E)
        gk.launch(energy, N, u, E)
    u = rng.random(N) + 0.5
    du = np.zeros(N)
    gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(np.zeros(1), np.ones(1)))
    np.testing.assert_allclose(du, 2 * u, rtol=1e-13)  # the second launch's d/du sum u^2 only


def test_a_rounded_scalar_is_a_constant_and_its_gradient_is_right(rng):
    """round() of a derived scalar is piecewise constant: its derivative is zero wherever it has one, so the
    program's gradient with it as a constant is the gradient (central differences agree)."""
    prog = _scaled(lambda u: round(u.sum(), 1) + np.floor(u.max()))
    u = rng.random(N) + 0.5
    check_grad(prog, gk.Duplicated(u, np.zeros(N)), gk.Duplicated(np.zeros(1), np.ones(1)))


def _scratch(alloc, use):
    """A program summing u*u into a scratch array host code allocated without an array argument, then handing
    what it reads from it to a launch (TeaLeaf's PPCG port: the CG presteps' alphas from `np.zeros(1)`
    reductions, an eigenvalue bound from them scaling the solver)."""
    def prog(u, E):
        out = alloc()
        gk.launch(energy, N, u, out)
        w = np.zeros_like(u)
        gk.launch(scale_into, N, u, w, use(out))
        gk.launch(energy, N, w, E)
    return prog


SCRATCH = {"np.zeros(1)": lambda: np.zeros(1), "np.empty(1) filled": lambda: _filled_empty(),
           "np.ones(1) * 0": lambda: np.ones(1) - 1.0, "np.full(1, 0.0)": lambda: np.full(1, 0.0)}
# (`out[0]` and `out[0] / 3` are reads since session 57, differentiated: test_host_reductions.py)
READS = {"max of np.array of reads": lambda out: np.linalg.eigvalsh(np.diag(np.array([out[0], 2 * out[0]]))).max()}


def _filled_empty():
    out = np.empty(1)
    gk.fill(out, 0.0)
    return out


@pytest.mark.parametrize("alloc", list(SCRATCH))
@pytest.mark.parametrize("read", list(READS))
def test_reads_of_a_scratch_array_allocated_without_an_array_argument_are_refused(rng, alloc, read):
    """Before session 56 `np.zeros(1)` (`np.empty`, `np.ones`, `np.full` with a plain value) made a plain ndarray,
    whose reads after a launch wrote it were plain numbers: a launch taking one ran, and the gradient lacked
    d out / du (d/du[0] 0.19 where central differences give 0.77, no error). Such arrays are now TrackedArrays
    while a program records, as `np.zeros_like(u)` is, so the read carries its origin and the launch is refused
    naming the line."""
    u = rng.random(N) + 0.5
    du, E, dE = rng.random(N), np.zeros(1), np.ones(1)
    before = [x.copy() for x in (u, du, E, dE)]
    with pytest.raises(gk.ProgramError, match=r"computed from an active array.*test_derived_scalars\.py:\d+"):
        gk.autodiff(_scratch(SCRATCH[alloc], READS[read]), gk.Duplicated(u, du), gk.Duplicated(E, dE))
    for a, b in zip(before, (u, du, E, dE)):
        np.testing.assert_array_equal(a, b)


def test_a_scratch_array_allocated_without_an_array_argument_is_differentiated_and_compared(rng):
    """The same scratch read for control flow only (a branch on it) and launched into: the gradient is the
    program's (central differences agree)."""
    def prog(u, E):
        out = np.zeros(1)
        gk.launch(energy, N, u, out)
        w = np.zeros(N)
        gk.launch(scale_into, N, u, w, 2.0 if out[0] > 1.0 else 3.0)
        gk.launch(energy, N, w, E)
        gk.launch(energy, 1, out, E)
    u = rng.random(N) + 0.5
    check_grad(prog, gk.Duplicated(u, np.zeros(N)), gk.Duplicated(np.zeros(1), np.ones(1)))
