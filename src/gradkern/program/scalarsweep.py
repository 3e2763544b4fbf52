"""The scalar tape's reverse, run incrementally (docs/host-code.md, "Reductions and element reads"): host arithmetic
on Active scalars records each result's parents (scalars.py); a launch's reverse adds into the adjoints of the
scalars it took. Until session 57 the adjoints were pushed back to the Active arguments once, after the whole sweep
(`backpropagate`). A scalar read from an array a launch wrote (`v[3]`, `u.sum()`: hostreads.py) needs its adjoint
complete earlier, at its read's position in the sweep, after the reverse of every launch after it: then every scalar
created after it has received all it will receive (a launch can take a scalar only once it exists), and pushing
theirs down, latest first, completes the read's. `ScalarSweep.down_to(order)` does that much: the scalars reached
so far wait in a heap by creation order; the ones created after `order` are pushed to their parents and zeroed."""

from __future__ import annotations

import heapq
from itertools import islice

from .scalars import ActiveScalar


class ScalarSweep:
    """One program's scalar tape, swept backwards as far as asked. `taken` is the recorder's dict of every Active
    scalar a launch or rule call took (it grows while a checkpointed loop's reverse records its segments)."""

    def __init__(self, taken: dict[int, ActiveScalar]):
        self.taken = taken
        self.seen = 0  # how many of `taken` are in the heap (or were)
        self.heap: list[tuple[int, int, ActiveScalar]] = []  # (-order, id, scalar)
        self.queued: set[int] = set()

    def _push(self, s: ActiveScalar) -> None:
        if id(s) not in self.queued:
            self.queued.add(id(s))
            heapq.heappush(self.heap, (-s.order, id(s), s))

    def down_to(self, order: int) -> None:
        """Push the adjoints of every reached scalar created after `order` to their parents, latest first (a
        topological order of the tape), zeroing theirs; Active arguments and reads (no parents) keep theirs."""
        taken = self.taken
        if len(taken) > self.seen:
            for s in islice(taken.values(), self.seen, None):
                self._push(s)
            self.seen = len(taken)
        heap = self.heap
        while heap and -heap[0][0] > order:
            _, key, s = heapq.heappop(heap)
            self.queued.discard(key)
            if not s.parents:
                continue
            a = s.adjoint
            for p, d in s.parents:
                p.adjoint += d * a
                self._push(p)
            s.adjoint = 0.0

    def finish(self) -> None:
        """The rest of the tape: every adjoint reaches the Active arguments (`backpropagate`'s whole sweep)."""
        self.down_to(0)
