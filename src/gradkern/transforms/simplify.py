"""Simplification: fold boolean constants through and/or/not, selects and
ifs, so a body specialised with known test values loses its dead branches."""

from __future__ import annotations

from dataclasses import replace

from ..ir import nodes as ir
from ..ir.ops import Op
from ..ir.rewrite import map_expr, with_blocks, with_exprs

_INT_FOLD = {Op.ADD: lambda a, b: a + b, Op.SUB: lambda a, b: a - b, Op.MAX: max, Op.MIN: min}


def _bool(e: ir.Expr) -> bool | None:
    return e.value if isinstance(e, ir.Const) and isinstance(e.value, bool) else None


def simplify_expr(e: ir.Expr) -> ir.Expr:
    """`e` with constants folded, bottom-up."""
    return map_expr(e, _fold)


def _fold(e: ir.Expr) -> ir.Expr:
    """One node, its operands already folded."""
    if isinstance(e, ir.Apply):
        args = e.args
        if e.op in (Op.AND, Op.OR):
            a, b = (_bool(x) for x in args)
            absorbing = e.op is Op.OR  # True absorbs an or, False an and (operands are pure)
            if absorbing in (a, b):
                return ir.Const(absorbing, type=e.type)
            if a is not None:  # a is the neutral constant: the result is the other operand
                return args[1]
            if b is not None:
                return args[0]
        if e.op is Op.NOT and _bool(args[0]) is not None:
            return ir.Const(not _bool(args[0]), type=e.type)
        if e.op in _INT_FOLD and e.type.is_int and all(isinstance(a, ir.Const) for a in args):
            value = _INT_FOLD[e.op](*(int(a.value) for a in args))
            bits = 8 * e.type.itemsize
            if -2 ** (bits - 1) <= value < 2 ** (bits - 1):  # one that wraps is left to the backend's arithmetic
                return ir.Const(value, type=e.type)
        return e
    if isinstance(e, ir.Select):
        known = _bool(e.cond)
        if known is not None:
            return e.a if known else e.b
    return e


def simplify_block(body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
    out: list[ir.Stmt] = []
    for s in body:
        if isinstance(s, ir.If):
            cond = simplify_expr(s.cond)
            known = _bool(cond)
            if known is not None:
                out.extend(simplify_block(s.then if known else s.orelse))
                continue
            out.append(replace(s, cond=cond, then=simplify_block(s.then), orelse=simplify_block(s.orelse)))
        elif isinstance(s, ir.For):  # its bounds are left as written
            out.append(with_blocks(s, simplify_block))
        elif isinstance(s, ir.While):
            cond = simplify_expr(s.cond)
            if _bool(cond) is False:
                continue
            out.append(replace(s, cond=cond, body=simplify_block(s.body)))
        else:
            out.append(with_exprs(s, simplify_expr))
    return tuple(out)


def without(k: ir.Kernel, drop) -> ir.Kernel:
    """`k` with every statement for which `drop(stmt)` holds removed, at any depth."""
    def block(body):
        return tuple(with_blocks(s, block) for s in body if not drop(s))
    return replace(k, body=block(k.body))


def without_stores_to(k: ir.Kernel, arrays: set[str]) -> ir.Kernel:
    """`k` without its plain stores into `arrays`: DuplicatedNoNeed outputs the
    kernel never reads, whose new primal values nobody asked for."""
    return without(k, lambda s: isinstance(s, ir.Store) and s.array in arrays)
