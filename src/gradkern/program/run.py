"""Reverse mode of a program (DESIGN §6): `gk.autodiff(fn, *args)` and the split
pair of `gk.autodiff_thunk(fn, *activities)`. The forward records `fn`
(record.py); the reverse sweeps the recorded steps backwards, each step's
reverse on the arrays as that step left them: after a step's reverse, what it
overwrote is written back from its saves, which are freed. The buffers written
back are copied once before the sweep and restored after it, so the primals
end with their post-program values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..annotations import Active, Annotation, BatchDuplicated, Const, Duplicated
from ..errors import AnnotationError, ProgramError
from ..runtime.annotate import check_shadow
from ..runtime.arrays import is_array
from ..runtime.recording import recording
from .guard import HostWriteGuard
from .record import ForwardRecorder, ProgramRecorder, Step
from .scalars import ActiveScalar, backpropagate
from .shadows import ShadowMap, memory_root


def _writable(a: Any) -> Any:
    if isinstance(a, np.ndarray) and not a.flags.writeable:
        a.flags.writeable = True  # locked by the program while it recorded
    return a


@dataclass
class ProgramTape:
    """What a program's forward leaves for its reverse: the recorded steps with
    their kernel tapes and saved copies, and the program's own shadows."""

    fn: Callable
    args: tuple
    steps: list[Step]
    shadows: ShadowMap
    roots: dict[int, ActiveScalar]  # argument position -> its Active scalar
    scalars: list[ActiveScalar]
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

    def table(self) -> list[tuple[int, str, int, int]]:
        """Per launch: (number, kernel, saved bytes, kernel tape bytes)."""
        return [(s.number, s.kernel, s.saved_bytes, s.tape_bytes) for s in self.steps]


def _call_args(args: tuple) -> tuple[tuple, ShadowMap, dict[int, ActiveScalar]]:
    """What `fn` receives (primals, Active scalars as ActiveScalar), the annotated shadows, the roots."""
    roots, out, lanes = {}, [], {}
    for n, a in enumerate(args):
        if isinstance(a, (Duplicated, BatchDuplicated)):
            dxs = (a.dval,) if isinstance(a, Duplicated) else tuple(a.dvals) if isinstance(a.dvals, (tuple, list)) \
                else ()
            if not dxs:
                raise AnnotationError(f"argument {n}: gk.BatchDuplicated takes a tuple of k >= 1 shadows")
            if not is_array(a.val) or a.val.dtype.kind != "f":
                raise AnnotationError(f"argument {n} of the program is {type(a).__name__} but is not a float array")
            for dx in dxs:
                check_shadow(f"argument {n}", a.val, dx, "shadow")
            lanes[n] = len(dxs) if isinstance(a, BatchDuplicated) else 0
            out.append(a.val)
        elif isinstance(a, Active):
            roots[n] = ActiveScalar(a.val)
            out.append(roots[n])
        elif isinstance(a, Const):
            out.append(a.val)
        elif isinstance(a, Annotation):
            raise AnnotationError(f"argument {n}: unknown annotation {type(a).__name__}")
        else:
            out.append(a)
    widths = set(lanes.values())
    if len(widths) > 1:
        got = ", ".join(f"argument {n}: {w or 1}" for n, w in lanes.items())
        raise AnnotationError("a vector-mode program needs every differentiated array to be BatchDuplicated with the "
                              f"same number of shadows; got {got}")
    shadows = ShadowMap(max(widths.pop() if widths else 1, 1))
    for n, a in enumerate(args):  # after every check: nothing registered for a refused call
        if isinstance(a, Duplicated):
            shadows.register(f"argument {n}", a.val, (a.dval,))
        elif isinstance(a, BatchDuplicated):
            shadows.register(f"argument {n}", a.val, tuple(a.dvals))
    return tuple(out), shadows, roots


def _run_guarded(fn: Callable, call: tuple, recorder, guard: HostWriteGuard) -> None:
    """Call `fn` with `recorder` taking its launches; a host write to a locked array becomes
    ProgramError; every array is writable again afterwards."""
    try:
        with recording(recorder):
            fn(*call)
    except ValueError as e:
        err = guard.host_write_error(e)
        if err is not None:
            raise err from e
        raise
    finally:
        guard.release()


def record(fn: Callable, args: tuple) -> ProgramTape:
    """Run `fn` once, recording its launches (primals updated as by calling it)."""
    call, shadows, roots = _call_args(args)
    guard = HostWriteGuard()
    rec = ProgramRecorder(shadows, guard)
    _run_guarded(fn, call, rec, guard)
    return ProgramTape(fn, args, rec.steps, shadows, roots, rec.scalars)


def sweep(tape: ProgramTape) -> tuple:
    """The reverse: shadows accumulated in place, the Active arguments' derivatives returned."""
    if tape.used:
        raise ProgramError("this program tape was already consumed by a reverse", hint="run the forward again")
    tape.used = True
    lanes = tape.shadows.lanes
    final = {}  # the buffers the sweep writes back into, as the program left them
    for step in tape.steps:
        for saved in step.saves:
            root = memory_root(saved.view)
            if id(root) not in final:
                final[id(root)] = (root, root.copy())
    for step in reversed(tape.steps):
        if step.prepared is not None:
            got = step.prepared.reverse(step.tape)
            step.tape = None  # freed once used
            for pos, s in step.scalars.items():
                s.adjoint = s.adjoint + (np.asarray(got[pos]) if lanes > 1 else got[pos])  # per lane in vector mode
        for saved in reversed(step.saves):
            saved.restore()
    for root, data in final.values():  # the primals end as the program left them
        _writable(root)[...] = data
    backpropagate(tape.scalars)

    def result(s: ActiveScalar):
        return tuple(float(x) for x in np.broadcast_to(s.adjoint, (lanes,))) if lanes > 1 else s.adjoint
    return tuple(result(tape.roots[n]) if n in tape.roots else None for n in range(len(tape.args)))


def reverse(fn: Callable, args: tuple) -> tuple:
    return sweep(record(fn, args))


def forward(fn: Callable, args: tuple) -> None:
    """Forward mode: the tangents of Duplicated arrays become those of their
    post-program values; a Duplicated scalar `gk.Duplicated(c, dc)` reaches `fn`
    as an ActiveScalar carrying the tangent dc."""
    tangents, roots, call = ShadowMap(), {}, []
    for n, a in enumerate(args):
        if isinstance(a, BatchDuplicated):
            raise AnnotationError(f"argument {n}: gk.BatchDuplicated (vector mode) of a program is not available in "
                                  "this version", hint="differentiate the program once per tangent")
        if isinstance(a, Active):
            raise AnnotationError(f"argument {n} is Active, a reverse-mode annotation; in forward mode a scalar "
                                  "takes a tangent", hint="gk.Duplicated(c, 1.0)")
        if isinstance(a, Duplicated) and not is_array(a.val):
            roots[n] = ActiveScalar(a.val, tangent=float(a.dval))
            call.append(roots[n])
        elif isinstance(a, Duplicated):
            if a.val.dtype.kind != "f":
                raise AnnotationError(f"argument {n} of the program is Duplicated but is not a float array")
            check_shadow(f"argument {n}", a.val, a.dval, "tangent")
            call.append(a.val)
        elif isinstance(a, Const):
            call.append(a.val)
        elif isinstance(a, Annotation):
            raise AnnotationError(f"argument {n}: unknown annotation {type(a).__name__}")
        else:
            call.append(a)
    for n, a in enumerate(args):
        if isinstance(a, Duplicated) and is_array(a.val):
            tangents.register(f"argument {n}", a.val, (a.dval,))
    guard = HostWriteGuard()
    _run_guarded(fn, call, ForwardRecorder(tangents, guard), guard)


def split(fn: Callable, activities: tuple):
    """(forward, reverse) of a program: forward(*args) -> ProgramTape, reverse(*args, tape)."""
    pattern = tuple(a if isinstance(a, type) else type(a) for a in activities)

    def check(args: tuple):
        if len(args) != len(pattern):
            raise AnnotationError(f"the program was declared with {len(pattern)} activities; got {len(args)} "
                                  "arguments")
        for n, (want, a) in enumerate(zip(pattern, args)):
            have = type(a) if isinstance(a, Annotation) else Const
            if not issubclass(have, want if want is not Annotation else Const):
                raise AnnotationError(f"argument {n} was declared {want.__name__} in autodiff_thunk but is "
                                      f"{have.__name__} here")

    def forward(*args: Any) -> ProgramTape:
        check(args)
        return record(fn, args)

    def reverse_pass(*args: Any) -> tuple:
        if not args or not isinstance(args[-1], ProgramTape):
            raise AnnotationError("reverse(*args, tape): the last argument must be the ProgramTape from forward")
        *args, tape = args
        check(tuple(args))
        for n, (a, b) in enumerate(zip(args, tape.args)):
            if isinstance(a, Duplicated) and (a.val is not b.val or a.dval is not b.dval):
                raise AnnotationError(f"argument {n}: reverse must be given the arrays and shadows the forward "
                                      "recorded")
        return sweep(tape)

    return forward, reverse_pass
