"""Constructors of typed IR nodes for passes that generate code: each returns
a node whose type is already set (operands must already agree in type)."""

from __future__ import annotations

from . import nodes as ir
from .ops import Op
from .types import BOOL, I64, Scalar


def const(value, t: Scalar) -> ir.Const:
    v = bool(value) if t.is_bool else int(value) if t.is_int else float(value)
    return ir.Const(v, type=t)


def var(name: str, t: Scalar) -> ir.Var:
    return ir.Var(name, type=t)


def apply(op: Op, *args: ir.Expr, t: Scalar | None = None) -> ir.Apply:
    return ir.Apply(op, tuple(args), type=t or args[0].type)


def is_const(e: ir.Expr, value) -> bool:
    return isinstance(e, ir.Const) and e.value == value


def add(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    if is_const(a, 0):
        return b
    if is_const(b, 0):
        return a
    return apply(Op.ADD, a, b)


def sub(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return a if is_const(b, 0) else apply(Op.SUB, a, b)


def mul(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    if is_const(a, 1):
        return b
    if is_const(b, 1):
        return a
    if is_const(a, -1):
        return neg(b)
    if is_const(b, -1):
        return neg(a)
    return apply(Op.MUL, a, b)


def div(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return apply(Op.DIV, a, b)


def neg(a: ir.Expr) -> ir.Expr:
    if isinstance(a, ir.Apply) and a.op is Op.NEG:
        return a.args[0]
    return apply(Op.NEG, a)


def cast(a: ir.Expr, t: Scalar) -> ir.Expr:
    if a.type == t:
        return a
    if isinstance(a, ir.Const):
        return const(a.value, t)
    return ir.Apply(Op.CAST, (a,), type=t)


def cmp(op: Op, a: ir.Expr, b: ir.Expr) -> ir.Apply:
    return ir.Apply(op, (a, b), type=BOOL)


def select(c: ir.Expr, a: ir.Expr, b: ir.Expr) -> ir.Select:
    return ir.Select(c, a, b, type=a.type)


def index(e: ir.Expr) -> ir.Expr:
    return cast(e, I64)


def trip_count(start: ir.Expr, stop: ir.Expr, step: ir.Expr) -> ir.Expr:
    """The number of iterations of range(start, stop, step): ceil((stop - start) / step), at least 0. The
    reverse loop runs r over range(0, trip_count) and recomputes the variable as `iteration_value`."""
    zero, one = const(0, I64), const(1, I64)
    up = apply(Op.FLOORDIV, sub(add(sub(stop, start), step), one), step)
    down = apply(Op.FLOORDIV, sub(sub(sub(start, stop), step), one), neg(step))
    count = select(cmp(Op.GT, step, zero), up, down) if not (isinstance(step, ir.Const) and step.value > 0) \
        else up
    return apply(Op.MAX, count, zero)


def iteration_value(start: ir.Expr, step: ir.Expr, r: str) -> ir.Expr:
    """The loop variable's value at iteration `r` (a local) of range(start, stop, step)."""
    return add(start, mul(var(r, I64), step))
