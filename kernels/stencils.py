"""Stencil kernels of time-stepping codes."""

import gradkern as gk


@gk.kernel
def allen_cahn_step(u, un, c, dt):
    """One explicit step of the 1-D Allen-Cahn equation u_t = u_xx + u - u^3
    (c = dt/h^2), Dirichlet ends kept fixed: un <- step(u)."""
    i = gk.tid()
    if i == 0 or i == u.shape[0] - 1:
        un[i] = u[i]
    else:
        ui = u[i]
        un[i] = ui + c * (u[i - 1] - 2.0 * ui + u[i + 1]) + dt * (ui - ui ** 3)


@gk.kernel
def laplace_2d(u, out):
    """5-point Laplacian of u (unit spacing) on the interior; boundary set to 0."""
    i, j = gk.tid()
    if i == 0 or j == 0 or i == u.shape[0] - 1 or j == u.shape[1] - 1:
        out[i, j] = 0.0
    else:
        out[i, j] = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]


@gk.kernel
def heat_step_2d(u, un, c):
    """One explicit heat-equation step with the 5-point stencil, edges fixed."""
    i, j = gk.tid()
    if i == 0 or j == 0 or i == u.shape[0] - 1 or j == u.shape[1] - 1:
        un[i, j] = u[i, j]
    else:
        un[i, j] = u[i, j] + c * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j])
