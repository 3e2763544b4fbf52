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
from .arrays import is_array
from .binding import default_dim
from .bounds_check import needs_bounds_check
from .call import prepare
from .launch import check_kernel
from .race_check import needs_race_check
from .reverse import tape_bytes_per_thread


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
    mode; forward_mode, the tangent kernel, in forward mode). `runs` is the roles the call runs, in
    order (a launch: primal; forward mode: forward_mode), `launches` every launch with its lanes
    (forward mode on the CPU: one per group of lanes): both read from the prepared call
    (runtime/call.py, docs/prepared-call.md), as a call runs it."""

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
    # every launch the call makes, in order, with its lanes (docs/prepared-call.md): e.g. "gather[0:4]"
    launches: tuple[str, ...] = ()

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
    mode_name = "forward" if mode is Forward else "reverse" if mode is Reverse else "launch"
    call, bound = prepare(k, args if mode is not None else primals, dim, backend, mode_name, inspect_only=True)
    b = bound.b
    launches = tuple(r.label for r in call.runs)
    if mode is Forward:  # the last group of lanes' tangent kernel: the one that also stores the primal
        fs = call.spec
        t = fs.tangent
        sizes = _with_derivatives(_byte_sizes(fs.primal.typed.params, b.kernel_values), fs.tangents, fs.lanes)
        return Inspection(format_kernel(t.typed), t.source or "", t.parallel, needs_race_check(fs.primal, b),
                          tuple(sorted(t.facts.atomic_targets)), 0, {}, _private_bytes(t, sizes, b.dim),
                          _sources(race_check=fs.primal.race_check_source, forward_mode=t), call.roles,
                          bounds_check=needs_bounds_check(fs.primal, b), backend=b.backend, launches=launches)
    if mode is Reverse:
        rs, lanes = call.spec, call.layout.lanes
        tape_bytes = tape_bytes_per_thread(rs, b)
        fused = rs.fused
        sizes = _with_derivatives(_byte_sizes(rs.primal.typed.params, b.kernel_values), rs.kernels.shadows, lanes)
        sizes |= {tangent_param(acc, lane, lanes): rs.kernels.accumulator_type.itemsize
                  for acc in rs.kernels.accumulators.values() for lane in range(lanes)}
        sources = _sources(race_check=rs.primal.race_check_source, fused=fused,
                           augmented_primal=rs.augmented_primal, reverse=rs.reverse, count=rs.count,
                           gather=rs.gather)
        # where the Active sums are made: the fused kernel or the reverse (before a pull, which makes none),
        # or a gather that does the reverse's work
        last = [r for r in call.roles if not (rs.gather_pulls and r == "gather")][-1]
        summing = rs.gather if rs.gather_folded else getattr(rs, last)
        sums = {n: _summation(summing, tangent_param(acc, 0, lanes)) for n, acc in rs.kernels.accumulators.items()}
        return Inspection(format_kernel(fused.typed), fused.source or "", fused.parallel,
                          needs_race_check(rs.primal, b), tuple(sorted(fused.facts.atomic_targets)), tape_bytes,
                          dict(rs.adjoint_forms), _private_bytes(fused, sizes, b.dim), sources, call.roles, sums,
                          needs_bounds_check(rs.primal, b), b.backend, launches)
    spec = call.spec
    sizes = _byte_sizes(spec.typed.params, b.kernel_values)
    return Inspection(format_kernel(spec.typed), spec.source or "", spec.parallel, needs_race_check(spec, b),
                      tuple(sorted(spec.facts.atomic_targets)), 0, {}, _private_bytes(spec, sizes, b.dim),
                      _sources(primal=spec, race_check=spec.race_check_source), call.roles,
                      bounds_check=needs_bounds_check(spec, b), backend=b.backend, launches=launches)
