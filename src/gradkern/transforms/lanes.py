"""Vector mode (BatchDuplicated): k derivative lanes in one kernel.

A derivative kernel splits into primal work (values, partials, tape, control
flow) and derivative work (tangents, adjoints, shadows), and derivative values
never flow back into primal ones. So every statement that writes a derivative
entity is copied once per lane with that lane's names, in place, while the
primal statements between them run once and are shared by all lanes. Each
lane then executes exactly the statement sequence a one-lane kernel would.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import InternalError
from ..ir import nodes as ir
from ..ir.names import lane as lane_name
from ..ir.rewrite import rename_locals, with_blocks


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
    return replace(k, name=f"{k.name}_x{lanes}", params=tuple(params), body=block(k.body),
                   locals=tuple(sorted(local_items)), interior=None)
