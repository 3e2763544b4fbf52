"""THE derivative table: for each differentiable Op, its partial derivatives
as typed IR, in terms of the operands `x` and the result `y`.

Forward mode builds t_y = Σ ∂ᵢ·t_xᵢ and reverse mode d_xᵢ += ∂ᵢ·d_y from the
same entries. Each entry also says, per operand, what that operand's partial reads
(`reads[i]`: operand positions, and "y" for the result), so the reverse
transform keeps (recomputes or tapes) only the values the partials of *active*
operands need. A partial of None is structurally zero.

Conventions at the kinks (tested in tests/transforms/test_kinks.py, forward and reverse,
interpreter and Numba), chosen so that a derivative through a constant is
never NaN where JAX and PyTorch give a number:

    op          at                       partial                   as
    u ** p      p == 0                   ∂/∂u = 0 (not 0·u^-1)     PyTorch; JAX for integer p
    u ** p      u == 0, p >= 0           ∂/∂p = 0 (not log 0·u^p)  PyTorch and JAX
    u ** p      u == 0, p < 0            ∂/∂p = -inf (log 0·inf)   PyTorch (JAX: NaN)
    u ** p      u < 0, p a float         ∂/∂p = NaN (log u)        PyTorch and JAX
    abs(u)      u == 0 (and -0.0)        +1                        JAX (PyTorch: sign(0) = 0);
                                                                   both are subgradients
    min(a, b)   a == b                   ∂/∂a = 1, ∂/∂b = 0        the value is the first
    max(a, b)   a == b                   ∂/∂a = 1, ∂/∂b = 0        argument on ties (as Python's
                                                                   and the backends' min/max);
                                                                   JAX and PyTorch split 1/2
    floor(u)    everywhere               0 (structurally)          JAX and PyTorch
    ceil, trunc, rint (u)  everywhere    0 (structurally)          as floor
    cbrt(u)     u == 0 (and -0.0)        +inf (1 / (3 cbrt(u)^2))  IEEE; JAX and PyTorch
    log2, log10 u == 0                   +inf (1 / (u ln b))       as log
    sqrt(u)     u == 0                   +inf (0.5 / sqrt(u))      IEEE; JAX and PyTorch
    log(u)      u == 0                   +inf (1 / u)              IEEE; JAX and PyTorch
    asin, acos  u == ±1                  ±inf                      IEEE; JAX and PyTorch
    acosh(u)    u == 1                   +inf                      IEEE; JAX and PyTorch
    atanh(u)    u == ±1                  +inf                      IEEE; JAX and PyTorch
    atan2(v, u) v == u == 0              NaN (0/0)                 JAX and PyTorch
    hypot(a, b) a == b == 0              0 for both (subgradient)  PyTorch: NaN
    copysign    a == 0 (and -0.0)        ∂/∂a = sign(s)            as abs; ∂/∂s = 0 everywhere
    fmod(a, b)  everywhere               ∂/∂b = -trunc(a/b)        as PyTorch
    gk.sign(u)  everywhere               0                         JAX and PyTorch
    gk.clamp    u == lo or u == hi       ∂/∂u = 1 (min/max ties)   clamp = min(max(u, lo), hi)

The partial is the one-sided limit where the maths has one (u ** p with
0 < p < 1 at u = 0: +inf). Infinite partials stay infinite: an adjoint or
tangent of 0 times an infinite partial is NaN, as in JAX and PyTorch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import InternalError
from ..ir import build as b
from ..ir import nodes as ir
from ..ir.ops import Op
from ..ir.types import BOOL

PartialsFn = Callable[[tuple[ir.Expr, ...], ir.Expr], tuple[ir.Expr | None, ...]]


@dataclass(frozen=True)
class Partials:
    """One entry of the table: `at(x, y)` builds ∂y/∂xᵢ for each operand xᵢ
    (None: structurally zero) from the operands x and the result y."""

    at: PartialsFn
    reads: tuple  # per operand: what its partial reads (operand indices and/or "y")


def _one(e: ir.Expr) -> ir.Const:
    return b.const(1, e.type)


def _zero(e: ir.Expr) -> ir.Const:
    return b.const(0, e.type)


def _pow_partials(x, y):
    """d(u^p)/du = p u^(p-1), 0 where p == 0; d(u^p)/dp = log(u) u^p, 0 where
    u == 0 and p >= 0 (the module's table). A constant p or u decides statically."""
    base, expo = x
    if expo.type.is_int:  # u^(n-1) with an integer n: exact also for u <= 0
        dbase = b.mul(b.cast(expo, base.type),
                      b.apply(Op.POW, base, b.apply(Op.SUB, expo, b.const(1, expo.type)), t=base.type))
        dexpo = None
    else:
        dbase = b.mul(expo, b.apply(Op.POW, base, b.sub(expo, _one(expo))))
        dexpo = b.mul(b.apply(Op.LOG, base), y)
        if not (isinstance(base, ir.Const) and base.value != 0):
            at_zero = ir.Apply(Op.AND, (b.cmp(Op.EQ, base, _zero(base)), b.cmp(Op.GE, expo, _zero(expo))),
                               type=BOOL)
            dexpo = b.select(at_zero, _zero(y), dexpo)
    if isinstance(expo, ir.Const):
        dbase = None if expo.value == 0 else dbase
    else:
        dbase = b.select(b.cmp(Op.EQ, expo, _zero(expo)), _zero(dbase), dbase)
    return dbase, dexpo


def _sqrt_one_minus_square(u):
    """sqrt((1 - u)(1 + u)): sqrt(1 - u^2) without cancellation next to |u| = 1."""
    return b.apply(Op.SQRT, b.mul(b.sub(_one(u), u), b.add(_one(u), u)))


def _atan2_partials(x, y):
    """atan2(v, u): d/dv = u / (u^2 + v^2), d/du = -v / (u^2 + v^2), with h = hypot(v, u) so that large
    operands do not overflow; NaN at the origin (0/0), as in JAX and PyTorch."""
    v, u = x
    h = b.apply(Op.HYPOT, v, u)
    return b.div(b.div(u, h), h), b.neg(b.div(b.div(v, h), h))


DERIVATIVES: dict[Op, Partials] = {
    Op.ADD: Partials(lambda x, y: (_one(y), _one(y)), ((), ())),
    Op.SUB: Partials(lambda x, y: (_one(y), b.const(-1, y.type)), ((), ())),
    Op.MUL: Partials(lambda x, y: (x[1], x[0]), ((1,), (0,))),
    # d(a/b)/da = 1/b; d(a/b)/db = -(a/b)/b
    Op.DIV: Partials(lambda x, y: (b.div(_one(y), x[1]), b.neg(b.div(y, x[1]))), ((1,), (1, "y"))),
    Op.POW: Partials(_pow_partials, ((0, 1), (0, 1, "y"))),
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
    # |u|' = sign(u), taken as +1 at 0 (a subgradient, JAX's choice)
    Op.ABS: Partials(lambda x, y: (b.select(b.cmp(Op.GE, x[0], _zero(x[0])), _one(y), b.const(-1, y.type)),),
                     ((0,),)),
    # min(a, b) is b if b < a else a (max: b if b > a else a), so ties go to a
    Op.MIN: Partials(lambda x, y: (b.select(b.cmp(Op.LT, x[1], x[0]), _zero(y), _one(y)),
                                   b.select(b.cmp(Op.LT, x[1], x[0]), _one(y), _zero(y))), ((0, 1), (0, 1))),
    Op.MAX: Partials(lambda x, y: (b.select(b.cmp(Op.GT, x[1], x[0]), _zero(y), _one(y)),
                                   b.select(b.cmp(Op.GT, x[1], x[0]), _one(y), _zero(y))), ((0, 1), (0, 1))),
    Op.FLOOR: Partials(lambda x, y: (None,), ((),)),
    Op.ASIN: Partials(lambda x, y: (b.div(_one(y), _sqrt_one_minus_square(x[0])),), ((0,),)),
    Op.ACOS: Partials(lambda x, y: (b.neg(b.div(_one(y), _sqrt_one_minus_square(x[0]))),), ((0,),)),
    Op.ATAN: Partials(lambda x, y: (b.div(_one(y), b.add(_one(y), b.mul(x[0], x[0]))),), ((0,),)),
    Op.SINH: Partials(lambda x, y: (b.apply(Op.COSH, x[0]),), ((0,),)),
    Op.COSH: Partials(lambda x, y: (b.apply(Op.SINH, x[0]),), ((0,),)),
    # 1 / sqrt(u^2 + 1) as 1 / hypot(u, 1): no overflow for large |u|
    Op.ASINH: Partials(lambda x, y: (b.div(_one(y), b.apply(Op.HYPOT, x[0], _one(y))),), ((0,),)),
    # 1 / (sqrt(u - 1) sqrt(u + 1)): no cancellation next to 1, no overflow
    Op.ACOSH: Partials(lambda x, y: (b.div(_one(y), b.mul(b.apply(Op.SQRT, b.sub(x[0], _one(y))),
                                                          b.apply(Op.SQRT, b.add(x[0], _one(y))))),), ((0,),)),
    Op.ATANH: Partials(lambda x, y: (b.div(_one(y), b.mul(b.sub(_one(y), x[0]), b.add(_one(y), x[0]))),), ((0,),)),
    # 2 / sqrt(pi) exp(-u^2)
    Op.ERF: Partials(lambda x, y: (b.mul(b.const(2 / math.sqrt(math.pi), y.type),
                                         b.apply(Op.EXP, b.neg(b.mul(x[0], x[0])))),), ((0,),)),
    # -2 / sqrt(pi) exp(-u^2)
    Op.ERFC: Partials(lambda x, y: (b.mul(b.const(-2 / math.sqrt(math.pi), y.type),
                                          b.apply(Op.EXP, b.neg(b.mul(x[0], x[0])))),), ((0,),)),
    Op.EXPM1: Partials(lambda x, y: (b.add(y, _one(y)),), (("y",),)),
    Op.LOG1P: Partials(lambda x, y: (b.div(_one(y), b.add(_one(y), x[0])),), ((0,),)),
    # d cbrt(u)/du = 1 / (3 cbrt(u)^2); d 2^u/du = 2^u ln 2; d log_b(u)/du = 1 / (u ln b)
    Op.CBRT: Partials(lambda x, y: (b.div(_one(y), b.mul(b.const(3, y.type), b.mul(y, y))),), (("y",),)),
    Op.EXP2: Partials(lambda x, y: (b.mul(y, b.const(math.log(2.0), y.type)),), (("y",),)),
    Op.LOG2: Partials(lambda x, y: (b.div(_one(y), b.mul(x[0], b.const(math.log(2.0), y.type))),), ((0,),)),
    Op.LOG10: Partials(lambda x, y: (b.div(_one(y), b.mul(x[0], b.const(math.log(10.0), y.type))),), ((0,),)),
    Op.CEIL: Partials(lambda x, y: (None,), ((),)),
    Op.TRUNC: Partials(lambda x, y: (None,), ((),)),
    Op.RINT: Partials(lambda x, y: (None,), ((),)),
    Op.ATAN2: Partials(_atan2_partials, ((0, 1), (0, 1))),
    # hypot(a, b): a / h and b / h, 0 at a == b == 0 (a subgradient of the cone)
    Op.HYPOT: Partials(lambda x, y: tuple(b.select(b.cmp(Op.EQ, y, _zero(y)), _zero(y), b.div(v, y)) for v in x),
                       ((0, "y"), (1, "y"))),
    # copysign(a, s) = |a| sign(s): d/da = sign(a) sign(s), sign(a) taken as +1 at a == 0 (as for abs), sign(s)
    # by its sign bit; d/ds = 0
    Op.COPYSIGN: Partials(lambda x, y: (b.mul(b.select(b.cmp(Op.GE, x[0], _zero(x[0])), _one(y), b.const(-1, y.type)),
                                              b.apply(Op.COPYSIGN, _one(y), x[1])), None), ((0, 1), ())),
    # fmod(a, b) = a - b trunc(a/b): d/da = 1, d/db = -trunc(a/b) = -(a - fmod(a, b)) / b
    Op.FMOD: Partials(lambda x, y: (_one(y), b.neg(b.div(b.sub(x[0], y), x[1]))), ((), (0, 1, "y"))),
    Op.FLOORDIV: Partials(lambda x, y: (None, None), ((), ())),
    # a % b = a - b floor(a/b): d/da = 1, d/db = -floor(a/b)
    Op.MOD: Partials(lambda x, y: (_one(y), b.neg(b.apply(Op.FLOOR, b.div(x[0], x[1])))), ((), (0, 1))),
    # a float-to-float conversion passes the derivative through (converted back by the caller)
    Op.CAST: Partials(lambda x, y: (_one(y),), ((),)),
}

# Ops whose result is never differentiable: comparisons, logic, integer-only results.
NON_DIFFERENTIABLE = {Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE, Op.AND, Op.OR, Op.NOT, Op.BITAND, Op.BITOR, Op.BITXOR,
                      Op.LSHIFT, Op.RSHIFT, Op.INVERT}


def partials(op: Op, loc=None) -> Partials:
    """The partials of `op`; a missing entry fails loudly, naming it."""
    p = DERIVATIVES.get(op)
    if p is None:
        raise InternalError(f"no derivative rule for '{op.value}'", loc)
    return p
