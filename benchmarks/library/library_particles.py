"""Benchmark rows of gradkern.kernels.particles (benchmarks/library/library_rows.py).

n-body forces are compute-bound (O(n²) pairs on n particles): traffic 0,
reported in time only, at √n particles for the driver's n (2048 for
n = 2²²). The leapfrog push streams its arrays (n/3 particles: about n
values per (n, 3) array); the cloud-in-cell deposit puts n/4 particles on a
periodic grid of about n/4 nodes by atomic adds."""

from __future__ import annotations

import numpy as np
from library_rows import Row


def _setup_nbody(rng: np.random.Generator, n: int):
    m = max(8, int(np.sqrt(n)))
    return [rng.uniform(0.0, 1.0, (m, 3)), rng.uniform(0.5, 1.5, m), np.zeros((m, 3)), 1e-2], m


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
    Row("nbody_forces", _setup_nbody, lambda a: 0, wrt=("pos", "mass")),
    # pos and vel are read and written, force and mass read
    Row("leapfrog", _setup_leapfrog, lambda a: 2 * _bytes(a[0], a[1]) + _bytes(a[2], a[3])),
    Row("cic_deposit", _setup_cic, lambda a: _bytes(a[0], a[1]) + 2 * a[2].nbytes, wrt=("pos", "charge")),
]
