"""Library cases (tests/support/library_cases.py) of gradkern.kernels.transport.

References: whole-array NumPy with np.roll for the periodic neighbours (np.roll(a, 1)[i] = a[i-1]),
each face flux computed once per face and differenced, not the kernels' per-cell loops.

Kinks: max(v, 0), max(|a_L|, |a_R|) and |u| are not differentiable at 0 and at ties; the random inputs
keep velocities at least 0.2 (upwind, Burgers: 0.3) from 0 with random signs and depths in [1, 2], so
check_grad's difference step (1e-6) never crosses a kink except with probability ~1e-6 per face pair
(a tie of two uniform random wave speeds within 1e-6)."""

import numpy as np

from gradkern.kernels import transport
from support.library_cases import LibraryCase, rand, scalar


def _signed(r, shape, dtype, lo, hi):
    """Magnitudes in [lo, hi), random signs: away from 0."""
    return (r.uniform(lo, hi, shape) * r.choice([-1.0, 1.0], shape)).astype(dtype)


def _upwind_flux(v, behind, ahead):
    """The upwind flux through a face with velocity v between cells `behind` and `ahead`."""
    return np.maximum(v, 0.0) * behind + np.minimum(v, 0.0) * ahead


def _upwind_1d(u, un, vel, c):
    f_left = _upwind_flux(vel, np.roll(u, 1), u)  # face i-1/2
    un = u - c * (np.roll(f_left, -1) - f_left)
    return [u, un, vel, c]


def _upwind_2d(u, un, vx, vy, c):
    fw = _upwind_flux(vx, np.roll(u, 1, axis=0), u)
    gs = _upwind_flux(vy, np.roll(u, 1, axis=1), u)
    un = u - c * (np.roll(fw, -1, axis=0) - fw + np.roll(gs, -1, axis=1) - gs)
    return [u, un, vx, vy, c]


def _rusanov(fl, fr, ql, qr, a):
    return 0.5 * (fl + fr) - 0.5 * a * (qr - ql)


def _burgers_rusanov_1d(u, un, c):
    ur = np.roll(u, -1)
    f_right = _rusanov(0.5 * u**2, 0.5 * ur**2, u, ur, np.maximum(np.abs(u), np.abs(ur)))  # face i+1/2
    un = u - c * (f_right - np.roll(f_right, 1))
    return [u, un, c]


def _shallow_water_2d(h, hu, hv, hn, hun, hvn, g, c):
    q = np.stack([h, hu, hv])
    u, v = hu / h, hv / h
    speed = np.sqrt(g * h)
    flux_x = np.stack([hu, hu * u + 0.5 * g * h**2, hv * u])
    flux_y = np.stack([hv, hu * v, hv * v + 0.5 * g * h**2])
    new = q.copy()
    for axis, flux, normal in ((0, flux_x, u), (1, flux_y, v)):  # grid axis (q's axis + 1: 0 is the component)
        s = np.abs(normal) + speed
        a = np.maximum(s, np.roll(s, -1, axis=axis))
        # the face between each cell and the next along axis
        face = _rusanov(flux, np.roll(flux, -1, axis=axis + 1), q, np.roll(q, -1, axis=axis + 1), a)
        new -= c * (face - np.roll(face, 1, axis=axis + 1))
    return [h, hu, hv, new[0], new[1], new[2], g, c]


def _sw_state(r, shape, dt):
    return [rand(r, shape, dt, 1.0, 2.0), _signed(r, shape, dt, 0.05, 0.3), _signed(r, shape, dt, 0.05, 0.3)]


CASES = {
    "upwind_1d": LibraryCase(transport.upwind_1d,
                             lambda r, dt: [rand(r, 11, dt, 0.5, 1.5), rand(r, 11, dt), _signed(r, 11, dt, 0.2, 1.0),
                                            scalar(r, 0.2, 0.5)],
                             lambda a: a[0].shape[0], _upwind_1d, float32_terms=8),
    "upwind_2d": LibraryCase(transport.upwind_2d,
                             lambda r, dt: [rand(r, (5, 6), dt, 0.5, 1.5), rand(r, (5, 6), dt),
                                            _signed(r, (5, 6), dt, 0.2, 1.0), _signed(r, (5, 6), dt, 0.2, 1.0),
                                            scalar(r, 0.1, 0.25)],
                             lambda a: a[0].shape, _upwind_2d, float32_terms=12),
    "burgers_rusanov_1d": LibraryCase(transport.burgers_rusanov_1d,
                                      lambda r, dt: [_signed(r, 11, dt, 0.3, 1.2), rand(r, 11, dt),
                                                     scalar(r, 0.2, 0.4)],
                                      lambda a: a[0].shape[0], _burgers_rusanov_1d, float32_terms=12),
    # g ~ 9.81 with depths in [1, 2]: wave speeds ~3-4.5, so c <= 0.1 keeps c (|u| + |v| + 2 sqrt(g h)) < 1
    "shallow_water_2d": LibraryCase(transport.shallow_water_2d,
                                    lambda r, dt: [*_sw_state(r, (5, 6), dt), *(rand(r, (5, 6), dt) for _ in range(3)),
                                                   scalar(r, 9.0, 10.0), scalar(r, 0.05, 0.1)],
                                    lambda a: a[0].shape, _shallow_water_2d, float32_terms=24),
}
