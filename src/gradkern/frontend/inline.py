"""Renaming of IR names: for inlining (a device function's body is copied into
its caller with every local prefixed and its array parameters replaced by the
caller's) and for privatising reassigned scalar parameters."""

from __future__ import annotations

from dataclasses import replace

from ..ir import nodes as ir


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


def _rename(body, name, arrays):
    def e(x: ir.Expr) -> ir.Expr:
        if isinstance(x, ir.Var):
            return replace(x, name=name(x.name))
        if isinstance(x, ir.Apply):
            return replace(x, args=tuple(map(e, x.args)))
        if isinstance(x, ir.Select):
            return replace(x, cond=e(x.cond), a=e(x.a), b=e(x.b))
        if isinstance(x, ir.Load):
            return replace(x, array=arrays.get(x.array, x.array), indices=tuple(map(e, x.indices)))
        if isinstance(x, ir.Shape):
            return replace(x, array=arrays.get(x.array, x.array))
        return x

    def s(x: ir.Stmt) -> ir.Stmt:
        if isinstance(x, ir.Assign):
            return replace(x, name=name(x.name), value=e(x.value))
        if isinstance(x, (ir.Store, ir.AtomicAdd)):
            return replace(x, array=arrays.get(x.array, x.array), indices=tuple(map(e, x.indices)), value=e(x.value))
        if isinstance(x, ir.If):
            return replace(x, cond=e(x.cond), then=b(x.then), orelse=b(x.orelse))
        if isinstance(x, ir.For):
            return replace(x, var=name(x.var), start=e(x.start), stop=e(x.stop), step=e(x.step), body=b(x.body))
        if isinstance(x, ir.While):
            return replace(x, cond=e(x.cond), body=b(x.body))
        raise TypeError(type(x))

    def b(xs):
        return tuple(map(s, xs))

    return b(body)
