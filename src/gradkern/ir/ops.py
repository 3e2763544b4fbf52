"""The one operator enum of the IR: arithmetic, comparisons, logic, casts and
elementary functions are all `Apply(op, args)` nodes, so passes and the
derivative table key on one enum."""

from __future__ import annotations

from enum import Enum


class Op(Enum):
    # arithmetic
    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"
    FLOORDIV = "//"
    MOD = "%"
    POW = "**"
    NEG = "neg"
    # comparisons (result bool)
    EQ = "=="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    # logic (short-circuit for AND/OR)
    AND = "and"
    OR = "or"
    NOT = "not"
    # conversion to the node's type (int(): truncation toward zero)
    CAST = "cast"
    # elementary functions
    SIN = "sin"
    COS = "cos"
    TAN = "tan"
    EXP = "exp"
    LOG = "log"
    SQRT = "sqrt"
    TANH = "tanh"
    ABS = "abs"
    MIN = "min"
    MAX = "max"
    FLOOR = "floor"

    @property
    def arity(self) -> int:
        return 1 if self in UNARY else 2


ARITHMETIC = {Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.FLOORDIV, Op.MOD, Op.POW}
COMPARISONS = {Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE}
LOGIC = {Op.AND, Op.OR, Op.NOT}
# functions that map floats to floats (an int argument is converted first)
FLOAT_FUNCTIONS = {Op.SIN, Op.COS, Op.TAN, Op.EXP, Op.LOG, Op.SQRT, Op.TANH}
UNARY = {Op.NEG, Op.NOT, Op.CAST, Op.ABS, Op.FLOOR} | FLOAT_FUNCTIONS
INFIX = ARITHMETIC | COMPARISONS | {Op.AND, Op.OR}
