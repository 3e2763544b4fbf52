"""Which names a printed thread body defines, and how often (backends/numba_loops.py):
Numba privatises a `prange` variable only where each iteration defines it before
use, refuses writes to a plain alias of the `prange` index, and its SSA
reconstruction costs time proportional to the multiply-defined names times the
function's length (docs/compile-time.md, finding 9). These rewrites keep the
operations and their order; they only choose names and prologues."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ..ir import nodes as ir
from ..ir.ops import Op
from ..ir.rewrite import rename_locals, with_blocks


def statements(body: tuple[ir.Stmt, ...]) -> int:
    return sum(1 for _ in ir.walk_stmts(body))


def defined_before_use(body: tuple[ir.Stmt, ...]) -> frozenset[str]:
    """Locals defined before any read on every path that reads them: those whose first mention, in program
    order, is an assignment at the top level of `body`, and those mentioned only inside one nested block (a
    branch, a loop body) that are so defined there (a gather's neighbour copies, each inside its own `if`:
    their locals stay single-definition, docs/compile-time.md)."""
    seen: set[str] = set()
    first: set[str] = set()
    where: dict[str, set[int]] = {}  # name -> the nested blocks mentioning it (-1: a statement's own parts)
    nested: list[tuple[ir.Stmt, ...]] = []
    for s in body:
        if isinstance(s, ir.Assign):
            reads = {e.name for e in ir.walk_expr(s.value) if isinstance(e, ir.Var)}
            seen |= reads
            if s.name not in seen:
                first.add(s.name)
            seen.add(s.name)
        else:
            for e in ir.all_exprs((s,)):
                seen |= {x.name for x in ir.walk_expr(e) if isinstance(x, ir.Var)}
            for inner in ir.walk_stmts((s,)):
                if isinstance(inner, ir.Assign):
                    seen.add(inner.name)
                elif isinstance(inner, ir.For):
                    seen.add(inner.var)
        for n in _own_mentions(s):
            where.setdefault(n, set()).add(-1)
        for blk in ir.blocks(s):
            nested.append(blk)
            for n in _mentions(blk):
                where.setdefault(n, set()).add(len(nested) - 1)
    for x, blk in enumerate(nested):
        first |= {n for n in defined_before_use(blk) if where.get(n) == {x}}
    return frozenset(first)


def _own_mentions(s: ir.Stmt) -> set[str]:
    """Names a statement reads, assigns or indexes itself (not in its nested blocks)."""
    out = {x.name for e in ir.stmt_exprs(s) for x in ir.walk_expr(e) if isinstance(x, (ir.Var,))}
    out |= {x.array for e in ir.stmt_exprs(s) for x in ir.walk_expr(e) if isinstance(x, ir.Load)}
    for attr in ("name", "var", "array"):
        if isinstance(getattr(s, attr, None), str):
            out.add(getattr(s, attr))
    return out


def _mentions(body: tuple[ir.Stmt, ...]) -> set[str]:
    return {n for s in ir.walk_stmts(body) for n in _own_mentions(s)}


def single_definitions(k: ir.Kernel) -> ir.Kernel:
    """`k` with each local that one block assigns several times at its top level, before any read there, and
    that nothing outside the block mentions, renamed at each assignment after the first (x, x__1, x__2...):
    the same operations on the same values, one definition per name. A reverse body's adjoint accumulations
    (`_gk_d_x = _gk_d_x + g`) are such names, and Numba's SSA reconstruction costs time proportional to the
    multiply-defined names times the function's length (docs/compile-time.md)."""
    taken = {p.name for p in k.params} | set(k.thread_indices)

    def fresh(body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        total = _mention_counts(body)
        taken.update(total)
        return _versioned(body, total, frozenset(k.thread_indices), taken)
    interior = k.interior if k.interior is None else replace(k.interior, body=fresh(k.interior.body))
    return replace(k, body=fresh(k.body), interior=interior)


def _mention_counts(body: tuple[ir.Stmt, ...]) -> Counter:
    return Counter(n for s in ir.walk_stmts(body) for n in _own_mentions(s))


def _versioned(body: tuple[ir.Stmt, ...], total: Counter, keep: frozenset[str], taken: set[str]
               ) -> tuple[ir.Stmt, ...]:
    body = tuple(with_blocks(s, lambda blk: _versioned(blk, total, keep, taken)) for s in body)
    assigned = Counter(s.name for s in body if isinstance(s, ir.Assign))
    if not any(c > 1 for c in assigned.values()):
        return body
    inside = _mention_counts(body)
    nested = {x.name if isinstance(x, ir.Assign) else x.var for s in body for blk in ir.blocks(s)
              for x in ir.walk_stmts(blk) if isinstance(x, (ir.Assign, ir.For))}
    first = defined_before_use(body)
    names = {n for n, c in assigned.items()
             if c > 1 and inside[n] == total[n] and n not in nested and n in first and n not in keep}
    if not names:
        return body
    current: dict[str, str] = {}
    seen: Counter = Counter()
    out = []
    for s in body:
        if current:
            target = s.name if isinstance(s, ir.Assign) else None
            s = rename_locals((s,), current)[0]
            if target is not None:
                s = replace(s, name=target)
        if isinstance(s, ir.Assign) and s.name in names:
            seen[s.name] += 1
            if seen[s.name] > 1:
                new = f"{s.name}__{seen[s.name] - 1}"
                while new in taken:
                    new += "_"
                taken.add(new)
                current[s.name] = new
                s = replace(s, name=new)
        out.append(s)
    return tuple(out)


def tid_copies_unaliased(k: ir.Kernel) -> ir.Kernel:
    """A local that takes a tid component and is bound again later (`i = tid;
    for i in range(m)`) takes int64(tid): Numba's parfor pass refuses any write
    to a plain alias of the prange index (see `NumbaSyntax.copy`)."""
    def block(body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        out = []
        for s in body:
            if isinstance(s, ir.Assign) and isinstance(s.value, ir.Tid) and s.name not in k.thread_indices:
                s = replace(s, value=ir.Apply(Op.CAST, (s.value,), type=s.value.type, loc=s.value.loc))
            out.append(with_blocks(s, block))
        return tuple(out)

    interior = k.interior and replace(k.interior, body=block(k.interior.body))
    return replace(k, body=block(k.body), interior=interior)


def floor_of(lo: ir.Expr) -> int | None:
    """The largest positive constant of a chain of `max` that is `lo` (transforms/split.py's lower bounds),
    or None: every value of lo is at least that."""
    if isinstance(lo, ir.Const) and isinstance(lo.value, int) and not isinstance(lo.value, bool):
        return lo.value if lo.value > 0 else None
    if isinstance(lo, ir.Apply) and lo.op is Op.MAX:
        found = [f for f in map(floor_of, lo.args) if f is not None]
        return max(found) if found else None
    return None
