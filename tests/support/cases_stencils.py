"""Library cases (tests/support/library_cases.py) of gradkern.kernels.stencils."""

import numpy as np

from gradkern.kernels import stencils
from support.library_cases import LibraryCase, rand, scalar


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


def _heat_step_1d(u, un, c):
    un = u.copy()  # Dirichlet ends kept
    un[1:-1] += c * (u[:-2] - 2.0 * u[1:-1] + u[2:])
    return [u, un, c]


def _heat_step_3d(u, un, c):
    un = u.copy()  # faces kept
    m = (slice(1, -1),) * 3
    faces = sum(np.roll(u, s, axis)[m] for axis in range(3) for s in (1, -1))
    un[m] += c * (faces - 6.0 * u[m])
    return [u, un, c]


def _laplace9_2d(u, out):
    # the stencil as a 3x3 weight matrix applied by shifted slices: weights 4 on faces, 1 on corners, -20 centre
    w = np.array([[1.0, 4.0, 1.0], [4.0, -20.0, 4.0], [1.0, 4.0, 1.0]]) / 6.0
    nx, ny = u.shape
    out = np.zeros_like(u)
    out[1:-1, 1:-1] = sum(w[a, b] * u[a:nx - 2 + a, b:ny - 2 + b] for a in range(3) for b in range(3))
    return [u, out]


def _lap5(u):
    return u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1]


def _wave_step_2d(u_prev, u, u_next, vel, c):
    u_next = np.zeros_like(u)  # rigid edges
    u_next[1:-1, 1:-1] = 2.0 * u[1:-1, 1:-1] - u_prev[1:-1, 1:-1] + c * vel[1:-1, 1:-1] ** 2 * _lap5(u)
    return [u_prev, u, u_next, vel, c]


def _add_source(u, i, j, amp):
    u = u.copy()
    u[i, j] += amp
    return [u, i, j, amp]


def _allen_cahn_step_2d(u, un, c, dt):
    un = u.copy()  # edges kept
    ui = u[1:-1, 1:-1]
    un[1:-1, 1:-1] = ui + c * _lap5(u) + dt * (ui - ui ** 3)
    return [u, un, c, dt]


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
    "heat_step_1d": LibraryCase(stencils.heat_step_1d,
                                lambda r, dt: [rand(r, 9, dt), rand(r, 9, dt), scalar(r, 0.1, 0.5)],
                                lambda a: a[0].shape[0], _heat_step_1d, float32_terms=6),
    "heat_step_3d": LibraryCase(stencils.heat_step_3d,
                                lambda r, dt: [rand(r, (4, 5, 4), dt), rand(r, (4, 5, 4), dt), scalar(r, 0.05, 1 / 6)],
                                lambda a: a[0].shape, _heat_step_3d, float32_terms=10),
    "laplace9_2d": LibraryCase(stencils.laplace9_2d, lambda r, dt: [rand(r, (5, 6), dt), rand(r, (5, 6), dt)],
                               lambda a: a[0].shape, _laplace9_2d, float32_terms=12),
    # c v^2 <= 0.2 * 1.2^2 < 1/2: a stable leapfrog step
    "wave_step_2d": LibraryCase(stencils.wave_step_2d,
                                lambda r, dt: [rand(r, (5, 6), dt), rand(r, (5, 6), dt), rand(r, (5, 6), dt),
                                               rand(r, (5, 6), dt, 0.6, 1.2), scalar(r, 0.1, 0.2)],
                                lambda a: a[0].shape, _wave_step_2d, float32_terms=10),
    "add_source": LibraryCase(stencils.add_source,
                              lambda r, dt: [rand(r, (5, 6), dt), int(r.integers(0, 5)), int(r.integers(0, 6)),
                                             scalar(r, 0.5, 1.5)],
                              lambda a: 1, _add_source, float32_terms=1),
    "allen_cahn_step_2d": LibraryCase(stencils.allen_cahn_step_2d,
                                      lambda r, dt: [rand(r, (5, 6), dt), rand(r, (5, 6), dt), scalar(r, 0.1, 0.25),
                                                     scalar(r, 0.01, 0.1)],
                                      lambda a: a[0].shape, _allen_cahn_step_2d, float32_terms=12),
}
