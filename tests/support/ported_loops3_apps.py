"""A third round of third-party host loops ported as programs (session 50; docs/programs.md, "Ported host
loops"), part 2: applications' time loops (Rodinia 3.1 backprop and cfd, Parboil lbm, CloverLeaf 1.3, HPCG 3.1),
written as a user porting the C/CUDA host code writes it (a kernel per loop body; swaps, copies of old states,
one-element arrays for the C's host scalars). Written here from the algorithms; used by
tests/program/test_ported_loops3.py. Each factory takes `loop(step, nsteps)`: a plain loop or a checkpointed
one."""

import math

import numpy as np

import gradkern as gk


# -- Rodinia 3.1 backprop (backprop.c: bpnn_layerforward, bpnn_output_error, bpnn_hidden_error,
# bpnn_adjust_weights, in bpnn_train_kernel's order), run for several epochs; unit 0 of each layer is the bias ------
@gk.kernel
def bp_layerforward(l1, l2, conn):
    j = gk.tid() + 1
    s = 0.0
    for k in range(l1.shape[0]):
        s += conn[k, j] * l1[k]
    l2[j] = 1.0 / (1.0 + math.exp(-s))  # squash


@gk.kernel
def bp_output_error(delta, target, output):
    j = gk.tid() + 1
    o = output[j]
    delta[j] = o * (1.0 - o) * (target[j] - o)


@gk.kernel
def bp_hidden_error(delta_h, delta_o, who, hidden):
    j = gk.tid() + 1
    h = hidden[j]
    s = 0.0
    for k in range(1, delta_o.shape[0]):
        s += delta_o[k] * who[j, k]
    delta_h[j] = h * (1.0 - h) * s


@gk.kernel
def bp_adjust_weights(delta, ly, w, oldw, eta, momentum):
    k, j = gk.tid()
    j += 1
    new_dw = eta * delta[j] * ly[k] + momentum * oldw[k, j]
    w[k, j] = w[k, j] + new_dw
    oldw[k, j] = new_dw


def backprop(loop):
    def program(input_units, input_weights, hidden_weights, target, eta, epochs):
        n_in, n_hid = input_weights.shape
        n_out = hidden_weights.shape[1]
        hidden = np.zeros_like(input_weights, shape=(n_hid,))
        hidden[0] = 1.0  # the bias unit, set on the host before any launch takes the array
        output = np.zeros_like(input_weights, shape=(n_out,))
        delta_o, delta_h = np.zeros_like(output), np.zeros_like(hidden)
        prev_iw, prev_hw = np.zeros_like(input_weights), np.zeros_like(hidden_weights)

        def epoch(t):
            gk.launch(bp_layerforward, n_hid - 1, input_units, hidden, input_weights)
            gk.launch(bp_layerforward, n_out - 1, hidden, output, hidden_weights)
            gk.launch(bp_output_error, n_out - 1, delta_o, target, output)
            gk.launch(bp_hidden_error, n_hid - 1, delta_h, delta_o, hidden_weights, hidden)
            gk.launch(bp_adjust_weights, (n_hid, n_out - 1), delta_o, hidden, hidden_weights, prev_hw, eta, 0.3)
            gk.launch(bp_adjust_weights, (n_in, n_hid - 1), delta_h, input_units, input_weights, prev_iw, eta, 0.3)
        loop(epoch, epochs)
    return program


# -- Rodinia 3.1 cfd (euler3d_cpu_double.cpp: compute_step_factor, compute_flux, time_step; main's loop copies the
# old variables, then three Runge-Kutta stages), cut to 1-D: the neighbours through elements_surrounding_elements
# (an index array: indirect reads), -1 a wall, -2 the far field, variables stored per variable (SoA) --------------
GAMMA = 1.4


@gk.func
def cfd_pressure(density, momentum, energy):
    return (GAMMA - 1.0) * (energy - 0.5 * momentum * momentum / density)


@gk.kernel
def cfd_step_factor(variables, areas, step_factors):
    i = gk.tid()
    density = variables[0, i]
    velocity = variables[1, i] / density
    pressure = cfd_pressure(density, variables[1, i], variables[2, i])
    speed_of_sound = math.sqrt(GAMMA * pressure / density)
    step_factors[i] = 0.5 / (math.sqrt(areas[i]) * (abs(velocity) + speed_of_sound))


@gk.kernel
def cfd_flux(esue, normals, variables, fluxes, smoothing, ff_density, ff_momentum, ff_energy):
    i = gk.tid()
    density_i = variables[0, i]
    momentum_i = variables[1, i]
    energy_i = variables[2, i]
    velocity_i = momentum_i / density_i
    pressure_i = cfd_pressure(density_i, momentum_i, energy_i)
    sos_i = math.sqrt(GAMMA * pressure_i / density_i)
    fc_momentum_i = velocity_i * momentum_i + pressure_i
    fc_energy_i = velocity_i * (energy_i + pressure_i)
    flux_density = 0.0
    flux_momentum = 0.0
    flux_energy = 0.0
    for j in range(2):
        nb = esue[i, j]
        nx = normals[i, j]
        if nb >= 0:
            density_nb = variables[0, nb]
            momentum_nb = variables[1, nb]
            energy_nb = variables[2, nb]
            velocity_nb = momentum_nb / density_nb
            pressure_nb = cfd_pressure(density_nb, momentum_nb, energy_nb)
            sos_nb = math.sqrt(GAMMA * pressure_nb / density_nb)
            factor = -abs(nx) * smoothing * 0.5 * (abs(velocity_i) + abs(velocity_nb) + sos_i + sos_nb)
            flux_density += factor * (density_i - density_nb)
            flux_momentum += factor * (momentum_i - momentum_nb)
            flux_energy += factor * (energy_i - energy_nb)
            factor = 0.5 * nx
            flux_density += factor * (momentum_nb + momentum_i)
            flux_momentum += factor * (velocity_nb * momentum_nb + pressure_nb + fc_momentum_i)
            flux_energy += factor * (velocity_nb * (energy_nb + pressure_nb) + fc_energy_i)
        elif nb == -1:  # a wall: only the pressure pushes
            flux_momentum += nx * pressure_i
        else:  # the far field: its flux contribution (Rodinia computes it once on the host) and this cell's
            velocity_ff = ff_momentum / ff_density
            pressure_ff = cfd_pressure(ff_density, ff_momentum, ff_energy)
            factor = 0.5 * nx
            flux_density += factor * (ff_momentum + momentum_i)
            flux_momentum += factor * (velocity_ff * ff_momentum + pressure_ff + fc_momentum_i)
            flux_energy += factor * (velocity_ff * (ff_energy + pressure_ff) + fc_energy_i)
    fluxes[0, i] = flux_density
    fluxes[1, i] = flux_momentum
    fluxes[2, i] = flux_energy


@gk.kernel
def cfd_time_step(old_variables, variables, step_factors, fluxes, stages_left):
    v, i = gk.tid()
    variables[v, i] = old_variables[v, i] + step_factors[i] / stages_left * fluxes[v, i]


CFD_RK = 3
CFD_FAR_FIELD = (1.4, 0.35, 2.6)  # density, momentum, energy of the free stream (the C's ff_variable)


def cfd(loop):
    def program(variables, esue, normals, areas, smoothing, iterations):
        nelr = variables.shape[1]
        old_variables = np.zeros_like(variables)
        step_factors = np.zeros_like(areas)
        fluxes = np.zeros_like(variables)

        def iteration(t):
            gk.copy(old_variables, variables)  # copy<float>(old_variables, variables, nelr * NVAR)
            gk.launch(cfd_step_factor, nelr, variables, areas, step_factors)
            for j in range(CFD_RK):
                gk.launch(cfd_flux, nelr, esue, normals, variables, fluxes, smoothing, *CFD_FAR_FIELD)
                gk.launch(cfd_time_step, (3, nelr), old_variables, variables, step_factors, fluxes,
                          float(CFD_RK + 1 - j))
        loop(iteration, iterations)
    return program


def cfd_mesh(rng, nelr):
    """A 1-D chain of `nelr` elements numbered in a random order (an unstructured mesh's numbering): each element's
    left and right neighbours, the far field at the left end, a wall at the right; normals +-face area."""
    order = rng.permutation(nelr)  # order[p]: the element at position p along the chain
    esue = np.zeros((nelr, 2), np.int64)
    normals = np.zeros((nelr, 2))
    for p, e in enumerate(order):
        esue[e] = (order[p - 1] if p > 0 else -2, order[p + 1] if p < nelr - 1 else -1)
        normals[e] = (-rng.uniform(0.2, 0.3), rng.uniform(0.2, 0.3))
    return esue, normals


# -- Parboil lbm (lbm.c LBM_performStreamCollide / cuda's performStreamCollide_kernel, main.c's loop with
# LBM_swapGrids), a D2Q9 cut of its D3Q19: push scheme (a cell writes each distribution into its neighbour's
# slot of the destination grid), obstacle cells bounce back, cells flattened with a margin row above and below as
# the C's MARGIN (a push off a row's end lands on the next row, as the C's flattened index does) ---------------------
LBM_EX = (0, 1, 0, -1, 0, 1, -1, -1, 1)
LBM_EY = (0, 0, 1, 0, -1, 1, 1, -1, -1)
LBM_W = (4.0 / 9.0, 1.0 / 9.0, 1.0 / 9.0, 1.0 / 9.0, 1.0 / 9.0, 1.0 / 36.0, 1.0 / 36.0, 1.0 / 36.0, 1.0 / 36.0)
LBM_OPPOSITE = (0, 3, 4, 1, 2, 7, 8, 5, 6)


@gk.kernel
def lbm_stream_collide(src, dst, flags, omega, nx, margin):
    c = gk.tid() + margin
    if flags[c] == 1:  # an obstacle: each distribution bounces back into the opposite direction
        for q in range(9):
            p = LBM_OPPOSITE[q]
            dst[p, c + LBM_EX[p] + LBM_EY[p] * nx] = src[q, c]
    else:
        rho = 0.0
        ux = 0.0
        uy = 0.0
        for q in range(9):
            rho += src[q, c]
            ux += LBM_EX[q] * src[q, c]
            uy += LBM_EY[q] * src[q, c]
        ux = ux / rho
        uy = uy / rho
        u2 = 1.5 * (ux * ux + uy * uy)
        for q in range(9):
            eu = LBM_EX[q] * ux + LBM_EY[q] * uy
            feq = LBM_W[q] * rho * (1.0 + 3.0 * eu + 4.5 * eu * eu - u2)
            dst[q, c + LBM_EX[q] + LBM_EY[q] * nx] = (1.0 - omega) * src[q, c] + omega * feq


def lbm(loop):
    """The checkpointable spelling: the swap chosen by t's parity."""
    def program(src, dst, flags, omega, nx, steps):
        cells = flags.shape[0] - 2 * (nx + 1)

        def step(t):
            a, b = (src, dst) if t % 2 == 0 else (dst, src)
            gk.launch(lbm_stream_collide, cells, a, b, flags, omega, nx, nx + 1)
        loop(step, steps)
    return program


def lbm_swap(src, dst, flags, omega, nx, steps):
    """main.c's loop as written: LBM_swapGrids(&srcGrid, &dstGrid) after each step, a swap of local names."""
    cells = flags.shape[0] - 2 * (nx + 1)
    for _ in range(steps):
        gk.launch(lbm_stream_collide, cells, src, dst, flags, omega, nx, nx + 1)
        src, dst = dst, src


# -- HPCG 3.1 (CG.cpp with ComputeSYMGS_ref, ComputeSPMV_ref, ComputeDotProduct, ComputeWAXPBY): preconditioned CG,
# the preconditioner one symmetric Gauss-Seidel sweep (forward then backward, one thread: the sweep is serial) from
# z = 0; the matrix in CSR (a 5-point 2-D Laplacian), shifted by the Active sigma; the C's host scalars
# rtz, oldrtz, pAp in one-element arrays the dot products sum into ------------------------------------------------
@gk.kernel
def hpcg_spmv(rowp, cols, vals, sigma, x, y):
    i = gk.tid()
    s = sigma * x[i]
    for k in range(rowp[i], rowp[i + 1]):
        s += vals[k] * x[cols[k]]
    y[i] = s


@gk.kernel
def hpcg_symgs(rowp, cols, vals, diag, sigma, r, x):
    n = r.shape[0]
    for i in range(n):
        s = r[i]
        for k in range(rowp[i], rowp[i + 1]):
            s -= vals[k] * x[cols[k]]
        s += x[i] * vals[diag[i]]  # the diagonal's term back (HPCG: sum += xv[i] * currentDiagonal)
        x[i] = s / (vals[diag[i]] + sigma)
    for ii in range(n):
        i = n - 1 - ii
        s = r[i]
        for k in range(rowp[i], rowp[i + 1]):
            s -= vals[k] * x[cols[k]]
        s += x[i] * vals[diag[i]]
        x[i] = s / (vals[diag[i]] + sigma)


@gk.kernel
def hpcg_dot(a, b, out):
    i = gk.tid()
    gk.atomic_add(out, 0, a[i] * b[i])


@gk.kernel
def hpcg_waxpby_residual(b, Ax, r):
    i = gk.tid()
    r[i] = b[i] - Ax[i]


@gk.kernel
def hpcg_update_p(p, z, rtz, oldrtz):
    i = gk.tid()
    p[i] = z[i] + (rtz[0] / oldrtz[0]) * p[i]


@gk.kernel
def hpcg_update_xr(x, r, p, Ap, rtz, pAp):
    i = gk.tid()
    alpha = rtz[0] / pAp[0]
    x[i] = x[i] + alpha * p[i]
    r[i] = r[i] - alpha * Ap[i]


def laplacian_csr(ny, nx):
    """The 5-point Laplacian of an ny x nx grid (Dirichlet) in CSR: row pointers, columns, values, and each row's
    diagonal position (HPCG's matrixDiagonal)."""
    rowp, cols, vals, diag = [0], [], [], []
    for y in range(ny):
        for x in range(nx):
            for dy, dx in ((-1, 0), (0, -1), (0, 0), (0, 1), (1, 0)):
                if 0 <= y + dy < ny and 0 <= x + dx < nx:
                    if dy == dx == 0:
                        diag.append(len(cols))
                    cols.append((y + dy) * nx + x + dx)
                    vals.append(4.0 if dy == dx == 0 else -1.0)
            rowp.append(len(cols))
    return (np.array(rowp, np.int64), np.array(cols, np.int64), np.array(vals), np.array(diag, np.int64))


def hpcg(loop, csr):
    rowp, cols, vals, diag = csr

    def program(b, x, sigma, max_iter):
        n = b.shape[0]
        r, z, p, Ap = (np.zeros_like(b) for _ in range(4))
        rtz, oldrtz, pAp = (np.zeros_like(b, shape=(1,)) for _ in range(3))
        gk.launch(hpcg_spmv, n, rowp, cols, vals, sigma, x, Ap)
        gk.launch(hpcg_waxpby_residual, n, b, Ap, r)

        def iteration(k):
            gk.fill(z, 0.0)  # ComputeMG: ZeroVector(x), then the smoother
            gk.launch(hpcg_symgs, 1, rowp, cols, vals, diag, sigma, r, z)
            hpcg_cg_update(k, csr, sigma, x, r, z, p, Ap, rtz, oldrtz, pAp)
        loop(iteration, max_iter)
    return program


def hpcg_cg_update(k, csr, sigma, x, r, z, p, Ap, rtz, oldrtz, pAp):
    """CG_ref's iteration k after the preconditioner wrote z: p from z (rtz = r.z, beta = rtz / oldrtz), then
    alpha = rtz / pAp, x and r (test_ported_loops9.py's HPCG MG port shares it)."""
    rowp, cols, vals = csr[:3]
    n = r.shape[0]
    if k == 0:
        gk.copy(p, z)
        gk.fill(rtz, 0.0)
        gk.launch(hpcg_dot, n, r, z, rtz)
    else:
        gk.copy(oldrtz, rtz)
        gk.fill(rtz, 0.0)
        gk.launch(hpcg_dot, n, r, z, rtz)
        gk.launch(hpcg_update_p, n, p, z, rtz, oldrtz)
    gk.launch(hpcg_spmv, n, rowp, cols, vals, sigma, p, Ap)
    gk.fill(pAp, 0.0)
    gk.launch(hpcg_dot, n, p, Ap, pAp)
    gk.launch(hpcg_update_xr, n, x, r, p, Ap, rtz, pAp)


# -- CloverLeaf 1.3 (hydro.f90's cycle: ideal_gas, viscosity, calc_dt, PdV predict, ideal_gas, accelerate, PdV
# correct, reset_field), cut to a 1-D Lagrangian step on a fixed mesh (no advection, no remap): cell-centred
# density, energy, pressure, viscosity, sound speed; node-centred velocity, zero on the reflective ends. dt is a
# one-element array a one-thread kernel writes (calc_dt's minimum over cells), so its derivative is kept; gamma
# (ideal_gas_kernel's 1.4) is Active ---------------------------------------------------------------------------
@gk.kernel
def clover_ideal_gas(density, energy, pressure, soundspeed, gamma):
    i = gk.tid()
    pressure[i] = (gamma - 1.0) * density[i] * energy[i]
    soundspeed[i] = math.sqrt(gamma * pressure[i] / density[i])


@gk.kernel
def clover_viscosity(xvel, density, viscosity):
    i = gk.tid()
    ugrad = xvel[i + 1] - xvel[i]
    if ugrad < 0.0:  # compression only, as viscosity_kernel's `IF (div .LT. 0.0)`
        viscosity[i] = 2.0 * density[i] * ugrad * ugrad
    else:
        viscosity[i] = 0.0


@gk.kernel
def clover_calc_dt(soundspeed, xvel, dt, dx, dtc_safe):
    dt_min = 1.0e10
    for i in range(soundspeed.shape[0]):
        speed = soundspeed[i] + 0.5 * (abs(xvel[i]) + abs(xvel[i + 1]))
        dt_min = min(dt_min, dtc_safe * dx / speed)
    dt[0] = dt_min


@gk.kernel
def clover_pdv(density0, energy0, pressure, viscosity, xvel0, xvel1, density1, energy1, dt, dx, scale):
    """PdV_kernel: `scale` 0.5 with xvel1 = xvel0 (the predictor's half step), 1.0 with the averaged velocity."""
    i = gk.tid()
    total_flux = scale * dt[0] * 0.5 * ((xvel0[i + 1] + xvel1[i + 1]) - (xvel0[i] + xvel1[i]))
    volume_change = dx / (dx + total_flux)
    energy_change = (pressure[i] + viscosity[i]) / density0[i] * total_flux / dx
    energy1[i] = energy0[i] - energy_change
    density1[i] = density0[i] * volume_change


@gk.kernel
def clover_accelerate(density0, pressure, viscosity, xvel0, xvel1, dt, dx):
    n = gk.tid() + 1  # interior nodes: the ends stay at rest
    nodal_mass = 0.5 * (density0[n - 1] + density0[n]) * dx
    force = (pressure[n - 1] - pressure[n]) + (viscosity[n - 1] - viscosity[n])
    xvel1[n] = xvel0[n] + dt[0] * force / nodal_mass


def cloverleaf(loop):
    def program(density0, energy0, xvel0, gamma, steps):
        cells = density0.shape[0]
        dx = 1.0 / cells
        pressure, soundspeed, viscosity = (np.zeros_like(density0) for _ in range(3))
        density1, energy1 = np.zeros_like(density0), np.zeros_like(density0)
        xvel1 = np.zeros_like(xvel0)
        dt = np.zeros_like(density0, shape=(1,))

        def cycle(t):
            gk.launch(clover_ideal_gas, cells, density0, energy0, pressure, soundspeed, gamma)
            gk.launch(clover_viscosity, cells, xvel0, density0, viscosity)
            gk.launch(clover_calc_dt, 1, soundspeed, xvel0, dt, dx, 0.7)
            gk.launch(clover_pdv, cells, density0, energy0, pressure, viscosity, xvel0, xvel0, density1, energy1,
                      dt, dx, 0.5)
            gk.launch(clover_ideal_gas, cells, density1, energy1, pressure, soundspeed, gamma)
            gk.copy(xvel1, xvel0)  # the ends
            gk.launch(clover_accelerate, cells - 1, density0, pressure, viscosity, xvel0, xvel1, dt, dx)
            gk.launch(clover_pdv, cells, density0, energy0, pressure, viscosity, xvel0, xvel1, density1, energy1,
                      dt, dx, 1.0)
            gk.copy(density0, density1)  # reset_field
            gk.copy(energy0, energy1)
            gk.copy(xvel0, xvel1)
        loop(cycle, steps)
    return program


def cfd_host_copy(loop):
    """cfd with the old variables copied on the host (`old_variables = variables.copy()`) inside each step."""
    def program(variables, esue, normals, areas, smoothing, iterations):
        nelr = variables.shape[1]
        step_factors = np.zeros_like(areas)
        fluxes = np.zeros_like(variables)

        def iteration(t):
            old_variables = variables.copy()
            gk.launch(cfd_step_factor, nelr, variables, areas, step_factors)
            for j in range(CFD_RK):
                gk.launch(cfd_flux, nelr, esue, normals, variables, fluxes, smoothing, *CFD_FAR_FIELD)
                gk.launch(cfd_time_step, (3, nelr), old_variables, variables, step_factors, fluxes,
                          float(CFD_RK + 1 - j))
        loop(iteration, iterations)
    return program
