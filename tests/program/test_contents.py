"""The sweep's saved copies (program/contents.py, program/savepool.py; docs/programs.md#saved-copies-and-the-sweep):
a whole-buffer save is read in place by the earlier steps' reverses instead of being written back; partial saves,
custom rules and checkpointed loops write the held contents back first. Oracle: the same sweep with every save
written back into its buffer (the behaviour before contents.py, forced by making no save "whole"), which must give
bit-identical shadows, derivatives and final primals (the reverse kernels read the same values). Gradients are also
checked by check_grad (float64 central differences, rtol 1e-5, and the dot-product test, on random inputs)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import gradkern as gk
from gradkern.kernels import allen_cahn_step
from gradkern.program import steps as program_steps
from gradkern.program.contents import Contents
from gradkern.program.savepool import POOL, SavePool
from gradkern.testing import check_grad
from program.test_programs import energy, heat, ping_pong

program_record = importlib.import_module("gradkern.program.record")  # the module (the package exports a function)


@gk.custom_rule(writes=("y",))
def scale(x, y, c):
    """y = c * x on the host: its reverse reads x itself."""
    y[...] = c * x


@scale.reverse
def _(config, tape, x, y, c):
    dc = float(np.sum(y.dval * x.val)) if isinstance(c, gk.Active) else None
    if isinstance(x, gk.Duplicated):
        x.dval[...] += c.val * y.dval
    y.dval[...] = 0.0
    return (None, None, dc)


@scale.forward
def _(config, x, y, c):
    y.val[...] = c.val * x.val
    if not isinstance(y, gk.Const):
        dx = x.dval if isinstance(x, gk.Duplicated) else 0.0
        dc = c.dval if isinstance(c, gk.Duplicated) else 0.0
        y.dval[...] = c.val * dx + dc * x.val


def mixed(u, v, w, E, c):
    """Whole-buffer saves, saves of a view (`v[1:-1]` written by heat), a rule and a checkpointed loop."""
    n = u.shape[0]
    gk.launch(allen_cahn_step, n, u, v, c, 0.01)
    gk.launch(allen_cahn_step, n, v, u, c, 0.01)
    gk.launch(heat, n - 2, u, v, c)  # overwrites part of v, which the launch before reads
    scale(v, w, c)
    gk.launch(allen_cahn_step, n, w, v, c, 0.01)  # overwrites v, which the rule's reverse reads

    def step(t):
        gk.launch(allen_cahn_step, n, v if t % 2 == 0 else u, u if t % 2 == 0 else v, c, 0.01)
    gk.checkpointed_loop(step, 4, snapshots=2)
    gk.launch(allen_cahn_step, n, u, v, c, 0.01)
    gk.launch(allen_cahn_step, n, v, u, c, 0.01)
    gk.launch(energy, n, u, E)


def _arrays(seed, n, count):
    r = np.random.default_rng(seed)
    return [r.uniform(0.2, 0.8, n) for _ in range(count)]


def _gradient(program, arrays, c, *extra):
    primals = [a.copy() for a in arrays]
    shadows = [np.random.default_rng(7 + k).uniform(-1, 1, a.shape) for k, a in enumerate(arrays)]
    shadows[-1] = np.ones_like(arrays[-1])  # the energy's seed
    args = [gk.Duplicated(p, s) for p, s in zip(primals, shadows)]
    got = gk.autodiff(program, *args, gk.Active(c), *extra)
    return primals, shadows, got


@pytest.mark.parametrize("program, count, extra", [(ping_pong, 3, (3,)), (mixed, 4, ())])
def test_reading_saves_in_place_is_bit_identical_to_writing_them_back(program, count, extra, monkeypatch):
    n = 23
    arrays = _arrays(0, n, count - 1) + [np.zeros(1)]
    new = _gradient(program, arrays, 0.2, *extra)
    monkeypatch.setattr(program_steps.Saved, "whole", lambda self, root: False)
    old = _gradient(program, arrays, 0.2, *extra)
    for a, b in zip(new[0] + new[1], old[0] + old[1]):
        np.testing.assert_array_equal(a, b)
    assert new[2] == old[2]


@pytest.mark.parametrize("program, count, extra", [(ping_pong, 3, (3,)), (mixed, 4, ())])
def test_saves_the_launches_fill_equal_copies_made_before_them(program, count, extra, monkeypatch):
    n = 21
    arrays = _arrays(4, n, count - 1) + [np.zeros(1)]
    copies = []
    real_copy = POOL.copy_of
    monkeypatch.setattr(POOL, "copy_of", lambda view: copies.append(view) or real_copy(view))
    filled = _gradient(program, arrays, 0.3, *extra)
    if program is ping_pong:
        assert copies == []  # each launch wrote the state it overwrote into its save as it ran
    monkeypatch.setattr(program_record, "saved_in_place", lambda bound: ())
    copied = _gradient(program, arrays, 0.3, *extra)
    for a, b in zip(filled[0] + filled[1], copied[0] + copied[1]):
        np.testing.assert_array_equal(a, b)
    assert filled[2] == copied[2]


def test_gradient_of_the_mixed_program_against_finite_differences():
    n = 17
    u, v, w = _arrays(1, n, 3)
    check_grad(mixed, gk.Duplicated(u, np.zeros(n)), gk.Duplicated(v, np.zeros(n)),
               gk.Duplicated(w, np.zeros(n)), gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.3))


def test_primals_end_as_the_program_left_them_and_whole_saves_are_never_written_back(monkeypatch):
    written = []
    monkeypatch.setattr(Contents, "writing", lambda self, root: written.append(root))
    n = 19
    u, v = _arrays(2, n, 2)
    ref_u, ref_v, ref_E = u.copy(), v.copy(), np.zeros(1)
    ping_pong(ref_u, ref_v, ref_E, 0.2, 3)
    gk.autodiff(ping_pong, gk.Duplicated(u, np.zeros(n)), gk.Duplicated(v, np.zeros(n)),
                gk.Duplicated(E := np.zeros(1), np.ones(1)), gk.Active(0.2), 3)
    np.testing.assert_array_equal(u, ref_u)
    np.testing.assert_array_equal(v, ref_v)
    np.testing.assert_array_equal(E, ref_E)
    assert written == []  # every save of the ping-pong loop is a whole buffer's, read in place


def test_held_contents_stand_for_views_of_their_buffer_and_settle_back():
    buf = np.arange(12.0)
    contents = Contents()
    saved = program_steps.Saved(buf, POOL.copy_of(buf))
    saved.data[...] = -saved.data  # what the buffer held before the step
    contents.passed(saved)
    view = buf[2:9:3]
    got = contents.values([view, 5, buf])
    np.testing.assert_array_equal(got[0], -buf[2:9:3])
    assert got[1] == 5
    np.testing.assert_array_equal(got[2], -buf)
    assert np.shares_memory(got[0], got[2])
    contents.settle()
    np.testing.assert_array_equal(buf, -np.arange(12.0))  # written into the buffer, its final copy kept
    contents.finish()
    np.testing.assert_array_equal(buf, np.arange(12.0))  # the final contents are back


def test_a_partial_save_is_written_into_its_buffer():
    buf = np.arange(6.0)
    contents = Contents(final=False)
    part = buf[1:4]
    saved = program_steps.Saved(part, POOL.copy_of(part))
    saved.data[...] = 0.0
    assert not saved.whole(buf)
    contents.passed(saved)
    np.testing.assert_array_equal(buf, [0, 0, 0, 0, 4, 5])
    assert contents.values([buf]) is None


def test_the_pool_reuses_buffers_across_calls_and_release_memory_frees_them():
    n = 4096
    gk.release_memory()
    u, v = _arrays(3, n, 2)
    first = _gradient(ping_pong, [u, v, np.zeros(1)], 0.2, 3)
    held = POOL.free_bytes
    assert held >= 5 * n * 8  # the saves of the 6 launches' states (the first overwrites nothing needed)
    second = _gradient(ping_pong, [u, v, np.zeros(1)], 0.2, 3)
    assert POOL.free_bytes == held  # taken again and given back: nothing new
    for a, b in zip(first[0] + first[1], second[0] + second[1]):
        np.testing.assert_array_equal(a, b)
    assert gk.release_memory() >= held
    assert POOL.free_bytes == 0


def test_a_pool_keeps_at_most_its_limit():
    pool = SavePool(100)
    a = pool.copy_of(np.ones(10))  # 80 bytes
    b = pool.copy_of(np.ones(10))
    pool.give(a)
    pool.give(b)
    assert pool.free_bytes == 80
    c = pool.copy_of(np.full(10, 2.0))
    assert np.shares_memory(c, a) and pool.free_bytes == 0
    np.testing.assert_array_equal(c, 2.0)
    assert SavePool(0).copy_of(np.ones(3)).base is None  # nothing kept: a plain copy


def test_a_pool_lends_a_kept_buffer_as_it_is_where_the_save_is_like_it():
    """A kept buffer (its owner, given back through any view of it) is lent itself to a save of its dtype and shape
    (no view made per save) and viewed as one of another dtype or shape of as many bytes."""
    pool = SavePool(1000)
    a = pool.copy_of(np.ones(10))
    pool.give(a[2:])  # through a view: the owner is kept
    assert pool.copy_of(np.full(10, 3.0)) is a and np.array_equal(a, np.full(10, 3.0))
    pool.give(a)
    b = pool.empty_like(np.ones((5, 4), np.float32))
    assert b.shape == (5, 4) and b.dtype == np.float32 and np.shares_memory(b, a) and b.base is not None
    pool.give(b)
    assert pool.free_bytes == 80 and pool.empty_like(np.ones(10)) is a


def test_same_geometry_takes_a_view_of_a_contiguous_base_without_its_address():
    """A view whose base is the other array needs no address read where the base is contiguous (it starts where
    the base does); an `as_strided` view of the same shape and strides elsewhere in the memory is no such view."""
    from gradkern.program.shadows import _same_geometry

    a = np.arange(12.0)
    assert _same_geometry(a[:], a) and _same_geometry(a, a.reshape(3, 4).reshape(12))
    assert not _same_geometry(a[1:], a) and not _same_geometry(a[::-1], a)
    shifted = np.lib.stride_tricks.as_strided(a[1:], shape=a.shape, strides=a.strides)
    assert shifted.base is not a and not _same_geometry(shifted, a)
    b = np.arange(12.0).reshape(3, 4)
    assert _same_geometry(b.T.T, b) and not _same_geometry(b[:, :2], b)
    f = np.asfortranarray(b)
    assert _same_geometry(f.T.T, f)
