"""Kernels and programs that tests/test_interop_*.py wrap as PyTorch and JAX operations, each with
arguments (NumPy, float64 unless asked) and the names of its outputs; and a central-difference gradient
of a functional operation, the reference every interop derivative is checked against."""

from __future__ import annotations

import numpy as np

import gradkern as gk
from gradkern.kernels import allen_cahn_step, l2_misfit, sum_squares

N = 12  # small arrays: finite differences take 2 N calls per input


stencil = allen_cahn_step  # a 3-point stencil: un written whole from u, c an Active scalar


@gk.kernel
def update(u, w, k):
    """An in-place update: u's new value from its old one (the reverse reads the old one from its tape)."""
    i = gk.tid()
    u[i] = u[i] * gk.exp(-k * w[i] * u[i])


def pingpong(u, v, E, c, nsteps):
    """A time loop on two buffers, each launch overwriting its neighbour's input, then an energy."""
    for _ in range(nsteps):
        gk.launch(stencil, u.size, u, v, c, 0.01)
        gk.launch(stencil, u.size, v, u, c, 0.01)
    gk.launch(sum_squares, u.size, u, E)


def checkpointed(u, v, E, c, nsteps):
    """The same loop, checkpointed: 2 snapshots for nsteps steps."""
    def one_step(t):
        gk.launch(stencil, u.size, u, v, c, 0.01)
        gk.launch(stencil, u.size, v, u, c, 0.01)
    gk.checkpointed_loop(one_step, nsteps, snapshots=2)
    gk.launch(sum_squares, u.size, u, E)


def cases(dtype=np.float64, seed: int = 0) -> dict:
    """name -> (f, outputs, arguments, dim): the arrays are fresh, Active scalars 0-d arrays, constants
    numbers; `loss` (an atomic least-squares misfit at 6 sensors, an integer index array) launches over
    the sensors, not over u's shape."""
    rng = np.random.default_rng(seed)

    def r(*shape, lo=-0.5, hi=0.5):
        return rng.uniform(lo, hi, shape).astype(dtype)

    scalar = np.asarray(0.2, dtype)
    return {
        "stencil": (stencil, "un", [r(N), np.zeros(N, dtype), scalar, 0.01], None),
        "update": (update, "u", [r(N), r(N, lo=0.5, hi=1.5), np.asarray(0.7, dtype)], None),
        "loss": (l2_misfit, "out", [r(N), rng.integers(0, N, 6).astype(np.int64), r(6), np.zeros(1, dtype)], 6),
        "pingpong": (pingpong, ("u", "E"), [r(N), np.zeros(N, dtype), np.zeros(1, dtype), scalar, 3], None),
        "checkpointed": (checkpointed, "E", [r(N), np.zeros(N, dtype), np.zeros(1, dtype), scalar, 4], None),
    }


def differentiable(args) -> list[int]:
    """Positions of the float arrays, 0-d ones (Active scalars) included."""
    return [n for n, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]


def central_differences(fn, args, weights, eps: float = 1e-6) -> dict[int, np.ndarray]:
    """d<weights, fn(*args)>/d(args[n]) for every float array n, by central differences (float64 arrays
    for a meaningful check): `fn` returns a tuple of arrays, `weights` one array per output.

    Tolerance the tests use against it (rtol 1e-6, atol 1e-8): with eps = 1e-6 the truncation error is about
    eps^2 times the third derivative, ~1e-12, and the rounding error about 2^-52 |<w, f>| / eps, ~2e-10 |<w, f>|;
    the cases' values <w, f> are O(1)-O(10), so a right gradient is off by at most ~1e-9, a hundredfold inside
    the bound, and a wrong one (a dropped or doubled term) is off by O(1)."""
    def value(run):
        return sum(float(np.vdot(w, np.asarray(o, np.float64))) for w, o in zip(weights, fn(*run)))
    grads = {}
    for n in differentiable(args):
        g = np.zeros(np.shape(args[n]))
        for k in np.ndindex(g.shape):
            plus = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
            minus = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
            plus[n][k] += eps
            minus[n][k] -= eps
            g[k] = (value(plus) - value(minus)) / (2 * eps)
        grads[n] = g
    return grads
