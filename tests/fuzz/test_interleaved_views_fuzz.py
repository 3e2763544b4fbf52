"""Which annotated entry a launched view maps to, by elements (program/shadows.py `ShadowMap.register` and `find`,
docs/programs.md#interleaved-views), against a brute-force oracle over element index sets
(tests/support/overlapfuzz.py walks every index tuple).

One float64 buffer, its shadow laid out like it and a second shadow buffer. Entries: random views of the buffer
(columns of a random 2-D block, steps of a slice, `as_strided` views of 1-3 dimensions with random shapes, strides
of either sign and offsets, all whole elements inside the buffer), each registered with the same view of the shadow
or, sometimes, of the second shadow buffer. Oracle of a registration: accepted iff the view shares no byte with an
earlier entry, or is that very array (address, shape, strides, dtype) with the same shadow; else refused (a shadow
of another buffer for the same array: gk.AliasingError; a shared element: gk.ProgramError). Oracle of `find(a)` for
random views `a` of the buffer: None iff `a` shares no byte with an entry; the view of the shadows with `a`'s
geometry at `a`'s address plus the entries' common shift iff every element of `a` is an element of the entries it
touches and those entries' shadows lie at one shift in one buffer; gk.ProgramError otherwise.

GRADKERN_FUZZ_INTERLEAVED sets the number of cases (CI default 400, under a second of CPU), GRADKERN_FUZZ_SEED the seed.
A local long run: GRADKERN_FUZZ_INTERLEAVED=20000 pytest -s -n0 tests/fuzz/test_interleaved_views_fuzz.py
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided
from support import overlapfuzz as of

import gradkern as gk
from gradkern.program.shadows import ShadowMap

N_CASES = int(os.environ.get("GRADKERN_FUZZ_INTERLEAVED", "400"))
SEED = int(os.environ.get("GRADKERN_FUZZ_SEED", "0"))
SIZE = 48  # elements of the buffer
ITEM = of.ITEM


def _strided(rng, buf):
    """`as_strided` of 1-3 dimensions at a whole-element offset, with whole-element strides, inside `buf`."""
    for _ in range(50):
        ndim = int(rng.integers(1, 4))
        shape = tuple(int(rng.integers(1, 5)) for _ in range(ndim))
        strides = tuple(ITEM * int(rng.choice([1, 2, 3, 4, 6, 8, 12, -1, -2, -5, 0])) for _ in range(ndim))
        first = int(rng.integers(0, SIZE)) * ITEM
        x = as_strided(np.ndarray((1,), np.float64, buf, first), shape=shape, strides=strides)
        if not of.outside(x, buf):
            return x
    return buf[: int(rng.integers(1, 9))]


def _block(rng, buf):
    rows, cols = int(rng.integers(1, 7)), int(rng.integers(1, 5))
    at = int(rng.integers(0, SIZE - rows * cols + 1))
    return buf[at: at + rows * cols].reshape(rows, cols)


def draw(rng, buf, family):
    """A view of `buf`: one of a family's (the columns or row ranges of a block, a slice's steps) or any."""
    kind = str(rng.choice(["family", "family", "family", "slice", "strided"]))
    if kind == "family" and family is not None:
        v = family[..., int(rng.integers(0, family.shape[-1]))] if rng.random() < 0.6 else family
        a, b = sorted(int(x) for x in rng.integers(0, v.shape[0] + 1, size=2))
        return v[a:b] if b > a and rng.random() < 0.5 else v
    if kind == "slice" or kind == "family":
        step = int(rng.choice([1, 2, 2, 3, -2]))
        start = int(rng.integers(0, SIZE))
        return buf[start::step] if step > 0 else buf[start::step]
    return _strided(rng, buf)


def shadow_of(view, buf, shadow_buf):
    """The same view of `shadow_buf` as `view` is of `buf`."""
    return as_strided(shadow_buf[(of.address(view) - of.address(buf)) // ITEM:], shape=view.shape,
                      strides=view.strides)


def strict_same(x, y):
    return of.address(x) == of.address(y) and x.shape == y.shape and x.strides == y.strides and x.dtype == y.dtype


def expect_find(a, entries):
    """What `find(a)` must give: None, ("view", shift) or "refused"; entries: (view, shadow buffer index)."""
    a_bytes = of.byte_set(a)
    used = [(v, k) for v, k in entries if of.byte_set(v) & a_bytes]
    if not used:
        return None
    held = set().union(*(of.element_starts(v) for v, _ in used))
    if not set(of.element_starts(a)) <= held or len({k for _, k in used}) > 1:
        return "refused"
    return ("view", used[0][1])


def one_case(rng):
    buf, shadows = np.zeros(SIZE), (np.zeros(SIZE), np.zeros(SIZE))
    family = _block(rng, buf) if rng.random() < 0.7 else None
    if family is not None and rng.random() < 0.3:
        family = buf[int(rng.integers(0, 4))::2][: int(rng.integers(2, 12))].reshape(-1, 1)  # red-black halves
    m = ShadowMap()
    entries = []
    for n in range(int(rng.integers(1, 5))):
        v = draw(rng, buf, family)
        if of.self_overlap(v):
            continue
        k = int(rng.random() < 0.15)
        same = [j for w, j in entries if strict_same(w, v)]
        clash = any(of.share(w, v) for w, _ in entries if not strict_same(w, v))
        name = f"v{n}"
        if clash:
            with pytest.raises(gk.ProgramError, match=f"'{name}' overlaps another annotated array, sharing"):
                m.register(name, v, (shadow_of(v, buf, shadows[k]),))
            continue
        if same and same[0] != k:
            with pytest.raises(gk.AliasingError, match="are the same array but their shadows are different"):
                m.register(name, v, (shadow_of(v, buf, shadows[k]),))
            continue
        m.register(name, v, (shadow_of(v, buf, shadows[k]),))
        entries.append((v, k))
    for _ in range(6):
        a = draw(rng, buf, family)
        want = expect_find(a, entries)
        if want == "refused":
            with pytest.raises(gk.ProgramError):
                m.find(a)
            continue
        got = m.find(a)
        if want is None:
            assert got is None, (a.shape, a.strides, [(v.shape, v.strides) for v, _ in entries])
            continue
        (dx,) = got
        shift = of.address(shadows[want[1]]) - of.address(buf)
        assert of.address(dx) == of.address(a) + shift and dx.shape == a.shape and dx.strides == a.strides


def test_find_maps_views_by_elements_as_the_oracle_says():
    rng = np.random.default_rng(SEED)
    for _ in range(N_CASES):
        one_case(rng)
