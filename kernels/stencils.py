"""Stencils of explicit time-stepping codes on uniform grids."""

import gradkern as gk

__all__ = ["allen_cahn_step", "laplace_2d", "heat_step_2d", "heat_step_1d", "heat_step_3d", "laplace9_2d",
           "wave_step_2d", "add_source", "allen_cahn_step_2d"]


@gk.kernel
def allen_cahn_step(u, un, c, dt):
    """One explicit step of the 1-D Allen–Cahn equation u_t = u_xx + u − u³:
    un_i = u_i + c (u_{i-1} − 2u_i + u_{i+1}) + dt (u_i − u_i³), c = dt/h²;
    Dirichlet ends kept (un_0 = u_0, un_{n-1} = u_{n-1}).

    `u`: (n,), read; `un`: (n,), written; `c`, `dt`: scalars.
    Launch: n threads, one per point."""
    i = gk.tid()
    if i == 0 or i == u.shape[0] - 1:
        un[i] = u[i]
    else:
        ui = u[i]
        un[i] = ui + c * (u[i - 1] - 2.0 * ui + u[i + 1]) + dt * (ui - ui ** 3)


@gk.kernel
def laplace_2d(u, out):
    """5-point Laplacian with unit spacing:
    out_ij = u_{i-1,j} + u_{i+1,j} + u_{i,j-1} + u_{i,j+1} − 4u_ij inside, 0 on the boundary.

    `u`: (nx, ny), read; `out`: (nx, ny), written.
    Launch: (nx, ny) threads, one per point."""
    i, j = gk.tid()
    if i == 0 or j == 0 or i == u.shape[0] - 1 or j == u.shape[1] - 1:
        out[i, j] = 0.0
    else:
        out[i, j] = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]


@gk.kernel
def heat_step_2d(u, un, c):
    """One explicit step of the 2-D heat equation with the 5-point stencil:
    un = u + c Δ₅u inside (c = κ dt/h², stable for c ≤ 1/4), edges kept.

    `u`: (nx, ny), read; `un`: (nx, ny), written; `c`: scalar.
    Launch: (nx, ny) threads, one per point."""
    i, j = gk.tid()
    if i == 0 or j == 0 or i == u.shape[0] - 1 or j == u.shape[1] - 1:
        un[i, j] = u[i, j]
    else:
        un[i, j] = u[i, j] + c * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j])


@gk.kernel
def heat_step_1d(u, un, c):
    """One explicit step of the 1-D heat equation with the 3-point stencil:
    un_i = u_i + c (u_{i-1} − 2u_i + u_{i+1}) inside (c = κ dt/h², stable for c ≤ 1/2),
    Dirichlet ends kept (un_0 = u_0, un_{n-1} = u_{n-1}).

    `u`: (n,), read; `un`: (n,), written; `c`: scalar.
    Launch: n threads, one per point."""
    i = gk.tid()
    if i == 0 or i == u.shape[0] - 1:
        un[i] = u[i]
    else:
        un[i] = u[i] + c * (u[i - 1] - 2.0 * u[i] + u[i + 1])


@gk.kernel
def heat_step_3d(u, un, c):
    """One explicit step of the 3-D heat equation with the 7-point stencil:
    un = u + c Δ₇u inside, Δ₇u_ijk = Σ of the six face neighbours − 6u_ijk
    (c = κ dt/h², stable for c ≤ 1/6); the six boundary faces kept (un = u there).

    `u`: (nx, ny, nz), read; `un`: (nx, ny, nz), written; `c`: scalar.
    Launch: (nx, ny, nz) threads, one per point."""
    i, j, k = gk.tid()
    if i == 0 or j == 0 or k == 0 or i == u.shape[0] - 1 or j == u.shape[1] - 1 or k == u.shape[2] - 1:
        un[i, j, k] = u[i, j, k]
    else:
        un[i, j, k] = u[i, j, k] + c * (u[i - 1, j, k] + u[i + 1, j, k] + u[i, j - 1, k] + u[i, j + 1, k]
                                        + u[i, j, k - 1] + u[i, j, k + 1] - 6.0 * u[i, j, k])


@gk.kernel
def laplace9_2d(u, out):
    """The isotropic 9-point Laplacian with unit spacing:
    out_ij = (4 (N + S + E + W) + (NE + NW + SE + SW) − 20 u_ij) / 6 inside (N = u_{i-1,j},
    S = u_{i+1,j}, W = u_{i,j-1}, E = u_{i,j+1}, NE = u_{i-1,j+1}, …), 0 on the boundary.
    Its leading error, (h²/12) Δ²u, is rotation-invariant (the 5-point stencil's is not).

    `u`: (nx, ny), read; `out`: (nx, ny), written.
    Launch: (nx, ny) threads, one per point."""
    i, j = gk.tid()
    if i == 0 or j == 0 or i == u.shape[0] - 1 or j == u.shape[1] - 1:
        out[i, j] = 0.0
    else:
        faces = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
        corners = u[i - 1, j - 1] + u[i - 1, j + 1] + u[i + 1, j - 1] + u[i + 1, j + 1]
        out[i, j] = (4.0 * faces + corners - 20.0 * u[i, j]) * (1.0 / 6.0)


@gk.kernel
def wave_step_2d(u_prev, u, u_next, vel, c):
    """One leapfrog step of the 2-D acoustic wave equation u_tt = v(x)² Δu:
    u_next = 2u − u_prev + c · vel² · Δ₅u inside, c = dt²/h², Δ₅ the 5-point Laplacian
    (stable for c · max(vel)² ≤ 1/2); u_next = 0 on the edges (a rigid, reflecting boundary).

    `u_prev`: (nx, ny), read (the field at t − dt); `u`: (nx, ny), read (at t);
    `u_next`: (nx, ny), written (at t + dt); `vel`: (nx, ny), read (the velocity model); `c`: scalar.
    Launch: (nx, ny) threads, one per point."""
    i, j = gk.tid()
    if i == 0 or j == 0 or i == u.shape[0] - 1 or j == u.shape[1] - 1:
        u_next[i, j] = 0.0
    else:
        # the Laplacian inline, not in a local: d/dvel needs it, and the reverse then recomputes it from u (left
        # intact) where a local of that many operations would be taped (transforms/tape.py, RECOMPUTE_LIMIT)
        v = vel[i, j]
        u_next[i, j] = 2.0 * u[i, j] - u_prev[i, j] + c * v * v * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1]
                                                                  + u[i, j + 1] - 4.0 * u[i, j])


@gk.kernel
def add_source(u, i, j, amp):
    """Source injection of a wave code: u_ij ← u_ij + amp at the one grid point (i, j).

    `u`: (nx, ny), updated in place; `i`, `j`: ints, the point (0 ≤ i < nx, 0 ≤ j < ny); `amp`: scalar,
    the source's amplitude this step (a wavelet's sample).
    Launch: 1 thread."""
    u[i, j] += amp


@gk.kernel
def allen_cahn_step_2d(u, un, c, dt):
    """One explicit step of the 2-D Allen–Cahn equation u_t = Δu + u − u³:
    un = u + c Δ₅u + dt (u − u³) inside, c = dt/h² (stable for c ≤ 1/4); edges kept (un = u).

    `u`: (nx, ny), read; `un`: (nx, ny), written; `c`, `dt`: scalars.
    Launch: (nx, ny) threads, one per point."""
    i, j = gk.tid()
    if i == 0 or j == 0 or i == u.shape[0] - 1 or j == u.shape[1] - 1:
        un[i, j] = u[i, j]
    else:
        uij = u[i, j]
        lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * uij
        un[i, j] = uij + c * lap + dt * (uij - uij ** 3)
