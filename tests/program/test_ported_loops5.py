"""A fifth round of third-party host loops as programs (docs/programs.md, "Ported host loops", session 52): the
ports in tests/support/ported_loops5*.py (SciPy's adaptive Runge-Kutta step control with rejections, PelePhysics-
like reaction sub-cycling, a CVODE-like Newton loop, miniWeather's alternating dimension split with a history
array, HPGMG-FV's recursive V-cycle, Stam's stable fluids, DiffTaichi's mass_spring optimisation loop, CoMD's
velocity Verlet with a host-rebuilt neighbour list, PENNANT's staggered hydro cycle, Nekbone's CG with a
gather-scatter, Laghos' RK2-average), leaning on host control flow that reads primal values. Each port's store-all
gradient is checked against float64 central differences and by the dot-product test (random non-zero inputs;
test_ported_loops.py's checks, which also compare the primals after the gradient with a primal run bit for bit),
its checkpointed gradient against the store-all one where its loop is checkpointable; the spellings gradkern
refuses are refused naming the line and the spelling that works, which is ported too. stable_fluids' and pennant's
gradient and checkpoint checks are marked `full` (CI's sample covers their patterns: see FULL)."""

from __future__ import annotations

import numpy as np
import pytest
from support import ported_loops5 as p5
from support import ported_loops5_apps as pa
from support.ported_harness import on_interpreter
from support.ported_loops_checks import port_tests

import gradkern as gk
from gradkern.testing import check_grad

from .test_ported_loops import _check_against_differences, _gradient, _refused, _u, checkpointed, plain
from .test_ported_loops3 import _gradients_agree, _weights
from .test_ported_solvers import _same_gradients

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


def _zones(rng, nz=6):
    """Staggered-mesh point positions: increasing, spacing within 20% of 1."""
    return np.cumsum(np.concatenate([[0.0], rng.uniform(0.8, 1.2, nz)]))


def _specs(rng):
    """name -> (program factory taking `loop`, arguments as (kind, value)), as test_ported_loops.py's _ports."""
    px = _zones(rng)
    xc, vc = pa.comd_state(rng)
    return {
        "miniweather": (p5.miniweather, [("dup", _u(rng, 6, 7)), ("dup", np.zeros((4, 4, 5))), ("active", 0.4),
                                         ("int", 4)]),
        "vcycle": (p5.vcycle, [("dup", _u(rng, 9, 9)), ("dup", _u(rng, 9, 9)), ("active", 2.0), ("int", 2)]),
        "stable_fluids": (p5.stable_fluids, [("dup", _u(rng, 6, 6, lo=-1.0, hi=1.0)),
                                             ("dup", _u(rng, 6, 6, lo=-1.0, hi=1.0)), ("dup", _u(rng, 6, 6)),
                                             ("active", 0.05), ("int", 2)]),
        "comd": (lambda loop: pa.comd(loop, every=1), [("dup", xc), ("dup", vc), ("active", 1.0), ("int", 4)]),
        "pennant": (pa.pennant, [("dup", px), ("dup", _u(rng, 7, lo=-0.2, hi=0.2)), ("dup", _u(rng, 6, lo=1.0, hi=2.0)),
                                 ("const", _u(rng, 6)), ("active", 1.4), ("int", 4)]),
        "nekbone": (pa.nekbone, [("dup", _u(rng, 4, 4)), ("dup", np.zeros((4, 4))), ("active", 0.5), ("int", 3)]),
        "laghos": (pa.laghos, [("dup", px.copy()), ("dup", _u(rng, 7, lo=-0.2, hi=0.2)),
                               ("dup", _u(rng, 6, lo=1.0, hi=2.0)), ("dup", np.zeros((4, 6))), ("const", _u(rng, 6)),
                               ("active", 1.4), ("int", 4)]),
    }


# beyond CI's budget (docs/testing.md): each compiles five kernels of its own for 8 to 15 s of CPU; their patterns
# have cheaper twins CI runs (vcycle's Jacobi host loop, laghos' staggered hydro, LULESH's and CloverLeaf's dt kernels)
FULL = ("stable_fluids", "pennant")
PORTS = [pytest.param(name, marks=pytest.mark.full) if name in FULL else name
         for name in _specs(np.random.default_rng(0))]


# Every port's gradient (finite differences, the dot-product test) and its checkpointed twin run in CI on the
# interpreter: the transforms' output and the program layer, which never looks at a kernel's body, without a compile
# (the Numba kernels of these ports cost 3-10 s of CPU each to compile, the interpreter's check of every port a few
# seconds: docs/testing.md "Test time", session 52). The Numba backend's gradient runs in CI for NUMBA_SAMPLE
# (miniweather, vcycle), the others' under `full`.
NUMBA_SAMPLE = {"miniweather", "vcycle"}
# The checkpointed twin: gk.checkpointed_loop(step, nsteps, snapshots=2) around the port's loop: the store-all gradient
# and primals.
globals().update(port_tests(_specs, NUMBA_SAMPLE, _check_against_differences, _same_gradients, loop=plain, ports=PORTS))


# -- control flow on primal values ----------------------------------------------------------------------------------
def test_rk_adaptive_rejects_steps_on_the_host_and_differentiates_the_path_run():
    """rk.py's step control: the first trial step (h0 = 0.6) is rejected by the host's `err[0] / n <= 1`, later
    ones accepted, the last cut to t_end; h and t live in one-element arrays a kernel updates, so the gradient
    (d h / d state included) matches central differences along the path run."""
    rng = np.random.default_rng(10)
    spec = [("dup", _u(rng, 6)), ("active", 0.8)]
    probe = []
    p5.rk_adaptive(probe)(spec[0][1].copy(), spec[1][1])
    assert probe[0] is False and True in probe and 3 <= len(probe) < 40, probe
    taken = []
    _check_against_differences(p5.rk_adaptive(taken), spec, np.random.default_rng(11))
    assert taken == probe * (len(taken) // len(probe)), taken  # every perturbed run took the same path


def test_rk_adaptive_with_h_on_the_host_is_differentiated():
    """`h = h * min(5.0, max(0.2, 0.9 / np.sqrt(np.sqrt(err[0] / n))))` (rk.py's factor on the host) then
    gk.fill(hh, h): refused at the fill naming the element read's line until session 57; now `err[0]` is a read and
    `np.sqrt` of it a one-thread launch (program/hostreads.py): central differences agree."""
    rng = np.random.default_rng(12)
    check_grad(p5.rk_adaptive_host_h, gk.Duplicated(_u(rng, 6), np.zeros(6)), gk.Active(0.8))


def test_reaction_subcycles_a_count_from_the_rate_maximum():
    """`nsub = max(1, int(np.ceil(dt * np.abs(rate).max() / cfl)))`: a rounding of a derived scalar is a
    constant (piecewise), so the gradient along the counts run matches central differences; the counts differ
    between steps (the rate changes), and the checkpointed loop, which recomputes the count from the step's
    state, gives the store-all gradient."""
    rng = np.random.default_rng(13)
    spec = [("dup", _u(rng, 6, lo=0.2, hi=0.8)), ("active", 3.0), ("int", 3)]
    counts = []
    _check_against_differences(p5.subcycle(plain, counts=counts), spec, np.random.default_rng(14))
    assert len(set(counts[:3])) > 1 and min(counts) >= 2, counts
    _same_gradients(p5.subcycle, spec)


def test_newton_stops_on_the_host_test_before_the_cap():
    """CVODE's `if (del <= tol) break` on the update's norm summed by the kernel, maxcor 8: each backward-Euler
    step converges in 3 to 7 iterations; the gradient of the iterations run matches central differences, and the
    checkpointed loop's is the store-all one."""
    rng = np.random.default_rng(15)
    spec = [("dup", _u(rng, 6)), ("const", _u(rng, 6)), ("active", 1.5), ("int", 3)]
    iterations = []
    _check_against_differences(p5.newton(plain, iterations=iterations), spec, np.random.default_rng(16))
    assert all(3 <= m < 8 for m in iterations), iterations
    _same_gradients(p5.newton, spec)


# -- host state kept outside a checkpointed step --------------------------------------------------------------------
def _weather_spec(rng):
    return [("dup", _u(rng, 6, 7)), ("dup", np.zeros((4, 4, 5))), ("active", 0.4), ("int", 4)]


def test_miniweather_direction_switch_in_a_plain_loop_is_the_parity_spelling():
    """miniWeather's `direction_switch = !direction_switch` (a host flag) in a plain loop: the gradient of the
    t % 2 spelling, bit for bit."""
    spec = _weather_spec(np.random.default_rng(17))
    weights = _weights(spec, 18)
    _gradients_agree(_gradient(p5.miniweather(plain), spec, weights),
                     _gradient(p5.miniweather_switch(plain), spec, weights))


def test_miniweather_direction_switch_in_a_checkpointed_step_is_refused_naming_the_launch():
    """The same flag toggled inside a checkpointed step: a recomputed step finds it as the forward left it and
    splits in the other order. Refused while the reverse recomputes it, naming the user's line of the launch that
    differs and the spelling that works (derive it from t)."""
    rng = np.random.default_rng(19)
    spec = _weather_spec(rng)
    args = [gk.Duplicated(spec[0][1].copy(), rng.random((6, 7))), gk.Duplicated(np.zeros((4, 4, 5)),
                                                                                rng.random((4, 4, 5))),
            gk.Active(0.4), 4]
    match = (r"step \d of the checkpointed loop launched '_copy1' .*\('_copy1'\), at "
             r".*ported_loops5\.py:\d+ \(`gk\.copy\(s\[")
    _, error = _refused(gk.ProgramError, match, p5.miniweather_switch(checkpointed), *args)
    assert "t % 2" in str(error) and "direction_switch" in str(error)


def test_comd_list_rebuilt_every_k_steps_gives_the_every_step_gradient():
    """CoMD's neighbour list rebuilt on the host every 3 steps (the cells from np.floor(...).astype(np.int64),
    the distance test a boolean image: integer data, no derivative) and kept in a host variable between: the
    forces are the same as with a list rebuilt every step (the skin covers the motion), so the gradient is too
    (the pairs' atomic adds in another order: a few ulps); central differences agree."""
    rng = np.random.default_rng(20)
    x, v = pa.comd_state(rng)
    spec = [("dup", x), ("dup", v), ("active", 1.0), ("int", 6)]
    rebuilt = []
    weights = _weights(spec, 21)
    _gradients_agree(_gradient(pa.comd(plain, every=1), spec, weights),
                     _gradient(pa.comd(plain, every=3, rebuilt=rebuilt), spec, weights))
    assert rebuilt == [0, 3], rebuilt
    _check_against_differences(pa.comd(plain, every=3), spec, np.random.default_rng(22))


def test_comd_list_kept_between_checkpointed_steps_is_refused_naming_the_launch():
    """The list kept in a host variable between checkpointed steps: a recomputed step launches on the list the
    forward left (other arrays); refused naming the force launch's line and the every-step rebuild."""
    rng = np.random.default_rng(23)
    x, v = pa.comd_state(rng)
    args = [gk.Duplicated(x, rng.random(x.shape)), gk.Duplicated(v, rng.random(v.shape)), gk.Active(1.0), 6]
    _, error = _refused(gk.ProgramError, r"launched 'comd_force' .*\('comd_force'\), at .*ported_loops5_apps\.py:\d+ "
                                         r"\(`gk\.launch\(comd_force", pa.comd(checkpointed, every=3), *args)
    assert "rebuild it in every step" in str(error)


# -- an optimisation driver around gk.autodiff of the whole program -------------------------------------------------
def test_mass_spring_gradient_steps_raise_the_objective():
    """DiffTaichi's loop: gk.autodiff of the whole simulation each iteration, a step along the gradient of the
    head's position; it rises at every iteration (a small step along the exact gradient), and the program's
    gradient matches central differences and the dot-product test at the optimiser's last point."""
    rng = np.random.default_rng(24)
    x0 = np.arange(6.0) + _u(rng, 6, lo=-0.1, hi=0.1)
    v0 = _u(rng, 6, lo=0.05, hi=0.2)
    act = _u(rng, 5, lo=-0.5, hi=0.5)
    losses, grad = pa.mass_spring_optimise(x0, v0, act, 0.8, iters=3, lr=0.05)
    assert losses[2] > losses[1] > losses[0] and np.abs(grad).max() > 0, losses
    spec = [("dup", x0), ("dup", v0), ("dup", act), ("dup", np.zeros(1)), ("active", 0.8), ("int", 8)]
    _check_against_differences(pa.mass_spring, spec, np.random.default_rng(25))


# -- periodic wrap on the host ----------------------------------------------------------------------------------------
@gk.kernel
def _upwind_from(state, west, tend, c):
    k, i = gk.tid()
    tend[k, i] = -c * (state[k, i] - west[k, i])


def _weather_roll(state, tend, c):
    """miniWeather's x tendency as a NumPy port writes its periodic neighbour: np.roll of the state."""
    west = np.roll(state, 1, axis=1)
    gk.launch(_upwind_from, state.shape, state, west, tend, c)


def test_periodic_wrap_by_np_roll_is_differentiated(monkeypatch):
    """np.roll of an active array is two copy launches inside a program (session 53, program/hostshapes.py; refused
    naming its line before): the gradient matches central differences and the dot-product test."""
    on_interpreter(monkeypatch)  # no compile (docs/testing.md, "Test time")
    rng = np.random.default_rng(26)
    spec = [("dup", _u(rng, 4, 5)), ("dup", np.zeros((4, 5))), ("active", 0.4)]
    _check_against_differences(_weather_roll, spec, rng)


def _wrap_by_slices(state, tend, c):
    """The periodic neighbour by slicing on the host (`west[:, 1:] = state[:, :-1]`, then the wrapped column):
    the first assignment into the fresh array is a copy launch; the second writes into the array it took."""
    west = np.zeros_like(state)
    west[:, 1:] = state[:, :-1]
    west[:, 0] = state[:, -1]
    gk.launch(_upwind_from, state.shape, state, west, tend, c)


def test_periodic_wrap_by_host_slices_is_refused_naming_the_second_write():
    """Before: refused as 'a host write to 'west', ..., after launch 1', without the line (guard.py's
    refuse_write). Now the message names the line and its text, and gk.copy (write the wrapped column with
    gk.copy(west[:, :1], state[:, -1:]))."""
    rng = np.random.default_rng(27)
    args = [gk.Duplicated(_u(rng, 4, 5), rng.random((4, 5))), gk.Duplicated(np.zeros((4, 5)), rng.random((4, 5))),
            gk.Active(0.4)]
    shadows, error = _refused(gk.ProgramError, r"host write to 'west' at .*test_ported_loops5\.py:\d+ "
                                               r"\(`west\[:, 0\] = state\[:, -1\]`\)", _wrap_by_slices, *args)
    assert "gk.copy(dst, src)" in str(error)
    for a, s in zip(args[:2], shadows):
        np.testing.assert_array_equal(a.dval, s)
