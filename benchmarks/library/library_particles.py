"""Benchmark rows of gradkern.kernels.particles (benchmarks/library/library_rows.py).

n-body forces are compute-bound (O(n²) pairs on n particles): traffic 0,
reported in time only, at √n particles for the driver's n (2048 for
n = 2²²), with a hand-written Numba primal + adjoint (one thread per
particle, no atomics: it pulls each pair's adjoint from both ends; force
is differentiated too, so that its seeded shadow drives the gradient).
The leapfrog push streams its arrays (n/3 particles: about n values per
(n, 3) array); the cloud-in-cell deposit puts n/4 particles on a
periodic grid of about n/4 nodes by atomic adds.

    python benchmarks/library/library_particles.py  # check_rows(): hand-written == gradkern, and differences"""

from __future__ import annotations

import math
import sys

import numba
import numpy as np
from library_rows import Row, alone
from numba import prange
from rowcheck import check_against_hand


def _setup_nbody(rng: np.random.Generator, n: int):
    m = max(8, int(np.sqrt(n)))
    return [rng.uniform(0.0, 1.0, (m, 3)), rng.uniform(0.5, 1.5, m), np.zeros((m, 3)), 1e-2], m


@numba.njit(parallel=True, fastmath=False)
def nbody_primal(pos, mass, force, eps2):
    for i in prange(pos.shape[0]):
        ax = ay = az = 0.0
        for j in range(pos.shape[0]):
            dx, dy, dz = pos[j, 0] - pos[i, 0], pos[j, 1] - pos[i, 1], pos[j, 2] - pos[i, 2]
            r2 = dx * dx + dy * dy + dz * dz + eps2
            q = mass[j] / (r2 * math.sqrt(r2))
            ax, ay, az = ax + dx * q, ay + dy * q, az + dz * q
        force[i, 0], force[i, 1], force[i, 2] = ax * mass[i], ay * mass[i], az * mass[i]


@numba.njit(parallel=True, fastmath=False)
def nbody_adjoint(pos, mass, dpos, dmass, dforce, eps2):
    """F_i = m_i sum_j m_j d w with d = x_j - x_i, w = r2^(-3/2): with a_i = m_i dF_i, the pair (i, j) sends
    e = m_j w a_i - 3 m_j w (a_i.d) / r2 d to dx_j and -e to dx_i, w (a_i.d) to dm_j; dm_i gets dF_i.F_i / m_i.
    Thread p pulls both ends of its pairs (p as i, and as j of every i, where d changes sign), so it writes
    only dpos[p] and dmass[p]. Then dF = 0."""
    n = pos.shape[0]
    a = np.empty((n, 3))
    for k in prange(n):
        for c in range(3):
            a[k, c] = mass[k] * dforce[k, c]
    for p in prange(n):
        gx = gy = gz = gm = ax = ay = az = 0.0
        for k in range(n):
            dx, dy, dz = pos[k, 0] - pos[p, 0], pos[k, 1] - pos[p, 1], pos[k, 2] - pos[p, 2]
            r2 = dx * dx + dy * dy + dz * dz + eps2
            s = math.sqrt(r2)
            w = 1.0 / (r2 * s)
            v = 3.0 * w * s  # 3 / r2
            ad = a[p, 0] * dx + a[p, 1] * dy + a[p, 2] * dz  # p as i, k as j
            bd = a[k, 0] * dx + a[k, 1] * dy + a[k, 2] * dz  # k as i, p as j: d is -d
            qk, qp = mass[k] * w, mass[p] * w
            gx += qp * a[k, 0] - qk * a[p, 0] + (qk * ad - qp * bd) * v * dx
            gy += qp * a[k, 1] - qk * a[p, 1] + (qk * ad - qp * bd) * v * dy
            gz += qp * a[k, 2] - qk * a[p, 2] + (qk * ad - qp * bd) * v * dz
            gm -= w * bd
            ax, ay, az = ax + dx * qk, ay + dy * qk, az + dz * qk
        dpos[p, 0] += gx
        dpos[p, 1] += gy
        dpos[p, 2] += gz
        dmass[p] += gm + dforce[p, 0] * ax + dforce[p, 1] * ay + dforce[p, 2] * az
    for k in prange(n):
        for c in range(3):
            dforce[k, c] = 0.0


def _hand_nbody(args, sh):
    pos, mass, force, eps2 = args
    nbody_primal(pos, mass, force, eps2)
    nbody_adjoint(pos, mass, sh["pos"], sh["mass"], sh["force"], eps2)


def _setup_leapfrog(rng: np.random.Generator, n: int):
    m = max(8, n // 3)
    return [rng.uniform(-1, 1, (m, 3)), rng.uniform(-1, 1, (m, 3)), rng.uniform(-1, 1, (m, 3)),
            rng.uniform(0.5, 1.5, m), 1e-2], m


def _setup_cic(rng: np.random.Generator, n: int):
    side = max(4, int(np.sqrt(n / 4)))
    m = max(8, n // 4)
    h = 1.0 / side
    return [rng.uniform(0.0, 1.0, (m, 2)) * (1.0 - 1e-9), rng.uniform(0.5, 1.5, m), np.zeros((side, side)), h], m


def _bytes(*arrays: np.ndarray) -> int:
    return sum(a.nbytes for a in arrays)


ROWS: list[Row] = [
    Row("nbody_forces", _setup_nbody, lambda a: 0, wrt=("pos", "mass", "force"), hand=_hand_nbody,
        hand_primal=alone(nbody_primal)),
    # pos and vel are read and written, force and mass read
    Row("leapfrog", _setup_leapfrog, lambda a: 2 * _bytes(a[0], a[1]) + _bytes(a[2], a[3])),
    Row("cic_deposit", _setup_cic, lambda a: _bytes(a[0], a[1]) + 2 * a[2].nbytes, wrt=("pos", "charge")),
]


def check_rows(n: int = 12 * 12, seed: int = 1) -> None:
    """nbody_forces' hand-written primal + adjoint against gk.autodiff (rowcheck, rtol 1e-9) and against central
    differences of L = sum(dF * F) in 6 coordinates and masses (h = 1e-6, rtol 1e-6)."""
    row = ROWS[0]
    check_against_hand(row, n)
    rng = np.random.default_rng(seed)
    (pos, mass, force, eps2), m = row.setup(rng, n)
    seed_f = rng.uniform(-1, 1, force.shape)

    def loss(p, q):
        f = np.zeros_like(force)
        nbody_primal(p, q, f, eps2)
        return float((seed_f * f).sum())

    sh = {"pos": np.zeros_like(pos), "mass": np.zeros_like(mass), "force": seed_f.copy()}
    _hand_nbody([pos, mass, force, eps2], sh)
    h = 1e-6
    for _ in range(6):
        i, c = int(rng.integers(m)), int(rng.integers(3))
        e = np.zeros_like(pos)
        e[i, c] = h
        fd = (loss(pos + e, mass) - loss(pos - e, mass)) / (2 * h)
        assert abs(fd - sh["pos"][i, c]) <= 1e-6 * max(1.0, abs(fd)), (i, c, fd, sh["pos"][i, c])
        u = np.zeros_like(mass)
        u[i] = h
        fd = (loss(pos, mass + u) - loss(pos, mass - u)) / (2 * h)
        assert abs(fd - sh["mass"][i]) <= 1e-6 * max(1.0, abs(fd)), (i, fd, sh["mass"][i])
    print("nbody_forces: hand-written primal + adjoint == gk.autodiff and central differences")


if __name__ == "__main__":
    check_rows()
    sys.exit(0)
