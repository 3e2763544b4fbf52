"""Third-party benchmark suites' host loops ported as programs (docs/programs.md, "Ported host loops"): the
time loops of PolyBench/C 4.2 and Rodinia 3.1, written as a user porting the C host code would write them
(kernels for the loop bodies; swaps, views, copies, fills, per-step parameters, host arithmetic on an Active
scalar, helpers called at depth between launches). Each port's store-all gradient is checked against
float64 central differences and by the dot-product test (random non-zero inputs, w.r.t. the initial state
and a scalar parameter), its checkpointed gradient against the store-all one, and its primals after the
gradient against a primal run; the natural spellings gradkern refuses are refused clearly."""

from __future__ import annotations

import numpy as np
import pytest
from support.ported_loops_checks import port_tests

import gradkern as gk
from gradkern.testing import check_grad

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


def plain(step, nsteps):
    for t in range(nsteps):
        step(t)


def checkpointed(step, nsteps):
    gk.checkpointed_loop(step, nsteps, snapshots=2)


# -- PolyBench/C 4.2, stencils/jacobi-1d: B[i] = 0.33333 * (A[i-1] + A[i] + A[i+1]), then A from B ---------------
@gk.kernel
def jacobi_1d_sweep(A, B, w):
    i = gk.tid() + 1
    B[i] = w * (A[i - 1] + A[i] + A[i + 1])


def jacobi_1d(loop):
    def program(A, B, w, tsteps):
        n = A.shape[0]

        def step(t):  # the C's two sweeps a step, A -> B -> A
            gk.launch(jacobi_1d_sweep, n - 2, A, B, w)
            gk.launch(jacobi_1d_sweep, n - 2, B, A, w)
        loop(step, tsteps)
    return program


# -- PolyBench/C 4.2, stencils/jacobi-2d: five-point average, A -> B -> A; the sweep in a helper ----------------
@gk.kernel
def jacobi_2d_sweep(A, B, w):
    i, j = gk.tid()
    i += 1
    j += 1
    B[i, j] = w * (A[i, j] + A[i, j - 1] + A[i, j + 1] + A[i + 1, j] + A[i - 1, j])


def _sweep_2d(src, dst, w):
    n = src.shape[0]
    gk.launch(jacobi_2d_sweep, (n - 2, n - 2), src, dst, w)


def jacobi_2d(loop):
    def program(A, B, w, tsteps):
        def step(t):
            _sweep_2d(A, B, w)  # launches at call depth 2 (3 inside the loop's step)
            _sweep_2d(B, A, w)
        loop(step, tsteps)
    return program


# -- PolyBench/C 4.2, stencils/heat-3d: seven-point heat step, A -> B -> A, t = 1 .. TSTEPS ----------------------
@gk.kernel
def heat_3d_sweep(A, B, alpha):
    i, j, k = gk.tid()
    i += 1
    j += 1
    k += 1
    c = A[i, j, k]
    B[i, j, k] = (alpha * (A[i + 1, j, k] - 2.0 * c + A[i - 1, j, k])
                  + alpha * (A[i, j + 1, k] - 2.0 * c + A[i, j - 1, k])
                  + alpha * (A[i, j, k + 1] - 2.0 * c + A[i, j, k - 1]) + c)


def heat_3d(loop):
    def program(A, B, alpha, tsteps):
        n = A.shape[0]
        dim = (n - 2, n - 2, n - 2)

        def step(t):
            gk.launch(heat_3d_sweep, dim, A, B, alpha)
            gk.launch(heat_3d_sweep, dim, B, A, alpha)
        loop(step, tsteps)
    return program


# -- PolyBench/C 4.2, stencils/fdtd-2d: three in-place field updates and ey[0][j] = _fict_[t] every step -------
@gk.kernel
def fdtd_ey(ey, hz):
    i, j = gk.tid()
    ey[i + 1, j] = ey[i + 1, j] - 0.5 * (hz[i + 1, j] - hz[i, j])


@gk.kernel
def fdtd_ex(ex, hz):
    i, j = gk.tid()
    ex[i, j + 1] = ex[i, j + 1] - 0.5 * (hz[i, j + 1] - hz[i, j])


@gk.kernel
def fdtd_hz(hz, ex, ey, coef):
    i, j = gk.tid()
    hz[i, j] = hz[i, j] - coef * (ex[i, j + 1] - ex[i, j] + ey[i + 1, j] - ey[i, j])


def fdtd_2d(loop):
    def program(ex, ey, hz, fict, coef, tmax):
        nx, ny = ex.shape

        def step(t):
            gk.fill(ey[0], fict[t])  # the C's `ey[0][j] = _fict_[t]`: a per-step parameter read on the host
            gk.launch(fdtd_ey, (nx - 1, ny), ey, hz)
            gk.launch(fdtd_ex, (nx, ny - 1), ex, hz)
            gk.launch(fdtd_hz, (nx - 1, ny - 1), hz, ex, ey, coef)
        loop(step, tmax)
    return program


# -- PolyBench/C 4.2, stencils/seidel-2d: Gauss-Seidel in place, the sweep order serial (one thread) -------------
@gk.kernel
def seidel_2d_sweep(A, w):
    n = A.shape[0]
    for i in range(1, n - 1):
        for j in range(1, n - 1):
            A[i, j] = w * (A[i - 1, j - 1] + A[i - 1, j] + A[i - 1, j + 1]
                           + A[i, j - 1] + A[i, j] + A[i, j + 1]
                           + A[i + 1, j - 1] + A[i + 1, j] + A[i + 1, j + 1])


def seidel_2d(loop):
    def program(A, w, tsteps):
        loop(lambda t: gk.launch(seidel_2d_sweep, 1, A, w), tsteps)
    return program


# -- PolyBench/C 4.2, stencils/adi: column then row sweeps (Thomas algorithm, one thread a line); the
# coefficients a..f are host arithmetic on the Active B1 -------------------------------------------------------
@gk.kernel
def adi_column_sweep(u, v, p, q, a, b, c, d, f):
    i = gk.tid() + 1
    n = u.shape[0]
    v[0, i] = 1.0
    p[i, 0] = 0.0
    q[i, 0] = v[0, i]
    for j in range(1, n - 1):
        p[i, j] = -c / (a * p[i, j - 1] + b)
        q[i, j] = (-d * u[j, i - 1] + (1.0 + 2.0 * d) * u[j, i] - f * u[j, i + 1]
                   - a * q[i, j - 1]) / (a * p[i, j - 1] + b)
    v[n - 1, i] = 1.0
    for jj in range(1, n - 1):
        j = n - 1 - jj
        v[j, i] = p[i, j] * v[j + 1, i] + q[i, j]


@gk.kernel
def adi_row_sweep(u, v, p, q, a, c, d, e, f):
    i = gk.tid() + 1
    n = u.shape[0]
    u[i, 0] = 1.0
    p[i, 0] = 0.0
    q[i, 0] = u[i, 0]
    for j in range(1, n - 1):
        p[i, j] = -f / (d * p[i, j - 1] + e)
        q[i, j] = (-a * v[i - 1, j] + (1.0 + 2.0 * a) * v[i, j] - c * v[i + 1, j]
                   - d * q[i, j - 1]) / (d * p[i, j - 1] + e)
    u[i, n - 1] = 1.0
    for jj in range(1, n - 1):
        j = n - 1 - jj
        u[i, j] = p[i, j] * u[i, j + 1] + q[i, j]


def adi(loop):
    def program(u, v, p, q, B1, tsteps):
        n = u.shape[0]
        DX = DY = 1.0 / n
        DT = 1.0 / tsteps
        mul1 = B1 * DT / (DX * DX)  # an ActiveScalar: its derivative is carried through a..f
        mul2 = 1.0 * DT / (DY * DY)
        a = c = -mul1 / 2.0
        b = 1.0 + mul1
        d = f = -mul2 / 2.0
        e = 1.0 + mul2

        def step(t):
            gk.launch(adi_column_sweep, n - 2, u, v, p, q, a, b, c, d, f)
            gk.launch(adi_row_sweep, n - 2, u, v, p, q, a, c, d, e, f)
        loop(step, tsteps)
    return program


# -- Rodinia 3.1, openmp/hotspot (hotspot_openmp.cpp): single_iteration, then temp = result -----------------------
@gk.kernel
def hotspot_step(result, temp, power, step_div_cap, Rx, Ry, Rz, amb):
    r, c = gk.tid()
    row, col = temp.shape
    t = temp[r, c]
    north = temp[r - 1, c] if r > 0 else t  # the C's corner and edge cases: a missing neighbour adds nothing
    south = temp[r + 1, c] if r < row - 1 else t
    west = temp[r, c - 1] if c > 0 else t
    east = temp[r, c + 1] if c < col - 1 else t
    delta = step_div_cap * (power[r, c] + (south + north - 2.0 * t) / Ry + (east + west - 2.0 * t) / Rx
                            + (amb - t) / Rz)
    result[r, c] = t + delta


def _hotspot_constants(row, col):
    """compute_tran_temp's chip constants (Python floats)."""
    t_chip, grid_height, grid_width = 0.0005, 0.016 / row, 0.016 / col
    cap = 0.5 * 1.75e6 * t_chip * grid_width * grid_height
    Rx = grid_width / (2.0 * 100 * t_chip * grid_height)
    Ry = grid_height / (2.0 * 100 * t_chip * grid_width)
    Rz = t_chip / (100 * grid_height * grid_width)
    step = 0.001 / (3.0e6 / (0.5 * t_chip * 1.75e6))
    return step / cap, Rx, Ry, Rz


def hotspot(loop):
    def program(temp, result, power, amb, num_iterations):
        row, col = temp.shape
        sdc, Rx, Ry, Rz = _hotspot_constants(row, col)

        def one(t):
            gk.launch(hotspot_step, (row, col), result, temp, power, sdc, Rx, Ry, Rz, amb)
            gk.copy(temp, result)  # the C's copy loop `temp[r*col+c] = result[r*col+c]`
        loop(one, num_iterations)
    return program


# -- Rodinia 3.1, openmp/hotspot3D (3D.c computeTempOMP): clamped neighbours, tIn/tOut swapped every step ---------
@gk.kernel
def hotspot_3d_step(p, tIn, tOut, cc, cw, ce, cs, cn, cb, ct, sdc, amb):
    x, y, z = gk.tid()
    nx, ny, nz = tIn.shape
    w = x - 1 if x > 0 else x
    e = x + 1 if x < nx - 1 else x
    n = y - 1 if y > 0 else y
    s = y + 1 if y < ny - 1 else y
    b = z - 1 if z > 0 else z
    t = z + 1 if z < nz - 1 else z
    tOut[x, y, z] = (cc * tIn[x, y, z] + cw * tIn[w, y, z] + ce * tIn[e, y, z] + cs * tIn[x, s, z]
                     + cn * tIn[x, n, z] + cb * tIn[x, y, b] + ct * tIn[x, y, t] + sdc * p[x, y, z] + ct * amb)


def hotspot_3d(loop):
    def program(power, tIn, tOut, amb, numiter):
        nx, ny, nz = tIn.shape
        dx, dy, dz = 0.016 / nx, 0.016 / ny, 0.0005 / nz
        sdc = 0.001 / (3.0e6 / (0.5 * 0.0005 * 1.75e6)) / (0.5 * 1.75e6 * dz * dx * dy)
        ce = cw = sdc / (dy / (2.0 * 100 * dx * dz))
        cn = cs = sdc / (dx / (2.0 * 100 * dy * dz))
        ct = cb = sdc / (dz / (100 * dx * dy))
        cc = 1.0 - (2.0 * ce + 2.0 * cn + 3.0 * ct)

        def one(t):  # the C's pointer swap, as a function of t (a checkpointed step must be one)
            a, b = (tIn, tOut) if t % 2 == 0 else (tOut, tIn)
            gk.launch(hotspot_3d_step, (nx, ny, nz), power, a, b, cc, cw, ce, cs, cn, cb, ct, sdc, amb)
        loop(one, numiter)
    return program


# -- Rodinia 3.1, openmp/srad/srad_v2 (srad.cpp): ROI statistics, diffusion coefficients, update of J in place ---
@gk.kernel
def srad_roi_sums(J, sums, r1, c1, width):
    k = gk.tid()
    v = J[r1 + k // width, c1 + k % width]
    gk.atomic_add(sums, 0, v)
    gk.atomic_add(sums, 1, v * v)


@gk.kernel
def srad_coefficients(J, dN, dS, dW, dE, c, sums, size):
    i, j = gk.tid()
    rows, cols = J.shape
    mean = sums[0] / size  # q0sqr from the ROI's sums: in a kernel, so that its derivative reaches J
    var = sums[1] / size - mean * mean
    q0sqr = var / (mean * mean)
    Jc = J[i, j]
    dN[i, j] = J[max(i - 1, 0), j] - Jc
    dS[i, j] = J[min(i + 1, rows - 1), j] - Jc
    dW[i, j] = J[i, max(j - 1, 0)] - Jc
    dE[i, j] = J[i, min(j + 1, cols - 1)] - Jc
    G2 = (dN[i, j] * dN[i, j] + dS[i, j] * dS[i, j] + dW[i, j] * dW[i, j] + dE[i, j] * dE[i, j]) / (Jc * Jc)
    L = (dN[i, j] + dS[i, j] + dW[i, j] + dE[i, j]) / Jc
    num = 0.5 * G2 - (1.0 / 16.0) * (L * L)
    den = 1.0 + 0.25 * L
    qsqr = num / (den * den)
    den = (qsqr - q0sqr) / (q0sqr * (1.0 + q0sqr))
    c[i, j] = gk.clamp(1.0 / (1.0 + den), 0.0, 1.0)


@gk.kernel
def srad_update(J, dN, dS, dW, dE, c, lam):
    i, j = gk.tid()
    rows, cols = J.shape
    D = (c[i, j] * dN[i, j] + c[min(i + 1, rows - 1), j] * dS[i, j] + c[i, j] * dW[i, j]
         + c[i, min(j + 1, cols - 1)] * dE[i, j])
    J[i, j] = J[i, j] + 0.25 * lam * D


SRAD_ROI = (1, 4, 2, 5)  # r1, r2, c1, c2


def srad(loop):
    r1, r2, c1, c2 = SRAD_ROI

    def program(J, lam, niter):
        rows, cols = J.shape
        dN, dS, dW, dE, c = (np.zeros_like(J) for _ in range(5))  # the C's scratch arrays, allocated once
        sums = np.zeros_like(J, shape=(2,))
        height, width = r2 - r1 + 1, c2 - c1 + 1

        def one(t):
            gk.fill(sums, 0.0)  # sum = 0; sum2 = 0
            gk.launch(srad_roi_sums, height * width, J, sums, r1, c1, width)
            gk.launch(srad_coefficients, (rows, cols), J, dN, dS, dW, dE, c, sums, float(height * width))
            gk.launch(srad_update, (rows, cols), J, dN, dS, dW, dE, c, lam)
        loop(one, niter)
    return program


# -- Rodinia 3.1, openmp/pathfinder (pathfinder.cpp run): one DP row a step, src/dst swapped, wall[t+1] a view ---
@gk.kernel
def pathfinder_row(src, dst, wall_row, w):
    n = gk.tid()
    cols = src.shape[0]
    m = src[n]
    if n > 0:
        m = min(m, src[n - 1])
    if n < cols - 1:
        m = min(m, src[n + 1])
    dst[n] = w * wall_row[n] + m


def pathfinder(loop):
    def program(wall, result, w):
        rows, cols = wall.shape
        src = np.empty_like(result)
        src[:] = wall[0]  # a host copy of a view of an active array into a fresh one: a gk.copy launch
        dst = np.zeros_like(result)

        def one(t):
            a, b = (src, dst) if t % 2 == 0 else (dst, src)
            gk.launch(pathfinder_row, cols, a, b, wall[t + 1], w)
        loop(one, rows - 1)
        np.copyto(result, src if (rows - 1) % 2 == 0 else dst)  # result before any launch took it: a copy
    return program


# -- the ports' arguments: random, away from zero ----------------------------------------------------------------
def _u(rng, *shape, lo=0.5, hi=1.5):
    return rng.uniform(lo, hi, shape)


def _ports(rng):
    """name -> (program factory, arguments as (kind, value)): 'dup' arrays are the differentiated state,
    'const' arrays plain inputs, 'active' the scalar parameter, 'int' step counts."""
    hot = dict(lo=320.0, hi=340.0)
    return {
        "jacobi_1d": (jacobi_1d, [("dup", _u(rng, 12)), ("dup", _u(rng, 12)), ("active", 0.33333), ("int", 3)]),
        "jacobi_2d": (jacobi_2d, [("dup", _u(rng, 7, 7)), ("dup", _u(rng, 7, 7)), ("active", 0.2), ("int", 2)]),
        "heat_3d": (heat_3d, [("dup", _u(rng, 5, 5, 5)), ("dup", _u(rng, 5, 5, 5)), ("active", 0.125), ("int", 2)]),
        "fdtd_2d": (fdtd_2d, [("dup", _u(rng, 5, 6)), ("dup", _u(rng, 5, 6)), ("dup", _u(rng, 5, 6)),
                              ("const", _u(rng, 3)), ("active", 0.7), ("int", 3)]),
        "seidel_2d": (seidel_2d, [("dup", _u(rng, 5, 5)), ("active", 1 / 9.0), ("int", 2)]),
        "adi": (adi, [("dup", _u(rng, 5, 5)), ("dup", _u(rng, 5, 5)), ("dup", _u(rng, 5, 5)), ("dup", _u(rng, 5, 5)),
                      ("active", 2.0), ("int", 2)]),
        "hotspot": (hotspot, [("dup", _u(rng, 5, 6, **hot)), ("dup", _u(rng, 5, 6, **hot)),
                              ("const", _u(rng, 5, 6, lo=0.0, hi=1e-3)), ("active", 80.0), ("int", 3)]),
        "hotspot_3d": (hotspot_3d, [("const", _u(rng, 4, 3, 3, lo=0.0, hi=1e-3)), ("dup", _u(rng, 4, 3, 3, **hot)),
                                    ("dup", _u(rng, 4, 3, 3, **hot)), ("active", 80.0), ("int", 3)]),
        "srad": (srad, [("dup", np.exp(_u(rng, 7, 8, lo=0.0, hi=1.0))), ("active", 0.5), ("int", 2)]),
        "pathfinder": (pathfinder, [("dup", _u(rng, 5, 8)), ("dup", np.zeros(8)), ("active", 1.3)]),
    }


PORTS = list(_ports(np.random.default_rng(0)))


def _annotated(spec, shadows=None):
    out = []
    for n, (kind, v) in enumerate(spec):
        if kind == "dup":
            out.append(gk.Duplicated(v.copy(), (shadows[n] if shadows else np.zeros_like(v)).copy()))
        elif kind == "const":
            out.append(gk.Const(v.copy()))
        elif kind == "active":
            out.append(gk.Active(v))
        else:
            out.append(v)
    return out


def _run(program, spec, shift=None):
    """A primal run on copies of the arguments (`shift`: position -> what is added to that argument); returns
    the arguments after it."""
    values = [v.copy() if isinstance(v, np.ndarray) else v for _, v in spec]
    for n, dv in (shift or {}).items():
        values[n] = values[n] + dv
    program(*values)
    return values


def _gradient(program, spec, weights):
    """gk.autodiff of L = sum <weights[n], argument n after the program> over the 'dup' arguments: the shadows
    (the derivatives w.r.t. each initial array), the Active derivative and the primals after the gradient."""
    args = _annotated(spec, weights)
    got = gk.autodiff(program, *args)
    dups = {n: a for n, a in enumerate(args) if isinstance(a, gk.Duplicated)}
    act = _active_position(spec)
    return {n: a.dval for n, a in dups.items()}, None if act is None else got[act], {n: a.val for n, a in dups.items()}


def _active_position(spec):
    """Where the port's Active scalar is (a factorisation has none: None)."""
    return next((n for n, (kind, _) in enumerate(spec) if kind == "active"), None)


def _loss(program, spec, weights, shift):
    after = _run(program, spec, shift)
    return sum(float(np.sum(weights[n] * after[n])) for n in weights)


def _check_against_differences(program, spec, rng):
    """The store-all gradient of `program` against central differences (a few coordinates of each initial array
    and the scalar) and the dot-product test along a random direction; the primals after it as a primal run
    leaves them."""
    weights = {n: rng.standard_normal(np.shape(v)) for n, (kind, v) in enumerate(spec) if kind == "dup"}
    grads, dscalar, primals = _gradient(program, spec, weights)
    after = _run(program, spec)
    for n, p in primals.items():
        np.testing.assert_array_equal(p, after[n])
    act = _active_position(spec)
    if act is not None:
        h = 1e-6 * max(1.0, abs(spec[act][1]))
        fd = (_loss(program, spec, weights, {act: h}) - _loss(program, spec, weights, {act: -h})) / (2 * h)
        assert abs(dscalar - fd) <= 1e-7 + 1e-5 * max(abs(fd), abs(dscalar)), (dscalar, fd)
    for n, (kind, v) in enumerate(spec):
        if kind != "dup":
            continue
        for flat in rng.choice(v.size, size=min(4, v.size), replace=False):
            e = np.zeros(v.size)
            e[flat] = h = 1e-6 * max(1.0, abs(v.flat[flat]))
            e = e.reshape(v.shape)
            fd = (_loss(program, spec, weights, {n: e}) - _loss(program, spec, weights, {n: -e})) / (2 * h)
            got = grads[n].flat[flat]
            assert abs(got - fd) <= 1e-7 + 1e-5 * max(abs(fd), abs(got)), (n, flat, got, fd)
    # the dot-product test: <w, J v> by central differences against <J^T w, v>
    direction = {n: rng.standard_normal(np.shape(v)) * max(1.0, float(np.max(np.abs(v))))
                 for n, (kind, v) in enumerate(spec) if kind in ("dup", "active")}
    eps = 1e-6
    plus = _loss(program, spec, weights, {n: eps * d for n, d in direction.items()})
    minus = _loss(program, spec, weights, {n: -eps * d for n, d in direction.items()})
    numeric = (plus - minus) / (2 * eps)
    analytic = sum(float(np.sum(grads[n] * d)) for n, d in direction.items() if n in grads)
    analytic += 0.0 if act is None else dscalar * float(direction[act])
    assert abs(analytic - numeric) <= 1e-7 + 1e-5 * max(abs(numeric), abs(analytic)), (analytic, numeric)


def _same_store_all(make, spec):
    """The checkpointed twin against store-all (test_ported_solvers.py's check, this round's weights: seed 3)."""
    from .test_ported_solvers import _same_gradients  # it imports this module
    _same_gradients(make, spec, seed=3)


# Every port's gradient (finite differences, the dot-product test) and its checkpointed twin run in CI on the
# interpreter: the transforms' output and the program layer, which never looks at a kernel's body, without a compile
# (the Numba kernels of these ports cost 3-10 s of CPU each to compile, the interpreter's check of every port a few
# seconds: docs/testing.md "Test time", session 52). The Numba backend's gradient runs in CI for NUMBA_SAMPLE (srad,
# hotspot_3d), the others' under `full`.
NUMBA_SAMPLE = {"srad", "hotspot_3d"}
# The checkpointed twin: gk.checkpointed_loop(step, nsteps, snapshots=2) around the port's time loop: the gradient of
# the store-all program (the same kernels on the same values; atomic sums may add in another order) and the same
# primals.
globals().update(port_tests(_ports, NUMBA_SAMPLE, _check_against_differences, _same_store_all, loop=plain))


# -- the natural spellings gradkern refuses: each a gk.GradkernError naming the fix, before any shadow changes ------
def _refused(error, match, program, *args):
    shadows = [a.dval.copy() for a in args if isinstance(a, gk.Duplicated)]
    with pytest.raises(error, match=match) as info:
        gk.autodiff(program, *args)
    assert "gradkern/" not in str(info.value).replace("tests/program", "")  # the user's lines, not ours
    return shadows, info.value


@gk.kernel
def srad_coefficients_q0(J, c, q0sqr):
    i, j = gk.tid()
    c[i, j] = J[i, j] * J[i, j] / (q0sqr * (1.0 + q0sqr))


def srad_host_statistics(J, c, niter):
    """srad.cpp's ROI statistics as a user ports them first: NumPy sums on the host, q0sqr a NumPy scalar."""
    r1, r2, c1, c2 = SRAD_ROI
    for _ in range(niter):
        tile = J[r1:r2 + 1, c1:c2 + 1]
        mean = tile.sum() / tile.size
        var = (tile * tile).sum() / tile.size - mean * mean
        q0sqr = var / (mean * mean)
        gk.launch(srad_coefficients_q0, J.shape, J, c, q0sqr)


def test_a_scalar_reduced_from_an_active_array_is_differentiated_at_the_launch():
    """Before session 48: q0sqr reached the launch as a constant and d/dJ lacked its part (srad's gradient 1.7x off
    central differences, silently); sessions 48-56: refused at the launch, naming the reduction; since session 57
    the sums are reads (program/hostreads.py) and q0sqr an Active scalar: central differences agree. float() and
    gk.Const say that no derivative through it is wanted (a var(), which stays derived, below)."""
    rng = np.random.default_rng(5)
    J, c = np.exp(_u(rng, 6, 7, lo=0.0, hi=1.0)), np.zeros((6, 7))
    check_grad(srad_host_statistics, gk.Duplicated(J.copy(), np.zeros_like(J)),
               gk.Duplicated(c.copy(), np.zeros_like(c)), 2)

    def with_constant(J, c, niter, wrap):
        tile = J[1:4, 2:5]
        q0sqr = tile.var() / tile.mean() ** 2
        assert q0sqr > 0 and q0sqr == float(q0sqr)  # control flow and printing read the number
        for _ in range(niter):
            gk.launch(srad_coefficients_q0, J.shape, J, c, wrap(q0sqr))
    for wrap in (float, gk.Const):
        dJ = np.zeros_like(J)
        gk.autodiff(with_constant, gk.Duplicated(J.copy(), dJ), gk.Duplicated(c.copy(), np.ones_like(c)), 1, wrap)
        q0 = J[1:4, 2:5].var() / J[1:4, 2:5].mean() ** 2
        np.testing.assert_allclose(dJ, 2 * J / (q0 * (1 + q0)), rtol=1e-12)


def test_active_scalar_arithmetic_with_a_reduced_scalar_is_differentiated():
    """`lam * J.sum()`: before session 57 refused (an Active scalar carrying lam's derivative only); now `J.sum()` is
    a read (program/hostreads.py) and the product carries both derivatives (central differences agree)."""
    def program(J, c, lam):
        gk.launch(srad_coefficients_q0, J.shape, J, c, lam * J.sum())
    rng = np.random.default_rng(4)
    J = _u(rng, 3, 4)
    check_grad(program, gk.Duplicated(J, np.zeros_like(J)), gk.Duplicated(np.zeros_like(J), np.ones_like(J)),
               gk.Active(0.5))


def test_an_element_read_of_an_active_array_as_a_fill_value():
    """fdtd-2d's `ey[0][j] = _fict_[t]` with _fict_ differentiated: fict[t] is an element of an active array. Before
    session 57 refused; now a read (program/hostreads.py), differentiated (central differences agree) in a plain
    loop, and still refused naming the read inside a checkpointed loop's step, whose recomputation does not replay
    the scalar tape (docs/host-code.md, "Reductions and element reads")."""
    rng = np.random.default_rng(6)
    args = [gk.Duplicated(_u(rng, 4, 5), np.zeros((4, 5))) for _ in range(3)]
    args += [gk.Duplicated(_u(rng, 3), np.zeros(3)), gk.Active(0.7), 3]
    check_grad(fdtd_2d(plain), *args)
    _refused(gk.ProgramError, r"an element read. of 'fict'", fdtd_2d(checkpointed), *args)


def hotspot_copy_back(temp, result, power, amb, num_iterations):
    row, col = temp.shape
    sdc, Rx, Ry, Rz = _hotspot_constants(row, col)
    for _ in range(num_iterations):
        gk.launch(hotspot_step, (row, col), result, temp, power, sdc, Rx, Ry, Rz, amb)
        np.copyto(temp, result)  # hotspot_openmp.cpp's copy loop, written with NumPy


def fdtd_row_fill(ex, ey, hz, fict, coef, tmax):
    nx, ny = ex.shape
    for t in range(tmax):
        ey[0, :] = fict[t]  # fdtd-2d.c's `ey[0][j] = _fict_[t]`, written with NumPy
        gk.launch(fdtd_ey, (nx - 1, ny), ey, hz)
        gk.launch(fdtd_ex, (nx, ny - 1), ex, hz)
        gk.launch(fdtd_hz, (nx - 1, ny - 1), hz, ex, ey, coef)


def jacobi_boundary_fix(A, B, w, tsteps):
    for _ in range(tsteps):
        gk.launch(jacobi_1d_sweep, A.shape[0] - 2, A, B, w)
        B[0] = B[1]  # a Neumann boundary fixed on the host
        A, B = B, A


@pytest.mark.parametrize("program", [hotspot_copy_back, fdtd_row_fill, jacobi_boundary_fix])
def test_host_writes_into_launched_arrays_are_refused_naming_gk_copy_and_gk_fill(program):
    rng = np.random.default_rng(8)
    if program is hotspot_copy_back:
        args = [gk.Duplicated(_u(rng, 4, 5, lo=320, hi=340), np.ones((4, 5))) for _ in range(2)]
        args += [gk.Const(_u(rng, 4, 5, lo=0.0, hi=1e-3)), gk.Active(80.0), 2]
    elif program is fdtd_row_fill:
        args = [gk.Duplicated(_u(rng, 4, 5), np.ones((4, 5))) for _ in range(3)] + [_u(rng, 3), gk.Active(0.7), 2]
    else:
        args = [gk.Duplicated(_u(rng, 9), np.ones(9)) for _ in range(2)] + [gk.Active(0.3), 2]
    shadows, error = _refused(gk.ProgramError, r"a host write to .* after launch \d+", program, *args)
    assert "gk.copy(dst, src) or gk.fill(dst, value)" in str(error)
    for before, a in zip(shadows, [a for a in args if isinstance(a, gk.Duplicated)]):
        np.testing.assert_array_equal(a.dval, before)


def hotspot_3d_list_swap(power, tIn, tOut, amb, numiter):
    """3D.c's `tmp = tIn; tIn = tOut; tOut = tmp` kept in a list outside the step: not a function of t."""
    nx, ny, nz = tIn.shape
    bufs = [tIn, tOut]

    def one(t):
        a, b = bufs
        gk.launch(hotspot_3d_step, (nx, ny, nz), power, a, b, 0.4, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 1e-3, amb)
        bufs[0], bufs[1] = b, a
    gk.checkpointed_loop(one, numiter, snapshots=2)


def test_a_swap_kept_outside_a_checkpointed_step_is_refused_naming_the_t_parity_spelling():
    rng = np.random.default_rng(9)
    args = [gk.Const(_u(rng, 3, 3, 2)), gk.Duplicated(_u(rng, 3, 3, 2), np.ones((3, 3, 2))),
            gk.Duplicated(_u(rng, 3, 3, 2), np.ones((3, 3, 2))), gk.Active(80.0), 4]
    with pytest.raises(gk.ProgramError, match=r"on other arrays.*partial gradient") as info:
        gk.autodiff(hotspot_3d_list_swap, *args)
    assert "if t % 2 == 0 else" in str(info.value)
    # without checkpoints the same loop is a plain program: the store-all gradient takes it
    args = [gk.Const(args[0].val), *(gk.Duplicated(_u(rng, 3, 3, 2), np.ones((3, 3, 2))) for _ in range(2)),
            gk.Active(80.0), 4]
    gk.autodiff(lambda *a: hotspot_3d(plain)(*a), *args)


@gk.kernel
def three_point(left, mid, right, out, w):
    i = gk.tid()
    out[i] = w * (left[i] + mid[i] + right[i])


def jacobi_1d_shifted_views(A, B, w, tsteps):
    """jacobi-1d as NumPy code reads (B[1:-1] = w * (A[:-2] + A[1:-1] + A[2:])), the slices passed to a kernel."""
    for _ in range(tsteps):
        gk.launch(three_point, A.shape[0] - 2, A[:-2], A[1:-1], A[2:], B[1:-1], w)
        A, B = B, A


def test_shifted_views_of_one_active_array_are_refused_naming_the_indexed_spelling():
    rng = np.random.default_rng(10)
    args = [gk.Duplicated(_u(rng, 9), np.ones(9)), gk.Duplicated(_u(rng, 9), np.ones(9)), gk.Active(0.3), 2]
    _, error = _refused(gk.AliasingError, r"shadow of 'mid' shares memory with the shadow of 'left'",
                        jacobi_1d_shifted_views, *args)
    assert "a[i - 1], a[i], a[i + 1]" in str(error)


def test_bad_inputs_to_a_port_raise_gradkern_errors():
    rng = np.random.default_rng(11)
    A = _u(rng, 7, 7)
    program = jacobi_2d(plain)
    with pytest.raises(gk.AnnotationError):  # a shadow of another shape
        gk.autodiff(program, gk.Duplicated(A.copy(), np.zeros((7, 6))), gk.Duplicated(A.copy(), np.zeros_like(A)),
                    gk.Active(0.2), 1)
    with pytest.raises(gk.AnnotationError):  # an integer state cannot carry a derivative
        gk.autodiff(program, gk.Duplicated(np.ones((7, 7), np.int64), np.zeros((7, 7), np.int64)),
                    gk.Duplicated(A.copy(), np.zeros_like(A)), gk.Active(0.2), 1)
    with pytest.raises(gk.GradkernError):  # an array where the kernel takes a scalar
        gk.autodiff(program, gk.Duplicated(A.copy(), np.zeros_like(A)), gk.Duplicated(A.copy(), np.zeros_like(A)),
                    gk.Const(A.copy()), 1)
    with pytest.raises(gk.ProgramError, match="snapshots"):
        gk.autodiff(jacobi_2d(lambda step, n: gk.checkpointed_loop(step, n, snapshots=0)),
                    gk.Duplicated(A.copy(), np.zeros_like(A)), gk.Duplicated(A.copy(), np.zeros_like(A)),
                    gk.Active(0.2), 2)


def jacobi_phases(A, B, w, plan, loop):
    """jacobi-1d run in phases of different lengths (a Python loop around the time loop), with a host copy and
    one more sweep from it between phases."""
    n = A.shape[0]

    def step(t):
        gk.launch(jacobi_1d_sweep, n - 2, A, B, w)
        gk.launch(jacobi_1d_sweep, n - 2, B, A, w * 0.9)
    for nsteps in plan:
        loop(step, nsteps)
        old = A.copy()
        gk.launch(jacobi_1d_sweep, n - 2, old, A, w)


def hotspot_local_swap(temp, result, out, power, amb, num_iterations):
    """hotspot with the copy-back replaced by a swap of local names, the answer copied into `out` at the end."""
    row, col = temp.shape
    sdc, Rx, Ry, Rz = _hotspot_constants(row, col)
    for _ in range(num_iterations):
        gk.launch(hotspot_step, (row, col), result, temp, power, sdc, Rx, Ry, Rz, amb)
        temp, result = result, temp
    np.copyto(out, temp)  # out: an argument no launch has taken yet, so the copy is a gk.copy launch


def test_phases_of_different_lengths_and_a_local_swap():
    rng = np.random.default_rng(12)
    spec = [("dup", _u(rng, 10)), ("dup", _u(rng, 10)), ("active", 0.3), ("int", (2, 3, 1))]
    _check_against_differences(lambda *a: jacobi_phases(*a, plain), spec, rng)
    weights = {0: rng.standard_normal(10), 1: rng.standard_normal(10)}
    want = _gradient(lambda *a: jacobi_phases(*a, plain), spec, weights)
    got = _gradient(lambda *a: jacobi_phases(*a, checkpointed), spec, weights)
    for n in want[0]:
        np.testing.assert_allclose(got[0][n], want[0][n], rtol=1e-12, atol=1e-14)
        np.testing.assert_array_equal(got[2][n], want[2][n])
    assert abs(got[1] - want[1]) <= 1e-12 * abs(want[1])
    hot = [("dup", _u(rng, 4, 5, lo=320, hi=340)) for _ in range(3)]
    _check_against_differences(hotspot_local_swap, hot + [("const", _u(rng, 4, 5, lo=0.0, hi=1e-3)),
                                                          ("active", 80.0), ("int", 3)], rng)
