"""Round 11's time-step controllers, image filter and eigen-bound driven solver (tests/program/
test_ported_loops11.py; support/ported_loops11.py has the Krylov drivers): CloverLeaf's calc_dt and timestep,
LULESH's Courant and hydro constraints with TimeIncrement, Rodinia's SRAD with q0sqr from host sums,
IterativeSolvers.jl's power method bounding a Chebyshev iteration. Their minima, sums and norms are host
reductions, spelled as the originals' (Fortran MINVAL, C loops with `if (dtf < dtcourant)`, `sum += tmp`)."""

import numpy as np

import gradkern as gk
from support.host_scalar_kernels import axpy, matvec, xpay
from support.ported_loops11 import tri_dense


# -- A 1-D staggered ideal-gas step shared by the two hydro drivers (density, specific energy at cells, velocity at
# nodes, the end nodes walls): `accelerate` (CloverLeaf's accelerate_kernel, LULESH's CalcForceForNodes and
# CalcAccelerationForNodes cut to the pressure gradient), `pdv` (CloverLeaf's PdV_kernel, LULESH's
# CalcLagrangeElements and the energy update: rho / (1 + dt div), e - dt (gamma - 1) e div), `eos`
# (ideal_gas_kernel: p = (gamma - 1) rho e, ss = sqrt(gamma p / rho)); `gamma` is the Active parameter ---------
@gk.kernel
def eos(rho, e, p, ss, gamma):
    i = gk.tid()
    p[i] = (gamma - 1.0) * rho[i] * e[i]
    ss[i] = gk.sqrt(gamma * p[i] / rho[i])


@gk.kernel
def accelerate(u, p, rho, dt, dx):
    i = gk.tid()
    if i > 0 and i < u.shape[0] - 1:
        u[i] = u[i] - dt * (p[i] - p[i - 1]) / (0.5 * (rho[i] + rho[i - 1]) * dx)


@gk.kernel
def pdv(rho, e, u, dt, dx, gamma):
    i = gk.tid()
    div = (u[i + 1] - u[i]) / dx
    rho[i] = rho[i] / (1.0 + dt * div)
    e[i] = e[i] - dt * (gamma - 1.0) * e[i] * div


# -- CloverLeaf (UK-MAC/CloverLeaf_ref calc_dt_kernel.f90: per cell `cc = MAX(SQRT(soundspeed**2 + ...),
# g_small)`, `dtct = dtc_safe * dsx / cc`, `dtut = dtu_safe * 2 * volume / MAX(ABS(dv1), ABS(dv2), g_small *
# volume)`, `IF (div < -g_small) dtdivt = dtdiv_safe * (-1 / div)`, `dt_min = MIN(dtct, dtut, dtdivt)`, then
# `dt_min_val = MINVAL(dt_min)`; timestep.f90's `dt = MIN(dt, dtlp)` over tiles and `dt = MIN(dt, dtold * dtrise,
# dtmax)`), cut to 1-D: the MINVAL a host `.min()`, the clamp Python's `min` of the Active scalar ------------------
CLOVER = dict(nsteps=3, dx=0.1, dtc_safe=0.7, dtu_safe=0.5, dtdiv_safe=0.7, dtrise=1.5, dtmax=0.2, dtinit=0.06,
              g_small=1e-16, g_big=1e21)


@gk.kernel
def clover_calc_dt(u, ss, dt_min, dx, dtc_safe, dtu_safe, dtdiv_safe, g_small, g_big):
    i = gk.tid()
    dtct = dtc_safe * dx / max(ss[i], g_small)
    dv1, dv2 = u[i], u[i + 1]
    dtut = dtu_safe * dx / max(max(abs(dv1), abs(dv2)), g_small)
    div = (dv2 - dv1) / dx
    dtdivt = g_big
    if div < -g_small:
        dtdivt = dtdiv_safe * (-1.0 / div)
    dt_min[i] = min(min(dtct, dtut), dtdivt)


def cloverleaf_hydro(trace=None):
    c = CLOVER

    def program(rho, e, u, gamma):
        n = rho.shape[0]
        p, ss, dt_min = np.zeros(n), np.zeros(n), np.zeros(n)
        dtold = c["dtinit"]
        for _ in range(c["nsteps"]):
            gk.launch(eos, n, rho, e, p, ss, gamma)
            gk.launch(clover_calc_dt, n, u, ss, dt_min, c["dx"], c["dtc_safe"], c["dtu_safe"], c["dtdiv_safe"],
                      c["g_small"], c["g_big"])
            dtlp = dt_min.min()
            dt = min(c["g_big"], dtlp)
            dt = min(dt, dtold * c["dtrise"], c["dtmax"])
            if trace is not None:
                trace.append("cell" if dt is dtlp else "clamp")
            gk.launch(accelerate, n + 1, u, p, rho, dt, c["dx"])
            gk.launch(pdv, n, rho, e, u, dt, c["dx"], gamma)
            dtold = dt
    return program


def _eos_ref(rho, e, gamma):
    p = (gamma - 1.0) * rho * e
    return p, np.sqrt(gamma * p / rho)


def _step_ref(rho, e, u, p, dt, dx, gamma):
    u = u.copy()
    u[1:-1] -= dt * (p[1:] - p[:-1]) / (0.5 * (rho[1:] + rho[:-1]) * dx)
    div = (u[1:] - u[:-1]) / dx
    return rho / (1.0 + dt * div), e - dt * (gamma - 1.0) * e * div, u


def cloverleaf_hydro_reference(rho, e, u, gamma):
    c = CLOVER
    dtold = c["dtinit"]
    for _ in range(c["nsteps"]):
        p, ss = _eos_ref(rho, e, gamma)
        div = (u[1:] - u[:-1]) / c["dx"]
        dtct = c["dtc_safe"] * c["dx"] / np.maximum(ss, c["g_small"])
        dtut = c["dtu_safe"] * c["dx"] / np.maximum(np.maximum(np.abs(u[:-1]), np.abs(u[1:])), c["g_small"])
        dtdivt = np.where(div < -c["g_small"], c["dtdiv_safe"] * (-1.0 / np.where(div < 0, div, -1.0)), c["g_big"])
        dt = min(np.min(np.minimum(np.minimum(dtct, dtut), dtdivt)), dtold * c["dtrise"], c["dtmax"])
        rho, e, u = _step_ref(rho, e, u, p, dt, c["dx"], gamma)
        dtold = dt
    return {0: rho, 1: e, 2: u}


# -- LULESH 2.0 (LLNL/LULESH lulesh.cc: CalcCourantConstraintForElems `dtf = ss[indx] * ss[indx]; if (vdov < 0)
# dtf += qqc2 * arealg * arealg * vdov * vdov; dtf = SQRT(dtf); dtf = arealg / dtf; if (vdov != 0 && dtf <
# dtcourant_tmp) ...`, CalcHydroConstraintForElems `dtdvov = dvovmax / (FABS(vdov) + 1e-20)`, TimeIncrement's
# `gnewdt = dtcourant / 2`, `dthydro * 2 / 3`, the ratio's lower and upper bounds, `dtmax`, and the cut to the stop
# time `if (targetdt > deltatime && targetdt < 4 * deltatime / 3) targetdt = 2 * deltatime / 3`; main's `while
# (time < stoptime)` with TimeIncrement before LagrangeLeapFrog and the constraints after it). The per-element
# loop bodies are kernels, their minima host `.min()`s; the time and the step are Active scalars -------------------
LULESH = dict(stoptime=0.6, dtinit=0.2, dtmax=0.5, qqc=2.0, dvovmax=0.5, multlb=1.1, multub=1.2, dx=0.25)


@gk.kernel
def lulesh_constraints(u, ss, dtf, dtdvov, dx, qqc2, dvovmax):
    i = gk.tid()
    vdov = (u[i + 1] - u[i]) / dx
    f = ss[i] * ss[i]
    if vdov < 0.0:
        f = f + qqc2 * dx * dx * vdov * vdov
    dtf[i] = dx / gk.sqrt(f)
    dtdvov[i] = dvovmax / (abs(vdov) + 1e-20)


def lulesh_time_increment(deltatime, time, cycle, dtcourant, dthydro, trace=None):
    """TimeIncrement as lulesh.cc writes it (dtfixed <= 0): the new (deltatime, time)."""
    c = LULESH
    targetdt = c["stoptime"] - time
    path = []
    if cycle != 0:
        olddt = deltatime
        gnewdt = 1.0e20
        if dtcourant < gnewdt:
            gnewdt = dtcourant / 2.0
            path.append("courant")
        if dthydro < gnewdt:
            gnewdt = dthydro * 2.0 / 3.0
            path.append("hydro")
        newdt = gnewdt
        ratio = newdt / olddt
        if ratio >= 1.0:
            if ratio < c["multlb"]:
                newdt = olddt
                path.append("lb")
            elif ratio > c["multub"]:
                newdt = olddt * c["multub"]
                path.append("ub")
        if newdt > c["dtmax"]:
            newdt = c["dtmax"]
            path.append("max")
        deltatime = newdt
    if targetdt > deltatime and targetdt < 4.0 * deltatime / 3.0:
        targetdt = 2.0 * deltatime / 3.0
        path.append("two thirds")
    if targetdt < deltatime:
        deltatime = targetdt
        path.append("stop")
    if trace is not None:
        trace.append(tuple(path))
    return deltatime, time + deltatime


def lulesh_hydro(trace=None):
    c = LULESH

    def program(rho, e, u, gamma):
        n = rho.shape[0]
        p, ss, dtf, dtdvov = (np.zeros(n) for _ in range(4))
        deltatime, time, cycle = c["dtinit"], 0.0, 0
        dtcourant = dthydro = 1.0e20
        while time < c["stoptime"]:
            deltatime, time = lulesh_time_increment(deltatime, time, cycle, dtcourant, dthydro, trace)
            gk.launch(eos, n, rho, e, p, ss, gamma)  # LagrangeLeapFrog
            gk.launch(accelerate, n + 1, u, p, rho, deltatime, c["dx"])
            gk.launch(pdv, n, rho, e, u, deltatime, c["dx"], gamma)
            gk.launch(eos, n, rho, e, p, ss, gamma)  # CalcTimeConstraintsForElems
            gk.launch(lulesh_constraints, n, u, ss, dtf, dtdvov, c["dx"], c["qqc"] ** 2, c["dvovmax"])
            dtcourant, dthydro = dtf.min(), dtdvov.min()
            cycle += 1
    return program


def lulesh_hydro_reference(rho, e, u, gamma):
    c = LULESH
    deltatime, time, cycle = c["dtinit"], 0.0, 0
    dtcourant = dthydro = 1.0e20
    while time < c["stoptime"]:
        deltatime, time = lulesh_time_increment(deltatime, time, cycle, dtcourant, dthydro)
        p, _ = _eos_ref(rho, e, gamma)
        rho, e, u = _step_ref(rho, e, u, p, deltatime, c["dx"], gamma)
        _, ss = _eos_ref(rho, e, gamma)
        vdov = (u[1:] - u[:-1]) / c["dx"]
        f = ss * ss + np.where(vdov < 0.0, c["qqc"] ** 2 * c["dx"] ** 2 * vdov ** 2, 0.0)
        dtcourant, dthydro = np.min(c["dx"] / np.sqrt(f)), np.min(c["dvovmax"] / (np.abs(vdov) + 1e-20))
        cycle += 1
    return {0: rho, 1: e, 2: u}


# -- Rodinia 3.1 SRAD v1 (rodinia/openmp/srad/srad_v1/main.c: the extraction `image[i] = exp(image[i] / 255)`, each
# iteration's ROI loop `sum += tmp; sum2 += tmp * tmp`, `meanROI = sum / NeROI; varROI = (sum2 / NeROI) - meanROI *
# meanROI; q0sqr = varROI / (meanROI * meanROI)`, the diffusion coefficient loop (clamped to [0, 1]) and the
# divergence update `image[k] = image[k] + 0.25 * lambda * D`, the compression `log(image) * 255`). The ROI sums
# are host `.sum()`s of a view, q0sqr Active-scalar arithmetic; `lambda` Active --------------------------------
SRAD = dict(niter=2, r1=0, r2=1, c1=1, c2=2)


@gk.kernel
def srad_coeff(image, dn, ds, dw, de, c, q0sqr):
    k = gk.tid()
    nc = image.shape[1]
    i = k // nc
    j = k - i * nc
    jc = image[i, j]
    dn[i, j] = image[max(i - 1, 0), j] - jc
    ds[i, j] = image[min(i + 1, image.shape[0] - 1), j] - jc
    dw[i, j] = image[i, max(j - 1, 0)] - jc
    de[i, j] = image[i, min(j + 1, nc - 1)] - jc
    g2 = (dn[i, j] * dn[i, j] + ds[i, j] * ds[i, j] + dw[i, j] * dw[i, j] + de[i, j] * de[i, j]) / (jc * jc)
    lap = (dn[i, j] + ds[i, j] + dw[i, j] + de[i, j]) / jc
    num = 0.5 * g2 - (1.0 / 16.0) * lap * lap
    den = 1.0 + 0.25 * lap
    qsqr = num / (den * den)
    den = (qsqr - q0sqr) / (q0sqr * (1.0 + q0sqr))
    cv = 1.0 / (1.0 + den)
    if cv < 0.0:
        cv = 0.0
    elif cv > 1.0:
        cv = 1.0
    c[i, j] = cv


@gk.kernel
def srad_update(image, dn, ds, dw, de, c, lam):
    k = gk.tid()
    nc = image.shape[1]
    i = k // nc
    j = k - i * nc
    d = (c[i, j] * dn[i, j] + c[min(i + 1, image.shape[0] - 1), j] * ds[i, j] + c[i, j] * dw[i, j]
         + c[i, min(j + 1, nc - 1)] * de[i, j])
    image[i, j] = image[i, j] + 0.25 * lam * d


def rodinia_srad(trace=None):
    s = SRAD

    def program(image, out, lam):
        img = np.exp(image / 255.0)
        dn, ds, dw, de, c = (np.zeros_like(image) for _ in range(5))
        ne_roi = (s["r2"] - s["r1"] + 1) * (s["c2"] - s["c1"] + 1)
        for _ in range(s["niter"]):
            roi = img[s["r1"]:s["r2"] + 1, s["c1"]:s["c2"] + 1]
            total, total2 = roi.sum(), (roi * roi).sum()
            mean_roi = total / ne_roi
            var_roi = (total2 / ne_roi) - mean_roi * mean_roi
            q0sqr = var_roi / (mean_roi * mean_roi)
            gk.launch(srad_coeff, image.size, img, dn, ds, dw, de, c, q0sqr)
            if trace is not None:  # the cells the clamp to [0, 1] set (a branch of the kernel)
                trace.append(tuple(np.flatnonzero((c == 0.0) | (c == 1.0)).tolist()))
            gk.launch(srad_update, image.size, img, dn, ds, dw, de, c, lam)
        gk.copy(out, np.log(img) * 255.0)
    return program


def rodinia_srad_reference(image, out, lam):
    s = SRAD
    img = np.exp(image / 255.0)
    for _ in range(s["niter"]):
        roi = img[s["r1"]:s["r2"] + 1, s["c1"]:s["c2"] + 1]
        mean = roi.sum() / roi.size
        q0sqr = (np.sum(roi * roi) / roi.size - mean * mean) / (mean * mean)
        pad = np.pad(img, 1, mode="edge")
        dn, ds = pad[:-2, 1:-1] - img, pad[2:, 1:-1] - img
        dw, de = pad[1:-1, :-2] - img, pad[1:-1, 2:] - img
        g2 = (dn ** 2 + ds ** 2 + dw ** 2 + de ** 2) / img ** 2
        lap = (dn + ds + dw + de) / img
        qsqr = (0.5 * g2 - lap * lap / 16.0) / (1.0 + 0.25 * lap) ** 2
        c = np.clip(1.0 / (1.0 + (qsqr - q0sqr) / (q0sqr * (1.0 + q0sqr))), 0.0, 1.0)
        cpad = np.pad(c, 1, mode="edge")
        img = img + 0.25 * lam * (c * dn + cpad[2:, 1:-1] * ds + c * dw + cpad[1:-1, 2:] * de)
    return {1: np.log(img) * 255.0}


# -- IterativeSolvers.jl (src/simple.jl `powm!`: `mul!(Ax, A, x)`, `θ = dot(x, Ax)`, `r = Ax - θ x`, `residual =
# norm(r)`, `x = Ax / norm(Ax)`; src/chebyshev.jl `chebyshev!` / `iterate(::ChebyshevIterable)`: `center =
# (λmax + λmin) / 2`, `radius = (λmax - λmin) / 2`, `α = 1 / center` on the first step, `β = (radius α)^2 / 2` on
# the second, `β = (radius α / 2)^2` after, `α = inv(center - β / α)`, `u = r + β u`, `x += α u`, `r -= α A u`,
# `resnorm = norm(r)`): the power method's Rayleigh quotient, padded by 10 %, bounds the spectrum from above, the
# lower bound `lmin` Active; the power method's vectors rebound as NumPy expressions -----------------------------
CHEB = dict(power_iters=3, iters=4, pad=1.1)


def power_chebyshev():
    c = CHEB

    def program(x, b, d, lmin):
        n = x.shape[0]
        ax = np.zeros(n)
        v = b / np.linalg.norm(b)  # powm!'s start: the right-hand side normalised
        theta = None
        for _ in range(c["power_iters"]):
            gk.launch(matvec, n, d, v, ax, -1.0)
            theta = np.dot(v, ax)
            residual = np.linalg.norm(ax - theta * v)  # powm!'s convergence test, not taken: a fixed count
            assert residual > 0.0
            v = ax / np.linalg.norm(ax)
        lmax = c["pad"] * theta
        center, radius = (lmax + lmin) / 2.0, (lmax - lmin) / 2.0
        r, u, au = np.zeros(n), np.zeros(n), np.zeros(n)
        gk.launch(matvec, n, d, x, au, -1.0)
        gk.copy(r, b)
        gk.launch(axpy, n, r, au, -1.0)
        alpha = None
        for it in range(1, c["iters"] + 1):
            if it == 1:
                alpha = 1.0 / center
                gk.copy(u, r)
            else:
                beta = (radius * alpha) ** 2 / 2.0 if it == 2 else (radius * alpha / 2.0) ** 2
                alpha = 1.0 / (center - beta / alpha)
                gk.launch(xpay, n, u, r, beta)
            gk.launch(axpy, n, x, u, alpha)
            gk.launch(matvec, n, d, u, au, -1.0)
            gk.launch(axpy, n, r, au, -alpha)
    return program


def power_chebyshev_reference(x, b, d, lmin):
    c = CHEB
    a = tri_dense(d, -1.0)
    v = b / np.linalg.norm(b)
    for _ in range(c["power_iters"]):
        ax = a @ v
        theta = v @ ax
        v = ax / np.linalg.norm(ax)
    lmax = c["pad"] * theta
    center, radius = (lmax + lmin) / 2.0, (lmax - lmin) / 2.0
    x = x.copy()
    r = b - a @ x
    for it in range(1, c["iters"] + 1):
        if it == 1:
            alpha, u = 1.0 / center, r.copy()
        else:
            beta = (radius * alpha) ** 2 / 2.0 if it == 2 else (radius * alpha / 2.0) ** 2
            alpha = 1.0 / (center - beta / alpha)
            u = r + beta * u
        x, r = x + alpha * u, r - alpha * (a @ u)
    return {0: x}
