"""The shadows of a program's temporaries (program/shadows.py, docs/programs.md, "Program shapes"): a large one
lies in a mapping of its own, holds memory only from the first reverse that takes it to the reverse of the launch
that made it, and gives the gradient of a pooled zeroed buffer bit for bit."""

import tracemalloc

import numpy as np
import pytest

import gradkern as gk
from gradkern.kernels import allen_cahn_step, sum_squares
from gradkern.program import shadows
from gradkern.program.savepool import PAGE

N = shadows.MAPPED // 8  # float64: the smallest mapped temporary
T = 6


def prog(u, E, c):
    for _ in range(T):
        u_old = u.copy()  # a temporary every step: its shadow is needed from the step's reverse to the copy's
        gk.launch(allen_cahn_step, N, u_old, u, c, 0.01)
    gk.launch(sum_squares, N, u, E)


def _grad(u0):
    du = np.zeros(N)
    out = gk.autodiff(prog, gk.Duplicated(u0.copy(), du), gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.2))
    return du, out[2]


def _peak(u0) -> int:
    gk.release_memory()
    tracemalloc.start()
    tracemalloc.reset_peak()
    _grad(u0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


@pytest.fixture
def u0():
    return np.random.default_rng(3).uniform(-0.9, 0.9, N)


def test_mapped_shadows_give_the_pooled_gradient(u0, monkeypatch):
    du, dc = _grad(u0)
    monkeypatch.setattr(shadows, "MAPPED", 1 << 62)  # every temporary's shadow from the pool, zeroed
    du_pooled, dc_pooled = _grad(u0)
    np.testing.assert_array_equal(du, du_pooled)
    assert dc == dc_pooled


def test_mapped_shadows_hold_memory_only_while_the_sweep_needs_them(u0, monkeypatch):
    """The peak holds the T copies and about one shadow, not T of them (tracemalloc is told of a mapping from
    its population to its release)."""
    nbytes = N * 8
    mapped = _peak(u0)
    monkeypatch.setattr(shadows, "MAPPED", 1 << 62)
    pooled = _peak(u0)
    assert pooled > (2 * T - 1) * nbytes
    assert pooled - mapped > (T - 2) * nbytes  # all but about one of the T shadows not held at the peak


def test_zero_pages_are_laid_out_like_their_primal_and_given_back():
    root = np.empty(N + 3)[3:]  # another offset within a page
    root = root.copy()
    z = shadows._zero_pages(root)
    assert z.shape == root.shape and z.strides == root.strides and z.ctypes.data % PAGE == root.ctypes.data % PAGE
    assert shadows.memory_root(z) is z and not z.any()
    shadows.populate([z])
    z[5] = 2.0
    entry = shadows._Entry(root, (z,), 0, 0, True)
    shadows.release([entry])
    shadows.release([entry])  # once
    assert entry.released and not z.any()  # its pages given back: zeros if read again


def test_arrays_in_memory_of_their_own_are_keyed_as_allocations():
    """A lent copy and a mapped shadow (savepool.Memory) own their memory as NumPy allocations do: their calls
    are keyed (refilled, not bound in full), and views of one array still alias each other."""
    from gradkern.program.savepool import placed
    from gradkern.runtime.binding import disjoint, memory_owner, numpy_made
    from gradkern.runtime.call import signature

    a = placed((N,), np.float64, np.empty(N))
    b = placed((N,), np.float64, np.empty(N))
    za, zb = shadows._zero_pages(a), shadows._zero_pages(b)
    for x in (a, a[3:], za, za[::2]):
        assert numpy_made(x)
    assert memory_owner(a, a.flags.num) is memory_owner(a[3:], a[3:].flags.num) is a.base
    assert not disjoint([a[:10], a[5:]], [a.base, a.base])
    assert disjoint([a, b, za, zb], [a.base, b.base, za.base, zb.base])
    args = (gk.Duplicated(a, za), gk.Duplicated(b, zb), 0.2, 0.01)
    assert signature(allen_cahn_step, "reverse", N, None, args) is not None
    assert signature(allen_cahn_step, "reverse", N, None, (gk.Duplicated(a, za), gk.Duplicated(a[1:], zb[1:]),
                                                           0.2, 0.01)) is None  # may alias: bound in full


def test_each_step_knows_the_mapped_shadows_it_takes_and_the_temporaries_it_made(u0):
    """The copy makes u_old (its shadow given back after the copy's reverse); the step and the copy both take
    that shadow (populated before the first of their reverses to run, the step's)."""
    forward, reverse = gk.autodiff_thunk(prog, gk.Duplicated, gk.Duplicated, gk.Active)
    du = np.zeros(N)
    args = (gk.Duplicated(u0.copy(), du), gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.2))
    tape = forward(*args)
    copies, steps = tape.steps[0:2 * T:2], tape.steps[1:2 * T:2]
    for copy, step in zip(copies, steps, strict=True):
        assert len(copy.made) == 1 and not step.made
        shadow = copy.made[0].shadow[0]
        assert [s is shadow for s in copy.mapped] == [True] and [s is shadow for s in step.mapped] == [True]
        assert not shadow.base.traced  # no memory held yet
    reverse(*args, tape)
    for copy in copies:
        assert copy.made[0].released and not copy.made[0].shadow[0].base.traced
    np.testing.assert_array_equal(du, _grad(u0)[0])
