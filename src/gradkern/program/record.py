"""Recording a program (docs/programs.md): `fn` runs once, eagerly; every launch it
makes, at any depth, arrives here through the runtime's hook, is prepared
(validated, specialised, race-checked) as a split reverse-mode call and run as
its augmented primal. What the reverse will need is kept: each step's kernel
tape, and — copy-on-write — the old contents of what a launch overwrites
while an earlier step's reverse still needs them (§6, 4). Calls of functions
with custom rules arrive through the rules' hook and are recorded the same
way (rulestep.py).

What a derivative step needs is known without reading kernel bodies: the
pipeline reports which primal arrays a kernel's reverse reads
(`ReverseSpecialization.reverse_reads`), and a parameter's `written` flag
says which ones a launch may change. Versions are kept per buffer (the array
that owns the memory): a write to any view of it makes the old contents
unneeded by later steps until some step's reverse reads the buffer again.
"""

from __future__ import annotations

from typing import Any

from ..annotations import Active, Const
from ..kernel import KernelFunction
from ..rules import CustomRule
from ..runtime.arrays import is_array
from ..runtime.call import prepare
from ..runtime.forward import forward as forward_launch
from ..runtime.launch import run
from ..runtime.recording import Recorder
from ..runtime.reverse import run_augmented_primal
from .guard import HostWriteGuard
from .hostcode import HostTracker, unwrap_args
from .rulestep import annotate_array, record_forward, record_reverse, tangent_scalar
from .scalars import ActiveScalar
from .shadows import ShadowMap, memory_root
from .steps import Launched, Saved, Step


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

    def __init__(self, shadows: ShadowMap, guard: HostWriteGuard, observer: Any = None,
                 host: HostTracker | None = None):
        self.shadows = shadows
        self.guard = guard
        self.host = host or HostTracker(shadows)  # host code on the program's arrays (hostcode.py)
        # told (kernel name, written views, binding, buffers overwritten whole) before each launch runs
        self.observer = observer
        self.steps: list[Step] = []
        self.needed: dict[int, bool] = {}  # id(buffer) -> whether a recorded reverse reads its current contents
        self.roots: dict[int, Any] = {}  # the buffers `needed` names, kept alive so that their ids stay theirs
        self.scalars: list[ActiveScalar] = []  # every Active scalar a launch took
        self.rules: list = []  # the active rule calls recorded (their reverses' output is checked)
        # gk.autodiff of a rule function alone: its reverse runs right after it, so nothing it reads can
        # change in between (config.overwritten all False) and no later step needs internal shadows
        self.alone = False
        self.no_need: dict[int, bool] = {}  # argument position -> DuplicatedNoNeed (top level only)

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
                annotated.append(annotate_array(self.shadows, a, p.written))
            else:
                annotated.append(Const(a))
        if len(args) != len(params):
            annotated = list(plain)  # the binding reports the count
        arrays = [a for a in args if is_array(a)]
        before = f"before launch {len(self.steps) + 1} (kernel '{kernel.name}')"
        with self.guard.unlocked(arrays, before):  # validated and run as the user's writable arrays
            step, written, reads = self._run(kernel, dim, plain, annotated, scalars, active, backend)
        for view in written:  # overwritten whole: no recorded reverse reads the new contents yet
            if view.nbytes == memory_root(view).nbytes:  # (elements of a written array never overlap)
                self.needed[id(memory_root(view))] = False
        for view in reads:  # this step's reverse reads these as the step left them
            self.roots.setdefault(id(memory_root(view)), memory_root(view))
            self.needed[id(memory_root(view))] = True
        self.guard.lock(arrays, step)
        self.scalars += scalars.values()
        self.steps.append(step)

    def rule(self, rule: CustomRule, given: tuple) -> Any:
        """A call of a function with a custom rule (rulestep.py)."""
        return record_reverse(self, rule, unwrap_args(given, f"rule call {len(self.steps) + 1} ('{rule.name}')"))

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
        if self.observer is not None:
            self.observer(kernel.name, written, binding, overwritten_whole(params, binding, call.primal.facts))
        for view in written:  # copy-on-write: what an earlier reverse still reads
            self.roots.setdefault(id(memory_root(view)), memory_root(view))
            if self.needed.get(id(memory_root(view))):
                step.saves.append(Saved(view, view.copy()))
        if prepared is not None:
            step.tape = run_augmented_primal(bound)
        else:
            run(call, bound)
        return step, written, reads

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
                annotated.append(tangent_scalar(a, self.tangents.lanes))
            elif is_array(a) and active and a.dtype.kind == "f":
                annotated.append(annotate_array(self.tangents, a, p.written))
            else:
                annotated.append(Const(a))
        if len(args) != len(params):
            annotated = [a.value if isinstance(a, ActiveScalar) else a for a in args]
        arrays = [a for a in args if is_array(a)]
        with self.guard.unlocked(arrays, f"before launch {self.count + 1} (kernel '{kernel.name}')"):
            forward_launch(kernel, tuple(annotated), dim, backend)
        self.count += 1
        self.guard.lock(arrays, Launched(self.count, kernel.name))

    def rule(self, rule: CustomRule, given: tuple) -> Any:
        return record_forward(self, rule, unwrap_args(given, f"a call of rule '{rule.name}'"))
