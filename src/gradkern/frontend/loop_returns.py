"""`return` inside a loop, lowered in the Python AST to a flag and `break`s
before frontend/jumps.py runs, so the IR keeps structured loops only and every
mode and backend takes it (docs/language.md, "return inside a loop"):

    for k in range(n):                   ret = False; _gk_ret = False
        for j in range(m):               for k in range(n):
            if c:                            for j in range(m):
                return v                         if c:
    rest                                             _gk_ret = v; ret = True; break
                                             if ret: break
                                         if ret: return _gk_ret
                                         rest

The returned value is assigned where the `return` was (it may read the loop's
locals), then the flag leaves every enclosing loop (each `if ret: break` is an
ordinary break, which jumps.py lowers, loop `else` included: a return skips
it, as in Python), and after the outermost loop `if ret: return _gk_ret` is an
early return of the kind frontend/structure.py already turns into if/else (it
finds the value already in RESULT and assigns nothing). `_gk_ret = False`
before the loop makes RESULT defined on every path without widening its type:
bool is the bottom of the type lattice (ir/types.py's join). A kernel's
`return` carries no value: the thread ends.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from typing import Any

from ..ir.names import RESULT


def _in_loop(stmts: list[ast.stmt], depth: int = 0) -> bool:
    """Whether a `return` sits inside a loop's body among `stmts` (at `depth` loops already)."""
    for s in stmts:
        if isinstance(s, ast.Return) and depth:
            return True
        if isinstance(s, (ast.For, ast.While)):
            if _in_loop(s.body, depth + 1) or _in_loop(s.orelse, depth):
                return True
        elif isinstance(s, ast.If) and (_in_loop(s.body, depth) or _in_loop(s.orelse, depth)):
            return True
    return False


def _at(node: ast.stmt, at: ast.AST) -> ast.stmt:
    return ast.copy_location(node, at)


class _Lowering:
    def __init__(self, flag: str, is_kernel: bool, has_value: bool, fail: Callable[..., Any]):
        self.flag = flag
        self.is_kernel = is_kernel
        self.has_value = has_value
        self.fail = fail

    def set_flag(self, value: bool, at: ast.AST) -> ast.stmt:
        return _at(ast.Assign([ast.Name(self.flag, ast.Store())], ast.Constant(value)), at)

    def block(self, stmts: list[ast.stmt], depth: int) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for s in stmts:
            if isinstance(s, ast.Return) and depth:
                if (s.value is not None) != self.has_value:
                    self.fail(s, "this function returns a value on some paths and nothing on others")
                if s.value is not None:
                    if self.is_kernel:
                        self.fail(s, "a kernel cannot return a value", "store results into an array argument")
                    out.append(_at(ast.Assign([ast.Name(RESULT, ast.Store())], s.value), s))
                out += [self.set_flag(True, s), _at(ast.Break(), s)]
                break  # the rest of the block is unreachable
            if isinstance(s, ast.If):
                s.body, s.orelse = self.block(s.body, depth), self.block(s.orelse, depth)
                out.append(s)
            elif isinstance(s, (ast.For, ast.While)) and _in_loop(s.body, 1):
                s.body, s.orelse = self.block(s.body, depth + 1), self.block(s.orelse, depth)
                if depth:  # leave the enclosing loop too
                    leave: ast.stmt = _at(ast.Break(), s)
                else:
                    out.append(self.set_flag(False, s))
                    if self.has_value:
                        out.append(_at(ast.Assign([ast.Name(RESULT, ast.Store())], ast.Constant(False)), s))
                    leave = _at(ast.Return(ast.Name(RESULT, ast.Load()) if self.has_value else None), s)
                out += [s, _at(ast.If(ast.Name(self.flag, ast.Load()), [leave], []), s)]
            elif isinstance(s, (ast.For, ast.While)):
                s.body, s.orelse = self.block(s.body, depth + 1), self.block(s.orelse, depth)
                out.append(s)
            else:
                out.append(s)
        return out


def lower_loop_returns(tree: ast.FunctionDef, new_name: Callable[[str], str], fail: Callable[..., Any],
                       is_kernel: bool) -> ast.FunctionDef:
    """`tree` (a copy, or itself when no `return` is inside a loop) with those returns as a flag and breaks."""
    if not _in_loop(tree.body):
        return tree
    tree = copy.deepcopy(tree)
    # a function that returns a value anywhere must on every path (frontend/structure.py checks)
    has_value = any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(tree))
    tree.body = _Lowering(new_name("ret"), is_kernel, has_value, fail).block(tree.body, 0)
    ast.fix_missing_locations(tree)
    return tree
