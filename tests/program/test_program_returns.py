"""What a program (or a checkpointed step) returns is not differentiated; a returned value whose derivative no
argument's shadow carries is refused naming what came (program/returns.py, docs/programs.md#what-a-program-returns),
so a loss returned instead of written into a seeded array never gives all-zero derivatives silently. Values without
such a derivative (None, counters, float(s), a.view(np.ndarray), the program's own arguments, values computed from
them) are still taken and dropped."""

import numpy as np
import pytest

import gradkern as gk

N = 6


@gk.kernel
def square(u, w):
    i = gk.tid()
    w[i] = u[i] * u[i]


@gk.kernel
def total(w, E):
    i = gk.tid()
    gk.atomic_add(E, 0, w[i])


RETURNS = {
    "element of a temporary": (lambda u, w, E, c: w[2], r"a scalar host code computed from a temporary"),
    "host sum": (lambda u, w, E, c: w.sum() * 0.5, r"a scalar host code computed from a temporary"),
    "temporary": (lambda u, w, E, c: w, r"a temporary array \(shape \(6,\)\)"),
    # (w * 2.0 and, since session 57, w % 2.0 are launches; np.logaddexp stays a host computation)
    "host array": (lambda u, w, E, c: np.logaddexp(w, 2.0), r"an array host code computed from a temporary"),
    "twice from a temporary": (lambda u, w, E, c: (w * 2.0 + 1.0)[0],
                               r"a scalar host code computed from a temporary"),
    "Active scalar": (lambda u, w, E, c: 2.0 * c, r"an Active scalar"),
    "nested": (lambda u, w, E, c: {"loss": [1, (w[0],)]}, r"a scalar host code computed from a temporary"),
}
TAKEN = {
    "None": lambda u, w, E, c: None,
    "counter": lambda u, w, E, c: 3,
    "float()": lambda u, w, E, c: float(w[2]),
    "plain view": lambda u, w, E, c: w.view(np.ndarray),
    "its arguments": lambda u, w, E, c: (u, E),
    "c.value": lambda u, w, E, c: c.value,
    "the loss's element": lambda u, w, E, c: E[0],  # E is seeded: a plain call returns the loss, autodiff its gradient
    "from an argument": lambda u, w, E, c: np.logaddexp(E, 2.0).sum() + u.max(),  # (E % 2.0: a launch's temporary)
}


def _program(returned):
    def prog(u, E, c):
        w = np.zeros_like(u)
        gk.launch(square, N, u, w)
        gk.launch(total, N, w, E)
        return returned(u, w, E, c)
    return prog


def _args(rng):
    u, E = rng.random(N) + 0.5, np.zeros(1)
    return u, np.zeros(N), E, np.ones(1)


def _call(way, prog, u, du, E, dE):
    if way == "reverse":
        return gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(E, dE), gk.Active(0.7))
    if way == "forward":
        return gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(E, dE), gk.Duplicated(0.7, 1.0),
                           mode=gk.Forward)
    forward, _ = gk.autodiff_thunk(prog, gk.Duplicated, gk.Duplicated, gk.Active)
    return forward(gk.Duplicated(u, du), gk.Duplicated(E, dE), gk.Active(0.7))


@pytest.mark.parametrize("way", ["reverse", "forward", "thunk"])
@pytest.mark.parametrize("name", sorted(RETURNS))
def test_a_returned_derivative_is_refused(rng, way, name):
    returned, what = RETURNS[name]
    if way == "forward" and name == "Active scalar":
        what = r"an Active scalar"
    u, du, E, dE = _args(rng)
    du[:] = rng.random(N) + 0.5 if way == "forward" else du
    du0, dE0 = du.copy(), dE.copy()
    prog = _program(returned)
    with pytest.raises(gk.ProgramError, match=rf"program 'prog' returned {what}.*its derivative would be lost"):
        _call(way, prog, u, du, E, dE)
    if way != "forward":  # reverse and split: the reverse never started (docs/programs.md#when-a-program-raises)
        np.testing.assert_array_equal(du, du0)
        np.testing.assert_array_equal(dE, dE0)
    assert u.flags.writeable and E.flags.writeable


@pytest.mark.parametrize("name", sorted(TAKEN))
def test_a_return_without_derivative_is_taken(rng, name):
    u, du, E, dE = _args(rng)
    u0 = u.copy()
    _call("reverse", _program(TAKEN[name]), u, du, E, dE)
    np.testing.assert_allclose(du, 2.0 * u0, rtol=1e-15)  # d(sum u^2)/du, E's shadow seeded with ones
    np.testing.assert_allclose(E, [np.sum(u0 * u0)], rtol=1e-14)


def test_a_step_returning_a_derivative_is_refused(rng):
    u, du = rng.random(N) + 0.5, np.zeros(N)
    E, dE = np.zeros(1), np.ones(1)

    def prog(u, E):
        w = np.zeros_like(u)

        def step(t):
            gk.launch(square, N, u, w)
            gk.launch(total, N, w, E)
            return w[0]
        gk.checkpointed_loop(step, 3, snapshots=1)

    with pytest.raises(gk.ProgramError, match=r"step 'step' returned a scalar host code computed from a temporary"):
        gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(E, dE))
    np.testing.assert_array_equal(du, 0.0)
    np.testing.assert_array_equal(dE, 1.0)


def test_plain_calls_return_what_the_program_returns(rng):
    """Outside a differentiating verb a program is a Python function: its value comes back unchecked."""
    u, _, E, _ = _args(rng)
    got = _program(RETURNS["element of a temporary"][0])(u, E, 0.7)
    assert got == pytest.approx(u[2] * u[2])
