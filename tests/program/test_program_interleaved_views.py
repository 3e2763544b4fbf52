"""Interleaved views of one array as separate annotated arguments of a program (program/shadows.py,
docs/programs.md#interleaved-views): PENNANT's points as the columns x = P[:, 0], y = P[:, 1] of one (n, 2) array,
red-black halves u[0::2], u[1::2], each gk.Duplicated with the same views of one shadow. The whole P (or u) passed
to a launch inside the program maps to the whole shadow. Gradients against central finite differences of the whole
program in float64 and the dot-product test (forward tangents against the reverse), on the interpreter; the
refusals leave primals and shadows as they were. check_grad copies each argument, which would separate the views,
so the checks are written here."""

from __future__ import annotations

import numpy as np
import pytest
from support.ported_harness import on_interpreter

import gradkern as gk
from gradkern import backends

N = 5  # points (PENNANT) / pairs (red-black)
STEPS = 3
H = 1e-6  # central differences in float64: truncation ~H^2 * f''' ~ 1e-12, rounding ~1e-16 / H ~ 1e-10
TOL = 1e-7  # relative to the gradient's largest entry, well above both errors and far below any wrong adjoint


@pytest.fixture(autouse=True)
def _interpreter(monkeypatch):
    on_interpreter(monkeypatch)


@gk.kernel
def move_points(x, y, c):
    i = gk.tid()
    t = x[i]
    x[i] = c * t - gk.sin(y[i])
    y[i] = t * y[i] + c * c


@gk.kernel
def point_energy(P, E):
    i = gk.tid()
    gk.atomic_add(E, 0, P[i, 0] * P[i, 0] + gk.cos(P[i, 1]))


@gk.kernel
def relax(r, b, c):
    i = gk.tid()
    r[i] = r[i] + c * gk.sin(b[i]) * r[i]


@gk.kernel
def line_energy(u, E):
    i = gk.tid()
    gk.atomic_add(E, 0, u[i] * u[i] * u[i])


def pennant(P, loop):
    """The program of the columns x, y of the captured P (its whole, passed to the energy launch, maps to dP)."""
    def prog(x, y, E, c):
        def step(t):
            gk.launch(move_points, N, x, y, c)
        loop(step, STEPS)
        gk.launch(point_energy, N, P, E)
    return prog


def red_black(u, loop):
    def prog(r, b, E, c):
        def step(t):
            gk.launch(relax, N, r, b, c)
            gk.launch(relax, N, b, r, c)
        loop(step, STEPS)
        gk.launch(line_energy, 2 * N, u, E)
    return prog


def plain(step, nsteps):
    for t in range(nsteps):
        step(t)


def checkpointed(step, nsteps):
    gk.checkpointed_loop(step, nsteps, snapshots=2)


CASES = {"pennant": (pennant, (N, 2), lambda P: (P[:, 0], P[:, 1])),
         "red_black": (red_black, (2 * N,), lambda u: (u[0::2], u[1::2]))}


def run(case, loop, buf0, c, mode=None, dbuf=None, dE=None, dc=None):
    """The program on a copy of buf0 with the views of it; with `mode`, gk.autodiff with the same views of dbuf."""
    make, _, views = CASES[case]
    buf, E = buf0.copy(), np.zeros(1)
    prog = make(buf, loop)
    if mode is None:
        prog(*views(buf), E, c)
        return buf, E
    args = [gk.Duplicated(v, dv) for v, dv in zip(views(buf), views(dbuf))] + [gk.Duplicated(E, dE)]
    if mode == "reverse":
        return gk.autodiff(prog, *args, gk.Active(c))[3]
    gk.autodiff(prog, *args, gk.Duplicated(c, dc), mode=gk.Forward)
    return None


def fd_gradient(case, loop, buf0, c, wbuf, wE):
    """The adjoint of (buf0, c) for output weights (wbuf on the final buffer, wE on E) by central differences."""
    def f(b, cc):
        out, E = run(case, loop, b, cc)
        return float(np.sum(wbuf * out) + wE[0] * E[0])
    g = np.zeros_like(buf0)
    for k in np.ndindex(buf0.shape):
        e = np.zeros_like(buf0)
        e[k] = H
        g[k] = (f(buf0 + e, c) - f(buf0 - e, c)) / (2 * H)
    return g, (f(buf0, c + H) - f(buf0, c - H)) / (2 * H)


@pytest.mark.parametrize("loop", [plain, checkpointed])
@pytest.mark.parametrize("case", CASES)
def test_gradient_against_finite_differences_and_the_dot_product_test(case, loop):
    check_gradient(case, loop)


def test_the_columns_on_numba(monkeypatch):
    """The sample on Numba (the other tests run on the interpreter, docs/testing.md "Test time"): about 2 s of
    CPU from a cold cache."""
    monkeypatch.setattr(backends, "_default", ["cpu"])
    check_gradient("pennant", plain)


def check_gradient(case, loop):
    rng = np.random.default_rng(56)
    shape = CASES[case][1]
    buf0, c = rng.uniform(0.5, 1.5, shape), 0.7
    wbuf, wE = rng.uniform(-1, 1, shape), rng.uniform(0.5, 1.5, 1)  # random non-zero output adjoints
    dbuf, dE = wbuf.copy(), wE.copy()
    dc = run(case, loop, buf0, c, "reverse", dbuf, dE)
    want, want_c = fd_gradient(case, loop, buf0, c, wbuf, wE)
    scale = max(np.abs(want).max(), abs(want_c))
    np.testing.assert_allclose(dbuf, want, rtol=0, atol=TOL * scale)
    assert abs(dc - want_c) <= TOL * scale
    # dot-product test: <w, J v> from forward tangents equals <J^T w, v> from the reverse, to rounding (1e-12
    # relative: the same products summed in another order)
    vbuf, vc = rng.uniform(-1, 1, shape), rng.uniform(-1, 1)
    tbuf, tE = vbuf.copy(), np.zeros(1)
    run(case, loop, buf0, c, "forward", tbuf, tE, vc)
    lhs = np.sum(wbuf * tbuf) + wE[0] * tE[0]
    rhs = np.sum(dbuf * vbuf) + dc * vc
    assert abs(lhs - rhs) <= 1e-12 * max(abs(lhs), abs(rhs))


def test_vector_mode_lanes_equal_separate_calls():
    """BatchDuplicated columns with two lanes, each lane the same views of its own shadow buffer: each lane's
    adjoints equal a single-lane call's (the whole P maps to each lane's whole shadow)."""
    rng = np.random.default_rng(5)
    P0, c = rng.uniform(0.5, 1.5, (N, 2)), 0.6
    ws = [rng.uniform(-1, 1, (N, 2)) for _ in range(2)]
    seeds = (1.0, 2.0)  # E's adjoint per lane
    P, E, dPs, dEs = P0.copy(), np.zeros(1), [w.copy() for w in ws], tuple(np.full(1, e) for e in seeds)
    got = gk.autodiff(pennant(P, plain), gk.BatchDuplicated(P[:, 0], tuple(d[:, 0] for d in dPs)),
                      gk.BatchDuplicated(P[:, 1], tuple(d[:, 1] for d in dPs)), gk.BatchDuplicated(E, dEs),
                      gk.Active(c))[3]
    for k in range(2):
        dP, dE = ws[k].copy(), np.full(1, seeds[k])
        dc = run("pennant", plain, P0, c, "reverse", dP, dE)
        # the same operations per lane; the atomic sums may associate differently: a few ulps of float64
        np.testing.assert_allclose(dPs[k], dP, rtol=1e-13, atol=1e-15)
        assert abs(got[k] - dc) <= 1e-13 * abs(dc)


def test_a_const_column_read_beside_a_duplicated_one():
    """y Const, read while x (interleaved with it, no element shared) is written: x's derivative only."""
    rng = np.random.default_rng(7)
    P0, c = rng.uniform(0.5, 1.5, (N, 2)), 0.4

    @gk.kernel
    def pull(x, y, c):
        i = gk.tid()
        x[i] = x[i] * gk.exp(c * y[i])

    def prog(x, y, c):
        gk.launch(pull, N, x, y, c)
        gk.launch(pull, N, x, y, c)

    P, dP = P0.copy(), np.zeros_like(P0)
    w = rng.uniform(-1, 1, N)
    dP[:, 0] = w
    dc = gk.autodiff(prog, gk.Duplicated(P[:, 0], dP[:, 0]), gk.Const(P[:, 1]), gk.Active(c))[2]
    np.testing.assert_array_equal(P[:, 1], P0[:, 1])
    np.testing.assert_array_equal(dP[:, 1], 0.0)  # y's shadow column is nobody's: untouched
    np.testing.assert_allclose(dP[:, 0], w * np.exp(2 * c * P0[:, 1]), rtol=1e-14)  # x2 = x0 * exp(2 c y)
    np.testing.assert_allclose(dc, np.sum(w * P0[:, 0] * 2 * P0[:, 1] * np.exp(2 * c * P0[:, 1])), rtol=1e-13)


def test_host_code_reading_the_const_column():
    """Host code reads the Const y (`program/hostcode.py` compares byte ranges, so y counts as lying near an
    active array): its sum is a constant of the program, and x's derivative is that constant."""
    @gk.kernel
    def scale(x, s):
        i = gk.tid()
        x[i] = x[i] * s

    def prog(x, y):
        gk.launch(scale, N, x, float(y.sum()))

    P = np.random.default_rng(9).uniform(0.5, 1.5, (N, 2))
    dP = np.ones_like(P)
    s = P[:, 1].sum()
    gk.autodiff(prog, gk.Duplicated(P[:, 0], dP[:, 0]), gk.Const(P[:, 1]))
    np.testing.assert_array_equal(dP[:, 1], 1.0)
    np.testing.assert_allclose(dP[:, 0], s, rtol=1e-15)


def _refused(prog, args, error, match):
    """`prog` refused with `error` matching `match`, every primal and shadow as it was."""
    arrays = [x for a in args if isinstance(a, gk.Annotation) for x in (a.val, getattr(a, "dval", None))
              if isinstance(x, np.ndarray)]
    kept = [x.copy() for x in arrays]
    with pytest.raises(error, match=match):
        gk.autodiff(prog, *args)
    for x, k in zip(arrays, kept):
        np.testing.assert_array_equal(x, k)


def test_refusals_leave_everything_unchanged():
    rng = np.random.default_rng(11)
    P, dP = rng.uniform(0.5, 1.5, (N, 2)), rng.uniform(-1, 1, (N, 2))
    u, du = rng.uniform(0.5, 1.5, 2 * N), rng.uniform(-1, 1, 2 * N)
    E, dE = np.zeros(1), np.ones(1)

    def whole(x, y, E, c):
        gk.launch(point_energy, N, P, E)

    def moved(x, y, E, c):
        gk.launch(move_points, N, x, y, c)

    # views that share an element
    _refused(moved, (gk.Duplicated(u[0:6], du[0:6]), gk.Duplicated(u[4:10], du[4:10]), gk.Duplicated(E, dE),
                     gk.Active(0.3)), gk.ProgramError, r"'y' overlaps another annotated array, sharing elements "
             r"with 'x'")
    _refused(moved, (gk.Duplicated(u[0::2], du[0::2]), gk.Duplicated(u[::3], du[::3]), gk.Duplicated(E, dE),
                     gk.Active(0.3)), gk.ProgramError, r"sharing elements with 'x'")
    # interleaved primals whose shadows share memory
    _refused(moved, (gk.Duplicated(P[:, 0], dP[:, 0]), gk.Duplicated(P[:, 1], dP[::-1, 0]), gk.Duplicated(E, dE),
                     gk.Active(0.3)), gk.AliasingError, r"'y' and 'x' are views of one array sharing no element, "
             r"but their shadows share memory")
    # the whole P launched with only x annotated: y's elements have no shadow
    _refused(whole, (gk.Duplicated(P[:, 0], dP[:, 0]), gk.Const(P[:, 1]), gk.Duplicated(E, dE), gk.Active(0.3)),
             gk.ProgramError, r"uses elements of the annotated 'x' and memory no annotated argument's elements hold")
    # the whole P launched where x's and y's shadows are separate buffers: no one view of them
    dx, dy = np.zeros(N), np.zeros(N)
    _refused(whole, (gk.Duplicated(P[:, 0], dx), gk.Duplicated(P[:, 1], dy), gk.Duplicated(E, dE), gk.Active(0.3)),
             gk.ProgramError, r"uses elements of 'x' and 'y', whose shadows are not the same views of one shadow "
             r"buffer(.|\n)*hint: pass the same views of one shadow")
    # a Const column written by an active launch: its shadow would be the whole buffer's, x's elements included
    _refused(moved, (gk.Duplicated(P[:, 1], dP[:, 1]), gk.Const(P[:, 0]), gk.Duplicated(E, dE), gk.Active(0.3)),
             gk.ProgramError, r"a launch writes a view of shape \(5,\) and strides \(16,\) with active inputs, whose "
             r"buffer holds the annotated 'x'")


def test_cupy_columns_map_on_the_stand_in():
    """The CuPy path of the mapping (device pointers, no element read) on tests/support/fakecupy.py."""
    from support.fakecupy import installed

    from gradkern.program.shadows import ShadowMap
    with installed() as cp:
        P, dP = cp.asarray(np.random.default_rng(3).uniform(size=(N, 2))), cp.zeros((N, 2))
        m = ShadowMap()
        m.register("x", P[:, 0], (dP[:, 0],))
        m.register("y", P[:, 1], (dP[:, 1],))
        for view, want in ((P, dP), (P[1:-1, 1], dP[1:-1, 1]), (P[::2], dP[::2])):
            (got,) = m.find(view)
            assert got.data.ptr == want.data.ptr and got.shape == want.shape and got.strides == want.strides
        assert m.find(cp.zeros(3)) is None
