"""Rebuilding IR: one generic expression rebuilder, the statement-level
helpers passes share, and renaming.

Nodes are immutable; a rewrite returns new nodes, sharing every subtree it
leaves unchanged. The rebuilders reach sub-expressions and nested blocks only
through the fields each node class declares (`expr_fields`, `block_fields` in
ir/nodes.py), so a new node needs no change here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from . import nodes as ir


def _refill(node, names: tuple[str, ...], values: tuple) -> object:
    """`node` with fields `names` refilled, in order, from `values` (a tuple-valued
    field takes as many values as it held); `node` itself when nothing changed."""
    changes = {}
    pos = 0
    for n in names:
        old = getattr(node, n)
        if isinstance(old, tuple):
            new = tuple(values[pos:pos + len(old)])
            pos += len(old)
            if any(a is not b for a, b in zip(new, old)):
                changes[n] = new
        else:
            new = values[pos]
            pos += 1
            if new is not old:
                changes[n] = new
    if pos != len(values):
        raise ValueError(f"{type(node).__name__} takes {pos} sub-expressions, got {len(values)}")
    return replace(node, **changes) if changes else node


def with_children(e: ir.Expr, kids: tuple[ir.Expr, ...]) -> ir.Expr:
    """`e` with its sub-expressions (in `ir.children` order) replaced by `kids`."""
    return _refill(e, e.expr_fields, kids) if e.expr_fields else e


def map_expr(e: ir.Expr, fn: Callable[[ir.Expr], ir.Expr] | None = None, *,
             pre: Callable[[ir.Expr], ir.Expr | None] | None = None) -> ir.Expr:
    """`e` rebuilt bottom-up: at each node, `pre(node)` is tried first and a
    non-None result replaces the node as it is (its subtree is not visited:
    substitution); otherwise the children are mapped, left to right in
    evaluation order, and `fn` is applied to the node rebuilt with them."""
    if pre is not None:
        found = pre(e)
        if found is not None:
            return found
    kids = ir.children(e)
    if kids:
        e = with_children(e, tuple(map_expr(c, fn, pre=pre) for c in kids))
    return fn(e) if fn is not None else e


def with_exprs(s: ir.Stmt, fn: Callable[[ir.Expr], ir.Expr]) -> ir.Stmt:
    """`s` with each expression it evaluates itself (`ir.stmt_exprs`, in that
    order) replaced by `fn(expr)`; nested blocks are left as they are."""
    return _refill(s, s.expr_fields, tuple(fn(x) for x in ir.stmt_exprs(s)))


def with_blocks(s: ir.Stmt, fn: Callable[[tuple[ir.Stmt, ...]], Iterable[ir.Stmt]]) -> ir.Stmt:
    """`s` with each nested block (`ir.blocks`, in that order) replaced by `fn(block)`."""
    names = getattr(s, "block_fields", ())
    return replace(s, **{n: tuple(fn(getattr(s, n))) for n in names}) if names else s


# -- renaming -------------------------------------------------------------------
def rename(body: tuple[ir.Stmt, ...], prefix: str, arrays: dict[str, str]) -> tuple[ir.Stmt, ...]:
    """Prefix every local of an inlined body; map its array parameters to the caller's."""
    return _rename(body, lambda n: prefix + n, arrays)


def rename_locals(body: tuple[ir.Stmt, ...], mapping: dict[str, str], arrays: bool = False
                  ) -> tuple[ir.Stmt, ...]:
    """Rename the scalars in `mapping` (and the arrays too, with arrays=True),
    leaving every other name as it is."""
    return _rename(body, lambda n: mapping.get(n, n), mapping if arrays else {})


def rename_arrays(body: tuple[ir.Stmt, ...], mapping: dict[str, str]) -> tuple[ir.Stmt, ...]:
    """Rename the arrays in `mapping`, leaving every other name as it is."""
    return _rename(body, lambda n: n, mapping)


def _rename(body: tuple[ir.Stmt, ...], name: Callable[[str], str], arrays: dict[str, str]) -> tuple[ir.Stmt, ...]:
    def expr(x: ir.Expr) -> ir.Expr:
        if isinstance(x, ir.Var):
            return replace(x, name=name(x.name))
        if isinstance(x, (ir.Load, ir.Shape)):
            return replace(x, array=arrays.get(x.array, x.array))
        return x

    def stmt(s: ir.Stmt) -> ir.Stmt:
        s = with_blocks(with_exprs(s, lambda e: map_expr(e, expr)), block)
        if isinstance(s, ir.Assign):
            return replace(s, name=name(s.name))
        if isinstance(s, ir.For):
            return replace(s, var=name(s.var))
        if isinstance(s, (ir.Store, ir.AtomicAdd)):
            return replace(s, array=arrays.get(s.array, s.array))
        return s

    def block(xs: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        return tuple(map(stmt, xs))

    return block(body)
