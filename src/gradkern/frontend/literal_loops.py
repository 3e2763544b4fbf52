"""`for v in (a, b, c)` over a literal tuple (issue 29, item 4; docs/language.md),
rewritten in the Python AST before break/continue are lowered:

    for v in (0, x[i], n - 1):           t = x[i]
        <body>                    →      for e in range(3):
                                             v = (0, t, n - 1)[e]
                                             <body>

Python evaluates the tuple once, before the first iteration: an element that
may change meanwhile (it reads an array or a local, or calls something) is
evaluated into a temporary `t` first, in order; one that cannot (numbers,
parameters and globals the kernel never assigns, their `.shape[k]`, and
arithmetic of these) stays as written, so the analyses see `u[i + 1]`, not a
local. The range loop is an ordinary loop to frontend/jumps.py, so `break`,
`continue` and `else` keep Python's meaning, and frontend/unroll.py unrolls
it (its body indexes a literal tuple by `e`): each copy binds `v` to its
element, which also replaces `v` in the copy when `v` is assigned nowhere
else, so `for kr in (0, 1): a[i + kr]` reads `a[i + 0]` and `a[i + 1]`.
`for p, q in ((0, 1), (1, 0))` binds each name to its component the same way.

A loop that may `break`, where `v` is read after it, also binds `v` to the
first element before it (its first iteration does anyway): jumps.py guards
each iteration by the break flag, and the definite-assignment check must
still see `v` bound after a loop of one or more elements, as Python does.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from typing import Any

_STABLE_NODES = (ast.Constant, ast.Name, ast.Attribute, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp,
                 ast.IfExp, ast.Subscript, ast.Load, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)


def _breaks(body: list[ast.stmt]) -> bool:
    """Whether a loop body holds a `break` of its own loop (not of a nested one)."""
    for s in body:
        if isinstance(s, ast.Break):
            return True
        if isinstance(s, (ast.If, ast.For, ast.While)):
            if _breaks(s.orelse) or (isinstance(s, ast.If) and _breaks(s.body)):
                return True
    return False


def uses_literal_loops(tree: ast.FunctionDef) -> bool:
    return any(isinstance(n, ast.For) and isinstance(n.iter, (ast.Tuple, ast.List)) for n in ast.walk(tree))


class _Rewriter:
    def __init__(self, tree: ast.FunctionDef, new_name: Callable[[str], str], fail: Callable[..., Any]):
        self.new_name = new_name
        self.fail = fail
        self.assigned = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        loads: dict[str, int] = {}
        for n in ast.walk(tree):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                loads[n.id] = loads.get(n.id, 0) + 1
        self.loads = loads

    def stable(self, e: ast.expr) -> bool:
        """Whether `e` has one value for the whole loop: no array element, no local, no call."""
        for n in ast.walk(e):
            if not isinstance(n, _STABLE_NODES):
                return False
            if isinstance(n, ast.Name) and n.id in self.assigned:
                return False
            if isinstance(n, ast.Subscript) and not (isinstance(n.value, ast.Attribute) and n.value.attr == "shape"):
                return False  # an array element: the body may write it
        return True

    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for s in stmts:
            for field in ("body", "orelse"):
                if isinstance(getattr(s, field, None), list):
                    setattr(s, field, self.block(getattr(s, field)))
            if isinstance(s, ast.For) and isinstance(s.iter, (ast.Tuple, ast.List)):
                out += self.loop(s)
            else:
                out.append(s)
        return out

    def loop(self, s: ast.For) -> list[ast.stmt]:
        it = s.iter
        spelled = ", ".join(ast.unparse(e) for e in it.elts) + ("," if len(it.elts) == 1 else "")
        if isinstance(it, ast.List):
            self.fail(it, "a kernel cannot loop over a list", f"loop over a tuple: 'for ... in ({spelled}):'")
        names = self.names(s.target, it)
        pre: list[ast.stmt] = []
        columns: list[list[ast.expr]] = [[] for _ in names]  # per name, its value in each iteration
        for e in it.elts:
            parts = e.elts if len(names) > 1 else [e]
            for column, x in zip(columns, parts):
                if isinstance(x, (ast.Starred, ast.Tuple, ast.List, ast.Set, ast.Dict)):
                    self.fail(x, f"a loop over a tuple takes numbers, names or scalar expressions, not "
                                 f"'{ast.unparse(x)}'", "loop over a tuple of numbers, e.g. 'for kr in (0, 1):'")
                if self.stable(x):
                    column.append(x)
                    continue
                t = self.new_name("tup")  # evaluated before the loop, in order, as Python does
                pre.append(ast.copy_location(ast.Assign([ast.Name(t, ast.Store())], x), x))
                column.append(ast.copy_location(ast.Name(t, ast.Load()), x))
        index = self.new_name("elt")
        binds = []
        for name, column in zip(names, columns):
            pick = ast.copy_location(ast.Subscript(ast.Tuple(column, ast.Load()), ast.Name(index, ast.Load()),
                                                   ast.Load()), it)
            binds.append(ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], pick), s))
            if it.elts and _breaks(s.body) and self.read_outside(name, s):  # bound after it whatever `break` does
                first = ast.Assign([ast.Name(name, ast.Store())], copy.deepcopy(column[0]))
                pre.append(ast.copy_location(first, s))
        count = ast.Call(ast.Name("range", ast.Load()), [ast.Constant(len(it.elts))], [])
        loop = ast.copy_location(ast.For(ast.Name(index, ast.Store()), ast.copy_location(count, it),
                                         [*binds, *s.body], s.orelse, None), s)
        return [*pre, loop]

    def read_outside(self, name: str, s: ast.For) -> bool:
        """Whether the function reads `name` outside loop `s`'s body."""
        def reads(node: ast.AST) -> int:
            return sum(1 for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == name
                       and isinstance(n.ctx, ast.Load))
        return self.loads.get(name, 0) > sum(reads(x) for x in s.body)

    def names(self, target: ast.expr, it: ast.Tuple) -> list[str]:
        """The names a loop over a tuple binds: one, or one per component of tuple elements (`for p, q in
        ((0, 1), (1, 0))`)."""
        if isinstance(target, ast.Name):
            return [target.id]
        parts = target.elts if isinstance(target, ast.Tuple) else []
        if not parts or not all(isinstance(t, ast.Name) for t in parts):
            self.fail(target, f"a loop over a tuple binds a name or a tuple of names, not '{ast.unparse(target)}'",
                      "write 'for v in (a, b, c):' or 'for p, q in ((0, 1), (1, 0)):'")
        spelled = ", ".join(t.id for t in parts)
        for e in it.elts:
            if not isinstance(e, ast.Tuple) or len(e.elts) != len(parts):
                self.fail(e, f"'{spelled}' unpacks {len(parts)} values, so every element is a tuple of "
                             f"{len(parts)}, but not '{ast.unparse(e)}'",
                          f"give each element one value per name: ({', '.join(f'{t.id}0' for t in parts)})")
        return [t.id for t in parts]


def lower_literal_loops(tree: ast.FunctionDef, new_name: Callable[[str], str],
                        fail: Callable[..., Any]) -> ast.FunctionDef:
    """`tree` with its loops over literal tuples as range loops that pick their element (the same tree when it
    has none; otherwise a copy)."""
    if not uses_literal_loops(tree):
        return tree
    tree = copy.deepcopy(tree)
    tree.body = _Rewriter(tree, new_name, fail).block(tree.body)
    ast.fix_missing_locations(tree)
    return tree
