"""Session 52's fifth round of ported kernels, part two: atmosphere, fluids, waves, batched small linear algebra
and option pricing (WRF's Kessler microphysics, PPM advection with its limiter, Virieux's velocity-stress
scheme with PML damping as a program, Roe and HLLC Euler fluxes, MacCormack's predictor-corrector as a program,
parallel cyclic reduction's stages as a program, per-thread 4 x 4 Cholesky and 3 x 3 Jacobi eigenvalues with
atan2, Heston's Euler step, an Asian option's path average, an American binomial tree). Written here from the
algorithms of the files cited; used by tests/library/test_ported_hpc5.py."""

import math

import gradkern as gk

# ---- WRF Kessler warm-rain microphysics (wrf phys/module_mp_kessler.F: kessler): a thread per column; rain's
# fall speed from its density-weighted mixing ratio, the sedimentation flux from the level above, then per level
# autoconversion max(0, qc - qc0), accretion, evaporation capped by min, saturation adjustment by Tetens' exp --


@gk.kernel
def kessler_column(t, qv, qc, qr, rho, p, dt, dz):
    c = gk.tid()
    nz = t.shape[0]
    for k in range(nz):
        vt_here = 36.34 * (0.001 * rho[k, c] * qr[k, c]) ** 0.1364
        flux_in = 0.0
        if k < nz - 1:
            flux_in = 36.34 * (0.001 * rho[k + 1, c] * qr[k + 1, c]) ** 0.1364 * rho[k + 1, c] * qr[k + 1, c]
        qr[k, c] += dt * (flux_in - vt_here * rho[k, c] * qr[k, c]) / (rho[k, c] * dz)
        auto = 0.001 * max(0.0, qc[k, c] - 0.001)
        accr = 2.2 * qc[k, c] * qr[k, c] ** 0.875
        prod = dt * (auto + accr)
        prod = min(prod, qc[k, c])
        qc[k, c] -= prod
        qr[k, c] += prod
        qvs = 380.0 / p[k, c] * math.exp(17.27 * (t[k, c] - 273.0) / (t[k, c] - 36.0))
        ern = dt * (1.6 + 124.9 * (0.001 * rho[k, c] * qr[k, c]) ** 0.2046) * \
            (0.001 * rho[k, c] * qr[k, c]) ** 0.525 / (5.4e5 + 2.55e8 / (p[k, c] * qvs)) * \
            max(0.0, qvs - qv[k, c]) / (rho[k, c] * qvs)
        ern = min(ern, qr[k, c])
        qr[k, c] -= ern
        qv[k, c] += ern
        t[k, c] -= 2500.0 * ern
        excess = (qv[k, c] - qvs) / (1.0 + 4093.0 * 2500.0 * qvs / (t[k, c] - 36.0) ** 2)
        if excess < -qc[k, c]:
            excess = -qc[k, c]
        qv[k, c] -= excess
        qc[k, c] += excess
        t[k, c] += 2500.0 * excess


# ---- PPM advection (Colella & Woodward 1984, as the FV3 / MPAS-style tracer kernels write it): fourth-order face
# values, the monotonicity limiter (a local extremum flattens the parabola; an overshooting side is pulled to
# 3a - 2a_other), the flux through the right face for a Courant number 0 < c < 1 on a periodic grid ---------------


@gk.func
def ppm_face(am1, a0, a1, a2):
    return 7.0 / 12.0 * (a0 + a1) - 1.0 / 12.0 * (am1 + a2)


@gk.kernel
def ppm_flux(a, flux, courant):
    i = gk.tid()
    n = a.shape[0]
    im2 = (i + n - 2) % n
    im1 = (i + n - 1) % n
    ip1 = (i + 1) % n
    ip2 = (i + 2) % n
    al = ppm_face(a[im2], a[im1], a[i], a[ip1])
    ar = ppm_face(a[im1], a[i], a[ip1], a[ip2])
    ai = a[i]
    if (ar - ai) * (ai - al) <= 0.0:
        al = ai
        ar = ai
    elif (ar - al) * (ai - 0.5 * (al + ar)) > (ar - al) * (ar - al) / 6.0:
        al = 3.0 * ai - 2.0 * ar
    elif -(ar - al) * (ar - al) / 6.0 > (ar - al) * (ai - 0.5 * (al + ar)):
        ar = 3.0 * ai - 2.0 * al
    da = ar - al
    a6 = 6.0 * (ai - 0.5 * (al + ar))
    flux[i] = courant * (ar - 0.5 * courant * (da - (1.0 - 2.0 / 3.0 * courant) * a6))


# ---- Virieux's 2-D P-SV velocity-stress scheme (as SEISMIC_CPML / SOFI2D's update_v, update_s write it): a
# staggered grid, first the velocities from the stress divergence then the stresses from the velocity
# gradients, each followed by the PML's damping profile; interior threads only; a program of time steps ------


@gk.kernel
def virieux_velocity(vx, vz, sxx, szz, sxz, rho, damp, dt, h):
    i, j = gk.tid()
    nx = vx.shape[0]
    nz = vx.shape[1]
    if i >= 1 and i < nx - 1 and j >= 1 and j < nz - 1:
        vx[i, j] += dt / (rho[i, j] * h) * (sxx[i + 1, j] - sxx[i, j] + sxz[i, j] - sxz[i, j - 1])
        vz[i, j] += dt / (rho[i, j] * h) * (sxz[i, j] - sxz[i - 1, j] + szz[i, j + 1] - szz[i, j])
        vx[i, j] *= damp[i, j]
        vz[i, j] *= damp[i, j]


@gk.kernel
def virieux_stress(vx, vz, sxx, szz, sxz, lam, mu, damp, dt, h):
    i, j = gk.tid()
    nx = vx.shape[0]
    nz = vx.shape[1]
    if i >= 1 and i < nx - 1 and j >= 1 and j < nz - 1:
        exx = (vx[i, j] - vx[i - 1, j]) / h
        ezz = (vz[i, j] - vz[i, j - 1]) / h
        sxx[i, j] += dt * ((lam[i, j] + 2.0 * mu[i, j]) * exx + lam[i, j] * ezz)
        szz[i, j] += dt * (lam[i, j] * exx + (lam[i, j] + 2.0 * mu[i, j]) * ezz)
        sxz[i, j] += dt * mu[i, j] * ((vx[i, j + 1] - vx[i, j] + vz[i + 1, j] - vz[i, j]) / h)
        sxx[i, j] *= damp[i, j]
        szz[i, j] *= damp[i, j]
        sxz[i, j] *= damp[i, j]


def virieux_steps(vx, vz, sxx, szz, sxz, rho, lam, mu, damp, dt, h, nsteps, backend=None):
    for _ in range(nsteps):
        gk.launch(virieux_velocity, vx.shape, vx, vz, sxx, szz, sxz, rho, damp, dt, h, backend=backend)
        gk.launch(virieux_stress, vx.shape, vx, vz, sxx, szz, sxz, lam, mu, damp, dt, h, backend=backend)


# ---- Roe's approximate Riemann solver for 1-D Euler (Toro ch. 11; as the CUDA Euler solvers' roe_flux device
# functions write it): Roe averages by sqrt(rho), |lambda| of the three waves, the wave strengths --------------

GAMMA = 1.4


@gk.kernel
def roe_flux(q, flux):
    i = gk.tid()
    rl = q[i, 0]
    ul = q[i, 1] / rl
    pl = (GAMMA - 1.0) * (q[i, 2] - 0.5 * rl * ul * ul)
    hl = (q[i, 2] + pl) / rl
    rr = q[i + 1, 0]
    ur = q[i + 1, 1] / rr
    pr = (GAMMA - 1.0) * (q[i + 1, 2] - 0.5 * rr * ur * ur)
    hr = (q[i + 1, 2] + pr) / rr
    sl = math.sqrt(rl)
    sr = math.sqrt(rr)
    u = (sl * ul + sr * ur) / (sl + sr)
    hh = (sl * hl + sr * hr) / (sl + sr)
    a = math.sqrt((GAMMA - 1.0) * (hh - 0.5 * u * u))
    dr = rr - rl
    du = ur - ul
    dp = pr - pl
    rho = sl * sr
    w1 = (dp - rho * a * du) / (2.0 * a * a)
    w2 = dr - dp / (a * a)
    w3 = (dp + rho * a * du) / (2.0 * a * a)
    l1 = abs(u - a)
    l2 = abs(u)
    l3 = abs(u + a)
    fl0 = rl * ul
    fl1 = rl * ul * ul + pl
    fl2 = rl * ul * hl
    fr0 = rr * ur
    fr1 = rr * ur * ur + pr
    fr2 = rr * ur * hr
    flux[i, 0] = 0.5 * (fl0 + fr0) - 0.5 * (l1 * w1 + l2 * w2 + l3 * w3)
    flux[i, 1] = 0.5 * (fl1 + fr1) - 0.5 * (l1 * w1 * (u - a) + l2 * w2 * u + l3 * w3 * (u + a))
    flux[i, 2] = 0.5 * (fl2 + fr2) - 0.5 * (l1 * w1 * (hh - u * a) + l2 * w2 * 0.5 * u * u + l3 * w3 * (hh + u * a))


# ---- HLLC for 1-D Euler (Toro ch. 10; as the CUDA Euler solvers' hllc_flux write it): Davis' wave speeds by
# min/max, the contact speed, and the flux chosen by the signs of S_L, S_M, S_R -----------------------------------


@gk.kernel
def hllc_flux(q, flux):
    i = gk.tid()
    rl = q[i, 0]
    ul = q[i, 1] / rl
    el = q[i, 2]
    pl = (GAMMA - 1.0) * (el - 0.5 * rl * ul * ul)
    cl = math.sqrt(GAMMA * pl / rl)
    rr = q[i + 1, 0]
    ur = q[i + 1, 1] / rr
    er = q[i + 1, 2]
    pr = (GAMMA - 1.0) * (er - 0.5 * rr * ur * ur)
    cr = math.sqrt(GAMMA * pr / rr)
    s_l = min(ul - cl, ur - cr)
    s_r = max(ul + cl, ur + cr)
    s_m = (pr - pl + rl * ul * (s_l - ul) - rr * ur * (s_r - ur)) / (rl * (s_l - ul) - rr * (s_r - ur))
    if s_l >= 0.0:
        flux[i, 0] = rl * ul
        flux[i, 1] = rl * ul * ul + pl
        flux[i, 2] = ul * (el + pl)
    elif s_m >= 0.0:
        f = rl * (s_l - ul) / (s_l - s_m)
        flux[i, 0] = rl * ul + s_l * (f - rl)
        flux[i, 1] = rl * ul * ul + pl + s_l * (f * s_m - rl * ul)
        flux[i, 2] = ul * (el + pl) + s_l * (f * (el / rl + (s_m - ul) * (s_m + pl / (rl * (s_l - ul)))) - el)
    elif s_r > 0.0:
        f = rr * (s_r - ur) / (s_r - s_m)
        flux[i, 0] = rr * ur + s_r * (f - rr)
        flux[i, 1] = rr * ur * ur + pr + s_r * (f * s_m - rr * ur)
        flux[i, 2] = ur * (er + pr) + s_r * (f * (er / rr + (s_m - ur) * (s_m + pr / (rr * (s_r - ur)))) - er)
    else:
        flux[i, 0] = rr * ur
        flux[i, 1] = rr * ur * ur + pr
        flux[i, 2] = ur * (er + pr)


# ---- MacCormack for inviscid Burgers (the predictor-corrector of CFD course codes, e.g. Barba's CFD Python step
# and the CUDA ports of it): forward-differenced predictor into u_star, backward-differenced corrector into u ---


@gk.kernel
def maccormack_predict(u, u_star, r):
    i = gk.tid()
    n = u.shape[0]
    if i < n - 1:
        u_star[i] = u[i] - r * (0.5 * u[i + 1] * u[i + 1] - 0.5 * u[i] * u[i])
    else:
        u_star[i] = u[i]


@gk.kernel
def maccormack_correct(u, u_star, r):
    i = gk.tid()
    if i > 0:
        u[i] = 0.5 * (u[i] + u_star[i] - r * (0.5 * u_star[i] * u_star[i] - 0.5 * u_star[i - 1] * u_star[i - 1]))


def maccormack(u, u_star, r, nsteps, backend=None):
    for _ in range(nsteps):
        gk.launch(maccormack_predict, u.shape[0], u, u_star, r, backend=backend)
        gk.launch(maccormack_correct, u.shape[0], u, u_star, r, backend=backend)


# ---- parallel cyclic reduction (Zhang, Cohen & Owens, "Fast tridiagonal solvers on the GPU", PPoPP 2010; the
# pcr kernels of cuSPARSE-like gtsv codes): each stage a thread per equation eliminates its neighbours at
# distance s, out-of-range neighbours reading as the identity; ping-ponged buffers; a program -------------------


@gk.kernel
def pcr_stage(a, b, c, d, a2, b2, c2, d2, s):
    i = gk.tid()
    n = a.shape[0]
    k1 = 0.0
    k2 = 0.0
    am = 0.0
    cm = 0.0
    dm = 0.0
    ap = 0.0
    cp = 0.0
    dp = 0.0
    if i - s >= 0:
        k1 = a[i] / b[i - s]
        am = a[i - s]
        cm = c[i - s]
        dm = d[i - s]
    if i + s < n:
        k2 = c[i] / b[i + s]
        ap = a[i + s]
        cp = c[i + s]
        dp = d[i + s]
    a2[i] = -am * k1
    c2[i] = -cp * k2
    b2[i] = b[i] - cm * k1 - ap * k2
    d2[i] = d[i] - dm * k1 - dp * k2


@gk.kernel
def pcr_finish(b, d, x):
    i = gk.tid()
    x[i] = d[i] / b[i]


def pcr_solve(a, b, c, d, a2, b2, c2, d2, x, backend=None):
    """log2(n) stages for n a power of two, ping-ponged, then x = d / b."""
    n = a.shape[0]
    s = 1
    src, dst = (a, b, c, d), (a2, b2, c2, d2)
    while s < n:
        gk.launch(pcr_stage, n, *src, *dst, s, backend=backend)
        src, dst = dst, src
        s *= 2
    gk.launch(pcr_finish, n, src[1], src[3], x, backend=backend)


# ---- batched 4 x 4 Cholesky and solve, a thread per system (as MAGMA's batched small-size potrf/potrs kernels
# write it, the factor in registers): the factor in a local array, forward and back substitution --------------


@gk.kernel
def cholesky4_solve(A, rhs, x):
    t = gk.tid()
    L = gk.local((4, 4), gk.float64)
    for j in range(4):
        s = A[t, j, j]
        for k in range(j):
            s -= L[j, k] * L[j, k]
        L[j, j] = math.sqrt(s)
        for i in range(j + 1, 4):
            s2 = A[t, i, j]
            for k in range(j):
                s2 -= L[i, k] * L[j, k]
            L[i, j] = s2 / L[j, j]
    y = gk.local((4,), gk.float64)
    for i in range(4):
        s3 = rhs[t, i]
        for k in range(i):
            s3 -= L[i, k] * y[k]
        y[i] = s3 / L[i, i]
    for i in range(3, -1, -1):
        s4 = y[i]
        for k in range(i + 1, 4):
            s4 -= L[k, i] * x[t, k]
        x[t, i] = s4 / L[i, i]


# ---- batched 3 x 3 symmetric eigenvalues by cyclic Jacobi (Numerical Recipes' jacobi, as GPU point-cloud codes
# write it per thread for normals): rotations at angle atan2(2 a_pq, a_qq - a_pp) / 2, a fixed number of sweeps,
# the matrix in a local array updated in place ----------------------------------------------------------------

PAIRS = ((0, 1), (0, 2), (1, 2))


@gk.kernel
def jacobi_eigen3(A, eig, sweeps):
    t = gk.tid()
    m = gk.local((3, 3), gk.float64)
    for i in range(3):
        for j in range(3):
            m[i, j] = A[t, i, j]
    for sweep in range(sweeps):
        for q in range(3):
            p, r = PAIRS[q]
            theta = 0.5 * math.atan2(2.0 * m[p, r], m[r, r] - m[p, p])
            c = math.cos(theta)
            s = math.sin(theta)
            for k in range(3):
                mkp = m[k, p]
                mkr = m[k, r]
                m[k, p] = c * mkp - s * mkr
                m[k, r] = s * mkp + c * mkr
            for k in range(3):
                mpk = m[p, k]
                mrk = m[r, k]
                m[p, k] = c * mpk - s * mrk
                m[r, k] = s * mpk + c * mrk
    for i in range(3):
        eig[t, i] = m[i, i]


# ---- Heston model Monte Carlo (as the GPU pricers of QuantLib-style codes write the Euler step, full
# truncation): a thread per path, variance max(v, 0) in the drift and diffusion, the log-price stepped by exp,
# correlated normals from two given streams; the discounted call payoff --------------------------------------


@gk.kernel
def heston_paths(z1, z2, s0, v0, kappa, theta, xi, rho, r, dt, strike, payoff):
    p = gk.tid()
    nsteps = z1.shape[1]
    s = s0
    v = v0
    for k in range(nsteps):
        vp = max(v, 0.0)
        sq = math.sqrt(vp * dt)
        w2 = rho * z1[p, k] + math.sqrt(1.0 - rho * rho) * z2[p, k]
        s *= math.exp((r - 0.5 * vp) * dt + sq * z1[p, k])
        v += kappa * (theta - vp) * dt + xi * sq * w2
    payoff[p] = math.exp(-r * dt * nsteps) * max(s - strike, 0.0)


# ---- arithmetic Asian call (CUDA samples' MonteCarlo / the NAG GPU Asian option example's path loop): geometric
# Brownian steps, the running sum of prices, the payoff of the average -----------------------------------------


@gk.kernel
def asian_call(z, s0, r, sigma, dt, strike, payoff):
    p = gk.tid()
    nsteps = z.shape[1]
    s = s0
    total = 0.0
    drift = (r - 0.5 * sigma * sigma) * dt
    vol = sigma * math.sqrt(dt)
    for k in range(nsteps):
        s = s * math.exp(drift + vol * z[p, k])
        total += s
    payoff[p] = math.exp(-r * dt * nsteps) * max(total / nsteps - strike, 0.0)


# ---- American put on a binomial tree (the CUDA samples' binomialOptions with early exercise, as the GPU option
# pricing courses write it): the leaves, then the backward induction taking max(continuation, exercise) ---------

NSTEPS = 12


@gk.kernel
def american_put(S, X, T, R, V, price):
    opt = gk.tid()
    dt = T[opt] / NSTEPS
    u = math.exp(V * math.sqrt(dt))
    d = 1.0 / u
    pu = (math.exp(R * dt) - d) / (u - d)
    disc = math.exp(-R * dt)
    val = gk.local((NSTEPS + 1,), gk.float64)
    for i in range(NSTEPS + 1):
        val[i] = max(X[opt] - S[opt] * u ** (2 * i - NSTEPS), 0.0)
    for i in range(NSTEPS, 0, -1):
        for j in range(i):
            cont = disc * (pu * val[j + 1] + (1.0 - pu) * val[j])
            val[j] = max(cont, X[opt] - S[opt] * u ** (2 * j - i + 1))
    price[opt] = val[0]
