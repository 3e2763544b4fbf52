"""Session 50's third round of ported kernels, HPC part: LULESH's hourglass force and characteristic length,
CoMD's EAM passes, miniMD's half-neighbour Lennard-Jones, GADGET-2's SPH density and pressure force, a Kokkos
tutorial reduction, the CUDA samples' tiled matrixMul, two Numba CUDA examples, Nek5000's local_grad3, an HLL
Riemann solver, a P1 finite-element apply by atomics, Giles' erfinv, HACCmk's short-range force, a Clenshaw
Chebyshev series, Rodinia's dwt2d lifting and lud. Each cites its source and was written here from the algorithm.
Used by tests/library/test_ported_hpc3.py through ported_hpc3_cases.py."""

import math

import gradkern as gk

# ---- LULESH 2.0 CalcFBHourglassForceForElems + CalcElemFBHourglassForce (LLNL/LULESH lulesh.cc): the four
# hourglass modes' gamma table, hourgam per element in a local array, the nodal velocities gathered by nodelist ---
GAMMA = ((1.0, 1.0, -1.0, -1.0, -1.0, -1.0, 1.0, 1.0),
         (1.0, -1.0, -1.0, 1.0, -1.0, 1.0, 1.0, -1.0),
         (1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0),
         (-1.0, 1.0, -1.0, 1.0, 1.0, -1.0, 1.0, -1.0))


@gk.kernel
def lulesh_hourglass(determ, x8n, y8n, z8n, dvdx, dvdy, dvdz, ss, elem_mass, nodelist, xd, yd, zd, hourg,
                     fx_elem, fy_elem, fz_elem):
    i2 = gk.tid()
    hourgam = gk.local((8, 4), gk.float64)
    volinv = 1.0 / determ[i2]
    for i1 in range(4):
        hourmodx = 0.0
        hourmody = 0.0
        hourmodz = 0.0
        for j in range(8):
            hourmodx += x8n[i2, j] * GAMMA[i1][j]
            hourmody += y8n[i2, j] * GAMMA[i1][j]
            hourmodz += z8n[i2, j] * GAMMA[i1][j]
        for j in range(8):
            hourgam[j, i1] = GAMMA[i1][j] - volinv * (dvdx[i2, j] * hourmodx + dvdy[i2, j] * hourmody
                                                      + dvdz[i2, j] * hourmodz)
    volume13 = math.pow(determ[i2], 1.0 / 3.0)
    coefficient = -hourg * 0.01 * ss[i2] * elem_mass[i2] / volume13
    hxx = gk.local((4,), gk.float64)
    hyy = gk.local((4,), gk.float64)
    hzz = gk.local((4,), gk.float64)
    for i in range(4):
        for j in range(8):
            nd = nodelist[8 * i2 + j]
            hxx[i] += hourgam[j, i] * xd[nd]
            hyy[i] += hourgam[j, i] * yd[nd]
            hzz[i] += hourgam[j, i] * zd[nd]
    for j in range(8):
        fx_elem[i2, j] = coefficient * (hourgam[j, 0] * hxx[0] + hourgam[j, 1] * hxx[1] + hourgam[j, 2] * hxx[2]
                                        + hourgam[j, 3] * hxx[3])
        fy_elem[i2, j] = coefficient * (hourgam[j, 0] * hyy[0] + hourgam[j, 1] * hyy[1] + hourgam[j, 2] * hyy[2]
                                        + hourgam[j, 3] * hyy[3])
        fz_elem[i2, j] = coefficient * (hourgam[j, 0] * hzz[0] + hourgam[j, 1] * hzz[1] + hourgam[j, 2] * hzz[2]
                                        + hourgam[j, 3] * hzz[3])


# ---- LULESH CalcKinematicsForElems' characteristic length (lulesh.cc: the nodes moved back half a step by
# dt2 * velocity, then CalcElemCharacteristicLength with AreaFace: the largest face, 4 V / sqrt(area)) ----------
FACES6 = ((0, 1, 2, 3), (4, 5, 6, 7), (0, 1, 5, 4), (1, 2, 6, 5), (2, 3, 7, 6), (3, 0, 4, 7))


@gk.func
def area_face(x0, x1, x2, x3, y0, y1, y2, y3, z0, z1, z2, z3):
    fx = (x2 - x0) - (x3 - x1)
    fy = (y2 - y0) - (y3 - y1)
    fz = (z2 - z0) - (z3 - z1)
    gx = (x2 - x0) + (x3 - x1)
    gy = (y2 - y0) + (y3 - y1)
    gz = (z2 - z0) + (z3 - z1)
    return (fx * fx + fy * fy + fz * fz) * (gx * gx + gy * gy + gz * gz) - (fx * gx + fy * gy + fz * gz) ** 2


@gk.kernel
def lulesh_char_length(x, y, z, xd, yd, zd, nodelist, volume, dt, arealg):
    k = gk.tid()
    xl = gk.local((8,), gk.float64)
    yl = gk.local((8,), gk.float64)
    zl = gk.local((8,), gk.float64)
    dt2 = 0.5 * dt
    for lnode in range(8):
        gnode = nodelist[k, lnode]
        xl[lnode] = x[gnode] - dt2 * xd[gnode]
        yl[lnode] = y[gnode] - dt2 * yd[gnode]
        zl[lnode] = z[gnode] - dt2 * zd[gnode]
    char_length = 0.0
    for f in range(6):
        a = area_face(xl[FACES6[f][0]], xl[FACES6[f][1]], xl[FACES6[f][2]], xl[FACES6[f][3]],
                      yl[FACES6[f][0]], yl[FACES6[f][1]], yl[FACES6[f][2]], yl[FACES6[f][3]],
                      zl[FACES6[f][0]], zl[FACES6[f][1]], zl[FACES6[f][2]], zl[FACES6[f][3]])
        char_length = max(a, char_length)
    arealg[k] = 4.0 * volume[k] / math.sqrt(char_length)


# ---- CoMD EAM (ECP-copa/CoMD src-openmp/eam.c: eamForce's two passes over a full neighbour list as CoMD's GPU
# port runs them; interpolate(): the tables padded by one entry each side, a quadratic through three points) ------


@gk.func
def eam_interpolate(tt, x0, inv_dx, n, r):
    if r < x0:
        r = x0
    r = (r - x0) * inv_dx
    ii = int(math.floor(r))
    if ii > n:
        ii = n
        r = float(n)
    r = r - math.floor(r)
    g1 = tt[ii + 2] - tt[ii]
    return tt[ii + 1] + 0.5 * r * (g1 + r * (tt[ii + 2] + tt[ii] - 2.0 * tt[ii + 1]))


@gk.func
def eam_interpolate_deriv(tt, x0, inv_dx, n, r):
    if r < x0:
        r = x0
    r = (r - x0) * inv_dx
    ii = int(math.floor(r))
    if ii > n:
        ii = n
        r = float(n)
    r = r - math.floor(r)
    g1 = tt[ii + 2] - tt[ii]
    g2 = tt[ii + 3] - tt[ii + 1]
    return 0.5 * (g1 + r * (g2 - g1)) * inv_dx


@gk.kernel
def eam_density(pos, neigh, nneigh, phi_t, rho_t, f_t, x0, inv_dx, f_x0, f_inv_dx, ntab, rcut2, rhobar, dfembed,
                energy):
    i = gk.tid()
    rho = 0.0
    e = 0.0
    for k in range(nneigh[i]):
        j = neigh[i, k]
        dx = pos[i, 0] - pos[j, 0]
        dy = pos[i, 1] - pos[j, 1]
        dz = pos[i, 2] - pos[j, 2]
        r2 = dx * dx + dy * dy + dz * dz
        if r2 < rcut2:
            r = math.sqrt(r2)
            e += 0.5 * eam_interpolate(phi_t, x0, inv_dx, ntab, r)
            rho += eam_interpolate(rho_t, x0, inv_dx, ntab, r)
    rhobar[i] = rho
    energy[i] = e + eam_interpolate(f_t, f_x0, f_inv_dx, ntab, rho)
    dfembed[i] = eam_interpolate_deriv(f_t, f_x0, f_inv_dx, ntab, rho)


@gk.kernel
def eam_force(pos, neigh, nneigh, phi_t, rho_t, dfembed, x0, inv_dx, ntab, rcut2, force):
    i = gk.tid()
    fx = 0.0
    fy = 0.0
    fz = 0.0
    for k in range(nneigh[i]):
        j = neigh[i, k]
        dx = pos[i, 0] - pos[j, 0]
        dy = pos[i, 1] - pos[j, 1]
        dz = pos[i, 2] - pos[j, 2]
        r2 = dx * dx + dy * dy + dz * dz
        if r2 < rcut2:
            r = math.sqrt(r2)
            dphi = eam_interpolate_deriv(phi_t, x0, inv_dx, ntab, r)
            drho = eam_interpolate_deriv(rho_t, x0, inv_dx, ntab, r)
            s = (dphi + (dfembed[i] + dfembed[j]) * drho) / r
            fx -= s * dx
            fy -= s * dy
            fz -= s * dz
    force[i, 0] = fx
    force[i, 1] = fy
    force[i, 2] = fz


# ---- miniMD ForceLJ::compute_halfneigh (Mantevo/miniMD ref/force_lj.cpp): each pair once, Newton's third law
# by a scatter into f[j] (atomics, as the threaded build does), positions in a padded flat x[j * PAD + d] ------
PAD = 3


@gk.kernel
def minimd_lj_half(x, f, neighbors, numneigh, maxneighs, cutforcesq, epsilon, sigma6):
    i = gk.tid()
    xtmp = x[i * PAD + 0]
    ytmp = x[i * PAD + 1]
    ztmp = x[i * PAD + 2]
    fix = 0.0
    fiy = 0.0
    fiz = 0.0
    for k in range(numneigh[i]):
        j = neighbors[i * maxneighs + k]
        delx = xtmp - x[j * PAD + 0]
        dely = ytmp - x[j * PAD + 1]
        delz = ztmp - x[j * PAD + 2]
        rsq = delx * delx + dely * dely + delz * delz
        if rsq < cutforcesq:
            sr2 = 1.0 / rsq
            sr6 = sr2 * sr2 * sr2 * sigma6
            force = 48.0 * sr6 * (sr6 - 0.5) * sr2 * epsilon
            fix += delx * force
            fiy += dely * force
            fiz += delz * force
            gk.atomic_add(f, j * PAD + 0, -delx * force)
            gk.atomic_add(f, j * PAD + 1, -dely * force)
            gk.atomic_add(f, j * PAD + 2, -delz * force)
    gk.atomic_add(f, i * PAD + 0, fix)
    gk.atomic_add(f, i * PAD + 1, fiy)
    gk.atomic_add(f, i * PAD + 2, fiz)


# ---- GADGET-2 SPH (density.c: density_evaluate; hydra.c: hydro_evaluate without viscosity), the cubic spline
# with support h: KERNEL_COEFF_1..6 of allvars.h, pressure from the entropy, P = A rho^gamma; the density sum
# includes the particle itself (r = 0), the force's loop skips it (r2 > 0) ------------------------------------------
KERNEL_COEFF_1 = 2.546479089470
KERNEL_COEFF_2 = 15.278874536822
KERNEL_COEFF_3 = 45.836623610466
KERNEL_COEFF_4 = 30.557749073644
KERNEL_COEFF_5 = 5.092958178941
KERNEL_COEFF_6 = -15.278874536822
GAMMA_ADIABATIC = 5.0 / 3.0


@gk.kernel
def sph_density(pos, mass, h, rho, n):
    i = gk.tid()
    hinv = 1.0 / h
    hinv3 = hinv * hinv * hinv
    s = 0.0
    for j in range(n):
        dx = pos[i, 0] - pos[j, 0]
        dy = pos[i, 1] - pos[j, 1]
        dz = pos[i, 2] - pos[j, 2]
        r2 = dx * dx + dy * dy + dz * dz
        if r2 < h * h:
            # the self pair has r2 = 0, where sqrt' = +inf and the chain rule's 0 * inf is NaN (docs: derivatives
            # at kinks): the guard keeps sqrt out of that pair's derivative; GADGET writes u = sqrt(r2) * hinv
            u = (math.sqrt(r2) if r2 > 0.0 else 0.0) * hinv
            if u < 0.5:
                wk = hinv3 * (KERNEL_COEFF_1 + KERNEL_COEFF_2 * (u - 1.0) * u * u)
            else:
                wk = hinv3 * KERNEL_COEFF_5 * (1.0 - u) * (1.0 - u) * (1.0 - u)
            s += mass[j] * wk
    rho[i] = s


@gk.kernel
def sph_pressure_force(pos, mass, rho, entropy, h, acc, n):
    i = gk.tid()
    hinv = 1.0 / h
    hinv4 = hinv * hinv * hinv * hinv
    p_over_rho2_i = entropy[i] * math.pow(rho[i], GAMMA_ADIABATIC) / (rho[i] * rho[i])
    ax = 0.0
    ay = 0.0
    az = 0.0
    for j in range(n):
        dx = pos[i, 0] - pos[j, 0]
        dy = pos[i, 1] - pos[j, 1]
        dz = pos[i, 2] - pos[j, 2]
        r2 = dx * dx + dy * dy + dz * dz
        if r2 < h * h and r2 > 0.0:
            r = math.sqrt(r2)
            u = r * hinv
            if u < 0.5:
                dwk = hinv4 * u * (KERNEL_COEFF_3 * u - KERNEL_COEFF_4)
            else:
                dwk = hinv4 * KERNEL_COEFF_6 * (1.0 - u) * (1.0 - u)
            p_over_rho2_j = entropy[j] * math.pow(rho[j], GAMMA_ADIABATIC) / (rho[j] * rho[j])
            hfc = mass[j] * (p_over_rho2_i + p_over_rho2_j) * dwk / r
            ax -= hfc * dx
            ay -= hfc * dy
            az -= hfc * dz
    acc[i, 0] = ax
    acc[i, 1] = ay
    acc[i, 2] = az


# ---- Kokkos tutorial y^T A x (kokkos/kokkos-tutorials Exercises/02/Solution/exercise_2_solution.cpp): the
# parallel_reduce's per-row contribution, the reduction as one atomic add -----------------------------------------


@gk.kernel
def kokkos_yax(y, a, x, result, m):
    j = gk.tid()
    temp2 = 0.0
    for i in range(m):
        temp2 += a[j, i] * x[i]
    gk.atomic_add(result, 0, y[j] * temp2)


# ---- CUDA samples matrixMul (NVIDIA/cuda-samples Samples/0_Introduction/matrixMul/matrixMul.cu: MatrixMulCUDA)
# as written: block and thread indices from the launch, the loop over tiles a = aBegin..aEnd by aStep, b by bStep;
# the shared tiles As/Bs read where each element came from (one thread computes its own product) ----------------
BLOCK_SIZE = 2


@gk.kernel
def matrix_mul_tiled(c, a, b, wa, wb):
    row, col = gk.tid()
    bx = col // BLOCK_SIZE
    by = row // BLOCK_SIZE
    tx = col % BLOCK_SIZE
    ty = row % BLOCK_SIZE
    a_begin = wa * BLOCK_SIZE * by
    a_end = a_begin + wa - 1
    a_step = BLOCK_SIZE
    b_begin = BLOCK_SIZE * bx
    b_step = BLOCK_SIZE * wb
    csub = 0.0
    bb = b_begin
    for aa in range(a_begin, a_end + 1, a_step):
        for k in range(BLOCK_SIZE):
            csub += a[aa + wa * ty + k] * b[bb + wb * k + tx]
        bb += b_step
    cc = wb * BLOCK_SIZE * by + BLOCK_SIZE * bx
    c[cc + wb * ty + tx] = csub


# ---- Numba CUDA examples (numba/numba numba/cuda/tests/doc_examples/test_cpu_gpu_compat.py: business_logic
# called from a kernel guarded by len(); test_laplace.py: the 1-D heat equation, its grid.sync() between time
# steps a launch boundary, the two buffers swapped by parity) -----------------------------------------------------


@gk.func
def business_logic(x, y, z):
    return 4 * z * (2 * x - (4 * y) / 2 * math.pi)


@gk.kernel
def numba_cpu_gpu_compat(res, xarr, yarr, zarr):
    tid = gk.tid()
    if tid < len(xarr):
        res[tid] = business_logic(xarr[tid], yarr[tid], zarr[tid])


@gk.kernel
def heat_step(data, next_data, k):
    i = gk.tid()
    if i >= len(data):
        return
    curr_temp = data[i]
    if i == 0:
        next_temp = curr_temp + k * (data[i + 1] - (2 * curr_temp))
    elif i == len(data) - 1:
        next_temp = curr_temp + k * (data[i - 1] - (2 * curr_temp))
    else:
        next_temp = curr_temp + k * (data[i - 1] + data[i + 1] - (2 * curr_temp))
    next_data[i] = next_temp


def solve_heat_equation(buf_0, buf_1, timesteps, k, backend=None):
    """The Numba example's time loop as a program: one launch a step."""
    for step in range(timesteps):
        if step % 2 == 0:
            gk.launch(heat_step, buf_0.size, buf_0, buf_1, k, backend=backend)
        else:
            gk.launch(heat_step, buf_0.size, buf_1, buf_0, k, backend=backend)


# ---- Nek5000 local_grad3 (Nek5000/Nek5000 core: subroutine local_grad3's three mxm products, u(i,j,k,e)
# stored here as u[e, k, j, i]): a thread per (e, k, j) computes the i-line of all three derivatives ------------


@gk.kernel
def nek_local_grad3(ur, us, ut, u, d):
    e, k, j = gk.tid()
    n = d.shape[0]
    for i in range(n):
        sr = 0.0
        ss = 0.0
        st = 0.0
        for m in range(n):
            sr += d[i, m] * u[e, k, j, m]
            ss += d[j, m] * u[e, k, m, i]
            st += d[k, m] * u[e, m, j, i]
        ur[e, k, j, i] = sr
        us[e, k, j, i] = ss
        ut[e, k, j, i] = st


# ---- HLL Riemann solver for the 1-D shallow-water equations (Toro, "Shock-capturing methods for free-surface
# shallow flows", ch. 10; the HLL(E) flux of e.g. the SWE teaching code's HLLEFun solver), a face a thread -----


@gk.kernel
def hll_swe_flux(h, hu, flux_h, flux_hu, g):
    i = gk.tid()
    hl = h[i]
    hr = h[i + 1]
    ul = hu[i] / hl
    ur = hu[i + 1] / hr
    cl = math.sqrt(g * hl)
    cr = math.sqrt(g * hr)
    sl = min(ul - cl, ur - cr)
    sr = max(ul + cl, ur + cr)
    fl1 = hu[i]
    fl2 = hu[i] * ul + 0.5 * g * hl * hl
    fr1 = hu[i + 1]
    fr2 = hu[i + 1] * ur + 0.5 * g * hr * hr
    if sl >= 0.0:
        flux_h[i] = fl1
        flux_hu[i] = fl2
    elif sr <= 0.0:
        flux_h[i] = fr1
        flux_hu[i] = fr2
    else:
        flux_h[i] = (sr * fl1 - sl * fr1 + sl * sr * (hr - hl)) / (sr - sl)
        flux_hu[i] = (sr * fl2 - sl * fr2 + sl * sr * (hu[i + 1] - hu[i])) / (sr - sl)
