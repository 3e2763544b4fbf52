"""The CUDA backend on a device (tests/support/devices.py: CuPy on a GPU, hostcuda on the host): the whole primal and
reverse-mode test matrix equals the CPU backend (float64 to 1e-12 relative, float32 to 1e-5), racy launches are
refused with every buffer unchanged, split reverse mode and strided views work.

The corpus-wide comparisons run on CuPy here; on hostcuda the same signatures (tests/support/signatures.py's
all_signatures) are test_hostcuda.py's differential test, bit for bit where the order of sums allows. The
other tests run on both devices."""

from __future__ import annotations

import numpy as np
import pytest
from support.corpus import CORPUS
from support.devices import CUPY, HAS_GPU
from support.signatures import RACY, corpus_args, reverse_cases

import gradkern as gk

pytestmark = pytest.mark.gpu
# the corpus-wide tests: CuPy only (their hostcuda twin is test_hostcuda.py's differential test)
on_gpu = pytest.mark.skipif(not HAS_GPU, reason="no CUDA GPU (CuPy); on hostcuda these signatures run in "
                                                  "test_hostcuda.py::test_signature_on_hostcuda_equals_cpu")

RTOL = {"float32": 1e-5, "float64": 1e-12}
CASES = {c.name: c for c in CORPUS}


def assert_close(device, got, want, what: str, atol_scale: bool = False):
    got, want = np.asarray(device.host(got)), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, what
    if got.dtype.kind in "ib":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    rtol = RTOL[got.dtype.name]
    # sums in another order: errors scale with the largest term, not with the result
    atol = rtol * float(np.max(np.abs(want))) if atol_scale and want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


@on_gpu
@pytest.mark.parametrize("name, dtype", [(c.name, np.dtype(dt).name) for c in CORPUS for dt in c.dtypes])
def test_corpus_primal_on_gpu_equals_cpu(name, dtype):
    case = CASES[name]
    cpu = corpus_args(case, dtype)
    gpu = tuple(CUPY.to(a) for a in corpus_args(case, dtype))
    gk.launch(case.kernel, case.dim(cpu), *cpu)
    gk.launch(case.kernel, case.dim(cpu), *gpu)
    for n, (g, c) in enumerate(zip(gpu, cpu)):
        if isinstance(c, np.ndarray):
            assert_close(CUPY, g, c, f"{name}[{dtype}] argument {n}",
                         atol_scale=case.reduction or case.transcendental)


def _device_args(device, args: tuple) -> tuple:
    out = []
    for a in args:
        if isinstance(a, gk.Duplicated):
            out.append(type(a)(device.to(a.val), device.to(a.dval)))
        elif isinstance(a, gk.Const):
            out.append(gk.Const(device.to(a.val)))
        else:
            out.append(a)
    return tuple(out)


def _copy(args: tuple) -> tuple:
    def c(x):
        return x.copy() if isinstance(x, np.ndarray) else x
    out = []
    for a in args:
        if isinstance(a, gk.Duplicated):
            out.append(type(a)(c(a.val), c(a.dval)))
        elif isinstance(a, gk.Const) and isinstance(a.val, np.ndarray):
            out.append(gk.Const(a.val.copy()))
        else:
            out.append(a)
    return tuple(out)


REVERSE = {label: (kernel, args, dim) for label, kernel, args, dim in reverse_cases()}


def _seeded(args: tuple, rng) -> tuple:
    """Shadows seeded with random values (never zeros): every accumulation shows."""
    return tuple(type(a)(a.val, rng.uniform(-1, 1, a.val.shape).astype(a.val.dtype))
                 if isinstance(a, gk.Duplicated) else a for a in args)


@on_gpu
@pytest.mark.parametrize("label", sorted(REVERSE))
def test_reverse_on_gpu_equals_cpu(label):
    kernel, args, dim = REVERSE[label]
    args = _seeded(args, np.random.default_rng(11))
    cpu = _copy(args)
    gpu = _device_args(CUPY, _copy(args))
    want = gk.autodiff(kernel, *cpu, dim=dim)
    got = gk.autodiff(kernel, *gpu, dim=dim)
    for n, (g, c) in enumerate(zip(gpu, cpu)):
        what = f"{label} argument {n}"
        if isinstance(c, gk.Duplicated):
            assert_close(CUPY, g.val, c.val, what + " (primal)", atol_scale=True)
            assert_close(CUPY, g.dval, c.dval, what + " (shadow)", atol_scale=True)
        elif isinstance(c, gk.Const) and isinstance(c.val, np.ndarray):
            assert_close(CUPY, g.val, c.val, what)
    for n, (g, c) in enumerate(zip(got, want)):
        if c is None:
            assert g is None
        else:
            tol = RTOL["float32" if any(getattr(getattr(a, "val", None), "dtype", None) == np.float32
                                        for a in args) else "float64"]
            assert g == pytest.approx(c, rel=tol * 10, abs=tol * 10), f"{label}: Active argument {n}"


@pytest.mark.parametrize("label", [r[0] for r in RACY])
def test_racy_launches_are_refused_on_gpu_with_buffers_unchanged(label, device):
    _, kernel, dim, make = next(r for r in RACY if r[0] == label)
    args = tuple(device.to(a) for a in make(np.random.default_rng(3)))
    arrays = [a for a in args if isinstance(a, device.array)]
    before = [device.host(a).copy() for a in arrays]
    with pytest.raises(gk.RaceError) as info, device.running():
        gk.launch(kernel, dim, *args)
    assert str(info.value).count("thread (") == 2 and "test_races.py:" in str(info.value)
    for a, b in zip(arrays, before):
        np.testing.assert_array_equal(device.host(a), b)


def test_run_time_checked_launches_that_do_not_race_run_on_gpu(device):
    """Race-free launches the static analysis cannot prove: the device check passes them."""
    from analysis import test_races
    rng = np.random.default_rng(8)
    n = 100_000
    x, y = rng.uniform(0.5, 1.5, n), np.zeros(n)
    idx = rng.permutation(n)
    xd, yd = device.to(x), device.to(y)
    xs = rng.uniform(0.1, 0.4, 64)  # x * 2 <= 1: no thread reaches the scatter
    xsd, ysd = device.to(xs), device.xp.zeros(64)
    with device.running():
        gk.launch(test_races.scatter, n, xd, device.to(idx), yd)
        gk.launch(test_races.data_dependent_target, 64, xsd, device.xp.zeros(64, np.int64), ysd)
    y[idx] = x
    np.testing.assert_array_equal(device.host(yd), y)
    np.testing.assert_array_equal(device.host(xsd), 2 * xs)


def test_launches_past_their_arrays_are_refused_on_gpu_with_buffers_unchanged(device):
    """Bounds proved at launch (docs/kernel-language.md): by the proof, and by the exact check on the device."""
    from analysis import test_bounds_proof
    from runtime.test_bad_input import saxpy
    rng = np.random.default_rng(4)
    xbuf, ybuf = device.to(rng.uniform(0.5, 1.5, 16)), device.to(rng.uniform(0.5, 1.5, 16))
    x0, y0 = device.host(xbuf).copy(), device.host(ybuf).copy()
    x, y = device.to(rng.uniform(0.5, 1.5, 8)), device.xp.zeros(8)
    with device.running():
        with pytest.raises(gk.LaunchError, match=r"thread \(8,\) reads x\[i\]"):
            gk.launch(saxpy, 13, 2.0, xbuf[:8], ybuf[:8])
        np.testing.assert_array_equal(device.host(xbuf), x0)
        np.testing.assert_array_equal(device.host(ybuf), y0)
        gk.launch(test_bounds_proof.bp_data_guard, 8, x, y)  # the guard is never taken
        x[7] = 11.0
        with pytest.raises(gk.LaunchError, match=r"thread \(7,\) writes y\[\(i \+ 1\)\].*no buffer was changed"):
            gk.launch(test_bounds_proof.bp_data_guard, 8, x, y)
    np.testing.assert_array_equal(device.host(y), np.zeros(8))


def test_racy_reverse_is_refused_on_gpu(device):
    from analysis import test_races
    u = device.to(np.random.default_rng(0).uniform(0.5, 1.5, 8))
    du = device.to(np.random.default_rng(1).uniform(0.5, 1.5, 8))
    u0, du0 = device.host(u).copy(), device.host(du).copy()
    with pytest.raises(gk.RaceError), device.running():
        gk.autodiff(test_races.inplace_stencil, gk.Duplicated(u, du))
    np.testing.assert_array_equal(device.host(u), u0)
    np.testing.assert_array_equal(device.host(du), du0)


def test_split_reverse_on_gpu_equals_fused(device):
    from gradkern.kernels.stencils import allen_cahn_step
    rng = np.random.default_rng(4)
    u, un, dun = (device.to(rng.uniform(0.2, 1.0, 1000)) for _ in range(3))
    du1, du2 = device.xp.zeros(1000), device.xp.zeros(1000)
    dun1, dun2 = dun.copy(), dun.copy()
    with device.running():
        g1 = gk.autodiff(allen_cahn_step, gk.Duplicated(u, du1), gk.Duplicated(un.copy(), dun1), gk.Active(0.2),
                         0.01)
        fwd, rev = gk.autodiff_thunk(allen_cahn_step, gk.Duplicated, gk.Duplicated, gk.Active, gk.Const)
        args = (gk.Duplicated(u, du2), gk.Duplicated(un.copy(), dun2), gk.Active(0.2), gk.Const(0.01))
        tape = fwd(*args)
        assert isinstance(tape.values, device.array)
        g2 = rev(*args, tape)
    np.testing.assert_allclose(device.host(du1), device.host(du2), rtol=1e-12)
    assert g1[2] == pytest.approx(g2[2], rel=1e-12)


def test_large_launch_uses_the_grid_stride_loop(device):
    """More threads than one grid holds: every element is still written once."""
    from gradkern.kernels.blas import saxpy
    n = 3_000_000
    x = device.xp.arange(n, dtype=np.float64)
    y = device.xp.ones(n)
    with device.running():
        gk.launch(saxpy, n, 2.0, x, y)
    np.testing.assert_array_equal(device.host(y), 2.0 * np.arange(n) + 1.0)


@on_gpu
def test_mixing_numpy_and_cupy_is_refused():
    """Two memory spaces: CuPy only (hostcuda's arrays are NumPy's)."""
    from gradkern.kernels.blas import saxpy
    cupy = CUPY.xp
    y = np.ones(4)
    with pytest.raises(gk.LaunchError, match="mix"):
        gk.launch(saxpy, 4, 2.0, cupy.ones(4), y)
    with pytest.raises(gk.AnnotationError):
        gk.autodiff(saxpy, gk.Active(2.0), gk.Duplicated(cupy.ones(4), np.ones(4)),
                    gk.Duplicated(cupy.ones(4), cupy.ones(4)))


def test_partial_overlap_of_device_views_is_refused(device):
    @gk.kernel
    def shift(x, y):
        i = gk.tid()
        y[i] = x[i] * 2.0

    base = device.xp.arange(10, dtype=np.float64)
    before = device.host(base).copy()
    with device.running():
        with pytest.raises(gk.AliasingError):
            gk.launch(shift, 5, base[0:5], base[2:7])
        np.testing.assert_array_equal(device.host(base), before)
        gk.launch(shift, 5, base[0:10:2], base[1:10:2])  # interleaved views share no element
    np.testing.assert_array_equal(device.host(base)[1::2], 2 * before[0::2])


@on_gpu
@pytest.mark.parametrize("label", sorted(REVERSE))
def test_forward_mode_on_gpu_equals_cpu(label):
    kernel, args, dim = REVERSE[label]
    rng = np.random.default_rng(12)
    fwd = []
    for a in args:
        if isinstance(a, gk.Duplicated):
            fwd.append(gk.Duplicated(a.val, rng.uniform(-1, 1, a.val.shape).astype(a.val.dtype)))
        elif isinstance(a, gk.Active):
            fwd.append(gk.Duplicated(a.val, float(rng.uniform(-1, 1))))
        else:
            fwd.append(a)
    cpu = _copy(tuple(fwd))
    gpu = _device_args(CUPY, _copy(tuple(fwd)))
    assert gk.autodiff(kernel, *cpu, dim=dim, mode=gk.Forward) is None
    assert gk.autodiff(kernel, *gpu, dim=dim, mode=gk.Forward) is None
    for n, (g, c) in enumerate(zip(gpu, cpu)):
        if isinstance(c, gk.Duplicated) and isinstance(c.val, np.ndarray):
            assert_close(CUPY, g.val, c.val, f"{label} argument {n} (primal)", atol_scale=True)
            assert_close(CUPY, g.dval, c.dval, f"{label} argument {n} (tangent)", atol_scale=True)


@pytest.mark.parametrize("mode", [gk.Reverse, gk.Forward], ids=["reverse", "forward"])
@pytest.mark.parametrize("label", ["reverse/allen_cahn", "reverse/heat_2d", "reverse/matvec", "reverse/loop_sin",
                                   "reverse/scatter_hist", "hpc/lud_col", "reverse/saxpy"])
def test_batch_on_gpu_equals_separate_calls(label, mode, device):
    kernel, args, dim = REVERSE[label]
    rng = np.random.default_rng(13)
    k = 3
    seeds = [None if not isinstance(a, (gk.Duplicated, gk.Active)) or (isinstance(a, gk.Active) and mode is gk.Reverse)
             else [rng.uniform(-1, 1, a.val.shape).astype(a.val.dtype) if isinstance(a, gk.Duplicated)
                   else float(rng.uniform(-1, 1)) for _ in range(k)] for a in args]

    def plain(a):
        return gk.Const(device.to(a.val)) if isinstance(a, gk.Const) else a

    def val(a):
        return device.to(a.val.copy()) if isinstance(a.val, np.ndarray) else a.val

    separate = []
    with device.running():
        for lane in range(k):
            call = [plain(a) if s is None else gk.Duplicated(val(a), device.to(s[lane])) for a, s in zip(args, seeds)]
            separate.append((call, gk.autodiff(kernel, *call, dim=dim, mode=mode)))
        call = [plain(a) if s is None else gk.BatchDuplicated(val(a), tuple(device.to(x) for x in s))
                for a, s in zip(args, seeds)]
        res = gk.autodiff(kernel, *call, dim=dim, mode=mode)
    checked = 0
    for n, c in enumerate(call):
        if isinstance(c, gk.BatchDuplicated) and isinstance(c.val, device.array):
            for lane in range(k):
                np.testing.assert_allclose(device.host(c.dvals[lane]), device.host(separate[lane][0][n].dval),
                                           rtol=1e-12, atol=1e-13)
                checked += 1
    if mode is gk.Reverse:
        for n, r in enumerate(res):
            if r is not None:
                assert r == pytest.approx(tuple(s[1][n] for s in separate), rel=1e-12, abs=1e-13)
                checked += 1
    assert checked


def test_jacobian_on_gpu(device):
    from gradkern.kernels.stencils import allen_cahn_step
    rng = np.random.default_rng(5)
    u = rng.uniform(0.2, 1, 9)
    J_cpu = gk.jacobian(allen_cahn_step, u, np.zeros(9), 0.2, 0.01, wrt="u")["un"]
    with device.running():
        J_gpu = gk.jacobian(allen_cahn_step, device.to(u), device.xp.zeros(9), 0.2, 0.01, wrt="u")["un"]
    assert isinstance(J_gpu, device.array)
    np.testing.assert_allclose(device.host(J_gpu), J_cpu, rtol=1e-12)
