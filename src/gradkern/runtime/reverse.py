"""Reverse mode for one kernel: `gk.autodiff` fused in one launch, and split
(Enzyme's `autodiff_thunk`) into an augmented primal that returns a `Tape` and
a reverse that takes it. Both run a `PreparedReverse`: a validated,
specialised, bounds- and race-checked call, built once and run as often as needed (a
program's tape holds a list of them).

Shadows are updated in place with DESIGN §2's semantics; the primals end with
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
from functools import cached_property
from typing import Any

import numpy as np

from ..annotations import Annotation, Const
from ..backends import backend as backend_object
from ..errors import AnnotationError
from ..ir.interp import interpret
from ..kernel import KernelFunction
from ..pipeline import ReverseSpecialization
from .annotate import Annotated, annotated_binding, lane_groups
from .arrays import array_module, is_cupy_array, owned_nbytes, untouched
from .binding import Binding
from .bounds_check import check_bounds
from .execute import run_spec
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


@dataclass(frozen=True)
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

    @cached_property
    def key(self) -> tuple:
        return (self.b.key, tuple(sorted(self.shadows)), self.ann.active, self.ann.lanes)

    def fused(self) -> tuple:
        """Primal and reverse in one call (autodiff): returns the Active scalars' derivatives."""
        rs = self.rs
        plan = autodiff_plan(rs, bool(self.ann.active), self.b.backend, grouped=bool(self.groups))
        if plan[-1] == "reverse":  # the augmented primal once, then (each group of lanes') gather and reverse
            return self.reverse(self.augmented_primal())
        accs = self._accumulators()
        tapes = self._allocate_tape()
        if plan == ("gather", "fused"):  # nothing taped: the gather needs only intact inputs and the shadows
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
        return Tape(self.kernel.name, self.key, self.b.dim, values, ints, counts)

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
        run_spec(spec, self.b.dim, values)

    def _allocate_tape(self) -> tuple:
        """The float and int tapes, sized by tape_slots, on the launch's device."""
        nf, ni = tape_slots(self.rs, self.b)
        be, xp = self.b.backend, array_module(self.b.backend)
        floats, ints = (*self.b.dim, nf), (*self.b.dim, ni)
        float_type = self.rs.kernels.tape_float.numpy
        return (xp.zeros(floats, float_type) if nf else untouched(be, floats, float_type),
                xp.zeros(ints, np.int64) if ni else untouched(be, ints, np.int64))

    def _counts(self, used: bool = True):
        """Per-thread push counters of an augmented primal, on the launch's device
        (a one-element stand-in where no kernel reads them)."""
        if not used:
            return untouched(self.b.backend, (*(1 for _ in self.b.dim), 2), np.int64)
        return array_module(self.b.backend).zeros((*self.b.dim, 2), np.int64)

    def _gather(self, accs: dict, tapes: tuple, counts, rs: ReverseSpecialization | None = None, lo: int = 0,
                hi: int | None = None):
        """Run the gather kernel (of `rs`, for lanes lo:hi) over every element the
        stencil reaches (past the launch domain), with the launch extents as its
        neighbours' domain: it must see the incoming shadows, before the reverse
        zeroes any."""
        rs = rs or self.rs
        shapes = {n: v.shape for n, v in zip(self.b.names, self.b.values) if hasattr(v, "shape")}
        run_spec(rs.gather, rs.gather_extents(self.b.dim, shapes),
                 [*self.b.kernel_values, *self._adjoint_values(accs, lo, hi), *tapes, counts, *self.b.dim])

    def _accumulators(self) -> dict[str, tuple]:
        """One element per Active scalar and lane: its derivative summed over all
        threads, in float64 also for float32 kernels (transforms/reverse.py)."""
        xp = array_module(self.b.backend)
        dtype = self.rs.kernels.accumulator_type.numpy
        return {n: tuple(xp.zeros(1, dtype) for _ in range(self.ann.lanes)) for n in self.ann.active}

    def _adjoint_values(self, accs: dict[str, tuple], lo: int = 0, hi: int | None = None) -> list:
        """Shadow and accumulator arguments of lanes lo:hi (lane by lane), in the generated kernels' order."""
        order = [p.name for p in self.rs.primal.typed.params]
        return [*(dx for n in order if n in self.shadows for dx in self.shadows[n][lo:hi]),
                *(acc for n in sorted(accs, key=order.index) for acc in accs[n][lo:hi])]

    def _results(self, accs: dict[str, tuple]) -> tuple:
        """Active scalars' derivatives (a tuple of one per lane in vector mode), None for the rest."""
        def value(lanes):
            got = tuple(float(a[0]) for a in lanes)
            return got[0] if self.ann.lanes == 1 else got
        return tuple(value(accs[p.name]) if p.name in accs else None for p in self.kernel.ir.params)


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
    """Validate everything and check bounds and races; touches no buffer."""
    ann, b, shadows = annotated_binding(f, args, dim, backend)
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
    check_exclusive_rows(rs.primal, b, f.name, {a for a, form in rs.adjoint_forms if form == "plain add"})
    check_bounds(rs.primal, b)
    check_races(rs.primal, b, f.name)
    return PreparedReverse(f, b, ann, shadows, rs, groups if len(groups) > 1 else (), whole)


def grouped_fuses(rs: ReverseSpecialization) -> bool:
    """Whether vector mode in groups runs each group's gather then one fused launch of all lanes: where
    there is a gather and nothing is taped (its one-lane plan is gather + fused)."""
    return rs.gather is not None and rs.kernels.static_slots == (0, 0)


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
