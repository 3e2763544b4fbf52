"""gk.interop on a GPU (docs/interop.md, "What is copied and what is not", "Dtypes and devices"): what the
page promises for CUDA tensors and JAX GPU arrays, each test parametrized over devices so that its CPU case
runs in CI and its CUDA case on a GPU (`python ci/gpu_check.py --only interop`; skipped, saying so, without
torch built with CUDA and CuPy, or without JAX's CUDA plugin).

PyTorch: CUDA tensors cross by DLPack without copies (the launch gets CuPy arrays on the tensors' own memory,
the written arrays are copies, a kernel's outputs come back without a further copy, a program's arrays are all
copies); every gradkern launch runs on torch's current stream, forward and backward; gradients against central
differences in float64 on the device and against the CPU run; float32; a 0-d Active scalar on the CPU beside
CUDA arrays; arrays on two devices refused by name (on the CPU, a `meta` tensor is the second device: the same
check, before anything runs); torch.compile(fullgraph=True) on CUDA tensors. JAX: an operation on GPU arrays
runs gradkern on the host through its callbacks (the launches get NumPy arrays), returns its results on the
arrays' device, and gives the CPU run's values and gradients bit for bit."""

from __future__ import annotations

import os

import numpy as np
import pytest
from support.devices import HAS_GPU, cupy
from support.interop_cases import N, central_differences, differentiable, operation, stencil, tensors

import gradkern as gk
from gradkern.interop import adapter as A

# JAX on a GPU takes 75 % of the device's memory at its first use unless told not to; the GPU check runs
# these tests in 16 workers beside CuPy and torch (set before jax is imported by this module)
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

pytestmark = pytest.mark.gpu

# GPU against CPU (docs/hostcuda.md "What only a real GPU checks"): device math is a few ulps from glibc's and
# NVRTC contracts multiply-adds into FMAs; a program's loop compounds it (test_gpu_programs.py's 1e-10). A
# kernel alone: test_gpu.py's 1e-12 float64, 1e-5 float32. A wrong gradient is off by O(1).
RTOL = {"float64": 1e-12, "float32": 1e-5}
RTOL_PROGRAM = 1e-10


def _ptr(a) -> int:
    """The address of a NumPy or CuPy array's first element."""
    return a.ctypes.data if isinstance(a, np.ndarray) else a.data.ptr


def _record(monkeypatch) -> list:
    """The arrays gradkern's launches get from the adapter: one list of plain values per call (the primal's
    gk.launch, the forward's autodiff_thunk; annotations unwrapped to their values)."""
    seen: list = []
    real_launch, real_thunk = A.launch, A.autodiff_thunk

    def launch(f, dim, *args):
        seen.append(list(args))
        return real_launch(f, dim, *args)

    def thunk(f, *args, **kwargs):
        seen.append([getattr(a, "val", a) for a in args])
        return real_thunk(f, *args, **kwargs)

    monkeypatch.setattr(A, "launch", launch)
    monkeypatch.setattr(A, "autodiff_thunk", thunk)
    return seen


# ---- PyTorch ------------------------------------------------------------------------------------------------------

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'gradkern[torch]')")
from gradkern.interop import torch_op  # noqa: E402

TORCH_CUDA = HAS_GPU and torch.cuda.is_available()
NO_CUDA = "no CUDA GPU for both torch and CuPy"
DEVICES = [pytest.param("cpu", id="cpu"),
           pytest.param("cuda", id="cuda", marks=pytest.mark.skipif(not TORCH_CUDA, reason=NO_CUDA))]
on_cuda = pytest.mark.skipif(not TORCH_CUDA, reason=NO_CUDA)


def torch_operation(name, dtype=np.float64):
    return operation(name, gk.interop.torch_function, dtype)[1:]


def torch_gradients(name, device, dtype=np.float64):
    """The outputs and the gradients of <weights, outputs> at every float input, on `device` (host copies)."""
    as_tuple, args = torch_operation(name, dtype)
    ts = tensors(args, device)
    before = [t.detach().clone() for t in ts if isinstance(t, torch.Tensor)]
    outs = as_tuple(*ts)
    assert all(o.device == ts[0].device and o.dtype == ts[0].dtype for o in outs if o.is_floating_point())
    rng = np.random.default_rng(7)
    weights = [torch.from_numpy(rng.standard_normal(tuple(o.shape)).astype(dtype)).to(device) for o in outs]
    kept = [w.clone() for w in weights]
    diff = differentiable(args)
    got = torch.autograd.grad(outs, [ts[n] for n in diff], weights)
    for w, k in zip(weights, kept):  # the incoming gradients were copied into shadows, never consumed
        assert torch.equal(w, k)
    for t, b in zip([t for t in ts if isinstance(t, torch.Tensor)], before):  # no input changed
        assert torch.equal(t.detach(), b)
    for n, g in zip(diff, got):
        assert g.device == ts[n].device and g.dtype == ts[n].dtype and tuple(g.shape) == np.shape(args[n])
    return ([o.detach().cpu().numpy() for o in outs], {n: g.cpu().numpy() for n, g in zip(diff, got)},
            as_tuple, args, [w.cpu().numpy() for w in weights])


@pytest.mark.parametrize("name", ["stencil", "update", "loss", "pingpong"])
@pytest.mark.parametrize("device", DEVICES)
def test_torch_gradients_on_the_device_match_central_differences_and_the_cpu(name, device):
    """Float64 gradients on `device` against central differences taken on the same device (tolerance:
    support/interop_cases.py's central_differences), and on CUDA against the CPU run."""
    outs, got, as_tuple, args, weights = torch_gradients(name, device)
    reference = central_differences(
        lambda *a: [o.detach().cpu().numpy() for o in as_tuple(*tensors(a, device, requires_grad=False))], args,
        weights)
    for n, g in got.items():
        np.testing.assert_allclose(g, reference[n], rtol=1e-6, atol=1e-8, err_msg=f"{name} on {device}: {n}")
    if device != "cpu":
        cpu_outs, cpu_got, *_ = torch_gradients(name, "cpu")
        rtol = RTOL_PROGRAM if name == "pingpong" else RTOL["float64"]
        for a, b in zip(outs, cpu_outs):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-14)
        for n, g in got.items():
            # a sum's terms in another order: errors scale with the largest term
            np.testing.assert_allclose(g, cpu_got[n], rtol=rtol, atol=rtol * float(np.max(np.abs(cpu_got[n]))),
                                       err_msg=f"{name}: {n}")


@on_cuda
@pytest.mark.parametrize("name", ["stencil", "pingpong"])
def test_torch_float32_on_cuda_equals_the_cpu(name):
    outs, got, *_ = torch_gradients(name, "cuda", np.float32)
    cpu_outs, cpu_got, *_ = torch_gradients(name, "cpu", np.float32)
    rtol = RTOL["float32"]  # a few ulps of float32; the loop compounds them, still far below a wrong term
    for a, b in zip(outs, cpu_outs):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * float(np.max(np.abs(b))))
    for n, g in got.items():
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, cpu_got[n], rtol=rtol, atol=rtol * float(np.max(np.abs(cpu_got[n]))))


@pytest.mark.parametrize("grad", [False, True], ids=["primal", "forward"])
@pytest.mark.parametrize("device", DEVICES)
def test_torch_tensors_cross_without_copies(device, grad, monkeypatch):
    """A kernel reads the tensors it only reads on their own memory (NumPy views on the CPU, CuPy on CUDA),
    runs on a copy of what it writes, and returns that copy as the output tensor, not copied again."""
    seen = _record(monkeypatch)
    op = gk.interop.torch_function(stencil, "un")
    rng = np.random.default_rng(3)
    u = torch.from_numpy(rng.uniform(-0.5, 0.5, N)).to(device).requires_grad_(grad)
    un = torch.zeros(N, dtype=torch.float64, device=device)
    c = torch.tensor(0.2, dtype=torch.float64, device=device, requires_grad=grad)
    out = op(u, un, c, 0.01)
    (args,) = seen
    kind = np.ndarray if device == "cpu" else cupy.ndarray
    assert isinstance(args[0], kind) and isinstance(args[1], kind)
    assert _ptr(args[0]) == u.data_ptr()  # read only: the tensor's own memory
    assert _ptr(args[1]) != un.data_ptr()  # written: a copy
    assert out.data_ptr() == _ptr(args[1]) and out.device == u.device  # the copy is the output
    assert not un.any()  # the caller's tensor is unchanged
    assert out.requires_grad == grad
    want = np.zeros(N)
    gk.launch(stencil, N, u.detach().cpu().numpy(), want, 0.2, 0.01)
    np.testing.assert_allclose(out.detach().cpu().numpy(), want, rtol=RTOL["float64"], atol=1e-15)
    if grad:
        du, dc = torch.autograd.grad(out, [u, c], torch.ones_like(out))
        assert du.device == u.device and dc.device == c.device and dc.dim() == 0
        assert torch.isfinite(du).all() and du.abs().max() > 0


@pytest.mark.parametrize("device", DEVICES)
def test_torch_a_programs_arrays_are_all_copies(device, monkeypatch):
    """A program writes what it writes only when it runs: every array runs on a copy, and its outputs are copied
    again (its reverse rewinds them)."""
    seen = _record(monkeypatch)
    as_tuple, args = torch_operation("pingpong")
    ts = tensors(args, device)
    outs = as_tuple(*ts)
    (run,) = seen
    arrays = [(t, a) for t, a in zip(ts, run) if isinstance(t, torch.Tensor) and t.dim() >= 1]
    assert arrays and all(_ptr(a) != t.data_ptr() for t, a in arrays)
    assert all(o.data_ptr() not in {_ptr(a) for _, a in arrays} for o in outs)
    assert all(o.device == ts[0].device for o in outs)
    sum(o.sum() for o in outs).backward()  # the forward's tape taken, none left waiting for another test to see
    assert ts[0].grad.device == ts[0].device and len(A.PENDING) == 0


@on_cuda
def test_torch_launches_run_on_torchs_current_stream():
    """Every gradkern launch of the forward and of the backward runs on torch's current stream of the
    tensors' device (a side stream here), the result right once that stream is waited for. The launches are
    watched through runtime/call.py's `observing` (docs/prepared-call.md), called after each launch in the
    launching thread (torch runs a CUDA backward in a thread of its own)."""
    from gradkern.runtime.call import observing
    launches: list = []

    def watch(run, dim, seconds):
        launches.append((run.spec.backend, cupy.cuda.get_current_stream().ptr,
                         torch.cuda.current_stream().cuda_stream))

    op = gk.interop.torch_function(stencil, "un")
    rng = np.random.default_rng(4)
    u_host, w_host = rng.uniform(-0.5, 0.5, N), rng.standard_normal(N)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with observing(watch), torch.cuda.stream(side):
        u = torch.from_numpy(u_host).cuda().requires_grad_()
        c = torch.tensor(0.2, dtype=torch.float64, device="cuda", requires_grad=True)
        w = torch.from_numpy(w_host).cuda()
        out = op(u, torch.zeros(N, dtype=torch.float64, device="cuda"), c, 0.01)
        forward = list(launches)
        du, dc = torch.autograd.grad(out, [u, c], w)
    side.synchronize()
    assert forward and {b for b, _, _ in launches} == {"cuda"}
    assert {ours for _, ours, _ in forward} == {side.cuda_stream} != {0}
    backward = launches[len(forward):]
    assert backward and all(ours == torchs for _, ours, torchs in backward)  # torch's current stream, in its thread
    cpu = gk.interop.torch_function(stencil, "un")
    uc = torch.from_numpy(u_host).requires_grad_()
    cc = torch.tensor(0.2, dtype=torch.float64, requires_grad=True)
    outc = cpu(uc, torch.zeros(N, dtype=torch.float64), cc, 0.01)
    duc, dcc = torch.autograd.grad(outc, [uc, cc], torch.from_numpy(w_host))
    rtol = RTOL["float64"]
    np.testing.assert_allclose(out.detach().cpu().numpy(), outc.detach().numpy(), rtol=rtol, atol=1e-15)
    np.testing.assert_allclose(du.cpu().numpy(), duc.numpy(), rtol=rtol, atol=rtol * float(duc.abs().max()))
    assert float(dc) == pytest.approx(float(dcc), rel=rtol * N)  # a sum of N terms in another order


@on_cuda
def test_torch_an_active_scalar_on_the_cpu_beside_cuda_arrays():
    """A 0-d Active scalar may live on either device: its derivative comes back on its own device, equal to
    the one it has on CUDA."""
    op = gk.interop.torch_function(stencil, "un")
    u_host = np.random.default_rng(5).uniform(-0.5, 0.5, N)
    got = []
    for where in ("cpu", "cuda"):
        u = torch.from_numpy(u_host).cuda().requires_grad_()
        c = torch.tensor(0.2, dtype=torch.float64, device=where, requires_grad=True)
        out = op(u, torch.zeros(N, dtype=torch.float64, device="cuda"), c, 0.01)
        du, dc = torch.autograd.grad((out ** 2).sum(), [u, c])
        assert out.device.type == "cuda" and du.device.type == "cuda" and dc.device.type == where
        got.append((du.cpu().numpy(), float(dc)))
    # the same launches on the same arrays; the reverse's atomic adds land in any order on a GPU
    rtol = RTOL["float64"]
    np.testing.assert_allclose(got[0][0], got[1][0], rtol=rtol, atol=rtol * float(np.max(np.abs(got[1][0]))))
    assert got[0][1] == pytest.approx(got[1][1], rel=rtol * N)  # a sum of N terms in another order


@pytest.mark.parametrize("other", [pytest.param("meta", id="meta"),
                                   pytest.param("cuda", id="cuda", marks=on_cuda)])
def test_torch_arrays_on_two_devices_are_refused_by_name(other):
    """gradkern runs a call on one device: a CPU tensor beside one on `other` is refused, naming both, before
    anything runs (a `meta` tensor has no memory, so nothing could have)."""
    op = gk.interop.torch_function(stencil, "un")
    u = torch.from_numpy(np.random.default_rng(6).uniform(-0.5, 0.5, N)).requires_grad_()
    before = u.detach().clone()
    un = torch.zeros(N, dtype=torch.float64, device=other)
    c = torch.tensor(0.2, dtype=torch.float64, requires_grad=True)
    with pytest.raises(gk.InteropError, match=rf"argument 'u' is on cpu but 'un' is on {other}"):
        op(u, un, c, 0.01)
    with pytest.raises(gk.InteropError, match=rf"argument 'u' is on {other}(:0)? but 'un' is on cpu"):
        op(torch.zeros(N, dtype=torch.float64, device=other), u, c, 0.01)
    assert torch.equal(u.detach(), before) and u.grad is None and c.grad is None


@on_cuda
@pytest.mark.skipif(not torch_op.CUSTOM_OPS, reason="this torch has no torch.library.custom_op (torch < 2.4)")
def test_torch_compile_fullgraph_on_cuda_tensors():
    """torch.compile(fullgraph=True) traces the custom ops on CUDA tensors (aot_eager: the graphs inductor
    gets; the CPU twin is tests/interop/test_interop_torch.py's) and gives the eager gradients."""
    as_tuple, args = torch_operation("pingpong")
    ts = tensors(args, "cuda")

    def loss(u, c):
        u_final, e = as_tuple(u, ts[1], ts[2], c, 3)
        return e.sum() + (u_final ** 2).sum()
    eager = torch.autograd.grad(loss(ts[0], ts[3]), [ts[0], ts[3]])
    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    got = torch.autograd.grad(compiled(ts[0], ts[3]), [ts[0], ts[3]])
    for g, e in zip(got, eager):
        assert g.device.type == "cuda"
        # the same launches on the same values; the loss's own sums are torch's, reduced the same way
        torch.testing.assert_close(g, e, rtol=1e-13, atol=1e-15)


# ---- JAX ------------------------------------------------------------------------------------------------------------

jax = pytest.importorskip("jax", reason="JAX is not installed (pip install 'gradkern[jax]')")
jnp = pytest.importorskip("jax.numpy")


def _jax_gpu():
    try:
        return jax.devices("gpu")[0]
    except Exception:  # no CUDA plugin, or no GPU: JAX raises RuntimeError (its wording varies by version)
        return None


JAX_GPU = _jax_gpu()
PLATFORMS = [pytest.param("cpu", id="cpu"),
             pytest.param("gpu", id="gpu", marks=pytest.mark.skipif(JAX_GPU is None, reason="JAX sees no GPU"))]


def jax_run(name, platform):
    """The outputs, the vjp of random cotangents and jit(grad) of a scalar loss, on arrays committed to the
    first device of `platform`; every result on the host, with the device it came back on."""
    device = jax.devices(platform)[0]
    _, as_tuple, args = operation(name, gk.interop.jax_function)
    diff = differentiable(args)
    put = [jax.device_put(jnp.asarray(a), device) if isinstance(a, np.ndarray) else a for a in args]

    def of_diff(*xs):
        full = list(put)
        for n, x in zip(diff, xs):
            full[n] = x
        return as_tuple(*full)
    outs, vjp = jax.vjp(of_diff, *(put[n] for n in diff))
    rng = np.random.default_rng(9)
    weights = [rng.standard_normal(o.shape) for o in outs]
    got = vjp(tuple(jax.device_put(jnp.asarray(w), device) for w in weights))
    loss = jax.jit(jax.grad(lambda *xs: sum(jnp.sum(o ** 2) for o in of_diff(*xs)), argnums=tuple(range(len(diff)))))
    grads = loss(*(put[n] for n in diff))
    where = {d.platform for r in (*outs, *got, *grads) for d in r.devices()}
    return ([np.asarray(o) for o in outs], [np.asarray(g) for g in got], [np.asarray(g) for g in grads], where,
            args, weights, as_tuple)


@pytest.mark.parametrize("name", ["stencil", "pingpong"])
@pytest.mark.parametrize("platform", PLATFORMS)
def test_jax_on_the_device_runs_on_the_host_and_gives_the_cpu_run(name, platform, x64, monkeypatch):
    """JAX operations run gradkern on the host through jax.pure_callback whatever JAX's device: the launches
    get NumPy arrays, the results come back on the arrays' device, and they are the CPU run's bit for bit
    (the same host computation on the same values), the vjp against central differences."""
    seen = _record(monkeypatch)
    outs, got, grads, where, args, weights, as_tuple = jax_run(name, platform)
    assert where == {platform}
    assert seen and all(not hasattr(a, "shape") or isinstance(a, np.ndarray) for run in seen for a in run)
    reference = central_differences(lambda *a: [np.asarray(o) for o in as_tuple(*a)], args, weights)
    for n, g in zip(differentiable(args), got):
        np.testing.assert_allclose(g, reference[n], rtol=1e-6, atol=1e-8, err_msg=f"{name} on {platform}: {n}")
    if platform != "cpu":
        cpu_outs, cpu_got, cpu_grads, *_ = jax_run(name, "cpu")
        for a, b in zip(outs + got, cpu_outs + cpu_got):  # gradkern's own results: the same host computation
            np.testing.assert_array_equal(a, b)
        for a, b in zip(grads, cpu_grads):  # the loss's squares and sums are XLA's, on the GPU: ulps apart
            np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-14 * float(np.max(np.abs(b))))
    assert len(A.PENDING) == 0  # every forward's call was taken by its backward
