"""Bounds checks (GRADKERN_BOUNDSCHECK=1): every index of every array access
becomes an `InBounds` node, and the kernel takes one more array, the
out-of-bounds flag `_gk_oob` (one int64). An index outside its axis records
the access and the thread in the flag (the first one wins) and reads or writes
element 0 instead, so a checked launch never touches memory outside its
arrays; the runtime reads the flag after the launch and raises `LaunchError`
naming the access and the thread. Both backends print the same checks.
Applied just before printing, after every derivative transform.

The exact bounds check the runtime runs before a launch it cannot prove
inside (runtime/bounds_check.py) needs only the checks: `index_skeleton`
keeps of the checked kernel what control flow and indices depend on and
evaluates every other access's checked indices alone, without loading or
storing the element (a CSR product then reads indptr and indices, not data,
x or y). Where a kept value is loaded from an array the kernel writes, the
skeleton is the whole kernel (run on scratch copies), as for the race check.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..analysis.races import control_locals, reads_written_for_control, written_arrays
from ..errors import Loc
from ..ir import nodes as ir
from ..ir.names import BOUNDS_INDEX, OOB
from ..ir.ops import Op
from ..ir.rewrite import map_expr, with_blocks, with_exprs
from ..ir.types import BOOL, I64, Array


@dataclass(frozen=True)
class Access:
    """One checked access site, for the runtime's message."""

    kind: str  # "reads", "writes", "atomically adds to"
    text: str  # the element accessed, as the IR prints it
    array: str
    loc: Loc | None


def _sites(k: ir.Kernel) -> list[tuple[ir.Stmt | ir.Expr, str]]:
    """Every access in a fixed order (statements in order, loads within them pre-order)."""
    out: list = []

    def block(body):
        for s in body:
            for e in ir.stmt_exprs(s):
                out.extend((x, ir.ACCESS_VERBS[ir.Load]) for x in ir.walk_expr(e) if isinstance(x, ir.Load))
            if isinstance(s, (ir.Store, ir.AtomicAdd)):
                out.append((s, ir.ACCESS_VERBS[type(s)]))
            for b in s.block_fields:
                block(getattr(s, b))

    block(k.body)
    return out


def bounds_checked(k: ir.Kernel) -> tuple[ir.Kernel, tuple[Access, ...]]:
    """`k` with every access index checked, and the table of its access sites."""
    extents = {p.name: p.extent for p in k.params if p.extent is not None}

    def fixed(node) -> bool:
        """A literal index into an array whose shape the pipeline fixes, inside it: nothing to check (the race
        check's report array, written at five literal positions after every access it tracks)."""
        extent = extents.get(node.array)
        return extent is not None and all(isinstance(i, ir.Const) and 0 <= i.value < n
                                          for i, n in zip(node.indices, extent, strict=True))

    sites = [(node, kind) for node, kind in _sites(k) if not fixed(node)]
    if not sites:
        return k, ()
    number = {id(node): n for n, (node, _) in enumerate(sites)}
    total = len(sites)

    def checked(indices, array, site):
        return tuple(ir.InBounds(i, array, axis, site, total, type=i.type, loc=i.loc)
                     for axis, i in enumerate(indices))

    def expr(e: ir.Expr) -> ir.Expr | None:
        if isinstance(e, ir.Load) and id(e) in number:
            inner = tuple(map_expr(i, pre=expr) for i in e.indices)
            return replace(e, indices=checked(inner, e.array, number[id(e)]))
        return None

    def stmt(s: ir.Stmt) -> ir.Stmt:
        site = number.get(id(s))
        s = with_blocks(with_exprs(s, lambda e: map_expr(e, pre=expr)), block)
        if site is not None:
            s = replace(s, indices=checked(s.indices, s.array, site))
        return s

    def block(body):
        return tuple(stmt(s) for s in body)

    table = tuple(Access(kind, node.target, node.array, node.loc) for node, kind in sites)
    flag = ir.Param(OOB, Array(I64, 1), is_array=True, written=True)
    return replace(k, params=(*k.params, flag), body=block(k.body)), table


def index_skeleton(k: ir.Kernel) -> ir.Kernel:
    """The checked kernel `k` (`bounds_checked`) reduced to its checks: stores
    and assignments nothing live needs become assignments of their accesses'
    checked indices to `_gk_bi_<type>` locals, under the conditions the kernel
    evaluates them in (`a if c else b`, `and`, `or`); loads in kept
    expressions stay. Unchanged where a kept value reads a written array."""
    live = control_locals(k.body)
    written = written_arrays(k)
    if reads_written_for_control(k.body, live, written):
        return k
    sinks: dict[str, ir.Scalar] = {}

    def checked(indices) -> list[ir.Stmt]:
        out = []
        for i in indices:
            name = f"{BOUNDS_INDEX}{i.type.name}"
            sinks[name] = i.type
            out.append(ir.Assign(name, i, loc=i.loc))
        return out

    def accesses(e: ir.Expr) -> list[ir.Stmt]:
        """Check e's accesses as evaluating e would, loading none of their elements."""
        if isinstance(e, ir.Load):
            return checked(e.indices)  # a nested access sits in the indices: checked with them
        # a branch on the condition evaluates it, its accesses checked, then the chosen side's
        if isinstance(e, ir.Select):
            then, orelse = accesses(e.a), accesses(e.b)
            return [ir.If(e.cond, tuple(then), tuple(orelse))] if then or orelse else accesses(e.cond)
        if isinstance(e, ir.Apply) and e.op in (Op.AND, Op.OR):
            first, second = e.args
            rest = accesses(second)
            cond = first if e.op is Op.AND else ir.Apply(Op.NOT, (first,), type=BOOL)
            return [ir.If(cond, tuple(rest))] if rest else accesses(first)
        return [s for c in ir.children(e) for s in accesses(c)]

    def block(body) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in body:
            if isinstance(s, (ir.Store, ir.AtomicAdd)) and s.array in written:
                out += accesses(s.value) + checked(s.indices)  # the value first, as the store does
            elif isinstance(s, ir.Assign) and s.name not in live:
                out += accesses(s.value)
            else:
                out.append(with_blocks(s, block))
        return tuple(out)

    body = block(k.body)
    return replace(k, body=body, locals=tuple(sorted({**dict(k.locals), **sinks}.items())))
