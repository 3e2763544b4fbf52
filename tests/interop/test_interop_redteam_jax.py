"""gk.interop.jax_function used the way a JAX user will, traps included (docs/interop.md): check_grads in
reverse mode (forward mode and second derivatives refused, never a wrong number), jit, grad of a jitted
function and jit of grad, a pytree of outputs, vmap (vector mode and lane by lane) against loops, Active 0-d
scalars under jit and vmap, float32 by default and float64 with x64, constants closed over, donated
buffers, one array in two places, dtypes and arguments refused by name at trace time, no forward left
waiting after 100 steps, and Warp's launch-shape trap (warp#1380). JAX is in the test extra: these run in CI."""

from __future__ import annotations

import numpy as np
import pytest
from support.interop_cases import N, checkpointed, pingpong

import gradkern as gk
from gradkern.interop import adapter as A
from gradkern.kernels import allen_cahn_step, dot, saxpy

jax = pytest.importorskip("jax", reason="JAX is not installed (pip install 'gradkern[jax]')")
jnp = pytest.importorskip("jax.numpy")
from jax.test_util import check_grads  # noqa: E402

step = gk.interop.jax_function(allen_cahn_step, "un")
sx = gk.interop.jax_function(saxpy, "y")


@gk.kernel
def rows(a, b):
    """One thread per row of a 2-D array, the row's columns looped inside (Warp's issue 1380)."""
    i = gk.tid()
    for m in range(a.shape[1]):
        b[i, m] = 2.0 * a[i, m] * a[i, m]


@gk.kernel
def divide(x, out, s):
    i = gk.tid()
    out[i] = x[i] / s


@pytest.fixture(autouse=True)
def no_orphans():
    """Forwards whose backward never came (refused second derivatives) wait in the store until its budget
    drops them (docs/interop.md): dropped after each test here, since other tests count the store."""
    before = set(A.PENDING._strong)
    yield
    for key in set(A.PENDING._strong) - before:
        A.PENDING._strong.pop(key, None)


def rand(*shape, seed=0):
    return jnp.asarray(np.random.default_rng(seed).uniform(-0.5, 0.5, shape))


def energy(u):
    return (step(u, jnp.zeros(N), 0.2, 0.01) ** 2).sum()


def test_check_grads_reverse_mode_and_forward_mode_refused(x64):
    """check_grads (float64 central differences, JAX's own tolerances) in reverse mode on Active 0-d
    scalars, an accumulated output and a program's pytree of outputs; forward mode is JAX's refusal of a
    custom_vjp, a second derivative its refusal of a callback's JVP: an error, never a number."""
    check_grads(sx, (jnp.asarray(0.3), rand(N, seed=1), rand(N, seed=2)), order=1, modes=["rev"])
    pp = gk.interop.jax_function(pingpong, ("u", "E"))
    check_grads(lambda u, c: pp(u, jnp.zeros(N), jnp.zeros(1), c, 3), (rand(N), jnp.asarray(0.2)), order=1,
                modes=["rev"])
    with pytest.raises(TypeError, match="forward-mode autodiff"):
        check_grads(energy, (rand(N),), order=1, modes=["fwd"])
    with pytest.raises(ValueError, match="do not support JVP"):
        jax.hessian(energy)(rand(N))
    with pytest.raises(ValueError, match="do not support JVP"):
        jax.grad(lambda u: jax.grad(energy)(u).sum())(rand(N))


def test_jit_grad_and_a_pytree_of_outputs(x64):
    """grad of a jitted loss, jit of its grad and the plain grad agree bit for bit (the same gradkern calls
    on the same values), with an Active scalar and a checkpointed program's two outputs."""
    pp = gk.interop.jax_function(checkpointed, "E")
    two = gk.interop.jax_function(pingpong, ("u", "E"))

    def loss(u, c):
        uf, e = two(u, jnp.zeros(N), jnp.zeros(1), c, 3)
        return e[0] + (uf ** 2).sum() + pp(u, jnp.zeros(N), jnp.zeros(1), c, 4)[0]
    u, c = rand(N), jnp.asarray(0.2)
    plain = jax.grad(loss, argnums=(0, 1))(u, c)
    for got in (jax.grad(jax.jit(loss), argnums=(0, 1))(u, c), jax.jit(jax.grad(loss, argnums=(0, 1)))(u, c)):
        for g, p in zip(got, plain):
            np.testing.assert_array_equal(g, p)
    assert plain[1].shape == () and plain[1].dtype == jnp.float64 and float(plain[1]) != 0


def test_vmap_against_loops(x64):
    """Lanes with inputs of their own (vmap of grad, over an Active scalar, along axis 1, nested) run lane by
    lane; k cotangents of one forward (jacrev) run in vector mode: each equals its loop."""
    U = rand(3, N)
    g = jax.grad(energy)
    np.testing.assert_array_equal(jax.vmap(g)(U), np.stack([g(U[k]) for k in range(3)]))
    np.testing.assert_array_equal(jax.vmap(g, in_axes=1, out_axes=1)(U.T), np.stack([g(U[k]) for k in range(3)]).T)
    np.testing.assert_array_equal(jax.vmap(jax.vmap(g))(U.reshape(3, 1, N)).reshape(3, N),
                                  np.stack([g(U[k]) for k in range(3)]))
    u = rand(N, seed=1)

    def of_c(c):
        return jax.grad(lambda u, c: (step(u, jnp.zeros(N), c, 0.01) ** 2).sum(), argnums=(0, 1))(u, c)
    cs = jnp.asarray([0.1, 0.2, 0.3])
    lanes = jax.jit(jax.vmap(of_c))(cs)
    for k in range(3):
        du, dc = of_c(cs[k])
        np.testing.assert_array_equal(lanes[0][k], du)
        np.testing.assert_array_equal(lanes[1][k], dc)
    J = jax.jacrev(lambda u, c: step(u, jnp.zeros(N), c, 0.01), argnums=(0, 1))(u, jnp.asarray(0.2))
    rows_ = [jax.grad(lambda u, c, i=i: step(u, jnp.zeros(N), c, 0.01)[i], argnums=(0, 1))(u, jnp.asarray(0.2))
             for i in range(N)]
    # vector mode sums the same products in the same order per lane; the Active scalar's lanes too
    np.testing.assert_allclose(J[0], np.stack([r[0] for r in rows_]), rtol=1e-14, atol=0)
    np.testing.assert_allclose(J[1], np.stack([r[1] for r in rows_]), rtol=1e-14, atol=0)


def test_float32_by_default_and_float64_with_x64(x32):
    """Without x64, float64 NumPy arrays become float32 (no mixing refused: JAX narrows them all), as do
    gradients and the Active scalar's derivative; they agree with float64's to float32's precision."""
    u64 = np.random.default_rng(0).uniform(-0.5, 0.5, N)
    g32 = jax.jit(jax.grad(lambda u, c: (step(u, np.zeros(N), c, 0.01) ** 2).sum(), argnums=(0, 1)))(u64, 0.2)
    assert g32[0].dtype == jnp.float32 and g32[1].dtype == jnp.float32 and g32[1].shape == ()
    jax.config.update("jax_enable_x64", True)
    g64 = jax.grad(lambda u, c: (step(u, jnp.zeros(N), c, 0.01) ** 2).sum(), argnums=(0, 1))(jnp.asarray(u64),
                                                                                        jnp.asarray(0.2))
    assert g64[0].dtype == jnp.float64
    for a, b in zip(g32, g64):
        # float32 rounding (2^-24 ~ 6e-8) through a 3-point stencil and a square: a few ulps, 1e-5 is ample
        np.testing.assert_allclose(np.asarray(a, np.float64), b, rtol=1e-5, atol=1e-6)


def test_constants_closed_over_donated_buffers_and_one_array_in_two_places(x64):
    u = rand(N)
    un0 = jnp.zeros(N)
    closed = jax.jit(jax.grad(lambda u: (step(u, un0, 0.2, 0.01) ** 2).sum()))  # un0 a constant of the jit
    np.testing.assert_array_equal(closed(u), jax.grad(energy)(u))
    donated = jax.jit(lambda u, z: step(u, z, 0.2, 0.01), donate_argnums=(1,))
    np.testing.assert_array_equal(donated(u, jnp.zeros(N)), step(u, jnp.zeros(N), 0.2, 0.01))
    d = gk.interop.jax_function(dot, "out")
    for fn in (jax.grad(lambda u: d(u, u, jnp.zeros(1))[0]), jax.jit(jax.grad(lambda u: d(u, u, jnp.zeros(1))[0]))):
        np.testing.assert_allclose(fn(u), 2 * u, rtol=1e-15, atol=0)  # d(u.u)/du = 2u: one multiply, exact
    np.testing.assert_allclose(sx(0.5, u, u), 1.5 * u, rtol=1e-15, atol=0)
    check_grads(lambda a, x: sx(a, x, x), (jnp.asarray(0.5), u), order=1, modes=["rev"])


def test_dtypes_and_arguments_refused_by_name_at_trace_time(x64):
    """Refused when the function is traced, as gk.InteropError naming the argument, not as a callback's
    JaxRuntimeError wrapping gk.launch's error."""
    u = rand(N)
    mixed = step(u, jnp.zeros(N, jnp.float32), 0.2, 0.01)  # as gk.launch: one float64 value rounded once
    assert mixed.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(mixed), np.asarray(step(u, jnp.zeros(N), 0.2, 0.01)).astype(np.float32))
    cases = [((u.astype(jnp.float16), jnp.zeros(N, jnp.float16), 0.2, 0.01), "argument 'u' has dtype float16"),
             ((u.astype(jnp.bfloat16), jnp.zeros(N, jnp.bfloat16), 0.2, 0.01), "argument 'u' has dtype bfloat16"),
             ((u, jnp.zeros(N, bool), 0.2, 0.01), "argument 'un' has dtype bool"),
             ((list(np.asarray(u)), jnp.zeros(N), 0.2, 0.01), "argument 'u' is indexed by the kernel.*got list"),
             ((u, jnp.zeros(N), jnp.ones(N), 0.01), "argument 'c' is a scalar of the kernel")]
    for args, message in cases:
        with pytest.raises(gk.InteropError, match=message):
            step(*args)
        with pytest.raises(gk.InteropError, match=message):
            jax.jit(lambda *a: step(*a))(*[a for a in args if not isinstance(a, list)]) if not any(
                isinstance(a, list) for a in args) else step(*args)
    np.testing.assert_array_equal(step(u, un=jnp.zeros(N), dt=0.01, c=0.2), step(u, jnp.zeros(N), 0.2, 0.01))
    with pytest.raises(gk.InteropError, match="has no parameter 'alpha'"):
        step(u, jnp.zeros(N), 0.2, alpha=0.01)


def test_no_forward_is_left_waiting_after_100_steps(x64):
    """Each jitted gradient's forward is taken back by its backward: the store does not grow. A vjp function
    called twice gives the same gradient (the second runs the forward again)."""
    f = jax.jit(jax.grad(energy))
    u = rand(N)
    f(u).block_until_ready()
    waiting = len(A.PENDING)
    for _ in range(100):
        f(u).block_until_ready()
    assert len(A.PENDING) == waiting
    out, vjp = jax.vjp(lambda u: step(u, jnp.zeros(N), 0.2, 0.01), u)
    w = rand(N, seed=3)
    first = vjp(w)[0]
    np.testing.assert_array_equal(vjp(w)[0], first)
    assert len(A.PENDING) == waiting and np.abs(first).max() > 0


def test_under_jax_checkpoint(x64):
    """jax.checkpoint runs the forward again for the backward: the gradient is the plain one; under jit XLA
    drops the first forward's unused callback, so nothing waits in the store (eagerly the first forward
    waits until the store's budget drops it: docs/interop.md)."""
    u = rand(N)
    plain = jax.grad(energy)(u)
    np.testing.assert_array_equal(jax.grad(jax.checkpoint(energy))(u), plain)
    f = jax.jit(jax.grad(jax.checkpoint(energy)))
    f(u).block_until_ready()
    waiting = len(A.PENDING)
    for _ in range(5):
        np.testing.assert_array_equal(f(u), plain)
    assert len(A.PENDING) == waiting


def test_scan_over_the_operation(x64):
    """A lax.scan of five steps: five forwards kept, taken back in reverse order by the backward."""
    def loss(u):
        u, _ = jax.lax.scan(lambda u, _: (step(u, jnp.zeros(N), 0.2, 0.01), None), u, None, length=5)
        return (u ** 2).sum()
    check_grads(loss, (rand(N),), order=1, modes=["rev"])


def test_warp1380_a_launch_shape_taken_from_a_larger_array_is_refused(x64):
    """Warp inferred the launch from a 2-D array for a 1-D tid and over-accumulated the adjoint: gradkern
    refuses the default shape by name when the function is traced, and with dim given it is exact."""
    a = rand(4, 3)
    with pytest.raises(gk.LaunchError, match="unpacks gk.tid\\(\\) into 1 index.*shape \\(4, 3\\)"):
        jax.jit(jax.grad(lambda a: gk.interop.jax_function(rows, "b")(a, jnp.zeros((4, 3))).sum()))(a)
    op = gk.interop.jax_function(rows, "b", dim=4)
    np.testing.assert_allclose(jax.grad(lambda a: op(a, jnp.zeros((4, 3))).sum())(a), 4 * a, rtol=1e-15, atol=0)


def test_constants_equal_but_different_get_their_own_function(x64):
    """An operation keeps one function per layout and constants: -0.0 == 0.0, but x / -0.0 is -inf (the
    function built for 0.0 was reused for -0.0 once), and True == 1 but their types differ."""
    op = gk.interop.jax_function(divide, "out")
    x = jnp.ones(3)
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(op(x, jnp.zeros(3), 0.0), np.full(3, np.inf))
        np.testing.assert_array_equal(op(x, jnp.zeros(3), -0.0), np.full(3, -np.inf))
        np.testing.assert_array_equal(op(x, jnp.zeros(3), 2), np.full(3, 0.5))
