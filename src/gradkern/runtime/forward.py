"""Forward mode for one kernel (`gk.autodiff(..., mode=gk.Forward)`): validate
the annotations, build (or fetch) the tangent kernel, check bounds and races, run it.
Tangents live in the shadows (DESIGN §2): for an array the kernel changes, its
shadow becomes the tangent of the new value; shadows of arrays it only reads
are left as they are. Scalars take tangents as `Duplicated(2.0, 1.0)`.
"""

from __future__ import annotations

from typing import Any

from ..backends import backend as backend_object
from ..errors import InternalError
from ..kernel import KernelFunction
from ..pipeline import ForwardSpecialization, tangent_param
from .annotate import annotated_binding, lane_groups
from .arrays import is_array
from .binding import Binding
from .bounds_check import check_bounds
from .execute import run_spec
from .race_check import check_races
from .specialize import forward_specialization


def prepare_forward(f: KernelFunction, args: tuple, dim: Any, backend: str | None) -> tuple[Binding, list]:
    """Validate everything and check bounds and races; touches no buffer. Returns
    the binding and the launches to run in order, (specialisation, values) each.

    Vector mode on a backend with a lane group (`Backend.lane_group`) runs every
    group of lanes but the last as the tangent work alone, before the last group
    runs it with the primal's stores, when the kernel reads no array it writes
    (so each group sees the memory as it was on entry); otherwise all lanes in
    one launch."""
    ann, b, tangents = annotated_binding(f, args, dim, backend, forward=True)
    groups = lane_groups(ann.lanes, backend_object(b.backend).lane_group)

    def lanes_of(lo: int, hi: int) -> dict:
        return {n: ts[lo:hi] for n, ts in tangents.items()}

    last = forward_specialization(f, b, lanes_of(*groups[-1]), groups[-1][1] - groups[-1][0])
    if len(groups) > 1 and not last.separable:
        groups = [(0, ann.lanes)]
        last = forward_specialization(f, b, tangents, ann.lanes)
    check_bounds(last.primal, b)
    check_races(last.primal, b, f.name)
    specs = [forward_specialization(f, b, lanes_of(lo, hi), hi - lo, primal_stores=False)
             for lo, hi in groups[:-1]] + [last]
    return b, [(fs.tangent, _values(b, fs, tangents, lo, hi)) for fs, (lo, hi) in zip(specs, groups)]


def _values(b: Binding, fs: ForwardSpecialization, tangents: dict, lo: int, hi: int) -> list:
    """The tangent kernel's arguments: the primal values, then lanes lo:hi of each tangent."""
    values = list(b.kernel_values)
    for p in fs.primal.typed.params:
        if p.name in tangents:
            for t in tangents[p.name][lo:hi]:
                values.append(t if is_array(t) else p.type.numpy(t))
    params = [q.name for q in fs.tangent.typed.params]
    expected = len(b.kernel_values) + sum(len(tangents[n][lo:hi]) for n in fs.tangents)
    if len(params) != expected or any(tangent_param(fs.tangents[n], 0, fs.lanes) not in params for n in fs.tangents):
        raise InternalError("the tangent kernel's parameters do not match the annotations")
    return values


def forward(f: KernelFunction, args: tuple, dim: Any, backend: str | None) -> None:
    """Forward mode: every tangent is written into its shadow in place; returns None."""
    b, launches = prepare_forward(f, args, dim, backend)
    for spec, values in launches:
        run_spec(spec, b.dim, values)
