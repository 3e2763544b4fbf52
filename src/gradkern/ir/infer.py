"""Type inference: untyped kernel + argument types → typed kernel.

Every conversion becomes an explicit `Apply(CAST)` (or a retyped constant), so
in the typed IR both operands of a binary op have one type and backends never
promote. Python literals are *weak*: `x * 2.0` keeps x's float32, and a bare
float literal takes the kernel's default float (the widest float among the
arguments, float64 if none), so float32 kernels stay float32.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import InternalError, KernelTypeError
from . import nodes as ir
from .ops import ARITHMETIC, BITWISE, COMPARISONS, FLOAT_BINARY, FLOAT_FUNCTIONS, ROUNDING, Op
from .types import BOOL, F64, I32, I64, Array, Scalar, Type, arithmetic, join


def default_float(arg_types: dict[str, Type]) -> Scalar:
    floats = [t.dtype if isinstance(t, Array) else t for t in arg_types.values()]
    floats = [t for t in floats if t.is_float]
    return max(floats, key=lambda t: t.itemsize) if floats else F64


_INDEX_NAMES = ("i", "j", "k", "l", "m")  # one per dimension, for hints (MAX_NDIM of them)


def _dims(n: int) -> str:
    return f"{n} dimension{'s' * (n != 1)}"


def _unpack_mismatch(e: ir.Shape, ndim: int) -> tuple:
    """The message, place and hint of `a, b, c = x.shape` for an array without one dimension per name
    (docs/language.md)."""
    names, x = e.unpacked, e.array
    message = (f"'{', '.join(names)} = {x}.shape' unpacks {len(names)} names but the argument passed for "
               f"'{x}' has {_dims(ndim)}")
    if len(names) < ndim:
        first = ", ".join(f"{x}.shape[{a}]" for a in range(len(names)))
        every = ", ".join((*names, *(f"n{a}" for a in range(len(names), ndim))))
        hint = f"take the first {len(names)}: '{', '.join(names)} = {first}', or unpack all: '{every} = {x}.shape'"
    else:
        hint = f"pass a {len(names)}-D array, or unpack one name per dimension: '{', '.join(names[:ndim])} = {x}.shape'"
    return message, e.loc, hint


class _Inference:
    def __init__(self, kernel: ir.Kernel, arg_types: dict[str, Type]):
        self.k = kernel
        self.args = arg_types
        self.fdefault = default_float(arg_types)
        self.locals: dict[str, Scalar] = {}

    # -- helpers ----------------------------------------------------------------
    def var_type(self, name: str, loc) -> Scalar:
        t = self.locals.get(name)
        if t is None:
            t = self.args.get(name)
        if not isinstance(t, Scalar):
            raise InternalError(f"no scalar type for '{name}'", loc)
        return t

    def array(self, name: str, nidx: int | None, loc) -> Array:
        t = self.args.get(name)
        if not isinstance(t, Array):
            raise InternalError(f"'{name}' is not an array", loc)
        if nidx is not None and nidx != t.ndim:
            raise KernelTypeError(
                f"'{name}' is indexed with {nidx} ind{'ex' if nidx == 1 else 'ices'} but the argument "
                f"passed for it has {_dims(t.ndim)}", loc,
                hint=f"pass a {nidx}-D array, or index it as {name}[{', '.join(_INDEX_NAMES[:t.ndim])}]")
        return t

    def cast(self, e: ir.Expr, t: Scalar) -> ir.Expr:
        if e.type == t:
            return e
        if isinstance(e, ir.Const):
            v = e.value
            if t.is_float:
                v = float(v)
            elif t.is_int:
                v = int(v)
            else:
                v = bool(v)
            return replace(e, value=v, type=t)
        return ir.Apply(Op.CAST, (e,), type=t, loc=e.loc)

    def truth(self, e: ir.Expr) -> ir.Expr:
        if e.type == BOOL:
            return e
        return ir.Apply(Op.NE, (e, ir.Const(0, type=e.type, loc=e.loc)), type=BOOL, loc=e.loc)

    @staticmethod
    def weak(e: ir.Expr) -> bool:
        if isinstance(e, ir.Const):
            return e.weak
        if isinstance(e, ir.Apply) and e.op is not Op.CAST:
            return all(_Inference.weak(a) for a in e.args)
        return False

    def adopt(self, weak: ir.Expr, strong: Scalar) -> Scalar:
        """The type a weak operand takes beside a strongly typed one."""
        w = weak.type
        if strong.is_float:
            return strong
        if w.is_float:
            return self.fdefault
        if isinstance(weak, ir.Const) and strong == I32 and -2**31 <= weak.value < 2**31:
            return I32
        return join(w, strong)

    def common(self, a: ir.Expr, b: ir.Expr) -> Scalar:
        wa, wb = self.weak(a), self.weak(b)
        if wa and not wb:
            return self.adopt(a, b.type)
        if wb and not wa:
            return self.adopt(b, a.type)
        return join(a.type, b.type)

    # -- expressions --------------------------------------------------------------
    def expr(self, e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Const):
            if e.type is not None:
                return e
            v = e.value
            t = BOOL if isinstance(v, bool) else I64 if isinstance(v, int) else self.fdefault
            return replace(e, type=t)
        if isinstance(e, ir.Var):
            return replace(e, type=self.var_type(e.name, e.loc))
        if isinstance(e, (ir.Tid,)):
            if e.axis >= max(self.k.tid_ndim, 1):
                raise InternalError("tid axis beyond the kernel's tid arity", e.loc)
            return replace(e, type=I64)
        if isinstance(e, ir.Shape):
            t = self.array(e.array, None, e.loc)
            if e.unpacked and len(e.unpacked) != t.ndim:
                raise KernelTypeError(*_unpack_mismatch(e, t.ndim))
            if e.axis >= t.ndim:
                raise KernelTypeError(f"'{e.array}.shape[{e.axis}]' but the argument passed for '{e.array}' has "
                                      f"{_dims(t.ndim)}", e.loc,
                                      hint=f"index {e.array}.shape by 0 to {t.ndim - 1}, or pass an array with "
                                           f"{e.axis + 1} dimensions or more")
            return replace(e, type=I64, unpacked=())
        if isinstance(e, ir.Load):
            t = self.array(e.array, len(e.indices), e.loc)
            return replace(e, indices=self.indices(e.indices), type=t.dtype)
        if isinstance(e, ir.Select):
            cond = self.truth(self.expr(e.cond))
            a, b = self.expr(e.a), self.expr(e.b)
            t = self.common(a, b)
            return replace(e, cond=cond, a=self.cast(a, t), b=self.cast(b, t), type=t)
        if isinstance(e, ir.Apply):
            return self.apply(e)
        raise InternalError(f"unknown expression {type(e).__name__}", getattr(e, "loc", None))

    def indices(self, idx: tuple[ir.Expr, ...]) -> tuple[ir.Expr, ...]:
        out = []
        for x in idx:
            t = self.expr(x)
            if not t.type.is_int:
                raise KernelTypeError(f"array index '{x}' has type {t.type.name}; indices must be integers",
                                      x.loc, hint="convert with int(...)")
            out.append(t)
        return tuple(out)

    def apply(self, e: ir.Apply) -> ir.Expr:
        op = e.op
        args = tuple(self.expr(a) for a in e.args)
        if op is Op.CAST:
            return replace(e, args=args, type=e.type or self.fdefault)
        if op is Op.NOT:
            return replace(e, args=(self.truth(args[0]),), type=BOOL)
        if op in (Op.AND, Op.OR):
            return replace(e, args=tuple(self.truth(a) for a in args), type=BOOL)
        if op is Op.INVERT or op in BITWISE:
            return self.bitwise(e, args)
        if op in (Op.NEG, Op.ABS):
            # ints widen to int64 first, as the binary ops do (types.arithmetic): -INT32_MIN is 2**31
            x = args[0]
            x = x if x.type.is_float or x.type == I64 else self.cast(x, I64)
            return replace(e, args=(x,), type=x.type)
        if op in FLOAT_FUNCTIONS:
            x = args[0]
            x = x if x.type.is_float else self.cast(x, self.fdefault)
            return replace(e, args=(x,), type=x.type)
        if op in ROUNDING:
            x = args[0]
            return x if not x.type.is_float else replace(e, args=(x,), type=x.type)
        a, b = args
        if op is Op.POW and a.type.is_float and b.type.is_int:
            # x ** n keeps an integer exponent (exact, and d/dx = n x^(n-1) stays simple)
            return replace(e, args=(a, self.cast(b, I64)), type=a.type)
        if op is Op.POW and not a.type.is_float and not b.type.is_float and not (
                isinstance(b, ir.Const) and b.value >= 0):
            # int ** int is an int only for a known non-negative exponent (Python gives a float otherwise)
            return replace(e, args=(self.cast(a, self.fdefault), self.cast(b, I64)), type=self.fdefault)
        t = self.common(a, b)
        if op in FLOAT_BINARY:
            t = t if t.is_float else self.fdefault
            return replace(e, args=(self.cast(a, t), self.cast(b, t)), type=t)
        if op in COMPARISONS:
            return replace(e, args=(self.cast(a, t), self.cast(b, t)), type=BOOL)
        if op in ARITHMETIC or op in (Op.MIN, Op.MAX):
            t = arithmetic(t, t) if op in ARITHMETIC else (I64 if t == BOOL else t)
            if op is Op.DIV and not t.is_float:
                t = self.fdefault
            return replace(e, args=(self.cast(a, t), self.cast(b, t)), type=t)
        raise InternalError(f"no typing rule for {op.name}", e.loc)

    def bitwise(self, e: ir.Apply, args: tuple[ir.Expr, ...]) -> ir.Expr:
        """& | ^ of two bools is a bool; otherwise bitwise operators compute in int64, as other integer
        arithmetic does (so shift amounts are taken modulo nothing: see Op.LSHIFT)."""
        for a in args:
            if a.type.is_float:
                raise KernelTypeError(f"the operator '{e.op.value}' takes integers, got {a.type.name} '{a}'", e.loc,
                                      hint="convert with int(...)")
        if e.op in (Op.BITAND, Op.BITOR, Op.BITXOR) and all(a.type == BOOL for a in args):
            return replace(e, args=args, type=BOOL)
        return replace(e, args=tuple(self.cast(a, I64) for a in args), type=I64)

    # -- statements ---------------------------------------------------------------
    def bind(self, name: str, t: Scalar, loc):
        if name in self.args:
            p = self.args[name]
            if isinstance(p, Scalar) and join(p, t) != p:
                raise KernelTypeError(f"parameter '{name}' is {p.name} but is assigned a {t.name} value", loc,
                                      hint="assign the result to a new local instead")
            return
        old = self.locals.get(name)
        self.locals[name] = t if old is None else join(old, t)

    def block(self, body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        return tuple(self.stmt(s) for s in body)

    def stmt(self, s: ir.Stmt) -> ir.Stmt:
        if isinstance(s, ir.Assign):
            v = self.expr(s.value)
            self.bind(s.name, v.type, s.loc)
            return replace(s, value=self.cast(v, self.var_type(s.name, s.loc)))
        if isinstance(s, (ir.Store, ir.AtomicAdd)):
            t = self.array(s.array, len(s.indices), s.loc)
            return replace(s, indices=self.indices(s.indices), value=self.cast(self.expr(s.value), t.dtype))
        if isinstance(s, ir.If):
            return replace(s, cond=self.truth(self.expr(s.cond)), then=self.block(s.then),
                           orelse=self.block(s.orelse))
        if isinstance(s, ir.While):
            return replace(s, cond=self.truth(self.expr(s.cond)), body=self.block(s.body))
        if isinstance(s, ir.For):
            bounds = []
            for what, x in (("start", s.start), ("stop", s.stop), ("step", s.step)):
                t = self.expr(x)
                if not (t.type.is_int or t.type == BOOL):
                    raise KernelTypeError(f"range() {what} '{x}' has type {t.type.name}; it must be an integer",
                                          x.loc, hint="convert with int(...)")
                bounds.append(self.cast(t, I64))
            self.bind(s.var, I64, s.loc)
            return replace(s, start=bounds[0], stop=bounds[1], step=bounds[2], body=self.block(s.body))
        raise InternalError(f"unknown statement {type(s).__name__}", getattr(s, "loc", None))

    def run(self) -> ir.Kernel:
        # Locals widen monotonically on a finite lattice: iterate to the fixpoint.
        for _ in range(16):
            before = dict(self.locals)
            body = self.block(self.k.body)
            if self.locals == before:
                break
        params = tuple(replace(p, type=self.args[p.name]) for p in self.k.params)
        return replace(self.k, params=params, body=body, locals=tuple(sorted(self.locals.items())))


def infer_types(kernel: ir.Kernel, arg_types: dict[str, Type]) -> ir.Kernel:
    """Type `kernel` for arguments of `arg_types` (param name → type)."""
    return _Inference(kernel, arg_types).run()
