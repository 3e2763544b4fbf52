"""Session 52's fifth round of ported kernels, part one: particle and solid mechanics as DiffTaichi, NVIDIA Warp
and the CUDA samples write them (MPM's particle-to-grid and grid-to-particle transfers with quadratic B-spline
weights from floor(), springs scattered to both ends, the wave example's clamped samples, neo-Hookean tetrahedra
with a 3x3 determinant and inverse in local arrays, a sphere-traced SDF, all-pairs n-body in tiles, Hertzian
contact), and DiffTaichi smoke's pressure projection as a program. Written here from the algorithms of the files
cited; used by tests/library/test_ported_hpc5.py (inputs and NumPy references in ported_hpc5_cases.py)."""

import math

import gradkern as gk

# ---- DiffTaichi / Taichi mpm88 (taichi python/taichi/examples/simulation/mpm88.py: substep, its P2G loop): a
# thread per particle, base cell from floor(x / dx - 0.5), quadratic B-spline weights in a local array, the APIC
# momentum and the stress scattered to the 3 x 3 nodes around it by atomics ---------------------------------------


@gk.kernel
def mpm88_p2g(x, v, C, J, grid_v, grid_m, dx, dt, p_vol, p_mass, E):
    p = gk.tid()
    bx = int(math.floor(x[p, 0] / dx - 0.5))
    by = int(math.floor(x[p, 1] / dx - 0.5))
    fx = x[p, 0] / dx - bx
    fy = x[p, 1] / dx - by
    w = gk.local((3, 2), gk.float64)
    w[0, 0] = 0.5 * (1.5 - fx) ** 2
    w[1, 0] = 0.75 - (fx - 1.0) ** 2
    w[2, 0] = 0.5 * (fx - 0.5) ** 2
    w[0, 1] = 0.5 * (1.5 - fy) ** 2
    w[1, 1] = 0.75 - (fy - 1.0) ** 2
    w[2, 1] = 0.5 * (fy - 0.5) ** 2
    stress = -dt * 4.0 * E * p_vol * (J[p] - 1.0) / (dx * dx)
    a00 = stress + p_mass * C[p, 0, 0]
    a01 = p_mass * C[p, 0, 1]
    a10 = p_mass * C[p, 1, 0]
    a11 = stress + p_mass * C[p, 1, 1]
    for i in range(3):
        for j in range(3):
            d0 = (i - fx) * dx
            d1 = (j - fy) * dx
            weight = w[i, 0] * w[j, 1]
            gk.atomic_add(grid_v, (bx + i, by + j, 0), weight * (p_mass * v[p, 0] + a00 * d0 + a01 * d1))
            gk.atomic_add(grid_v, (bx + i, by + j, 1), weight * (p_mass * v[p, 1] + a10 * d0 + a11 * d1))
            gk.atomic_add(grid_m, (bx + i, by + j), weight * p_mass)


# ---- the same file's G2P loop: the grid velocity gathered back with the same weights, the affine matrix C from
# the outer product with the offset, the particle moved and its volume ratio J updated, all in place --------------


@gk.kernel
def mpm88_g2p(x, v, C, J, grid_v, dx, dt):
    p = gk.tid()
    bx = int(math.floor(x[p, 0] / dx - 0.5))
    by = int(math.floor(x[p, 1] / dx - 0.5))
    fx = x[p, 0] / dx - bx
    fy = x[p, 1] / dx - by
    wx = gk.local((3,), gk.float64)
    wy = gk.local((3,), gk.float64)
    wx[0] = 0.5 * (1.5 - fx) ** 2
    wx[1] = 0.75 - (fx - 1.0) ** 2
    wx[2] = 0.5 * (fx - 0.5) ** 2
    wy[0] = 0.5 * (1.5 - fy) ** 2
    wy[1] = 0.75 - (fy - 1.0) ** 2
    wy[2] = 0.5 * (fy - 0.5) ** 2
    nv0 = 0.0
    nv1 = 0.0
    c00 = 0.0
    c01 = 0.0
    c10 = 0.0
    c11 = 0.0
    for i in range(3):
        for j in range(3):
            d0 = i - fx
            d1 = j - fy
            weight = wx[i] * wy[j]
            g0 = grid_v[bx + i, by + j, 0]
            g1 = grid_v[bx + i, by + j, 1]
            nv0 += weight * g0
            nv1 += weight * g1
            c00 += 4.0 * weight * g0 * d0 / dx
            c01 += 4.0 * weight * g0 * d1 / dx
            c10 += 4.0 * weight * g1 * d0 / dx
            c11 += 4.0 * weight * g1 * d1 / dx
    v[p, 0] = nv0
    v[p, 1] = nv1
    x[p, 0] += dt * nv0
    x[p, 1] += dt * nv1
    J[p] *= 1.0 + dt * (c00 + c11)
    C[p, 0, 0] = c00
    C[p, 0, 1] = c01
    C[p, 1, 0] = c10
    C[p, 1, 1] = c11


# ---- DiffTaichi mass_spring (difftaichi examples/mass_spring.py: apply_spring_force): a thread per spring, its
# actuated rest length, the impulse added to the velocity increment of both ends by atomics ----------------------


@gk.kernel
def mass_spring_force(x, v_inc, anchor_a, anchor_b, rest, actuation, act, stiffness, dt):
    i = gk.tid()
    a = anchor_a[i]
    b = anchor_b[i]
    d0 = x[a, 0] - x[b, 0]
    d1 = x[a, 1] - x[b, 1]
    length = math.sqrt(d0 * d0 + d1 * d1) + 1e-4
    target = rest[i] * (1.0 + actuation[i] * act[i])
    impulse = dt * (length - target) * stiffness / length
    gk.atomic_add(v_inc, (a, 0), -impulse * d0)
    gk.atomic_add(v_inc, (a, 1), -impulse * d1)
    gk.atomic_add(v_inc, (b, 0), impulse * d0)
    gk.atomic_add(v_inc, (b, 1), impulse * d1)


# ---- NVIDIA Warp cloth springs (warp/sim/integrator_euler.py: eval_springs): indices interleaved in one array,
# per-spring stiffness and damping, vec3 loads, the force subtracted at one end and added at the other -----------


@gk.kernel
def warp_springs(x, v, spring_indices, rest, ke, kd, f):
    tid = gk.tid()
    i = spring_indices[tid * 2 + 0]
    j = spring_indices[tid * 2 + 1]
    xij = gk.load_vec3(x, i) - gk.load_vec3(x, j)
    vij = gk.load_vec3(v, i) - gk.load_vec3(v, j)
    ell = gk.length(xij)
    l_inv = 1.0 / ell
    d = xij * l_inv
    c = ell - rest[tid]
    dcdt = gk.dot(d, vij)
    fs = d * (ke[tid] * c + kd[tid] * dcdt)
    gk.atomic_add(f, (i, 0), -fs.x)
    gk.atomic_add(f, (i, 1), -fs.y)
    gk.atomic_add(f, (i, 2), -fs.z)
    gk.atomic_add(f, (j, 0), fs.x)
    gk.atomic_add(f, (j, 1), fs.y)
    gk.atomic_add(f, (j, 2), fs.z)


# ---- NVIDIA Warp wave (warp/examples/core/example_wave.py: sample, laplacian, wave_solve): a flat grid, samples
# at clamped coordinates through @gk.func helpers, the new height written over the previous one ---------------


@gk.func
def wave_sample(f, x, y, width, height):
    xc = gk.clamp(x, 0, width - 1)
    yc = gk.clamp(y, 0, height - 1)
    return f[yc * width + xc]


@gk.func
def wave_laplacian(f, x, y, width, height):
    ddx = wave_sample(f, x + 1, y, width, height) - 2.0 * wave_sample(f, x, y, width, height) + \
        wave_sample(f, x - 1, y, width, height)
    ddy = wave_sample(f, x, y + 1, width, height) - 2.0 * wave_sample(f, x, y, width, height) + \
        wave_sample(f, x, y - 1, width, height)
    return ddx + ddy


@gk.kernel
def wave_solve(hprevious, hcurrent, width, height, inv_cell, k_speed, k_damp, dt):
    tid = gk.tid()
    y = tid // width
    x = tid - y * width
    lap = wave_laplacian(hcurrent, x, y, width, height) * inv_cell * inv_cell
    c1 = hcurrent[tid]
    h1 = hprevious[tid]
    hprevious[tid] = 2.0 * c1 - h1 + dt * dt * (k_speed * lap - k_damp * (c1 - h1))


# ---- NVIDIA Warp FEM tetrahedra (warp/sim/integrator_euler.py: eval_tetrahedra), with the classic compressible
# neo-Hookean energy: F = Ds Dm^-1 in a local 3 x 3, J = det F, F^-T by cofactors, P = mu (F - F^-T) +
# lambda log J F^-T, the forces -V P Dm^-T scattered to the four nodes by atomics; the energy per element ------


@gk.kernel
def neo_hookean_tet(x, indices, dm_inv, volume, mu, lam, f, energy):
    t = gk.tid()
    n0 = indices[t, 0]
    ds = gk.local((3, 3), gk.float64)
    for a in range(3):
        for c in range(3):
            ds[a, c] = x[indices[t, c + 1], a] - x[n0, a]
    F = gk.local((3, 3), gk.float64)
    for a in range(3):
        for b in range(3):
            s = 0.0
            for c in range(3):
                s += ds[a, c] * dm_inv[t, c, b]
            F[a, b] = s
    cof = gk.local((3, 3), gk.float64)
    cof[0, 0] = F[1, 1] * F[2, 2] - F[1, 2] * F[2, 1]
    cof[0, 1] = F[1, 2] * F[2, 0] - F[1, 0] * F[2, 2]
    cof[0, 2] = F[1, 0] * F[2, 1] - F[1, 1] * F[2, 0]
    cof[1, 0] = F[0, 2] * F[2, 1] - F[0, 1] * F[2, 2]
    cof[1, 1] = F[0, 0] * F[2, 2] - F[0, 2] * F[2, 0]
    cof[1, 2] = F[0, 1] * F[2, 0] - F[0, 0] * F[2, 1]
    cof[2, 0] = F[0, 1] * F[1, 2] - F[0, 2] * F[1, 1]
    cof[2, 1] = F[0, 2] * F[1, 0] - F[0, 0] * F[1, 2]
    cof[2, 2] = F[0, 0] * F[1, 1] - F[0, 1] * F[1, 0]
    det = F[0, 0] * cof[0, 0] + F[0, 1] * cof[0, 1] + F[0, 2] * cof[0, 2]
    logj = math.log(det)
    ic = 0.0
    P = gk.local((3, 3), gk.float64)
    for a in range(3):
        for b in range(3):
            ic += F[a, b] * F[a, b]
            P[a, b] = mu * (F[a, b] - cof[a, b] / det) + lam * logj * cof[a, b] / det
    energy[t] = volume[t] * (0.5 * mu * (ic - 3.0) - mu * logj + 0.5 * lam * logj * logj)
    for a in range(3):
        f0 = 0.0
        for c in range(3):
            h = 0.0
            for b in range(3):
                h -= volume[t] * P[a, b] * dm_inv[t, c, b]
            gk.atomic_add(f, (indices[t, c + 1], a), h)
            f0 -= h
        gk.atomic_add(f, (n0, a), f0)


# ---- NVIDIA Warp ray-marching (warp/examples/core/example_raymarch.py: sdf, normal, draw): a sphere and a
# ground plane joined by min, a fixed number of sphere-tracing steps, the normal by central differences of the
# SDF and a clamped Lambert shade ---------------------------------------------------------------------------------


@gk.func
def scene_sdf(px, py, pz, cx, cy, cz, radius, ground):
    sphere = math.sqrt((px - cx) ** 2 + (py - cy) ** 2 + (pz - cz) ** 2) - radius
    return min(sphere, py - ground)


@gk.kernel
def sdf_raymarch(ray_dir, center, radius, ground, depth, shade, steps):
    i = gk.tid()
    dx = ray_dir[i, 0]
    dy = ray_dir[i, 1]
    dz = ray_dir[i, 2]
    t = 0.0
    for s in range(steps):
        t += scene_sdf(t * dx, t * dy, t * dz, center[0], center[1], center[2], radius, ground)
    px = t * dx
    py = t * dy
    pz = t * dz
    eps = 1e-3
    nx = scene_sdf(px + eps, py, pz, center[0], center[1], center[2], radius, ground) - \
        scene_sdf(px - eps, py, pz, center[0], center[1], center[2], radius, ground)
    ny = scene_sdf(px, py + eps, pz, center[0], center[1], center[2], radius, ground) - \
        scene_sdf(px, py - eps, pz, center[0], center[1], center[2], radius, ground)
    nz = scene_sdf(px, py, pz + eps, center[0], center[1], center[2], radius, ground) - \
        scene_sdf(px, py, pz - eps, center[0], center[1], center[2], radius, ground)
    inv = 1.0 / math.sqrt(nx * nx + ny * ny + nz * nz)
    depth[i] = t
    shade[i] = max(0.0, (0.3 * nx - 0.8 * ny + 0.5 * nz) * inv)


# ---- CUDA samples nbody (Samples/5_Domain_Specific/nbody/bodysystemcuda.cu: bodyBodyInteraction,
# computeBodyAccel, integrateBodies): float4 positions with the mass in w, softening, rsqrt, the all-pairs loop in
# tiles of TILE bodies, then the damped velocity and the position written to new arrays ------------------------

TILE = 4


@gk.func
def body_body(px, py, pz, q, pos, soft2):
    rx = pos[q, 0] - px
    ry = pos[q, 1] - py
    rz = pos[q, 2] - pz
    inv_dist = 1.0 / math.sqrt(rx * rx + ry * ry + rz * rz + soft2)
    return pos[q, 3] * inv_dist * inv_dist * inv_dist


@gk.kernel
def nbody_integrate(new_pos, new_vel, old_pos, old_vel, dt, damping, soft2, num_tiles):
    index = gk.tid()
    px = old_pos[index, 0]
    py = old_pos[index, 1]
    pz = old_pos[index, 2]
    ax = 0.0
    ay = 0.0
    az = 0.0
    for tile in range(num_tiles):
        for counter in range(TILE):
            q = tile * TILE + counter
            s = body_body(px, py, pz, q, old_pos, soft2)
            ax += (old_pos[q, 0] - px) * s
            ay += (old_pos[q, 1] - py) * s
            az += (old_pos[q, 2] - pz) * s
    vx = (old_vel[index, 0] + ax * dt) * damping
    vy = (old_vel[index, 1] + ay * dt) * damping
    vz = (old_vel[index, 2] + az * dt) * damping
    new_pos[index, 0] = px + vx * dt
    new_pos[index, 1] = py + vy * dt
    new_pos[index, 2] = pz + vz * dt
    new_pos[index, 3] = old_pos[index, 3]
    new_vel[index, 0] = vx
    new_vel[index, 1] = vy
    new_vel[index, 2] = vz
    new_vel[index, 3] = old_vel[index, 3]


# ---- DEM Hertzian contact (LAMMPS src/GRANULAR/pair_gran_hertz_history.cpp: compute, normal part, no history):
# a half neighbour list, overlap = max(0, r_i + r_j - r), the force kn overlap^1.5 sqrt(reff) less the damping
# of the normal relative velocity, added to both particles by atomics (Newton's third law) ------------------------


@gk.kernel
def dem_hertz(x, v, radius, mass, pair_i, pair_j, kn, gamma_n, f):
    p = gk.tid()
    i = pair_i[p]
    j = pair_j[p]
    d0 = x[i, 0] - x[j, 0]
    d1 = x[i, 1] - x[j, 1]
    d2 = x[i, 2] - x[j, 2]
    r = math.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
    overlap = max(0.0, radius[i] + radius[j] - r)
    reff = radius[i] * radius[j] / (radius[i] + radius[j])
    meff = mass[i] * mass[j] / (mass[i] + mass[j])
    vn = ((v[i, 0] - v[j, 0]) * d0 + (v[i, 1] - v[j, 1]) * d1 + (v[i, 2] - v[j, 2]) * d2) / r
    fn = kn * overlap ** 1.5 * math.sqrt(reff) - gamma_n * meff * vn * overlap
    gk.atomic_add(f, (i, 0), fn * d0 / r)
    gk.atomic_add(f, (i, 1), fn * d1 / r)
    gk.atomic_add(f, (i, 2), fn * d2 / r)
    gk.atomic_add(f, (j, 0), -fn * d0 / r)
    gk.atomic_add(f, (j, 1), -fn * d1 / r)
    gk.atomic_add(f, (j, 2), -fn * d2 / r)


# ---- DiffTaichi smoke (difftaichi examples/smoke_taichi.py: divergence, pressure Jacobi iterations,
# subtract_gradient): periodic neighbours by %, the pressure ping-ponged between two buffers, a program ---------


@gk.kernel
def smoke_divergence(vx, vy, div):
    i, j = gk.tid()
    n = vx.shape[0]
    div[i, j] = -0.5 * (vx[(i + 1) % n, j] - vx[(i + n - 1) % n, j] + vy[i, (j + 1) % n] - vy[i, (j + n - 1) % n])


@gk.kernel
def smoke_jacobi(p, pn, div):
    i, j = gk.tid()
    n = p.shape[0]
    pn[i, j] = 0.25 * (p[(i + 1) % n, j] + p[(i + n - 1) % n, j] + p[i, (j + 1) % n] + p[i, (j + n - 1) % n]
                       + div[i, j])


@gk.kernel
def smoke_subtract_gradient(vx, vy, p):
    i, j = gk.tid()
    n = p.shape[0]
    vx[i, j] -= 0.5 * (p[(i + 1) % n, j] - p[(i + n - 1) % n, j])
    vy[i, j] -= 0.5 * (p[i, (j + 1) % n] - p[i, (j + n - 1) % n])


def smoke_project(vx, vy, div, p, pn, iterations, backend=None):
    """The projection step: divergence, `iterations` pairs of Jacobi sweeps (p -> pn -> p), the pressure
    gradient subtracted from the velocity."""
    n = vx.shape
    gk.launch(smoke_divergence, n, vx, vy, div, backend=backend)
    for _ in range(iterations):
        gk.launch(smoke_jacobi, n, p, pn, div, backend=backend)
        gk.launch(smoke_jacobi, n, pn, p, div, backend=backend)
    gk.launch(smoke_subtract_gradient, n, vx, vy, p, backend=backend)
