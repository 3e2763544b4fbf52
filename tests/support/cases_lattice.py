"""Library cases (tests/support/library_cases.py) of gradkern.kernels.lattice. The
NumPy references stream with np.roll and collide on whole planes."""

import numpy as np

from gradkern.kernels import lattice
from support.library_cases import LibraryCase, rand, scalar

# D2Q9, written out here independently of the kernels' tables
E = np.array([[0, 0], [1, 0], [0, 1], [-1, 0], [0, -1], [1, 1], [-1, 1], [-1, -1], [1, -1]])
W = np.array([4 / 9] + [1 / 9] * 4 + [1 / 36] * 4)
OPPOSITE = [int(np.flatnonzero((E == -e).all(axis=1))[0]) for e in E]


def _equilibrium(rho, ux, uy):
    cu = 3.0 * (E[:, 0, None, None] * ux + E[:, 1, None, None] * uy)
    return W[:, None, None] * rho * (1.0 + cu + 0.5 * cu ** 2 - 1.5 * (ux ** 2 + uy ** 2))


def _step(f, fn, solid, omega, gx, gy):
    g = np.stack([np.roll(f[q], tuple(E[q]), axis=(0, 1)) for q in range(9)])  # g_q(x) = f_q(x - e_q)
    rho = g.sum(0)
    ux, uy = np.tensordot(E[:, 0], g, 1) / rho, np.tensordot(E[:, 1], g, 1) / rho
    force = 3.0 * W[:, None, None] * rho * (E[:, 0, None, None] * gx + E[:, 1, None, None] * gy)
    bgk = g + omega * (_equilibrium(rho, ux, uy) - g) + force
    return [f, (1.0 - solid) * bgk + solid * g[OPPOSITE], solid, omega, gx, gy]


def _moments(f, rho, ux, uy):
    rho = f.sum(0)
    return [f, rho, (f * E[:, 0, None, None]).sum(0) / rho, (f * E[:, 1, None, None]).sum(0) / rho]


def _populations(rng, dt, nx, ny):
    """Near an equilibrium at rest: w_q (1 + 0.2 noise), positive, ρ ≈ 1, |u| ≲ 0.1."""
    return (W[:, None, None] * rng.uniform(0.8, 1.2, (9, nx, ny))).astype(dt)


def _make_step(r, dt):
    return [_populations(r, dt, 5, 4), rand(r, (9, 5, 4), dt), rand(r, (5, 4), dt, 0.05, 0.95),
            scalar(r, 0.6, 1.8), scalar(r, -0.01, 0.01), scalar(r, -0.01, 0.01)]


CASES = {
    # float32: 9-term moments, a division, then ~10 operations per population; relative errors of the
    # moments reach u only through u = m/ρ (ρ ≈ 1): gain ≈ 4 (the default)
    "d2q9_step": LibraryCase(lattice.d2q9_step, _make_step, lambda a: a[0].shape[1:], _step, float32_terms=24),
    "d2q9_moments": LibraryCase(lattice.d2q9_moments,
                                lambda r, dt: [_populations(r, dt, 4, 3), *(rand(r, (4, 3), dt) for _ in range(3))],
                                lambda a: a[0].shape[1:], _moments, float32_terms=12),
    "d2q9_equilibrium": LibraryCase(lattice.d2q9_equilibrium,
                                    lambda r, dt: [rand(r, (4, 3), dt, 0.9, 1.1), rand(r, (4, 3), dt, -0.1, 0.1),
                                                   rand(r, (4, 3), dt, -0.1, 0.1), rand(r, (9, 4, 3), dt)],
                                    lambda a: a[0].shape,
                                    lambda rho, ux, uy, f: [rho, ux, uy, _equilibrium(rho, ux, uy)],
                                    float32_terms=10),
}
