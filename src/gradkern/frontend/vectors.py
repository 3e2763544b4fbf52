"""Small vectors (`gk.vec2/vec3/vec4`), scalarised in the Python AST before
lowering, the last of frontend/rewrites.py's rewrites (after loops over a
vector's components are unrolled by frontend/unroll.py, so `v[k]` there has
a constant `k`): a vector local becomes one scalar local per component, vector
arithmetic becomes component arithmetic, `gk.dot`, `gk.cross`, `gk.length`
and `gk.normalize` become their formulas, `gk.load_vecN`/`gk.store_vecN`
read and write a trailing array dimension. The IR, AD, the analyses and both
backends never see a vector (issue 19, item 5).

Which names hold vectors is found first (a fixpoint over the assignments);
a name is a vector of one width everywhere or an error. A vector assignment
is one tuple assignment of its components, so `p = gk.vec3(p.y, p.x, p.z)`
reads every old component before writing any. Vector subexpressions used
more than once (operands of `cross`, `normalize`) are computed once into
temporaries, except where the expression may not be evaluated (a `while`
condition, `and`/`or` operands, conditional expressions): there they are
repeated, which is the same value.
"""

from __future__ import annotations

import ast
import copy
import math
from collections.abc import Callable
from typing import Any

from .. import intrinsics as gk
from ..ir.names import VECTOR
from . import vector_calls
from .callables import DeviceFunctionMarker, Unresolved
from .vector_calls import API, COMPONENTS, CONSTRUCTORS, LOADS, STORES, Vectors, component, uses_vectors

__all__ = ["API", "COMPONENTS", "component", "uses_vectors"]

_COMPONENT_HINT = ("index it by a constant, or by the variable of a 'for' loop over range(<constant>) or a literal "
                   "tuple, which is then unrolled (for k in range(3): f[i, k] += v[k]); a run-time index needs the "
                   "vector in an array: gk.store_vec3(a, i, v), then a[i, k]")
_CONSTRUCTORS, _LOADS, _STORES = CONSTRUCTORS, LOADS, STORES
_ELEMENTWISE = (ast.Add, ast.Sub, ast.Mult, ast.Div)
SQRT = VECTOR + "sqrt"  # the name `length` and `normalize` call: bound to math.sqrt in the lowerer's namespace
# a parameter used as a vector but given a number (Taichi's spiky_gradient(r, h), session 57): a kernel's
# parameters are numbers and arrays; a device function's is a vector where its call passes one (session 58)
_PARAM_VECTOR = ("'{0}' is a parameter, here a number, not a vector: a kernel's parameters are numbers and arrays "
                 "(build a local vector, v = gk.vec2({0}x, {0}y), or load one with gk.load_vec2); a @gk.func's "
                 "parameter is a vector where its call passes one")


class Scalarizer:
    """Rewrites one function's AST. `resolve(callee)` is the Python object a
    call's callee names (None for a local); `fail(node, message, hint)` raises."""

    def __init__(self, resolve: Callable[[ast.expr], Any], fail: Callable[..., Any], params: tuple[str, ...],
                 shared: Vectors):
        self.resolve = resolve
        self.fail = fail
        self.params = params
        self.widths: dict[str, int] = dict(shared.seeds)  # a device function's vector parameters (vector_calls.py)
        self.call_widths = shared.call_widths  # (device function, argument widths) → result width
        self.specialisations: dict[tuple, str] = {}  # the same → the name its specialisation is called by
        self.namespace: dict[str, Any] = {}  # those names → the specialisations (vector_calls.VectorCall)
        self.temps = 0
        self.pre: list[ast.stmt] = []  # statements hoisted before the one being rewritten
        self.lazy = 0

    # -- which names are vectors -------------------------------------------------------------------------------
    def collect(self, tree: ast.FunctionDef) -> None:
        while True:
            before = dict(self.widths)
            for node in ast.walk(tree):
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    w = self.width(node.value)
                    for t in targets:
                        if isinstance(t, ast.Name) and w is not None:
                            self.declare(t, w)
            if self.widths == before:
                return

    def declare(self, target: ast.Name, w: int) -> None:
        if target.id in self.params:
            self.fail(target, f"parameter '{target.id}' is assigned a vec{w}; parameters are arrays or numbers",
                      "assign the vector to a new local")
        old = self.widths.setdefault(target.id, w)
        if old != w:
            self.fail(target, f"'{target.id}' holds a vec{old} and a vec{w}; a local keeps one width")

    def width(self, e: ast.expr) -> int | None:
        """The width of a vector-valued expression, None for a number."""
        if isinstance(e, ast.Name):
            return self.widths.get(e.id)
        if isinstance(e, ast.Call):
            fn = self.resolve(e.func)
            if isinstance(fn, DeviceFunctionMarker):
                return vector_calls.call_width(self, e, fn)
            if fn is None and isinstance(e.func, ast.Name) and not e.func.id.startswith("_gk"):  # not a rewrite's:
                # a device function defined after the kernel, whose result width is known at launch
                self.fail(e.func, f"name '{e.func.id}' is not defined", cls=Unresolved)
            f = id(fn)
            if f in _CONSTRUCTORS:
                return _CONSTRUCTORS[f]
            if f in _LOADS:
                return _LOADS[f]
            if f == id(gk.cross):
                return 3
            if f == id(gk.normalize) and len(e.args) == 1:
                return self.width(e.args[0])
            return None
        if isinstance(e, ast.BinOp):
            left, right = self.width(e.left), self.width(e.right)
            if left is not None and right is not None and left != right:
                self.fail(e, f"vec{left} and vec{right} operands", "vectors of one width combine elementwise")
            return left or right
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
            return self.width(e.operand)
        if isinstance(e, ast.IfExp):
            return self.width(e.body) or self.width(e.orelse)
        return None

    # -- statements --------------------------------------------------------------------------------------------
    def block(self, body: list[ast.stmt]) -> list[ast.stmt]:
        outer, out = self.pre, []
        for s in body:
            self.pre = []
            done = self.stmt(s)
            out += self.pre + done
        self.pre = outer  # an enclosing statement's own hoisted statements (an if's test)
        return out

    def stmt(self, s: ast.stmt) -> list[ast.stmt]:
        if isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None:
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            if len(targets) == 1:
                return self.assign(targets[0], s.value, s)
        if isinstance(s, ast.AugAssign):
            return self.aug_assign(s)
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and id(self.resolve(s.value.func)) in _STORES:
            return self.store(s.value, s)
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
                and isinstance(fn := self.resolve(s.value.func), DeviceFunctionMarker):  # f(v) as a statement
            return [ast.copy_location(ast.Expr(vector_calls.specialised_call(self, s.value, fn)), s)]
        if isinstance(s, ast.Return) and s.value is not None and self.width(s.value) is not None:
            self.fail(s, "a device function returns a number, not a vector",
                      "return the components from separate functions, or write the vector with gk.store_vecN")
        if isinstance(s, ast.If):
            s.test = self.scalar(s.test)
            s.body, s.orelse = self.block(s.body), self.block(s.orelse)
            return [s]
        if isinstance(s, ast.For):
            s.iter = self.scalar(s.iter)
            s.body, s.orelse = self.block(s.body), self.block(s.orelse)
            return [s]
        if isinstance(s, ast.While):
            self.lazy += 1  # re-evaluated each iteration: nothing can be hoisted out of it
            s.test = self.scalar(s.test)
            self.lazy -= 1
            s.body, s.orelse = self.block(s.body), self.block(s.orelse)
            return [s]
        return [_Scalars(self).visit(s)]

    def assign(self, target: ast.expr, value: ast.expr, s: ast.stmt) -> list[ast.stmt]:
        w = self.width(value)
        if isinstance(target, ast.Name) and target.id in self.widths:
            if w is None:
                self.fail(s, f"'{target.id}' is a vec{self.widths[target.id]} but is assigned a number")
            return [self.tuple_assign([component(target.id, c) for c in range(w)], self.components(value, w), s)]
        if w is not None:
            self.fail(s, f"a vec{w} cannot be stored here", "store it with gk.store_vecN, or assign it to a local")
        slot = self.slot(target)
        if slot is not None:
            return [ast.copy_location(ast.Assign([ast.Name(slot, ast.Store())], self.scalar(value)), s)]
        new = copy.copy(s)
        if isinstance(new, ast.Assign):
            new.targets = [_Scalars(self).visit(target)]
        else:
            new.target = _Scalars(self).visit(target)
        new.value = self.scalar(value)
        return [new]

    def aug_assign(self, s: ast.AugAssign) -> list[ast.stmt]:
        t = s.target
        if isinstance(t, ast.Name) and t.id in self.widths:
            combined = ast.copy_location(ast.BinOp(ast.Name(t.id, ast.Load()), s.op, s.value), s)
            return self.assign(t, combined, s)
        slot = self.slot(t)
        if slot is not None:
            t = ast.Name(slot, ast.Store())
        else:
            t = _Scalars(self).visit(t)
        if self.width(s.value) is not None:
            self.fail(s, "a vector cannot be added to a number")
        return [ast.copy_location(ast.AugAssign(t, s.op, self.scalar(s.value)), s)]

    def store(self, call: ast.Call, s: ast.stmt) -> list[ast.stmt]:
        w = _STORES[id(self.resolve(call.func))]
        if len(call.args) < 3:
            self.fail(call, f"{ast.unparse(call.func)}(array, index..., v) takes an array, 1 or 2 indices and a vec{w}")
        array, *index, value = call.args
        got = self.width(value)
        if got != w:
            fn = self.resolve(value.func) if isinstance(value, ast.Call) else None
            hint = (f"'{fn.name}' returns numbers where its call passes no vector: a @gk.func's parameter is a "
                    "vector where its call passes one, not an array" if got is None and
                    isinstance(fn, DeviceFunctionMarker) else None)  # vx(a), `a` an array: not "got vx(a)" alone
            self.fail(value, f"{ast.unparse(call.func)} stores a vec{w}; got {ast.unparse(value)}, "
                             f"{f'a vec{got}' if got else 'a number'}", hint)
        temps = self.fresh_components(w)
        out = [self.tuple_assign(temps, self.components(value, w), s)]
        index = [self.scalar(i) for i in index]
        for c in range(w):
            target = ast.Subscript(array, ast.Tuple([*copy.deepcopy(index), ast.Constant(c)], ast.Load()), ast.Store())
            out.append(ast.copy_location(ast.Assign([target], ast.Name(temps[c], ast.Load())), s))
        return out

    def tuple_assign(self, names: list[str], values: list[ast.expr], at: ast.AST) -> ast.stmt:
        """names = values, every value read before any name is written (the lowerer's tuple assignment)."""
        if len(names) == 1:
            return ast.copy_location(ast.Assign([ast.Name(names[0], ast.Store())], values[0]), at)
        return ast.copy_location(ast.Assign([ast.Tuple([ast.Name(n, ast.Store()) for n in names], ast.Store())],
                                            ast.Tuple(values, ast.Load())), at)

    def fresh_components(self, w: int) -> list[str]:
        self.temps += 1
        return [f"{VECTOR[:-1]}{self.temps}_{COMPONENTS[c]}" for c in range(w)]

    def slot(self, target: ast.expr) -> str | None:
        """The component local a `v.x` or `v[0]` target names, for a vector local v."""
        v, c = _component_of(target)
        if v is None or not isinstance(v, ast.Name) or v.id not in self.widths:
            return None
        if not 0 <= c < self.widths[v.id]:
            self.fail(target, f"'{v.id}' is a vec{self.widths[v.id]}: it has no component {c}")
        return component(v.id, c)

    # -- expressions --------------------------------------------------------------------------------------------
    def scalar(self, e: ast.expr) -> ast.expr:
        """A number-valued expression, its vector parts scalarised."""
        return _Scalars(self).visit(e)

    def components(self, e: ast.expr, w: int | None = None) -> list[ast.expr]:
        """The component expressions of a vector-valued expression."""
        width = self.width(e)
        if width is None or (w is not None and width != w):
            self.fail(e, f"a vec{w} is needed here; got {ast.unparse(e)}")
        if isinstance(e, ast.Name):
            return [ast.copy_location(ast.Name(component(e.id, c), ast.Load()), e) for c in range(width)]
        if isinstance(e, ast.Call):
            return self.call_components(e, width)
        if isinstance(e, ast.UnaryOp):
            inner = self.components(e.operand, width)
            if isinstance(e.op, ast.UAdd):
                return inner
            return [ast.copy_location(ast.UnaryOp(ast.USub(), c), e) for c in inner]
        if isinstance(e, ast.IfExp):
            test = self.scalar(e.test)
            self.lazy += 1
            body, orelse = self.components(e.body, width), self.components(e.orelse, width)
            self.lazy -= 1
            return [ast.copy_location(ast.IfExp(copy.deepcopy(test), b, o), e) for b, o in zip(body, orelse)]
        assert isinstance(e, ast.BinOp)
        if not isinstance(e.op, _ELEMENTWISE):
            self.fail(e, f"the operator {type(e.op).__name__} on vectors", "vectors take + - * / elementwise")
        sides = []
        for side in (e.left, e.right):
            if self.width(side) is None:
                sides.append(self.shared([self.scalar(side)])[0:1] * width)
            else:
                sides.append(self.components(side, width))
        return [ast.copy_location(ast.BinOp(a, e.op, b), e) for a, b in zip(*sides)]

    def call_components(self, e: ast.Call, width: int) -> list[ast.expr]:
        fn = self.resolve(e.func)
        if isinstance(fn, DeviceFunctionMarker):
            return vector_calls.call_components(self, e, fn, width)
        f = id(fn)
        name = ast.unparse(e.func)
        if f in _CONSTRUCTORS:
            if len(e.args) == 1:
                return self.shared([self.scalar(e.args[0])]) * width
            if len(e.args) != width:
                self.fail(e, f"{name}() takes {width} components (or one, for all)")
            return [self.scalar(a) for a in e.args]
        if f in _LOADS:
            if len(e.args) not in (2, 3):
                self.fail(e, f"{name}(array, index...) takes an array and 1 or 2 indices")
            array, *index = e.args
            index = [self.scalar(i) for i in index]
            return [ast.copy_location(ast.Subscript(copy.deepcopy(array), ast.Tuple(
                [*copy.deepcopy(index), ast.Constant(c)], ast.Load()), ast.Load()), e) for c in range(width)]
        if f == id(gk.cross):
            if len(e.args) != 2:
                self.fail(e, f"{name}(a, b) takes two vec3")
            a, b = (self.shared(self.components(x, 3)) for x in e.args)
            return [_minus(_times(a[(k + 1) % 3], b[(k + 2) % 3]), _times(a[(k + 2) % 3], b[(k + 1) % 3]))
                    for k in range(3)]
        # normalize(a) = a / length(a)
        a = self.shared(self.components(e.args[0], width))
        n = self.shared([_call(SQRT, _dot(a, a))])[0]
        return [ast.BinOp(c, ast.Div(), copy.deepcopy(n)) for c in a]

    def shared(self, values: list[ast.expr]) -> list[ast.expr]:
        """`values` computed once into temporaries (where statements may go before this one), as names."""
        if self.lazy or all(isinstance(v, (ast.Name, ast.Constant)) for v in values):
            return values
        names = self.fresh_components(len(values))
        self.pre.append(self.tuple_assign(names, values, values[0]))
        return [ast.Name(n, ast.Load()) for n in names]


class _Scalars(ast.NodeTransformer):
    """Scalarises number-valued expressions: `v.x`, `v[1]`, `gk.dot`, `gk.length`; a vector where a number
    is needed is an error."""

    def __init__(self, sc: Scalarizer):
        self.sc = sc

    def visit_Name(self, e: ast.Name) -> ast.AST:
        if e.id in self.sc.widths:
            self.sc.fail(e, f"'{e.id}' is a vec{self.sc.widths[e.id]} where a number is needed",
                         f"use its components ({e.id}.x, ...) or gk.dot / gk.length")
        return e

    def visit_Attribute(self, e: ast.Attribute) -> ast.AST:
        v, c = _component_of(e)
        if v is not None and self.sc.width(v) is not None:
            return self.component(v, c, e)
        if isinstance(v, ast.Constant):  # `for u in (v, 1.0): u.x` unrolled (was "'Constant' is not supported")
            self.sc.fail(e, f"'{ast.unparse(e)}': a number has no component {e.attr}",
                         "a loop over a tuple binds its variable to each element in turn: loop over vectors of "
                         "one width, or over numbers")
        return self.generic_visit(e)

    def visit_Subscript(self, e: ast.Subscript) -> ast.AST:
        v, c = _component_of(e)
        if v is not None and self.sc.width(v) is not None:
            return self.component(v, c, e)
        if self.sc.width(e.value) is not None:
            # a loop over the components (`for c in range(3): f[i, c] += v[c]`) was unrolled by frontend/unroll.py
            # and its variable is a constant here; any other index is not (docs/kernel-language.md)
            self.sc.fail(e, f"'{ast.unparse(e)}': a vector is indexed by a constant 0-3 (or .x .y .z .w), not by "
                            f"{ast.unparse(e.slice)}", _COMPONENT_HINT)
        return self.generic_visit(e)

    def component(self, v: ast.expr, c: int, at: ast.AST) -> ast.expr:
        w = self.sc.width(v)
        if not 0 <= c < w:
            self.sc.fail(at, f"a vec{w} has no component {COMPONENTS[c] if 0 <= c < 4 else c}")
        return ast.copy_location(self.sc.components(v, w)[c], at)

    def visit_BoolOp(self, e: ast.BoolOp) -> ast.AST:
        first, *rest = e.values
        out = [self.visit(first)]
        self.sc.lazy += 1
        out += [self.visit(v) for v in rest]
        self.sc.lazy -= 1
        e.values = out
        return e

    def visit_IfExp(self, e: ast.IfExp) -> ast.AST:
        e.test = self.visit(e.test)
        self.sc.lazy += 1
        e.body, e.orelse = self.visit(e.body), self.visit(e.orelse)
        self.sc.lazy -= 1
        return e

    def visit_Compare(self, e: ast.Compare) -> ast.AST:
        e.left = self.visit(e.left)
        self.sc.lazy += 1  # later operands of a chain are evaluated only if needed
        e.comparators = [self.visit(c) for c in e.comparators]
        self.sc.lazy -= 1
        return e

    def visit_Call(self, e: ast.Call) -> ast.AST:
        fn = self.sc.resolve(e.func)
        if isinstance(fn, DeviceFunctionMarker):
            w = self.sc.width(e)
            if w is not None:
                self.sc.fail(e, f"'{ast.unparse(e)}' gives a vec{w} where a number is needed",
                             "use its components or gk.dot / gk.length")
            return vector_calls.specialised_call(self.sc, e, fn)
        f = id(fn)
        if f == id(gk.dot) or f == id(gk.length):
            n = 2 if f == id(gk.dot) else 1
            if len(e.args) != n:
                self.sc.fail(e, f"{ast.unparse(e.func)}() takes {n} vector{'s' * (n > 1)}")
            w = self.sc.width(e.args[0])
            if w is None:
                arg = e.args[0]
                self.sc.fail(e, f"{ast.unparse(e.func)}() takes vectors; got {ast.unparse(arg)}",
                             _PARAM_VECTOR.format(arg.id) if isinstance(arg, ast.Name) and arg.id in self.sc.params
                             else None)
            a = self.sc.components(e.args[0], w)
            if f == id(gk.length):
                a = self.sc.shared(a)
                return ast.copy_location(_call(SQRT, _dot(a, copy.deepcopy(a))), e)
            b = self.sc.components(e.args[1], w)
            return ast.copy_location(_dot(a, b), e)
        if f in API:
            self.sc.fail(e, f"{ast.unparse(e.func)}() gives a vector where a number is needed")
        for a in e.args:
            if self.sc.width(a) is not None:
                self.sc.fail(a, f"'{ast.unparse(a)}' is a vector; functions take numbers",
                             "pass its components")
        return self.generic_visit(e)

    def visit_BinOp(self, e: ast.BinOp) -> ast.AST:
        if self.sc.width(e) is not None:
            self.sc.fail(e, f"'{ast.unparse(e)}' is a vector where a number is needed",
                         "use its components or gk.dot / gk.length")
        return self.generic_visit(e)


def _component_of(e: ast.expr) -> tuple[ast.expr | None, int]:
    """(v, c) for `v.x`-style or `v[c]` (c a constant) expressions, else (None, 0)."""
    if isinstance(e, ast.Attribute) and e.attr in COMPONENTS:
        return e.value, COMPONENTS.index(e.attr)
    if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant) and type(e.slice.value) is int:
        return e.value, e.slice.value
    return None, 0


def _times(a: ast.expr, b: ast.expr) -> ast.expr:
    return ast.BinOp(copy.deepcopy(a), ast.Mult(), copy.deepcopy(b))


def _minus(a: ast.expr, b: ast.expr) -> ast.expr:
    return ast.BinOp(a, ast.Sub(), b)


def _dot(a: list[ast.expr], b: list[ast.expr]) -> ast.expr:
    out = _times(a[0], b[0])
    for x, y in zip(a[1:], b[1:]):
        out = ast.BinOp(out, ast.Add(), _times(x, y))
    return out


def _call(name: str, arg: ast.expr) -> ast.expr:
    return ast.Call(ast.Name(name, ast.Load()), [arg], [])


def vector_test(tree: ast.FunctionDef, resolve: Callable[[ast.expr], Any], fail: Callable[..., Any],
                params: tuple[str, ...], shared: Vectors) -> Callable[[ast.expr], bool] | None:
    """Whether an expression of `tree` is vector-valued (None when `tree` uses no vectors): frontend/unroll.py
    unrolls the loops whose variable indexes one (docs/kernel-language.md)."""
    if not shared.present:
        return None
    sc = Scalarizer(resolve, fail, params, shared)
    sc.collect(tree)
    return lambda e: sc.width(e) is not None


def check_before_rewrites(tree: ast.FunctionDef, resolve: Callable[[ast.expr], Any], fail: Callable[..., Any],
                          params: tuple[str, ...], shared: Vectors, new_name: Callable[[str], str],
                          is_kernel: bool) -> ast.FunctionDef:
    """A device function's returned vector made several numbers (frontend/vector_calls.py), and what the
    scalariser refuses but the rewrites before it (frontend/rewrites.py) would turn into other code, refused on
    the user's own spelling: a vector among returned values (`return v, w` would become result locals) and a
    vector stored into an element (a local array's element would become a local). `tree` or a rewritten copy."""
    if not shared.present:
        return tree
    sc = Scalarizer(resolve, fail, params, shared)
    sc.collect(tree)
    if not is_kernel:
        tree = vector_calls.flatten_returns(tree, sc, new_name, fail)
    for node in ast.walk(tree):
        if isinstance(node, ast.Return) and node.value is not None and is_kernel:
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            if any(sc.width(v) is not None for v in values):
                fail(node, "a kernel returns nothing, not a vector", "write the vector with gk.store_vecN")
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, ast.AnnAssign) and node.value is not None else []
        w = sc.width(node.value) if targets else None
        if w is not None and any(isinstance(t, ast.Subscript) for t in targets):
            fail(node, f"a vec{w} cannot be stored here", "store it with gk.store_vecN, or assign it to a local")
    return tree


def scalarize(tree: ast.FunctionDef, resolve: Callable[[ast.expr], Any], fail: Callable[..., Any],
              params: tuple[str, ...], shared: Vectors) -> tuple[ast.FunctionDef, dict[str, Any]]:
    """`tree` with its vectors scalarised (the same tree when it uses none), and the names its code calls that
    the lowerer's namespace must hold (the device functions specialised to vector arguments)."""
    if not shared.present:
        return tree, {}
    tree = copy.deepcopy(tree)
    sc = Scalarizer(resolve, fail, params, shared)
    sc.collect(tree)
    tree.body = sc.block(tree.body)
    ast.fix_missing_locations(tree)
    return tree, {**NAMESPACE, **sc.namespace}


NAMESPACE = {SQRT: math.sqrt}  # what the scalarised code calls, added to the lowerer's namespace
