"""The annotation cache of runtime/annotate.py: a derivative call whose
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
from gradkern.runtime import annotate


@pytest.fixture
def cold():
    annotate._ANNOTATED.clear()
    yield
    annotate._ANNOTATED.clear()


def _same(got, want):
    """Equal (Annotated, Binding, shadows) triples, arrays compared by identity."""
    (ga, gb, gs), (wa, wb, ws) = got, want
    assert (ga.active, ga.no_need, ga.lanes) == (wa.active, wa.no_need, wa.lanes)
    for a, b in zip(ga.primals, wa.primals, strict=True):
        assert a is b
    for shadows_g, shadows_w in ((ga.shadows, wa.shadows), (gs, ws)):
        assert list(shadows_g) == list(shadows_w)
        for n in shadows_w:
            assert all(a is b for a, b in zip(shadows_g[n], shadows_w[n], strict=True))
    assert (gb.dim, gb.types, gb.backend, gb.aliases) == (wb.dim, wb.types, wb.backend, wb.aliases)


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
    first = annotate.annotated_binding(saxpy, args, None, None, forward)
    assert annotate._signature(saxpy, args, forward, None, None) in annotate._ANNOTATED
    second = annotate.annotated_binding(saxpy, args, None, None, forward)
    full = annotate._annotated_binding(saxpy, args, None, None, forward)
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
        assert annotate._signature(saxpy, args, False, None, None) is None


def test_cache_keeps_no_arrays_alive(cold, rng):
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
    assert annotate._signature(saxpy, args, False, (8,), None) != annotate._signature(saxpy, args, False, 8, None)
    assert annotate._signature(saxpy, args, False, np.int64(8), None) is None
    assert annotate._signature(saxpy, (2**64, gk.Duplicated(x, dx), gk.Duplicated(y, dy)), False, 8, None) is None
    _same(annotate.annotated_binding(saxpy, args, 8, "cpu"), annotate._annotated_binding(saxpy, args, 8, "cpu", False))
    _same(annotate.annotated_binding(saxpy, args, 8, "cpu"), annotate._annotated_binding(saxpy, args, 8, "cpu", False))
