"""Rows of benchmarks/library/library.py for gradkern.kernels.stencils, each with a
hand-written Numba primal + adjoint (Row.hand) in the style of
benchmarks/kernels/reverse_cpu.py, whose Allen–Cahn and 2-D heat versions are reused.

Every hand-written adjoint is a gather (each point sums its neighbours'
contributions, `prange` over the outermost axis, a branch-free inner loop for
the points whose neighbours are all interior and masked formulas for the
two-point frame), then a pass zeroing the shadow of the write-only output.
Scalars (c, dt) are Const, as in reverse_cpu.py; `add_source`'s amplitude is
Active. `python benchmarks/library/library_stencils.py` runs check_rows(): each
hand-written version against gk.autodiff, on small grids."""

from __future__ import annotations

import sys
from pathlib import Path

import numba
import numpy as np
from numba import prange

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (benchpath.py)
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path
from library_rows import Row, alone  # noqa: E402
from references import _interior, allen_cahn_adjoint, allen_cahn_primal, heat_adjoint, heat_primal  # noqa: E402
from rowcheck import check_against_hand  # noqa: E402

C_1D, C_2D, C_3D = 0.4, 0.2, 0.15  # heat: stable below 1/2, 1/4, 1/6
C_AC, DT_AC = 0.2, 0.01  # Allen–Cahn: c = dt/h^2 and dt
C_WAVE = 0.1  # dt^2/h^2; vel in [1, 2): c vel^2 < 0.4 <= 1/2, a stable leapfrog step


# ---------------------------------------------------------------- frame helpers


@numba.njit(inline="always")
def _gather5(du, dun, i, j, n0, n1, centre, edge, c):
    """du[i, j] += what un = edge·u (edges) or centre·u + c·(4 neighbours) (inside) sends back to u[i, j]."""
    s = centre * dun[i, j] if _interior(i, j, n0, n1) else edge * dun[i, j]
    if _interior(i - 1, j, n0, n1):
        s += c * dun[i - 1, j]
    if _interior(i + 1, j, n0, n1):
        s += c * dun[i + 1, j]
    if _interior(i, j - 1, n0, n1):
        s += c * dun[i, j - 1]
    if _interior(i, j + 1, n0, n1):
        s += c * dun[i, j + 1]
    du[i, j] += s


@numba.njit(parallel=True)
def _zero_2d(a):
    for i in prange(a.shape[0]):
        for j in range(a.shape[1]):
            a[i, j] = 0.0


# ---------------------------------------------------------------- heat 1-D and 3-D


@numba.njit(parallel=True)
def heat_1d_primal(u, un, c):
    n = u.shape[0]
    un[0] = u[0]
    un[n - 1] = u[n - 1]
    for i in prange(1, n - 1):
        un[i] = u[i] + c * (u[i - 1] - 2.0 * u[i] + u[i + 1])


@numba.njit(parallel=True)
def heat_1d_adjoint(du, dun, c):
    """du += J^T dun (gather), then dun = 0; needs n >= 5."""
    n = du.shape[0]
    k0 = 1.0 - 2.0 * c
    du[0] += dun[0] + c * dun[1]
    du[n - 1] += dun[n - 1] + c * dun[n - 2]
    du[1] += k0 * dun[1] + c * dun[2]
    du[n - 2] += k0 * dun[n - 2] + c * dun[n - 3]
    for i in prange(2, n - 2):
        du[i] += k0 * dun[i] + c * (dun[i - 1] + dun[i + 1])
    for i in prange(n):
        dun[i] = 0.0


@numba.njit(parallel=True)
def heat_3d_primal(u, un, c):
    n0, n1, n2 = u.shape
    for i in prange(n0):
        for j in range(n1):
            if i == 0 or i == n0 - 1 or j == 0 or j == n1 - 1:
                for k in range(n2):
                    un[i, j, k] = u[i, j, k]
            else:
                un[i, j, 0] = u[i, j, 0]
                un[i, j, n2 - 1] = u[i, j, n2 - 1]
                for k in range(1, n2 - 1):
                    un[i, j, k] = u[i, j, k] + c * (u[i - 1, j, k] + u[i + 1, j, k] + u[i, j - 1, k]
                                                    + u[i, j + 1, k] + u[i, j, k - 1] + u[i, j, k + 1]
                                                    - 6.0 * u[i, j, k])


@numba.njit(inline="always")
def _interior3(i, j, k, n0, n1, n2):
    return 1 <= i <= n0 - 2 and 1 <= j <= n1 - 2 and 1 <= k <= n2 - 2


@numba.njit(inline="always")
def _heat3_gather_point(du, dun, c, i, j, k, n0, n1, n2):
    s = (1.0 - 6.0 * c) * dun[i, j, k] if _interior3(i, j, k, n0, n1, n2) else dun[i, j, k]
    if _interior3(i - 1, j, k, n0, n1, n2):
        s += c * dun[i - 1, j, k]
    if _interior3(i + 1, j, k, n0, n1, n2):
        s += c * dun[i + 1, j, k]
    if _interior3(i, j - 1, k, n0, n1, n2):
        s += c * dun[i, j - 1, k]
    if _interior3(i, j + 1, k, n0, n1, n2):
        s += c * dun[i, j + 1, k]
    if _interior3(i, j, k - 1, n0, n1, n2):
        s += c * dun[i, j, k - 1]
    if _interior3(i, j, k + 1, n0, n1, n2):
        s += c * dun[i, j, k + 1]
    du[i, j, k] += s


@numba.njit(parallel=True)
def heat_3d_adjoint(du, dun, c):
    n0, n1, n2 = du.shape
    k0 = 1.0 - 6.0 * c
    for i in prange(n0):
        for j in range(n1):
            if i < 2 or i > n0 - 3 or j < 2 or j > n1 - 3:
                for k in range(n2):
                    _heat3_gather_point(du, dun, c, i, j, k, n0, n1, n2)
            else:
                _heat3_gather_point(du, dun, c, i, j, 0, n0, n1, n2)
                _heat3_gather_point(du, dun, c, i, j, 1, n0, n1, n2)
                for k in range(2, n2 - 2):
                    du[i, j, k] += k0 * dun[i, j, k] + c * (dun[i - 1, j, k] + dun[i + 1, j, k] + dun[i, j - 1, k]
                                                            + dun[i, j + 1, k] + dun[i, j, k - 1] + dun[i, j, k + 1])
                _heat3_gather_point(du, dun, c, i, j, n2 - 2, n0, n1, n2)
                _heat3_gather_point(du, dun, c, i, j, n2 - 1, n0, n1, n2)
    for i in prange(n0):
        for j in range(n1):
            for k in range(n2):
                dun[i, j, k] = 0.0


# ---------------------------------------------------------------- Laplacians (5- and 9-point)


@numba.njit(parallel=True)
def laplace_primal(u, out):
    n0, n1 = u.shape
    for i in prange(n0):
        if i == 0 or i == n0 - 1:
            for j in range(n1):
                out[i, j] = 0.0
        else:
            out[i, 0] = 0.0
            out[i, n1 - 1] = 0.0
            for j in range(1, n1 - 1):
                out[i, j] = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]


@numba.njit(parallel=True)
def laplace_adjoint(du, dout):
    n0, n1 = du.shape
    for i in prange(n0):
        if i < 2 or i > n0 - 3:
            for j in range(n1):
                _gather5(du, dout, i, j, n0, n1, -4.0, 0.0, 1.0)
        else:
            _gather5(du, dout, i, 0, n0, n1, -4.0, 0.0, 1.0)
            _gather5(du, dout, i, 1, n0, n1, -4.0, 0.0, 1.0)
            for j in range(2, n1 - 2):
                du[i, j] += dout[i - 1, j] + dout[i + 1, j] + dout[i, j - 1] + dout[i, j + 1] - 4.0 * dout[i, j]
            _gather5(du, dout, i, n1 - 2, n0, n1, -4.0, 0.0, 1.0)
            _gather5(du, dout, i, n1 - 1, n0, n1, -4.0, 0.0, 1.0)
    _zero_2d(dout)


@numba.njit(parallel=True)
def laplace9_primal(u, out):
    n0, n1 = u.shape
    for i in prange(n0):
        if i == 0 or i == n0 - 1:
            for j in range(n1):
                out[i, j] = 0.0
        else:
            out[i, 0] = 0.0
            out[i, n1 - 1] = 0.0
            for j in range(1, n1 - 1):
                faces = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]
                corners = u[i - 1, j - 1] + u[i - 1, j + 1] + u[i + 1, j - 1] + u[i + 1, j + 1]
                out[i, j] = (4.0 * faces + corners - 20.0 * u[i, j]) * (1.0 / 6.0)


@numba.njit(inline="always")
def _laplace9_gather_point(du, dout, i, j, n0, n1):
    s = 0.0
    for a in range(-1, 2):
        for b in range(-1, 2):
            if _interior(i + a, j + b, n0, n1):
                w = -20.0 if a == 0 and b == 0 else (1.0 if a != 0 and b != 0 else 4.0)
                s += w * dout[i + a, j + b]
    du[i, j] += s * (1.0 / 6.0)


@numba.njit(parallel=True)
def laplace9_adjoint(du, dout):
    n0, n1 = du.shape
    for i in prange(n0):
        if i < 2 or i > n0 - 3:
            for j in range(n1):
                _laplace9_gather_point(du, dout, i, j, n0, n1)
        else:
            _laplace9_gather_point(du, dout, i, 0, n0, n1)
            _laplace9_gather_point(du, dout, i, 1, n0, n1)
            for j in range(2, n1 - 2):
                faces = dout[i - 1, j] + dout[i + 1, j] + dout[i, j - 1] + dout[i, j + 1]
                corners = dout[i - 1, j - 1] + dout[i - 1, j + 1] + dout[i + 1, j - 1] + dout[i + 1, j + 1]
                du[i, j] += (4.0 * faces + corners - 20.0 * dout[i, j]) * (1.0 / 6.0)
            _laplace9_gather_point(du, dout, i, n1 - 2, n0, n1)
            _laplace9_gather_point(du, dout, i, n1 - 1, n0, n1)
    _zero_2d(dout)


# ---------------------------------------------------------------- acoustic wave, source injection


@numba.njit(parallel=True)
def wave_primal(u_prev, u, u_next, vel, c):
    n0, n1 = u.shape
    for i in prange(n0):
        if i == 0 or i == n0 - 1:
            for j in range(n1):
                u_next[i, j] = 0.0
        else:
            u_next[i, 0] = 0.0
            u_next[i, n1 - 1] = 0.0
            for j in range(1, n1 - 1):
                v = vel[i, j]
                lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
                u_next[i, j] = 2.0 * u[i, j] - u_prev[i, j] + c * v * v * lap


@numba.njit(inline="always")
def _wave_gather_point(u, du_prev, du, g, vel, dvel, c, i, j, n0, n1):
    """At (i, j): u_next = 2u - u_prev + h lap(u) with h = c vel^2 sends g back: -g to u_prev, 2c vel lap g to
    vel, (2 - 4h) g to u here and h g of each interior neighbour to u."""
    s = 0.0
    if _interior(i, j, n0, n1):
        gij, v = g[i, j], vel[i, j]
        lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
        du_prev[i, j] -= gij
        dvel[i, j] += 2.0 * c * v * lap * gij
        s = (2.0 - 4.0 * c * v * v) * gij
    for a, b in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        if _interior(i + a, j + b, n0, n1):
            w = vel[i + a, j + b]
            s += c * w * w * g[i + a, j + b]
    du[i, j] += s


@numba.njit(parallel=True)
def wave_adjoint(u, du_prev, du, g, vel, dvel, c):
    """g: the shadow of u_next (write-only): gathered, then zeroed."""
    n0, n1 = u.shape
    for i in prange(n0):
        if i < 2 or i > n0 - 3:
            for j in range(n1):
                _wave_gather_point(u, du_prev, du, g, vel, dvel, c, i, j, n0, n1)
        else:
            _wave_gather_point(u, du_prev, du, g, vel, dvel, c, i, 0, n0, n1)
            _wave_gather_point(u, du_prev, du, g, vel, dvel, c, i, 1, n0, n1)
            for j in range(2, n1 - 2):
                gij, v = g[i, j], vel[i, j]
                lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
                du_prev[i, j] -= gij
                dvel[i, j] += 2.0 * c * v * lap * gij
                vn, vs, vw, ve = vel[i - 1, j], vel[i + 1, j], vel[i, j - 1], vel[i, j + 1]
                du[i, j] += (2.0 - 4.0 * c * v * v) * gij + c * (vn * vn * g[i - 1, j] + vs * vs * g[i + 1, j]
                                                                  + vw * vw * g[i, j - 1] + ve * ve * g[i, j + 1])
            _wave_gather_point(u, du_prev, du, g, vel, dvel, c, i, n1 - 2, n0, n1)
            _wave_gather_point(u, du_prev, du, g, vel, dvel, c, i, n1 - 1, n0, n1)
    _zero_2d(g)


@numba.njit
def add_source_hand(u, du, i, j, amp):
    """Primal u[i, j] += amp; adjoint: d amp = du[i, j] (du unchanged: an in-place add)."""
    u[i, j] += amp
    return du[i, j]


# ---------------------------------------------------------------- Allen–Cahn 2-D


@numba.njit(parallel=True)
def allen_cahn_2d_primal(u, un, c, dt):
    n0, n1 = u.shape
    for i in prange(n0):
        if i == 0 or i == n0 - 1:
            for j in range(n1):
                un[i, j] = u[i, j]
        else:
            un[i, 0] = u[i, 0]
            un[i, n1 - 1] = u[i, n1 - 1]
            for j in range(1, n1 - 1):
                uij = u[i, j]
                lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * uij
                un[i, j] = uij + c * lap + dt * (uij - uij ** 3)


@numba.njit(parallel=True)
def allen_cahn_2d_adjoint(u, du, dun, c, dt):
    n0, n1 = du.shape
    k0 = 1.0 - 4.0 * c + dt
    for i in prange(n0):
        if i < 2 or i > n0 - 3:
            for j in range(n1):
                _gather5(du, dun, i, j, n0, n1, k0 - 3.0 * dt * u[i, j] ** 2, 1.0, c)
        else:
            for j in (0, 1):
                _gather5(du, dun, i, j, n0, n1, k0 - 3.0 * dt * u[i, j] ** 2, 1.0, c)
            for j in range(2, n1 - 2):
                uij = u[i, j]
                du[i, j] += (k0 - 3.0 * dt * uij * uij) * dun[i, j] + c * (dun[i - 1, j] + dun[i + 1, j]
                                                                           + dun[i, j - 1] + dun[i, j + 1])
            for j in (n1 - 2, n1 - 1):
                _gather5(du, dun, i, j, n0, n1, k0 - 3.0 * dt * u[i, j] ** 2, 1.0, c)
    _zero_2d(dun)


# ---------------------------------------------------------------- rows


def _side(n: int, dims: int) -> int:
    """The side of a square or cube of about n points."""
    return max(5, int(round(n ** (1.0 / dims))))


def _field(rng, shape):
    return rng.uniform(0.5, 1.5, shape)


def _pair(dims: int, *scalars):
    """u random, un uninitialised, the scalars: the arguments of a step u -> un."""
    def setup(rng, n):
        shape = (_side(n, dims),) * dims
        return [_field(rng, shape), np.empty(shape), *scalars], shape if dims > 1 else shape[0]
    return setup


def _wave_setup(rng, n):
    shape = (_side(n, 2),) * 2
    return [_field(rng, shape), _field(rng, shape), np.empty(shape), rng.uniform(1.0, 2.0, shape), C_WAVE], shape


def _add_source_setup(rng, n):
    shape = (_side(n, 2),) * 2
    return [_field(rng, shape), shape[0] // 3, shape[1] // 2, 0.7], 1


def _two(a):
    return 2 * a[0].nbytes


def _hand_step(primal, adjoint, with_u=False):
    """Row.hand of a step (u, un, *scalars): the primal, then the adjoint on (u's shadow, un's shadow)."""
    def hand(args, shadows):
        u, un, *scalars = args
        primal(u, un, *scalars)
        if with_u:
            adjoint(u, shadows["u"], shadows["un"], *scalars)
        else:
            adjoint(shadows["u"], shadows["un"], *scalars)
    return hand


def _laplace_hand(primal, adjoint):
    def hand(args, shadows):
        u, out = args
        primal(u, out)
        adjoint(shadows["u"], shadows["out"])
    return hand


def _wave_hand(args, shadows):
    u_prev, u, u_next, vel, c = args
    wave_primal(u_prev, u, u_next, vel, c)
    wave_adjoint(u, shadows["u_prev"], shadows["u"], shadows["u_next"], vel, shadows["vel"], c)


def _add_source_hand(args, shadows):
    u, i, j, amp = args
    add_source_hand(u, shadows["u"], i, j, amp)


STEP = ("u", "un")
ROWS = [
    Row("allen_cahn_step", _pair(1, C_AC, DT_AC), _two, wrt=STEP,
        hand=_hand_step(allen_cahn_primal, allen_cahn_adjoint, with_u=True), hand_primal=alone(allen_cahn_primal)),
    Row("laplace_2d", _pair(2), _two, wrt=("u", "out"), hand=_laplace_hand(laplace_primal, laplace_adjoint),
        hand_primal=alone(laplace_primal)),
    Row("heat_step_2d", _pair(2, C_2D), _two, wrt=STEP, hand=_hand_step(heat_primal, heat_adjoint),
        hand_primal=alone(heat_primal)),
    Row("heat_step_1d", _pair(1, C_1D), _two, wrt=STEP, hand=_hand_step(heat_1d_primal, heat_1d_adjoint),
        hand_primal=alone(heat_1d_primal)),
    Row("heat_step_3d", _pair(3, C_3D), _two, wrt=STEP, hand=_hand_step(heat_3d_primal, heat_3d_adjoint),
        hand_primal=alone(heat_3d_primal)),
    Row("laplace9_2d", _pair(2), _two, wrt=("u", "out"), hand=_laplace_hand(laplace9_primal, laplace9_adjoint),
        hand_primal=alone(laplace9_primal)),
    # reads u_prev, u, vel and writes u_next
    Row("wave_step_2d", _wave_setup, lambda a: 4 * a[0].nbytes, wrt=("u_prev", "u", "u_next", "vel"),
        hand=_wave_hand, hand_primal=alone(wave_primal)),
    # one point read and written: the launch's overhead, whatever the grid's size
    Row("add_source", _add_source_setup, lambda a: 2 * a[0].itemsize, wrt=("u", "amp"), hand=_add_source_hand),
    Row("allen_cahn_step_2d", _pair(2, C_AC, DT_AC), _two, wrt=STEP,
        hand=_hand_step(allen_cahn_2d_primal, allen_cahn_2d_adjoint, with_u=True),
        hand_primal=alone(allen_cahn_2d_primal)),
]


def check_rows() -> None:
    """Each row's hand-written primal + adjoint against gk.autodiff, on grids small enough to be quick but with
    interior, frame and boundary points (and odd sides)."""
    for row in ROWS:
        for n in (7**3, 37 * 41):
            check_against_hand(row, n)
        print(f"{row.name}: the hand-written primal and adjoint agree with gk.autodiff")


if __name__ == "__main__":
    check_rows()
