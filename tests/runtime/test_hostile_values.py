"""Hostile inputs, round two (docs/errors.md, "Hostile inputs"): arrays NumPy can make that a kernel cannot take
as they are (byte-swapped, unaligned on the CUDA path, masked, np.matrix, dtypes the language has not), numbers
that do not fit the parameter's type, sizes that are not sizes, outputs and shadows whose elements overlap,
threads sharing a kernel, a kernel redefined under its name. Each refusal is a `gk.GradkernError` subclass naming
the argument, what was expected and what came, through every verb (launch, reverse and forward autodiff, split
thunks, a program), with every buffer bitwise as it was; each accepted input gives the plain array's result."""

from __future__ import annotations

import numpy as np
import pytest

import gradkern as gk
from gradkern.backends.hostcuda import compiler

N = 6
HOSTCUDA = pytest.param("hostcuda", marks=pytest.mark.skipif(compiler() is None, reason="g++ is not on the PATH"))


@gk.kernel
def scaled_square(x, y, a, n):
    i = gk.tid()
    if i < n:
        y[i] = a * x[i] * x[i]


def _on(backend: str) -> dict:
    return {} if backend == "numba" else {"backend": backend}


def unchanged(*arrays):
    before = [(a, np.asarray(a).tobytes()) for a in arrays]
    return lambda: all(np.asarray(a).tobytes() == raw for a, raw in before)


@pytest.mark.parametrize("backend", ["numba", HOSTCUDA])
def test_numpy_scalars_as_consts_of_a_split_thunk(backend, rng):
    """np.float32(2.0) as a Const of autodiff_thunk's forward crashed on hostcuda with an AttributeError: a NumPy
    scalar has an __array_interface__, and the tape's record of what it was made from took it for an array."""
    forward, reverse = gk.autodiff_thunk(scaled_square, gk.Duplicated, gk.Duplicated, gk.Const, gk.Const,
                                         **_on(backend))
    for a, n in ((np.float32(2.0), np.int32(N)), (np.float64(2.0), np.int64(N)), (2.0, N)):
        x, dx, y, dy = rng.uniform(0.5, 2.0, N), np.zeros(N), np.zeros(N), rng.uniform(0.5, 2.0, N)
        x0, dy0 = x.copy(), dy.copy()
        args = gk.Duplicated(x, dx), gk.Duplicated(y, dy), gk.Const(a), gk.Const(n)
        tape = forward(*args)
        reverse(*args, tape)
        np.testing.assert_allclose(dx, 2 * 2.0 * x0 * dy0, rtol=1e-15)  # d(a x^2)/dx = 2 a x: one rounding
        np.testing.assert_allclose(y, 2.0 * x0 * x0, rtol=1e-15)
