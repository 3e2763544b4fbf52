"""Reverse mode for one kernel: `gk.autodiff` fused in one launch, and split
(Enzyme's `autodiff_thunk`) into an augmented primal that returns a `Tape` and
a reverse that takes it. Both run a prepared call (runtime/call.py, docs/prepared-call.md): a
validated, specialised, bounds- and race-checked call signature, built once, with one call's values
(a program's tape holds a list of them).

Shadows are updated in place with docs/shadows-and-modes.md's semantics; the primals end with
their post-kernel values, as after `gk.launch`.

Vector mode on a backend with a lane group (`Backend.lane_group`, the CPU) runs
the primal once, as the augmented primal, then each group of lanes' gather and
reverse from that one tape: a reverse launch writes only shadows and
accumulators, so every group sees the post-primal state a split reverse sees.
Where a gather exists and nothing is taped (the fused plan gather + fused), each
group's gather runs on the memory as it was on entry, then one fused launch runs
the primal and every lane's remaining reverse work (for a stencil: zeroing the
written arrays' shadows, unless the gathers do it: transforms/fold.py): k / group + 1 launches instead
of 2 k / group + 1. A
gather writes only its own lanes' gathered shadows and reads no shadow another
group's gather writes (those are the arrays it gathers, each lane its own), so
each lane sees exactly what its one-lane call would.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..annotations import Annotation, Const, activity_pattern
from ..backends import backend as backend_object
from ..errors import AnnotationError, TapeOverflowError
from ..ir.interp import interpret
from ..kernel import KernelFunction
from ..pipeline import ReverseSpecialization
from .arrays import array_module, is_cupy_array, owned_nbytes
from .binding import Binding
from .call import _OBSERVERS, Bound, PreparedCall, made, prepare
from .execute import run_spec

# Slots `tape_slots` leaves out of what the count kernel counted: 0, except in tests, which set it to force the
# overflow the pushes' guard catches (docs/adjoint-forms.md section 13, "The tape guard")
COUNT_SHORTFALL = 0


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
    top = lane_maxima(counts)  # on the GPU, one of the two read-backs a taped loop needs
    return max(top[0] - COUNT_SHORTFALL, 0), max(top[1] - COUNT_SHORTFALL, 0)


def lane_maxima(counts: Any) -> tuple[int, int]:
    """The largest float and int count of per-thread counters shaped (*dim, 2): one strided maximum per lane
    (NumPy's maximum over axis 0 of an (n, 2) array walks it two elements at a time: 22 ms for a million
    threads against 0.3 ms for the two, measured in docs/adjoint-forms.md section 13), one read-back on a GPU."""
    flat = counts.reshape(-1, 2)
    if is_cupy_array(flat):
        import cupy
        top = cupy.stack((flat[:, 0].max(), flat[:, 1].max())).tolist()
        return int(top[0]), int(top[1])
    return int(flat[:, 0].max()), int(flat[:, 1].max())


def check_tape(call: PreparedCall, tapes: tuple, counts: Any, fused: bool) -> None:
    """Raise TapeOverflowError where a thread pushed more than its tape's slots: its guarded pushes
    (transforms/tape_count.py: guard_pushes) dropped the rest and left its pointers past the slots in `counts`
    (the fused kernel stores them only then). Only for tapes sized by a count kernel."""
    if call.spec.kernels.count is None or not counts.size:
        return
    top = lane_maxima(counts)  # on the GPU, a read-back after the launch
    slots = (int(tapes[0].shape[-1]), int(tapes[1].shape[-1]))
    over = [(what, int(t), n) for what, t, n in zip(("float", "integer"), top, slots) if t > n]
    if not over:
        return
    what, pushed, room = over[0]
    shadows = ("the shadows hold the contributions of the threads that did not overflow (discard them)" if fused
               else "no shadow was touched")
    raise TapeOverflowError(
        f"kernel '{call.kernel.name}': a thread pushed {pushed} {what} values onto a tape the count kernel "
        f"sized for {room}: the count kernel and the kernel that pushes evaluated its loop conditions or bounds "
        f"differently. The pushes past the tape were dropped; the primal arrays hold their post-kernel values "
        f"and {shadows}", hint="please report it with the kernel (docs/adjoint-forms.md, section 13)")


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
    made_from: tuple | None = None  # autodiff_thunk's forward: what its primals were (`_origin`)

    @property
    def nbytes(self) -> int:
        """Bytes this tape holds (shared stand-ins for tapes or counters no kernel reads count 0)."""
        return owned_nbytes(self.values) + owned_nbytes(self.ints) + owned_nbytes(self.counts)


def run_fused(bound: Bound) -> tuple:
    """Primal and reverse in one call (autodiff): the prepared call's runs in order (call.autodiff_plan);
    returns the Active scalars' derivatives."""
    return _execute(bound, bound.call.runs)


def saved_in_place(bound: Bound) -> tuple[str, ...]:
    """The parameters whose old contents the augmented primal can copy into saves as it runs
    (`run_augmented_primal(bound, saves)`): each overwritten whole, at every thread's own element, unread."""
    return tuple(n for n, _ in bound.call.layout.saved)


def run_augmented_primal(bound: Bound, saves: dict[str, Any] | None = None) -> Tape:
    """The primal, taping what the reverse will need (primals updated as by launch). `saves`: for every name of
    `saved_in_place(bound)`, an array shaped like its argument that the launch fills with the argument's old
    contents (docs/programs.md#saved-copies-and-the-sweep); the launch must span the argument. The reverse's
    runs are then known: they are compiled ahead (runtime/compile_pool.py) while the caller goes on (a program
    records its next launches)."""
    call = bound.call
    taped = _taped(bound)
    tapes, counts = taped
    values = [*bound.values, *tapes, counts]
    values += _save_values(bound, saves)
    launch = call.primal_launch
    if launch and not _OBSERVERS:  # the launch of the call before, replayed (`_launcher`)
        launch(values)
    else:
        call.split[0](call.dim, values)
        if launch is None:
            call.primal_launch = _launcher(call.split[0], call.dim, values) or False
    check_tape(call, tapes, counts, False)
    if call.ahead:  # once per prepared call
        call.ahead = False
        for run, dim, values in _launches(bound, call.split[1:], _accumulators(call), tapes, counts):
            run.ahead(dim, values)
    if taped is call.layout.untaped:
        return _untaped(call)
    return made(Tape, kernel=call.kernel.name, key=call.layout.tape_key, dim=call.dim, values=tapes[0],
                ints=tapes[1], counts=counts, made_from=None)


def _untaped(call: PreparedCall) -> Tape:
    """The Tape of a call that tapes and counts nothing (the layout's stand-ins): one per prepared call, made
    once. A Tape is frozen, and every one this call leaves holds the same objects, so a time loop's steps share
    it instead of keeping a Tape and its dict each, objects the garbage collector would walk
    (docs/programs.md#session-47-where-the-microseconds-of-a-step-go-now)."""
    tape = call.untaped_tape
    if tape is None:
        tapes, counts = call.layout.untaped
        tape = call.untaped_tape = made(Tape, kernel=call.kernel.name, key=call.layout.tape_key, dim=call.dim,
                                        values=tapes[0], ints=tapes[1], counts=counts, made_from=None)
    return tape


def untaped_tape(bound: Bound) -> Tape | None:
    """The Tape `run_augmented_primal(bound)` would leave, without running it, where the signature tapes and
    counts nothing (the layout's stand-ins, kept once its first augmented primal ran on the CPU); None otherwise.
    For a launch whose outputs already hold what it would write (program/outputs.py)."""
    call = bound.call
    if call.layout.untaped is None or call.ahead:
        return None
    return _untaped(call)


def run_reverse(bound: Bound, tape: Tape, device: bool = False) -> tuple:
    """The reverse on the arrays in their post-primal state (the split runs after the augmented primal);
    returns what autodiff would. `device`: an Active scalar's derivative on a GPU comes back as the
    1-element device array it was summed into, not read (a program's sweep reads them all at its end:
    docs/programs.md, "On a GPU: no synchronisation per step")."""
    call = bound.call
    if tape.key is not call.layout.tape_key and (tape.kernel != call.kernel.name or tape.key != call.layout.tape_key
                                                 or tape.dim != call.dim):
        raise AnnotationError(f"this tape was made by forward for kernel '{tape.kernel}' with another "
                              "signature or launch shape")
    taped = ((tape.values, tape.ints), tape.counts)
    replay = call.replay
    if replay and not _OBSERVERS:
        return replay(bound, taped, device)
    got = _execute(bound, call.split[1:], taped, device)
    if replay is None:
        call.replay = _replay(bound, taped) or False
    return got


def _replay(bound: Bound, taped: tuple) -> Any:
    """The reverse of `bound`'s call as one backend launcher (Backend.launcher) where it is one run of one lane
    whose compilation is settled: what `_execute` would do for values of the same kinds and geometry (a
    program's sweep reverses the same prepared call step after step: docs/programs.md#host-cost-per-step),
    without the run's generator, `Run.__call__` and the backend's choices at each step; None otherwise."""
    call = bound.call
    runs = call.split[1:]
    if len(runs) != 1 or call.layout.lanes != 1 or runs[0].role not in ("gather", "reverse"):
        return None
    run = runs[0]
    ((_, dim, values),) = _launches(bound, runs, _accumulators(call), *taped)
    launch = _launcher(run, dim, values)
    if launch is None:
        return None
    gather = run.role == "gather"
    tail = tuple(call.dim) if gather else ()  # a gather's launch shape follows its counts (`_launches`)
    # one lane: `_accumulators`, `_adjoint_values` and `_results` of lanes 0:1 written out once, with what they
    # look up per call (the orders, the accumulators' type, each result's accumulator) looked up here: a sweep
    # runs this at every step (docs/programs.md#session-48-fewer-objects-and-passes-per-step)
    layout = call.layout
    zeros, dtype, order = layout.xp.zeros, layout.acc_type, layout.shadow_order
    accs = len(layout.acc_order)
    at = {n: k for k, n in enumerate(layout.acc_order)}
    results = tuple(None if n is None else at[n] for n in layout.results)

    on_device = layout.xp is not np

    def replay(bound: Bound, taped: tuple, device: bool = False) -> tuple:
        (tapes, counts) = taped
        if counts is None and gather:
            counts = _counts(call, False)
        values = [*bound.values]
        shadows = bound.derivatives
        for n in order:
            values += shadows[n]
        acc = []
        for _ in range(accs):
            acc.append(zeros(1, dtype))
        values += acc
        values += tapes
        values.append(counts)
        values += tail
        launch(values)
        out = []
        for k in results:
            out.append(None if k is None else acc[k] if device and on_device else float(acc[k][0]))
        return tuple(out)
    return replay


def _execute(bound: Bound, runs: tuple, taped: tuple | None = None, device: bool = False) -> tuple:
    """Run `runs` (roles augmented_primal, gather, reverse, fused) with one set of accumulators; the runs
    after the first are compiled ahead while the first compiles (runtime/compile_pool.py)."""
    call = bound.call
    accs = _accumulators(call)
    tapes, counts = taped if taped is not None else (None, None)
    launches = _launches(bound, runs, accs, tapes, counts)
    if call.ahead and len(runs) > 1:  # once per prepared call
        call.ahead = False
        launches = list(launches)
        for run, dim, values in launches[1:]:
            run.ahead(dim, values)
    for run, dim, values in launches:
        run(dim, values)
        if run.role in ("augmented_primal", "fused"):
            _check_run(bound, run.role, values)
    return _results(call, accs, device)


def _check_run(bound: Bound, role: str, values: list) -> None:
    """check_tape after an augmented primal or fused launch of `_launches`, from its values."""
    if role == "fused":  # [..., float tape, int tape, counts] where the tape is sized by a count kernel
        if bound.call.spec.kernels.count is not None:
            check_tape(bound.call, (values[-3], values[-2]), values[-1], True)
        return
    n = len(bound.values)  # [*values, float tape, int tape, counts, *saves]
    check_tape(bound.call, (values[n], values[n + 1]), values[n + 2], False)


def _launcher(run: Any, dim: tuple, values: list) -> Any:
    """`run`'s backend launcher for this dim and values like these (Backend.launcher), once the run has run:
    its compilation settled (none pending in the compile pool), not a bounds-checked one (run_spec); else None."""
    if run.job or run.run is None:
        return None
    return backend_object(run.spec.backend).launcher(run.typed, run.code, run.entry, run.parallel, dim, values)


def _launches(bound: Bound, runs: tuple, accs: dict, tapes: tuple | None, counts: Any) -> Iterator[tuple]:
    """(run, dim, values) of each of `runs`, made as the runs come (a generator: an augmented primal's
    tape is allocated just before it runs): an augmented primal gets the tape the later runs read; a
    gather or fused kernel without one gets a tape sized by tape_slots (and, the gather, a stand-in for
    the counters no kernel reads)."""
    call = bound.call
    dim, values = call.dim, bound.values
    for run in runs:
        role = run.role
        if role == "augmented_primal":
            tapes, counts = _taped(bound)
            yield run, dim, [*values, *tapes, counts, *_save_values(bound, None)]
            continue
        if tapes is None:
            tapes = _allocate_tape(bound)
        if role == "gather":
            if counts is None:
                counts = _counts(call, False)
            extents = call.extents.get(run)
            if extents is None:  # the same at every call of this signature (its dim and shapes are the key's)
                b = bound.b
                shapes = {n: v.shape for n, v in zip(b.names, b.values) if hasattr(v, "shape")}
                extents = call.extents[run] = run.family.gather_extents(dim, shapes)
            yield (run, extents, [*values, *_adjoint_values(bound, accs, run.lo, run.hi), *tapes, counts, *dim])
        elif role == "reverse":
            yield run, dim, [*values, *_adjoint_values(bound, accs, run.lo, run.hi), *tapes, counts]
        else:  # fused: every lane; with a tape sized by a count kernel, the counters an overflow is stored in
            guarded = [_counts(call, True)] if call.spec.kernels.count is not None else []
            yield run, dim, [*values, *_adjoint_values(bound, accs, 0, call.layout.lanes), *tapes, *guarded]


def _save_values(bound: Bound, saves: dict[str, Any] | None) -> list:
    """The augmented primal's save arguments and switch: the saves with the switch on, or each saved argument
    itself with the switch off (never read or written then)."""
    saved = bound.call.layout.saved
    if not saved:
        return []
    out = []  # loops, not generators: a time loop's every launch comes here
    if saves:
        for n, _ in saved:
            out.append(saves[n])
        out.append(1)
        return out
    values = bound.values
    for _, k in saved:
        out.append(values[k])
    out.append(0)
    return out


def _taped(bound: Bound) -> tuple:
    """The tapes and the per-thread push counters of an augmented primal, on the launch's device: on the CPU,
    where nothing is taped or counted, the layout's stand-ins, the same at every call of the signature."""
    layout = bound.call.layout
    if layout.untaped is not None:
        return layout.untaped
    kernels = bound.call.spec.kernels
    taped = _allocate_tape(bound), _counts(bound.call, kernels.counted)
    if layout.cpu and kernels.static_slots == (0, 0) and not kernels.counted:
        layout.untaped = taped
    return taped


def _counts(call: PreparedCall, used: bool) -> Any:
    """Per-thread push counters (a one-element stand-in where no kernel reads them)."""
    if not used:
        return call.layout.untouched((*(1 for _ in call.dim), 2), np.int64)
    return call.layout.xp.zeros((*call.dim, 2), np.int64)


def _allocate_tape(bound: Bound) -> tuple:
    """The float and int tapes, sized by tape_slots, on the launch's device."""
    call = bound.call
    layout = call.layout
    nf, ni = call.spec.kernels.static_slots or tape_slots(call.spec, bound.b)
    dim = call.dim
    floats, ints = (*dim, nf), (*dim, ni)
    return (layout.xp.zeros(floats, layout.tape_type) if nf else layout.untouched(floats, layout.tape_type),
            layout.xp.zeros(ints, np.int64) if ni else layout.untouched(ints, np.int64))


def _accumulators(call: PreparedCall) -> dict[str, tuple]:
    """One element per Active scalar and lane: its derivative summed over all
    threads, in float64 also for float32 kernels (transforms/reverse.py)."""
    layout = call.layout
    zeros, dtype = layout.xp.zeros, layout.acc_type
    if layout.lanes == 1:  # loops, not comprehensions: these run at every launch of a program's sweep
        accs = {}
        for n in layout.acc_order:
            accs[n] = (zeros(1, dtype),)
        return accs
    return {n: tuple(zeros(1, dtype) for _ in range(layout.lanes)) for n in layout.acc_order}


def _adjoint_values(bound: Bound, accs: dict[str, tuple], lo: int, hi: int) -> list:
    """Shadow and accumulator arguments of lanes lo:hi (lane by lane), in the generated kernels' order
    (the accumulators' dict is in that order: `_accumulators`)."""
    shadows, layout = bound.derivatives, bound.call.layout
    if lo == 0 and hi == layout.lanes:
        out: list = []
        for n in layout.shadow_order:
            out += shadows[n]
        for lanes in accs.values():
            out += lanes
        return out
    return [*(dx for n in layout.shadow_order for dx in shadows[n][lo:hi]),
            *(acc for lanes in accs.values() for acc in lanes[lo:hi])]


def _results(call: PreparedCall, accs: dict[str, tuple], device: bool = False) -> tuple:
    """Active scalars' derivatives (a tuple of one per lane in vector mode), None for the rest; with `device`,
    one lane's on a GPU as its 1-element device array (`run_reverse`)."""
    layout = call.layout
    if layout.lanes == 1:
        device = device and layout.xp is not np
        out = []
        for n in layout.results:
            out.append(None if n is None else accs[n][0] if device else float(accs[n][0][0]))
        return tuple(out)
    return tuple(None if n is None else tuple(float(a[0]) for a in accs[n]) for n in layout.results)


def reverse(f: KernelFunction, args: tuple, dim: Any, backend: str | None) -> tuple:
    """Reverse mode in one call: shadows accumulated in place, Active derivatives returned."""
    return run_fused(prepare(f, args, dim, backend, "reverse")[1])


def split(f: KernelFunction, activities: tuple, dim: Any, backend: str | None):
    """Split reverse mode (Enzyme's autodiff_thunk): returns (augmented_primal, reverse).

    `activities` gives each argument's annotation class (gk.Duplicated,
    gk.Active, gk.Const, ...) or an annotated example. The first callable runs
    the augmented primal (primals updated as by launch) and returns a Tape;
    `reverse(*args, tape)` runs the reverse on the arrays in their post-forward
    state and returns what autodiff would."""
    if len(activities) != len(f.ir.params):
        raise AnnotationError(f"kernel '{f.name}' takes {len(f.ir.params)} arguments; "
                              f"{len(activities)} activities were given")
    pattern = activity_pattern(activities, [f"'{p.name}'" for p in f.ir.params])

    def check(args: tuple):
        got = tuple(type(a) if isinstance(a, Annotation) else Const for a in args)
        for p, want, have in zip(f.ir.params, pattern, got):
            if not issubclass(have, want if want is not Annotation else Const):
                raise AnnotationError(f"argument '{p.name}' was declared {want.__name__} in autodiff_thunk "
                                      f"but is {have.__name__} here")

    def augmented_primal(*args: Any) -> Tape:
        check(args)
        bound = prepare(f, args, dim, backend, "reverse")[1]
        tape = run_augmented_primal(bound)
        if tape is not bound.call.untaped_tape:  # a tape of its own: it holds values of these primals
            tape.__dict__["made_from"] = _origin(args)
        return tape

    def reverse_pass(*args: Any) -> tuple:
        if not args or not isinstance(args[-1], Tape):
            raise AnnotationError("reverse(*args, tape): the last argument must be the Tape from forward")
        *args, tape = args
        check(tuple(args))
        bound = prepare(f, tuple(args), dim, backend, "reverse")[1]
        call = bound.call
        # a tape that holds no value reads nothing of another call's primals (an untaped call's, whichever
        # prepared call made it); else run_reverse names a mismatched kernel, key or dim
        if (tape is not call.untaped_tape and (tape.values.size or tape.ints.size) and tape.kernel == f.name
                and tape.key == call.layout.tape_key and tape.dim == call.dim):
            _check_origin(f, tape, tuple(args))
        return run_reverse(bound, tape)

    return augmented_primal, reverse_pass


def _origin(args: tuple) -> tuple:
    """What a split forward's tape was made from, argument by argument (docs/shadows-and-modes.md#fused-and-split):
    for an array, the object that owns its memory (weakly held where it can be, so a tape keeps no array alive)
    with its address, shape, strides and dtype; for a scalar, its value."""
    out = []
    for a in args:
        v = a.val if isinstance(a, Annotation) else a
        if not isinstance(v, np.ndarray) and not is_cupy_array(v):  # a NumPy scalar has an __array_interface__ too
            out.append(("value", v))
            continue
        root = v
        while getattr(root, "base", None) is not None:
            root = root.base
        try:
            owner: Any = weakref.ref(root)
        except TypeError:
            owner = lambda root=root: root  # noqa: E731 (held: it cannot be referred to weakly)
        out.append(("array", owner, geometry_of(v)))
    return tuple(out)


def geometry_of(v: Any) -> tuple:
    """An array's address, shape, strides and dtype."""
    address = v.__array_interface__["data"][0] if isinstance(v, np.ndarray) else v.data.ptr
    return address, tuple(v.shape), tuple(v.strides), str(v.dtype)


def _check_origin(f: KernelFunction, tape: Tape, args: tuple) -> None:
    """Refuse a split reverse whose tape was not made by a forward of these primals: the reverse reads the values
    the forward taped, so another call's tape (of the same signature) gave a wrong gradient without a word."""
    made_from = tape.made_from
    if made_from is None:
        raise AnnotationError(f"this tape of kernel '{f.name}' was not made by autodiff_thunk's forward",
                              hint="pass the Tape the forward returned")
    for p, was, now in zip(f.ir.params, made_from, _origin(args)):
        if was[0] != now[0]:
            same = False
        elif was[0] == "value":
            same = was[1] == now[1] or (was[1] != was[1] and now[1] != now[1])  # NaN is NaN
        else:
            same = was[1]() is not None and was[1]() is now[1]() and was[2] == now[2]
        if not same:
            raise AnnotationError(f"argument '{p.name}' is not the one this tape's forward was given: a split "
                                  "reverse takes the forward's primals (the same arrays, in their post-forward "
                                  "state, and the same scalars), since it reads what the forward taped from them",
                                  hint="run forward on these arguments first, and pass the Tape it returns")
