"""Python AST → untyped IR: one visit_* per supported construct, the rest raise
`KernelSyntaxError` naming the construct and the user's line.

Device functions (`@gk.func`) are inlined as they are met (frontend/inline.py),
with their locals renamed, so every later stage sees one flat kernel body.
Early `return`s become if/else (the statements after `if c: return` move into
the else branch), so the IR has structured control flow only. The decorator
objects are recognised by their frontend/callables.py markers: the frontend
never imports kernel.py.
"""

from __future__ import annotations

import ast
import builtins
import math
from dataclasses import replace
from typing import Any

import numpy as np

from .. import intrinsics
from ..errors import KernelSyntaxError
from ..ir import nodes as ir
from ..ir.names import RESERVED, Namer, is_generated
from ..ir.ops import FUNCTIONS, Op
from ..ir.types import F32, F64, I32, I64, MAX_NDIM
from . import rewrites, suggest
from .callables import DeviceFunctionMarker, KernelMarker, Lowered, Unresolved
from .captured import Captured
from .inline import inline_call, inline_values
from .parse import ParsedFunction, assigned_names
from .structure import Return, check_definite_assignment, privatize_reassigned, structure_returns
from .vector_calls import flat_params

_BINOPS = {ast.Add: Op.ADD, ast.Sub: Op.SUB, ast.Mult: Op.MUL, ast.Div: Op.DIV,
           ast.FloorDiv: Op.FLOORDIV, ast.Mod: Op.MOD, ast.Pow: Op.POW, ast.BitAnd: Op.BITAND, ast.BitOr: Op.BITOR,
           ast.BitXor: Op.BITXOR, ast.LShift: Op.LSHIFT, ast.RShift: Op.RSHIFT}
_CMPOPS = {ast.Eq: Op.EQ, ast.NotEq: Op.NE, ast.Lt: Op.LT, ast.LtE: Op.LE,
           ast.Gt: Op.GT, ast.GtE: Op.GE}

# Python objects a kernel may call, by identity, whatever name they are imported under: the elementary
# functions of the op table (ir/ops.py), and pow for the operator **.
_FUNCTIONS: dict[int, Op] = {id(fn): op for op, f in FUNCTIONS.items() for fn in f.callables}
_FUNCTIONS |= {id(fn): Op.POW for fn in (builtins.pow, math.pow, np.power)}
_CASTS = {id(builtins.int): I64, id(np.int64): I64, id(np.int32): I32,
          id(np.float64): F64, id(np.float32): F32, id(builtins.float): None}

_CONSTRUCT_NAMES = {
    "With": "'with'", "Try": "'try'",
    "Raise": "'raise'", "Assert": "'assert'", "Import": "'import'", "ImportFrom": "'import'",
    "FunctionDef": "nested function definitions", "ClassDef": "class definitions",
    "Lambda": "lambda", "List": "lists", "Tuple": "tuples", "Dict": "dicts", "Set": "sets",
    "ListComp": "list comprehensions", "GeneratorExp": "generator expressions",
    "JoinedStr": "f-strings", "Global": "'global'", "Nonlocal": "'nonlocal'", "Delete": "'del'",
    "Match": "'match'", "Yield": "'yield'", "Await": "'await'", "Starred": "starred expressions",
    "NamedExpr": "':=' (walrus)", "AsyncFunctionDef": "async functions", "Slice": "slices",
}


class _Lowerer:
    def __init__(self, parsed: ParsedFunction, is_kernel: bool, stack: tuple[str, ...] = (), widths=None):
        self.p = parsed
        self.is_kernel = is_kernel
        self.stack = stack + (parsed.name,)
        self.ns = parsed.namespace()
        self.captured = Captured()  # what it reads of its module: checked at each launch (frontend/captured.py)
        self.block: list[ir.Stmt] | None = None
        self.lazy = 0  # > 0 inside an operand that may not be evaluated
        self.tid_arity = 0
        self.namer = Namer(RESERVED)  # temporaries and inlined calls' locals
        args = parsed.tree.args
        for bad, what in ((args.vararg, "*args"), (args.kwarg, "**kwargs")):
            if bad is not None:
                self.fail(bad, f"{what} parameters are not supported")
        if args.kwonlyargs or args.posonlyargs or args.defaults or args.kw_defaults:
            self.fail(parsed.tree, "kernel parameters must be plain positional names without defaults")
        self.params, vector_params = flat_params(tuple(a.arg for a in args.args), widths)  # vector_calls.py
        self.locals = set(self.params) | assigned_names(parsed.tree)
        for node in [*args.args, *ast.walk(parsed.tree)]:
            name = node.arg if isinstance(node, ast.arg) else getattr(node, "id", None)
            if isinstance(name, str) and is_generated(name) and name in self.locals:
                self.fail(node, f"the name '{name}' starts with '{RESERVED}', which is reserved for gradkern",
                          hint="rename it")
        free = lambda n: self.captured.add(self.p.fn, n, self.ns.get(n, getattr(builtins, n, None)))  # noqa: E731
        tree, self.results, names = rewrites.rewrite(  # vectors, loops over tuples, jumps, local arrays, tables
            parsed.tree, params=self.params, local_names=self.locals, is_kernel=is_kernel, resolve=self.quiet_callee,
            free=free, new_name=self.namer.numbered, fail=self.fail, vector_params=vector_params)
        if tree is not parsed.tree:
            self.p = replace(parsed, tree=tree)
            self.ns.update(names)
            self.locals |= assigned_names(tree)

    # -- errors ---------------------------------------------------------------
    def fail(self, node: ast.AST, message: str, hint: str | None = None, cls=KernelSyntaxError):
        raise cls(message, self.p.loc(node), hint)

    def fail_at_def(self, message: str):
        self.fail(self.p.tree, message)

    def unsupported(self, node: ast.AST, what: str | None = None):
        what = what or _CONSTRUCT_NAMES.get(type(node).__name__, f"'{type(node).__name__}'")
        self.fail(node, f"{what} {'are' if what.endswith('s') else 'is'} not supported in gradkern kernels",
                  hint=suggest.CONSTRUCT_HINTS.get(type(node).__name__, "see docs/kernel-language.md"))

    # -- blocks -----------------------------------------------------------------
    def lower(self) -> Lowered:
        body = self.lower_block(self.p.tree.body, top=True)
        body, returns_value = structure_returns(body, self.fail_at_def, self.p.name)
        arrays = _array_names(body)
        return Lowered(self.p.name, self.params, body, arrays, returns_value,
                       self.tid_arity, self.p.loc(self.p.tree), self.results, self.captured)

    def lower_block(self, stmts: list[ast.stmt], top: bool = False) -> tuple[ir.Stmt, ...]:
        saved, self.block = self.block, []
        for k, s in enumerate(stmts):
            if top and k == 0 and isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) \
                    and isinstance(s.value.value, str):
                continue  # docstring
            method = getattr(self, f"stmt_{type(s).__name__}", None)
            if method is None:
                self.unsupported(s)
            method(s)
        out, self.block = tuple(self.block), saved
        return out

    def emit(self, s: ir.Stmt):
        self.block.append(s)

    # -- statements -------------------------------------------------------------
    def stmt_Pass(self, s: ast.Pass):
        pass

    def stmt_Expr(self, s: ast.Expr):
        v = s.value
        if isinstance(v, ast.Call) and self.resolve_callee(v.func) is intrinsics.atomic_add:
            if len(v.args) != 3 or v.keywords:
                self.fail(v, "gk.atomic_add takes three arguments: (array, index, value)",
                          hint="index an array of several dimensions by a tuple: 'gk.atomic_add(a, (i, j), v)'")
            arr = self.array_name(v.args[0])
            idx = self.indices(v.args[1])
            self.emit(ir.AtomicAdd(arr, idx, self.expr(v.args[2]), loc=self.p.loc(s)))
            return
        if isinstance(v, ast.Constant) and isinstance(v.value, str):
            return  # a string used as a comment
        fn = self.resolve_callee(v.func) if isinstance(v, ast.Call) and not v.keywords else None
        if isinstance(fn, DeviceFunctionMarker):  # a call as a statement: C's void helper (kernel-language.md)
            inline_values(self, v, fn, 0)
            return
        self.expr(v)  # an unsupported call or construct is reported as such first
        self.fail(s, "this expression statement has no effect in a kernel",
                  hint="assign its value to a local or store it into an array")

    def stmt_Assign(self, s: ast.Assign):
        if len(s.targets) != 1:
            # a = b[i] = v: v is evaluated once, then bound to the targets from left to right, as in Python
            for t in s.targets:
                if not isinstance(t, (ast.Name, ast.Subscript)):
                    self.fail(t, "a chained assignment (a = b[i] = ...) binds names and array elements only",
                              hint="write one assignment per target")
            loc = self.p.loc(s)
            value = self.namer.numbered("chain")
            self.emit(ir.Assign(value, self.expr(s.value), loc=loc))
            for t in s.targets:
                self.bind(t, ir.Var(value, loc=loc), loc)
            return
        self.assign(s.targets[0], s.value, s)

    def bind(self, target: ast.Name | ast.Subscript, value: ir.Expr, loc: Any):
        """Bind an already lowered value to a name or an array element."""
        if isinstance(target, ast.Name):
            self.emit(ir.Assign(target.id, value, loc=loc))
        else:
            self.emit(ir.Store(*self.subscript(target), value, loc=loc))

    def stmt_AnnAssign(self, s: ast.AnnAssign):
        if s.value is None:
            self.fail(s, "a declaration without a value is not supported")
        self.assign(s.target, s.value, s)

    def assign(self, target: ast.expr, value: ast.expr, s: ast.stmt):
        loc = self.p.loc(s)
        if isinstance(target, ast.Name):
            self.emit(ir.Assign(target.id, self.expr(value), loc=loc))
        elif isinstance(target, ast.Subscript):
            arr, idx = self.subscript(target)
            self.emit(ir.Store(arr, idx, self.expr(value), loc=loc))
        elif isinstance(target, ast.Tuple):
            if isinstance(value, ast.Tuple) and len(value.elts) == len(target.elts) and all(
                    isinstance(t, (ast.Name, ast.Subscript)) for t in target.elts):
                # a, b[j] = b[j], a (a swap): every right-hand side is evaluated before any target is bound, and
                # the targets are bound from left to right, their indices evaluated then (Python's order)
                temps = []
                for v in value.elts:
                    t = self.namer.numbered("tup")
                    self.emit(ir.Assign(t, self.expr(v), loc=loc))
                    temps.append(t)
                for tgt, t in zip(target.elts, temps):
                    self.bind(tgt, ir.Var(t, loc=loc), loc)
                return
            names = []
            for t in target.elts:
                if not isinstance(t, ast.Name):
                    self.fail(t, "only names can be unpacked into",
                              hint="array elements can be assigned a tuple of values: 'a[i], a[j] = a[j], a[i]'")
                names.append(t.id)
            if isinstance(value, ast.Call) and self.resolve_callee(value.func) is intrinsics.tid:
                self.note_tid(value, len(names))
                for axis, n in enumerate(names):
                    self.emit(ir.Assign(n, ir.Tid(axis, loc=loc), loc=loc))
            elif isinstance(value, ast.Call) and isinstance(fn := self.quiet_callee(value.func), DeviceFunctionMarker):
                for n, v in zip(names, inline_values(self, value, fn, len(names))):  # a, b = f(x)
                    self.emit(ir.Assign(n, v, loc=loc))
            elif isinstance(value, ast.Attribute) and value.attr == "shape":
                # one dimension per name, checked against the argument by type inference (docs/language.md)
                arr = self.array_name(value.value)
                for axis, n in enumerate(names):
                    self.emit(ir.Assign(n, ir.Shape(arr, axis, loc=loc, unpacked=tuple(names)), loc=loc))
            else:
                left = ", ".join(names)
                if isinstance(value, ast.Tuple):
                    self.fail(value, f"{len(names)} names are assigned {len(value.elts)} values",
                              hint="give one value per name: "
                                   f"'{left} = {', '.join(f'v{n}' for n in range(len(names)))}'")
                self.fail(value, "tuple assignment needs gk.tid(), an array's .shape or a tuple of values of the "
                                 "same length on the right",
                          hint=f"write '{left} = gk.tid()', '{left} = x.shape' (x an array parameter) or "
                               f"'{left} = {', '.join(f'v{n}' for n in range(len(names)))}'")
        else:
            self.unsupported(target, f"assignment to {type(target).__name__}")

    def stmt_AugAssign(self, s: ast.AugAssign):
        op = _BINOPS.get(type(s.op))
        if op is None:
            self.unsupported(s.op, f"the operator {type(s.op).__name__}")
        loc = self.p.loc(s)
        rhs = self.expr(s.value)
        if isinstance(s.target, ast.Name):
            self.emit(ir.Assign(s.target.id, ir.Apply(op, (self.name_expr(s.target), rhs), loc=loc), loc=loc))
        elif isinstance(s.target, ast.Subscript):
            arr, idx = self.subscript(s.target)
            old = ir.Load(arr, idx, loc=loc)
            self.emit(ir.Store(arr, idx, ir.Apply(op, (old, rhs), loc=loc), loc=loc))
        else:
            self.unsupported(s.target, f"augmented assignment to {type(s.target).__name__}")

    def stmt_If(self, s: ast.If):
        cond = self.expr(s.test)
        self.emit(ir.If(cond, self.lower_block(s.body), self.lower_block(s.orelse), loc=self.p.loc(s)))

    def stmt_For(self, s: ast.For):
        if s.orelse:
            self.fail(s, "'for ... else' is not supported")
        if not isinstance(s.target, ast.Name):
            self.fail(s.target, "the loop variable must be a single name")
        it = s.iter
        if not (isinstance(it, ast.Call) and self.resolve_callee(it.func) is builtins.range):
            over = ast.unparse(it.args[0] if isinstance(it, ast.Call) and it.args else it)
            self.fail(it, "kernels can only loop over range(...) or a literal tuple",
                      hint=f"write 'for k in range(len({over})):' and index {over}[k] (a constant table or a local "
                           "array: the loop is unrolled)" if isinstance(it, ast.Name) or
                      (isinstance(it, ast.Call) and ast.unparse(it.func) in ("enumerate", "zip")) else
                      "write 'for k in range(start, stop, step):' or 'for v in (a, b, c):'")
        if not 1 <= len(it.args) <= 3 or it.keywords:
            self.fail(it, "range() takes one to three arguments")
        args = [self.expr(a) for a in it.args]
        loc = self.p.loc(s)
        if len(args) == 1:
            args = [ir.Const(0, weak=True, loc=loc), args[0]]
        if len(args) == 2:
            args.append(ir.Const(1, weak=True, loc=loc))
        if isinstance(args[2], ir.Const) and args[2].value == 0:
            self.fail(it.args[2], "range() step must not be zero")
        var = s.target.id
        body = self.lower_block(s.body)
        for n in ir.walk_stmts(body):
            if isinstance(n, ir.Assign) and n.name == var:
                raise KernelSyntaxError(f"the loop variable '{var}' is assigned inside its loop", n.loc,
                                        hint="use another local for the value you compute")
        self.emit(ir.For(var, args[0], args[1], args[2], body, loc=loc))

    def stmt_While(self, s: ast.While):
        if s.orelse:
            self.fail(s, "'while ... else' is not supported")
        self.lazy += 1  # the condition is re-evaluated: no statements may be hoisted out of it
        cond = self.expr(s.test)
        self.lazy -= 1
        self.emit(ir.While(cond, self.lower_block(s.body), loc=self.p.loc(s)))

    def stmt_Return(self, s: ast.Return):
        if s.value is not None and self.is_kernel:
            self.fail(s, "a kernel cannot return a value", hint="store results into an array argument")
        self.emit(Return(self.expr(s.value) if s.value is not None else None, loc=self.p.loc(s)))

    # -- expressions ------------------------------------------------------------
    def float_literal(self, e: ast.Call, fn: Any) -> ir.Expr:
        """float("inf"), np.float32("-inf"), float("nan"): the constant, as C ports write INFINITY or FLT_MAX."""
        text = e.args[0].value
        try:
            value = float(text)
        except ValueError:
            self.fail(e, f"{ast.unparse(e.func)}({text!r}) is not a number", hint="write math.inf or a number")
        typ, loc = _CASTS[id(fn)], self.p.loc(e)
        return ir.Const(value, weak=True, loc=loc) if typ is None else ir.Const(value, type=typ, loc=loc)

    def expr(self, e: ast.expr) -> ir.Expr:
        method = getattr(self, f"expr_{type(e).__name__}", None)
        if method is None:
            self.unsupported(e)
        return method(e)

    def expr_Constant(self, e: ast.Constant) -> ir.Expr:
        v = e.value
        if isinstance(v, (bool, int, float)):
            return ir.Const(v, weak=True, loc=self.p.loc(e))
        self.unsupported(e, f"constants of type {type(v).__name__}")

    def expr_Name(self, e: ast.Name) -> ir.Expr:
        return self.name_expr(e)

    def name_expr(self, e: ast.Name) -> ir.Expr:
        if e.id in self.locals:
            return ir.Var(e.id, loc=self.p.loc(e))
        value = self.lookup(e)
        return self.constant_value(e, value, e.id)

    def constant_value(self, node: ast.AST, value: Any, name: str) -> ir.Expr:
        if isinstance(value, (bool, int, float, np.integer, np.floating)) and not isinstance(value, np.bool_):
            if isinstance(value, (np.integer, np.floating)):
                return ir.Const(value.item(), type=_numpy_scalar_type(value), loc=self.p.loc(node))
            return ir.Const(value, weak=True, loc=self.p.loc(node))
        self.fail(node, f"'{name}' refers to a {type(value).__name__}, which a kernel cannot use as a value",
                  hint="kernels can use local names, their parameters and global numeric constants")

    def lookup(self, e: ast.Name) -> Any:
        if e.id in self.ns:
            return self.captured.add(self.p.fn, e.id, self.ns[e.id])
        if hasattr(builtins, e.id):
            return getattr(builtins, e.id)
        self.fail(e, f"name '{e.id}' is not defined", cls=Unresolved)

    def resolve(self, e: ast.expr) -> Any:
        """The Python object a global name or dotted attribute chain refers to."""
        if isinstance(e, ast.Name):
            if e.id in self.locals:
                self.fail(e, f"'{e.id}' is a local value, not a function or module")
            return self.lookup(e)
        if isinstance(e, ast.Attribute):
            base = self.resolve(e.value)
            if not hasattr(base, e.attr):
                self.fail(e, f"'{ast.unparse(e.value)}' has no attribute '{e.attr}'",
                          hint=suggest.MISSING_FUNCTION_HINTS.get(e.attr), cls=Unresolved)
            return self.captured.attribute(self.p.fn, e, getattr(base, e.attr))
        self.unsupported(e)

    def quiet_callee(self, f: ast.expr) -> Any:
        """The object a callee names, or None (a local, an undefined name)."""
        try:
            return self.resolve_callee(f)
        except KernelSyntaxError:
            return None

    def resolve_callee(self, f: ast.expr) -> Any:
        if isinstance(f, ast.Name) and f.id in self.locals:
            return None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in self.locals:
            return None
        return self.resolve(f)

    def expr_Attribute(self, e: ast.Attribute) -> ir.Expr:
        if isinstance(e.value, ast.Name) and e.value.id in self.locals:
            self.fail(e, f"'.{e.attr}' is not supported here", hint="use x.shape[k] for an array's size")
        return self.constant_value(e, self.resolve(e), ast.unparse(e))

    def expr_BinOp(self, e: ast.BinOp) -> ir.Expr:
        op = _BINOPS.get(type(e.op))
        if op is None:
            self.unsupported(e, f"the operator '{type(e.op).__name__}'")
        return ir.Apply(op, (self.expr(e.left), self.expr(e.right)), loc=self.p.loc(e))

    def expr_UnaryOp(self, e: ast.UnaryOp) -> ir.Expr:
        x = self.expr(e.operand)
        if isinstance(e.op, ast.UAdd):
            return x
        if isinstance(e.op, ast.USub):
            if isinstance(x, ir.Const) and not isinstance(x.value, bool):
                return replace(x, value=-x.value)
            return ir.Apply(Op.NEG, (x,), loc=self.p.loc(e))
        if isinstance(e.op, ast.Not):
            return ir.Apply(Op.NOT, (x,), loc=self.p.loc(e))
        return ir.Apply(Op.INVERT, (x,), loc=self.p.loc(e))

    def expr_Compare(self, e: ast.Compare) -> ir.Expr:
        terms = []
        left = self.expr(e.left)
        for k, (op, right_node) in enumerate(zip(e.ops, e.comparators)):
            o = _CMPOPS.get(type(op))
            if o is None:
                self.unsupported(e, f"the comparison '{type(op).__name__}'")
            if k > 0:
                self.lazy += 1
            right = self.expr(right_node)
            if k > 0:
                self.lazy -= 1
            terms.append(ir.Apply(o, (left, right), loc=self.p.loc(e)))
            left = right
        out = terms[0]
        for t in terms[1:]:
            out = ir.Apply(Op.AND, (out, t), loc=self.p.loc(e))
        return out

    def expr_BoolOp(self, e: ast.BoolOp) -> ir.Expr:
        op = Op.AND if isinstance(e.op, ast.And) else Op.OR
        out = self.expr(e.values[0])
        self.lazy += 1  # later operands are evaluated only if needed
        for v in e.values[1:]:
            out = ir.Apply(op, (out, self.expr(v)), loc=self.p.loc(e))
        self.lazy -= 1
        return out

    def expr_IfExp(self, e: ast.IfExp) -> ir.Expr:
        cond = self.expr(e.test)
        self.lazy += 1
        a, b = self.expr(e.body), self.expr(e.orelse)
        self.lazy -= 1
        return ir.Select(cond, a, b, loc=self.p.loc(e))

    def expr_Subscript(self, e: ast.Subscript) -> ir.Expr:
        v = e.value
        if isinstance(v, ast.Attribute) and v.attr == "shape":
            arr = self.array_name(v.value)
            k = e.slice
            if not (isinstance(k, ast.Constant) and isinstance(k.value, int) and not isinstance(k.value, bool)):
                self.fail(k, "x.shape must be indexed by a constant integer")
            return ir.Shape(arr, k.value, loc=self.p.loc(e))
        arr, idx = self.subscript(e)
        return ir.Load(arr, idx, loc=self.p.loc(e))

    def subscript(self, e: ast.Subscript) -> tuple[str, tuple[ir.Expr, ...]]:
        if isinstance(e.value, ast.Subscript):  # C's A[i][j] of an array parameter is A[i, j] (docs/kernel-language.md)
            arr, outer = self.subscript(e.value)
            return arr, outer + self.indices(e.slice)
        return self.array_name(e.value), self.indices(e.slice)

    def indices(self, s: ast.expr) -> tuple[ir.Expr, ...]:
        elts = s.elts if isinstance(s, ast.Tuple) else [s]
        out = []
        for x in elts:
            if isinstance(x, ast.Slice):
                self.unsupported(x, "slices")
            out.append(self.expr(x))
        if not 1 <= len(out) <= MAX_NDIM:
            self.fail(s, f"arrays have one to {MAX_NDIM} dimensions, not {len(out)}")
        return tuple(out)

    def array_name(self, e: ast.expr) -> str:
        if isinstance(e, ast.Name) and e.id in self.params:
            return e.id
        if isinstance(e, ast.Name) and e.id in self.locals:
            self.fail(e, f"'{e.id}' is a local scalar and cannot be indexed",
                      hint="only array parameters, local arrays (gk.local) and constant tables can be indexed")
        if isinstance(e, ast.Name) and e.id not in self.ns and not hasattr(builtins, e.id):
            self.fail(e, f"name '{e.id}' is not defined", cls=Unresolved)  # a table defined after the kernel
        base = e
        while isinstance(base, ast.Subscript):
            base = base.value
        if isinstance(base, ast.Attribute) and isinstance(self.quiet_callee(base), tuple):
            self.fail(base, f"the constant table '{ast.unparse(base)}' is read through an attribute",
                      hint=f"bind it to a module-level name: '{base.attr} = {ast.unparse(base)}', and index that")
        self.fail(e, f"only array parameters can be indexed, not '{ast.unparse(e)}'")

    def expr_Call(self, e: ast.Call) -> ir.Expr:
        loc = self.p.loc(e)
        if e.keywords:
            self.fail(e, "keyword arguments are not supported in kernel calls")
        fn = self.resolve_callee(e.func)
        if fn is None:
            self.fail(e, f"'{ast.unparse(e.func)}' is not a function")
        if fn is intrinsics.tid:
            if e.args:
                self.fail(e, "gk.tid() takes no arguments")
            self.note_tid(e, 1)
            return ir.Tid(0, loc=loc)
        if fn is intrinsics.atomic_add:
            self.fail(e, "gk.atomic_add() is a statement and has no value")
        if fn is builtins.len:
            if len(e.args) != 1:
                self.fail(e, "len() takes one argument")
            return ir.Shape(self.array_name(e.args[0]), 0, loc=loc)
        if isinstance(fn, DeviceFunctionMarker):
            return inline_call(self, e, fn)
        if isinstance(fn, KernelMarker):
            self.fail(e, f"'{fn.name}' is a @gk.kernel; kernels cannot call kernels",
                      hint="decorate the helper with @gk.func instead")
        if id(fn) in _CASTS and len(e.args) == 1 and isinstance(e.args[0], ast.Constant) \
                and isinstance(e.args[0].value, str) and _CASTS[id(fn)] in (None, F64, F32):
            return self.float_literal(e, fn)
        args = [self.expr(a) for a in e.args]
        if fn is intrinsics.clamp or fn is np.clip:
            if len(args) != 3:
                self.fail(e, f"{ast.unparse(e.func)}() takes three arguments (x, lo, hi)")
            return ir.Apply(Op.MIN, (ir.Apply(Op.MAX, (args[0], args[1]), loc=loc), args[2]), loc=loc)
        if fn is intrinsics.sign or fn is np.sign:
            if len(args) != 1:
                self.fail(e, f"{ast.unparse(e.func)}() takes one argument")
            return _sign(args[0], loc)
        if id(fn) in _CASTS:
            if len(args) != 1:
                self.fail(e, f"{ast.unparse(e.func)}() takes one argument")
            return ir.Apply(Op.CAST, (args[0],), type=_CASTS[id(fn)], loc=loc)
        op = _FUNCTIONS.get(id(fn))
        if op is None:
            self.fail(e, f"call to '{ast.unparse(e.func)}' is not supported",
                      hint=suggest.hint_for(fn, ast.unparse(e.func)))
        if op in (Op.MIN, Op.MAX) and len(args) >= 2:
            out = args[0]
            for a in args[1:]:
                out = ir.Apply(op, (out, a), loc=loc)
            return out
        if len(args) != op.arity:
            self.fail(e, f"{ast.unparse(e.func)}() takes {op.arity} argument{'s' * (op.arity > 1)}")
        return ir.Apply(op, tuple(args), loc=loc)

    def note_tid(self, node: ast.AST, arity: int):
        if self.tid_arity and self.tid_arity != arity:
            self.fail(node, f"gk.tid() is unpacked into {arity} indices here but {self.tid_arity} elsewhere")
        self.tid_arity = arity


def _sign(x: ir.Expr, loc) -> ir.Expr:
    """-1, 0 or 1 in x's type, as np.sign: x - x is +0 for ±0 and NaN for NaN, and its derivative is 0."""
    zero = ir.Const(0, loc=loc)
    return ir.Select(ir.Apply(Op.GT, (x, zero), loc=loc), ir.Const(1, loc=loc),
                     ir.Select(ir.Apply(Op.LT, (x, zero), loc=loc), ir.Const(-1, loc=loc),
                               ir.Apply(Op.SUB, (x, x), loc=loc), loc=loc), loc=loc)


def _numpy_scalar_type(v):
    from ..ir.types import SCALARS
    return SCALARS.get(np.asarray(v).dtype.name)


def _array_names(body: tuple[ir.Stmt, ...]) -> set[str]:
    out = set()
    for s in ir.walk_stmts(body):
        if isinstance(s, (ir.Store, ir.AtomicAdd)):
            out.add(s.array)
    for e in ir.all_exprs(body):
        if isinstance(e, (ir.Load, ir.Shape)):
            out.add(e.array)
    return out


def lower_function(parsed: ParsedFunction, is_kernel: bool, stack: tuple[str, ...] = (), widths=None) -> Lowered:
    return _Lowerer(parsed, is_kernel, stack, widths).lower()


def lower_kernel(parsed: ParsedFunction, captured: list | None = None) -> ir.Kernel:
    """Lower a @gk.kernel to an untyped IR kernel (device functions inlined); what it read of its module
    (frontend/captured.py) is appended to `captured`."""
    low = lower_function(parsed, is_kernel=True)
    if captured is not None:
        captured.append(low.captured)
    unknown = low.array_names - set(low.params)
    if unknown:
        raise KernelSyntaxError(f"unknown arrays {sorted(unknown)}", low.loc)
    used_as_scalar = {e.name for e in ir.all_exprs(low.body) if isinstance(e, ir.Var)}
    # every binding counts: a loop variable is assigned too
    assigned = {s.name if isinstance(s, ir.Assign) else s.var for s in ir.walk_stmts(low.body)
                if isinstance(s, (ir.Assign, ir.For))}
    for s in ir.walk_stmts(low.body):
        name = s.name if isinstance(s, ir.Assign) else s.var if isinstance(s, ir.For) else None
        if name in low.array_names:
            raise KernelSyntaxError(f"array parameter '{name}' is assigned a value", s.loc,
                                    hint="store into its elements (a[i] = ...) or use a new local")
    # sorted: the same error in every process, whatever the hash seed (docs/caching.md)
    for name in sorted(low.array_names & (used_as_scalar | assigned)):
        node = next((e for e in ir.all_exprs(low.body) if isinstance(e, ir.Var) and e.name == name), None)
        raise KernelSyntaxError(f"array parameter '{name}' is used as a scalar value", node.loc if node else low.loc,
                                hint="arrays can only be indexed, passed to device functions or asked for .shape")
    scalars = {p for p in low.params if p not in low.array_names}
    check_definite_assignment(low.body, scalars)
    body = privatize_reassigned(low.body, scalars & assigned)
    written = {s.array for s in ir.walk_stmts(low.body) if isinstance(s, (ir.Store, ir.AtomicAdd))}
    params = tuple(ir.Param(p, is_array=p in low.array_names, written=p in written,
                            used=p in low.array_names or p in used_as_scalar) for p in low.params)
    return ir.Kernel(low.name, params, body, low.tid_arity, loc=low.loc)
