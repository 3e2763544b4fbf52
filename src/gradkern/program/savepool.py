"""Host buffers for a program's copy-on-write saves, reused across steps and calls
(docs/programs.md#saved-copies-and-the-sweep).

A time loop saves one state per step and frees them all in its reverse; the
next gradient saves as many again. A fresh NumPy allocation of a state costs
its first-touch page faults on every step, so the saves' buffers are kept
between calls, up to GRADKERN_SAVE_POOL_BYTES free at a time (default: an
eighth of the machine's memory; 0 keeps none), and `gk.release_memory()` gives
them back. Device arrays use their library's own pool (CuPy keeps freed
blocks), not this one.
"""

from __future__ import annotations

import os
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

    def _take(self, view: Any) -> Any:
        if not isinstance(view, np.ndarray):
            return None
        nbytes = int(view.nbytes)
        with self._lock:
            spare = self._free.get(nbytes)
            if not spare:
                return None
            raw = spare.pop()
            self.free_bytes -= nbytes
        return raw.view(view.dtype).reshape(view.shape)

    def give(self, data: Any) -> None:
        """`data` (made by `copy_of`) is no longer used: its buffer is kept for the next save of its size."""
        if not isinstance(data, np.ndarray):
            return
        raw = data
        while isinstance(raw.base, np.ndarray):
            raw = raw.base
        if not raw.flags.c_contiguous or not raw.flags.owndata or not raw.flags.writeable:
            return
        nbytes = int(raw.nbytes)
        with self._lock:
            if nbytes == 0 or self.free_bytes + nbytes > self.limit:
                return
            self._free.setdefault(nbytes, []).append(raw.reshape(-1).view(np.uint8))
            self.free_bytes += nbytes

    def clear(self) -> int:
        """Drop every free buffer; returns the bytes given back."""
        with self._lock:
            freed, self._free, self.free_bytes = self.free_bytes, {}, 0
        return freed


POOL = SavePool(_default_limit())
