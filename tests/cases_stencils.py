"""Library cases (tests/library_cases.py) of gradkern.kernels.stencils."""

import numpy as np
from library_cases import LibraryCase, rand, scalar

from gradkern.kernels import stencils


def _allen_cahn_step(u, un, c, dt):
    un = u.copy()  # Dirichlet ends kept
    ui = u[1:-1]
    un[1:-1] = ui + c * (u[:-2] - 2.0 * ui + u[2:]) + dt * (ui - ui ** 3)
    return [u, un, c, dt]


def _laplace_2d(u, out):
    out = np.zeros_like(u)
    out[1:-1, 1:-1] = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1]
    return [u, out]


def _heat_step_2d(u, un, c):
    un = u.copy()  # edges kept
    un[1:-1, 1:-1] += c * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1])
    return [u, un, c]


CASES = {
    "allen_cahn_step": LibraryCase(stencils.allen_cahn_step,
                                   lambda r, dt: [rand(r, 9, dt), rand(r, 9, dt), scalar(r, 0.2, 0.4),
                                                  scalar(r, 0.01, 0.1)],
                                   lambda a: a[0].shape[0], _allen_cahn_step, float32_terms=10),
    "laplace_2d": LibraryCase(stencils.laplace_2d, lambda r, dt: [rand(r, (5, 6), dt), rand(r, (5, 6), dt)],
                              lambda a: a[0].shape, _laplace_2d, float32_terms=6),
    "heat_step_2d": LibraryCase(stencils.heat_step_2d,
                                lambda r, dt: [rand(r, (5, 6), dt), rand(r, (5, 6), dt), scalar(r, 0.1, 0.25)],
                                lambda a: a[0].shape, _heat_step_2d, float32_terms=8),
}
