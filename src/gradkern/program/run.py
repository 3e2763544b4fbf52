"""Reverse mode of a program (docs/programs.md): `gk.autodiff(fn, *args)` and the split
pair of `gk.autodiff_thunk(fn, *activities)`. The forward records `fn`
(record.py); the reverse sweeps the recorded steps backwards, each step's
reverse on the arrays as that step left them: after a step's reverse, what it
overwrote is its saves' contents again (contents.py: a whole-buffer save stands
for its buffer, read in place by the earlier reverses), and the primals end
with their post-program values.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..annotations import Active, Annotation, BatchDuplicated, Const, Duplicated, DuplicatedNoNeed, activity_pattern
from ..errors import AnnotationError, ProgramError
from ..recording import recording
from ..runtime.annotate import check_shadow
from ..runtime.arrays import is_array, is_cupy_array
from . import hostaxes, hostcalls, hostfiles, hostgather, hostmatmul, hostreads, hostshapes, hostufuncs  # noqa: F401  (each installs its methods on TrackedArray)
from .collectives import at_program_start, before_reverse
from .contents import Contents, writable
from .devicefresh import fresh_memory
from .guard import HostWriteGuard
from .hostcode import TrackedArray, track
from .record import ForwardRecorder, ProgramRecorder
from .renames import ShadowRenames, enabled
from .report import LaunchRow, ProgramInspection
from .rulestep import pattern
from .scalars import ActiveScalar
from .scalarsweep import ScalarSweep
from .shadows import ShadowMap
from .signature import check_count, check_ran, label, names
from .steps import ProgramStep, reverse_steps


@dataclass
class ProgramTape:
    """What a program's forward leaves for its reverse: the recorded steps with
    their kernel tapes and saved copies, and the program's own shadows."""

    fn: Callable
    args: tuple
    steps: list[ProgramStep]
    shadows: ShadowMap
    roots: dict[int, ActiveScalar]  # argument position -> its Active scalar
    scalars: dict[int, ActiveScalar]  # every Active scalar a launch took, by id; a loop's reverse adds more
    rules: list = field(default_factory=list)  # its active rule calls (None: one recorded in a loop's reverse)
    sweep: ScalarSweep | None = None  # the scalar tape's reverse (scalarsweep.py)
    used: bool = False

    @property
    def saved_bytes(self) -> int:
        """Bytes of old contents saved before launches overwrote them (copy-on-write)."""
        return sum(s.saved_bytes for s in self.steps)

    @property
    def kernel_tape_bytes(self) -> int:
        return sum(s.tape_bytes for s in self.steps)

    @property
    def bytes(self) -> int:
        """Everything the reverse holds: saved copies, kernel tapes, the shadows of unannotated arrays."""
        return self.saved_bytes + self.kernel_tape_bytes + self.shadows.internal_bytes

    @property
    def loops(self) -> list:
        """The checkpointed loops' entries (their `stats`: steps advanced, recomputed, reversed)."""
        return [s for s in self.steps if s.stats is not None]

    @property
    def steps_recomputed(self) -> int:
        """Steps the checkpointed loops ran again (known once the reverse has run)."""
        return sum(loop.stats.steps_recomputed for loop in self.loops)

    @property
    def peak_snapshot_bytes(self) -> int:
        """The largest the checkpointed loops' snapshots grew (each loop's peak, summed)."""
        return sum(loop.peak_bytes for loop in self.loops)

    def table(self) -> list[tuple[int, str, int, int]]:
        """Per launch: (number, kernel, saved bytes, kernel tape bytes)."""
        return [(s.number, s.kernel, s.saved_bytes, s.tape_bytes) for s in self.steps]

    def inspect(self) -> ProgramInspection:
        """The per-launch report `gk.inspect` gives (before the reverse frees what it reports)."""
        if self.used:
            raise ProgramError("this program tape was consumed by its reverse, which freed what it held",
                               hint="inspect the tape before the reverse")
        return ProgramInspection(tuple(LaunchRow(*row) for row in self.table()), self.shadows.internal_bytes)


def _lanes_of(a: Any, name: str) -> tuple:
    """The tangents (or shadows) of the argument `name`: one for Duplicated, k for BatchDuplicated."""
    if isinstance(a, Duplicated):
        return (a.dval,)
    dxs = tuple(a.dvals) if isinstance(a.dvals, (tuple, list)) else ()
    if not dxs:
        raise AnnotationError(f"argument {label(name)}: gk.BatchDuplicated takes a tuple of k >= 1 shadows")
    return dxs


def _one_width(lanes: dict[str, int]) -> int:
    """k of a vector-mode program (1 without one): every differentiated argument has the same."""
    widths = set(lanes.values())
    if len(widths) > 1:
        got = ", ".join(f"{label(n)}: {w or 1}" for n, w in lanes.items())
        raise AnnotationError("a vector-mode program needs every differentiated argument to be BatchDuplicated "
                              f"with the same number of shadows; got {got}")
    return max(widths.pop() if widths else 1, 1)


def _shadow_map(args: tuple, lanes: dict[str, int], params: list[str]) -> ShadowMap:
    """The shadows (or tangents) of the annotated arrays; made after every check, so that a refused call
    registers nothing."""
    shadows = ShadowMap(_one_width(lanes))
    for name, a in zip(params, args):
        if isinstance(a, (Duplicated, BatchDuplicated)) and is_array(a.val):
            shadows.register(name, a.val, _lanes_of(a, name))
    return shadows


def _call_args(fn: Callable, args: tuple, verb: str) -> tuple[tuple, ShadowMap, dict[int, ActiveScalar]]:
    """What `fn` receives (primals, Active scalars as ActiveScalar), the annotated shadows, the roots. The
    arguments are checked against `fn`'s signature first (signature.py) and named by its parameters."""
    check_count(fn, len(args), verb)
    params = names(fn, len(args))
    roots, out, lanes = {}, [], {}
    for n, (name, a) in enumerate(zip(params, args)):
        if isinstance(a, (Duplicated, BatchDuplicated)):
            dxs = _lanes_of(a, name)
            if not is_array(a.val) or a.val.dtype.kind != "f":
                raise AnnotationError(f"argument {label(name)} of the program is {type(a).__name__} but is not a "
                                      f"float array (got {_what(a.val)})")
            for dx in dxs:
                check_shadow(name, a.val, dx, "shadow")
            lanes[name] = len(dxs) if isinstance(a, BatchDuplicated) else 0
            out.append(track(a.val))
        elif isinstance(a, Active):
            if not isinstance(a.val, (int, float, np.integer, np.floating)) or isinstance(
                    a.val, (bool, np.bool_, np.timedelta64)):  # timedelta64: an np.integer, but a duration
                raise AnnotationError(f"argument {label(name)} is Active but is {type(a.val).__name__}, not a real "
                                      "number", hint="an array's derivative is carried by gk.Duplicated(x, dx)")
            roots[n] = ActiveScalar(a.val)
            out.append(roots[n])
        elif isinstance(a, Const):
            out.append(track(a.val))
        elif isinstance(a, Annotation):
            raise AnnotationError(f"argument {label(name)}: unknown annotation {type(a).__name__}")
        else:
            out.append(track(a))
    return tuple(out), _shadow_map(args, lanes, params), roots


def _what(x: Any) -> str:
    if is_array(x):
        return f"an array of dtype {x.dtype}"
    return type(x).__name__


def _run_guarded(fn: Callable, call: tuple, recorder, guard: HostWriteGuard, verb: str = "gk.autodiff") -> None:
    """Call `fn` with `recorder` taking its launches; a host write to a locked array becomes
    ProgramError; every array is writable again afterwards. `fn` gets its NumPy float arrays as
    TrackedArray views (hostcode.py), locked with their buffers."""
    guard.follow([a for a in call if isinstance(a, TrackedArray)])
    # CuPy arguments: printed now, so that a host write to one before a launch takes it is found; the device
    # memory host code allocates while recording is tracked (devicefresh.py, record.refuse_host_made)
    guard.made = made = fresh_memory(call)
    if made is not None:
        guard.lock([a for a in call if is_cupy_array(a)], "after the program started")
    hostcalls.recording_started()
    at_program_start()  # gradkern.mpi's trip-count checks count this program's calls (collectives.py)
    try:
        with recording(recorder), made.hook if made is not None else nullcontext():
            check_ran(fn(*call), fn, verb)
        guard.check(None, "when the program returned")
    except ValueError as e:
        err = guard.host_write_error(e)
        if err is not None:
            raise err from e
        raise
    finally:
        hostcalls.recording_ended()
        guard.release()
        recorder.host.recorded()


def record(fn: Callable, args: tuple, alone: bool = False, verb: str = "gk.autodiff") -> ProgramTape:
    """Run `fn` once, recording its launches (primals updated as by calling it). `alone`: `fn` is a
    function with a rule, differentiated by itself (its reverse follows at once)."""
    call, shadows, roots = _call_args(fn, args, verb)
    guard = HostWriteGuard()
    no_need = {n: True for n, a in enumerate(args) if isinstance(a, DuplicatedNoNeed)} if alone else None
    rec = ProgramRecorder(shadows, guard, alone=alone, no_need=no_need)
    _run_guarded(fn, call, rec, guard, verb)
    return ProgramTape(fn, args, rec.steps, shadows, roots, rec.scalars, rec.rules, rec.sweep)


def _unchecked_rules(tape: ProgramTape) -> bool:
    """Whether a rule call's reverse has not yet returned well-formed entries for its argument pattern."""
    return any(r is None or pattern(r.args, r.config.width) not in r.rule.validated for r in tape.rules)


def _reads(steps: list) -> bool:
    """Whether a step holds host reads (hostreads.py), which add into shadows the sweep does not rename."""
    return any(getattr(s, "reads", ()) for s in steps)


def sweep(tape: ProgramTape) -> tuple:
    """The reverse: shadows accumulated in place, the Active arguments' derivatives returned."""
    if tape.used:
        raise ProgramError("this program tape was already consumed by a reverse", hint="run the forward again")
    tape.used = True
    lanes = tape.shadows.lanes
    # a rule's reverse is checked when it returns, after it accumulated: until its argument pattern has
    # passed once, the user's shadows are kept so that a RuleError (or any error of the sweep) leaves them
    kept = [(dx, dx.copy()) for e in tape.shadows.entries if not e.internal for dx in e.shadow] \
        if _unchecked_rules(tape) else []
    renames = ShadowRenames([dx for e in tape.shadows.entries if not e.internal for dx in e.shadow]) \
        if lanes == 1 and enabled() and ShadowRenames.wanted(tape.steps) and not _reads(tape.steps) else None
    contents = Contents(renames=renames)  # the primals end as the program left them
    try:
        reverse_steps(tape.steps, lanes, contents)
    except BaseException:
        if renames is not None:
            renames.settle(final=True)  # before the kept shadows are written back
        for dx, data in kept:
            dx[...] = data
        raise
    finally:
        contents.finish()
        for loop in tape.loops:  # a checkpointed loop rebuilds the final state it gave no final copy of
            loop.rebuild_final()
    tape.shadows.give_back()
    (tape.sweep or ScalarSweep(tape.scalars)).finish()

    def result(s: ActiveScalar):
        return tuple(float(x) for x in np.broadcast_to(s.adjoint, (lanes,))) if lanes > 1 else s.adjoint
    return tuple(result(tape.roots[n]) if n in tape.roots else None for n in range(len(tape.args)))


def reverse(fn: Callable, args: tuple) -> tuple:
    return sweep(record(fn, args))


def _kept_buffers(args: tuple) -> list:
    """Copies of every array among the arguments, primals and shadows."""
    out = []
    for a in args:
        for x in (a.val, *_shadows_of(a)) if isinstance(a, Annotation) else (a,):
            if is_array(x):
                out.append((x, x.copy()))
    return out


def _shadows_of(a: Annotation) -> tuple:
    if isinstance(a, BatchDuplicated):
        return tuple(a.dvals) if isinstance(a.dvals, (tuple, list)) else ()
    return (a.dval,) if isinstance(a, Duplicated) else ()


def rule_alone(fn: Callable, args: tuple, mode: Any) -> Any:
    """`gk.autodiff` of a function with a rule (docs/custom-rules.md): the call recorded alone (every `overwritten`
    False) and its reverse run, or its forward rule; every buffer is left as it was if the rule fails."""
    kept = _kept_buffers(args)
    try:
        if mode == "forward":
            return forward(fn, args)
        return sweep(record(fn, args, alone=True))
    except BaseException:
        for x, data in kept:
            writable(x)[...] = data
        raise


def inspect(fn: Callable, args: tuple) -> ProgramInspection:
    """Record `fn` as the forward of autodiff_thunk does (the primals end in their post-program state,
    no shadow is touched) and report what its reverse would keep; the tape is then freed."""
    return record(fn, args, verb="gk.inspect").inspect()


def forward(fn: Callable, args: tuple) -> None:
    """Forward mode: the tangents of Duplicated arrays become those of their
    post-program values; a Duplicated scalar `gk.Duplicated(c, dc)` reaches `fn`
    as an ActiveScalar carrying the tangent dc. Vector mode: BatchDuplicated
    arrays and scalars carry k tangents, one per lane."""
    check_count(fn, len(args), "gk.autodiff")
    params = names(fn, len(args))
    roots, call, lanes = {}, [], {}
    for n, (name, a) in enumerate(zip(params, args)):
        if isinstance(a, Active):
            raise AnnotationError(f"argument {label(name)} is Active, a reverse-mode annotation; in forward mode a "
                                  "scalar takes a tangent", hint=f"gk.Duplicated({name}, 1.0)")
        if isinstance(a, (Duplicated, BatchDuplicated)):
            dxs = _lanes_of(a, name)
            lanes[name] = len(dxs) if isinstance(a, BatchDuplicated) else 0
            if not is_array(a.val):
                if not all(isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))
                           for x in (a.val, *dxs)):
                    raise AnnotationError(f"argument {label(name)} is {type(a).__name__}: a scalar's value and "
                                          "tangents must be real numbers")
                tangent = float(dxs[0]) if len(dxs) == 1 and isinstance(a, Duplicated) else \
                    np.array([float(x) for x in dxs])
                roots[n] = ActiveScalar(a.val, tangent=tangent)
                call.append(roots[n])
                continue
            if a.val.dtype.kind != "f":
                raise AnnotationError(f"argument {label(name)} of the program is {type(a).__name__} but is not a "
                                      f"float array (got {_what(a.val)})")
            for dx in dxs:
                check_shadow(name, a.val, dx, "tangent")
            call.append(track(a.val))
        elif isinstance(a, Const):
            call.append(track(a.val))
        elif isinstance(a, Annotation):
            raise AnnotationError(f"argument {label(name)}: unknown annotation {type(a).__name__}")
        else:
            call.append(track(a))
    guard = HostWriteGuard()
    _run_guarded(fn, call, ForwardRecorder(_shadow_map(args, lanes, params), guard), guard)
    before_reverse()  # its end: processes that made calls meet there one whose extra call waits (collectives.py)


def split(fn: Callable, activities: tuple, alone: bool = False):
    """(forward, reverse) of a program: forward(*args) -> ProgramTape, reverse(*args, tape)."""
    check_count(fn, len(activities), "gk.autodiff_thunk")
    params = names(fn, len(activities))
    pattern = activity_pattern(activities, [label(n) for n in params])

    def check(args: tuple):
        if len(args) != len(pattern):
            raise AnnotationError(f"the program was declared with {len(pattern)} activities "
                                  f"({', '.join(params)}); got {len(args)} arguments")
        for name, want, a in zip(params, pattern, args):
            have = type(a) if isinstance(a, Annotation) else Const
            if not issubclass(have, want if want is not Annotation else Const):
                raise AnnotationError(f"argument {label(name)} was declared {want.__name__} in autodiff_thunk but "
                                      f"is {have.__name__} here")

    def forward(*args: Any) -> ProgramTape:
        check(args)
        return record(fn, args, alone, verb="the forward of gk.autodiff_thunk")

    def reverse_pass(*args: Any) -> tuple:
        if not args or not isinstance(args[-1], ProgramTape):
            raise AnnotationError("reverse(*args, tape): the last argument must be the ProgramTape from forward")
        *args, tape = args
        check(tuple(args))
        for name, a, b in zip(params, args, tape.args):
            if isinstance(a, Duplicated) and (a.val is not b.val or a.dval is not b.dval):
                raise AnnotationError(f"argument {label(name)}: reverse must be given the arrays and shadows the "
                                      "forward recorded")
        return sweep(tape)

    return forward, reverse_pass
