"""Forward mode for one kernel (`gk.autodiff(..., mode=gk.Forward)`): prepare the call (runtime/call.py:
validate the annotations, build or fetch the tangent kernels, check bounds and races), run it.
Tangents live in the shadows (docs/shadows-and-modes.md): for an array the kernel changes, its
shadow becomes the tangent of the new value; shadows of arrays it only reads
are left as they are. Scalars take tangents as `Duplicated(2.0, 1.0)`.
"""

from __future__ import annotations

from typing import Any

from ..kernel import KernelFunction
from .call import Bound, PreparedCall, prepare


def launches(call: PreparedCall, bound: Bound) -> list:
    """(Run, values) of each launch of a prepared forward call, in order: the kernel's values, then lanes
    lo:hi of each tangent in the run's layout."""
    out = []
    tangents = bound.derivatives
    for run in call.runs:
        v = list(bound.values)
        lo, hi = run.lo, run.hi
        for name, convert in run.layout:
            ts = tangents[name]
            if not (lo == 0 and hi == len(ts)):
                ts = ts[lo:hi]
            v += ts if convert is None else [convert(t) for t in ts]
        out.append((run, v))
    return out


def forward(f: KernelFunction, args: tuple, dim: Any, backend: str | None) -> None:
    """Forward mode: every tangent is written into its shadow in place; returns None."""
    call, bound = prepare(f, args, dim, backend, "forward")
    for run, values in launches(call, bound):
        run(call.dim, values)
