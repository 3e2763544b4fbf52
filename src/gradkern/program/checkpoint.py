"""Checkpointed loops (docs/checkpointed-loops.md): `gk.checkpointed_loop(step, nsteps, snapshots=s)`.

Outside a reverse-mode program it is a plain loop (forward mode included: a
tangent needs no checkpoints). Inside one, the loop becomes one entry of the
program's tape, run by a schedule (schedule.py) through the hooks below:

* The **state** is found by recording: the buffers the loop's steps write
  that are still alive when its first forward ends, except those touched only
  by steps the forward taped (a step's own temporaries, kept alive by its
  tape). Snapshots taken during that first forward are copy-on-write: each
  buffer is copied when a step first writes it after the snapshot's step, so
  a snapshot holds exactly the state the later steps change. Later snapshots
  copy the state buffers written at or after their step.
* Steps advanced without a tape run as plain launches (validated, bounds- and
  race-checked, host-write guarded). Taped segments are recorded like a
  program (record.py: kernel tapes, copy-on-write saves) and reversed as one.
  A segment from step 0 saves what the program before the loop still needs,
  so after the loop's reverse those buffers hold their pre-loop contents.
* A recomputed step must do what it did: the same kernels on the same
  persistent buffers, writing no persistent buffer outside the state;
  otherwise ProgramError names the step and the array.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from checkpoint_schedules import StorageType

from ..errors import ProgramError
from ..kernel import KernelFunction
from ..recording import Recorder, recording
from ..rules import CustomRule
from ..runtime.arrays import device_memory, from_host, is_array, is_cupy_array, to_host
from ..runtime.call import prepare
from ..runtime.launch import run
from .guard import HostWriteGuard
from .hostcode import unwrap_args
from .record import ProgramRecorder, overwritten_whole
from .rulestep import run_plain
from .scalars import ActiveScalar
from .schedule import DiskSnapshots, LoopHooks, ScheduledLoop, ScheduleStats
from .shadows import memory_root
from .steps import Step, reverse_steps
from .versions import Versions


@dataclass
class _Seen:
    """A buffer the loop's launches took."""

    ref: Any  # weak reference (a temporary a step drops is freed)
    steps: set[int] = field(default_factory=set)  # steps (of the first forward) that took it
    written: int = -1  # the last step that wrote it, -1: none
    first: dict[int, bool] = field(default_factory=dict)  # step -> its first launch taking it overwrote it whole


class _Snapshot:
    """A copy of (part of) the loop state at step `at`: (buffer, copy) pairs.
    Open snapshots (the first forward's) add each buffer when a step first writes it."""

    def __init__(self, at: int | None, storage: StorageType, loop: LoopEntry):
        self.at, self.storage, self.loop = at, storage, loop
        # id(buffer) -> (buffer or its weak reference, copy, bytes)
        self.copies: dict[int, tuple[Any, Any, int]] = {}
        self.used: set[int] = set()  # buffers a launch took since the snapshot's step (open snapshots)
        self.skipped: set[int] = set()  # buffers first overwritten whole, unread, after it: not kept
        # a restart point skips those; a segment's end state does not (the segment's reverse may read them)
        self.skip_dead = True

    @property
    def nbytes(self) -> int:
        return sum(size for _, _, size in self.copies.values())

    def add(self, root: Any, ref: Any = None) -> None:
        """Copy `root` in; `ref`, a weak reference to it, is kept instead of `root` (the first forward's)."""
        self.copies[id(root)] = (ref or root, self.loop.store(root, self.storage), int(root.nbytes))
        self.loop.held(int(root.nbytes))

    def remove(self, key: int) -> None:
        _, data, size = self.copies.pop(key)
        self.loop.drop(data)
        self.loop.held(-size)

    def restore(self) -> None:
        for ref, data, _ in self.copies.values():
            root = ref() if isinstance(ref, weakref.ref) else ref
            if root is not None:
                self.loop.load(root, data)

    def free(self) -> None:
        for key in list(self.copies):
            self.remove(key)


@dataclass
class _Segment:
    """Steps n0 … n1-1 recorded with tapes; `end`: the state after them, when the schedule
    may run other steps before their reverse."""

    n0: int
    n1: int
    steps: list[Step]
    temporaries: list  # the ShadowMap entries its launches made (its temporaries' shadows)
    end: _Snapshot | None = None


class _Untaped(Recorder):
    """Launches of steps the schedule advances without a tape: plain, validated launches."""

    in_loop = True  # a checkpointed loop inside a step is refused

    def __init__(self, loop: LoopEntry, t: int):
        self.loop, self.t = loop, t

    @property
    def host(self) -> Any:
        return self.loop.outer.host

    @property
    def guard(self) -> Any:
        return self.loop.guard

    def launch(self, kernel: KernelFunction, dim: Any, given: tuple, backend: str | None) -> None:
        args = unwrap_args(given, f"a launch of kernel '{kernel.name}' in step {self.t} of the checkpointed loop")
        plain = tuple(a.value if isinstance(a, ActiveScalar) else a for a in args)
        arrays = [a for a in plain if is_array(a)]
        if self.loop.first_forward:
            self.loop.wants_shadows([p.written for p in kernel.ir.params], args)
        guard = self.loop.guard
        with guard.unlocked(arrays, f"before a launch of kernel '{kernel.name}' in step {self.t} of the loop"):
            call, bound = prepare(kernel, plain, dim, backend, "launch")  # validated as the user's writable arrays
            binding = bound.b
            written = [v for p, v in zip(kernel.ir.params, binding.values) if p.written and is_array(v)]
            self.loop.before_launch(kernel.name, written, binding,
                                    overwritten_whole(kernel.ir.params, binding, call.primal.facts))
            run(call, bound)
        guard.lock(arrays, self._where(f"a launch of kernel '{kernel.name}'"))

    def rule(self, rule: CustomRule, given: tuple) -> Any:
        """A rule call of an untaped step: its primal, with the loop's bookkeeping as for a launch."""
        given = unwrap_args(given, f"a call of rule '{rule.name}' in step {self.t} of the checkpointed loop")
        loop = self.loop
        if loop.first_forward:
            loop.wants_shadows([rule.may_write(n) for n in range(len(given))], given)
        if any(isinstance(a, ActiveScalar) for a in given) or any(
                is_array(a) and loop.outer.shadows.find(a) is not None for a in given):
            loop.outer.expect_rule()
            rule.require("reverse")
        call, result = run_plain(loop.guard, rule, given, f"before a call of rule '{rule.name}' in step {self.t} of "
                                 "the loop", lambda call, binding: loop.before_launch(rule.name, call.written, binding,
                                                                                    []))
        loop.guard.lock(call.arrays, self._where(f"a call of rule '{rule.name}'"))
        return result

    def _where(self, what: str) -> str:
        return f"after {what} in step {self.t} of the checkpointed loop (launch {self.loop.number} of the program)"


class LoopEntry(LoopHooks):
    """One checkpointed loop in a program's tape: its schedule, snapshots and taped segments."""

    kernel = "checkpointed_loop"

    def __init__(self, outer: ProgramRecorder, step: Any, nsteps: int, schedule: Any, progress: bool,
                 storage: str):
        self.outer, self.step_fn, self.nsteps = outer, step, nsteps
        self.number = len(outer.steps) + 1
        self.at: int | None = 0  # the step whose input the live buffers hold (None: not known)
        self.storage = storage
        self.guard = outer.guard
        self.driver = ScheduledLoop(schedule, nsteps, self, progress)
        self.first_forward = True
        self.seen: dict[int, _Seen] = {}
        self.open: list[_Snapshot] = []
        self.forward_taped: set[int] = set()  # steps the first forward taped
        self.state: dict[int, Any] = {}  # id -> buffer, once the first forward is over
        self.persistent: dict[int, Any] = {}  # id -> buffer the loop took that outlived its first forward
        self.alive: dict[int, Any] = {}  # every buffer the loop took that is alive after its first forward
        self.written_back: list = []  # those of them its steps wrote
        self.taped_only: dict[int, Any] = {}  # buffers only one step, taped in the first forward, took
        self.wanted: dict[int, Any] = {}  # id -> weak reference: buffers the first forward's launches need shadows of
        self.last_write: dict[int, int] = {}  # id(state buffer) -> the last step writing it
        self.signatures: dict[int, list] = {}  # step -> its launches: (kernel, persistent buffer ids or None)
        self.recomputed_signature: list = []
        self.entry_needed = outer.versions.read()  # what the program before the loop still reads
        self.t = 0  # the step running
        self.segments: dict[int, _Segment] = {}
        self.live: Any = None  # the segment whose end state the live buffers hold
        self.bytes_held = 0
        self.peak_bytes = 0
        self.disk: DiskSnapshots | None = None
        self.stats: ScheduleStats = self.driver.stats

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

    def roots_written_back(self) -> list:
        """The buffers the loop's reverse writes primal values into: every live one its steps wrote."""
        return self.written_back

    def run_forward(self) -> None:
        try:
            self.driver.forward()
        except BaseException:
            self.close()
            raise
        self._find_state()

    def run_reverse(self, lanes: int) -> None:
        """The loop's reverse, as one step of the program's: the schedule's reverse phase."""
        try:
            self.driver.reverse()
        finally:
            self.close()

    def close(self) -> None:
        self.driver.close()
        for snap in self.open:
            snap.free()
        self.open = []
        for n0 in list(self.segments):
            self._drop_segment(n0)
        if self.disk is not None:
            self.disk.close()
            self.disk = None

    # -- storage ----------------------------------------------------------------------------------------------------
    def store(self, root: Any, storage: StorageType) -> Any:
        if storage == StorageType.DISK:
            if is_cupy_array(root):
                raise ProgramError("disk snapshots are for NumPy arrays; this loop's state is on the GPU",
                                   hint="a schedule storing in RAM (storage='host' keeps it in host memory)")
            self.disk = self.disk or DiskSnapshots()
            return ("disk", self.disk.write([root]))
        if self.storage == "host" and device_memory(root):
            return ("host", to_host(root))
        return ("copy", root.copy())

    def load(self, root: Any, data: Any) -> None:
        kind, payload = data
        if isinstance(root, np.ndarray) and not root.flags.writeable:
            root.flags.writeable = True  # locked by the program's guard while it recorded
        if kind == "disk":
            self.disk.read_into(payload, [root])
        elif kind == "host":
            from_host(root, payload)
        else:
            root[...] = payload

    def drop(self, data: Any) -> None:
        if data[0] == "disk" and self.disk is not None:
            self.disk.delete(data[1])

    def held(self, nbytes: int) -> None:
        self.bytes_held += nbytes
        self.peak_bytes = max(self.peak_bytes, self.bytes_held)

    # -- the schedule's hooks ---------------------------------------------------------------------------------------
    def snapshot(self, storage: StorageType, skip_dead: bool = True) -> _Snapshot:
        snap = _Snapshot(self.at, storage, self)
        snap.skip_dead = skip_dead
        if self.first_forward:
            self.open.append(snap)  # filled as steps first write each buffer
        else:  # the state buffers some step from here on writes, unless it first overwrites them whole
            for key, root in self.state.items():
                if self.at is None or self.last_write[key] >= self.at:
                    later = [dead for step, dead in self.first_use[key] if step >= self.at]
                    if self.at is None or not later or not later[0] or not self._may_skip(snap, key):
                        snap.add(root)
        return snap

    def _may_skip(self, snap: _Snapshot, key: int) -> bool:
        """Whether `snap` may leave out a buffer the steps after it overwrite whole before reading: not for a
        segment's end state, nor at step 0 for what the program before the loop still reads (the segment
        from step 0 saves it from the restored state for that program's reverse)."""
        return snap.skip_dead and not (snap.at == 0 and key in self.entry_needed)

    def restore(self, snap: _Snapshot) -> None:
        snap.restore()
        self.at, self.live = snap.at, None

    def free(self, snap: _Snapshot) -> None:
        if snap in self.open:
            self.open.remove(snap)
        snap.free()

    def nbytes(self, snap: _Snapshot) -> int:
        return snap.nbytes

    def advance(self, n0: int, n1: int, tape: bool) -> None:
        if self.first_forward:
            self._advance(n0, n1, tape)
            return
        # recomputing during the program's reverse: the recording's guard was given back; this one is the
        # recomputation's own, given back when it ends
        self.guard = HostWriteGuard()
        try:
            self._advance(n0, n1, tape)
        finally:
            self.guard.release()

    def _advance(self, n0: int, n1: int, tape: bool) -> None:
        self.live = None
        if not tape:
            for t in range(n0, n1):
                self._step(t, _Untaped(self, t))
            self.at = n1
            return
        if self.first_forward:
            self._make_wanted_shadows()
        shadows = self.outer.shadows
        # from step 0: what the program before the loop still reads, saved before the loop overwrites it
        versions = Versions(self.entry_needed if n0 == 0 else None)
        rec = ProgramRecorder(shadows, self.guard, within=self.outer, versions=versions, observer=self.before_launch)
        before = len(shadows.entries)
        for t in range(n0, n1):
            self._step(t, rec)
            if self.first_forward:
                self.forward_taped.add(t)
        seg = _Segment(n0, n1, rec.steps, shadows.entries[before:])
        self.at = n1
        self.segments[n0] = seg
        self.live = n0

    def reverse(self, n1: int, n0: int, clear: bool) -> None:
        """The schedule's reverse of steps n1-1 … n0: the taped segment from n0, on its end state."""
        seg = self.segments.get(n0)
        if seg is None or seg.n1 != n1:
            raise ProgramError(f"the schedule reverses steps {n0}..{n1 - 1}, which were not taped as one segment")
        if self.live != n0:
            if seg.end is None:
                raise ProgramError("the schedule ran other steps between taping a segment and reversing it, and "
                                   "the segment's end state was not kept", hint="report this schedule as a bug")
            seg.end.restore()
        reverse_steps(seg.steps, self.outer.shadows.lanes)
        self.live, self.at = None, None
        if clear:
            self._drop_segment(n0)

    def keep_tapes(self, n0: int, n1: int) -> None:
        """The state the segment's reverse starts from, for when other steps run first (mixed schedules)."""
        self.segments[n0].end = self.snapshot(StorageType.RAM, skip_dead=False)  # the live state is at n1

    def discard_tapes(self, steps) -> None:
        for n0 in [n for n in self.segments if n in set(steps)]:
            self._drop_segment(n0)

    def _drop_segment(self, n0: int) -> None:
        seg = self.segments.pop(n0)
        if seg.end is not None:
            seg.end.free()
        # the shadows of buffers the segment's steps allocated (those of buffers that outlived the first
        # forward carry derivatives for the launches before and after: they stay)
        gone = {id(e) for e in seg.temporaries if id(e.primal) not in self.alive}
        self.outer.shadows.remove(gone)

    # -- recording --------------------------------------------------------------------------------------------------
    def _step(self, t: int, recorder: Recorder) -> None:
        self.t = t
        self.recomputed_signature = []
        with recording(recorder):
            self.step_fn(t)
        if not self.first_forward and self.recomputed_signature != self.signatures.get(t, []):
            self._mismatch(t)

    def before_launch(self, name: str, written: list, binding: Any, overwritten: list) -> None:
        """Bookkeeping before a launch of the running step t runs: copy-on-write for open snapshots, the state's checks.
        `overwritten`: the buffers the launch overwrites whole without reading them (record.overwritten_whole);
        a snapshot need not keep a buffer whose first use after it is such a launch."""
        t = self.t
        arrays = [v for v in binding.values if is_array(v)]
        dead = {id(r) for r in overwritten}
        if self.first_forward:
            sig = []
            for a in arrays:
                root = memory_root(a)
                seen = self.seen.get(id(root))
                if seen is None or seen.ref() is not root:
                    seen = self.seen[id(root)] = _Seen(weakref.ref(root, self._freed))
                seen.steps.add(t)
                seen.first.setdefault(t, id(root) in dead)
                sig.append((id(root), seen))
            for snap in self.open:
                for a in written:
                    key = id(memory_root(a))
                    if key not in snap.copies and key not in snap.skipped:
                        if key in dead and key not in snap.used and self._may_skip(snap, key):
                            snap.skipped.add(key)  # its contents at the snapshot's step are never read
                        else:
                            snap.add(memory_root(a), self.seen[key].ref)
                snap.used.update(id(memory_root(a)) for a in arrays)
            for a in written:
                self.seen[id(memory_root(a))].written = t
            self.signatures.setdefault(t, []).append((name, tuple(binding.dim), sig))
            return
        ids = []
        for a in arrays:
            root = memory_root(a)
            known = self.seen.get(id(root))
            ids.append(id(root) if known is not None and known.ref() is root and id(root) in self.persistent
                       else None)
        self.recomputed_signature.append((name, tuple(binding.dim), ids))
        for a in written:
            root = memory_root(a)
            if self.taped_only.get(id(root)) is root:
                raise ProgramError(f"step {t} of the checkpointed loop, taped in the loop's first forward, is "
                                   f"recomputed by the schedule, and its launch of kernel '{name}' writes an array "
                                   f"of shape {tuple(root.shape)} that only this step takes: whether it is part of "
                                   "the state cannot be told", hint="use the default (binomial) schedule")
            if id(root) in self.persistent and id(root) not in self.state:
                raise ProgramError(f"step {t} of the checkpointed loop (launch of kernel '{name}') writes an array "
                                   f"of shape {tuple(root.shape)} that is not part of the loop's state as recorded "
                                   "(the buffers its steps write); recomputing it from a snapshot would be wrong",
                                   hint="a step must be a function of t and the state: write the same arrays in "
                                        "every step, or allocate per-step temporaries inside the step")

    def wants_shadows(self, written: list, args: tuple) -> None:
        """An untaped launch of the first forward that a recorded program would have taken with shadows:
        the arrays it writes that no shadow covers get one when the forward ends (if they outlive it), so
        that the launches after the loop see the shadows they would have seen without checkpoints."""
        shadows = self.outer.shadows
        arrays = [a for a in args if is_array(a)]
        if not (any(isinstance(a, ActiveScalar) for a in args)
                or any(shadows.find(a) is not None or id(memory_root(a)) in self.wanted for a in arrays)):
            return
        for w, a in zip(written, args):
            if w and is_array(a) and a.dtype.kind == "f" and shadows.find(a) is None:
                root = memory_root(a)
                self.wanted[id(root)] = weakref.ref(root)

    def _make_wanted_shadows(self) -> None:
        """The shadows the first forward's untaped launches would have made, for the buffers alive now
        (between steps: a step's temporaries are gone)."""
        for ref in self.wanted.values():
            root = ref()
            if root is not None and self.outer.shadows.find(root) is None:
                self.outer.shadows.internal(root)
        self.wanted = {}

    def _freed(self, ref: Any) -> None:
        """A buffer of the first forward was freed (a step's temporary): its copies go too."""
        for snap in self.open:
            for key in [k for k, (r, _, _) in snap.copies.items() if r is ref]:
                snap.remove(key)

    def _find_state(self) -> None:
        """After the first forward: the state, the persistent buffers, the steps' signatures."""
        self.first_forward = False
        persistent = {}
        for key, seen in self.seen.items():
            root = seen.ref()
            if root is None:
                continue  # a step's temporary, freed
            self.alive[key] = root
            if seen.written >= 0:
                self.written_back.append(root)
            if seen.steps <= self.forward_taped and len(seen.steps) == 1:
                self.taped_only[key] = root  # a taped step's temporary, or a buffer only that step takes
                continue
            persistent[key] = root
            if seen.written >= 0:
                self.state[key] = root
                self.last_write[key] = seen.written
        self.persistent = persistent
        for snap in self.open:  # keep only the state in the first forward's snapshots
            for key in [k for k, (ref, _, _) in snap.copies.items() if k not in self.state or ref() is None]:
                snap.remove(key)
            snap.copies = {k: (self.state[k], d, size) for k, (_, d, size) in snap.copies.items()}
        self.open = []
        self.signatures = {t: [(name, dim, [key if key in persistent and seen.ref() is persistent[key] else None
                                            for key, seen in sig]) for name, dim, sig in launches]
                           for t, launches in self.signatures.items()}
        # per state buffer, the steps that take it, each with whether it first overwrites it whole unread
        self.first_use = {key: sorted(self.seen[key].first.items()) for key in self.state}
        self._make_wanted_shadows()
        for root in self.alive.values():  # what the program after the loop must give back before its reverse
            self.outer.versions.read_by_reverse(root)

    def _mismatch(self, t: int) -> None:
        want, got = self.signatures.get(t, []), self.recomputed_signature
        for k, (a, b) in enumerate(zip(want, got)):
            if a != b:
                raise ProgramError(f"step {t} of the checkpointed loop launched '{b[0]}' (launch {k + 1} of the "
                                   f"step) on other arrays, or another kernel, than when it was recorded ('{a[0]}')",
                                   hint="a step must be a function of t and the loop's state")
        raise ProgramError(f"step {t} of the checkpointed loop made {len(got)} launches on recomputation, "
                           f"{len(want)} when it was recorded",
                           hint="a step must be a function of t and the loop's state")
