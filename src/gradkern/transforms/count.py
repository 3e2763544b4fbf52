"""The count kernel's body (transforms/reverse.py builds the kernel): the augmented primal reduced to what
decides each thread's number of tape pushes, run before a taped launch to size its tape when that number
depends on run-time values: loops with run-time bounds, branches, `while` loops (docs/adjoint-forms.md
section 13). It evaluates the same expressions in the same order as the augmented primal, so it counts what
the augmented primal pushes."""

from __future__ import annotations

from ..errors import NotDifferentiableError
from ..ir import nodes as ir
from ..ir.rewrite import with_blocks


def count_skeleton(augmented: list[ir.Stmt], written: set[str], pointers: set[str]) -> tuple[ir.Stmt, ...]:
    """The augmented primal reduced to what decides the number of pushes: control flow,
    the locals it depends on, and the tape pointers (`pointers`). Stores are dropped, so this
    control flow must not read arrays the kernel writes (it would see stale values)."""

    def control_vars(body) -> set[str]:
        used = set(pointers)
        for st in ir.walk_stmts(body):
            if isinstance(st, (ir.If, ir.While, ir.For)):
                for e in ir.stmt_exprs(st):
                    used |= {x.name for x in ir.walk_expr(e) if isinstance(x, ir.Var)}
        return used

    def block(body, live: set[str]):
        out = []
        for st in body:
            if isinstance(st, (ir.Store, ir.AtomicAdd)):
                continue
            if isinstance(st, ir.Assign):
                if st.name in live:
                    out.append(st)
            else:
                out.append(with_blocks(st, lambda blk: block(blk, live)))
        return tuple(out)

    live = control_vars(augmented)
    while True:  # close `live` under the assignments that feed it
        grown = set(live)
        for st in ir.walk_stmts(tuple(augmented)):
            if isinstance(st, ir.Assign) and st.name in grown:
                grown |= {x.name for x in ir.walk_expr(st.value) if isinstance(x, ir.Var)}
        if grown == live:
            break
        live = grown
    skeleton = block(tuple(augmented), live)
    stale = _stale_loads(tuple(augmented), written)
    for st in ir.walk_stmts(skeleton):
        for e in ir.stmt_exprs(st):
            for x in ir.walk_expr(e):
                if isinstance(x, ir.Load) and id(x) in stale:
                    raise NotDifferentiableError(
                        f"the tape size depends on '{x.array}', which the kernel overwrites", x.loc,
                        hint="make loop bounds and branch conditions around taped loops independent of it")
    return skeleton


def _stale_loads(body: tuple[ir.Stmt, ...], written: set[str]) -> set[int]:
    """The loads (by id) of written arrays that may run after the thread itself stored into that array: the
    count skeleton, which drops stores, could see another value there than the primal. A load that runs before
    any store of its array (earlier in program order, and in no loop that stores into it) sees what the primal
    sees: no other thread writes what this one reads (the race check refuses such launches)."""
    out: set[int] = set()
    stored: set[str] = set()

    def stores(b) -> set[str]:
        return {st.array for st in ir.walk_stmts(b) if isinstance(st, (ir.Store, ir.AtomicAdd))}

    def visit(b, looping: set[str]) -> None:
        for st in b:
            inner = looping | stores((st,)) if isinstance(st, ir.While) else looping
            for e in ir.stmt_exprs(st):
                out.update(id(x) for x in ir.walk_expr(e) if isinstance(x, ir.Load) and x.array in written
                           and (x.array in stored or x.array in inner))
            if isinstance(st, (ir.Store, ir.AtomicAdd)):
                stored.add(st.array)
            for blk in ir.blocks(st):
                visit(blk, looping | stores((st,)) if isinstance(st, (ir.For, ir.While)) else looping)
    visit(body, set())
    return out
