"""Temporal blocking in a checkpointed loop's recomputation (program/recompute.py `PendingRun`,
docs/checkpointed-loops.md#temporal-blocking-of-recomputed-steps): the gradients, Active derivatives and final
primals with recomputed runs of launches blocked equal bit for bit those with every launch run by itself
(GRADKERN_TEMPORAL=0), on programs whose steps run one or two launches over ping-pong buffers, and on programs
whose steps the runtime refuses to block (they run one by one, the reason recorded)."""

from __future__ import annotations

import numpy as np
import pytest
from fuzz.test_race_fuzz import _HAS_GPP

import gradkern as gk
from gradkern.kernels import allen_cahn_step, allen_cahn_step_2d
from gradkern.program import checkpoint
from gradkern.runtime import blocked
from program.test_checkpoint import PROGRAMS, args_for, checkpointed, loop_entry, one_launch_per_step

ALL = {**PROGRAMS, "one_launch_per_step": one_launch_per_step}


def _gradient(name, snapshots, n, nsteps):
    make = ALL[name]
    args = args_for("heat_ping_pong" if name == "one_launch_per_step" else name, n, nsteps)
    fwd, rev = gk.autodiff_thunk(make(checkpointed(snapshots)), *[type(a) if isinstance(a, gk.Annotation)
                                                                   else gk.Const for a in args])
    tape = fwd(*args)
    got = rev(*args, tape)
    arrays = [a for a in args if isinstance(a, (gk.Duplicated, gk.Const))]
    assert all(a.val.flags.writeable for a in arrays)  # the guard's read-only flags are given back
    result = ([a.dval.copy() for a in arrays if isinstance(a, gk.Duplicated)], [g for g in got if g is not None],
              [a.val.copy() for a in arrays])
    return result, loop_entry(tape)


def _split(program, n, nsteps):
    """`program` (u, v, E, c, k) of heat_ping_pong's arguments run in split mode: the arguments, the reverse's
    results and the tape."""
    args = args_for("heat_ping_pong", n, nsteps)
    fwd, rev = gk.autodiff_thunk(program, gk.Duplicated, gk.Duplicated, gk.Duplicated, gk.Active, gk.Const)
    tape = fwd(*args)
    return args, rev(*args, tape), tape


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("snapshots", [2, 4])
def test_blocked_recomputation_gives_the_same_gradients_bit_for_bit(name, snapshots, monkeypatch):
    n, nsteps = 41, 30
    monkeypatch.setattr(blocked, "MIN_BYTES", 0)  # every run held, however small the state
    monkeypatch.setattr(blocked, "TILE", 7)
    monkeypatch.setattr(checkpoint, "TEMPORAL", False)
    want, loop = _gradient(name, snapshots, n, nsteps)
    assert loop.stats.steps_blocked == 0
    monkeypatch.setattr(checkpoint, "TEMPORAL", True)
    got, loop = _gradient(name, snapshots, n, nsteps)
    for a, b in zip(want, got, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(np.asarray(y), np.asarray(x))
    if name in ("heat_ping_pong", "one_launch_per_step"):
        assert loop.stats.steps_blocked >= 8, loop.blocking_refused
    else:  # in_place_and_stencil, time_dependent: no ping-pong of one step kernel, or a refused one
        assert loop.stats.steps_recomputed > 0


@pytest.mark.parametrize("snapshots", [2, 4])
def test_the_first_forward_blocks_between_its_snapshots(snapshots, monkeypatch):
    """The first forward holds its runs too: each open snapshot copies a buffer before a launch first writes it,
    so the launches held before that run first (checkpoint.py `copies_before`); the gradient above compares the
    whole result bit for bit, here the forward alone is seen to block."""
    monkeypatch.setattr(blocked, "MIN_BYTES", 0)
    monkeypatch.setattr(blocked, "TILE", 7)
    args = args_for("heat_ping_pong", 41, 30)
    fwd, rev = gk.autodiff_thunk(one_launch_per_step(checkpointed(snapshots)), *[
        type(a) if isinstance(a, gk.Annotation) else gk.Const for a in args])
    tape = fwd(*args)
    assert loop_entry(tape).stats.steps_blocked >= 4
    rev(*args, tape)


def test_small_states_are_never_held(monkeypatch):
    monkeypatch.setattr(blocked, "MIN_BYTES", 1 << 30)
    _, loop = _gradient("one_launch_per_step", 3, 41, 30)
    assert loop.stats.steps_blocked == 0 and not loop.blocking_refused


READS = {  # host code reading the state through the TrackedArray a step was given, each way NumPy offers
    "sum": lambda a: float(a.sum()), "element": lambda a: float(a[3]), "item": lambda a: a.item(3),
    "tolist": lambda a: a.tolist()[3], "argmax": lambda a: int(a.argmax()), "iter": lambda a: float(next(iter(a))),
    "flatten": lambda a: float(np.ndarray.__getitem__(a.flatten(), 2)), "dot": lambda a: float(a.dot(a)),
    "str": lambda a: str(a), "tobytes": lambda a: a.tobytes()[:16], "astype": lambda a: int(a.astype(int).sum()),
}


@pytest.mark.parametrize("read", READS)
def test_host_code_reading_the_state_sees_what_held_launches_write(read, monkeypatch):
    """A step whose host code reads the state (through the TrackedArray it was given: a ufunc, indexing, or an
    ndarray method that reads values) makes the held launches run first: every recomputed step sees the values
    it saw in the first forward."""
    monkeypatch.setattr(blocked, "MIN_BYTES", 0)
    n, nsteps = 33, 24

    def run(seen):
        def program(u, v, E, c, k):
            def step(t):
                a, b = (u, v) if t % 2 == 0 else (v, u)
                seen.append(READS[read](a))
                gk.launch(allen_cahn_step, n, a, b, c, 0.01)
            gk.checkpointed_loop(step, k, snapshots=2)
            gk.launch(checkpoint_energy, n, u, E)
        _, got, tape = _split(program, n, nsteps)
        return got, loop_entry(tape)

    off, on = [], []
    monkeypatch.setattr(checkpoint, "TEMPORAL", False)
    want, _ = run(off)
    monkeypatch.setattr(checkpoint, "TEMPORAL", True)
    got, loop = run(on)
    assert on == off and got[3] == want[3] and loop.stats.steps_blocked == 0


@pytest.mark.skipif(not _HAS_GPP, reason="hostcuda needs a C++ compiler")
def test_on_hostcuda_launches_run_one_by_one(monkeypatch):
    """The CUDA backends print no blocked step: on hostcuda a run is held, refused with that reason and run
    launch by launch, the gradient bit for bit the one without blocking."""
    monkeypatch.setattr(blocked, "MIN_BYTES", 0)
    n, nsteps = 24, 16

    def run():
        def program(u, v, E, c, k):
            def step(t):
                a, b = (u, v) if t % 2 == 0 else (v, u)
                gk.launch(allen_cahn_step, n, a, b, c, 0.01, backend="hostcuda")
            gk.checkpointed_loop(step, k, snapshots=2)
            gk.launch(checkpoint_energy, n, u, E, backend="hostcuda")
        args, got, tape = _split(program, n, nsteps)
        return got[3], [a.dval for a in args[:3]], loop_entry(tape)

    monkeypatch.setattr(checkpoint, "TEMPORAL", False)
    want = run()
    monkeypatch.setattr(checkpoint, "TEMPORAL", True)
    got = run()
    assert got[0] == want[0] and all(np.array_equal(a, b) for a, b in zip(got[1], want[1]))
    assert got[2].stats.steps_blocked == 0 and "hostcuda" in got[2].blocking_refused["allen_cahn_step"]


@gk.kernel
def leaky(u, un, s):
    i = gk.tid()
    un[i] = u[i]
    gk.atomic_add(s, 0, u[i])


def test_a_refused_step_runs_one_launch_at_a_time(monkeypatch):
    """A step kernel that is no pure stencil (an atomic add) is refused by the runtime; its launches run one by
    one, the reason recorded on the loop."""
    monkeypatch.setattr(blocked, "MIN_BYTES", 0)
    n, nsteps = 16, 12

    def program(u, v, s, E, k):
        def step(t):
            a, b = (u, v) if t % 2 == 0 else (v, u)
            gk.launch(leaky, n, a, b, s)
        gk.checkpointed_loop(step, k, snapshots=2)
        gk.launch(checkpoint_energy, n, u, E)

    rng = np.random.default_rng(0)
    args = [gk.Duplicated(rng.uniform(-1, 1, n), np.zeros(n)), gk.Duplicated(np.zeros(n), np.zeros(n)),
            gk.Const(np.zeros(1)), gk.Duplicated(np.zeros(1), np.ones(1)), nsteps]
    fwd, rev = gk.autodiff_thunk(program, gk.Duplicated, gk.Duplicated, gk.Const, gk.Duplicated, gk.Const)
    tape = fwd(*args)
    rev(*args, tape)
    loop = loop_entry(tape)
    assert loop.stats.steps_blocked == 0 and "atomically" in loop.blocking_refused["leaky"]


@gk.kernel
def checkpoint_energy(u, E):
    i = gk.tid()
    gk.atomic_add(E, 0, u[i] * u[i])


def test_launches_on_arrays_fn_was_not_given_are_never_held(monkeypatch):
    """A step launching on a plain array (one captured, not given to fn) is not held: its host reads would not
    be seen (docs/checkpointed-loops.md#temporal-blocking-of-recomputed-steps)."""
    monkeypatch.setattr(blocked, "MIN_BYTES", 0)
    n, nsteps = 33, 24
    w = np.zeros(n)

    def program(u, v, E, c, k):
        def step(t):
            if t % 2 == 0:
                gk.launch(allen_cahn_step, n, u, w, c, 0.01)
            else:
                gk.launch(allen_cahn_step, n, w, u, c, 0.01)
        gk.checkpointed_loop(step, k, snapshots=2)
        gk.launch(checkpoint_energy, n, u, E)
    _, _, tape = _split(program, n, nsteps)
    assert loop_entry(tape).stats.steps_blocked == 0


@gk.kernel
def _sum_squares_2d(u, E):
    i, j = gk.tid()
    gk.atomic_add(E, 0, u[i, j] * u[i, j])


def _planar(snapshots: int, nsteps: int):
    def simulate(u, v, E, c):
        def step(t):
            a, b = (u, v) if t % 2 == 0 else (v, u)
            gk.launch(allen_cahn_step_2d, u.shape, a, b, c, 0.01)
        gk.checkpointed_loop(step, nsteps, snapshots=snapshots)
        gk.launch(_sum_squares_2d, u.shape, u, E)
    return simulate


@pytest.mark.parametrize("snapshots", [2, 4])
def test_a_2d_loop_gives_the_same_gradients_bit_for_bit(snapshots, monkeypatch):
    """A 2-D step (docs/checkpointed-loops.md#2-d-steps): bands of 12 rows (the fewest a pass is run on), every
    run held."""
    monkeypatch.setattr(blocked, "MIN_BYTES", 0)
    monkeypatch.setattr(blocked, "MIN_BYTES_2D", 0)
    monkeypatch.setattr(blocked, "BAND_ROWS", 12)
    u0 = np.random.default_rng(snapshots).uniform(-0.8, 0.8, (53, 9))
    got = {}
    for flag in (False, True):
        monkeypatch.setattr(checkpoint, "TEMPORAL", flag)
        args = (gk.Duplicated(u0.copy(), np.zeros_like(u0)), gk.Duplicated(np.zeros_like(u0), np.zeros_like(u0)),
                gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.2))
        fwd, rev = gk.autodiff_thunk(_planar(snapshots, 30), gk.Duplicated, gk.Duplicated, gk.Duplicated, gk.Active)
        tape = fwd(*args)
        dc = rev(*args, tape)[3]
        got[flag] = (args[0].dval, args[1].dval, dc, args[0].val, args[1].val, loop_entry(tape).stats.steps_blocked)
    for x, y in zip(got[False][:5], got[True][:5], strict=True):
        np.testing.assert_array_equal(np.asarray(y), np.asarray(x))
    assert got[False][5] == 0 and got[True][5] >= 8
