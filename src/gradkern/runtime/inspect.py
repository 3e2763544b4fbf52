"""`gk.inspect`: what gradkern generates for one call, without compiling or
running anything (docs/shadows-and-modes.md: tape bytes per thread, adjoint forms)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..annotations import Forward, Reverse, primal
from ..backends import NAMES, backend
from ..errors import GradkernError, LaunchError
from ..ir.printer import format_kernel
from ..kernel import KernelFunction
from ..pipeline import Specialization, tangent_param
from .annotate import annotate, lane_groups, merge_shadows
from .arrays import is_array
from .binding import bind, default_dim
from .bounds_check import needs_bounds_check
from .launch import check_kernel
from .race_check import needs_race_check
from .reverse import autodiff_plan, tape_bytes_per_thread
from .specialize import forward_specialization, primal_specialization, reverse_specialization


@dataclass(frozen=True)
class Inspection:
    """What gradkern generates for one signature: readable IR and backend
    source; whether the launch runs in parallel, after an exact run-time race
    check or not; whether its bounds are left to the exact run-time check
    (`bounds_check`: the bounds proof decided neither way, so the bounds-checked
    kernel is built and run first); the arrays updated by atomic adds
    (privatised per chunk on the CPU) and the memory those private copies take; for reverse mode, each
    shadow's accumulation form and the tape bytes per thread (0 for a primal
    launch). `sources` holds every kernel the call may run, by role (primal,
    race_check; fused, augmented_primal, reverse, count, gather in reverse
    mode; forward_mode, the tangent kernel, in forward mode)."""

    ir: str
    source: str
    parallel: bool
    race_check: bool
    atomic_targets: tuple[str, ...]
    tape_bytes_per_thread: int
    adjoint_forms: dict
    private_bytes: int = 0
    sources: dict = field(default_factory=dict)
    runs: tuple[str, ...] = ()
    active_sums: dict = field(default_factory=dict)
    bounds_check: bool = False
    backend: str = ""  # the backend the call runs on: the one asked for, or the arrays' and the default's

    def __str__(self) -> str:
        return self.ir + "\n" + self.source


def _sources(**specs) -> dict[str, str]:
    return {role: s.source for role, s in specs.items() if s is not None and s.source is not None}


def _byte_sizes(params, values) -> dict[str, int]:
    return {p.name: v.nbytes for p, v in zip(params, values) if is_array(v)}


def _with_derivatives(sizes: dict[str, int], derivatives: dict[str, str], lanes: int) -> dict[str, int]:
    """`sizes` and, for each primal with a shadow or tangent, that array in every lane
    (as large as its primal: an atomic target's derivative is privatised too)."""
    return sizes | {tangent_param(derivatives[n], lane, lanes): size for n, size in sizes.items()
                    if n in derivatives for lane in range(lanes)}


def _private_bytes(spec: Specialization, sizes: dict[str, int], dim: tuple[int, ...]) -> int:
    return backend(spec.backend).private_bytes(spec.code, sizes, dim)


def _grouped(backend_name: str, lanes: int) -> bool:
    """Whether vector mode runs its lanes in several launches on this backend (runtime/reverse.py)."""
    return len(lane_groups(lanes, backend(backend_name).lane_group)) > 1


def _summation(spec: Specialization, accumulator: str) -> str:
    return backend(spec.backend).summation(spec.code, accumulator, spec.parallel)


def inspect(kernel: KernelFunction, *args: Any, dim: Any = None, mode: Any = None,
            backend: str | None = None) -> Inspection:
    """Generate (but do not compile or run) `kernel` for `args`, as `launch`
    would, or its fused gradient kernel with mode=gk.Reverse, or its tangent
    kernel with mode=gk.Forward (args annotated as for autodiff). `dim`
    defaults to the shape of the first array argument.
    backend="cuda" prints CUDA C for NumPy or CuPy arguments, without a GPU; with no backend, the call's own
    (CuPy arrays: 'cuda'; NumPy arrays: the default, 'cpu' unless $GRADKERN_BACKEND names another), named by
    the result's `backend`.
    `tape_bytes_per_thread` is what the augmented primal tapes per thread; when
    a loop tapes, the reference interpreter runs the count pass to find it."""
    k = check_kernel(kernel)
    if backend is not None and backend not in NAMES:
        raise LaunchError(f"backend must be one of {NAMES}, got {backend!r}")
    if mode is not None and mode is not Reverse and mode is not Forward:
        raise GradkernError(f"mode must be None, gk.Reverse or gk.Forward, got {mode!r}")
    primals = tuple(primal(a) for a in args)
    if dim is None:
        dim = default_dim(k.ir, primals)
    if mode is Forward:
        ann = annotate(k, args, forward=True)
        b = bind(k.ir, dim, ann.primals, backend, inspect_only=True)
        fs = forward_specialization(k, b, merge_shadows(k.ir.params, ann, dict(b.aliases)), ann.lanes)
        t = fs.tangent
        sizes = _with_derivatives(_byte_sizes(fs.primal.typed.params, b.kernel_values), fs.tangents, fs.lanes)
        return Inspection(format_kernel(t.typed), t.source or "", t.parallel, needs_race_check(fs.primal, b),
                          tuple(sorted(t.facts.atomic_targets)), 0, {}, _private_bytes(t, sizes, b.dim),
                          _sources(race_check=fs.primal.race_check_source, forward_mode=t),
                          bounds_check=needs_bounds_check(fs.primal, b), backend=b.backend)
    if mode is Reverse:
        ann = annotate(k, args)
        b = bind(k.ir, dim, ann.primals, backend, inspect_only=True)
        shadows = merge_shadows(k.ir.params, ann, dict(b.aliases))
        rs = reverse_specialization(k, b, shadows, ann.active, ann.no_need, ann.lanes)
        tape_bytes = tape_bytes_per_thread(rs, b)
        fused = rs.fused
        sizes = _with_derivatives(_byte_sizes(rs.primal.typed.params, b.kernel_values), rs.kernels.shadows,
                                  ann.lanes)
        sizes |= {tangent_param(acc, lane, ann.lanes): rs.kernels.accumulator_type.itemsize
                  for acc in rs.kernels.accumulators.values() for lane in range(ann.lanes)}
        sources = _sources(race_check=rs.primal.race_check_source, fused=fused,
                           augmented_primal=rs.augmented_primal, reverse=rs.reverse, count=rs.count,
                           gather=rs.gather)
        runs = autodiff_plan(rs, bool(ann.active), b.backend, grouped=_grouped(b.backend, ann.lanes))
        summing = getattr(rs, runs[-1])  # the fused kernel or the reverse: where the Active sums are made
        sums = {n: _summation(summing, tangent_param(acc, 0, ann.lanes)) for n, acc in rs.kernels.accumulators.items()}
        return Inspection(format_kernel(fused.typed), fused.source or "", fused.parallel,
                          needs_race_check(rs.primal, b), tuple(sorted(fused.facts.atomic_targets)), tape_bytes,
                          dict(rs.adjoint_forms), _private_bytes(fused, sizes, b.dim), sources, runs, sums,
                          needs_bounds_check(rs.primal, b), b.backend)
    b = bind(k.ir, dim, primals, backend, inspect_only=True)
    spec = primal_specialization(k, b)
    sizes = _byte_sizes(spec.typed.params, b.kernel_values)
    return Inspection(format_kernel(spec.typed), spec.source or "", spec.parallel, needs_race_check(spec, b),
                      tuple(sorted(spec.facts.atomic_targets)), 0, {}, _private_bytes(spec, sizes, b.dim),
                      _sources(primal=spec, race_check=spec.race_check_source),
                      bounds_check=needs_bounds_check(spec, b), backend=b.backend)
