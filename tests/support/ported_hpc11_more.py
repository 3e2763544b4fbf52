"""Session 58's eleventh round of ported kernels, part two: lookups and integer-driven codes. torch_scatter's CSR
segment max (a thread per (row, feature) through `//` and `%`, an early return, the arg-max as an int output),
Rodinia's B+ tree findK (the block's threads as a loop, node indices chased level by level), the CUDA samples'
Monte Carlo option pricing on Moro's inverse normal of evenly spaced 32-bit integers (unsigned arithmetic in
int64, the reflection `0xffffffff - x`), Quantum ESPRESSO's Slater exchange and Perdew-Zunger correlation (`rs`
through np.cbrt, the branch at rs = 1, a density threshold), the NERSC su3_bench matrix product (a thread per
(site, link, row, column), complex numbers in pairs) and PolyBench/GPU's jacobi-2d (two kernels a time step, a
program). Written here from the algorithms of the files cited; used by tests/library/test_ported_hpc11.py."""

import math

import numpy as np

import gradkern as gk

# ---- torch_scatter (rusty1s/pytorch_scatter csrc/cuda/segment_csr_cuda.cu: segment_csr_broadcast_kernel with
# Reducer<MAX>; csrc/cuda/reducer.cuh: init lowest(), update `if new_val > *val`, write 0 for an empty segment;
# arg_out filled with E by the caller) ------------------------------------------------------------------------


@gk.kernel
def segment_csr_max(src, indptr, out, arg_out, n_rows, k):
    thread_idx = gk.tid()
    row_idx = thread_idx // k
    lane_idx = thread_idx % k
    if thread_idx >= n_rows * k:
        return
    row_start = indptr[row_idx]
    row_end = indptr[row_idx + 1]
    val = float("-inf")
    arg = 0
    for src_idx in range(row_start, row_end):
        new_val = src[k * src_idx + lane_idx]
        if new_val > val:
            val = new_val
            arg = src_idx
    if row_end - row_start > 0:
        out[thread_idx] = val
        arg_out[thread_idx] = arg
    else:
        out[thread_idx] = 0.0


# ---- Rodinia B+ tree (rodinia_3.0 cuda/b+tree/kernel/kernel_gpu_cuda.cu: findK): a block per query, its
# threads a loop over a node's keys (the barriers between the levels' two phases hold within one thread);
# currKnode and offset are the source's global int arrays, written and read back by the query's thread; a node's
# keys has order + 1 slots, the unused ones a large sentinel -----------------------------------------------------


@gk.kernel
def btree_find_k(height, keys, indices, knodes_elem, records, curr_knode, offset, query, ans, order):
    bid = gk.tid()
    for _ in range(height):
        for thid in range(order):
            if keys[curr_knode[bid], thid] <= query[bid] and keys[curr_knode[bid], thid + 1] > query[bid]:
                if indices[offset[bid], thid] < knodes_elem:
                    offset[bid] = indices[offset[bid], thid]
        curr_knode[bid] = offset[bid]
    for thid in range(order):
        if keys[curr_knode[bid], thid] == query[bid]:
            ans[bid] = records[indices[curr_knode[bid], thid]]


# ---- CUDA samples Monte Carlo (NVIDIA cuda-samples Samples/5_Domain_Specific/quasirandomGenerator/
# quasirandomGenerator_kernel.cuh: MoroInvCNDgpu, inverseCNDKernel's `(pos + 1) * distance`; MonteCarloMultiGPU/
# MonteCarlo_kernel.cu: endCallValue, the discounted mean): a thread per (option, path), the paths' sums by
# atomics; opt rows are (S, X, T, R, V) -----------------------------------------------------------------------

A1, A2, A3, A4 = 2.50662823884, -18.61500062529, 41.39119773534, -25.44106049637
B1, B2, B3, B4 = -8.4735109309, 23.08336743743, -21.06224101826, 3.13082909833
C1, C2, C3, C4, C5 = 0.337475482272615, 0.976169019091719, 0.160797971491821, 2.76438810333863e-02, 3.8405729373609e-03
C6, C7, C8, C9 = 3.951896511919e-04, 3.21767881768e-05, 2.888167364e-07, 3.960315187e-07


@gk.func
def moro_inv_cnd(x):
    negate = False
    if x >= 0x80000000:
        x = 0xFFFFFFFF - x
        negate = True
    x1 = 1.0 / 4294967295.0
    x2 = x1 / 2.0
    p1 = x * x1 + x2
    p2 = p1 - 0.5
    z = 0.0
    if p2 > -0.42:
        z = p2 * p2
        z = p2 * (((A4 * z + A3) * z + A2) * z + A1) / ((((B4 * z + B3) * z + B2) * z + B1) * z + 1.0)
    else:
        z = math.log(-math.log(p1))
        z = -(C1 + z * (C2 + z * (C3 + z * (C4 + z * (C5 + z * (C6 + z * (C7 + z * (C8 + z * C9))))))))
    return -z if negate else z


@gk.kernel
def mc_call(opt, path_n, price):
    o, pos = gk.tid()
    distance = 0xFFFFFFFF // (path_n + 1)
    d = (pos + 1) * distance
    r = moro_inv_cnd(d)
    s = opt[o, 0]
    strike = opt[o, 1]
    t = opt[o, 2]
    rate = opt[o, 3]
    v = opt[o, 4]
    mu_by_t = (rate - 0.5 * v * v) * t
    v_by_sqrt_t = v * math.sqrt(t)
    call = max(s * math.exp(mu_by_t + v_by_sqrt_t * r) - strike, 0.0)
    gk.atomic_add(price, o, math.exp(-rate * t) * call / path_n)


# ---- Quantum ESPRESSO LDA (QEF/q-e XClib/qe_funct_exch_lda_lsda.f90: slater; qe_funct_corr_lda_lsda.f90: pz,
# the Perdew-Zunger parametrisation; qe_drivers_lda_lsda.f90: xc_lda, rs = pi34 / rho^(1/3) above rho_threshold):
# per grid point the exchange-correlation energy per particle and potential ------------------------------------

PI34 = 0.6203504908994
F_SLATER = -0.687247939924714
ALPHA = 2.0 / 3.0
PZ_A, PZ_B, PZ_C, PZ_D = 0.0311, -0.048, 0.0020, -0.0116
PZ_GC, PZ_B1, PZ_B2 = -0.1423, 1.0529, 0.3334
RHO_THRESHOLD = 1.0e-10


@gk.kernel
def xc_lda_pz(rho, ex, ec, vx, vc):
    ir = gk.tid()
    rhoa = abs(rho[ir])
    if rhoa > RHO_THRESHOLD:
        rs = PI34 / np.cbrt(rhoa)
        ex[ir] = F_SLATER * ALPHA / rs
        vx[ir] = 4.0 / 3.0 * F_SLATER * ALPHA / rs
        if rs < 1.0:
            lnrs = math.log(rs)
            ec[ir] = PZ_A * lnrs + PZ_B + PZ_C * rs * lnrs + PZ_D * rs
            vc[ir] = (PZ_A * lnrs + (PZ_B - PZ_A / 3.0) + 2.0 / 3.0 * PZ_C * rs * lnrs
                      + (2.0 * PZ_D - PZ_C) / 3.0 * rs)
        else:
            rs12 = math.sqrt(rs)
            ox = 1.0 + PZ_B1 * rs12 + PZ_B2 * rs
            dox = 1.0 + 7.0 / 6.0 * PZ_B1 * rs12 + 4.0 / 3.0 * PZ_B2 * rs
            ec[ir] = PZ_GC / ox
            vc[ir] = ec[ir] * dox / ox
    else:
        ex[ir] = 0.0
        ec[ir] = 0.0
        vx[ir] = 0.0
        vc[ir] = 0.0


# ---- NERSC su3_bench (CUDA version, mat_nn.cu: k_mat_nn): C[site].link[j] = A[site].link[j] * B[j], a thread per
# element, `mySite = myThread / 36`, the launch rounded up to whole blocks and the extra threads idle -------------


@gk.kernel
def su3_mat_nn(a, b, c, total_sites):
    my_thread = gk.tid()
    my_site = my_thread // 36
    if my_site < total_sites:
        j = (my_thread % 36) // 9
        k = (my_thread % 9) // 3
        m = my_thread % 3
        cr = 0.0
        ci = 0.0
        for n in range(3):
            cr += a[my_site, j, k, n, 0] * b[j, n, m, 0] - a[my_site, j, k, n, 1] * b[j, n, m, 1]
            ci += a[my_site, j, k, n, 0] * b[j, n, m, 1] + a[my_site, j, k, n, 1] * b[j, n, m, 0]
        c[my_site, j, k, m, 0] = cr
        c[my_site, j, k, m, 1] = ci


# ---- PolyBench/GPU (sgrauerg/polybenchGpu CUDA/JACOBI2D/jacobi2D.cu: runJacobi2D_kernel1, runJacobi2D_kernel2):
# interior points only, a thread per point, the copy back a second kernel ---------------------------------------


@gk.kernel
def jacobi2d_kernel1(a, b, n):
    i, j = gk.tid()
    if i >= 1 and i < n - 1 and j >= 1 and j < n - 1:
        b[i, j] = 0.2 * (a[i, j] + a[i, j - 1] + a[i, j + 1] + a[i + 1, j] + a[i - 1, j])


@gk.kernel
def jacobi2d_kernel2(a, b, n):
    i, j = gk.tid()
    if i >= 1 and i < n - 1 and j >= 1 and j < n - 1:
        a[i, j] = b[i, j]


def jacobi2d(a, b, n, tsteps, backend=None):
    """jacobi2DCuda's time loop: the two kernels each step, on an n x n grid."""
    for _ in range(tsteps):
        gk.launch(jacobi2d_kernel1, (n, n), a, b, n, backend=backend)
        gk.launch(jacobi2d_kernel2, (n, n), a, b, n, backend=backend)
