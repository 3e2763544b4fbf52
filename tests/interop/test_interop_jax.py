"""gk.interop.jax_function (docs/interop.md): kernels and programs as JAX operations, their reverse-mode
derivatives against central differences in float64 (jax.test_util.check_grads and a full one of every
input), under jit, vmap and grad; float32 and float64. JAX is in the test extra, so these run in CI."""

from __future__ import annotations

import numpy as np
import pytest
from support.interop_cases import N, central_differences, differentiable, stencil
from support.interop_cases import operation as interop_operation

import gradkern as gk
from gradkern.interop import adapter as A

jax = pytest.importorskip("jax", reason="JAX is not installed (pip install 'gradkern[jax]')")
jnp = pytest.importorskip("jax.numpy")
from jax.test_util import check_grads  # noqa: E402

NAMES = ["stencil", "update", "loss", "pingpong", "checkpointed"]


# float64 arrays stay float64 in every test here
pytestmark = pytest.mark.usefixtures("x64")


def operation(name, dtype=np.float64):
    return interop_operation(name, gk.interop.jax_function, dtype)


@pytest.mark.parametrize("name", NAMES)
def test_vjp_matches_central_differences(name):
    op, as_tuple, args = operation(name)
    before = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    diff = differentiable(args)

    def of_diff(*xs):
        full = list(args)
        for n, x in zip(diff, xs):
            full[n] = x
        return as_tuple(*full)
    outs, vjp = jax.vjp(of_diff, *(jnp.asarray(args[n]) for n in diff))
    weights = [np.random.default_rng(5).standard_normal(o.shape) for o in outs]
    got = vjp(tuple(jnp.asarray(w) for w in weights))
    reference = central_differences(lambda *a: [np.asarray(o) for o in as_tuple(*a)], args, weights)
    for n, g in zip(diff, got):
        assert g.dtype == args[n].dtype and g.shape == np.shape(args[n])
        np.testing.assert_allclose(np.asarray(g), reference[n], rtol=1e-6, atol=1e-8, err_msg=f"{name}: {n}")
    for a, b in zip(args, before):  # NumPy inputs are not changed
        np.testing.assert_array_equal(a, b)
    check_grads(of_diff, tuple(jnp.asarray(args[n]) for n in diff), order=1, modes=["rev"])
    # the same cotangent twice (warp#1732): the second backward runs the forward again, same gradients
    again = vjp(tuple(jnp.asarray(w) for w in weights))
    for g, h in zip(got, again):
        np.testing.assert_allclose(np.asarray(h), np.asarray(g), rtol=1e-13, atol=1e-15)


def scalar_loss(op):
    return lambda u, c: jnp.sum(op(u, jnp.zeros(N), c, 0.01) ** 2)


def test_grad_of_a_scalar_loss_eager_and_under_jit():
    op, _, args = operation("stencil")
    u, c = jnp.asarray(args[0]), jnp.asarray(args[2])
    du, dc = jax.grad(scalar_loss(op), argnums=(0, 1))(u, c)
    assert dc.shape == () and dc.dtype == jnp.float64  # the Active scalar's derivative, a 0-d array
    jdu, jdc = jax.jit(jax.grad(scalar_loss(op), argnums=(0, 1)))(u, c)
    np.testing.assert_allclose(np.asarray(jdu), np.asarray(du), rtol=1e-14)
    np.testing.assert_allclose(float(jdc), float(dc), rtol=1e-14)
    un = np.zeros(N)
    gk.launch(stencil, N, np.array(args[0]), un, 0.2, 0.01)  # the jitted primal is the launch's
    np.testing.assert_allclose(np.asarray(jax.jit(op)(u, jnp.zeros(N), c, 0.01)), un, rtol=1e-15)
    assert len(A.PENDING) == 0  # every forward's call was taken by its backward


def test_vmap_of_the_primal_and_of_the_gradient_runs_lane_by_lane():
    op, _, args = operation("stencil")
    us = jnp.asarray(np.random.default_rng(6).uniform(-0.5, 0.5, (3, N)))
    c = jnp.asarray(args[2])
    batched = jax.vmap(lambda u: op(u, jnp.zeros(N), c, 0.01))(us)
    grads = jax.jit(jax.vmap(jax.grad(scalar_loss(op)), in_axes=(0, None)))(us, c)
    for k in range(3):
        np.testing.assert_allclose(np.asarray(batched[k]), np.asarray(op(us[k], jnp.zeros(N), c, 0.01)))
        np.testing.assert_allclose(np.asarray(grads[k]), np.asarray(jax.grad(scalar_loss(op))(us[k], c)),
                                   rtol=1e-14)


def test_float32_stays_float32_and_agrees_with_float64():
    op32, _, args32 = operation("stencil", np.float32)
    op64, _, args64 = operation("stencil")
    u32, c32 = jnp.asarray(args32[0]), jnp.asarray(args32[2])
    out = op32(u32, jnp.zeros(N, jnp.float32), c32, 0.01)
    assert out.dtype == jnp.float32
    loss32 = lambda u, c: jnp.sum(op32(u, jnp.zeros(N, jnp.float32), c, 0.01) ** 2)
    du32, dc32 = jax.grad(loss32, argnums=(0, 1))(u32, c32)
    assert du32.dtype == jnp.float32 and dc32.dtype == jnp.float32
    du64, dc64 = jax.grad(scalar_loss(op64), argnums=(0, 1))(jnp.asarray(args32[0], jnp.float64),
                                                             jnp.asarray(0.2))
    # float32 against float64: each element's gradient is a few dozen float32 operations (2^-24 each) of one
    # stencil step and a sum of N squares, ~1e-6 relative; 1e-4 leaves a hundredfold margin and catches any wrong term
    np.testing.assert_allclose(np.asarray(du32), np.asarray(du64), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(float(dc32), float(dc64), rtol=1e-4)


def test_a_tuple_of_outputs_and_integer_arrays():
    op, _, args = operation("pingpong")
    u, e = op(*(jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args))
    assert u.shape == (N,) and e.shape == (1,)
    op, _, args = operation("loss")
    grads = jax.grad(lambda u, w: op(u, jnp.asarray(args[1]), w, jnp.zeros(1))[0], argnums=(0, 1))(
        jnp.asarray(args[0]), jnp.asarray(args[2]))
    assert grads[0].shape == (N,) and grads[1].shape == (6,)


def test_dropped_forwards_are_run_again():
    """Past the store's budget a forward's Call is dropped; its backward runs the forward again."""
    op, _, args = operation("stencil")
    u, c = jnp.asarray(args[0]), jnp.asarray(args[2])
    expected = jax.grad(scalar_loss(op))(u, c)
    budget, A.PENDING.budget = A.PENDING.budget, 0
    try:
        got = jax.grad(lambda u, c: scalar_loss(op)(u, c) + scalar_loss(op)(u, c))(u, c)
    finally:
        A.PENDING.budget = budget
    np.testing.assert_allclose(np.asarray(got), 2 * np.asarray(expected), rtol=1e-14)
    A.PENDING._strong.clear()


def test_bad_outputs_are_refused_when_the_operation_is_made():
    with pytest.raises(gk.InteropError, match="outputs"):
        gk.interop.jax_function(stencil, "nope")
    op = gk.interop.jax_function(stencil, "un")
    with pytest.raises(gk.InteropError, match="takes 4 arguments"):
        op(jnp.zeros(N), jnp.zeros(N))


@pytest.mark.parametrize("name", ["stencil", "pingpong"])
def test_jacrev_runs_gradkerns_vector_mode(name, monkeypatch):
    """jax.jacrev is a vmap over one forward's vjp: its N cotangents take one forward and one reverse with N
    shadows per array (gk.BatchDuplicated), and give the rows N separate vjps give."""
    op, as_tuple, args = operation(name)
    first = 0 if name == "stencil" else 1  # pingpong: its E output
    rest = [jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    c_at = 2 if name == "stencil" else 3

    def fn(u, c):
        full = list(rest)
        full[0], full[c_at] = u, c
        return as_tuple(*full)[first]
    u, c = jnp.asarray(args[0]), jnp.asarray(args[c_at])
    lanes = []
    forward = A.forward
    monkeypatch.setattr(A, "forward", lambda *a, **k: lanes.append(k.get("lanes", 0)) or forward(*a, **k))
    ju, jc = jax.jacrev(fn, argnums=(0, 1))(u, c)
    out = fn(u, c)
    assert lanes == [0, out.size]  # the vjp's forward, then one vector-mode forward for every row
    _, vjp = jax.vjp(fn, u, c)
    for i in range(out.size):
        row_u, row_c = vjp(jnp.zeros_like(out).at[i].set(1.0))
        np.testing.assert_allclose(np.asarray(ju[i]), np.asarray(row_u), rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(float(jc[i]), float(row_c), rtol=1e-13, atol=1e-15)
