"""A checkpointed loop's schedule picked by a memory budget (docs/checkpointed-loops.md#choosing-by-memory):
`gk.checkpointed_loop(step, nsteps, memory=bytes)`.

The candidates are one family, `SegmentedSchedule(nsteps, s - 1, m)` plus the
loop's snapshot at step nsteps-1 (checkpoint.py's tail): binomial over
segments of m steps, each taped whole before its reverse. m = 1 is the
binomial schedule (no saved copies: a one-step segment's reverse reads its
inputs as the step left them); s - 1 >= the segment count - 1 is JAX's
two-level scheme (every segment's start stored, each segment recomputed
once); in between, mixed. What a candidate holds and costs is estimated from
the loop's step 0, run before the choice as the first forward's first step
(every candidate starts by storing step 0 and advancing from it):

* a snapshot: the bytes of the arrays step 0 takes, less those it overwrites
  whole without reading them (live at a step boundary; arrays only read are
  counted too, so this errs high);
* a taped segment of m steps: m - 1 steps' saved copies, each the bytes step 0
  writes (the first step of a segment saves nothing: no reverse recorded
  before it reads what it overwrites).

A candidate fits when s snapshots and one segment's copies fit in `memory`, less
the scratch rows of the recomputation's blocked passes where the loop may run
them (runtime/blocked.py `scratch_bytes`);
of those, the pick is the one advancing the fewest step-equivalents:
untaped steps (the first forward and the recomputations, counted from the
binomial schedule's actions) plus SAVE_COST per saved copy (a copy and its
write-back, against a step that reads and writes about as much) plus
RESTORE_COST per snapshot restored (one copy). Ties go to less memory.
"""

from __future__ import annotations

import operator
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import checkpoint_schedules
import numpy as np
from checkpoint_schedules import CheckpointSchedule, Forward, StorageType

from ..errors import ProgramError
from ..runtime import blocked
from .loopstate import TAKEN_DEAD
from .schedule import SegmentedSchedule, binomial_counts

_OURS = tuple(str(Path(m.__file__).resolve().parent) + os.sep for m in (sys.modules["gradkern"],
                                                                          checkpoint_schedules))


def step_sizes(seen: dict, temporal: bool) -> tuple[int, int, int]:
    """After step 0 of a checkpointed loop's first forward (`seen`: loopstate.LoopState.seen): the bytes of the
    arrays it took, less those it overwrote whole unread (a snapshot's estimate), the bytes of those it wrote,
    and, where `temporal` (checkpoint.py TEMPORAL), the scratch of the recomputation's blocked passes where its
    launches may be held (a NumPy array of MIN_BYTES)."""
    state = written = scratch = 0
    for taken in seen.values():
        root = taken.ref()
        if root is None or not taken.uses[0]:
            continue  # a temporary of step 0, freed, or a buffer step 0 did not take
        state += 0 if taken.uses[0] == TAKEN_DEAD else int(root.nbytes)
        written += int(root.nbytes) if taken.written == 0 else 0
        if temporal and isinstance(root, np.ndarray) and root.nbytes >= blocked.MIN_BYTES:
            scratch = max(scratch, blocked.scratch_bytes(root.itemsize, root.shape))
    return state, written, scratch


def _users_level() -> int:
    """The stacklevel of the innermost frame outside gradkern and checkpoint_schedules (whose schedule iterator
    runs this during the reverse): the warning names the user's line, not a library's."""
    frame, level = sys._getframe(1), 1
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(_OURS):
        frame, level = frame.f_back, level + 1
    return level


SAVE_COST = 1.0  # a saved copy (copy + write-back) in untaped steps: both move the state's bytes twice
RESTORE_COST = 0.5  # a snapshot restored (one copy) in untaped steps


@dataclass(frozen=True)
class Plan:
    """What `memory=` picked: `snapshots` (the tail included), `segment` steps taped as one, its kind
    (binomial, two-level or mixed), and the estimates it was picked by (bytes held, cost in untaped steps)."""

    snapshots: int
    segment: int
    kind: str = "binomial"
    held: int = 0
    cost: float = 0.0


def check_memory(memory: Any) -> int:
    """`memory=` as an int of bytes, or ProgramError naming it (before anything runs)."""
    if isinstance(memory, bool):
        raise ProgramError(f"memory must be a number of bytes (an int > 0), got {memory!r}")
    try:
        memory = operator.index(memory)
    except TypeError:
        raise ProgramError(f"memory must be a number of bytes (an int > 0), got {type(memory).__name__} "
                           f"{memory!r}", hint="e.g. memory=2 * 1024**3 for 2 GiB") from None
    if memory <= 0:
        raise ProgramError(f"memory must be a number of bytes (an int > 0), got {memory}")
    return memory


def _segments() -> list[int]:
    return [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 25, 32, 40, 50, 64, 80, 100, 128, 160, 200, 256, 320, 400, 512,
            640, 800, 1024]


def choose(nsteps: int, memory: int, state: int, step: int) -> Plan | None:
    """The cheapest candidate (module doc) for a loop of `nsteps` >= 2 steps whose snapshot holds `state`
    bytes and whose step writes `step` bytes; None when not even two snapshots fit."""
    state = max(state, 1)
    root = max(1, round((nsteps * state / max(step, 1)) ** 0.5))  # the two-level scheme's best segment
    best: Plan | None = None
    for m in sorted({*_segments(), root, root + 1}):
        segments = -(-nsteps // m)
        if segments < 2:
            break  # step 0 already ran untaped: at least two segments
        saves = (m - 1) * step
        s = min((memory - saves) // state, segments)
        if s < 2:
            continue
        advanced, restores = binomial_counts(segments, s - 1)
        cost = m * (advanced - segments) + SAVE_COST * nsteps * (m - 1) / m + RESTORE_COST * restores
        kind = "binomial" if m == 1 else "two-level" if s >= segments else "mixed"
        plan = Plan(s, m, kind, s * state + saves, cost)
        if best is None or (plan.cost, plan.held) < (best.cost, best.held):
            best = plan
    return best


class BudgetSchedule(CheckpointSchedule):
    """The schedule `memory=` gives: step 0 advanced with a snapshot before it, then `sizes()` (the loop's
    estimates from step 0: snapshot bytes, step bytes, and the blocked passes' scratch, which the budget holds
    first) picks the plan, `chosen(plan)` tells the loop, and the
    plan's SegmentedSchedule runs on, its first advance starting at step 1."""

    def __init__(self, max_n: int, memory: int, sizes: Callable[[], tuple[int, int]],
                 chosen: Callable[[Plan], None]):
        super().__init__(max_n)
        self.memory, self.sizes, self.chosen = memory, sizes, chosen
        self.plan: Plan | None = None
        self.inner: SegmentedSchedule | None = None

    def _iterator(self):
        max_n = self._max_n
        if max_n == 1:  # one step: taped at once, nothing to choose
            self.plan = Plan(1, 1, "store-all")
            self.chosen(self.plan)
            self.inner = SegmentedSchedule(1, 1, 1)
            yield from self.inner
            return
        yield Forward(0, 1, True, False, StorageType.RAM)
        state, step, scratch = self.sizes()
        plan = choose(max_n, self.memory - scratch, state, step)
        if plan is None:
            plan = Plan(2, 1, "binomial", 2 * state)
            warnings.warn(f"memory={self.memory} bytes holds fewer than two of this loop's snapshots (about "
                          f"{state} bytes each, estimated from its step 0); it keeps two", RuntimeWarning,
                          stacklevel=_users_level())
        self.plan = plan
        self.chosen(plan)
        self.inner = SegmentedSchedule(max_n, plan.snapshots - 1, plan.segment)
        first = True
        for a in self.inner:
            if first:  # Forward(0, n1, store, untaped): step 0 and its snapshot are done
                first = False
                if a.n1 > 1:
                    yield Forward(1, a.n1, False, False, StorageType.WORK)
                continue
            yield a

    @property
    def is_exhausted(self) -> bool:
        return self.inner is not None and self.inner.is_exhausted

    def uses_storage_type(self, storage_type: StorageType) -> bool:
        return storage_type == StorageType.RAM


__all__ = ["BudgetSchedule", "Plan", "check_memory", "choose"]
