"""Recording a program (DESIGN §6): `fn` runs once, eagerly; every launch it
makes, at any depth, arrives here through the runtime's hook, is prepared
(validated, specialised, race-checked) as a split reverse-mode call and run as
its augmented primal. What the reverse will need is kept: each step's kernel
tape, and — copy-on-write — the old contents of what a launch overwrites
while an earlier step's reverse still needs them (§6, 4).

What a derivative step needs is known without reading kernel bodies: the
pipeline reports which primal arrays a kernel's reverse reads
(`ReverseSpecialization.reverse_reads`), and a parameter's `written` flag
says which ones a launch may change. Versions are kept per buffer (the array
that owns the memory): a write to any view of it makes the old contents
unneeded by later steps until some step's reverse reads the buffer again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..annotations import Active, BatchDuplicated, Const, Duplicated
from ..kernel import KernelFunction
from ..runtime.arrays import is_array
from ..runtime.execute import run_spec
from ..runtime.forward import forward as forward_launch
from ..runtime.launch import prepare_launch
from ..runtime.recording import Recorder
from ..runtime.reverse import PreparedReverse, Tape, prepare_reverse
from .guard import HostWriteGuard
from .scalars import ActiveScalar
from .shadows import ShadowMap, memory_root


@dataclass
class Saved:
    """The old contents of a view a launch overwrote, written back when the
    reverse passes that launch (the reverse before it sees its own post-state)
    and freed then."""

    view: Any
    data: Any
    nbytes: int = 0

    def __post_init__(self):
        self.nbytes = int(self.data.nbytes)

    def restore(self) -> None:
        if isinstance(self.view, np.ndarray) and not self.view.flags.writeable:
            self.view.flags.writeable = True  # made while the program had its buffer locked
        self.view[...] = self.data
        self.data = None


@dataclass
class Step:
    """One recorded launch."""

    number: int
    kernel: str
    prepared: PreparedReverse | None  # None: a launch with nothing active (no derivative)
    tape: Tape | None
    saves: list[Saved] = field(default_factory=list)
    scalars: dict[int, ActiveScalar] = field(default_factory=dict)  # parameter position -> its Active scalar

    @property
    def saved_bytes(self) -> int:
        return sum(s.nbytes for s in self.saves)

    @property
    def tape_bytes(self) -> int:
        return self.tape.nbytes if self.tape is not None else 0

    def roots_written_back(self) -> list:
        """The buffers this step's reverse writes primal values into (its saves' buffers)."""
        return [memory_root(s.view) for s in self.saves]

    def run_reverse(self, lanes: int) -> None:
        """This launch's reverse (on the arrays as the launch left them), then its saves written back."""
        if self.prepared is not None:
            got = self.prepared.reverse(self.tape)
            self.tape = None  # freed once used
            for pos, s in self.scalars.items():
                s.adjoint = s.adjoint + (np.asarray(got[pos]) if lanes > 1 else got[pos])  # per lane in vector mode
        for saved in reversed(self.saves):
            saved.restore()


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


def reverse_steps(steps: list, lanes: int) -> None:
    """The reverse of recorded steps, last first, each on the arrays as it left them."""
    for step in reversed(steps):
        step.run_reverse(lanes)


class ProgramRecorder(Recorder):
    """Records the launches of one program call."""

    def __init__(self, shadows: ShadowMap, guard: HostWriteGuard, observer: Any = None):
        self.shadows = shadows
        self.guard = guard
        # told (kernel name, written views, binding, buffers overwritten whole) before each launch runs
        self.observer = observer
        self.steps: list[Step] = []
        self.needed: dict[int, bool] = {}  # id(buffer) -> whether a recorded reverse reads its current contents
        self.roots: dict[int, Any] = {}  # the buffers `needed` names, kept alive so that their ids stay theirs
        self.scalars: list[ActiveScalar] = []  # every Active scalar a launch took

    def launch(self, kernel: KernelFunction, dim: Any, args: tuple, backend: str | None) -> None:
        params = kernel.ir.params
        annotated, scalars = [], {}
        plain = tuple(a.value if isinstance(a, ActiveScalar) else a for a in args)
        active = any(isinstance(a, ActiveScalar) for a in args) or any(
            is_array(a) and self.shadows.find(a) is not None for a in args)
        for n, (p, a) in enumerate(zip(params, args)):
            if isinstance(a, ActiveScalar):
                annotated.append(Active(a.value))
                scalars[n] = a
            elif is_array(a) and active and a.dtype.kind == "f":
                dx = self.shadows.find(a)
                if dx is None and p.written:  # an active value is written into an array nothing covers yet
                    dx = self.shadows.internal(a)
                annotated.append(Const(a) if dx is None else Duplicated(a, dx[0]) if len(dx) == 1
                                 else BatchDuplicated(a, dx))
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

    def _run(self, kernel, dim, plain, annotated, scalars, active, backend) -> tuple[Step, list, list]:
        """Prepare the launch, save what it overwrites that an earlier reverse reads, run it.
        Returns the step, the arrays it may write and those its reverse reads."""
        params = kernel.ir.params
        if active:
            prepared = prepare_reverse(kernel, tuple(annotated), dim, backend)
            binding = prepared.b
        else:  # nothing active: a plain launch, recorded only for what it overwrites
            prepared = None
            spec, binding = prepare_launch(kernel, dim, plain, backend)
        values = dict(zip([p.name for p in params], binding.values))
        step = Step(len(self.steps) + 1, kernel.name, prepared, None, scalars=scalars)
        written = [values[p.name] for p in params if p.written and is_array(values.get(p.name))]
        reads = [values[n] for n in (prepared.rs.reverse_reads if prepared else ()) if is_array(values.get(n))]
        if self.observer is not None:
            facts = prepared.rs.primal.facts if prepared is not None else spec.facts
            self.observer(kernel.name, written, binding, overwritten_whole(params, binding, facts))
        for view in written:  # copy-on-write: what an earlier reverse still reads
            self.roots.setdefault(id(memory_root(view)), memory_root(view))
            if self.needed.get(id(memory_root(view))):
                step.saves.append(Saved(view, view.copy()))
        if prepared is not None:
            step.tape = prepared.augmented_primal()
        else:
            run_spec(spec, binding.dim, list(binding.kernel_values))
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
    """Forward mode of a program (DESIGN §6, 7): each launch runs its tangent
    kernel, tangents following memory like shadows (temporaries get zero
    tangents when an active value is first written into them); nothing is saved."""

    def __init__(self, tangents: ShadowMap, guard: HostWriteGuard):
        self.tangents = tangents
        self.guard = guard
        self.count = 0

    def launch(self, kernel: KernelFunction, dim: Any, args: tuple, backend: str | None) -> None:
        params = kernel.ir.params
        active = any(isinstance(a, ActiveScalar) for a in args) or any(
            is_array(a) and self.tangents.find(a) is not None for a in args)
        annotated = []
        for p, a in zip(params, args):
            if isinstance(a, ActiveScalar):
                lanes = self.tangents.lanes
                annotated.append(Duplicated(a.value, a.tangent) if lanes == 1 else BatchDuplicated(
                    a.value, tuple(float(t) for t in np.broadcast_to(a.tangent, (lanes,)))))
            elif is_array(a) and active and a.dtype.kind == "f":
                da = self.tangents.find(a)
                if da is None and p.written:
                    da = self.tangents.internal(a)
                annotated.append(Const(a) if da is None else Duplicated(a, da[0]) if self.tangents.lanes == 1
                                 else BatchDuplicated(a, da))
            else:
                annotated.append(Const(a))
        if len(args) != len(params):
            annotated = [a.value if isinstance(a, ActiveScalar) else a for a in args]
        arrays = [a for a in args if is_array(a)]
        with self.guard.unlocked(arrays, f"before launch {self.count + 1} (kernel '{kernel.name}')"):
            forward_launch(kernel, tuple(annotated), dim, backend)
        self.count += 1
        self.guard.lock(arrays, _Launched(self.count, kernel.name))


@dataclass
class _Launched:
    number: int
    kernel: str
