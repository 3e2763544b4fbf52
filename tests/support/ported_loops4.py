"""A fourth round of third-party host loops ported as programs (session 51; docs/programs.md, "Ported host
loops"), part 1: solvers whose drivers read what the kernels computed between launches (NPB 3.4 CG's power
iteration with a Rayleigh quotient, Mantevo miniFE 2.0's assembly and convergence loop, TeaLeaf 1.0's Chebyshev
solver, NPB 3.4 LU's SSOR sweeps with a residual norm every few steps, NPB 3.4 SP's ADI line solves on transposed
views, a Kripke-like discrete-ordinates sweep with a source-iteration convergence test). Written here from the
algorithms, as a user porting the Fortran/C++ host code writes it: a kernel per loop body, one-element arrays for
the host scalars a later launch reads, `float()` or plain comparisons where the host only decides. Used by
tests/program/test_ported_loops4.py. Each factory takes `loop(step, nsteps)`: a plain loop or a checkpointed
one."""

import math

import numpy as np

import gradkern as gk


# -- shared: CSR products and dot products into one-element arrays ----------------------------------------------------
@gk.kernel
def csr_matvec(rowp, cols, vals, x, y):
    i = gk.tid()
    s = 0.0
    for k in range(rowp[i], rowp[i + 1]):
        s += vals[k] * x[cols[k]]
    y[i] = s


@gk.kernel
def dot_into(a, b, out):
    i = gk.tid()
    gk.atomic_add(out, 0, a[i] * b[i])


def _dot(a, b, out):
    gk.fill(out, 0.0)
    gk.launch(dot_into, a.shape[0], a, b, out)


# -- NPB 3.4 CG (cg.f: the main loop `do it = 1, niter`, conj_grad's cgitmax CG iterations from z = 0 solving
# A z = x, then zeta = shift + 1 / (x . z) and x = z / ||z||): an inverse power iteration whose Rayleigh-quotient
# estimate zeta is a one-element array a one-thread kernel writes; the matrix is makea's shifted sparse SPD matrix,
# here a 2-D Laplacian plus (rcond - shift) on the diagonal, shift Active ---------------------------------------
@gk.kernel
def npb_cg_shifted(rowp, cols, vals, diag_shift, x, y):
    i = gk.tid()
    s = diag_shift * x[i]
    for k in range(rowp[i], rowp[i + 1]):
        s += vals[k] * x[cols[k]]
    y[i] = s


@gk.kernel
def npb_cg_start(x, z, r, p):
    i = gk.tid()
    z[i] = 0.0
    r[i] = x[i]
    p[i] = x[i]


@gk.kernel
def npb_cg_zr(z, r, p, q, rho, d):
    i = gk.tid()
    alpha = rho[0] / d[0]
    z[i] = z[i] + alpha * p[i]
    r[i] = r[i] - alpha * q[i]


@gk.kernel
def npb_cg_p(p, r, rho, rho0):
    i = gk.tid()
    p[i] = r[i] + (rho[0] / rho0[0]) * p[i]


@gk.kernel
def npb_cg_zeta(zeta, xz, shift):
    zeta[0] = shift + 1.0 / xz[0]


@gk.kernel
def npb_cg_normalise(x, z, zz):
    i = gk.tid()
    x[i] = z[i] / math.sqrt(zz[0])


def npb_cg(loop, csr, cgitmax=3):
    rowp, cols, vals = csr

    def program(x, zeta, shift, niter):
        n = x.shape[0]
        z, r, p, q = (np.zeros_like(x) for _ in range(4))
        rho, rho0, d, xz, zz = (np.zeros_like(x, shape=(1,)) for _ in range(5))
        diag_shift = 2.0 - shift  # makea: a(i,i) + rcond - shift, an Active scalar's host arithmetic

        def outer(it):
            gk.launch(npb_cg_start, n, x, z, r, p)  # conj_grad
            _dot(r, r, rho)
            for _ in range(cgitmax):
                gk.launch(npb_cg_shifted, n, rowp, cols, vals, diag_shift, p, q)
                _dot(p, q, d)
                gk.launch(npb_cg_zr, n, z, r, p, q, rho, d)
                gk.copy(rho0, rho)
                _dot(r, r, rho)
                gk.launch(npb_cg_p, n, p, r, rho, rho0)
            _dot(x, z, xz)  # norm_temp1, norm_temp2
            _dot(z, z, zz)
            gk.launch(npb_cg_zeta, 1, zeta, xz, shift)
            gk.launch(npb_cg_normalise, n, x, z, zz)
        loop(outer, niter)
    return program


def npb_cg_host_zeta(csr):
    """cg.f's `zeta = shift + 1.0d0 / norm_temp1` with norm_temp1 a NumPy dot product on the host, then passed to
    a kernel that scales by it (the spelling a port writes first)."""
    rowp, cols, vals = csr

    def program(x, zeta, shift, niter):
        n = x.shape[0]
        z = np.zeros_like(x)
        for _ in range(niter):
            gk.launch(npb_cg_shifted, n, rowp, cols, vals, 2.0 - shift, x, z)
            norm_temp1 = np.dot(x, z)
            gk.launch(npb_cg_zeta_host, 1, zeta, shift + 1.0 / norm_temp1)
    return program


@gk.kernel
def npb_cg_zeta_host(zeta, value):
    zeta[0] = value


# -- Mantevo miniFE 2.0 (perform_element_loop + sum_into_global_linear_system, then cg_solve.hpp's
# `for (k = 1; k <= max_iter && normr > tolerance; ++k)`): 1-D linear elements assembled in a kernel (an element a
# thread, atomic adds into the CSR values at the positions the host's structure pass found), diffusion kappa
# Active, a mass term; CG with the host's convergence test on the derived norm (control flow only) --------------------
@gk.kernel
def minife_assemble(vals, slots, kappa, h, c):
    e = gk.tid()
    k = kappa / h
    m = c * h / 6.0
    gk.atomic_add(vals, slots[e, 0], k + 2.0 * m)
    gk.atomic_add(vals, slots[e, 1], -k + m)
    gk.atomic_add(vals, slots[e, 2], -k + m)
    gk.atomic_add(vals, slots[e, 3], k + 2.0 * m)


@gk.kernel
def minife_residual(b, Ax, r, p):
    i = gk.tid()
    r[i] = b[i] - Ax[i]
    p[i] = r[i]


@gk.kernel
def minife_update_xr(x, r, p, Ap, rtrans, pAp):
    i = gk.tid()
    alpha = rtrans[0] / pAp[0]
    x[i] = x[i] + alpha * p[i]
    r[i] = r[i] - alpha * Ap[i]


@gk.kernel
def minife_update_p(p, r, rtrans, oldrtrans):
    i = gk.tid()
    p[i] = r[i] + (rtrans[0] / oldrtrans[0]) * p[i]


def minife_structure(n):
    """The CSR structure of n 1-D nodes' stiffness matrix (tridiagonal) and, per element (n - 1), the four value
    positions its 2 x 2 element matrix sums into (miniFE's generate_matrix_structure and the find in
    sum_into_row)."""
    rowp, cols = [0], []
    for i in range(n):
        cols += [j for j in (i - 1, i, i + 1) if 0 <= j < n]
        rowp.append(len(cols))
    rowp, cols = np.array(rowp, np.int64), np.array(cols, np.int64)

    def at(i, j):
        return rowp[i] + int(np.nonzero(cols[rowp[i]:rowp[i + 1]] == j)[0][0])
    slots = np.array([[at(e, e), at(e, e + 1), at(e + 1, e), at(e + 1, e + 1)] for e in range(n - 1)], np.int64)
    return rowp, cols, slots


def minife(rowp, cols, slots, tolerance, taken):
    """miniFE's driver: assembly, then CG until the host's `normr > tolerance` fails or max_iter; `taken` records
    (iteration, norm after it), from 0 (the initial residual)."""
    def program(b, x, kappa, max_iter):
        n = b.shape[0]
        vals = np.zeros_like(b, shape=(cols.shape[0],))
        gk.launch(minife_assemble, n - 1, vals, slots, kappa, 1.0 / (n - 1), 0.5)
        r, p, Ap = np.zeros_like(b), np.zeros_like(b), np.zeros_like(b)
        rtrans, oldrtrans, pAp = (np.zeros_like(b, shape=(1,)) for _ in range(3))
        gk.launch(csr_matvec, n, rowp, cols, vals, x, Ap)
        gk.launch(minife_residual, n, b, Ap, r, p)
        _dot(r, r, rtrans)
        normr = np.sqrt(rtrans[0])  # a derived scalar: read for the test only
        taken.append((0, float(normr)))
        k = 1
        while k <= max_iter and normr > tolerance:
            if k > 1:
                gk.launch(minife_update_p, n, p, r, rtrans, oldrtrans)
            gk.launch(csr_matvec, n, rowp, cols, vals, p, Ap)
            _dot(p, Ap, pAp)
            gk.launch(minife_update_xr, n, x, r, p, Ap, rtrans, pAp)
            gk.copy(oldrtrans, rtrans)
            _dot(r, r, rtrans)
            normr = np.sqrt(rtrans[0])
            taken.append((k, float(normr)))
            k += 1
    return program


# -- TeaLeaf 1.0 (tea_leaf_cheby.f90: tea_leaf_cheby_init, tea_leaf_cheby_iterate with the host's ch_alphas /
# ch_betas from the eigenvalue bounds; tea_leaf_common_init's Kx, Ky from the density), on a 2-D grid with a zero
# halo; the bounds are the run's configuration (plain numbers), the coefficients Python floats, rx Active --------------
@gk.kernel
def tea_coefficients(density, Kx, Ky, rx):
    i, j = gk.tid()
    i += 1
    j += 1
    Kx[i, j] = rx * (density[i - 1, j] + density[i, j]) / (2.0 * density[i - 1, j] * density[i, j])
    Ky[i, j] = rx * (density[i, j - 1] + density[i, j]) / (2.0 * density[i, j - 1] * density[i, j])


@gk.func
def tea_smvp(u, Kx, Ky, i, j):
    return ((1.0 + (Kx[i + 1, j] + Kx[i, j]) + (Ky[i, j + 1] + Ky[i, j])) * u[i, j]
            - (Kx[i + 1, j] * u[i + 1, j] + Kx[i, j] * u[i - 1, j])
            - (Ky[i, j + 1] * u[i, j + 1] + Ky[i, j] * u[i, j - 1]))


@gk.kernel
def tea_cheby_init(u, u0, Kx, Ky, r, p, theta):
    i, j = gk.tid()
    i += 1
    j += 1
    r[i, j] = u0[i, j] - tea_smvp(u, Kx, Ky, i, j)
    p[i, j] = r[i, j] / theta


@gk.kernel
def tea_cheby_update_u(u, p):
    i, j = gk.tid()
    u[i + 1, j + 1] = u[i + 1, j + 1] + p[i + 1, j + 1]


@gk.kernel
def tea_cheby_iterate(u, u0, Kx, Ky, r, p, alpha, beta):
    i, j = gk.tid()
    i += 1
    j += 1
    r[i, j] = u0[i, j] - tea_smvp(u, Kx, Ky, i, j)
    p[i, j] = alpha * p[i, j] + beta * r[i, j]


def tea_cheby_coefficients(eigmin, eigmax, n):
    """tea_calc_ch_coefs: theta, and the alphas and betas of n Chebyshev steps (host arithmetic on plain numbers)."""
    theta = (eigmax + eigmin) / 2.0
    delta = (eigmax - eigmin) / 2.0
    sigma = theta / delta
    rho_old = 1.0 / sigma
    alphas, betas = [], []
    for _ in range(n):
        rho_new = 1.0 / (2.0 * sigma - rho_old)
        alphas.append(rho_new * rho_old)
        betas.append(2.0 * rho_new / delta)
        rho_old = rho_new
    return theta, alphas, betas


def tealeaf_cheby(loop, eigmin=1.0, eigmax=3.5):
    def program(u, density, rx, steps):
        ny, nx = u.shape
        u0 = np.zeros_like(u)
        Kx, Ky, r, p = (np.zeros_like(u) for _ in range(4))
        theta, alphas, betas = tea_cheby_coefficients(eigmin, eigmax, steps)
        interior = (ny - 2, nx - 2)
        gk.copy(u0, u)  # tea_leaf_common_init: u0 = u = energy * density, here given
        gk.launch(tea_coefficients, interior, density, Kx, Ky, rx)
        gk.launch(tea_cheby_init, interior, u, u0, Kx, Ky, r, p, theta)
        gk.launch(tea_cheby_update_u, interior, u, p)

        def step(t):
            gk.launch(tea_cheby_iterate, interior, u, u0, Kx, Ky, r, p, alphas[t], betas[t])
            gk.launch(tea_cheby_update_u, interior, u, p)
        loop(step, steps)
    return program


# -- NPB 3.4 LU (ssor.f: per step rhs, then jacld/blts lower sweep and jacu/buts upper sweep, the update
# u = u + tmp * rsd, and every inorm steps l2norm with `if (rsdnm < tolrsd) exit`), one unknown a point on a 2-D
# grid with a zero halo; the sweeps are serial (one thread, as blts' wavefront order makes them); omega Active ------
@gk.kernel
def lu_rhs(u, f, rsd, c):
    i, j = gk.tid()
    i += 1
    j += 1
    rsd[i, j] = f[i, j] - ((4.0 + c) * u[i, j] - u[i - 1, j] - u[i + 1, j] - u[i, j - 1] - u[i, j + 1])


@gk.kernel
def lu_blts(rsd, omega, d):
    ny, nx = rsd.shape
    for i in range(1, ny - 1):
        for j in range(1, nx - 1):
            rsd[i, j] = (rsd[i, j] + omega * (rsd[i - 1, j] + rsd[i, j - 1])) / d


@gk.kernel
def lu_buts(rsd, omega, d):
    ny, nx = rsd.shape
    for ii in range(1, ny - 1):
        i = ny - 1 - ii
        for jj in range(1, nx - 1):
            j = nx - 1 - jj
            rsd[i, j] = rsd[i, j] + omega * (rsd[i + 1, j] + rsd[i, j + 1]) / d


@gk.kernel
def lu_update(u, rsd, tmp):
    i, j = gk.tid()
    u[i + 1, j + 1] = u[i + 1, j + 1] + tmp * rsd[i + 1, j + 1]


@gk.kernel
def lu_l2norm(rsd, out):
    i, j = gk.tid()
    gk.atomic_add(out, 0, rsd[i + 1, j + 1] * rsd[i + 1, j + 1])


def npb_lu_ssor(loop, inorm=2, tolrsd=None, norms=None):
    """ssor with a fixed itmax (`loop` around it), or with `tolrsd`: the l2norm every inorm steps appended to
    `norms` (periodic output) and the early exit when it falls below tolrsd."""
    def program(u, f, omega, itmax):
        ny, nx = u.shape
        rsd = np.zeros_like(u)
        total = np.zeros_like(u, shape=(1,))
        c = 0.5
        d = 4.0 + c
        tmp = 1.0 / (omega * (2.0 - omega))
        interior = (ny - 2, nx - 2)

        def istep(t):
            gk.launch(lu_rhs, interior, u, f, rsd, c)
            gk.launch(lu_blts, 1, rsd, omega, d)
            gk.launch(lu_buts, 1, rsd, omega, d)
            gk.launch(lu_update, interior, u, rsd, tmp)
        if tolrsd is None:
            loop(istep, itmax)
            return
        for t in range(itmax):
            istep(t)
            if (t + 1) % inorm == 0:
                gk.fill(total, 0.0)
                gk.launch(lu_rhs, interior, u, f, rsd, c)
                gk.launch(lu_l2norm, interior, rsd, total)
                rsdnm = np.sqrt(total[0] / (interior[0] * interior[1]))
                norms.append(float(rsdnm))
                if rsdnm < tolrsd:
                    break
    return program


# -- NPB 3.4 SP (adi.f: compute_rhs, x_solve, y_solve, add), one scalar unknown: per step rhs = u + r * lap(u), a
# tridiagonal solve (1 + 2r, -r) along each row (a thread a line, Thomas' algorithm), the same kernel along each
# column through transposed views, then u = the result; r = dt / dx^2 Active ---------------------------------------
@gk.kernel
def sp_compute_rhs(u, rhs, r):
    i, j = gk.tid()
    i += 1
    j += 1
    rhs[i, j] = u[i, j] + 0.5 * r * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j])


@gk.kernel
def sp_line_solve(rhs, cp, r):
    """Thomas' algorithm on row i + 1 of rhs (its interior), in place; cp the modified super-diagonal."""
    i = gk.tid() + 1
    n = rhs.shape[1]
    b = 1.0 + r
    cp[i, 1] = -0.5 * r / b
    rhs[i, 1] = rhs[i, 1] / b
    for j in range(2, n - 1):
        m = b + 0.5 * r * cp[i, j - 1]
        cp[i, j] = -0.5 * r / m
        rhs[i, j] = (rhs[i, j] + 0.5 * r * rhs[i, j - 1]) / m
    for jj in range(1, n - 2):
        j = n - 2 - jj
        rhs[i, j] = rhs[i, j] - cp[i, j] * rhs[i, j + 1]


def sp_adi(loop):
    def program(u, r, niter):
        ny, nx = u.shape
        rhs, cp = np.zeros_like(u), np.zeros_like(u)

        def step(t):
            gk.launch(sp_compute_rhs, (ny - 2, nx - 2), u, rhs, r)
            gk.launch(sp_line_solve, ny - 2, rhs, cp, r)  # x_solve
            gk.launch(sp_line_solve, nx - 2, rhs.T, cp.T, r)  # y_solve: the same kernel on transposed views
            gk.copy(u[1:-1, 1:-1], rhs[1:-1, 1:-1])  # add
        loop(step, niter)
    return program


# -- a Kripke-like discrete-ordinates sweep (Kripke 1.2's SweepSolver with LTimes / LPlusTimes / Scattering, cut to
# 1-D slab geometry, diamond differencing, S4 directions): per source iteration the scattering source from phi,
# each direction swept across the cells (a thread a direction, serial in the cells), phi = sum w psi; the host's
# convergence test on max |phi - phi_old| (control flow); sigma_s Active ---------------------------------------------
KRIPKE_MU = (-0.8611363115940526, -0.3399810435848563, 0.3399810435848563, 0.8611363115940526)
KRIPKE_W = (0.3478548451374538, 0.6521451548625461, 0.6521451548625461, 0.3478548451374538)


@gk.kernel
def kripke_sweep(phi, q_ext, sigma_t, psi, sigma_s, dx, psi_in, directions):
    d = gk.tid()
    mu = directions[d]  # Kripke's direction set: a table the thread indexes
    n = phi.shape[0]
    a = 2.0 * abs(mu) / dx
    inflow = psi_in[d]
    for c in range(n):
        cell = c if mu > 0.0 else n - 1 - c
        q = 0.5 * (sigma_s * phi[cell] + q_ext[cell])
        centre = (q + a * inflow) / (sigma_t[cell] + a)
        psi[d, cell] = centre
        inflow = 2.0 * centre - inflow


@gk.kernel
def kripke_ltimes(psi, phi):
    i = gk.tid()
    s = 0.0
    for d in range(4):
        s += KRIPKE_W[d] * psi[d, i]
    phi[i] = s


def kripke(tol, taken):
    def program(phi, q_ext, sigma_t, sigma_s, niter):
        n = phi.shape[0]
        psi = np.zeros_like(phi, shape=(4, n))
        phi_old = np.zeros_like(phi)
        psi_in = np.zeros_like(phi, shape=(4,))  # vacuum boundaries
        directions = np.array(KRIPKE_MU)
        for it in range(niter):
            gk.copy(phi_old, phi)
            gk.launch(kripke_sweep, 4, phi, q_ext, sigma_t, psi, sigma_s, 1.0 / n, psi_in, directions)
            gk.launch(kripke_ltimes, n, psi, phi)
            taken.append(it)
            if np.abs(phi - phi_old).max() < tol:  # a derived value, read for control flow only
                break
    return program


# -- HPGMG-FV 0.4 (finite-volume/source/operators/gsrb.c: smooth's red-black Gauss-Seidel sweeps), cut to 2-D with
# the colours by column (a zebra line smoother), so that each colour is a strided view: odd columns `u[:, 1::2]`
# from even ones `u[:, 0::2]`, then even interior columns `u[:, 2::2]` from odd ones; a thread a column, serial down
# it; the weight w Active ----------------------------------------------------------------------------------------
@gk.kernel
def zebra_columns(cols, nbrs, w):
    k = gk.tid()
    for i in range(1, cols.shape[0] - 1):
        cols[i, k] = w * (nbrs[i, k] + nbrs[i, k + 1] + cols[i - 1, k] + cols[i + 1, k])


def hpgmg_zebra(loop):
    def program(u, w, sweeps):
        nx = u.shape[1]

        def sweep(t):
            gk.launch(zebra_columns, (nx - 1) // 2, u[:, 1::2], u[:, 0::2], w)
            gk.launch(zebra_columns, (nx - 2) // 2, u[:, 2::2], u[:, 1::2], w)
        loop(sweep, sweeps)
    return program
