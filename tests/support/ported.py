"""Kernels ported from public GPU and HPC codes the way a porting user writes them (index arithmetic from the C,
early returns, ternaries, local arrays, @gk.func helpers, int casts, clamps), each citing its source. Used by
tests/library/test_ported_kernels.py; docs/examples.md lists them. Not ported again here: the kernels of
tests/library/test_hpc_kernels.py and benchmarks/compile/realcode.py."""

import math

import numpy as np

import gradkern as gk

# ---- Rodinia hotspot3D (yuhc/gpu-rodinia cuda/hotspot3D/3D.cu: computeTempCPU, opt1.cu) ------------------------
# flattened 1-D arrays, neighbours clamped at the faces by ternaries on the index


@gk.kernel
def hotspot3d(p_in, t_in, t_out, nx, ny, nz, cc, cw, ce, cs, cn, cb, ct, step_div_cap, amb_temp):
    z, y, x = gk.tid()
    c = x + y * nx + z * nx * ny
    w = c if x == 0 else c - 1
    e = c if x == nx - 1 else c + 1
    n = c if y == 0 else c - nx
    s = c if y == ny - 1 else c + nx
    b = c if z == 0 else c - nx * ny
    t = c if z == nz - 1 else c + nx * ny
    t_out[c] = (t_in[c] * cc + t_in[n] * cn + t_in[s] * cs + t_in[e] * ce + t_in[w] * cw + t_in[t] * ct
                + t_in[b] * cb + step_div_cap * p_in[c] + ct * amb_temp)


# ---- Rodinia 3.1 SRAD (srad_v2 srad.cpp and its CUDA kernels, the iN/iS/jW/jE neighbour tables) -------------
# neighbour indices from the host's iN/iS/jW/jE tables, an early return, the coefficient clamped by if/elif


@gk.kernel
def srad_coeff(J, iN, iS, jW, jE, dN, dS, dW, dE, c, rows, cols, q0sqr):
    i, j = gk.tid()
    if i >= rows or j >= cols:
        return
    k = i * cols + j
    Jc = J[k]
    dn = J[iN[i] * cols + j] - Jc
    ds = J[iS[i] * cols + j] - Jc
    dw = J[i * cols + jW[j]] - Jc
    de = J[i * cols + jE[j]] - Jc
    dN[k] = dn
    dS[k] = ds
    dW[k] = dw
    dE[k] = de
    G2 = (dn * dn + ds * ds + dw * dw + de * de) / (Jc * Jc)
    L = (dn + ds + dw + de) / Jc
    num = (0.5 * G2) - ((1.0 / 16.0) * (L * L))
    den = 1 + (.25 * L)
    qsqr = num / (den * den)
    den = (qsqr - q0sqr) / (q0sqr * (1 + q0sqr))
    ck = 1.0 / (1.0 + den)
    if ck < 0:
        ck = 0.0
    elif ck > 1:
        ck = 1.0
    c[k] = ck


@gk.kernel
def srad_update(J, dN, dS, dW, dE, c, iS, jE, rows, cols, lam):
    i, j = gk.tid()
    if i >= rows or j >= cols:
        return
    k = i * cols + j
    cN = c[k]
    cS = c[iS[i] * cols + j]
    cW = c[k]
    cE = c[i * cols + jE[j]]
    D = cN * dN[k] + cS * dS[k] + cW * dW[k] + cE * dE[k]
    J[k] = J[k] + 0.25 * lam * D


# ---- CUDA samples BlackScholes (NVIDIA/cuda-samples Samples/5_Domain_Specific/BlackScholes/BlackScholes_kernel.cuh)


@gk.func
def cnd(d):
    A1 = 0.31938153
    A2 = -0.356563782
    A3 = 1.781477937
    A4 = -1.821255978
    A5 = 1.330274429
    RSQRT2PI = 0.39894228040143267793994605993438
    K = 1.0 / (1.0 + 0.2316419 * abs(d))
    c = RSQRT2PI * math.exp(-0.5 * d * d) * (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5)))))
    if d > 0:
        c = 1.0 - c
    return c


@gk.kernel
def black_scholes(call, put, S, X, T, R, V, opt_n):
    opt = gk.tid()
    if opt >= opt_n:
        return
    sqrtT = 1.0 / (1.0 / math.sqrt(T[opt]))
    d1 = (math.log(S[opt] / X[opt]) + (R + 0.5 * V * V) * T[opt]) / (V * sqrtT)
    d2 = d1 - V * sqrtT
    cndd1 = cnd(d1)
    cndd2 = cnd(d2)
    expRT = math.exp(-R * T[opt])
    call[opt] = S[opt] * cndd1 - X[opt] * expRT * cndd2
    put[opt] = X[opt] * expRT * (1.0 - cndd2) - S[opt] * (1.0 - cndd1)


# ---- CUDA samples convolutionSeparable (NVIDIA/cuda-samples Samples/2_Concepts_and_Techniques/
# convolutionSeparable/convolutionSeparable_gold.cpp: convolutionRowCPU; the columns' twin is the same) ---------------


@gk.kernel
def conv_rows(dst, src, kern, image_w, image_h, kernel_r):
    y, x = gk.tid()
    s = 0.0
    for k in range(-kernel_r, kernel_r + 1):
        d = x + k
        if d >= 0 and d < image_w:
            s += src[y * image_w + d] * kern[kernel_r - k]
    dst[y * image_w + x] = s



# ---- CloverLeaf ideal_gas and accelerate (UK-MAC/CloverLeaf_ref kernels/ideal_gas_kernel.f90,
# kernels/accelerate_kernel.f90): Fortran's (x_min-2:x_max+2) halo of two cells as offset 2 ------------------


@gk.kernel
def ideal_gas(density, energy, pressure, soundspeed):
    k, j = gk.tid()
    k += 2
    j += 2
    v = 1.0 / density[k, j]
    pressure[k, j] = (1.4 - 1.0) * density[k, j] * energy[k, j]
    pressurebyenergy = (1.4 - 1.0) * density[k, j]
    pressurebyvolume = -density[k, j] * pressure[k, j]
    sound_speed_squared = v * v * (pressure[k, j] * pressurebyenergy - pressurebyvolume)
    soundspeed[k, j] = math.sqrt(sound_speed_squared)


@gk.kernel
def accelerate(dt, xarea, yarea, volume, density0, pressure, viscosity, xvel0, yvel0, xvel1, yvel1):
    kk, jj = gk.tid()
    k = kk + 2
    j = jj + 2
    halfdt = 0.5 * dt
    stepbymass_s = halfdt / ((density0[k - 1, j - 1] * volume[k - 1, j - 1]
                              + density0[k - 1, j] * volume[k - 1, j]
                              + density0[k, j] * volume[k, j]
                              + density0[k, j - 1] * volume[k, j - 1]) * 0.25)
    xvel1[k, j] = xvel0[k, j] - stepbymass_s * (xarea[k, j] * (pressure[k, j] - pressure[k, j - 1])
                                                + xarea[k - 1, j] * (pressure[k - 1, j] - pressure[k - 1, j - 1]))
    yvel1[k, j] = yvel0[k, j] - stepbymass_s * (yarea[k, j] * (pressure[k, j] - pressure[k - 1, j])
                                                + yarea[k, j - 1] * (pressure[k, j - 1] - pressure[k - 1, j - 1]))
    xvel1[k, j] = xvel1[k, j] - stepbymass_s * (xarea[k, j] * (viscosity[k, j] - viscosity[k, j - 1])
                                                + xarea[k - 1, j] * (viscosity[k - 1, j] - viscosity[k - 1, j - 1]))
    yvel1[k, j] = yvel1[k, j] - stepbymass_s * (yarea[k, j] * (viscosity[k, j] - viscosity[k - 1, j])
                                                + yarea[k, j - 1] * (viscosity[k, j - 1] - viscosity[k - 1, j - 1]))


# ---- PolyBench-ACC gemver and doitgen (cavazos-lab/PolyBench-ACC CUDA/linear-algebra/kernels/gemver/gemver.cu,
# CUDA/linear-algebra/kernels/doitgen/doitgen.cu) ------------------------------------------------------------


@gk.kernel
def gemver_rank2(a, u1, v1, u2, v2, n):
    i, j = gk.tid()
    if i < n and j < n:
        a[i * n + j] += u1[i] * v1[j] + u2[i] * v2[j]


@gk.kernel
def gemver_xt(a, x, y, z, beta, n):
    i = gk.tid()
    if i < n:
        for j in range(n):
            x[i] += beta * a[j * n + i] * y[j]
        x[i] += z[i]


@gk.kernel
def gemver_w(a, w, x, alpha, n):
    i = gk.tid()
    if i < n:
        for j in range(n):
            w[i] += alpha * a[i * n + j] * x[j]


NP = 6  # doitgen's innermost extent: the local array's length


@gk.kernel
def doitgen(A, C4):
    r, q = gk.tid()
    s = gk.local((NP,), gk.float64)
    for p in range(NP):
        for t in range(NP):
            s[p] += A[r, q, t] * C4[t, p]
    for p in range(NP):
        A[r, q, p] = s[p]


# ---- PolyBench-ACC correlation (CUDA/datamining/correlation/correlation.cu: mean, std, reduce, corr kernels) --


@gk.kernel
def corr_std(data, mean, stddev, float_n, eps, n):
    j = gk.tid()
    m = 0.0
    for i in range(n):
        m += data[i, j]
    m /= float_n
    mean[j] = m
    sd = 0.0
    for i in range(n):
        sd += (data[i, j] - m) * (data[i, j] - m)
    sd /= float_n
    sd = math.sqrt(sd)
    stddev[j] = 1.0 if sd <= eps else sd


@gk.kernel
def corr_reduce(data, mean, stddev, float_n):
    i, j = gk.tid()
    data[i, j] -= mean[j]
    data[i, j] /= math.sqrt(float_n) * stddev[j]


@gk.kernel
def corr_symm(data, symmat, m, n):
    j1 = gk.tid()
    if j1 < m - 1:
        symmat[j1, j1] = 1.0
        for j2 in range(j1 + 1, m):
            acc = 0.0
            for i in range(n):
                acc += data[i, j1] * data[i, j2]
            symmat[j1, j2] = acc
            symmat[j2, j1] = acc


# ---- XSBench (ANL-CESAR/XSBench cuda/Simulation.cu: calculate_micro_xs, grid_search_nuclide) -----------------
# per nuclide a binary search of its energy grid (integers only), then linear interpolation of 5 channels


@gk.kernel
def xs_lookup(p_energy, mat_samples, num_nucs, mats, concs, egrid, xs, macro, n_gridpoints, max_num_nucs):
    lookup = gk.tid()
    mat = mat_samples[lookup]
    e = p_energy[lookup]
    for k in range(5):
        macro[lookup, k] = 0.0
    for jn in range(num_nucs[mat]):
        nuc = mats[mat * max_num_nucs + jn]
        lower = 0
        upper = n_gridpoints - 1
        length = upper - lower
        while length > 1:
            examination_point = lower + (length // 2)
            if egrid[nuc, examination_point] > e:
                upper = examination_point
            else:
                lower = examination_point
            length = upper - lower
        idx = lower
        if idx == n_gridpoints - 1:
            idx -= 1
        lo_e = egrid[nuc, idx]
        hi_e = egrid[nuc, idx + 1]
        f = (hi_e - e) / (hi_e - lo_e)
        conc = concs[mat * max_num_nucs + jn]
        for k in range(5):
            micro = xs[nuc, idx + 1, k] - f * (xs[nuc, idx + 1, k] - xs[nuc, idx, k])
            macro[lookup, k] += micro * conc


# ---- SpMV in ELL format (the CUSP/Bell-Garland ELL kernel, column-major, -1 padding) -------------------------


@gk.kernel
def spmv_ell(num_rows, max_cols, indices, values, x, y):
    row = gk.tid()
    if row >= num_rows:
        return
    s = 0.0
    for n in range(max_cols):
        col = indices[n * num_rows + row]
        if col < 0:
            break
        s += values[n * num_rows + row] * x[col]
    y[row] = s


# ---- WENO5 reconstruction (Jiang-Shu; the weno5 helper of e.g. PeleC/AMReX-Hydro's Hydro_weno, periodic) -----


@gk.func
def weno5(vm2, vm1, v0, vp1, vp2):
    eps = 1e-6
    b0 = (13.0 / 12.0) * (vm2 - 2.0 * vm1 + v0) ** 2 + 0.25 * (vm2 - 4.0 * vm1 + 3.0 * v0) ** 2
    b1 = (13.0 / 12.0) * (vm1 - 2.0 * v0 + vp1) ** 2 + 0.25 * (vm1 - vp1) ** 2
    b2 = (13.0 / 12.0) * (v0 - 2.0 * vp1 + vp2) ** 2 + 0.25 * (3.0 * v0 - 4.0 * vp1 + vp2) ** 2
    a0 = 0.1 / ((eps + b0) * (eps + b0))
    a1 = 0.6 / ((eps + b1) * (eps + b1))
    a2 = 0.3 / ((eps + b2) * (eps + b2))
    s = a0 + a1 + a2
    q0 = (2.0 * vm2 - 7.0 * vm1 + 11.0 * v0) / 6.0
    q1 = (-vm1 + 5.0 * v0 + 2.0 * vp1) / 6.0
    q2 = (2.0 * v0 + 5.0 * vp1 - vp2) / 6.0
    return (a0 * q0 + a1 * q1 + a2 * q2) / s


@gk.kernel
def weno5_faces(u, ul, n):
    i = gk.tid()
    ul[i] = weno5(u[(i - 2 + n) % n], u[(i - 1 + n) % n], u[i], u[(i + 1) % n], u[(i + 2) % n])


# ---- a 27-point stencil (the HPGMG / SPEC ACCEL 27-point operator, weights by the distance class) ------------

W27 = (-6.0, 0.5, 0.25, 0.125)  # centre, faces, edges, corners


@gk.kernel
def stencil27(u, out):
    i, j, k = gk.tid()
    if i == 0 or j == 0 or k == 0 or i >= u.shape[0] - 1 or j >= u.shape[1] - 1 or k >= u.shape[2] - 1:
        out[i, j, k] = u[i, j, k]
        return
    acc = 0.0
    for di in range(-1, 2):
        for dj in range(-1, 2):
            for dk in range(-1, 2):
                cls = abs(di) + abs(dj) + abs(dk)
                acc += W27[cls] * u[i + di, j + dj, k + dk]
    out[i, j, k] = acc


# ---- Jacobi with a halo mask (the masked Poisson smoother of e.g. ocean models' barotropic solvers) ---------


@gk.kernel
def jacobi_masked(u, rhs, mask, un, h2):
    i, j = gk.tid()
    nx, ny = u.shape
    if i == 0 or j == 0 or i == nx - 1 or j == ny - 1 or mask[i, j] == 0:
        un[i, j] = u[i, j]
        return
    mw = mask[i - 1, j]
    me = mask[i + 1, j]
    ms = mask[i, j - 1]
    mn = mask[i, j + 1]
    nb = mw + me + ms + mn
    acc = mw * u[i - 1, j] + me * u[i + 1, j] + ms * u[i, j - 1] + mn * u[i, j + 1]
    un[i, j] = (acc - h2 * rhs[i, j]) / max(nb, 1)


# ---- miniWeather compute_tendencies_x (mrnorman/miniWeather c/miniWeather_serial.cpp) -----------------------

NUM_VARS = 4
STEN = 4
HS = 2


@gk.kernel
def mw_flux_x(state, hy_dens_cell, hy_dens_theta_cell, flux, dx, hv_coef, nx):
    k, i = gk.tid()
    stencil = gk.local((STEN,), gk.float64)
    d3_vals = gk.local((NUM_VARS,), gk.float64)
    vals = gk.local((NUM_VARS,), gk.float64)
    for ll in range(NUM_VARS):
        for s in range(STEN):
            stencil[s] = state[ll, k + HS, i + s]
        vals[ll] = -stencil[0] / 12 + 7 * stencil[1] / 12 + 7 * stencil[2] / 12 - stencil[3] / 12
        d3_vals[ll] = -stencil[0] + 3 * stencil[1] - 3 * stencil[2] + stencil[3]
    r = vals[0] + hy_dens_cell[k + HS]
    u = vals[1] / r
    w = vals[2] / r
    t = (vals[3] + hy_dens_theta_cell[k + HS]) / r
    p = 27.5629410929725921310572974482 * math.pow(r * t, 1.40027894002789400278940027894)
    flux[0, k, i] = r * u - hv_coef * d3_vals[0]
    flux[1, k, i] = r * u * u + p - hv_coef * d3_vals[1]
    flux[2, k, i] = r * u * w - hv_coef * d3_vals[2]
    flux[3, k, i] = r * u * t - hv_coef * d3_vals[3]


@gk.kernel
def mw_tend_x(flux, tend, dx):
    ll, k, i = gk.tid()
    tend[ll, k, i] = -(flux[ll, k, i + 1] - flux[ll, k, i]) / dx


# ---- Rodinia lavaMD inner loop (yuhc/gpu-rodinia cuda/lavaMD/kernel/kernel_gpu_cuda.cu), one box ------------


@gk.kernel
def lavamd_box(rv, qv, fv, a2, n):
    i = gk.tid()
    vi = rv[i, 0]
    xi = rv[i, 1]
    yi = rv[i, 2]
    zi = rv[i, 3]
    fv0 = 0.0
    fv1 = 0.0
    fv2 = 0.0
    fv3 = 0.0
    for j in range(n):
        r2 = vi + rv[j, 0] - (xi * rv[j, 1] + yi * rv[j, 2] + zi * rv[j, 3])
        u2 = a2 * r2
        vij = math.exp(-u2)
        fs = 2.0 * vij
        dx = xi - rv[j, 1]
        dy = yi - rv[j, 2]
        dz = zi - rv[j, 3]
        fv0 += qv[j] * vij
        fv1 += qv[j] * fs * dx
        fv2 += qv[j] * fs * dy
        fv3 += qv[j] * fs * dz
    fv[i, 0] = fv0
    fv[i, 1] = fv1
    fv[i, 2] = fv2
    fv[i, 3] = fv3


# ---- Rodinia backprop layerforward (yuhc/gpu-rodinia cuda/backprop/backprop.c: bpnn_layerforward) -----------


@gk.func
def squash(x):
    return 1.0 / (1.0 + math.exp(-x))


@gk.kernel
def bp_layerforward(l1, l2, conn, n1):
    j = gk.tid()
    s = 0.0
    for k in range(n1 + 1):
        s += conn[k, j + 1] * l1[k]
    l2[j + 1] = squash(s)


def _srad_tables(rows, cols):
    iN = np.array([max(i - 1, 0) for i in range(rows)], np.int32)
    iS = np.array([min(i + 1, rows - 1) for i in range(rows)], np.int32)
    jW = np.array([max(j - 1, 0) for j in range(cols)], np.int32)
    jE = np.array([min(j + 1, cols - 1) for j in range(cols)], np.int32)
    return iN, iS, jW, jE


def _ell(rng, rows, ncols, width):
    """An ELL matrix (column-major, -1 padded) with 1..width entries a row."""
    idx = -np.ones((width, rows), np.int32)
    val = np.zeros((width, rows))
    for r in range(rows):
        cnt = rng.integers(1, width + 1)
        idx[:cnt, r] = np.sort(rng.choice(ncols, cnt, replace=False))
        val[:cnt, r] = rng.uniform(0.5, 1.5, cnt)
    return idx.ravel(), val.ravel()


# ---- CUDA's grid-stride loop (NVIDIA developer blog, "An Even Easier Introduction to CUDA": the add kernel) -----
# `for (int i = index; i < n; i += stride) y[i] = x[i] + y[i];` with fewer threads than elements: a while loop


@gk.kernel
def add_grid_stride(n, x, y, stride):
    i = gk.tid()
    while i < n:
        y[i] = x[i] + y[i]
        i += stride


# ---- Rodinia particlefilter (cuda/particlefilter ex_particle_CUDA_float_seq.cu: findIndexBin) --------------------
# a binary search of the CDF that returns from inside its while loop; each particle takes the state of the
# particle it finds (the find-index kernel's `xj[i] = arrayX[index]`, with its fallback to the last index)


@gk.func
def find_index_bin(cdf, begin_index, end_index, value):
    if end_index < begin_index:
        return -1
    while end_index > begin_index:
        middle_index = begin_index + (end_index - begin_index) // 2
        if cdf[middle_index] >= value:
            if middle_index == 0:
                return middle_index
            elif cdf[middle_index - 1] < value:
                return middle_index
            elif cdf[middle_index - 1] == value:
                while cdf[middle_index] == value and middle_index >= 0:
                    middle_index -= 1
                middle_index += 1
                return middle_index
        if cdf[middle_index] > value:
            end_index = middle_index - 1
        else:
            begin_index = middle_index + 1
    return -1


@gk.kernel
def particle_resample(array_x, array_y, cdf, u, xj, yj, n_particles):
    i = gk.tid()
    index = find_index_bin(cdf, 0, n_particles - 1, u[i])
    if index == -1:
        index = n_particles - 1
    xj[i] = array_x[index] * 1.5
    yj[i] = gk.sin(array_y[index]) + array_x[i]


def cases(rng, dtype=np.float64):
    """(name, kernel, args, dim, check_grad options) on small random inputs away from kinks."""
    def R(*s, lo=0.5, hi=1.5):
        return rng.uniform(lo, hi, s).astype(dtype)

    def D(a):
        return gk.Duplicated(a, np.zeros_like(a))

    def C(a):
        return gk.Const(a)

    nx, ny, nz = 4, 3, 3
    rows, cols = 4, 5
    iN, iS, jW, jE = _srad_tables(rows, cols)
    egrid = np.sort(rng.uniform(0.0, 1.0, (4, 7)), axis=1)
    ell_idx, ell_val = _ell(rng, 5, 6, 3)
    mask = (rng.uniform(0, 1, (6, 5)) > 0.3).astype(dtype)
    a = 0.05
    return [
        ("hotspot3d", hotspot3d, (D(R(nx * ny * nz)), D(R(nx * ny * nz)), D(R(nx * ny * nz)), nx, ny, nz,
                                  gk.Active(0.3), a, a, a, a, a, gk.Active(0.07), 0.2, 0.8), (nz, ny, nx), {}),
        ("srad_coeff", srad_coeff, (D(R(rows * cols, lo=1.0, hi=2.0)), C(iN), C(iS), C(jW), C(jE),
                                    *[D(R(rows * cols)) for _ in range(5)], rows, cols, 0.05), (rows, cols), {}),
        ("srad_update", srad_update, (D(R(rows * cols)), *[D(R(rows * cols)) for _ in range(5)], C(iS), C(jE),
                                      rows, cols, gk.Active(0.5)), (rows, cols), {}),
        ("black_scholes", black_scholes, (D(R(7)), D(R(7)), D(R(7, lo=5.0, hi=30.0)), D(R(7, lo=1.0, hi=100.0)),
                                          D(R(7, lo=0.25, hi=10.0)), gk.Active(0.02), gk.Active(0.3), 7), 7,
         {"relative": True}),
        ("conv_rows", conv_rows, (D(R(4 * 6)), D(R(4 * 6)), D(R(5)), 6, 4, 2), (4, 6), {}),
        ("ideal_gas", ideal_gas, (D(R(7, 8)), D(R(7, 8)), D(R(7, 8)), D(R(7, 8))), (3, 4), {}),
        ("accelerate", accelerate, (gk.Active(0.1), *[D(R(7, 8)) for _ in range(10)]), (3, 4), {}),
        ("gemver_rank2", gemver_rank2, (D(R(16)), D(R(4)), D(R(4)), D(R(4)), D(R(4)), 4), (4, 4), {}),
        ("gemver_xt", gemver_xt, (D(R(16)), D(R(4)), D(R(4)), D(R(4)), gk.Active(1.2), 4), 4, {}),
        ("gemver_w", gemver_w, (D(R(16)), D(R(4)), D(R(4)), gk.Active(1.5), 4), 4, {}),
        ("doitgen", doitgen, (D(R(3, 2, NP)), D(R(NP, NP))), (3, 2), {}),
        ("corr_std", corr_std, (D(R(5, 4)), D(R(4)), D(R(4)), 5.0, 0.005, 5), 4, {}),
        ("corr_reduce", corr_reduce, (D(R(5, 4)), D(R(4)), D(R(4)), 5.0), (5, 4), {}),
        ("corr_symm", corr_symm, (D(R(5, 4)), D(R(4, 4)), 4, 5), 4, {}),
        ("xs_lookup", xs_lookup, (C(rng.uniform(0.1, 0.9, 6)), C(np.array([0, 1, 2, 1, 0, 2], np.int32)),
                                  C(np.array([2, 3, 1], np.int32)),
                                  C(np.array([0, 2, -1, 1, 3, 0, 3, -1, -1], np.int32)),
                                  D(R(3 * 3)), C(egrid), D(R(4, 7, 5)), D(R(6, 5)), 7, 3), 6, {}),
        ("spmv_ell", spmv_ell, (5, 3, C(ell_idx), D(ell_val.astype(dtype)), D(R(6)), D(R(5))), 5, {}),
        ("weno5_faces", weno5_faces, (D(R(9)), D(R(9)), 9), 9, {}),
        ("stencil27", stencil27, (D(R(4, 4, 5)), D(R(4, 4, 5))), (4, 4, 5), {}),
        ("jacobi_masked", jacobi_masked, (D(R(6, 5)), D(R(6, 5)), C(mask), D(R(6, 5)), 0.1), (6, 5), {}),
        ("mw_flux_x", mw_flux_x, (D(R(NUM_VARS, 3 + 2 * HS, 5 + 2 * HS, lo=0.1, hi=0.3)),
                                  C(R(3 + 2 * HS, lo=1.0, hi=1.2)), C(R(3 + 2 * HS, lo=300.0, hi=310.0)),
                                  D(R(NUM_VARS, 3, 6)), 0.5, gk.Active(0.01), 5), (3, 6), {}),
        ("mw_tend_x", mw_tend_x, (D(R(NUM_VARS, 3, 6)), D(R(NUM_VARS, 3, 5)), 0.5), (NUM_VARS, 3, 5), {}),
        ("lavamd_box", lavamd_box, (D(R(6, 4, lo=0.1, hi=0.6)), D(R(6)), D(R(6, 4)), gk.Active(0.5), 6), 6, {}),
        ("bp_layerforward", bp_layerforward, (D(R(5)), D(R(4)), D(R(5, 4)), 4), 3, {}),
        ("add_grid_stride", add_grid_stride, (11, D(R(11)), D(R(11)), 4), 4, {}),
        ("particle_resample", particle_resample, (D(R(9)), D(R(9)), C(np.cumsum(R(9)) / 7.0), C(R(9, lo=0.0,
                                                  hi=1.0)), D(R(9)), D(R(9)), 9), 9, {}),
    ]


def primal_values(args):
    """Copies of the primal values of a case's arguments (annotations unwrapped), for a launch of its own."""
    out = []
    for a in args:
        v = a.val if isinstance(a, gk.Annotation) else a
        out.append(v.copy() if isinstance(v, np.ndarray) else v)
    return out


def assert_backends_agree(name, runs):
    """Each backend's arrays after the same launches against the CPU backend's (`runs`: backend -> arguments; the
    interpreter's where the CPU backend did not run): integers equal; floats within 8 ulps of the largest value,
    since every backend evaluates the same operations in the same order and only libm's last bit may differ (the
    interpreter's math calls against Numba's)."""
    reference = runs["cpu"] if "cpu" in runs else runs["interp"]
    for backend, values in runs.items():
        for want, got in zip(reference, values):
            if isinstance(want, np.ndarray) and want.dtype.kind != "f":
                np.testing.assert_array_equal(got, want)
            elif isinstance(want, np.ndarray):
                scale = float(np.max(np.abs(want))) if want.size else 1.0
                np.testing.assert_allclose(got, want, rtol=0, atol=8 * np.finfo(want.dtype).eps * scale,
                                           err_msg=f"{name} on {backend}")
