"""Library cases (tests/support/library_cases.py) of gradkern.kernels.losses. Every loss accumulates into out[0]
by atomic adds; the misfit cases repeat a sensor."""

import numpy as np

from gradkern.kernels import losses
from support.library_cases import LibraryCase, rand


def _sum_squares(x, out):
    out = out.copy()
    out[0] += np.sum(x * x)
    return [x, out]


def _l2_misfit(u, sensors, obs, out):
    out = out.copy()
    out[0] += 0.5 * np.sum((u[sensors] - obs) ** 2)
    return [u, sensors, obs, out]


def _l2_misfit_2d(u, rows, cols, obs, out):
    out = out.copy()
    out[0] += 0.5 * np.sum((u[rows, cols] - obs) ** 2)
    return [u, rows, cols, obs, out]


def _sensors(r, n, m):
    """m sensor indices into n points, the first repeated at the end."""
    idx = r.integers(0, n, m)
    idx[-1] = idx[0]
    return idx.astype(np.int64)


def _sensor_sites(r, shape, m):
    """(rows, cols) of m sensors, the first site repeated at the end."""
    return _sensors(r, shape[0], m), _sensors(r, shape[1], m)


def _l2_misfit_2d_args(r, dt):
    rows, cols = _sensor_sites(r, (5, 6), 7)
    return [rand(r, (5, 6), dt), rows, cols, rand(r, 7, dt), rand(r, 1, dt)]


def _repeated_site(rows, cols):
    return len(set(zip(rows.tolist(), cols.tolist()))) < len(rows)


CASES = {
    # every thread adds into out[0]: the index repeats n times
    "sum_squares": LibraryCase(losses.sum_squares, lambda r, dt: [rand(r, 9, dt), rand(r, 1, dt)],
                               lambda a: a[0].shape[0], _sum_squares, float32_terms=2 * 10,
                               accumulates=("out",), repeated=lambda a: a[0].shape[0] > 1),
    "sum_squares_2d": LibraryCase(losses.sum_squares_2d, lambda r, dt: [rand(r, (4, 5), dt), rand(r, 1, dt)],
                                  lambda a: a[0].shape, _sum_squares, float32_terms=2 * 21,
                                  accumulates=("out",), repeated=lambda a: a[0].size > 1),
    "l2_misfit": LibraryCase(losses.l2_misfit,
                             lambda r, dt: [rand(r, 8, dt), _sensors(r, 8, 6), rand(r, 6, dt), rand(r, 1, dt)],
                             lambda a: a[1].shape[0], _l2_misfit, float32_terms=3 * 7, accumulates=("out",),
                             repeated=lambda a: len(set(a[1].tolist())) < len(a[1])),
    "l2_misfit_2d": LibraryCase(losses.l2_misfit_2d, _l2_misfit_2d_args, lambda a: a[1].shape[0], _l2_misfit_2d,
                                float32_terms=3 * 8, accumulates=("out",),
                                repeated=lambda a: _repeated_site(a[1], a[2])),
}
