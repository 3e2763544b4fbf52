"""Access analysis: which elements of each array a thread touches.

For each array it decides whether every access stays in the thread's own
*slab* (the positions indexed by the thread's own tid components, all of them,
the same positions at every access): then no two threads share an element of
it. These facts drive the rest:

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


@dataclass(frozen=True)
class LaunchFacts:
    own: frozenset[str]  # arrays every thread touches only in its own slab
    atomic_targets: frozenset[str]  # arrays updated with atomic adds (privatised on the CPU)
    written: frozenset[str]
    mixed_atomics: frozenset[str]  # atomic targets also read or written plainly



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


def own_arrays(k: ir.Kernel) -> frozenset[str]:
    """Arrays all of whose accesses lie in the accessing thread's own slab."""
    if k.tid_ndim == 0:
        return frozenset()
    alias = _tid_aliases(k)
    slabs: dict[str, set] = {}
    for s in ir.walk_stmts(k.body):
        if isinstance(s, (ir.Store, ir.AtomicAdd)):
            slabs.setdefault(s.array, set()).add(_slab(s.indices, alias))
    for e in ir.all_exprs(k.body):
        if isinstance(e, ir.Load):
            slabs.setdefault(e.array, set()).add(_slab(e.indices, alias))
    out = set()
    for a, found in slabs.items():
        if len(found) == 1 and sorted(axis for _, axis in next(iter(found))) == list(range(k.tid_ndim)):
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
