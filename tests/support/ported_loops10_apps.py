"""A tenth round of third-party host loops ported as programs (session 57; docs/programs.md, "Ported host loops"),
part 2: PyClaw's time-step control around SharpClaw's SSP RK3 (a step rejected and retaken on its CFL number),
LAMMPS' Verlet run with the neighbour list rebuilt when an atom has moved half the skin, and Devito's acoustic
forward operator (a modular time buffer, a source injected and receivers interpolated every step). Written here
from the drivers cited; each port has a NumPy reference of the same loop. Used by
tests/program/test_ported_loops10.py."""

import math

import numpy as np

import gradkern as gk

# -- PyClaw (clawpack/pyclaw src/pyclaw/solver.py: Solver.evolve_to_time's `while True` loop: the step cut to hit
# tend, `q_backup = solution.q.copy()`, `self.step(...)`, `cfl = self.cfl.get_cached_max()`, accept_reject_step's
# `cfl <= self.cfl_max` (accepted: `solution.t += self.dt`; rejected: `state.q = q_backup`), then
# `self.dt = min(self.dt_max, self.dt * self.cfl_desired / cfl)`; src/pyclaw/sharpclaw/solver.py's ssp33 stages
# `q + dq`, `0.75 q + 0.25 (s1 + dq)`, `q / 3 + 2 / 3 (s2 + dq)`, the CFL number the maximum over the stages), 1-D
# shallow water with Rusanov fluxes and periodic ghost cells by gk.copy of columns. t, dt in a kernel-written
# `tt` (PyClaw's host `self.dt = ...` from the derived cfl into the stages' launches is refused: a test pins it),
# the accept/reject and the end on the host; gravity Active -----------------------------------------------------
SWE = dict(dx=0.25, tend=0.12, dt0=0.09, dt_max=1.0, cfl_max=1.0, cfl_desired=0.9, max_steps=8)


@gk.kernel
def swe_flux(q, f, s, g):
    i = gk.tid()  # the interface between cells i and i + 1 (ghosts counted)
    hl = q[0, i]
    hr = q[0, i + 1]
    ul = q[1, i] / hl
    ur = q[1, i + 1] / hr
    a = max(abs(ul) + gk.sqrt(g * hl), abs(ur) + gk.sqrt(g * hr))
    f[0, i] = 0.5 * (q[1, i] + q[1, i + 1]) - 0.5 * a * (hr - hl)
    f[1, i] = (0.5 * (hl * ul * ul + 0.5 * g * hl * hl + hr * ur * ur + 0.5 * g * hr * hr)
               - 0.5 * a * (q[1, i + 1] - q[1, i]))
    s[i] = a


@gk.kernel
def swe_cfl(s, cfl, tt, dx):
    m = 0.0
    for i in range(s.shape[0]):
        m = max(m, s[i])
    cfl[0] = max(cfl[0], m * tt[1] / dx)


@gk.kernel
def swe_stage(out, base, st, f, tt, dx, a0, a1):
    i = gk.tid()
    c = i + 1
    dtdx = tt[1] / dx
    out[0, c] = a0 * base[0, c] + a1 * (st[0, c] - dtdx * (f[0, c] - f[0, c - 1]))
    out[1, c] = a0 * base[1, c] + a1 * (st[1, c] - dtdx * (f[1, c] - f[1, c - 1]))


@gk.kernel
def swe_cut(tt, tend):
    if tt[0] + tt[1] > tend:
        tt[1] = tend - tt[0]


@gk.kernel
def swe_accept(tt):
    tt[0] = tt[0] + tt[1]


@gk.kernel
def swe_new_dt(tt, cfl, cfl_desired, dt_max):
    if cfl[0] > 0.0:
        tt[1] = min(dt_max, tt[1] * cfl_desired / cfl[0])
    else:
        tt[1] = dt_max


def pyclaw_swe(host_dt=False, rejected=None, steps=None):
    """`host_dt`: PyClaw's own `dt = min(dt_max, dt * cfl_desired / cfl)` on the host, dt passed to the stages
    (a read and Active-scalar arithmetic since session 57). `rejected`, `steps` collect the counts of rejected
    and accepted steps."""
    c = SWE

    def program(q, g):
        n = q.shape[1] - 2
        s1, s2 = np.zeros_like(q), np.zeros_like(q)
        f, s = np.zeros((2, n + 1)), np.zeros(n + 1)
        tt, cfl = np.zeros(2), np.zeros(1)
        gk.fill(tt[1:], c["dt0"])

        def dq_stage(out, base, st, a0, a1):  # SharpClaw's dq: ghosts, fluxes, the CFL number, the stage
            gk.copy(st[:, 0], st[:, -2])
            gk.copy(st[:, -1], st[:, 1])
            gk.launch(swe_flux, n + 1, st, f, s, g)
            gk.launch(swe_cfl, 1, s, cfl, tt, c["dx"])
            gk.launch(swe_stage, n, out, base, st, f, tt, c["dx"], a0, a1)

        taken = bad = 0
        while True:
            gk.launch(swe_cut, 1, tt, c["tend"])
            q_backup = q.copy()
            gk.fill(cfl, 0.0)
            dq_stage(s1, q, q, 0.0, 1.0)
            dq_stage(s2, q, s1, 0.75, 0.25)
            dq_stage(s1, q, s2, 1.0 / 3.0, 2.0 / 3.0)
            gk.copy(q[:, 1:-1], s1[:, 1:-1])
            if cfl[0] <= c["cfl_max"]:
                gk.launch(swe_accept, 1, tt)
                taken += 1
            else:
                gk.copy(q, q_backup)
                bad += 1
            if host_dt:
                dt = min(c["dt_max"], tt[1] * c["cfl_desired"] / cfl[0])
                gk.fill(tt[1:], dt)
            else:
                gk.launch(swe_new_dt, 1, tt, cfl, c["cfl_desired"], c["dt_max"])
            if tt[0] >= c["tend"] or taken >= c["max_steps"]:
                break
        if rejected is not None:
            rejected.append(bad)
            steps.append(taken)
    return program


def pyclaw_swe_reference(q, g):
    c = SWE
    q = q.copy()

    def dq(st):
        st = st.copy()
        st[:, 0], st[:, -1] = st[:, -2], st[:, 1]
        hl, hr = st[0, :-1], st[0, 1:]
        ul, ur = st[1, :-1] / hl, st[1, 1:] / hr
        a = np.maximum(np.abs(ul) + np.sqrt(g * hl), np.abs(ur) + np.sqrt(g * hr))
        f = np.stack([0.5 * (st[1, :-1] + st[1, 1:]) - 0.5 * a * (hr - hl),
                      0.5 * (hl * ul * ul + 0.5 * g * hl * hl + hr * ur * ur + 0.5 * g * hr * hr)
                      - 0.5 * a * (st[1, 1:] - st[1, :-1])])
        out = np.zeros_like(st)
        out[:, 1:-1] = st[:, 1:-1] - dt / c["dx"] * (f[:, 1:] - f[:, :-1])
        return out, a.max() * dt / c["dx"]

    t, dt, taken = 0.0, c["dt0"], 0
    while True:
        if t + dt > c["tend"]:
            dt = c["tend"] - t
        q[:, 0], q[:, -1] = q[:, -2], q[:, 1]  # the first stage's ghosts are q's
        a1, c1 = dq(q)
        s1 = a1
        a2, c2 = dq(s1)
        s2 = 0.75 * q + 0.25 * a2
        a3, c3 = dq(s2)
        new = q / 3.0 + 2.0 / 3.0 * a3
        cfl = max(c1, c2, c3)
        if cfl <= c["cfl_max"]:
            q[:, 1:-1] = new[:, 1:-1]
            t += dt
            taken += 1
        dt = min(c["dt_max"], dt * c["cfl_desired"] / cfl)
        if t >= c["tend"] or taken >= c["max_steps"]:
            break
    return {0: q}


# -- LAMMPS (src/verlet.cpp: Verlet::run's `modify->initial_integrate`, `nflag = neighbor->decide()`, on a rebuild
# `neighbor->build(1)`, `force_clear`, `force->pair->compute`, `modify->final_integrate`; src/neighbor.cpp's decide
# (`every 1 delay 0 check yes`) and check_distance: the largest squared displacement since the last build,
# `delx = x[i][0] - xhold[i][0]`, against `triggersq = 0.25 * skin * skin`, the build keeping `xhold`;
# src/fix_nve.cpp's `v += dtfm * f`, `x += dtv * v`; src/pair_soft.cpp's `E = A (1 + cos(pi r / rc))`,
# `fpair = A sin(pi r / rc) pi / rc / r`), 2-D, no periodic box. The half list built on the host from the primal
# positions (every pair i < j gathered, the squared distance summed on the host, `< (rc + skin)^2`: integer data),
# the displacement check the same way (a derived scalar compared); a thread a listed pair with atomic adds; the
# prefactor A Active ---------------------------------------------------------------------------------------------
LMP = dict(rc=1.0, skin=0.2, dt=0.05, nsteps=6)


@gk.kernel
def soft_pair(x, pi, pj, f, prefactor, rc):
    p = gk.tid()
    a = pi[p]
    b = pj[p]
    dx = x[a, 0] - x[b, 0]
    dy = x[a, 1] - x[b, 1]
    r2 = dx * dx + dy * dy
    if r2 < rc * rc:
        r = gk.sqrt(r2)
        fpair = prefactor * gk.sin(math.pi * r / rc) * math.pi / rc / r
        gk.atomic_add(f, (a, 0), fpair * dx)
        gk.atomic_add(f, (a, 1), fpair * dy)
        gk.atomic_add(f, (b, 0), -fpair * dx)
        gk.atomic_add(f, (b, 1), -fpair * dy)


@gk.kernel
def nve_initial(x, v, f, dtf, dtv):
    i, d = gk.tid()
    v[i, d] = v[i, d] + dtf * f[i, d]
    x[i, d] = x[i, d] + dtv * v[i, d]


@gk.kernel
def nve_final(v, f, dtf):
    i, d = gk.tid()
    v[i, d] = v[i, d] + dtf * f[i, d]


def lammps_verlet(builds=None):
    c = LMP

    def program(x, v, prefactor):
        f = np.zeros_like(x)
        ii, jj = np.triu_indices(x.shape[0], 1)
        cutneighsq = (c["rc"] + c["skin"]) ** 2
        dtf, dtv = 0.5 * c["dt"], c["dt"]  # fix_nve's dtf = 0.5 * update->dt * force->ftm2v, unit mass
        held = {}

        def build():  # Neighbor::build: the half list, and xhold
            d = x[ii] - x[jj]
            keep = (d * d).sum(axis=1) < cutneighsq
            held["list"] = (ii[keep], jj[keep])
            held["xhold"] = x.copy()

        def force():
            gk.fill(f, 0.0)
            pi, pj = held["list"]
            gk.launch(soft_pair, pi.shape[0], x, pi, pj, f, prefactor, c["rc"])

        build()
        force()
        rebuilt = 0
        for _ in range(c["nsteps"]):
            gk.launch(nve_initial, x.shape, x, v, f, dtf, dtv)
            delta = x - held["xhold"]  # check_distance
            if ((delta * delta).sum(axis=1)).max() > 0.25 * c["skin"] ** 2:
                build()
                rebuilt += 1
            force()
            gk.launch(nve_final, x.shape, v, f, dtf)
        if builds is not None:
            builds.append(rebuilt)
    return program


def lammps_verlet_reference(x, v, prefactor):
    c = LMP
    x, v = x.copy(), v.copy()

    def force(x):
        d = x[:, None, :] - x[None, :, :]
        r = np.sqrt((d * d).sum(axis=2))
        np.fill_diagonal(r, 1.0)
        fpair = np.where(r < c["rc"], prefactor * np.sin(np.pi * r / c["rc"]) * np.pi / c["rc"] / r, 0.0)
        np.fill_diagonal(fpair, 0.0)
        return (fpair[:, :, None] * d).sum(axis=1)

    f = force(x)
    for _ in range(c["nsteps"]):
        v += 0.5 * c["dt"] * f
        x += c["dt"] * v
        f = force(x)
        v += 0.5 * c["dt"] * f
    return {0: x, 1: v}


# -- Devito (devitocodes/devito examples/seismic/acoustic/operators.py: ForwardOperator's `m * u.dt2 - u.laplace +
# damp * u.dt = 0` solved for u.forward, `src.inject(field=u.forward, expr=src * dt**2 / m)`,
# `rec.interpolate(expr=u)`; a TimeFunction with time_order=2 and save=None: three buffers indexed `t % 3`;
# examples/seismic/source.py's RickerSource), 2-D: the stencil, the source's bilinear injection at an off-grid
# point of the wavelet sampled on the host, two receivers' bilinear interpolation into `rec[t]`; the squared
# slowness m Duplicated (FWI's gradient) and the damping layer's scale Active (`damp = eta * profile` a host
# expression: a launch) ------------------------------------------------------------------------------------------
DEVITO = dict(h=1.0, dt=0.6, nt=5, f0=0.5, src=(2.4, 3.3), rec=((3.5, 2.6), (1.6, 4.2)))


@gk.kernel
def acoustic_step(u, m, damp, h, dt, t0, t1, t2):
    i, j = gk.tid()
    i += 1
    j += 1
    lap = (u[t1, i + 1, j] + u[t1, i - 1, j] + u[t1, i, j + 1] + u[t1, i, j - 1] - 4.0 * u[t1, i, j]) / (h * h)
    u[t2, i, j] = ((2.0 * m[i, j] * u[t1, i, j] - (m[i, j] - 0.5 * dt * damp[i, j]) * u[t0, i, j] + dt * dt * lap)
                   / (m[i, j] + 0.5 * dt * damp[i, j]))


@gk.kernel
def acoustic_inject(u, m, t2, value, x, y, dt):
    i0 = int(x)
    j0 = int(y)
    px = x - i0
    py = y - j0
    for di in range(2):
        for dj in range(2):
            w = (px if di == 1 else 1.0 - px) * (py if dj == 1 else 1.0 - py)
            u[t2, i0 + di, j0 + dj] += w * value * dt * dt / m[i0 + di, j0 + dj]


@gk.kernel
def acoustic_record(u, rec, coords, t1, t):
    r = gk.tid()
    x = coords[r, 0]
    y = coords[r, 1]
    i0 = int(x)
    j0 = int(y)
    px = x - i0
    py = y - j0
    rec[t, r] = ((1.0 - px) * (1.0 - py) * u[t1, i0, j0] + px * (1.0 - py) * u[t1, i0 + 1, j0]
                 + (1.0 - px) * py * u[t1, i0, j0 + 1] + px * py * u[t1, i0 + 1, j0 + 1])


def ricker(nt, dt, f0):
    """RickerSource's wavelet `(1 - 2 (pi f0 (t - 1 / f0))^2) exp(-(pi f0 (t - 1 / f0))^2)` sampled at t dt."""
    r = (np.pi * f0 * (np.arange(nt) * dt - 1.0 / f0)) ** 2
    return (1.0 - 2.0 * r) * np.exp(-r)


def _damping_profile(shape):
    """Devito's damping layer a cell wide inside the boundary (model.py's `initialize_damp`, cut down)."""
    prof = np.zeros(shape)
    prof[1, :] = prof[-2, :] = prof[:, 1] = prof[:, -2] = 1.0
    return prof


def devito_acoustic(loop):
    c = DEVITO

    def program(m, rec, eta):
        nx, ny = m.shape
        u = np.zeros((3, nx, ny))
        damp = eta * _damping_profile(m.shape)
        wavelet = ricker(c["nt"], c["dt"], c["f0"])
        coords = np.array(c["rec"])

        def step(t):
            t0, t1, t2 = (t + 2) % 3, t % 3, (t + 1) % 3  # u.backward, u, u.forward
            gk.launch(acoustic_step, (nx - 2, ny - 2), u, m, damp, c["h"], c["dt"], t0, t1, t2)
            gk.launch(acoustic_inject, 1, u, m, t2, float(wavelet[t]), c["src"][0], c["src"][1], c["dt"])
            gk.launch(acoustic_record, coords.shape[0], u, rec, coords, t1, t)
        loop(step, c["nt"])
    return program


def devito_acoustic_reference(m, rec, eta):
    c = DEVITO
    m, rec = m.copy(), rec.copy()
    u = np.zeros((3,) + m.shape)
    damp = eta * _damping_profile(m.shape)
    wavelet = ricker(c["nt"], c["dt"], c["f0"])

    def bilinear(x, y):
        i0, j0 = int(x), int(y)
        px, py = x - i0, y - j0
        return [(i0 + di, j0 + dj, (px if di else 1 - px) * (py if dj else 1 - py)) for di in (0, 1) for dj in (0, 1)]

    for t in range(c["nt"]):
        u0, u1, u2 = u[(t + 2) % 3], u[t % 3], u[(t + 1) % 3]
        lap = (u1[2:, 1:-1] + u1[:-2, 1:-1] + u1[1:-1, 2:] + u1[1:-1, :-2] - 4.0 * u1[1:-1, 1:-1]) / c["h"] ** 2
        mi, di = m[1:-1, 1:-1], damp[1:-1, 1:-1]
        u2[1:-1, 1:-1] = ((2.0 * mi * u1[1:-1, 1:-1] - (mi - 0.5 * c["dt"] * di) * u0[1:-1, 1:-1]
                           + c["dt"] ** 2 * lap) / (mi + 0.5 * c["dt"] * di))
        for i, j, w in bilinear(*c["src"]):
            u2[i, j] += w * wavelet[t] * c["dt"] ** 2 / m[i, j]
        for r, (x, y) in enumerate(c["rec"]):
            rec[t, r] = sum(w * u1[i, j] for i, j, w in bilinear(x, y))
    return {1: rec}


# -- HPCG 3.1 (hpcg-benchmark/hpcg src/CG.cpp without preconditioning, `CopyVector(r, z)`: `normr0 = normr` and the
# loop `for (k = 1; k <= max_iter && normr / normr0 > tolerance; k++)`, `rtz` and `beta = rtz / oldrtz` from
# ComputeDotProduct, ComputeWAXPBY's `p = z + beta p`, `x = x + alpha p`, `r = r - alpha Ap`; ComputeSPMV_ref's CSR
# rows; ComputeDotProduct_ref a host loop), a 1-D three-point matrix with the diagonal 2 + sigma, sigma Active.
# Spelled as the original where that works: `r = b - Ap` a NumPy expression (ComputeWAXPBY), the norm
# `np.sqrt(np.dot(r, r))` on the host (a derived scalar the loop only compares); rtz and pAp feed alpha and beta,
# which feed launches: host dot products there are refused (`alpha = rtz / pAp` then `x + alpha * p`: a test pins
# it), so those two sum in a kernel into one-element arrays and the WAXPBYs divide in the kernel ---------------
HPCG_CG = dict(max_iter=6, tolerance=0.05)


@gk.kernel
def hpcg_spmv(vals, cols, rowptr, x, y, sigma):
    i = gk.tid()
    s = sigma * x[i]
    for k in range(rowptr[i], rowptr[i + 1]):
        s += vals[k] * x[cols[k]]
    y[i] = s


@gk.kernel
def hpcg_dot(a, b, out):
    i = gk.tid()
    gk.atomic_add(out, 0, a[i] * b[i])


@gk.kernel
def hpcg_update_p(p, z, rtz, oldrtz):
    i = gk.tid()
    p[i] = z[i] + rtz[0] / oldrtz[0] * p[i]


@gk.kernel
def hpcg_update_xr(x, r, p, ap, rtz, pap):
    i = gk.tid()
    alpha = rtz[0] / pap[0]
    x[i] = x[i] + alpha * p[i]
    r[i] = r[i] - alpha * ap[i]


def hpcg_matrix(n):
    """GenerateProblem's CSR rows, cut to 1-D: 2 on the diagonal, -1 beside it (the shift sigma added by SPMV)."""
    cols, vals, rowptr = [], [], [0]
    for i in range(n):
        for j in (i - 1, i, i + 1):
            if 0 <= j < n:
                cols.append(j)
                vals.append(2.0 if j == i else -1.0)
        rowptr.append(len(cols))
    return np.array(vals), np.array(cols, np.int64), np.array(rowptr, np.int64)


def hpcg_cg(host_alpha=False, iterations=None):
    c = HPCG_CG

    def program(x, b, vals, sigma):
        n = x.shape[0]
        _, cols, rowptr = hpcg_matrix(n)
        ap = np.zeros_like(x)
        rtz, oldrtz, pap = np.zeros(1), np.zeros(1), np.zeros(1)

        def dot(u, v, out):
            gk.fill(out, 0.0)
            gk.launch(hpcg_dot, n, u, v, out)

        p = x.copy()  # CopyVector(x, p)
        gk.launch(hpcg_spmv, n, vals, cols, rowptr, p, ap, sigma)
        r = b - ap  # ComputeWAXPBY(nrow, 1.0, b, -1.0, Ap, r)
        normr = np.sqrt(np.dot(r, r))  # ComputeDotProduct: a derived scalar, compared only
        normr0 = normr
        k = 1
        while k <= c["max_iter"] and normr / normr0 > c["tolerance"]:
            z = r.copy()  # CopyVector(r, z): no preconditioning
            if k == 1:
                gk.copy(p, z)
                dot(r, z, rtz)
            else:
                gk.copy(oldrtz, rtz)
                dot(r, z, rtz)
                gk.launch(hpcg_update_p, n, p, z, rtz, oldrtz)
            gk.launch(hpcg_spmv, n, vals, cols, rowptr, p, ap, sigma)
            if host_alpha:  # the original's `alpha = rtz / pAp` on the host, then ComputeWAXPBY
                alpha = np.dot(r, z) / np.dot(p, ap)
                x_new = x + alpha * p
                gk.copy(x, x_new)
            dot(p, ap, pap)
            gk.launch(hpcg_update_xr, n, x, r, p, ap, rtz, pap)
            normr = np.sqrt(np.dot(r, r))
            k += 1
        if iterations is not None:
            iterations.append(k - 1)
    return program


def hpcg_cg_reference(x, b, vals, sigma):
    c = HPCG_CG
    n = x.shape[0]
    _, cols, rowptr = hpcg_matrix(n)
    a = sigma * np.eye(n)
    for i in range(n):
        a[i, cols[rowptr[i]:rowptr[i + 1]]] += vals[rowptr[i]:rowptr[i + 1]]
    x = x.copy()
    r = b - a @ x
    normr0 = normr = np.sqrt(r @ r)
    p, rtz, k = None, 0.0, 1
    while k <= c["max_iter"] and normr / normr0 > c["tolerance"]:
        oldrtz, rtz = rtz, r @ r
        p = r.copy() if k == 1 else r + rtz / oldrtz * p
        ap = a @ p
        alpha = rtz / (p @ ap)
        x, r = x + alpha * p, r - alpha * ap
        normr = np.sqrt(r @ r)
        k += 1
    return {0: x}


__all__ = ["pyclaw_swe", "pyclaw_swe_reference", "lammps_verlet", "lammps_verlet_reference", "devito_acoustic",
           "devito_acoustic_reference", "ricker", "hpcg_cg",
           "hpcg_cg_reference", "hpcg_matrix"]
