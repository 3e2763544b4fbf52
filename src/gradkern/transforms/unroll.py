"""Unrolling of short constant loops whose variable indexes arrays (docs/adjoint-forms.md).

`for ip in range(2): s += x[i + ip, j]` reads x at tid + 0 and tid + 1: a stencil. Unrolled, each copy
of the body has `ip` replaced by its value, so every access is a constant offset of the thread index,
which the access analysis (thread-own slabs), the gather (stencil offsets), the race and bounds proofs and
the CPU's private rows all recognise (ir/indices.py); as a loop, the reverse would scatter with atomics.
The reverse mode's pipeline unrolls the kernel it differentiates (pipeline.py, stage "unroll"); the primal
launch keeps its loop.

A loop is unrolled when its bounds fold to integer constants, it runs 1 to MAX_TRIPS iterations, its
variable appears in an index position of an array access in its body that is `tid + c` once the variable
is a constant (`x[i + ip]`, but not the flattened row `c[i * 4 + k]`, which the access analysis keeps as
the thread's own only while k is a loop variable), the body binds no variable of that name, and the
copies stay within MAX_STATEMENTS statements. The meaning is the loop's: each copy is one iteration
in order (the IR has no `break`: the frontend lowers it to flags), and where the variable is read after
the loop it is assigned its last value, as the loop leaves it.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import nodes as ir
from ..ir.indices import Indices, indices
from ..ir.rewrite import map_expr, with_blocks, with_exprs
from ..ir.types import I64
from .simplify import simplify_expr

# A gather replays a neighbour's reverse once per offset: a loop of more iterations than this is left a
# loop (its adjoint then takes atomics) rather than growing the gather kernel past what it gains.
MAX_TRIPS = 8
MAX_STATEMENTS = 256  # statements of all the copies of one loop, nested ones included


def _constant(e: ir.Expr) -> int | None:
    e = simplify_expr(e)
    if isinstance(e, ir.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return int(e.value)
    return None


def _offsets(body: tuple[ir.Stmt, ...], var: str, ix: Indices) -> bool:
    """Whether some index position of an array access in `body` reads `var` and is `tid + c` once `var` is
    a constant (`x[i + ip]`; not `c[i * 4 + k]`, a flattened row the access analysis keeps as one)."""
    zero = ir.Const(0, type=I64)

    def offset(indices) -> bool:
        return any(any(isinstance(x, ir.Var) and x.name == var for x in ir.walk_expr(i))
                   and ix.offset(_substituted_expr(i, var, zero)) is not None for i in indices)
    for s in ir.walk_stmts(body):
        if isinstance(s, (ir.Store, ir.AtomicAdd)) and offset(s.indices):
            return True
    return any(isinstance(e, ir.Load) and offset(e.indices) for e in ir.all_exprs(body))


def _binds(body: tuple[ir.Stmt, ...], var: str) -> bool:
    return any(isinstance(s, ir.Assign) and s.name == var or isinstance(s, ir.For) and s.var == var
               for s in ir.walk_stmts(body))


def _substituted_expr(e: ir.Expr, var: str, value: ir.Const) -> ir.Expr:
    return map_expr(e, pre=lambda x: value if isinstance(x, ir.Var) and x.name == var else None)


def _substituted(body: tuple[ir.Stmt, ...], var: str, value: ir.Const) -> tuple[ir.Stmt, ...]:
    def block(b: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        return tuple(with_blocks(with_exprs(s, lambda e: _substituted_expr(e, var, value)), block) for s in b)
    return block(body)


def _reads_outside_loops(body: tuple[ir.Stmt, ...], loops: frozenset[str] = frozenset()) -> set[str]:
    """Names read somewhere outside the body of every loop over them (a loop's bounds are outside it): a
    loop over such a name leaves a value that may be read, which an unrolled copy must leave too."""
    out: set[str] = set()
    for s in body:
        for e in ir.stmt_exprs(s):
            out |= {x.name for x in ir.walk_expr(e) if isinstance(x, ir.Var) and x.name not in loops}
        inner = loops | {s.var} if isinstance(s, ir.For) else loops
        for b in ir.blocks(s):
            out |= _reads_outside_loops(b, inner)
    return out


def unroll_offset_loops(k: ir.Kernel) -> ir.Kernel:
    """`k` with its short constant loops whose variable indexes arrays unrolled (module doc); `k` itself
    when there is none."""
    ix = indices(k)
    outside = _reads_outside_loops(k.body)
    changed = False

    def block(body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        nonlocal changed
        out: list[ir.Stmt] = []
        for s in body:
            after = isinstance(s, ir.For) and s.var in outside
            s = with_blocks(s, block)  # inner loops first
            if isinstance(s, ir.For):
                copies = _unrolled(s, after, ix)
                if copies is not None:
                    out.extend(copies)
                    changed = True
                    continue
            out.append(s)
        return tuple(out)

    body = block(k.body)
    return replace(k, body=body) if changed else k


def _unrolled(s: ir.For, read_after: bool, ix: Indices) -> list[ir.Stmt] | None:
    """The copies of loop `s`'s body, one per iteration, or None when it is not to be unrolled;
    `read_after`: whether its variable is read outside it (then assigned its last value)."""
    bounds = [_constant(x) for x in (s.start, s.stop, s.step)]
    if None in bounds or bounds[2] == 0:
        return None
    values = range(*bounds)
    size = sum(1 for _ in ir.walk_stmts(s.body))
    if not 1 <= len(values) <= MAX_TRIPS or len(values) * size > MAX_STATEMENTS \
            or not _offsets(s.body, s.var, ix) or _binds(s.body, s.var):
        return None
    out: list[ir.Stmt] = []
    for v in values:
        out.extend(_substituted(s.body, s.var, ir.Const(v, type=I64, loc=s.loc)))
    if read_after:  # after the loop the variable holds its last value
        out.append(ir.Assign(s.var, ir.Const(values[-1], type=I64, loc=s.loc), loc=s.loc))
    return out
