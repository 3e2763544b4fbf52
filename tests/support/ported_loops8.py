"""An eighth round of third-party host loops ported as programs (session 55; docs/programs.md, "Ported host loops"),
part 1: the simulation loops of NVIDIA Warp's and Taichi's examples and two NVIDIA cuda-samples drivers (Warp's
wave and SPH steps, Taichi's mpm88 substep loop, cuda-samples FDTD3d's toggled buffers and reduction's multi-pass
driver). Written here from the drivers cited, as a user porting them writes them; the kernels Warp's and Taichi's
examples launch are session 52's ports where they exist (tests/support/ported_hpc5.py). Used by
tests/program/test_ported_loops8.py."""

import math

import numpy as np

import gradkern as gk
from support.ported_hpc5 import mpm88_g2p, mpm88_p2g, wave_solve


# -- NVIDIA Warp warp/examples/core/example_wave.py (Example.step: `for s in range(sim_substeps): cx = w / 2 +
# math.sin(sim_time) * w / 3; ...; launch(wave_displace, [grid0, grid1, ..., cx, cy, 10.0, grid_displace,
# -math.pi * 0.5]); launch(wave_solve, [grid0, grid1, ...]); (grid0, grid1) = (grid1, grid0); sim_time +=
# sim_dt`, then grid_update copies grid0's heights into the vertices): the displacement centre moves with the host's
# time, the names swap; k_speed and grid_displace Active, k_damp non-zero (Warp's is 0) so every term is reached ----
@gk.kernel
def wave_displace(hcurrent, hprevious, width, height, center_x, center_y, r, mag, t):
    tid = gk.tid()
    y = tid // width
    x = tid - y * width
    dx = float(x) - center_x
    dy = float(y) - center_y
    if dx * dx + dy * dy < r * r:
        h = mag * math.sin(t)
        hcurrent[tid] = h
        hprevious[tid] = h


WAVE = dict(width=6, height=5, substeps=4, dt=0.02, inv_cell=10.0, k_damp=0.3, radius=1.3)


def _wave_centre(sim_time, width, height):
    return width / 2 + math.sin(sim_time) * width / 3, height / 2 + math.cos(sim_time) * height / 3


def warp_wave():
    """Warp's step as written: the swap of names and `sim_time += sim_dt` on the host, heights copied out."""
    c = WAVE

    def program(grid0, grid1, heights, k_speed, grid_displace):
        w, h = c["width"], c["height"]
        sim_time = 0.0
        for _ in range(c["substeps"]):
            cx, cy = _wave_centre(sim_time, w, h)
            gk.launch(wave_displace, w * h, grid0, grid1, w, h, cx, cy, c["radius"], grid_displace, -math.pi * 0.5)
            gk.launch(wave_solve, w * h, grid0, grid1, w, h, c["inv_cell"], k_speed, c["k_damp"], c["dt"])
            (grid0, grid1) = (grid1, grid0)
            sim_time += c["dt"]
        np.copyto(heights, grid0)  # grid_update: the vertices' heights from grid0 (a copy into a fresh argument)
    return program


def warp_wave_parity(loop):
    """The checkpointable spelling: each substep a function of s (buffers by s's parity, the time s * dt)."""
    c = WAVE

    def program(grid0, grid1, heights, k_speed, grid_displace):
        w, h = c["width"], c["height"]

        def substep(s):
            a, b = (grid0, grid1) if s % 2 == 0 else (grid1, grid0)
            cx, cy = _wave_centre(s * c["dt"], w, h)
            gk.launch(wave_displace, w * h, a, b, w, h, cx, cy, c["radius"], grid_displace, -math.pi * 0.5)
            gk.launch(wave_solve, w * h, a, b, w, h, c["inv_cell"], k_speed, c["k_damp"], c["dt"])
        loop(substep, c["substeps"])
        gk.copy(heights, grid0 if c["substeps"] % 2 == 0 else grid1)
    return program


def warp_wave_time_kept(loop):
    """Warp's `sim_time += sim_dt` kept in the closure across checkpointed substeps: a recomputed substep reads the
    time the last one left, so its centre (a launch's scalar argument) differs."""
    c = WAVE

    def program(grid0, grid1, heights, k_speed, grid_displace):
        w, h = c["width"], c["height"]
        sim_time = 0.0

        def substep(s):
            nonlocal sim_time
            a, b = (grid0, grid1) if s % 2 == 0 else (grid1, grid0)
            cx, cy = _wave_centre(sim_time, w, h)
            gk.launch(wave_displace, w * h, a, b, w, h, cx, cy, c["radius"], grid_displace, -math.pi * 0.5)
            gk.launch(wave_solve, w * h, a, b, w, h, c["inv_cell"], k_speed, c["k_damp"], c["dt"])
            sim_time += c["dt"]
        loop(substep, c["substeps"])
        gk.copy(heights, grid0)
    return program


# -- Taichi python/taichi/examples/simulation/mpm88.py (`for s in range(50): substep()`; substep's four offloaded
# loops: clear the grid, P2G, the grid update with gravity and the sticky walls, G2P): the clear as gk.fill, the
# transfers session 52's kernels, the grid update below; E (Young's modulus) Active -------------------------------
@gk.kernel
def mpm88_grid(grid_v, grid_m, dt, gravity, bound):
    i, j = gk.tid()
    n = grid_m.shape[0]
    m = grid_m[i, j]
    vx = grid_v[i, j, 0]
    vy = grid_v[i, j, 1]
    if m > 0.0:
        vx = vx / m
        vy = vy / m
    vy -= dt * gravity
    if i < bound and vx < 0.0:
        vx = 0.0
    if i > n - bound and vx > 0.0:
        vx = 0.0
    if j < bound and vy < 0.0:
        vy = 0.0
    if j > n - bound and vy > 0.0:
        vy = 0.0
    grid_v[i, j, 0] = vx
    grid_v[i, j, 1] = vy


MPM = dict(n_grid=10, dt=1e-3, gravity=9.8, bound=3, substeps=3)


def mpm88(loop):
    c = MPM

    def program(x, v, C, J, E):
        n_grid = c["n_grid"]
        dx = 1.0 / n_grid
        p_vol = (dx * 0.5) ** 2
        p_mass = p_vol * 1.0  # p_rho = 1
        grid_v = np.zeros((n_grid, n_grid, 2))
        grid_m = np.zeros((n_grid, n_grid))

        def substep(s):
            gk.fill(grid_v, 0.0)
            gk.fill(grid_m, 0.0)
            gk.launch(mpm88_p2g, x.shape[0], x, v, C, J, grid_v, grid_m, dx, c["dt"], p_vol, p_mass, E)
            gk.launch(mpm88_grid, (n_grid, n_grid), grid_v, grid_m, c["dt"], c["gravity"], c["bound"])
            gk.launch(mpm88_g2p, x.shape[0], x, v, C, J, grid_v, dx, c["dt"])
        loop(substep, c["substeps"])
    return program


# -- NVIDIA Warp warp/examples/core/example_sph.py (Example.step: `for _ in range(sim_step_to_frame_ratio):
# grid.build(x, smoothing_length); launch(compute_density); launch(get_acceleration); launch(apply_bounds);
# launch(kick); launch(drift)`), the normalisations host arithmetic in __init__: all pairs instead of the hash grid
# (its query only drops pairs beyond the smoothing length, where every kernel below is zero); dynamic_visc Active
# (through viscous_normalization, host arithmetic on it) ------------------------------------------------------------
@gk.kernel
def sph_density(x, rho, density_normalization, h):
    i = gk.tid()
    xi = gk.load_vec3(x, i)
    r = 0.0
    for j in range(x.shape[0]):
        d = xi - gk.load_vec3(x, j)
        q = h * h - gk.dot(d, d)
        r += max(q * q * q, 0.0)
    rho[i] = density_normalization * r


@gk.kernel
def sph_acceleration(x, v, rho, a, isotropic_exp, base_density, gravity, pressure_norm, viscous_norm, h):
    i = gk.tid()
    xi = gk.load_vec3(x, i)
    vi = gk.load_vec3(v, i)
    rho_i = rho[i]
    pressure = isotropic_exp * (rho_i - base_density)
    pf = gk.vec3(0.0, 0.0, 0.0)
    vf = gk.vec3(0.0, 0.0, 0.0)
    for j in range(x.shape[0]):
        if j != i:
            rho_j = rho[j]
            rel = gk.load_vec3(x, j) - xi
            dist = gk.length(rel)
            if dist < h:
                pf = pf - rel / dist * ((isotropic_exp * (rho_j - base_density) + pressure) / (2.0 * rho_j)) * \
                    (h - dist) * (h - dist)
                vf = vf + (gk.load_vec3(v, j) - vi) / rho_j * (h - dist)
    f = (pf * pressure_norm + vf * viscous_norm) / rho_i
    gk.store_vec3(a, i, gk.vec3(f.x, f.y + gravity, f.z))


@gk.kernel
def sph_bounds(x, v, damping, width, length):
    i = gk.tid()
    if x[i, 0] < 0.0:
        x[i, 0] = 0.0
        v[i, 0] = v[i, 0] * damping
    if x[i, 0] > width:
        x[i, 0] = width
        v[i, 0] = v[i, 0] * damping
    if x[i, 1] < 0.0:
        x[i, 1] = 0.0
        v[i, 1] = v[i, 1] * damping
    if x[i, 2] < 0.0:
        x[i, 2] = 0.0
        v[i, 2] = v[i, 2] * damping
    if x[i, 2] > length:
        x[i, 2] = length
        v[i, 2] = v[i, 2] * damping


@gk.kernel
def sph_kick(v, a, dt):
    i, k = gk.tid()
    v[i, k] = v[i, k] + a[i, k] * dt


@gk.kernel
def sph_drift(x, v, dt):
    i, k = gk.tid()
    x[i, k] = x[i, k] + v[i, k] * dt


SPH = dict(h=0.8, isotropic_exp=20.0, base_density=1.0, damping=-0.95, gravity=-0.1, width=1.6, length=1.6,
           steps=3)


def warp_sph(loop):
    c = SPH

    def program(x, v, dynamic_visc):
        h = c["h"]
        particle_mass = 0.01 * h ** 3
        dt = 0.01 * h * 20.0  # Warp's 0.01 h, taken 20 times larger so that three steps move the particles
        density_normalization = (315.0 * particle_mass) / (64.0 * np.pi * h ** 9)
        pressure_normalization = -(45.0 * particle_mass) / (np.pi * h ** 6)
        viscous_normalization = (45.0 * dynamic_visc * particle_mass) / (np.pi * h ** 6)
        n = x.shape[0]
        rho = np.zeros(n)
        a = np.zeros_like(x)

        def step(t):
            gk.launch(sph_density, n, x, rho, density_normalization, h)
            gk.launch(sph_acceleration, n, x, v, rho, a, c["isotropic_exp"], c["base_density"], c["gravity"],
                      pressure_normalization, viscous_normalization, h)
            gk.launch(sph_bounds, n, x, v, c["damping"], c["width"], c["length"])
            gk.launch(sph_kick, x.shape, v, a, dt)
            gk.launch(sph_drift, x.shape, x, v, dt)
        loop(step, c["steps"])
    return program


# -- NVIDIA cuda-samples Samples/5_Domain_Specific/FDTD3d/src/FDTD3dGPU.cu (fdtdGPU: the input copied into both
# buffers, halo included; `for (it = 0; it < timesteps; it++) { FiniteDifferencesKernel<<<>>>(bufferDst,
# bufferSrc, dimx, dimy, dimz); tmp = bufferDst; bufferDst = bufferSrc; bufferSrc = tmp; }`, the result read from
# bufferSrc): a radius-4 star over the inner volume of a padded one; the coefficients (the C's __constant__
# `stencil`) Duplicated ----------------------------------------------------------------------------------------------
FDTD_RADIUS = 4  # FDTD3dGPU.h's RADIUS


@gk.kernel
def fdtd3d_step(out, inp, coeff, radius):
    iz, iy, ix = gk.tid()
    z = iz + radius
    y = iy + radius
    x = ix + radius
    value = coeff[0] * inp[z, y, x]
    for r in range(1, radius + 1):
        value += coeff[r] * (inp[z, y, x - r] + inp[z, y, x + r] + inp[z, y - r, x] + inp[z, y + r, x] +
                             inp[z - r, y, x] + inp[z + r, y, x])
    out[z, y, x] = value


def _inner(u):
    return tuple(s - 2 * FDTD_RADIUS for s in u.shape)


def fdtd3d(timesteps=3):
    """fdtdGPU as written: the names toggled, the output copied from bufferSrc."""
    def program(inp, output, coeff):
        buffer_in = inp.copy()
        buffer_out = inp.copy()  # "actually only need the halo"
        src, dst = buffer_in, buffer_out
        for _ in range(timesteps):
            gk.launch(fdtd3d_step, _inner(inp), dst, src, coeff, FDTD_RADIUS)
            tmp = dst
            dst = src
            src = tmp
        np.copyto(output, src)
    return program


def fdtd3d_parity(loop, timesteps=3):
    def program(inp, output, coeff):
        buffers = (inp.copy(), inp.copy())

        def step(it):
            gk.launch(fdtd3d_step, _inner(inp), buffers[1 - it % 2], buffers[it % 2], coeff, FDTD_RADIUS)
        loop(step, timesteps)
        gk.copy(output, buffers[timesteps % 2])
    return program


# -- NVIDIA cuda-samples Samples/2_Concepts_and_Techniques/reduction/reduction.cpp (benchmarkReduce with
# cpuFinalReduction off: `reduce(n, threads, blocks, d_idata, d_odata); s = numBlocks; while (s >
# cpuFinalThreshold) { getNumBlocksAndThreads(s, ...); cudaMemcpy(d_intermediateSums, d_odata, s * sizeof(T),
# cudaMemcpyDeviceToDevice); reduce(s, threads, blocks, d_intermediateSums, d_odata); s = (s + threads * 2 - 1) /
# (threads * 2); }`): a thread a block, summing its 2 * threads elements; the device-to-device copy gk.copy of the
# slices, the threshold 1 (the GPU finishes), the sum read into `result` -----------------------------------------
@gk.kernel
def reduce_blocks(g_idata, g_odata, n, per_block):
    b = gk.tid()
    s = 0.0
    for k in range(b * per_block, min((b + 1) * per_block, n)):
        s += g_idata[k]
    g_odata[b] = s


def _blocks_and_threads(n, max_threads):
    """getNumBlocksAndThreads for the reduce6 kernels: threads the next power of two of (n + 1) / 2, at most
    max_threads; blocks (n + 2 threads - 1) / (2 threads)."""
    threads = min(max_threads, 1 << max(0, math.ceil(math.log2(max(1, (n + 1) // 2)))))
    return threads, (n + threads * 2 - 1) // (threads * 2)


def cuda_reduction(max_threads=2, host_copy=False):
    def program(x, result):
        n = x.shape[0]
        threads, blocks = _blocks_and_threads(n, max_threads)
        odata = np.zeros(blocks)
        inter = np.zeros(blocks)
        gk.launch(reduce_blocks, blocks, x, odata, n, 2 * threads)
        s = blocks
        while s > 1:
            threads, blocks = _blocks_and_threads(s, max_threads)
            if host_copy:
                inter[:s] = odata[:s]  # cudaMemcpy(..., cudaMemcpyDeviceToDevice) as NumPy writes it
            else:
                gk.copy(inter[:s], odata[:s])
            gk.launch(reduce_blocks, blocks, inter, odata, s, 2 * threads)
            s = (s + threads * 2 - 1) // (threads * 2)
        gk.copy(result, odata[:1])
    return program


# -- NVIDIA cuda-samples Samples/5_Domain_Specific/HSOpticalFlow (flowGold.cpp ComputeFlowGold, which flowCUDA.cu
# follows launch for launch: the pyramid by Downscale, `memset(u, 0)`; `for (; currentLevel < nLevels;
# ++currentLevel) { for (warpIter ...) { memset(du0, dv0, du1, dv1, 0); WarpImage(pI1, u, v, tmp);
# ComputeDerivatives(pI0, tmp, Ix, Iy, Iz); for (iter ...) { SolveForUpdate(du0, dv0, ..., alpha, du1, dv1);
# Swap(du0, du1); Swap(dv0, dv1); } u += du0; v += dv0; } if (not the finest) { Upscale(u, ..., scaleX, nu);
# Upscale(v, ..., scaleY, nv); Swap(u, nu); Swap(v, nv); } } if (u != u0) memcpy(u0, u)`): Horn-Schunck with
# warping; the texture fetches mirror out-of-range pixels (Tex2Di) and interpolate bilinearly from the C's modff
# parts (Tex2D); alpha Active, both frames Duplicated ------------------------------------------------------------
@gk.func
def _mirror(k, n):
    if k < 0:
        k = abs(k + 1)
    if k >= n:
        k = n * 2 - k - 1
    return k


@gk.func
def _tex2d(t, x, y):
    ix0 = int(x)  # modff's integer part (towards zero), the fraction's absolute value
    iy0 = int(y)
    dx = abs(x - ix0)
    dy = abs(y - iy0)
    h = t.shape[0]
    w = t.shape[1]
    ix0 = _mirror(ix0, w)
    iy0 = _mirror(iy0, h)
    ix1 = _mirror(ix0 + 1, w)
    iy1 = _mirror(iy0 + 1, h)
    return (t[iy0, ix0] * (1.0 - dx) * (1.0 - dy) + t[iy0, ix1] * dx * (1.0 - dy) + t[iy1, ix0] * (1.0 - dx) * dy +
            t[iy1, ix1] * dx * dy)


@gk.func
def _tex2di(t, x, y):
    return t[_mirror(y, t.shape[0]), _mirror(x, t.shape[1])]


@gk.kernel
def hs_downscale(src, out):
    i, j = gk.tid()
    out[i, j] = 0.25 * (_tex2di(src, 2 * j, 2 * i) + _tex2di(src, 2 * j, 2 * i + 1) + _tex2di(src, 2 * j + 1, 2 * i) +
                        _tex2di(src, 2 * j + 1, 2 * i + 1))


@gk.kernel
def hs_upscale(src, out, scale):
    i, j = gk.tid()
    out[i, j] = _tex2d(src, (j - 0.5) * 0.5, (i - 0.5) * 0.5) * scale


@gk.kernel
def hs_warp(src, u, v, out):
    i, j = gk.tid()
    out[i, j] = _tex2d(src, j + u[i, j], i + v[i, j])


@gk.func
def _dx5(t, j, i):
    """The x derivative filter (1, -8, 0, 8, -1) / 12."""
    return (_tex2di(t, j - 2, i) - 8.0 * _tex2di(t, j - 1, i) + 8.0 * _tex2di(t, j + 1, i) -
            _tex2di(t, j + 2, i)) / 12.0


@gk.func
def _dy5(t, j, i):
    return (_tex2di(t, j, i - 2) - 8.0 * _tex2di(t, j, i - 1) + 8.0 * _tex2di(t, j, i + 1) -
            _tex2di(t, j, i + 2)) / 12.0


@gk.kernel
def hs_derivatives(I0, I1, Ix, Iy, Iz):
    i, j = gk.tid()
    Ix[i, j] = 0.5 * (_dx5(I0, j, i) + _dx5(I1, j, i))
    Iz[i, j] = I1[i, j] - I0[i, j]
    Iy[i, j] = 0.5 * (_dy5(I0, j, i) + _dy5(I1, j, i))


@gk.kernel
def hs_solve(du0, dv0, Ix, Iy, Iz, alpha, du1, dv1):
    i, j = gk.tid()
    h = du0.shape[0]
    w = du0.shape[1]
    left = j - 1 if j != 0 else j
    right = j + 1 if j != w - 1 else j
    down = i - 1 if i != 0 else i
    up = i + 1 if i != h - 1 else i
    su = (du0[i, left] + du0[i, right] + du0[up, j] + du0[down, j]) * 0.25
    sv = (dv0[i, left] + dv0[i, right] + dv0[up, j] + dv0[down, j]) * 0.25
    frac = (Ix[i, j] * su + Iy[i, j] * sv + Iz[i, j]) / (Ix[i, j] * Ix[i, j] + Iy[i, j] * Iy[i, j] + alpha)
    du1[i, j] = su - Ix[i, j] * frac
    dv1[i, j] = sv - Iy[i, j] * frac


@gk.kernel
def hs_add(u, du):
    i, j = gk.tid()
    u[i, j] += du[i, j]


HS = dict(levels=2, warp_iters=2, solver_iters=3)


def _pyramid(I0, I1, levels):
    """The Downscale loop: the frames at every level, coarsest first (new arrays written by launches)."""
    p0, p1 = [I0], [I1]
    for _ in range(levels - 1):
        h, w = p0[0].shape
        for p in (p0, p1):
            p.insert(0, np.zeros((h // 2, w // 2)))
            gk.launch(hs_downscale, p[0].shape, p[1], p[0])
    return p0, p1


def hs_optical_flow(loop=None, copy_back=gk.copy):
    """ComputeFlowGold as written (the Swaps of names) with `loop` None; with `loop`, the solver's iterations are
    loop(step, n), the buffers picked by the iteration's parity. `copy_back(u0, u)` is the final memcpy."""
    c = HS

    def program(I0, I1, u, v, alpha):
        u0, v0 = u, v
        p0, p1 = _pyramid(I0, I1, c["levels"])
        gk.fill(u, 0.0)  # memset(u, 0); memset(v, 0)
        gk.fill(v, 0.0)
        shape = I0.shape
        tmp, du0, dv0, du1, dv1, Ix, Iy, Iz, nu, nv = (np.zeros(shape) for _ in range(10))
        for level in range(c["levels"]):
            lshape = p0[level].shape

            def at(a, rows=lshape[0], cols=lshape[1]):  # the level's pixels of a full-size buffer (the C's stride)
                return a[:rows, :cols]
            for _ in range(c["warp_iters"]):
                for a in (du0, dv0, du1, dv1):
                    gk.fill(a, 0.0)
                gk.launch(hs_warp, lshape, p1[level], at(u), at(v), at(tmp))
                gk.launch(hs_derivatives, lshape, p0[level], at(tmp), at(Ix), at(Iy), at(Iz))
                if loop is None:
                    for _ in range(c["solver_iters"]):
                        gk.launch(hs_solve, lshape, at(du0), at(dv0), at(Ix), at(Iy), at(Iz), alpha, at(du1),
                                  at(dv1))
                        du0, du1 = du1, du0
                        dv0, dv1 = dv1, dv0
                else:
                    pairs = ((du0, dv0, du1, dv1), (du1, dv1, du0, dv0))

                    def iteration(k, pairs=pairs, lshape=lshape, at=at):  # bound now: the reverse recomputes
                        a, b, a1, b1 = pairs[k % 2]  # it after the outer loops have moved on
                        gk.launch(hs_solve, lshape, at(a), at(b), at(Ix), at(Iy), at(Iz), alpha, at(a1), at(b1))
                    loop(iteration, c["solver_iters"])
                    if c["solver_iters"] % 2:
                        du0, dv0, du1, dv1 = du1, dv1, du0, dv0
                gk.launch(hs_add, lshape, at(u), at(du0))
                gk.launch(hs_add, lshape, at(v), at(dv0))
            if level != c["levels"] - 1:
                nshape = p0[level + 1].shape
                gk.launch(hs_upscale, nshape, at(u), nu[:nshape[0], :nshape[1]], nshape[1] / lshape[1])
                gk.launch(hs_upscale, nshape, at(v), nv[:nshape[0], :nshape[1]], nshape[0] / lshape[0])
                u, nu = nu, u
                v, nv = nv, v
        if u is not u0:  # "solution is not in the specified array"
            copy_back(u0, u)
            copy_back(v0, v)
    return program
