"""Thread offsets: which integer expressions are `tid[axis] + c`, c an integer constant (docs/adjoint-forms.md).

The one recogniser every pass asks (the access analysis's thread-own slabs, the gather's stencil offsets,
interior splitting's boundary tests, the CPU's private rows and the verifier's check of them), so that
they all agree on what an offset is.

Why it is sound. The form is syntactic: `tid[axis]` itself, `x + c`, `c + x` or `x - c` of such an x, or
a local every binding of which, in the body and the interior, is such an expression with the same
(axis, c) (`offset_aliases`, a least fixpoint, so a cycle of copies is none; a loop variable never is
one). A local is bound before it is read on every path (the frontend's rule), so wherever an alias is
read it holds the value of its last binding, which is tid[axis] + c of this thread. In machine integers
`x + c` wraps, but x ↦ x + c is a bijection modulo 2^w: distinct thread indices give distinct values of
tid[axis] + c, which is all that an own slab (one element per thread) needs; a value that wrapped would
also leave its array, which is an error (docs/launches.md), not another element.
"""

from __future__ import annotations

from . import nodes as ir
from .ops import Op

Offset = tuple[int, int]  # (tid axis, constant c)


def _int_const(e: ir.Expr) -> int | None:
    if isinstance(e, ir.Const) and isinstance(e.value, int) and not isinstance(e.value, bool) \
            and (e.type is None or e.type.is_int and not e.type.is_bool):
        return int(e.value)
    return None


def tid_offset(e: ir.Expr, aliases: dict[str, Offset]) -> Offset | None:
    """(axis, c) when `e` is tid[axis] + c (through the locals of `aliases`, from `offset_aliases`), else None."""
    if isinstance(e, ir.Tid):
        return (e.axis, 0)
    if isinstance(e, ir.Var):
        return aliases.get(e.name)
    if isinstance(e, ir.Apply) and e.op in (Op.ADD, Op.SUB) and len(e.args) == 2:
        a, b = e.args
        c = _int_const(b)
        if c is not None:
            base = tid_offset(a, aliases)
            return None if base is None else (base[0], base[1] + (c if e.op is Op.ADD else -c))
        c = _int_const(a)
        if e.op is Op.ADD and c is not None:
            base = tid_offset(b, aliases)
            return None if base is None else (base[0], base[1] + c)
    return None


def offset_aliases(k: ir.Kernel) -> dict[str, Offset]:
    """Locals that hold tid[axis] + c wherever they are read (module doc): every binding of them, in the
    body and the interior, is tid[axis] + c with one (axis, c), directly or through other such locals."""
    bodies = k.body + (k.interior.body if k.interior is not None else ())
    binds: dict[str, list[ir.Expr | None]] = {}
    for s in ir.walk_stmts(bodies):
        if isinstance(s, ir.Assign):
            binds.setdefault(s.name, []).append(s.value)
        elif isinstance(s, ir.For):
            binds.setdefault(s.var, []).append(None)
    aliases: dict[str, Offset] = {}
    while True:
        more = {}
        for n, values in binds.items():
            if n in aliases:
                continue
            found = {None if v is None else tid_offset(v, aliases) for v in values}
            if len(found) == 1 and None not in found:
                more[n] = found.pop()
        if not more:
            return aliases
        aliases |= more


def axis_aliases(aliases: dict[str, Offset], axis: int) -> dict[str, Offset]:
    """The aliases of one launch axis."""
    return {n: o for n, o in aliases.items() if o[0] == axis}
