"""Benchmark rows of gradkern.kernels.lattice (benchmarks/library/library_rows.py),
with a hand-written Numba primal and adjoint of the D2Q9 step.

The hand-written adjoint is what an expert writes for a pull-scheme step
(its adjoint is a push): a `prange` over rows computes each cell's
population adjoints dg_q (the BGK collision, the body force and the partial
bounce-back transposed) into a scratch array and zeroes dfn (fn is
write-only), then a second `prange` pulls them back upwind,
df_q(x) += dg_q(x + e_q), periodic. omega, gx and gy are Const.

    python benchmarks/library/library_lattice.py    # check_rows(): hand-written == gradkern on a small grid
"""

from __future__ import annotations

import numba
import numpy as np
from library_rows import Row
from numba import prange

import gradkern as gk
from gradkern.kernels import lattice

EX = np.array(lattice.EX, dtype=np.int64)
EY = np.array(lattice.EY, dtype=np.int64)
W = np.array(lattice.W)
OPP = np.array(lattice.OPP, dtype=np.int64)
OMEGA, GX, GY = 1.2, 1e-5, -2e-6


@numba.njit(parallel=True, fastmath=False)
def _step(f, fn, solid, omega, gx, gy, ex, ey, w, opp):
    nx, ny = f.shape[1], f.shape[2]
    for i in prange(nx):
        g = np.empty(9)
        for j in range(ny):
            rho = mx = my = 0.0
            for q in range(9):
                a = i - ex[q]
                b = j - ey[q]
                a = a + nx if a < 0 else (a - nx if a >= nx else a)
                b = b + ny if b < 0 else (b - ny if b >= ny else b)
                g[q] = f[q, a, b]
                rho += g[q]
                mx += ex[q] * g[q]
                my += ey[q] * g[q]
            ux, uy = mx / rho, my / rho
            usq = 1.5 * (ux * ux + uy * uy)
            s = solid[i, j]
            for q in range(9):
                cu = 3.0 * (ex[q] * ux + ey[q] * uy)
                feq = w[q] * rho * (1.0 + cu + 0.5 * cu * cu - usq)
                force = 3.0 * w[q] * rho * (ex[q] * gx + ey[q] * gy)
                fn[q, i, j] = (1.0 - s) * (g[q] + omega * (feq - g[q]) + force) + s * g[opp[q]]


@numba.njit(parallel=True, fastmath=False)
def _step_adjoint(f, solid, omega, gx, gy, df, dfn, dsolid, dg, ex, ey, w, opp):
    nx, ny = f.shape[1], f.shape[2]
    for i in prange(nx):
        g = np.empty(9)
        d = np.empty(9)
        for j in range(ny):
            rho = mx = my = 0.0
            for q in range(9):
                a = i - ex[q]
                b = j - ey[q]
                a = a + nx if a < 0 else (a - nx if a >= nx else a)
                b = b + ny if b < 0 else (b - ny if b >= ny else b)
                g[q] = f[q, a, b]
                rho += g[q]
                mx += ex[q] * g[q]
                my += ey[q] * g[q]
            ux, uy = mx / rho, my / rho
            usq = 1.5 * (ux * ux + uy * uy)
            s = solid[i, j]
            drho = dux = duy = ds = 0.0
            for q in range(9):
                d[q] = 0.0
            for q in range(9):
                cu = 3.0 * (ex[q] * ux + ey[q] * uy)
                poly = 1.0 + cu + 0.5 * cu * cu - usq
                feq = w[q] * rho * poly
                force = 3.0 * w[q] * rho * (ex[q] * gx + ey[q] * gy)
                seed = dfn[q, i, j]
                dfn[q, i, j] = 0.0
                ds += seed * (g[opp[q]] - (g[q] + omega * (feq - g[q]) + force))
                d[opp[q]] += s * seed
                dbgk = (1.0 - s) * seed
                d[q] += (1.0 - omega) * dbgk
                dfeq = omega * dbgk
                drho += dfeq * w[q] * poly + 3.0 * w[q] * (ex[q] * gx + ey[q] * gy) * dbgk
                # d feq / d u = w rho (3 e (1 + cu) - 3 u)
                c = dfeq * w[q] * rho * 3.0
                dux += c * (ex[q] * (1.0 + cu) - ux)
                duy += c * (ey[q] * (1.0 + cu) - uy)
            dsolid[i, j] += ds
            dmx, dmy = dux / rho, duy / rho
            drho -= (dux * ux + duy * uy) / rho
            for q in range(9):
                dg[q, i, j] = d[q] + drho + ex[q] * dmx + ey[q] * dmy
    for i in prange(nx):
        for q in range(9):
            a = i + ex[q]
            a = a + nx if a < 0 else (a - nx if a >= nx else a)
            for j in range(ny):
                b = j + ey[q]
                b = b + ny if b < 0 else (b - ny if b >= ny else b)
                df[q, i, j] += dg[q, a, b]


def _hand_step(args: list, shadows: dict) -> None:
    f, fn, solid, omega, gx, gy = args
    _step(f, fn, solid, omega, gx, gy, EX, EY, W, OPP)
    dg = np.empty_like(f)  # the adjoint's scratch: part of its cost
    _step_adjoint(f, solid, omega, gx, gy, shadows["f"], shadows["fn"], shadows["solid"], dg, EX, EY, W, OPP)


def _side(n: int) -> int:
    """The lattice side for about n population values (9 per cell)."""
    return max(4, int(np.sqrt(n / 9)))


def _populations(rng: np.random.Generator, nx: int, ny: int) -> np.ndarray:
    return W[:, None, None] * rng.uniform(0.9, 1.1, (9, nx, ny))


def _setup_step(rng: np.random.Generator, n: int):
    m = _side(n)
    return [_populations(rng, m, m), np.zeros((9, m, m)), rng.uniform(0.0, 0.5, (m, m)), OMEGA, GX, GY], (m, m)


def _setup_moments(rng: np.random.Generator, n: int):
    m = _side(n)
    return [_populations(rng, m, m), np.zeros((m, m)), np.zeros((m, m)), np.zeros((m, m))], (m, m)


def _setup_equilibrium(rng: np.random.Generator, n: int):
    m = _side(n)
    return [rng.uniform(0.9, 1.1, (m, m)), rng.uniform(-0.1, 0.1, (m, m)), rng.uniform(-0.1, 0.1, (m, m)),
            np.zeros((9, m, m))], (m, m)


def _bytes(*arrays: np.ndarray) -> int:
    return sum(a.nbytes for a in arrays)


ROWS: list[Row] = [
    Row("d2q9_step", _setup_step, lambda a: _bytes(a[0], a[1], a[2]), wrt=("f", "fn", "solid"), hand=_hand_step,
        hand_primal=lambda a: _step(*a, EX, EY, W, OPP)),
    Row("d2q9_moments", _setup_moments, lambda a: _bytes(*a[:4])),
    Row("d2q9_equilibrium", _setup_equilibrium, lambda a: _bytes(*a[:4])),
]


def check_rows(n: int = 9 * 7 * 6) -> None:
    """Hand-written primal + adjoint == gradkern's launch + autodiff (float64, rtol 1e-12: the same
    operations, the sums in other orders), from identical random inputs and seeds."""
    rng = np.random.default_rng(0)
    row = ROWS[0]
    args, dim = row.setup(rng, n)
    seeds = {name: rng.uniform(-1, 1, a.shape) for name, a in zip(("f", "fn", "solid"), args[:3])}
    mine = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    hand = {k: v.copy() for k, v in seeds.items()}
    row.hand(mine, hand)
    theirs = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    shadows = {k: v.copy() for k, v in seeds.items()}
    annotated = [gk.Duplicated(a, shadows[name]) if name in shadows else gk.Const(a)
                 for name, a in zip(("f", "fn", "solid", "omega", "gx", "gy"), theirs)]
    gk.autodiff(lattice.d2q9_step, *annotated, dim=dim)
    for x, y in zip(mine[:3], theirs[:3]):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-14)
    for name in shadows:
        np.testing.assert_allclose(hand[name], shadows[name], rtol=1e-12, atol=1e-14 * np.abs(shadows[name]).max(),
                                   err_msg=name)
    print(f"d2q9_step: hand-written primal and adjoint agree with gradkern on a {dim[0]}x{dim[1]} lattice")


if __name__ == "__main__":
    check_rows()
