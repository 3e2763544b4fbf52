"""`frac, whole = math.modf(x)` (also `np.modf`), C's modf as QMCPACK's
B-spline functors split a scaled distance (session 57, docs/kernel-language.md
"Tenth round"), rewritten in the Python AST before anything else reads it:

    t, ip = math.modf(x)      →      m = x
                                     ip = floor(m) if m >= 0 else -floor(-m)
                                     t = m - ip

`m` is a reserved temporary, so `x` is evaluated once and before either
name is bound (`r, ip = math.modf(r)` reads the old `r`). The whole part
truncates toward zero and keeps `x`'s float type, as C's does; the
fraction has `x`'s sign. Both are exact for every finite `x` (floor is exact,
and so is the subtraction of a float's integral part). The derivatives follow
from the formulas: 1 for the fraction, 0 for the whole part (floor's
derivative, [shadows and modes](shadows-and-modes.md#derivatives-at-kinks)).
Where they differ from C: `modf(±inf)` is `(nan, ±inf)` here, `(±0, ±inf)`
in C. `math.modf(x)` used as one value is refused by the lowerer (a call it
does not know), its hint the unpacking.
"""

from __future__ import annotations

import ast
import copy
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..ir.names import RESERVED

FLOOR = RESERVED + "modf_floor"
NAMESPACE = {FLOOR: math.floor}
_MODF = (id(math.modf), id(np.modf))


def _floor(e: ast.expr) -> ast.expr:
    return ast.Call(func=ast.Name(id=FLOOR, ctx=ast.Load()), args=[e], keywords=[])


def _name(n: str) -> ast.Name:
    return ast.Name(id=n, ctx=ast.Load())


def _rewrite(s: ast.Assign, resolve: Callable[[ast.expr], Any], numbered: Callable[[str], str]) -> list[ast.stmt]:
    target, value = s.targets[0], s.value
    m = numbered("modf")
    frac, whole = target.elts
    truncated = ast.IfExp(test=ast.Compare(left=_name(m), ops=[ast.GtE()], comparators=[ast.Constant(0.0)]),
                          body=_floor(_name(m)),
                          orelse=ast.UnaryOp(op=ast.USub(), operand=_floor(ast.UnaryOp(op=ast.USub(),
                                                                                       operand=_name(m)))))
    out = [ast.Assign(targets=[ast.Name(id=m, ctx=ast.Store())], value=value.args[0]),
           ast.Assign(targets=[whole], value=truncated),
           ast.Assign(targets=[frac], value=ast.BinOp(left=_name(m), op=ast.Sub(), right=_load(whole)))]
    return [ast.fix_missing_locations(ast.copy_location(n, s)) for n in out]


def _load(target: ast.expr) -> ast.expr:
    """The whole part as the fraction's formula reads it back: the name (or array element) just bound."""
    return ast.parse(ast.unparse(target), mode="eval").body


def _is_modf(s: ast.stmt, resolve: Callable[[ast.expr], Any]) -> bool:
    return (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Tuple)
            and len(s.targets[0].elts) == 2 and isinstance(s.value, ast.Call) and len(s.value.args) == 1
            and not s.value.keywords and id(resolve(s.value.func)) in _MODF)


def lower_modf(tree: ast.FunctionDef, resolve: Callable[[ast.expr], Any],
               numbered: Callable[[str], str]) -> ast.FunctionDef:
    """The function with each `a, b = math.modf(x)` rewritten; the same tree where there is none."""
    if not any(_is_modf(s, resolve) for s in ast.walk(tree) if isinstance(s, ast.stmt)):
        return tree

    class _Rewriter(ast.NodeTransformer):
        def generic_visit(self, node):
            super().generic_visit(node)
            for field in ("body", "orelse", "finalbody"):
                block = getattr(node, field, None)
                if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                    out = []
                    for st in block:
                        out.extend(_rewrite(st, resolve, numbered) if _is_modf(st, resolve) else [st])
                    setattr(node, field, out)
            return node

    return _Rewriter().visit(copy.deepcopy(tree))
