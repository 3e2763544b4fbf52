"""Random views of a few buffers and a brute-force oracle of the bytes they hold (tests/fuzz/test_overlap_fuzz.py).

`draw_view` makes a view of one of the pool's buffers: slices with steps of either sign, 2-D reshapes, transposes,
float32 and int64 reinterpretations of float64 memory (so elements of two views can share some bytes only), views
with a new axis of extent one and any stride there, `as_strided` with random shapes, strides (multiples of 4, zero and
negative ones included) and offsets, sometimes reaching past the buffer, and a second view with another's very
geometry. The oracle, `element_starts`, lists every element's first byte address by walking every index tuple; the
bytes of an element are [start, start + itemsize). Nothing here reads an element's value, so views that reach
outside their memory are only measured, never dereferenced."""

from __future__ import annotations

import itertools

import numpy as np
from numpy.lib.stride_tricks import as_strided

ITEM = 8  # the pool's buffers hold float64


def address(x: np.ndarray) -> int:
    return x.__array_interface__["data"][0]


def element_starts(x: np.ndarray) -> list[int]:
    """Every element's first byte, one per index tuple, by walking the index space."""
    base = address(x)
    return [base + sum(i * s for i, s in zip(idx, x.strides)) for idx in itertools.product(*map(range, x.shape))]


def byte_set(x: np.ndarray) -> set[int]:
    return {b for s in element_starts(x) for b in range(s, s + x.itemsize)}


def self_overlap(x: np.ndarray) -> bool:
    """Whether two distinct index tuples of `x` share a byte (every element has the same item size, so two
    elements share one iff their starts differ by less than it)."""
    starts = sorted(element_starts(x))
    return any(b - a < x.itemsize for a, b in zip(starts, starts[1:]))


def share(x: np.ndarray, y: np.ndarray) -> bool:
    return bool(byte_set(x) & byte_set(y))


def bounds(x: np.ndarray) -> tuple[int, int]:
    starts = element_starts(x)
    return min(starts), max(starts) + x.itemsize


def outside(x: np.ndarray, buf: np.ndarray) -> bool:
    lo, hi = address(buf), address(buf) + buf.nbytes
    return any(s < lo or s + x.itemsize > hi for s in element_starts(x))


def same_geometry(x: np.ndarray, y: np.ndarray) -> bool:
    """The very same elements in the very same index order: the same first address, shape and dtype, and the same
    stride on every axis that has more than one index (a stride on an axis of extent one is never used)."""
    return (address(x) == address(y) and x.shape == y.shape and x.dtype == y.dtype
            and all(s == t for n, s, t in zip(x.shape, x.strides, y.strides) if n > 1))


def _strided(rng, buf: np.ndarray, dtype, reach: bool) -> np.ndarray:
    """`as_strided` over `buf` from a random byte offset (a multiple of 4) with a random shape and strides; inside
    the buffer unless `reach`, when it may leave it at either end."""
    itemsize = np.dtype(dtype).itemsize
    for _ in range(20):
        ndim = int(rng.integers(1, 4))
        shape = tuple(int(rng.integers(1, 5)) for _ in range(ndim))
        strides = tuple(int(rng.choice([0, 4, 8, 8, 16, 24, 32, -8, -16, 12, 40, 64])) for _ in range(ndim))
        first = int(rng.integers(0, (buf.nbytes - itemsize) // 4 + 1)) * 4
        anchor = np.ndarray(shape=(1,), dtype=dtype, buffer=buf, offset=first)
        x = as_strided(anchor, shape=shape, strides=strides)
        if reach or not outside(x, buf):
            return x
    return buf[: int(rng.integers(1, 9))]


def draw_view(rng, pool: list[np.ndarray], views: list[np.ndarray]) -> np.ndarray:
    """One random view of a buffer of `pool` (or one with the geometry of an earlier view in `views`)."""
    buf = pool[int(rng.integers(0, len(pool)))]
    n = buf.size
    kind = str(rng.choice(["slice", "slice", "reshape", "f32", "i64", "newaxis", "strided", "reach", "again"]))
    if kind == "again" and views:
        old = views[int(rng.integers(0, len(views)))]
        if rng.random() < 0.5:
            return old.view()
        return as_strided(old, shape=old.shape, strides=old.strides)
    if kind == "slice" or kind == "again":
        step = int(rng.choice([1, 1, 2, 3, -1, -2]))
        a, b = sorted(int(v) for v in rng.integers(0, n + 1, size=2))
        v = buf[a:b][::step] if b > a else buf[a:a + 1]
        return v
    if kind == "reshape":
        rows = int(rng.integers(1, 5))
        cols = int(rng.integers(1, 5))
        a = int(rng.integers(0, n - rows * cols + 1))
        v = buf[a:a + rows * cols].reshape(rows, cols)
        if rng.random() < 0.4:
            v = v.T
        if rng.random() < 0.4:
            v = v[:: int(rng.choice([1, 2, -1])), int(rng.integers(0, v.shape[1])):]
        return v
    if kind == "f32":
        a = int(rng.integers(0, 2 * n - 1))
        return buf.view(np.float32)[a: a + int(rng.integers(1, 8))][:: int(rng.choice([1, 2, 3]))]
    if kind == "i64":
        a = int(rng.integers(0, n))
        return buf.view(np.int64)[a: a + int(rng.integers(1, 8))]
    if kind == "newaxis":
        a = int(rng.integers(0, n))
        v = buf[a: a + int(rng.integers(1, 6))]
        unit = int(rng.choice([0, 8, 16, -8, 24]))
        if rng.random() < 0.5:
            return as_strided(v, shape=(v.shape[0], 1), strides=(v.strides[0], unit))
        return as_strided(v, shape=(1, v.shape[0]), strides=(unit, v.strides[0]))
    dtype = np.float32 if rng.random() < 0.25 else np.float64
    return _strided(rng, buf, dtype, reach=kind == "reach")


def like(rng, x: np.ndarray, pool: list[np.ndarray], views: list[np.ndarray]) -> np.ndarray:
    """A random view of a pool buffer with `x`'s shape and dtype (a shadow for it): an earlier view of the same
    shape and dtype, or `as_strided` at a random offset with random strides, sometimes overlapping itself."""
    same = [v for v in views if v.shape == x.shape and v.dtype == x.dtype]
    if same and rng.random() < 0.3:
        v = same[int(rng.integers(0, len(same)))]
        return v if rng.random() < 0.5 else as_strided(v, shape=v.shape, strides=v.strides)
    buf = pool[int(rng.integers(0, len(pool)))]
    item = x.itemsize
    strides = []
    for _ in x.shape:
        strides.append(int(rng.choice([item, item, 2 * item, 4 * item, -item, 0 if rng.random() < 0.1 else item])))
    if rng.random() < 0.5 and x.ndim:  # contiguous, C order
        strides = list(np.empty(x.shape, x.dtype).strides)
    lo = sum(s * (n - 1) for n, s in zip(x.shape, strides) if s < 0)
    hi = sum(s * (n - 1) for n, s in zip(x.shape, strides) if s > 0) + item
    room = buf.nbytes - (hi - lo)
    if room < 0:
        strides = list(np.empty(x.shape, x.dtype).strides)
        lo, hi = 0, int(np.prod(x.shape)) * item
        room = buf.nbytes - hi
        if room < 0:
            return np.zeros_like(x)
    first = int(rng.integers(0, room // item + 1)) * item - lo
    anchor = np.ndarray(shape=(1,), dtype=x.dtype, buffer=buf, offset=first)
    return as_strided(anchor, shape=x.shape, strides=tuple(strides))
