"""backends/numba_loops.py: a long thread body is printed once as a serial
function that the launch loops call (issue 14.11). Forced on for short corpus
kernels here, the outlined code must compute bit for bit what the inline code
computes: the same expressions in the same order, only in another function
(Numba compiles without fast-math, so LLVM may not reorder float operations)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from support.corpus import CORPUS

import gradkern as gk
from gradkern.backends import numba_loops
from gradkern.testing import check_grad

CASES = {c.name: c for c in CORPUS}
# 1-D and guarded, loops, a while loop, 2-D with an interior split, 3-D, atomics (private copies), int kernels
PRIMAL = ["axpy_guard", "upper_tri", "while_halving", "laplace_strided", "smooth3d", "histogram", "collatz",
          "guard2d", "augassign"]


def _inputs(case, dtype):
    return case.make(np.random.default_rng(zlib.crc32(case.name.encode())), np.dtype(dtype))


@pytest.fixture
def outline_everything(monkeypatch):
    monkeypatch.setattr(numba_loops, "OUTLINE_STATEMENTS", -1)
    monkeypatch.setattr(numba_loops, "STRAIGHT_STATEMENTS", -1)


@pytest.mark.parametrize("name", PRIMAL)
def test_outlined_launch_computes_what_the_inline_launch_computes(name, outline_everything):
    case = CASES[name]
    dtype = case.dtypes[-1]
    inline, outlined = _inputs(case, dtype), _inputs(case, dtype)
    gk.launch(case.kernel, case.dim(inline), *inline)  # made before: the specialisation cache keeps it inline
    fresh = gk.kernel(case.kernel.fn)
    ins = gk.inspect(fresh, *outlined, dim=case.dim(outlined))
    assert "def _gkb_body" in ins.source
    gk.launch(fresh, case.dim(outlined), *outlined)
    for a, b in zip(inline, outlined):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(b, a)


@gk.kernel
def stencil(u, un, c):
    i = gk.tid()
    if i > 0 and i < u.shape[0] - 1:
        un[i] = u[i] + c * (u[i - 1] - 2.0 * u[i] + u[i + 1]) + gk.sin(u[i]) * u[i + 1]


@gk.kernel
def scatter(x, idx, out):
    i = gk.tid()
    gk.atomic_add(out, idx[i], x[i] * x[i])


def test_outlined_gradients_are_right(outline_everything):
    """Gather (stencil) and privatised atomics (scatter) through outlined bodies, against finite differences."""
    rng = np.random.default_rng(3)
    u, un = rng.uniform(0.5, 1.5, 40), rng.uniform(0.5, 1.5, 40)
    check_grad(stencil, gk.Duplicated(u, 0 * u), gk.Duplicated(un, 0 * un), gk.Active(0.3), dim=40)
    ins = gk.inspect(stencil, gk.Duplicated(u, np.zeros(40)), gk.Duplicated(un, np.ones(40)), gk.Active(0.3),
                     dim=40, mode=gk.Reverse)
    assert "def _gkb_body" in ins.source
    x, idx, out = rng.uniform(0.5, 1.5, 50), rng.integers(0, 7, 50), rng.uniform(0.5, 1.5, 7)
    assert "def _gkb_body_private" in gk.inspect(scatter, x, idx, out).source
    check_grad(scatter, gk.Duplicated(x, 0 * x), gk.Const(idx), gk.Duplicated(out, 0 * out), dim=50)


def test_stencil_gathers_stay_inline():
    """A 2-D five-point stencil's gather (a guarded copy of the reverse body per neighbour) is not outlined:
    outlined, its loop cannot vectorise (issue 18: the 2-D heat step's gradient took 4x as long)."""
    from gradkern.kernels import heat_step_2d
    r = np.random.default_rng(0)
    u, un = r.random((8, 9)), r.random((8, 9))
    ins = gk.inspect(heat_step_2d, gk.Duplicated(u, np.zeros_like(u)), gk.Duplicated(un, np.ones_like(un)),
                     gk.Const(0.2), dim=(8, 9), mode=gk.Reverse)
    assert ins.adjoint_forms["u"] == "gather"
    assert "_gkb_body" not in ins.sources["gather"]
