"""Gathers on the host inside a program (docs/host-code.md, "Gathers through an index array"): `u[index]` with
a 1-D integer index array (a list of integers, or a 1-D boolean mask) along the first axis of a 1-D or 2-D array is
a launch of a gather kernel, `out[j] = u[index[j]]` (a row per j for 2-D `u`), recorded and differentiated as any
launch: its reverse adds `out`'s adjoint into `u`'s at the gathered positions (atomically, an index may repeat).
The index is an integer image (resampling indices from `np.searchsorted`, a membership from `np.argmin`): no
derivative flows through it, as through an index array a kernel reads. Everything else indexed by an array stays
what program/hostcode.py makes it (a derived array a launch refuses)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import intrinsics as gk
from ..kernel import kernel
from ..recording import active_recorder
from ..runtime.launch import launch
from .hostcode import TrackedArray, _read, tracker


@kernel
def _gather1(dst, src, index):
    j = gk.tid()
    dst[j] = src[index[j]]


@kernel
def _gather2(dst, src, index):
    j, k = gk.tid()
    dst[j, k] = src[index[j], k]


_GATHER = (_gather1, _gather2)
_indexed = TrackedArray.__getitem__  # hostcode.py's: an element read, a view, or a derived array


def _index(key: Any, n: int) -> np.ndarray | None:
    """The positions along axis 0 that `key` gathers, non-negative, or None when it is no 1-D index array."""
    if isinstance(key, list) and key and all(isinstance(k, (int, np.integer)) and not isinstance(k, bool)
                                             for k in key):
        key = np.asarray(key)  # NumPy reads a list of integers as an index array
    if isinstance(key, TrackedArray) or not isinstance(key, np.ndarray) or key.ndim != 1:
        return None
    if key.dtype.kind == "b":
        return np.flatnonzero(key) if key.shape[0] == n else None  # NumPy raises for a mask of another length
    if key.dtype.kind not in "iu":
        return None
    return np.ascontiguousarray(np.where(key < 0, key + n, key), dtype=np.int64)


def _gathered(self: TrackedArray, key: Any) -> Any:
    host = tracker()
    index = _index(key, self.shape[0]) if self.ndim in (1, 2) and self.dtype.kind == "f" else None
    if index is None or host is None or active_recorder() is None or self._gk_origin is not None:
        return _indexed(self, key)
    _read()
    src = host.plain_view(self)
    if host.origin(src) is not None or not src.size:
        return _indexed(self, key)
    np.ndarray.__getitem__(src, key)  # an index out of bounds raises NumPy's IndexError, before any launch
    out = np.empty((index.shape[0],) + src.shape[1:], src.dtype)
    if out.size:
        launch(_GATHER[src.ndim - 1], out.shape, out, src, index)
    return out.view(TrackedArray)


TrackedArray.__getitem__ = _gathered
