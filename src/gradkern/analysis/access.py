"""Access analysis: which elements of each array a thread touches.

This first version proves the one fact the primal launch needs: every array
the kernel writes is touched by each thread only inside its own *slab* (the
array's positions indexed by the thread's own tid components, all of them, the
same positions at every access). Then no two threads touch a common element
and the launch loop may run in parallel. Anything it cannot prove (atomics,
neighbour reads of a written array, flattened indices) is reported as not
proven, and the launch runs serially. The exact analysis of DESIGN §5
(affine stencils under guards, run-time index checks) grows from here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import nodes as ir


@dataclass(frozen=True)
class LaunchFacts:
    parallel: bool
    reason: str  # why the launch is serial, or "" if parallel


def _tid_aliases(k: ir.Kernel) -> dict[str, int]:
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


def _slab(indices: tuple[ir.Expr, ...], alias: dict[str, int]) -> tuple[tuple[int, int], ...]:
    """(position, tid axis) for each index position that is exactly a tid component."""
    out = []
    for pos, e in enumerate(indices):
        if isinstance(e, ir.Tid):
            out.append((pos, e.axis))
        elif isinstance(e, ir.Var) and e.name in alias:
            out.append((pos, alias[e.name]))
    return tuple(out)


def launch_facts(k: ir.Kernel) -> LaunchFacts:
    """Decide whether the launch loop can run in parallel (see module doc)."""
    if any(isinstance(s, ir.AtomicAdd) for s in ir.walk_stmts(k.body)):
        return LaunchFacts(False, "gk.atomic_add")
    written = {s.array for s in ir.walk_stmts(k.body) if isinstance(s, ir.Store)}
    if not written:
        return LaunchFacts(True, "")
    if k.tid_ndim == 0:
        return LaunchFacts(False, "writes without gk.tid(): every thread writes the same elements")
    alias = _tid_aliases(k)
    accesses: dict[str, set] = {a: set() for a in written}
    for s in ir.walk_stmts(k.body):
        if isinstance(s, ir.Store):
            accesses[s.array].add(_slab(s.indices, alias))
    for e in ir.all_exprs(k.body):
        if isinstance(e, ir.Load) and e.array in written:
            accesses[e.array].add(_slab(e.indices, alias))
    for a, slabs in accesses.items():
        if len(slabs) != 1:
            return LaunchFacts(False, f"'{a}' is accessed at indices that are not all the thread's own")
        slab = next(iter(slabs))
        axes = [axis for _, axis in slab]
        if sorted(axes) != list(range(k.tid_ndim)):
            return LaunchFacts(False, f"'{a}' is written at elements other threads may touch")
    return LaunchFacts(True, "")
