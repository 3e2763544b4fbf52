"""Stencils of explicit time-stepping codes on uniform grids."""

import gradkern as gk

__all__ = ["allen_cahn_step", "laplace_2d", "heat_step_2d"]


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
