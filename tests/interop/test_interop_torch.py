"""gk.interop.torch_function (docs/interop.md): kernels and programs as PyTorch operations, checked by
torch.autograd.gradcheck (finite differences in float64) and against central differences of every input;
the same gradient tensor used twice, retain_graph, double backward refused, non-contiguous tensors,
float32, torch's version counters, torch.compile(fullgraph=True), and the autograd.Function used where
custom ops cannot serve. Skipped where torch is not installed (PyPI's wheel pulls 2.8 GB of CUDA
libraries: CI installs a CPU build when one is at hand, ci/run); the logic these share with JAX is
tested without either (tests/interop/test_interop_adapter.py)."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from support.interop_cases import N, central_differences, differentiable, pingpong, stencil, tensors
from support.interop_cases import operation as interop_operation

import gradkern as gk
from gradkern.interop import adapter as A

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'gradkern[torch]')")
from gradkern.interop import torch_op  # noqa: E402

# gc.collect() in these tests scans only what the test made (tests/conftest.py `frozen_heap`; docs/testing.md)
pytestmark = pytest.mark.usefixtures("frozen_heap")

NAMES = ["stencil", "update", "loss", "pingpong", "checkpointed"]


def operation(name, dtype=np.float64):
    return interop_operation(name, gk.interop.torch_function, dtype)


@pytest.mark.parametrize("name", NAMES)
def test_gradients_match_central_differences(name, path):
    op, as_tuple, args = operation(name)
    ts = tensors(args)
    before = [t.detach().clone() if isinstance(t, torch.Tensor) else t for t in ts]
    diff = differentiable(args)
    outs = as_tuple(*ts)
    weights = [torch.from_numpy(np.random.default_rng(7).standard_normal(tuple(o.shape))) for o in outs]
    kept = [w.clone() for w in weights]
    got = torch.autograd.grad(outs, [ts[n] for n in diff], weights)
    for w, k in zip(weights, kept):  # the incoming gradients were copied, never consumed
        assert torch.equal(w, k)
    for t, b in zip(ts, before):  # no input changed
        assert not isinstance(t, torch.Tensor) or torch.equal(t.detach(), b)
    reference = central_differences(lambda *a: [o.detach().numpy() for o in as_tuple(*tensors(a, requires_grad=False))],
                                    args, [w.numpy() for w in weights])
    for n, g in zip(diff, got):
        assert g.dtype == ts[n].dtype and tuple(g.shape) == np.shape(args[n])
        np.testing.assert_allclose(g.numpy(), reference[n], rtol=1e-6, atol=1e-8, err_msg=f"{name}: {n}")
    assert torch.autograd.gradcheck(lambda *xs: as_tuple(*[xs[diff.index(n)] if n in diff else t
                                                           for n, t in enumerate(ts)]),
                                    [ts[n] for n in diff])
    gc.collect()
    assert len(A.PENDING) == 0  # each forward's call went with its graph


def test_the_same_gradient_tensor_twice_and_retain_graph(path):
    """warp#1732: the gradient tensor handed to backward is not the output's shadow, so using it again
    (a second graph, or the same graph kept with retain_graph) gives the same gradients."""
    op, _, args = operation("pingpong")
    ts = tensors(args)
    g = torch.from_numpy(np.random.default_rng(8).standard_normal(N))
    grads = []
    for _ in range(2):
        u, e = op(*ts)
        grads.append(torch.autograd.grad(u, [ts[0], ts[3]], g)[0])
    u, e = op(*ts)
    grads.append(torch.autograd.grad(u, [ts[0], ts[3]], g, retain_graph=True)[0])
    grads.append(torch.autograd.grad(u, [ts[0], ts[3]], g)[0])  # the tape is spent: the forward runs again
    for other in grads[1:]:
        torch.testing.assert_close(other, grads[0], rtol=1e-13, atol=1e-15)
    assert torch.abs(grads[0]).max() > 0


def test_double_backward_is_refused(path):
    op, _, args = operation("stencil")
    u, un, c, dt = tensors(args)
    first, = torch.autograd.grad((op(u, un, c, dt) ** 2).sum(), u, create_graph=True)  # allowed
    with pytest.raises(gk.InteropError, match="second derivative"):
        first.sum().backward()


def test_non_contiguous_tensors_and_float32(path):
    op64, _, args = operation("stencil")
    base = torch.from_numpy(np.random.default_rng(9).uniform(-0.5, 0.5, (2 * N, 3))).requires_grad_()
    u = base[::2, 1]  # stride 6: read in place, never copied
    assert not u.is_contiguous()
    c = torch.tensor(0.2, dtype=torch.float64, requires_grad=True)
    out = op64(u, torch.zeros(N, dtype=torch.float64), c, 0.01)
    (out ** 2).sum().backward()
    ref_u = u.detach().clone().requires_grad_()
    ref_c = c.detach().clone().requires_grad_()
    (op64(ref_u, torch.zeros(N, dtype=torch.float64), ref_c, 0.01) ** 2).sum().backward()
    torch.testing.assert_close(base.grad[::2, 1], ref_u.grad, rtol=1e-14, atol=0)
    assert base.grad[1::2].abs().max() == 0 and base.grad[:, 0].abs().max() == 0
    torch.testing.assert_close(c.grad, ref_c.grad)
    u32 = ref_u.detach().float().requires_grad_()
    c32 = torch.tensor(0.2, dtype=torch.float32, requires_grad=True)
    out32 = op64(u32, torch.zeros(N), c32, 0.01)
    assert out32.dtype == torch.float32
    (out32 ** 2).sum().backward()
    assert u32.grad.dtype == torch.float32 and c32.grad.dtype == torch.float32
    # float32 against float64 (the same bound as tests/interop/test_interop_jax.py's, same reasoning)
    torch.testing.assert_close(u32.grad.double(), ref_u.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(c32.grad.double(), ref_c.grad, rtol=1e-4, atol=1e-5)


def test_an_input_changed_after_the_forward_trips_torchs_version_counter(path):
    op, _, args = operation("stencil")
    u, un, c, dt = tensors(args)
    w = u * 1.0
    out = op(w, un, c, dt)
    with torch.no_grad():
        w.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_without_gradients_the_plain_launch_runs(path):
    op, _, args = operation("stencil")
    ts = tensors(args)
    with torch.no_grad():
        out = op(*ts)
    expected = np.zeros(N)
    gk.launch(stencil, N, args[0], expected, 0.2, 0.01)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-15)
    assert not out.requires_grad and len(A.PENDING) == 0


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.full)])
def test_torch_compile_fullgraph_traces_the_custom_ops(backend):
    """aot_eager traces the forward and backward graphs as inductor does, without its C++ compiles (47 s
    on 2 cores: `-m full` runs inductor too)."""
    if not torch_op.CUSTOM_OPS:
        pytest.skip("this torch has no torch.library.custom_op (torch < 2.4)")
    op, _, args = operation("pingpong")
    ts = tensors(args)

    def loss(u, c):
        u_final, e = op(u, ts[1], ts[2], c, 3)
        return e.sum() + (u_final ** 2).sum()
    eager = torch.autograd.grad(loss(ts[0], ts[3]), [ts[0], ts[3]])
    compiled = torch.compile(loss, fullgraph=True, backend=backend)
    got = torch.autograd.grad(compiled(ts[0], ts[3]), [ts[0], ts[3]])
    for g, e in zip(got, eager):
        torch.testing.assert_close(g, e, rtol=1e-13, atol=1e-15)


def test_a_constant_that_is_no_number_takes_the_autograd_function():
    """A custom op's schema holds numbers; a program may take anything else as a constant."""
    def scaled(u, v, E, c, nsteps, unused):
        pingpong(u, v, E, c, nsteps)
    op = gk.interop.torch_function(scaled, "E")
    _, _, args = operation("pingpong")
    ts = tensors(args)
    e = op(*ts, {"label": "a dict"})
    g, = torch.autograd.grad(e.sum(), ts[0])
    reference = gk.interop.torch_function(pingpong, "E")(*tensors(args))
    torch.testing.assert_close(e, reference)
    assert g.abs().max() > 0


def test_arrays_must_be_tensors():
    op, _, args = operation("stencil")
    with pytest.raises(gk.InteropError, match="argument 'un' is a ndarray: pass arrays as torch tensors"):
        op(tensors(args)[0], np.zeros(N), 0.2, 0.01)


def test_a_tensor_passed_twice(path):
    from gradkern.kernels import dot
    op = gk.interop.torch_function(dot, "out")
    u = torch.from_numpy(np.random.default_rng(5).uniform(-1, 1, N)).requires_grad_()
    assert torch.autograd.gradcheck(lambda u: op(u, u, torch.zeros(1, dtype=torch.float64)), [u])
