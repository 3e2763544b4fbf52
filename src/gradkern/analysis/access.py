"""Access analysis: which elements of each array a thread touches.

For each array it decides whether every access stays in the thread's own
*slab* (the positions indexed by the thread's own tid components, all of them,
the same positions at every access): then no two threads share an element of
it. A flattened index `i * s + r` counts as a row of its own: i a tid
component, s the same loop-invariant stride at every access, and r a loop
variable whose range provably lies in [0, s) (gemm's `c[i*n + j]` for j in
range(n)). These facts drive the rest:

* races (analysis/races.py): a kernel whose written arrays are all own, and
  whose atomic targets are touched only by atomic adds, is proven race-free;
  any other kernel gets the exact run-time check before it runs;
* launches: a launch known to be race-free runs in parallel, its atomic adds
  privatised per chunk on the CPU; but a CPU launch whose atomic targets are
  also read or written plainly runs serially, since a private copy would hide
  a thread's own accumulations from its later plain accesses;
* adjoints (transforms/reverse.py): accumulation into the shadow of an own
  array is a plain add, into any other shadow an atomic add. (Race-freedom
  makes the elements a kernel *writes* thread-exclusive, but elements it only
  reads, like LU's pivot row, are shared even within a written array.)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import nodes as ir
from ..ir.ops import Op


@dataclass(frozen=True)
class LaunchFacts:
    own: frozenset[str]  # arrays every thread touches only in its own slab
    atomic_targets: frozenset[str]  # arrays updated with atomic adds (privatised on the CPU)
    written: frozenset[str]
    mixed_atomics: frozenset[str]  # atomic targets also read or written plainly



def tid_aliases(k: ir.Kernel) -> dict[str, int]:
    """Locals that hold a tid component everywhere they are visible: every
    assignment to them is the same `Tid(axis)` (a reverse sweep replays it)."""
    assigns: dict[str, list[ir.Expr]] = {}
    for s in ir.walk_stmts(k.body):
        if isinstance(s, ir.Assign):
            assigns.setdefault(s.name, []).append(s.value)
        elif isinstance(s, ir.For):
            assigns.setdefault(s.var, []).append(None)  # a loop variable is never a tid alias
    return {n: v[0].axis for n, v in assigns.items()
            if isinstance(v[0], ir.Tid) and all(isinstance(x, ir.Tid) and x.axis == v[0].axis for x in v)}


class _Context:
    """What the slab test needs to know about a kernel's names."""

    def __init__(self, k: ir.Kernel):
        self.alias = tid_aliases(k)
        self.assigned = {s.name for s in ir.walk_stmts(k.body) if isinstance(s, ir.Assign)}
        self.loops: dict[str, list[ir.For]] = {}
        for s in ir.walk_stmts(k.body):
            if isinstance(s, ir.For):
                self.loops.setdefault(s.var, []).append(s)

    def tid_axis(self, e: ir.Expr) -> int | None:
        if isinstance(e, ir.Tid):
            return e.axis
        if isinstance(e, ir.Var) and e.name in self.alias:
            return self.alias[e.name]
        return None

    def invariant(self, e: ir.Expr) -> bool:
        """Built from constants, shapes and parameters nobody assigns."""
        return all(isinstance(x, (ir.Const, ir.Shape, ir.Apply)) or isinstance(x, ir.Var)
                   and x.name not in self.assigned and x.name not in self.loops and x.name not in self.alias
                   for x in ir.walk_expr(e))

    def nonnegative(self, e: ir.Expr) -> bool:
        if isinstance(e, ir.Const):
            return e.value >= 0
        if isinstance(e, (ir.Tid, ir.Shape)) or self.tid_axis(e) is not None:
            return True
        if isinstance(e, ir.Var) and e.name in self.loops and e.name not in self.assigned:
            return all(self.nonnegative(f.start) and isinstance(f.step, ir.Const) and f.step.value > 0
                       for f in self.loops[e.name])
        if isinstance(e, ir.Apply) and e.op in (Op.ADD, Op.MUL, Op.MAX):
            return all(self.nonnegative(a) for a in e.args)
        return False

    def below(self, r: ir.Expr, stride: ir.Expr) -> bool:
        """0 <= r < stride for every value r takes: a loop variable of range(start, stride)."""
        if not (isinstance(r, ir.Var) and r.name in self.loops and r.name not in self.assigned):
            return False
        return all(f.stop == stride and self.nonnegative(f.start) and isinstance(f.step, ir.Const)
                   and f.step.value > 0 for f in self.loops[r.name])

    def row(self, e: ir.Expr) -> tuple | None:
        """("row", axis, stride) when e is tid * stride + r with 0 <= r < stride."""
        if not (isinstance(e, ir.Apply) and e.op is Op.ADD):
            return None
        for scaled, r in (e.args, e.args[::-1]):
            if isinstance(scaled, ir.Apply) and scaled.op is Op.MUL:
                for t, stride in (scaled.args, scaled.args[::-1]):
                    axis = self.tid_axis(t)
                    if axis is not None and self.invariant(stride) and self.below(r, stride):
                        return ("row", axis, stride)
        return None


def _slab(indices: tuple[ir.Expr, ...], ctx: _Context) -> tuple:
    """(position, tid axis) for each index position that is exactly a tid
    component, or (position, ("row", axis, stride)) for a flattened own row."""
    out = []
    for pos, e in enumerate(indices):
        axis = ctx.tid_axis(e)
        if axis is not None:
            out.append((pos, axis))
            continue
        row = ctx.row(e)
        if row is not None:
            out.append((pos, row))
    return tuple(out)


def own_arrays(k: ir.Kernel) -> frozenset[str]:
    """Arrays all of whose accesses lie in the accessing thread's own slab."""
    if k.tid_ndim == 0:
        return frozenset()
    ctx = _Context(k)
    slabs: dict[str, set] = {}
    for s in ir.walk_stmts(k.body):
        if isinstance(s, (ir.Store, ir.AtomicAdd)):
            slabs.setdefault(s.array, set()).add(_slab(s.indices, ctx))
    for e in ir.all_exprs(k.body):
        if isinstance(e, ir.Load):
            slabs.setdefault(e.array, set()).add(_slab(e.indices, ctx))
    out = set()
    for a, found in slabs.items():
        if len(found) != 1:
            continue
        axes = [x if isinstance(x, int) else x[1] for _, x in next(iter(found))]
        if sorted(axes) == list(range(k.tid_ndim)):
            out.add(a)
    return frozenset(out)


def launch_facts(k: ir.Kernel) -> LaunchFacts:
    """The access facts of one typed kernel (see module doc)."""
    written = frozenset(s.array for s in ir.walk_stmts(k.body) if isinstance(s, (ir.Store, ir.AtomicAdd)))
    atomic = frozenset(s.array for s in ir.walk_stmts(k.body) if isinstance(s, ir.AtomicAdd))
    plain = {s.array for s in ir.walk_stmts(k.body) if isinstance(s, ir.Store)}
    plain |= {e.array for e in ir.all_exprs(k.body) if isinstance(e, ir.Load)}
    return LaunchFacts(own_arrays(k), atomic, written, atomic & frozenset(plain))


def adjoint_is_exclusive(facts: LaunchFacts, array: str) -> bool:
    """Whether accumulating into `array`'s shadow needs no atomic (module doc)."""
    return array in facts.own
