"""Forward mode for one kernel (`gk.autodiff(..., mode=gk.Forward)`): validate
the annotations, build (or fetch) the tangent kernel, check bounds and races, run it.
Tangents live in the shadows (DESIGN §2): for an array the kernel changes, its
shadow becomes the tangent of the new value; shadows of arrays it only reads
are left as they are. Scalars take tangents as `Duplicated(2.0, 1.0)`.
"""

from __future__ import annotations

from typing import Any

from ..errors import InternalError
from ..kernel import KernelFunction
from ..pipeline import tangent_param
from .annotate import annotated_binding
from .arrays import is_array
from .bounds_check import check_bounds
from .execute import run_spec
from .race_check import check_races
from .specialize import forward_specialization


def prepare_forward(f: KernelFunction, args: tuple, dim: Any, backend: str | None):
    """Validate everything and check bounds and races; touches no buffer."""
    ann, b, tangents = annotated_binding(f, args, dim, backend, forward=True)
    fs = forward_specialization(f, b, tangents, ann.lanes)
    check_bounds(fs.primal, b)
    check_races(fs.primal, b, f.name)
    values = list(b.kernel_values)
    for p in fs.primal.typed.params:
        if p.name in tangents:
            for t in tangents[p.name]:
                values.append(t if is_array(t) else p.type.numpy(t))
    params = [q.name for q in fs.tangent.typed.params]
    expected = len(b.kernel_values) + sum(len(tangents[n]) for n in fs.tangents)
    if len(params) != expected or any(tangent_param(fs.tangents[n], 0, ann.lanes) not in params for n in fs.tangents):
        raise InternalError("the tangent kernel's parameters do not match the annotations")
    return b, fs, values


def forward(f: KernelFunction, args: tuple, dim: Any, backend: str | None) -> None:
    """Forward mode: every tangent is written into its shadow in place; returns None."""
    b, fs, values = prepare_forward(f, args, dim, backend)
    run_spec(fs.tangent, b.dim, values)
