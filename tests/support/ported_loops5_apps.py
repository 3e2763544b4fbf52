"""A fifth round of third-party host loops ported as programs (session 52; docs/programs.md, "Ported host loops"),
part 2: application drivers (DiffTaichi's mass_spring optimisation loop around the whole differentiated program,
CoMD's velocity Verlet with a neighbour list rebuilt on the host every k steps from the primal positions, a
PENNANT-like staggered Lagrangian hydro cycle, Nekbone's CG with a gather-scatter, Laghos' RK2-average
integrator writing a time series into a preallocated history). Written here from the algorithms, as a user
porting the driver writes it. Used by tests/program/test_ported_loops5.py."""

import math

import numpy as np

import gradkern as gk


# -- DiffTaichi (examples/mass_spring.py: forward()'s substeps of apply_spring_force and advance_toi, the loss
# `-x[steps - 1][head]`, and the optimisation loop `for iter in range(n_iters): with ti.ad.Tape(loss): forward();
# weights -= learning_rate * weights.grad`), cut to a 1-D chain on a floor with stick-slip friction (the ground
# contact as a branch on the velocity's sign); each spring's actuation act[s] * sin(omega t) the parameters; the
# objective after nsteps substeps in a one-element array (gk.copy of the head's position); the stiffness k Active
@gk.kernel
def ms_forces(x, f, act, k, rest, phase):
    i = gk.tid()
    n = x.shape[0]
    s = 0.0
    if i < n - 1:
        s += k * (x[i + 1] - x[i] - rest) * (1.0 + act[i] * phase)
    if i > 0:
        s -= k * (x[i] - x[i - 1] - rest) * (1.0 + act[i - 1] * phase)
    f[i] = s


@gk.kernel
def ms_advance(x, v, f, dt):
    i = gk.tid()
    vn = (v[i] + dt * f[i]) * 0.95
    if vn < 0.0:  # the floor holds a foot moving backwards more than forwards
        vn = 0.3 * vn
    v[i] = vn
    x[i] = x[i] + dt * vn


def mass_spring(x, v, act, loss, k, nsteps):
    """forward(): nsteps substeps, then the objective: the head's position, copied into a one-element array
    (DiffTaichi minimises its negative; the driver here ascends)."""
    n = x.shape[0]
    f = np.zeros_like(x)
    for t in range(nsteps):
        gk.launch(ms_forces, n, x, f, act, k, 1.0, math.sin(0.6 * t))  # phase: host arithmetic on t
        gk.launch(ms_advance, n, x, v, f, 0.2)
    gk.copy(loss, x[-1:])


def mass_spring_optimise(x0, v0, act, k, iters, lr, nsteps=8):
    """The optimisation driver: each iteration gk.autodiff of the whole program from the same initial state, then
    a gradient step on the actuation (in place, as `weights -= learning_rate * weights.grad` on the loss, the
    objective's negative). Returns the objectives and the last gradient."""
    losses = []
    grad = None
    for _ in range(iters):
        loss = np.zeros(1)
        grad = np.zeros_like(act)
        gk.autodiff(mass_spring, gk.Duplicated(x0.copy(), np.zeros_like(x0)), gk.Duplicated(v0.copy(),
                    np.zeros_like(v0)), gk.Duplicated(act.copy(), grad), gk.Duplicated(loss, np.ones(1)), k, nsteps)
        losses.append(float(loss[0]))
        act += lr * grad
    return losses, grad


# -- CoMD 1.1 (src-openmp/timestep.c: timestep()'s advanceVelocity / advancePosition / computeForce, the link cells
# of linkCells.c, ljForce.c's Lennard-Jones with a cutoff), cut to 2-D in a periodic box: the candidate pairs found
# on the host from the primal positions (cells from `np.floor(x / cell).astype(np.int64)`, the pairs of neighbouring
# cells, then `r2 < (rc + skin) ** 2`: integer data, no derivative) every `every` steps; a thread a pair with
# atomic adds of the shifted force (zero beyond rc); the LJ epsilon Active -----------------------------------------
@gk.kernel
def comd_force(x, pi, pj, f, eps, box, rc):
    p = gk.tid()
    a = pi[p]
    b = pj[p]
    dx = x[a, 0] - x[b, 0]
    dy = x[a, 1] - x[b, 1]
    dx = dx - box * math.floor(dx / box + 0.5)  # the minimum image
    dy = dy - box * math.floor(dy / box + 0.5)
    r2 = dx * dx + dy * dy
    if r2 < rc * rc:
        ir6 = 1.0 / (r2 * r2 * r2)
        irc6 = 1.0 / (rc ** 6)
        fr = 24.0 * eps * ((2.0 * ir6 * ir6 - ir6) / r2 - (2.0 * irc6 * irc6 - irc6) / (rc * math.sqrt(r2)))
        gk.atomic_add(f, (a, 0), fr * dx)
        gk.atomic_add(f, (a, 1), fr * dy)
        gk.atomic_add(f, (b, 0), -fr * dx)
        gk.atomic_add(f, (b, 1), -fr * dy)


@gk.kernel
def comd_kick(v, f, dt):
    i, d = gk.tid()
    v[i, d] = v[i, d] + dt * f[i, d]


@gk.kernel
def comd_drift(x, v, dt):
    i, d = gk.tid()
    x[i, d] = x[i, d] + dt * v[i, d]


def comd_pairs(x, box, ncell, cutoff):
    """linkCells' neighbour search on the host from the state: the pairs (i < j) in the same or neighbouring cells
    closer than `cutoff` (minimum image). x is the program's (tracked) array: the cells and the test are integer
    and boolean images of it."""
    cell = np.floor(x / (box / ncell)).astype(np.int64) % ncell
    cid = cell[:, 0] * ncell + cell[:, 1]
    near = set()
    for a in range(ncell):
        for b in range(ncell):
            near |= {(a * ncell + b, ((a + da) % ncell) * ncell + (b + db) % ncell)
                     for da in (-1, 0, 1) for db in (-1, 0, 1)}
    n = x.shape[0]
    cand = [(i, j) for i in range(n) for j in range(i + 1, n) if (cid[i], cid[j]) in near]
    pi = np.array([c[0] for c in cand], np.int64)
    pj = np.array([c[1] for c in cand], np.int64)
    d = x[pi] - x[pj]
    d = d - box * np.floor(d / box + 0.5)
    keep = (d * d).sum(axis=1) < cutoff * cutoff  # a boolean image of derived values: no derivative
    return pi[keep], pj[keep]


def comd(loop, every=3, box=4.6, ncell=3, rc=1.4, skin=0.3, dt=0.01, rebuilt=None):
    """`loop` a plain loop: the list rebuilt every `every` steps, kept in a host variable between them (CoMD's
    spelling). With every=1 the list is a function of the step's own state (checkpointable)."""
    def program(x, v, eps, nsteps):
        n = x.shape[0]
        f = np.zeros_like(x)
        pairs = []

        def forces():
            gk.fill(f, 0.0)
            gk.launch(comd_force, pairs[0].shape[0], x, pairs[0], pairs[1], f, eps, box, rc)

        def step(t):
            if t % every == 0:
                pairs[:] = comd_pairs(x, box, ncell, rc + skin)
                if rebuilt is not None:
                    rebuilt.append(t)
            if t == 0:
                forces()
            gk.launch(comd_kick, (n, 2), v, f, 0.5 * dt)
            gk.launch(comd_drift, (n, 2), x, v, dt)
            forces()
            gk.launch(comd_kick, (n, 2), v, f, 0.5 * dt)
        loop(step, nsteps)
    return program


def comd_state(rng, side=4, box=4.6):
    """A perturbed square lattice and small velocities."""
    g = (np.arange(side) + 0.5) * box / side
    x = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2) + rng.uniform(-0.08, 0.08, (side * side, 2))
    return x, rng.uniform(-0.3, 0.3, (side * side, 2))


# -- PENNANT 0.9 (src/Hydro.cc: doCycle's predictor / corrector on a staggered mesh, PolyGas::calcEOS, calcWork,
# calcDtCourant with the growth limit `dtnew = min(dtrec, dtfac * dtlast)`), cut to 1-D: points px, pu, zones' energy
# ze and fixed masses zm; the next dt from a one-thread kernel (min over zones) so that d dt / d state is kept;
# gamma Active ----------------------------------------------------------------------------------------------------
@gk.kernel
def pn_predict(px, pu, pxp, dt):
    p = gk.tid()
    pxp[p] = px[p] + 0.5 * dt[0] * pu[p]


@gk.kernel
def pn_eos(px, zm, ze, zr, zp, gamma):
    z = gk.tid()
    zr[z] = zm[z] / (px[z + 1] - px[z])
    zp[z] = (gamma - 1.0) * zr[z] * ze[z]


@gk.kernel
def pn_accel(pu, pu0, zp, zm, dt):
    p = gk.tid() + 1  # the end points are walls: pu = 0 there
    pm = 0.5 * (zm[p - 1] + zm[p])
    pu[p] = pu0[p] + dt[0] * (zp[p - 1] - zp[p]) / pm


@gk.kernel
def pn_move_work(px, pu, pu0, ze, zp, zm, dt):
    z = gk.tid()
    ubar0 = 0.5 * (pu0[z] + pu[z])
    ubar1 = 0.5 * (pu0[z + 1] + pu[z + 1])
    ze[z] = ze[z] - dt[0] * zp[z] * (ubar1 - ubar0) / zm[z]  # calcWork: p dV
    px[z] = px[z] + dt[0] * ubar0
    if z == zm.shape[0] - 1:
        px[z + 1] = px[z + 1] + dt[0] * ubar1


@gk.kernel
def pn_dt(px, zr, zp, gamma, dt, cfl, dtfac):
    m = dt[0] * dtfac
    for z in range(zr.shape[0]):
        css = math.sqrt(gamma * zp[z] / zr[z])
        m = min(m, cfl * (px[z + 1] - px[z]) / css)
    dt[0] = m


def pennant(loop, dt0=0.01):
    def program(px, pu, ze, zm, gamma, cycles):
        nz = ze.shape[0]
        pxp, pu0, zr, zp = np.zeros_like(px), np.zeros_like(pu), np.zeros_like(ze), np.zeros_like(ze)
        dt = np.zeros_like(px, shape=(1,))
        gk.fill(dt, dt0)

        def cycle(t):
            gk.copy(pu0, pu)
            gk.launch(pn_predict, nz + 1, px, pu, pxp, dt)
            gk.launch(pn_eos, nz, pxp, zm, ze, zr, zp, gamma)  # the half step's pressure
            gk.launch(pn_accel, nz - 1, pu, pu0, zp, zm, dt)
            gk.launch(pn_move_work, nz, px, pu, pu0, ze, zp, zm, dt)
            gk.launch(pn_eos, nz, px, zm, ze, zr, zp, gamma)
            gk.launch(pn_dt, 1, px, zr, zp, gamma, dt, 0.3, 1.2)
        loop(cycle, cycles)
    return program


# -- Nekbone 3.1 (src/cg.f: cg's loop with glsc3 dot products weighted by the inverse multiplicity, ax's local
# element operator, dssum's gather-scatter gs_op(gsh, w, 1, 1, 0) and the Dirichlet mask), cut to 1-D spectral
# elements of order 3 (4 GLL nodes, elementwise vectors (E, 4)): the scatter-add into a global vector by atomic adds
# through the element-to-global map, the gather back through it; the Helmholtz term h2 Active ----------------------
GLL_W = (1.0 / 6.0, 5.0 / 6.0, 5.0 / 6.0, 1.0 / 6.0)
GLL_K = ((7.0 / 6.0, -1.4472135954999579, 0.4472135954999579, -1.0 / 6.0),
         (-1.4472135954999579, 5.0 / 3.0, -2.0 / 3.0, 0.4472135954999579),
         (0.4472135954999579, -2.0 / 3.0, 5.0 / 3.0, -1.4472135954999579),
         (-1.0 / 6.0, 0.4472135954999579, -1.4472135954999579, 7.0 / 6.0))


@gk.kernel
def nek_ax(u, w, stiff, mass, h2, scale):
    e, a = gk.tid()
    s = 0.0
    for b in range(4):
        s += stiff[a, b] * u[e, b]
    w[e, a] = scale * s + h2 * mass[a] * u[e, a] / scale


@gk.kernel
def nek_scatter_add(w, glob, gmap):
    e, a = gk.tid()
    gk.atomic_add(glob, gmap[e, a], w[e, a])


@gk.kernel
def nek_gather(w, glob, gmap, mask):
    e, a = gk.tid()
    w[e, a] = glob[gmap[e, a]] * mask[gmap[e, a]]


@gk.kernel
def nek_glsc3(a, b, mult, out):
    e, i = gk.tid()
    gk.atomic_add(out, 0, a[e, i] * b[e, i] * mult[e, i])


@gk.kernel
def nek_p(p, z, rtz1, rtz2, first):
    e, a = gk.tid()
    beta = 0.0 if first == 1 else rtz1[0] / rtz2[0]
    p[e, a] = z[e, a] + beta * p[e, a]


@gk.kernel
def nek_xr(x, r, p, w, rtz1, pap):
    e, a = gk.tid()
    alpha = rtz1[0] / pap[0]
    x[e, a] = x[e, a] + alpha * p[e, a]
    r[e, a] = r[e, a] - alpha * w[e, a]


def nekbone_maps(nelt):
    gmap = np.array([[3 * e + a for a in range(4)] for e in range(nelt)], np.int64)
    ng = 3 * nelt + 1
    mask = np.ones(ng)
    mask[0] = mask[-1] = 0.0
    count = np.zeros(ng)
    np.add.at(count, gmap, 1.0)
    return gmap, mask, 1.0 / count[gmap]


def nekbone(loop):
    def program(r, x, h2, niter):
        nelt = r.shape[0]
        gmap, mask, mult = nekbone_maps(nelt)
        stiff, mass = np.array(GLL_K), np.array(GLL_W)
        p, w = np.zeros_like(r), np.zeros_like(r)
        glob = np.zeros_like(r, shape=(3 * nelt + 1,))
        rtz1, rtz2, pap = (np.zeros_like(r, shape=(1,)) for _ in range(3))
        scale = float(nelt)  # 2 / h: the reference element's Jacobian, elements of width h = 2 / nelt
        dims = (nelt, 4)

        def dssum(v):  # gs_op: the sum over the copies of each global node, then back, masked
            gk.fill(glob, 0.0)
            gk.launch(nek_scatter_add, dims, v, glob, gmap)
            gk.launch(nek_gather, dims, v, glob, gmap, mask)
        dssum(r)

        def iteration(t):
            gk.copy(rtz2, rtz1)
            gk.fill(rtz1, 0.0)
            gk.launch(nek_glsc3, dims, r, r, mult, rtz1)  # solveM is the identity: z = r
            gk.launch(nek_p, dims, p, r, rtz1, rtz2, 1 if t == 0 else 0)
            gk.launch(nek_ax, dims, p, w, stiff, mass, h2, scale)
            dssum(w)
            gk.fill(pap, 0.0)
            gk.launch(nek_glsc3, dims, w, p, mult, pap)
            gk.launch(nek_xr, dims, x, r, p, w, rtz1, pap)
        loop(iteration, niter)
    return program


# -- Laghos 3.1 (laghos_timeinteg.cpp: RK2AvgSolver::Step: v_1/2 = v0 + dt/2 dv/dt(S0), e_1/2 likewise, x_1/2 =
# x0 + dt/2 v_1/2; then dv/dt at S_1/2, v = v0 + dt dv/dt, v_bar = (v0 + v) / 2, de/dt from v_bar, x = x0 + dt
# v_bar), cut to a 1-D Lagrangian gas (ideal-gas pressure on zones, forces on the nodes between them, walls at the
# ends); each step's energy written into a preallocated `history[t]` (the driver's time series); gamma Active ----
@gk.kernel
def lg_pressure(x, e, zm, p, gamma):
    z = gk.tid()
    p[z] = (gamma - 1.0) * zm[z] / (x[z + 1] - x[z]) * e[z]


@gk.kernel
def lg_velocity(v, v0, p, zm, frac):
    i = gk.tid() + 1
    v[i] = v0[i] + frac * (p[i - 1] - p[i]) / (0.5 * (zm[i - 1] + zm[i]))


@gk.kernel
def lg_energy_position(x, x0, e, e0, v, vref, p, zm, frac):
    z = gk.tid()
    vb0 = 0.5 * (v[z] + vref[z])
    vb1 = 0.5 * (v[z + 1] + vref[z + 1])
    e[z] = e0[z] - frac * p[z] * (vb1 - vb0) / zm[z]
    x[z] = x0[z] + frac * vb0
    if z == zm.shape[0] - 1:
        x[z + 1] = x0[z + 1] + frac * vb1


def laghos(loop, dt=0.01):
    def program(x, v, e, history, zm, gamma, nsteps):
        nz = e.shape[0]
        x0, v0, e0, p = np.zeros_like(x), np.zeros_like(v), np.zeros_like(e), np.zeros_like(e)

        def step(t):
            gk.copy(x0, x)
            gk.copy(v0, v)
            gk.copy(e0, e)
            gk.launch(lg_pressure, nz, x0, e0, zm, p, gamma)  # stage 1 at S0: the half step, v_1/2 only
            gk.launch(lg_velocity, nz - 1, v, v0, p, zm, 0.5 * dt)
            gk.launch(lg_energy_position, nz, x, x0, e, e0, v, v, p, zm, 0.5 * dt)
            gk.launch(lg_pressure, nz, x, e, zm, p, gamma)  # stage 2 at S_1/2
            gk.launch(lg_velocity, nz - 1, v, v0, p, zm, dt)
            gk.launch(lg_energy_position, nz, x, x0, e, e0, v, v0, p, zm, dt)  # v_bar = (v + v0) / 2
            gk.copy(history[t], e)
        loop(step, nsteps)
    return program
