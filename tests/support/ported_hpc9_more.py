"""Session 56's ninth round of ported kernels, part two: a red-black Gauss-Seidel smoother (in place, the colour
chosen by parities), CloverLeaf's PdV (predictor and corrector, an int error flag per cell beside the energy and
density), the CUDA samples' oceanFFT spectrum (a mirrored read, complex products returned in pairs), miniBUDE's
fasten_main (poses per thread in `gk.local` arrays, force-field parameters through atom types, an energy built by
ternaries on distances), RAJAPerf's HALO_PACKING (buffers packed and unpacked through index lists: a write at
an index read from an array) and llm.c's attention backward (a thread per (b, t, h), its own rows of datt and
dpreatt accumulated and read back, the keys' and values' gradients shared between threads by atomics). Written
here from the algorithms of the files cited; used by tests/library/test_ported_hpc9.py."""

import math

import gradkern as gk

# ---- Red-black Gauss-Seidel (ooreilly/cuda-multigrid gauss_seidel.cuh: gauss_seidel_kernel, gauss_seidel_H):
# the 5-point Poisson smoother on an n x n grid, in place, one launch per colour; boundary threads return ----


@gk.kernel
def gauss_seidel_kernel(u, f, n, color):
    idy, idx = gk.tid()
    if idx == 0 or idy == 0 or idx >= n - 1 or idy >= n - 1:
        return
    j = idx
    i = idy
    if (i % 2 != j % 2 and color == 0) or (i % 2 == j % 2 and color == 1):
        u[j + n * i] = 0.25 * (u[j - 1 + n * i] + u[j + 1 + n * i] + u[j + n * (i - 1)] + u[j + n * (i + 1)]
                               + f[j + n * i])


def gauss_seidel(u, f, n, sweeps, backend=None):
    """`sweeps` red-black sweeps of gauss_seidel_H on the flat n x n grid `u`, in place."""
    for _ in range(sweeps):
        gk.launch(gauss_seidel_kernel, (n, n), u, f, n, 0, backend=backend)
        gk.launch(gauss_seidel_kernel, (n, n), u, f, n, 1, backend=backend)


# ---- CloverLeaf PdV (UK-MAC/CloverLeaf_CUDA PdV_kernel_cuda.cu: device_PdV_cuda_kernel_predict and _not_predict,
# one kernel here as the Fortran pdv_kernel writes it, `predict` choosing the half step): each cell's volume change
# from the face fluxes of the node velocities, energy and density updated; the error condition per cell (the
# source reduces it per block in shared memory, then the host takes the maximum) --------------------------------


@gk.kernel
def pdv_kernel(predict, x_max, y_max, dt, error_condition, xarea, yarea, volume, density0, density1, energy0,
               energy1, pressure, viscosity, xvel0, yvel0, xvel1, yvel1):
    row, column = gk.tid()
    if row >= 2 and row <= y_max + 1 and column >= 2 and column <= x_max + 1:
        if predict:
            left_flux = xarea[row, column] * (xvel0[row, column] + xvel0[row + 1, column] + xvel0[row, column]
                                              + xvel0[row + 1, column]) * 0.25 * dt * 0.5
            right_flux = xarea[row, column + 1] * (xvel0[row, column + 1] + xvel0[row + 1, column + 1]
                                                   + xvel0[row, column + 1]
                                                   + xvel0[row + 1, column + 1]) * 0.25 * dt * 0.5
            bottom_flux = yarea[row, column] * (yvel0[row, column] + yvel0[row, column + 1] + yvel0[row, column]
                                                + yvel0[row, column + 1]) * 0.25 * dt * 0.5
            top_flux = yarea[row + 1, column] * (yvel0[row + 1, column] + yvel0[row + 1, column + 1]
                                                 + yvel0[row + 1, column]
                                                 + yvel0[row + 1, column + 1]) * 0.25 * dt * 0.5
        else:
            left_flux = xarea[row, column] * (xvel0[row, column] + xvel0[row + 1, column] + xvel1[row, column]
                                              + xvel1[row + 1, column]) * 0.25 * dt
            right_flux = xarea[row, column + 1] * (xvel0[row, column + 1] + xvel0[row + 1, column + 1]
                                                   + xvel1[row, column + 1] + xvel1[row + 1, column + 1]) * 0.25 * dt
            bottom_flux = yarea[row, column] * (yvel0[row, column] + yvel0[row, column + 1] + yvel1[row, column]
                                                + yvel1[row, column + 1]) * 0.25 * dt
            top_flux = yarea[row + 1, column] * (yvel0[row + 1, column] + yvel0[row + 1, column + 1]
                                                 + yvel1[row + 1, column] + yvel1[row + 1, column + 1]) * 0.25 * dt
        total_flux = right_flux - left_flux + top_flux - bottom_flux
        volume_change = volume[row, column] / (volume[row, column] + total_flux)
        min_cell_volume = min(volume[row, column] + total_flux,
                              min(volume[row, column] + right_flux - left_flux,
                                  volume[row, column] + top_flux - bottom_flux))
        err = 0
        if volume_change <= 0.0:
            err = 1
        if min_cell_volume <= 0.0:
            err = 2
        error_condition[row, column] = err
        recip_volume = 1.0 / volume[row, column]
        energy_change = (pressure[row, column] / density0[row, column]
                         + viscosity[row, column] / density0[row, column]) * total_flux * recip_volume
        energy1[row, column] = energy0[row, column] - energy_change
        density1[row, column] = density0[row, column] * volume_change


# ---- CUDA samples oceanFFT (NVIDIA cuda-samples Samples/5_Domain_Specific/oceanFFT/oceanFFT_kernel.cu:
# generateSpectrumKernel): the height spectrum at time t, h0(k) e^{iwt} + conj(h0(-k)) e^{-iwt}, the mirrored
# wave vector read at (out_height - y) * in_width + (out_width - x), w = sqrt(g |k|); complex values as a trailing
# axis of 2, complex_mult a device function returning the pair --------------------------------------------------


@gk.func
def complex_mult(abx, aby, cdx, cdy):
    return abx * cdx - aby * cdy, abx * cdy + aby * cdx


@gk.kernel
def generate_spectrum(h0, ht, in_width, out_width, out_height, t, patch_size):
    y, x = gk.tid()
    in_index = y * in_width + x
    in_mindex = (out_height - y) * in_width + (out_width - x)
    out_index = y * out_width + x
    kx = (-out_width / 2.0 + x) * (2.0 * math.pi / patch_size)
    ky = (-out_width / 2.0 + y) * (2.0 * math.pi / patch_size)
    k_len = math.sqrt(kx * kx + ky * ky)
    w = math.sqrt(9.81 * k_len)
    if x < out_width and y < out_height:
        ax, ay = complex_mult(h0[in_index, 0], h0[in_index, 1], math.cos(w * t), math.sin(w * t))
        bx, by = complex_mult(h0[in_mindex, 0], -h0[in_mindex, 1], math.cos(-w * t), math.sin(-w * t))
        ht[out_index, 0] = ax + bx
        ht[out_index, 1] = ay + by


# ---- miniBUDE (UoB-HPC/miniBUDE src/cuda/fasten.hpp: fasten_main): PPWI poses per thread, each pose's rotation
# and translation into a `gk.local` transform; for every ligand and protein atom pair the steric, charge and
# desolvation terms chosen by ternaries on the distance and the force-field types (the structs as arrays; the
# source's do-while loops over at least one atom as `for`). Extra threads redo the last poses, writing nothing --

PPWI = 2
HBTYPE_F = 70
HBTYPE_E = 69
HARDNESS = 38.0
NPNPDIST = 5.5
NPPDIST = 1.0
CNSTNT = 45.0
FLOAT_MAX = 3.4028234663852886e38


@gk.kernel
def fasten_main(natlig, natpro, protein_xyz, protein_type, ligand_xyz, ligand_type, transforms_0, transforms_1,
                transforms_2, transforms_3, transforms_4, transforms_5, etotals, ff_hbtype, ff_radius, ff_hphb,
                ff_elsc, num_transforms, block_dim):
    block, thread = gk.tid()
    ix = block * block_dim * PPWI + thread
    ix = ix if ix < num_transforms else num_transforms - PPWI
    etot = gk.local(PPWI)
    transform = gk.local((PPWI * 3, 4))
    for i in range(PPWI):
        index = ix + i * block_dim
        sx = math.sin(transforms_0[index])
        cx = math.cos(transforms_0[index])
        sy = math.sin(transforms_1[index])
        cy = math.cos(transforms_1[index])
        sz = math.sin(transforms_2[index])
        cz = math.cos(transforms_2[index])
        transform[i * 3, 0] = cy * cz
        transform[i * 3, 1] = sx * sy * cz - cx * sz
        transform[i * 3, 2] = cx * sy * cz + sx * sz
        transform[i * 3, 3] = transforms_3[index]
        transform[i * 3 + 1, 0] = cy * sz
        transform[i * 3 + 1, 1] = sx * sy * sz + cx * cz
        transform[i * 3 + 1, 2] = cx * sy * sz - sx * cz
        transform[i * 3 + 1, 3] = transforms_4[index]
        transform[i * 3 + 2, 0] = -sy
        transform[i * 3 + 2, 1] = sx * cy
        transform[i * 3 + 2, 2] = cx * cy
        transform[i * 3 + 2, 3] = transforms_5[index]
        etot[i] = 0.0
    lpos = gk.local((PPWI, 3))
    for il in range(natlig):
        lt = ligand_type[il]
        l_hbtype = ff_hbtype[lt]
        l_radius = ff_radius[lt]
        l_hphb = ff_hphb[lt]
        l_elsc = ff_elsc[lt]
        lhphb_ltz = l_hphb < 0.0
        lhphb_gtz = l_hphb > 0.0
        for i in range(PPWI):
            for a in range(3):
                lpos[i, a] = (transform[i * 3 + a, 3] + ligand_xyz[il, 0] * transform[i * 3 + a, 0]
                              + ligand_xyz[il, 1] * transform[i * 3 + a, 1]
                              + ligand_xyz[il, 2] * transform[i * 3 + a, 2])
        for ip in range(natpro):
            pt = protein_type[ip]
            radij = ff_radius[pt] + l_radius
            r_radij = 1.0 / radij
            both_f = ff_hbtype[pt] == HBTYPE_F and l_hbtype == HBTYPE_F
            elcdst = 4.0 if both_f else 2.0
            elcdst1 = 0.25 if both_f else 0.5
            type_e = ff_hbtype[pt] == HBTYPE_E or l_hbtype == HBTYPE_E
            phphb_ltz = ff_hphb[pt] < 0.0
            phphb_gtz = ff_hphb[pt] > 0.0
            phphb_nz = ff_hphb[pt] != 0.0
            p_hphb = ff_hphb[pt] * (-1.0 if phphb_ltz and lhphb_gtz else 1.0)
            l_hphb_s = l_hphb * (-1.0 if phphb_gtz and lhphb_ltz else 1.0)
            distdslv = (NPNPDIST if lhphb_ltz else NPPDIST) if phphb_ltz else (NPPDIST if lhphb_ltz else -FLOAT_MAX)
            r_distdslv = 1.0 / distdslv
            chrg_init = l_elsc * ff_elsc[pt]
            dslv_init = p_hphb + l_hphb_s
            for i in range(PPWI):
                x = lpos[i, 0] - protein_xyz[ip, 0]
                y = lpos[i, 1] - protein_xyz[ip, 1]
                z = lpos[i, 2] - protein_xyz[ip, 2]
                distij = math.sqrt(x * x + y * y + z * z)
                distbb = distij - radij
                zone1 = distbb < 0.0
                etot[i] += (1.0 - distij * r_radij) * (2.0 * HARDNESS if zone1 else 0.0)
                chrg_e = chrg_init * ((1.0 if zone1 else 1.0 - distbb * elcdst1) * (1.0 if distbb < elcdst else 0.0))
                neg_chrg_e = -abs(chrg_e)
                chrg_e = neg_chrg_e if type_e else chrg_e
                etot[i] += chrg_e * CNSTNT
                coeff = 1.0 - distbb * r_distdslv
                dslv_e = dslv_init * (1.0 if distbb < distdslv and phphb_nz else 0.0)
                dslv_e *= 1.0 if zone1 else coeff
                etot[i] += dslv_e
    td_base = block * block_dim * PPWI + thread
    if td_base < num_transforms:
        for i in range(PPWI):
            etotals[td_base + i * block_dim] = etot[i] * 0.5


# ---- RAJAPerf HALO_PACKING (LLNL/RAJAPerf src/comm/HALO_PACKING.hpp and -Cuda.cpp: halo_packing_pack,
# halo_packing_unpack): each neighbour's buffer packed from each variable at the indices of its pack list, then
# unpacked into the variables at its unpack list (a write at an index read from an array); one launch per
# (neighbour, variable), `buffer += len` as an offset --------------------------------------------------------


@gk.kernel
def halo_pack(buffer, offset, pack_list, var, len):
    i = gk.tid()
    if i < len:
        buffer[offset + i] = var[pack_list[i]]


@gk.kernel
def halo_unpack(buffer, offset, unpack_list, var, len):
    i = gk.tid()
    if i < len:
        var[unpack_list[i]] = buffer[offset + i]


def halo_packing(var0, var1, pack_buffer0, pack_buffer1, unpack_buffer0, unpack_buffer1, pack_list0, pack_list1,
                 unpack_list0, unpack_list1, backend=None):
    """Pack both variables for both neighbours, then unpack each neighbour's buffer (on one rank, periodic: the
    other side's packed buffer, copied as a receive would) into the ghost cells its unpack list names."""
    for buffer, lst in ((pack_buffer0, pack_list0), (pack_buffer1, pack_list1)):
        offset = 0
        for var in (var0, var1):
            gk.launch(halo_pack, lst.shape[0], buffer, offset, lst, var, lst.shape[0], backend=backend)
            offset += lst.shape[0]
    for received, buffer, lst in ((pack_buffer1, unpack_buffer0, unpack_list0),
                                  (pack_buffer0, unpack_buffer1, unpack_list1)):
        gk.copy(buffer, received)
        offset = 0
        for var in (var0, var1):
            gk.launch(halo_unpack, lst.shape[0], buffer, offset, lst, var, lst.shape[0], backend=backend)
            offset += lst.shape[0]


# ---- llm.c attention backward (karpathy/llm.c train_gpt2.c: attention_backward): a thread per (b, t, h) as a GPU
# port of the loop nest runs it; datt and dpreatt rows are the thread's own (accumulated, then read back), dquery
# its own; dkey and dvalue of earlier positions t2 are shared with the other threads of (b, h): atomics ----------


@gk.kernel
def attention_backward(dinp, dpreatt, datt, dout, inp, att, B, T, C, NH):
    b, t, h = gk.tid()
    C3 = C * 3
    hs = C // NH
    scale = 1.0 / math.sqrt(hs)
    att_bth = b * NH * T * T + h * T * T + t * T
    dquery_t = b * T * C3 + t * C3 + h * hs
    query_t = b * T * C3 + t * C3 + h * hs
    dout_bth = b * T * C + t * C + h * hs
    for t2 in range(t + 1):
        value_t2 = b * T * C3 + t2 * C3 + h * hs + C * 2
        for i in range(hs):
            datt[att_bth + t2] += inp[value_t2 + i] * dout[dout_bth + i]
            gk.atomic_add(dinp, value_t2 + i, att[att_bth + t2] * dout[dout_bth + i])
    for t2 in range(t + 1):
        for t3 in range(t + 1):
            indicator = 1.0 if t2 == t3 else 0.0
            local_derivative = att[att_bth + t2] * (indicator - att[att_bth + t3])
            dpreatt[att_bth + t3] += local_derivative * datt[att_bth + t2]
    for t2 in range(t + 1):
        key_t2 = b * T * C3 + t2 * C3 + h * hs + C
        for i in range(hs):
            dinp[dquery_t + i] += inp[key_t2 + i] * dpreatt[att_bth + t2] * scale
            gk.atomic_add(dinp, key_t2 + i, inp[query_t + i] * dpreatt[att_bth + t2] * scale)
