"""check_rows() of the benchmarks/library/library_<family>.py modules: run a Row's
gk.autodiff call as benchmarks/library/library.py does (Duplicated shadows seeded
uniform in [-1, 1), Active scalars, the rest Const) and compare it with the
row's hand-written primal + adjoint, or with a NumPy gradient."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
from library_rows import Row

import gradkern as gk
import gradkern.kernels as library


def kernel_of(row: Row) -> gk.KernelFunction:
    return getattr(library, row.name.split()[0])


def params(row: Row) -> list[str]:
    return list(inspect.signature(kernel_of(row).__wrapped__).parameters)


def differentiated(row: Row, name: str, value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return value.dtype.kind == "f" and (row.wrt is None or name in row.wrt)
    return isinstance(value, float) and (row.wrt is None or name in row.wrt)


def seeded_shadows(row: Row, args: list, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The shadow of every differentiated array, uniform in [-1, 1)."""
    return {name: rng.uniform(-1.0, 1.0, a.shape) for name, a in zip(params(row), args)
            if isinstance(a, np.ndarray) and differentiated(row, name, a)}


def autodiff(row: Row, args: list, shadows: dict[str, np.ndarray], dim: Any) -> tuple:
    """gk.autodiff of the row's kernel on `args` and `shadows` (changed in place); its Active derivatives."""
    annotated = []
    for name, a in zip(params(row), args):
        if name in shadows:
            annotated.append(gk.Duplicated(a, shadows[name]))
        elif differentiated(row, name, a):
            annotated.append(gk.Active(a))
        else:
            annotated.append(gk.Const(a))
    return gk.autodiff(kernel_of(row), *annotated, dim=dim)


def close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-9) -> bool:
    """np.allclose with rtol 1e-9 (the driver's) and atol rtol x the largest magnitude: the two sides sum the same
    few terms in different orders."""
    return bool(np.allclose(got, want, rtol=rtol, atol=rtol * max(float(np.max(np.abs(want))), 1e-300)))


def check_against_hand(row: Row, n: int, seed: int = 0) -> None:
    """gk.autodiff and row.hand from one state leave the same primals and shadows."""
    rng = np.random.default_rng(seed)
    args, dim = row.setup(rng, n)
    shadows = seeded_shadows(row, args, rng)
    hand_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    hand_shadows = {k: v.copy() for k, v in shadows.items()}
    autodiff(row, args, shadows, dim)
    row.hand(hand_args, hand_shadows)
    for name, got, want in zip(params(row), args, hand_args):
        if isinstance(got, np.ndarray):
            assert close(got, want), f"{row.name}: primal '{name}' differs from the hand-written one"
    for name in shadows:
        assert close(shadows[name], hand_shadows[name]), \
            f"{row.name}: shadow of '{name}' differs from the hand-written adjoint's " \
            f"(max abs diff {np.max(np.abs(shadows[name] - hand_shadows[name])):.3e})"
