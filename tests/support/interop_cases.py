"""Kernels and programs that tests/interop/test_interop_*.py and tests/gpu/test_gpu_interop.py wrap as PyTorch and
JAX operations, each with arguments (NumPy, float64 unless asked) and the names of its outputs; a central-difference
gradient of a functional operation, the reference every interop derivative is checked against; and what those files
share to set up: the operations (`operation`), tensors of the arguments, the fixtures `path` (both ways torch
registers an operation) and `x64`/`x32` (JAX's float width), which a test module imports to use. torch and JAX are
imported only by what needs them, in the modules that skip without them."""

from __future__ import annotations

import numpy as np
import pytest

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


def operation(name, wrap, dtype=np.float64):
    """The case `name` as an operation (`wrap`: gk.interop.torch_function or jax_function): the operation, the
    same returning a tuple of its outputs however many, and its arguments."""
    f, outputs, args, dim = cases(dtype)[name]
    op = wrap(f, outputs, dim)
    as_tuple = (lambda *a: (op(*a),)) if isinstance(outputs, str) else op
    return op, as_tuple, args


def tensors(args, device="cpu", *, requires_grad=True):
    """The arguments as torch tensors on `device` (numbers stay numbers); float tensors require a gradient."""
    import torch
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            t = torch.from_numpy(np.array(a, copy=True)).to(device)
            out.append(t.requires_grad_(requires_grad and t.is_floating_point()))
        else:
            out.append(a)
    return out


@pytest.fixture(params=["custom_op", "function"])
def path(request, monkeypatch):
    """Both ways an operation is registered: torch.library custom ops, and torch.autograd.Function."""
    from gradkern.interop import torch_op
    if request.param == "function":
        monkeypatch.setattr(torch_op, "CUSTOM_OPS", False)
    elif not torch_op.CUSTOM_OPS:
        pytest.skip("this torch has no torch.library.custom_op (torch < 2.4)")
    return request.param


def _jax_x64(on):
    import jax
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", on)
    yield
    jax.config.update("jax_enable_x64", before)


@pytest.fixture
def x64():
    """float64 arrays stay float64 (JAX narrows them to float32 unless x64 is on)."""
    yield from _jax_x64(True)


@pytest.fixture
def x32():
    """JAX's default: float64 arrays narrowed to float32."""
    yield from _jax_x64(False)
