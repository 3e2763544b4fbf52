"""Fingerprints of array contents, for the host-write guard where arrays have
no read-only flag (CuPy; docs/programs.md).

A fingerprint is the sum, modulo 2**64, of a bijective 64-bit mix (the
splitmix64 finaliser) of each word plus its position. Changing any one word
always changes the sum (the mix is a bijection and the others' terms stay);
changes to several words cancel only if their mixed differences sum to zero,
about 2**-64 for any fixed change. Positions enter the mix, so moving values
around changes it too. The same array operations run on NumPy and CuPy, in
chunks so that the temporaries stay small; the reduction runs where the array is.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..runtime.arrays import module_of

_CHUNK = 1 << 21  # words per pass: 16 MB of uint64 temporaries
_MASK = (1 << 64) - 1
_C1, _C2, _C3 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def _words(a: Any, xp: Any) -> Any:
    """`a`'s bytes as the widest unsigned words that tile them, flat."""
    flat = xp.ascontiguousarray(a).reshape(-1)
    raw = flat.view(xp.uint8)
    for width in (np.uint64, np.uint32, np.uint16):
        if raw.size % np.dtype(width).itemsize == 0:
            return raw.view(width)
    return raw


def fingerprint(a: Any) -> int:
    """A 64-bit fingerprint of `a`'s contents (and shape and dtype)."""
    xp = module_of(a)
    words = _words(a, xp)
    h = hash((tuple(a.shape), str(a.dtype))) & _MASK
    for start in range(0, words.size, _CHUNK):
        x = words[start:start + _CHUNK].astype(np.uint64)
        x += xp.arange(start, start + x.size, dtype=np.uint64) * _C1
        x ^= x >> _S30
        x *= _C2
        x ^= x >> _S27
        x *= _C3
        x ^= x >> _S31
        h = (h + int(x.sum(dtype=np.uint64))) & _MASK
    return h


