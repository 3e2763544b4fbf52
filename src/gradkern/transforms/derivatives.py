"""THE derivative table: for each differentiable Op, its partial derivatives
as typed IR, in terms of the operands `x` and the result `y`.

Forward mode builds t_y = Σ ∂ᵢ·t_xᵢ and reverse mode d_xᵢ += ∂ᵢ·d_y from the
same entries. Each entry also says, per operand, what that operand's partial reads
(`reads[i]`: operand positions, and "y" for the result), so the reverse
transform keeps (recomputes or tapes) only the values the partials of *active*
operands need. A partial of None is structurally zero.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import InternalError
from ..ir import build as b
from ..ir import nodes as ir
from ..ir.ops import Op

PartialsFn = Callable[[tuple[ir.Expr, ...], ir.Expr], tuple[ir.Expr | None, ...]]


@dataclass(frozen=True)
class Partials:
    """One entry of the table: `at(x, y)` builds ∂y/∂xᵢ for each operand xᵢ
    (None: structurally zero) from the operands x and the result y."""

    at: PartialsFn
    reads: tuple  # per operand: what its partial reads (operand indices and/or "y")


def _one(e: ir.Expr) -> ir.Const:
    return b.const(1, e.type)


def _pow_partials(x, y):
    base, expo = x
    if expo.type.is_int:
        # d(u^n)/du = n u^(n-1), n an integer: exact also for u <= 0
        n = b.cast(expo, base.type)
        return (b.mul(n, b.apply(Op.POW, base, b.apply(Op.SUB, expo, b.const(1, expo.type)), t=base.type)), None)
    # d(u^v)/du = v u^(v-1); d(u^v)/dv = log(u) u^v
    return (b.mul(expo, b.apply(Op.POW, base, b.sub(expo, _one(expo)))),
            b.mul(b.apply(Op.LOG, base), y))


DERIVATIVES: dict[Op, Partials] = {
    Op.ADD: Partials(lambda x, y: (_one(y), _one(y)), ((), ())),
    Op.SUB: Partials(lambda x, y: (_one(y), b.const(-1, y.type)), ((), ())),
    Op.MUL: Partials(lambda x, y: (x[1], x[0]), ((1,), (0,))),
    # d(a/b)/da = 1/b; d(a/b)/db = -(a/b)/b
    Op.DIV: Partials(lambda x, y: (b.div(_one(y), x[1]), b.neg(b.div(y, x[1]))), ((1,), (1, "y"))),
    Op.POW: Partials(_pow_partials, ((0, 1), (0, "y"))),
    Op.NEG: Partials(lambda x, y: (b.const(-1, y.type),), ((),)),
    Op.SIN: Partials(lambda x, y: (b.apply(Op.COS, x[0]),), ((0,),)),
    Op.COS: Partials(lambda x, y: (b.neg(b.apply(Op.SIN, x[0])),), ((0,),)),
    # d tan(u)/du = 1 + tan(u)^2
    Op.TAN: Partials(lambda x, y: (b.add(_one(y), b.mul(y, y)),), (("y",),)),
    Op.EXP: Partials(lambda x, y: (y,), (("y",),)),
    Op.LOG: Partials(lambda x, y: (b.div(_one(y), x[0]),), ((0,),)),
    # d sqrt(u)/du = 1 / (2 sqrt(u))
    Op.SQRT: Partials(lambda x, y: (b.div(b.const(0.5, y.type), y),), (("y",),)),
    Op.TANH: Partials(lambda x, y: (b.sub(_one(y), b.mul(y, y)),), (("y",),)),
    # |u|' = sign(u), taken as +1 at 0 (a subgradient)
    Op.ABS: Partials(lambda x, y: (b.select(b.cmp(Op.GE, x[0], b.const(0, x[0].type)), _one(y),
                                        b.const(-1, y.type)),), ((0,),)),
    # ties go to the first operand, so exactly one partial is 1
    Op.MIN: Partials(lambda x, y: (b.select(b.cmp(Op.LE, x[0], x[1]), _one(y), b.const(0, y.type)),
                               b.select(b.cmp(Op.LE, x[0], x[1]), b.const(0, y.type), _one(y))),
                 ((0, 1), (0, 1))),
    Op.MAX: Partials(lambda x, y: (b.select(b.cmp(Op.GE, x[0], x[1]), _one(y), b.const(0, y.type)),
                               b.select(b.cmp(Op.GE, x[0], x[1]), b.const(0, y.type), _one(y))),
                 ((0, 1), (0, 1))),
    Op.FLOOR: Partials(lambda x, y: (None,), ((),)),
    Op.FLOORDIV: Partials(lambda x, y: (None, None), ((), ())),
    # a % b = a - b floor(a/b): d/da = 1, d/db = -floor(a/b)
    Op.MOD: Partials(lambda x, y: (_one(y), b.neg(b.apply(Op.FLOOR, b.div(x[0], x[1])))), ((), (0, 1))),
    # a float-to-float conversion passes the derivative through (converted back by the caller)
    Op.CAST: Partials(lambda x, y: (_one(y),), ((),)),
}

# Ops whose result is never differentiable: comparisons, logic, integer-only results.
NON_DIFFERENTIABLE = {Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE, Op.AND, Op.OR, Op.NOT}


def partials(op: Op, loc=None) -> Partials:
    """The partials of `op`; a missing entry fails loudly, naming it."""
    p = DERIVATIVES.get(op)
    if p is None:
        raise InternalError(f"no derivative rule for '{op.value}'", loc)
    return p
