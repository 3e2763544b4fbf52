"""A ninth round of third-party host loops ported as programs (session 56; docs/programs.md, "Ported host loops"),
part 1: solvers whose host loops nest (Taichi's MGPCG example: CG around a V-cycle around red-black sweeps;
TeaLeaf's PPCG: CG presteps, a switch on the error, then flexible CG around Chebyshev inner steps), Castro's retry
(a step discarded, the state restored from memory and the step subcycled) and pyro2's Burgers driver (dt from a
CFL reduction, the last step cut to the end time). Written here from the drivers cited, as a user porting them
writes them. Used by tests/program/test_ported_loops9.py. Each factory takes `loop(step, nsteps)`: a plain loop or a
checkpointed one (support/ported_loops.py)."""

import numpy as np

import gradkern as gk
from support.ported_loops import plain
from support.ported_loops4 import tea_cheby_coefficients
from support.ported_loops6 import tl_apply, tl_calc_ur, tl_calc_w, tl_cg_iteration, tl_coefficients, tl_init


@gk.kernel
def dot_into(a, b, out):
    i, j = gk.tid()
    gk.atomic_add(out, 0, a[i + 1, j + 1] * b[i + 1, j + 1])


def _dot(a, b, out, inner):
    gk.fill(out, 0.0)
    gk.launch(dot_into, inner, a, b, out)


# -- Taichi python/taichi/examples/algorithm/mgpcg.py (CG preconditioned by a V-cycle: apply_preconditioner's
# `for l in range(n_mg_levels - 1): for i in range(pre_and_post_smoothing << l): smooth(l, 0); smooth(l, 1)`, then
# z[l + 1].fill(0), r[l + 1].fill(0), restrict(l); bottom_smoothing sweeps; prolongate and the sweeps back up in
# the other colour order; the CG loop `for i in range(400)` with `if rTr < initial_rTr * 1.0e-12: break`), in 2-D
# with a zero halo a level; the operator's diagonal 4 + sigma with the shift sigma Active. Taichi's host
# `alpha[None] = old_zTr / pAp` is divided in the kernels (a derived scalar into a launch is refused) -------------
MGPCG = dict(n=4, levels=2, pre_and_post=1, bottom=3, max_iters=5)


@gk.kernel
def mg_smooth(z, r, diag, phase):
    i, j = gk.tid()
    i += 1
    j += 1
    if ((i + j) & 1) == phase:
        z[i, j] = (r[i, j] + z[i + 1, j] + z[i - 1, j] + z[i, j + 1] + z[i, j - 1]) / diag


@gk.func
def mg_residual(r, z, diag, i, j):
    return r[i, j] - (diag * z[i, j] - z[i + 1, j] - z[i - 1, j] - z[i, j + 1] - z[i, j - 1])


@gk.kernel
def mg_restrict(r, z, rc, diag):
    i, j = gk.tid()
    res = mg_residual(r, z, diag, i + 1, j + 1)
    gk.atomic_add(rc, (i // 2 + 1, j // 2 + 1), res * 0.5)


@gk.kernel
def mg_prolongate(z, zc):
    i, j = gk.tid()
    z[i + 1, j + 1] = zc[i // 2 + 1, j // 2 + 1]


@gk.kernel
def mg_compute_ap(p, ap, diag):
    i, j = gk.tid()
    i += 1
    j += 1
    ap[i, j] = diag * p[i, j] - p[i + 1, j] - p[i - 1, j] - p[i, j + 1] - p[i, j - 1]


@gk.kernel
def mg_update_xr(x, r, p, ap, ztr, pap):
    i, j = gk.tid()
    alpha = ztr[0] / pap[0]
    x[i + 1, j + 1] += alpha * p[i + 1, j + 1]
    r[i + 1, j + 1] -= alpha * ap[i + 1, j + 1]


@gk.kernel
def mg_update_p(p, z, new_ztr, old_ztr):
    i, j = gk.tid()
    p[i + 1, j + 1] = z[i + 1, j + 1] + new_ztr[0] / old_ztr[0] * p[i + 1, j + 1]


def taichi_mgpcg(loop=None, tol=3e-4, iterations=None):
    """`loop` None: Taichi's CG loop with its break on `rTr < initial_rTr * tol`; else `loop(step, max_iters)` runs
    every iteration (the checkpointable spelling, no test)."""
    c = MGPCG

    def program(b, x, sigma):
        diag = 4.0 + sigma
        sizes = [c["n"] >> lvl for lvl in range(c["levels"])]
        r = [np.zeros((m + 2, m + 2)) for m in sizes]
        z = [np.zeros((m + 2, m + 2)) for m in sizes]
        p, ap = np.zeros_like(x), np.zeros_like(x)
        inner = (sizes[0], sizes[0])
        s_rtr, s_init, s_pap, old_ztr, new_ztr = (np.zeros(1) for _ in range(5))

        def apply_preconditioner():
            gk.fill(z[0], 0.0)
            for lvl in range(c["levels"] - 1):
                for _ in range(c["pre_and_post"] << lvl):
                    gk.launch(mg_smooth, (sizes[lvl],) * 2, z[lvl], r[lvl], diag, 0)
                    gk.launch(mg_smooth, (sizes[lvl],) * 2, z[lvl], r[lvl], diag, 1)
                gk.fill(z[lvl + 1], 0.0)
                gk.fill(r[lvl + 1], 0.0)
                gk.launch(mg_restrict, (sizes[lvl],) * 2, r[lvl], z[lvl], r[lvl + 1], diag)
            bottom = c["levels"] - 1
            for _ in range(c["bottom"]):
                gk.launch(mg_smooth, (sizes[bottom],) * 2, z[bottom], r[bottom], diag, 0)
                gk.launch(mg_smooth, (sizes[bottom],) * 2, z[bottom], r[bottom], diag, 1)
            for lvl in reversed(range(c["levels"] - 1)):
                gk.launch(mg_prolongate, (sizes[lvl],) * 2, z[lvl], z[lvl + 1])
                for _ in range(c["pre_and_post"] << lvl):
                    gk.launch(mg_smooth, (sizes[lvl],) * 2, z[lvl], r[lvl], diag, 1)
                    gk.launch(mg_smooth, (sizes[lvl],) * 2, z[lvl], r[lvl], diag, 0)

        gk.copy(r[0], b)  # init(): r = b - A x with x = 0
        _dot(r[0], r[0], s_init, inner)
        initial_rtr = s_init[0]  # a derived scalar, compared only
        apply_preconditioner()
        gk.copy(p, z[0])  # update_p() with beta = 0
        _dot(z[0], r[0], old_ztr, inner)

        def iteration(i):
            gk.launch(mg_compute_ap, inner, p, ap, diag)
            _dot(p, ap, s_pap, inner)
            gk.launch(mg_update_xr, inner, x, r[0], p, ap, old_ztr, s_pap)
            _dot(r[0], r[0], s_rtr, inner)
            if loop is None and s_rtr[0] < initial_rtr * tol:
                return True
            apply_preconditioner()
            _dot(z[0], r[0], new_ztr, inner)
            gk.launch(mg_update_p, inner, p, z[0], new_ztr, old_ztr)
            gk.copy(old_ztr, new_ztr)
            return False

        if loop is not None:
            loop(iteration, c["max_iters"])
            return
        for i in range(c["max_iters"]):
            if iteration(i):
                break
        if iterations is not None:
            iterations.append(i + 1)
    return program


def taichi_mgpcg_loop(loop):
    """Every CG iteration run, through `loop` (the store-all and checkpointed twins)."""
    return taichi_mgpcg(loop=loop)


# -- HPGMG-FV 0.4 (hpgmg/finite-volume/source/mg.c: FMGSolve's `for(level=0; level<num_levels-1; level++)
# restriction(...)` of the right-hand side to the coarsest grid, IterativeSolver there, then `for(level=num_levels-2;
# level>=onLevel; level--){ interpolation(levels[level], e_id, ..., levels[level+1], e_id); MGVCycle(..., level); }`
# and V-cycles at the finest level while the residual's norm is above rtol of the first), 2-D, MGPCG's red-black
# smoother, restriction and injection above; each V-cycle recursing from its level down in correction form (a
# residual and a correction a coarser level); the shift sigma Active ---------------------------------------------
FMG = dict(n=8, levels=3, sweeps=1, bottom=4, max_vcycles=3, rtol=0.03)


@gk.kernel
def mg_prolong_add(z, ec):
    i, j = gk.tid()
    z[i + 1, j + 1] += ec[i // 2 + 1, j // 2 + 1]


@gk.kernel
def mg_residual_norm(z, f, diag, norm):
    i, j = gk.tid()
    res = mg_residual(f, z, diag, i + 1, j + 1)
    gk.atomic_add(norm, 0, res * res)


def hpgmg_fmg(vcycles=None):
    c = FMG

    def program(b, u, sigma):
        diag = 4.0 + sigma
        sizes = [c["n"] >> lvl for lvl in range(c["levels"])]
        f, z, e, res = ([np.zeros((m + 2, m + 2)) for m in sizes] for _ in range(4))
        norm = np.zeros(1)

        def smooth(lvl, x, rhs, sweeps):
            for _ in range(sweeps):
                gk.launch(mg_smooth, (sizes[lvl],) * 2, x, rhs, diag, 0)
                gk.launch(mg_smooth, (sizes[lvl],) * 2, x, rhs, diag, 1)

        def vcycle(lvl, x, rhs):  # MGVCycle: smooth, restrict the residual, recurse on the correction, add it back
            if lvl == c["levels"] - 1:
                smooth(lvl, x, rhs, c["bottom"])
                return
            smooth(lvl, x, rhs, c["sweeps"])
            gk.fill(res[lvl + 1], 0.0)
            gk.fill(e[lvl + 1], 0.0)
            gk.launch(mg_restrict, (sizes[lvl],) * 2, rhs, x, res[lvl + 1], diag)
            vcycle(lvl + 1, e[lvl + 1], res[lvl + 1])
            gk.launch(mg_prolong_add, (sizes[lvl],) * 2, x, e[lvl + 1])
            smooth(lvl, x, rhs, c["sweeps"])

        def residual_norm():
            gk.fill(norm, 0.0)
            gk.launch(mg_residual_norm, (sizes[0],) * 2, z[0], f[0], diag, norm)
            return np.sqrt(norm[0])  # a derived scalar, compared only

        gk.copy(f[0], b)
        for lvl in range(c["levels"] - 1):  # the right-hand side restricted to the coarsest level
            gk.launch(mg_restrict, (sizes[lvl],) * 2, f[lvl], z[lvl], f[lvl + 1], diag)
        smooth(c["levels"] - 1, z[-1], f[-1], c["bottom"])  # IterativeSolver on the coarsest level
        for lvl in reversed(range(c["levels"] - 1)):  # up: interpolate, then a V-cycle from this level down
            gk.launch(mg_prolongate, (sizes[lvl],) * 2, z[lvl], z[lvl + 1])
            vcycle(lvl, z[lvl], f[lvl])
        norm0 = residual_norm()
        v = 0
        while v < c["max_vcycles"] and residual_norm() > c["rtol"] * norm0:
            vcycle(0, z[0], f[0])
            v += 1
        if vcycles is not None:
            vcycles.append(v)
        gk.copy(u, z[0])
    return program


# -- TeaLeaf 1.0 PPCG (UK-MAC/TeaLeaf_ref src/tea_solve.f90's loop: CG steps until `ABS(old_error) <= tl_ch_cg_epslim
# .AND. n >= tl_ch_cg_presteps`, then tea_leaf_ppcg_init and tea_leaf_run_ppcg_inner_steps (src/tea_leaf_ppcg.f90:
# sd = r / theta, then per inner step w = A sd, rtemp -= w, sd = alpha sd + beta rtemp, utemp += sd), and each
# later iteration flexible CG: calc_w, store_r, calc_zrnorm, `alpha = rro / pw`, calc_ur, the inner steps,
# calc_rrn, `beta = rrn / rro`, calc_p; exit on `ABS(error) < eps * initial_residual`). TeaLeaf estimates the
# eigenvalue bounds from the CG presteps' alphas and betas (a LAPACK tridiagonal solve on the host); the port
# configures them, as tea_leaf_cheby does (a derived scalar into a launch is refused); rx Active --------------------
PPCG = dict(presteps=2, epslim=1.0, inner_steps=3, eigmin=1.0, eigmax=6.0, eps=3e-4, max_iters=6)


@gk.kernel
def ppcg_init_sd(r, rtemp, utemp, sd, theta):
    k, j = gk.tid()
    k += 1
    j += 1
    rtemp[k, j] = r[k, j]
    sd[k, j] = r[k, j] / theta
    utemp[k, j] = r[k, j] / theta


@gk.kernel
def ppcg_inner_w(sd, w, kx, ky):
    k, j = gk.tid()
    w[k + 1, j + 1] = tl_apply(sd, kx, ky, k + 1, j + 1)


@gk.kernel
def ppcg_inner(rtemp, utemp, sd, w, alpha, beta):
    k, j = gk.tid()
    k += 1
    j += 1
    rtemp[k, j] = rtemp[k, j] - w[k, j]
    sd[k, j] = alpha * sd[k, j] + beta * rtemp[k, j]
    utemp[k, j] = utemp[k, j] + sd[k, j]


@gk.kernel
def ppcg_calc_rrn(z, r, rstore, rrn):
    k, j = gk.tid()
    gk.atomic_add(rrn, 0, z[k + 1, j + 1] * (r[k + 1, j + 1] - rstore[k + 1, j + 1]))


@gk.kernel
def ppcg_calc_p(p, z, rro, rrn):
    k, j = gk.tid()
    p[k + 1, j + 1] = z[k + 1, j + 1] + rrn[0] / rro[0] * p[k + 1, j + 1]


def tea_calc_eigenvalues(cg_alphas, cg_betas):
    """tea_calc_eigenvalues: the extreme eigenvalues of the Lanczos tridiagonal matrix the CG coefficients make
    (the Fortran's LAPACK call, here np.linalg.eigvalsh)."""
    n = len(cg_alphas)
    diag = [1.0 / cg_alphas[k] + (cg_betas[k - 1] / cg_alphas[k - 1] if k > 0 else 0.0) for k in range(n)]
    off = [np.sqrt(cg_betas[k]) / cg_alphas[k] for k in range(n - 1)]
    eig = np.linalg.eigvalsh(np.diag(np.array(diag)) + np.diag(np.array(off), 1) + np.diag(np.array(off), -1))
    return eig.min(), eig.max()


def tealeaf_ppcg(iterations=None, switched=None, estimate=False, **config):
    """`estimate`: TeaLeaf's own spelling, the bounds from the CG presteps' alphas and betas read on the host from
    the one-element arrays (`np.zeros(1)`) the dot products sum into: refused where a launch takes them."""
    c = dict(PPCG, **config)
    configured = tea_cheby_coefficients(c["eigmin"], c["eigmax"], c["inner_steps"])

    def program(u, density, rx):
        inner = (u.shape[0] - 2, u.shape[1] - 2)
        u0 = u.copy()
        kx, ky, r, p, w, sd, rtemp, z, rstore = (np.zeros_like(u) for _ in range(9))
        rro, pw, rrn, res = (np.zeros(1) for _ in range(4))
        coefs, cg_alphas, cg_betas = [configured], [], []

        def run_inner_steps():  # tea_leaf_run_ppcg_inner_steps: z = P(A) r
            theta, ch_alphas, ch_betas = coefs[-1]
            gk.launch(ppcg_init_sd, inner, r, rtemp, z, sd, theta)
            for step in range(c["inner_steps"]):
                gk.launch(ppcg_inner_w, inner, sd, w, kx, ky)
                gk.launch(ppcg_inner, inner, rtemp, z, sd, w, ch_alphas[step], ch_betas[step])

        gk.launch(tl_coefficients, inner, density, kx, ky, rx)
        gk.launch(tl_init, inner, u, u0, r, p, kx, ky, rro)  # calc_residual and cg_init: r = p = u0 - A u
        initial_residual = np.sqrt(abs(rro[0]))
        old_error = rro[0]
        ch_switch_check = False
        for n in range(1, c["max_iters"] + 1):
            if not ch_switch_check and abs(old_error) <= c["epslim"] and n >= c["presteps"]:
                ch_switch_check = True
                if switched is not None:
                    switched.append(n)
                if estimate:
                    eigmin, eigmax = tea_calc_eigenvalues(cg_alphas, cg_betas)
                    coefs.append(tea_cheby_coefficients(eigmin * 0.95, eigmax * 1.05, c["inner_steps"]))
                run_inner_steps()  # tea_leaf_ppcg_init steps 2 and 3: p = z, rro = r.z
                gk.copy(p, z)
                _dot(r, z, rro, inner)
            if ch_switch_check:
                gk.fill(pw, 0.0)
                gk.launch(tl_calc_w, inner, p, w, kx, ky, pw)
                gk.copy(rstore, r)  # tea_leaf_ppcg_store_r
                _dot(z, r, rro, inner)  # tea_leaf_ppcg_calc_zrnorm
                gk.fill(res, 0.0)
                gk.launch(tl_calc_ur, inner, u, r, p, w, rro, pw, res)  # alpha = rro / pw; rrn unused
                run_inner_steps()
                gk.fill(rrn, 0.0)
                gk.launch(ppcg_calc_rrn, inner, z, r, rstore, rrn)
                gk.launch(ppcg_calc_p, inner, p, z, rro, rrn)
            else:
                tl_cg_iteration(inner, u, r, p, w, kx, ky, rro, pw, rrn)
                cg_alphas.append(rro[0] / pw[0])  # tea_solve's cg_alphas(n) = alpha, cg_betas(n) = beta
                cg_betas.append(rrn[0] / rro[0])
            error = rrn[0]
            gk.copy(rro, rrn)
            error = np.sqrt(abs(error))
            if abs(error) < c["eps"] * initial_residual:
                break
            old_error = error
        if iterations is not None:
            iterations.append(n)
    return program


# -- Castro (AMReX-Astro/Castro Source/driver/Castro_advance_ctu.cpp: subcycle_advance_ctu's `while (subcycle_time
# < (1.0 - eps) * (time + dt))`, the last subcycle shortened to the end, do_advance_ctu's status and on failure
# (docs: "A negative density is encountered") the step discarded, the state restored and dt_subcycle cut by
# retry_subcycle_factor; `max_subcycles`): a 1-D upwind advection, Heun's predictor into a scratch array and the
# corrector in place into the state; the attempt's start kept in memory (`saved = rho.copy()`) and restored by
# gk.copy when the minimum density a one-thread kernel finds is negative; the velocity c Active -----------------------
CASTRO = dict(dt=0.45, dx=0.25, retry_factor=0.5, max_subcycles=8, nsteps=3)


@gk.kernel
def castro_predict(rho, tmp, c, dtdx):
    i = gk.tid()
    n = rho.shape[0]
    tmp[i] = rho[i] - dtdx * c * (rho[i] - rho[(i + n - 1) % n])


@gk.kernel
def castro_correct(rho, tmp, c, dtdx):
    i = gk.tid()
    n = rho.shape[0]
    rho[i] = 0.5 * (rho[i] + tmp[i] - dtdx * c * (tmp[i] - tmp[(i + n - 1) % n]))


@gk.kernel
def castro_min_density(rho, out):
    m = rho[0]
    for i in range(1, rho.shape[0]):
        m = min(m, rho[i])
    out[0] = m


def castro_retry(loop, subcycles=None):
    """Each step: subcycle until the step's time is reached, retrying a failed subcycle from the state kept before
    it. `subcycles` collects each step's count of accepted subcycles."""
    cfg = CASTRO

    def program(rho, c):
        tmp = np.zeros_like(rho)
        status = np.zeros(1)

        def advance(t):
            dt_subcycle = cfg["dt"]
            subcycle_time, accepted = 0.0, 0
            while subcycle_time < (1.0 - 1e-14) * cfg["dt"]:
                dt_subcycle = min(dt_subcycle, cfg["dt"] - subcycle_time)
                saved = rho.copy()
                gk.launch(castro_predict, rho.shape[0], rho, tmp, c, dt_subcycle / cfg["dx"])
                gk.launch(castro_correct, rho.shape[0], rho, tmp, c, dt_subcycle / cfg["dx"])
                gk.launch(castro_min_density, 1, rho, status)
                if status[0] < 0.0:  # do_advance_ctu's status: retry from the saved state
                    if accepted + 1 >= cfg["max_subcycles"]:
                        raise RuntimeError("subcycle_advance_ctu: too many subcycles")
                    gk.copy(rho, saved)
                    dt_subcycle *= cfg["retry_factor"]
                    continue
                subcycle_time += dt_subcycle
                accepted += 1
            if subcycles is not None:
                subcycles.append(accepted)
        loop(advance, cfg["nsteps"])
    return program


# -- pyro2 (python-hydro/pyro2 pyro/burgers/simulation.py: method_compute_timestep's `dt = cfl * min(dx /
# max(np.max(np.abs(u)), SMALL), dy / max(np.max(np.abs(v)), SMALL))`, evolve's unsplit flux differencing of both
# velocities; pyro/simulation_null.py's compute_timestep: the growth limit `max_dt_change` and the cut
# `if t + dt > tmax: dt = tmax - t`; pyro_sim's `while not sim.finished()`), first-order upwind fluxes, periodic
# halos a cell wide by gk.copy of rows and columns; dt and t in a kernel-written [t, dt, dt_old] (the host
# reduction's dt into a launch is refused), the loop on the host reading t; the cfl number Active ------------------
BURGERS = dict(dx=0.25, dy=0.2, tmax=0.5, max_dt_change=1.5, small=1e-10, max_steps=12)


@gk.kernel
def burgers_timestep(u, v, tt, cfl, dx, dy, small, max_dt_change, tmax, first):
    umax = small
    vmax = small
    for i in range(1, u.shape[0] - 1):
        for j in range(1, u.shape[1] - 1):
            umax = max(umax, abs(u[i, j]))
            vmax = max(vmax, abs(v[i, j]))
    dt = cfl * min(dx / umax, dy / vmax)
    if first == 0:
        dt = min(dt, max_dt_change * tt[2])
    if tt[0] + dt > tmax:
        dt = tmax - tt[0]
    tt[1] = dt
    tt[2] = dt


@gk.func
def burgers_riemann(ul, ur):
    s = 0.5 * (ul + ur)
    us = 0.0
    if ul > ur:
        if s > 0.0:
            us = ul
        elif s < 0.0:
            us = ur
    elif ul > 0.0:
        us = ul
    elif ur < 0.0:
        us = ur
    return us


@gk.kernel
def burgers_fluxes(u, v, fux, fvx, fuy, fvy):
    i, j = gk.tid()
    i += 1
    j += 1
    ux = burgers_riemann(u[i - 1, j], u[i, j])  # the interface at i - 1/2 (x runs along axis 0)
    vx = v[i - 1, j] if ux > 0.0 else v[i, j]
    fux[i, j] = 0.5 * ux * ux
    fvx[i, j] = ux * vx
    vy = burgers_riemann(v[i, j - 1], v[i, j])
    uy = u[i, j - 1] if vy > 0.0 else u[i, j]
    fuy[i, j] = vy * uy
    fvy[i, j] = 0.5 * vy * vy


@gk.kernel
def burgers_update(u, v, fux, fvx, fuy, fvy, tt, dx, dy):
    i, j = gk.tid()
    i += 1
    j += 1
    dtdx = tt[1] / dx
    dtdy = tt[1] / dy
    u[i, j] = u[i, j] + dtdx * (fux[i, j] - fux[i + 1, j]) + dtdy * (fuy[i, j] - fuy[i, j + 1])
    v[i, j] = v[i, j] + dtdx * (fvx[i, j] - fvx[i + 1, j]) + dtdy * (fvy[i, j] - fvy[i, j + 1])


@gk.kernel
def burgers_advance_time(tt):
    tt[0] = tt[0] + tt[1]


def _periodic_halo(a):
    """pyro's fill_BC("periodic") for one ghost cell: the rows, then the columns (corners included)."""
    gk.copy(a[0, 1:-1], a[-2, 1:-1])
    gk.copy(a[-1, 1:-1], a[1, 1:-1])
    gk.copy(a[:, 0], a[:, -2])
    gk.copy(a[:, -1], a[:, 1])


def pyro_burgers(steps=None):
    c = BURGERS

    def program(u, v, cfl):
        nx, ny = u.shape[0] - 2, u.shape[1] - 2
        fux, fvx, fuy, fvy = (np.zeros_like(u) for _ in range(4))
        tt = np.zeros(3)
        n = 0
        while tt[0] < c["tmax"] * (1.0 - 1e-12) and n < c["max_steps"]:  # sim.finished()
            _periodic_halo(u)
            _periodic_halo(v)
            gk.launch(burgers_timestep, 1, u, v, tt, cfl, c["dx"], c["dy"], c["small"], c["max_dt_change"],
                      c["tmax"], int(n == 0))
            gk.launch(burgers_fluxes, (nx + 1, ny + 1), u, v, fux, fvx, fuy, fvy)
            gk.launch(burgers_update, (nx, ny), u, v, fux, fvx, fuy, fvy, tt, c["dx"], c["dy"])
            gk.launch(burgers_advance_time, 1, tt)
            n += 1
        if steps is not None:
            steps.append(n)
    return program


__all__ = ["plain", "taichi_mgpcg", "hpgmg_fmg", "tealeaf_ppcg", "castro_retry", "pyro_burgers"]
