"""Session 51's fourth round of ported kernels, part one: PolyBench/GPU as its CUDA files write the kernels (flat
row-major indices, a thread per row or per element with the inner `for` over global memory, the host's launch
sequence as a program), Parboil (register-tiled sgemm, the 7-point stencil marching up z with registers rolled,
mri-fhd's two kernels, cutcp's cutoff potential) and SHOC (the reduction's per-thread partial loop, S3D's
Arrhenius rates). Written here from the algorithms of the files cited; used by tests/library/test_ported_hpc4.py
(inputs and NumPy references in ported_hpc4_cases.py)."""

import math

import gradkern as gk

# ---- PolyBench/GPU 2mm (sgrauerg/polybenchGpu CUDA/2MM/2mm.cu: mm2_kernel1, mm2_kernel2 and the host's
# mm2Cuda): the grid rounded up to the block (bounds tested in the kernel), the product accumulated in global
# memory, two launches ---------------------------------------------------------------------------------------------


@gk.kernel
def mm2_kernel1(tmp, A, B, alpha, ni, nj, nk):
    i, j = gk.tid()
    if i < ni and j < nj:
        tmp[i * nj + j] = 0.0
        for k in range(nk):
            tmp[i * nj + j] += alpha * A[i * nk + k] * B[k * nj + j]


@gk.kernel
def mm2_kernel2(tmp, C, D, beta, ni, nj, nl):
    i, j = gk.tid()
    if i < ni and j < nl:
        D[i * nl + j] *= beta
        for k in range(nj):
            D[i * nl + j] += tmp[i * nj + k] * C[k * nl + j]


def polybench_2mm(tmp, A, B, C, D, alpha, beta, ni, nj, nk, nl, backend=None):
    """mm2Cuda: D = alpha A B C + beta D, the grid of 4 x 4 blocks rounded up."""
    def up(n):
        return (n + 3) // 4 * 4
    gk.launch(mm2_kernel1, (up(ni), up(nj)), tmp, A, B, alpha, ni, nj, nk, backend=backend)
    gk.launch(mm2_kernel2, (up(ni), up(nl)), tmp, C, D, beta, ni, nj, nl, backend=backend)


# ---- PolyBench/GPU atax (CUDA/ATAX/atax.cu: atax_kernel1, atax_kernel2): y = A^T (A x), a thread per row then
# a thread per column, each zeroing its output before its loop -----------------------------------------------------


@gk.kernel
def atax_kernel1(A, x, tmp, nx, ny):
    i = gk.tid()
    if i < nx:
        tmp[i] = 0.0
        for j in range(ny):
            tmp[i] += A[i * ny + j] * x[j]


@gk.kernel
def atax_kernel2(A, y, tmp, nx, ny):
    j = gk.tid()
    if j < ny:
        y[j] = 0.0
        for i in range(nx):
            y[j] += A[i * ny + j] * tmp[i]


def polybench_atax(A, x, y, tmp, nx, ny, backend=None):
    gk.launch(atax_kernel1, nx + 2, A, x, tmp, nx, ny, backend=backend)
    gk.launch(atax_kernel2, ny + 1, A, y, tmp, nx, ny, backend=backend)


# ---- PolyBench/GPU bicg (CUDA/BICG/bicg.cu: bicg_kernel1, bicg_kernel2): s = A^T r and q = A p, one kernel
# each; both launched on the same arrays -----------------------------------------------------------------------


@gk.kernel
def bicg_kernel1(A, r, s, nx, ny):
    j = gk.tid()
    if j < ny:
        s[j] = 0.0
        for i in range(nx):
            s[j] += r[i] * A[i * ny + j]


@gk.kernel
def bicg_kernel2(A, p, q, nx, ny):
    i = gk.tid()
    if i < nx:
        q[i] = 0.0
        for j in range(ny):
            q[i] += A[i * ny + j] * p[j]


def polybench_bicg(A, r, s, p, q, nx, ny, backend=None):
    gk.launch(bicg_kernel1, ny, A, r, s, nx, ny, backend=backend)
    gk.launch(bicg_kernel2, nx, A, p, q, nx, ny, backend=backend)


# ---- PolyBench/GPU mvt (CUDA/MVT/mvt.cu: mvt_kernel1, mvt_kernel2): x1 += A y1 and x2 += A^T y2 in place --------


@gk.kernel
def mvt_kernel1(a, x1, y_1, n):
    i = gk.tid()
    if i < n:
        for j in range(n):
            x1[i] += a[i * n + j] * y_1[j]


@gk.kernel
def mvt_kernel2(a, x2, y_2, n):
    i = gk.tid()
    if i < n:
        for j in range(n):
            x2[i] += a[j * n + i] * y_2[j]


def polybench_mvt(a, x1, x2, y_1, y_2, n, backend=None):
    gk.launch(mvt_kernel1, n, a, x1, y_1, n, backend=backend)
    gk.launch(mvt_kernel2, n, a, x2, y_2, n, backend=backend)


# ---- PolyBench/GPU gesummv (CUDA/GESUMMV/gesummv.cu: gesummv_kernel): two products into global tmp and y in
# one loop, then y overwritten from both -------------------------------------------------------------------------


@gk.kernel
def gesummv_kernel(a, b, x, y, tmp, alpha, beta, n):
    i = gk.tid()
    if i < n:
        for j in range(n):
            tmp[i] += a[i * n + j] * x[j]
            y[i] += b[i * n + j] * x[j]
        y[i] = alpha * tmp[i] + beta * y[i]


# ---- PolyBench/GPU syr2k (CUDA/SYR2K/syr2k.cu: syr2k_kernel): C = alpha (A B^T + B A^T) + beta C, a thread per
# element, scaled in place then accumulated in place -------------------------------------------------------------


@gk.kernel
def syr2k_kernel(a, b, c, alpha, beta, n, m):
    i, j = gk.tid()
    if i < n and j < n:
        c[i * n + j] *= beta
        for k in range(m):
            c[i * n + j] += alpha * a[i * m + k] * b[j * m + k] + alpha * b[i * m + k] * a[j * m + k]


# ---- PolyBench/GPU covariance (CUDA/COVAR/covariance.cu: mean_kernel, reduce_kernel, covar_kernel): the upper
# triangle accumulated in place, then copied to the lower by reading it back ---------------------------------


@gk.kernel
def covar_mean(mean, data, float_n, m, n):
    j = gk.tid()
    if j < m:
        mean[j] = 0.0
        for i in range(n):
            mean[j] += data[i * m + j]
        mean[j] /= float_n


@gk.kernel
def covar_reduce(mean, data, m, n):
    i, j = gk.tid()
    if j < m and i < n:
        data[i * m + j] -= mean[j]


@gk.kernel
def covar_kernel(symmat, data, m, n):
    j1 = gk.tid()
    if j1 < m:
        for j2 in range(j1, m):
            symmat[j1 * m + j2] = 0.0
            for i in range(n):
                symmat[j1 * m + j2] += data[i * m + j1] * data[i * m + j2]
            symmat[j2 * m + j1] = symmat[j1 * m + j2]


def polybench_covariance(data, symmat, mean, float_n, m, n, backend=None):
    gk.launch(covar_mean, m, mean, data, float_n, m, n, backend=backend)
    gk.launch(covar_reduce, (n, m), mean, data, m, n, backend=backend)
    gk.launch(covar_kernel, m, symmat, data, m, n, backend=backend)


# ---- Parboil sgemm (parboil benchmarks/sgemm/src/cuda/sgemm_kernel.cu: mysgemmNT), column-major C = alpha A B^T
# + beta C: a thread owns row m of a strip of TB columns, its TB sums in a register array; B read directly where
# the CUDA stages it in shared memory ------------------------------------------------------------------------------

TB = 4


@gk.kernel
def sgemm_nt(A, lda, B, ldb, C, ldc, k, alpha, beta):
    m, nb = gk.tid()
    c = gk.local((TB,), gk.float64)
    for i in range(TB):
        c[i] = 0.0
    for i in range(0, k, TB):
        for j in range(TB):
            a = A[m + (i + j) * lda]
            for kk in range(TB):
                c[kk] += a * B[nb * TB + kk + (i + j) * ldb]
    t = ldc * nb * TB + m
    for i in range(TB):
        C[t + i * ldc] = C[t + i * ldc] * beta + alpha * c[i]


# ---- Parboil stencil (benchmarks/stencil/src/cuda/kernels.cu: block2D_hybrid_coarsen_x, without its shared
# tile): a thread per interior (i, j) marches up z, the column's bottom, current and top rolled in registers ------


@gk.kernel
def stencil7_z(c0, c1, A0, Anext, nx, ny, nz):
    jj, ii = gk.tid()
    i = ii + 1
    j = jj + 1
    bottom = A0[i + nx * (j + ny * 0)]
    current = A0[i + nx * (j + ny * 1)]
    for k in range(1, nz - 1):
        top = A0[i + nx * (j + ny * (k + 1))]
        Anext[i + nx * (j + ny * k)] = (top + bottom + A0[i + nx * (j + 1 + ny * k)] + A0[i + nx * (j - 1 + ny * k)]
                                        + A0[i + 1 + nx * (j + ny * k)] + A0[i - 1 + nx * (j + ny * k)]) * c1 \
            - current * c0
        bottom = current
        current = top


# ---- Parboil mri-fhd (benchmarks/mri-fhd/src/cuda/computeFH.cu: ComputeRhoPhiGPU, ComputeFH_GPU): rho*phi per
# k-space sample, then each voxel's sum of the samples' phases; two launches --------------------------------------

PI2 = 6.2831853071795864769252867665590058


@gk.kernel
def rho_phi(num_k, phi_r, phi_i, d_r, d_i, real_rho_phi, imag_rho_phi):
    k = gk.tid()
    if k < num_k:
        real_rho_phi[k] = phi_r[k] * d_r[k] + phi_i[k] * d_i[k]
        imag_rho_phi[k] = phi_r[k] * d_i[k] - phi_i[k] * d_r[k]


@gk.kernel
def compute_fh(num_k, kx, ky, kz, x, y, z, real_rho_phi, imag_rho_phi, out_r, out_i):
    v = gk.tid()
    r_fhd = out_r[v]
    i_fhd = out_i[v]
    for k in range(num_k):
        exp_arg = PI2 * (kx[k] * x[v] + ky[k] * y[v] + kz[k] * z[v])
        cos_arg = math.cos(exp_arg)
        sin_arg = math.sin(exp_arg)
        r_fhd += real_rho_phi[k] * cos_arg - imag_rho_phi[k] * sin_arg
        i_fhd += imag_rho_phi[k] * cos_arg + real_rho_phi[k] * sin_arg
    out_r[v] = r_fhd
    out_i[v] = i_fhd


def mri_fhd(num_k, phi_r, phi_i, d_r, d_i, kx, ky, kz, x, y, z, real_rho_phi, imag_rho_phi, out_r, out_i,
            backend=None):
    gk.launch(rho_phi, num_k + 3, num_k, phi_r, phi_i, d_r, d_i, real_rho_phi, imag_rho_phi, backend=backend)
    gk.launch(compute_fh, x.shape[0], num_k, kx, ky, kz, x, y, z, real_rho_phi, imag_rho_phi, out_r, out_i,
              backend=backend)


# ---- SHOC reduction (vetter/shoc src/cuda/level1/reduction/reduction_kernel.h: reduce): each thread of block b
# starts at b * 2 * block_size + tid, adds two elements a step and strides by the grid; its partial kept and
# added to the total by one atomic (the kernel's shared-memory tree left out) -------------------------------------


@gk.kernel
def shoc_reduce(g_idata, partial, total, n, block_size):
    b, tid = gk.tid()
    grid_size = block_size * 2 * partial.shape[0]
    i = b * (block_size * 2) + tid
    s = 0.0
    while i < n:
        s += g_idata[i] + g_idata[i + block_size]
        i += grid_size
    partial[b, tid] = s
    gk.atomic_add(total, 0, s)


# ---- SHOC S3D (vetter/shoc src/cuda/level1/s3d/ gr_base / ratt_kernel, rdsmh_kernel): Arrhenius forward rates
# exp(A + b log T - E / T), the species' Gibbs terms from a NASA-like polynomial in T and log T, reverse rates
# through the equilibrium constant with pfac^dn (dn an integer) ------------------------------------------------

NSP = 4
NR = 3
RXN = ((0, 1, 2, 3), (1, 2, 0, 3), (0, 3, 1, 1))  # a + b <-> c + d
DN = (0, 1, -1)


@gk.kernel
def s3d_rates(T, arr_a, arr_b, arr_e, nasa, rf, rb, smh, patm, rgas):
    i = gk.tid()
    tk = T[i]
    alogt = math.log(tk)
    ti = 1.0 / tk
    tk2 = tk * tk
    for s in range(NSP):
        smh[i, s] = (nasa[s, 0] * (alogt - 1.0) + nasa[s, 1] * tk / 2.0 + nasa[s, 2] * tk2 / 6.0
                     - nasa[s, 3] * ti + nasa[s, 4])
    pfac = patm / (rgas * tk)
    for r in range(NR):
        rf[i, r] = math.exp(arr_a[r] + arr_b[r] * alogt - arr_e[r] * ti)
        sa, sb, sc, sd = RXN[r]
        eqk = math.exp(smh[i, sa] + smh[i, sb] - smh[i, sc] - smh[i, sd]) * math.pow(pfac, DN[r])
        rb[i, r] = rf[i, r] / max(eqk, 1e-200)


# ---- Parboil cutcp (benchmarks/cutcp/src/cuda/cutoff6overlap.cu: cuda_cutoff_potential_lattice6overlap, the
# bins replaced by one atom list): each lattice point sums q / r (1 - r^2 / c^2)^2 over atoms inside the cutoff --


@gk.kernel
def cutcp_lattice(atoms, lattice, natoms, h, cutoff2, inv_cutoff2):
    i, j, k = gk.tid()
    px = i * h
    py = j * h
    pz = k * h
    e = 0.0
    for a in range(natoms):
        dx = atoms[a, 0] - px
        dy = atoms[a, 1] - py
        dz = atoms[a, 2] - pz
        r2 = dx * dx + dy * dy + dz * dz
        if r2 < cutoff2:
            s = 1.0 - r2 * inv_cutoff2
            e += atoms[a, 3] * (1.0 / math.sqrt(r2)) * s * s
    lattice[i, j, k] += e
