"""More third-party host loops as programs (docs/programs.md, "Ported host loops", session 49): solvers and
stencils whose host code reads what the kernels computed. Each port's store-all gradient is checked against
float64 central differences and by the dot-product test, its primals after the gradient against a primal run
(test_ported_loops.py's checks), its checkpointed gradient against the store-all one where its loop is a
fixed number of steps; the natural spellings that would drop a derivative are refused, naming the line."""

from __future__ import annotations

import numpy as np
import pytest

import gradkern as gk
from gradkern.testing import check_grad

from .test_ported_loops import _check_against_differences, _gradient, _refused, _u, checkpointed, plain

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


# -- conjugate gradients (the textbook loop; HPCG's CG without its preconditioner) ---------------------------------
# alpha = rr / pAp and beta = rr_new / rr are divided in the kernels that use them, from one-element arrays the
# dot products sum into: the derivative through alpha and beta reaches b, x0 and sigma (docs/host-code.md).
@gk.kernel
def cg_matvec(p, Ap, sigma):
    """Ap = A p, A = tridiag(-1, 2 + sigma, -1) (a shifted 1-D Laplacian, Dirichlet ends)."""
    i = gk.tid()
    left = 0.0
    right = 0.0
    if i > 0:
        left = p[i - 1]
    if i < p.shape[0] - 1:
        right = p[i + 1]
    Ap[i] = (2.0 + sigma) * p[i] - left - right


@gk.kernel
def cg_dot(a, b, out):
    i = gk.tid()
    gk.atomic_add(out, 0, a[i] * b[i])


@gk.kernel
def cg_residual(b, Ax, r):
    i = gk.tid()
    r[i] = b[i] - Ax[i]


@gk.kernel
def cg_update_xr(x, r, p, Ap, rr, pAp):
    i = gk.tid()
    alpha = rr[0] / pAp[0]
    x[i] = x[i] + alpha * p[i]
    r[i] = r[i] - alpha * Ap[i]


@gk.kernel
def cg_update_p(p, r, rr_new, rr):
    i = gk.tid()
    p[i] = r[i] + (rr_new[0] / rr[0]) * p[i]


def cg(loop, tol=None, taken=None):
    """CG from x0 for `iters` iterations; with `tol`, the host's convergence test `if rr[0] < tol: break` (a
    derived value read for control flow: the recorded path is the one differentiated), `taken` counting them."""
    def program(b, x, sigma, iters):
        n = b.shape[0]
        r, p, Ap = np.zeros_like(b), np.zeros_like(b), np.zeros_like(b)
        rr, rr_new, pAp = (np.zeros_like(b, shape=(1,)) for _ in range(3))
        gk.launch(cg_matvec, n, x, Ap, sigma)
        gk.launch(cg_residual, n, b, Ap, r)
        gk.copy(p, r)
        gk.launch(cg_dot, n, r, r, rr)

        def step(t):
            gk.launch(cg_matvec, n, p, Ap, sigma)
            gk.fill(pAp, 0.0)
            gk.launch(cg_dot, n, p, Ap, pAp)
            gk.launch(cg_update_xr, n, x, r, p, Ap, rr, pAp)
            gk.fill(rr_new, 0.0)
            gk.launch(cg_dot, n, r, r, rr_new)
            gk.launch(cg_update_p, n, p, r, rr_new, rr)
            gk.copy(rr, rr_new)
        if tol is None:
            loop(step, iters)
            return
        for t in range(iters):
            step(t)
            taken.append(t)
            if rr[0] < tol:  # a scalar read from an active array: compared as the number it is
                break
    return program


def _cg_spec(rng, iters=4):
    return [("dup", _u(rng, 8)), ("dup", _u(rng, 8)), ("active", 0.5), ("int", iters)]


def test_cg_gradient_matches_finite_differences():
    _check_against_differences(cg(plain), _cg_spec(np.random.default_rng(1)), np.random.default_rng(7))


def test_cg_checkpointed_gradient_equals_store_all():
    _same_gradients(cg, _cg_spec(np.random.default_rng(2)))


def test_cg_early_exit_on_a_host_convergence_test_differentiates_the_recorded_path():
    """`if rr[0] < tol: break` stops after 3 of 8 iterations; the gradient is that of the 3 iterations run (central
    differences agree: a small perturbation keeps the path) and equals the fixed 3-iteration program's."""
    spec = _cg_spec(np.random.default_rng(3), iters=8)
    values = [v.copy() if isinstance(v, np.ndarray) else v for _, v in spec]
    norms = []
    for k in (2, 3):  # rr after 2 and after 3 iterations (primal runs of the fixed-count program)
        run = [v.copy() if isinstance(v, np.ndarray) else v for v in values]
        probe = []
        cg(plain, tol=-1.0, taken=probe)(*run[:3], k)  # never true: runs k iterations
        norms.append(_residual_norm(run[0], run[1], run[2]))
    assert norms[1] < norms[0]
    tol = float(np.sqrt(norms[0] * norms[1]))  # between them: the test fires after the third iteration
    taken = []
    _check_against_differences(cg(plain, tol=tol, taken=taken), spec, np.random.default_rng(7))
    assert taken and len(taken) % 3 == 0 and taken[:3] == [0, 1, 2]  # every run stopped after 3 iterations
    rng = np.random.default_rng(4)
    weights = {n: rng.standard_normal(np.shape(v)) for n, (kind, v) in enumerate(spec) if kind == "dup"}
    want = _gradient(cg(plain), [*spec[:3], ("int", 3)], weights)
    got = _gradient(cg(plain, tol=tol, taken=[]), spec, weights)
    for n in want[0]:  # the same launches on the same values; an atomic sum may add in another order: a few ulps
        np.testing.assert_allclose(got[0][n], want[0][n], rtol=1e-12, atol=1e-14)
    assert abs(got[1] - want[1]) <= 1e-12 * abs(want[1])


def _residual_norm(b, x, sigma):
    """|b - A x|^2 (NumPy), A as cg_matvec applies it."""
    ax = (2.0 + sigma) * x
    ax[1:] -= x[:-1]
    ax[:-1] -= x[1:]
    return float(np.sum((b - ax) ** 2))


@gk.kernel
def cg_axpy(y, x, alpha):
    i = gk.tid()
    y[i] = y[i] + alpha * x[i]


def cg_host_alpha(b, x, sigma, iters):
    """alpha computed on the host from the dot products, as the C host code of a CG does."""
    n = b.shape[0]
    r, p, Ap = np.zeros_like(b), np.zeros_like(b), np.zeros_like(b)
    rr, pAp = np.zeros_like(b, shape=(1,)), np.zeros_like(b, shape=(1,))
    gk.launch(cg_matvec, n, x, Ap, sigma)
    gk.launch(cg_residual, n, b, Ap, r)
    gk.copy(p, r)
    for _ in range(iters):
        gk.launch(cg_matvec, n, p, Ap, sigma)
        gk.fill(rr, 0.0)
        gk.fill(pAp, 0.0)
        gk.launch(cg_dot, n, r, r, rr)
        gk.launch(cg_dot, n, p, Ap, pAp)
        alpha = rr[0] / pAp[0]
        gk.launch(cg_axpy, n, x, p, alpha)


def test_cg_with_alpha_on_the_host_is_differentiated():
    """`alpha = rr[0] / pAp[0]` on the host: refused naming the line until session 57; now the reads are launches
    and alpha an Active scalar (program/hostreads.py): central differences and the dot-product test agree."""
    rng = np.random.default_rng(5)
    b, x = _u(rng, 8), _u(rng, 8)
    check_grad(cg_host_alpha, gk.Duplicated(b, np.zeros(8)), gk.Duplicated(x, np.zeros(8)), gk.Active(0.5), 2)


@gk.kernel
def cg_xpby(p, r, beta):
    i = gk.tid()
    p[i] = r[i] + beta * p[i]


def cg_float_steps(frozen):
    """CG with alpha and beta made constants on the host by float() (`frozen` None), or given as the numbers
    `frozen` lists (a plain list of the values a run took)."""
    def program(b, x, sigma, iters):
        n = b.shape[0]
        r, p, Ap = np.zeros_like(b), np.zeros_like(b), np.zeros_like(b)
        rr, rr_new, pAp = (np.zeros_like(b, shape=(1,)) for _ in range(3))
        gk.launch(cg_matvec, n, x, Ap, sigma)
        gk.launch(cg_residual, n, b, Ap, r)
        gk.copy(p, r)
        gk.launch(cg_dot, n, r, r, rr)
        for t in range(iters):
            gk.launch(cg_matvec, n, p, Ap, sigma)
            gk.fill(pAp, 0.0)
            gk.launch(cg_dot, n, p, Ap, pAp)
            alpha = float(rr[0]) / float(pAp[0]) if frozen is None else frozen[2 * t]
            gk.launch(cg_axpy, n, x, p, alpha)
            gk.launch(cg_axpy, n, r, Ap, -alpha)
            gk.fill(rr_new, 0.0)
            gk.launch(cg_dot, n, r, r, rr_new)
            beta = float(rr_new[0]) / float(rr[0]) if frozen is None else frozen[2 * t + 1]
            gk.launch(cg_xpby, n, p, r, beta)
            gk.copy(rr, rr_new)
            if frozen is None:
                program.recorded += [alpha, beta]
    program.recorded = []
    return program


def test_cg_with_float_alpha_is_the_gradient_with_alpha_and_beta_frozen():
    """What docs/host-code.md says of `float(rr[0]) / float(pAp[0])`: accepted, and its gradient is that of the
    iteration with alpha and beta fixed at the values they took (equal to the program given those numbers),
    not the derivative of what the program computes (central differences of it differ)."""
    spec = _cg_spec(np.random.default_rng(11), iters=3)
    rng = np.random.default_rng(12)
    weights = {n: rng.standard_normal(np.shape(v)) for n, (kind, v) in enumerate(spec) if kind == "dup"}
    floats = cg_float_steps(None)
    got = _gradient(floats, spec, weights)
    frozen = _gradient(cg_float_steps(list(floats.recorded[:6])), spec, weights)
    for n in got[0]:  # the same launches on the same values; an atomic sum may add in another order: a few ulps
        np.testing.assert_allclose(got[0][n], frozen[0][n], rtol=1e-12, atol=1e-14)
    assert abs(got[1] - frozen[1]) <= 1e-12 * abs(frozen[1])
    h = 1e-6
    moved = [(k, v + h) if k == "active" else (k, v) for k, v in spec]
    back = [(k, v - h) if k == "active" else (k, v) for k, v in spec]

    def loss(s):
        values = [v.copy() if isinstance(v, np.ndarray) else v for _, v in s]
        cg_float_steps(None)(*values)
        return sum(float(np.sum(weights[n] * values[n])) for n in weights)
    fd = (loss(moved) - loss(back)) / (2 * h)
    assert abs(got[1] - fd) > 1e-2 * abs(fd), (got[1], fd)  # d/dsigma without d alpha / d sigma: far off


# -- a LULESH-like leapfrog: dt from a Courant condition on the state, every step ----------------------------------
# LULESH computes dt on the host from a minimum over the elements (CalcCourantConstraint); gradkern has no atomic
# min, so one thread reduces (a loop in a kernel), and the kicks read dt from the one-element array.
@gk.kernel
def lulesh_courant(v, dt, cfl, c0):
    vmax = 0.0
    for k in range(v.shape[0]):
        vmax = max(vmax, abs(v[k]))
    dt[0] = cfl / (vmax + c0)


@gk.kernel
def lulesh_kick(x, v, dt, stiffness):
    i = gk.tid()
    left = 0.0
    right = 0.0
    if i > 0:
        left = x[i - 1]
    if i < x.shape[0] - 1:
        right = x[i + 1]
    force = stiffness * (left - 2.0 * x[i] + right) - x[i] * x[i] * x[i]
    v[i] = v[i] + dt[0] * force


@gk.kernel
def lulesh_drift(x, v, dt):
    i = gk.tid()
    x[i] = x[i] + dt[0] * v[i]


def leapfrog(loop, t_end=None, taken=None):
    """Kick-drift steps with dt = cfl / (max|v| + c0) from the state; with `t_end`, LULESH's `while time < stoptime`
    on the host (time summed from dt[0], a value read from an active array)."""
    def program(x, v, cfl, nsteps):
        n = x.shape[0]
        dt = np.zeros_like(x, shape=(1,))

        def step(t):
            gk.launch(lulesh_courant, 1, v, dt, cfl, 0.5)
            gk.launch(lulesh_kick, n, x, v, dt, 2.0)
            gk.launch(lulesh_drift, n, x, v, dt)
        if t_end is None:
            loop(step, nsteps)
            return
        time = 0.0
        for t in range(nsteps):
            if time >= t_end:
                break
            step(t)
            taken.append(t)
            time = time + dt[0]
    return program


def _leapfrog_spec(rng):
    return [("dup", _u(rng, 6, lo=-0.5, hi=0.5) + 1.0), ("dup", _u(rng, 6, lo=-0.5, hi=0.5)), ("active", 0.2),
            ("int", 4)]


def test_leapfrog_gradient_matches_finite_differences():
    _check_against_differences(leapfrog(plain), _leapfrog_spec(np.random.default_rng(1)), np.random.default_rng(7))


def test_leapfrog_checkpointed_gradient_equals_store_all():
    _same_gradients(leapfrog, _leapfrog_spec(np.random.default_rng(2)))


def test_leapfrog_until_a_stop_time_read_on_the_host():
    spec = _leapfrog_spec(np.random.default_rng(3))
    spec[3] = ("int", 50)
    taken = []
    _check_against_differences(leapfrog(plain, t_end=0.5, taken=taken), spec, np.random.default_rng(8))
    steps = taken.index(0, 1) if taken.count(0) > 1 else len(taken)
    assert 1 < steps < 50  # the stop time ended the loop, not the step count


def leapfrog_host_dt(x, v, cfl, nsteps):
    """dt computed on the host from the state, as a port of LULESH's host code first writes it."""
    n = x.shape[0]
    for _ in range(nsteps):
        dt = 0.2 / (np.abs(v).max() + 0.5)
        gk.launch(lulesh_drift, n, x, v, np.full_like(x, dt, shape=(1,)))


def test_leapfrog_with_dt_on_the_host_is_refused():
    """dt from np.abs(v).max() filled into the one-element array the kernel reads by np.full_like: refused naming
    the line (since session 57 the max is a read, and np.full_like converts its Active scalar with float() inside
    NumPy; until then the launch refused the derived array)."""
    rng = np.random.default_rng(6)
    args = (gk.Duplicated(_u(rng, 6), rng.random(6)), gk.Duplicated(_u(rng, 6), rng.random(6)), gk.Active(0.2), 2)
    shadows, error = _refused(gk.ProgramError, r"float\(\) of an Active scalar at .*test_ported_solvers\.py:\d+ "
                                               r"\(`gk\.launch\(lulesh_drift", leapfrog_host_dt, *args)
    for a, s in zip(args[:2], shadows):
        np.testing.assert_array_equal(a.dval, s)


# -- NAS Parallel Benchmarks MG: a V-cycle (resid, psinv, rprj3, interp) over a grid hierarchy, in 1-D ---------------
@gk.kernel
def mg_resid(u, v, r, a0, a1):
    """r = v - A u at the interior points (NPB's resid)."""
    i = gk.tid() + 1
    r[i] = v[i] - (a0 * u[i] + a1 * (u[i - 1] + u[i + 1]))


@gk.kernel
def mg_resid_in_place(u, r, a0, a1):
    """r = r - A u (NPB's resid(u, r, r) on the coarse levels)."""
    i = gk.tid() + 1
    r[i] = r[i] - (a0 * u[i] + a1 * (u[i - 1] + u[i + 1]))


@gk.kernel
def mg_psinv(r, u, c0, c1):
    """u += C r, the smoother (NPB's psinv)."""
    i = gk.tid() + 1
    u[i] = u[i] + c0 * r[i] + c1 * (r[i - 1] + r[i + 1])


@gk.kernel
def mg_rprj3(r, s):
    """Full-weighting restriction to the next coarser grid (NPB's rprj3)."""
    j = gk.tid() + 1
    s[j] = 0.5 * r[2 * j] + 0.25 * (r[2 * j - 1] + r[2 * j + 1])


@gk.kernel
def mg_interp(z, u):
    """Linear prolongation added to the next finer grid (NPB's interp)."""
    j = gk.tid()
    u[2 * j] = u[2 * j] + z[j]
    u[2 * j + 1] = u[2 * j + 1] + 0.5 * (z[j] + z[j + 1])


def nas_mg(loop):
    """NPB MG's main loop: per iteration, mg3P (down the levels with rprj3, psinv on the coarsest, up with interp,
    resid, psinv) and resid on the finest grid; the level loops on the host, levels in Python lists."""
    a0, a1, c1 = 2.0, -1.0, 0.05

    def program(u, v, c0, nit):
        sizes = [u.shape[0]]
        while sizes[-1] > 3:
            sizes.append((sizes[-1] + 1) // 2)
        sizes.reverse()  # coarsest first, as NPB numbers its levels
        top = len(sizes) - 1
        r = [np.zeros(m) for m in sizes]  # allocated from nothing: launches give them shadows
        z = [np.zeros(m) for m in sizes[:-1]]
        gk.launch(mg_resid, sizes[top] - 2, u, v, r[top], a0, a1)

        def iteration(it):
            for k in range(top, 0, -1):
                gk.launch(mg_rprj3, sizes[k - 1] - 2, r[k], r[k - 1])
            gk.fill(z[0], 0.0)
            gk.launch(mg_psinv, sizes[0] - 2, r[0], z[0], c0, c1)
            for k in range(1, top):
                gk.fill(z[k], 0.0)
                gk.launch(mg_interp, sizes[k - 1] - 1, z[k - 1], z[k])
                gk.launch(mg_resid_in_place, sizes[k] - 2, z[k], r[k], a0, a1)
                gk.launch(mg_psinv, sizes[k] - 2, r[k], z[k], c0, c1)
            gk.launch(mg_interp, sizes[top - 1] - 1, z[top - 1], u)
            gk.launch(mg_resid, sizes[top] - 2, u, v, r[top], a0, a1)
            gk.launch(mg_psinv, sizes[top] - 2, r[top], u, c0, c1)
            gk.launch(mg_resid, sizes[top] - 2, u, v, r[top], a0, a1)
        loop(iteration, nit)
    return program


def _mg_spec(rng):
    return [("dup", _u(rng, 17)), ("dup", _u(rng, 17)), ("active", 0.3), ("int", 2)]


def test_nas_mg_gradient_matches_finite_differences():
    _check_against_differences(nas_mg(plain), _mg_spec(np.random.default_rng(1)), np.random.default_rng(7))


def test_nas_mg_checkpointed_gradient_equals_store_all():
    _same_gradients(nas_mg, _mg_spec(np.random.default_rng(2)))


# -- SHOC stencil2d: a nine-point stencil with the halo exchanged by host copies (periodic), A -> B by parity --------
@gk.kernel
def shoc_stencil(a, b, wc, wa, wd):
    i, j = gk.tid()
    i += 1
    j += 1
    b[i, j] = (wc * a[i, j] + wa * (a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1])
               + wd * (a[i - 1, j - 1] + a[i - 1, j + 1] + a[i + 1, j - 1] + a[i + 1, j + 1]))


def _halo(a):
    """SHOC's halo exchange of a periodic grid: the edge rows and columns from the opposite interior ones."""
    gk.copy(a[0, 1:-1], a[-2, 1:-1])
    gk.copy(a[-1, 1:-1], a[1, 1:-1])
    gk.copy(a[:, 0], a[:, -2])
    gk.copy(a[:, -1], a[:, 1])


def shoc_stencil2d(loop):
    def program(a, b, wa, nsteps):
        rows, cols = a.shape

        def step(t):
            src, dst = (a, b) if t % 2 == 0 else (b, a)
            _halo(src)
            gk.launch(shoc_stencil, (rows - 2, cols - 2), src, dst, 0.25, wa, 0.05)
        loop(step, nsteps)
    return program


def _shoc_spec(rng):
    return [("dup", _u(rng, 6, 7)), ("dup", _u(rng, 6, 7)), ("active", 0.15), ("int", 3)]


def test_shoc_stencil2d_gradient_matches_finite_differences():
    _check_against_differences(shoc_stencil2d(plain), _shoc_spec(np.random.default_rng(1)), np.random.default_rng(7))


def test_shoc_stencil2d_checkpointed_gradient_equals_store_all():
    _same_gradients(shoc_stencil2d, _shoc_spec(np.random.default_rng(2)))


def shoc_host_halo(a, b, wa, nsteps):
    """The halo copied with NumPy assignments, as the C's memcpy of rows ports."""
    rows, cols = a.shape
    for t in range(nsteps):
        src, dst = (a, b) if t % 2 == 0 else (b, a)
        src[0, 1:-1] = src[-2, 1:-1]
        src[-1, 1:-1] = src[1, 1:-1]
        gk.launch(shoc_stencil, (rows - 2, cols - 2), src, dst, 0.25, wa, 0.05)


def test_shoc_host_halo_copy_into_a_launched_array_is_refused_naming_gk_copy():
    """The first assignment into the fresh argument `a` is a copy, a gk.copy launch (differentiated) that takes
    `a`; the second writes into `a`, which that launch has taken: refused as the contract's host-write rule
    says, naming the launch and gk.copy, before any shadow changed (docs/host-code.md)."""
    rng = np.random.default_rng(6)
    args = (gk.Duplicated(_u(rng, 6, 7), rng.random((6, 7))), gk.Duplicated(_u(rng, 6, 7), rng.random((6, 7))),
            gk.Active(0.15), 3)
    shadows, _ = _refused(gk.ProgramError, r"(?s)host write to 'src'.*after launch 1 \(kernel '_copy1'.*"
                                           r"gk\.copy\(dst, src\)", shoc_host_halo, *args)
    for a, s in zip(args[:2], shadows):
        np.testing.assert_array_equal(a.dval, s)


def _same_gradients(make, spec, seed=9):
    rng = np.random.default_rng(seed)
    weights = {n: rng.standard_normal(np.shape(v)) for n, (kind, v) in enumerate(spec) if kind == "dup"}
    want = _gradient(make(plain), spec, weights)
    got = _gradient(make(checkpointed), spec, weights)
    for n in want[0]:
        # the same kernels on the same values; an atomic sum may add in another order: a few ulps
        np.testing.assert_allclose(got[0][n], want[0][n], rtol=1e-12, atol=1e-14)
        np.testing.assert_array_equal(got[2][n], want[2][n])
    assert (got[1] is want[1] is None) or abs(got[1] - want[1]) <= 1e-12 * abs(want[1])
