"""Drives a checkpointing schedule (docs/checkpointed-loops.md): the actions of a
`checkpoint_schedules` schedule turned into calls on a loop's hooks.

A checkpointed loop keeps a few snapshots of its state and recomputes the steps
between them. *Which* steps to store and recompute is the schedule's business
(package `checkpoint_schedules`); *how* to run, tape, snapshot and reverse a
step is the program layer's (`LoopHooks`). `ScheduledLoop` sits between them:
it reads every action the package's schedules yield, keys stored checkpoints by
(storage, step), checks that the schedule is consistent (each step advanced from
the state it starts from, reversed once, in order, from a tape it recorded),
frees what `Move` and `Reverse` release and everything left at the end, also
when a hook raises, and counts what it did (`ScheduleStats`).

The default schedule is `BinomialSchedule`: the actions of the package's
`MultistageCheckpointSchedule(nsteps, snapshots, 0)` (binomial, Revolve's step
counts), generated in pure Python. The package computes each segment length
with a `numba.njit` function compiled, without a disk cache, on first use in
every process (2.0-2.9 s measured on 2 cores here, about 20 s in issue 16);
`BinomialSchedule` calls the same function's Python source (`py_func`), which
takes microseconds per segment, so a 100-step loop never waits for a compiler
(0.5 ms for its 400 actions; 35-70 ms for 10,000 steps and 32 snapshots).
"""

from __future__ import annotations

import operator
import os
import shutil
import tempfile
import weakref
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from checkpoint_schedules import (
    CheckpointSchedule,
    Copy,
    EndForward,
    EndReverse,
    Forward,
    Move,
    Reverse,
    StorageType,
)
from checkpoint_schedules.multistage import n_advance as _jitted_n_advance

from ..errors import ProgramError

# the package's segment length, Griewank & Walther (2000) Prop. 1 with its
# 'maximum' trajectory, as plain Python (the njit dispatcher keeps the source)
_n_advance = getattr(_jitted_n_advance, "py_func", _jitted_n_advance)

_STORES = (StorageType.RAM, StorageType.DISK)


class BinomialSchedule(CheckpointSchedule):
    """`MultistageCheckpointSchedule(max_n, snapshots, 0)`, action for action,
    without its JIT: at most `snapshots` forward restart checkpoints in RAM,
    each step's tape recorded just before its reverse. One reverse."""

    def __init__(self, max_n: int, snapshots: int):
        super().__init__(max_n)
        self._snapshots = min(snapshots, max_n - 1)
        self._exhausted = False

    def _iterator(self):
        max_n, stored = self._max_n, []

        def write_ics_until(end: int, free: int):
            # store the state at each segment start, advancing towards `end`
            while self._n < end:
                n0 = self._n
                self._n = n0 + _n_advance(self._max_n - self._r - n0, free - len(stored))
                stored.append(n0)
                yield Forward(n0, self._n, True, False, StorageType.RAM)

        yield from write_ics_until(max_n - 1, self._snapshots)
        while True:
            # the step before the reverse's position is taped, then reversed
            self._n += 1
            yield Forward(self._n - 1, self._n, False, True, StorageType.WORK)
            if self._r == 0:
                yield EndForward()
            self._r += 1
            yield Reverse(self._n, self._n - 1, True)
            if self._r == max_n:
                break
            cp_n = stored[-1]
            self._n = cp_n
            if cp_n == max_n - self._r - 1:
                stored.pop()
                yield Move(cp_n, StorageType.RAM, StorageType.WORK)
            else:
                yield Copy(cp_n, StorageType.RAM, StorageType.WORK)
                # the checkpoint just read is rewritten in place: one more slot free
                self._n = cp_n + _n_advance(max_n - self._r - cp_n, self._snapshots - len(stored) + 1)
                yield Forward(cp_n, self._n, False, False, StorageType.WORK)
                yield from write_ics_until(max_n - self._r - 1, self._snapshots)
        self._exhausted = True
        yield EndReverse()

    @property
    def is_exhausted(self) -> bool:
        return self._exhausted

    def uses_storage_type(self, storage_type: StorageType) -> bool:
        return storage_type == StorageType.RAM and self._snapshots > 0


class SegmentedSchedule(CheckpointSchedule):
    """`BinomialSchedule(ceil(max_n / segment), snapshots)` over segments of `segment` steps (the last one
    shorter when `segment` does not divide `max_n`): each segment is advanced, stored, taped and reversed as
    one. `segment=1` is the binomial schedule; `snapshots` >= the segment count - 1 is JAX's two-level scheme
    (a snapshot per segment, each segment recomputed once, taped whole); in between, mixed
    (docs/checkpointed-loops.md#choosing-by-memory)."""

    def __init__(self, max_n: int, snapshots: int, segment: int):
        super().__init__(max_n)
        self.segment = segment
        self.inner = BinomialSchedule(-(-max_n // segment), snapshots)
        self._exhausted = False

    def _step(self, j: int) -> int:
        return min(j * self.segment, self._max_n)

    def _iterator(self):
        at = self._step
        for a in self.inner:
            if isinstance(a, Forward):
                a = Forward(at(a.n0), at(a.n1), a.write_ics, a.write_adj_deps, a.storage)
                self._n = a.n1
            elif isinstance(a, Reverse):
                a = Reverse(at(a.n1), at(a.n0), a.clear_adj_deps)
                self._r = self._max_n - a.n0
            elif isinstance(a, (Copy, Move)):
                a = type(a)(at(a.n), a.from_storage, a.to_storage)
                self._n = a.n
            elif isinstance(a, EndReverse):
                self._exhausted = True
            yield a

    @property
    def is_exhausted(self) -> bool:
        return self._exhausted

    def uses_storage_type(self, storage_type: StorageType) -> bool:
        return self.inner.uses_storage_type(storage_type)


def binomial_counts(nsteps: int, snapshots: int) -> tuple[int, int]:
    """(steps advanced in all, its first forward and the taped reruns included; snapshots restored) by
    `BinomialSchedule(nsteps, snapshots)`, counted from its actions."""
    total = restores = 0
    for a in BinomialSchedule(nsteps, snapshots):
        if isinstance(a, Forward):
            total += a.n1 - a.n0
        elif isinstance(a, (Copy, Move)):
            restores += 1
        elif isinstance(a, EndReverse):
            return total, restores
    raise ProgramError("the binomial schedule has no end")  # pragma: no cover (it always ends)


def forward_steps(nsteps: int, snapshots: int) -> int:
    """The steps `BinomialSchedule(nsteps, snapshots)` advances in all (binomial_counts)."""
    return binomial_counts(nsteps, snapshots)[0]


def _count(value: Any, name: str, least: int) -> int:
    if isinstance(value, bool):
        raise ProgramError(f"{name} must be an integer, got {value!r}")
    try:
        value = operator.index(value)
    except TypeError:
        raise ProgramError(f"{name} must be an integer, got {value!r}") from None
    if value < least:
        raise ProgramError(f"{name} must be at least {least}, got {value}")
    return value


def resolve_schedule(
    nsteps: int, snapshots: int, schedule: CheckpointSchedule | None = None, reserve: int = 0
) -> CheckpointSchedule | None:
    """The schedule for a loop of `nsteps` steps: `schedule` checked, or the
    default `BinomialSchedule(nsteps, snapshots - reserve)` (`reserve`: snapshots
    the loop keeps for itself); None when `nsteps == 0`.
    Raises ProgramError naming a bad `nsteps`, `snapshots` or `schedule`."""
    nsteps = _count(nsteps, "nsteps", 0)
    snapshots = _count(snapshots, "snapshots", 1)
    if schedule is None:
        return BinomialSchedule(nsteps, snapshots - reserve) if nsteps else None
    if not isinstance(schedule, CheckpointSchedule):
        raise ProgramError(
            f"schedule must be a checkpoint_schedules schedule object, got {type(schedule).__name__}",
            hint="e.g. checkpoint_schedules.MixedCheckpointSchedule(nsteps, snapshots), or schedule=None",
        )
    if schedule.max_n is not None and schedule.max_n != nsteps:
        raise ProgramError(f"schedule was built for {schedule.max_n} steps, the loop has nsteps={nsteps}")
    if schedule.n != 0 or schedule.r != 0:
        raise ProgramError("schedule has already been used; schedules are single-use, pass a fresh one")
    return schedule if nsteps else None


class LoopHooks(ABC):
    """What the driver asks of a loop. The live state is the loop's arrays;
    a snapshot is an owned copy of it."""

    @abstractmethod
    def advance(self, n0: int, n1: int, tape: bool) -> None:
        """Run steps n0 … n1-1 from the live state (which is at step n0); if
        `tape`, keep what their reverses need until `reverse` is done with it."""

    @abstractmethod
    def reverse(self, n1: int, n0: int, clear: bool) -> None:
        """Run the reverses of steps n1-1 … n0 from their tapes; free the tapes if `clear`."""

    @abstractmethod
    def snapshot(self, storage: StorageType) -> Any:
        """A copy of the live state, held in `storage` (RAM or DISK)."""

    @abstractmethod
    def restore(self, snap: Any) -> None:
        """Copy `snap` into the live state; `snap` stays valid."""

    @abstractmethod
    def free(self, snap: Any) -> None:
        """Release `snap`; it is not used again."""

    def nbytes(self, snap: Any) -> int:
        """Bytes that `snap` holds (for the statistics)."""
        return 0

    def keep_tapes(self, n0: int, n1: int) -> None:
        """The tapes of steps n0 … n1-1, just recorded, are kept for a reverse that may come after other
        steps have run (the live state is at n1 now)."""
        return None

    def discard_tapes(self, steps: Sequence[int]) -> None:
        """Drop the tapes of `steps` without reversing them (after an error)."""
        return None


@dataclass
class ScheduleStats:
    """What a checkpointed loop cost. `peak_snapshots` counts stored
    checkpoints (state snapshots and, for schedules that store them, steps'
    tapes held for later); bytes count state snapshots, by storage."""

    nsteps: int
    steps_advanced: int = 0  # forward steps run, the first forward included
    steps_reversed: int = 0
    steps_blocked: int = 0  # recomputed launches run through temporally blocked passes (recompute.py)
    read_in_place: int = 0  # untaped launches that read a restored snapshot in place (snapshots.py `Deferred`)
    snapshots_held: int = 0
    peak_snapshots: int = 0
    peak_ram_bytes: int = 0
    peak_disk_bytes: int = 0

    @property
    def steps_recomputed(self) -> int:
        return self.steps_advanced - self.nsteps


@dataclass
class _Checkpoint:
    snap: Any  # the state at its step; None: only the step's tapes (kept by the hooks)
    nbytes: int


class ScheduledLoop:
    """One checkpointed loop: `forward()` runs the schedule up to `EndForward`
    (the live state then holds step nsteps' input, i.e. the loop's result),
    `reverse()` runs it to `EndReverse`; both free everything if a hook or
    the schedule raises, and `reverse()` at its end. Usable as a context
    manager that closes it."""

    def __init__(self, schedule: CheckpointSchedule | None, nsteps: int, hooks: LoopHooks, progress: bool = False):
        # schedule: from resolve_schedule (None only when nsteps == 0)
        self.schedule, self.hooks, self.progress = schedule, hooks, progress
        self.stats = ScheduleStats(nsteps)
        self.nsteps = nsteps
        self._stored: dict[tuple[StorageType, int], _Checkpoint] = {}
        self._taped: set[int] = set()
        self._at: int | None = 0  # the step whose input the live state holds; None: not known
        self._bytes = {StorageType.RAM: 0, StorageType.DISK: 0}
        self._phase = "forward"

    def __enter__(self) -> ScheduledLoop:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def forward(self) -> None:
        if self._phase != "forward":
            raise ProgramError("a checkpointed loop runs its forward once, before its reverse")
        self._phase = "reverse"
        if self.nsteps:
            self._run(EndForward, None)

    def reverse(self) -> ScheduleStats:
        if self._phase != "reverse":
            raise ProgramError("reverse() of a checkpointed loop needs exactly one forward() before it")
        self._phase = "done"
        if not self.nsteps:
            return self.stats
        bar = None
        if self.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=self.nsteps, desc="checkpointed loop, reverse", unit="step")
        try:
            self._run(EndReverse, bar)
        finally:
            if bar is not None:
                bar.close()
        if self.stats.steps_reversed != self.nsteps:
            self.close()
            raise ProgramError(f"schedule reversed {self.stats.steps_reversed} of {self.nsteps} steps")
        self.close()
        return self.stats

    def close(self) -> None:
        """Free every stored snapshot and drop tapes not yet reversed. Idempotent."""
        stored, self._stored = self._stored, {}
        taped, self._taped = sorted(self._taped), set()
        self.stats.snapshots_held = 0
        for cp in stored.values():
            if cp.snap is not None:
                self.hooks.free(cp.snap)
        if taped:
            self.hooks.discard_tapes(taped)

    def _run(self, end: type, bar: Any) -> None:
        try:
            for action in self.schedule:
                if isinstance(action, end):
                    return
                self._do(action)
                if bar is not None and isinstance(action, Reverse):
                    bar.update(len(action))
                    bar.set_postfix(recomputed=self.stats.steps_recomputed, refresh=False)
        except BaseException:
            self.close()
            raise
        self.close()
        what = "reverse (it is forward-only)" if end is EndReverse else "end to its forward"
        raise ProgramError(f"{type(self.schedule).__name__} has no {what}")

    def _do(self, action: Any) -> None:
        if isinstance(action, Forward):
            self._forward(action)
        elif isinstance(action, Reverse):
            self._reverse(action)
        elif isinstance(action, (Copy, Move)):
            self._load(action)
        elif not isinstance(action, (EndForward, EndReverse)):
            raise ProgramError(f"unknown checkpointing action {action!r}")

    def _forward(self, a: Forward) -> None:
        n0, n1 = a.n0, min(a.n1, self.nsteps)  # online schedules advance 'forever' until finalize
        if n0 != self._at or n1 <= n0:
            raise ProgramError(f"schedule action {a!r} does not start where the loop state is (step {self._at})")
        if a.write_ics:
            self._store(a, n0, self.hooks.snapshot(a.storage))
        self.hooks.advance(n0, n1, a.write_adj_deps)
        self._at = n1
        self.stats.steps_advanced += n1 - n0
        if a.write_adj_deps:
            self._taped.update(range(n0, n1))
            if a.storage in _STORES:  # tapes kept for later count as a checkpoint (mixed schedules)
                self.hooks.keep_tapes(n0, n1)
                self._store(a, n0, None)
        if self.schedule.max_n is None and n1 == self.nsteps:
            self.schedule.finalize(self.nsteps)

    def _store(self, a: Forward, n: int, snap: Any) -> None:
        if a.storage not in _STORES:
            raise ProgramError(f"schedule action {a!r} stores in {a.storage!r}, not RAM or DISK")
        if (a.storage, n) in self._stored:
            if snap is None:  # this step's tapes, beside its state stored already
                return
            self._drop((a.storage, n))
        nbytes = self.hooks.nbytes(snap) if snap is not None else 0
        self._stored[(a.storage, n)] = _Checkpoint(snap, nbytes)
        self._bytes[a.storage] += nbytes
        s = self.stats
        s.snapshots_held = len(self._stored)
        s.peak_snapshots = max(s.peak_snapshots, s.snapshots_held)
        s.peak_ram_bytes = max(s.peak_ram_bytes, self._bytes[StorageType.RAM])
        s.peak_disk_bytes = max(s.peak_disk_bytes, self._bytes[StorageType.DISK])

    def _drop(self, key: tuple[StorageType, int]) -> None:
        cp = self._stored.pop(key)
        self._bytes[key[0]] -= cp.nbytes
        self.stats.snapshots_held = len(self._stored)
        if cp.snap is not None:
            self.hooks.free(cp.snap)

    def _load(self, a: Copy | Move) -> None:
        key = (a.from_storage, a.n)
        if key not in self._stored:
            raise ProgramError(f"schedule action {a!r} reads a checkpoint that was never stored")
        if a.to_storage == StorageType.WORK:
            cp = self._stored[key]
            if cp.snap is not None:
                self.hooks.restore(cp.snap)
                self._at = a.n
            else:  # a step's tapes, for the reverse that follows; no restart point
                self._at = None
        elif a.to_storage != StorageType.NONE or isinstance(a, Copy):
            # no schedule of checkpoint_schedules 1.0 moves data between RAM and DISK
            raise ProgramError(f"schedule action {a!r} is not supported: only loads into WORK and deletions")
        if isinstance(a, Move):
            self._drop(key)

    def _reverse(self, a: Reverse) -> None:
        expected = self.nsteps - self.stats.steps_reversed
        steps = range(a.n0, a.n1)
        if a.n1 != expected or not self._taped.issuperset(steps):
            raise ProgramError(f"schedule action {a!r}: the reverse is at step {expected}, from taped steps only")
        self.hooks.reverse(a.n1, a.n0, a.clear_adj_deps)
        if a.clear_adj_deps:
            self._taped.difference_update(steps)
        self.stats.steps_reversed += len(a)
        self._at = None  # a reverse may roll the state back; the schedule reloads before advancing


def drive(hooks: LoopHooks, nsteps: int, snapshots: int = 1, schedule: CheckpointSchedule | None = None,
          progress: bool = False) -> ScheduleStats:
    """Run a loop's forward and its reverse under a schedule (the default
    binomial one with `snapshots`, or `schedule`); returns the statistics.
    Every snapshot is freed on return and on error."""
    schedule = resolve_schedule(nsteps, snapshots, schedule)
    with ScheduledLoop(schedule, nsteps, hooks, progress) as loop:
        loop.forward()
        return loop.reverse()


class DiskSnapshots:
    """Snapshots of NumPy arrays in files of a private temporary directory, for
    hooks' DISK storage on the CPU. `write` returns a handle for `read_into`
    and `delete`; `close` removes the directory, and so does the object's
    garbage collection or the process's exit when nothing closed it (a split
    thunk's tape whose reverse never runs: docs/caching.md#temporary-files)."""

    def __init__(self, prefix: str = "gradkern-snapshots-"):
        self.dir = tempfile.mkdtemp(prefix=prefix)
        self._next = 0
        self._remove = weakref.finalize(self, shutil.rmtree, self.dir, ignore_errors=True)

    def write(self, arrays: Sequence[np.ndarray]) -> list[str]:
        paths = []
        for a in arrays:
            path = os.path.join(self.dir, f"{self._next}.npy")
            self._next += 1
            np.save(path, np.asarray(a), allow_pickle=False)
            paths.append(path)
        return paths

    def read_into(self, handle: list[str], arrays: Sequence[np.ndarray]) -> None:
        for path, a in zip(handle, arrays, strict=True):
            a[...] = np.load(path, mmap_mode="r")

    def nbytes(self, handle: list[str]) -> int:
        return sum(os.path.getsize(p) for p in handle)

    def delete(self, handle: list[str]) -> None:
        for path in handle:
            os.remove(path)

    def close(self) -> None:
        self._remove()


__all__ = ["BinomialSchedule", "DiskSnapshots", "LoopHooks", "ScheduleStats", "ScheduledLoop", "SegmentedSchedule",
           "binomial_counts", "drive", "forward_steps", "resolve_schedule"]
