"""The rows of benchmarks/library/library.py: one per library kernel (gradkern.kernels),
each family's rows in benchmarks/library/library_<family>.py as a list ROWS."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Row:
    """One kernel at a bandwidth-bound size.

    setup(rng, n) gives the plain float64 launch arguments for about n grid
    points (or particles, or matrix entries) and the launch extent: random,
    never zero, physically sensible (a stable time step). traffic(args) is
    the fewest bytes the primal must move: each array it reads or writes,
    once (n-body forces, compute-bound, give 0 and are reported in time
    only). wrt names the arguments differentiated (Duplicated arrays, Active
    scalars); None: every float array and float scalar. hand(args, shadows),
    where one exists, is a hand-written Numba primal followed by its adjoint,
    the shadows given by parameter name and seeded as gradkern's are: the
    same work as one gk.autodiff call. hand_primal(args), given with hand,
    is that hand-written primal alone: the hand-written gradient/primal ratio
    a byte-bound row's goal is held against (library.py, Result.met)."""

    name: str
    setup: Callable[[np.random.Generator, int], tuple[list, Any]]
    traffic: Callable[[list], int]
    wrt: tuple[str, ...] | None = None
    hand: Callable[[list, dict], None] | None = None
    hand_primal: Callable[[list], None] | None = None


def alone(primal: Callable) -> Callable[[list], None]:
    """Row.hand_primal of a hand-written primal taking the row's launch arguments in their order."""
    return lambda args: primal(*args)
