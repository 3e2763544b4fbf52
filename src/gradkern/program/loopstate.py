"""The state of a checkpointed loop (docs/checkpointed-loops.md#how-it-works), found
by recording its first forward, and the checks its recomputed steps pass.

The **state** is the buffers the loop's steps write that are still alive when
its first forward ends, except those touched only by one step the forward
taped (a step's own temporaries, kept alive by its tape). The **persistent**
buffers are all those the loop took that outlived its first forward. Each
step's launches are kept as its signature: kernel, extent, and which
persistent buffers each launch took.

A recomputed step must do what it did: the same kernels on the same
persistent buffers, writing no persistent buffer outside the state;
otherwise ProgramError names the step and the array.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ProgramError
from ..runtime.arrays import is_array
from .scalars import ActiveScalar
from .shadows import ShadowMap, memory_root


@dataclass
class _Seen:
    """A buffer the loop's launches took."""

    ref: Any  # weak reference (a temporary a step drops is freed)
    steps: set[int] = field(default_factory=set)  # steps (of the first forward) that took it
    written: int = -1  # the last step that wrote it, -1: none
    first: dict[int, bool] = field(default_factory=dict)  # step -> its first launch taking it overwrote it whole


class LoopState:
    """What a checkpointed loop's launches take: recorded in its first forward, checked when recomputed."""

    def __init__(self, freed: Callable[[Any], None]):
        """`freed(ref)`: a buffer of the first forward, `ref` its weak reference, was freed."""
        self.freed = freed
        self.seen: dict[int, _Seen] = {}
        self.forward_taped: set[int] = set()  # steps the first forward taped
        self.state: dict[int, Any] = {}  # id -> buffer, once the first forward is over
        self.persistent: dict[int, Any] = {}  # id -> buffer the loop took that outlived its first forward
        self.alive: dict[int, Any] = {}  # every buffer the loop took that is alive after its first forward
        self.written_back: list = []  # those of them its steps wrote
        self.taped_only: dict[int, Any] = {}  # buffers only one step, taped in the first forward, took
        self.wanted: dict[int, Any] = {}  # id -> weak reference: buffers the first forward's launches need shadows of
        self.last_write: dict[int, int] = {}  # id(state buffer) -> the last step writing it
        self.first_use: dict[int, tuple] = {}  # id(state buffer) -> (steps taking it, overwrote it whole unread)
        # step -> its launches: (kernel, persistent buffer ids or None); a list by step once the forward is over
        self.signatures: Any = {}
        self.recomputed: list = []  # the launches of the step being recomputed, as `signatures` holds them
        self._launches: dict = {}  # the first forward's distinct launches (record_launch)

    # -- the first forward ------------------------------------------------------------------------------------------
    def record_launch(self, t: int, name: str, written: list, binding: Any, dead: set[int]) -> dict[int, Any]:
        """A launch (or rule call) of step t in the first forward, writing `written` and overwriting the buffers
        `dead` (ids) whole unread. Returns id -> weak reference of every buffer it takes."""
        sig, refs = [], {}
        for a in binding.values:
            if not is_array(a):
                continue
            root = memory_root(a)
            seen = self.seen.get(id(root))
            if seen is None or seen.ref() is not root:
                seen = self.seen[id(root)] = _Seen(weakref.ref(root, self.freed))
            seen.steps.add(t)
            seen.first.setdefault(t, id(root) in dead)
            sig.append((id(root), seen))
            refs[id(root)] = seen.ref
        for a in written:
            self.seen[id(memory_root(a))].written = t
        launch = (name, tuple(binding.dim), tuple(sig))
        # one object per distinct launch: steps repeat a few, and a loop may have 10**4 of them
        launch = self._launches.setdefault((name, launch[1], tuple((k, id(s)) for k, s in sig)), launch)
        self.signatures.setdefault(t, []).append(launch)
        return refs

    def wants_shadows(self, shadows: ShadowMap, written: list, args: tuple) -> None:
        """An untaped launch of the first forward that a recorded program would have taken with shadows:
        the arrays it writes that no shadow covers get one when the forward ends (if they outlive it), so
        that the launches after the loop see the shadows they would have seen without checkpoints."""
        arrays = [a for a in args if is_array(a)]
        if not (any(isinstance(a, ActiveScalar) for a in args)
                or any(shadows.find(a) is not None or id(memory_root(a)) in self.wanted for a in arrays)):
            return
        for w, a in zip(written, args):
            if w and is_array(a) and a.dtype.kind == "f" and shadows.find(a) is None:
                root = memory_root(a)
                self.wanted[id(root)] = weakref.ref(root)

    def make_wanted_shadows(self, shadows: ShadowMap) -> None:
        """The shadows the first forward's untaped launches would have made, for the buffers alive now
        (between steps: a step's temporaries are gone)."""
        for ref in self.wanted.values():
            root = ref()
            if root is not None and shadows.find(root) is None:
                shadows.internal(root)
        self.wanted = {}

    def find(self) -> None:
        """After the first forward: the state, the persistent buffers, the steps' signatures."""
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
            self.persistent[key] = root
            if seen.written >= 0:
                self.state[key] = root
                self.last_write[key] = seen.written
        persistent, interned = self.persistent, {}

        def signature(launches: list) -> list:  # one object per distinct signature: steps repeat a few
            sig = [(name, dim, [key if key in persistent and seen.ref() is persistent[key] else None
                                for key, seen in sig]) for name, dim, sig in launches]
            return interned.setdefault(tuple((name, dim, tuple(ids)) for name, dim, ids in sig), sig)
        # a list by step, not a dict: no int object per step kept alive through the reverse
        recorded = self.signatures
        self.signatures = [signature(recorded.get(t, [])) for t in range(max(recorded, default=-1) + 1)]
        # per state buffer, the steps that take it (ascending), each with whether it first overwrites it whole
        # unread: two arrays, not a Python object per step (a loop of 10**4 steps holds them through its reverse)
        self.first_use = {}
        for key in self.state:
            steps = sorted(self.seen[key].first.items())
            self.first_use[key] = (np.array([t for t, _ in steps], np.int64), np.array([d for _, d in steps], bool))
        for seen in self.seen.values():  # recorded for the above; the checks of recomputed steps use ref only
            seen.steps, seen.first = set(), {}
        self._launches = {}

    def changed_from(self, at: int | None) -> Iterator[tuple[int, Any, bool]]:
        """The state buffers some step from `at` on writes (all when `at` is None): (id, buffer, whether the
        first step from `at` on taking it overwrites it whole unread)."""
        for key, root in self.state.items():
            if at is None or self.last_write[key] >= at:
                first_dead = False
                if at is not None:
                    steps, dead = self.first_use[key]
                    k = int(np.searchsorted(steps, at))  # the first step from `at` on taking it
                    first_dead = k < len(steps) and bool(dead[k])
                yield key, root, first_dead

    # -- recomputation ----------------------------------------------------------------------------------------------
    def check_launch(self, t: int, name: str, written: list, binding: Any) -> None:
        """A launch (or rule call) of step t recomputed: noted for `check_step`; ProgramError if it writes a
        buffer only a taped step took or a persistent one outside the state."""
        ids = []
        for a in binding.values:
            if not is_array(a):
                continue
            root = memory_root(a)
            known = self.seen.get(id(root))
            ids.append(id(root) if known is not None and known.ref() is root and id(root) in self.persistent
                       else None)
        self.recomputed.append((name, tuple(binding.dim), ids))
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

    def check_step(self, t: int) -> None:
        """ProgramError unless recomputed step t launched what it launched when it was recorded."""
        want, got = self.signatures[t] if t < len(self.signatures) else [], self.recomputed
        if got == want:
            return
        for k, (a, b) in enumerate(zip(want, got)):
            if a != b:
                raise ProgramError(f"step {t} of the checkpointed loop launched '{b[0]}' (launch {k + 1} of the "
                                   f"step) on other arrays, or another kernel, than when it was recorded ('{a[0]}')",
                                   hint="a step must be a function of t and the loop's state")
        raise ProgramError(f"step {t} of the checkpointed loop made {len(got)} launches on recomputation, "
                           f"{len(want)} when it was recorded",
                           hint="a step must be a function of t and the loop's state")
