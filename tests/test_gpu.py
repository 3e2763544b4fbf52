"""The CUDA backend on a GPU (CuPy arrays): the whole primal and reverse-mode
test matrix equals the CPU backend (float64 to 1e-12 relative, float32 to
1e-5), racy launches are refused with every buffer unchanged, split reverse
mode and strided views work. Skipped where there is no GPU."""

from __future__ import annotations

import numpy as np
import pytest
from corpus import CORPUS
from signatures import RACY, corpus_args, reverse_cases

import gradkern as gk

cupy = pytest.importorskip("cupy")
try:
    _HAS_GPU = cupy.cuda.runtime.getDeviceCount() > 0
except Exception:  # no driver
    _HAS_GPU = False
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _HAS_GPU, reason="no CUDA GPU")]

RTOL = {"float32": 1e-5, "float64": 1e-12}
CASES = {c.name: c for c in CORPUS}


def to_device(a):
    """A CuPy array with the same layout as NumPy array `a` (views keep their strides)."""
    if not isinstance(a, np.ndarray):
        return a
    if a.flags.c_contiguous:
        return cupy.asarray(a)
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    root_d = cupy.asarray(np.ascontiguousarray(root))
    offset = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    d = cupy.ndarray(a.shape, a.dtype, root_d.data + offset, strides=a.strides)
    assert np.array_equal(d.get(), a)
    return d


def host(a):
    return a.get() if isinstance(a, cupy.ndarray) else a


def assert_close(got, want, what: str, atol_scale: bool = False):
    got, want = np.asarray(host(got)), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, what
    if got.dtype.kind in "ib":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    rtol = RTOL[got.dtype.name]
    # sums in another order: errors scale with the largest term, not with the result
    atol = rtol * float(np.max(np.abs(want))) if atol_scale and want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


@pytest.mark.parametrize("name, dtype", [(c.name, np.dtype(dt).name) for c in CORPUS for dt in c.dtypes])
def test_corpus_primal_on_gpu_equals_cpu(name, dtype):
    case = CASES[name]
    cpu = corpus_args(case, dtype)
    gpu = tuple(to_device(a) for a in corpus_args(case, dtype))
    gk.launch(case.kernel, case.dim(cpu), *cpu)
    gk.launch(case.kernel, case.dim(cpu), *gpu)
    for n, (g, c) in enumerate(zip(gpu, cpu)):
        if isinstance(c, np.ndarray):
            assert_close(g, c, f"{name}[{dtype}] argument {n}", atol_scale=case.reduction or case.transcendental)


def _device_args(args: tuple) -> tuple:
    out = []
    for a in args:
        if isinstance(a, gk.Duplicated):
            out.append(type(a)(to_device(a.val), to_device(a.dval)))
        elif isinstance(a, gk.Const):
            out.append(gk.Const(to_device(a.val)))
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


@pytest.mark.parametrize("label", sorted(REVERSE))
def test_reverse_on_gpu_equals_cpu(label):
    kernel, args, dim = REVERSE[label]
    args = _seeded(args, np.random.default_rng(11))
    cpu = _copy(args)
    gpu = _device_args(_copy(args))
    want = gk.autodiff(kernel, *cpu, dim=dim)
    got = gk.autodiff(kernel, *gpu, dim=dim)
    for n, (g, c) in enumerate(zip(gpu, cpu)):
        what = f"{label} argument {n}"
        if isinstance(c, gk.Duplicated):
            assert_close(g.val, c.val, what + " (primal)", atol_scale=True)
            assert_close(g.dval, c.dval, what + " (shadow)", atol_scale=True)
        elif isinstance(c, gk.Const) and isinstance(c.val, np.ndarray):
            assert_close(g.val, c.val, what)
    for n, (g, c) in enumerate(zip(got, want)):
        if c is None:
            assert g is None
        else:
            tol = RTOL["float32" if any(getattr(getattr(a, "val", None), "dtype", None) == np.float32
                                        for a in args) else "float64"]
            assert g == pytest.approx(c, rel=tol * 10, abs=tol * 10), f"{label}: Active argument {n}"


@pytest.mark.parametrize("label", [r[0] for r in RACY])
def test_racy_launches_are_refused_on_gpu_with_buffers_unchanged(label):
    _, kernel, dim, make = next(r for r in RACY if r[0] == label)
    args = tuple(to_device(a) for a in make(np.random.default_rng(3)))
    before = [host(a).copy() for a in args if isinstance(a, cupy.ndarray)]
    with pytest.raises(gk.RaceError) as info:
        gk.launch(kernel, dim, *args)
    assert str(info.value).count("thread (") == 2 and "test_races.py:" in str(info.value)
    for a, b in zip([a for a in args if isinstance(a, cupy.ndarray)], before):
        np.testing.assert_array_equal(host(a), b)


def test_run_time_checked_launches_that_do_not_race_run_on_gpu():
    """Race-free launches the static analysis cannot prove: the device check passes them."""
    import test_races
    rng = np.random.default_rng(8)
    n = 100_000
    x, y = rng.uniform(0.5, 1.5, n), np.zeros(n)
    idx = rng.permutation(n)
    xd, yd = cupy.asarray(x), cupy.asarray(y)
    gk.launch(test_races.scatter, n, xd, cupy.asarray(idx), yd)
    y[idx] = x
    np.testing.assert_array_equal(yd.get(), y)
    xs = rng.uniform(0.1, 0.4, 64)  # x * 2 <= 1: no thread reaches the scatter
    xsd, ysd = cupy.asarray(xs), cupy.zeros(64)
    gk.launch(test_races.data_dependent_target, 64, xsd, cupy.zeros(64, np.int64), ysd)
    np.testing.assert_array_equal(xsd.get(), 2 * xs)


def test_launches_past_their_arrays_are_refused_on_gpu_with_buffers_unchanged():
    """Bounds proved at launch (DESIGN §3): by the proof, and by the exact check on the device."""
    import test_bounds_proof
    from test_errors import saxpy
    rng = np.random.default_rng(4)
    xbuf, ybuf = cupy.asarray(rng.uniform(0.5, 1.5, 16)), cupy.asarray(rng.uniform(0.5, 1.5, 16))
    x0, y0 = xbuf.get(), ybuf.get()
    with pytest.raises(gk.LaunchError, match=r"thread \(8,\) reads x\[i\]"):
        gk.launch(saxpy, 13, 2.0, xbuf[:8], ybuf[:8])
    np.testing.assert_array_equal(xbuf.get(), x0)
    np.testing.assert_array_equal(ybuf.get(), y0)
    x, y = cupy.asarray(rng.uniform(0.5, 1.5, 8)), cupy.zeros(8)
    gk.launch(test_bounds_proof.bp_data_guard, 8, x, y)  # the guard is never taken
    x[7] = 11.0
    with pytest.raises(gk.LaunchError, match=r"thread \(7,\) writes y\[\(i \+ 1\)\].*no buffer was changed"):
        gk.launch(test_bounds_proof.bp_data_guard, 8, x, y)
    np.testing.assert_array_equal(y.get(), np.zeros(8))


def test_racy_reverse_is_refused_on_gpu():
    import test_races
    u = cupy.asarray(np.random.default_rng(0).uniform(0.5, 1.5, 8))
    du = cupy.asarray(np.random.default_rng(1).uniform(0.5, 1.5, 8))
    u0, du0 = u.get(), du.get()
    with pytest.raises(gk.RaceError):
        gk.autodiff(test_races.inplace_stencil, gk.Duplicated(u, du))
    np.testing.assert_array_equal(u.get(), u0)
    np.testing.assert_array_equal(du.get(), du0)


def test_split_reverse_on_gpu_equals_fused():
    from gradkern.kernels.stencils import allen_cahn_step
    rng = np.random.default_rng(4)
    u, un, dun = (cupy.asarray(rng.uniform(0.2, 1.0, 1000)) for _ in range(3))
    du1, du2 = cupy.zeros(1000), cupy.zeros(1000)
    dun1, dun2 = dun.copy(), dun.copy()
    g1 = gk.autodiff(allen_cahn_step, gk.Duplicated(u, du1), gk.Duplicated(un.copy(), dun1), gk.Active(0.2), 0.01)
    fwd, rev = gk.autodiff_thunk(allen_cahn_step, gk.Duplicated, gk.Duplicated, gk.Active, gk.Const)
    args = (gk.Duplicated(u, du2), gk.Duplicated(un.copy(), dun2), gk.Active(0.2), gk.Const(0.01))
    tape = fwd(*args)
    assert isinstance(tape.values, cupy.ndarray)
    g2 = rev(*args, tape)
    cupy.testing.assert_allclose(du1, du2, rtol=1e-12)
    assert g1[2] == pytest.approx(g2[2], rel=1e-12)


def test_large_launch_uses_the_grid_stride_loop():
    """More threads than one grid holds: every element is still written once."""
    from gradkern.kernels.blas import saxpy
    n = 3_000_000
    x = cupy.arange(n, dtype=cupy.float64)
    y = cupy.ones(n)
    gk.launch(saxpy, n, 2.0, x, y)
    cupy.testing.assert_array_equal(y, 2.0 * cupy.arange(n) + 1.0)


def test_mixing_numpy_and_cupy_is_refused():
    from gradkern.kernels.blas import saxpy
    y = np.ones(4)
    with pytest.raises(gk.LaunchError, match="mix"):
        gk.launch(saxpy, 4, 2.0, cupy.ones(4), y)
    with pytest.raises(gk.AnnotationError):
        gk.autodiff(saxpy, gk.Active(2.0), gk.Duplicated(cupy.ones(4), np.ones(4)),
                    gk.Duplicated(cupy.ones(4), cupy.ones(4)))


def test_partial_overlap_of_device_views_is_refused():
    @gk.kernel
    def shift(x, y):
        i = gk.tid()
        y[i] = x[i] * 2.0

    base = cupy.arange(10, dtype=cupy.float64)
    before = base.get()
    with pytest.raises(gk.AliasingError):
        gk.launch(shift, 5, base[0:5], base[2:7])
    np.testing.assert_array_equal(base.get(), before)
    gk.launch(shift, 5, base[0:10:2], base[1:10:2])  # interleaved views share no element
    np.testing.assert_array_equal(base.get()[1::2], 2 * before[0::2])


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
    gpu = _device_args(_copy(tuple(fwd)))
    assert gk.autodiff(kernel, *cpu, dim=dim, mode=gk.Forward) is None
    assert gk.autodiff(kernel, *gpu, dim=dim, mode=gk.Forward) is None
    for n, (g, c) in enumerate(zip(gpu, cpu)):
        if isinstance(c, gk.Duplicated) and isinstance(c.val, np.ndarray):
            assert_close(g.val, c.val, f"{label} argument {n} (primal)", atol_scale=True)
            assert_close(g.dval, c.dval, f"{label} argument {n} (tangent)", atol_scale=True)


@pytest.mark.parametrize("mode", [gk.Reverse, gk.Forward], ids=["reverse", "forward"])
@pytest.mark.parametrize("label", ["reverse/allen_cahn", "reverse/heat_2d", "reverse/matvec", "reverse/loop_sin",
                                   "reverse/scatter_hist", "hpc/lud_col", "reverse/saxpy"])
def test_batch_on_gpu_equals_separate_calls(label, mode):
    kernel, args, dim = REVERSE[label]
    rng = np.random.default_rng(13)
    k = 3
    seeds = [None if not isinstance(a, (gk.Duplicated, gk.Active)) or (isinstance(a, gk.Active) and mode is gk.Reverse)
             else [rng.uniform(-1, 1, a.val.shape).astype(a.val.dtype) if isinstance(a, gk.Duplicated)
                   else float(rng.uniform(-1, 1)) for _ in range(k)] for a in args]

    def dev(x):
        return to_device(x) if isinstance(x, np.ndarray) else x

    def plain(a):
        return gk.Const(to_device(a.val)) if isinstance(a, gk.Const) else a

    separate = []
    for lane in range(k):
        call = [plain(a) if s is None else gk.Duplicated(dev(a.val.copy() if isinstance(a.val, np.ndarray) else a.val),
                                                         dev(s[lane])) for a, s in zip(args, seeds)]
        separate.append((call, gk.autodiff(kernel, *call, dim=dim, mode=mode)))
    call = [plain(a) if s is None else gk.BatchDuplicated(
        dev(a.val.copy() if isinstance(a.val, np.ndarray) else a.val), tuple(dev(x) for x in s))
        for a, s in zip(args, seeds)]
    res = gk.autodiff(kernel, *call, dim=dim, mode=mode)
    for n, c in enumerate(call):
        if isinstance(c, gk.BatchDuplicated) and isinstance(c.val, cupy.ndarray):
            for lane in range(k):
                cupy.testing.assert_allclose(c.dvals[lane], separate[lane][0][n].dval, rtol=1e-12, atol=1e-13)
    if mode is gk.Reverse:
        for n, r in enumerate(res):
            if r is not None:
                assert r == pytest.approx(tuple(s[1][n] for s in separate), rel=1e-12, abs=1e-13)


def test_jacobian_on_gpu():
    from gradkern.kernels.stencils import allen_cahn_step
    rng = np.random.default_rng(5)
    u = rng.uniform(0.2, 1, 9)
    J_cpu = gk.jacobian(allen_cahn_step, u, np.zeros(9), 0.2, 0.01, wrt="u")["un"]
    J_gpu = gk.jacobian(allen_cahn_step, cupy.asarray(u), cupy.zeros(9), 0.2, 0.01, wrt="u")["un"]
    assert isinstance(J_gpu, cupy.ndarray)
    cupy.testing.assert_allclose(J_gpu, J_cpu, rtol=1e-12)
