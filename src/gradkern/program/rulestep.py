"""Calls of functions with custom rules inside a program (docs/custom-rules.md), recorded
like launches: arguments annotated from the program's shadows (an array the
rule may write gets an internal shadow as a temporary written by a launch
does), the old contents of what the rule may write saved when an earlier
step's reverse reads them (copy-on-write), its augmented primal run with
launches and nested rule calls inside it unrecorded, and the post-call
contents of its `reads` arguments kept for its reverse by the same
copy-on-write (a later step that overwrites them saves them first).

What a rule may write is its `writes=` (every array argument without it).
The others are read-only during the call (NumPy flags; fingerprints on
device memory), so a write outside `writes=` is a RuleError, never a
silently stale save.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from math import isfinite
from typing import Any

import numpy as np

from ..annotations import Active, Const, Duplicated, DuplicatedNoNeed
from ..errors import RuleError
from ..recording import recording
from ..rules import CustomRule, RuleConfig
from ..runtime.arrays import device_memory, is_array
from .contents import Contents
from .devicefresh import host_made_error
from .fingerprint import fingerprint
from .guard import HostWriteGuard
from .scalars import ActiveScalar, non_finite
from .shadows import ShadowMap
from .steps import Step


@dataclass
class RuleStep(Step):
    """One recorded rule call: its annotated arguments, config and the tape its augmented primal returned."""

    rule: CustomRule | None = None
    args: tuple = ()
    config: RuleConfig | None = None

    @property
    def tape_bytes(self) -> int:
        return _nbytes(self.tape)

    @property
    def where(self) -> str:
        """Where the host-write guard says an array was locked."""
        return f"after step {self.number} of the program (a call of rule '{self.kernel}')"

    def derivatives(self, contents: Contents) -> tuple | None:
        if self.config is None:  # a call with nothing active
            return None
        contents.settle()  # a rule's reverse reads its arrays themselves
        with recording(None):  # the rule's own launches and rule calls run plainly
            got = self.rule.run_reverse(self.config, self.tape, self.args)
        self.tape = None
        self.rule.validated.add(pattern(self.args, self.config.width))
        return got


def pattern(args: tuple, width: int) -> tuple:
    """What a rule's reverse output is checked against: the annotations' kinds and the width."""
    return (width, *(type(a).__name__ for a in args))


def _nbytes(tape: Any) -> int:
    """The bytes of the arrays a rule's tape holds (in tuples, lists and dicts at any depth)."""
    if is_array(tape):
        return int(tape.nbytes)
    if isinstance(tape, (tuple, list)):
        return sum(_nbytes(x) for x in tape)
    if isinstance(tape, dict):
        return sum(_nbytes(x) for x in tape.values())
    return 0


@dataclass
class Call:
    """A rule call's arguments: as given (ActiveScalars included), as values, and which it may write."""

    rule: CustomRule
    given: tuple

    def __post_init__(self):
        self.plain = tuple(a.value if isinstance(a, ActiveScalar) else a for a in self.given)
        self.arrays = [a for a in self.plain if is_array(a)]
        written = {}
        for n, a in enumerate(self.plain):
            if is_array(a) and self.rule.may_write(n):
                written.setdefault(id(a), a)  # an array passed twice is saved once
        self.written = list(written.values())

    def active(self, shadows: ShadowMap) -> bool:
        return any(isinstance(a, ActiveScalar) for a in self.given) or any(
            shadows.find(a) is not None for a in self.arrays)

    def where(self, number: Any) -> str:
        return f"before rule call {number} ('{self.rule.name}')"


@dataclass
class _Binding:
    """A rule call as the checkpointed loop's bookkeeping sees a launch: its arguments, no extent."""

    values: tuple
    dim: tuple = ()


def run_checked(call: Call, guard: HostWriteGuard, before: str, run: Any) -> Any:
    """Run `run()` with the call's written arrays writable and the others read-only (a write to them is a
    RuleError naming the rule); host writes found first are ProgramError, as before a launch, and so is an
    input host code made on the device while recording (devicefresh.py; what the rule writes is its own)."""
    made = guard.made
    if made is not None and made.starts:
        written = {id(a) for a in call.written}
        for a in call.arrays:
            if id(a) not in written and made.holds(a):
                raise host_made_error(a, before.replace("before ", "", 1))
        for a in call.written:
            made.written(a)
    guard.check(call.arrays, before)
    # the rule's own launches and rule calls run plainly
    with guard.unlocked(call.written, before), _others_read_only(call), recording(None):
        return run()


@contextmanager
def _others_read_only(call: Call) -> Iterator[None]:
    written = {id(a) for a in call.written}
    others = [(n, a) for n, a in enumerate(call.plain) if is_array(a) and id(a) not in written]
    if call.rule.writes is None or not others:
        yield
        return
    flagged, prints = [], []
    for n, a in others:  # device memory is fingerprinted (on hostcuda, NumPy's flags stay too)
        if isinstance(a, np.ndarray) and a.flags.writeable:
            a.flags.writeable = False
            flagged.append(a)
        if not isinstance(a, np.ndarray) or device_memory(a):
            prints.append((n, a, fingerprint(a)))
    try:
        yield
    except ValueError as e:
        if "read-only" not in str(e):
            raise
        names = ", ".join(f"'{call.rule.params[n]}'" for n, _ in others)
        raise RuleError(f"rule '{call.rule.name}' wrote an argument its writes= does not list (one of {names}): {e}",
                        hint="add it to writes=") from e
    finally:
        for a in flagged:
            a.flags.writeable = True
    for n, a, fp in prints:
        if fingerprint(a) != fp:
            raise RuleError(f"rule '{call.rule.name}' wrote argument '{call.rule.params[n]}', which its writes= does "
                            "not list", hint="add it to writes=")


def record_reverse(rec: Any, rule: CustomRule, given: tuple) -> tuple[RuleStep, list, Any]:
    """A rule call in a reverse-mode program (ProgramRecorder.rule, which keeps the step): run as its augmented
    primal. Returns the step, the arrays the call took, and the primal's result for a call with nothing
    active (else None)."""
    call = Call(rule, given)
    shadows = rec.shadows
    active = call.active(shadows)
    if active:
        rule.require("reverse")  # before anything of the call runs
    step = RuleStep(len(rec.steps) + 1, rule.name, None, None)
    if rec.observer is not None:
        rec.observer(rule.name, call.written, _Binding(call.plain), [])
    for view in call.written:
        rec.versions.before_write(view, step.saves)
    result = None
    if not active:
        result = run_checked(call, rec.guard, call.where(step.number), lambda: rule.primal(*call.plain))
    else:
        annotated = []
        for n, a in enumerate(given):
            if isinstance(a, ActiveScalar):
                if not isfinite(a.value):
                    raise non_finite(a, rule.params[n] if n < len(rule.params) else str(n),
                                     f"rule call {len(rec.steps) + 1} ('{rule.name}')")
                annotated.append(Active(a.value))
                step.scalars[n] = a
            elif is_array(a) and a.dtype.kind == "f":
                ann = shadows.annotate(a, rule.may_write(n), internal=not rec.alone)
                if isinstance(ann, Duplicated) and rec.no_need.get(n):
                    ann = DuplicatedNoNeed(a, ann.dval)
                annotated.append(ann)
            else:
                annotated.append(Const(a))
        overwritten = tuple(is_array(a) and not rec.alone and not rule.kept(n) for n, a in enumerate(call.plain))
        needs_primal = not (rec.no_need and all(n in rec.no_need for n, a in enumerate(annotated)
                                                if isinstance(a, Duplicated)))
        step.config = RuleConfig(needs_primal, True, shadows.lanes, overwritten)
        step.rule, step.args = rule, tuple(annotated)
        step.tape = run_checked(call, rec.guard, call.where(step.number),
                                lambda: rule.run_augmented(step.config, step.args))
        for n, a in enumerate(call.plain):  # its reverse reads these as the call left them
            if is_array(a) and rule.kept(n):
                rec.versions.read_by_reverse(a)
    return step, call.arrays, result


def record_forward(rec: Any, rule: CustomRule, given: tuple, number: int) -> tuple[list, Any]:
    """A rule call, launch `number` of a forward-mode program (ForwardRecorder.rule): its forward rule,
    tangents following memory as for launches. Returns the arrays the call took and what it returns."""
    call = Call(rule, given)
    tangents = rec.tangents
    active = call.active(tangents)
    if active:
        rule.require("forward")
    where = call.where(number)
    if not active:
        result = run_checked(call, rec.guard, where, lambda: rule.primal(*call.plain))
    else:
        annotated = [a.with_tangent(tangents.lanes) if isinstance(a, ActiveScalar)
                     else tangents.annotate(a, rule.may_write(n)) if is_array(a) and a.dtype.kind == "f"
                     else Const(a) for n, a in enumerate(given)]
        config = RuleConfig(True, True, tangents.lanes, (False,) * len(given))
        result = run_checked(call, rec.guard, where, lambda: rule.run_forward(config, tuple(annotated)))
    return call.arrays, result


def run_plain(guard: HostWriteGuard, rule: CustomRule, given: tuple, where: str, before_run: Any) -> tuple:
    """A rule call run as its primal (a checkpointed loop's untaped step): `before_run(call, binding)` does
    the loop's bookkeeping first. Returns the call and the primal's result."""
    call = Call(rule, given)

    def run():
        before_run(call, _Binding(call.plain))
        return rule.primal(*call.plain)
    return call, run_checked(call, guard, where, run)


