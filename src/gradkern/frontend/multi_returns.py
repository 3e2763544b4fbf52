"""Device functions that return several values (`return gx / n, gy / n`), as Warp's functions and C's
out-parameters do: the extra values become locals the caller unpacks (`px, py = flux(u, i)`).

Before lowering, each `return e0, e1, ..., ek` of a @gk.func becomes `_gk_ret_1 = e1; ...; _gk_ret_k = ek;
return e0` (the values are pure expressions, so their order is not observable), and the body starts with
`_gk_ret_j = False` so that every extra is defined on every path, a return inside a loop included (a bool widens
to the type of the values, as frontend/loop_returns.py's RESULT does). The call site (frontend/inline.py:
inline_values) binds the callee's renamed RESULT and extras to the names it unpacks into.
Documented in docs/kernel-language.md ("Device functions")."""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from typing import Any

from ..ir.names import RESULT


def extra(k: int) -> str:
    """The local holding a device function's k-th returned value (k >= 1; the 0-th is RESULT)."""
    return f"{RESULT}_{k}"


def _returns(tree: ast.FunctionDef) -> list[ast.Return]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Return) and n.value is not None]


def lower_tuple_returns(tree: ast.FunctionDef, fail: Callable[..., Any], is_kernel: bool) -> tuple[ast.FunctionDef,
                                                                                                    int]:
    """`tree` (a copy when rewritten) and how many values the function returns (1 for a number, or none)."""
    returns = _returns(tree)
    counts = {len(r.value.elts) if isinstance(r.value, ast.Tuple) else 1 for r in returns}
    if is_kernel or counts <= {1}:
        return tree, 1
    if len(counts) > 1:
        fail(next(r for r in returns if isinstance(r.value, ast.Tuple)),
             f"'{tree.name}' returns {' or '.join(str(c) for c in sorted(counts))} values on different paths",
             "return the same number of values on every path")
    n = counts.pop()
    bare = next((r for r in ast.walk(tree) if isinstance(r, ast.Return) and r.value is None), None)
    if bare is not None:  # a bare `return` beside `return a, b`: an AttributeError in the rewrite below
        fail(bare, f"'{tree.name}' returns {n} values on another path but none here",
             "return the same number of values on every path")
    tree = copy.deepcopy(tree)

    class Rewrite(ast.NodeTransformer):
        def visit_Return(self, r: ast.Return) -> Any:
            out = [ast.copy_location(ast.Assign([ast.Name(extra(k), ast.Store())], v), r)
                   for k, v in enumerate(r.value.elts[1:], start=1)]
            return out + [ast.copy_location(ast.Return(r.value.elts[0]), r)]

    tree = Rewrite().visit(tree)
    first = tree.body[0]
    doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
    init = [ast.copy_location(ast.Assign([ast.Name(extra(k), ast.Store())], ast.Constant(False)), first)
            for k in range(1, n)]
    tree.body = tree.body[:doc] + init + tree.body[doc:]
    return ast.fix_missing_locations(tree), n
