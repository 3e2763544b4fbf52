"""Reverse mode of `while` loops that compute active values (transforms/reverse.py, docs/adjoint-forms.md
section 13): the augmented primal counts the iterations and pushes the count, the reverse runs the body's
reverse that many times, popping what each iteration taped; the count kernel (transforms/tape_count.py) sizes the
tape by running the same loop. Ported forms: a grid-stride loop, Newton's iteration to a tolerance, a loop
whose trip count depends on the data with a loop-carried local, a while inside a for and a for inside a
while, a while with break. Checked by check_grad (float64 central differences per coordinate and the
dot-product test) in reverse and forward mode, split reverse against fused, two vector lanes against separate
calls, and on hostcuda against the CPU backend."""

import numpy as np
import pytest
from support.interp_params import interp_and_numba
from support.ported_harness import on_interpreter

import gradkern as gk
from gradkern.testing import check_grad


@gk.kernel
def saxpy_grid_stride(x, y, a, n, stride):
    """CUDA's grid-stride loop: fewer threads than elements."""
    i = gk.tid()
    while i < n:
        y[i] += a * x[i]
        i += stride


@gk.kernel
def newton_cbrt(x, y, tol):
    """Newton's iteration for the cube root, to a tolerance: the trip count depends on x."""
    i = gk.tid()
    v = x[i]
    dv = 1.0
    while abs(dv) > tol:
        dv = (v * v * v - x[i]) / (3.0 * v * v)
        v = v - dv
    y[i] = v * v + gk.sin(v)


@gk.kernel
def halve_until(x, y, c):
    """A loop-carried local through a data-dependent number of iterations."""
    i = gk.tid()
    t = x[i] * 0.5 + c
    while t >= 1.0:
        t = t * 0.5 + c * gk.sin(t)
    y[i] = t * x[i]


@gk.kernel
def while_in_for(x, w, y, m):
    """A while nested in a for, each pass starting from the for's value."""
    i = gk.tid()
    s = x[i]
    for k in range(m):
        q = 0
        while q < k + 1 and s < 4.0:
            s = s * w[k] + 0.1 * gk.cos(s)
            q += 1
        s = s * 0.7
    y[i] = s


@gk.kernel
def for_in_while_with_break(x, w, y, m):
    """A for nested in a while that leaves by break."""
    i = gk.tid()
    s = x[i]
    r = 0
    while r < 20:
        for k in range(m):
            s = gk.tanh(s * w[k]) + 0.3 * s
        r += 1
        if s > 1.1:
            break
        s = s + 0.25
    y[i] = s


def _cases(rng):
    """(kernel, annotated arguments, dim)."""
    n = 37
    x, y = rng.uniform(-1.0, 1.0, n), rng.uniform(-1.0, 1.0, n)
    z = np.zeros(11)
    return [
        (saxpy_grid_stride, (gk.Duplicated(x, np.zeros(n)), gk.Duplicated(y, np.zeros(n)), gk.Active(1.3), n, 8), 8),
        (newton_cbrt, (gk.Duplicated(rng.uniform(0.5, 3.0, 11), z.copy()), gk.Duplicated(z.copy(), z.copy()),
                       1e-10), 11),
        (halve_until, (gk.Duplicated(rng.uniform(1.0, 30.0, 11), z.copy()), gk.Duplicated(z.copy(), z.copy()),
                       gk.Active(0.15)), 11),
        (while_in_for, (gk.Duplicated(rng.uniform(0.2, 1.0, 11), z.copy()),
                        gk.Duplicated(rng.uniform(0.9, 1.6, 4), np.zeros(4)), gk.Duplicated(z.copy(), z.copy()), 4),
         11),
        (for_in_while_with_break, (gk.Duplicated(rng.uniform(-1.0, 0.5, 11), z.copy()),
                                   gk.Duplicated(rng.uniform(0.5, 1.2, 3), np.zeros(3)),
                                   gk.Duplicated(z.copy(), z.copy()), 3), 11),
    ]


IDS = ["saxpy_grid_stride", "newton_cbrt", "halve_until", "while_in_for", "for_in_while_with_break"]


@pytest.mark.parametrize("mode", [gk.Reverse, gk.Forward], ids=["reverse", "forward"])
@pytest.mark.parametrize("case", range(len(IDS)), ids=IDS)
def test_gradients(rng, case, mode):
    kernel, args, dim = _cases(rng)[case]
    report = check_grad(kernel, *args, dim=dim, mode=mode)
    assert report.ok and report.checked >= 10


def _fresh(args):
    return [type(a)(a.val.copy(), a.dval.copy()) if isinstance(a, gk.Duplicated) else a for a in args]


# Split mode and vector lanes against the fused reverse: what the transforms made, on the interpreter in CI; on Numba
# for newton_cbrt (its split and lane kernels compiled and run), the other cases' Numba runs `full` (their compiles
# were this test's CI time; test_gradients compiles every case's reverse on Numba: docs/testing.md, "Test time")
@pytest.mark.parametrize(("case", "interp"), interp_and_numba(range(len(IDS)), IDS, IDS, ["newton_cbrt"]))
def test_split_equals_fused_and_lanes_equal_separate_calls(rng, case, interp, monkeypatch):
    if interp:
        on_interpreter(monkeypatch)
    kernel, args, dim = _cases(rng)[case]
    seeds = [[rng.uniform(-1.0, 1.0, a.val.shape) if isinstance(a, gk.Duplicated) else None for a in args]
             for _ in range(2)]
    separate = []
    for seed in seeds:
        fused = [gk.Duplicated(a.val.copy(), s.copy()) if s is not None else a for a, s in zip(args, seed)]
        got = gk.autodiff(kernel, *fused, dim=dim)
        split = [gk.Duplicated(a.val.copy(), s.copy()) if s is not None else a for a, s in zip(args, seed)]
        fwd, rev = gk.autodiff_thunk(kernel, *(type(a) if isinstance(a, gk.Annotation) else gk.Const for a in split),
                                     dim=dim)
        got_split = rev(*split, fwd(*split))
        for f, s in zip(fused, split):
            if isinstance(f, gk.Duplicated):
                np.testing.assert_array_equal(s.val, f.val)
                np.testing.assert_allclose(s.dval, f.dval, rtol=1e-12, atol=1e-15)  # chunked sums' order only
        for f, s in zip(got, got_split):
            if f is not None:
                assert s == pytest.approx(f, rel=1e-12)
        separate.append(fused)
    lanes = [[s.copy() if s is not None else None for s in seed] for seed in seeds]
    gk.autodiff(kernel, *(gk.BatchDuplicated(a.val.copy(), (lanes[0][k], lanes[1][k])) if lanes[0][k] is not None
                          else a for k, a in enumerate(args)), dim=dim)
    for lane in range(2):
        for k, a in enumerate(separate[lane]):
            if isinstance(a, gk.Duplicated):
                np.testing.assert_allclose(lanes[lane][k], a.dval, rtol=1e-12, atol=1e-15)  # sums' order only


def test_gradients_on_hostcuda(rng, device):
    """The reverse of each case on the device against the CPU backend's."""
    for kernel, args, dim in _cases(rng):
        want = _fresh(args)
        for a in want:
            if isinstance(a, gk.Duplicated):
                a.dval[...] = rng.uniform(-1.0, 1.0, a.dval.shape)
        got = [gk.Duplicated(device.to(a.val), device.to(a.dval)) if isinstance(a, gk.Duplicated) else a
               for a in _fresh(want)]
        expected = gk.autodiff(kernel, *want, dim=dim, backend="cpu")
        with device.running():
            result = gk.autodiff(kernel, *got, dim=dim)
        for w, g in zip(want, got):
            if isinstance(w, gk.Duplicated):
                np.testing.assert_allclose(device.host(g.val), w.val, rtol=1e-13, atol=1e-15)  # libm vs CUDA: ulps
                np.testing.assert_allclose(device.host(g.dval), w.dval, rtol=1e-12, atol=1e-14)
        for e, r in zip(expected, result):
            if e is not None:
                assert r == pytest.approx(e, rel=1e-12)


def test_tape_size_depends_on_an_overwritten_array_is_refused(rng):
    """The count kernel cannot see what the loop's condition would read: refused before anything is written."""

    @gk.kernel
    def drain(u):
        i = gk.tid()
        while u[i] > 0.5:
            u[i] = u[i] * 0.5 + 0.1 * gk.sin(u[i])

    u = rng.uniform(1.0, 4.0, 6)
    du = np.ones(6)
    before = (u.copy(), du.copy())
    with pytest.raises(gk.NotDifferentiableError, match="tape size depends on 'u'"):
        gk.autodiff(drain, gk.Duplicated(u, du))
    np.testing.assert_array_equal(u, before[0])
    np.testing.assert_array_equal(du, before[1])


def test_grid_stride_with_overlapping_threads_is_a_race(rng):
    """A stride smaller than the launch makes two threads update one element: the run-time check refuses the
    gradient as it refuses the primal, before anything is written."""
    x, y = rng.uniform(-1.0, 1.0, 20), rng.uniform(-1.0, 1.0, 20)
    dx, dy = np.zeros(20), rng.uniform(-1.0, 1.0, 20)
    before = [a.copy() for a in (x, y, dx, dy)]
    with pytest.raises(gk.RaceError):
        gk.autodiff(saxpy_grid_stride, gk.Duplicated(x, dx), gk.Duplicated(y, dy), gk.Active(1.3), 20, 4, dim=8)
    for a, b in zip((x, y, dx, dy), before):
        np.testing.assert_array_equal(a, b)
