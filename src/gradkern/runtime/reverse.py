"""Reverse mode for one kernel: `gk.autodiff` fused in one launch, and split
(Enzyme's `autodiff_thunk`) into an augmented primal that returns a `Tape` and
a reverse that takes it. Both run a `PreparedReverse`: a validated,
specialised, bounds- and race-checked call, built once and run as often as needed (a
program's tape holds a list of them).

Shadows are updated in place with docs/shadows-and-modes.md's semantics; the primals end with
their post-kernel values, as after `gk.launch`.

Vector mode on a backend with a lane group (`Backend.lane_group`, the CPU) runs
the primal once, as the augmented primal, then each group of lanes' gather and
reverse from that one tape: a reverse launch writes only shadows and
accumulators, so every group sees the post-primal state a split reverse sees.
Where a gather exists and nothing is taped (the fused plan gather + fused), each
group's gather runs on the memory as it was on entry, then one fused launch runs
the primal and every lane's remaining reverse work (for a stencil: zeroing the
written arrays' shadows): k / group + 1 launches instead of 2 k / group + 1. A
gather writes only its own lanes' gathered shadows and reads no shadow another
group's gather writes (those are the arrays it gathers, each lane its own), so
each lane sees exactly what its one-lane call would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..annotations import Annotation, Const
from ..backends import backend as backend_object
from ..errors import AnnotationError
from ..ir.interp import interpret
from ..kernel import KernelFunction
from ..pipeline import ReverseSpecialization
from .annotate import Annotated, AnnotatedEntry, annotated_entry, cached_annotations, lane_groups
from .arrays import array_module, is_cupy_array, owned_nbytes, untouched
from .binding import Binding
from .bounds_check import check_bounds
from .execute import run_spec
from .plans import Checks, Runner, checks_settled, int_positions, made, planned_call, valid
from .race_check import check_exclusive_rows, check_races
from .specialize import reverse_specialization


def tape_slots(rs: ReverseSpecialization, b: Binding, allow_compile: bool = True) -> tuple[int, int]:
    """(float, int) tape slots per thread: static, or the maximum the count
    kernel finds (run by the interpreter when compiling is not allowed)."""
    if rs.kernels.static_slots is not None:
        return rs.kernels.static_slots
    if not allow_compile:
        counts = np.zeros((*b.dim, 2), np.int64)
        values = [v.get() if is_cupy_array(v) else v for v in b.kernel_values]  # inspect: arrays could be CuPy
        interpret(rs.count.typed, b.dim, [*values, counts])
    else:
        counts = array_module(b.backend).zeros((*b.dim, 2), np.int64)
        run_spec(rs.count, b.dim, [*b.kernel_values, counts])
    if not counts.size:
        return 0, 0
    top = counts.reshape(-1, 2).max(axis=0).tolist()  # on the GPU, the one read-back a taped loop needs
    return int(top[0]), int(top[1])


def tape_bytes_per_thread(rs: ReverseSpecialization, b: Binding) -> int:
    nf, ni = tape_slots(rs, b, allow_compile=False)
    return nf * rs.kernels.tape_float.itemsize + ni * 8


@dataclass(frozen=True)
class Tape:
    """What an augmented primal leaves for its reverse: the per-thread tape, how
    much of it each thread used, and the signature it belongs to."""

    kernel: str
    key: tuple
    dim: tuple[int, ...]
    values: np.ndarray  # float values, shape (*dim, slots)
    ints: np.ndarray  # integer values (loop bounds, branch conditions), shape (*dim, slots)
    counts: np.ndarray  # shape (*dim, 2): how many float and int values each thread pushed

    @property
    def nbytes(self) -> int:
        """Bytes this tape holds (shared stand-ins for tapes or counters no kernel reads count 0)."""
        return owned_nbytes(self.values) + owned_nbytes(self.ints) + owned_nbytes(self.counts)


class ReversePlan:
    """What every reverse-mode call of one signature shares (runtime/plans.py): the specialisations,
    which kernels autodiff runs, the order of the adjoint arguments, the tape's and accumulators' types
    and the checks' outcomes. Holds no arrays of the caller's."""

    def __init__(self, f: KernelFunction, b: Binding, ann: Annotated, shadows: dict, rs: ReverseSpecialization,
                 groups: tuple, whole: ReverseSpecialization | None = None):
        self.kernel, self.generation = f, f._specs.generation
        self.rs, self.groups, self.whole, self.lanes, self.active = rs, groups, whole, ann.lanes, ann.active
        self.backend, self.xp = b.backend, array_module(b.backend)
        self.key = (b.key, tuple(sorted(shadows)), ann.active, ann.lanes)
        self.roles = autodiff_plan(rs, bool(ann.active), b.backend, grouped=bool(groups))
        order = [p.name for p in rs.primal.typed.params]
        self.shadow_order = tuple(n for n in order if n in shadows)  # the adjoint arguments' order
        self.acc_order = tuple(sorted(ann.active, key=order.index))
        self.acc_type = rs.kernels.accumulator_type.numpy
        self.results = tuple(p.name if p.name in ann.active else None for p in f.ir.params)
        self.shadow_names = tuple(shadows)  # in argument order, as annotate._reuse lists them
        self.plain_adds = frozenset(a for a, form in rs.adjoint_forms if form == "plain add")
        self.checks = Checks(int_positions(rs.primal))
        # a CPU launch's stand-ins for tapes and counters no kernel reads, made once (arrays.untouched)
        self.cpu = b.backend == "cpu"
        self.stand_ins: dict[tuple, Any] = {}
        self.tape_type = rs.kernels.tape_float.numpy
        self.runners: dict[int, tuple[Any, Runner]] = {}

    def runner(self, spec) -> Runner:
        """Runs `spec` (one of this signature's specialisations) as run_spec would."""
        hit = self.runners.get(id(spec))
        if hit is None or hit[0] is not spec:
            hit = self.runners[id(spec)] = (spec, Runner(spec))
        return hit[1]

    def untouched(self, shape: tuple, dtype) -> Any:
        if not self.cpu:
            return untouched(self.backend, shape, dtype)
        key = (shape, dtype)
        a = self.stand_ins.get(key)
        if a is None:
            a = self.stand_ins[key] = untouched(self.backend, shape, dtype)
        return a

    def prepare(self, entry: AnnotatedEntry, args: tuple) -> PreparedReverse | None:
        """The call of `args`, whose signature is this plan's; None where a value check fails (a
        non-finite Active value): the full path then raises what a first call would."""
        called = planned_call(entry.template, args)
        if called is None:
            return None
        b, primals, shadows = called
        values = b.values
        shadows = dict(zip(self.shadow_names, shadows))
        if not self.checks.settled(values):
            _check(self.kernel, self.rs, b, self.plain_adds)
            if checks_settled(self.rs.primal, b, self.plain_adds):
                self.checks.record(values)
        ann = made(Annotated, primals=tuple(primals), shadows=shadows, active=self.active,
                   no_need=entry.ann.no_need, lanes=self.lanes)
        return PreparedReverse(self.kernel, b, ann, shadows, self.rs, self.groups, self.whole, self)


@dataclass(eq=False)
class PreparedReverse:
    """A validated reverse-mode call: binding, annotations, shadows, specialisation."""

    kernel: KernelFunction
    b: Binding
    ann: Annotated
    shadows: dict[str, tuple]  # one shadow per lane
    rs: ReverseSpecialization  # of the first group of lanes, where lanes run in groups
    # vector mode in groups of lanes: (first lane, end lane, specialisation) per group; () when one launch runs all
    groups: tuple[tuple[int, int, ReverseSpecialization], ...] = ()
    # lanes in groups with a gather and nothing taped: the specialisation of all lanes, whose fused kernel runs
    # once after the groups' gathers (None: each group runs its own gather and reverse)
    whole: ReverseSpecialization | None = None
    plan: ReversePlan | None = None  # what the calls of this signature share; made here when not given

    def __post_init__(self):
        if self.plan is None:
            self.plan = ReversePlan(self.kernel, self.b, self.ann, self.shadows, self.rs, self.groups, self.whole)

    @property
    def key(self) -> tuple:
        return self.plan.key

    def fused(self) -> tuple:
        """Primal and reverse in one call (autodiff): returns the Active scalars' derivatives."""
        rs = self.rs
        roles = self.plan.roles
        if roles[-1] == "reverse":  # the augmented primal once, then (each group of lanes') gather and reverse
            return self.reverse(self.augmented_primal())
        accs = self._accumulators()
        tapes = self._allocate_tape()
        if roles == ("gather", "fused"):  # nothing taped: the gather needs only intact inputs and the shadows
            counts = self._counts(used=False)
            for lo, hi, group in self.groups or ((0, self.ann.lanes, rs),):  # each group's lanes, then all lanes
                self._gather(accs, tapes, counts, group, lo, hi)
        fused = (self.whole or rs).fused
        self._run(fused, [*self.b.kernel_values, *self._adjoint_values(accs), *tapes])
        return self._results(accs)

    def augmented_primal(self) -> Tape:
        """The primal, taping what the reverse will need (primals updated as by launch)."""
        values, ints = self._allocate_tape()
        counts = self._counts(used=self.rs.kernels.counted)
        self._run(self.rs.augmented_primal, [*self.b.kernel_values, values, ints, counts])
        return made(Tape, kernel=self.kernel.name, key=self.plan.key, dim=self.b.dim, values=values, ints=ints,
                    counts=counts)

    def reverse(self, tape: Tape) -> tuple:
        """The reverse on the arrays in their post-primal state; returns what autodiff would."""
        if tape.kernel != self.kernel.name or tape.key != self.key or tape.dim != self.b.dim:
            raise AnnotationError(f"this tape was made by forward for kernel '{tape.kernel}' with another "
                                  "signature or launch shape")
        accs = self._accumulators()
        for lo, hi, rs in self.groups or ((0, self.ann.lanes, self.rs),):
            if rs.gather is not None:
                self._gather(accs, (tape.values, tape.ints), tape.counts, rs, lo, hi)
            self._run(rs.reverse, [*self.b.kernel_values, *self._adjoint_values(accs, lo, hi), tape.values,
                                   tape.ints, tape.counts])
        return self._results(accs)

    # -- pieces ---------------------------------------------------------------------------------------------------
    def _run(self, spec, values: list):
        self.plan.runner(spec)(self.b.dim, values)

    def _allocate_tape(self) -> tuple:
        """The float and int tapes, sized by tape_slots, on the launch's device."""
        plan = self.plan
        nf, ni = tape_slots(self.rs, self.b)
        dim = self.b.dim
        floats, ints = (*dim, nf), (*dim, ni)
        float_type = plan.tape_type
        return (plan.xp.zeros(floats, float_type) if nf else plan.untouched(floats, float_type),
                plan.xp.zeros(ints, np.int64) if ni else plan.untouched(ints, np.int64))

    def _counts(self, used: bool = True):
        """Per-thread push counters of an augmented primal, on the launch's device
        (a one-element stand-in where no kernel reads them)."""
        if not used:
            return self.plan.untouched((*(1 for _ in self.b.dim), 2), np.int64)
        return self.plan.xp.zeros((*self.b.dim, 2), np.int64)

    def _gather(self, accs: dict, tapes: tuple, counts, rs: ReverseSpecialization | None = None, lo: int = 0,
                hi: int | None = None):
        """Run the gather kernel (of `rs`, for lanes lo:hi) over every element the
        stencil reaches (past the launch domain), with the launch extents as its
        neighbours' domain: it must see the incoming shadows, before the reverse
        zeroes any."""
        rs = rs or self.rs
        shapes = {n: v.shape for n, v in zip(self.b.names, self.b.values) if hasattr(v, "shape")}
        self.plan.runner(rs.gather)(rs.gather_extents(self.b.dim, shapes),
                                    [*self.b.kernel_values, *self._adjoint_values(accs, lo, hi), *tapes, counts,
                                     *self.b.dim])

    def _accumulators(self) -> dict[str, tuple]:
        """One element per Active scalar and lane: its derivative summed over all
        threads, in float64 also for float32 kernels (transforms/reverse.py)."""
        plan = self.plan
        zeros, dtype = plan.xp.zeros, plan.acc_type
        if plan.lanes == 1:
            return {n: (zeros(1, dtype),) for n in plan.acc_order}
        return {n: tuple(zeros(1, dtype) for _ in range(plan.lanes)) for n in plan.acc_order}

    def _adjoint_values(self, accs: dict[str, tuple], lo: int = 0, hi: int | None = None) -> list:
        """Shadow and accumulator arguments of lanes lo:hi (lane by lane), in the generated kernels' order
        (the accumulators' dict is in that order: `_accumulators`)."""
        shadows = self.shadows
        if lo == 0 and hi is None:
            return [*(dx for n in self.plan.shadow_order for dx in shadows[n]),
                    *(acc for lanes in accs.values() for acc in lanes)]
        return [*(dx for n in self.plan.shadow_order for dx in shadows[n][lo:hi]),
                *(acc for lanes in accs.values() for acc in lanes[lo:hi])]

    def _results(self, accs: dict[str, tuple]) -> tuple:
        """Active scalars' derivatives (a tuple of one per lane in vector mode), None for the rest."""
        if self.plan.lanes == 1:
            return tuple(None if n is None else float(accs[n][0][0]) for n in self.plan.results)
        return tuple(None if n is None else tuple(float(a[0]) for a in accs[n]) for n in self.plan.results)


SPLIT_PLAN = ("augmented_primal", "reverse")


def autodiff_plan(rs: ReverseSpecialization, active: bool, backend: str, grouped: bool = False) -> tuple[str, ...]:
    """The kernels (by role) `gk.autodiff` runs, in order. Where the backend sums Active scalars better
    apart from the primal (`Backend.split_reductions`) and nothing is taped, augmented primal + reverse;
    lanes in groups (`Backend.lane_group`): the augmented primal once, then each group's gather and reverse,
    or, with a gather and nothing taped (`grouped_fuses`), each group's gather then one fused launch of all
    lanes."""
    untaped = rs.kernels.static_slots == (0, 0)
    if grouped:
        if grouped_fuses(rs):
            return ("gather", "fused")
        return SPLIT_PLAN if rs.gather is None else ("augmented_primal", "gather", "reverse")
    if rs.gather is None:
        return SPLIT_PLAN if active and untaped and backend_object(backend).split_reductions else ("fused",)
    return ("gather", "fused") if untaped else ("augmented_primal", "gather", "reverse")


def prepare_reverse(f: KernelFunction, args: tuple, dim: Any, backend: str | None) -> PreparedReverse:
    """Validate everything and check bounds and races; touches no buffer. A signature prepared before
    reuses its plan (ReversePlan, runtime/plans.py): the checks of the call's values are made again."""
    entry = cached_annotations(f, args, dim, backend, False)
    if entry is not None and valid(entry.plan, f):
        prepared = entry.plan.prepare(entry, args)
        if prepared is not None:
            return prepared
    ann, b, shadows, entry = annotated_entry(f, args, dim, backend)
    if ann.lanes == 1:  # the common case, without the lane groups' bookkeeping (per-call cost)
        groups: tuple = ((0, 1, reverse_specialization(f, b, shadows, ann.active, ann.no_need, 1)),)
    else:
        groups = tuple((lo, hi, reverse_specialization(f, b, {n: dxs[lo:hi] for n, dxs in shadows.items()},
                                                       ann.active, ann.no_need, hi - lo))
                       for lo, hi in lane_groups(ann.lanes, backend_object(b.backend).lane_group))
    rs = groups[0][2]
    whole = None
    if len(groups) > 1 and grouped_fuses(rs):
        whole = reverse_specialization(f, b, shadows, ann.active, ann.no_need, ann.lanes)
    plain_adds = frozenset(a for a, form in rs.adjoint_forms if form == "plain add")
    _check(f, rs, b, plain_adds)
    prepared = PreparedReverse(f, b, ann, shadows, rs, groups if len(groups) > 1 else (), whole)
    if entry is not None:
        plan = prepared.plan
        if checks_settled(rs.primal, b, plain_adds):
            plan.checks.record(b.kernel_values)
        entry.plan = plan
    return prepared


def grouped_fuses(rs: ReverseSpecialization) -> bool:
    """Whether vector mode in groups runs each group's gather then one fused launch of all lanes: where
    there is a gather and nothing is taped (its one-lane plan is gather + fused)."""
    return rs.gather is not None and rs.kernels.static_slots == (0, 0)


def _check(f: KernelFunction, rs: ReverseSpecialization, b: Binding, plain_adds: frozenset[str]) -> None:
    """The checks of a reverse-mode call that read its values: rows, bounds, races."""
    check_exclusive_rows(rs.primal, b, f.name, plain_adds)
    check_bounds(rs.primal, b)
    check_races(rs.primal, b, f.name)


def reverse(f: KernelFunction, args: tuple, dim: Any, backend: str | None) -> tuple:
    """Reverse mode in one call: shadows accumulated in place, Active derivatives returned."""
    return prepare_reverse(f, args, dim, backend).fused()


def split(f: KernelFunction, activities: tuple, dim: Any, backend: str | None):
    """Split reverse mode (Enzyme's autodiff_thunk): returns (augmented_primal, reverse).

    `activities` gives each argument's annotation class (gk.Duplicated,
    gk.Active, gk.Const, ...) or an annotated example. The first callable runs
    the augmented primal (primals updated as by launch) and returns a Tape;
    `reverse(*args, tape)` runs the reverse on the arrays in their post-forward
    state and returns what autodiff would."""
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

    def augmented_primal(*args: Any) -> Tape:
        check(args)
        return prepare_reverse(f, args, dim, backend).augmented_primal()

    def reverse_pass(*args: Any) -> tuple:
        if not args or not isinstance(args[-1], Tape):
            raise AnnotationError("reverse(*args, tape): the last argument must be the Tape from forward")
        *args, tape = args
        check(tuple(args))
        return prepare_reverse(f, tuple(args), dim, backend).reverse(tape)

    return augmented_primal, reverse_pass
