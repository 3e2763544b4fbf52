"""Aliasing (docs/launches.md, runtime/binding.py, transforms/aliasing.py) in both
modes: exactly aliased primals are merged and differentiated as one array,
their shadows must alias the same way; partial overlap, through views with
steps too, is refused before any buffer changes; aliasing that makes a kernel
an in-place stencil is a race."""

from __future__ import annotations

import numpy as np
import pytest
from analysis.test_races import stencil

import gradkern as gk
from gradkern.kernels.blas import saxpy
from gradkern.runtime.arrays import overlapping_elements

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


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
def test_interleaved_shadows_of_one_buffer_are_accepted(rng, mode):
    """The columns a[:, 0] and a[:, 2] of one array, with the same columns of one shadow (a halo copy in a
    program: SHOC stencil2d, tests/program/test_ported_solvers.py): their extents overlap but no element is in
    both, so each shadow takes its own adds. Before session 49 refused by the extents alone."""
    a, da = rand(rng, 4, 3), rand(rng, 4, 3)
    a0, da0 = a.copy(), da.copy()
    gk.autodiff(scale_into, gk.Duplicated(a[:, 0], da[:, 0]), gk.Duplicated(a[:, 2], da[:, 2]), mode=mode)
    np.testing.assert_array_equal(a[:, 2], 2 * a0[:, 0])  # y = 2 x, bit for bit
    if mode is gk.Reverse:  # dx += 2 dy, then dy = 0 (y is overwritten)
        np.testing.assert_array_equal(da[:, 0], da0[:, 0] + 2 * da0[:, 2])
        np.testing.assert_array_equal(da[:, 2], 0.0)
    else:  # the tangent of y = 2 x: 2 dx
        np.testing.assert_array_equal(da[:, 2], 2 * da0[:, 0])
    np.testing.assert_array_equal(da[:, 1], da0[:, 1])  # the column between them untouched
    b, db = rand(rng, 4, 3), rand(rng, 4, 3)
    check = unchanged(b, db)
    with pytest.raises(gk.AliasingError, match="the shadow of 'y' shares memory with the shadow of 'x'"):
        # flat elements 0, 3, 6, 9 and 0, 2, 4, 6 of one shadow buffer: two in common
        gk.autodiff(scale_into, gk.Duplicated(b[:, 0], db[:, 0]), gk.Duplicated(b[:, 2], db.reshape(-1)[:8:2]),
                    mode=mode)
    check()


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


@pytest.mark.numba
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


# -- arrays whose elements overlap each other (issue 14.3) ---------------------------------------------------------


@gk.kernel
def scale_rows(a, b):
    i = gk.tid()
    b[i, 0] = 2.0 * a[i, 0]
    b[i, 1] = 2.0 * a[i, 1]


def zero_stride(buf, n):
    """A writable view of one element, n times: every thread's element is the same memory."""
    return np.lib.stride_tricks.as_strided(buf, (n,), (0,), writeable=True)


def overlapping_rows(buf, n):
    """(n, 2) with strides (8, 8): row i's second element is row i+1's first."""
    return np.lib.stride_tricks.as_strided(buf, (n, 2), (buf.itemsize, buf.itemsize), writeable=True)


def _calls(kernel, mode, *args, dim=None):
    """The derivative call in `mode`, and in vector mode with the bad shadow in lane 1."""
    if mode == "vector":
        lanes = [gk.BatchDuplicated(a.val, (np.zeros_like(a.val), a.dval)) if isinstance(a, gk.Duplicated) else a
                 for a in args]
        return lambda: gk.autodiff(kernel, *lanes, mode=gk.Forward, dim=dim)
    if mode == "split":
        forward, _ = gk.autodiff_thunk(kernel, *(type(a) for a in args), dim=dim)
        return lambda: forward(*args)
    return lambda: gk.autodiff(kernel, *args, mode=mode, dim=dim)


SHADOW_MODES = [gk.Reverse, gk.Forward, "vector", "split"]
SHADOW_IDS = ["reverse", "forward", "vector", "split"]


@pytest.mark.parametrize("mode", SHADOW_MODES, ids=SHADOW_IDS)
def test_a_zero_stride_shadow_is_refused(rng, mode):
    """saxpy at n = 2e6 accumulated every thread's dx into one element, racily."""
    x, y, dy, z = rand(rng, 64), rand(rng, 64), rand(rng, 64), rand(rng, 1)
    check = unchanged(x, y, dy, z)
    call = _calls(saxpy, mode, gk.Const(2.0), gk.Duplicated(x, zero_stride(z, 64)), gk.Duplicated(y, dy))
    with pytest.raises(gk.AliasingError, match=r"of 'x' has elements that overlap in memory \(a broadcast view"):
        call()
    check()


@pytest.mark.parametrize("mode", SHADOW_MODES, ids=SHADOW_IDS)
def test_a_shadow_whose_elements_overlap_is_refused(rng, mode):
    a, b, db, buf = rand(rng, 6, 2), rand(rng, 6, 2), rand(rng, 6, 2), rand(rng, 7)
    check = unchanged(a, b, db, buf)
    call = _calls(scale_rows, mode, gk.Duplicated(a, overlapping_rows(buf, 6)), gk.Duplicated(b, db), dim=6)
    with pytest.raises(gk.AliasingError, match=r"of 'a' has elements that overlap in memory \(strides \(8, 8\)"):
        call()
    check()


@pytest.mark.parametrize("mode", [None, *SHADOW_MODES], ids=["launch", *SHADOW_IDS])
def test_a_written_array_whose_elements_overlap_is_refused(rng, mode):
    a, da, db, buf = rand(rng, 6, 2), rand(rng, 6, 2), rand(rng, 6, 2), rand(rng, 7)
    check = unchanged(a, da, db, buf)
    b = overlapping_rows(buf, 6)
    if mode is None:
        def call():
            gk.launch(scale_rows, 6, a, b)
    else:
        call = _calls(scale_rows, mode, gk.Duplicated(a, da), gk.Duplicated(b, db), dim=6)
    with pytest.raises(gk.AliasingError, match="'b' is written by kernel 'scale_rows' but its elements overlap"):
        call()
    for written in (zero_stride(buf, 6), np.broadcast_to(buf[:1], (6,))):
        with pytest.raises(gk.LaunchError, match="'y'"):  # a writable or a read-only broadcast
            gk.launch(saxpy, 6, 2.0, a[:, 0].copy(), written)
    check()


def test_a_read_only_input_may_overlap_itself(rng):
    """Broadcast and overlapping views are legitimate inputs: only written arrays must not overlap."""
    buf, x = rand(rng, 7), rand(rng, 6)
    b = np.zeros((6, 2))
    gk.launch(scale_rows, 6, overlapping_rows(buf, 6), b)
    np.testing.assert_array_equal(b, 2 * np.stack([buf[:6], buf[1:]], axis=1))
    y, dx = rand(rng, 6), np.zeros(6)
    y0 = y.copy()
    gk.autodiff(saxpy, gk.Const(2.0), gk.Duplicated(np.broadcast_to(x[:1], (6,)), dx), gk.Duplicated(y, np.ones(6)))
    np.testing.assert_array_equal(y, 2 * x[0] + y0)
    np.testing.assert_array_equal(dx, 2.0)  # each element of the broadcast gets its own derivative


def _element_bytes(shape, strides, itemsize):
    """Brute force: the byte offsets of every element."""
    offsets = [0]
    for n, s in zip(shape, strides):
        offsets = [o + k * s for o in offsets for k in range(n)]
    return offsets


def _overlap_by_enumeration(shape, strides, itemsize) -> bool:
    offsets = sorted(_element_bytes(shape, strides, itemsize))
    return any(b - a < itemsize for a, b in zip(offsets, offsets[1:]))


def test_overlapping_elements_against_enumeration(rng):
    """The stride test and its exact fallback agree with enumerating every element's bytes, for
    random shapes and strides (negative, zero, shorter than the item, not multiples of it)."""
    buf = np.zeros(8192, np.uint8)
    counts = {True: 0, False: 0}
    for _ in range(3000):
        ndim = int(rng.integers(1, 4))
        dtype = np.dtype(rng.choice(["f4", "f8"]))
        shape = tuple(int(n) for n in rng.integers(0, 6, ndim))
        if rng.random() < 0.4:  # multiples of the item size, as slicing makes
            strides = tuple(int(s) * dtype.itemsize for s in rng.integers(-12, 13, ndim))
        else:
            strides = tuple(int(s) for s in rng.integers(-40, 41, ndim))
        first = buf[4096:4096 + dtype.itemsize].view(dtype)  # room on both sides; nothing is read
        view = np.lib.stride_tricks.as_strided(first, shape=shape, strides=strides)
        want = 0 not in shape and _overlap_by_enumeration(shape, strides, dtype.itemsize)
        assert overlapping_elements(view) == want, (shape, strides, dtype)
        counts[want] += 1
    assert counts[True] > 300 and counts[False] > 300  # both answers were exercised


def test_overlapping_elements_is_false_for_ordinary_arrays(rng):
    a = rand(rng, 6, 5, 4)
    for v in (a, a.T, a[::2, ::-1], a[:, 1:3, ::3], np.asfortranarray(a), a.transpose(1, 0, 2)[::-1],
              a[:, :, 0], a[0, None], np.ones(1), np.ones(0)):
        assert not overlapping_elements(v)
    assert overlapping_elements(np.broadcast_to(a[:1], (3, 5, 4)))


class _DeviceArray:
    """Shape, strides and a pointer into memory this process cannot read, as a CuPy array
    has them: the checks must decide from the geometry alone (reading would crash)."""

    def __init__(self, shape, strides, itemsize=8, allocation=1 << 20, offset=0):
        from types import SimpleNamespace as NS
        self.shape, self.strides, self.dtype = shape, strides, np.dtype(f"f{itemsize}")
        self.itemsize, self.size, self.ndim = itemsize, int(np.prod(shape)), len(shape)
        self.nbytes = self.size * itemsize
        c = strides == np.ones(shape).strides if itemsize == 8 else None
        self.flags = NS(c_contiguous=bool(c), f_contiguous=False)
        start = 1 << 44  # far from anything mapped
        self.data = NS(ptr=start + allocation // 2 + offset, mem=NS(ptr=start, size=allocation))


def test_device_arrays_are_checked_from_their_geometry():
    from gradkern.runtime.arrays import misaligned_on_device, outside_its_memory
    assert overlapping_elements(_DeviceArray((6, 2), (8, 8)))
    assert overlapping_elements(_DeviceArray((6,), (0,)))
    assert not overlapping_elements(_DeviceArray((6, 2), (16, 8)))
    assert not overlapping_elements(_DeviceArray((4, 3), (8, 32)))
    assert not outside_its_memory(_DeviceArray((4, 3), (8, 32)))
    assert outside_its_memory(_DeviceArray((4,), (-2**40,)))
    assert outside_its_memory(_DeviceArray((2**20,), (8,)))
    foreign = _DeviceArray((4,), (-8,))  # e.g. a reversed view imported through __cuda_array_interface__,
    foreign.data.mem = type("UnownedMemory", (), {"ptr": foreign.data.ptr, "size": 32})()  # sized by the wrapper
    assert not outside_its_memory(foreign)  # its extent is unknown: trusted, not refused
    assert misaligned_on_device(_DeviceArray((4,), (8,), offset=4))
    assert not misaligned_on_device(_DeviceArray((4,), (8,), offset=8))
    raw = np.zeros(33, np.uint8)
    assert not misaligned_on_device(raw[1:].view(np.float64))  # NumPy's unaligned arrays run on the CPU
