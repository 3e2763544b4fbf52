"""`gk.autodiff` for kernels in reverse mode: validate the annotations, build
(or fetch) the reverse specialisation, size and allocate the tape, run the
fused kernel, and return the derivatives of Active scalars.

Shadows are updated in place with DESIGN §2's semantics; the primals end with
their post-kernel values, as after `gk.launch`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..annotations import (
    Active,
    Annotation,
    BatchDuplicated,
    Const,
    Duplicated,
    DuplicatedNoNeed,
    Forward,
    Reverse,
)
from ..errors import AliasingError, AnnotationError, LaunchError
from ..ir.interp import interpret
from ..kernel import KernelFunction
from ..pipeline import ReverseSpecialization, specialize_reverse
from ..transforms.aliasing import merge_aliases
from .arrays import array_module, byte_bounds, describe, geometry, is_array, is_cupy_array, untouched
from .binding import Binding, bind, exactly_aliased
from .execute import entry_of, run_spec
from .race_check import check_races


@dataclass(frozen=True)
class Annotated:
    """Validated annotations: primals, shadows (one per lane) by parameter, Active scalars."""

    primals: tuple
    shadows: dict[str, tuple]  # parameter -> its shadows (tangents), one per lane
    active: tuple[str, ...]
    no_need: tuple[str, ...] = ()  # DuplicatedNoNeed: the new primal values are not wanted
    lanes: int = 1  # k of BatchDuplicated (vector mode)


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _check_shadow(name: str, x: Any, dx: Any, what: str) -> None:
    if (not is_array(dx) or is_cupy_array(dx) != is_cupy_array(x) or dx.shape != x.shape
            or dx.dtype != x.dtype):
        raise AnnotationError(f"{what} of '{name}' must be {describe(x)} like its primal; got {describe(dx)}",
                              hint=f"e.g. gk.Duplicated({name}, zeros_like({name})) on the same device")
    if isinstance(dx, np.ndarray) and not dx.flags.writeable:
        raise AnnotationError(f"{what} of '{name}' is read-only; shadows are updated in place")


def annotate(kernel: KernelFunction, args: tuple, forward: bool = False) -> Annotated:
    """Check each annotation against its argument; nothing is touched."""
    params = kernel.ir.params
    if len(args) != len(params):
        bind(kernel.ir, 1, tuple(a.val if isinstance(a, Annotation) else a for a in args))  # names what is missing
    primals, shadows, active, no_need = [], {}, [], []
    widths: dict[str, int] = {}
    for p, a in zip(params, args):
        if isinstance(a, (Duplicated, BatchDuplicated)):
            x = a.val
            if isinstance(a, BatchDuplicated):
                dxs = tuple(a.dvals) if isinstance(a.dvals, (tuple, list)) else None
                if not dxs:
                    raise AnnotationError(f"argument '{p.name}': gk.BatchDuplicated takes a tuple of k >= 1 "
                                          f"shadows; got {describe(a.dvals)}")
            else:
                dxs = (a.dval,)
            widths[p.name] = len(dxs) if isinstance(a, BatchDuplicated) else 0
            what = "tangent" if forward else "shadow"
            if is_array(x):
                for dx in dxs:
                    _check_shadow(p.name, x, dx, what)
            elif not forward:
                raise AnnotationError(f"argument '{p.name}' is Duplicated but its primal is {describe(x)}",
                                      hint="in reverse mode a scalar's derivative is returned: use gk.Active(s)")
            elif not _is_real(x) or not all(_is_real(dx) for dx in dxs):
                raise AnnotationError(f"argument '{p.name}' is Duplicated: a scalar's value and tangent must be "
                                      f"real numbers; got {describe(x)} and {', '.join(describe(d) for d in dxs)}")
            elif p.is_array:
                raise AnnotationError(f"argument '{p.name}' is a scalar but the kernel indexes it as an array")
            shadows[p.name] = dxs
            primals.append(x)
            if isinstance(a, DuplicatedNoNeed):
                no_need.append(p.name)
        elif isinstance(a, Active):
            if forward:
                raise AnnotationError(f"argument '{p.name}' is Active, a reverse-mode annotation; in forward mode a "
                                      "scalar takes a tangent", hint=f"gk.Duplicated({p.name}, 1.0)")
            if is_array(a.val):
                raise AnnotationError(f"argument '{p.name}' is Active but is an array; Active is for scalars",
                                      hint=f"use gk.Duplicated({p.name}, d{p.name}) for arrays")
            if not _is_real(a.val):
                raise AnnotationError(f"argument '{p.name}' is Active but is {describe(a.val)}; expected a real "
                                      "number")
            if not np.isfinite(a.val):
                raise AnnotationError(f"argument '{p.name}' is Active with the non-finite value {a.val}")
            if p.is_array:
                raise AnnotationError(f"argument '{p.name}' is Active but the kernel indexes it as an array")
            active.append(p.name)
            primals.append(a.val)
        elif isinstance(a, Const):
            primals.append(a.val)
        elif isinstance(a, Annotation):
            raise AnnotationError(f"argument '{p.name}': unknown annotation {type(a).__name__}")
        else:
            primals.append(a)
    batch = {n: w for n, w in widths.items() if w}
    if batch and (len(set(batch.values())) > 1 or len(batch) != len(widths)):
        desc = ", ".join(f"'{n}': {w or 'Duplicated'}" for n, w in widths.items())
        raise AnnotationError(f"a vector-mode call needs every differentiated argument to be BatchDuplicated with the "
                              f"same number of shadows; got {desc}")
    lanes = next(iter(batch.values())) if batch else 1
    return Annotated(tuple(primals), shadows, tuple(active), tuple(no_need), lanes)


def merge_shadows(params, ann: Annotated, aliases: dict[str, str]) -> dict[str, tuple]:
    """Shadows of exactly aliased primals must alias the same way (DESIGN §8);
    returns the shadows (one per lane) by parameter of the merged kernel. Any
    other overlap of a shadow with a primal or another shadow is refused."""
    for m, rep in aliases.items():
        if (m in ann.shadows) != (rep in ann.shadows):
            raise AliasingError(f"'{m}' and '{rep}' are the same array, so both need a shadow or neither has one")
        if m in ann.shadows and not all(exactly_aliased(a, b) for a, b in zip(ann.shadows[m], ann.shadows[rep])):
            raise AliasingError(f"'{m}' and '{rep}' are the same array but their shadows are different buffers",
                                hint="pass the same shadow for both")
    shadows = {n: dx for n, dx in ann.shadows.items() if n not in aliases}
    buffers = [(p.name, -1, x) for p, x in zip(params, ann.primals) if is_array(x) and p.name not in aliases]
    buffers += [(n, lane, dx) for n, dxs in shadows.items() for lane, dx in enumerate(dxs) if is_array(dx)]
    bounds = [byte_bounds(x) for _, _, x in buffers]
    for i, (na, la, a) in enumerate(buffers):
        for j in range(i + 1, len(buffers)):
            nb, lb, b = buffers[j]
            if la < 0 and lb < 0:
                continue  # primal/primal overlap is the binding's business
            (alo, ahi), (blo, bhi) = bounds[i], bounds[j]
            if alo < bhi and blo < ahi and np.may_share_memory(geometry(a), geometry(b)):
                def what(n, lane):
                    if lane < 0:
                        return f"'{n}'"
                    return f"the shadow of '{n}'" if ann.lanes == 1 else f"shadow {lane} of '{n}'"
                raise AliasingError(f"{what(nb, lb)} shares memory with {what(na, la)}; every shadow needs its "
                                    "own buffer")
    return shadows


def strided_lanes(b: Binding, shadows: dict[str, tuple]) -> frozenset[tuple[str, int]]:
    """(CUDA) the (parameter, lane) shadows that are not C-contiguous: part of the specialisation."""
    if b.backend != "cuda":
        return frozenset()
    return frozenset((n, lane) for n, dxs in shadows.items() for lane, dx in enumerate(dxs)
                     if is_array(dx) and not dx.flags.c_contiguous)


def reverse_specialization(kernel: KernelFunction, b: Binding, shadows: dict, active: tuple,
                           no_need: tuple = (), lanes: int = 1) -> ReverseSpecialization:
    strided = strided_lanes(b, shadows)
    no_need = frozenset(n for n in no_need if n in shadows)
    key = ("reverse", b.key, tuple(sorted(shadows)), active, tuple(sorted(strided)), tuple(sorted(no_need)), lanes)
    spec = kernel._specs.get(key)
    if spec is None:
        with kernel._lock:
            spec = kernel._specs.get(key)
            if spec is None:
                spec = specialize_reverse(merge_aliases(kernel.ir, dict(b.aliases)), b.type_map(kernel.ir),
                                          len(b.dim), b.backend, set(shadows), set(active), frozenset(b.strided),
                                          strided, no_need, lanes)
                kernel._specs[key] = spec
    return spec


def tape_slots(rs: ReverseSpecialization, b: Binding, allow_compile: bool = True) -> tuple[int, int]:
    """(float, int) tape slots per thread: static, or the maximum the count
    kernel finds (run by the interpreter when compiling is not allowed)."""
    if rs.kernels.static_slots is not None:
        return rs.kernels.static_slots
    if b.backend == "interp" or not allow_compile:
        counts = np.zeros((*b.dim, 2), np.int64)
        values = [v.get() if is_cupy_array(v) else v for v in b.kernel_values]  # inspect: arrays could be CuPy
        interpret(rs.count.typed, b.dim, [*values, counts])
    else:
        counts = array_module(b.backend).zeros((*b.dim, 2), np.int64)
        run_spec(rs.count, entry_of(rs.count), b.dim, [*b.kernel_values, counts])
    if not counts.size:
        return 0, 0
    top = counts.reshape(-1, 2).max(axis=0).tolist()  # on the GPU, the one read-back a taped loop needs
    return int(top[0]), int(top[1])


def allocate_tape(rs: ReverseSpecialization, b: Binding) -> tuple:
    """The float and int tapes of a reverse-mode launch, sized by tape_slots,
    on the launch's device."""
    nf, ni = tape_slots(rs, b)
    xp = array_module(b.backend)
    floats, ints = (*b.dim, nf), (*b.dim, ni)
    return (xp.zeros(floats, rs.kernels.tape_float.numpy) if nf else untouched(b.backend, floats,
                                                                                 rs.kernels.tape_float.numpy),
            xp.zeros(ints, np.int64) if ni else untouched(b.backend, ints, np.int64))


def tape_bytes_per_thread(rs: ReverseSpecialization, b: Binding) -> int:
    nf, ni = tape_slots(rs, b, allow_compile=False)
    return nf * rs.kernels.tape_float.itemsize + ni * 8


@dataclass(frozen=True)
class _Prepared:
    """A validated reverse-mode call: binding, shadows, specialisation."""

    b: Binding
    ann: Annotated
    shadows: dict[str, tuple]  # one shadow per lane
    rs: ReverseSpecialization

    @property
    def rs_key(self) -> tuple:
        return (self.b.key, tuple(sorted(self.shadows)), self.ann.active, self.ann.lanes)

    def run(self, spec, values: list):
        run_spec(spec, entry_of(spec), self.b.dim, values)

    def counts(self, used: bool = True):
        """Per-thread push counters of a split forward, on the launch's device
        (a one-element stand-in where no kernel reads them)."""
        if not used:
            return untouched(self.b.backend, (*(1 for _ in self.b.dim), 2), np.int64)
        return array_module(self.b.backend).zeros((*self.b.dim, 2), np.int64)

    def gather(self, accs: dict, tapes: tuple, counts: np.ndarray):
        """Run the gather kernel: it must see the incoming shadows, before the reverse zeroes any."""
        self.run(self.rs.gather, [*self.b.kernel_values, *self.adjoint_values(accs), *tapes, counts, *self.b.dim])

    def accumulators(self) -> dict[str, tuple]:
        """One element per Active scalar and lane: its derivative summed over all threads."""
        xp = array_module(self.b.backend)
        return {n: tuple(xp.zeros(1, self.rs.primal.typed.param(n).type.numpy) for _ in range(self.ann.lanes))
                for n in self.ann.active}

    def adjoint_values(self, accs: dict[str, tuple]) -> list:
        """Shadow and accumulator arguments (lane by lane), in the generated kernels' order."""
        order = [p.name for p in self.rs.primal.typed.params]
        return [*(dx for n in order if n in self.shadows for dx in self.shadows[n]),
                *(acc for n in sorted(accs, key=order.index) for acc in accs[n])]

    def results(self, f: KernelFunction, accs: dict[str, tuple]) -> tuple:
        """Active scalars' derivatives (a tuple of one per lane in vector mode), None for the rest."""
        def value(lanes):
            got = tuple(float(a[0]) for a in lanes)
            return got[0] if self.ann.lanes == 1 else got
        return tuple(value(accs[p.name]) if p.name in accs else None for p in f.ir.params)


def annotated_binding(f: Any, args: tuple, dim: Any, backend: str | None, forward: bool = False
                      ) -> tuple[Annotated, Binding, dict[str, tuple]]:
    """Validate a call of either mode: annotations, arguments, aliasing of the
    shadows. Returns them with the binding and the merged shadows; touches no buffer."""
    if not isinstance(f, KernelFunction):
        raise LaunchError(f"autodiff takes a @gk.kernel; got {type(f).__name__} "
                          "(differentiating programs of several launches is not available in this version)")
    ann = annotate(f, args, forward)
    if dim is None:
        arrays = [x for x in ann.primals if is_array(x)]
        if not arrays:
            raise LaunchError("dim is needed: no array argument to take it from")
        dim = arrays[0].shape
    b = bind(f.ir, dim, ann.primals, backend)
    if not forward:
        for name in ann.shadows:
            param = f.ir.param(name)
            if param.used and not param.is_array:
                raise AnnotationError(f"argument '{name}' is Duplicated but the kernel uses it as a scalar",
                                      hint="use gk.Active for scalars")
    return ann, b, merge_shadows(f.ir.params, ann, dict(b.aliases))


def _prepare(f: Any, args: tuple, dim: Any, backend: str | None) -> _Prepared:
    """Validate everything and check for races; touches no buffer."""
    ann, b, shadows = annotated_binding(f, args, dim, backend)
    rs = reverse_specialization(f, b, shadows, ann.active, ann.no_need, ann.lanes)
    check_races(rs.primal, b, f.name)
    return _Prepared(b, ann, shadows, rs)


def autodiff(f: Any, *args: Any, mode: Any = Reverse, dim: Any = None, backend: str | None = None) -> tuple:
    """Differentiate kernel `f` at the annotated arguments (DESIGN §1-§2).

    Shadows of Duplicated arrays are updated in place; returns one entry per
    argument: the derivative for Active scalars (summed over threads), None
    for the others."""
    if mode is Forward:
        from .forward import forward
        return forward(f, args, dim, backend)
    if mode is not Reverse:
        raise LaunchError(f"mode must be gk.Reverse or gk.Forward, got {mode!r}")
    p = _prepare(f, args, dim, backend)
    accs = p.accumulators()
    tapes = allocate_tape(p.rs, p.b)
    if p.rs.gather is None:
        p.run(p.rs.fused, [*p.b.kernel_values, *p.adjoint_values(accs), *tapes])
    elif p.rs.kernels.static_slots == (0, 0):
        # nothing taped: the gather needs only intact inputs and the incoming shadows
        p.gather(accs, tapes, p.counts(used=False))
        p.run(p.rs.fused, [*p.b.kernel_values, *p.adjoint_values(accs), *tapes])
    else:  # the gather replays each neighbour from its tape: forward, gather, then reverse
        counts = p.counts()
        p.run(p.rs.forward, [*p.b.kernel_values, *tapes, counts])
        p.gather(accs, tapes, counts)
        p.run(p.rs.reverse, [*p.b.kernel_values, *p.adjoint_values(accs), *tapes, counts])
    return p.results(f, accs)


@dataclass(frozen=True)
class Tape:
    """What a split forward leaves for its reverse: the per-thread tape, how
    much of it each thread used, and the signature it belongs to."""

    kernel: str
    key: tuple
    dim: tuple[int, ...]
    values: np.ndarray  # float values, shape (*dim, slots)
    ints: np.ndarray  # integer values (loop bounds, branch conditions), shape (*dim, slots)
    counts: np.ndarray  # shape (*dim, 2): how many float and int values each thread pushed

    @property
    def nbytes(self) -> int:
        return self.values.nbytes + self.ints.nbytes + self.counts.nbytes


def autodiff_thunk(f: Any, *activities: Any, dim: Any = None, backend: str | None = None):
    """Split reverse mode (Enzyme's autodiff_thunk): returns (forward, reverse).

    `activities` gives each argument's annotation class (gk.Duplicated,
    gk.Active, gk.Const, ...) or an annotated example. `forward(*args)` runs
    the augmented primal (primals updated as by launch) and returns a Tape;
    `reverse(*args, tape)` runs the reverse on the arrays in their post-forward
    state and returns what autodiff would."""
    if not isinstance(f, KernelFunction):
        raise LaunchError(f"autodiff_thunk takes a @gk.kernel; got {type(f).__name__}")
    pattern = tuple(a if isinstance(a, type) else type(a) for a in activities)
    if len(pattern) != len(f.ir.params):
        raise AnnotationError(f"kernel '{f.name}' takes {len(f.ir.params)} arguments; "
                              f"{len(pattern)} activities were given")

    def check(args: tuple):
        got = tuple(type(a) if isinstance(a, Annotation) else Const for a in args)
        for p, want, have in zip(f.ir.params, pattern, got):
            if not issubclass(have, want if want is not Annotation else Const):
                raise AnnotationError(f"argument '{p.name}' was declared {want.__name__} in autodiff_thunk "
                                      f"but is {have.__name__} here")

    def forward(*args: Any) -> Tape:
        check(args)
        p = _prepare(f, args, dim, backend)
        values, ints = allocate_tape(p.rs, p.b)
        counts = p.counts()
        p.run(p.rs.forward, [*p.b.kernel_values, values, ints, counts])
        return Tape(f.name, p.rs_key, p.b.dim, values, ints, counts)

    def reverse(*args: Any) -> tuple:
        if not args or not isinstance(args[-1], Tape):
            raise AnnotationError("reverse(*args, tape): the last argument must be the Tape from forward")
        *args, tape = args
        check(tuple(args))
        p = _prepare(f, tuple(args), dim, backend)
        if tape.kernel != f.name or tape.key != p.rs_key or tape.dim != p.b.dim:
            raise AnnotationError(f"this tape was made by forward for kernel '{tape.kernel}' with another "
                                  "signature or launch shape")
        accs = p.accumulators()
        if p.rs.gather is not None:
            p.gather(accs, (tape.values, tape.ints), tape.counts)
        p.run(p.rs.reverse, [*p.b.kernel_values, *p.adjoint_values(accs), tape.values, tape.ints, tape.counts])
        return p.results(f, accs)

    return forward, reverse
