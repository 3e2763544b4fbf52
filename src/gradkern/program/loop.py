"""`gk.checkpointed_loop` (docs/checkpointed-loops.md): a plain loop outside a reverse-mode
program, a checkpointed one inside (checkpoint.py, imported on first use so
that `import gradkern` does not pay for checkpoint_schedules)."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..errors import GradkernError, ProgramError
from ..recording import active_recorder
from .collectives import at_loop_entry
from .record import ProgramRecorder
from .signature import check_ran, refuse_lazy

STORAGES = ("device", "host")


@dataclass
class LoopSchedule:
    """What a checkpointed loop will do, as code that must see every process take the same schedule
    (gradkern.mpi: docs/distributed.md#deadlocks-and-how-gradkern-prevents-them) reads it at the loop's entry.
    `agreed`: what such code has already checked for this loop (it checks once), id -> the object, held so that
    its id is not another's while the loop's first forward runs."""

    nsteps: int
    snapshots: int | None
    schedule: str  # the schedule's class
    storage: str
    memory: int | None = None  # memory=: each process picks from its own sizes (equal blocks pick alike)
    agreed: dict = field(default_factory=dict)
    parameters: str = ""  # what the schedule object was built with (schedule_parameters)

    def describe(self) -> tuple:
        return (self.nsteps, self.snapshots, self.schedule, self.storage, self.memory, self.parameters)


def schedule_parameters(schedule: Any) -> str:
    """What a schedule object was built with, as text that two processes can compare: its plain attributes
    (numbers, strings, flags, enums and tuples of them), taken before the loop runs it. Two objects of one
    class built with different parameters (MixedCheckpointSchedule(8, 2) and (8, 3)) differ here."""
    if schedule is None:
        return ""

    def plain(v: Any) -> bool:
        if isinstance(v, tuple):
            return all(plain(x) for x in v)
        return v is None or isinstance(v, (bool, int, float, str, Enum))
    return repr(sorted((k, repr(v)) for k, v in vars(schedule).items() if plain(v)))


# the checkpointed loop whose first forward is running (None outside one)
_entering: ContextVar[LoopSchedule | None] = ContextVar("gradkern_loop_entry", default=None)


def entering_loop() -> LoopSchedule | None:
    """The checkpointed loop of a reverse-mode program whose first forward is running, or None."""
    return _entering.get()


def _checked(step: Any, nsteps: Any, snapshots: Any, schedule: Any, progress: Any, storage: Any,
             memory: Any) -> tuple:
    """checkpointed_loop's arguments checked: (memory, rebuild, the resolved schedule) or ProgramError."""
    if not callable(step):
        raise ProgramError(f"step must be a callable step(t), got {type(step).__name__}")
    refuse_lazy(step, "gk.checkpointed_loop", "step")
    if memory is not None:
        from .budget import check_memory

        if snapshots is not None or schedule is not None:
            other = "snapshots=" if snapshots is not None else "schedule="
            raise ProgramError(f"checkpointed_loop takes memory= or {other}, not both: memory= picks the snapshots "
                               "and the schedule itself",
                               hint="gk.checkpointed_loop(step, nsteps, memory=2**30), or drop memory=")
        memory = check_memory(memory)
    elif snapshots is None and schedule is None:
        raise ProgramError("checkpointed_loop needs snapshots=s (how many states to keep), memory=bytes or a "
                           "schedule=", hint="gk.checkpointed_loop(step, nsteps, snapshots=8)")
    if storage not in STORAGES:
        raise ProgramError(f"storage must be one of {', '.join(STORAGES)}, got {storage!r}")
    if not isinstance(progress, bool):
        raise ProgramError(f"progress must be True or False, got {progress!r}")
    from .schedule import resolve_schedule

    # the default schedule keeps one of its snapshots at step nsteps-1 to rebuild the final state from
    rebuild = schedule is None and isinstance(snapshots, int) and not isinstance(snapshots, bool) and snapshots >= 2
    resolved = resolve_schedule(nsteps, snapshots if snapshots is not None else 1, schedule, reserve=int(rebuild))
    if memory is not None and resolved is not None:
        resolved = None  # the loop makes the schedule memory= picks (budget.py)
    return memory, rebuild, resolved


def _refused_at_entry(error: GradkernError) -> None:
    """A loop refused on this process before its entry: the others may be waiting in the entry's agreement
    (collectives.py), so it takes part with a description no valid loop has; they raise, and so does this one
    (its own error)."""
    try:
        at_loop_entry(LoopSchedule(-1, None, f"refused on this rank: {error.message}", "", None))
    except GradkernError:
        pass


def checkpointed_loop(step: Any, nsteps: int, snapshots: int | None = None, schedule: Any = None,
                      progress: bool = False, storage: str = "device", memory: int | None = None) -> None:
    """Call `step(t)` for t = 0 … nsteps-1. Inside a program's reverse mode,
    keep at most `snapshots` snapshots of the loop's state and recompute the
    steps between them as the schedule says (default: binomial, Revolve's
    step counts; `schedule=` any checkpoint_schedules schedule object), or,
    with `memory=` bytes instead, the schedule that is fastest within that
    budget (binomial, two-level or mixed; docs/checkpointed-loops.md).
    `progress=True` shows a tqdm bar over the reverse; `storage="host"` keeps
    snapshots of CuPy arrays in host memory."""
    recorder = active_recorder()
    try:
        memory, rebuild, resolved = _checked(step, nsteps, snapshots, schedule, progress, storage, memory)
    except GradkernError as e:
        if isinstance(recorder, ProgramRecorder) and not recorder.in_loop:
            _refused_at_entry(e)
        raise
    from .checkpoint import CheckpointedLoop  # checkpoint_schedules is imported on first use, not with gradkern
    if recorder is not None and recorder.in_loop:
        raise ProgramError("a checkpointed loop inside a step of a checkpointed loop is not supported",
                           hint="make the inner loop a plain Python loop (the outer loop's snapshots cover it)")
    entry = None
    if isinstance(recorder, ProgramRecorder):
        kind = type(schedule).__name__ if schedule is not None else "memory=" if memory is not None else "binomial"
        entry = LoopSchedule(nsteps, snapshots, kind, storage, memory, parameters=schedule_parameters(schedule))
        at_loop_entry(entry)  # every process, before any step: one that runs none must meet the others
    if entry is None or not nsteps:
        for t in range(nsteps):
            check_ran(step(t), step, "gk.checkpointed_loop", "step")
        return
    loop = CheckpointedLoop(recorder, step, nsteps, resolved, progress, storage, rebuild, memory)
    token = _entering.set(entry)
    try:
        loop.run_forward()
    finally:
        _entering.reset(token)
    recorder.add_loop(loop)
