"""Aliasing (DESIGN §8, runtime/binding.py, transforms/aliasing.py) in both
modes: exactly aliased primals are merged and differentiated as one array,
their shadows must alias the same way; partial overlap, through views with
steps too, is refused before any buffer changes; aliasing that makes a kernel
an in-place stencil is a race."""

from __future__ import annotations

import numpy as np
import pytest
from test_races import stencil

import gradkern as gk
from gradkern.kernels.blas import saxpy


@gk.kernel
def scale_into(x, y):
    i = gk.tid()
    y[i] = 2.0 * x[i]


MODES = [gk.Reverse, gk.Forward]
IDS = ["reverse", "forward"]


def rand(rng, *shape):
    return rng.uniform(0.5, 1.5, shape)


def unchanged(*arrays):
    before = [a.copy() for a in arrays]

    def check():
        for a, b in zip(arrays, before):
            np.testing.assert_array_equal(a, b)
    return check


def test_exact_aliasing_in_forward_mode(rng):
    """saxpy(a, y, y): y <- (a + 1) y, and its tangent (a + 1) dy + da y."""
    y = rand(rng, 6)
    y0, dy = y.copy(), rng.standard_normal(6)
    dy0 = dy.copy()
    gk.autodiff(saxpy, gk.Duplicated(3.0, 0.5), gk.Duplicated(y, dy), gk.Duplicated(y, dy), mode=gk.Forward)
    np.testing.assert_allclose(y, 4 * y0, rtol=1e-15)
    np.testing.assert_allclose(dy, 4 * dy0 + 0.5 * y0, rtol=1e-14)


def test_exact_aliasing_in_reverse_mode_through_separate_view_objects(rng):
    base = rand(rng, 12)
    dbase = rng.standard_normal(12)
    y0, dy0 = base[::2].copy(), dbase[::2].copy()
    g = gk.autodiff(saxpy, gk.Active(3.0), gk.Duplicated(base[::2], dbase[::2]), gk.Duplicated(base[::2], dbase[::2]))
    np.testing.assert_allclose(base[::2], 4 * y0, rtol=1e-15)
    np.testing.assert_allclose(dbase[::2], 4 * dy0, rtol=1e-15)
    assert g[0] == pytest.approx(np.dot(y0, dy0), rel=1e-14)


@pytest.mark.parametrize("mode", MODES, ids=IDS)
def test_partial_overlap_is_refused_before_anything_changes(rng, mode):
    base, dx, dy = rand(rng, 10), rand(rng, 5), rand(rng, 5)
    check = unchanged(base, dx, dy)
    with pytest.raises(gk.AliasingError, match="'x' and 'y' overlap"):
        gk.autodiff(scale_into, gk.Duplicated(base[0:5], dx), gk.Duplicated(base[2:7], dy), mode=mode)
    check()


@pytest.mark.parametrize("mode", MODES, ids=IDS)
def test_overlapping_views_with_steps_are_refused_and_interleaved_ones_accepted(rng, mode):
    base = rand(rng, 16)
    dx, dy = rand(rng, 4), rand(rng, 4)
    check = unchanged(base, dx, dy)
    with pytest.raises(gk.AliasingError):  # elements 0 and 4 are in both
        gk.autodiff(scale_into, gk.Duplicated(base[0:8:2], dx), gk.Duplicated(base[0:16:4], dy), mode=mode)
    check()
    x0 = base[0:8:2].copy()
    gk.autodiff(scale_into, gk.Duplicated(base[0:8:2], dx), gk.Duplicated(base[1:8:2], dy), mode=mode)
    np.testing.assert_allclose(base[1:8:2], 2 * x0, rtol=1e-15)


@pytest.mark.parametrize("mode", MODES, ids=IDS)
def test_aliased_primals_need_aliased_shadows(rng, mode):
    y, dy = rand(rng, 6), rand(rng, 6)
    check = unchanged(y, dy)
    a = gk.Active(2.0) if mode is gk.Reverse else gk.Const(2.0)
    with pytest.raises(gk.AliasingError, match="shadows are different buffers"):
        gk.autodiff(saxpy, a, gk.Duplicated(y, dy), gk.Duplicated(y, dy.copy()), mode=mode)
    with pytest.raises(gk.AliasingError, match="both need a shadow"):
        gk.autodiff(saxpy, a, gk.Duplicated(y, dy), y, mode=mode)
    check()


@pytest.mark.parametrize("mode", MODES, ids=IDS)
def test_a_shadow_sharing_memory_with_a_primal_is_refused(rng, mode):
    x, y = rand(rng, 6), rand(rng, 6)
    check = unchanged(x, y)
    with pytest.raises(gk.AliasingError, match="shares memory"):
        gk.autodiff(scale_into, gk.Duplicated(x, y), gk.Duplicated(y, rand(rng, 6)), mode=mode)
    check()


@pytest.mark.parametrize("mode", MODES, ids=IDS)
def test_aliasing_that_makes_a_stencil_in_place_is_a_race(rng, mode):
    u, du = rand(rng, 8), rand(rng, 8)
    check = unchanged(u, du)
    with pytest.raises(gk.RaceError, match="no buffer was changed"):
        gk.autodiff(stencil, gk.Duplicated(u, du), gk.Duplicated(u, du), mode=mode)
    check()


def test_batch_shadows_must_alias_lane_by_lane(rng):
    y = rand(rng, 5)
    d0, d1 = rand(rng, 5), rand(rng, 5)
    with pytest.raises(gk.AliasingError, match="different buffers"):
        gk.autodiff(saxpy, gk.Const(2.0), gk.BatchDuplicated(y, (d0, d1)), gk.BatchDuplicated(y, (d0, d1.copy())),
                    mode=gk.Forward)
    y0, t0, t1 = y.copy(), d0.copy(), d1.copy()
    gk.autodiff(saxpy, gk.Const(2.0), gk.BatchDuplicated(y, (d0, d1)), gk.BatchDuplicated(y, (d0, d1)),
                mode=gk.Forward)
    np.testing.assert_allclose(y, 3 * y0, rtol=1e-15)
    np.testing.assert_allclose(d0, 3 * t0, rtol=1e-15)
    np.testing.assert_allclose(d1, 3 * t1, rtol=1e-15)
