"""Lattice Boltzmann: D2Q9 BGK collide-and-stream.

Populations are stored direction-major, `f[q, x, y]` of shape (9, nx, ny)
(structure of arrays: each direction is one contiguous plane, so neighbouring
threads read neighbouring memory on the GPU and the CPU loops vectorise). The
lattice is the usual one, in lattice units (Δx = Δt = 1, c_s² = 1/3):

    q   0    1    2    3    4    5    6    7    8
    e  (0,0)(1,0)(0,1)(-1,0)(0,-1)(1,1)(-1,1)(-1,-1)(1,-1)
    w  4/9  1/9  1/9  1/9  1/9  1/36 1/36 1/36 1/36

and the equilibrium f^eq_q(ρ, u) = w_q ρ (1 + 3 e_q·u + 4.5 (e_q·u)² − 1.5 |u|²).
"""

import gradkern as gk

__all__ = ["d2q9_step", "d2q9_moments", "d2q9_equilibrium"]

# lattice velocities e_q = (EX[q], EY[q]), weights w_q, opposite directions e_OPP[q] = −e_q
EX = (0, 1, 0, -1, 0, 1, -1, -1, 1)
EY = (0, 0, 1, 0, -1, 1, 1, -1, -1)
W = (4.0 / 9.0, 1.0 / 9.0, 1.0 / 9.0, 1.0 / 9.0, 1.0 / 9.0, 1.0 / 36.0, 1.0 / 36.0, 1.0 / 36.0, 1.0 / 36.0)
OPP = (0, 3, 4, 1, 2, 7, 8, 5, 6)


@gk.kernel
def d2q9_step(f, fn, solid, omega, gx, gy):
    """One D2Q9 lattice-Boltzmann step (pull scheme, stream then collide) on a
    periodic nx × ny lattice, with a partial bounce-back obstacle and a body force.

    Each cell pulls g_q = f_q(x − e_q) from its upwind neighbours (periodic
    wrap), takes the moments ρ = Σ g_q, ρu = Σ e_q g_q, and writes

        fn_q = (1 − s) [g_q + ω (f^eq_q(ρ, u) − g_q) + 3 w_q ρ (e_q · a)] + s g_OPP(q)

    where s = solid(x) ∈ [0, 1] is the cell's solid fraction: s = 0 is plain
    BGK fluid, s = 1 full bounce-back (a wall: the populations that arrived
    leave the way they came, no-slip halfway between cells), and values in
    between blend the two (the partial bounce-back of Walsh, Burwinkle & Saar
    2009), so the result is differentiable in the obstacle. a = (gx, gy) is a
    body acceleration added as the first-order forcing term 3 w_q ρ e_q·a
    (momentum source ρa per step in the fluid part). Both parts conserve mass
    exactly: Σ_q fn_q = ρ. Viscosity ν = (1/ω − 1/2)/3, stable for 0 < ω < 2
    and |u| ≲ 0.1.

    `f`: (9, nx, ny), read (populations at time t); `fn`: (9, nx, ny), written
    (at t + 1; must not be `f`); `solid`: (nx, ny), read; `omega`: the BGK
    relaxation rate 1/τ; `gx`, `gy`: scalars, the body acceleration.
    Launch: (nx, ny) threads, one per cell; each writes only its own cell's 9 populations."""
    i, j = gk.tid()
    nx = f.shape[1]
    ny = f.shape[2]
    # periodic neighbours, the thread index plus an offset in each branch (the wrap is i ± 1 ∓ nx), so the
    # adjoint's pull proves where each population's adjoint lands (docs/adjoint-forms.md, section 7)
    im = i - 1 if i > 0 else i - 1 + nx
    ip = i + 1 if i < nx - 1 else i + 1 - nx
    jm = j - 1 if j > 0 else j - 1 + ny
    jp = j + 1 if j < ny - 1 else j + 1 - ny
    xs = gk.local((3,), gk.int64)  # x − e_x for e_x = −1, 0, 1
    ys = gk.local((3,), gk.int64)
    xs[0] = ip
    xs[1] = i
    xs[2] = im
    ys[0] = jp
    ys[1] = j
    ys[2] = jm
    g = gk.local((9,))  # takes the float type of f
    rho = 0.0
    mx = 0.0
    my = 0.0
    for q in range(9):
        g[q] = f[q, xs[EX[q] + 1], ys[EY[q] + 1]]
        rho += g[q]
        mx += EX[q] * g[q]
        my += EY[q] * g[q]
    ux = mx / rho
    uy = my / rho
    usq = 1.5 * (ux * ux + uy * uy)
    s = solid[i, j]
    for q in range(9):
        cu = 3.0 * (EX[q] * ux + EY[q] * uy)
        feq = W[q] * rho * (1.0 + cu + 0.5 * cu * cu - usq)
        force = 3.0 * W[q] * rho * (EX[q] * gx + EY[q] * gy)
        fn[q, i, j] = (1.0 - s) * (g[q] + omega * (feq - g[q]) + force) + s * g[OPP[q]]


@gk.kernel
def d2q9_moments(f, rho, ux, uy):
    """Macroscopic moments of D2Q9 populations: ρ = Σ_q f_q, u = Σ_q e_q f_q / ρ
    (no forcing correction: with a body force a, the step's fluid velocity is u + a/2).

    `f`: (9, nx, ny), read; `rho`, `ux`, `uy`: (nx, ny), written.
    Launch: (nx, ny) threads, one per cell."""
    i, j = gk.tid()
    r = 0.0
    mx = 0.0
    my = 0.0
    for q in range(9):
        fq = f[q, i, j]
        r += fq
        mx += EX[q] * fq
        my += EY[q] * fq
    rho[i, j] = r
    ux[i, j] = mx / r
    uy[i, j] = my / r


@gk.kernel
def d2q9_equilibrium(rho, ux, uy, f):
    """D2Q9 equilibrium populations f_q = f^eq_q(ρ, u) = w_q ρ (1 + 3 e_q·u + 4.5 (e_q·u)² − 1.5 |u|²),
    the usual initial state of a lattice-Boltzmann run.

    `rho`, `ux`, `uy`: (nx, ny), read (density and velocity); `f`: (9, nx, ny), written.
    Launch: (nx, ny) threads, one per cell."""
    i, j = gk.tid()
    r = rho[i, j]
    u = ux[i, j]
    v = uy[i, j]
    usq = 1.5 * (u * u + v * v)
    for q in range(9):
        cu = 3.0 * (EX[q] * u + EY[q] * v)
        f[q, i, j] = W[q] * r * (1.0 + cu + 0.5 * cu * cu - usq)
