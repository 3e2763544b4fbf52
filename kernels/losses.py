"""Losses that end a simulation: sums of squares, misfits at sensors."""

import gradkern as gk

__all__ = ["sum_squares", "sum_squares_2d", "l2_misfit", "l2_misfit_2d"]


@gk.kernel
def sum_squares(x, out):
    """out_0 ← out_0 + Σᵢ xᵢ², by atomic adds.

    `x`: (n,), read; `out`: (1,) or longer, element 0 updated in place (accumulated into).
    Launch: n threads, one per element."""
    i = gk.tid()
    xi = x[i]
    gk.atomic_add(out, 0, xi * xi)


@gk.kernel
def sum_squares_2d(x, out):
    """out_0 ← out_0 + Σᵢⱼ xᵢⱼ², by atomic adds.

    `x`: (nx, ny), read; `out`: (1,) or longer, element 0 updated in place (accumulated into).
    Launch: (nx, ny) threads, one per element."""
    i, j = gk.tid()
    xij = x[i, j]
    gk.atomic_add(out, 0, xij * xij)


@gk.kernel
def l2_misfit(u, sensors, obs, out):
    """The least-squares misfit at sensors: out_0 ← out_0 + ½ Σₖ (u[sensors_k] − obs_k)², by atomic adds.
    A sensor index may repeat (its residual then counts once per occurrence).

    `u`: (n,), read; `sensors`: (m,) int, read (indices into u); `obs`: (m,), read (the observations);
    `out`: (1,) or longer, element 0 updated in place (accumulated into).
    Launch: m threads, one per sensor."""
    k = gk.tid()
    d = u[sensors[k]] - obs[k]
    gk.atomic_add(out, 0, 0.5 * d * d)


@gk.kernel
def l2_misfit_2d(u, rows, cols, obs, out):
    """The least-squares misfit at sensors of a 2-D field:
    out_0 ← out_0 + ½ Σₖ (u[rows_k, cols_k] − obs_k)², by atomic adds. A sensor may repeat.

    `u`: (nx, ny), read; `rows`, `cols`: (m,) int, read (sensor k sits at u[rows_k, cols_k]);
    `obs`: (m,), read (the observations); `out`: (1,) or longer, element 0 updated in place (accumulated into).
    Launch: m threads, one per sensor."""
    k = gk.tid()
    d = u[rows[k], cols[k]] - obs[k]
    gk.atomic_add(out, 0, 0.5 * d * d)
