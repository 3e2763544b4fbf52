"""The one signature cache (runtime/call.py, docs/prepared-call.md) for launches: a launch whose
signature was prepared before reuses the checks that depend only on it, and a changed shape, stride,
dtype, flag, dim type or alias pattern is bound (and refused) as on a first
launch, with every buffer left as it was."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import gradkern as gk
from gradkern.errors import AliasingError, LaunchError
from gradkern.kernels.blas import saxpy
from gradkern.runtime import binding, call


@gk.kernel
def shift_scale(x, y, k):
    i = gk.tid()
    y[i] = x[i] * 2.0 + k


def _full(kernel, dim, args):
    return binding._bind(kernel.ir, dim, args, None, False)


def _same(b1, b2):
    """Equal bindings: every field, array values compared by identity."""
    for f in dataclasses.fields(b1):
        v1, v2 = getattr(b1, f.name), getattr(b2, f.name)
        if f.name == "values":
            assert len(v1) == len(v2)
            for a, b in zip(v1, v2):
                assert a is b if isinstance(a, np.ndarray) else (type(a) is type(b) and a == b)
        else:
            assert v1 == v2, f.name


@pytest.fixture
def cold():
    call._CALLS.clear()
    yield
    call._CALLS.clear()


def _hit(kernel, dim, args):
    """Prepare twice (the second a cache hit) and check both bindings against the full binding."""
    first = call.prepare(kernel, args, dim, None, "launch")[1].b
    key = call.signature(kernel, "launch", dim, None, args)
    assert key is not None and key in call._CALLS
    second = call.prepare(kernel, args, dim, None, "launch")[1].b
    _same(first, _full(kernel, dim, args))
    _same(second, _full(kernel, dim, args))
    return second


@pytest.mark.parametrize("args", [
    lambda r: (1.5, r.random(8), r.random(8)),
    lambda r: (np.float32(1.5), r.random(8).astype(np.float32), r.random(8).astype(np.float32)),
    lambda r: (2, r.random(8), r.random(8)),
    lambda r: (True, r.random(8), r.random(8)),
    lambda r: (1.5, r.random(16)[::2], r.random(8)),
    lambda r: (np.int64(3), r.random((2, 8))[1], r.random(24)[8:16]),
], ids=["float", "float32", "int", "bool", "strided", "views"])
def test_hit_equals_full_binding(cold, rng, args):
    _hit(saxpy, 8, args(rng))


def test_scalar_values_are_converted_on_every_hit(cold, rng):
    x = rng.random(8)
    y = rng.random(8)
    b1 = _hit(shift_scale, 8, (x, y, 1.0))
    b2 = call.prepare(shift_scale, (x, y, 2.5), 8, None, "launch")[1].b
    assert b1.values[2] == 1.0 and b2.values[2] == 2.5 and type(b2.values[2]) is np.float64
    expected = x * 2.0 + 2.5
    gk.launch(shift_scale, 8, x, y, 2.5)
    np.testing.assert_array_equal(y, expected)


def test_changed_shape_is_bound_again(cold, rng):
    x, y = rng.random(8), rng.random(8)
    gk.launch(saxpy, 8, 1.5, x, y)
    small_x, small_y = rng.random(4), rng.random(4)
    before = small_y.copy()
    with pytest.raises(LaunchError, match="outside"):
        gk.launch(saxpy, 8, 1.5, small_x, small_y)
    np.testing.assert_array_equal(small_y, before)
    big_x, big_y = rng.random(16), rng.random(16)
    expected = 1.5 * big_x + big_y
    gk.launch(saxpy, 16, 1.5, big_x, big_y)
    np.testing.assert_array_equal(big_y, expected)


def test_changed_strides_are_bound_again(cold, rng):
    x, y = rng.random(8), rng.random(8)
    gk.launch(saxpy, 8, 1.5, x, y)
    base = rng.random(16)
    xs = base[::2]
    assert call.signature(saxpy, "launch", 8, None, (1.5, xs, y)) != call.signature(saxpy, "launch", 8, None,
                                                                                     (1.5, x, y))
    expected = 1.5 * xs + y
    gk.launch(saxpy, 8, 1.5, xs, y)
    np.testing.assert_array_equal(y, expected)
    ys = rng.random(24)[::3]
    expected = 1.5 * xs + ys
    gk.launch(saxpy, 8, 1.5, xs, ys)
    np.testing.assert_array_equal(ys, expected)


def test_changed_dtype_is_bound_again(cold, rng):
    x, y = rng.random(8), rng.random(8)
    gk.launch(saxpy, 8, 1.5, x, y)
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    expected = np.float32(1.5) * x32 + y32
    gk.launch(saxpy, 8, 1.5, x32, y32)
    np.testing.assert_array_equal(y32, expected)
    xi, yi = np.arange(8), np.arange(8)
    with pytest.raises(LaunchError):
        gk.launch(saxpy, 8, 1.5, xi, yi.astype(np.int16))
    np.testing.assert_array_equal(yi, np.arange(8))
    gbe = y.astype(">f8")
    with pytest.raises(LaunchError, match="byte order"):
        gk.launch(saxpy, 8, 1.5, x, gbe)


def test_changed_flags_are_bound_again(cold, rng):
    x, y = rng.random(8), rng.random(8)
    gk.launch(saxpy, 8, 1.5, x, y)
    y.flags.writeable = False
    before = y.copy()
    with pytest.raises(LaunchError, match="read-only"):
        gk.launch(saxpy, 8, 1.5, x, y)
    np.testing.assert_array_equal(y, before)
    y.flags.writeable = True
    gk.launch(saxpy, 8, 1.5, x, y)
    np.testing.assert_array_equal(y, 1.5 * x + before)


def test_changed_alias_pattern_is_bound_again(cold, rng):
    x, y = rng.random(8), rng.random(8)
    gk.launch(saxpy, 8, 1.5, x, y)
    expected = 1.5 * x + x
    gk.launch(saxpy, 8, 1.5, x, x)  # exactly aliased: merged, never taken from the cache
    np.testing.assert_array_equal(x, expected)
    assert binding.bind(saxpy.ir, 8, (1.5, x, x)).aliases == (("y", "x"),)
    assert binding.bind(saxpy.ir, 8, (1.5, x, y)).aliases == ()
    z = rng.random(9)
    before = z.copy()
    with pytest.raises(AliasingError):
        gk.launch(saxpy, 8, 1.5, z[:-1], z[1:])
    np.testing.assert_array_equal(z, before)
    gk.launch(saxpy, 8, 1.5, z[:-1], y)  # the same signature, no overlap: cached again
    assert call.signature(saxpy, "launch", 8, None, (1.5, z[:-1], y)) in call._CALLS


def test_changed_shadow_alias_pattern_is_checked(cold, rng):
    x, y, dx, dy = rng.random(8), rng.random(8), np.zeros(8), rng.random(8)
    gk.autodiff(saxpy, gk.Active(1.5), gk.Duplicated(x, dx), gk.Duplicated(y, dy))
    before = [a.copy() for a in (x, y, dy)]
    with pytest.raises(AliasingError):
        gk.autodiff(saxpy, gk.Active(1.5), gk.Duplicated(x, dy), gk.Duplicated(y, dy))
    for a, b in zip((x, y, dy), before):
        np.testing.assert_array_equal(a, b)


def test_values_that_keys_do_not_hold_are_checked(cold, rng):
    x, y = rng.random(8), rng.random(8)
    gk.launch(saxpy, 1, 2, x, y)
    before = y.copy()
    with pytest.raises(LaunchError, match="int64"):
        gk.launch(saxpy, 1, 2**64, x, y)
    with pytest.raises(LaunchError, match="dim"):
        gk.launch(saxpy, True, 2, x, y)  # True == 1 and hashes alike: the key must tell them apart
    with pytest.raises(LaunchError, match="dim"):
        gk.launch(saxpy, 1.0, 2, x, y)
    np.testing.assert_array_equal(y, before)


def test_arguments_not_keyed_take_the_full_path(cold, rng):
    x, y = rng.random(8), rng.random(8)
    assert call.signature(saxpy, "launch", 8, None, (1.5, np.ma.masked_array(x), y)) is None
    strided = np.lib.stride_tricks.as_strided(x, (8,), (8,))
    assert call.signature(saxpy, "launch", 8, None, (1.5, strided, y)) is None
    assert call.signature(saxpy, "launch", 8, None, (1.5, x, [1.0] * 8)) is None
    assert call.signature(saxpy, "launch", np.int64(8), None, (1.5, x, y)) is None


def test_cache_keeps_no_arrays_alive(frozen_heap, cold, rng):
    import gc
    import weakref

    x, y = rng.random(8), rng.random(8)
    gk.launch(saxpy, 8, 1.5, x, y)
    refs = weakref.ref(x), weakref.ref(y)
    del x, y
    gc.collect()
    assert all(r() is None for r in refs)
