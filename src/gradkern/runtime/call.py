"""One prepared call (docs/prepared-call.md): what a kernel call of one signature checks once and what it
then runs, in one object, `PreparedCall`, made by `prepare` and kept in one signature cache. Every verb
takes it: gk.launch, gk.autodiff (both modes), gk.autodiff_thunk, gk.inspect, a program's recorder and a
checkpointed loop's recomputation. A call whose signature (`signature`) was prepared before is refilled
(`refill`: its scalars converted, its shadows collected), its checks ensured (`Checks.ensure`: repeated
only for integer scalars whose outcome is not settled), and its runs run; a miss, or a value check that
fails, takes the full path, which raises the same error a first call would. A prepared call is valid for
one generation of its kernel's specialisation cache (kernel.SpecCache) and holds no arrays of the
caller's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from math import isfinite
from typing import Any

from ..annotations import Active, Annotation, BatchDuplicated, Const, Duplicated, DuplicatedNoNeed
from ..backends import backend as backend_object
from ..errors import InternalError
from ..ir.types import Array
from ..kernel import KernelFunction
from ..pipeline import ReverseSpecialization, Specialization, tangent_param
from .annotate import annotated_binding, lane_groups
from .arrays import array_module, is_array, is_cupy_array, untouched
from .binding import Binding, bind, current_device, template_of
from .bounds_check import check_bounds
from .callkey import signature
from .compile_pool import settle, submit
from .execute import entry_of, run_spec
from .race_check import check_exclusive_rows, check_races, needs_race_check
from .specialize import forward_specialization, primal_specialization, reverse_specialization

MODES = ("launch", "reverse", "forward")
MAX_PASSED = 256  # remembered integer-scalar tuples per prepared call whose checks passed
MAX_CALLS = 4096  # remembered signatures, all kernels together; a program varying its shapes endlessly starts over
_CALLS: dict[tuple, PreparedCall] = {}
_OBSERVERS: list = []  # observing(): told of every run (docs/prepared-call.md, "Running and observing")


@contextmanager
def observing(fn) -> Iterator[None]:
    """The seam through which tests and benchmarks watch launches: while installed, `fn(run, dim, seconds)`
    is called after every `Run` of every prepared call (process-wide; `seconds`: wall clock, no device sync)."""
    _OBSERVERS.append(fn)
    try:
        yield
    finally:
        _OBSERVERS.remove(fn)


class Run:
    """One launch of a prepared call: its role, its specialisation, the lanes lo:hi it covers, the mode's
    specialisation record it belongs to (`family`), and for a tangent kernel its arguments' `layout`.
    Called, it runs the specialisation as execute.run_spec does, its backend object and compiled entry
    looked up once (a bounds-checked specialisation, GRADKERN_BOUNDSCHECK=1, goes through run_spec); an
    inspected call's runs are not compiled."""

    __slots__ = ("role", "spec", "lo", "hi", "family", "layout", "run", "typed", "code", "entry", "parallel", "job")

    def __init__(self, role: str, spec: Specialization, lo: int, hi: int, family: Any, compiled: bool = True,
                 layout: tuple = ()):
        self.role, self.spec, self.lo, self.hi, self.family, self.layout = role, spec, lo, hi, family, layout
        direct = compiled and not spec.bounds_sites
        self.run = backend_object(spec.backend).run if direct else None
        self.typed, self.code, self.parallel = spec.typed, spec.code, spec.parallel
        self.entry = entry_of(spec) if direct else None
        # compiling ahead (runtime/compile_pool.py): None, not yet asked; a Job, settled at the first call;
        # False, nothing to do
        self.job: Any = None if direct else False

    @property
    def label(self) -> str:
        """e.g. "gather[0:4]": the role and the lanes (none for a launch)."""
        return self.role if self.hi == 0 else f"{self.role}[{self.lo}:{self.hi}]"

    def ahead(self, dim: tuple[int, ...], values: list) -> None:
        """Have a worker process compile this run ahead of its first call (runtime/compile_pool.py)."""
        if self.job is None:
            self.job = submit(self.spec.backend, self.code, self.entry, dim, values) or False

    def __call__(self, dim: tuple[int, ...], values: list) -> None:
        if self.job:
            job, self.job = self.job, False
            settle(job)
        if _OBSERVERS:
            t = time.perf_counter()
            self.launch(dim, values)
            dt = time.perf_counter() - t
            for fn in tuple(_OBSERVERS):
                fn(self, dim, dt)
            return
        if self.run is None:
            run_spec(self.spec, dim, values)
        else:
            self.run(self.typed, self.code, self.entry, self.parallel, dim, values)

    def launch(self, dim: tuple[int, ...], values: list) -> None:
        if self.run is None:
            run_spec(self.spec, dim, values)
        else:
            self.run(self.typed, self.code, self.entry, self.parallel, dim, values)


def int_positions(spec: Specialization) -> tuple[int, ...]:
    """Positions of the integer and bool scalar parameters among the kernel's values: with the signature,
    what the bounds proof, the race proof and the row-exactness facts of a launch depend on."""
    return tuple(n for n, p in enumerate(spec.typed.params)
                 if not isinstance(p.type, Array) and (p.type.is_int or p.type.is_bool))


def checks_settled(spec: Specialization, b: Binding, plain_adds: frozenset[str] = frozenset()) -> bool:
    """Whether the checks that just passed for binding `b` (check_bounds, check_races and, for a gradient
    whose shadows of `plain_adds` take plain adds, check_exclusive_rows) pass at every call with its
    signature and integer scalars: the bounds proof proved every affine access inside (no exact check ran)
    and no exact race check is needed; no array is read in segments (their pointers' values decide)."""
    if 0 in b.dim:
        return True
    proof = spec.bounds
    if proof is not None and proof.verdicts.get(proof.key(b.dim, b.kernel_values)) is not True:
        return False
    if needs_race_check(spec, b):
        return False
    # row exactness (passed) is a function of the dim, the shapes and the integer scalars
    return not any(name in plain_adds for name, _, _ in spec.facts.segments)


class Checks:
    """A call's checks that read its values: the rows of shadows taking plain adds (reverse mode:
    `plain_adds` not None), bounds, races, all on the primal `spec`; and their outcome per tuple of
    integer scalar values, for one signature: a tuple recorded here passed them and needs no check again."""

    __slots__ = ("spec", "kernel", "plain_adds", "ints", "passed")

    def __init__(self, spec: Specialization, kernel: str, plain_adds: frozenset[str] | None = None):
        self.spec, self.kernel, self.plain_adds = spec, kernel, plain_adds
        self.ints = int_positions(spec)
        self.passed: set = set()

    def ensure(self, bound: Bound) -> None:
        """Check `bound` unless its integer scalars passed before; remember the outcome where it is settled."""
        values, ints = bound.values, self.ints
        key = tuple([values[n] for n in ints]) if ints else ()
        if key in self.passed:
            return
        b, spec = bound.b, self.spec
        if self.plain_adds is not None:
            check_exclusive_rows(spec, b, self.kernel, self.plain_adds)
        check_bounds(spec, b)
        check_races(spec, b, self.kernel)
        if checks_settled(spec, b, self.plain_adds or frozenset()):
            if len(self.passed) >= MAX_PASSED:
                self.passed.clear()
            self.passed.add(key)


def made(cls: type, **fields: Any) -> Any:
    """An instance of dataclass `cls` with these fields, made without its __init__: a frozen dataclass's
    __init__ sets each field through object.__setattr__, a cost a call pays for every such record. Only
    for dataclasses without __post_init__ and with every field given (or defaulted on the class)."""
    obj = object.__new__(cls)
    obj.__dict__.update(fields)
    return obj


class Bound:
    """One call's values for a prepared call: the kernel's values (merged aliases dropped) and the shadows
    (tangents) by parameter, one per lane. Its Binding is made when a check or a recorder asks for it."""

    __slots__ = ("call", "values", "derivatives", "_b")

    def __init__(self, call: PreparedCall, values: list | tuple, derivatives: dict, b: Binding | None = None):
        self.call, self.values, self.derivatives, self._b = call, values, derivatives, b

    def with_values(self, values: list, derivatives: dict | None = None) -> Bound:
        """The same call with other values (and `derivatives`, where given) of the same kinds and geometry (a
        program's sweep hands a reverse views of saved copies in place of the buffers, program/contents.py, and
        of the memory that stands for a shadow, program/renames.py); its binding, where one was made, is kept
        (what a run reads of it, shapes, is the same)."""
        return Bound(self.call, values, self.derivatives if derivatives is None else derivatives, self._b)

    @property
    def given(self) -> Any:
        """The binding's values, one per parameter (a refilled call has no aliases: its values)."""
        return self.values if self._b is None else self._b.values

    @property
    def b(self) -> Binding:
        if self._b is None:  # a refilled call: no aliases, so its values are its kernel values
            tb = self.call.template[0]
            self._b = made(Binding, dim=tb.dim, types=tb.types, values=tuple(self.values), backend=tb.backend,
                           names=tb.names, aliases=(), strided=tb.strided)
        return self._b


class ReverseLayout:
    """What every reverse-mode call of one signature shares beyond its runs: the order of the adjoint
    arguments, the accumulators' order and type, the results, the tape's type and key, the stand-ins for
    tapes and counters no kernel reads (made once on the CPU: arrays.untouched)."""

    def __init__(self, f: KernelFunction, b: Binding, active: tuple, lanes: int, shadows: dict,
                 rs: ReverseSpecialization, compiled: bool = True):
        self.lanes, self.active = lanes, active
        self.backend = b.backend
        self.xp = array_module(b.backend) if compiled else None  # gk.inspect of CUDA needs no CuPy
        self.tape_key = (b.key, tuple(sorted(shadows)), active, lanes)
        order = [p.name for p in rs.primal.typed.params]
        self.shadow_order = tuple(n for n in order if n in shadows)  # the adjoint arguments' order
        self.acc_order = tuple(sorted(active, key=order.index))
        self.acc_type = rs.kernels.accumulator_type.numpy
        self.results = tuple(p.name if p.name in active else None for p in f.ir.params)
        self.tape_type = rs.kernels.tape_float.numpy
        self.cpu = b.backend == "cpu"
        self.stand_ins: dict[tuple, Any] = {}
        self.untaped: tuple | None = None  # (tapes, counters): the stand-ins of an untaped call on the CPU
        # the augmented primal's copy-on-write saves (transforms/saves.py): each saved parameter's
        # name and position among the kernel's values
        self.saved = tuple((n, order.index(n)) for n in rs.kernels.saved_in_place)

    def untouched(self, shape: tuple, dtype) -> Any:
        if not self.cpu:
            return untouched(self.backend, shape, dtype)
        key = (shape, dtype)
        a = self.stand_ins.get(key)
        if a is None:
            a = self.stand_ins[key] = untouched(self.backend, shape, dtype)
        return a


class PreparedCall:
    """A call signature, validated, specialised and checked once (docs/prepared-call.md): its `mode`, its
    `key` (None: not cached), the binding `template` a later call is refilled into with the differentiated
    parameters' `names`, its `checks`, its `runs` in run order (`split`: the split reverse's, `roles`: the
    role pattern gk.inspect reports), the mode's specialisation `spec` (a Specialization; the first lane
    group's ReverseSpecialization; the last lane group's ForwardSpecialization) and the mode's `layout`."""

    __slots__ = ("kernel", "generation", "mode", "key", "template", "names", "dim", "spec", "checks", "runs",
                 "_split", "roles", "layout", "plain", "ahead", "extents", "replay",
                 "primal_launch", "converts", "untaped_tape", "device")

    def __init__(self, kernel: KernelFunction, mode: str, b: Binding, spec: Any, checks: Checks, runs: tuple,
                 roles: tuple, names: tuple = (), split: Any = (), layout: Any = None):
        self.kernel, self.generation, self.mode, self.key = kernel, kernel._specs.generation, mode, None
        self.template, self.names, self.dim = template_of(b), names, b.dim
        self.spec, self.checks, self.runs, self._split = spec, checks, runs, split
        self.roles, self.layout = roles, layout
        self.ahead = True  # its later runs not yet offered to the compile pool (runtime/reverse.py)
        # each gather run's launch domain: a function of the dim and the arrays' shapes, which the signature fixes
        self.extents: dict = {}
        # its reverse replayed, its augmented primal's launcher (runtime/reverse.py): None, not yet asked; False, none
        self.replay: Any = None
        self.primal_launch: Any = None
        # no annotation in the signature (a launch's): the refill converts the scalars at these positions alone
        self.plain: tuple[tuple[int, Any], ...] | None = None
        # the positions of the scalars a refill converts and how (refill_known: no pass over the other values)
        self.converts = tuple((n, convert) for n, convert in enumerate(self.template[1]) if convert is not None)
        self.untaped_tape: Any = None  # the one Tape of a call that tapes and counts nothing (runtime/reverse.py)
        self.device: int | None = None  # a kept CuPy call's GPU, which must be current at each refill

    @property
    def primal(self) -> Specialization:
        """The primal specialisation, whose facts and checks the call's are."""
        return self.checks.spec

    @property
    def split(self) -> tuple:
        """The split reverse's runs, made on first use (a fused plan never prints them: compile-time.md, 13)."""
        self._split = self._split() if callable(self._split) else self._split
        return self._split


def refill(call: PreparedCall, args: tuple) -> Bound | None:
    """The only refill path: the values of `args`, whose signature `call` was prepared for (scalars
    converted, annotations unwrapped), and their shadows (a tuple of lanes per differentiated argument);
    None when an Active value is not finite (the full path then raises what a first call would). A caller that
    knows the annotations refills from the plain values instead (`refill_known`)."""
    if call.plain is not None:
        return _refill_plain(call, args)
    values, derivatives = [], []
    for a, convert in zip(args, call.template[1]):
        t = type(a)
        if t is Duplicated or t is DuplicatedNoNeed:
            derivatives.append((a.dval,))
            a = a.val
        elif t is Active:
            a = a.val
            if not isfinite(a):
                return None
        elif t is Const:
            a = a.val
        elif t is BatchDuplicated:
            derivatives.append(tuple(a.dvals))
            a = a.val
        values.append(a if convert is None else convert(a))
    return Bound(call, values, dict(zip(call.names, derivatives)) if derivatives else {})


def _refill_plain(call: PreparedCall, args: tuple) -> Bound:
    """The refill of a call without annotations in its signature (a launch's): its scalars converted."""
    values = list(args)
    for n, convert in call.plain:
        values[n] = convert(values[n])
    return Bound(call, values, {})


def again(call: PreparedCall, kernel: KernelFunction, args: tuple, known: tuple | None = None) -> Bound | None:
    """`args` refilled into `call`, prepared for their signature, and its checks ensured; None where `call` is
    another kernel's or of an older generation of its specialisations, or refilling fails (the full path then
    raises what a first call would). `prepare`'s hit path, and a program's replay of a launch whose arguments'
    signature is known to be `call.key` (program/replay.py), which gives `args` as plain values with what their
    annotations were (`known`: see `refill_known`)."""
    if call.kernel is not kernel or call.generation != kernel._specs.generation or \
            (call.device is not None and current_device() != call.device):
        return None
    if kernel._captured is not None:
        kernel.check_module_names()
    bound = refill(call, args) if known is None else refill_known(call, args, *known)
    if bound is not None:
        call.checks.ensure(bound)
    return bound


def refill_known(call: PreparedCall, values: tuple, active: tuple[int, ...], derivatives: dict) -> Bound | None:
    """`refill` of annotated arguments given as their plain values (annotations unwrapped), the positions of the
    Active ones and the shadows by parameter (what `refill` collects from the annotations, the same objects);
    None when an Active value is not finite."""
    for n in active:
        if not isfinite(values[n]):
            return None
    if call.plain is not None:
        return _refill_plain(call, values)
    out = list(values)
    for n, convert in call.converts:
        out[n] = convert(out[n])
    # a tuple: the collector stops tracking a tuple of arrays and floats, and a program's recorded step keeps
    # this Bound until its reverse (docs/programs.md#session-48-fewer-objects-and-passes-per-step)
    return Bound(call, tuple(out), derivatives)


def prepare(kernel: KernelFunction, args: tuple, dim: Any, backend: str | None, mode: str,
            inspect_only: bool = False) -> tuple[PreparedCall, Bound]:
    """Validate a call of `mode` (docs/prepared-call.md), fetch or build its specialisations, check bounds,
    races and rows; touches no buffer. Returns the signature's prepared call and the call's values. A
    signature prepared before is refilled and its checks ensured. `inspect_only` (gk.inspect): CUDA without
    a GPU, nothing compiled, checked or cached."""
    key = None if inspect_only else signature(kernel, mode, dim, backend, args)
    if key is not None:
        call = _CALLS.get(key)
        bound = again(call, kernel, args) if call is not None else None
        if bound is not None:
            return call, bound
    kernel.check_module_names()
    if mode == "launch":
        call, bound = _launch(kernel, args, dim, backend, inspect_only)
    elif mode == "reverse":
        call, bound = _reverse(kernel, args, dim, backend, inspect_only)
    elif mode == "forward":
        call, bound = _forward(kernel, args, dim, backend, inspect_only)
    else:
        raise InternalError(f"mode must be one of {MODES}, got {mode!r}")
    if inspect_only:
        return call, bound
    call.checks.ensure(bound)
    if key is not None and not bound.b.aliases:
        if len(_CALLS) >= MAX_CALLS:
            _CALLS.clear()
        call.key = key
        if bound.b.backend == "cuda" and any(is_cupy_array(v) for v in bound.b.values):
            call.device = current_device()
        if not any(isinstance(a, Annotation) for a in args):
            call.plain = tuple((n, convert) for n, convert in enumerate(call.template[1]) if convert is not None)
        _CALLS[key] = call
    return call, bound


def cached(kernel: KernelFunction, mode: str, dim: Any, backend: str | None, args: tuple) -> PreparedCall | None:
    """The prepared call kept for this call's signature, or None."""
    key = signature(kernel, mode, dim, backend, args)
    call = None if key is None else _CALLS.get(key)
    return call if call is not None and call.kernel is kernel else None


def _launch(k: KernelFunction, args: tuple, dim: Any, backend: str | None, inspect_only: bool):
    plain = []
    for a in args:
        while isinstance(a, Const):  # gk.Const(x): x, with no derivative wanted (docs/host-code.md)
            a = a.val
        plain.append(a)
    b = bind(k.ir, dim, tuple(plain), backend, inspect_only)
    spec = primal_specialization(k, b)
    call = PreparedCall(k, "launch", b, spec, Checks(spec, k.name),
                        (Run("primal", spec, 0, 0, spec, not inspect_only),), ("primal",))
    return call, Bound(call, list(b.kernel_values), {}, b)


def _reverse(f: KernelFunction, args: tuple, dim: Any, backend: str | None, inspect_only: bool):
    """Reverse mode: each group of lanes' specialisation (Backend.lane_group), and the runs of
    `autodiff_plan`'s roles and of the split reverse, in run order (runtime/reverse.py)."""
    ann, b, shadows = annotated_binding(f, args, dim, backend, False, inspect_only)
    lanes = ann.lanes
    if lanes == 1:  # the common case, without the lane groups' bookkeeping
        groups: tuple = ((0, 1, reverse_specialization(f, b, shadows, ann.active, ann.no_need, 1)),)
    else:
        groups = tuple((lo, hi, reverse_specialization(f, b, {n: dxs[lo:hi] for n, dxs in shadows.items()},
                                                       ann.active, ann.no_need, hi - lo))
                       for lo, hi in lane_groups(lanes, backend_object(b.backend).lane_group))
    rs = groups[0][2]
    grouped = len(groups) > 1
    whole = reverse_specialization(f, b, shadows, ann.active, ann.no_need, lanes) if grouped and \
        grouped_fuses(rs) else None
    roles = autodiff_plan(rs, grouped)
    compiled = not inspect_only

    def run(role: str, r: ReverseSpecialization, lo: int, hi: int) -> Run:
        return Run(role, getattr(r, role), lo, hi, r, compiled)

    # a gather that does the reverse's work (transforms/fold.py) leaves no reverse launch; a pull
    # (transforms/pull.py) runs after the reverse, from the scratch slots it tapes
    def split() -> tuple:
        return (run("augmented_primal", rs, 0, lanes), *(r for g in groups for r in _split_runs(run, g[2], *g[:2])))
    if roles == ("fused",):
        runs: tuple = (run("fused", rs, 0, lanes),)
    elif roles == ("gather", "fused"):
        runs = (*(run("gather", g, lo, hi) for lo, hi, g in groups), run("fused", whole or rs, 0, lanes))
    elif roles == ("fused", "gather"):
        runs = (run("fused", rs, 0, lanes), run("gather", rs, 0, lanes))
    else:
        runs = split = split()
    plain_adds = frozenset(a for a, form in rs.adjoint_forms if form == "plain add")
    call = PreparedCall(f, "reverse", b, rs, Checks(rs.primal, f.name, plain_adds), runs, roles, tuple(shadows),
                        split, ReverseLayout(f, b, ann.active, lanes, shadows, rs, compiled))
    return call, Bound(call, list(b.kernel_values), shadows, b)


def _split_runs(run, g: ReverseSpecialization, lo: int, hi: int) -> tuple:
    """One group of lanes' runs after the augmented primal: gather then reverse (the reverse left out where
    the gather folds it in), or, for a pull, reverse then gather."""
    if g.gather is None:
        return (run("reverse", g, lo, hi),)
    if g.gather_pulls:
        return (run("reverse", g, lo, hi), run("gather", g, lo, hi))
    return (run("gather", g, lo, hi),) + (() if g.gather_folded else (run("reverse", g, lo, hi),))


SPLIT_PLAN = ("augmented_primal", "reverse")


def autodiff_plan(rs: ReverseSpecialization, grouped: bool = False) -> tuple[str, ...]:
    """The kernels (by role) `gk.autodiff` runs, in order: without a gather, the fused kernel, Active
    scalars or not (on the CPU their sums vectorise: docs/adjoint-forms.md, section 9); lanes in groups
    (`Backend.lane_group`): the augmented primal once, then each group's gather and reverse, or, with a
    gather and nothing taped (`grouped_fuses`), each group's gather then one fused launch of all lanes."""
    untaped = rs.kernels.static_slots == (0, 0)
    if grouped:
        if grouped_fuses(rs):
            return ("gather", "fused")
        if rs.gather is None:
            return SPLIT_PLAN
        return ("augmented_primal", "gather") if rs.gather_folded else ("augmented_primal", "gather", "reverse")
    if rs.gather is None:
        return ("fused",)
    if rs.gather_pulls:  # the fused kernel tapes the scratch the pull reads (transforms/pull.py)
        return ("fused", "gather")
    if untaped:  # the fused kernel after a folded gather is the primal alone (transforms/fold.py)
        return ("gather", "fused")
    return ("augmented_primal", "gather") if rs.gather_folded else ("augmented_primal", "gather", "reverse")


def grouped_fuses(rs: ReverseSpecialization) -> bool:
    """Whether vector mode in groups runs each group's gather then one fused launch of all lanes: where
    there is a gather and nothing is taped (its one-lane plan is gather + fused)."""
    return rs.gather is not None and rs.kernels.static_slots == (0, 0)


def _forward(f: KernelFunction, args: tuple, dim: Any, backend: str | None, inspect_only: bool):
    """Forward mode. Vector mode on a backend with a lane group (`Backend.lane_group`) runs every group of
    lanes but the last as the tangent work alone, before the last group runs it with the primal's stores,
    when the kernel reads no array it writes (so each group sees the memory as it was on entry); otherwise
    all lanes in one launch."""
    ann, b, tangents = annotated_binding(f, args, dim, backend, True, inspect_only)
    groups = lane_groups(ann.lanes, backend_object(b.backend).lane_group)

    def lanes_of(lo: int, hi: int) -> dict:
        return {n: ts[lo:hi] for n, ts in tangents.items()}

    last = forward_specialization(f, b, lanes_of(*groups[-1]), groups[-1][1] - groups[-1][0])
    if len(groups) > 1 and not last.separable:
        groups = [(0, ann.lanes)]
        last = forward_specialization(f, b, tangents, ann.lanes)
    specs = [forward_specialization(f, b, lanes_of(lo, hi), hi - lo, primal_stores=False)
             for lo, hi in groups[:-1]] + [last]
    runs = []
    for fs, (lo, hi) in zip(specs, groups):
        # (tangent's parameter, scalar conversion or None) in the tangent kernel's order
        layout = tuple((p.name, None if is_array(tangents[p.name][0]) else p.type.numpy)
                       for p in fs.primal.typed.params if p.name in tangents)
        params = [q.name for q in fs.tangent.typed.params]
        expected = len(b.kernel_values) + sum(len(tangents[n][lo:hi]) for n in fs.tangents)
        if len(params) != expected or any(tangent_param(fs.tangents[n], 0, fs.lanes) not in params
                                          for n in fs.tangents):
            raise InternalError("the tangent kernel's parameters do not match the annotations")
        runs.append(Run("forward_mode", fs.tangent, lo, hi, fs, not inspect_only, layout))
    call = PreparedCall(f, "forward", b, last, Checks(last.primal, f.name), tuple(runs), ("forward_mode",),
                        tuple(tangents))
    return call, Bound(call, list(b.kernel_values), tangents, b)
