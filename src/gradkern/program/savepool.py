"""Host buffers for a program's copy-on-write saves, reused across steps and calls
(docs/programs.md#saved-copies-and-the-sweep).

A time loop saves one state per step and frees them all in its reverse; the
next gradient saves as many again. A fresh NumPy allocation of a state costs
its first-touch page faults on every step, so the saves' buffers are kept
between calls, up to GRADKERN_SAVE_POOL_BYTES free at a time (default: an
eighth of the machine's memory; 0 keeps none), and `gk.release_memory()` gives
them back. The same pool zeroes its free buffers for a program's small
temporaries' shadows (large ones are mappings of their own: shadows.py), and
lends kept arrays, placed at their source's offset within a page, to host
code's copies inside a recording (`leased`, up to the same number of bytes
again; docs/programs.md#program-shapes). Device arrays use their library's own pool
(CuPy keeps freed blocks), not this one.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import os
import sys
import threading
from typing import Any

import numpy as np

from ..environment import env_int


def _default_limit() -> int:
    if os.environ.get("GRADKERN_SAVE_POOL_BYTES", "").strip():
        return max(env_int("GRADKERN_SAVE_POOL_BYTES", 0, minimum=None), 0)
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 8
    except (ValueError, OSError, AttributeError):
        return 1 << 30


# NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_OWNDATA | NPY_ARRAY_WRITEABLE, bits of ndarray.flags.num: one flags object read
# instead of three (`give` runs at every step of a program's sweep: docs/programs.md#host-cost-per-step)
_KEPT_FLAGS = 0x0001 | 0x0004 | 0x0400


class SavePool:
    """Free byte buffers by size; `copy_of` takes one (or allocates), `give` returns it."""

    def __init__(self, limit: int):
        self.limit = limit
        self._free: dict[int, list[np.ndarray]] = {}
        self.free_bytes = 0
        self._leases: dict[int, list[np.ndarray]] = {}  # by byte size, the arrays `leased` lends
        self._offsets: dict[int, int] = {}  # id of a kept array -> its first element's offset within a page
        self._next: dict[int, int] = {}  # by byte size, where `leased` starts looking (after the last it lent)
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

    def leased(self, like: np.ndarray, dtype: Any) -> np.ndarray:
        """A new C-ordered array shaped like `like` (contents undefined) in memory this pool keeps and lends
        again: host code's copies of a state inside a program (`u.copy()` every step) reuse mapped memory as the
        saves do, and start at `like`'s offset within a page (`placed`; docs/programs.md, "Program shapes"). A
        kept array is lent again (or its memory, placed anew) only when nothing but this pool refers to it: it
        is the root of its memory, so every view of it has it as its base and its reference count counts them."""
        dtype = np.dtype(dtype)
        shape = tuple(like.shape)
        nbytes = like.size * dtype.itemsize
        offset = like.__array_interface__["data"][0] % PAGE
        with self._lock:
            kept = self._leases.setdefault(nbytes, [])
            start, count = self._next.get(nbytes, 0), len(kept)
            for k in range(count):  # (enumerate's reused tuple would hold a reference)
                n = (start + k) % count  # from after the last lent: a loop's copies are lent in turn, not rescanned
                out = kept[n]
                if sys.getrefcount(out) <= _UNUSED:
                    self._next[nbytes] = n + 1
                    if out.shape != shape or out.dtype != dtype or self._offsets[id(out)] != offset:
                        del self._offsets[id(out)]
                        out = kept[n] = placed(shape, dtype, like, out.base)
                        self._offsets[id(out)] = offset
                    return out
            out = placed(shape, dtype, like)
            if nbytes and self.leased_bytes + nbytes <= self.limit:
                kept.append(out)
                self._offsets[id(out)] = offset
                self.leased_bytes += nbytes
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
        if raw.flags.num & _KEPT_FLAGS != _KEPT_FLAGS:  # C-contiguous, its own data, writable
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
            freed += sum(nbytes for nbytes, kept in self._leases.items() for out in kept
                         if sys.getrefcount(out) <= _UNUSED)
            self._leases, self._offsets, self.leased_bytes = {}, {}, 0
        return freed


PAGE = 4096
# anonymous private mappings (not on Windows: plain NumPy allocations there, at whatever offset they get)
MAPPABLE = hasattr(mmap, "MAP_ANONYMOUS") and hasattr(mmap, "MAP_PRIVATE")


class Memory(mmap.mmap):
    """An anonymous private mapping that holds one array (and views of it): the array's memory, as an
    allocation is. `gk_memory` tells the launch path (runtime/arrays.py: `held_memory`) that the mapping is the
    owner of the arrays in it, so their calls are keyed and refilled as a NumPy allocation's are. Huge-page
    advised; `traced` says tracemalloc is told of it (NumPy's domain), so that peak-memory measures see it."""

    gk_memory = True

    def __new__(cls, length: int) -> Memory:
        self = super().__new__(cls, -1, length, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # shared: no THP
        if hasattr(mmap, "MADV_HUGEPAGE"):
            self.madvise(mmap.MADV_HUGEPAGE)
        self.address = ctypes.addressof(ctypes.c_char.from_buffer(self))
        self.traced = False
        self.size = length  # what tracemalloc is told it holds
        self.zero = False  # a temporary's shadow (program/shadows.py: `_zero_pages`)
        return self

    def trace(self, held: bool) -> None:
        if held != self.traced:
            self.traced = held
            api = ctypes.pythonapi
            if held:
                api.PyTraceMalloc_Track(ctypes.c_uint(_NUMPY_DOMAIN), ctypes.c_size_t(self.address),
                                        ctypes.c_size_t(self.size))
            else:
                api.PyTraceMalloc_Untrack(ctypes.c_uint(_NUMPY_DOMAIN), ctypes.c_size_t(self.address))

    def __del__(self) -> None:
        if getattr(self, "traced", False):
            try:
                self.trace(False)
            except Exception:  # noqa: BLE001 - at interpreter exit ctypes may be gone; nothing to tell then
                pass


_NUMPY_DOMAIN = 389047  # tracemalloc's domain for NumPy's allocations (NPY_TRACE_DOMAIN)


def _memory(nbytes: int) -> Memory:
    """Memory for an array of `nbytes` at any offset within a page, held (traced) while it lives."""
    memory = Memory(-(-(nbytes + PAGE) // PAGE) * PAGE)
    memory.trace(True)
    return memory


def placed(shape: tuple, dtype: Any, like: Any, memory: Memory | None = None) -> np.ndarray:
    """A C-ordered array in `memory` (made by `_memory`; new memory when None) whose first element lies at
    `like`'s offset within a page. A kernel that reads a copy and writes its source right after the copy was
    written (`u_old = u.copy()`, then the step u_old -> u) ran 2-3x slower where the two started at different
    offsets within a page than at the same one, hand-written Numba loops as much as generated ones
    (docs/programs.md, "Program shapes"), and a fresh array lies wherever the allocator puts it (glibc's heap
    at any 16-byte offset once its dynamic mmap threshold has risen, a fresh mapping at 16). The array is the
    root of its memory as an allocated one is (`memory_root`: its base is not an array), so views of it have
    it as their base."""
    dtype = np.dtype(dtype)
    if not MAPPABLE:
        return np.empty(tuple(shape), dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if memory is None:
        memory = _memory(nbytes)
    skip = (like.__array_interface__["data"][0] - memory.address) % PAGE
    if skip % dtype.alignment:  # `like` is not aligned for `dtype`: an aligned start instead
        skip = 0
    return np.ndarray(tuple(shape), dtype, buffer=memory, offset=skip)


def _unused_references() -> int:
    """The references a kept array has when nothing uses it, as this interpreter counts them: the pool's list,
    the loop's name and getrefcount's argument are 3 on CPython up to 3.13, and later versions may count
    borrowed references differently, so `leased` compares with a count taken the way it takes its own."""
    kept = [placed((1,), np.float64, np.empty(1))]
    for out in kept:
        return sys.getrefcount(out)
    raise AssertionError("unreachable")


_UNUSED = _unused_references()


POOL = SavePool(_default_limit())
