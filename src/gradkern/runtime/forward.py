"""Forward mode for one kernel (`gk.autodiff(..., mode=gk.Forward)`): validate
the annotations, build (or fetch) the tangent kernel, check bounds and races, run it.
Tangents live in the shadows (docs/shadows-and-modes.md): for an array the kernel changes, its
shadow becomes the tangent of the new value; shadows of arrays it only reads
are left as they are. Scalars take tangents as `Duplicated(2.0, 1.0)`.
"""

from __future__ import annotations

from typing import Any

from ..backends import backend as backend_object
from ..errors import InternalError
from ..kernel import KernelFunction
from ..pipeline import tangent_param
from .annotate import annotated_entry, cached_annotations, lane_groups
from .arrays import is_array
from .binding import Binding
from .bounds_check import check_bounds
from .plans import Checks, Runner, checks_settled, int_positions, planned_call, valid
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
    b, launches, _ = _prepare(f, args, dim, backend)
    return b, [(runner.spec, values) for runner, values in launches]


def _prepare(f: KernelFunction, args: tuple, dim: Any, backend: str | None) -> tuple[Binding, list, Any]:
    """`prepare_forward`, its launches as (Runner, values), and the signature's cache entry (or None).
    A signature prepared before reuses its plan (ForwardPlan, runtime/plans.py)."""
    entry = cached_annotations(f, args, dim, backend, True)
    if entry is not None and valid(entry.plan, f):
        got = entry.plan.prepare(entry, args)
        if got is not None:
            return (*got, entry)
    ann, b, tangents, entry = annotated_entry(f, args, dim, backend, forward=True)
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
    plan = ForwardPlan(f, b, tangents, last.primal, list(zip(specs, groups)))
    if entry is not None:
        if checks_settled(last.primal, b):
            plan.checks.record(b.kernel_values)
        entry.plan = plan
    return b, plan.launches(b.kernel_values, tangents), entry


class ForwardPlan:
    """What every forward-mode call of one signature shares: the tangent kernels with their lanes, the
    layout of their arguments, and the checks' outcomes (runtime/plans.py). Holds no arrays of the caller's."""

    def __init__(self, f: KernelFunction, b: Binding, tangents: dict, primal, specs: list):
        self.kernel, self.generation, self.primal = f, f._specs.generation, primal
        self.tangent_names = tuple(tangents)  # in argument order, as annotate._reuse lists them
        self.checks = Checks(int_positions(primal))
        self.layouts = []  # (Runner, lanes lo:hi, ((tangent's parameter, scalar conversion or None), ...))
        for fs, (lo, hi) in specs:
            layout = tuple((p.name, None if is_array(tangents[p.name][0]) else p.type.numpy)
                           for p in fs.primal.typed.params if p.name in tangents)
            params = [q.name for q in fs.tangent.typed.params]
            expected = len(b.kernel_values) + sum(len(tangents[n][lo:hi]) for n in fs.tangents)
            if len(params) != expected or any(tangent_param(fs.tangents[n], 0, fs.lanes) not in params
                                              for n in fs.tangents):
                raise InternalError("the tangent kernel's parameters do not match the annotations")
            self.layouts.append((Runner(fs.tangent), lo, hi, layout))

    def launches(self, values: tuple, tangents: dict) -> list:
        """(Runner, values) of each launch, in order: the primal values, then lanes lo:hi of each tangent."""
        out = []
        for runner, lo, hi, layout in self.layouts:
            v = list(values)
            for name, convert in layout:
                ts = tangents[name] if lo == 0 and hi == len(tangents[name]) else tangents[name][lo:hi]
                v += ts if convert is None else [convert(t) for t in ts]
            out.append((runner, v))
        return out

    def prepare(self, entry: Any, args: tuple) -> tuple[Binding, list] | None:
        """The binding and launches of `args`, whose signature is this plan's."""
        b, _, tangents = planned_call(entry.template, args)  # no Active in forward mode: never None
        values = b.values
        if not self.checks.settled(values):
            check_bounds(self.primal, b)
            check_races(self.primal, b, self.kernel.name)
            if checks_settled(self.primal, b):
                self.checks.record(values)
        return b, self.launches(values, dict(zip(self.tangent_names, tangents)))


def forward(f: KernelFunction, args: tuple, dim: Any, backend: str | None) -> None:
    """Forward mode: every tangent is written into its shadow in place; returns None."""
    b, launches, _ = _prepare(f, args, dim, backend)
    for runner, values in launches:
        runner(b.dim, values)
