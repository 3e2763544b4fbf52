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
from ..runtime.arrays import is_array
from .hostcode import TrackedArray
from .replay import MAX_REPLAYS, replay_key
from .scalars import ActiveScalar

_PASSED, _ACTIVE, _TRACKED, _ARRAY = range(4)  # how a launch's argument is unwrapped, by position


class _Launch:
    """A recomputed launch as it ran: how each argument was unwrapped (`kinds`, and the given arrays' weak
    references), the runtime's prepared call, and the launch's entry in the loop state's record of the step
    (its checks' answer)."""

    __slots__ = ("kinds", "refs", "tracked", "call", "signature")

    def __init__(self, given: tuple, call: Any, signature: tuple):
        self.kinds = tuple(_TRACKED if isinstance(a, TrackedArray) else _ARRAY if isinstance(a, np.ndarray)
                           else _ACTIVE if isinstance(a, ActiveScalar) else _PASSED for a in given)
        self.refs = tuple(weakref.ref(a) if isinstance(a, np.ndarray) else None for a in given)
        self.tracked = tuple(n for n, k in enumerate(self.kinds) if k == _TRACKED)
        self.call, self.signature = call, signature

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
             values: Any, signature: tuple) -> None:
        """Keep a launch that ran: `plain` = unwrap_args(given) with Active scalars' values, the runtime prepared
        `call` and bound `values`, the loop state checked it as `signature`. Kept only where a launch finding
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
        self.entries[replay_key(kernel, backend, given)] = _Launch(given, call, signature)
