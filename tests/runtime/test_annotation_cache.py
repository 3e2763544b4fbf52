"""The one signature cache (runtime/call.py, docs/prepared-call.md) for derivative calls: a derivative call whose
annotation signature was validated before skips the checks that depend only
on it, and a changed shape, flag, dtype, value or alias pattern is checked
(and refused) as on a first call, with every buffer left as it was."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import gradkern as gk
from gradkern.errors import AliasingError, AnnotationError
from gradkern.kernels.blas import saxpy
from gradkern.runtime import annotate, call


@pytest.fixture
def cold():
    call._CALLS.clear()
    yield
    call._CALLS.clear()


def _same(got, want):
    """A prepared call's values (call.Bound) equal to the full checks' (Annotated, Binding, shadows) triple:
    arrays compared by identity, scalars by type and value."""
    wa, wb, ws = want
    gb = got.b
    if got.call.mode == "reverse":
        assert (got.call.layout.active, got.call.layout.lanes) == (wa.active, wa.lanes)
    for a, b in zip(gb.values, wb.values, strict=True):
        assert a is b if isinstance(b, np.ndarray) else (type(a) is type(b) and a == b)
    assert list(got.derivatives) == list(ws)
    for n in ws:
        assert all(a is b for a, b in zip(got.derivatives[n], ws[n], strict=True))
    assert (gb.dim, gb.types, gb.backend, gb.aliases) == (wb.dim, wb.types, wb.backend, wb.aliases)


def _prepared(args, forward, dim=None, backend=None):
    return call.prepare(saxpy, args, dim, backend, "forward" if forward else "reverse")[1]


CALLS = {
    "reverse": (lambda r: (gk.Active(1.5), gk.Duplicated(r.random(8), r.random(8)),
                           gk.Duplicated(r.random(8), r.random(8))), False),
    "const": (lambda r: (gk.Const(1.5), r.random(8), gk.Duplicated(r.random(8), r.random(8))), False),
    "no_need": (lambda r: (gk.Active(np.float64(2.0)), gk.Const(r.random(8)),
                           gk.DuplicatedNoNeed(r.random(8), r.random(8))), False),
    "batch": (lambda r: (gk.Active(1.5), gk.BatchDuplicated(r.random(8), (r.random(8), r.random(8))),
                         gk.BatchDuplicated(r.random(8), [r.random(8), r.random(8)])), False),
    "forward": (lambda r: (gk.Duplicated(1.5, 0.5), gk.Duplicated(r.random(8), r.random(8)),
                           gk.Duplicated(r.random(8), r.random(8))), True),
    "views": (lambda r: (gk.Active(1.5), gk.Duplicated(r.random(16)[::2], r.random((2, 8))[1]),
                         gk.Duplicated(r.random(8), r.random(24)[8:16])), False),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_hit_equals_full_checks(cold, rng, name):
    make, forward = CALLS[name]
    args = make(rng)
    first = _prepared(args, forward)
    assert call.signature(saxpy, "forward" if forward else "reverse", None, None, args) in call._CALLS
    second = _prepared(args, forward)
    full = annotate.annotated_binding(saxpy, args, None, None, forward)
    _same(first, full)
    _same(second, full)


def test_gradient_from_a_hit_is_the_gradient(cold, rng):
    x, y, dy = rng.random(8), rng.random(8), rng.uniform(-1, 1, 8)
    dx = np.zeros(8)
    first = gk.autodiff(saxpy, gk.Active(1.5), gk.Duplicated(x, dx), gk.Duplicated(y, dy.copy()))
    x2, y2, dx2, dy2 = x.copy(), y.copy(), np.zeros(8), dy.copy()
    gk.autodiff(saxpy, gk.Active(1.5), gk.Duplicated(x2, dx2), gk.Duplicated(y2, dy2))  # fills the cache
    x3, y3, dx3, dy3 = x.copy(), y.copy(), np.zeros(8), dy.copy()
    third = gk.autodiff(saxpy, gk.Active(1.5), gk.Duplicated(x3, dx3), gk.Duplicated(y3, dy3))
    assert third == first
    np.testing.assert_array_equal(dx3, dx)
    np.testing.assert_array_equal(dx3, 1.5 * dy)  # x's shadow gets a * dy, exactly
    assert first[0] == pytest.approx(float(np.dot(x, dy)), rel=1e-12)  # summed in another order


def _readonly(a):
    a.flags.writeable = False
    return a


# after a cached call (1.5, x, dx, y, dy): another call's (a, x's shadow, y's shadow), its error and message
REFUSED = {
    "read-only shadow": (lambda r, x, y, dx, dy: (1.5, _readonly(dx), dy), AnnotationError, "read-only"),
    "longer shadow": (lambda r, x, y, dx, dy: (1.5, r.random(9), dy), AnnotationError, "like its primal"),
    "float32 shadow": (lambda r, x, y, dx, dy: (1.5, r.random(8).astype(np.float32), dy), AnnotationError,
                       "like its primal"),
    "2-D shadow": (lambda r, x, y, dx, dy: (1.5, r.random((2, 4)), dy), AnnotationError, "like its primal"),
    "inf": (lambda r, x, y, dx, dy: (np.inf, dx, dy), AnnotationError, "non-finite"),
    "nan": (lambda r, x, y, dx, dy: (np.nan, dx, dy), AnnotationError, "non-finite"),
    "integer Active": (lambda r, x, y, dx, dy: (2, dx, dy), AnnotationError, "integer"),
    "one shadow for two": (lambda r, x, y, dx, dy: (1.5, dy, dy), AliasingError, "shares memory"),
    "shadow is a primal": (lambda r, x, y, dx, dy: (1.5, y, dy), AliasingError, "shares memory"),
    "shadows overlap": (lambda r, x, y, dx, dy: (1.5, *(lambda z: (z[:-1], z[1:]))(r.random(9))), AliasingError,
                        "shares memory"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_changed_call_is_checked_again(cold, rng, case):
    """Every check still refuses after a hit, before any buffer is touched."""
    x, y, dx, dy = rng.random(8), rng.random(8), rng.random(8), rng.random(8)
    gk.autodiff(saxpy, gk.Active(1.5), gk.Duplicated(x, dx), gk.Duplicated(y, dy))
    make, error, match = REFUSED[case]
    a, sx, sy = make(rng, x, y, dx, dy)
    arrays = (x, y, dx, dy, sx, sy)
    before = [b.copy() for b in arrays]
    with pytest.raises(error, match=match):
        gk.autodiff(saxpy, gk.Active(a), gk.Duplicated(x, sx), gk.Duplicated(y, sy))
    for b, was in zip(arrays, before, strict=True):
        np.testing.assert_array_equal(b, was)


def test_values_not_keyed_take_the_full_path(cold, rng):
    x, y, dx, dy = rng.random(8), rng.random(8), rng.random(8), rng.random(8)
    strided = np.lib.stride_tricks.as_strided(dx, (8,), (8,))
    for args in ((gk.Active(1.5), gk.Duplicated(x, np.ma.masked_array(dx)), gk.Duplicated(y, dy)),
                 (gk.Active(1.5), gk.Duplicated(x, strided), gk.Duplicated(y, dy)),
                 (gk.Active(1.5), gk.Duplicated(x, [0.0] * 8), gk.Duplicated(y, dy)),
                 (gk.Active(1.5), gk.BatchDuplicated(x, dx), gk.Duplicated(y, dy))):
        assert call.signature(saxpy, "reverse", None, None, args) is None


def test_cache_keeps_no_arrays_alive(frozen_heap, cold, rng):
    x, y, dx, dy = rng.random(8), rng.random(8), rng.random(8), rng.random(8)
    gk.autodiff(saxpy, gk.Active(1.5), gk.Duplicated(x, dx), gk.Duplicated(y, dy))
    refs = [weakref.ref(a) for a in (x, y, dx, dy)]
    del x, y, dx, dy
    gc.collect()
    assert all(r() is None for r in refs)


def test_the_binding_comes_from_the_key_too(cold, rng):
    """A hit rebuilds the binding from its template: dim and backend are in the key, an int out of int64's
    range is not keyed (the full binding refuses it), and the binding equals the full one."""
    x, y, dx, dy = rng.random(8), rng.random(8), np.zeros(8), rng.uniform(-1, 1, 8)
    gk.autodiff(saxpy, gk.Active(1.5), gk.Duplicated(x, dx), gk.Duplicated(y, dy), dim=8)
    dx4 = np.zeros(8)
    gk.autodiff(saxpy, gk.Active(1.5), gk.Duplicated(x, dx4), gk.Duplicated(y, dy), dim=4)
    np.testing.assert_array_equal(dx4[:4], 1.5 * dy[:4])
    np.testing.assert_array_equal(dx4[4:], 0.0)
    args = (gk.Active(1.5), gk.Duplicated(x, dx), gk.Duplicated(y, dy))
    assert call.signature(saxpy, "reverse", (8,), None, args) != call.signature(saxpy, "reverse", 8, None, args)
    assert call.signature(saxpy, "reverse", np.int64(8), None, args) is None
    assert call.signature(saxpy, "reverse", 8, None, (2**64, gk.Duplicated(x, dx), gk.Duplicated(y, dy))) is None
    _same(_prepared(args, False, 8, "cpu"), annotate.annotated_binding(saxpy, args, 8, "cpu", False))
    _same(_prepared(args, False, 8, "cpu"), annotate.annotated_binding(saxpy, args, 8, "cpu", False))
