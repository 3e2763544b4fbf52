"""A checkpointed loop's recomputed launches at close to a plain launch's host cost
(docs/programs.md#recomputed-steps-of-a-checkpointed-loop): each untaped launch the schedule reruns is
kept as it ran, per kernel and argument objects, so that the next rerun of it
skips what cannot have changed.

What is skipped, and why it cannot have changed:
* `unwrap_args`' per-argument work: its answer is a function of the objects
  passed (a TrackedArray as the tracker's plain view of it, which
  `HostTracker.plain_view` still gives; any other array or value as it is) and
  of the origin checks, which a sweep does not make (`HostTracker.checking` is
  False once the program is recorded). An entry is taken only while every array
  argument is the same object (a weak reference), no argument is a `gk.Const`,
  and the tracker does not check.
* the loop state's checks of the launch (loopstate.py `check_launch`): where the
  runtime prepared the very same call (`call is entry.call`, refilled: its
  values are the arguments themselves), the launch takes the same objects, whose
  buffers cannot change (`base` is read-only), and the state is fixed once the
  first forward is over, so the launch's entry in the step's record is the one
  kept. `check_step` still compares every recomputed step with its record.

What still runs at every launch: the guard's follow, unlock, relock and lock
(guard.py, with its own fast path for arrays it holds), the runtime's `prepare`
(every validation, with its exact signature), and the launch.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from ..annotations import Const
from ..runtime import blocked
from ..runtime.arrays import is_array
from ..runtime.launch import run
from .hostcode import TrackedArray
from .replay import MAX_REPLAYS, replay_key
from .scalars import ActiveScalar

_PASSED, _ACTIVE, _TRACKED, _ARRAY = range(4)  # how a launch's argument is unwrapped, by position


def plain_array(given: tuple) -> bool:
    """Whether a launch was given a NumPy array that is not a TrackedArray (its launches are never held)."""
    return any(isinstance(a, np.ndarray) and not isinstance(a, TrackedArray) for a in given)


class _Launch:
    """A recomputed launch as it ran: how each argument was unwrapped (`kinds`, and the given arrays' weak
    references), the runtime's prepared call, and the launch's entry in the loop state's record of the step
    (its checks' answer), and the buffers it writes."""

    __slots__ = ("kinds", "refs", "tracked", "call", "signature", "written")

    def __init__(self, given: tuple, call: Any, signature: tuple, written: tuple):
        self.kinds = tuple(_TRACKED if isinstance(a, TrackedArray) else _ARRAY if isinstance(a, np.ndarray)
                           else _ACTIVE if isinstance(a, ActiveScalar) else _PASSED for a in given)
        self.refs = tuple(weakref.ref(a) if isinstance(a, np.ndarray) else None for a in given)
        self.tracked = tuple(n for n, k in enumerate(self.kinds) if k == _TRACKED)
        self.call, self.signature = call, signature
        self.written = written  # the ids of the buffers it writes (outputs.py)

    def plain(self, given: tuple, host: Any) -> tuple[tuple, list] | None:
        """The launch's values (`unwrap_args(given)`, Active scalars as their values) and its arrays, or None if
        `given` is not what this entry was made from. The key (`replay_key`) matched: a position that held an
        array holds one of the same id, one that held a scalar a scalar of the same type, and no `gk.Const`."""
        out, arrays = [], []
        for a, kind, ref in zip(given, self.kinds, self.refs):
            if kind == _PASSED:
                out.append(a)
            elif kind == _ACTIVE:
                out.append(a.value)
            elif ref() is not a:
                return None
            else:
                v = host.plain_view(a) if kind == _TRACKED else a
                out.append(v)
                arrays.append(v)
        return tuple(out), arrays


class RecomputedLaunches:
    """A loop's recomputed launches (module docstring), by `replay_key`."""

    def __init__(self):
        self.entries: dict[tuple, _Launch] = {}

    def find(self, kernel: Any, backend: str | None, given: tuple, guard: Any,
             host: Any) -> tuple[_Launch, tuple, list] | None:
        """The entry of a launch of `kernel` on `given`, the launch's values and its arrays, with the
        TrackedArrays followed by `guard`; None where there is none (unwrap them in full)."""
        entry = self.entries.get(replay_key(kernel, backend, given))
        if entry is None or len(given) != len(entry.kinds) or host is None or host.checking:
            return None
        got = entry.plain(given, host)
        if got is None:
            return None
        if entry.tracked:
            guard.follow([given[n] for n in entry.tracked])  # as unwrap_args: locked with their buffers
        return entry, got[0], got[1]

    def keep(self, kernel: Any, backend: str | None, given: tuple, plain: tuple, host: Any, call: Any,
             values: Any, signature: tuple, written: tuple) -> None:
        """Keep a launch that ran: `plain` = unwrap_args(given) with Active scalars' values, the runtime prepared
        `call` and bound `values`, the loop state checked it as `signature`, it writes the buffers `written`
        (ids). Kept only where a launch finding
        it is provably the same (module docstring): the tracker does not check origins, no argument is a
        Const or an array other than NumPy's, the call is refilled (`call.plain`), so that its values are the
        arguments themselves."""
        if host is None or host.checking or call.plain is None or any(
                isinstance(a, Const) or (not isinstance(a, np.ndarray) and is_array(a)) for a in given):
            return
        arrays = [n for n, a in enumerate(plain) if is_array(a)]
        if len(values) != len(plain) or any(values[n] is not plain[n] for n in arrays):
            return
        if len(self.entries) >= MAX_REPLAYS:
            self.entries.clear()
        self.entries[replay_key(kernel, backend, given)] = _Launch(given, call, signature, written)


class PendingRun:
    """A run of recomputed launches held back to run as one temporally blocked pass
    (docs/checkpointed-loops.md#temporal-blocking-of-recomputed-steps): consecutive launches of one kernel over
    one domain, each with the previous one's two buffers swapped (the one it reads is the one the previous
    launch wrote; same dtype, shape and strides, so the same signature) and every other argument the same
    object or value. The program sees only launches and their arrays; whether the kernel has a blocked form
    the runtime asks the pipeline (runtime/blocked.py), which proves the kernel a pure stencil step or refuses
    it. A launch whose NumPy arrays are all smaller than MIN_BYTES (2-D, 3-D: MIN_BYTES_2D) is never held.

    Before a launch's arrays are unlocked, `continues` says whether it continues the run; if not, the caller
    `flush`es what is held (through the blocked form where the run is long enough, the form exists and the
    state is large enough, `BlockedStep.pays`; else one by one). After the launch is prepared, `hold` keeps it
    or says to run it now. What is held runs before anything else can write or read the buffers through a
    launch: the next launch that does not continue the run, a rule call, and the end of the schedule's advance
    (checkpoint.py). Host code of the steps between the held launches would see older contents: the page
    above says so."""

    def __init__(self, guard: Any, forms: dict, refused: dict, stats: Any):
        self.guard, self.forms, self.refused, self.stats = guard, forms, refused, stats
        self.last: tuple = ()  # (kernel, dim, backend, plain values) of the last launch held
        self.launches: list = []  # Bound objects, in order
        self.arrays: list = []  # each launch's arrays, for the guard
        self.pair: tuple[int, int] | None = None  # (read, written) positions, once two launches are held

    def continues(self, kernel: Any, dim: Any, backend: Any, plain: tuple) -> bool:
        """Whether this launch continues the run held (class doc)."""
        if not self.launches:
            return False
        k, d, be, before = self.last
        if kernel is not k or dim != d or backend != be or len(plain) != len(before):
            return False
        moved = _moved(plain, before)
        if len(moved) != 2 or any(not isinstance(plain[n], np.ndarray) for n in moved):
            return False
        p, q = moved
        a, b = plain[p], plain[q]
        if a is not before[q] or b is not before[p] or (a.dtype, a.shape, a.strides) != (b.dtype, b.shape, b.strides):
            return False
        params = kernel.ir.params
        if params[p].written == params[q].written:  # one buffer read, the other written
            return False
        pair = (q, p) if params[p].written else (p, q)
        return self.pair is None or pair == self.pair

    def hold(self, kernel: Any, dim: Any, backend: Any, plain: tuple, bound: Any, arrays: list,
             continues: bool, plain_array: Any = None) -> bool:
        """Keep the prepared launch `bound` (True), or leave it to the caller to run now (False). A launch that
        starts a run is held only if `plain_array()` is false (the caller's check: it was given no NumPy array
        other than a TrackedArray), asked last: most launches of a small state stop at the size test."""
        if continues:
            before = self.last[3]
            p, q = _moved(plain, before)
            self.pair = (q, p) if kernel.ir.params[p].written else (p, q)
        elif self.launches or not any(isinstance(a, np.ndarray) and a.nbytes >= (blocked.MIN_BYTES if a.ndim == 1 else
                                                                           blocked.MIN_BYTES_2D) for a in arrays):
            return False  # a device array's launches, a state too small to block (runtime/blocked.py): never held
        elif plain_array is not None and plain_array():
            return False
        self.last = (kernel, dim, backend, plain)
        self.launches.append(bound)
        self.arrays.append(arrays)
        return True

    def flush(self) -> None:
        """Run what is held (class doc) and hold nothing."""
        launches, arrays, self.launches, self.arrays = self.launches, self.arrays, [], []
        pair, self.pair, kernel, self.last = self.pair, None, self.last[0] if self.last else None, ()
        if not launches:
            return
        form = self._form(kernel, launches[0], pair) if len(launches) >= blocked.MIN_LAUNCHES else None
        seen = {id(a): a for group in arrays for a in group}
        ours = self.guard.unlock(list(seen.values()), f"before recomputed launches of kernel '{kernel.name}'")
        try:
            if form is not None and form.pays(launches[0]):
                form.run(launches)
                self.stats.steps_blocked += len(launches)
            else:
                for bound in launches:
                    run(bound.call, bound)
        finally:
            self.guard.relock(ours)

    def _form(self, kernel: Any, first: Any, pair: tuple[int, int]) -> Any:
        key = (id(first.call), pair)
        hit = self.forms.get(key)
        if hit is None or hit[0] is not first.call:
            hit = self.forms[key] = (first.call, blocked.blocked_step(kernel, first, *pair))
        if isinstance(hit[1], str):
            self.refused[kernel.name] = hit[1]
            return None
        return hit[1]


def _moved(plain: tuple, before: tuple) -> list[int]:
    """The positions where two launches' values differ: arrays by identity, scalars by type and value."""
    return [n for n, (a, b) in enumerate(zip(plain, before))
            if a is not b and (isinstance(a, np.ndarray) or type(a) is not type(b) or not a == b)]
