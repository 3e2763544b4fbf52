"""Vector mode (BatchDuplicated): k derivative lanes in one kernel.

A derivative kernel splits into primal work (values, partials, tape, control
flow) and derivative work (tangents, adjoints, shadows), and derivative values
never flow back into primal ones. So every statement that writes a derivative
entity is copied once per lane with that lane's names, in place, while the
primal statements between them run once and are shared by all lanes. Each
lane then executes exactly the statement sequence a one-lane kernel would.

A backend may run the lanes in groups, the primal work once (runtime/). In
reverse mode the split pair already allows that (the reverse writes only
shadows); in forward mode every group but the last runs the tangent work
alone, without the primal's stores, which is exact when the kernel never reads
an array it writes: each group then reads the memory the primal left intact.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import InternalError
from ..ir import nodes as ir
from ..ir.names import lane as lane_name
from ..ir.rewrite import rename_locals, with_blocks
from .simplify import without


def _reads(e: ir.Expr) -> set[str]:
    return {x.name if isinstance(x, ir.Var) else x.array for x in ir.walk_expr(e) if isinstance(x, (ir.Var, ir.Load))}


def derivative_entities(k: ir.Kernel, seeds: set[str]) -> set[str]:
    """The seeds (derivative parameters) and every local assigned, somewhere,
    from a value that reads a derivative entity."""
    lane = set(seeds)
    while True:
        grown = set(lane)
        for s in ir.walk_stmts(k.body):
            if isinstance(s, ir.Assign) and s.name not in grown and _reads(s.value) & grown:
                grown.add(s.name)
        if grown == lane:
            return lane
        lane = grown


def replicate_lanes(k: ir.Kernel, seeds: set[str], lanes: int) -> ir.Kernel:
    """`k` with each derivative parameter and local split into `lanes` copies."""
    lane = derivative_entities(k, seeds)

    def writes(s: ir.Stmt) -> str | None:
        if isinstance(s, ir.Assign):
            return s.name
        if isinstance(s, (ir.Store, ir.AtomicAdd)):
            return s.array
        return None

    def copy(s: ir.Stmt, n: int) -> ir.Stmt:
        return rename_locals((s,), {x: lane_name(x, n) for x in lane}, arrays=True)[0]

    def block(body) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in body:
            if isinstance(s, (ir.If, ir.For, ir.While)):
                if any(_reads(e) & lane for e in ir.stmt_exprs(s)):
                    raise InternalError("control flow depends on a derivative value", s.loc)
                out.append(with_blocks(s, block))
            elif writes(s) in lane:
                out += [copy(s, n) for n in range(lanes)]
            else:
                if any(_reads(e) & lane for e in ir.stmt_exprs(s)):
                    raise InternalError(f"a primal statement reads a derivative value: {s}", s.loc)
                out.append(s)
        return tuple(out)

    params: list[ir.Param] = []
    for p in k.params:
        params += [replace(p, name=lane_name(p.name, n)) for n in range(lanes)] if p.name in lane else [p]
    local_items = []
    for name, t in k.locals:
        local_items += [(lane_name(name, n), t) for n in range(lanes)] if name in lane else [(name, t)]
    # a folded gather's deferred statements clear each lane's consumed shadows (transforms/fold.py)
    deferred = k.deferred and replace(k.deferred, body=block(k.deferred.body))
    return replace(k, name=f"{k.name}_x{lanes}", params=tuple(params), body=block(k.body),
                   locals=tuple(sorted(local_items)), interior=None, deferred=deferred)


def _written(k: ir.Kernel) -> set[str]:
    return {s.array for s in ir.walk_stmts(k.body) if isinstance(s, (ir.Store, ir.AtomicAdd))}


def separable_stores(primal: ir.Kernel) -> frozenset[str] | None:
    """The arrays `primal` writes, when it reads none of them (its stores can
    then be left to another launch); None when it reads one it writes."""
    written = _written(primal)
    read = {e.array for e in ir.all_exprs(primal.body) if isinstance(e, ir.Load)}
    return None if written & read else frozenset(written)


def without_primal_stores(tangent: ir.Kernel, primal: ir.Kernel) -> ir.Kernel:
    """The tangent work of `tangent` alone: its stores (and atomic adds) into the
    arrays `primal` writes are dropped; the primal must not read them
    (`separable_stores`)."""
    written = separable_stores(primal)
    if written is None:
        raise InternalError("the tangent work cannot run apart: the kernel reads an array it writes", primal.loc)
    dropped = without(tangent, lambda s: isinstance(s, (ir.Store, ir.AtomicAdd)) and s.array in written)
    return replace(dropped, name=f"{tangent.name}_only")
