"""Alias and overlap fuzzer (runtime/arrays.py, runtime/binding.py `_aliases`, runtime/annotate.py `merge_shadows`;
docs/launches.md "Aliasing and overlapping arrays"): random views of a few buffers against a brute-force oracle that
enumerates every element's bytes (tests/support/overlapfuzz.py).

The views: slices with steps of either sign, 2-D reshapes and transposes, float32 and int64 reinterpretations of
float64 memory (elements of two views then share half of their bytes, or all of them under another dtype), a new axis
of extent one with any stride on it, `as_strided` with random shapes, offsets and strides (zero, negative, multiples
of 4 only, so float64 elements straddle), views that reach past their buffer, and a second view with an earlier view's
very geometry.

Properties:
1. per view: `byte_bounds` is the first and one-past-last byte of its elements; `overlapping_elements` holds iff two
   distinct elements share a byte; `outside_its_memory` holds iff some element leaves the buffer;
2. per launch of a kernel writing its first argument and reading two more (or writing none): `bind` raises
   gk.LaunchError for an argument outside its memory, gk.AliasingError for a written argument whose elements overlap
   and for two arguments that share a byte without holding the same elements in the same order when either is
   written, in the order of the arguments, and otherwise merges exactly the arguments with the same elements in the
   same order;
3. per autodiff call with every argument Duplicated (shadows: views of the same pool, so they may coincide with
   primals or each other): `annotated_binding` raises as 2 does and, besides, gk.AnnotationError for a shadow outside
   its memory, gk.AliasingError for a shadow whose elements overlap, for merged primals whose shadows are not merged
   alike, and for a shadow sharing a byte with another buffer; and accepts everything else.
4. end to end, on the interpreter: `gk.launch` of `a[i] += 2 * b[i]` on 1-D views refuses exactly what 2 refuses,
   every buffer unchanged, and computes what a serial loop over the threads does otherwise.

GRADKERN_FUZZ_OVERLAP sets the number of cases of each property (CI default 300), GRADKERN_FUZZ_SEED the seed.
A local long run: GRADKERN_FUZZ_OVERLAP=20000 pytest -s -n0 tests/fuzz/test_overlap_fuzz.py
"""

from __future__ import annotations

import os

import numpy as np
from support import overlapfuzz as of

import gradkern as gk
from gradkern.runtime.annotate import annotated_binding
from gradkern.runtime.arrays import byte_bounds, outside_its_memory, overlapping_elements
from gradkern.runtime.binding import bind, exactly_aliased

N_CASES = int(os.environ.get("GRADKERN_FUZZ_OVERLAP", "300"))
SEED = int(os.environ.get("GRADKERN_FUZZ_SEED", "0"))


@gk.kernel
def write_first(a, b, c):
    a[gk.tid() * 0] = b[0] + c[0]


@gk.kernel
def read_all(a, b, c, out):
    i = gk.tid()
    out[i] = a[0] + b[0] + c[0]


@gk.kernel
def add_twice(a, b):
    i = gk.tid()
    a[i] += 2.0 * b[i]


def _pool() -> list[np.ndarray]:
    return [np.zeros(24), np.zeros(16)]


def _draw(rng, pool, views, floats=False):
    while True:
        v = of.draw_view(rng, pool, views)
        if v.size and (not floats or v.dtype.kind == "f"):
            views.append(v)
            return v


def _root(x, pool):
    """The pool buffer `x`'s first element lies in (every view starts inside its buffer), or `x` for an array of
    its own (a shadow `like` allocated where no pool buffer had room)."""
    return next((b for b in pool if of.address(b) <= of.address(x) < of.address(b) + b.nbytes), x)


def _expected_bind(views, written, pool) -> tuple[type | None, dict[int, int]]:
    """What the oracle says `bind` does: the error class, or the merged arguments (later -> earliest)."""
    for n, v in enumerate(views):
        if of.outside(v, _root(v, pool)):
            return gk.LaunchError, {}
        if written[n] and of.self_overlap(v):
            return gk.AliasingError, {}
    merged: dict[int, int] = {}
    for q in range(len(views)):
        for p in range(q):
            if of.same_geometry(views[p], views[q]):
                merged.setdefault(q, merged.get(p, p))
            elif (written[p] or written[q]) and of.share(views[p], views[q]):
                return gk.AliasingError, {}
    return None, merged


def _outcome(fn, *args, **kw):
    try:
        return None, fn(*args, **kw)
    except gk.GradkernError as e:
        return type(e), e


def test_views_against_brute_force():
    rng = np.random.default_rng(SEED)
    pool = _pool()
    views: list[np.ndarray] = []
    counts = {"overlap": 0, "outside": 0, "exact": 0}
    for case in range(N_CASES):
        v = _draw(rng, pool, views)
        where = f"case {case}: shape {v.shape} strides {v.strides} dtype {v.dtype}"
        assert byte_bounds(v) == of.bounds(v), where
        assert overlapping_elements(v) == of.self_overlap(v), where
        assert outside_its_memory(v) == of.outside(v, _root(v, pool)), where
        w = views[int(rng.integers(0, len(views)))]
        assert exactly_aliased(v, w) == of.same_geometry(v, w), f"{where} against {w.shape} {w.strides}"
        counts["overlap"] += of.self_overlap(v)
        counts["outside"] += of.outside(v, _root(v, pool))
        counts["exact"] += of.same_geometry(v, w) and v is not w
    assert all(counts.values()), counts  # every property is reached


def test_bind_against_brute_force():
    rng = np.random.default_rng(SEED + 1)
    pool = _pool()
    seen: dict = {}
    for case in range(N_CASES):
        views: list[np.ndarray] = []
        args = [_draw(rng, pool, views) for _ in range(3)]
        reads_only = rng.random() < 0.3
        kernel = read_all if reads_only else write_first
        written = [False] * 3 if reads_only else [True, False, False]
        call = (*args, np.zeros(1)) if reads_only else tuple(args)
        want, merged = _expected_bind(args, written, pool)
        got, b = _outcome(bind, kernel.ir, (1,), call, "interp")
        where = f"case {case}: {[(v.shape, v.strides, v.dtype.str, of.address(v) % 1000) for v in args]}"
        assert got is want, f"{where}: {got} ({b}) where the oracle says {want}"
        if want is None:
            names = ("a", "b", "c")
            assert dict(b.aliases) == {names[q]: names[p] for q, p in merged.items()}, where
        seen[want, bool(merged)] = seen.get((want, bool(merged)), 0) + 1
    assert len(seen) >= 4, seen


def test_shadows_against_brute_force():
    rng = np.random.default_rng(SEED + 2)
    pool = _pool()
    seen: dict = {}
    for case in range(N_CASES):
        views: list[np.ndarray] = []
        args = [_draw(rng, pool, views, floats=True) for _ in range(3)]
        shadows = [of.like(rng, x, pool, views) for x in args]
        views += shadows
        want = _expected_shadows(args, shadows, pool)
        annotated = tuple(gk.Duplicated(x, dx) for x, dx in zip(args, shadows))
        got, e = _outcome(annotated_binding, write_first, annotated, (1,), "interp")
        where = (f"case {case}: primals {[(v.shape, v.strides, v.dtype.str, of.address(v) % 1000) for v in args]} "
                 f"shadows {[(v.shape, v.strides, of.address(v) % 1000) for v in shadows]}")
        assert got is want, f"{where}: {got} ({e}) where the oracle says {want}"
        seen[want] = seen.get(want, 0) + 1
    assert len(seen) >= 3, seen


def _expected_shadows(args, shadows, pool):
    for dx in shadows:
        if of.outside(dx, _root(dx, pool)):
            return gk.AnnotationError
        if of.self_overlap(dx):
            return gk.AliasingError
    want, merged = _expected_bind(args, [True, False, False], pool)
    if want is not None:
        return want
    for q, p in merged.items():
        if not of.same_geometry(shadows[q], shadows[p]):
            return gk.AliasingError
    buffers = [(x, False) for n, x in enumerate(args) if n not in merged]
    buffers += [(dx, True) for n, dx in enumerate(shadows) if n not in merged]
    for n, (x, xs) in enumerate(buffers):
        for y, ys in buffers[n + 1:]:
            if (xs or ys) and of.share(x, y):
                return gk.AliasingError
    return None


def test_launch_against_brute_force():
    rng = np.random.default_rng(SEED + 3)
    pool = _pool()
    refused = ran = 0
    for case in range(max(N_CASES // 10, 10)):
        for buf in pool:
            buf[:] = rng.integers(-8, 8, size=buf.size)
        views: list[np.ndarray] = []
        a, b = (_draw(rng, pool, views, floats=True) for _ in range(2))
        if a.ndim != 1 or b.ndim != 1 or a.dtype != b.dtype:
            a = pool[0][int(rng.integers(0, 8)):][:: int(rng.choice([1, 2, -1]))][:6]
            b = of.like(rng, a, pool, views) if rng.random() < 0.7 else a
        n = min(a.shape[0], b.shape[0])
        want, _ = _expected_bind([a, b], [True, False], pool)
        before = [buf.copy() for buf in pool]
        expect = before
        if want is None:  # the threads one after another, each adding twice b's element as it is then
            for i in range(n):
                a[i] += 2.0 * b[i]
            expect = [buf.copy() for buf in pool]
            for buf, old in zip(pool, before):
                buf[:] = old
        got, e = _outcome(gk.launch, add_twice, n, a, b, backend="interp")
        assert got is want, f"case {case}: {got} ({e}) where the oracle says {want}"
        for x, y in zip(pool, expect):
            np.testing.assert_array_equal(x, y)
        refused += want is not None
        ran += want is None
    assert refused and ran, (refused, ran)


def test_same_elements_with_another_stride_on_an_axis_of_extent_one_are_one_array():
    # found by this fuzzer (session 52): `x.reshape(n, 1)` and `x[:, None]` differ only in the stride of their
    # axis of extent one, which no index uses; they were refused as arrays that overlap without being the same
    x = np.arange(4.0)
    a, b = x.reshape(4, 1), x[:, None]
    assert a.strides != b.strides
    assert exactly_aliased(a, b)
    assert dict(bind(write_first.ir, (1,), (a, b, np.zeros(1)), "interp").aliases) == {"b": "a"}
