"""Session 57's tenth round of ported kernels, part two: Taichi's position-based fluids (the density constraint's
lambdas, then the position deltas through a -1-padded neighbour table left by `break`), the CUDA samples'
particles (collideD's 27 neighbouring cells through cellStart/cellEnd, the hash wrapped by `&`, the velocity
written through the sort's permutation; integrate_functor's wall bounces), NAS MG's rprj3 and interp (the
restriction and the trilinear prolongation, `2 * j - d` index arithmetic, the Fortran's row buffers recomputed)
and NAS FT's compute_indexmap and evolve (wrapped frequencies by `%`, complex pairs). Written here from the
algorithms of the files cited; used by tests/library/test_ported_hpc10.py."""

import math

import gradkern as gk

# ---- Taichi position-based fluids (taichi-dev/taichi python/taichi/examples/simulation/pbf2d.py: substep's
# compute lambdas, compute position deltas, apply position deltas; poly6_value, spiky_gradient, compute_scorr).
# spiky_gradient takes and returns a vector in Taichi; a @gk.func takes numbers and arrays, so it takes the
# components and returns two values (kernel-language.md "Tenth round") ----------------------------------------

H_ = 1.1
MASS = 1.0
RHO0 = 1.0
LAMBDA_EPSILON = 100.0
CORR_DELTAQ_COEFF = 0.3
CORRK = 0.001
POLY6_FACTOR = 315.0 / 64.0 / math.pi
SPIKY_GRAD_FACTOR = -45.0 / math.pi


@gk.func
def poly6_value(s, h):
    result = 0.0
    if 0 < s and s < h:
        x = (h * h - s * s) / (h * h * h)
        result = POLY6_FACTOR * x * x * x
    return result


@gk.func
def spiky_gradient(rx, ry, h):
    r = gk.vec2(rx, ry)
    result = gk.vec2(0.0, 0.0)
    r_len = gk.length(r)
    if 0 < r_len and r_len < h:
        x = (h - r_len) / (h * h * h)
        g_factor = SPIKY_GRAD_FACTOR * x * x
        result = r * g_factor / r_len
    return result.x, result.y


@gk.func
def compute_scorr(rx, ry):
    x = poly6_value(math.sqrt(rx * rx + ry * ry), H_) / poly6_value(CORR_DELTAQ_COEFF * H_, H_)
    x = x * x
    x = x * x
    return (-CORRK) * x


@gk.kernel
def pbf_lambdas(positions, particle_num_neighbors, particle_neighbors, lambdas):
    p_i = gk.tid()
    pos_i = gk.load_vec2(positions, p_i)
    grad_i = gk.vec2(0.0, 0.0)
    sum_gradient_sqr = 0.0
    density_constraint = 0.0
    for j in range(particle_num_neighbors[p_i]):
        p_j = particle_neighbors[p_i, j]
        if p_j < 0:
            break
        pos_ji = pos_i - gk.load_vec2(positions, p_j)
        gx, gy = spiky_gradient(pos_ji.x, pos_ji.y, H_)
        grad_j = gk.vec2(gx, gy)
        grad_i += grad_j
        sum_gradient_sqr += gk.dot(grad_j, grad_j)
        density_constraint += poly6_value(gk.length(pos_ji), H_)
    density_constraint = (MASS * density_constraint / RHO0) - 1.0
    sum_gradient_sqr += gk.dot(grad_i, grad_i)
    lambdas[p_i] = (-density_constraint) / (sum_gradient_sqr + LAMBDA_EPSILON)


@gk.kernel
def pbf_position_deltas(positions, particle_num_neighbors, particle_neighbors, lambdas, position_deltas):
    p_i = gk.tid()
    pos_i = gk.load_vec2(positions, p_i)
    lambda_i = lambdas[p_i]
    pos_delta_i = gk.vec2(0.0, 0.0)
    for j in range(particle_num_neighbors[p_i]):
        p_j = particle_neighbors[p_i, j]
        if p_j < 0:
            break
        lambda_j = lambdas[p_j]
        pos_ji = pos_i - gk.load_vec2(positions, p_j)
        scorr_ij = compute_scorr(pos_ji.x, pos_ji.y)
        gx, gy = spiky_gradient(pos_ji.x, pos_ji.y, H_)
        pos_delta_i += (lambda_i + lambda_j + scorr_ij) * gk.vec2(gx, gy)
    pos_delta_i /= RHO0
    gk.store_vec2(position_deltas, p_i, pos_delta_i)


@gk.kernel
def pbf_apply(positions, position_deltas):
    i = gk.tid()
    gk.store_vec2(positions, i, gk.load_vec2(positions, i) + gk.load_vec2(position_deltas, i))


def pbf_substeps(positions, particle_num_neighbors, particle_neighbors, lambdas, position_deltas, iters,
                 backend=None):
    """`iters` of substep's three loops (the neighbour table built once, as prologue builds it per frame)."""
    n = positions.shape[0]
    for _ in range(iters):
        gk.launch(pbf_lambdas, n, positions, particle_num_neighbors, particle_neighbors, lambdas, backend=backend)
        gk.launch(pbf_position_deltas, n, positions, particle_num_neighbors, particle_neighbors, lambdas,
                  position_deltas, backend=backend)
        gk.launch(pbf_apply, n, positions, position_deltas, backend=backend)


# ---- CUDA samples particles (NVIDIA/cuda-samples Samples/2_Concepts_and_Techniques/particles/
# particles_kernel_impl.cuh: calcGridPos, calcGridHash, collideSpheres, collideCell, collideD; integrate_functor).
# The constant-memory SimParams as a float array `params` (columns below) and the grid size `gsize` (a power of
# two per axis, as the sample's hash requires); positions and velocities float4 rows; an empty cell's start is
# 0xffffffff, as the sample's cudaMemset leaves it ----------------------------------------------------------

SPRING, DAMPING, SHEAR, ATTRACTION, PARTICLE_RADIUS, COLLIDER_X, COLLIDER_Y, COLLIDER_Z, COLLIDER_RADIUS = range(9)
ORIGIN_X, ORIGIN_Y, ORIGIN_Z, CELL_X, CELL_Y, CELL_Z = range(9, 15)
GRAVITY_X, GRAVITY_Y, GRAVITY_Z, GLOBAL_DAMPING, BOUNDARY_DAMPING = range(15, 20)
EMPTY = 0xffffffff


@gk.func
def calc_grid_hash(gx, gy, gz, gsize):
    gx = gx & (gsize[0] - 1)
    gy = gy & (gsize[1] - 1)
    gz = gz & (gsize[2] - 1)
    return gz * gsize[1] * gsize[0] + gy * gsize[0] + gx


@gk.func
def collide_spheres(ax, ay, az, bx, by, bz, vax, vay, vaz, vbx, vby, vbz, radius_a, radius_b, attraction, params):
    pos_a = gk.vec3(ax, ay, az)
    pos_b = gk.vec3(bx, by, bz)
    vel_a = gk.vec3(vax, vay, vaz)
    vel_b = gk.vec3(vbx, vby, vbz)
    rel_pos = pos_b - pos_a
    dist = gk.length(rel_pos)
    collide_dist = radius_a + radius_b
    force = gk.vec3(0.0, 0.0, 0.0)
    if dist < collide_dist:
        norm = rel_pos / dist
        rel_vel = vel_b - vel_a
        tan_vel = rel_vel - (gk.dot(rel_vel, norm) * norm)
        force = -params[SPRING] * (collide_dist - dist) * norm
        force += params[DAMPING] * rel_vel
        force += params[SHEAR] * tan_vel
        force += attraction * rel_pos
    return force.x, force.y, force.z


@gk.kernel
def collide_d(new_vel, old_pos, old_vel, grid_particle_index, cell_start, cell_end, num_particles, params, gsize):
    index = gk.tid()
    if index >= num_particles:
        return
    pos = gk.vec3(old_pos[index, 0], old_pos[index, 1], old_pos[index, 2])
    vel = gk.vec3(old_vel[index, 0], old_vel[index, 1], old_vel[index, 2])
    gx = int(math.floor((pos.x - params[ORIGIN_X]) / params[CELL_X]))
    gy = int(math.floor((pos.y - params[ORIGIN_Y]) / params[CELL_Y]))
    gz = int(math.floor((pos.z - params[ORIGIN_Z]) / params[CELL_Z]))
    force = gk.vec3(0.0, 0.0, 0.0)
    for z in range(-1, 2):
        for y in range(-1, 2):
            for x in range(-1, 2):
                grid_hash = calc_grid_hash(gx + x, gy + y, gz + z, gsize)
                start_index = cell_start[grid_hash]
                if start_index != EMPTY:
                    end_index = cell_end[grid_hash]
                    for j in range(start_index, end_index):
                        if j != index:
                            pos2 = gk.vec3(old_pos[j, 0], old_pos[j, 1], old_pos[j, 2])
                            vel2 = gk.vec3(old_vel[j, 0], old_vel[j, 1], old_vel[j, 2])
                            fx, fy, fz = collide_spheres(pos.x, pos.y, pos.z, pos2.x, pos2.y, pos2.z, vel.x, vel.y,
                                                         vel.z, vel2.x, vel2.y, vel2.z, params[PARTICLE_RADIUS],
                                                         params[PARTICLE_RADIUS], params[ATTRACTION], params)
                            force += gk.vec3(fx, fy, fz)
    cx, cy, cz = collide_spheres(pos.x, pos.y, pos.z, params[COLLIDER_X], params[COLLIDER_Y], params[COLLIDER_Z],
                                 vel.x, vel.y, vel.z, 0.0, 0.0, 0.0, params[PARTICLE_RADIUS],
                                 params[COLLIDER_RADIUS], 0.0, params)
    force += gk.vec3(cx, cy, cz)
    original_index = grid_particle_index[index]
    new_vel[original_index, 0] = vel.x + force.x
    new_vel[original_index, 1] = vel.y + force.y
    new_vel[original_index, 2] = vel.z + force.z
    new_vel[original_index, 3] = 0.0


@gk.kernel
def integrate_system(pos, vel, delta_time, params):
    i = gk.tid()
    p = gk.vec3(pos[i, 0], pos[i, 1], pos[i, 2])
    v = gk.vec3(vel[i, 0], vel[i, 1], vel[i, 2])
    v += gk.vec3(params[GRAVITY_X], params[GRAVITY_Y], params[GRAVITY_Z]) * delta_time
    v *= params[GLOBAL_DAMPING]
    p += v * delta_time
    r = params[PARTICLE_RADIUS]
    if p.x > 1.0 - r:
        p.x = 1.0 - r
        v.x *= params[BOUNDARY_DAMPING]
    if p.x < -1.0 + r:
        p.x = -1.0 + r
        v.x *= params[BOUNDARY_DAMPING]
    if p.y > 1.0 - r:
        p.y = 1.0 - r
        v.y *= params[BOUNDARY_DAMPING]
    if p.z > 1.0 - r:
        p.z = 1.0 - r
        v.z *= params[BOUNDARY_DAMPING]
    if p.z < -1.0 + r:
        p.z = -1.0 + r
        v.z *= params[BOUNDARY_DAMPING]
    if p.y < -1.0 + r:
        p.y = -1.0 + r
        v.y *= params[BOUNDARY_DAMPING]
    pos[i, 0] = p.x
    pos[i, 1] = p.y
    pos[i, 2] = p.z
    vel[i, 0] = v.x
    vel[i, 1] = v.y
    vel[i, 2] = v.z


# ---- NAS MG (NPB3.x MG/mg.f: rprj3, interp's general branch). Fortran's r(i1, i2, i3) is r[i3, i2, i1] here,
# 0-based: the Fortran's i = 2 j - d becomes 2 j + 1 - d. rprj3's row buffers x1(i1), y1(i1) over a run-time
# row length are recomputed where they are read (a local array takes constant indices), as interp's z1, z2, z3;
# a thread per coarse point -------------------------------------------------------------------------------------


@gk.func
def rprj3_x1(r, i1, i2, i3):
    return r[i3, i2 - 1, i1] + r[i3, i2 + 1, i1] + r[i3 - 1, i2, i1] + r[i3 + 1, i2, i1]


@gk.func
def rprj3_y1(r, i1, i2, i3):
    return r[i3 - 1, i2 - 1, i1] + r[i3 + 1, i2 - 1, i1] + r[i3 - 1, i2 + 1, i1] + r[i3 + 1, i2 + 1, i1]


@gk.kernel
def rprj3(r, m1k, m2k, m3k, s):
    t3, t2, t1 = gk.tid()
    j3 = t3 + 1
    j2 = t2 + 1
    j1 = t1 + 1
    d1 = 2 if m1k == 3 else 1
    d2 = 2 if m2k == 3 else 1
    d3 = 2 if m3k == 3 else 1
    i3 = 2 * j3 + 1 - d3
    i2 = 2 * j2 + 1 - d2
    i1 = 2 * j1 + 1 - d1
    y2 = r[i3 - 1, i2 - 1, i1] + r[i3 + 1, i2 - 1, i1] + r[i3 - 1, i2 + 1, i1] + r[i3 + 1, i2 + 1, i1]
    x2 = r[i3, i2 - 1, i1] + r[i3, i2 + 1, i1] + r[i3 - 1, i2, i1] + r[i3 + 1, i2, i1]
    s[j3, j2, j1] = (0.5 * r[i3, i2, i1]
                     + 0.25 * (r[i3, i2, i1 - 1] + r[i3, i2, i1 + 1] + x2)
                     + 0.125 * (rprj3_x1(r, i1 - 1, i2, i3) + rprj3_x1(r, i1 + 1, i2, i3) + y2)
                     + 0.0625 * (rprj3_y1(r, i1 - 1, i2, i3) + rprj3_y1(r, i1 + 1, i2, i3)))


@gk.kernel
def interp(z, u):
    i3, i2, i1 = gk.tid()
    z1 = z[i3, i2 + 1, i1] + z[i3, i2, i1]
    z1p = z[i3, i2 + 1, i1 + 1] + z[i3, i2, i1 + 1]
    z2 = z[i3 + 1, i2, i1] + z[i3, i2, i1]
    z2p = z[i3 + 1, i2, i1 + 1] + z[i3, i2, i1 + 1]
    z3 = z[i3 + 1, i2 + 1, i1] + z[i3 + 1, i2, i1] + z1
    z3p = z[i3 + 1, i2 + 1, i1 + 1] + z[i3 + 1, i2, i1 + 1] + z1p
    u[2 * i3, 2 * i2, 2 * i1] += z[i3, i2, i1]
    u[2 * i3, 2 * i2, 2 * i1 + 1] += 0.5 * (z[i3, i2, i1 + 1] + z[i3, i2, i1])
    u[2 * i3, 2 * i2 + 1, 2 * i1] += 0.5 * z1
    u[2 * i3, 2 * i2 + 1, 2 * i1 + 1] += 0.25 * (z1 + z1p)
    u[2 * i3 + 1, 2 * i2, 2 * i1] += 0.5 * z2
    u[2 * i3 + 1, 2 * i2, 2 * i1 + 1] += 0.25 * (z2 + z2p)
    u[2 * i3 + 1, 2 * i2 + 1, 2 * i1] += 0.25 * z3
    u[2 * i3 + 1, 2 * i2 + 1, 2 * i1 + 1] += 0.125 * (z3 + z3p)


# ---- NAS FT (NPB3.x FT/ft.f: compute_indexmap, evolve; the main loop `do iter = 1, niter: call evolve(u0, u1,
# twiddle, ...)`, its FFTs and checksums left to the host). u0, u1 complex as a trailing axis (re, im); the
# frequencies wrapped by `mod(i - 1 + n/2, n) - n/2`; alpha Active ----------------------------------------------


@gk.kernel
def compute_indexmap(twiddle, nx, ny, nz, alpha):
    k, j, i = gk.tid()
    ap = -4.0 * alpha * math.pi * math.pi
    kk = (k + nz // 2) % nz - nz // 2
    kk2 = kk * kk
    jj = (j + ny // 2) % ny - ny // 2
    kj2 = jj * jj + kk2
    ii = (i + nx // 2) % nx - nx // 2
    twiddle[k, j, i] = math.exp(ap * float(ii * ii + kj2))


@gk.kernel
def evolve(u0, u1, twiddle):
    k, j, i = gk.tid()
    u0[k, j, i, 0] = u0[k, j, i, 0] * twiddle[k, j, i]
    u0[k, j, i, 1] = u0[k, j, i, 1] * twiddle[k, j, i]
    u1[k, j, i, 0] = u0[k, j, i, 0]
    u1[k, j, i, 1] = u0[k, j, i, 1]


def ft_evolve(u0, u1, twiddle, alpha, niter, backend=None):
    """compute_indexmap, then `niter` evolutions (each an iteration of FT's loop before its inverse FFT)."""
    nz, ny, nx = twiddle.shape
    gk.launch(compute_indexmap, twiddle.shape, twiddle, nx, ny, nz, alpha, backend=backend)
    for _ in range(niter):
        gk.launch(evolve, twiddle.shape, u0, u1, twiddle, backend=backend)
