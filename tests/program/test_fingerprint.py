"""program/fingerprint.py: any one changed word changes the fingerprint, for every dtype and size a
program's arrays come in; equal contents give equal fingerprints."""

from __future__ import annotations

import numpy as np
import pytest

from gradkern.program import fingerprint as fpmod
from gradkern.program.fingerprint import fingerprint


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "int8", "float16", "complex128", "bool"])
@pytest.mark.parametrize("size", [1, 3, 7, 64, 1001])
def test_every_single_change_is_seen(dtype, size):
    rng = np.random.default_rng(size)
    a = (rng.standard_normal(size) * 10).astype(dtype)
    h = fingerprint(a)
    assert fingerprint(a.copy()) == h
    raw = a.view(np.uint8)
    for pos in range(0, raw.size, max(1, raw.size // 37)):
        for bit in (0, 3, 7):
            raw[pos] ^= np.uint8(1 << bit)
            assert fingerprint(a) != h, (pos, bit)
            raw[pos] ^= np.uint8(1 << bit)
    assert fingerprint(a) == h


def test_swaps_shapes_and_chunks():
    a = np.arange(10.0)
    b = a.copy()
    b[[2, 7]] = b[[7, 2]]  # the same values in other places
    assert fingerprint(a) != fingerprint(b)
    assert fingerprint(a) != fingerprint(a.reshape(2, 5))
    assert fingerprint(a.reshape(2, 5).T) == fingerprint(np.ascontiguousarray(a.reshape(2, 5).T))


def test_chunked_passes_see_changes_in_every_chunk(monkeypatch):
    monkeypatch.setattr(fpmod, "_CHUNK", 16)
    a = np.random.default_rng(3).standard_normal(100)
    h = fingerprint(a)
    for i in (0, 15, 16, 17, 63, 99):
        b = a.copy()
        b[i] = np.nextafter(b[i], np.inf)
        assert fingerprint(b) != h
