"""Checkpointed loops (docs/checkpointed-loops.md): `gk.checkpointed_loop(step, nsteps, snapshots=s)`
inside a reverse-mode program, as one step of the program's tape.

Outside a reverse-mode program it is a plain loop (loop.py; forward mode
included: a tangent needs no checkpoints). Inside one, the loop is a
`CheckpointedLoop`, run by a schedule (schedule.py) through the hooks below,
in one of three modes (`Mode`, after pyadjoint's tape modes): RECORD during
its first forward, RECOMPUTE once that is over (the schedule's reverse phase
reruns steps from snapshots), EXHAUSTED once closed. Its parts by role:

* loopstate.py: the loop's **state**, found by recording its first forward,
  and the checks a recomputed step passes.
* snapshots.py: the **snapshots** of that state and where they are stored.
* here, the **loop step**: the schedule's hooks and the taped segments.
  Steps advanced without a tape run as plain launches (validated, bounds- and
  race-checked, host-write guarded). Taped segments are recorded like a
  program (record.py: kernel tapes, copy-on-write saves) and reversed as one.
  A segment from step 0 saves what the program before the loop still needs,
  so after the loop's reverse those buffers hold their pre-loop contents.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum
from typing import Any

from checkpoint_schedules import StorageType

from ..errors import ProgramError
from ..kernel import KernelFunction
from ..recording import Recorder, recording
from ..rules import CustomRule
from ..runtime.arrays import is_array
from ..runtime.call import prepare
from ..runtime.launch import run
from . import hostcalls
from .budget import BudgetSchedule, Plan, step_sizes
from .contents import Contents
from .guard import HostWriteGuard
from .hostargs import unwrap_args
from .hostarrays import HostArrays
from .hostcode import TrackedArray
from .loopstate import TAKEN_DEAD, LoopState, scalars
from .outputs import LastWriters
from .recompute import PendingRun, RecomputedLaunches, plain_array
from .record import ProgramRecorder, overwritten_whole, overwritten_whole_positions, refuse_host_made
from .rulestep import run_plain
from .scalars import ActiveScalar
from .schedule import LoopHooks, ScheduledLoop, ScheduleStats
from .shadows import memory_root
from .signature import check_ran
from .snapshots import Deferred, OpenSnapshots, Snapshot, SnapshotStore, roots
from .steps import ProgramStep, reverse_steps
from .versions import Versions

# GRADKERN_TEMPORAL=0 runs every recomputed launch by itself, never a blocked pass of several
# (docs/checkpointed-loops.md#temporal-blocking-of-recomputed-steps): for measuring, and as a way back
TEMPORAL = os.environ.get("GRADKERN_TEMPORAL", "1") != "0"
# GRADKERN_RESTORE_IN_PLACE=0 writes every restore back before the next step runs, instead of letting the untaped
# step after it read the snapshot in place (docs/checkpointed-loops.md#a-restore-read-in-place)
IN_PLACE = TEMPORAL and os.environ.get("GRADKERN_RESTORE_IN_PLACE", "1") != "0"
# what a host write refused in a recomputed step leaves (docs/checkpointed-loops.md, How it works)
_RECOMPUTED_WRITE = ("in a step the checkpointed loop recomputed during the program's reverse, which must run as "
                     "its first forward did; the shadows hold a partial gradient")


class Mode(Enum):
    """Where a checkpointed loop is (pyadjoint's tape `Mode`, for one loop)."""

    RECORD = "record"  # its first forward: the state is being found, open snapshots copy on write
    RECOMPUTE = "recompute"  # after it: steps the schedule runs again are checked against their records
    EXHAUSTED = "exhausted"  # closed: snapshots and tapes freed


@dataclass
class _Segment:
    """Steps n0 … n1-1 recorded with tapes; `end`: the state after them, when the schedule
    may run other steps before their reverse."""

    n0: int
    n1: int
    steps: list[ProgramStep]
    temporaries: list  # the ShadowMap entries its launches made (its temporaries' shadows)
    written: set[int]  # the buffers its launches wrote (ids), which its reverse may give back older contents
    end: Snapshot | None = None


class _Untaped(Recorder):
    """Launches of steps the schedule advances without a tape: plain, validated launches."""

    in_loop = True  # a checkpointed loop inside a step is refused

    def __init__(self, loop: CheckpointedLoop, t: int):
        self.loop, self.t = loop, t

    def host_reads(self) -> None:
        """Host code is about to read (or write) a program's array (hostcode.py `_read`): launches that the
        recomputation holds for a blocked pass run first (recompute.py `PendingRun`), so that it reads what they
        write, a restore its launches read in place is written back (snapshots.py `Deferred`), and the loop notes
        the read (`CheckpointedLoop.host_read`)."""
        loop = self.loop
        pending = loop.pending
        if pending is not None and pending.launches:
            pending.flush()
        if loop.deferred:
            loop.deferred.settle()
        loop.host_read()

    @property
    def host(self) -> Any:
        return self.loop.outer.host

    @property
    def guard(self) -> Any:
        return self.loop.guard

    def launch(self, kernel: KernelFunction, dim: Any, given: tuple, backend: str | None) -> None:
        loop = self.loop
        recomputing = loop.mode is Mode.RECOMPUTE
        guard = loop.guard
        hit = loop.launches.find(kernel, backend, given, guard, loop.outer.host) if recomputing else None
        if hit is not None:  # a recomputed launch as it ran before (recompute.py)
            entry, plain, arrays = hit
        else:
            entry, args = None, unwrap_args(given, f"a launch of kernel '{kernel.name}' in step {self.t} of the "
                                                   "checkpointed loop", kernel.ir.params)
            plain = tuple(a.value if isinstance(a, ActiveScalar) else a for a in args)
            arrays = [a for a in plain if is_array(a)]
            if not recomputing:
                loop.found.wants_shadows(loop.outer.shadows, [p.written for p in kernel.ir.params], args)
        pending = loop.pending  # held launches of a run that this one may continue (recompute.py)
        continues = False
        if pending is not None and pending.launches:  # with nothing held, `hold` alone decides (recompute.py)
            # only launches on the arrays fn was given (TrackedArrays, whose host reads run what is held first) are
            # held: a plain array's reads are not seen (docs/checkpointed-loops.md#temporal-blocking-of-recomputed-
            # steps)
            if plain_array(given):
                pending.flush()
                pending = None
            elif not recomputing and loop.copies_before(kernel, plain):
                pending.flush()  # an open snapshot copies a buffer before this launch writes it: what is held runs
            else:
                continues = pending.continues(kernel, dim, backend, plain)
                if not continues:
                    pending.flush()
        ours = guard.unlock_settled(arrays) if entry is not None else None
        if not (settled := ours is not None):  # device prints compared later (docs/programs.md, "On a GPU")
            ours = guard.unlock(arrays, f"before a launch of kernel '{kernel.name}' in step {self.t} of the loop",
                                True)
        where = _LaunchWhere(self, kernel.name)  # formatted only where an error names it
        try:
            call, bound = prepare(kernel, plain, dim, backend, "launch")  # validated as the user's writable arrays
            if entry is not None and call is entry.call:
                # the same prepared call, refilled with the same arrays: the loop state's checks of this launch
                # answer as before (recompute.py)
                loop.found.recomputed.append((*entry.signature[:3], scalars(bound.b.values), *entry.signature[4:]))
                loop.found.compare_last(self.t)
                if loop.hosts.due:  # host-made arguments' prints (hostarrays.py)
                    loop.hosts.check(kernel.name, bound.b)
                loop.writers.wrote(entry.written)
            else:
                binding, params = bound.b, kernel.ir.params
                written = [v for p, v in zip(params, binding.values) if p.written and is_array(v)]
                whole = [] if recomputing else overwritten_whole_positions(params, binding, call.primal.facts)
                refuse_host_made(guard, kernel, dim, backend, plain, f"a launch of kernel '{kernel.name}' in step "
                                 f"{self.t} of the checkpointed loop", whole)  # host code's CuPy arrays refused
                loop.before_launch(kernel.name, written, binding, [memory_root(binding.values[k]) for k in whole])
                if recomputing:
                    loop.launches.keep(kernel, backend, given, plain, loop.outer.host, call, bound.values,
                                       loop.found.recomputed[-1], tuple(id(memory_root(w)) for w in written))
            if loop.deferred:  # a restore not written yet: this launch may read the snapshot in place
                read = loop.deferred.reading(kernel.ir.params, given, plain, bound, lambda: overwritten_whole(
                    kernel.ir.params, bound.b, call.primal.facts), TrackedArray)
                loop.stats.read_in_place += read is not bound
                bound = read
            if pending is None or not pending.hold(kernel, dim, backend, plain, bound, arrays, continues,
                                                   lambda: plain_array(given)):
                run(call, bound)
        finally:
            if settled:
                guard.relock_settled(ours, where)
            else:
                guard.relock(ours)
        if not settled:
            guard.lock(arrays, where)

    def rule(self, rule: CustomRule, given: tuple) -> Any:
        """A rule call of an untaped step: its primal, with the loop's bookkeeping as for a launch."""
        given = unwrap_args(given, f"a call of rule '{rule.name}' in step {self.t} of the checkpointed loop",
                            rule.params)
        loop = self.loop
        if loop.pending is not None:
            loop.pending.flush()
        loop.deferred.settle()
        if loop.mode is Mode.RECORD:
            loop.found.wants_shadows(loop.outer.shadows, [rule.may_write(n) for n in range(len(given))], given)
        if any(isinstance(a, ActiveScalar) for a in given) or any(
                is_array(a) and loop.outer.shadows.find(a) is not None for a in given):
            loop.outer.expect_rule()
            rule.require("reverse")
        call, result = run_plain(loop.guard, rule, given, f"before a call of rule '{rule.name}' in step {self.t} of "
                                 "the loop", lambda c, b: loop.before_launch(rule.name, c.written, b, []))
        loop.guard.lock(call.arrays, self._where(f"a call of rule '{rule.name}'"))
        return result

    def _where(self, what: str) -> str:
        return f"after {what} in step {self.t} of the checkpointed loop (launch {self.loop.number} of the program)"


class _LaunchWhere:
    """`_Untaped._where` of a launch of kernel `name`, as the guard keeps it (guard.locked_settled: an object whose
    `str` is the text), formatted only where an error names it, not at each of a loop's recomputed launches."""

    __slots__ = ("untaped", "name")

    def __init__(self, untaped: _Untaped, name: str):
        self.untaped, self.name = untaped, name

    def __str__(self) -> str:
        return self.untaped._where(f"a launch of kernel '{self.name}'")


class CheckpointedLoop(LoopHooks):
    """One checkpointed loop in a program's tape (a steps.ProgramStep): its schedule, state, snapshots and
    taped segments."""

    kernel = "checkpointed_loop"

    def __init__(self, outer: ProgramRecorder, step: Any, nsteps: int, schedule: Any, progress: bool,
                 storage: str, rebuild: bool = False, memory: int | None = None):
        """`rebuild`: keep a snapshot at step nsteps-1 and rebuild the loop's final state from it after the
        program's reverse, instead of the sweep copying the final state (docs/checkpointed-loops.md).
        `memory`: no `schedule`; one picked by this budget after step 0 (budget.py)."""
        self.outer, self.step_fn, self.nsteps = outer, step, nsteps
        self.plan: Plan | None = None  # what memory= picked
        if memory is not None:
            schedule = BudgetSchedule(nsteps, memory, lambda: step_sizes(self.found.seen, TEMPORAL), self._chosen)
        self.number = len(outer.steps) + 1
        self.mode = Mode.RECORD
        self.at: int | None = 0  # the step whose input the live buffers hold (None: not known)
        self.t = 0  # the step running
        self.read_in = -1  # the first forward's last step in which host code read an array (host_read)
        self.guard = outer.guard
        self.recomputing: HostWriteGuard | None = None  # the recomputation's guard while it holds arrays
        self.driver = ScheduledLoop(schedule, nsteps, self, progress)
        self.found = LoopState(self._freed)
        self.store = SnapshotStore(storage)
        self.open = OpenSnapshots()  # the first forward's snapshots, filled as steps first write each buffer
        self.entry_needed = outer.versions.read()  # what the program before the loop still reads
        self.segments: dict[int, _Segment] = {}
        self.live: Any = None  # the segment whose end state the live buffers hold
        self.tail: Snapshot | None = None  # the state at step nsteps-1, for rebuilding the final state
        self.rebuild = rebuild
        self.stats: ScheduleStats = self.driver.stats
        self.launches = RecomputedLaunches()  # its recomputed launches, as they ran (recompute.py)
        self.pending: PendingRun | None = None  # while recomputing untaped steps: launches held for a blocked pass
        self.blocked_forms: dict = {}  # the blocked forms its recomputation asked for (recompute.py)
        self.blocking_refused: dict[str, str] = {}  # kernel name -> why its launches were not blocked
        # which launch last wrote each buffer, for a taped step's launches that need not rerun (outputs.py)
        self.writers = LastWriters(outer.host, self.found)
        self.reusable = False  # whether the launch before_launch was told of need not run
        self.taping: set[int] | None = None  # while a segment is taped: the buffers its launches write
        self.deferred = Deferred()  # a restore the next untaped steps read in place, not written yet (snapshots.py)
        self.hosts = HostArrays(self.deferred.holding)

    # -- the program's view (steps.ProgramStep) -------------------------------------------------------------------
    @property
    def where(self) -> str:
        return f"after the checkpointed loop (launch {self.number} of the program)"

    @property
    def saved_bytes(self) -> int:
        return self.peak_bytes

    @property
    def tape_bytes(self) -> int:
        return sum(s.tape_bytes for seg in self.segments.values() for s in seg.steps)

    @property
    def peak_bytes(self) -> int:
        """The most its snapshots held at once."""
        return self.store.peak_bytes

    @property
    def state(self) -> dict[int, Any]:
        """id -> buffer of the loop's state (known once the first forward is over)."""
        return self.found.state

    def roots_written_back(self) -> list:
        """The buffers the loop's reverse writes primal values into and the sweep copies (run.py) to give back
        their final contents: every live one its steps wrote, or none when the loop rebuilds them itself."""
        return [] if self._rebuilds() else self.found.written_back

    def _rebuilds(self) -> bool:
        """Whether `rebuild_final` can give the final state back: a tail snapshot was kept, every buffer the
        loop wrote is state (an untaped rerun of step nsteps-1 writes it), and no step after the loop writes a
        buffer the loop takes (the first such write is saved for the loop's reverse, versions.py: a later step
        that writes back one of them, or a later loop writing one). Otherwise the tail is freed now."""
        if self.tail is not None:
            later = self.outer.steps[self.outer.steps.index(self) + 1:]
            taken = self.found.alive
            written = [r for s in later for r in (s.found.written_back if isinstance(s, CheckpointedLoop)
                                                   else s.roots_written_back())]
            if any(id(r) in taken for r in written) or any(
                    id(r) not in self.found.state for r in self.found.written_back):
                self.tail.free()
                self.tail = None
        return self.tail is not None

    def rebuild_final(self) -> None:
        """After the program's reverse (run.py): the loop's final state, from the tail snapshot and an untaped
        rerun of the last step; the loop's inputs hold what they held in the loop (`_rebuilds`)."""
        tail, self.tail = self.tail, None
        if tail is None:
            return
        self.mode, self.guard = Mode.RECOMPUTE, HostWriteGuard()
        self.writers.forget()
        try:
            tail.restore()
            for t in range(tail.at, self.nsteps):
                self._step(t, _Untaped(self, t))
            self.guard.settle()
            self.stats.steps_advanced += self.nsteps - tail.at
        finally:
            self.guard.release()
            tail.free()
            self.mode = Mode.EXHAUSTED

    def run_forward(self) -> None:
        try:
            self.driver.forward()
        except BaseException:
            self.close()
            raise
        self._found()

    def run_reverse(self, lanes: int, contents: Contents) -> None:
        """The loop's reverse, as one step of the program's: the schedule's reverse phase, on the buffers
        themselves."""
        contents.settle()
        self.writers.forget()  # the program after the loop may have written its buffers (outputs.py)
        for root in self.roots_written_back():
            contents.writing(root)
        try:
            self.driver.reverse()
        finally:
            self.close()

    def close(self) -> None:
        self._give_back(False)  # after the last reverse (which compared), or an error
        self.driver.close()
        for snap in self.open:
            snap.free()
        if self.tail in self.open:  # the first forward failed: no final state to rebuild
            self.tail = None
        self.open.clear()
        for n0 in list(self.segments):
            self._drop_segment(n0)
        self.store.close()
        self.mode = Mode.EXHAUSTED

    def _chosen(self, plan: Plan) -> None:
        self.plan = plan
        self.rebuild = plan.snapshots >= 2  # the plan counted the tail among its snapshots

    # -- the schedule's hooks ---------------------------------------------------------------------------------------
    def snapshot(self, storage: StorageType, skip_dead: bool = True) -> Snapshot:
        self.deferred.settle()
        snap = Snapshot(self.at, storage, self.store, skip_dead)
        if self.mode is Mode.RECORD:
            self.open.append(snap)  # filled as steps first write each buffer
        else:  # the state buffers some step from here on writes, unless it first overwrites them whole
            for key, root, first_dead in self.found.changed_from(self.at):
                if not first_dead or not self._may_skip(snap, key):
                    snap.add(root)
        return snap

    def _may_skip(self, snap: Snapshot, key: int) -> bool:
        """Whether `snap` may leave out a buffer the steps after it overwrite whole before reading: not for a
        segment's end state, nor at step 0 for what the program before the loop still reads (the segment
        from step 0 saves it from the restored state for that program's reverse)."""
        return snap.skip_dead and not (snap.at == 0 and key in self.entry_needed)

    def restore(self, snap: Snapshot) -> None:
        self._give_back()
        # in the reverse phase, buffers the untaped step after it may read in place are not written yet
        snap.restore(self.deferred if IN_PLACE and self.mode is Mode.RECOMPUTE and self.guard.mode == "auto"
                     else None)
        self.writers.restored(snap.copies, snap.at)
        self.at, self.live = snap.at, None

    def free(self, snap: Snapshot) -> None:
        self.deferred.settle()
        if snap in self.open:
            self.open.remove(snap)
        snap.free()

    def nbytes(self, snap: Snapshot) -> int:
        return snap.nbytes

    def advance(self, n0: int, n1: int, tape: bool) -> None:
        if self.mode is Mode.RECORD:
            self._advance(n0, n1, tape)
            return
        # recomputing during the program's reverse: the recording's guard was given back; this one is the
        # recomputation's own, kept by the advances that follow each other (snapshots between them only read)
        # and given back before anything else writes the state
        # (docs/programs.md#recomputed-steps-of-a-checkpointed-loop)
        if self.recomputing is None:
            self.guard = self.recomputing = HostWriteGuard(_RECOMPUTED_WRITE)
        try:
            self._advance(n0, n1, tape)
        except BaseException:
            self._give_back(False)
            raise

    def _give_back(self, compare: bool = True) -> None:
        """A deferred restore written back (snapshots.py `Deferred`), and the recomputation's guard given back:
        every array it locked writable again."""
        self.deferred.settle()
        if self.recomputing is not None:
            if compare:  # its deferred prints (a taped step's launches': guard.check) compared first
                self.recomputing.settle()
            self.recomputing.release()
            self.recomputing = None

    def _advance(self, n0: int, n1: int, tape: bool) -> None:
        self.live = None
        if not tape:
            if TEMPORAL and n1 - n0 >= 2:  # the first forward's runs too (copies_before)
                self.pending = PendingRun(self.guard, self.blocked_forms, self.blocking_refused, self.stats)
            try:
                for t in range(n0, n1):
                    self._step(t, _Untaped(self, t))
                if self.pending is not None:
                    self.pending.flush()
            finally:
                self.pending = None
            if self.deferred:  # what no later step reads before overwriting it whole is never written back
                first_use = self.found.first_use
                self.writers.forget(self.deferred.resolve(n1, lambda key: key in first_use and first_use[
                    key].first_from(n1) == TAKEN_DEAD))
            self.at = n1
            return
        self.deferred.settle()
        recording_forward = self.mode is Mode.RECORD
        shadows = self.outer.shadows
        if recording_forward:
            self.found.make_wanted_shadows(shadows)
        # from step 0: what the program before the loop still reads, saved before the loop overwrites it
        versions = Versions(self.entry_needed if n0 == 0 else None)
        rec = ProgramRecorder(shadows, self.guard, within=self.outer, versions=versions, observer=self.before_launch,
                              reuse=self._reusable if TEMPORAL else None)
        rec.host_reads = self.host_read
        before = len(shadows.entries)
        self.taping = written = set()
        try:
            for t in range(n0, n1):
                self._step(t, rec)
                if recording_forward:
                    self.found.forward_taped.add(t)
        finally:
            self.taping = None
        self.writers.reused += rec.reused
        seg = _Segment(n0, n1, rec.steps, shadows.entries[before:], written)
        self.at = n1
        self.segments[n0] = seg
        self.live = n0

    def reverse(self, n1: int, n0: int, clear: bool) -> None:
        """The schedule's reverse of steps n1-1 … n0: the taped segment from n0, on its end state."""
        self._give_back()
        seg = self.segments.get(n0)
        if seg is None or seg.n1 != n1:
            raise ProgramError(f"the schedule reverses steps {n0}..{n1 - 1}, which were not taped as one segment")
        if self.live != n0:
            if seg.end is None:
                raise ProgramError("the schedule ran other steps between taping a segment and reversing it, and "
                                   "the segment's end state was not kept", hint="report this schedule as a bug")
            seg.end.restore()
            self.writers.restored(seg.end.copies, seg.end.at)
        reverse_steps(seg.steps, self.outer.shadows.lanes)
        self.writers.forget(seg.written)
        self.live, self.at = None, None
        if clear:
            self._drop_segment(n0)

    def keep_tapes(self, n0: int, n1: int) -> None:
        """The state the segment's reverse starts from, for when other steps run first (mixed schedules)."""
        self.segments[n0].end = self.snapshot(StorageType.RAM, skip_dead=False)  # the live state is at n1

    def discard_tapes(self, steps) -> None:
        self._give_back()
        for n0 in [n for n in self.segments if n in set(steps)]:
            self._drop_segment(n0)

    def _drop_segment(self, n0: int) -> None:
        seg = self.segments.pop(n0)
        if seg.end is not None:  # freed and no longer open (taken in the first forward, an open snapshot)
            self.free(seg.end)
        # the shadows of buffers the segment's steps allocated (those of buffers that outlived the first
        # forward carry derivatives for the launches before and after: they stay)
        gone = {id(e) for e in seg.temporaries if id(e.primal) not in self.found.alive}
        self.outer.shadows.remove(gone)

    # -- the steps' launches ----------------------------------------------------------------------------------------
    def _step(self, t: int, recorder: Recorder) -> None:
        if self.rebuild and self.mode is Mode.RECORD and t == self.nsteps - 1:
            self.tail = Snapshot(t, StorageType.RAM, self.store)  # open: filled as step t writes
            self.open.append(self.tail)
        self.t = t
        self.writers.start(t)
        self.hosts.start(t, self.mode is not Mode.RECORD)  # host-made arrays' prints (hostarrays.py)
        self.found.recomputed = []
        with recording(recorder), hostcalls.rerecording(self.mode is not Mode.RECORD):
            try:
                check_ran(self.step_fn(t), self.step_fn, "gk.checkpointed_loop", "step")
            except ValueError as e:  # a host write the recomputation's guard refused (the first forward's: run.py)
                err = None if self.mode is Mode.RECORD else self.guard.host_write_error(e, _RECOMPUTED_WRITE)
                if err is None:
                    raise
                raise err from e
        if self.mode is Mode.RECOMPUTE:
            self.found.check_step(t)
            self.writers.end(self.found.steps[t])

    def before_launch(self, name: str, written: list, binding: Any, overwritten: list) -> None:
        """Bookkeeping before a launch (or rule call) of the running step runs: in the first forward, the
        state's record and copy-on-write for the open snapshots; when recomputed, the state's checks.
        `overwritten`: the buffers the launch overwrites whole without reading them (record.overwritten_whole);
        a snapshot need not keep a buffer whose first use after it is such a launch."""
        keys = [id(memory_root(w)) for w in written]
        if self.taping is not None:
            self.taping.update(keys)
        if self.mode is not Mode.RECORD:
            self.found.check_launch(self.t, name, written, binding)
            if self.hosts.due:
                self.hosts.check(name, binding)
            # a taped launch only (an untaped one is told of no buffer overwritten whole)
            self.reusable = bool(overwritten) and self.writers.holds(written, overwritten)
            self.writers.wrote(keys)
            return
        # after host code read arrays in this step, no overwrite is dead: the read may have been of that buffer
        dead = {id(r) for r in overwritten} if self.read_in != self.t else set()
        refs = self.found.record_launch(self.t, name, written, binding, dead)
        self.hosts.record(self.guard, binding, written, overwritten)
        if self.open:  # each open snapshot that has yet to see a buffer written (snapshots.py OpenSnapshots)
            self.open.before_write(roots(written), roots([v for v in binding.values if is_array(v)]), refs, dead,
                                   self._may_skip)

    def host_read(self) -> None:
        """Host code read (or wrote) an array in step t of the first forward. Which array is not known here, so no
        launch after it in the step overwrites a buffer dead: a snapshot from step t's start, or earlier, keeps
        what the step's first launch taking a buffer overwrites whole, since the recomputed step's host code reads
        the restored state (docs/checkpointed-loops.md#buffers-a-restart-point-leaves-out)."""
        if self.mode is Mode.RECORD:
            self.read_in = self.t

    def _reusable(self) -> bool:
        """The recorder's `reuse`: whether the taped launch before_launch was just told of need not run."""
        return self.reusable

    def copies_before(self, kernel: KernelFunction, plain: tuple) -> bool:
        """In the first forward, with launches held: whether an open snapshot has yet to see a buffer this launch
        of `kernel` on `plain` may write (it copies that buffer, or skips it, before the launch runs), so that
        what is held must run first (docs/checkpointed-loops.md#temporal-blocking-of-recomputed-steps)."""
        if not self.open or not self.pending.launches:
            return False
        roots = [id(memory_root(v)) for p, v in zip(kernel.ir.params, plain) if p.written and is_array(v)]
        return any(self.open.unseen(key) for key in roots)

    def _freed(self, ref: Any) -> None:
        """A buffer of the first forward was freed (a step's temporary): its copies go too."""
        self.open.freed(ref)

    def _found(self) -> None:
        """After the first forward: the state found, the first forward's snapshots cut down to it."""
        self.mode = Mode.RECOMPUTE
        self.found.find()
        self.hosts.found(self.found)
        for snap in self.open:  # keep only the state in the first forward's snapshots
            snap.keep_only(self.found.state)
        self.open.clear()
        if self.tail is not None:  # and what the last step left untouched: its final contents are needed too
            for key, root in self.found.state.items():
                if key not in self.tail.copies and key not in self.tail.skipped:
                    self.tail.add(root)
        self.found.make_wanted_shadows(self.outer.shadows)
        for root in self.found.alive.values():  # what the program after the loop must give back before its reverse
            self.outer.versions.read_by_reverse(root)
