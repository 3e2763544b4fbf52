"""Which rows a thread's atomic adds reach, relative to its own launch index (issue 18.5).

The CPU splits a parallel launch's axis 0 into chunks of consecutive threads. An atomic add whose index on
array axis 0 is `tid[0] + c`, c a constant (through locals bound only to tid[0]), lands in rows
[a + cmin, b + cmax) for a chunk running tid[0] in [a, b): chunks at least cmax - cmin threads wide that
are not neighbours never reach a common row that way. `mark_rows` records c on each such add
(`ir.AtomicAdd.row`); every other add (an index on another axis's tid, a parameter, a loop variable, a
load) keeps None. backends/numba_plan.py and numba_syntax.py read the field; ir/verify.py checks it against the index.

Sound because the form is syntactic (ir/indices.py, the recogniser every pass shares): a local counts only
if every binding of it, in the body and the interior, is tid[0] + c with one c (`i = ti + 1`), so wherever
it is read it holds that value; `+`/`-` of an integer constant keeps the form. Integer wrap-around
would need an index outside its array, which is an error (docs/launches.md), not another row.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import nodes as ir
from ..ir.indices import indices
from ..ir.rewrite import with_blocks


def mark_rows(k: ir.Kernel) -> ir.Kernel:
    """`k` with `row` set on every atomic add (body and interior) whose axis-0 index is `tid[0] + c`."""
    ix = indices(k)

    def block(body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        out = []
        for s in body:
            if isinstance(s, ir.AtomicAdd):
                s = replace(s, row=ix.offset_on(s.indices[0], 0) if s.indices else None)
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
