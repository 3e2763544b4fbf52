"""A slow pure-Python interpreter of typed IR: the living definition of what
the IR means, and the test oracle the compiled backends are checked against.

Threads run one after another in lexicographic order. Arithmetic uses NumPy
scalars of the node's type, so float32 kernels round like float32 code; an
elementary function of float32 values is computed in float64 and rounded to
float32, the correctly rounded value that C's expf, logf, sinf, cosf and powf
give (glibc, which Numba and hostcuda call), where NumPy's own float32 loops
are off by an ulp (docs/testing.md, the language fuzzer's float32 bound);
an index outside an array's bounds (negative ones included) raises IndexError.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..errors import InternalError
from . import nodes as ir
from .names import OOB
from .ops import FUNCTIONS, Op

_BIN = {
    Op.ADD: lambda a, b: a + b, Op.SUB: lambda a, b: a - b, Op.MUL: lambda a, b: a * b,
    Op.DIV: lambda a, b: a / b, Op.FLOORDIV: lambda a, b: a // b, Op.MOD: lambda a, b: a % b,
    Op.POW: lambda a, b: a ** b, Op.EQ: lambda a, b: a == b, Op.NE: lambda a, b: a != b,
    Op.LT: lambda a, b: a < b, Op.LE: lambda a, b: a <= b, Op.GT: lambda a, b: a > b,
    Op.GE: lambda a, b: a >= b,
    Op.BITAND: lambda a, b: a & b, Op.BITOR: lambda a, b: a | b, Op.BITXOR: lambda a, b: a ^ b,
    # int64 shifts wrap like the compiled ones; amounts outside [0, 64) as documented at Op.LSHIFT
    Op.LSHIFT: lambda a, b: np.left_shift(a, b) if 0 <= b < 64 else np.int64(0),
    Op.RSHIFT: lambda a, b: np.right_shift(a, b) if 0 <= b < 64 else np.right_shift(a, np.int64(63)),
}
_UN = {
    Op.NEG: lambda a: -a, Op.NOT: lambda a: not a, Op.INVERT: lambda a: ~a,
}
# the elementary functions: the op table's host implementations
_UN |= {op: f.host for op, f in FUNCTIONS.items() if f.arity == 1}
_BIN |= {op: f.host for op, f in FUNCTIONS.items() if f.arity == 2}


class _Frame:
    def __init__(self, k: ir.Kernel, arrays: dict, scalars: dict, tid: tuple[int, ...], dim: tuple[int, ...]):
        self.k, self.arrays, self.env, self.tid, self.dim = k, arrays, dict(scalars), tid, dim

    def val(self, e: ir.Expr):
        t = e.type.numpy
        if isinstance(e, ir.Const):
            return t(e.value)
        if isinstance(e, ir.Var):
            return self.env[e.name]
        if isinstance(e, ir.Tid):
            return np.int64(self.tid[e.axis])
        if isinstance(e, ir.Shape):
            return np.int64(self.arrays[e.array].shape[e.axis])
        if isinstance(e, ir.Load):
            return self.arrays[e.array][self.index(e.array, e.indices)]
        if isinstance(e, ir.Select):
            return self.val(e.a) if self.val(e.cond) else self.val(e.b)
        if isinstance(e, ir.InBounds):
            i = self.val(e.index)
            if 0 <= i < self.arrays[e.array].shape[e.axis]:
                return i
            oob = self.arrays[OOB]
            if oob[0] == 0:  # the first out-of-bounds access wins, as on the compiled backends
                oob[0] = self.flat_tid() * e.nsites + e.site + 1
            return t(0)
        if isinstance(e, ir.Apply):
            if e.op is Op.AND:
                return np.bool_(bool(self.val(e.args[0])) and bool(self.val(e.args[1])))
            if e.op is Op.OR:
                return np.bool_(bool(self.val(e.args[0])) or bool(self.val(e.args[1])))
            args = [self.val(a) for a in e.args]
            if e.op is Op.CAST:
                x = args[0]
                if e.type.is_int and isinstance(x, np.floating):
                    x = math.trunc(float(x)) if math.isfinite(x) else 0
                return t(x)
            if e.op is Op.POW and e.args[1].type.is_int:
                args[1] = int(args[1])  # a Python int exponent keeps NumPy in the base's precision
            f = _BIN.get(e.op) if len(args) == 2 else _UN.get(e.op)
            if e.op in FUNCTIONS and t is np.float32:  # float32 functions: the float64 value, rounded once
                args = [np.float64(a) if isinstance(a, np.float32) else a for a in args]
            if f is None:
                raise InternalError(f"interpreter has no rule for {e.op.name}", e.loc)
            return t(f(*args))
        raise InternalError(f"cannot interpret {type(e).__name__}", getattr(e, "loc", None))

    def flat_tid(self) -> int:
        flat = 0
        for t, n in zip(self.tid, self.dim):
            flat = flat * n + t
        return flat

    def index(self, name: str, indices) -> tuple[int, ...]:
        arr = self.arrays[name]
        idx = tuple(int(self.val(i)) for i in indices)
        for n, (i, extent) in enumerate(zip(idx, arr.shape)):
            if not 0 <= i < extent:
                raise IndexError(f"index {i} out of range for axis {n} of '{name}' with size {extent} "
                                 f"(thread {self.tid})")
        return idx

    def run(self, body):
        for s in body:
            if isinstance(s, ir.Assign):
                self.env[s.name] = self.val(s.value)
            elif isinstance(s, ir.Store):
                idx = self.index(s.array, s.indices)
                self.arrays[s.array][idx] = self.val(s.value)
            elif isinstance(s, ir.AtomicAdd):
                idx = self.index(s.array, s.indices)
                self.arrays[s.array][idx] += self.val(s.value)
            elif isinstance(s, ir.If):
                self.run(s.then if self.val(s.cond) else s.orelse)
            elif isinstance(s, ir.For):
                for v in range(int(self.val(s.start)), int(self.val(s.stop)), int(self.val(s.step))):
                    self.env[s.var] = np.int64(v)
                    self.run(s.body)
            elif isinstance(s, ir.While):
                while self.val(s.cond):
                    self.run(s.body)
            else:
                raise InternalError(f"cannot interpret {type(s).__name__}", getattr(s, "loc", None))


def interpret(k: ir.Kernel, dim: tuple[int, ...], args: list) -> None:
    """Run typed kernel `k` over launch domain `dim` on NumPy arrays, in place."""
    arrays = {p.name: a for p, a in zip(k.params, args) if isinstance(a, np.ndarray)}
    scalars = {p.name: a for p, a in zip(k.params, args) if not isinstance(a, np.ndarray)}
    with np.errstate(all="ignore"):
        for tid in itertools.product(*(range(n) for n in dim)):
            _Frame(k, arrays, scalars, tid, dim).run(k.body)
        if k.deferred is not None:  # after every thread (ir.Deferred)
            extents = [int(_Frame(k, arrays, scalars, (0,) * len(dim), dim).val(e)) for e in k.deferred.extents]
            for tid in itertools.product(*(range(n) for n in extents)):
                _Frame(k, arrays, scalars, tid, tuple(extents)).run(k.deferred.body)
