"""A fourth round of third-party host loops ported as programs (session 51; docs/programs.md, "Ported host
loops"), part 2: applications' time loops and the host-code patterns their drivers use between launches
(miniGhost 1.0.1's boundary fills and grid sum every few steps, LULESH 2.0's TimeIncrement, SPEC CPU2000 swim's
three time levels, a Lorenz-96 RK4 driver keeping a trajectory, an SU2-like pseudo-time loop with local time
steps and a logarithmic convergence test), and the spellings such a port writes first. Written here from the
algorithms; used by tests/program/test_ported_loops4.py. Each factory takes `loop(step, nsteps)`: a plain loop
or a checkpointed one."""

import io
import math

import numpy as np

import gradkern as gk


# -- miniGhost 1.0.1 (drivers.F's time loop: MG_BOUNDARY_EXCHANGE, MG_STENCIL_2D5PT, MG_SUM_GRID every
# report_diffusion steps, GRID/WORK swapped): the boundary set between launches on views (zero above and below as
# BC_ZERO; Neumann left and right, copied from the first interior column); the grid sum a kernel sums into a
# one-element array, read on the host into a report list and its conservation check (control flow) -----------------
@gk.kernel
def ghost_stencil(grid, work, w):
    i, j = gk.tid()
    i += 1
    j += 1
    work[i, j] = w * (grid[i - 1, j] + grid[i + 1, j] + grid[i, j - 1] + grid[i, j + 1] + grid[i, j])


@gk.kernel
def ghost_sum(grid, out):
    i, j = gk.tid()
    gk.atomic_add(out, 0, grid[i + 1, j + 1])


def _ghost_boundary(g):
    gk.fill(g[0, :], 0.0)  # BC_ZERO
    gk.fill(g[-1, :], 0.0)
    gk.copy(g[:, 0], g[:, 1])  # a Neumann side: the halo column is the first interior one
    gk.copy(g[:, -1], g[:, -2])


def minighost(loop, report_every=2, report=None):
    def program(grid, work, w, nsteps):
        ny, nx = grid.shape
        gsum = np.zeros_like(grid, shape=(1,))

        def step(t):
            a, b = (grid, work) if t % 2 == 0 else (work, grid)
            _ghost_boundary(a)
            gk.launch(ghost_stencil, (ny - 2, nx - 2), a, b, w)
            if report is not None and (t + 1) % report_every == 0:
                gk.fill(gsum, 0.0)
                gk.launch(ghost_sum, (ny - 2, nx - 2), b, gsum)
                report.append(float(gsum[0]))  # a number for the report: a constant on purpose
                if not 0.0 < gsum[0] < 1e6:  # miniGhost's error check, on the derived sum: control flow
                    raise RuntimeError("grid sum out of range")
        loop(step, nsteps)
    return program


def minighost_restart(grid, work, w, nsteps, restart_at):
    """miniGhost's state written as a restart at step `restart_at`, the arrays lost (a new run's fresh ones) and
    the state read back, kept in memory: the differentiated spelling of a restart file (np.save / np.load of an
    active array is refused inside a program)."""
    for t in range(nsteps):
        a, b = (grid, work) if t % 2 == 0 else (work, grid)
        if t == restart_at:
            saved = a.copy()  # write_restart
            gk.fill(a, 0.0)
            gk.copy(a, saved)  # read_restart
        _ghost_boundary(a)
        gk.launch(ghost_stencil, (grid.shape[0] - 2, grid.shape[1] - 2), a, b, w)


def minighost_file_restart(grid, work, w, nsteps, restart_at):
    """The same with the restart written by np.save and read back by np.load (a restart file)."""
    for t in range(nsteps):
        a, b = (grid, work) if t % 2 == 0 else (work, grid)
        if t == restart_at:
            f = io.BytesIO()
            np.save(f, a)  # write_restart
            gk.fill(a, 0.0)
            f.seek(0)
            gk.copy(a, np.load(f))  # read_restart
        _ghost_boundary(a)
        gk.launch(ghost_stencil, (grid.shape[0] - 2, grid.shape[1] - 2), a, b, w)


def minighost_file_output(grid, work, w, nsteps, files):
    """Periodic output written with np.save of u.view(np.ndarray): no derivative through the file wanted."""
    for t in range(nsteps):
        a, b = (grid, work) if t % 2 == 0 else (work, grid)
        _ghost_boundary(a)
        gk.launch(ghost_stencil, (grid.shape[0] - 2, grid.shape[1] - 2), a, b, w)
        f = io.BytesIO()
        np.save(f, b.view(np.ndarray))
        files.append(f.getvalue())


def minighost_host_boundary(kind):
    """The boundary as a port writes it first, with NumPy on the host."""
    def program(grid, work, w, nsteps):
        for t in range(nsteps):
            a, b = (grid, work) if t % 2 == 0 else (work, grid)
            if kind == "zero":
                a[:, -1] = 0.0
            elif kind == "copy":
                a[0] = a[1]
            else:
                a[...] *= 0.5
            gk.launch(ghost_stencil, (grid.shape[0] - 2, grid.shape[1] - 2), a, b, w)
    return program


# -- LULESH 2.0 (lulesh.cc: TimeIncrement, CalcCourantConstraintForElems, CalcHydroConstraintForElems, the main
# loop `while (time < stoptime && cycle < its)`), a 1-D Lagrangian gas on moving nodes: dt from the two
# constraints' minima and TimeIncrement's ratio clamps, in one-thread kernels writing a state array
# [deltatime, time]; the host reads time for the loop test; the stiffness K Active ------------------------------------
@gk.kernel
def lulesh_elements(x, v, mass, p, ss, vdov, K, gamma):
    e = gk.tid()
    dx = x[e + 1] - x[e]
    rho = mass[e] / dx
    p[e] = K * rho ** gamma
    ss[e] = math.sqrt(gamma * p[e] / rho)
    vdov[e] = (v[e + 1] - v[e]) / dx


@gk.kernel
def lulesh_constraints(x, ss, vdov, dtc, qqc2, dvovmax):
    courant = 1.0e20
    hydro = 1.0e20
    for e in range(ss.shape[0]):
        if vdov[e] != 0.0:
            arealg = x[e + 1] - x[e]
            dtf = math.sqrt(ss[e] * ss[e] + qqc2 * arealg * arealg * vdov[e] * vdov[e])
            courant = min(courant, arealg / dtf)
            hydro = min(hydro, dvovmax / (abs(vdov[e]) + 1.0e-20))
    dtc[0] = courant
    dtc[1] = hydro


@gk.kernel
def lulesh_time_increment(st, dtc, stoptime, lb, ub, dtmax):
    olddt = st[0]
    newdt = min(dtc[0] / 2.0, dtc[1] * 2.0 / 3.0)
    ratio = newdt / olddt
    if ratio >= 1.0:
        if ratio < lb:
            newdt = olddt
        elif ratio > ub:
            newdt = olddt * ub
    if newdt > dtmax:
        newdt = dtmax
    targetdt = stoptime - st[1]
    if targetdt > newdt and targetdt < 4.0 * newdt / 3.0:
        targetdt = 2.0 * newdt / 3.0
    if targetdt < newdt:
        newdt = targetdt
    st[0] = newdt
    st[1] = st[1] + newdt


@gk.kernel
def lulesh_nodes(x, v, p, mass, st):
    n = gk.tid() + 1  # interior nodes; the ends are walls
    nodal_mass = 0.5 * (mass[n - 1] + mass[n])
    v[n] = v[n] + st[0] * (p[n - 1] - p[n]) / nodal_mass


@gk.kernel
def lulesh_positions(x, v, st):
    n = gk.tid()
    x[n] = x[n] + st[0] * v[n]


def lulesh(stoptime, taken, loop=None):
    """`loop` None: LULESH's while loop on the host's time; else `loop(step, its)` (a fixed count of cycles)."""
    def program(x, v, mass, K, its):
        nelem = mass.shape[0]
        p, ss, vdov = (np.zeros_like(mass) for _ in range(3))
        dtc = np.zeros_like(mass, shape=(2,))
        st = np.zeros_like(mass, shape=(2,))
        gk.fill(st[0:1], 1.0e-3)  # the initial deltatime

        def cycle(t):
            gk.launch(lulesh_elements, nelem, x, v, mass, p, ss, vdov, K, 1.4)
            gk.launch(lulesh_constraints, 1, x, ss, vdov, dtc, 1.2, 0.1)
            gk.launch(lulesh_time_increment, 1, st, dtc, stoptime, 1.1, 1.2, 0.05)
            gk.launch(lulesh_nodes, nelem - 1, x, v, p, mass, st)
            gk.launch(lulesh_positions, nelem + 1, x, v, st)
        if loop is not None:
            loop(cycle, its)
            return
        c = 0
        while st[1] < stoptime and c < its:  # locDom->time() < stoptime: a derived value read for control flow
            cycle(c)
            taken.append(c)
            c += 1
    return program


# -- SPEC CPU2000 171.swim (shallow.f: CALC1/CALC2 then CALC3's time smoothing `UOLD = U + ALPHA*(UNEW - 2U +
# UOLD); U = UNEW`; the first cycle a forward step, TDT = DT, later 2 DT), cut to linear 1-D shallow water on a
# periodic staggered grid: three time levels a field, the smoothed one becoming the old, rotated each step
# (`old, cur, new = cur, new, old`); g Active -------------------------------------------------------------------
@gk.kernel
def swim_calc2(u_old, u_cur, u_new, h_old, h_cur, h_new, tdt, g, depth, dx):
    i = gk.tid()
    n = u_cur.shape[0]
    ip = (i + 1) % n
    im = (i + n - 1) % n
    u_new[i] = u_old[i] - tdt * g * (h_cur[ip] - h_cur[i]) / dx
    h_new[i] = h_old[i] - tdt * depth * (u_cur[i] - u_cur[im]) / dx


@gk.kernel
def swim_calc3(old, cur, new, alpha):
    i = gk.tid()
    cur[i] = cur[i] + alpha * (new[i] - 2.0 * cur[i] + old[i])


SWIM_ALPHA = 0.001


def _swim_levels(u, h):
    """The three levels of each field: the arguments are the current level."""
    return [u, np.zeros_like(u), np.zeros_like(u)], [h, np.zeros_like(h), np.zeros_like(h)]


def swim(loop):
    """The checkpointable spelling: the rotation chosen by t % 3."""
    def program(u, h, g, ncycles):
        n = u.shape[0]
        dt, dx = 0.05, 1.0 / n
        (u0, u1, u2), (h0, h1, h2) = _swim_levels(u, h)
        gk.copy(u1, u0)  # UOLD = U, HOLD = H before the first cycle
        gk.copy(h1, h0)
        roles = [(1, 0, 2), (0, 2, 1), (2, 1, 0)]  # (old, cur, new) after 0, 1, 2 rotations

        def cycle(t):
            o, c, w = roles[t % 3]
            us, hs = (u0, u1, u2), (h0, h1, h2)
            tdt = dt if t == 0 else 2.0 * dt
            gk.launch(swim_calc2, n, us[o], us[c], us[w], hs[o], hs[c], hs[w], tdt, g, 1.0, dx)
            gk.launch(swim_calc3, n, us[o], us[c], us[w], SWIM_ALPHA)
            gk.launch(swim_calc3, n, hs[o], hs[c], hs[w], SWIM_ALPHA)
        loop(cycle, ncycles)
        last = roles[ncycles % 3][1]
        if last != 0:
            gk.copy(u, (u0, u1, u2)[last])
            gk.copy(h, (h0, h1, h2)[last])
    return program


def swim_rotate(u, h, g, ncycles):
    """shallow.f's loop as a port writes it: three names per field rotated after each cycle."""
    n = u.shape[0]
    dt, dx = 0.05, 1.0 / n
    (u_cur, u_old, u_new), (h_cur, h_old, h_new) = _swim_levels(u, h)
    gk.copy(u_old, u_cur)
    gk.copy(h_old, h_cur)
    for t in range(ncycles):
        tdt = dt if t == 0 else 2.0 * dt
        gk.launch(swim_calc2, n, u_old, u_cur, u_new, h_old, h_cur, h_new, tdt, g, 1.0, dx)
        gk.launch(swim_calc3, n, u_old, u_cur, u_new, SWIM_ALPHA)
        gk.launch(swim_calc3, n, h_old, h_cur, h_new, SWIM_ALPHA)
        u_old, u_cur, u_new = u_cur, u_new, u_old
        h_old, h_cur, h_new = h_cur, h_new, h_old
    if u_cur is not u:
        gk.copy(u, u_cur)
        gk.copy(h, h_cur)


# -- a Lorenz-96 RK4 driver (Lorenz 1996, the classic fourth-order Runge-Kutta loop of a data-assimilation test
# bed): the tendency a kernel, each stage's x + c k a kernel, the state kept every `every` steps (a copy in a list:
# periodic output) and a 4D-Var misfit summed over the kept states after the loop; the loop stops early at a step
# count read from the run's configuration; the forcing F Active --------------------------------------------------
@gk.kernel
def l96_tendency(x, k, F):
    i = gk.tid()
    n = x.shape[0]
    k[i] = (x[(i + 1) % n] - x[(i + n - 2) % n]) * x[(i + n - 1) % n] - x[i] + F


@gk.kernel
def l96_stage(x, k, out, c):
    i = gk.tid()
    out[i] = x[i] + c * k[i]


@gk.kernel
def l96_combine(x, k1, k2, k3, k4, dt):
    i = gk.tid()
    x[i] = x[i] + dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i])


@gk.kernel
def l96_misfit(xs, y, cost):
    i = gk.tid()
    d = xs[i] - y[i]
    gk.atomic_add(cost, 0, d * d)


def _l96_step(x, ks, tmp, F, dt):
    n = x.shape[0]
    k1, k2, k3, k4 = ks
    gk.launch(l96_tendency, n, x, k1, F)
    gk.launch(l96_stage, n, x, k1, tmp, 0.5 * dt)
    gk.launch(l96_tendency, n, tmp, k2, F)
    gk.launch(l96_stage, n, x, k2, tmp, 0.5 * dt)
    gk.launch(l96_tendency, n, tmp, k3, F)
    gk.launch(l96_stage, n, x, k3, tmp, dt)
    gk.launch(l96_tendency, n, tmp, k4, F)
    gk.launch(l96_combine, n, x, k1, k2, k3, k4, dt)


def lorenz96(loop, config):
    """Segments of `every` steps (`loop` around each), the state kept after each; config["max_steps"] stops it
    early (a break at a step count from the configuration); then the misfit of the kept states."""
    def program(x, cost, obs, F, nsteps):
        ks = [np.zeros_like(x) for _ in range(4)]
        tmp = np.zeros_like(x)
        every = config["every"]
        kept = []
        for seg in range(nsteps // every):
            if seg * every >= config["max_steps"]:
                break
            loop(lambda t: _l96_step(x, ks, tmp, F, 0.05), every)
            kept.append(x.copy())  # periodic output: a differentiated copy
        for xs, y in zip(kept, obs):
            gk.launch(l96_misfit, x.shape[0], xs, y, cost)
    return program


def lorenz96_host_stage(x, cost, obs, F, nsteps):
    """The stage written as NumPy on the host (`x1 = x + 0.5 * dt * k1`), the spelling a port writes first."""
    k1, k2 = np.zeros_like(x), np.zeros_like(x)
    dt = 0.05
    for _ in range(nsteps):
        gk.launch(l96_tendency, x.shape[0], x, k1, F)
        x1 = x + 0.5 * dt * k1
        gk.launch(l96_tendency, x.shape[0], x1, k2, F)
        gk.launch(l96_stage, x.shape[0], x, k2, k1, dt)


def lorenz96_kept_in_checkpointed_step(x, cost, obs, F, nsteps):
    """The state kept inside a checkpointed loop's step (`kept.append(x.copy())` every 2 steps)."""
    ks = [np.zeros_like(x) for _ in range(4)]
    tmp = np.zeros_like(x)
    kept = []

    def step(t):
        _l96_step(x, ks, tmp, F, 0.05)
        if t % 2 == 1:
            kept.append(x.copy())
    gk.checkpointed_loop(step, nsteps, snapshots=2)
    for xs, y in zip(kept, obs):
        gk.launch(l96_misfit, x.shape[0], xs, y, cost)


# -- an SU2-like pseudo-time loop (SU2 7's CIntegration / CEulerSolver::SetTime_Step with local time stepping and
# the driver's convergence test on log10 of the RMS residual; OpenFOAM's pseudo-transient loops are alike): a 1-D
# steady convection-diffusion-reaction problem, upwind convection, each cell's own time step from its spectral
# radius (a kernel), explicit pseudo-time updates until the residual falls `orders` orders or max_iter; nu Active ---
@gk.kernel
def su2_residual(u, s, res, rms, a, nu, kr, dx):
    i = gk.tid() + 1
    r = a * (u[i] - u[i - 1]) / dx - nu * (u[i + 1] - 2.0 * u[i] + u[i - 1]) / (dx * dx) + kr * u[i] - s[i]
    res[i] = r
    gk.atomic_add(rms, 0, r * r)


@gk.kernel
def su2_local_update(u, res, a, nu, kr, dx, cfl):
    i = gk.tid() + 1
    dt_local = cfl / (a / dx + 2.0 * nu / (dx * dx) + kr)  # SetTime_Step: the cell's spectral radius
    u[i] = u[i] - dt_local * res[i]


def su2(orders, taken):
    def program(u, s, nu, max_iter):
        n = u.shape[0]
        res = np.zeros_like(u)
        rms = np.zeros_like(u, shape=(1,))
        dx = 1.0 / (n - 1)

        def residual():
            gk.fill(rms, 0.0)
            gk.launch(su2_residual, n - 2, u, s, res, rms, 1.0, nu, 0.5, dx)
            return math.log10(math.sqrt(rms[0] / (n - 2)))  # a derived scalar: the driver's monitor
        start = residual()
        it = 0
        while it < max_iter and residual() > start - orders:
            gk.launch(su2_local_update, n - 2, u, res, 1.0, nu, 0.5, dx, 0.4)
            taken.append(it)
            it += 1
    return program


@gk.kernel
def su2_global_update(u, res, dt):
    i = gk.tid() + 1
    u[i] = u[i] - dt * res[i]


def su2_global_dt(u, s, nu, max_iter):
    """Global time stepping as a port writes it first: dt from a CFL condition on the host's max over the state."""
    n = u.shape[0]
    res = np.zeros_like(u)
    rms = np.zeros_like(u, shape=(1,))
    dx = 1.0 / (n - 1)
    for _ in range(max_iter):
        gk.launch(su2_residual, n - 2, u, s, res, rms, 1.0, nu, 0.5, dx)
        dt = 0.4 * dx / (np.abs(u).max() + 1.0)
        gk.launch(su2_global_update, n - 2, u, res, dt)


def su2_host_inlet(u, s, nu, max_iter):
    """The inlet condition re-imposed on the host after each update (`u[0] = 1.0`)."""
    n = u.shape[0]
    res = np.zeros_like(u)
    rms = np.zeros_like(u, shape=(1,))
    dx = 1.0 / (n - 1)
    for _ in range(max_iter):
        gk.launch(su2_residual, n - 2, u, s, res, rms, 1.0, nu, 0.5, dx)
        gk.launch(su2_local_update, n - 2, u, res, 1.0, nu, 0.5, dx, 0.4)
        u[0] = 1.0
