"""A checkpointed loop's recomputed launches kept as they ran (program/recompute.py) and the recomputation's guard
kept over consecutive advances (docs/programs.md#host-cost-per-step). Oracle: the same programs with every kept
launch and every settled unlock refused (each recomputed launch unwrapped, checked and guarded in full, the
behaviour before), which must give bit-identical shadows, derivatives and final primals."""

from __future__ import annotations

import numpy as np
import pytest

import gradkern as gk
from gradkern.kernels import allen_cahn_step
from gradkern.program.guard import HostWriteGuard
from gradkern.program.recompute import PendingRun, RecomputedLaunches
from gradkern.runtime import blocked
from program.test_checkpoint import PROGRAMS, args_for, checkpointed, energy, one_launch_per_step, plain


def _gradient(program, args):
    got = gk.autodiff(program, *args)
    arrays = [a for a in args if isinstance(a, (gk.Duplicated, gk.Const))]
    assert all(a.val.flags.writeable for a in arrays)  # the guard's read-only flags are given back
    return [a.dval for a in arrays if isinstance(a, gk.Duplicated)], [g for g in got if g is not None], \
        [a.val for a in arrays]


def _same(want, got):
    for a, b in zip(want, got, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(np.asarray(y), np.asarray(x))


@pytest.mark.parametrize("name", [*PROGRAMS, "one_launch_per_step"])
@pytest.mark.parametrize("snapshots", [2, 5])
def test_kept_launches_give_the_gradients_of_launches_worked_out_in_full(name, snapshots, monkeypatch):
    nsteps, n = 20, 12
    make = one_launch_per_step if name == "one_launch_per_step" else PROGRAMS[name]
    arg_name = "heat_ping_pong" if name == "one_launch_per_step" else name
    found = []
    find = RecomputedLaunches.find

    def counted(self, *a):
        hit = find(self, *a)
        found.append(hit is not None)
        return hit
    monkeypatch.setattr(RecomputedLaunches, "find", counted)
    got = _gradient(make(checkpointed(snapshots)), args_for(arg_name, n, nsteps))
    # most recomputed launches were found; not those on a step's fresh temporary (time_dependent's)
    assert sum(found) > (len(found) // 3 if name == "time_dependent" else len(found) * 3 // 4)
    monkeypatch.setattr(RecomputedLaunches, "find", lambda *a: None)
    monkeypatch.setattr(HostWriteGuard, "unlock_settled", lambda *a: None)
    want = _gradient(make(checkpointed(snapshots)), args_for(arg_name, n, nsteps))
    _same(want, got)


@pytest.mark.parametrize("held", [False, True])
# 20 and 30 (= nsteps: a snapshot at every step, nothing recomputed): many snapshots open at once through the
# first forward (snapshots.py OpenSnapshots)
@pytest.mark.parametrize("snapshots", [2, 5, 20, 30])
def test_a_checkpointed_loop_gives_store_alls_gradient_bit_for_bit(held, snapshots, monkeypatch):
    """benchmarks/programs/checkpoint.py's loop (one launch a step over ping-pong buffers), checkpointed, against
    the same program's store-all gradient: bit for bit, with a state too small to hold (no launch held: `hold`
    alone refuses each launch while nothing is held, docs/programs.md "Session 49") and with every state held
    (MIN_BYTES 0: runs of launches held, then run one by one or blocked)."""
    nsteps, n = 30, 16
    held_launches = []
    hold = PendingRun.hold

    def counted(self, *a):
        kept = hold(self, *a)
        held_launches.append(kept)
        return kept
    monkeypatch.setattr(PendingRun, "hold", counted)
    if held:
        monkeypatch.setattr(blocked, "MIN_BYTES", 0)
    want = _gradient(one_launch_per_step(plain), args_for("heat_ping_pong", n, nsteps))
    got = _gradient(one_launch_per_step(checkpointed(snapshots)), args_for("heat_ping_pong", n, nsteps))
    if snapshots < nsteps:
        assert held_launches and any(held_launches) == held
    else:  # a snapshot at every step: no advance of two steps or more, no launch offered to `hold`
        assert not held_launches
    _same(want, got)


def test_a_recomputed_step_is_checked_and_validated_after_its_launches_were_kept():
    """A step that launches differently only late in its recomputation (after its launches were kept) is
    refused as before: other arrays by the loop state's check, a bad argument by the runtime's validation,
    before the launch runs; the arrays are writable again afterwards."""
    n, nsteps = 8, 20
    other = np.random.default_rng(3).uniform(-0.5, 0.5, n)

    def program(late):
        calls = []

        def run(u, v, E, c, _):
            def step(t):
                calls.append(t)
                a, b = (u, v) if t % 2 == 0 else (v, u)
                gk.launch(allen_cahn_step, n, *late(a, b, c) if len(calls) > nsteps + 12 else (a, b, c), 0.01)
            gk.checkpointed_loop(step, nsteps, snapshots=3)
            gk.launch(energy, n, u, E)
        return run

    args = args_for("heat_ping_pong", n, nsteps)
    with pytest.raises(gk.ProgramError, match=r"step \d+ of the checkpointed loop launched 'allen_cahn_step' "
                                              r"\(launch 1 of the step\) on other arrays"):
        gk.autodiff(program(lambda a, b, c: (other, b, c)), *args)
    assert all(a.val.flags.writeable for a in args if isinstance(a, gk.Duplicated))
    args = args_for("heat_ping_pong", n, nsteps)
    with pytest.raises(gk.GradkernError):  # an argument of another kind: the runtime's validation refuses it
        gk.autodiff(program(lambda a, b, c: (a, b, "0.3")), *args)
    assert all(a.val.flags.writeable for a in args if isinstance(a, gk.Duplicated))


def test_host_writes_inside_a_recomputed_step_are_refused():
    """After a recomputed launch, also once its launches are kept and its guard spans several advances, the
    arrays it took are read-only: a host write fails before it changes anything, as a ProgramError naming the
    array and the recomputation (the fingerprint guard's words with GRADKERN_HOST_WRITE_CHECK=fingerprint), and
    every array is writable again afterwards."""
    n, nsteps = 8, 20
    calls = []

    def bad(u, v, E, c, _):
        def step(t):
            calls.append(t)
            gk.launch(allen_cahn_step, n, u, v, c, 0.01)
            gk.launch(allen_cahn_step, n, v, u, c, 0.01)
            if len(calls) > nsteps + 12:  # late in the recomputation
                bad.seen = u[0]
                u[0] = 1.0
        gk.checkpointed_loop(step, nsteps, snapshots=3)
        gk.launch(energy, n, u, E)

    args = args_for("heat_ping_pong", n, nsteps)
    with pytest.raises(gk.ProgramError, match="host write to 'u'.*recomputed|refused before it changed anything"):
        gk.autodiff(bad, *args)
    assert args[0].val[0] != 1.0 or bad.seen == 1.0
    assert all(a.val.flags.writeable for a in args if isinstance(a, gk.Duplicated))
