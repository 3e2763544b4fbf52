"""Adjoint locals known to be zero: `d = d + e` becomes `d = e` (docs/adjoint-forms.md section 12).

The reverse sweep zeroes an adjoint local after its last use (`g = d; d = 0`), so in a reverse loop each
iteration starts with it zero again, and its first add is `0 + e`, which the backends' compilers keep (it is
not `e` for e = -0.0). `reverse.peephole` drops the pair when both sit in one block; this pass follows the
zeros through branches and loops, a forward dataflow over the statements: a local is known zero after
`d = 0`, until anything else assigns it; after a branch, where it is known zero on both arms; at a loop's
body entry, where it is known zero before the loop and at the end of the body (the greatest fixed point,
from the set known before the loop). The IR has no break or continue, so a body runs to its end.

Only the names given (the adjoint locals) are followed: a sum the primal computes keeps its `0 + e`. The
value changes only where e is -0.0 (the local then holds -0.0, not +0.0), which compares equal."""

from __future__ import annotations

from dataclasses import replace

from ..ir import nodes as ir
from ..ir.ops import Op


def drop_zero_adds(body: list[ir.Stmt], followed: frozenset[str]) -> list[ir.Stmt]:
    """`body` with every `d = d + e` into a followed local d known to be zero there made `d = e`."""
    return _block(tuple(body), frozenset(), followed)[0]


def _block(body: tuple[ir.Stmt, ...], zero: frozenset[str], followed: frozenset[str]):
    out: list[ir.Stmt] = []
    for s in body:
        s, zero = _stmt(s, zero, followed)
        out.append(s)
    return out, zero


def _stmt(s: ir.Stmt, zero: frozenset[str], followed: frozenset[str]):
    if isinstance(s, ir.Assign):
        if s.name not in followed:
            return s, zero
        v = s.value
        if isinstance(v, ir.Const) and v.value == 0:
            return s, zero | {s.name}
        if s.name in zero and _adds_into(s) and not _reads(v.args[1], s.name):
            s = replace(s, value=v.args[1])
        return s, zero - {s.name}
    if isinstance(s, ir.If):
        then, z1 = _block(s.then, zero, followed)
        orelse, z2 = _block(s.orelse, zero, followed)
        return replace(s, then=tuple(then), orelse=tuple(orelse)), z1 & z2
    if isinstance(s, (ir.For, ir.While)):
        entry = zero
        while True:  # shrinks from `zero`, so it ends
            _, end = _block(s.body, entry, followed)
            narrower = zero & end
            if narrower == entry:
                break
            entry = narrower
        body, _ = _block(s.body, entry, followed)
        # after the loop: the entry state (no iteration) or an iteration's end, both holding `entry`
        return replace(s, body=tuple(body)), entry
    return s, zero  # stores and atomic adds assign no local


def _adds_into(s: ir.Assign) -> bool:
    v = s.value
    return isinstance(v, ir.Apply) and v.op is Op.ADD and v.args[0] == ir.Var(s.name, type=v.type) \
        and v.args[1].type == v.type


def _reads(e: ir.Expr, name: str) -> bool:
    return any(isinstance(x, ir.Var) and x.name == name for x in ir.walk_expr(e))
