"""Arrays of 4 and 5 dimensions, loops over literal tuples and `a, b, c =
x.shape` (issue 29, item 4; docs/language.md), as ported ocean-model kernels
(Veros) write them: `salt[i, j, k, tau]`, `Ai_ez[i, j, k, ip, kr]` with
`for ip in (0, 1)`, launches over three axes. Gradients in reverse and forward
mode against finite differences (check_grad) on the Numba backend, the
reference interpreter against Numba, race proofs and the race check, bounds
proofs and the bounds check, the generated CUDA C through nvcc. CASES also
join tests/support/signatures.py's reverse cases, so every signature-wide test (CUDA
generation, nvcc, forward mode, vector mode, dead code, the GPU run) takes
them too."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gradkern as gk
from gradkern.backends.cuda import stride
from gradkern.runtime.binding import bind
from gradkern.runtime.specialize import primal_specialization
from gradkern.testing import check_grad

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


@gk.kernel
def salt_step(salt, forc, dt, tau, taup1):
    """Veros-style time level update: salt[..., taup1] from salt[..., tau], in place (thread-own elements)."""
    i, j, k = gk.tid()
    s = salt[i, j, k, tau]
    salt[i, j, k, taup1] = s + dt * (forc[i, j, k] * s - 0.5 * s * s)


@gk.kernel
def isoneutral_flux(Ai_ez, temp, flux):
    """Veros' isoneutral fluxes: a 5-D coefficient array, literal-tuple loops over the stencil's corners."""
    i, j, k = gk.tid()
    nx, ny, nz = temp.shape
    s = 0.0
    if i < nx - 1 and k < nz - 1:
        for ip in (0, 1):
            for kr in (0, 1):
                s += Ai_ez[i, j, k, ip, kr] * (temp[i + ip, j, k + kr] - temp[i, j, k])
    flux[i, j, k] = s


@gk.kernel
def column_sum5(A, w, out):
    """A 2-D launch over a 5-D array: the trailing axes are loops, `w` is read by every thread (shared)."""
    i, j = gk.tid()
    n0, n1, n2, n3, n4 = A.shape
    s = 0.0
    for k in range(n2):
        for p in range(n3):
            for r in range(n4):
                s += A[i, j, k, p, r] * w[0, 0, k, p, r] + A[i, j, k, p, r] ** 2
    out[i, j] = s * n0 / n1


@gk.kernel
def stencil4(u, un, c):
    """A stencil on axis 0 of a 4-D array under a 2-D launch, the last axis a loop."""
    i, j = gk.tid()
    for t in range(u.shape[3]):
        for k in range(u.shape[2]):
            if 0 < i and i < u.shape[0] - 1:
                un[i, j, k, t] = u[i, j, k, t] + c * (u[i - 1, j, k, t] - 2.0 * u[i, j, k, t] + u[i + 1, j, k, t])
            else:
                un[i, j, k, t] = u[i, j, k, t]


@gk.kernel
def tuple_weights(a, out, c):
    """Literal tuples of constants, names and expressions (evaluated once, before the loop)."""
    i = gk.tid()
    s = 0.0
    for w in (0.5, c, 2.0 * c, a[i] * a[i]):
        s += w * a[i]
    for off in (0, 1, -1):
        if 0 < i and i < a.shape[0] - 1:
            s += a[i + off] * c
    for off, wt in ((0, 1.5), (1, c)):  # one name per component
        if i < a.shape[0] - 1:
            s += wt * a[i + off]
    out[i] = s


@gk.kernel
def tuple_jumps(a, out):
    """break, continue and else in a loop over a tuple keep Python's meaning; the variable outlives it."""
    i = gk.tid()
    s = 0.0
    for k in (1, 2, 3, 4):
        if a[i] * k > 2.5:
            break
        if k == 2:
            continue
        s += a[i] * k
    else:
        s += 10.0 * a[i]
    out[i] = s + k * a[i]


@gk.kernel
def tuple_of_arrays(x, y, out):
    """Array parameters and functions as elements: each copy of the body reads the element itself."""
    i = gk.tid()
    s = 0.0
    for arr in (x, y):
        s += arr[i] * arr[i]
    for f in (math.sin, math.cos):
        s += f(x[i])
    out[i] = s


def _jumps_reference(x: float) -> float:
    s = 0.0
    for k in (1, 2, 3, 4):
        if x * k > 2.5:
            break
        if k == 2:
            continue
        s += x * k
    else:
        s += 10.0 * x
    return s + k * x


def _dup(rng, x):
    return gk.Duplicated(x, rng.standard_normal(x.shape))


def _salt(rng):
    salt, forc = rng.uniform(0.5, 1.5, (3, 4, 2, 3)), rng.uniform(-1, 1, (3, 4, 2))
    return salt_step, (_dup(rng, salt), _dup(rng, forc), gk.Active(0.1), gk.Const(0), gk.Const(2)), (3, 4, 2)


def _isoneutral(rng):
    temp = rng.uniform(0.5, 1.5, (4, 3, 3))
    ai = rng.uniform(-1, 1, (4, 3, 3, 2, 2))
    return isoneutral_flux, (_dup(rng, ai), _dup(rng, temp), _dup(rng, np.zeros((4, 3, 3)))), (4, 3, 3)


def _column_sum5(rng):
    a, w = rng.uniform(-1, 1, (3, 2, 2, 2, 3)), rng.uniform(-1, 1, (1, 1, 2, 2, 3))
    return column_sum5, (_dup(rng, a), _dup(rng, w), _dup(rng, np.zeros((3, 2)))), (3, 2)


def _stencil4(rng):
    u = rng.uniform(0.5, 1.5, (5, 2, 2, 2))
    return stencil4, (_dup(rng, u), _dup(rng, np.zeros_like(u)), gk.Active(0.3)), (5, 2)


def _tuple_weights(rng):
    a = rng.uniform(0.5, 1.5, 7)
    return tuple_weights, (_dup(rng, a), _dup(rng, np.zeros(7)), gk.Active(0.7)), 7


def _tuple_jumps(rng):
    a = rng.uniform(0.1, 1.5, 9)  # values on both sides of every break test, none on a kink
    return tuple_jumps, (_dup(rng, a), _dup(rng, np.zeros(9))), 9


CASES = {"salt_step": _salt, "isoneutral_flux": _isoneutral, "column_sum5": _column_sum5, "stencil4": _stencil4,
         "tuple_weights": _tuple_weights, "tuple_jumps": _tuple_jumps}


def _values(args):
    return tuple(a.val.copy() if isinstance(getattr(a, "val", None), np.ndarray) else a.val for a in args)


# -- gradients ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["reverse", "forward"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_match_finite_differences(name, mode):
    kernel, args, dim = CASES[name](np.random.default_rng(3))
    report = check_grad(kernel, *args, dim=dim, mode=gk.Reverse if mode == "reverse" else gk.Forward)
    assert report.ok and report.checked > 3, str(report)


def test_primal_values():
    rng = np.random.default_rng(4)
    kernel, args, dim = _salt(rng)
    salt, forc = (a.val.copy() for a in args[:2])
    want = salt.copy()
    s = salt[..., 0]
    want[..., 2] = s + 0.1 * (forc * s - 0.5 * s * s)
    gk.launch(salt_step, dim, salt, forc, 0.1, 0, 2)
    np.testing.assert_allclose(salt, want, rtol=1e-15)

    kernel, args, dim = _isoneutral(rng)
    ai, temp, flux = _values(args)
    gk.launch(isoneutral_flux, dim, ai, temp, flux)
    want = np.zeros_like(flux)
    for ip in (0, 1):
        for kr in (0, 1):
            shifted = temp[ip:temp.shape[0] - 1 + ip, :, kr:temp.shape[2] - 1 + kr]
            want[:-1, :, :-1] += ai[:-1, :, :-1, ip, kr] * (shifted - temp[:-1, :, :-1])
    np.testing.assert_allclose(flux, want, rtol=1e-13)

    a, w, out = _values(_column_sum5(rng)[1])
    gk.launch(column_sum5, (3, 2), a, w, out)
    np.testing.assert_allclose(out, ((a * w + a ** 2).sum(axis=(2, 3, 4))) * 3 / 2, rtol=1e-13)

    a, out = rng.uniform(0.1, 1.5, 40), np.zeros(40)
    gk.launch(tuple_jumps, 40, a, out)
    np.testing.assert_allclose(out, [_jumps_reference(x) for x in a], rtol=1e-15)

    a, out = rng.uniform(0.5, 1.5, 7), np.zeros(7)
    gk.launch(tuple_weights, 7, a, out, 0.7)
    want = (0.5 + 0.7 + 1.4 + a * a) * a
    want[1:-1] += 0.7 * (a[1:-1] + a[2:] + a[:-2])
    want[:-1] += 1.5 * a[:-1] + 0.7 * a[1:]
    np.testing.assert_allclose(out, want, rtol=1e-14)


def test_tuple_of_arrays_and_functions():
    rng = np.random.default_rng(5)
    x, y, out = rng.uniform(-1, 1, 6), rng.uniform(-1, 1, 6), np.zeros(6)
    gk.launch(tuple_of_arrays, 6, x, y, out)
    np.testing.assert_allclose(out, x * x + y * y + np.sin(x) + np.cos(x), rtol=1e-15)
    report = check_grad(tuple_of_arrays, _dup(rng, x), _dup(rng, y), _dup(rng, out), dim=6)
    assert report.ok, str(report)


@pytest.mark.parametrize("name", ["salt_step", "isoneutral_flux", "column_sum5", "tuple_jumps"])
def test_interpreter_agrees_with_numba(name):
    """The reference interpreter (the oracle) and the Numba backend, primal and reverse, on one set of inputs."""
    kernel, args, dim = CASES[name](np.random.default_rng(6))
    primal = {b: _values(args) for b in ("cpu", "interp")}
    for b, values in primal.items():
        gk.launch(kernel, dim, *values, backend=b)
    for x, y in zip(primal["cpu"], primal["interp"]):
        np.testing.assert_allclose(x, y, rtol=1e-14, atol=1e-15)
    runs = {}
    for b in ("cpu", "interp"):
        call = tuple(type(a)(a.val.copy(), a.dval.copy()) if isinstance(a, gk.Duplicated) else a for a in args)
        runs[b] = (call, gk.autodiff(kernel, *call, dim=dim, backend=b))
    for x, y in zip(runs["cpu"][0], runs["interp"][0]):
        if isinstance(x, gk.Duplicated):
            np.testing.assert_allclose(x.val, y.val, rtol=1e-14, atol=1e-15)
            np.testing.assert_allclose(x.dval, y.dval, rtol=1e-13, atol=1e-14)
    for x, y in zip(runs["cpu"][1], runs["interp"][1]):
        assert (x is None) == (y is None) and (x is None or x == pytest.approx(y, rel=1e-13))


def test_split_mode_and_vector_mode_on_a_5d_case():
    """autodiff_thunk (the tape kept between its two calls) and BatchDuplicated (two lanes) give what plain
    reverse calls give."""
    rng = np.random.default_rng(8)
    kernel, args, dim = _isoneutral(rng)
    other = tuple(gk.Duplicated(a.val, rng.standard_normal(a.val.shape)) for a in args)

    def plain(seeds):
        call = tuple(gk.Duplicated(a.val.copy(), a.dval.copy()) for a in seeds)
        gk.autodiff(kernel, *call, dim=dim)
        return call

    want, want_other = plain(args), plain(other)
    fwd, rev = gk.autodiff_thunk(kernel, *(gk.Duplicated for _ in args), dim=dim)
    split = tuple(gk.Duplicated(a.val.copy(), a.dval.copy()) for a in args)
    rev(*split, fwd(*split))
    batch = tuple(gk.BatchDuplicated(a.val.copy(), (a.dval.copy(), b.dval.copy())) for a, b in zip(args, other))
    gk.autodiff(kernel, *batch, dim=dim)
    for s_, b_, w, w2 in zip(split, batch, want, want_other):
        np.testing.assert_allclose(s_.val, w.val, rtol=1e-15)
        np.testing.assert_allclose(s_.dval, w.dval, rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(b_.dvals[0], w.dval, rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(b_.dvals[1], w2.dval, rtol=1e-13, atol=1e-14)


# -- races and bounds --------------------------------------------------------------------------------------------------
@gk.kernel
def racy4(s):
    i, j, k = gk.tid()
    s[i, j, 0, 0] = s[i, j, k, 1] * 2.0  # every k of a column writes one element


def test_in_place_4d_update_is_proved_race_free():
    rng = np.random.default_rng(9)
    kernel, args, dim = _salt(rng)
    ins = gk.inspect(kernel, *_values(args), dim=dim)
    assert ins.parallel and not ins.race_check  # thread-own elements: no run-time check


def test_racy_4d_kernel_is_refused_with_buffers_unchanged():
    s = np.random.default_rng(10).uniform(size=(2, 3, 2, 2))
    before = s.copy()
    assert gk.inspect(racy4, s, dim=(2, 3, 2)).race_check  # not provable: the exact check decides
    with pytest.raises(gk.RaceError) as info:
        gk.launch(racy4, (2, 3, 2), s)
    assert "s[i, j, 0, 0]" in str(info.value) and str(info.value).count("thread (") == 2
    np.testing.assert_array_equal(s, before)
    with pytest.raises(gk.RaceError):
        gk.autodiff(racy4, gk.Duplicated(s, np.ones_like(s)), dim=(2, 3, 2))
    np.testing.assert_array_equal(s, before)


def _bounds_verdict(kernel, dim, args):
    b = bind(kernel.ir, dim, tuple(args), "interp")
    return primal_specialization(kernel, b).bounds.decide(b.dim, b.kernel_values)


def test_bounds_of_4d_and_5d_accesses_are_proved_and_violations_refused():
    rng = np.random.default_rng(12)
    _, args, dim = _isoneutral(rng)
    values = _values(args)
    assert _bounds_verdict(isoneutral_flux, dim, values) is True
    # one thread too many on axis 1: Ai_ez[i, j, k, ip, kr] leaves the 5-D array, named before anything runs
    before = [v.copy() for v in values]
    with pytest.raises(gk.LaunchError) as info:
        gk.launch(isoneutral_flux, (4, 4, 3), *values)
    assert "Ai_ez" in str(info.value) or "temp" in str(info.value) or "flux" in str(info.value)
    assert "no buffer was changed" in str(info.value)
    for v, w in zip(values, before):
        np.testing.assert_array_equal(v, w)
    # a trailing axis too short for the time level written: salt[i, j, k, taup1] with taup1 = 3
    _, args, dim = _salt(rng)
    values = list(_values(args))
    values[4] = 3
    assert _bounds_verdict(salt_step, dim, values) is not True
    with pytest.raises(gk.LaunchError) as info:
        gk.launch(salt_step, dim, *values)
    assert "salt[i, j, k, taup1]" in str(info.value) and "axis 3" in str(info.value)


def test_strided_5d_views():
    """A 5-D view with a step on a trailing axis: both backends index it through its strides."""
    rng = np.random.default_rng(13)
    big = rng.uniform(-1, 1, (3, 2, 4, 2, 3))
    a = big[:, :, ::2]
    w = rng.uniform(-1, 1, (1, 1, 2, 2, 3))
    report = check_grad(column_sum5, gk.Duplicated(a, np.zeros(a.shape)), gk.Duplicated(w, np.zeros(w.shape)),
                        gk.Duplicated(np.zeros((3, 2)), np.zeros((3, 2))), dim=(3, 2))
    assert report.ok, str(report)
    out = np.zeros((3, 2))
    gk.launch(column_sum5, (3, 2), a, w, out)
    np.testing.assert_allclose(out, ((a * w + a ** 2).sum(axis=(2, 3, 4))) * 3 / 2, rtol=1e-13)
    src = gk.inspect(column_sum5, a, w, np.zeros((3, 2)), dim=(3, 2), backend="cuda").source
    for axis in range(5):  # the view's five strides are parameters of the CUDA kernel
        assert f"const long long {stride('A', axis)}" in src


# -- the CUDA backend --------------------------------------------------------------------------------------------------
def test_generated_cuda_for_4d_and_5d_compiles_with_nvcc(tmp_path):
    """Every kernel of every mode of these cases (primal, race check, fused, augmented primal, reverse, count,
    gather, tangent), contiguous and strided, as NVRTC would get it."""
    from backends.test_cuda import NVCC, bundle, nvcc  # here: test_cuda imports signatures, which imports this module
    if NVCC is None:
        pytest.skip("nvcc is not on the PATH")
    sources = {}
    for name, make in sorted(CASES.items()):
        kernel, args, dim = make(np.random.default_rng(0))
        forward = tuple(gk.Duplicated(a.val, 1.0) if isinstance(a, gk.Active) else a for a in args)
        for label, call, mode in (("primal", _values(args), None), ("reverse", args, gk.Reverse),
                                  ("forward", forward, gk.Forward)):
            ins = gk.inspect(kernel, *call, dim=dim, mode=mode, backend="cuda")
            sources.update({f"{name}/{label}/{role}": src for role, src in ins.sources.items()})
    a = np.random.default_rng(1).uniform(size=(3, 2, 4, 2, 3))[:, :, ::2]
    ins = gk.inspect(column_sum5, a, np.ones((1, 1, 2, 2, 3)), np.zeros((3, 2)), dim=(3, 2), backend="cuda")
    sources["column_sum5/strided"] = ins.source
    assert len(sources) > 20
    result = nvcc(tmp_path, bundle(sources), "-arch=sm_80", "-cubin", "-o", "k.cubin")
    assert result.returncode == 0, result.stderr[-6000:]


# -- programs ----------------------------------------------------------------------------------------------------------
def test_copy_and_fill_take_4d_and_5d_arrays():
    rng = np.random.default_rng(14)
    for shape in ((2, 3, 2, 2), (2, 1, 2, 3, 2)):
        src, dst = rng.uniform(size=shape), np.zeros(shape)
        gk.copy(dst, src)
        np.testing.assert_array_equal(dst, src)
        gk.fill(dst, 1.5)
        np.testing.assert_array_equal(dst, 1.5)

    def program(x, y, c):
        gk.copy(y, x)
        gk.launch(salt_step, y.shape[:3], y, np.ones(y.shape[:3]), c, 0, 1)

    x = rng.uniform(0.5, 1.5, (2, 2, 2, 2))
    report = check_grad(program, gk.Duplicated(x, np.zeros_like(x)), gk.Duplicated(np.zeros_like(x),
                        np.zeros_like(x)), gk.Active(0.2))
    assert report.ok, str(report)


# -- shape unpacking and refusals at launch ----------------------------------------------------------------------------
@gk.kernel
def unpack_three(x, out):
    i = gk.tid()
    n, m, p = x.shape
    out[i] = x[i, m - 1, p - 1] * n


@gk.kernel
def shape_pairs(x, out):
    i = gk.tid()
    n, m = x.shape[0], x.shape[1]  # a tuple of values: one per name, any subset of the dimensions
    out[i] = x[i, m - 1, 0, 0] * n


def test_shape_unpacking():
    rng = np.random.default_rng(15)
    x, out = rng.uniform(size=(3, 4, 2)), np.zeros(3)
    gk.launch(unpack_three, 3, x, out)
    np.testing.assert_allclose(out, x[:, 3, 1] * 3)
    x4 = rng.uniform(size=(3, 4, 2, 2))
    gk.launch(shape_pairs, 3, x4, out)
    np.testing.assert_allclose(out, x4[:, 3, 0, 0] * 3)


@pytest.mark.parametrize("shape, words", [
    ((3, 4, 2, 2), ("unpacks 3 names", "4 dimensions", "'n, m, p = x.shape[0], x.shape[1], x.shape[2]'",
                    "'n, m, p, n3 = x.shape'")),
    ((3, 4), ("unpacks 3 names", "2 dimensions", "pass a 3-D array", "'n, m = x.shape'")),
])
def test_shape_unpacking_needs_one_name_per_dimension(shape, words):
    x, out = np.ones(shape), np.zeros(3)
    with pytest.raises(gk.KernelTypeError) as info:
        gk.launch(unpack_three, 3, x, out)
    msg = str(info.value)
    assert "test_dims.py:" in msg and "n, m, p = x.shape" in msg and "^" in msg
    for w in words:
        assert w in msg, msg
    assert "gradkern/" not in msg and "infer.py" not in msg
    assert out.tolist() == [0.0, 0.0, 0.0]


def test_arrays_past_five_dimensions_and_launches_past_three_axes_are_refused():
    x6 = np.ones((2, 1, 1, 1, 1, 2))
    with pytest.raises(gk.LaunchError) as info:
        gk.launch(salt_step, (2, 1, 1), x6, np.ones((2, 1, 1)), 0.1, 0, 1)
    assert "6 dimensions" in str(info.value) and "1-D to 5-D" in str(info.value) and "reshape(" in str(info.value)
    # dim defaults to the first array's shape: a 4-D one is no launch domain
    with pytest.raises(gk.LaunchError) as info:
        gk.autodiff(salt_step, gk.Duplicated(np.ones((2, 2, 2, 2)), np.ones((2, 2, 2, 2))),
                    gk.Const(np.ones((2, 2, 2))), gk.Active(0.1), gk.Const(0), gk.Const(1))
    assert "1 to 3 axes" in str(info.value) and "dim=salt.shape[:3]" in str(info.value)
