"""Arrays host code makes or writes inside a checkpointed loop's steps
(docs/checkpointed-loops.md#arrays-host-code-makes-in-a-step): their contents are part of a launch's
recorded signature, compared bit for bit when the step is recomputed.

A recomputed step reruns its host code. An array that code makes or writes with other contents the second
time (a generator not reseeded from t: `rng.standard_normal(n)`) sends the recomputation on another
trajectory. Which launch arguments need a print is decided in the loop's first forward, from what the
program's host-write guard holds (guard.py): an array a launch of the program has taken is read-only (or
fingerprinted) from then until the program returns, so host code cannot change it, and its contents are
the launches' and the snapshots'. So a launch of the first forward prints each argument whose buffer the
guard does not hold yet, unless the launch overwrites it whole unread: an array host code made in the step,
one made before the loop and taken first here, a state buffer at its first launch (a rule call's outputs: at
their next launch, `record`). Each is printed once (the launch locks it) and the print kept by step, launch
and position; the recomputed launch prints the same positions and compares.

Host code of a recomputed step can write only what the first forward's host code wrote (the same code,
refused there once the guard held the array), so only before an array's first launch: a buffer no launch of
the loop writes (outside the state, which snapshots restore) that such a step may have written again is
compared once more at its next launch (`unverified`), for schedules that recompute an early step without
reaching the launch that compares it (the final state's rebuild).
"""

from __future__ import annotations

import hashlib
import weakref
from array import array
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ProgramError
from ..runtime.arrays import is_array
from ..runtime.binding import Binding
from .derived import user_frame, where
from .fingerprint import fingerprint
from .guard import HostWriteGuard, name_of
from .loopstate import _PARTIAL, LoopState, _line_text
from .shadows import memory_root

_HINT = ("draw a step's random arrays from a generator seeded by t (`np.random.default_rng((seed, "
         "t)).standard_normal(n)`), or draw every step's before the loop and index them by t; make any other "
         "host array a step passes from t and the loop's state (docs/checkpointed-loops.md#arrays-host-code-makes-"
         "in-a-step)")
_POSITIONS = 1 << 16  # a print's key: its launch in the step times this, plus the argument's position


def held(guard: HostWriteGuard, root: Any) -> bool:
    """Whether host code cannot change `root` unseen: the guard holds it read-only or fingerprinted, or it is
    device memory under GRADKERN_HOST_WRITE_CHECK=off (host writes to it unguarded, as everywhere)."""
    ref = guard.arrays.get(id(root))
    if ref is not None and ref() is root:
        return True
    entry = guard.prints.get(id(root))
    if entry is not None and entry[0]() is root:
        return True
    return guard.mode == "off" and not isinstance(root, np.ndarray)


class HostArrays:
    """The prints of a checkpointed loop's host-made launch arguments (module docstring)."""

    def __init__(self, holding: Callable[[Any], Any]):
        """`holding(root)`: the array whose contents `root` holds, the snapshot's copy where a restore of it is
        not written yet (snapshots.py `Deferred`: printed in place, so that the launch still reads it in place)."""
        self.holding = holding
        self.t, self.k = -1, 0  # the step running and its launch (or rule call) count so far
        # by step of the first forward, ascending: the steps with prints, the end of each one's in `keys`, and
        # the prints with their keys (launch * _POSITIONS + position); a few bytes a print, no object
        self.steps, self.ends = array("q"), array("q")
        self.keys, self.prints = array("q"), array("Q")
        self.lo = self.hi = 0  # the recomputed step's prints: keys[lo:hi]
        self.due = False  # whether a recomputed launch of this step may have something to compare (`check`)
        self.last = -1  # the latest step with prints or watched buffers
        self.first: dict[int, tuple[Any, int, int]] = {}  # id(root) -> (weak reference, step, print): first print
        self.watch: list[tuple[int, int, Any, int]] = []  # (step, id, weak reference, print), after the forward
        self.top = -1  # the latest step in `watch`
        self.unverified: dict[int, tuple[int, int, Any, int]] = {}  # id -> its `watch` entry
        self.later: dict[int, Any] = {}  # id(root) -> weak reference: printed at its next launch (`record`)

    def start(self, t: int, recomputing: bool) -> None:
        """Step t starts (in the first forward, or recomputed)."""
        self.t, self.k = t, 0
        if not recomputing:
            return
        self.lo = self.hi = 0
        if t <= self.last:  # else after every step with prints or watched buffers: most steps of most loops
            steps = self.steps
            i = bisect_left(steps, t)
            if i < len(steps) and steps[i] == t:
                self.lo, self.hi = (self.ends[i - 1] if i else 0), self.ends[i]
            if t <= self.top:  # its host code may write again what it wrote before that buffer's first launch
                for w in self.watch:
                    if t <= w[0]:
                        self.unverified[w[1]] = w
        self.due = self.lo < self.hi or bool(self.unverified)

    def record(self, guard: HostWriteGuard, binding: Any, written: list, overwritten: list) -> None:
        """A launch (or rule call) of the first forward, about to run: print what it reads that the guard does
        not hold. `written`: the arrays it may write; `overwritten`: the buffers it overwrites whole without
        reading them (never printed: what they held is never read). One a rule call may write is printed at its
        next launch, as the call leaves it: a rule's outputs are often a fresh `np.empty` buffer, whose garbage
        differs each run and counts only where it reaches a launch. A kernel's are printed before it (a kernel
        adding atomically into one writes other last bits when its adds run in another order)."""
        k, self.k = self.k, self.k + 1
        done, locked, later = None, guard.arrays, self.later
        if isinstance(binding, Binding):  # a kernel's launch: its outputs count as read
            written = ()
        for p, v in enumerate(binding.values):
            if not hasattr(v, "shape"):  # a Python number (is_array costs more)
                continue
            root = memory_root(v)
            if later:
                ref = later.pop(id(root), None)
                if ref is not None and ref() is root and (done is None or id(root) not in done):
                    done = self._print(k, p, root, done)
                    continue
            ref = locked.get(id(root))
            if (ref is not None and ref() is root) or not is_array(v) or held(guard, root) or (
                    overwritten and any(r is root for r in overwritten)) or (done is not None and id(root) in done):
                continue  # held since a launch took it (the common case, asked first), no array, unread, or done
            if any(memory_root(w) is root for w in written):
                self._later(root)
                continue
            done = self._print(k, p, root, done)

    def _print(self, k: int, p: int, root: Any, done: set | None) -> set:
        """Print argument p of launch k of the step (its buffer `root`); returns `done` with it."""
        done = done if done is not None else set()
        done.add(id(root))
        fp = _content(root)
        if not self.steps or self.steps[-1] != self.t:
            self.steps.append(self.t)
            self.ends.append(len(self.keys))
            self.last = self.t
        self.keys.append(k * _POSITIONS + p)
        self.prints.append(fp)
        self.ends[-1] = len(self.keys)
        self._first(root, fp)
        return done

    def _later(self, root: Any) -> None:
        try:
            self.later[id(root)] = weakref.ref(root)
        except TypeError:  # takes no weak reference: not printed (as for a buffer overwritten whole)
            return
        _prune(self.later, lambda ref: ref)

    def _first(self, root: Any, fp: int) -> None:
        first = self.first
        hit = first.get(id(root))
        if hit is not None and hit[0]() is root:
            return
        try:
            first[id(root)] = (weakref.ref(root), self.t, fp)
        except TypeError:  # takes no weak reference: compared only where it was printed
            return
        _prune(first, lambda entry: entry[0])

    def found(self, state: LoopState) -> None:
        """After the first forward: the buffers printed at their first launch that outlived it and that no
        launch of the loop writes (their contents stay those printed) are watched."""
        for key, (ref, t, fp) in self.first.items():
            root = ref()
            if root is not None and state.persistent.get(key) is root and key not in state.state:
                self.watch.append((t, key, ref, fp))
                self.top = max(self.top, t)
        self.last = max(self.last, self.top)
        self.first, self.later = {}, {}

    def check(self, name: str, binding: Any) -> None:
        """A recomputed launch (or rule call), about to run, while `due`: ProgramError if an argument printed in
        the first forward holds other contents. (Once the step's prints are compared and no buffer is
        unverified, `due` is false and the launches after need not count.)"""
        k = self.k
        self.k = k + 1
        lo, hi = self.lo, self.hi
        if lo < hi:  # the step's prints not compared yet
            keys = self.keys
            while lo < hi and keys[lo] // _POSITIONS == k:
                self._compare(name, k, binding, keys[lo] % _POSITIONS, self.prints[lo])
                lo += 1
            self.lo = lo
        if self.unverified:
            for p, v in enumerate(binding.values):
                if hasattr(v, "shape") and is_array(v):
                    root = memory_root(v)
                    w = self.unverified.get(id(root))
                    if w is not None and w[2]() is root:
                        self._compare(name, k, binding, p, w[3])
        self.due = self.lo < self.hi or bool(self.unverified)

    def _compare(self, name: str, k: int, binding: Any, p: int, want: int) -> None:
        values = binding.values
        v = values[p] if p < len(values) else None
        got = None
        if is_array(v):
            root = memory_root(v)
            got = _content(self.holding(root))
            self.unverified.pop(id(root), None)
            if got == want:
                return
        frame = user_frame()
        names = getattr(binding, "names", ())  # a kernel's parameters; a rule call's arguments by position
        arg = f"argument '{names[p]}'" if p < len(names) else f"argument {p + 1}"
        what = f"{name_of(memory_root(v))}, " if is_array(v) else ""
        raise ProgramError(f"step {self.t} of the checkpointed loop launched '{name}' (launch {k + 1} of the step) "
                           f"with {arg} ({what}an array host code made or wrote before the launch) "
                           "holding other contents than when it was recorded (fingerprint "
                           f"{want:#018x} then, {'none' if got is None else f'{got:#018x}'} recomputed), at "
                           f"{where(frame)}{_line_text(frame)}: host code that draws random numbers gives a "
                           f"recomputed step another trajectory; {_PARTIAL}", hint=_HINT)


def _prune(entries: dict, ref: Callable[[Any], Any]) -> None:
    """Drop the entries of buffers that were freed (a step's temporaries), at sizes 4096, 8192, ...: amortised
    O(1) a new entry."""
    if len(entries) >= 4096 and len(entries) & (len(entries) - 1) == 0:
        for key in [key for key, entry in entries.items() if ref(entry)() is None]:
            del entries[key]


def _content(root: Any) -> int:
    """A 64-bit print of `root`'s contents, shape and dtype: SHA-1's first 8 bytes for a contiguous NumPy buffer
    (one pass, about half fingerprint.py's NumPy time: 1.0 against 2.1 ms for 2 MB), fingerprint.py's on the
    device (a kernel, no transfer) and for any other layout."""
    if type(root) is np.ndarray and root.flags.c_contiguous:
        h = hashlib.sha1(repr((root.shape, root.dtype.str)).encode())
        h.update(root)
        return int.from_bytes(h.digest()[:8], "little")
    return fingerprint(root)
