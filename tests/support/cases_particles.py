"""Library cases (tests/support/library_cases.py) of gradkern.kernels.particles: dense
pairwise differences for the n-body forces, np.add.at for the deposit."""

import numpy as np

from gradkern.kernels import particles
from support.library_cases import LibraryCase, rand, scalar


def _nbody(pos, mass, force, eps2):
    d = pos[None, :, :] - pos[:, None, :]  # d[i, j] = x_j - x_i
    r2 = (d ** 2).sum(2) + eps2
    return [pos, mass, mass[:, None] * np.einsum("ijk,ij->ik", d, mass[None, :] / r2 ** 1.5), eps2]


def _leapfrog(pos, vel, force, mass, dt):
    vel = vel + dt * force / mass[:, None]
    return [pos + dt * vel, vel, force, mass, dt]


def _cic(pos, charge, rho, h):
    nx, ny = rho.shape
    s = pos / h
    cell = np.floor(s).astype(int)
    w = s - cell
    rho = rho.copy()
    for dx in (0, 1):
        for dy in (0, 1):
            weight = (w[:, 0] if dx else 1 - w[:, 0]) * (w[:, 1] if dy else 1 - w[:, 1])
            np.add.at(rho, ((cell[:, 0] + dx) % nx, (cell[:, 1] + dy) % ny), charge * weight / h ** 2)
    return [pos, charge, rho, h]


def _make_cic(r, dt):
    """12 particles in 3 cells of a 4 x 5 grid (several per cell), one cell on each wrapping edge,
    each particle 0.2..0.8 of a cell from its cell's corner (away from the kinks at grid lines)."""
    h = scalar(r, 0.5, 1.5)
    cells = np.array([[1, 2], [3, 4], [0, 1]])[r.integers(0, 3, 12)]
    pos = ((cells + r.uniform(0.2, 0.8, (12, 2))) * h).astype(dt)
    return [pos, rand(r, 12, dt, 0.5, 1.5), rand(r, (4, 5), dt), h]


def _repeated_cells(args):
    cells = np.floor(args[0] / args[3]).astype(int)
    return len({tuple(c) for c in cells}) < len(cells)


CASES = {
    # float32: 10 pairs of ~12 operations each; positions 0..1 apart and ε² ≥ 0.05, so x_j − x_i loses at most
    # log2(1/0.05) bits where particles are close and 1/r³ amplifies by ≤ 3: gain 3 · 4
    "nbody_forces": LibraryCase(particles.nbody_forces,
                                lambda r, dt: [rand(r, (10, 3), dt, 0.0, 1.0), rand(r, 10, dt, 0.5, 1.5),
                                               rand(r, (10, 3), dt), scalar(r, 0.05, 0.1)],
                                lambda a: a[0].shape[0], _nbody, float32_terms=10 * 12, float32_gain=12.0),
    "leapfrog": LibraryCase(particles.leapfrog,
                            lambda r, dt: [rand(r, (8, 3), dt), rand(r, (8, 3), dt), rand(r, (8, 3), dt),
                                           rand(r, 8, dt, 0.5, 1.5), scalar(r, 0.01, 0.1)],
                            lambda a: a[0].shape[0], _leapfrog, float32_terms=5),
    "cic_deposit": LibraryCase(particles.cic_deposit, _make_cic, lambda a: a[0].shape[0], _cic,
                               float32_terms=12 * 4, accumulates=("rho",), repeated=_repeated_cells),
}
