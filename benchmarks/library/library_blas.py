"""Rows of benchmarks/library/library.py for gradkern.kernels.blas (no hand-written
adjoints: BLAS levels 1 and 2 are streaming kernels whose gradient cost is
judged against the primal alone).

Sizes: the level-1 kernels (axpy, scal, dot) run over n elements; the level-2
ones (matvec, gemv, gemv_t, ger) over a square m x m matrix with m = isqrt(n),
so the driver's n = 2**22 gives 2048 x 2048. Traffic counts each array the
primal reads once and each it writes once (an array updated in place twice).
Scalars (a, alpha, beta) are Active. `python benchmarks/library/library_blas.py` runs
check_rows(): every row's gk.autodiff against the gradient written out in
NumPy (closed forms, below)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (benchpath.py)
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path
from library_rows import Row  # noqa: E402

import gradkern as gk  # noqa: E402
from gradkern.kernels import blas  # noqa: E402


def _vec(rng, n):
    return rng.uniform(-1.0, 1.0, n)


def _side(n: int) -> int:
    return max(math.isqrt(n), 2)


def _setup_axpy(rng, n):
    return [1.5, _vec(rng, n), _vec(rng, n)], n


def _setup_scal(rng, n):
    return [0.9, _vec(rng, n)], n


def _setup_dot(rng, n):
    return [_vec(rng, n), _vec(rng, n), np.zeros(1)], n


def _setup_matvec(rng, n):
    m = _side(n)
    return [rng.uniform(-1.0, 1.0, (m, m)), _vec(rng, m), _vec(rng, m)], m


def _setup_gemv(rng, n):
    m = _side(n)
    return [1.2, rng.uniform(-1.0, 1.0, (m, m)), _vec(rng, m), 0.8, _vec(rng, m)], m


def _setup_ger(rng, n):
    m = _side(n)
    return [0.7, _vec(rng, m), _vec(rng, m), rng.uniform(-1.0, 1.0, (m, m))], (m, m)


def _nbytes(*reads_writes: int):
    """Traffic: the arrays (by argument position) the primal reads or writes, each position once per listing."""
    return lambda args: sum(args[p].nbytes for p in reads_writes)


ROWS: list[Row] = [
    Row("axpy", _setup_axpy, _nbytes(1, 2, 2)),  # x read, y read and written
    Row("scal", _setup_scal, _nbytes(1, 1)),
    Row("dot", _setup_dot, _nbytes(0, 1)),
    Row("matvec", _setup_matvec, _nbytes(0, 1, 2)),
    Row("gemv", _setup_gemv, _nbytes(1, 2, 4, 4)),
    Row("gemv_t", _setup_gemv, _nbytes(1, 2, 4, 4)),
    Row("ger", _setup_ger, _nbytes(1, 2, 3, 3)),
]


def _numpy_gradient(name: str, args: list, seeds: dict) -> tuple[list, dict, dict]:
    """The primal outputs, the shadows after the reverse (§2: in-place arrays' shadows transformed,
    write-only ones zeroed, read ones accumulated into) and the Active derivatives, in NumPy."""
    s = {k: v.copy() for k, v in seeds.items()}
    if name == "axpy":
        a, x, y = args
        return [a, x, a * x + y], {"x": s["x"] + a * s["y"], "y": s["y"]}, {"a": x @ s["y"]}
    if name == "scal":
        a, x = args
        return [a, a * x], {"x": a * s["x"]}, {"a": x @ s["x"]}
    if name == "dot":
        x, y, out = args
        g = s["out"][0]
        return [x, y, out + x @ y], {"x": s["x"] + g * y, "y": s["y"] + g * x, "out": s["out"]}, {}
    if name == "matvec":
        A, x, y = args
        return [A, x, A @ x], {"A": s["A"] + np.outer(s["y"], x), "x": s["x"] + A.T @ s["y"],
                               "y": np.zeros_like(y)}, {}
    if name in ("gemv", "gemv_t"):
        alpha, A, x, beta, y = args
        M = A if name == "gemv" else A.T
        dy = s["y"]
        dA = alpha * np.outer(dy, x) if name == "gemv" else alpha * np.outer(x, dy)
        return ([alpha, A, x, beta, alpha * (M @ x) + beta * y],
                {"A": s["A"] + dA, "x": s["x"] + alpha * (M.T @ dy), "y": beta * dy},
                {"alpha": dy @ (M @ x), "beta": dy @ y})
    if name == "ger":
        alpha, x, y, A = args
        dA = s["A"]
        return ([alpha, x, y, A + alpha * np.outer(x, y)],
                {"x": s["x"] + alpha * (dA @ y), "y": s["y"] + alpha * (dA.T @ x), "A": dA}, {"alpha": x @ dA @ y})
    raise KeyError(name)


def check_rows(n: int = 24 * 24, seed: int = 0) -> None:
    """Every row's gk.autodiff (Duplicated shadows seeded uniform in [-1, 1), Active scalars) against
    its gradient written out in NumPy: primal outputs, shadows and Active derivatives agree to rtol
    1e-10, atol 1e-12 of the largest magnitude (the same sums in different orders)."""
    for row in ROWS:
        rng = np.random.default_rng(seed)
        args, dim = row.setup(rng, n)
        kernel = getattr(blas, row.name)
        params = [p.name for p in kernel.ir.params]
        seeds = {p: rng.uniform(-1.0, 1.0, a.shape) for p, a in zip(params, args) if isinstance(a, np.ndarray)}
        want_args, want_shadows, want_active = _numpy_gradient(row.name, [a.copy() if isinstance(a, np.ndarray)
                                                                          else a for a in args], seeds)
        shadows = {p: v.copy() for p, v in seeds.items()}
        annotated = [gk.Duplicated(a, shadows[p]) if p in shadows else gk.Active(a) for p, a in zip(params, args)]
        got_active = gk.autodiff(kernel, *annotated, dim=dim)
        assert {p for p, g in zip(params, got_active) if g is not None} == set(want_active), row.name
        pairs = [(f"primal '{p}'", g, w) for p, g, w in zip(params, args, want_args) if isinstance(g, np.ndarray)]
        pairs += [(f"shadow of '{p}'", shadows[p], want_shadows[p]) for p in shadows]
        pairs += [(f"derivative of '{p}'", np.array(g), np.array(want_active[p]))
                  for p, g in zip(params, got_active) if g is not None]
        for what, got, want in pairs:
            atol = 1e-12 * max(float(np.max(np.abs(want))), 1e-300)
            assert np.allclose(got, want, rtol=1e-10, atol=atol), f"{row.name}: {what} differs from NumPy's"
        print(f"{row.name}: gk.autodiff agrees with the NumPy gradient")


if __name__ == "__main__":
    check_rows()
