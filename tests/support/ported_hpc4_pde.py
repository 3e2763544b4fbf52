"""Session 51's fourth round of ported kernels, part three: PETSc TS right-hand sides (the 1-D Brusselator and
2-D Gray-Scott with their DMDA's interleaved degrees of freedom), an ocean model's implicit vertical diffusion
(a Thomas solve per column in local arrays), semi-Lagrangian advection (floor and bilinear weights, periodic),
MUSCL slopes with three limiters, Black-Scholes by erf and erfc, and the Ikeda map iterated. Written here from
the algorithms of the sources cited; used by tests/library/test_ported_hpc4.py."""

import math

import gradkern as gk

# ---- PETSc Brusselator (petsc/petsc src/ts/tutorials/advection-diffusion-reaction/ex25.c: FormIFunction's
# spatial part as an RHS): dof = 2 per node as x[i].u, x[i].v, Dirichlet ends written as zero rates ---------------


@gk.kernel
def brusselator_rhs(x, f, alpha, a, b, hx):
    i = gk.tid()
    mx = x.shape[0]
    if i == 0 or i == mx - 1:
        f[i, 0] = 0.0
        f[i, 1] = 0.0
        return
    sx = 1.0 / (hx * hx)
    u = x[i, 0]
    v = x[i, 1]
    uxx = (-2.0 * u + x[i - 1, 0] + x[i + 1, 0]) * sx
    vxx = (-2.0 * v + x[i - 1, 1] + x[i + 1, 1]) * sx
    f[i, 0] = alpha * uxx + a - (b + 1.0) * u + u * u * v
    f[i, 1] = alpha * vxx + b * u - u * u * v


# ---- PETSc Gray-Scott (src/ts/tutorials/advection-diffusion-reaction/ex5.c: RHSFunction): a periodic DMDA's
# ghost points read by wrapped indices, x[j][i].u as x[j, i, 0] ------------------------------------------------


@gk.kernel
def gray_scott_rhs(x, f, d1, d2, gamma, kappa, hx, hy):
    j, i = gk.tid()
    my = x.shape[0]
    mx = x.shape[1]
    sx = 1.0 / (hx * hx)
    sy = 1.0 / (hy * hy)
    im = (i - 1 + mx) % mx
    ip = (i + 1) % mx
    jm = (j - 1 + my) % my
    jp = (j + 1) % my
    uc = x[j, i, 0]
    vc = x[j, i, 1]
    uxx = (-2.0 * uc + x[j, im, 0] + x[j, ip, 0]) * sx
    uyy = (-2.0 * uc + x[jm, i, 0] + x[jp, i, 0]) * sy
    vxx = (-2.0 * vc + x[j, im, 1] + x[j, ip, 1]) * sx
    vyy = (-2.0 * vc + x[jm, i, 1] + x[jp, i, 1]) * sy
    f[j, i, 0] = d1 * (uxx + uyy) - uc * vc * vc + gamma * (1.0 - uc)
    f[j, i, 1] = d2 * (vxx + vyy) + uc * vc * vc - (gamma + kappa) * vc


# ---- implicit vertical diffusion of an ocean column (NEMO src/OCE/TRA/trazdf.F90: tra_zdf_imp, MITgcm's
# solve_tridiagonal.F): a thread per column builds the tridiagonal from the interface diffusivities, eliminates
# forward into local arrays and substitutes back, overwriting the local array and the column ----------------------

NZ = 6


@gk.kernel
def column_implicit_diffusion(tr, kappa, dz, dt):
    c = gk.tid()
    cp = gk.local((NZ,), gk.float64)
    dp = gk.local((NZ,), gk.float64)
    for k in range(NZ):
        lower = -dt * kappa[k, c] / (dz[k] * dz[k]) if k > 0 else 0.0
        upper = -dt * kappa[k + 1, c] / (dz[k] * dz[k]) if k < NZ - 1 else 0.0
        diag = 1.0 - lower - upper
        if k == 0:
            cp[k] = upper / diag
            dp[k] = tr[k, c] / diag
        else:
            m = diag - lower * cp[k - 1]
            cp[k] = upper / m
            dp[k] = (tr[k, c] - lower * dp[k - 1]) / m
    tr[NZ - 1, c] = dp[NZ - 1]
    for k in range(NZ - 2, -1, -1):
        dp[k] = dp[k] - cp[k] * dp[k + 1]
        tr[k, c] = dp[k]


# ---- semi-Lagrangian advection (Staniforth and Cote, Mon. Wea. Rev. 119 (1991), the departure point traced back
# one step; bilinear interpolation as e.g. the stable-fluids advect routine): floor of the departure point, the
# cell index wrapped periodically, the weights differentiable and the indices not ------------------------------


@gk.kernel
def sl_advect(q, qn, u, v, dt, dx):
    i, j = gk.tid()
    nx = q.shape[0]
    ny = q.shape[1]
    xd = i - u[i, j] * dt / dx
    yd = j - v[i, j] * dt / dx
    x0 = math.floor(xd)
    y0 = math.floor(yd)
    wx = xd - x0
    wy = yd - y0
    i0 = int(x0) % nx
    j0 = int(y0) % ny
    i1 = (i0 + 1) % nx
    j1 = (j0 + 1) % ny
    qn[i, j] = ((1.0 - wx) * (1.0 - wy) * q[i0, j0] + wx * (1.0 - wy) * q[i1, j0]
                + (1.0 - wx) * wy * q[i0, j1] + wx * wy * q[i1, j1])


# ---- MUSCL slopes with limiters (clawpack/riemann, limiters as in clawpack/classic src/limiter.f90: minmod,
# superbee, van Leer): branches, abs, min and max in @gk.func helpers, the slope ratio guarded by a ternary -------


@gk.func
def minmod(a, b):
    if a * b <= 0.0:
        return 0.0
    return a if abs(a) < abs(b) else b


@gk.func
def superbee(r):
    return max(0.0, max(min(2.0 * r, 1.0), min(r, 2.0)))


@gk.func
def van_leer(r):
    return (r + abs(r)) / (1.0 + abs(r))


@gk.kernel
def muscl_faces(u, ul_mm, ul_sb, ul_vl):
    i = gk.tid()
    i += 1
    dl = u[i] - u[i - 1]
    dr = u[i + 1] - u[i]
    ul_mm[i] = u[i] + 0.5 * minmod(dl, dr)
    r = dl / dr if dr != 0.0 else 0.0
    ul_sb[i] = u[i] + 0.5 * superbee(r) * dr
    ul_vl[i] = u[i] + 0.5 * van_leer(r) * dr


# ---- Black-Scholes by erf (the closed form with N(d) = (1 + erf(d / sqrt 2)) / 2 as CPU references of the CUDA
# samples' BlackScholes and most OpenCL/Kokkos ports write it; N(-d) by erfc), with delta and vega -----------------


@gk.kernel
def black_scholes_erf(call, put, delta, vega, s, x, t, r, sigma):
    i = gk.tid()
    sqrt_t = math.sqrt(t[i])
    d1 = (math.log(s[i] / x[i]) + (r + 0.5 * sigma * sigma) * t[i]) / (sigma * sqrt_t)
    d2 = d1 - sigma * sqrt_t
    nd1 = 0.5 * (1.0 + math.erf(d1 / math.sqrt(2.0)))
    nd2 = 0.5 * (1.0 + math.erf(d2 / math.sqrt(2.0)))
    nmd1 = 0.5 * math.erfc(d1 / math.sqrt(2.0))
    nmd2 = 0.5 * gk.erfc(d2 / math.sqrt(2.0))
    disc = math.exp(-r * t[i])
    call[i] = s[i] * nd1 - x[i] * disc * nd2
    put[i] = x[i] * disc * nmd2 - s[i] * nmd1
    delta[i] = nd1
    vega[i] = s[i] * sqrt_t * math.exp(-0.5 * d1 * d1) / math.sqrt(2.0 * math.pi)


# ---- the Ikeda map iterated (K. Ikeda, Opt. Commun. 30 (1979); the smooth map of dynamical-systems GPU demos):
# a fixed number of steps a thread, the angle from the radius, sin and cos of it ---------------------------------

STEPS = 5


@gk.kernel
def ikeda_orbit(x, y, out, mu):
    i = gk.tid()
    a = x[i]
    b = y[i]
    for _ in range(STEPS):
        t = 0.4 - 6.0 / (1.0 + a * a + b * b)
        a, b = 1.0 + mu * (a * math.cos(t) - b * math.sin(t)), mu * (a * math.sin(t) + b * math.cos(t))
    out[i, 0] = a
    out[i, 1] = b
