"""Rows of benchmarks/library/library.py for gradkern.kernels.transport, each with a
hand-written Numba primal + adjoint (Row.hand) in the style of
benchmarks/kernels/reverse_cpu.py: `prange` over cells, every adjoint a gather
(each cell sums what its faces send it, recomputing a face's partials in both
cells that share it, as gradkern's gathered reverse does), then a pass
zeroing the shadows of the write-only outputs. Scalars (c, g) are Const.

    python benchmarks/library/library_transport.py    # check_rows(): hand-written == gradkern on small random inputs
"""

from __future__ import annotations

import math
import sys

import numba
import numpy as np
from library_rows import Row, alone
from numba import prange

import gradkern as gk
from gradkern.kernels import burgers_rusanov_1d, shallow_water_2d, upwind_1d, upwind_2d

C_UPWIND, C_UPWIND_2D, C_BURGERS, C_SW, G = 0.4, 0.2, 0.3, 0.05, 9.81


def _signed(rng: np.random.Generator, shape, lo: float, hi: float) -> np.ndarray:
    return rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


def _side(n: int) -> int:
    return max(4, math.isqrt(n))


# ---------------------------------------------------------------- upwind 1-D


@numba.njit(parallel=True, fastmath=False)
def upwind_1d_primal(u, un, vel, c):
    n = u.shape[0]
    for i in prange(n):
        im = i - 1 if i > 0 else n - 1
        ip = i + 1 if i < n - 1 else 0
        ui = u[i]
        fl = max(vel[i], 0.0) * u[im] + min(vel[i], 0.0) * ui
        fr = max(vel[ip], 0.0) * ui + min(vel[ip], 0.0) * u[ip]
        un[i] = ui - c * (fr - fl)


@numba.njit(inline="always")
def _upwind_dv(v, behind, ahead):
    """d(max(v, 0) behind + min(v, 0) ahead)/dv, gradkern's convention at v = 0 (both sides)."""
    return (behind if v >= 0.0 else 0.0) + (ahead if v <= 0.0 else 0.0)


@numba.njit(parallel=True, fastmath=False)
def upwind_1d_adjoint(u, vel, du, dun, dvel, c):
    """Face k (between cells k-1 and k) has adjoint dF_k = c (dun_k - dun_{k-1}); cell i sums
    dun_i + dF_i min(v_i, 0) + dF_{i+1} max(v_{i+1}, 0); dvel_i gets dF_i dF/dv_i. Then dun = 0."""
    n = u.shape[0]
    for i in prange(n):
        im = i - 1 if i > 0 else n - 1
        ip = i + 1 if i < n - 1 else 0
        dfl = c * (dun[i] - dun[im])
        dfr = c * (dun[ip] - dun[i])
        du[i] += dun[i] + dfl * min(vel[i], 0.0) + dfr * max(vel[ip], 0.0)
        dvel[i] += dfl * _upwind_dv(vel[i], u[im], u[i])
    for i in prange(n):
        dun[i] = 0.0


def _setup_upwind_1d(rng, n):
    return [rng.uniform(0.5, 1.5, n), np.zeros(n), _signed(rng, n, 0.2, 1.0), C_UPWIND], n


def _hand_upwind_1d(args, sh):
    u, un, vel, c = args
    upwind_1d_primal(u, un, vel, c)
    upwind_1d_adjoint(u, vel, sh["u"], sh["un"], sh["vel"], c)


# ---------------------------------------------------------------- upwind 2-D


@numba.njit(parallel=True, fastmath=False)
def upwind_2d_primal(u, un, vx, vy, c):
    nx, ny = u.shape
    for i in prange(nx):
        im = i - 1 if i > 0 else nx - 1
        ip = i + 1 if i < nx - 1 else 0
        for j in range(ny):
            jm = j - 1 if j > 0 else ny - 1
            jp = j + 1 if j < ny - 1 else 0
            uc = u[i, j]
            fw = max(vx[i, j], 0.0) * u[im, j] + min(vx[i, j], 0.0) * uc
            fe = max(vx[ip, j], 0.0) * uc + min(vx[ip, j], 0.0) * u[ip, j]
            gs = max(vy[i, j], 0.0) * u[i, jm] + min(vy[i, j], 0.0) * uc
            gn = max(vy[i, jp], 0.0) * uc + min(vy[i, jp], 0.0) * u[i, jp]
            un[i, j] = uc - c * (fe - fw + gn - gs)


@numba.njit(parallel=True, fastmath=False)
def upwind_2d_adjoint(u, vx, vy, du, dun, dvx, dvy, c):
    nx, ny = u.shape
    for i in prange(nx):
        im = i - 1 if i > 0 else nx - 1
        ip = i + 1 if i < nx - 1 else 0
        for j in range(ny):
            jm = j - 1 if j > 0 else ny - 1
            jp = j + 1 if j < ny - 1 else 0
            g = dun[i, j]
            dfw = c * (g - dun[im, j])
            dfe = c * (dun[ip, j] - g)
            dgs = c * (g - dun[i, jm])
            dgn = c * (dun[i, jp] - g)
            du[i, j] += (g + dfw * min(vx[i, j], 0.0) + dfe * max(vx[ip, j], 0.0)
                         + dgs * min(vy[i, j], 0.0) + dgn * max(vy[i, jp], 0.0))
            dvx[i, j] += dfw * _upwind_dv(vx[i, j], u[im, j], u[i, j])
            dvy[i, j] += dgs * _upwind_dv(vy[i, j], u[i, jm], u[i, j])
    for i in prange(nx):
        for j in range(ny):
            dun[i, j] = 0.0


def _setup_upwind_2d(rng, n):
    s = (_side(n), _side(n))
    return [rng.uniform(0.5, 1.5, s), np.zeros(s), _signed(rng, s, 0.2, 1.0), _signed(rng, s, 0.2, 1.0),
            C_UPWIND_2D], s


def _hand_upwind_2d(args, sh):
    u, un, vx, vy, c = args
    upwind_2d_primal(u, un, vx, vy, c)
    upwind_2d_adjoint(u, vx, vy, sh["u"], sh["un"], sh["vx"], sh["vy"], c)


# ---------------------------------------------------------------- Burgers (Rusanov)


@numba.njit(inline="always")
def _burgers_flux(a, b):
    return 0.5 * (0.5 * a * a + 0.5 * b * b) - 0.5 * max(abs(a), abs(b)) * (b - a)


@numba.njit(inline="always")
def _burgers_partials(a, b):
    """(dF/da, dF/db) of the Rusanov flux F(a, b) between cells a | b; α = max(|a|, |b|), the first
    argument taking the derivative on ties and d|x|/dx = 1 at 0 (gradkern's conventions)."""
    alpha = max(abs(a), abs(b))
    jump = b - a
    if abs(a) >= abs(b):
        da_alpha, db_alpha = (1.0 if a >= 0.0 else -1.0), 0.0
    else:
        da_alpha, db_alpha = 0.0, (1.0 if b >= 0.0 else -1.0)
    return (0.5 * a - 0.5 * da_alpha * jump + 0.5 * alpha, 0.5 * b - 0.5 * db_alpha * jump - 0.5 * alpha)


@numba.njit(parallel=True, fastmath=False)
def burgers_primal(u, un, c):
    n = u.shape[0]
    for i in prange(n):
        im = i - 1 if i > 0 else n - 1
        ip = i + 1 if i < n - 1 else 0
        un[i] = u[i] - c * (_burgers_flux(u[i], u[ip]) - _burgers_flux(u[im], u[i]))


@numba.njit(parallel=True, fastmath=False)
def burgers_adjoint(u, du, dun, c):
    n = u.shape[0]
    for i in prange(n):
        im = i - 1 if i > 0 else n - 1
        ip = i + 1 if i < n - 1 else 0
        dfl = c * (dun[i] - dun[im])  # face i-1/2 (im | i)
        dfr = c * (dun[ip] - dun[i])  # face i+1/2 (i | ip)
        du[i] += dun[i] + dfl * _burgers_partials(u[im], u[i])[1] + dfr * _burgers_partials(u[i], u[ip])[0]
    for i in prange(n):
        dun[i] = 0.0


def _setup_burgers(rng, n):
    return [_signed(rng, n, 0.3, 1.2), np.zeros(n), C_BURGERS], n


def _hand_burgers(args, sh):
    u, un, c = args
    burgers_primal(u, un, c)
    burgers_adjoint(u, sh["u"], sh["un"], c)


# ---------------------------------------------------------------- shallow water (Rusanov)


@numba.njit(inline="always")
def _sw_face(hl, ml, nl, hr, mr, nr, g):
    """The Rusanov flux through a face normal to the momentum m (n the tangential one)."""
    ul, ur = ml / hl, mr / hr
    a = max(abs(ul) + math.sqrt(g * hl), abs(ur) + math.sqrt(g * hr))
    f0 = 0.5 * (ml + mr) - 0.5 * a * (hr - hl)
    f1 = 0.5 * (ml * ul + 0.5 * g * hl * hl + mr * ur + 0.5 * g * hr * hr) - 0.5 * a * (mr - ml)
    f2 = 0.5 * (nl * ul + nr * ur) - 0.5 * a * (nr - nl)
    return f0, f1, f2


@numba.njit(inline="always")
def _sw_face_vjp(hl, ml, nl, hr, mr, nr, g, d0, d1, d2, left):
    """(d/dh, d/dm, d/dn) of d·F for the left (left=True) or right state of a face."""
    ul, ur = ml / hl, mr / hr
    cl, cr = math.sqrt(g * hl), math.sqrt(g * hr)
    sl, sr = abs(ul) + cl, abs(ur) + cr
    a = max(sl, sr)
    da = -0.5 * (d0 * (hr - hl) + d1 * (mr - ml) + d2 * (nr - nl))
    if left:
        h, m, n, side, on_a = hl, ml, nl, 1.0, sl >= sr
    else:
        h, m, n, side, on_a = hr, mr, nr, -1.0, sl < sr
    u = m / h
    # 1/2 J^T d of F(q) = (m, m^2/h + g h^2/2, n m/h), then -1/2 a (qR - qL)'s +-1/2 a d
    dh = 0.5 * (d1 * (-u * u + g * h) - d2 * n * u / h) + side * 0.5 * a * d0
    dm = 0.5 * (d0 + d1 * 2.0 * u + d2 * n / h) + side * 0.5 * a * d1
    dn = 0.5 * d2 * u + side * 0.5 * a * d2
    if on_a:  # a = |u| + sqrt(g h) of this side
        sgn = 1.0 if u >= 0.0 else -1.0
        dh += da * (-sgn * u / h + 0.5 * g / math.sqrt(g * h))
        dm += da * sgn / h
    return dh, dm, dn


@numba.njit(parallel=True, fastmath=False)
def shallow_water_primal(h, hu, hv, hn, hun, hvn, g, c):
    nx, ny = h.shape
    for i in prange(nx):
        im = i - 1 if i > 0 else nx - 1
        ip = i + 1 if i < nx - 1 else 0
        for j in range(ny):
            jm = j - 1 if j > 0 else ny - 1
            jp = j + 1 if j < ny - 1 else 0
            hc, huc, hvc = h[i, j], hu[i, j], hv[i, j]
            w0, w1, w2 = _sw_face(h[im, j], hu[im, j], hv[im, j], hc, huc, hvc, g)
            e0, e1, e2 = _sw_face(hc, huc, hvc, h[ip, j], hu[ip, j], hv[ip, j], g)
            s0, s2, s1 = _sw_face(h[i, jm], hv[i, jm], hu[i, jm], hc, hvc, huc, g)  # normal momentum hv
            n0, n2, n1 = _sw_face(hc, hvc, huc, h[i, jp], hv[i, jp], hu[i, jp], g)
            hn[i, j] = hc - c * (e0 - w0 + n0 - s0)
            hun[i, j] = huc - c * (e1 - w1 + n1 - s1)
            hvn[i, j] = hvc - c * (e2 - w2 + n2 - s2)


@numba.njit(parallel=True, fastmath=False)
def shallow_water_adjoint(h, hu, hv, dh, dhu, dhv, dhn, dhun, dhvn, g, c):
    """Each face between cells L and R has adjoint c (dq_R - dq_L) (per component); cell (i, j) adds
    dqn and the VJPs of its four faces' fluxes on its own side. Then the outputs' shadows are zeroed."""
    nx, ny = h.shape
    for i in prange(nx):
        im = i - 1 if i > 0 else nx - 1
        ip = i + 1 if i < nx - 1 else 0
        for j in range(ny):
            jm = j - 1 if j > 0 else ny - 1
            jp = j + 1 if j < ny - 1 else 0
            hc, huc, hvc = h[i, j], hu[i, j], hv[i, j]
            g0, g1, g2 = dhn[i, j], dhun[i, j], dhvn[i, j]
            ah, au, av = g0, g1, g2
            # west face (im | c), this cell on the right
            x, y, z = _sw_face_vjp(h[im, j], hu[im, j], hv[im, j], hc, huc, hvc, g, c * (g0 - dhn[im, j]),
                                   c * (g1 - dhun[im, j]), c * (g2 - dhvn[im, j]), False)
            ah, au, av = ah + x, au + y, av + z
            # east face (c | ip), this cell on the left
            x, y, z = _sw_face_vjp(hc, huc, hvc, h[ip, j], hu[ip, j], hv[ip, j], g, c * (dhn[ip, j] - g0),
                                   c * (dhun[ip, j] - g1), c * (dhvn[ip, j] - g2), True)
            ah, au, av = ah + x, au + y, av + z
            # south face (jm | c): normal momentum hv, components (h, hv, hu)
            x, z, y = _sw_face_vjp(h[i, jm], hv[i, jm], hu[i, jm], hc, hvc, huc, g, c * (g0 - dhn[i, jm]),
                                   c * (g2 - dhvn[i, jm]), c * (g1 - dhun[i, jm]), False)
            ah, au, av = ah + x, au + y, av + z
            # north face (c | jp)
            x, z, y = _sw_face_vjp(hc, hvc, huc, h[i, jp], hv[i, jp], hu[i, jp], g, c * (dhn[i, jp] - g0),
                                   c * (dhvn[i, jp] - g2), c * (dhun[i, jp] - g1), True)
            dh[i, j] += ah + x
            dhu[i, j] += au + y
            dhv[i, j] += av + z
    for i in prange(nx):
        for j in range(ny):
            dhn[i, j] = 0.0
            dhun[i, j] = 0.0
            dhvn[i, j] = 0.0


def _setup_shallow_water(rng, n):
    s = (_side(n), _side(n))
    return [rng.uniform(1.0, 2.0, s), _signed(rng, s, 0.05, 0.3), _signed(rng, s, 0.05, 0.3),
            np.zeros(s), np.zeros(s), np.zeros(s), G, C_SW], s


def _hand_shallow_water(args, sh):
    h, hu, hv, hn, hun, hvn, g, c = args
    shallow_water_primal(h, hu, hv, hn, hun, hvn, g, c)
    shallow_water_adjoint(h, hu, hv, sh["h"], sh["hu"], sh["hv"], sh["hn"], sh["hun"], sh["hvn"], g, c)


def _bytes(*names_of):
    """traffic: each of the arrays at these argument positions, once."""
    return lambda args: sum(args[k].nbytes for k in names_of)


ROWS: list[Row] = [
    Row("upwind_1d", _setup_upwind_1d, _bytes(0, 1, 2), wrt=("u", "un", "vel"), hand=_hand_upwind_1d,
        hand_primal=alone(upwind_1d_primal)),
    Row("upwind_2d", _setup_upwind_2d, _bytes(0, 1, 2, 3), wrt=("u", "un", "vx", "vy"), hand=_hand_upwind_2d,
        hand_primal=alone(upwind_2d_primal)),
    Row("burgers_rusanov_1d", _setup_burgers, _bytes(0, 1), wrt=("u", "un"), hand=_hand_burgers,
        hand_primal=alone(burgers_primal)),
    Row("shallow_water_2d", _setup_shallow_water, _bytes(0, 1, 2, 3, 4, 5),
        wrt=("h", "hu", "hv", "hn", "hun", "hvn"), hand=_hand_shallow_water,
        hand_primal=alone(shallow_water_primal)),
]
KERNELS = {"upwind_1d": upwind_1d, "upwind_2d": upwind_2d, "burgers_rusanov_1d": burgers_rusanov_1d,
           "shallow_water_2d": shallow_water_2d}


def check_rows(n: int = 12 * 12, seed: int = 0) -> None:
    """Every row's hand-written primal + adjoint against gk.autodiff from identical inputs and seeds
    (primal outputs and shadows agree to rtol 1e-10, atol 1e-12 of the largest magnitude: the two
    evaluate the same formulas in different orders)."""
    for row in ROWS:
        rng = np.random.default_rng(seed)
        args, dim = row.setup(rng, n)
        kernel = KERNELS[row.name]
        params = [p.name for p in kernel.ir.params]
        seeds = {p: rng.uniform(-1, 1, a.shape) for p, a in zip(params, args) if p in row.wrt}
        mine = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        shadows = {p: s.copy() for p, s in seeds.items()}
        gk.autodiff(kernel, *(gk.Duplicated(a, shadows[p]) if p in shadows else gk.Const(a)
                              for p, a in zip(params, mine)), dim=dim)
        theirs = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        hand = {p: s.copy() for p, s in seeds.items()}
        row.hand(theirs, hand)
        for label, got, want in [*((p, g, w) for p, g, w in zip(params, mine, theirs) if isinstance(g, np.ndarray)),
                                 *((f"d{p}", shadows[p], hand[p]) for p in seeds)]:
            scale = max(float(np.max(np.abs(want))), 1e-300)
            if not np.allclose(got, want, rtol=1e-10, atol=1e-12 * scale):
                raise AssertionError(f"{row.name}: '{label}' differs between gradkern and hand-written "
                                     f"(max abs diff {np.max(np.abs(got - want)):.3e}, max abs {scale:.3e})")
        print(f"{row.name}: hand-written primal + adjoint == gk.autodiff")


if __name__ == "__main__":
    check_rows()
    sys.exit(0)
