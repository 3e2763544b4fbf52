"""Which rows a thread's atomic adds reach, relative to its own launch index (issue 18.5).

The CPU splits a parallel launch's axis 0 into chunks of consecutive threads. An atomic add whose index on
array axis 0 is `tid[0] + c`, c a constant (through locals bound only to tid[0]), lands in rows
[a + cmin, b + cmax) for a chunk running tid[0] in [a, b): chunks at least cmax - cmin threads wide that
are not neighbours never reach a common row that way. `mark_rows` records c on each such add
(`ir.AtomicAdd.row`); every other add (an index on another axis's tid, a parameter, a loop variable, a
load) keeps None. backends/numba_cpu.py reads the field; ir/verify.py checks it against the index.

Sound because the form is syntactic: a tid alias is a local every binding of which, in the body and the
interior, is `tid[0]` or a copy of another (`kernel_aliases`; a loop variable never is one), so wherever it is
read it holds the thread's index; `+`/`-` of an integer constant keeps the form. Integer wrap-around
would need an index outside its array, which is an error (DESIGN §3), not another row.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import nodes as ir
from ..ir.ops import Op
from ..ir.rewrite import with_blocks


def row_offset(index: ir.Expr, aliases: dict[str, int]) -> int | None:
    """c when `index` is `tid[0] + c` (c a constant; names in `aliases` map to their tid axis), else None."""
    if isinstance(index, ir.Tid):
        return 0 if index.axis == 0 else None
    if isinstance(index, ir.Var):
        return 0 if aliases.get(index.name) == 0 else None
    if isinstance(index, ir.Apply) and index.op in (Op.ADD, Op.SUB) and len(index.args) == 2:
        a, b = index.args
        if _int_const(b):
            base = row_offset(a, aliases)
            return None if base is None else base + (int(b.value) if index.op is Op.ADD else -int(b.value))
        if index.op is Op.ADD and _int_const(a):
            base = row_offset(b, aliases)
            return None if base is None else base + int(a.value)
    return None


def _int_const(e: ir.Expr) -> bool:
    return isinstance(e, ir.Const) and e.type is not None and e.type.is_int and not e.type.is_bool


def kernel_aliases(k: ir.Kernel) -> dict[str, int]:
    """Locals that hold tid[0] wherever they are read: every binding of them, in the body and the interior,
    is `tid[0]` or a copy of such a local (least fixpoint, so a cycle of copies is none); a loop variable
    never is one. (A local is bound before it is read on every path: the frontend's rule.)"""
    bodies = k.body + (k.interior.body if k.interior is not None else ())
    binds: dict[str, list[ir.Expr | None]] = {}
    for s in ir.walk_stmts(bodies):
        if isinstance(s, ir.Assign):
            binds.setdefault(s.name, []).append(s.value)
        elif isinstance(s, ir.For):
            binds.setdefault(s.var, []).append(None)
    aliases: set[str] = set()
    while True:
        more = {n for n, vs in binds.items() if n not in aliases and all(
            isinstance(v, ir.Tid) and v.axis == 0 or isinstance(v, ir.Var) and v.name in aliases for v in vs)}
        if not more:
            return dict.fromkeys(aliases, 0)
        aliases |= more


def mark_rows(k: ir.Kernel) -> ir.Kernel:
    """`k` with `row` set on every atomic add (body and interior) whose axis-0 index is `tid[0] + c`."""
    aliases = kernel_aliases(k)

    def block(body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        out = []
        for s in body:
            if isinstance(s, ir.AtomicAdd):
                s = replace(s, row=row_offset(s.indices[0], aliases) if s.indices else None)
            out.append(with_blocks(s, block))
        return tuple(out)

    interior = k.interior and replace(k.interior, body=block(k.interior.body))
    return replace(k, body=block(k.body), interior=interior)


def row_spans(k: ir.Kernel, arrays) -> dict[str, tuple[int, int] | None]:
    """For each array in `arrays`: (cmin, cmax) over its marked adds, None when it has none."""
    spans: dict[str, tuple[int, int] | None] = {a: None for a in arrays}
    bodies = k.body + (k.interior.body if k.interior is not None else ())
    for s in ir.walk_stmts(bodies):
        if isinstance(s, ir.AtomicAdd) and s.array in spans and s.row is not None:
            lo, hi = spans[s.array] or (s.row, s.row)
            spans[s.array] = (min(lo, s.row), max(hi, s.row))
    return spans
