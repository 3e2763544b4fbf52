"""Session 54's seventh round of ported kernels, part one: the LLNL RAJA Performance Suite (LCALS' GEN_LIN_RECUR as
two launches, one counting down, and DIFF_PREDICT's chain of differences written in place; basic IF_QUAD's two
outputs behind a branch on the discriminant, PI_ATOMIC's sum into one element with an Active step, DAXPY_ATOMIC's
atomic at the thread's own index), CloverLeaf's field summary (five sums into one array's constant elements by
atomics) and its x-direction mass flux (donor, upwind and downwind cells chosen by the sign of the flux, a van Leer
limiter), and TeaLeaf's Jacobi iteration (a copy launch, then the solve, its error an atomic sum of `abs`).
Written here from the algorithms of the files cited; used by tests/library/test_ported_hpc7.py (inputs in
ported_hpc7_cases.py, NumPy references in ported_hpc7_refs.py)."""

import math

import gradkern as gk

# ---- RAJAPerf src/lcals/GEN_LIN_RECUR.hpp: b5[k] and stb5[k] from sa, sb, first for k counting up, then again
# for k = N - i counting down (the second loop's thread i reads the stb5[k] the first wrote) --------------------


@gk.kernel
def gen_lin_recur_1(b5, stb5, sa, sb, kb5i):
    k = gk.tid()
    b5[k + kb5i] = sa[k] + stb5[k] * sb[k]
    stb5[k] = b5[k + kb5i] - stb5[k]


@gk.kernel
def gen_lin_recur_2(b5, stb5, sa, sb, kb5i, n):
    i = gk.tid() + 1
    k = n - i
    b5[k + kb5i] = sa[k] + stb5[k] * sb[k]
    stb5[k] = b5[k + kb5i] - stb5[k]


def gen_lin_recur(b5, stb5, sa, sb, kb5i, backend=None):
    n = sa.shape[0]
    gk.launch(gen_lin_recur_1, n, b5, stb5, sa, sb, kb5i, backend=backend)
    gk.launch(gen_lin_recur_2, n, b5, stb5, sa, sb, kb5i, n, backend=backend)


# ---- RAJAPerf src/lcals/DIFF_PREDICT.hpp: rows 4 to 13 of px (row length `offset`) replaced by successive
# differences, each row read then written by the same thread, in place ------------------------------------------


@gk.kernel
def diff_predict(px, cx, offset):
    i = gk.tid()
    ar = cx[i + offset * 4]
    br = ar - px[i + offset * 4]
    px[i + offset * 4] = ar
    cr = br - px[i + offset * 5]
    px[i + offset * 5] = br
    ar = cr - px[i + offset * 6]
    px[i + offset * 6] = cr
    br = ar - px[i + offset * 7]
    px[i + offset * 7] = ar
    cr = br - px[i + offset * 8]
    px[i + offset * 8] = br
    ar = cr - px[i + offset * 9]
    px[i + offset * 9] = cr
    br = ar - px[i + offset * 10]
    px[i + offset * 10] = ar
    cr = br - px[i + offset * 11]
    px[i + offset * 11] = br
    px[i + offset * 13] = cr - px[i + offset * 12]
    px[i + offset * 12] = cr


# ---- RAJAPerf src/basic/IF_QUAD.hpp: the roots of a x^2 + b x + c, zero where the discriminant is negative -----


@gk.kernel
def if_quad(a, b, c, x1, x2):
    i = gk.tid()
    s = b[i] * b[i] - 4.0 * a[i] * c[i]
    if s >= 0:
        s = math.sqrt(s)
        x2[i] = (-b[i] + s) / (2.0 * a[i])
        x1[i] = (-b[i] - s) / (2.0 * a[i])
    else:
        x2[i] = 0.0
        x1[i] = 0.0


# ---- RAJAPerf src/basic/PI_ATOMIC.hpp: the midpoint rule for the integral of 1 / (1 + x^2) on [0, 1], each
# thread's term added to pi[0] by an atomic (the host multiplies by 4 after, as RAJAPerf does) -------------------


@gk.kernel
def pi_atomic(pi, dx):
    i = gk.tid()
    x = (float(i) + 0.5) * dx
    gk.atomic_add(pi, 0, dx / (1.0 + x * x))


# ---- RAJAPerf src/basic/DAXPY_ATOMIC.hpp: y[i] += a x[i] by an atomic at the thread's own index -------------


@gk.kernel
def daxpy_atomic(x, y, a):
    i = gk.tid()
    gk.atomic_add(y, i, a * x[i])


# ---- CloverLeaf field_summary_kernel (UK-MAC/CloverLeaf_CUDA field_summary_kernel.cu): per cell its volume, mass,
# internal and kinetic energy (the velocity squared averaged over the cell's four nodes) and pressure times volume,
# each summed into one element of `sums` by an atomic -----------------------------------------------------------


@gk.kernel
def field_summary(volume, density0, energy0, pressure, xvel0, yvel0, sums):
    k, j = gk.tid()
    vsqrd = 0.0
    for kv in range(k, k + 2):
        for jv in range(j, j + 2):
            vsqrd += 0.25 * (xvel0[kv, jv] * xvel0[kv, jv] + yvel0[kv, jv] * yvel0[kv, jv])
    cell_vol = volume[k, j]
    cell_mass = cell_vol * density0[k, j]
    gk.atomic_add(sums, 0, cell_vol)
    gk.atomic_add(sums, 1, cell_mass)
    gk.atomic_add(sums, 2, cell_mass * energy0[k, j])
    gk.atomic_add(sums, 3, cell_mass * 0.5 * vsqrd)
    gk.atomic_add(sums, 4, cell_vol * pressure[k, j])


# ---- CloverLeaf advec_cell_kernel, x sweep (UK-MAC/CloverLeaf_ref advec_cell_kernel.f90): the mass flux through
# face j of row k, the donor, upwind and downwind cells (ints) chosen by the sign of the volume flux, a van Leer
# limiter where the two differences have the same sign. Cell arrays carry two ghost cells each side (cell c at
# column c + 2); face j lies between cells j - 1 and j ---------------------------------------------------------


@gk.kernel
def advec_mass_flux_x(vol_flux_x, pre_vol, density1, vertexdx, mass_flux_x):
    k, j = gk.tid()
    nx = vol_flux_x.shape[1] - 1
    if vol_flux_x[k, j] > 0.0:
        upwind = j
        donor = j + 1
        downwind = j + 2
        dif = donor
    else:
        upwind = min(j + 3, nx + 3)
        donor = j + 2
        downwind = j + 1
        dif = upwind
    sigmat = abs(vol_flux_x[k, j]) / pre_vol[k, donor]
    sigma3 = (1.0 + sigmat) * (vertexdx[j + 2] / vertexdx[dif])
    sigma4 = 2.0 - sigmat
    sigmav = sigmat
    diffuw = density1[k, donor] - density1[k, upwind]
    diffdw = density1[k, downwind] - density1[k, donor]
    limiter = 0.0
    if diffuw * diffdw > 0.0:
        limiter = (1.0 - sigmav) * math.copysign(1.0, diffdw) * \
            min(abs(diffuw), min(abs(diffdw), (sigma3 * abs(diffuw) + sigma4 * abs(diffdw)) / 6.0))
    mass_flux_x[k, j] = vol_flux_x[k, j] * (density1[k, donor] + limiter)


# ---- TeaLeaf tea_leaf_jacobi_solve_kernel (UK-MAC/TeaLeaf_ref tea_leaf_jacobi.f90): un = u, then u from the
# five-point operator (Kx, Ky carry rx, ry) and the error as the sum of |u - un| by an atomic -----------------


@gk.kernel
def tea_jacobi_copy(un, u):
    k, j = gk.tid()
    un[k, j] = u[k, j]


@gk.kernel
def tea_jacobi_solve(u, un, u0, kx, ky, error):
    k, j = gk.tid()
    k = k + 1
    j = j + 1
    u[k, j] = (u0[k, j] + kx[k, j + 1] * un[k, j + 1] + kx[k, j] * un[k, j - 1]
               + ky[k + 1, j] * un[k + 1, j] + ky[k, j] * un[k - 1, j]) / \
        (1.0 + kx[k, j] + kx[k, j + 1] + ky[k, j] + ky[k + 1, j])
    gk.atomic_add(error, 0, abs(u[k, j] - un[k, j]))


def tea_jacobi(u, un, u0, kx, ky, error, sweeps, backend=None):
    ny, nx = u.shape
    for _ in range(sweeps):
        gk.launch(tea_jacobi_copy, (ny, nx), un, u, backend=backend)
        gk.launch(tea_jacobi_solve, (ny - 2, nx - 2), u, un, u0, kx, ky, error, backend=backend)
