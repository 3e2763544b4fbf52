"""Control-flow structuring and checks on freshly lowered IR: early returns
become if/else, and every local must be assigned before it is read."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import InternalError, KernelSyntaxError, Loc
from ..ir import nodes as ir
from ..ir.names import RESULT, private, shown
from ..ir.rewrite import rename_locals


@dataclass(frozen=True)
class Return(ir.Stmt):
    """A `return` before structuring; removed by `structure_returns`."""

    value: ir.Expr | None
    loc: Loc | None = None


def contains_return(body) -> bool:
    return any(isinstance(s, Return) for s in ir.walk_stmts(body))


def structure_returns(body: tuple[ir.Stmt, ...], fail, name: str) -> tuple[tuple[ir.Stmt, ...], bool]:
    """Remove `Return`s: `if c: return` + rest becomes `if c: ... else: rest`.
    A returned value becomes an assignment to RESULT."""
    returns_value = any(isinstance(s, Return) and s.value is not None for s in ir.walk_stmts(body))
    if returns_value and any(isinstance(s, Return) and s.value is None for s in ir.walk_stmts(body)):
        fail(f"'{name}' returns a value on some paths and nothing on others")

    def structure(stmts: tuple[ir.Stmt, ...]) -> tuple[tuple[ir.Stmt, ...], bool]:
        out: list[ir.Stmt] = []
        for k, s in enumerate(stmts):
            if isinstance(s, Return):
                if s.value is not None and not (isinstance(s.value, ir.Var) and s.value.name == RESULT):
                    out.append(ir.Assign(RESULT, s.value, loc=s.loc))
                return tuple(out), True
            if isinstance(s, (ir.For, ir.While)) and contains_return(s.body):
                inner = next(r for r in ir.walk_stmts(s.body) if isinstance(r, Return))
                raise InternalError("'return' inside a loop left for structuring (frontend/loop_returns.py "
                                    "lowers them)", inner.loc)
            if isinstance(s, ir.If) and contains_return(s.then + s.orelse):
                rest = stmts[k + 1:]
                then, t_ret = structure(s.then + rest)
                orelse, e_ret = structure(s.orelse + rest)
                out.append(replace(s, then=then, orelse=orelse))
                return tuple(out), t_ret and e_ret
            out.append(s)
        return tuple(out), False

    out, always = structure(body)
    if returns_value and not always:
        fail(f"'{name}' does not return a value on every path")
    return out, returns_value


def check_definite_assignment(body: tuple[ir.Stmt, ...], scalars: set[str]):
    """Every local is assigned on every path before it is read (as in C#/Java):
    both backends then agree, and no kernel reads an uninitialised register."""

    def check_expr(x: ir.Expr, defined: set[str]):
        for n in ir.walk_expr(x):
            if isinstance(n, ir.Var) and n.name not in defined:
                raise KernelSyntaxError(f"local '{shown(n.name)}' may be used before it is assigned", n.loc,
                                        hint="assign it on every path before this line "
                                             "(a loop's body may run zero times)")

    def walk(stmts, defined: set[str]) -> set[str]:
        for s in stmts:
            for x in ir.stmt_exprs(s):
                check_expr(x, defined)
            if isinstance(s, ir.Assign):
                defined = defined | {s.name}
            elif isinstance(s, ir.If):
                defined = walk(s.then, defined) & walk(s.orelse, defined)
            elif isinstance(s, ir.For):
                walk(s.body, defined | {s.var})
            elif isinstance(s, ir.While):
                walk(s.body, defined)
        return defined

    walk(body, set(scalars))


def privatize_reassigned(body: tuple[ir.Stmt, ...], params: set[str]) -> tuple[ir.Stmt, ...]:
    """Scalar parameters the kernel reassigns become per-thread locals: every
    thread starts from the launch value (`_gk_a = a` first, then `_gk_a` everywhere)."""
    if not params:
        return body
    mapping = {n: private(n) for n in sorted(params)}
    renamed = rename_locals(body, mapping)
    return tuple(ir.Assign(local, ir.Var(n, loc=body[0].loc if body else None), loc=body[0].loc if body else None)
                 for n, local in mapping.items()) + renamed
