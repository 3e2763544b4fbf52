"""The one operator enum of the IR: arithmetic, comparisons, logic, casts and
elementary functions are all `Apply(op, args)` nodes, so passes and the
derivative table key on one enum.

`FUNCTIONS` is the op table of the elementary functions: per function its arity,
the Python callables a kernel may call for it, its host implementation, its
spelling in the CPU backend's Python and in the CUDA backend's C, and whether it
is a function of floats. The frontend, type inference, the interpreter, both
printers and hostcuda's declarations read it, so a new elementary function is
an `Op` member, its entry here and its partials in transforms/derivatives.py
(docs/architecture.md#adding-an-elementary-function).
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import numpy as np

from .. import intrinsics


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
    ERFC = "erfc"
    EXPM1 = "expm1"
    LOG1P = "log1p"
    CBRT = "cbrt"
    EXP2 = "exp2"
    LOG2 = "log2"
    LOG10 = "log10"
    # rounding to an integral value of the argument's float type, as floor (session 57)
    CEIL = "ceil"
    TRUNC = "trunc"
    RINT = "rint"
    # functions of two floats
    ATAN2 = "atan2"
    HYPOT = "hypot"
    COPYSIGN = "copysign"
    FMOD = "fmod"

    @property
    def arity(self) -> int:
        return 1 if self in UNARY else 2


@dataclass(frozen=True)
class Function:
    """How every part of gradkern spells one elementary function."""

    arity: int
    # the Python objects a kernel may call for it, matched by identity whatever name they are imported under
    # (frontend/lower.py); gk.NAME is one of them when intrinsics.py exports it
    callables: tuple[Callable, ...]
    # its value on NumPy scalars of the node's type: the interpreter's (ir/interp.py), the test oracle's
    host: Callable
    # the callee in the CPU backend's generated Python: `math.` and `np.` are that module's own imports
    # (backends/numba_syntax.py, IMPORTS)
    python: str
    # C: the CUDA backend calls `_gkb_NAME` (NAME the op's value), overloaded for float and double; True: it is
    # generated around the C library's `NAMEf` and `NAME` (backends/cuda.py, _MATH; declared for hostcuda's
    # g++), False: the CUDA prelude writes it by hand (integer overloads, Python's tie rules)
    libm: bool = True
    # typing (ir/infer.py): True: integer arguments are converted to the default float and the result has
    # the arguments' float type; False: the function has its own rule there (abs, min, max, floor)
    floats: bool = True

    def c(self, op: Op) -> str:
        """The CUDA C spelling of a call, `{0}`, `{1}` its arguments."""
        return f"_gkb_{op.value}({', '.join(f'{{{i}}}' for i in range(self.arity))})"


def _unary(python: str, callables: tuple[Callable, ...], host: Callable, **kw) -> Function:
    return Function(1, callables, host, f"{python}({{0}})", **kw)


def _binary(python: str, callables: tuple[Callable, ...], host: Callable, **kw) -> Function:
    return Function(2, callables, host, f"{python}({{0}}, {{1}})", **kw)


FUNCTIONS: dict[Op, Function] = {
    Op.SIN: _unary("math.sin", (math.sin, np.sin), np.sin),
    Op.COS: _unary("math.cos", (math.cos, np.cos), np.cos),
    Op.TAN: _unary("math.tan", (math.tan, np.tan), np.tan),
    Op.EXP: _unary("math.exp", (math.exp, np.exp), np.exp),
    Op.LOG: _unary("math.log", (math.log, np.log), np.log),
    Op.SQRT: _unary("math.sqrt", (math.sqrt, np.sqrt), np.sqrt),
    Op.TANH: _unary("math.tanh", (math.tanh, np.tanh), np.tanh),
    Op.ABS: _unary("abs", (builtins.abs, math.fabs, np.abs, np.fabs), abs, libm=False, floats=False),
    Op.MIN: _binary("min", (builtins.min, np.minimum), lambda a, b: min(a, b), libm=False, floats=False),
    Op.MAX: _binary("max", (builtins.max, np.maximum), lambda a, b: max(a, b), libm=False, floats=False),
    # np.floor keeps float32 a float32 (math.floor returns an int in Numba)
    Op.FLOOR: _unary("np.floor", (math.floor, np.floor, intrinsics.floor), np.floor, floats=False),
    Op.ASIN: _unary("math.asin", (math.asin, np.arcsin), np.arcsin),
    Op.ACOS: _unary("math.acos", (math.acos, np.arccos), np.arccos),
    Op.ATAN: _unary("math.atan", (math.atan, np.arctan), np.arctan),
    Op.SINH: _unary("math.sinh", (math.sinh, np.sinh), np.sinh),
    Op.COSH: _unary("math.cosh", (math.cosh, np.cosh), np.cosh),
    Op.ASINH: _unary("math.asinh", (math.asinh, np.arcsinh), np.arcsinh),
    Op.ACOSH: _unary("math.acosh", (math.acosh, np.arccosh), np.arccosh),
    Op.ATANH: _unary("math.atanh", (math.atanh, np.arctanh), np.arctanh),
    # NumPy has none: computed in float64, rounded to the node's type
    Op.ERF: _unary("math.erf", (math.erf,), lambda a: math.erf(a)),
    # 1 - erf(u) without the cancellation for large u (LAMMPS' coul/long and option pricing call it)
    Op.ERFC: _unary("math.erfc", (math.erfc,), lambda a: math.erfc(a)),
    Op.EXPM1: _unary("math.expm1", (math.expm1, np.expm1), np.expm1),
    Op.LOG1P: _unary("math.log1p", (math.log1p, np.log1p), np.log1p),
    Op.CBRT: _unary("np.cbrt", (np.cbrt,), np.cbrt),
    Op.EXP2: _unary("np.exp2", (np.exp2,), np.exp2),
    Op.LOG2: _unary("math.log2", (math.log2, np.log2), np.log2),
    Op.LOG10: _unary("math.log10", (math.log10, np.log10), np.log10),
    # as floor: a float stays a float of its type (math.ceil, math.trunc too); rint rounds half to even
    Op.CEIL: _unary("np.ceil", (math.ceil, np.ceil), np.ceil, floats=False),
    Op.TRUNC: _unary("np.trunc", (math.trunc, np.trunc), np.trunc, floats=False),
    Op.RINT: _unary("np.rint", (np.rint,), np.rint, floats=False),
    Op.ATAN2: _binary("math.atan2", (math.atan2, np.arctan2), np.arctan2),
    Op.HYPOT: _binary("math.hypot", (math.hypot, np.hypot), np.hypot),
    Op.COPYSIGN: _binary("math.copysign", (math.copysign, np.copysign), np.copysign),
    Op.FMOD: _binary("np.fmod", (math.fmod, np.fmod), np.fmod),  # Numba has no math.fmod
}

ARITHMETIC = {Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.FLOORDIV, Op.MOD, Op.POW}
COMPARISONS = {Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE}
LOGIC = {Op.AND, Op.OR, Op.NOT}
BITWISE = {Op.BITAND, Op.BITOR, Op.BITXOR, Op.LSHIFT, Op.RSHIFT}
# functions that map floats to floats (an int argument is converted first)
FLOAT_FUNCTIONS = {op for op, f in FUNCTIONS.items() if f.floats and f.arity == 1}
# functions of two floats (int arguments are converted first): C's atan2, hypot, copysign and fmod
FLOAT_BINARY = {op for op, f in FUNCTIONS.items() if f.floats and f.arity == 2}
UNARY = {Op.NEG, Op.NOT, Op.CAST, Op.INVERT} | {op for op, f in FUNCTIONS.items() if f.arity == 1}
# the functions that round a float to an integral value of its type (an int argument is returned as it is)
ROUNDING = {Op.FLOOR, Op.CEIL, Op.TRUNC, Op.RINT}
INFIX = ARITHMETIC | COMPARISONS | BITWISE | {Op.AND, Op.OR}
