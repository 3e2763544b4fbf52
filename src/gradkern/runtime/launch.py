"""`gk.launch` and `gk.inspect`: bind and validate arguments, fetch or build the
specialisation for their signature, and run it. The runtime never looks inside
kernel bodies: it asks the pipeline for a specialisation and calls it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..annotations import Forward, Reverse, primal
from ..errors import GradkernError, LaunchError
from ..ir.printer import format_kernel
from ..kernel import KernelFunction
from ..pipeline import Specialization, specialize
from ..transforms.aliasing import merge_aliases
from .arrays import is_array
from .binding import BACKENDS, Binding, bind
from .execute import entry_of, run_spec
from .race_check import check_races


@dataclass
class Compiled:
    spec: Specialization
    entry: Any  # the backend's callable, or None for the interpreter

    def run(self, b: Binding):
        run_spec(self.spec, self.entry, b.dim, list(b.kernel_values))


def _check_kernel(kernel: Any) -> KernelFunction:
    if not isinstance(kernel, KernelFunction):
        raise LaunchError(f"the first argument must be a @gk.kernel, got {type(kernel).__name__}",
                          hint="decorate the function with @gk.kernel")
    return kernel


def compiled_for(kernel: KernelFunction, b: Binding) -> Compiled:
    """The specialisation of `kernel` for binding `b`, built once per signature."""
    c = kernel._specs.get(b.key)
    if c is None:
        with kernel._lock:
            c = kernel._specs.get(b.key)
            if c is None:
                spec = specialize(merge_aliases(kernel.ir, dict(b.aliases)), b.type_map(kernel.ir), len(b.dim),
                                  b.backend, frozenset(b.strided))
                c = kernel._specs[b.key] = Compiled(spec, entry_of(spec))
    return c


def launch(kernel: KernelFunction, dim: Any, *args: Any, backend: str | None = None) -> None:
    """Run `kernel` over the launch domain `dim` (int or tuple of 1-3 ints).
    Arrays are updated in place; every argument is validated first."""
    k = _check_kernel(kernel)
    b = bind(k.ir, dim, args, backend)
    c = compiled_for(k, b)
    check_races(c.spec, b, k.name)
    c.run(b)


def private_bytes(spec: Specialization, sizes: dict[str, int], dim: tuple[int, ...]) -> int:
    """Bytes of per-chunk private copies a CPU launch of `spec` allocates
    (`sizes`: bytes of each array it may privatise, shadows included)."""
    if not spec.privatized or 0 in dim:
        return 0
    from ..backends.numba_cpu import private_chunks
    copy = sum(sizes[a] for a in spec.privatized)
    return private_chunks(copy, dim[0]) * copy


def compiled_for_inspection(k: KernelFunction, b: Binding) -> Specialization:
    return specialize(merge_aliases(k.ir, dict(b.aliases)), b.type_map(k.ir), len(b.dim), b.backend,
                      frozenset(b.strided))


@dataclass(frozen=True)
class Inspection:
    """What gradkern generates for one signature: readable IR and backend
    source; whether the launch runs in parallel, after an exact run-time race
    check or not; the arrays updated by atomic adds (privatised per chunk on
    the CPU) and the memory those private copies take; for reverse mode, each
    shadow's accumulation form and the tape bytes per thread (0 for a primal
    launch). `sources` holds every kernel the call may run, by role (primal,
    race_check; fused, forward, reverse, count, gather in reverse mode;
    forward_mode, the tangent kernel, in forward mode)."""

    ir: str
    source: str
    parallel: bool
    race_check: bool
    atomic_targets: tuple[str, ...]
    tape_bytes_per_thread: int
    adjoint_forms: dict
    private_bytes: int = 0
    sources: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return self.ir + "\n" + self.source


def _sources(**specs) -> dict[str, str]:
    return {role: s.source for role, s in specs.items() if s is not None and s.source is not None}


def _byte_sizes(params, values) -> dict[str, int]:
    return {p.name: v.nbytes for p, v in zip(params, values) if is_array(v)}


def inspect(kernel: KernelFunction, *args: Any, dim: Any = None, mode: Any = None,
            backend: str = "cpu") -> Inspection:
    """Generate (but do not compile or run) `kernel` for `args`, as `launch`
    would, or its fused gradient kernel with mode=gk.Reverse, or its tangent
    kernel with mode=gk.Forward (args annotated as for autodiff). `dim`
    defaults to the shape of the first array argument.
    backend="cuda" prints CUDA C for NumPy or CuPy arguments, without a GPU.
    `tape_bytes_per_thread` is what the split forward tapes per thread; when a
    loop tapes, the reference interpreter runs the count pass to find it."""
    k = _check_kernel(kernel)
    if backend not in BACKENDS:
        raise LaunchError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if mode is not None and mode is not Reverse and mode is not Forward:
        raise GradkernError(f"mode must be None, gk.Reverse or gk.Forward, got {mode!r}")
    primals = tuple(primal(a) for a in args)
    if dim is None:
        shapes = [a.shape for a in primals if is_array(a) and a.ndim > 0]
        if not shapes:
            raise LaunchError("dim is needed: no array argument to take it from")
        dim = shapes[0]
    if mode is Forward:
        from .autodiff import annotate, merge_shadows
        from .forward import forward_specialization
        ann = annotate(k, args, forward=True)
        b = bind(k.ir, dim, ann.primals, backend, inspect_only=True)
        fs = forward_specialization(k, b, merge_shadows(k.ir.params, ann, dict(b.aliases)), ann.lanes)
        t = fs.tangent
        sizes = _byte_sizes(t.typed.params[:len(b.kernel_values)], b.kernel_values)
        return Inspection(format_kernel(t.typed), t.source or "", t.parallel, fs.primal.race_check is not None,
                          tuple(sorted(t.facts.atomic_targets)), 0, {}, private_bytes(t, sizes, b.dim),
                          _sources(race_check=fs.primal.race_check_source, forward_mode=t))
    if mode is Reverse:
        from .autodiff import annotate, merge_shadows, reverse_specialization, tape_bytes_per_thread
        ann = annotate(k, args)
        b = bind(k.ir, dim, ann.primals, backend, inspect_only=True)
        shadows = merge_shadows(k.ir.params, ann, dict(b.aliases))
        rs = reverse_specialization(k, b, shadows, ann.active, ann.no_need, ann.lanes)
        tape_bytes = tape_bytes_per_thread(rs, b)
        fused = rs.fused
        sizes = _byte_sizes(rs.primal.typed.params, b.kernel_values)
        sizes |= {rs.kernels.shadows[n]: size for n, size in sizes.items() if n in rs.kernels.shadows}
        sizes |= {acc: rs.primal.typed.param(n).type.itemsize for n, acc in rs.kernels.accumulators.items()}
        sources = _sources(race_check=rs.primal.race_check_source, fused=fused, forward=rs.forward,
                           reverse=rs.reverse, count=rs.count, gather=rs.gather)
        return Inspection(format_kernel(fused.typed), fused.source or "", fused.parallel,
                          rs.primal.race_check is not None, tuple(sorted(fused.facts.atomic_targets)), tape_bytes,
                          dict(rs.adjoint_forms), private_bytes(fused, sizes, b.dim), sources)
    b = bind(k.ir, dim, primals, backend, inspect_only=True)
    spec = compiled_for_inspection(k, b)
    sizes = _byte_sizes(spec.typed.params, b.kernel_values)
    return Inspection(format_kernel(spec.typed), spec.source or "", spec.parallel, spec.race_check is not None,
                      tuple(sorted(spec.facts.atomic_targets)), 0, {}, private_bytes(spec, sizes, b.dim),
                      _sources(primal=spec, race_check=spec.race_check_source))
