"""Host writes are refused, never silently wrong (docs/programs.md). While a
program records, every NumPy array a launch has taken is read-only: a host
write to it (`u *= 2`, `u[3] = 0`, `u[:] = v`) fails at once in NumPy, and the
program turns that failure into `gk.ProgramError` naming the array and the
launch after which it was written. The program's own launches unlock what
they write for their duration. Views made before the call and never passed to
a launch keep their own flag (NumPy cannot revoke it): the README says so.

CuPy arrays have no such flag: their buffers are fingerprinted after each
launch that takes them (fingerprint.py) and checked before the next launch
that takes them and when the program returns, so a host write is found
before any launch could save or read the changed contents. That costs two
extra reads of each launched buffer per launch; GRADKERN_HOST_WRITE_CHECK
chooses: `auto` (the default: flags on NumPy, fingerprints on device memory),
`fingerprint` (fingerprints everywhere, which also catches writes through
views made before the call), `off` (no fingerprints: CuPy writes unguarded;
NumPy's flags cost nothing and stay).

While hostcuda is the default backend, NumPy arrays are device memory
(runtime/arrays.py `device_memory`) and get both: the flags, so that a host
write is refused before it changes anything as on the CPU, and the
fingerprints, so that CI runs the GPU's guard (it finds what the flags cannot
see, a write through a view made before the call; docs/hostcuda.md).
"""

from __future__ import annotations

import linecache
import os
import re
import sys
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..errors import ProgramError
from ..runtime.arrays import device_memory
from ..runtime.callkey import backend_name
from .derived import user_frame, where
from .fingerprint import device_print, fingerprint, settle_all
from .shadows import memory_root

_MODES = ("auto", "fingerprint", "off")
_DEFERRED = 256  # deferred device prints compared in one read (each holds a 1-element device array until then)


class HostWriteGuard:
    """Read-only flags on the arrays a program's tape depends on."""

    def __init__(self, outcome: str = "no shadow was changed"):
        self.outcome = outcome  # what a refusal of a changed fingerprint leaves (a recomputation's: checkpoint.py)
        # id -> weak reference to an array made read-only (roots and the views launches took): weak, so that a
        # temporary a program (or a loop step) drops is freed, and a new array reusing its id is not taken for it
        self.arrays: dict[int, weakref.ref] = {}
        self.last: str | None = None  # where the program was when the arrays were last locked
        mode = os.environ.get("GRADKERN_HOST_WRITE_CHECK", "auto") or "auto"
        if mode not in _MODES:
            raise ProgramError(f"GRADKERN_HOST_WRITE_CHECK must be one of {', '.join(_MODES)}; got {mode!r}")
        self.mode = mode
        self.prints: dict[int, tuple[Any, int, Any]] = {}  # id(buffer) -> (reference, fingerprint, where locked)
        # id(buffer) -> weak references to the views of it the program holds (TrackedArrays), locked with it
        self.followers: dict[int, list] = {}
        self.locked_after: dict[int, Any] = {}  # id(flag-locked buffer) -> where it was locked
        # id(NumPy array) -> weak references to it and its buffer: `lock` held and locked both, and its buffer's
        # followers; a later `lock` of it only rereads their two flags
        # (docs/programs.md#recomputed-steps-of-a-checkpointed-loop)
        self.settled: dict[int, tuple[Any, Any]] = {}
        self.fresh: dict[int, int] = {}  # id(buffer) -> its fingerprint as the last `check` found it
        self.made: Any = None  # CuPy memory host code made while recording (devicefresh.py), set by run.py
        # device prints compared later (`check(defer=True)`): (reference, old print, new print, where, before,
        # shape and dtype)
        self.deferred: list = []

    def follow(self, views: list) -> None:
        """Lock `views` whenever their buffer is locked, and now if it is: a view made while its buffer was
        writable keeps its own write flag otherwise (and a launch's plain view of it would be writable)."""
        for v in views:
            if self._holds(v):  # locked by this guard, and so until `release`, which forgets the followers too
                continue
            root = memory_root(v)
            refs = self.followers.setdefault(id(root), [])
            for r in refs:
                if r() is v:
                    break
            else:
                refs.append(weakref.ref(v))
            if self._holds(root) and not self._holds(v):  # read-only now because of us (as `lock` holds it)
                v.flags.writeable = False
                self.arrays[id(v)] = weakref.ref(v)

    def _followers(self, root: Any) -> list:
        refs = self.followers.get(id(root))
        if not refs:
            return []
        views = [v for v in (r() for r in refs) if v is not None]
        if len(views) < len(refs):  # some were freed
            self.followers[id(root)] = [r for r in refs if r() is not None]
        return views

    def _fingerprinted(self, a: Any) -> bool:
        auto = not isinstance(a, np.ndarray) or device_memory(a)
        return self.mode == "fingerprint" or (self.mode == "auto" and auto)

    def lock(self, arrays: list, where: Any, written: set | None = None) -> None:
        """`arrays` read-only (NumPy) or fingerprinted after a launch took them. `written`: the ids of the buffers
        (memory roots) the launch may have written, where known; the others keep the prints `check` made of them
        before the launch."""
        numpy_printed = None  # whether NumPy arrays are fingerprinted: the same for all of them
        settled = self.settled
        for a in arrays:
            numpy = isinstance(a, np.ndarray)
            if numpy and numpy_printed is None:
                numpy_printed = self._fingerprinted(a)
            if numpy and not numpy_printed:
                hit = settled.get(id(a))
                # locked by this guard before and read-only still: its buffer's followers are too (NumPy refuses
                # to make a view of a read-only buffer writable), so there is nothing to lock
                if hit is not None and hit[0]() is a and not a.flags.writeable:
                    root = hit[1]()  # alive while `a` is
                    if not root.flags.writeable:
                        self.locked_after[id(root)] = where
                        continue
            if (numpy_printed if numpy else self._fingerprinted(a)):
                root = memory_root(a)
                # unchanged since `check` printed it before the launch, which did not write it: that print
                fresh = None if written is None or id(root) in written else self.fresh.get(id(root))
                self.prints[id(root)] = (_reference(root), fresh if fresh is not None else _print(root), where)
            if not numpy or self.mode == "fingerprint":
                continue
            root = memory_root(a)
            self.locked_after[id(root)] = where
            for x in (root, a, *self._followers(root)):
                flags = x.flags
                if flags.writeable:
                    if not self._holds(x):
                        self.arrays[id(x)] = weakref.ref(x)
                    flags.writeable = False
                elif not self._holds(x) and self._holds(root):
                    # a view made while its buffer was locked is read-only only because of us
                    self.arrays[id(x)] = weakref.ref(x)
            if not numpy_printed and self._holds(root) and self._holds(a):
                settled[id(a)] = (self.arrays[id(a)], self.arrays[id(root)])  # weak: temporaries are freed
        self.last = where

    def check(self, arrays: list | None, before: str, defer: bool = False) -> None:
        """ProgramError if a fingerprinted buffer of `arrays` (of every one when None) changed since the
        launch that last took it; `before` says where the change was found. `defer`: device buffers' prints
        are compared later, with others, in one read (`settle`): a recorded launch's check, which must not
        wait for the GPU (docs/programs.md, "On a GPU: no synchronisation per step"); any check that does
        not defer compares the deferred ones first."""
        self.fresh = {}
        if self.deferred and not defer:
            self.settle()
        if not self.prints:  # nothing fingerprinted: nothing to compare
            return
        roots = self.prints if arrays is None else {id(memory_root(a)): None for a in arrays}
        device, fresh = [], self.fresh
        for key in list(roots):  # a freed buffer's entry is dropped on the way
            if key in self.prints:
                ref, fp, where = self.prints[key]
                root = ref()
                if root is None:  # freed: nothing can read it any more
                    del self.prints[key]
                elif not isinstance(root, np.ndarray):  # CuPy: printed now, compared below in one synchronisation
                    device.append((key, root, fp, where, device_print(root)))
                else:
                    now = fingerprint(root)
                    if now != fp:
                        raise _changed(root, where, before, self.outcome)
                    fresh[key] = now
        if device and defer:
            deferred = self.deferred
            for key, root, fp, where, now in device:
                deferred.append((self.prints[key][0], fp, now, where, before, root.shape, root.dtype))
                fresh[key] = now
            if len(deferred) >= _DEFERRED:
                self.settle()
        elif device:
            # the new prints and the old ones not yet read back (`lock`'s), in one read
            olds = [fp for _, _, fp, _, _ in device]
            pending = [k for k, fp in enumerate(olds) if type(fp) is tuple]
            values = settle_all([p for *_, p in device] + [olds[k] for k in pending])
            m = len(device)
            for k, v in zip(pending, values[m:]):
                olds[k] = v
            for (key, root, _, where, _), now, fp in zip(device, values[:m], olds):
                if now != fp:
                    raise _changed(root, where, before, self.outcome)
                self.prints[key] = (self.prints[key][0], fp, where)  # settled: never read back again
                fresh[key] = now

    def settle(self) -> None:
        """Compare the deferred device prints, in one read: ProgramError naming the first that changed."""
        deferred, self.deferred = self.deferred, []
        olds = [fp for _, fp, *_ in deferred]
        pending = [k for k, fp in enumerate(olds) if type(fp) is tuple]
        values = settle_all([now for _, _, now, *_ in deferred] + [olds[k] for k in pending])
        m = len(deferred)
        for k, v in zip(pending, values[m:]):
            olds[k] = v
        for (ref, _, _, at, before, shape, dtype), now, fp in zip(deferred, values[:m], olds):
            if now != fp:
                root = ref()
                raise _changed(root, at, before, self.outcome,
                               f"an array of shape {tuple(shape)} and dtype {dtype} (freed since)")

    def _taken(self, root: Any) -> Any:
        """(what refers to `root`, -, after which launch) if the tape depends on `root`'s values, else None."""
        entry = self.prints.get(id(root))
        if entry is None and self._holds(root):  # locked by its flag; a view made before kept its own
            entry = (lambda: root, None, self.locked_after.get(id(root), self.last))
        return entry if entry is not None and entry[0]() is root else None

    def taken(self, a: Any) -> bool:
        """Whether a host write to `a` would be refused: a launch or rule call has taken its buffer."""
        return self._taken(memory_root(a)) is not None

    def refuse_write(self, a: Any) -> None:
        """ProgramError before a host write changes `a` if its buffer is fingerprinted (the tape depends on
        it); NumPy's read-only flag refuses the others."""
        root = memory_root(a)
        entry = self._taken(root)
        if entry is not None:
            frame = user_frame()  # the user's line (session 52: a write by __setitem__ was refused without it)
            line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip() if frame is not None else ""
            at = f" at {where(frame)} (`{line}`)" if line else ""
            raise ProgramError(f"a host write to {name_of(root)}{at}, which the program's derivative depends on, "
                               f"{entry[2]}, refused before it changed anything; no shadow was changed",
                               hint="change arrays inside a program with launches, gk.copy(dst, src) or "
                                    "gk.fill(dst, value), which are differentiated")

    @contextmanager
    def unlocked(self, arrays: list, before: str = "before the next launch") -> Iterator[None]:
        """The arrays a launch writes, writable for its duration (roots first: a view follows its base);
        fingerprinted buffers are checked first."""
        ours = self.unlock(arrays, before)
        try:
            yield
        finally:
            self.relock(ours)

    def unlock(self, arrays: list, before: str, defer: bool = False) -> list:
        """`unlocked`'s entry (a launch's hot path calls it without a context manager): returns what `relock`
        locks again. `defer`: `check`'s."""
        self.check(arrays, before, defer)
        # a view made by the program while its buffer was locked is read-only too: it follows its buffer
        ours = []
        settled = self.settled
        for a in arrays:
            hit = settled.get(id(a))
            if hit is not None and hit[0]() is a:  # `a` and its buffer held (lock)
                ours.append(hit[1]())
                ours.append(a)
            elif isinstance(a, np.ndarray):
                root = memory_root(a)
                if self._holds(root):
                    ours.append(root)
                    ours.append(a)
        # setflags(write) with the flag positional: `flags.writeable = v` calls setflags with keywords, which
        # NumPy parses at four to eight times the cost (docs/programs.md#host-cost-per-step)
        for x in ours:
            x.setflags(True)
        return ours

    @staticmethod
    def relock(ours: list) -> None:
        for x in reversed(ours):
            x.setflags(False)

    def unlock_settled(self, arrays: list) -> list | None:
        """`unlock(arrays)` where `lock` locked every one of them (`settled`) and nothing is fingerprinted: what
        `relock_settled` locks again; None otherwise (unlock them in full)."""
        # `_fingerprinted(arrays[0])` without its calls: only NumPy arrays are `settled`, and they are
        # fingerprinted in mode 'fingerprint', or in 'auto' while hostcuda is the default backend
        mode = self.mode
        if self.prints or not arrays or mode == "fingerprint" or (mode == "auto" and backend_name(None) == "hostcuda"):
            return None
        settled, ours = self.settled, []
        for a in arrays:
            hit = settled.get(id(a))
            if hit is None or hit[0]() is not a:
                return None
            ours.append(hit[1]())
            ours.append(a)
        for x in ours:
            x.setflags(True)
        return ours

    def relock_settled(self, ours: list, where: Any) -> None:
        """`relock(ours)` and `lock` of the arrays `unlock_settled` unlocked, which is all that is left of it:
        every one of them and its buffer read-only again (their followers stayed so), locked after `where`."""
        for x in reversed(ours):
            x.setflags(False)
        self.locked_settled(ours, where)

    def locked_settled(self, ours: list, where: Any) -> None:
        """`lock` of the arrays `unlock_settled` unlocked once `relock(ours)` made them read-only again. `where`:
        a string, or an object whose `str` is it, formatted only where an error names it (a recorded launch's
        Step: no string made per launch)."""
        for root in ours[::2]:
            self.locked_after[id(root)] = where
        self.last = where

    def _holds(self, x: Any) -> bool:
        ref = self.arrays.get(id(x))
        return ref is not None and ref() is x

    def _locked(self) -> list:
        return [x for x in (r() for r in self.arrays.values()) if x is not None]

    def release(self) -> None:
        """Every array writable again, as before the call (bases before views)."""
        for x in sorted(self._locked(), key=lambda x: x.base is not None):
            x.flags.writeable = True
        self.arrays.clear()
        self.followers.clear()
        self.locked_after.clear()
        self.settled.clear()

    def host_write_error(self, exc: ValueError, outcome: str = "no shadow was changed") -> ProgramError | None:
        """The ProgramError for NumPy's read-only failure inside the program, naming the array where the
        failing frame has it under a name and saying what `outcome` the failure left; None for any other
        ValueError."""
        if "read-only" not in str(exc):
            return None
        names: list[str] = []
        at = ""
        tb = exc.__traceback__
        while tb is not None:  # the innermost frame outside gradkern: the line that wrote
            frame = tb.tb_frame
            if not frame.f_code.co_filename.startswith(_OURS):
                line = linecache.getline(frame.f_code.co_filename, tb.tb_lineno)
                at = f" at {frame.f_code.co_filename}:{tb.tb_lineno} (`{line.strip()}`)"
                target = line.split("=")[0] if "=" in line else line
                locked = [n for n, v in frame.f_locals.items() if isinstance(v, np.ndarray) and not v.flags.writeable
                          and any(np.shares_memory(v, x) for x in self._locked())]
                names = [n for n in locked if re.search(rf"\b{re.escape(n)}\b", target)] or locked
            tb = tb.tb_next
        which = f"'{names[0]}'" if len(names) == 1 else "an array" if not names else \
            "one of " + ", ".join(f"'{n}'" for n in names)
        after = self.last if self.last is not None else "during the program"
        return ProgramError(f"a host write to {which}{at}, which the program's derivative depends on, {after}: "
                            f"{exc}; {outcome}",
                            hint="change arrays inside a program with launches, gk.copy(dst, src) or "
                                 "gk.fill(dst, value), which are differentiated")


_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the gradkern package


def _reference(x: Any) -> Any:
    """A weak reference to `x`, or a callable returning it where `x` takes none."""
    try:
        return weakref.ref(x)
    except TypeError:
        return lambda: x


def _print(root: Any) -> Any:
    """A buffer's fingerprint: an int (NumPy), or a device print not yet read back (CuPy; fingerprint.py)."""
    return fingerprint(root) if isinstance(root, np.ndarray) else device_print(root)


def _changed(root: Any, where: Any, before: str, outcome: str, freed: str = "") -> ProgramError:
    name = name_of(root) if root is not None else freed
    return ProgramError(f"a host write to {name}, which the program's derivative depends on, {where}, "
                        f"found {before}; {outcome}",
                        hint="change arrays inside a program with launches, gk.copy(dst, src) or gk.fill(dst, "
                             "value), which are differentiated")


def name_of(root: Any) -> str:
    """'name' of the buffer in the innermost frame outside gradkern that has it under a name, else its shape."""
    frame = sys._getframe(1)
    while frame is not None:
        if not frame.f_code.co_filename.startswith(_OURS):
            names = [n for n, v in frame.f_locals.items() if hasattr(v, "shape") and memory_root(v) is root]
            if names:
                return f"'{names[0]}'" if len(names) == 1 else "one of " + ", ".join(f"'{n}'" for n in names)
        frame = frame.f_back
    return f"an array of shape {tuple(root.shape)} and dtype {root.dtype}"
