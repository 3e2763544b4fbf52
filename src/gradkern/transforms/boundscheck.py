"""Bounds checks (GRADKERN_BOUNDSCHECK=1): every index of every array access
becomes an `InBounds` node, and the kernel takes one more array, the
out-of-bounds flag `_gk_oob` (one int64). An index outside its axis records
the access and the thread in the flag (the first one wins) and reads or writes
element 0 instead, so a checked launch never touches memory outside its
arrays; the runtime reads the flag after the launch and raises `LaunchError`
naming the access and the thread. Both backends print the same checks.
Applied just before printing, after every derivative transform.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import Loc
from ..ir import nodes as ir
from ..ir.names import OOB
from ..ir.rewrite import map_expr, with_blocks, with_exprs
from ..ir.types import I64, Array


@dataclass(frozen=True)
class Access:
    """One checked access site, for the runtime's message."""

    kind: str  # "reads", "writes", "atomically adds to"
    text: str  # the element accessed, as the IR prints it
    array: str
    loc: Loc | None


def _sites(k: ir.Kernel) -> list[tuple[ir.Stmt | ir.Expr, str]]:
    """Every access in a fixed order (statements in order, loads within them pre-order)."""
    out: list = []

    def block(body):
        for s in body:
            for e in ir.stmt_exprs(s):
                out.extend((x, ir.ACCESS_VERBS[ir.Load]) for x in ir.walk_expr(e) if isinstance(x, ir.Load))
            if isinstance(s, (ir.Store, ir.AtomicAdd)):
                out.append((s, ir.ACCESS_VERBS[type(s)]))
            for b in s.block_fields:
                block(getattr(s, b))

    block(k.body)
    return out


def bounds_checked(k: ir.Kernel) -> tuple[ir.Kernel, tuple[Access, ...]]:
    """`k` with every access index checked, and the table of its access sites."""
    sites = _sites(k)
    if not sites:
        return k, ()
    number = {id(node): n for n, (node, _) in enumerate(sites)}
    total = len(sites)

    def checked(indices, array, site):
        return tuple(ir.InBounds(i, array, axis, site, total, type=i.type, loc=i.loc)
                     for axis, i in enumerate(indices))

    def expr(e: ir.Expr) -> ir.Expr | None:
        if isinstance(e, ir.Load) and id(e) in number:
            inner = tuple(map_expr(i, pre=expr) for i in e.indices)
            return replace(e, indices=checked(inner, e.array, number[id(e)]))
        return None

    def stmt(s: ir.Stmt) -> ir.Stmt:
        site = number.get(id(s))
        s = with_blocks(with_exprs(s, lambda e: map_expr(e, pre=expr)), block)
        if site is not None:
            s = replace(s, indices=checked(s.indices, s.array, site))
        return s

    def block(body):
        return tuple(stmt(s) for s in body)

    table = tuple(Access(kind, node.target, node.array, node.loc) for node, kind in sites)
    flag = ir.Param(OOB, Array(I64, 1), is_array=True, written=True)
    return replace(k, params=(*k.params, flag), body=block(k.body)), table
