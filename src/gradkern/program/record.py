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
(`ReverseSpecialization.reverse_reads`), a parameter's `written` flag
says which ones a launch may change, and the access facts say which
parameters a launch overwrites whole (`overwritten`) and whether its
reverse is a pure move (`moved`, analysis/moves.py).
"""

from __future__ import annotations

from math import isfinite
from typing import Any

import numpy as np

from ..annotations import Active, Const
from ..kernel import KernelFunction
from ..recording import Recorder
from ..rules import CustomRule
from ..runtime.arrays import is_array
from ..runtime.call import again, prepare
from ..runtime.forward import forward as forward_launch
from ..runtime.launch import run
from ..runtime.reverse import run_augmented_primal, saved_in_place, untaped_tape
from .contents import array_positions
from .devicefresh import host_made_error
from .guard import HostWriteGuard
from .hostargs import unwrap_args
from .hostcode import HostTracker
from .replay import LaunchFacts, Replays
from .rulestep import record_forward, record_reverse
from .scalars import ActiveScalar, ReadScalar, non_finite, refuse_scalar_dim
from .scalarsweep import ScalarSweep
from .shadows import ShadowMap, mapped, memory_root
from .steps import ProgramStep, Step, after_launch
from .versions import Versions


def overwritten_whole(params, binding: Any, facts: Any) -> list:
    """The buffers this launch overwrites entirely without reading them: parameters the analysis found
    stored at every thread's own element and never read (`facts.overwritten`), passed as their whole buffer,
    launched over exactly its shape, and not passed again under another parameter."""
    return [memory_root(binding.values[k]) for k in overwritten_whole_positions(params, binding, facts)]


def refuse_host_made(guard: HostWriteGuard, kernel: Any, dim: Any, backend: Any, plain: tuple, where: str,
                     whole: list[int] | None = None) -> None:
    """ProgramError before launch `where` runs if it would read a CuPy array host code made while the program
    records (devicefresh.py): a position it does not overwrite whole (`whole`, the binding's positions, worked
    out here where not given). The ones it overwrites whole are the program's own from now on."""
    fresh = guard.made
    if fresh is None or not fresh.starts:
        return
    made = [k for k, v in enumerate(plain) if fresh.holds(v)]
    if not made:
        return
    if whole is None:
        call, bound = prepare(kernel, plain, dim, backend, "launch")
        whole = overwritten_whole_positions(kernel.ir.params, bound.b, call.primal.facts)
    for k in made:
        if k not in whole:
            raise host_made_error(plain[k], where)
    for k in made:
        fresh.written(plain[k])


def overwritten_whole_positions(params, binding: Any, facts: Any) -> list[int]:
    """The positions among the binding's values of `overwritten_whole`'s buffers."""
    roots = [id(memory_root(v)) for v in binding.values if is_array(v)]
    out = []
    for k, (p, v) in enumerate(zip(params, binding.values)):
        if p.name in facts.overwritten and is_array(v):
            if _whole(v, roots) and tuple(binding.dim) == tuple(v.shape):
                out.append(k)
    return out


def _whole(v: Any, roots: list) -> bool:
    """Whether the array `v` is its whole buffer, laid out as the buffer, and no other argument of the launch
    (`roots`: the ids of every array argument's buffer) lies in that buffer."""
    root = memory_root(v)
    return (v is root or (v.nbytes == root.nbytes and tuple(v.strides) == tuple(root.strides))) \
        and roots.count(id(root)) == 1


def moved_positions(params, binding: Any, facts: Any) -> tuple[int, int] | None:
    """(destination, source) positions among the binding's values where this launch's reverse is exactly
    `d_src += d_dst; d_dst = 0` (docs/programs.md, "Renamed shadows"): the kernel is a pure move
    (`facts.moved`, analysis/moves.py), both arrays are whole buffers of one shape that no other argument
    shares, and the launch is over exactly the destination's leading extents, one thread per element."""
    m = facts.moved
    if m is None:
        return None
    names = [p.name for p in params[:len(binding.values)]]
    if m.dst not in names or m.src not in names:
        return None
    kd, ks = names.index(m.dst), names.index(m.src)
    d, s = binding.values[kd], binding.values[ks]
    if not is_array(d) or not is_array(s) or tuple(d.shape) != tuple(s.shape) or d.dtype != s.dtype:
        return None
    roots = [id(memory_root(v)) for v in binding.values if is_array(v)]
    dim = tuple(binding.dim)
    if len(dim) != m.ndim or dim != tuple(d.shape[:m.ndim]) or not _whole(d, roots) or not _whole(s, roots):
        return None
    return kd, ks


class ProgramRecorder(Recorder):
    """Records the launches of one program call."""

    def __init__(self, shadows: ShadowMap, guard: HostWriteGuard, within: ProgramRecorder | None = None,
                 versions: Versions | None = None, observer: Any = None, alone: bool = False,
                 no_need: dict[int, bool] | None = None, reuse: Any = None):
        """`within`: the program a checkpointed loop's taped segment belongs to (its shadows, host tracker,
        Active scalars and rule calls are this recorder's too); `observer(name, written views, binding,
        buffers overwritten whole)` is told of each launch and rule call before it runs; `reuse()`, asked after it
        where the launch saves nothing, True where its outputs already hold what it writes (a checkpointed loop's:
        outputs.py), so that it is recorded without running (`reused` counts them). `alone`: gk.autodiff
        of a rule function alone: its reverse runs right after it, so nothing it reads can change in between
        (config.overwritten all False) and no later step needs internal shadows; `no_need`: its argument
        positions that are DuplicatedNoNeed."""
        self.shadows = shadows
        self.guard = guard
        self.versions = versions or Versions()  # copy-on-write of what a recorded reverse reads
        self.observer = observer
        self.reuse, self.reused = reuse, 0
        self.in_loop = within is not None  # a checkpointed loop inside a step is refused
        # host code's copies come from the save pool's kept arrays (hostcode.py), except in a checkpointed loop's
        # segments, whose recomputed steps are checked against their record by the arrays' identities
        self.lends_copies = within is None
        self.steps: list[ProgramStep] = []
        # host code on the program's arrays (hostcode.py)
        self.host = within.host if within is not None else HostTracker(shadows)
        # every Active scalar a launch took; the active rule calls recorded (their reverses' output is checked)
        # (by id, each once: a checkpointed loop's steps take the same ones again and again)
        self.scalars: dict[int, ActiveScalar] = within.scalars if within is not None else {}
        self.rules: list = within.rules if within is not None else []
        # the scalar tape's reverse, run as far as each host read needs it (scalarsweep.py)
        self.sweep = within.sweep if within is not None else ScalarSweep(self.scalars)
        self.alone = alone
        self.no_need: dict[int, bool] = no_need or {}
        # what earlier launches worked out, for the next on the same arrays (replay.py); a checkpointed loop's
        # segments share the program's (the same shadows)
        self.replays = within.replays if within is not None else Replays()

    def launch(self, kernel: KernelFunction, dim: Any, given: tuple, backend: str | None) -> None:
        params = kernel.ir.params
        refuse_scalar_dim(dim, f"launch {len(self.steps) + 1} (kernel '{kernel.name}')")
        args = unwrap_args(given, lambda: f"launch {len(self.steps) + 1} (kernel '{kernel.name}')", params)
        known = len(self.shadows.entries)  # a rebound replay registers a temporary's shadow too (replay.py)
        replay = self.replays.find(kernel, dim, backend, args, self.shadows, not self.in_loop)
        if replay is not None:  # the annotations are made only where the call is prepared in full
            annotated, (scalars, plain), active = None, replay.plain(args), replay.active
            arrays = replay.arrays(args)
        else:
            annotated, scalars, plain, active = self._annotations(params, args, kernel)
            arrays = [a for a in args if is_array(a)]
        guard = self.guard
        refuse_host_made(guard, kernel, dim, backend, plain, f"launch {len(self.steps) + 1} (kernel '{kernel.name}')")
        # validated and run as the user's writable arrays (the arrays `lock` locked before: only their flags)
        settled = guard.unlock_settled(arrays)
        ours = settled if settled is not None else \
            guard.unlock(arrays, f"before launch {len(self.steps) + 1} (kernel '{kernel.name}')", True)
        try:
            step, written, reads = self._run(kernel, dim, plain, annotated, scalars, active, backend, args, replay,
                                             known)
        finally:
            guard.relock(ours)
        if not self.in_loop and step.prepared is not None:  # the temporaries' shadows: docs/programs.md,
            if len(self.shadows.entries) > known:  # "Program shapes"
                step.made = self.shadows.entries[known:]  # given back after its reverse (steps.py)
            step.mapped = replay.mapped(step.prepared.derivatives) if replay is not None else \
                mapped(step.prepared.derivatives)
        for view in written:
            self.versions.written(view)
        for view in reads:  # this step's reverse reads these as the step left them
            self.versions.read_by_reverse(view)
        # the buffers it may have written: the others keep the fingerprints taken before it (guard.lock)
        self._add(step, arrays, settled, {id(memory_root(v)) for v in written} if guard.prints else None)

    def _annotations(self, params, args: tuple, kernel: KernelFunction) -> tuple[list, dict, tuple, bool]:
        """How the launch of `kernel` takes `args`: annotated (shadows found or made), its Active scalars by
        position, the plain values, whether it is active. A non-finite Active scalar is refused naming the line."""
        annotated, scalars = [], {}
        plain = tuple(a.value if isinstance(a, ActiveScalar) else a for a in args)
        active = any(isinstance(a, ActiveScalar) for a in args) or any(
            is_array(a) and self.shadows.find(a) is not None for a in args)
        for n, (p, a) in enumerate(zip(params, args)):
            if isinstance(a, ActiveScalar):
                if not isfinite(a.value):
                    raise non_finite(a, p.name, f"launch {len(self.steps) + 1} (kernel '{kernel.name}')")
                annotated.append(Active(a.value))
                scalars[n] = a
            elif is_array(a) and active and a.dtype.kind == "f":
                # an active value written into an array nothing covers yet gives it a shadow
                annotated.append(self.shadows.annotate(a, p.written, mapped=not self.in_loop))
            else:
                annotated.append(Const(a))
        if len(args) != len(params):
            annotated = list(plain)  # the binding reports the count
        return annotated, scalars, plain, active

    def read_scalar(self, out: Any, what: str) -> ReadScalar:
        """The value the launch just recorded wrote into the 1-element array `out` (hostreads.py), as an Active
        scalar whose adjoint that launch's reverse adds into `out`'s shadow first (steps.Step.read_back). An inactive
        launch (the sum of a Const that shares memory with an active array) finds no shadow: its read's adjoint is
        dropped, exactly, its value depending on no active input."""
        s = ReadScalar(out[0], what)
        step = self.steps[-1]
        step.reads = (*step.reads, (s, self.shadows.find(out), self.sweep))
        return s

    def rule(self, rule: CustomRule, given: tuple) -> Any:
        """A call of a function with a custom rule (rulestep.py); returns what the call returns."""
        step, arrays, result = record_reverse(self, rule, unwrap_args(given, f"rule call {len(self.steps) + 1} "
                                                                             f"('{rule.name}')", rule.params))
        if step.config is not None:  # an active call: the sweep checks what its reverse returns
            self.rules.append(step)
        self._add(step, arrays)
        return result

    def _add(self, step: Step, arrays: list, settled: list | None = None, written: set | None = None) -> None:
        """A launch or rule call recorded: the arrays it took locked after it (`settled`: they were, and are
        again: guard.unlock_settled), its Active scalars kept."""
        if settled is not None:
            self.guard.locked_settled(settled, step)  # its `where`, formatted where an error names it
        else:
            # a launch's Step formatted where an error names it (a host read's names its line once it is made)
            self.guard.lock(arrays, step if isinstance(step, Step) else step.where, written)
        for s in step.scalars.values():
            self.scalars.setdefault(id(s), s)
        self.steps.append(step)

    def _run(self, kernel, dim, plain, annotated, scalars, active, backend, args, replay,
             known: int) -> tuple[Step, list, list]:
        """Prepare the launch, save what it overwrites that an earlier reverse reads, run it.
        Returns the step, the arrays it may write and those its reverse reads. `replay`: what the last launch
        of this kernel on these objects worked out (replay.py), used where the launch prepares the same call;
        `known`: how many shadow entries there were before the launch."""
        call = replay.signed(args, dim, backend) if replay is not None else None
        bound = again(call, kernel, plain, replay.known) if call is not None else None
        # refilled into the facts' own call from the objects `find` matched: the runtime bound those objects
        # (an array's value is never converted), so `same` holds (tests/program/test_replay.py)
        signed = bound is not None
        if bound is None:
            if annotated is None:
                annotated = replay.annotations(args)[0]
            call, bound = prepare(kernel, tuple(annotated) if active else plain, dim, backend,
                                  "reverse" if active else "launch")
        prepared = bound if active else None  # nothing active: a plain launch, recorded for what it overwrites
        step = Step(len(self.steps) + 1, kernel.name, prepared, None, scalars=scalars)
        vals = bound.given
        if not signed and (replay is None or not replay.same(call, vals)):
            if annotated is None:
                annotated = replay.annotations(args)[0]
            replay = self._facts(kernel, dim, backend, args, annotated, active, call, bound, known)
        elif replay.rebound and not signed:  # facts rebound to these temporaries, prepared as theirs (replay.py)
            replay.settle(args)
        step.arrays = replay.arrays_at
        params = kernel.ir.params
        if prepared is not None:  # the names of Step.cleared and Step.moved, kept by the facts (of one kernel)
            names = replay.names
            if names is None:
                names = replay.names = (tuple(params[k].name for k in replay.whole),  # renamed shadows (renames.py)
                                        None if replay.moved is None else tuple(params[k].name for k in replay.moved))
            step.cleared, step.moved = names  # a pure move's reverse: renamed (renames.py)
        # loops, not comprehensions, here and below: every launch of a time loop runs them
        # (docs/programs.md#host-cost-per-step)
        written, reads = [], []
        for k in replay.written:
            written.append(vals[k])
        for k in replay.reads:
            reads.append(vals[k])
        whole = None
        if self.observer is not None:
            whole = [memory_root(vals[k]) for k in replay.whole]
            self.observer(kernel.name, written, bound.b, whole)
        versions = self.versions
        filled = replay.filled if prepared is not None else ()
        for _, k in filled:  # the augmented primal fills the saves where every one of them is needed
            if not versions.needed(vals[k]):
                filled = ()
                break
        for view in written:
            for _, k in filled:
                if view is vals[k]:
                    break
            else:
                versions.before_write(view, step.saves)
        saves = None
        if filled:
            saves = {}
            for n, k in filled:
                saves[n] = versions.save_filled(vals[k], step.saves)
        reused = self.reuse is not None and saves is None and not step.saves and self.reuse()
        if prepared is not None:
            tape = untaped_tape(bound) if reused else None
            reused = tape is not None
            step.tape = tape if reused else run_augmented_primal(bound, saves)
        elif not reused:
            run(call, bound)
        self.reused += reused
        return step, written, reads

    def _facts(self, kernel, dim, backend, args, annotated, active, call, bound, known: int) -> LaunchFacts:
        """What this launch's bookkeeping needs from its arguments, worked out in full and kept for a replay."""
        params = kernel.ir.params
        binding = bound.b
        names = [p.name for p in params]
        pos = {n: k for k, n in enumerate(names[:len(binding.values)])}
        written = tuple(pos[p.name] for p in params if p.written and p.name in pos
                        and is_array(binding.values[pos[p.name]]))
        reads = tuple(pos[n] for n in (call.spec.reverse_reads if active else ())
                      if n in pos and is_array(binding.values[pos[n]]))
        whole = overwritten_whole_positions(params, binding, call.primal.facts)
        roots = {id(memory_root(binding.values[k])) for k in whole}
        filled = ()
        if active:
            saved = tuple((n, pos[n]) for n in saved_in_place(bound) if n in pos)
            if saved and len(saved) == len(saved_in_place(bound)) and \
                    all(id(memory_root(binding.values[k])) in roots for _, k in saved):
                filled = saved
        shadows = self.shadows
        facts = LaunchFacts(kernel, dim, args, annotated, active, call, binding.values, written, reads, whole,
                            filled, shadows.version, array_positions(bound.values) if active else None,
                            shadows.removed, shadows if active and call.key is not None else None,
                            tuple(shadows.entries[known:]), moved_positions(params, binding, call.primal.facts))
        self.replays.keep(facts, args, backend)
        return facts

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
        refuse_scalar_dim(dim, f"launch {self.count + 1} (kernel '{kernel.name}')")
        args = unwrap_args(given, f"launch {self.count + 1} (kernel '{kernel.name}')", params)
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
        refuse_host_made(self.guard, kernel, dim, backend, tuple(a.value if isinstance(a, ActiveScalar) else a
                                                                   for a in args),
                         f"launch {self.count + 1} (kernel '{kernel.name}')")
        with self.guard.unlocked(arrays, f"before launch {self.count + 1} (kernel '{kernel.name}')"):
            forward_launch(kernel, tuple(annotated), dim, backend)
        self.count += 1
        self.guard.lock(arrays, after_launch(self.count, kernel.name))

    def read_scalar(self, out: Any, what: str) -> ReadScalar:
        """The value the launch just made wrote into the 1-element array `out`, with `out`'s tangent (one per lane
        in vector mode) as its own (hostreads.py)."""
        t = self.tangents.find(out)  # None: an inactive launch (a Const's sum), a value without a tangent
        lanes = self.tangents.lanes
        if t is None:
            tangent = 0.0 if lanes == 1 else np.zeros(lanes)
        else:
            tangent = float(t[0][0]) if lanes == 1 else np.array([float(x[0]) for x in t])
        return ReadScalar(out[0], what, tangent)

    def rule(self, rule: CustomRule, given: tuple) -> Any:
        given = unwrap_args(given, f"a call of rule '{rule.name}'", rule.params)
        self.count += 1
        arrays, result = record_forward(self, rule, given, self.count)
        self.guard.lock(arrays, after_launch(self.count, rule.name))
        return result
