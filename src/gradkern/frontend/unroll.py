"""Fixed-size local arrays and constant tables, lowered in the Python AST
before lowering (issue 19, item 1): the IR, AD, the analyses and both backends
see scalar locals and literals only.

* `f = gk.local((9,), gk.float64)` (1-D or 2-D, at most MAX_ELEMENTS) is
  per-thread storage: one scalar local per element (`_gka_f__3`, shown as
  `f[3]`), each zero-initialised where the declaration stands. Without a
  dtype the zero is a float literal, so the elements take the type of the
  values stored (a float32 kernel stays float32).
* A module-level (or closure) tuple of numbers, or tuple of such tuples, is a
  constant table: `E[q][0]`, `E[q, 0]` and `len(E)` become literals, and
  `a, b = E[q]` unpacks a row when every row there has that many elements.
* A `for q in range(...)` whose body indexes a local array, a table or a
  small vector (`v[q]`, a component: session 57, docs/kernel-language.md) by
  an expression of `q` is unrolled: one copy of the body per value of `q`, with
  `q` a literal in it (its bounds must then fold to constants, at most
  MAX_UNROLL iterations), and `q` bound to its last value after the copies
  where the function reads it elsewhere. Other loops stay loops.
* After that every index into a local array or a table must fold to a
  constant in range; otherwise a KernelSyntaxError names the access. An
  index may name a local assigned once in the function from such constants
  (`c = abs(di) + abs(dj); W[c]`, with `di`, `dj` unrolled): from its
  assignment on, in that block and the blocks it contains, it folds to its
  value inside indices (only there: elsewhere it stays a typed local); a loop
  whose variable reaches a table index through such locals is unrolled too,
  and so is a loop whose variable bounds an inner loop that is unrolled
  (`for i in range(8, 0, -1): for j in range(i): c[j] = ...`).
  `abs`, `min` and `max` of integer constants fold. A vector's component
  index that folds becomes a literal (`v[(k + 1) % 3]` → `v[1]`), for
  frontend/vectors.py, which runs after this pass and refuses any other.

An `if` whose test folds to a constant keeps only the branch taken, so
`if q == 0:` in an unrolled body costs nothing. In reverse mode an element
overwritten is a reassigned local like any other, taped or recomputed
(docs/shadows-and-modes.md).
"""

from __future__ import annotations

import ast
import copy
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import intrinsics as gk
from ..ir.names import LOCAL_ARRAY

MAX_ELEMENTS = 64
MAX_UNROLL = 256
_DTYPES = {id(np.float64): "float64", id(float): "float64", id(np.float32): "float32",
           id(np.int64): "int64", id(int): "int64", id(np.int32): "int32"}
NAMESPACE = {f"{LOCAL_ARRAY}as_{t}": getattr(np, t) for t in ("float64", "float32", "int64", "int32")}
_MISSING = object()
_FOLD_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
             ast.Mod: operator.mod, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
             ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor}
_FOLD_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_, ast.Invert: operator.invert}
_FOLD_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
             ast.Gt: operator.gt, ast.GtE: operator.ge}
_CONST = "\0"  # env key prefix of a local assigned once from constants: it folds inside indices only
_FOLD_CALLS = (abs, min, max)
# an index read from an array (RSBench's sigTfactors[pole.l_value], session 57): what a port writes instead
_DATA_INDEX = ("; an index read from an array selects by branches instead ('if l == 0: v = f[0]', 'elif l == 1: "
               "v = f[1]', ...), or the values go in an array argument")
_INDEXING = "index it by constants, or by the variable of a 'for' loop with constant bounds (which is unrolled)"
_VECTOR = ("a vector's component is a constant: loop over range(<constant>), range(len(E)) of a table or a literal "
           "tuple; or store the vector with gk.store_vec3(a, i, v) and index the array a[i, k] at run time")


def element(name: str, index: tuple[int, ...]) -> str:
    return f"{LOCAL_ARRAY}{name}__{'_'.join(map(str, index))}"


def _chain(e: ast.Subscript) -> tuple[ast.expr, list[ast.expr]]:
    """`E[a][b]` and `E[a, b]` → (E, [a, b])."""
    index: list[ast.expr] = []
    while isinstance(e, ast.Subscript):
        s = e.slice
        index[:0] = s.elts if isinstance(s, ast.Tuple) else [s]
        e = e.value
    return e, index


class Unroller:
    """Rewrites one function's AST. `lookup(name)` is a free name's Python object (or _MISSING),
    `resolve(callee)` the object a call names (None for a local), `fail(node, message, hint)` raises."""

    def __init__(self, lookup: Callable[[str], Any], resolve: Callable[[ast.expr], Any],
                 fail: Callable[..., Any], local_names: set[str], is_vector: Callable[[ast.expr], bool] | None = None):
        self.lookup = lookup
        self.is_vector = is_vector or (lambda e: False)  # a small vector's expression (frontend/vectors.py)
        self.resolve = resolve
        self.fail = fail
        self.local_names = local_names
        self.arrays: dict[str, tuple[tuple[int, ...], str]] = {}
        self.reads: dict[str, int] = {}  # how often the function reads each name (set by `unroll`)
        self.stores: dict[str, int] = {}  # how often it binds each name (set by `unroll`)
        self.read_after: set[str] = set()  # names read outside every `for` loop binding them (set by `unroll`)

    # -- what names are ----------------------------------------------------------------------------------------
    def is_local_call(self, e: ast.expr) -> bool:
        return isinstance(e, ast.Call) and self.resolve(e.func) is gk.local

    def collect(self, tree: ast.FunctionDef) -> None:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None \
                    and self.is_local_call(node.value):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if len(targets) != 1 or not isinstance(targets[0], ast.Name):
                    self.fail(node, "gk.local(...) is assigned to one name", "write 'f = gk.local((9,), gk.float64)'")
                name = targets[0].id
                decl = self.declaration(node.value)
                if self.arrays.setdefault(name, decl) != decl:
                    self.fail(node, f"local array '{name}' is declared twice with different shapes or types")

    def declaration(self, call: ast.Call) -> tuple[tuple[int, ...], str]:
        spelled = "gk.local(shape, dtype)"
        if call.keywords or not 1 <= len(call.args) <= 2:
            self.fail(call, f"{spelled} takes a shape and a dtype", "write 'f = gk.local((9,), gk.float64)'")
        shape_node = call.args[0]
        dims = shape_node.elts if isinstance(shape_node, ast.Tuple) else [shape_node]
        shape = tuple(self.fold(self.expr(d, {})) for d in dims)
        if not 1 <= len(shape) <= 2 or any(type(n) is not int or n < 1 for n in shape):
            self.fail(shape_node, f"a local array's shape is one or two positive constant integers, "
                                  f"not {ast.unparse(shape_node)}",
                      "write gk.local((9,), ...) or gk.local((9, 2), ...)")
        size = int(np.prod(shape))
        if size > MAX_ELEMENTS:
            self.fail(call, f"a local array of {size} elements is too large (at most {MAX_ELEMENTS}): each element "
                            "is a register of the thread", "pass a scratch array as an argument for larger storage")
        dtype = "weak"  # no dtype: a float literal 0.0, so the elements take the type of what is stored
        if len(call.args) == 2:
            dtype = _DTYPES.get(id(self.resolve(call.args[1])))
            if dtype is None:
                self.fail(call.args[1], f"'{ast.unparse(call.args[1])}' is not a local array's dtype",
                          "use gk.float64, gk.float32, gk.int64 or gk.int32")
        return shape, dtype

    def table(self, name: str) -> Any:
        """The tuple a free name refers to, or None when it is not a table."""
        if name in self.local_names:
            return None
        value = self.lookup(name)
        if isinstance(value, (list, np.ndarray)):
            return value  # refused where it is indexed
        return value if isinstance(value, tuple) else None

    def check_table(self, name: str, value: Any, at: ast.AST) -> None:
        if not isinstance(value, tuple):
            self.fail(at, f"'{name}' is a {type(value).__name__}; a constant table is a tuple",
                      f"write {name} = (...) at module level (a table must not change after the kernel compiles)")

        def ok(v):
            if isinstance(v, tuple):
                return all(ok(x) for x in v)
            return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
        if not ok(value):
            self.fail(at, f"the constant table '{name}' holds something other than numbers",
                      "a table is a tuple of int/float, or a tuple of such tuples")

    def uses_index_by(self, body: list[ast.stmt], var: str) -> str | None:
        """What the body indexes by `var` (`"local array 'f'"`, `"constant table 'E'"`, `"vector 'v'"`, or None):
        a local array, a table or a small vector, by `var` or by a local assigned once from an expression of it
        (`c = abs(var) + 1; W[c]`), or what an inner loop indexes that `var` bounds."""
        module = ast.Module(body, [])
        names, grown = {var}, True
        while grown:
            grown = False
            for s in ast.walk(module):
                if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) \
                        and s.targets[0].id not in names and self.stores.get(s.targets[0].id) == 1 \
                        and any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(s.value)):
                    names.add(s.targets[0].id)
                    grown = True
        def reads(e: ast.AST) -> bool:
            return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(e))
        for node in ast.walk(module):
            if isinstance(node, ast.Subscript):
                base, index = _chain(node)
                if not any(reads(i) for i in index):
                    continue
                if isinstance(base, ast.Tuple):
                    return "literal tuple"
                if isinstance(base, ast.Name) and (base.id in self.arrays or self.table(base.id) is not None):
                    return f"{'local array' if base.id in self.arrays else 'constant table'} '{base.id}'"
                if self.is_vector(node.value) and reads(node.slice):  # `v[k]`: a component (session 57)
                    return f"vector '{ast.unparse(node.value)}'"
            # a nested loop that is unrolled and whose bounds read `var` (binomialOptions' triangular `for j in
            # range(i)` over a local array): its bounds fold only in copies of this loop, so this one unrolls too
            if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and reads(node.iter):
                inner = self.uses_index_by(node.body, node.target.id)
                if inner:
                    return inner
        return None

    def elements_of(self, body: list[ast.stmt], var: str) -> list[tuple[str, list[ast.expr]]]:
        """For a loop frontend/literal_loops.py made of `for v in (a, b)`: each name v bound only by its
        element pick (`v = (a, b)[var]`) with its elements, so each copy of the body can read the element
        itself (docs/language.md)."""
        out = []
        for s in ast.walk(ast.Module(body, [])):
            if isinstance(s, ast.Assign) and isinstance(s.value, ast.Subscript) \
                    and isinstance(s.value.value, ast.Tuple) and isinstance(s.value.slice, ast.Name) \
                    and s.value.slice.id == var:
                name = s.targets[0].id
                stores = sum(1 for n in ast.walk(ast.Module(body, [])) if isinstance(n, ast.Name) and n.id == name
                             and not isinstance(n.ctx, ast.Load))
                if stores == 1:
                    out.append((name, s.value.value.elts))
        return out

    # -- statements --------------------------------------------------------------------------------------------
    def block(self, stmts: list[ast.stmt], env: dict[str, int]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for s in stmts:
            out += self.stmt(s, env)
        return out

    def stmt(self, s: ast.stmt, env: dict[str, int]) -> list[ast.stmt]:
        if isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None and self.is_local_call(s.value):
            name = (s.targets[0] if isinstance(s, ast.Assign) else s.target).id
            shape, dtype = self.arrays[name]
            zero = ast.Constant(0.0) if dtype == "weak" else \
                ast.Call(ast.Name(f"{LOCAL_ARRAY}as_{dtype}", ast.Load()), [ast.Constant(0)], [])
            return [ast.copy_location(ast.Assign([ast.Name(element(name, k), ast.Store())], copy.deepcopy(zero)), s)
                    for k in np.ndindex(*shape)]
        if isinstance(s, ast.If):
            s.test = self.expr(s.test, env)
            taken = self.fold(s.test)
            if taken is not None:
                return self.block(s.body if taken else s.orelse, env)
            s.body, s.orelse = self.block(s.body, dict(env)), self.block(s.orelse, dict(env))
            if not s.body:
                s.body = [ast.copy_location(ast.Pass(), s)]
            return [s]
        if isinstance(s, ast.For):
            return self.loop(s, env)
        if isinstance(s, ast.While):
            s.test = self.expr(s.test, env)
            s.body, s.orelse = self.block(s.body, dict(env)), self.block(s.orelse, dict(env))
            return [s]
        self.unpack_row(s)
        out = _Rewrite(self, env).visit(s)
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            t = s.targets[0]
            pairs = [(t, out.value)] if isinstance(t, ast.Name) else list(zip(t.elts, out.value.elts)) \
                if isinstance(t, ast.Tuple) and isinstance(out.value, ast.Tuple) else []
            for name, v in pairs:  # `a, b = E[q]` unpacked: each name may fold inside indices as `a = E[q][0]`
                if isinstance(name, ast.Name) and self.stores.get(name.id) == 1:
                    value = self.fold(self.expr(copy.deepcopy(v), _with_consts(env)))
                    if type(value) is int:
                        env[_CONST + name.id] = value
        return [out]

    def unpack_row(self, s: ast.stmt) -> None:
        """`a, b = E[q]` with every row of E at that depth of length 2 → `a, b = E[q][0], E[q][1]`, so each
        element folds; rows of other lengths keep the error that a row is not a number."""
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Tuple)
                and isinstance(s.value, ast.Subscript)):
            return
        base, index = _chain(s.value)
        table = self.table(base.id) if isinstance(base, ast.Name) else None
        if table is None:
            return
        rows = [table]
        for _ in index:
            rows = [x for r in rows if isinstance(r, tuple) for x in r]
        n = len(s.targets[0].elts)
        if rows and all(isinstance(r, tuple) and len(r) == n for r in rows):
            s.value = ast.copy_location(ast.Tuple([ast.copy_location(
                ast.Subscript(copy.deepcopy(s.value), ast.Constant(k), ast.Load()), s.value) for k in range(n)],
                ast.Load()), s.value)

    def loop(self, s: ast.For, env: dict[str, int]) -> list[ast.stmt]:
        if isinstance(s.iter, ast.Name) and (s.iter.id in self.arrays or self.table(s.iter.id) is not None):
            name = s.iter.id
            self.fail(s.iter, f"a loop over '{name}' itself is not supported",
                      f"write 'for q in range(len({name})):' and index {name}[q] (the loop is unrolled)")
        s.iter = self.expr(s.iter, env)
        var = s.target.id if isinstance(s.target, ast.Name) else None
        inner = {k: v for k, v in env.items() if k != var}
        what = self.uses_index_by(s.body, var) if var is not None else None
        if what is None:
            s.body, s.orelse = self.block(s.body, inner), self.block(s.orelse, env)
            return [s]
        it = s.iter
        bounds = [self.fold(a) for a in it.args] if isinstance(it, ast.Call) and not it.keywords else [None]
        if not 1 <= len(bounds) <= 3 or any(type(b) is not int for b in bounds) or (len(bounds) == 3 and not bounds[2]):
            self.fail(it, f"this loop indexes {what} by '{var}', so it is unrolled, which needs constant bounds: "
                          f"{ast.unparse(it)} is not", _INDEXING if not what.startswith("vector") else _VECTOR)
        values = range(*bounds)
        if len(values) > MAX_UNROLL:
            self.fail(it, f"this loop indexes {what} by '{var}', so it is unrolled; "
                          f"{len(values)} iterations is too many (at most {MAX_UNROLL})",
                      "index by a smaller loop, or keep the values in an array argument")
        if s.orelse:
            self.fail(s, "'for ... else' over an unrolled loop is not supported")
        picked = self.elements_of(s.body, var)
        # a name read only in this loop is read nowhere once replaced: its binding goes too (an array's or a
        # function's would be refused as a value)
        unread = {name for name, _ in picked if _reads(s.body, name) == self.reads.get(name, 0)}
        out: list[ast.stmt] = []
        for v in values:
            body = copy.deepcopy(s.body)
            for name, elements in picked:  # its element everywhere in this copy (frontend/literal_loops.py)
                body = _Substitute(name, elements[v], var if name in unread else None).block(body)
            out += self.block(body, {**env, var: v})
        if values and var in self.read_after:
            # read where no loop rebinds it: after the loop it holds its last value, as in Python (frontend/jumps.py's
            # `if brk: var = atbrk`, after this, restores its value at a break); until session 57 it kept the value
            # it had before the loop, a silently wrong result
            out.append(ast.copy_location(ast.Assign([ast.Name(var, ast.Store())], ast.Constant(values[-1])), s))
        return out

    # -- expressions -------------------------------------------------------------------------------------------
    def expr(self, e: ast.expr, env: dict[str, int]) -> ast.expr:
        return _Rewrite(self, env).visit(e)

    def fold(self, e: ast.expr) -> Any:
        """The constant value of an (already rewritten) expression, or None."""
        if isinstance(e, ast.Constant) and isinstance(e.value, (bool, int, float)):
            return e.value
        if isinstance(e, ast.Name) and e.id not in self.local_names:
            v = self.lookup(e.id)
            if isinstance(v, (np.integer, np.floating)):
                v = v.item()
            return v if isinstance(v, (bool, int, float)) else None
        if isinstance(e, ast.UnaryOp):
            x = self.fold(e.operand)
            if x is None or (isinstance(e.op, ast.Invert) and type(x) is not int):
                return None
            return _FOLD_UNARY[type(e.op)](x)
        if isinstance(e, ast.BinOp) and type(e.op) in _FOLD_BIN:
            a, b = self.fold(e.left), self.fold(e.right)
            if type(a) is not int or type(b) is not int or (isinstance(e.op, (ast.FloorDiv, ast.Mod)) and b == 0):
                return None
            return _FOLD_BIN[type(e.op)](a, b)
        if isinstance(e, ast.Compare):
            vals = [self.fold(x) for x in (e.left, *e.comparators)]
            if any(type(v) is not int for v in vals):
                return None
            return all(_FOLD_CMP[type(op)](a, b) for op, a, b in zip(e.ops, vals, vals[1:]))
        if isinstance(e, ast.BoolOp):
            vals = [self.fold(x) for x in e.values]
            if any(type(v) is not bool for v in vals):
                return None
            return all(vals) if isinstance(e.op, ast.And) else any(vals)
        if isinstance(e, ast.Call) and not e.keywords and e.args and self.resolve(e.func) in _FOLD_CALLS:
            vals = [self.fold(x) for x in e.args]
            if any(type(v) is not int for v in vals) or (len(vals) > 1) != (self.resolve(e.func) is not abs):
                return None
            return self.resolve(e.func)(*vals)
        return None

    def index(self, sub: ast.Subscript, index: list[ast.expr], env: dict[str, int], what: str,
              shape: tuple[int, ...] | None) -> tuple[int, ...]:
        out = []
        for k, i in enumerate(index):
            if isinstance(i, ast.Slice):
                self.fail(sub, f"{what} cannot be sliced", "index one element at a time")
            v = self.fold(self.expr(i, _with_consts(env)))
            if type(v) is not int:
                bound = self.stores.get(i.id, 0) if isinstance(i, ast.Name) else 0
                self.fail(sub, f"'{ast.unparse(sub)}': the index {ast.unparse(i)} into {what} is not a constant",
                          _INDEXING + (f"; a local assigned once from constants folds too, and '{i.id}' is "
                                       f"bound {bound} times" if bound > 1 else "")
                          + (_DATA_INDEX if any(isinstance(n, ast.Subscript) for n in ast.walk(i)) else ""))
            if shape is not None and not 0 <= v < shape[k]:
                self.fail(sub, f"'{ast.unparse(sub)}': index {v} is out of range for {what} "
                               f"(shape {shape})", "indices run from 0 to the size minus one")
            out.append(v)
        return tuple(out)


class _Rewrite(ast.NodeTransformer):
    def __init__(self, un: Unroller, env: dict[str, int]):
        self.un = un
        self.env = env

    def visit_Name(self, e: ast.Name) -> ast.AST:
        if isinstance(e.ctx, ast.Load) and e.id in self.env:
            return ast.copy_location(ast.Constant(self.env[e.id]), e)
        if e.id in self.un.arrays:
            self.un.fail(e, f"local array '{e.id}' is used whole; only its elements can be read, written or passed",
                         f"index it: {e.id}[k]")
        if isinstance(e.ctx, ast.Load) and self.un.table(e.id) is not None:
            self.un.fail(e, f"constant table '{e.id}' is used whole; only its elements are numbers",
                         f"index it: {e.id}[k]")
        return e

    def visit_Subscript(self, e: ast.Subscript) -> ast.AST:
        if isinstance(e.value, ast.Tuple) and isinstance(e.ctx, ast.Load):  # a literal loop's element pick
            k = self.un.fold(self.visit(e.slice))
            if type(k) is int and 0 <= k < len(e.value.elts):
                return self.visit(copy.deepcopy(e.value.elts[k]))
        base, index = _chain(e)
        if isinstance(base, ast.Name) and base.id in self.un.arrays:
            shape, _ = self.un.arrays[base.id]
            if len(index) != len(shape):
                self.un.fail(e, f"'{ast.unparse(e)}': local array '{base.id}' has {len(shape)} "
                                f"dimension{'s' * (len(shape) > 1)}", "give one index per dimension")
            k = self.un.index(e, index, self.env, f"local array '{base.id}'", shape)
            return ast.copy_location(ast.Name(element(base.id, k), e.ctx), e)
        if isinstance(base, ast.Name) and isinstance(e.ctx, ast.Load) and self.un.table(base.id) is not None:
            table = self.un.table(base.id)
            self.un.check_table(base.id, table, e)
            k = self.un.index(e, index, self.env, f"constant table '{base.id}'", None)
            v = table
            for n, j in enumerate(k):
                if not isinstance(v, tuple) or not 0 <= j < len(v):
                    self.un.fail(e, f"'{ast.unparse(e)}': index {j} is out of range for constant table "
                                    f"'{base.id}'" if isinstance(v, tuple) else
                                    f"'{ast.unparse(e)}': constant table '{base.id}' has {n} dimension(s)")
                v = v[j]
            if isinstance(v, tuple):
                self.un.fail(e, f"'{ast.unparse(e)}' is a row of constant table '{base.id}', not a number",
                             "index it fully: E[q][0] or E[q, 0]")
            if isinstance(v, (np.integer, np.floating)):
                v = v.item()
            return ast.copy_location(ast.Constant(v), e)
        if self.un.is_vector(e.value) and not (isinstance(e.slice, ast.Constant) and type(e.slice.value) is int):
            # `v[k]` in a copy of an unrolled loop: the component a constant, for frontend/vectors.py
            k = self.un.fold(self.un.expr(copy.deepcopy(e.slice), _with_consts(self.env)))
            e = self.generic_visit(e)
            if type(k) is int:
                e.slice = ast.copy_location(ast.Constant(k), e.slice)
            return e
        if isinstance(base, ast.Name) and base.id not in self.un.local_names and isinstance(e.ctx, ast.Store) \
                and self.un.table(base.id) is not None:
            self.un.fail(e, f"constant table '{base.id}' cannot be written",
                         "declare a local array with gk.local(shape, dtype) for per-thread storage")
        return self.generic_visit(e)

    def visit_Call(self, e: ast.Call) -> ast.AST:
        fn = self.un.resolve(e.func)
        if fn is gk.local:
            self.un.fail(e, "gk.local(...) declares a local array: it is assigned to a name on its own",
                         "write 'f = gk.local((9,), gk.float64)' as a statement")
        if fn is len and len(e.args) == 1 and isinstance(e.args[0], ast.Name):
            name = e.args[0].id
            if name in self.un.arrays:
                return ast.copy_location(ast.Constant(self.un.arrays[name][0][0]), e)
            table = self.un.table(name)
            if table is not None:
                self.un.check_table(name, table, e)
                return ast.copy_location(ast.Constant(len(table)), e)
        return self.generic_visit(e)


class _Substitute(ast.NodeTransformer):
    """Every read of `name` replaced by a copy of `value`; with `index`, its pick `name = (...)[index]` dropped."""

    def __init__(self, name: str, value: ast.expr, index: str | None):
        self.name, self.value, self.index = name, value, index

    def visit_Name(self, e: ast.Name) -> ast.AST:
        if e.id == self.name and isinstance(e.ctx, ast.Load):
            return ast.copy_location(copy.deepcopy(self.value), e)
        return e

    def visit_Assign(self, s: ast.Assign) -> ast.AST | None:
        v = s.value
        if self.index is not None and isinstance(s.targets[0], ast.Name) and s.targets[0].id == self.name \
                and isinstance(v, ast.Subscript) and isinstance(v.value, ast.Tuple) \
                and isinstance(v.slice, ast.Name) and v.slice.id == self.index:
            return None
        return self.generic_visit(s)

    def generic_visit(self, node: ast.AST) -> ast.AST:
        node = super().generic_visit(node)
        if isinstance(node, (ast.If, ast.For, ast.While)) and not node.body:  # left empty by a dropped pick
            node.body = [ast.copy_location(ast.Pass(), node)]
        return node

    def block(self, body: list[ast.stmt]) -> list[ast.stmt]:
        return [y for y in (self.visit(x) for x in body) if y is not None]


def _with_consts(env: dict[str, int]) -> dict[str, int]:
    """`env` with the locals assigned once from constants visible by name (inside an index)."""
    return {**env, **{k[len(_CONST):]: v for k, v in env.items() if k.startswith(_CONST)}}


def _reads(body: list[ast.stmt] | ast.AST, name: str) -> int:
    nodes = ast.walk(ast.Module(body, [])) if isinstance(body, list) else ast.walk(body)
    return sum(1 for n in nodes if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load))


def _read_outside_own_loops(body: list[ast.stmt], bound: frozenset[str] = frozenset()) -> set[str]:
    """The names read somewhere no enclosing `for` loop binds them as its variable: where a loop variable's value
    after its loop may be seen (inside a loop binding it, it is rebound before)."""
    out: set[str] = set()
    for s in body:
        if isinstance(s, ast.For):
            inner = bound | {s.target.id} if isinstance(s.target, ast.Name) else bound
            out |= _read_outside_own_loops(s.body, inner) | _read_outside_own_loops(s.orelse, bound)
            nodes = [s.iter]
        elif isinstance(s, (ast.If, ast.While)):
            out |= _read_outside_own_loops(s.body, bound) | _read_outside_own_loops(s.orelse, bound)
            nodes = [s.test]
        else:
            nodes = [s]
        out |= {n.id for e in nodes for n in ast.walk(e) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                and n.id not in bound}
    return out


def uses_locals(tree: ast.FunctionDef, resolve: Callable[[ast.expr], Any], lookup: Callable[[str], Any],
                local_names: set[str], is_vector: Callable[[ast.expr], bool] | None = None) -> bool:
    for n in ast.walk(tree):
        if is_vector is not None and isinstance(n, ast.Subscript) and is_vector(n.value) \
                and not (isinstance(n.slice, ast.Constant) and type(n.slice.value) is int):
            return True  # a vector's component named by an expression (a loop variable)
        if isinstance(n, ast.Call) and resolve(n.func) is gk.local:
            return True
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Tuple):
            return True  # a literal loop's element pick (frontend/literal_loops.py)
        if isinstance(n, ast.Name) and n.id not in local_names and \
                isinstance(lookup(n.id), (tuple, list, np.ndarray)):
            return True
    return False


def unroll(tree: ast.FunctionDef, lookup: Callable[[str], Any], resolve: Callable[[ast.expr], Any],
           fail: Callable[..., Any], local_names: set[str],
           is_vector: Callable[[ast.expr], bool] | None = None) -> ast.FunctionDef:
    """`tree` with its local arrays and tables as scalars and literals, and the loops whose variable names a
    vector's component unrolled (the same tree when it uses none of these)."""
    if not uses_locals(tree, resolve, lookup, local_names, is_vector):
        return tree
    tree = copy.deepcopy(tree)
    un = Unroller(lookup, resolve, fail, local_names, is_vector)
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            un.reads[n.id] = un.reads.get(n.id, 0) + 1
        elif isinstance(n, ast.Name):
            un.stores[n.id] = un.stores.get(n.id, 0) + 1
    un.read_after = _read_outside_own_loops(tree.body)
    un.collect(tree)
    tree.body = un.block(tree.body, {})
    ast.fix_missing_locations(tree)
    return tree
