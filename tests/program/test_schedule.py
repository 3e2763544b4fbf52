"""The schedule driver (program/schedule.py, docs/checkpointed-loops.md) on a float64 toy
loop: x <- c·sin(x)·x + 0.1·t, loss sum(x_T²). Its hand-written step reverse
asserts that it is given exactly the step's primal input (the stored true
trajectory), so a schedule driven wrongly fails at the step, and the gradient
must equal the store-all adjoint to 1e-12."""

from __future__ import annotations

import subprocess
import sys
import time

import checkpoint_schedules as cs
import numpy as np
import pytest
from checkpoint_schedules import Forward, StorageType

from gradkern.errors import GradkernError, ProgramError
from gradkern.program.schedule import (
    BinomialSchedule,
    DiskSnapshots,
    LoopHooks,
    ScheduledLoop,
    SegmentedSchedule,
    drive,
    forward_steps,
    resolve_schedule,
)


def step(x, t, c):
    return c * np.sin(x) * x + 0.1 * t


def step_reverse(x, c, dy):
    """(dx, dc) of one step at primal input x: d(c sin(x) x)/dx = c (cos(x) x + sin(x))."""
    return c * (np.cos(x) * x + np.sin(x)) * dy, float(np.sum(np.sin(x) * x * dy))


def trajectory(x0, c, nsteps):
    xs = [x0.copy()]
    for t in range(nsteps):
        xs.append(step(xs[-1], t, c))
    return xs


def store_all_gradient(x0, c, nsteps):
    xs = trajectory(x0, c, nsteps)
    dx, dc = 2 * xs[-1], 0.0
    for t in reversed(range(nsteps)):
        dx, dct = step_reverse(xs[t], c, dx)
        dc += dct
    return dx, dc


class ToyLoop(LoopHooks):
    """The toy loop's hooks, instrumented: each snapshot remembers its step, each
    reverse checks its primal input against the true trajectory."""

    def __init__(self, x0, c, nsteps, fail_at=None):
        self.c, self.nsteps, self.fail_at = c, nsteps, fail_at
        self.truth = trajectory(x0, c, nsteps)
        self.x, self.at = x0.copy(), 0  # the live state and the step it is the input of
        self.tapes = {}
        self.dx, self.dc = None, 0.0
        self.reversed = []
        self.live = set()  # ids of snapshots not yet freed
        self.disk = DiskSnapshots()
        self.advanced = 0

    def _maybe_fail(self, where):
        if self.fail_at == where:
            raise RuntimeError(f"injected failure in {where[0]} at step {where[1]}")

    def advance(self, n0, n1, tape):
        assert self.at == n0, f"advance from {n0} but the state is at step {self.at}"
        for t in range(n0, n1):
            self._maybe_fail(("advance", t))
            if tape:
                self.tapes[t] = self.x.copy()
            self.x = step(self.x, t, self.c)
        self.at = n1
        self.advanced += n1 - n0

    def reverse(self, n1, n0, clear):
        for t in range(n1 - 1, n0 - 1, -1):
            self._maybe_fail(("reverse", t))
            x = self.tapes[t]
            np.testing.assert_array_equal(x, self.truth[t], err_msg=f"step {t} reversed from a wrong primal")
            if self.dx is None:
                assert t == self.nsteps - 1
                self.dx = 2 * self.x  # dL/dx_T, the live state after the forward
            self.dx, dct = step_reverse(x, self.c, self.dx)
            self.dc += dct
            self.reversed.append(t)
            if clear:
                del self.tapes[t]
        self.at = None  # as a program's reverse, which writes saved primals back

    def snapshot(self, storage):
        self._maybe_fail(("snapshot", self.at))
        if storage == StorageType.DISK:
            snap = ("disk", self.at, self.disk.write([self.x]))
        else:
            assert storage == StorageType.RAM
            snap = ("ram", self.at, self.x.copy())
        self.live.add(id(snap))
        return snap

    def restore(self, snap):
        assert id(snap) in self.live, "restore of a freed snapshot"
        kind, at, data = snap
        if kind == "disk":
            self.disk.read_into(data, [self.x])
        else:
            self.x[...] = data
        self.at = at

    def free(self, snap):
        self.live.remove(id(snap))
        if snap[0] == "disk":
            self.disk.delete(snap[2])

    def nbytes(self, snap):
        return self.disk.nbytes(snap[2]) if snap[0] == "disk" else snap[2].nbytes

    def discard_tapes(self, steps):
        for t in steps:
            self.tapes.pop(t, None)


def schedule_forward_steps(schedule, nsteps):
    """The schedule's own count of forward steps, from its action list."""
    total = 0
    for a in schedule:
        if isinstance(a, Forward):
            total += min(a.n1, nsteps) - a.n0
            if schedule.max_n is None and min(a.n1, nsteps) == nsteps:
                schedule.finalize(nsteps)
        if isinstance(a, cs.EndReverse):
            return total
    raise AssertionError("schedule without EndReverse")


def run_and_check(nsteps, snapshots, make_schedule, bound):
    rng = np.random.default_rng(nsteps * 100 + snapshots)
    x0, c = rng.uniform(0.2, 1.2, size=4), 0.9
    hooks = ToyLoop(x0, c, nsteps)
    stats = drive(hooks, nsteps, snapshots, make_schedule())
    dx, dc = store_all_gradient(x0, c, nsteps)
    np.testing.assert_allclose(hooks.dx, dx, rtol=1e-12, atol=0)
    np.testing.assert_allclose(hooks.dc, dc, rtol=1e-12, atol=1e-300)
    assert hooks.reversed == list(reversed(range(nsteps)))  # each step once, in order
    assert stats.steps_reversed == nsteps
    assert stats.steps_advanced == hooks.advanced == schedule_forward_steps(
        make_schedule() or cs.MultistageCheckpointSchedule(nsteps, snapshots, 0), nsteps)  # the default's reference
    assert stats.peak_snapshots <= bound
    assert not hooks.live and not hooks.tapes and stats.snapshots_held == 0  # everything freed
    hooks.disk.close()
    return stats


GRID = [(n, s) for n in (1, 7, 50) for s in sorted({1, 2, 5, n}) if s <= n]


@pytest.mark.parametrize("nsteps,snapshots", GRID)
def test_default_binomial(nsteps, snapshots):
    stats = run_and_check(nsteps, snapshots, lambda: None, min(snapshots, nsteps - 1))
    # binomial checkpointing is optimal: Revolve's count (Griewank & Walther 2000, eq. 2)
    assert stats.steps_advanced == cs.optimal_steps_binomial(nsteps, min(snapshots, nsteps - 1) or 1)
    assert stats.peak_ram_bytes <= stats.peak_snapshots * 4 * 8
    if snapshots >= nsteps - 1:
        # a snapshot at every step, none of them a tape: each step but the last is re-run once to tape it
        assert stats.steps_recomputed == nsteps - 1


@pytest.mark.parametrize("nsteps,snapshots", [(7, 2), (50, 5)])
def test_multistage_on_disk_and_split_ram_disk(nsteps, snapshots):
    run_and_check(nsteps, snapshots, lambda: cs.MultistageCheckpointSchedule(nsteps, 0, snapshots), snapshots)
    stats = run_and_check(nsteps, snapshots, lambda: cs.MultistageCheckpointSchedule(nsteps, 1, snapshots - 1),
                          snapshots)
    assert stats.peak_disk_bytes > 0 and stats.peak_ram_bytes > 0


@pytest.mark.parametrize("nsteps,snapshots", [(7, 2), (7, 7), (50, 5)])
@pytest.mark.parametrize("storage", [StorageType.RAM, StorageType.DISK])
def test_mixed(nsteps, snapshots, storage):
    # mixed schedules store either a state or one step's tapes in each of their `snapshots` units
    run_and_check(nsteps, snapshots, lambda: cs.MixedCheckpointSchedule(nsteps, snapshots, storage=storage),
                  snapshots)


@pytest.mark.parametrize("nsteps,snapshots", [(7, 1), (7, 2), (50, 5)])
def test_revolve(nsteps, snapshots):
    # Revolve (H-Revolve's sequences) counts the state at step 0 among its slots: at most `snapshots`
    stats = run_and_check(nsteps, snapshots, lambda: cs.Revolve(nsteps, snapshots), snapshots)
    assert stats.steps_advanced == run_and_check(nsteps, snapshots, lambda: None, snapshots).steps_advanced


def test_online_schedules_are_finalized():
    # max_n unknown to these: they advance 'forever' and the driver finalizes them at nsteps
    n = 11
    run_and_check(n, 1, cs.SingleMemoryStorageSchedule, 0)
    run_and_check(n, 1, lambda: cs.SingleDiskStorageSchedule(move_data=True), n)
    run_and_check(n, 1, cs.SingleDiskStorageSchedule, n)  # copies, never moves: freed at the end
    # periodic disk checkpoints (kept by the schedule for further reverses) + a binomial RAM level
    run_and_check(n, 1, lambda: cs.TwoLevelCheckpointSchedule(3, 2, binomial_storage=StorageType.RAM), 4 + 2)


def test_forward_only_schedule_refused_at_reverse():
    hooks = ToyLoop(np.ones(4), 0.9, 5)
    with pytest.raises(ProgramError, match="forward-only"):
        drive(hooks, 5, schedule=cs.NoneCheckpointSchedule())
    assert not hooks.live


def test_split_forward_then_reverse():
    # the program layer runs the loop's forward while recording and its reverse later
    hooks = ToyLoop(np.linspace(0.3, 0.9, 4), 0.9, 20)
    with ScheduledLoop(resolve_schedule(20, 3), 20, hooks) as loop:
        loop.forward()
        assert hooks.at == 20 and np.array_equal(hooks.x, hooks.truth[20])
        assert loop.stats.snapshots_held == 3 and hooks.tapes.keys() == {19}
        stats = loop.reverse()
    assert stats.steps_reversed == 20 and not hooks.live
    with pytest.raises(ProgramError, match="forward once"):
        loop.forward()


# with 3 snapshots of 20 steps, the state at 16 is stored in the forward, at 11 during the reverse
WHERE = [("advance", 3), ("advance", 17), ("snapshot", 16), ("snapshot", 11), ("reverse", 15), ("reverse", 2)]


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("in_ram", [True, False])
def test_hook_errors_free_everything(where, in_ram):
    hooks = ToyLoop(np.linspace(0.3, 0.9, 4), 0.9, 20, fail_at=where)
    with pytest.raises(RuntimeError, match="injected failure"):
        drive(hooks, 20, schedule=cs.MultistageCheckpointSchedule(20, *((3, 0) if in_ram else (0, 3))))
    assert not hooks.live and not hooks.tapes


def test_zero_steps_is_a_no_op():
    hooks = ToyLoop(np.ones(2), 0.9, 0)
    stats = drive(hooks, 0, 4)
    assert stats.steps_advanced == stats.steps_reversed == 0 and hooks.at == 0


@pytest.mark.parametrize("kwargs,name", [
    (dict(nsteps=-1, snapshots=2), "nsteps"),
    (dict(nsteps=5, snapshots=0), "snapshots"),
    (dict(nsteps=5.0, snapshots=2), "nsteps"),
    (dict(nsteps=5, snapshots=True), "snapshots"),
    (dict(nsteps=5, snapshots=2, schedule="revolve"), "schedule"),
    (dict(nsteps=5, snapshots=2, schedule=cs.Revolve(6, 2)), "schedule"),
])
def test_bad_arguments(kwargs, name):
    with pytest.raises(ProgramError, match=name) as e:
        resolve_schedule(**kwargs)
    assert isinstance(e.value, GradkernError)
    assert "schedule.py" not in str(e.value)


def test_used_schedule_refused():
    s = cs.MultistageCheckpointSchedule(5, 2, 0)
    next(s)
    with pytest.raises(ProgramError, match="already been used"):
        resolve_schedule(5, 2, s)


def test_inconsistent_schedule_refused():
    class Skips(cs.CheckpointSchedule):  # advances over step 0 without it
        def _iterator(self):
            yield Forward(1, 3, False, True, StorageType.WORK)

        def uses_storage_type(self, storage_type):
            return False

    hooks = ToyLoop(np.ones(2), 0.9, 3)
    with pytest.raises(ProgramError, match="does not start where the loop state is"):
        drive(hooks, 3, schedule=Skips(3))


def key(action):
    return type(action).__name__, action.args


def test_binomial_equals_multistage():
    cases = [(n, s) for n in range(1, 61) for s in range(1, n + 1)]
    cases += [(1000, 10), (5000, 3), (10000, 32), (300, 299), (300, 1000)]
    for n, s in cases:
        ours = list(map(key, BinomialSchedule(n, s)))
        theirs = list(map(key, cs.MultistageCheckpointSchedule(n, s, 0)))
        assert ours == theirs, (n, s)


def test_default_schedule_is_fast_in_a_cold_process():
    # the package's MultistageCheckpointSchedule JIT-compiles on first use (seconds);
    # the default must not: time it in a fresh interpreter
    code = (
        "import time\n"
        "from gradkern.program.schedule import resolve_schedule\n"
        "t = time.perf_counter()\n"
        "n = sum(1 for _ in resolve_schedule(100, 4))\n"
        "print(time.perf_counter() - t)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert float(out.stdout) < 0.2, out.stdout


def test_progress_bar(capsys):
    hooks = ToyLoop(np.ones(2), 0.9, 30)
    drive(hooks, 30, 3, progress=True)
    assert "30/30" in capsys.readouterr().err
    drive(ToyLoop(np.ones(2), 0.9, 30), 30, 3)
    assert capsys.readouterr() == ("", "")


def test_binomial_is_milliseconds():
    t = time.perf_counter()
    n = sum(1 for _ in BinomialSchedule(10000, 32))
    assert n == 40000 and time.perf_counter() - t < 2.0


@pytest.mark.parametrize("nsteps,snapshots,segment", [(7, 2, 2), (50, 5, 4), (50, 12, 5), (23, 3, 7), (9, 1, 3)])
def test_segmented_binomial(nsteps, snapshots, segment):
    """Binomial over segments of m steps, each taped and reversed as one (the two-level scheme when every
    segment's start is stored): the binomial schedule's counts, in segments."""
    segments = -(-nsteps // segment)
    stats = run_and_check(nsteps, snapshots, lambda: SegmentedSchedule(nsteps, snapshots, segment),
                          min(snapshots, segments - 1))
    if segment == 1 or nsteps % segment == 0:
        assert stats.steps_advanced == segment * forward_steps(segments, snapshots)
    if snapshots >= segments - 1:  # two-level: each step recomputed once (the last segment taped at once)
        assert stats.steps_advanced == 2 * nsteps - (nsteps - (segments - 1) * segment)
