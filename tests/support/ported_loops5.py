"""A fifth round of third-party host loops ported as programs (session 52; docs/programs.md, "Ported host loops"),
part 1: drivers whose control flow reads primal values (adaptive step-size control with rejection, reaction
sub-cycling with a substep count from a rate maximum, Newton iterations with a convergence test and a cap),
miniWeather's dimension splitting that alternates direction each step, a recursive V-cycle over per-level lists,
and Stam's stable fluids. Written here from the algorithms, as a user porting the C/C++/Fortran driver writes it:
a kernel per loop body, one-element arrays for the host scalars a later launch reads, plain comparisons where the
host only decides. Used by tests/program/test_ported_loops5.py. Factories taking `loop(step, nsteps)` run a plain
loop or a checkpointed one."""

import math

import numpy as np

import gradkern as gk


# -- adaptive Runge-Kutta with step rejection: SciPy 1.11 scipy/integrate/_ivp/rk.py (RungeKutta._step_impl: the
# error norm of the embedded pair, `factor = min(MAX_FACTOR, SAFETY * error_norm ** error_exponent)` on acceptance,
# `max(MIN_FACTOR, ...)` on rejection, `h = min(h, t_bound - t)`), with the Heun-Euler pair (order 1 error): the
# error norm summed into err[0] by a kernel, the accept/reject decided on the host from it (control flow), h and
# t kept in one-element arrays that a one-thread kernel updates (so d h / d state is kept); alpha Active ---------
@gk.func
def rk_f(y, i, alpha):
    n = y.shape[0]
    return -alpha * y[i] + 0.5 * math.sin(y[(i + 1) % n])


@gk.kernel
def rk_rhs(y, k, alpha):
    i = gk.tid()
    k[i] = rk_f(y, i, alpha)


@gk.kernel
def rk_trial(y, k1, ytmp, h):
    i = gk.tid()
    ytmp[i] = y[i] + h[0] * k1[i]


@gk.kernel
def rk_combine(y, k1, k2, ynew, h, err, atol, rtol):
    i = gk.tid()
    ynew[i] = y[i] + 0.5 * h[0] * (k1[i] + k2[i])
    e = 0.5 * h[0] * (k2[i] - k1[i]) / (atol + rtol * abs(y[i]))
    gk.atomic_add(err, 0, e * e)


@gk.kernel
def rk_control(err, h, tt, n, accepted, t_end):
    norm = math.sqrt(err[0] / n)
    factor = gk.clamp(0.9 / math.sqrt(norm), 0.2, 5.0)  # error_exponent = -1 / (order + 1), order 1
    if accepted == 1:
        tt[0] = tt[0] + h[0]
    h[0] = min(h[0] * factor, t_end - tt[0])


def rk_adaptive(taken, t_end=1.0, h0=0.6, max_steps=40):
    """`taken` records each step's verdict (True: accepted)."""
    def program(y, alpha):
        n = y.shape[0]
        k1, k2, ytmp, ynew = (np.zeros_like(y) for _ in range(4))
        h, tt, err = (np.zeros_like(y, shape=(1,)) for _ in range(3))
        gk.fill(h, h0)
        nstep = 0
        while tt[0] < t_end * (1.0 - 1e-12) and nstep < max_steps:
            gk.fill(err, 0.0)
            gk.launch(rk_rhs, n, y, k1, alpha)
            gk.launch(rk_trial, n, y, k1, ytmp, h)
            gk.launch(rk_rhs, n, ytmp, k2, alpha)
            gk.launch(rk_combine, n, y, k1, k2, ynew, h, err, 1e-3, 1e-3)
            accepted = err[0] / n <= 1.0  # a derived value compared: control flow only
            if accepted:
                gk.copy(y, ynew)
            gk.launch(rk_control, 1, err, h, tt, float(n), 1 if accepted else 0, t_end)
            taken.append(bool(accepted))
            nstep += 1
    return program


def rk_adaptive_host_h(y, alpha):
    """The spelling a port writes first: h a Python float updated on the host from the error norm."""
    n = y.shape[0]
    k1, k2, ytmp, ynew = (np.zeros_like(y) for _ in range(4))
    hh, err = np.zeros_like(y, shape=(1,)), np.zeros_like(y, shape=(1,))
    h = 0.6
    for _ in range(3):
        gk.fill(hh, h)
        gk.fill(err, 0.0)
        gk.launch(rk_rhs, n, y, k1, alpha)
        gk.launch(rk_trial, n, y, k1, ytmp, hh)
        gk.launch(rk_rhs, n, ytmp, k2, alpha)
        gk.launch(rk_combine, n, y, k1, k2, ynew, hh, err, 1e-3, 1e-3)
        h = h * min(5.0, max(0.2, 0.9 / np.sqrt(np.sqrt(err[0] / n))))  # rk.py's factor, on the host


# -- reaction sub-cycling: PelePhysics' ReactorRK64 / Castro's burner-style explicit sub-stepping inside a
# transport step (the number of substeps from the largest rate, `nsub = ceil(dt * max|rate| / cfl)`); the count is
# a rounding of a derived scalar (piecewise constant), each substep a launch; k Active ------------------------------
@gk.kernel
def transport_1d(y, ynew, d):
    i = gk.tid()
    n = y.shape[0]
    ynew[i] = y[i] + d * (y[(i + 1) % n] - 2.0 * y[i] + y[(i + n - 1) % n])


@gk.kernel
def react(y, rate, k, dts):
    """The rate, then y advanced by dts (the driver's first call, dts = 0, only evaluates the rate)."""
    i = gk.tid()
    rate[i] = k * y[i] * (1.0 - y[i])
    y[i] = y[i] + dts * rate[i]


def subcycle(loop, dt=0.5, cfl=0.05, counts=None):
    def program(y, k, nsteps):
        n = y.shape[0]
        ytmp, rate = np.zeros_like(y), np.zeros_like(y)

        def step(t):
            gk.launch(transport_1d, n, y, ytmp, 0.2)
            gk.copy(y, ytmp)
            gk.launch(react, n, y, rate, k, 0.0)
            nsub = max(1, int(np.ceil(dt * np.abs(rate).max() / cfl)))  # a rounded derived scalar: a constant
            if counts is not None:
                counts.append(nsub)
            for _ in range(nsub):
                gk.launch(react, n, y, rate, k, dt / nsub)
        loop(step, nsteps)
    return program


# -- Newton iterations with a host convergence test and a cap: backward Euler for y' = s - k y^3 as SUNDIALS
# CVODE 6's nonlinear solver loop runs it (cvNls: `for (m = 0; m < maxcor; m++) { ...; if (del <= tol) break; }`),
# the update's squared norm summed into a one-element array and compared on the host; k Active ----------------------
@gk.kernel
def newton_update(z, y, src, dt, k, norm):
    i = gk.tid()
    g = z[i] - y[i] - dt * (src[i] - k * z[i] * z[i] * z[i])
    dz = g / (1.0 + 3.0 * dt * k * z[i] * z[i])
    z[i] = z[i] - dz
    gk.atomic_add(norm, 0, dz * dz)


def newton(loop, dt=0.4, tol=1e-10, maxcor=8, iterations=None):
    def program(y, src, k, nsteps):
        n = y.shape[0]
        z = np.zeros_like(y)
        norm = np.zeros_like(y, shape=(1,))

        def step(t):
            gk.copy(z, y)  # the predictor: the last state
            for m in range(maxcor):
                gk.fill(norm, 0.0)
                gk.launch(newton_update, n, z, y, src, dt, k, norm)
                if norm[0] <= tol * tol:  # a derived value compared: control flow only
                    break
            if iterations is not None:
                iterations.append(m + 1)
            gk.copy(y, z)
        loop(step, nsteps)
    return program


# -- miniWeather (Norman, ORNL; c/miniWeather_serial.cpp: perform_timestep's `direction_switch`, the RK3 of
# semi_discrete_step, set_halo_values_x's periodic halo and set_halo_values_z's walls), cut to one advected scalar
# with first-order upwind fluxes; the halos set by gk.copy of columns and rows of the state; the state after each
# step copied into a preallocated `history[t]`; the Courant number c Active -----------------------------------------
@gk.kernel
def mw_tend_x(state, tend, c):
    k, i = gk.tid()
    tend[k + 1, i + 1] = -c * (state[k + 1, i + 1] - state[k + 1, i])


@gk.kernel
def mw_tend_z(state, tend, c):
    k, i = gk.tid()
    tend[k + 1, i + 1] = -0.5 * c * (state[k + 1, i + 1] - state[k, i + 1])


@gk.kernel
def mw_apply(init, tend, out, frac):
    k, i = gk.tid()
    out[k + 1, i + 1] = init[k + 1, i + 1] + frac * tend[k + 1, i + 1]


def _mw_halo(s, direction):
    if direction == "x":  # set_halo_values_x: periodic
        gk.copy(s[:, 0], s[:, -2])
        gk.copy(s[:, -1], s[:, 1])
    else:  # set_halo_values_z: walls (zero gradient)
        gk.copy(s[0, :], s[1, :])
        gk.copy(s[-1, :], s[-2, :])


def _mw_semi_discrete_step(init, forcing, out, tend, c, frac, direction):
    nz, nx = init.shape[0] - 2, init.shape[1] - 2
    _mw_halo(forcing, direction)
    gk.launch(mw_tend_x if direction == "x" else mw_tend_z, (nz, nx), forcing, tend, c)
    gk.launch(mw_apply, (nz, nx), init, tend, out, frac)


def _mw_timestep(state, tmp, tend, c, direction):
    _mw_semi_discrete_step(state, state, tmp, tend, c, 1.0 / 3.0, direction)
    _mw_semi_discrete_step(state, tmp, tmp, tend, c, 0.5, direction)
    _mw_semi_discrete_step(state, tmp, state, tend, c, 1.0, direction)


def miniweather(loop):
    """The checkpointable spelling: the direction order chosen from t's parity."""
    def program(state, history, c, nsteps):
        tmp, tend = np.zeros_like(state), np.zeros_like(state)

        def step(t):
            for direction in (("x", "z") if t % 2 == 0 else ("z", "x")):
                _mw_timestep(state, tmp, tend, c, direction)
            gk.copy(history[t], state[1:-1, 1:-1])
        loop(step, nsteps)
    return program


def miniweather_switch(loop):
    """miniWeather's own spelling: `direction_switch = !direction_switch` after each step, a host variable."""
    def program(state, history, c, nsteps):
        tmp, tend = np.zeros_like(state), np.zeros_like(state)
        switch = [True]

        def step(t):
            for direction in (("x", "z") if switch[0] else ("z", "x")):
                _mw_timestep(state, tmp, tend, c, direction)
            switch[0] = not switch[0]
            gk.copy(history[t], state[1:-1, 1:-1])
        loop(step, nsteps)
    return program


# -- a recursive V-cycle: HPGMG-FV 0.4 (finite-volume/source/mg.c: MGVCycle calling itself on the next level;
# level structures in an array), cut to 2-D vertex-centred levels 2^l + 1 with weighted Jacobi smoothing (ping-pong
# through a per-level scratch), the residual restricted by injection and bilinear prolongation; the levels' arrays
# in Python lists allocated from u; the Helmholtz shift sigma Active ----------------------------------------------
@gk.kernel
def mg_jacobi(u, f, out, sigma, h2inv, w):
    i, j = gk.tid()
    i += 1
    j += 1
    au = h2inv * (4.0 * u[i, j] - u[i - 1, j] - u[i + 1, j] - u[i, j - 1] - u[i, j + 1]) + sigma * u[i, j]
    out[i, j] = u[i, j] + w * (f[i, j] - au) / (4.0 * h2inv + sigma)


@gk.kernel
def mg_restrict_residual(u, f, fc, sigma, h2inv):
    """The residual at the fine points the coarse ones sit on, injected (HPGMG-FV's residual then restriction,
    fused: a coarse point a thread)."""
    a, b = gk.tid()
    i, j = 2 * a + 2, 2 * b + 2
    au = h2inv * (4.0 * u[i, j] - u[i - 1, j] - u[i + 1, j] - u[i, j - 1] - u[i, j + 1]) + sigma * u[i, j]
    fc[a + 1, b + 1] = f[i, j] - au


@gk.kernel
def mg_prolong_add(uc, u):
    i, j = gk.tid()
    i += 1
    j += 1
    u[i, j] = u[i, j] + 0.25 * (uc[i // 2, j // 2] + uc[(i + 1) // 2, j // 2] + uc[i // 2, (j + 1) // 2]
                                + uc[(i + 1) // 2, (j + 1) // 2])


def vcycle(loop, levels=3, smooths=2, coarse=4):
    def program(u, f, sigma, ncycles):
        n = u.shape[0]
        sizes = [(n - 1) // 2 ** level + 1 for level in range(levels)]
        us = [u] + [np.zeros_like(u, shape=(m, m)) for m in sizes[1:]]
        fs = [f] + [np.zeros_like(u, shape=(m, m)) for m in sizes[1:]]
        scratch = [np.zeros_like(u, shape=(m, m)) for m in sizes]

        def smooth(level, sweeps):
            m = sizes[level]
            h2inv = float((m - 1) ** 2)
            for _ in range(sweeps):  # ping-pong: u -> scratch -> u
                gk.launch(mg_jacobi, (m - 2, m - 2), us[level], fs[level], scratch[level], sigma, h2inv, 0.8)
                gk.launch(mg_jacobi, (m - 2, m - 2), scratch[level], fs[level], us[level], sigma, h2inv, 0.8)

        def cycle(level):
            if level == levels - 1:
                smooth(level, coarse)
                return
            m = sizes[level]
            smooth(level, smooths)
            gk.fill(us[level + 1], 0.0)
            gk.launch(mg_restrict_residual, (sizes[level + 1] - 2, sizes[level + 1] - 2), us[level], fs[level],
                      fs[level + 1], sigma, float((m - 1) ** 2))
            cycle(level + 1)
            gk.launch(mg_prolong_add, (m - 2, m - 2), us[level + 1], us[level])
            smooth(level, smooths)
        loop(lambda t: cycle(0), ncycles)
    return program


# -- stable fluids: Stam, "Real-Time Fluid Dynamics for Games" (GDC 2003), solver.c's dens_step and vel_step
# (add_source left out): semi-Lagrangian advect with bilinear weights from `(int)x`, diffuse and project through
# lin_solve (here Jacobi, ping-pong, 20 iterations for the pressure as Stam's code runs), set_bnd's walls in a
# kernel (the normal velocity negated); a = dt * diff * N * N host arithmetic on the Active diff -----------------
@gk.kernel
def sf_set_bnd(x, sign):
    i = gk.tid() + 1
    n = x.shape[0] - 2
    x[0, i] = sign[0] * x[1, i]
    x[n + 1, i] = sign[0] * x[n, i]
    x[i, 0] = sign[1] * x[i, 1]
    x[i, n + 1] = sign[1] * x[i, n]


@gk.kernel
def sf_jacobi(x, x0, out, a, c):
    i, j = gk.tid()
    i += 1
    j += 1
    out[i, j] = (x0[i, j] + a * (x[i - 1, j] + x[i + 1, j] + x[i, j - 1] + x[i, j + 1])) / c


@gk.kernel
def sf_advect(d, d0, u, v, dt0):
    i, j = gk.tid()
    i += 1
    j += 1
    n = d.shape[0] - 2
    x = gk.clamp(i - dt0 * u[i, j], 0.5, n + 0.5)
    y = gk.clamp(j - dt0 * v[i, j], 0.5, n + 0.5)
    i0 = int(x)
    j0 = int(y)
    s1 = x - i0
    t1 = y - j0
    d[i, j] = ((1.0 - s1) * ((1.0 - t1) * d0[i0, j0] + t1 * d0[i0, j0 + 1])
               + s1 * ((1.0 - t1) * d0[i0 + 1, j0] + t1 * d0[i0 + 1, j0 + 1]))


@gk.kernel
def sf_divergence(u, v, div, p):
    i, j = gk.tid()
    i += 1
    j += 1
    h = 1.0 / (div.shape[0] - 2)
    div[i, j] = -0.5 * h * (u[i + 1, j] - u[i - 1, j] + v[i, j + 1] - v[i, j - 1])
    p[i, j] = 0.0


@gk.kernel
def sf_subtract_gradient(u, v, p):
    i, j = gk.tid()
    i += 1
    j += 1
    n = p.shape[0] - 2
    u[i, j] = u[i, j] - 0.5 * n * (p[i + 1, j] - p[i - 1, j])
    v[i, j] = v[i, j] - 0.5 * n * (p[i, j + 1] - p[i, j - 1])


STAM_SIGNS = {0: (1.0, 1.0), 1: (-1.0, 1.0), 2: (1.0, -1.0)}  # set_bnd's b: 0 a scalar, 1 u, 2 v


def stable_fluids(loop, dt=0.1, pressure_iters=20, diffuse_iters=6):
    def program(u, v, dens, diff, nsteps):
        n = u.shape[0] - 2
        u0, v0, d0, p, div, tmp = (np.zeros_like(u) for _ in range(6))
        signs = {b: np.array(s) for b, s in STAM_SIGNS.items()}
        inner = (n, n)

        def set_bnd(b, x):
            gk.launch(sf_set_bnd, n, x, signs[b])

        def lin_solve(b, x, x0, a, c, iters):  # an even count: the result ends in x
            for _ in range(iters // 2):
                gk.launch(sf_jacobi, inner, x, x0, tmp, a, c)
                set_bnd(b, tmp)
                gk.launch(sf_jacobi, inner, tmp, x0, x, a, c)
                set_bnd(b, x)

        def project():
            gk.launch(sf_divergence, inner, u, v, div, p)
            set_bnd(0, div)
            set_bnd(0, p)
            lin_solve(0, p, div, 1.0, 4.0, pressure_iters)
            gk.launch(sf_subtract_gradient, inner, u, v, p)
            set_bnd(1, u)
            set_bnd(2, v)

        a = dt * diff * n * n  # an ActiveScalar

        def step(t):
            gk.copy(u0, u)  # vel_step: SWAP then advect from the copies
            gk.copy(v0, v)
            gk.launch(sf_advect, inner, u, u0, u0, v0, dt * n)
            gk.launch(sf_advect, inner, v, v0, u0, v0, dt * n)
            set_bnd(1, u)
            set_bnd(2, v)
            project()
            gk.copy(d0, dens)  # dens_step: diffuse, then advect
            lin_solve(0, dens, d0, a, 1.0 + 4.0 * a, diffuse_iters)
            gk.copy(d0, dens)
            gk.launch(sf_advect, inner, dens, d0, u, v, dt * n)
            set_bnd(0, dens)
        loop(step, nsteps)
    return program
