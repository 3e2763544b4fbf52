"""A ninth round of third-party host loops ported as programs (session 56; docs/programs.md, "Ported host loops"),
part 2: CloverLeaf's advection (the sweep order toggled each step, the y sweep the x sweep's kernels on transposed
views), Veros' time-level rotation (three levels a field, indices permuted on the host, Adams-Bashforth tendencies
read from the level before) and HPCG's multigrid preconditioner (a recursive host function over a linked chain of
levels, SYMGS smoothing, restriction and prolongation through the fine-to-coarse index array). Written here from
the drivers cited, as a user porting them writes them. Used by tests/program/test_ported_loops9.py."""

import numpy as np

import gradkern as gk
from support.ported_loops3_apps import (
    hpcg_cg_update,
    hpcg_dot,
    hpcg_spmv,
    hpcg_symgs,
    hpcg_waxpby_residual,
    laplacian_csr,
)

# -- CloverLeaf 1.3 (UK-MAC/CloverLeaf_ref advection.f90: `IF(advect_x) direction=g_xdir`, advec_cell_driver for
# sweep 1 in that direction and sweep 2 in the other; hydro.f90's `advect_x = .NOT. advect_x` each cycle;
# advec_cell_kernel.f90's pre_vol / post_vol by sweep number, the donor cell's mass and energy fluxes, the
# post-sweep density and energy), first-order donor cell (the kernel's van Leer limiter dropped), reflective walls
# (zero boundary face fluxes, gk.fill on the face columns); flux_calc's `vol_flux = dt * area * velocity` a kernel
# each step; the y sweep is the x sweep's kernels on `.T` views; dt Active -------------------------------------------
CLOVER = dict(dx=0.5, dy=0.4, nsteps=4)


@gk.kernel
def clover_flux_calc(xvel, yvel, vfx, vfy, dt, dx, dy):
    k, j = gk.tid()
    if k < vfx.shape[0] and j > 0 and j < vfx.shape[1] - 1:
        vfx[k, j] = dt * dy * xvel[k, j]
    if j < vfy.shape[1] and k > 0 and k < vfy.shape[0] - 1:
        vfy[k, j] = dt * dx * yvel[k, j]


@gk.kernel
def advec_cell_vol(volume, vfx, vfy, pre_vol, post_vol, sweep_number):
    k, j = gk.tid()
    if sweep_number == 1:
        pre_vol[k, j] = volume[k, j] + (vfx[k, j + 1] - vfx[k, j] + vfy[k + 1, j] - vfy[k, j])
        post_vol[k, j] = pre_vol[k, j] - (vfx[k, j + 1] - vfx[k, j])
    else:
        pre_vol[k, j] = volume[k, j] + vfx[k, j + 1] - vfx[k, j]
        post_vol[k, j] = volume[k, j]


@gk.kernel
def advec_cell_flux(vfx, density, energy, mass_flux, ener_flux):
    k, j = gk.tid()
    j += 1
    donor = j - 1 if vfx[k, j] > 0.0 else j
    mass_flux[k, j] = vfx[k, j] * density[k, donor]
    ener_flux[k, j] = mass_flux[k, j] * energy[k, donor]


@gk.kernel
def advec_cell_update(density, energy, pre_vol, post_vol, mass_flux, ener_flux):
    k, j = gk.tid()
    pre_mass = density[k, j] * pre_vol[k, j]
    post_mass = pre_mass + mass_flux[k, j] - mass_flux[k, j + 1]
    post_ener = (energy[k, j] * pre_mass + ener_flux[k, j] - ener_flux[k, j + 1]) / post_mass
    density[k, j] = post_mass / post_vol[k, j]
    energy[k, j] = post_ener


def _advec_cell(density, energy, volume, vfx, vfy, pre_vol, post_vol, mass_flux, ener_flux, sweep_number):
    """advec_cell_driver in x: arrays indexed [k, j], j along the sweep (the y sweep passes the transposes)."""
    ny, nx = density.shape
    gk.launch(advec_cell_vol, (ny, nx), volume, vfx, vfy, pre_vol, post_vol, sweep_number)
    gk.launch(advec_cell_flux, (ny, nx - 1), vfx, density, energy, mass_flux, ener_flux)
    gk.launch(advec_cell_update, (ny, nx), density, energy, pre_vol, post_vol, mass_flux, ener_flux)


def clover_advection(loop=None):
    """`loop` None: hydro.f90's cycle with `advect_x` toggled on the host; else `loop(step, nsteps)` with the
    direction from t's parity (the checkpointable spelling)."""
    c = CLOVER

    def program(density, energy, xvel, yvel, dt):
        ny, nx = density.shape
        volume = np.full_like(density, c["dx"] * c["dy"])
        vfx, mfx, efx = (np.zeros((ny, nx + 1)) for _ in range(3))
        vfy, mfy, efy = (np.zeros((ny + 1, nx)) for _ in range(3))
        pre_vol, post_vol = np.zeros_like(density), np.zeros_like(density)

        def sweep(direction_x, sweep_number):
            if direction_x:
                _advec_cell(density, energy, volume, vfx, vfy, pre_vol, post_vol, mfx, efx, sweep_number)
            else:
                _advec_cell(density.T, energy.T, volume.T, vfy.T, vfx.T, pre_vol.T, post_vol.T, mfy.T, efy.T,
                            sweep_number)

        def advection(advect_x):
            gk.launch(clover_flux_calc, (ny + 1, nx + 1), xvel, yvel, vfx, vfy, dt, c["dx"], c["dy"])
            sweep(advect_x, 1)
            sweep(not advect_x, 2)

        if loop is not None:
            loop(lambda t: advection(t % 2 == 0), c["nsteps"])
            return
        advect_x = True
        for _ in range(c["nsteps"]):
            advection(advect_x)
            advect_x = not advect_x
    return program


def clover_advection_loop(loop):
    return clover_advection(loop)


# -- Veros (team-ocean/veros veros/veros.py, VerosSetup.step: `vs.taum1, vs.tau, vs.taup1 = vs.tau, vs.taup1,
# vs.taum1` after each step; veros/core/momentum.py's Adams-Bashforth update `u[..., taup1] = u[..., tau] + dt *
# ((1.5 + AB_eps) * du[..., tau] - (0.5 + AB_eps) * du[..., taum1])`), on a linear 1-D periodic shallow-water
# column: velocity u and height h with three time levels in their last axis, the tendencies du and dh too; every
# launch on column views `u[:, tau]`; the gravity g Active ------------------------------------------------------------
VEROS = dict(dt=0.05, dx=0.5, depth=1.0, drag=0.1, ab_eps=0.01, nsteps=5)


@gk.kernel
def veros_tendencies(u, h, du, dh, g, depth, drag, dx):
    i = gk.tid()
    n = u.shape[0]
    ip = (i + 1) % n
    im = (i + n - 1) % n
    du[i] = -g * (h[ip] - h[im]) / (2.0 * dx) - drag * u[i] * abs(u[i])
    dh[i] = -depth * (u[ip] - u[im]) / (2.0 * dx)


@gk.kernel
def veros_adams_bashforth(new, cur, d_cur, d_old, dt, ab_eps):
    i = gk.tid()
    new[i] = cur[i] + dt * ((1.5 + ab_eps) * d_cur[i] - (0.5 + ab_eps) * d_old[i])


def _veros_step(u, h, du, dh, g, taum1, tau, taup1):
    c = VEROS
    n = u.shape[0]
    gk.launch(veros_tendencies, n, u[:, tau], h[:, tau], du[:, tau], dh[:, tau], g, c["depth"], c["drag"], c["dx"])
    gk.launch(veros_adams_bashforth, n, u[:, taup1], u[:, tau], du[:, tau], du[:, taum1], c["dt"], c["ab_eps"])
    gk.launch(veros_adams_bashforth, n, h[:, taup1], h[:, tau], dh[:, tau], dh[:, taum1], c["dt"], c["ab_eps"])


def veros_rotated():
    """Veros' own spelling: the three indices permuted on the host after each step (a plain loop)."""
    def program(u, h, g):
        du, dh = np.zeros_like(u), np.zeros_like(h)
        taum1, tau, taup1 = 0, 1, 2
        for _ in range(VEROS["nsteps"]):
            _veros_step(u, h, du, dh, g, taum1, tau, taup1)
            taum1, tau, taup1 = tau, taup1, taum1
    return program


def veros_levels(loop):
    """The checkpointable spelling: step t's levels from t (taum1 = t % 3, tau = (t + 1) % 3, taup1 = (t + 2) % 3,
    what the permutation gives)."""
    def program(u, h, g):
        du, dh = np.zeros_like(u), np.zeros_like(h)
        loop(lambda t: _veros_step(u, h, du, dh, g, t % 3, (t + 1) % 3, (t + 2) % 3), VEROS["nsteps"])
    return program


# -- HPCG 3.1 (hpcg/src/ComputeMG_ref.cpp: `ZeroVector(x); if (A.mgData != 0) { for presmoother steps
# ComputeSYMGS_ref(A, r, x); ComputeSPMV_ref(A, x, *A.mgData->Axf); ComputeRestriction_ref(A, r);
# ComputeMG_ref(*A.Ac, *A.mgData->rc, *A.mgData->xc); ComputeProlongation_ref(A, x); postsmoother steps } else
# ComputeSYMGS_ref(A, r, x)`; ComputeRestriction_ref's `rcv[i] = rfv[f2c[i]] - Axfv[f2c[i]]` and
# ComputeProlongation_ref's `xfv[f2c[i]] += xcv[i]`; GenerateCoarseProblem's chain `A.Ac`, the coarse point every
# second one each way; CG_ref.cpp's loop with `normr / normr0 > tolerance`), a 2-D Laplacian on 4 x 4 and 2 x 2
# points shifted by the Active sigma; the levels a linked chain of Python objects, the V-cycle a recursive host
# function; the C's scalars alpha, beta divided in the kernels --------------------------------------------------------
@gk.kernel
def hpcg_restrict(rf, axf, f2c, rc):
    i = gk.tid()
    rc[i] = rf[f2c[i]] - axf[f2c[i]]


@gk.kernel
def hpcg_prolong(xf, xc, f2c):
    i = gk.tid()
    xf[f2c[i]] += xc[i]


class HpcgLevel:
    """HPCG's SparseMatrix with its MGData: the CSR matrix, and for all but the coarsest level Axf, rc, xc, f2c and
    the coarse level Ac."""

    def __init__(self, ny, nx, levels):
        self.csr = laplacian_csr(ny, nx)
        self.n = ny * nx
        self.Ac = None
        if levels > 1:
            self.f2c = np.array([2 * y * nx + 2 * x for y in range(ny // 2) for x in range(nx // 2)], np.int64)
            self.Ac = HpcgLevel(ny // 2, nx // 2, levels - 1)


def compute_mg(A, r, x, sigma, pre=1, post=1):
    rowp, cols, vals, diag = A.csr
    gk.fill(x, 0.0)
    if A.Ac is not None:
        axf, rc, xc = np.zeros(A.n), np.zeros(A.Ac.n), np.zeros(A.Ac.n)  # MGData's vectors
        for _ in range(pre):
            gk.launch(hpcg_symgs, 1, rowp, cols, vals, diag, sigma, r, x)
        gk.launch(hpcg_spmv, A.n, rowp, cols, vals, sigma, x, axf)
        gk.launch(hpcg_restrict, A.Ac.n, r, axf, A.f2c, rc)
        compute_mg(A.Ac, rc, xc, sigma, pre, post)
        gk.launch(hpcg_prolong, A.Ac.n, x, xc, A.f2c)
        for _ in range(post):
            gk.launch(hpcg_symgs, 1, rowp, cols, vals, diag, sigma, r, x)
    else:
        gk.launch(hpcg_symgs, 1, rowp, cols, vals, diag, sigma, r, x)


HPCG_MG = dict(ny=4, nx=4, levels=2, max_iter=4, tolerance=1e-3)


def hpcg_mg(iterations=None, **config):
    c = dict(HPCG_MG, **config)
    A = HpcgLevel(c["ny"], c["nx"], c["levels"])
    rowp, cols, vals, _ = A.csr

    def program(b, x, sigma):
        n = A.n
        r, z, p, ap = (np.zeros_like(b) for _ in range(4))
        rtz, oldrtz, pap, rr = (np.zeros(1) for _ in range(4))
        gk.launch(hpcg_spmv, n, rowp, cols, vals, sigma, x, ap)  # r = b - A x, normr0
        gk.launch(hpcg_waxpby_residual, n, b, ap, r)
        gk.fill(rr, 0.0)
        gk.launch(hpcg_dot, n, r, r, rr)
        normr0 = np.sqrt(rr[0])
        normr = normr0
        k = 0
        while k < c["max_iter"] and normr / normr0 > c["tolerance"]:
            compute_mg(A, r, z, sigma)
            hpcg_cg_update(k, A.csr, sigma, x, r, z, p, ap, rtz, oldrtz, pap)
            gk.fill(rr, 0.0)
            gk.launch(hpcg_dot, n, r, r, rr)
            normr = np.sqrt(rr[0])
            k += 1
        if iterations is not None:
            iterations.append(k)
    return program


# -- NVIDIA Warp (warp/examples/sim/example_cloth.py, Example.simulate: `for _ in range(self.sim_substeps):
# self.state_0.clear_forces(); self.integrator.simulate(self.model, self.state_0, self.state_1, self.sim_dt);
# (self.state_0, self.state_1) = (self.state_1, self.state_0)`, a frame loop around it; warp/sim/
# integrator_euler.py's eval_springs (atomic adds into both particles' forces), eval_particle_ground_contacts and
# integrate_particles (semi-implicit Euler, gravity only where inv_mass > 0, the pinned corners' inv_mass 0)), a
# grid of particles joined by structural springs (the triangles' FEM forces left out); the springs are Warp's
# eval_springs with its vector atomics as component loops (cloth_springs; session 52's eval_springs port,
# support/ported_hpc5.py, spelled them a statement per component), their stiffness (the per-spring array) Duplicated
CLOTH = dict(frames=2, substeps=3, dt=0.01, kd=0.5, ground_ke=50.0, gravity=-9.8)


@gk.kernel
def cloth_springs(x, v, spring_indices, rest, ke, kd, f):
    """eval_springs as Warp writes it: `wp.atomic_sub(f, i, fs)` and `wp.atomic_add(f, j, fs)`, here a loop over
    the components each. This port first wrote it so and was refused (a vector indexed by a loop variable); it was
    written a statement per component (session 52's warp_springs) until session 57 unrolled such loops
    (docs/kernel-language.md; tests/frontend/test_vector_loops.py checks it generates warp_springs' code)."""
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
    for k in range(3):
        gk.atomic_add(f, (i, k), -fs[k])
    for k in range(3):
        gk.atomic_add(f, (j, k), fs[k])


@gk.kernel
def cloth_ground(x, f, ke):
    i = gk.tid()
    if x[i, 1] < 0.0:
        gk.atomic_add(f, (i, 1), -ke * x[i, 1])


@gk.kernel
def cloth_integrate(x0, v0, f, inv_mass, x1, v1, gravity, dt):
    i = gk.tid()
    w = inv_mass[i]
    for c in range(3):
        g = gravity if c == 1 else 0.0
        vn = v0[i, c] + (f[i, c] * w + (g if w > 0.0 else 0.0)) * dt
        v1[i, c] = vn
        x1[i, c] = x0[i, c] + vn * dt


def cloth_model(ny=3, nx=3, spacing=0.2):
    """The springs of an ny x nx grid (rows and columns), interleaved as the model's spring_indices, their rest
    lengths, and inv_mass with the first row's two corners pinned (add_cloth_grid's fix_left / fix_right)."""
    springs = [(y * nx + x, y * nx + x + 1) for y in range(ny) for x in range(nx - 1)]
    springs += [(y * nx + x, (y + 1) * nx + x) for y in range(ny - 1) for x in range(nx)]
    inv_mass = np.ones(ny * nx)
    inv_mass[[0, nx - 1]] = 0.0
    return np.array(springs, np.int64).reshape(-1), np.full(len(springs), spacing), inv_mass


def warp_cloth(loop=None):
    """`loop` None: Warp's frame loop with the states' names swapped each substep; else `loop(substep, frames *
    substeps)` with the states from the substep's parity (the checkpointable spelling)."""
    c = CLOTH
    springs, rest, inv_mass = cloth_model()

    def program(q0, qd0, q1, qd1, ke):
        n = q0.shape[0]
        f = np.zeros_like(q0)
        kd = np.full_like(ke, c["kd"])

        def simulate(xa, va, xb, vb):
            gk.fill(f, 0.0)  # state_0.clear_forces()
            gk.launch(cloth_springs, rest.shape[0], xa, va, springs, rest, ke, kd, f)
            gk.launch(cloth_ground, n, xa, f, c["ground_ke"])
            gk.launch(cloth_integrate, n, xa, va, f, inv_mass, xb, vb, c["gravity"], c["dt"])

        if loop is not None:
            states = ((q0, qd0), (q1, qd1))
            loop(lambda s: simulate(*states[s % 2], *states[1 - s % 2]), c["frames"] * c["substeps"])
            return
        state_0, state_1 = (q0, qd0), (q1, qd1)
        for _ in range(c["frames"]):
            for _ in range(c["substeps"]):
                simulate(*state_0, *state_1)
                (state_0, state_1) = (state_1, state_0)
    return program


def warp_cloth_loop(loop):
    return warp_cloth(loop)
