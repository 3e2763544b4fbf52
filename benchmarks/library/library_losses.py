"""Rows of benchmarks/library/library.py for gradkern.kernels.losses (no hand-written
adjoints). Every loss accumulates into out[0] by atomic adds; the misfits read
u at sorted random sensor indices (repeats allowed), one sensor per point.
`python benchmarks/library/library_losses.py` runs check_rows(): gk.autodiff of each
row against its gradient written in NumPy, on small inputs."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (benchpath.py)
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path
from library_rows import Row  # noqa: E402
from rowcheck import autodiff, close, params, seeded_shadows  # noqa: E402


def _side(n: int) -> int:
    return max(2, int(round(np.sqrt(n))))


def _sum_squares_setup(rng, n):
    return [rng.uniform(-1.0, 1.0, n), np.zeros(1)], n


def _sum_squares_2d_setup(rng, n):
    m = _side(n)
    return [rng.uniform(-1.0, 1.0, (m, m)), np.zeros(1)], (m, m)


def _l2_misfit_setup(rng, n):
    sensors = np.sort(rng.integers(0, n, n))
    return [rng.uniform(-1.0, 1.0, n), sensors, rng.uniform(-1.0, 1.0, n), np.zeros(1)], n


def _l2_misfit_2d_setup(rng, n):
    m = _side(n)
    flat = np.sort(rng.integers(0, m * m, m * m))
    return [rng.uniform(-1.0, 1.0, (m, m)), flat // m, flat % m, rng.uniform(-1.0, 1.0, m * m), np.zeros(1)], m * m


ROWS = [
    Row("sum_squares", _sum_squares_setup, lambda a: a[0].nbytes),
    Row("sum_squares_2d", _sum_squares_2d_setup, lambda a: a[0].nbytes),
    # the sensor indices, the observations and the value of u at each sensor
    Row("l2_misfit", _l2_misfit_setup, lambda a: a[1].nbytes + 2 * a[2].nbytes),
    Row("l2_misfit_2d", _l2_misfit_2d_setup, lambda a: a[1].nbytes + a[2].nbytes + 2 * a[3].nbytes),
]


def _numpy_gradient(name: str, args: list, shadows: dict) -> tuple[float, dict]:
    """out[0]'s value after the launch and the shadows after the gradient, from the closed forms:
    d(Σx²) = 2x, d(½Σ r²) = r (r = u[sensors] − obs); out is updated in place, so its shadow is unchanged."""
    want = {k: v.copy() for k, v in shadows.items()}
    g = shadows["out"][0]
    if name.startswith("sum_squares"):
        x = args[0]
        want["x"] += 2.0 * x * g
        return args[-1][0] + np.sum(x * x), want
    u, *sites, obs, out = args
    r = u[tuple(sites)] - obs
    np.add.at(want["u"], tuple(sites), r * g)  # a repeated sensor sends back once per occurrence
    want["obs"] -= r * g
    return out[0] + 0.5 * np.sum(r * r), want


def check_rows() -> None:
    for row in ROWS:
        rng = np.random.default_rng(0)
        args, dim = row.setup(rng, 300)
        shadows = seeded_shadows(row, args, rng)
        assert sorted(shadows) == sorted(p for p in params(row) if p not in ("sensors", "rows", "cols"))
        value, want = _numpy_gradient(row.name, [a.copy() for a in args], shadows)
        autodiff(row, args, shadows, dim)
        assert close(args[-1][:1], np.array([value])), f"{row.name}: the loss's value"
        for name in shadows:
            assert close(shadows[name], want[name]), f"{row.name}: the shadow of '{name}'"
        print(f"{row.name}: gk.autodiff agrees with the NumPy gradient")


if __name__ == "__main__":
    check_rows()
