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
    # bitwise, on integers (and bools for & | ^): Python's semantics; shifts by an amount outside [0, 64) give
    # 0 (<<) or the sign (>>: 0 or -1), where C leaves them undefined and Python raises for negative ones
    BITAND = "&"
    BITOR = "|"
    BITXOR = "^"
    LSHIFT = "<<"
    RSHIFT = ">>"
    INVERT = "~"
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
    ASIN = "asin"
    ACOS = "acos"
    ATAN = "atan"
    SINH = "sinh"
    COSH = "cosh"
    ASINH = "asinh"
    ACOSH = "acosh"
    ATANH = "atanh"
    ERF = "erf"
    EXPM1 = "expm1"
    LOG1P = "log1p"
    # functions of two floats
    ATAN2 = "atan2"
    HYPOT = "hypot"
    COPYSIGN = "copysign"
    FMOD = "fmod"

    @property
    def arity(self) -> int:
        return 1 if self in UNARY else 2


ARITHMETIC = {Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.FLOORDIV, Op.MOD, Op.POW}
COMPARISONS = {Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE}
LOGIC = {Op.AND, Op.OR, Op.NOT}
BITWISE = {Op.BITAND, Op.BITOR, Op.BITXOR, Op.LSHIFT, Op.RSHIFT}
# functions that map floats to floats (an int argument is converted first)
FLOAT_FUNCTIONS = {Op.SIN, Op.COS, Op.TAN, Op.EXP, Op.LOG, Op.SQRT, Op.TANH, Op.ASIN, Op.ACOS, Op.ATAN, Op.SINH,
                   Op.COSH, Op.ASINH, Op.ACOSH, Op.ATANH, Op.ERF, Op.EXPM1, Op.LOG1P}
# functions of two floats (int arguments are converted first): C's atan2, hypot, copysign and fmod
FLOAT_BINARY = {Op.ATAN2, Op.HYPOT, Op.COPYSIGN, Op.FMOD}
UNARY = {Op.NEG, Op.NOT, Op.CAST, Op.ABS, Op.FLOOR, Op.INVERT} | FLOAT_FUNCTIONS
INFIX = ARITHMETIC | COMPARISONS | BITWISE | {Op.AND, Op.OR}
