"""Session 55's eighth round of ported kernels, part one: Rodinia's 2-D hotspot (neighbours clamped at the grid's
edges by ternaries), SHOC's Stencil2D (a nine-point stencil ping-ponged by the host), the CUDA samples'
fastWalshTransform (radix-4 butterflies in place, the indices built by `&` and `<<` from a run-time stride), FDTD3d
(a radius-4 star stencil on a flat padded volume, the radius a loop bound) and boxFilter (a running sum along each
row, one thread a row, four loops whose bounds are the radius), GPU Gems 3's work-efficient (Blelloch) scan (the
up-sweep and down-sweep in place, a launch per level), LULESH's CalcMonotonicQGradientsForElems (eight nodes gathered
into `gk.local` arrays through the element's node list) and CalcMonotonicQRegionForElems (limiters chosen by
boundary-condition bit masks, neighbours through index arrays, the elements through the region's list), and llm.c's
encoder forward and backward (a token's row gathered; the backward's atomics into rows chosen by the tokens).
Written here from the algorithms of the files cited; used by tests/library/test_ported_hpc8.py (inputs in
ported_hpc8_cases.py, NumPy references in ported_hpc8_refs.py)."""

import math

import gradkern as gk

# ---- Rodinia hotspot (yuhc/gpu-rodinia cuda/hotspot/hotspot.cu: calculate_temp, one step; the pyramid's shared-
# memory tiles left out): each cell's neighbours clamped at the grid's edges, as the kernel's validYmin/validYmax do


@gk.kernel
def hotspot_step(power, temp_src, temp_dst, grid_cols, grid_rows, cap, rx, ry, rz, step):
    r, c = gk.tid()
    amb_temp = 80.0
    step_div_cap = step / cap
    rx_1 = 1.0 / rx
    ry_1 = 1.0 / ry
    rz_1 = 1.0 / rz
    n = r if r == 0 else r - 1
    s = r if r == grid_rows - 1 else r + 1
    w = c if c == 0 else c - 1
    e = c if c == grid_cols - 1 else c + 1
    index = grid_cols * r + c
    t = temp_src[index]
    temp_dst[index] = t + step_div_cap * (power[index]
                                          + (temp_src[grid_cols * s + c] + temp_src[grid_cols * n + c] - 2.0 * t)
                                          * ry_1
                                          + (temp_src[grid_cols * r + e] + temp_src[grid_cols * r + w] - 2.0 * t)
                                          * rx_1
                                          + (amb_temp - t) * rz_1)


# ---- SHOC Stencil2D (vetter/shoc src/cuda/level1/stencil2d/CUDAStencilKernel.cu and SerialStencil.cpp): the
# interior of a matrix with a one-cell halo, centre, cardinal and diagonal weights; iterations ping-ponged ------


@gk.kernel
def shoc_stencil2d(data, new_data, w_center, w_cardinal, w_diagonal):
    i, j = gk.tid()
    i += 1
    j += 1
    new_data[i, j] = (w_center * data[i, j]
                      + w_cardinal * (data[i - 1, j] + data[i + 1, j] + data[i, j - 1] + data[i, j + 1])
                      + w_diagonal * (data[i - 1, j - 1] + data[i - 1, j + 1] + data[i + 1, j - 1]
                                      + data[i + 1, j + 1]))


def stencil2d(data, new_data, w_center, w_cardinal, w_diagonal, iters, backend=None):
    """`iters` passes (even: the last writes `data`), as SHOC's host loop swaps the two matrices."""
    rows, cols = data.shape
    a, b = data, new_data
    for _ in range(iters):
        gk.launch(shoc_stencil2d, (rows - 2, cols - 2), a, b, w_center, w_cardinal, w_diagonal, backend=backend)
        a, b = b, a


# ---- CUDA samples fastWalshTransform (NVIDIA/cuda-samples Samples/5_Domain_Specific/fastWalshTransform/
# fastWalshTransform_kernel.cuh: fwtBatch2Kernel, called by fwtBatchGPU with d_Output == d_Input): radix-4
# butterflies in place, the four indices from `pos & (stride - 1)` and a shift; the host divides N by 4 and
# multiplies the batch count M by 4 per launch (the last levels, fwtBatch1Kernel's shared-memory radix-2 passes,
# are here the same radix-4 launches: N a power of 4) -------------------------------------------------------------


@gk.kernel
def fwt_batch2(d_output, d_input, n, stride):
    b, pos = gk.tid()
    base = b * n
    lo = pos & (stride - 1)
    i0 = ((pos - lo) << 2) + lo
    i1 = i0 + stride
    i2 = i1 + stride
    i3 = i2 + stride
    d0 = d_input[base + i0]
    d1 = d_input[base + i1]
    d2 = d_input[base + i2]
    d3 = d_input[base + i3]
    t = d0
    d0 = d0 + d2
    d2 = t - d2
    t = d1
    d1 = d1 + d3
    d3 = t - d3
    t = d0
    d_output[base + i0] = d0 + d1
    d_output[base + i1] = t - d1
    t = d2
    d_output[base + i2] = d2 + d3
    d_output[base + i3] = t - d3


def fwt(d_data, log2n, backend=None):
    """The Walsh-Hadamard transform of `d_data` (length 4**k) in place, as fwtBatchGPU loops."""
    n, m = 1 << log2n, 1
    while n >= 4:
        gk.launch(fwt_batch2, (m, n // 4), d_data, d_data, n, n // 4, backend=backend)
        n >>= 2
        m <<= 2


# ---- CUDA samples FDTD3d (NVIDIA/cuda-samples Samples/5_Domain_Specific/FDTD3d/src/FDTD3dReference.cpp:
# generateFDTDReference; FDTD3dGPUKernel.cuh): coeff[0] at the centre, coeff[r] times the six points at distance
# r along the axes, r = 1 .. radius, on a flat volume padded by `radius` ----------------------------------------


@gk.kernel
def fdtd3d_step(output, input, coeff, dimx, dimy, radius):
    z, y, x = gk.tid()
    stride_y = dimx + 2 * radius
    stride_z = stride_y * (dimy + 2 * radius)
    i = (z + radius) * stride_z + (y + radius) * stride_y + x + radius
    value = coeff[0] * input[i]
    for ir in range(1, radius + 1):
        value += coeff[ir] * (input[i + ir] + input[i - ir] + input[i + ir * stride_y] + input[i - ir * stride_y]
                              + input[i + ir * stride_z] + input[i - ir * stride_z])
    output[i] = value


# ---- CUDA samples boxFilter (NVIDIA/cuda-samples Samples/2_Concepts_and_Techniques/boxFilter/
# boxFilter_kernel.cu: d_boxfilter_x_global -> d_boxfilter_x): a running sum along each row, the row's first and
# last pixels repeated past its ends, one thread a row ---------------------------------------------------------


@gk.kernel
def box_filter_x(id, od, w, h, r):
    y = gk.tid()
    row = y * w
    scale = 1.0 / ((r << 1) + 1)
    t = id[row] * r
    for x in range(r + 1):
        t += id[row + x]
    od[row] = t * scale
    for x in range(1, r + 1):
        t += id[row + x + r]
        t -= id[row]
        od[row + x] = t * scale
    for x in range(r + 1, w - r):
        t += id[row + x + r]
        t -= id[row + x - r - 1]
        od[row + x] = t * scale
    for x in range(w - r, w):
        t += id[row + w - 1]
        t -= id[row + x - r - 1]
        od[row + x] = t * scale


# ---- GPU Gems 3 ch. 39 (Harris, Sengupta, Owens, "Parallel Prefix Sum (Scan) with CUDA", Example 39-2: prescan),
# in global memory, a launch per level of the tree: the up-sweep's `temp[bi] += temp[ai]`, the last element
# cleared, the down-sweep's swap-and-add, all in place at a run-time offset --------------------------------------


@gk.kernel
def scan_up_sweep(temp, offset):
    thid = gk.tid()
    ai = offset * (2 * thid + 1) - 1
    bi = offset * (2 * thid + 2) - 1
    temp[bi] += temp[ai]


@gk.kernel
def scan_clear_last(temp, n):
    temp[n - 1] = 0.0


@gk.kernel
def scan_down_sweep(temp, offset):
    thid = gk.tid()
    ai = offset * (2 * thid + 1) - 1
    bi = offset * (2 * thid + 2) - 1
    t = temp[ai]
    temp[ai] = temp[bi]
    temp[bi] += t


def blelloch_scan(temp, backend=None):
    """The exclusive prefix sum of `temp` (length a power of two) in place."""
    n = temp.shape[0]
    offset = 1
    d = n >> 1
    while d > 0:
        gk.launch(scan_up_sweep, d, temp, offset, backend=backend)
        offset *= 2
        d >>= 1
    gk.launch(scan_clear_last, 1, temp, n, backend=backend)
    d = 1
    while d < n:
        offset >>= 1
        gk.launch(scan_down_sweep, d, temp, offset, backend=backend)
        d *= 2


# ---- LULESH 2.0 CalcMonotonicQGradientsForElems (LLNL/LULESH lulesh.cc): the element's eight nodes gathered
# through its node list (CollectDomainNodesToElemNodes), the three logical directions' position and velocity
# differences, each pair's cross product giving a characteristic length and a velocity gradient -------------------


@gk.func
def sum4(a, b, c, d):
    return a + b + c + d


@gk.kernel
def monotonic_q_gradients(x, y, z, xd, yd, zd, volo, vnew, nodelist, delx_zeta, delv_zeta, delx_xi, delv_xi,
                          delx_eta, delv_eta):
    i = gk.tid()
    ptiny = 1.e-36
    px = gk.local(8)
    py = gk.local(8)
    pz = gk.local(8)
    xv = gk.local(8)
    yv = gk.local(8)
    zv = gk.local(8)
    for k in range(8):
        node = nodelist[i * 8 + k]
        px[k] = x[node]
        py[k] = y[node]
        pz[k] = z[node]
        xv[k] = xd[node]
        yv[k] = yd[node]
        zv[k] = zd[node]
    vol = volo[i] * vnew[i]
    norm = 1.0 / (vol + ptiny)
    dxj = -0.25 * (sum4(px[0], px[1], px[5], px[4]) - sum4(px[3], px[2], px[6], px[7]))
    dyj = -0.25 * (sum4(py[0], py[1], py[5], py[4]) - sum4(py[3], py[2], py[6], py[7]))
    dzj = -0.25 * (sum4(pz[0], pz[1], pz[5], pz[4]) - sum4(pz[3], pz[2], pz[6], pz[7]))
    dxi = 0.25 * (sum4(px[1], px[2], px[6], px[5]) - sum4(px[0], px[3], px[7], px[4]))
    dyi = 0.25 * (sum4(py[1], py[2], py[6], py[5]) - sum4(py[0], py[3], py[7], py[4]))
    dzi = 0.25 * (sum4(pz[1], pz[2], pz[6], pz[5]) - sum4(pz[0], pz[3], pz[7], pz[4]))
    dxk = 0.25 * (sum4(px[4], px[5], px[6], px[7]) - sum4(px[0], px[1], px[2], px[3]))
    dyk = 0.25 * (sum4(py[4], py[5], py[6], py[7]) - sum4(py[0], py[1], py[2], py[3]))
    dzk = 0.25 * (sum4(pz[4], pz[5], pz[6], pz[7]) - sum4(pz[0], pz[1], pz[2], pz[3]))
    # zeta: i cross j
    ax = dyi * dzj - dzi * dyj
    ay = dzi * dxj - dxi * dzj
    az = dxi * dyj - dyi * dxj
    delx_zeta[i] = vol / math.sqrt(ax * ax + ay * ay + az * az + ptiny)
    ax *= norm
    ay *= norm
    az *= norm
    dxv = 0.25 * (sum4(xv[4], xv[5], xv[6], xv[7]) - sum4(xv[0], xv[1], xv[2], xv[3]))
    dyv = 0.25 * (sum4(yv[4], yv[5], yv[6], yv[7]) - sum4(yv[0], yv[1], yv[2], yv[3]))
    dzv = 0.25 * (sum4(zv[4], zv[5], zv[6], zv[7]) - sum4(zv[0], zv[1], zv[2], zv[3]))
    delv_zeta[i] = ax * dxv + ay * dyv + az * dzv
    # xi: j cross k
    ax = dyj * dzk - dzj * dyk
    ay = dzj * dxk - dxj * dzk
    az = dxj * dyk - dyj * dxk
    delx_xi[i] = vol / math.sqrt(ax * ax + ay * ay + az * az + ptiny)
    ax *= norm
    ay *= norm
    az *= norm
    dxv = 0.25 * (sum4(xv[1], xv[2], xv[6], xv[5]) - sum4(xv[0], xv[3], xv[7], xv[4]))
    dyv = 0.25 * (sum4(yv[1], yv[2], yv[6], yv[5]) - sum4(yv[0], yv[3], yv[7], yv[4]))
    dzv = 0.25 * (sum4(zv[1], zv[2], zv[6], zv[5]) - sum4(zv[0], zv[3], zv[7], zv[4]))
    delv_xi[i] = ax * dxv + ay * dyv + az * dzv
    # eta: k cross i
    ax = dyk * dzi - dzk * dyi
    ay = dzk * dxi - dxk * dzi
    az = dxk * dyi - dyk * dxi
    delx_eta[i] = vol / math.sqrt(ax * ax + ay * ay + az * az + ptiny)
    ax *= norm
    ay *= norm
    az *= norm
    dxv = -0.25 * (sum4(xv[0], xv[1], xv[5], xv[4]) - sum4(xv[3], xv[2], xv[6], xv[7]))
    dyv = -0.25 * (sum4(yv[0], yv[1], yv[5], yv[4]) - sum4(yv[3], yv[2], yv[6], yv[7]))
    dzv = -0.25 * (sum4(zv[0], zv[1], zv[5], zv[4]) - sum4(zv[3], zv[2], zv[6], zv[7]))
    delv_eta[i] = ax * dxv + ay * dyv + az * dzv


# ---- LULESH 2.0 CalcMonotonicQRegionForElems (LLNL/LULESH lulesh.cc; the masks of lulesh.h): a region's elements
# listed by index, each direction's limiter from its two neighbours' velocity gradients, chosen by the element's
# boundary-condition bits (a neighbour across a COMM face or none, the element itself across a SYMM face, zero
# across a FREE face: the source's `switch (bcMask & XI_M)`), the linear and quadratic q terms where compressing ---

XI_M, XI_M_SYMM, XI_M_FREE = 0x00007, 0x00001, 0x00002
XI_P, XI_P_SYMM, XI_P_FREE = 0x00038, 0x00008, 0x00010
ETA_M, ETA_M_SYMM, ETA_M_FREE = 0x001c0, 0x00040, 0x00080
ETA_P, ETA_P_SYMM, ETA_P_FREE = 0x00e00, 0x00200, 0x00400
ZETA_M, ZETA_M_SYMM, ZETA_M_FREE = 0x07000, 0x01000, 0x02000
ZETA_P, ZETA_P_SYMM, ZETA_P_FREE = 0x38000, 0x08000, 0x10000


@gk.func
def monoq_face(delv, ielem, neighbour, case, symm, free):
    """The gradient across one face: `case` is bcMask & the face's bits (0 or COMM: the neighbour's)."""
    if case == symm:
        return delv[ielem]
    if case == free:
        return 0.0
    return delv[neighbour]


@gk.func
def monoq_phi(delv, ielem, lm, lp, bc_mask, m_bits, m_symm, m_free, p_bits, p_symm, p_free, ptiny, limiter_mult,
              max_slope):
    norm = 1.0 / (delv[ielem] + ptiny)
    delvm = monoq_face(delv, ielem, lm[ielem], bc_mask & m_bits, m_symm, m_free) * norm
    delvp = monoq_face(delv, ielem, lp[ielem], bc_mask & p_bits, p_symm, p_free) * norm
    phi = 0.5 * (delvm + delvp)
    delvm *= limiter_mult
    delvp *= limiter_mult
    if delvm < phi:
        phi = delvm
    if delvp < phi:
        phi = delvp
    if phi < 0.0:
        phi = 0.0
    if phi > max_slope:
        phi = max_slope
    return phi


@gk.kernel
def monotonic_q_region(reg_elem_list, elem_bc, lxim, lxip, letam, letap, lzetam, lzetap, delv_xi, delv_eta,
                       delv_zeta, delx_xi, delx_eta, delx_zeta, vdov, elem_mass, volo, vnew, qq, ql,
                       monoq_limiter_mult, monoq_max_slope, qlc_monoq, qqc_monoq, ptiny):
    i = gk.tid()
    ielem = reg_elem_list[i]
    bc_mask = elem_bc[ielem]
    phixi = monoq_phi(delv_xi, ielem, lxim, lxip, bc_mask, XI_M, XI_M_SYMM, XI_M_FREE, XI_P, XI_P_SYMM,
                      XI_P_FREE, ptiny, monoq_limiter_mult, monoq_max_slope)
    phieta = monoq_phi(delv_eta, ielem, letam, letap, bc_mask, ETA_M, ETA_M_SYMM, ETA_M_FREE, ETA_P, ETA_P_SYMM,
                       ETA_P_FREE, ptiny, monoq_limiter_mult, monoq_max_slope)
    phizeta = monoq_phi(delv_zeta, ielem, lzetam, lzetap, bc_mask, ZETA_M, ZETA_M_SYMM, ZETA_M_FREE, ZETA_P,
                        ZETA_P_SYMM, ZETA_P_FREE, ptiny, monoq_limiter_mult, monoq_max_slope)
    if vdov[ielem] > 0.0:
        qlin = 0.0
        qquad = 0.0
    else:
        delvxxi = delv_xi[ielem] * delx_xi[ielem]
        delvxeta = delv_eta[ielem] * delx_eta[ielem]
        delvxzeta = delv_zeta[ielem] * delx_zeta[ielem]
        if delvxxi > 0.0:
            delvxxi = 0.0
        if delvxeta > 0.0:
            delvxeta = 0.0
        if delvxzeta > 0.0:
            delvxzeta = 0.0
        rho = elem_mass[ielem] / (volo[ielem] * vnew[ielem])
        qlin = -qlc_monoq * rho * (delvxxi * (1.0 - phixi) + delvxeta * (1.0 - phieta)
                                   + delvxzeta * (1.0 - phizeta))
        qquad = qqc_monoq * rho * (delvxxi * delvxxi * (1.0 - phixi * phixi)
                                   + delvxeta * delvxeta * (1.0 - phieta * phieta)
                                   + delvxzeta * delvxzeta * (1.0 - phizeta * phizeta))
    qq[ielem] = qquad
    ql[ielem] = qlin


# ---- llm.c encoder (karpathy/llm.c train_gpt2.cu: encoder_forward_kernel2, encoder_backward_kernel): a thread per
# (b, t, c) flattened; the forward gathers the token's row of wte and the position's row of wpe, the backward adds
# dout into both by atomics (two threads' tokens may be the same) ------------------------------------------------


@gk.kernel
def encoder_forward(out, inp, wte, wpe, B, T, C):
    idx = gk.tid()
    if idx >= B * T * C:
        return
    bt = idx // C
    t = bt % T
    c = idx % C
    ix = inp[bt]
    out[idx] = wte[ix * C + c] + wpe[t * C + c]


@gk.kernel
def encoder_backward(dwte, dwpe, dout, inp, B, T, C):
    idx = gk.tid()
    if idx >= B * T * C:
        return
    bt = idx // C
    t = bt % T
    c = idx % C
    ix = inp[bt]
    gk.atomic_add(dwte, ix * C + c, dout[idx])
    gk.atomic_add(dwpe, t * C + c, dout[idx])
