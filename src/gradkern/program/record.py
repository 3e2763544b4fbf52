"""Recording a program (docs/programs.md): `fn` runs once, eagerly; every launch it
makes, at any depth, arrives here through the recording hook (recording.py), is prepared
(validated, specialised, race-checked) as a split reverse-mode call and run as
its augmented primal. What the reverse will need is kept: each step's kernel
tape, and — copy-on-write — the old contents of what a launch overwrites
while an earlier step's reverse still needs them (versions.py). Calls of
functions with custom rules arrive through the same hook and are recorded
the same way (rulestep.py).

What a derivative step needs is known without reading kernel bodies: the
pipeline reports which primal arrays a kernel's reverse reads
(`ReverseSpecialization.reverse_reads`), and a parameter's `written` flag
says which ones a launch may change.
"""

from __future__ import annotations

from typing import Any

from ..annotations import Active, Const
from ..kernel import KernelFunction
from ..recording import Recorder
from ..rules import CustomRule
from ..runtime.arrays import is_array
from ..runtime.call import prepare
from ..runtime.forward import forward as forward_launch
from ..runtime.launch import run
from ..runtime.reverse import run_augmented_primal, saved_in_place
from .guard import HostWriteGuard
from .hostcode import HostTracker, unwrap_args
from .rulestep import record_forward, record_reverse
from .scalars import ActiveScalar
from .shadows import ShadowMap, memory_root
from .steps import ProgramStep, Step, after_launch
from .versions import Versions


def overwritten_whole(params, binding: Any, facts: Any) -> list:
    """The buffers this launch overwrites entirely without reading them: parameters the analysis found
    stored at every thread's own element and never read (`facts.overwritten`), passed as their whole buffer,
    launched over exactly its shape, and not passed again under another parameter."""
    roots = [id(memory_root(v)) for v in binding.values if is_array(v)]
    out = []
    for p, v in zip(params, binding.values):
        if p.name in facts.overwritten and is_array(v):
            root = memory_root(v)
            whole = v is root or (v.nbytes == root.nbytes and tuple(v.strides) == tuple(root.strides))
            if whole and tuple(binding.dim) == tuple(v.shape) and roots.count(id(root)) == 1:
                out.append(root)
    return out


class ProgramRecorder(Recorder):
    """Records the launches of one program call."""

    def __init__(self, shadows: ShadowMap, guard: HostWriteGuard, within: ProgramRecorder | None = None,
                 versions: Versions | None = None, observer: Any = None, alone: bool = False,
                 no_need: dict[int, bool] | None = None):
        """`within`: the program a checkpointed loop's taped segment belongs to (its shadows, host tracker,
        Active scalars and rule calls are this recorder's too); `observer(name, written views, binding,
        buffers overwritten whole)` is told of each launch and rule call before it runs. `alone`: gk.autodiff
        of a rule function alone: its reverse runs right after it, so nothing it reads can change in between
        (config.overwritten all False) and no later step needs internal shadows; `no_need`: its argument
        positions that are DuplicatedNoNeed."""
        self.shadows = shadows
        self.guard = guard
        self.versions = versions or Versions()  # copy-on-write of what a recorded reverse reads
        self.observer = observer
        self.in_loop = within is not None  # a checkpointed loop inside a step is refused
        self.steps: list[ProgramStep] = []
        # host code on the program's arrays (hostcode.py)
        self.host = within.host if within is not None else HostTracker(shadows)
        # every Active scalar a launch took; the active rule calls recorded (their reverses' output is checked)
        # (by id, each once: a checkpointed loop's steps take the same ones again and again)
        self.scalars: dict[int, ActiveScalar] = within.scalars if within is not None else {}
        self.rules: list = within.rules if within is not None else []
        self.alone = alone
        self.no_need: dict[int, bool] = no_need or {}

    def launch(self, kernel: KernelFunction, dim: Any, given: tuple, backend: str | None) -> None:
        params = kernel.ir.params
        args = unwrap_args(given, f"launch {len(self.steps) + 1} (kernel '{kernel.name}')")
        annotated, scalars = [], {}
        plain = tuple(a.value if isinstance(a, ActiveScalar) else a for a in args)
        active = any(isinstance(a, ActiveScalar) for a in args) or any(
            is_array(a) and self.shadows.find(a) is not None for a in args)
        for n, (p, a) in enumerate(zip(params, args)):
            if isinstance(a, ActiveScalar):
                annotated.append(Active(a.value))
                scalars[n] = a
            elif is_array(a) and active and a.dtype.kind == "f":
                # an active value written into an array nothing covers yet gives it a shadow
                annotated.append(self.shadows.annotate(a, p.written))
            else:
                annotated.append(Const(a))
        if len(args) != len(params):
            annotated = list(plain)  # the binding reports the count
        arrays = [a for a in args if is_array(a)]
        before = f"before launch {len(self.steps) + 1} (kernel '{kernel.name}')"
        with self.guard.unlocked(arrays, before):  # validated and run as the user's writable arrays
            step, written, reads = self._run(kernel, dim, plain, annotated, scalars, active, backend)
        for view in written:
            self.versions.written(view)
        for view in reads:  # this step's reverse reads these as the step left them
            self.versions.read_by_reverse(view)
        self._add(step, arrays)

    def rule(self, rule: CustomRule, given: tuple) -> Any:
        """A call of a function with a custom rule (rulestep.py); returns what the call returns."""
        step, arrays, result = record_reverse(self, rule, unwrap_args(given, f"rule call {len(self.steps) + 1} "
                                                                             f"('{rule.name}')"))
        if step.config is not None:  # an active call: the sweep checks what its reverse returns
            self.rules.append(step)
        self._add(step, arrays)
        return result

    def _add(self, step: Step, arrays: list) -> None:
        """A launch or rule call recorded: the arrays it took locked after it, its Active scalars kept."""
        self.guard.lock(arrays, step.where)
        for s in step.scalars.values():
            self.scalars.setdefault(id(s), s)
        self.steps.append(step)

    def _run(self, kernel, dim, plain, annotated, scalars, active, backend) -> tuple[Step, list, list]:
        """Prepare the launch, save what it overwrites that an earlier reverse reads, run it.
        Returns the step, the arrays it may write and those its reverse reads."""
        params = kernel.ir.params
        call, bound = prepare(kernel, tuple(annotated) if active else plain, dim, backend,
                              "reverse" if active else "launch")
        binding = bound.b
        prepared = bound if active else None  # nothing active: a plain launch, recorded for what it overwrites
        values = dict(zip([p.name for p in params], binding.values))
        step = Step(len(self.steps) + 1, kernel.name, prepared, None, scalars=scalars)
        written = [values[p.name] for p in params if p.written and is_array(values.get(p.name))]
        reads = [values[n] for n in (call.spec.reverse_reads if active else ()) if is_array(values.get(n))]
        whole = None
        if self.observer is not None:
            whole = overwritten_whole(params, binding, call.primal.facts)
            self.observer(kernel.name, written, binding, whole)
        saves = self._filled(bound, values, whole) if prepared is not None else None
        for view in written:
            if saves is None or all(view is not v for v in saves.values()):
                self.versions.before_write(view, step.saves)
        if saves is not None:
            saves = {n: self.versions.save_filled(v, step.saves) for n, v in saves.items()}
        if prepared is not None:
            step.tape = run_augmented_primal(bound, saves)
        else:
            run(call, bound)
        return step, written, reads

    def _filled(self, bound: Any, values: dict, whole: list | None) -> dict | None:
        """The arguments (name -> view) whose old contents the augmented primal copies as it runs: where every
        parameter it can save so (`saved_in_place`) is overwritten whole and still read by a recorded reverse;
        None where some is not (its saves are copies made before the launch)."""
        names = saved_in_place(bound)
        if not names or not all(self.versions.needed(values[n]) for n in names):
            return None
        if whole is None:
            whole = overwritten_whole(bound.call.kernel.ir.params, bound.b, bound.call.primal.facts)
        roots = {id(r) for r in whole}
        if not all(id(memory_root(values[n])) in roots for n in names):
            return None
        return {n: values[n] for n in names}

    def expect_rule(self) -> None:
        """An active rule call a checkpointed loop records only when it recomputes the call's step: the sweep
        checks what its reverse returns (run.py)."""
        self.rules.append(None)

    def add_loop(self, loop: Any) -> None:
        """A checkpointed loop (checkpoint.py), recorded as one step of the program."""
        self.steps.append(loop)

    @property
    def saved_bytes(self) -> int:
        return sum(s.saved_bytes for s in self.steps)

    @property
    def tape_bytes(self) -> int:
        return sum(s.tape_bytes for s in self.steps)


class ForwardRecorder(Recorder):
    """Forward mode of a program (docs/programs.md): each launch runs its tangent
    kernel, tangents following memory like shadows (temporaries get zero
    tangents when an active value is first written into them); nothing is saved."""

    def __init__(self, tangents: ShadowMap, guard: HostWriteGuard):
        self.tangents = tangents
        self.guard = guard
        self.host = HostTracker(tangents)
        self.count = 0

    def launch(self, kernel: KernelFunction, dim: Any, given: tuple, backend: str | None) -> None:
        params = kernel.ir.params
        args = unwrap_args(given, f"launch {self.count + 1} (kernel '{kernel.name}')")
        active = any(isinstance(a, ActiveScalar) for a in args) or any(
            is_array(a) and self.tangents.find(a) is not None for a in args)
        annotated = []
        for p, a in zip(params, args):
            if isinstance(a, ActiveScalar):
                annotated.append(a.with_tangent(self.tangents.lanes))
            elif is_array(a) and active and a.dtype.kind == "f":
                annotated.append(self.tangents.annotate(a, p.written))
            else:
                annotated.append(Const(a))
        if len(args) != len(params):
            annotated = [a.value if isinstance(a, ActiveScalar) else a for a in args]
        arrays = [a for a in args if is_array(a)]
        with self.guard.unlocked(arrays, f"before launch {self.count + 1} (kernel '{kernel.name}')"):
            forward_launch(kernel, tuple(annotated), dim, backend)
        self.count += 1
        self.guard.lock(arrays, after_launch(self.count, kernel.name))

    def rule(self, rule: CustomRule, given: tuple) -> Any:
        given = unwrap_args(given, f"a call of rule '{rule.name}'")
        self.count += 1
        arrays, result = record_forward(self, rule, given, self.count)
        self.guard.lock(arrays, after_launch(self.count, rule.name))
        return result
