"""A second round of kernels ported from public GPU and HPC codes (session 49), written in gradkern's kernel
language the way a porting user writes them, each citing its source (none copied: written here from the
algorithm). Used by tests/library/test_ported_hpc.py, with inputs from tests/support/ported_hpc_cases.py;
tests/support/ported.py holds the first round."""

import math

import gradkern as gk

# ---- LULESH 2.0 CalcElemVolume (LLNL/LULESH lulesh-util / lulesh.cc: CalcElemVolume's three triple products) ---
# the element's eight nodes gathered through nodelist[8 * elem + k]


@gk.func
def triple_product(x1, y1, z1, x2, y2, z2, x3, y3, z3):
    return x1 * (y2 * z3 - z2 * y3) + x2 * (z1 * y3 - y1 * z3) + x3 * (y1 * z2 - z1 * y2)


@gk.kernel
def lulesh_volume(x, y, z, nodelist, vol):
    e = gk.tid()
    px = gk.local((8,), gk.float64)
    py = gk.local((8,), gk.float64)
    pz = gk.local((8,), gk.float64)
    for k in range(8):
        nd = nodelist[8 * e + k]
        px[k] = x[nd]
        py[k] = y[nd]
        pz[k] = z[nd]
    dx61 = px[6] - px[1]
    dy61 = py[6] - py[1]
    dz61 = pz[6] - pz[1]
    dx70 = px[7] - px[0]
    dy70 = py[7] - py[0]
    dz70 = pz[7] - pz[0]
    dx63 = px[6] - px[3]
    dy63 = py[6] - py[3]
    dz63 = pz[6] - pz[3]
    dx20 = px[2] - px[0]
    dy20 = py[2] - py[0]
    dz20 = pz[2] - pz[0]
    dx50 = px[5] - px[0]
    dy50 = py[5] - py[0]
    dz50 = pz[5] - pz[0]
    dx64 = px[6] - px[4]
    dy64 = py[6] - py[4]
    dz64 = pz[6] - pz[4]
    dx31 = px[3] - px[1]
    dy31 = py[3] - py[1]
    dz31 = pz[3] - pz[1]
    dx72 = px[7] - px[2]
    dy72 = py[7] - py[2]
    dz72 = pz[7] - pz[2]
    dx43 = px[4] - px[3]
    dy43 = py[4] - py[3]
    dz43 = pz[4] - pz[3]
    dx57 = px[5] - px[7]
    dy57 = py[5] - py[7]
    dz57 = pz[5] - pz[7]
    dx14 = px[1] - px[4]
    dy14 = py[1] - py[4]
    dz14 = pz[1] - pz[4]
    dx25 = px[2] - px[5]
    dy25 = py[2] - py[5]
    dz25 = pz[2] - pz[5]
    v = (triple_product(dx31 + dx72, dx63, dx20, dy31 + dy72, dy63, dy20, dz31 + dz72, dz63, dz20)
         + triple_product(dx43 + dx57, dx64, dx70, dy43 + dy57, dy64, dy70, dz43 + dz57, dz64, dz70)
         + triple_product(dx14 + dx25, dx61, dx50, dy14 + dy25, dy61, dy50, dz14 + dz25, dz61, dz50))
    vol[e] = v / 12.0


# ---- LULESH IntegrateStressForElems (lulesh.cc: CalcElemNodeNormals / SumElemFaceNormal, then the stress times
# the node normals scattered to the nodes; the CUDA port's atomics instead of the per-corner arrays) -----------
FACES = ((0, 1, 2, 3), (0, 4, 5, 1), (1, 5, 6, 2), (2, 6, 7, 3), (3, 7, 4, 0), (4, 7, 6, 5))


@gk.kernel
def lulesh_stress(x, y, z, nodelist, sigxx, sigyy, sigzz, fx, fy, fz):
    e = gk.tid()
    px = gk.local((8,), gk.float64)
    py = gk.local((8,), gk.float64)
    pz = gk.local((8,), gk.float64)
    bx = gk.local((8,), gk.float64)
    by = gk.local((8,), gk.float64)
    bz = gk.local((8,), gk.float64)
    for k in range(8):
        nd = nodelist[8 * e + k]
        px[k] = x[nd]
        py[k] = y[nd]
        pz[k] = z[nd]
    for f in range(6):
        n0 = FACES[f][0]
        n1 = FACES[f][1]
        n2 = FACES[f][2]
        n3 = FACES[f][3]
        bisx0 = 0.5 * (px[n3] + px[n2] - px[n1] - px[n0])
        bisy0 = 0.5 * (py[n3] + py[n2] - py[n1] - py[n0])
        bisz0 = 0.5 * (pz[n3] + pz[n2] - pz[n1] - pz[n0])
        bisx1 = 0.5 * (px[n2] + px[n1] - px[n3] - px[n0])
        bisy1 = 0.5 * (py[n2] + py[n1] - py[n3] - py[n0])
        bisz1 = 0.5 * (pz[n2] + pz[n1] - pz[n3] - pz[n0])
        ax = 0.25 * (bisy0 * bisz1 - bisz0 * bisy1)
        ay = 0.25 * (bisz0 * bisx1 - bisx0 * bisz1)
        az = 0.25 * (bisx0 * bisy1 - bisy0 * bisx1)
        for q in range(4):
            bx[FACES[f][q]] += ax
            by[FACES[f][q]] += ay
            bz[FACES[f][q]] += az
    for k in range(8):
        nd = nodelist[8 * e + k]
        gk.atomic_add(fx, nd, -sigxx[e] * bx[k])
        gk.atomic_add(fy, nd, -sigyy[e] * by[k])
        gk.atomic_add(fz, nd, -sigzz[e] * bz[k])


# ---- Rodinia CFD euler3d cuda_compute_flux (yuhc/gpu-rodinia cuda/cfd/euler3d.cu): five conserved variables
# per cell in variables[var * nelr + i], four faces, neighbour -1 a wall, -2 the far field ------------------------
GAMMA = 1.4
NNB = 4


@gk.func
def cfd_pressure(density, density_energy, speed_sqd):
    return (GAMMA - 1.0) * (density_energy - 0.5 * density * speed_sqd)


@gk.kernel
def cfd_flux(neighbours, normals, variables, ff_variable, fluxes, nelr):
    i = gk.tid()
    smoothing = 0.2
    d_i = variables[0 * nelr + i]
    mx_i = variables[1 * nelr + i]
    my_i = variables[2 * nelr + i]
    mz_i = variables[3 * nelr + i]
    de_i = variables[4 * nelr + i]
    vx_i = mx_i / d_i
    vy_i = my_i / d_i
    vz_i = mz_i / d_i
    speed_sqd_i = vx_i * vx_i + vy_i * vy_i + vz_i * vz_i
    speed_i = math.sqrt(speed_sqd_i)
    p_i = cfd_pressure(d_i, de_i, speed_sqd_i)
    c_i = math.sqrt(GAMMA * p_i / d_i)
    # the flux contribution of cell i itself: momentum * velocity + pressure on the diagonal
    fcx_x = mx_i * vx_i + p_i
    fcx_y = mx_i * vy_i
    fcx_z = mx_i * vz_i
    fcy_y = my_i * vy_i + p_i
    fcy_z = my_i * vz_i
    fcz_z = mz_i * vz_i + p_i
    fe_x = vx_i * (de_i + p_i)
    fe_y = vy_i * (de_i + p_i)
    fe_z = vz_i * (de_i + p_i)
    f_d = 0.0
    f_mx = 0.0
    f_my = 0.0
    f_mz = 0.0
    f_de = 0.0
    for j in range(NNB):
        nb = neighbours[i + j * nelr]
        nx = normals[i + (j + 0 * NNB) * nelr]
        ny = normals[i + (j + 1 * NNB) * nelr]
        nz = normals[i + (j + 2 * NNB) * nelr]
        normal_len = math.sqrt(nx * nx + ny * ny + nz * nz)
        if nb >= 0:
            d_nb = variables[0 * nelr + nb]
            mx_nb = variables[1 * nelr + nb]
            my_nb = variables[2 * nelr + nb]
            mz_nb = variables[3 * nelr + nb]
            de_nb = variables[4 * nelr + nb]
            vx_nb = mx_nb / d_nb
            vy_nb = my_nb / d_nb
            vz_nb = mz_nb / d_nb
            ssq_nb = vx_nb * vx_nb + vy_nb * vy_nb + vz_nb * vz_nb
            p_nb = cfd_pressure(d_nb, de_nb, ssq_nb)
            c_nb = math.sqrt(GAMMA * p_nb / d_nb)
            factor = -normal_len * smoothing * 0.5 * (speed_i + math.sqrt(ssq_nb) + c_i + c_nb)
            f_d += factor * (d_i - d_nb)
            f_de += factor * (de_i - de_nb)
            f_mx += factor * (mx_i - mx_nb)
            f_my += factor * (my_i - my_nb)
            f_mz += factor * (mz_i - mz_nb)
            f_d += 0.5 * (nx * (mx_nb + mx_i) + ny * (my_nb + my_i) + nz * (mz_nb + mz_i))
            f_de += 0.5 * (nx * (vx_nb * (de_nb + p_nb) + fe_x) + ny * (vy_nb * (de_nb + p_nb) + fe_y)
                           + nz * (vz_nb * (de_nb + p_nb) + fe_z))
            f_mx += 0.5 * (nx * (mx_nb * vx_nb + p_nb + fcx_x) + ny * (mx_nb * vy_nb + fcx_y)
                           + nz * (mx_nb * vz_nb + fcx_z))
            f_my += 0.5 * (nx * (my_nb * vx_nb + fcx_y) + ny * (my_nb * vy_nb + p_nb + fcy_y)
                           + nz * (my_nb * vz_nb + fcy_z))
            f_mz += 0.5 * (nx * (mz_nb * vx_nb + fcx_z) + ny * (mz_nb * vy_nb + fcy_z)
                           + nz * (mz_nb * vz_nb + p_nb + fcz_z))
        elif nb == -1:  # a wall: only the pressure pushes
            f_mx += nx * p_i
            f_my += ny * p_i
            f_mz += nz * p_i
        elif nb == -2:  # the far field
            f_d += 0.5 * (nx * (ff_variable[1] + mx_i) + ny * (ff_variable[2] + my_i) + nz * (ff_variable[3] + mz_i))
            f_de += 0.5 * (nx * fe_x + ny * fe_y + nz * fe_z)
            f_mx += 0.5 * nx * fcx_x
            f_my += 0.5 * ny * fcy_y
            f_mz += 0.5 * nz * fcz_z
    fluxes[0 * nelr + i] = f_d
    fluxes[1 * nelr + i] = f_mx
    fluxes[2 * nelr + i] = f_my
    fluxes[3 * nelr + i] = f_mz
    fluxes[4 * nelr + i] = f_de


# ---- Rodinia kmeans (yuhc/gpu-rodinia cuda/kmeans/kmeans_cuda_kernel.cu: kmeansPoint; the host's new-centre sums)
# the argmin over centres is a choice (no derivative); the distance it picks and the feature sums have one


@gk.kernel
def kmeans_point(features, clusters, membership, mindist, nfeatures, nclusters):
    point = gk.tid()
    index = -1
    best = 1e300
    for c in range(nclusters):
        dist = 0.0
        for f in range(nfeatures):
            d = features[point * nfeatures + f] - clusters[c * nfeatures + f]
            dist += d * d
        if dist < best:
            best = dist
            index = c
    membership[point] = index
    mindist[point] = best


@gk.kernel
def kmeans_accumulate(features, membership, new_centers, new_sizes, nfeatures):
    point = gk.tid()
    c = membership[point]
    gk.atomic_add(new_sizes, c, 1.0)
    for f in range(nfeatures):
        gk.atomic_add(new_centers, c * nfeatures + f, features[point * nfeatures + f])


# ---- Rodinia nn (cuda/nn/nn_cuda.cu: euclid) and particlefilter (cuda/particlefilter/ex_particle_CUDA_float_seq.cu:
# likelihood_kernel: the particle's disk of pixels, indices rounded from its position, clamped to the video) ------


@gk.kernel
def nn_euclid(lat, lng, distances, num_records, target_lat, target_lng):
    gid = gk.tid()
    if gid < num_records:
        distances[gid] = math.sqrt((target_lat - lat[gid]) * (target_lat - lat[gid])
                                   + (target_lng - lng[gid]) * (target_lng - lng[gid]))


@gk.kernel
def pf_likelihood(array_x, array_y, objxy, video, weights, likelihood, count_ones, isz_x, isz_y, frame):
    p = gk.tid()
    s = 0.0
    for y in range(count_ones):
        ind_x = int(math.floor(array_x[p] + 0.5)) + objxy[2 * y + 1]
        ind_y = int(math.floor(array_y[p] + 0.5)) + objxy[2 * y]
        ind = ind_x * isz_y + ind_y + frame * isz_x * isz_y
        if ind >= isz_x * isz_y * (frame + 1) or ind < 0:
            ind = 0
        v = video[ind]
        s += ((v - 100.0) * (v - 100.0) - (v - 228.0) * (v - 228.0)) / 50.0
    lk = s / count_ones
    likelihood[p] = lk
    weights[p] = weights[p] * math.exp(lk)


# ---- HPCG ComputeSPMV_ref and ComputeSYMGS_ref (hpcg-benchmark/hpcg src/ComputeSPMV_ref.cpp,
# src/ComputeSYMGS_ref.cpp): CSR with the diagonal inside each row, found through diag_idx ------------------------


@gk.kernel
def hpcg_spmv(row_ptr, cols, vals, x, y):
    i = gk.tid()
    s = 0.0
    for k in range(row_ptr[i], row_ptr[i + 1]):
        s += vals[k] * x[cols[k]]
    y[i] = s


@gk.kernel
def hpcg_symgs(row_ptr, cols, vals, diag_idx, r, x, n):
    t = gk.tid()  # a one-thread launch: the sweep is serial
    if t == 0:
        for i in range(n):
            diag = vals[diag_idx[i]]
            s = r[i]
            for k in range(row_ptr[i], row_ptr[i + 1]):
                s -= vals[k] * x[cols[k]]
            s += x[i] * diag
            x[i] = s / diag
        for ii in range(n):
            i = n - 1 - ii
            diag = vals[diag_idx[i]]
            s = r[i]
            for k in range(row_ptr[i], row_ptr[i + 1]):
                s -= vals[k] * x[cols[k]]
            s += x[i] * diag
            x[i] = s / diag


# ---- NAS MG resid and psinv (NPB3.x MG mg.f / the NPB-GPU CUDA ports): 27-point operators with coefficient
# arrays a[0..3] (a[1] = 0 in NAS, kept here) and c[0..3]; threads cover the interior, offset 1 -----------------


@gk.kernel
def mg_resid(u, v, r, a):
    i3, i2, i1 = gk.tid()
    i3 += 1
    i2 += 1
    i1 += 1
    u1m = u[i3, i2 - 1, i1 - 1] + u[i3, i2 + 1, i1 - 1] + u[i3 - 1, i2, i1 - 1] + u[i3 + 1, i2, i1 - 1]
    u1p = u[i3, i2 - 1, i1 + 1] + u[i3, i2 + 1, i1 + 1] + u[i3 - 1, i2, i1 + 1] + u[i3 + 1, i2, i1 + 1]
    u10 = u[i3, i2 - 1, i1] + u[i3, i2 + 1, i1] + u[i3 - 1, i2, i1] + u[i3 + 1, i2, i1]
    u2m = (u[i3 - 1, i2 - 1, i1 - 1] + u[i3 - 1, i2 + 1, i1 - 1] + u[i3 + 1, i2 - 1, i1 - 1]
           + u[i3 + 1, i2 + 1, i1 - 1])
    u2p = (u[i3 - 1, i2 - 1, i1 + 1] + u[i3 - 1, i2 + 1, i1 + 1] + u[i3 + 1, i2 - 1, i1 + 1]
           + u[i3 + 1, i2 + 1, i1 + 1])
    u20 = u[i3 - 1, i2 - 1, i1] + u[i3 - 1, i2 + 1, i1] + u[i3 + 1, i2 - 1, i1] + u[i3 + 1, i2 + 1, i1]
    r[i3, i2, i1] = (v[i3, i2, i1] - a[0] * u[i3, i2, i1] - a[1] * (u[i3, i2, i1 - 1] + u[i3, i2, i1 + 1] + u10)
                     - a[2] * (u20 + u1m + u1p) - a[3] * (u2m + u2p))


@gk.kernel
def mg_psinv(r, u, c):
    i3, i2, i1 = gk.tid()
    i3 += 1
    i2 += 1
    i1 += 1
    r1m = r[i3, i2 - 1, i1 - 1] + r[i3, i2 + 1, i1 - 1] + r[i3 - 1, i2, i1 - 1] + r[i3 + 1, i2, i1 - 1]
    r1p = r[i3, i2 - 1, i1 + 1] + r[i3, i2 + 1, i1 + 1] + r[i3 - 1, i2, i1 + 1] + r[i3 + 1, i2, i1 + 1]
    r10 = r[i3, i2 - 1, i1] + r[i3, i2 + 1, i1] + r[i3 - 1, i2, i1] + r[i3 + 1, i2, i1]
    r20 = r[i3 - 1, i2 - 1, i1] + r[i3 - 1, i2 + 1, i1] + r[i3 + 1, i2 - 1, i1] + r[i3 + 1, i2 + 1, i1]
    u[i3, i2, i1] = (u[i3, i2, i1] + c[0] * r[i3, i2, i1] + c[1] * (r[i3, i2, i1 - 1] + r[i3, i2, i1 + 1] + r10)
                     + c[2] * (r20 + r1m + r1p))


# ---- SHOC MD (vetter/shoc src/cuda/level1/md/MD.cu: compute_lj_force): a neighbour list in column-major
# order, the cutoff branch, Lennard-Jones forces -----------------------------------------------------------------


@gk.kernel
def shoc_md(force, position, neigh_list, cutsq, lj1, lj2, inum, max_neighbors):
    i = gk.tid()
    ipx = position[i, 0]
    ipy = position[i, 1]
    ipz = position[i, 2]
    fx = 0.0
    fy = 0.0
    fz = 0.0
    for jj in range(max_neighbors):
        j = neigh_list[jj * inum + i]
        delx = ipx - position[j, 0]
        dely = ipy - position[j, 1]
        delz = ipz - position[j, 2]
        r2inv = delx * delx + dely * dely + delz * delz
        if r2inv < cutsq:
            r2inv = 1.0 / r2inv
            r6inv = r2inv * r2inv * r2inv
            f = r2inv * r6inv * (lj1 * r6inv - lj2)
            fx += delx * f
            fy += dely * f
            fz += delz * f
    force[i, 0] = fx
    force[i, 1] = fy
    force[i, 2] = fz


# ---- Parboil lbm (parboil benchmarks/lbm/src/cuda/lbm.cu: performStreamCollide, D3Q19, BGK), "push" streaming
# into the neighbour's cell of the destination grid; a one-cell halo instead of the periodic wrap ----------------
# direction q: velocity (cx, cy, cz) and weight
D3Q19 = ((0, 0, 0), (0, 1, 0), (0, -1, 0), (1, 0, 0), (-1, 0, 0), (0, 0, 1), (0, 0, -1),
         (1, 1, 0), (-1, 1, 0), (1, -1, 0), (-1, -1, 0), (0, 1, 1), (0, 1, -1), (0, -1, 1), (0, -1, -1),
         (1, 0, 1), (1, 0, -1), (-1, 0, 1), (-1, 0, -1))
W19 = (1.0 / 3.0, 1.0 / 18.0, 1.0 / 18.0, 1.0 / 18.0, 1.0 / 18.0, 1.0 / 18.0, 1.0 / 18.0,
       1.0 / 36.0, 1.0 / 36.0, 1.0 / 36.0, 1.0 / 36.0, 1.0 / 36.0, 1.0 / 36.0, 1.0 / 36.0, 1.0 / 36.0,
       1.0 / 36.0, 1.0 / 36.0, 1.0 / 36.0, 1.0 / 36.0)


@gk.kernel
def lbm_collide_stream(src, dst, omega):
    z, y, x = gk.tid()
    z += 1
    y += 1
    x += 1
    rho = 0.0
    ux = 0.0
    uy = 0.0
    uz = 0.0
    for q in range(19):
        fq = src[q, z, y, x]
        rho += fq
        ux += D3Q19[q][0] * fq
        uy += D3Q19[q][1] * fq
        uz += D3Q19[q][2] * fq
    ux /= rho
    uy /= rho
    uz /= rho
    u2 = 1.5 * (ux * ux + uy * uy + uz * uz)
    for q in range(19):
        cu = D3Q19[q][0] * ux + D3Q19[q][1] * uy + D3Q19[q][2] * uz
        feq = W19[q] * rho * (1.0 + 3.0 * cu + 4.5 * cu * cu - u2)
        dst[q, z + D3Q19[q][2], y + D3Q19[q][1], x + D3Q19[q][0]] = (1.0 - omega) * src[q, z, y, x] + omega * feq


# ---- miniFE assembly (Mantevo/miniFE ref/src/perform_element_loop.hpp, sum_into_global_linear_system with
# atomics as the OpenMP/CUDA ports do): each element's matrix summed into the global CSR rows, the position found
# by a search of the row with break; quadrilaterals of four nodes (miniFE's hexahedra have eight: 64 entries an
# element, the same code) and the reference Laplacian `kref` passed as an array (a constant table would unroll
# both loops: 16 copies of the search, 273 s of Numba compile for the gradient under load) ---------------------


@gk.kernel
def minife_assemble(elem_nodes, cond, load, kref, row_ptr, cols, vals, rhs):
    e = gk.tid()
    k_e = cond[e] / 6.0
    for a in range(4):
        row = elem_nodes[4 * e + a]
        gk.atomic_add(rhs, row, 0.25 * load[e])
        for b in range(4):
            col = elem_nodes[4 * e + b]
            pos = -1
            for p in range(row_ptr[row], row_ptr[row + 1]):
                if cols[p] == col:
                    pos = p
                    break
            if pos >= 0:
                gk.atomic_add(vals, pos, k_e * kref[a, b])


# ---- PIC charge deposition, 2-D cloud-in-cell (e.g. PIConGPU's / WarpX's CIC shape, periodic grid) -------------


@gk.kernel
def pic_deposit(px, py, q, rho, nx, ny, inv_dx):
    p = gk.tid()
    gx = px[p] * inv_dx
    gy = py[p] * inv_dx
    fi = math.floor(gx)
    fj = math.floor(gy)
    wx = gx - fi
    wy = gy - fj
    i0 = int(fi) % nx
    j0 = int(fj) % ny
    i1 = (i0 + 1) % nx
    j1 = (j0 + 1) % ny
    gk.atomic_add(rho, j0 * nx + i0, q[p] * (1.0 - wx) * (1.0 - wy))
    gk.atomic_add(rho, j0 * nx + i1, q[p] * wx * (1.0 - wy))
    gk.atomic_add(rho, j1 * nx + i0, q[p] * (1.0 - wx) * wy)
    gk.atomic_add(rho, j1 * nx + i1, q[p] * wx * wy)


# ---- Smith-Waterman (CUDASW++ / Rodinia nw's anti-diagonal wavefront), scores from a float similarity matrix:
# one launch per anti-diagonal d, thread i on cell (i, d - i); max() of three predecessors and 0 ------------------


@gk.kernel
def sw_diagonal(h, sim, gap, d, m, n):
    t = gk.tid()
    i = t + 1
    j = d - i
    if j >= 1 and j <= n and i <= m:
        h[i, j] = max(0.0, max(h[i - 1, j - 1] + sim[i - 1, j - 1], max(h[i - 1, j] - gap, h[i, j - 1] - gap)))


def smith_waterman(h, sim, gap, backend=None):
    """The wavefront program: m + n - 1 launches."""
    m, n = sim.shape
    for d in range(2, m + n + 1):
        gk.launch(sw_diagonal, m, h, sim, gap, d, m, n, backend=backend)


# ---- softmax and layernorm, one row per thread (the row kernels of e.g. llm.c's dev/cuda/softmax_forward.cu
# and layernorm_forward.cu, kernel 1: a loop inside the thread for each reduction) -------------------------------


@gk.kernel
def softmax_rows(inp, out, c):
    row = gk.tid()
    maxval = -1e300
    for j in range(c):
        if inp[row, j] > maxval:
            maxval = inp[row, j]
    s = 0.0
    for j in range(c):
        out[row, j] = math.exp(inp[row, j] - maxval)
        s += out[row, j]
    for j in range(c):
        out[row, j] /= s


@gk.kernel
def layernorm_rows(inp, out, weight, bias, mean, rstd, c):
    row = gk.tid()
    m = 0.0
    for j in range(c):
        m += inp[row, j]
    m = m / c
    v = 0.0
    for j in range(c):
        xs = inp[row, j] - m
        v += xs * xs
    v = v / c
    s = 1.0 / math.sqrt(v + 1e-5)
    for j in range(c):
        out[row, j] = s * (inp[row, j] - m) * weight[j] + bias[j]
    mean[row] = m
    rstd[row] = s


# ---- bitonic sort's compare-exchange step (NVIDIA cuda-samples 2_Concepts_and_Techniques/sortingNetworks,
# the global-memory bitonicMergeGlobal step, i ^ j partners): a data-dependent permutation -----------------------


@gk.kernel
def bitonic_step(a, j, k):
    i = gk.tid()
    partner = i ^ j
    if partner > i:
        ascending = (i & k) == 0
        if (a[i] > a[partner]) == ascending:
            a[i], a[partner] = a[partner], a[i]

