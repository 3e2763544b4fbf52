"""Session 56's ninth round of ported kernels, part one: RWKV-4's WKV forward (a state carried through the sequence,
rescaled by a running maximum), torchvision's RoIAlign forward (bilinear samples at coordinates made from the
regions, `int()` of active values, clamps by reassignment inside a device function), Rodinia's backprop weight
update (two arrays updated in place, the bias row by the threads of block 0), Rodinia's blocked LU (lud_diagonal,
lud_perimeter and lud_internal in place, the barriers of the diagonal block as launch boundaries), OpenMM's Ewald
reciprocal sum (grid-stride `while` loops, loop bounds reassigned inside the loops, complex products returned in
pairs by a device function) and Parboil's JDS SpMV (software-pipelined prefetches carried through a run-time loop,
the result written through the row permutation). Written here from the algorithms of the files cited; used by
tests/library/test_ported_hpc9.py (inputs in ported_hpc9_cases.py, NumPy references in ported_hpc9_refs.py)."""

import math

import gradkern as gk

# ---- RWKV-4 WKV forward (BlinkDL/RWKV-LM RWKV-v4/cuda/wkv_cuda.cu: kernel_forward): a thread per (batch,
# channel), p and q the running sums divided by exp(o), o the running maximum; w is -exp(time_decay) -------------

MIN_VALUE = -1e38


@gk.kernel
def wkv_forward(B, T, C, w, u, k, v, y):
    idx = gk.tid()
    _b = idx // C
    _c = idx % C
    _offset = _b * T * C + _c
    uu = u[_c]
    ww = w[_c]
    p = 0.0
    q = 0.0
    o = MIN_VALUE
    for i in range(T):
        ii = _offset + i * C
        no = max(o, uu + k[ii])
        A = math.exp(o - no)
        Bw = math.exp(uu + k[ii] - no)
        y[ii] = (A * p + Bw * v[ii]) / (A * q + Bw)
        no = max(ww + o, k[ii])
        A = math.exp(ww + o - no)
        Bw = math.exp(k[ii] - no)
        p = A * p + Bw * v[ii]
        q = A * q + Bw
        o = no


# ---- torchvision RoIAlign forward (pytorch/vision torchvision/csrc/ops/cuda/roi_align_kernel.cu:
# roi_align_forward_kernel_impl, bilinear_interpolate): a thread per pooled output (n, c, ph, pw) from its flat
# index; the region's corners scaled, the bin sampled on a grid of roi_bin_grid points (the sampling ratio, or
# ceil(roi size / pooled size), the C's `ceil` as -floor(-x)), each sample bilinear with the source's clamps ----


@gk.func
def bilinear_interpolate(input, base, height, width, y, x):
    if not (y >= -1.0 and y <= height and x >= -1.0 and x <= width):
        return 0.0
    if y <= 0:
        y = 0.0
    if x <= 0:
        x = 0.0
    y_low = int(y)
    x_low = int(x)
    if y_low >= height - 1:
        y_high = y_low = height - 1
        y = float(y_low)
    else:
        y_high = y_low + 1
    if x_low >= width - 1:
        x_high = x_low = width - 1
        x = float(x_low)
    else:
        x_high = x_low + 1
    ly = y - y_low
    lx = x - x_low
    hy = 1.0 - ly
    hx = 1.0 - lx
    v1 = input[base + y_low * width + x_low]
    v2 = input[base + y_low * width + x_high]
    v3 = input[base + y_high * width + x_low]
    v4 = input[base + y_high * width + x_high]
    return hy * hx * v1 + hy * lx * v2 + ly * hx * v3 + ly * lx * v4


@gk.kernel
def roi_align_forward(input, spatial_scale, channels, height, width, pooled_height, pooled_width, sampling_ratio,
                      aligned, rois, output):
    index = gk.tid()
    pw = index % pooled_width
    ph = (index // pooled_width) % pooled_height
    c = (index // pooled_width // pooled_height) % channels
    n = index // pooled_width // pooled_height // channels
    roi_batch_ind = int(rois[n * 5])
    offset = 0.5 if aligned else 0.0
    roi_start_w = rois[n * 5 + 1] * spatial_scale - offset
    roi_start_h = rois[n * 5 + 2] * spatial_scale - offset
    roi_end_w = rois[n * 5 + 3] * spatial_scale - offset
    roi_end_h = rois[n * 5 + 4] * spatial_scale - offset
    roi_width = roi_end_w - roi_start_w
    roi_height = roi_end_h - roi_start_h
    if not aligned:
        roi_width = max(roi_width, 1.0)
        roi_height = max(roi_height, 1.0)
    bin_size_h = roi_height / pooled_height
    bin_size_w = roi_width / pooled_width
    base = (roi_batch_ind * channels + c) * height * width
    roi_bin_grid_h = sampling_ratio if sampling_ratio > 0 else int(-math.floor(-roi_height / pooled_height))
    roi_bin_grid_w = sampling_ratio if sampling_ratio > 0 else int(-math.floor(-roi_width / pooled_width))
    count = max(roi_bin_grid_h * roi_bin_grid_w, 1)
    output_val = 0.0
    for iy in range(roi_bin_grid_h):
        y = roi_start_h + ph * bin_size_h + (iy + 0.5) * bin_size_h / roi_bin_grid_h
        for ix in range(roi_bin_grid_w):
            x = roi_start_w + pw * bin_size_w + (ix + 0.5) * bin_size_w / roi_bin_grid_w
            output_val += bilinear_interpolate(input, base, height, width, y, x)
    output_val /= count
    output[index] = output_val


# ---- Rodinia backprop (JuliaParallel/rodinia cuda/backprop/backprop_cuda_kernel.cu: bpnn_adjust_weights_cuda):
# blocks of HEIGHT rows, a thread per (block, row in block, hidden unit); the weight and its previous change
# updated in place with momentum, the bias row (index_x) by the threads of row 0 of block 0 --------------------

ETA = 0.3
MOMENTUM = 0.3
HEIGHT = 2


@gk.kernel
def bpnn_adjust_weights(delta, hid, ly, inp, w, oldw):
    by, ty, tx = gk.tid()
    index = (hid + 1) * HEIGHT * by + (hid + 1) * ty + tx + 1 + (hid + 1)
    index_y = HEIGHT * by + ty + 1
    index_x = tx + 1
    w[index] += ETA * delta[index_x] * ly[index_y] + MOMENTUM * oldw[index]
    oldw[index] = ETA * delta[index_x] * ly[index_y] + MOMENTUM * oldw[index]
    if ty == 0 and by == 0:
        w[index_x] += ETA * delta[index_x] + MOMENTUM * oldw[index_x]
        oldw[index_x] = ETA * delta[index_x] + MOMENTUM * oldw[index_x]


# ---- Rodinia lud (yuhc/gpu-rodinia cuda/lud/cuda/lud_kernel.cu: lud_diagonal, lud_perimeter, lud_internal,
# lud_cuda): blocked Doolittle LU in place on a flat row-major matrix. The diagonal block's threads share a tile
# between `__syncthreads()`: here each barrier ends a launch and the tile is the matrix itself. The perimeter's
# first BLOCK_SIZE threads solve the block row to the right (a column each), the others the block column below
# (a row each); the internal kernel subtracts the product of the two from the trailing blocks -------------------

BLOCK_SIZE = 3


@gk.kernel
def lud_diagonal_col(m, matrix_dim, offset, i):
    tx = gk.tid()
    if tx > i:
        for j in range(i):
            m[(offset + tx) * matrix_dim + offset + i] -= (m[(offset + tx) * matrix_dim + offset + j]
                                                           * m[(offset + j) * matrix_dim + offset + i])
        m[(offset + tx) * matrix_dim + offset + i] /= m[(offset + i) * matrix_dim + offset + i]


@gk.kernel
def lud_diagonal_row(m, matrix_dim, offset, i):
    tx = gk.tid()
    if tx > i:
        for j in range(i + 1):
            m[(offset + i + 1) * matrix_dim + offset + tx] -= (m[(offset + i + 1) * matrix_dim + offset + j]
                                                               * m[(offset + j) * matrix_dim + offset + tx])


def lud_diagonal(m, matrix_dim, offset, backend=None):
    for i in range(BLOCK_SIZE - 1):
        gk.launch(lud_diagonal_col, BLOCK_SIZE, m, matrix_dim, offset, i, backend=backend)
        gk.launch(lud_diagonal_row, BLOCK_SIZE, m, matrix_dim, offset, i, backend=backend)


@gk.kernel
def lud_perimeter(m, matrix_dim, offset):
    bx, tx = gk.tid()
    if tx < BLOCK_SIZE:
        idx = tx
        col = offset + (bx + 1) * BLOCK_SIZE + idx
        for i in range(1, BLOCK_SIZE):
            for j in range(i):
                m[(offset + i) * matrix_dim + col] -= (m[(offset + i) * matrix_dim + offset + j]
                                                       * m[(offset + j) * matrix_dim + col])
    else:
        idx = tx - BLOCK_SIZE
        row = offset + (bx + 1) * BLOCK_SIZE + idx
        for i in range(BLOCK_SIZE):
            for j in range(i):
                m[row * matrix_dim + offset + i] -= (m[row * matrix_dim + offset + j]
                                                     * m[(offset + j) * matrix_dim + offset + i])
            m[row * matrix_dim + offset + i] /= m[(offset + i) * matrix_dim + offset + i]


@gk.kernel
def lud_internal(m, matrix_dim, offset):
    r, c = gk.tid()
    global_row_id = offset + BLOCK_SIZE + r
    global_col_id = offset + BLOCK_SIZE + c
    s = 0.0
    for i in range(BLOCK_SIZE):
        s += m[global_row_id * matrix_dim + offset + i] * m[(offset + i) * matrix_dim + global_col_id]
    m[global_row_id * matrix_dim + global_col_id] -= s


def lud_cuda(m, matrix_dim, backend=None):
    """LU of the flat matrix `m` in place (unit lower triangle below the diagonal), as lud_cuda loops."""
    i = 0
    while i < matrix_dim - BLOCK_SIZE:
        lud_diagonal(m, matrix_dim, i, backend=backend)
        blocks = (matrix_dim - i) // BLOCK_SIZE - 1
        gk.launch(lud_perimeter, (blocks, 2 * BLOCK_SIZE), m, matrix_dim, i, backend=backend)
        gk.launch(lud_internal, (blocks * BLOCK_SIZE, blocks * BLOCK_SIZE), m, matrix_dim, i, backend=backend)
        i += BLOCK_SIZE
    lud_diagonal(m, matrix_dim, i, backend=backend)


# ---- OpenMM Ewald (openmm/openmm platforms/common/src/kernels/ewald.cc: calculateEwaldCosSinSums,
# calculateEwaldForces): the structure factor per wave vector (half of k-space skipped by the first `while`), its
# energy; then each atom's reciprocal force from the sums. Grid-stride `while` loops over a run-time global size;
# the force loop's lower bounds reassigned inside the loops. Forces are added as floats (the source's 32.32
# fixed-point `mm_long` accumulation is a device-memory format, not part of the arithmetic) ---------------------

KMAX_X = 2
KMAX_Y = 2
KMAX_Z = 2
ONE_4PI_EPS0 = 138.935456


@gk.func
def mult_of_real2(ax, ay, bx, by):
    return ax * bx - ay * by, ax * by + ay * bx


@gk.kernel
def ewald_cos_sin_sums(energy_buffer, posq, cos_sin_sum, box_x, box_y, box_z, exp_coefficient, global_size):
    gid = gk.tid()
    ksizex = 2 * KMAX_X - 1
    ksizey = 2 * KMAX_Y - 1
    ksizez = 2 * KMAX_Z - 1
    total_k = ksizex * ksizey * ksizez
    rbx = 2 * math.pi / box_x
    rby = 2 * math.pi / box_y
    rbz = 2 * math.pi / box_z
    reciprocal_coefficient = ONE_4PI_EPS0 * 4 * math.pi / (box_x * box_y * box_z)
    index = gid
    energy = 0.0
    while index < (KMAX_Y - 1) * ksizez + KMAX_Z:
        index += global_size
    while index < total_k:
        rx = index // (ksizey * ksizez)
        remainder = index - rx * ksizey * ksizez
        ry = remainder // ksizez
        rz = remainder - ry * ksizez - KMAX_Z + 1
        ry += -KMAX_Y + 1
        kx = rx * rbx
        ky = ry * rby
        kz = rz * rbz
        sum_x = 0.0
        sum_y = 0.0
        for atom in range(posq.shape[0]):
            phase = posq[atom, 0] * kx
            sf_x = math.cos(phase)
            sf_y = math.sin(phase)
            phase = posq[atom, 1] * ky
            sf_x, sf_y = mult_of_real2(sf_x, sf_y, math.cos(phase), math.sin(phase))
            phase = posq[atom, 2] * kz
            sf_x, sf_y = mult_of_real2(sf_x, sf_y, math.cos(phase), math.sin(phase))
            sum_x += posq[atom, 3] * sf_x
            sum_y += posq[atom, 3] * sf_y
        cos_sin_sum[index, 0] = sum_x
        cos_sin_sum[index, 1] = sum_y
        k2 = kx * kx + ky * ky + kz * kz
        ak = math.exp(k2 * exp_coefficient) / k2
        energy += reciprocal_coefficient * ak * (sum_x * sum_x + sum_y * sum_y)
        index += global_size
    energy_buffer[gid] += energy


@gk.kernel
def ewald_forces(force_buffers, posq, cos_sin_sum, box_x, box_y, box_z, exp_coefficient, global_size):
    atom = gk.tid()
    rbx = 2 * math.pi / box_x
    rby = 2 * math.pi / box_y
    rbz = 2 * math.pi / box_z
    reciprocal_coefficient = ONE_4PI_EPS0 * 4 * math.pi / (box_x * box_y * box_z)
    while atom < posq.shape[0]:
        fx = 0.0
        fy = 0.0
        fz = 0.0
        lowry = 0
        lowrz = 1
        for rx in range(KMAX_X):
            kx = rx * rbx
            for ry in range(lowry, KMAX_Y):
                ky = ry * rby
                phase = posq[atom, 0] * kx
                tab_x = math.cos(phase)
                tab_y = math.sin(phase)
                phase = posq[atom, 1] * ky
                tab_x, tab_y = mult_of_real2(tab_x, tab_y, math.cos(phase), math.sin(phase))
                for rz in range(lowrz, KMAX_Z):
                    kz = rz * rbz
                    index = rx * (KMAX_Y * 2 - 1) * (KMAX_Z * 2 - 1) + (ry + KMAX_Y - 1) * (KMAX_Z * 2 - 1) + (
                        rz + KMAX_Z - 1)
                    k2 = kx * kx + ky * ky + kz * kz
                    ak = math.exp(k2 * exp_coefficient) / k2
                    phase = posq[atom, 2] * kz
                    sf_x, sf_y = mult_of_real2(tab_x, tab_y, math.cos(phase), math.sin(phase))
                    dedr = 2 * reciprocal_coefficient * ak * posq[atom, 3] * (cos_sin_sum[index, 0] * sf_y
                                                                              - cos_sin_sum[index, 1] * sf_x)
                    fx += dedr * kx
                    fy += dedr * ky
                    fz += dedr * kz
                    lowrz = 1 - KMAX_Z
                lowry = 1 - KMAX_Y
        force_buffers[atom, 0] += fx
        force_buffers[atom, 1] += fy
        force_buffers[atom, 2] += fz
        atom += global_size


def ewald(posq, cos_sin_sum, energy_buffer, force_buffers, box_x, box_y, box_z, exp_coefficient, global_size,
          backend=None):
    """The reciprocal-space energy (into energy_buffer, a slot per thread) and forces, as OpenMM launches them."""
    gk.launch(ewald_cos_sin_sums, global_size, energy_buffer, posq, cos_sin_sum, box_x, box_y, box_z,
              exp_coefficient, global_size, backend=backend)
    gk.launch(ewald_forces, global_size, force_buffers, posq, cos_sin_sum, box_x, box_y, box_z, exp_coefficient,
              global_size, backend=backend)


# ---- Parboil spmv (benchmarks/spmv/src/cuda/main.cu: spmv_jds): jagged diagonal storage, rows sorted by length,
# each warp's rows padded to its longest (sh_zcnt_int per warp, `ix >> WARP_BITS`); the loads software-pipelined
# (d, t one diagonal behind the indices), the sum written to the row's place through the permutation. The warp
# is 4 rows here (the source's WARP_BITS 5 matches its host's padding of 32; the test's matrix has 10 rows) ----

WARP_BITS = 2


@gk.kernel
def spmv_jds(dst_vector, d_data, d_index, d_perm, x_vec, dim, jds_ptr_int, sh_zcnt_int):
    ix = gk.tid()
    warp_id = ix >> WARP_BITS
    if ix < dim:
        s = 0.0
        bound = sh_zcnt_int[warp_id]
        j = jds_ptr_int[0] + ix
        d = d_data[j]
        i = d_index[j]
        t = x_vec[i]
        if bound > 1:
            j = jds_ptr_int[1] + ix
            i = d_index[j]
            for k in range(2, bound):
                dn = d_data[j]
                j = jds_ptr_int[k] + ix
                in_ = d_index[j]
                tn = x_vec[i]
                s += d * t
                i = in_
                d = dn
                t = tn
            dn = d_data[j]
            tn = x_vec[i]
            s += d * t
            d = dn
            t = tn
        s += d * t
        dst_vector[d_perm[ix]] = s
