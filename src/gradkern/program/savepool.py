"""Host buffers for a program's copy-on-write saves, reused across steps and calls
(docs/programs.md#saved-copies-and-the-sweep).

A time loop saves one state per step and frees them all in its reverse; the
next gradient saves as many again. A fresh NumPy allocation of a state costs
its first-touch page faults on every step, so the saves' buffers are kept
between calls, up to GRADKERN_SAVE_POOL_BYTES free at a time (default: an
eighth of the machine's memory; 0 keeps none), and `gk.release_memory()` gives
them back. The same pool zeroes its free buffers for a program's temporaries'
shadows (given back when the sweep ends), and lends kept arrays to host code's
copies inside a recording (`leased`, up to the same number of bytes again;
docs/programs.md#program-shapes). Device arrays use their library's own pool
(CuPy keeps freed blocks), not this one.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import numpy as np


def _default_limit() -> int:
    value = os.environ.get("GRADKERN_SAVE_POOL_BYTES")
    if value is not None:
        return max(int(value), 0)
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 8
    except (ValueError, OSError, AttributeError):
        return 1 << 30


class SavePool:
    """Free byte buffers by size; `copy_of` takes one (or allocates), `give` returns it."""

    def __init__(self, limit: int):
        self.limit = limit
        self._free: dict[int, list[np.ndarray]] = {}
        self.free_bytes = 0
        self._leases: dict[tuple, list[np.ndarray]] = {}  # by shape and dtype, the arrays `leased` lends
        self.leased_bytes = 0
        self._lock = threading.Lock()  # programs may record on several threads

    def copy_of(self, view: Any) -> Any:
        """A C-ordered copy of `view`, in a pooled buffer where `view` is a NumPy array."""
        out = self._take(view)
        if out is None:
            return view.copy()
        np.copyto(out, view, casting="no")
        return out

    def empty_like(self, view: Any) -> Any:
        """A C-ordered array shaped like `view`, its contents undefined (a launch fills it)."""
        out = self._take(view)
        if out is not None:
            return out
        return np.empty(view.shape, view.dtype) if isinstance(view, np.ndarray) else \
            type(view)(view.shape, view.dtype)  # CuPy: from its own pool

    def leased(self, shape: tuple, dtype: Any) -> np.ndarray:
        """A new C-ordered array (contents undefined) that this pool keeps and lends again: host code's copies
        of a state inside a program (`u.copy()` every step) reuse mapped memory as the saves do
        (docs/programs.md, "Program shapes"). A kept array is lent again only when nothing but this pool refers
        to it: it owns its memory, so every view of it has it as its base and its reference count counts them."""
        key = (tuple(shape), np.dtype(dtype).str)
        with self._lock:
            kept = self._leases.setdefault(key, [])
            for out in kept:
                if sys.getrefcount(out) <= _UNUSED:
                    out.flags.writeable = True  # as a new array is
                    return out
            out = np.empty(shape, dtype)
            if out.nbytes and self.leased_bytes + out.nbytes <= self.limit:
                kept.append(out)
                self.leased_bytes += out.nbytes
            return out

    def _take(self, view: Any) -> Any:
        if type(view) is not np.ndarray and not isinstance(view, np.ndarray):
            return None
        nbytes = view.nbytes
        with self._lock:
            spare = self._free.get(nbytes)
            if not spare:
                return None
            raw = spare.pop()
            self.free_bytes -= nbytes
        # a kept array is the C-ordered owner of its memory: as it is where the save is of its dtype and shape
        # (a time loop's saves are), else viewed as one
        if raw.shape == view.shape and raw.dtype == view.dtype:
            return raw
        return raw.reshape(-1).view(np.uint8).view(view.dtype).reshape(view.shape)

    def give(self, data: Any) -> None:
        """`data` (made by `copy_of`) is no longer used: its buffer is kept for the next save of its size."""
        if type(data) is not np.ndarray and not isinstance(data, np.ndarray):
            return
        raw = data
        while isinstance(raw.base, np.ndarray):
            raw = raw.base
        flags = raw.flags
        if not flags.c_contiguous or not flags.owndata or not flags.writeable:
            return
        nbytes = raw.nbytes
        with self._lock:
            if nbytes == 0 or self.free_bytes + nbytes > self.limit:
                return
            self._free.setdefault(nbytes, []).append(raw)
            self.free_bytes += nbytes

    def clear(self) -> int:
        """Drop every free buffer; returns the bytes given back."""
        with self._lock:
            freed, self._free, self.free_bytes = self.free_bytes, {}, 0
            freed += sum(out.nbytes for kept in self._leases.values() for out in kept
                         if sys.getrefcount(out) <= _UNUSED)
            self._leases, self.leased_bytes = {}, 0
        return freed


def _unused_references() -> int:
    """The references a kept array has when nothing uses it, as this interpreter counts them: the pool's list, the
    loop's name and getrefcount's argument are 3 on CPython up to 3.13, and later versions may count borrowed
    references differently, so `leased` compares with a count taken the way it takes its own."""
    kept = [np.empty(1)]
    for out in kept:
        return sys.getrefcount(out)
    raise AssertionError("unreachable")


_UNUSED = _unused_references()


POOL = SavePool(_default_limit())
