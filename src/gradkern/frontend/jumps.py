"""`break` and `continue` (and `for`/`while ... else`), lowered in the Python
AST to flags before lowering, so the IR keeps structured loops only (issue 19,
item 2). For a loop whose body jumps:

    brk = False                          brk = False
    for k in range(a, b):                while not brk and cond:
        if not brk:                          cnt = False
            cnt = False                      <body>
            <body>                       if not brk:
    if not brk:                              <else>
        <else>

In <body>, `break` is `brk = True`, `continue` is `cnt = True`, and the statements after one that may jump run
under `if not brk` / `if not cnt` (both when it may do either). A `for` loop
still runs its remaining iterations after a break, each an `if` on the flag:
its bounds stay those the user wrote, which the analyses (races, bounds,
affine) and the reverse sweep need; the reverse replays those iterations too,
with the taped flags (a few instructions and one taped flag each: a loop of
1000 iterations left at the 10th costs 5x the primal and 7x the reverse time
of a 10-iteration loop, on the CPU backend; a taped trip count that stops the
loop would need a `For` with a run-time exit in the IR). A flag is a bool local
named by the lowerer's Namer (`_gk<n>_brk`), so it is reserved and unique.
Because the remaining iterations still run, a `for` loop's variable would end
at its last value: a `break` also keeps the variable (`atbrk = k`), restored
after the loop (`if brk: k = atbrk`), so code after the loop reads the value
it had at the break, as in Python (dead-code elimination drops both where
nothing reads it).
The analyses read `if not cnt:` as the negation of the condition that set the
flag (they follow bool locals: analysis/conditions.py, docs/bounds.md), so the
rest of a body after `if c: continue` is analysed under `not c`, as written.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from typing import Any


class _Loop:
    def __init__(self, new_name: Callable[[str], str], target: str | None = None):
        self.new_name = new_name
        self.brk: str | None = None
        self.cnt: str | None = None
        self.target = target  # a `for` loop's variable: its value at a break is kept (`at_break`)
        self.at_break: str | None = None

    def flag(self, kind: str) -> str:
        if kind == "brk":
            self.brk = self.brk or self.new_name("brk")
            return self.brk
        self.cnt = self.cnt or self.new_name("cnt")
        return self.cnt


def _name(n: str, store: bool = False) -> ast.Name:
    return ast.Name(n, ast.Store() if store else ast.Load())


def _set(n: str, value: bool, at: ast.AST) -> ast.stmt:
    return ast.copy_location(ast.Assign([_name(n, True)], ast.Constant(value)), at)


def _none_of(flags: list[str], at: ast.AST) -> ast.expr:
    """`not f1 and not f2 ...`"""
    terms = [ast.UnaryOp(ast.Not(), _name(f)) for f in flags]
    e = terms[0] if len(terms) == 1 else ast.BoolOp(ast.And(), terms)
    return ast.copy_location(e, at)


def _jumps(body: list[ast.stmt]) -> bool:
    """Whether a loop body holds a break or continue of its own loop (not of a nested one)."""
    for s in body:
        if isinstance(s, (ast.Break, ast.Continue)):
            return True
        if isinstance(s, (ast.For, ast.While)):
            if _jumps(s.orelse):
                return True
            continue
        for field in ("body", "orelse", "finalbody", "handlers"):
            if _jumps([x for x in getattr(s, field, []) or [] if isinstance(x, ast.stmt)]):
                return True
    return False


def uses_jumps(tree: ast.FunctionDef) -> bool:
    return any(isinstance(n, (ast.Break, ast.Continue)) or (isinstance(n, (ast.For, ast.While)) and n.orelse)
               for n in ast.walk(tree))


class Lowering:
    def __init__(self, new_name: Callable[[str], str], fail: Callable[..., Any]):
        self.new_name = new_name
        self.fail = fail

    def block(self, stmts: list[ast.stmt], loop: _Loop | None) -> tuple[list[ast.stmt], set[str]]:
        """The statements rewritten, and the flags (of `loop`) they may set."""
        out: list[ast.stmt] = []
        sets: set[str] = set()
        for k, s in enumerate(stmts):
            done, flags = self.stmt(s, loop)
            out += done
            if not flags:
                continue
            sets |= flags
            if isinstance(s, (ast.Break, ast.Continue)):
                break  # the rest of the block is unreachable
            rest, more = self.block(stmts[k + 1:], loop)
            if rest:
                out.append(ast.copy_location(ast.If(_none_of(sorted(flags), s), rest, []), stmts[k + 1]))
            sets |= more
            break
        return out, sets

    def stmt(self, s: ast.stmt, loop: _Loop | None) -> tuple[list[ast.stmt], set[str]]:
        if isinstance(s, (ast.Break, ast.Continue)):
            word = "break" if isinstance(s, ast.Break) else "continue"
            if loop is None:
                self.fail(s, f"'{word}' outside a loop", "'break' and 'continue' go inside 'for' or 'while' loops")
            flag = loop.flag("brk" if isinstance(s, ast.Break) else "cnt")
            if isinstance(s, ast.Break) and loop.target is not None:
                # the remaining iterations still run (as no-ops) and move the loop variable on: keep its value
                loop.at_break = loop.at_break or self.new_name("atbrk")
                keep = ast.copy_location(ast.Assign([_name(loop.at_break, True)], _name(loop.target)), s)
                return [keep, _set(flag, True, s)], {flag}
            return [_set(flag, True, s)], {flag}
        if isinstance(s, ast.If):
            s.body, a = self.block(s.body, loop)
            s.orelse, b = self.block(s.orelse, loop)
            if not s.body:
                s.body = [ast.copy_location(ast.Pass(), s)]
            return [s], a | b
        if isinstance(s, (ast.For, ast.While)):
            return self.loop(s, loop)
        return [s], set()

    def loop(self, s: ast.For | ast.While, outer: _Loop | None) -> tuple[list[ast.stmt], set[str]]:
        orelse, flags = self.block(s.orelse, outer)
        s.orelse = []
        if not _jumps(s.body):
            s.body, _ = self.block(s.body, None)  # nested loops only
            return [s, *orelse], flags
        target = s.target.id if isinstance(s, ast.For) and isinstance(s.target, ast.Name) else None
        inner = _Loop(self.new_name, target)
        body, _ = self.block(s.body, inner)
        pre: list[ast.stmt] = []
        post: list[ast.stmt] = []
        if inner.at_break:  # after the loop, the variable is what it was at the break, as in Python
            pre.append(ast.copy_location(ast.Assign([_name(inner.at_break, True)], ast.Constant(0)), s))
            post.append(ast.copy_location(ast.If(_name(inner.brk), [ast.copy_location(
                ast.Assign([_name(target, True)], _name(inner.at_break)), s)], []), s))
        if inner.cnt:
            body = [_set(inner.cnt, False, s), *body]
        if inner.brk:
            pre.append(_set(inner.brk, False, s))
            if isinstance(s, ast.While):
                s.test = ast.copy_location(ast.BoolOp(ast.And(), [_none_of([inner.brk], s), s.test]), s.test)
            else:
                body = [ast.copy_location(ast.If(_none_of([inner.brk], s), body, []), s)]
            if orelse:
                orelse = [ast.copy_location(ast.If(_none_of([inner.brk], s), orelse, []), s)]
        s.body = body
        return [*pre, s, *post, *orelse], flags


def lower_jumps(tree: ast.FunctionDef, new_name: Callable[[str], str], fail: Callable[..., Any]) -> ast.FunctionDef:
    """`tree` (a copy, or itself when it has no break, continue or loop else) with its jumps as flags."""
    if not uses_jumps(tree):
        return tree
    tree = copy.deepcopy(tree)
    tree.body, _ = Lowering(new_name, fail).block(tree.body, None)
    ast.fix_missing_locations(tree)
    return tree
