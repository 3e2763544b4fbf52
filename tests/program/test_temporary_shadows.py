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
    assert mapped < (T + 3) * nbytes


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
