"""Which launch of a checkpointed loop last wrote each buffer, so that a taped step need not rerun a launch whose
outputs already hold what it writes (docs/checkpointed-loops.md#a-taped-step-after-a-restore).

Every run of a loop's step t is the same computation on the same inputs (the state restored at t, or left
there by the steps before, and arrays no step writes), so launch j of step t writes the same values whenever it
runs. A buffer that launch (t, j) wrote, and that nothing wrote since, holds what (t, j) would write again:
where (t, j) overwrites it whole without reading it and writes nothing else, running it once more changes
nothing. Binomial checkpointing meets this after a `Move`: reversing step t + 1 needs state t + 1, so the
schedule ran step t before and left its output in the other buffer; it then restores the snapshot at t into the
buffer step t reads, and tapes step t, whose launch would rewrite that output with the values it holds.

A restored buffer holds the state at the snapshot's step s, which is what the last launch of step s - 1 that
writes it left (a later host write into it is refused: a launch took it, guard.py): which launch that is, is
learnt from the recomputed steps, per step signature (every step of one signature makes the same launches on the
same buffers, loopstate.py `check_step`). So the launch also need not run where state t + 1 was restored from a
snapshot rather than recomputed.

What writes a buffer: a launch or rule call of the loop (each one noted here as it runs), a snapshot's restore,
the reverse of a taped segment (it gives back what the segment's steps overwrote) and host code (a TrackedArray
write counts in `HostTracker.writes`; a change forgets every buffer). What the loop does outside its own
schedule (the program's steps after it, before its reverse) is not seen: `forget` at the start of its reverse.
Only the loop's state buffers are followed: they live through the loop's reverse, so their ids stay theirs (a
step's temporary is freed, and the next one may have its id).
"""

from __future__ import annotations

from typing import Any

from .shadows import memory_root


class LastWriters:
    """id(buffer) -> (step, launch number within the step) of the launch that last wrote it, or ("state", s)
    where a restore wrote the state at step s into it."""

    def __init__(self, host: Any, found: Any):
        self.host = host  # the program's HostTracker (None: host writes are not counted, nothing is reused)
        self.found = found  # the loop's LoopState: `state`, id -> buffer, once its first forward is over
        self.writer: dict[int, tuple[int, int]] = {}
        self.host_writes = host.writes if host is not None else 0
        self.t, self.number = -1, 0  # the running step and the number of its next launch
        self.reused = 0  # launches not rerun (`holds` answered yes and the recorder used it)
        self.step_writes: dict[int, int] = {}  # the running step's buffers -> the last of its launches writing each
        # (step signature number, id(buffer)) -> the last launch of such a step that writes the buffer
        self.last: dict[tuple[int, int], int] = {}

    def start(self, t: int) -> None:
        """Step t starts running: its launches are numbered from 0."""
        self.t, self.number = t, 0
        self.step_writes = {}

    def end(self, signature: int) -> None:
        """The running step ended, a step of this signature number (LoopState.steps): learn its last writers."""
        for key, number in self.step_writes.items():
            self.last[(signature, key)] = number

    def _current(self) -> bool:
        """False, and every buffer forgotten, where host code wrote an array since the last look."""
        host = self.host
        if host is None:
            return False
        if host.writes != self.host_writes:
            self.host_writes = host.writes
            self.writer.clear()
            return False
        return True

    def holds(self, written: list, whole: list) -> bool:
        """Before the running step's next launch, writing the views `written` and overwriting the buffers `whole`
        whole without reading them: whether every buffer it writes holds what this launch wrote when it last
        ran (module docstring), so that it need not run."""
        if not written or not self._current():
            return False
        mark, restored = (self.t, self.number), ("state", self.t + 1)
        signature = self.found.steps[self.t]
        overwritten = {id(r) for r in whole}
        state = self.found.state
        for view in written:
            key = id(memory_root(view))
            if key not in overwritten or key not in state:
                return False
            writer = self.writer.get(key)
            if writer != mark and (writer != restored or self.last.get((signature, key)) != self.number):
                return False
        return True

    def wrote(self, keys) -> None:
        """The running step's next launch or rule call writes the buffers `keys` (their ids)."""
        self._current()
        mark = (self.t, self.number)
        self.number += 1
        state = self.found.state
        for key in keys:
            if key in state:
                self.writer[key] = mark
                self.step_writes[key] = mark[1]

    def restored(self, keys, at: int | None) -> None:
        """A snapshot's restore wrote the state at step `at` into the buffers `keys` (ids)."""
        self._current()
        state = self.found.state
        for key in keys:
            if key in state and at is not None:
                self.writer[key] = ("state", at)
            else:
                self.writer.pop(key, None)

    def forget(self, keys=None) -> None:
        """The buffers `keys` (ids; None: all) were written by something other than a launch of the loop."""
        if keys is None:
            self.writer.clear()
        else:
            for key in keys:
                self.writer.pop(key, None)
