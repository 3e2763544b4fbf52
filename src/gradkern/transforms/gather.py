"""Scatter → gather rewrite of affine-stencil adjoints (DESIGN §5).

A read `u[i + o]` (o a constant offset per axis) has the adjoint scatter
`du[i + o] += g_o(i)`: threads collide, so it would need atomics. Instead a
*gather kernel* lets thread j compute, for each offset o of the stencil, the
contributions thread i = j - o would have scattered to element j, by running
thread i's reverse sweep (replaying its values from intact memory and its
tape) with every other write dropped, and adds their sum into du[j] itself:
no atomics, no private copies, fully parallel.

Its domain is where the accesses land, not the launch domain: thread i of a
launch over n reads u[i + o] for 0 <= i < n, so the elements reached along an
axis are those below n + max(o) (none below 0 is in bounds). The gather runs
over n + `reach` per axis (`reach` = the largest positive offset), neighbour
i = j - o is replayed only when 0 <= i < n (the `_gk_gn*` extents), and
du[j] is updated only where j is in the union of u's shifted domains (some
i = j - o with o an offset of u is a thread) and inside u's shape: a gather
thread never touches an element outside the array's reach, whatever the
guards around the accesses. These guards are tests of the thread index
against launch invariants, so the CPU's interior splitting folds them away.

The gather kernel runs after the augmented primal (it may read the tape) and
before the reverse that zeroes write-only shadows (it reads them), and that
reverse no longer updates the gathered shadows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..analysis.access import tid_aliases
from ..ir import build as b
from ..ir import names
from ..ir import nodes as ir
from ..ir.names import GATHER_EXTENT as EXTENT
from ..ir.ops import Op
from ..ir.rewrite import map_expr, rename_locals, with_blocks, with_exprs
from ..ir.types import BOOL, I64
from .reverse import COUNT
from .simplify import without


@dataclass(frozen=True)
class Gather:
    kernel: ir.Kernel  # the gather kernel: params of the source, then the launch extents
    arrays: tuple[str, ...]  # the shadows it computes
    offsets: tuple[tuple[int, ...], ...]
    reach: tuple[int, ...]  # per axis, how far past the launch extent the accesses land


def _offset(e: ir.Expr, alias: dict[str, int]) -> tuple[int, int] | None:
    """(axis, c) when e is tid[axis] + c for an integer constant c."""
    if isinstance(e, ir.Tid):
        return e.axis, 0
    if isinstance(e, ir.Var) and e.name in alias:
        return alias[e.name], 0
    if isinstance(e, ir.Apply) and e.op in (Op.ADD, Op.SUB) and isinstance(e.args[1], ir.Const):
        inner = _offset(e.args[0], alias)
        c = e.args[1].value
        if inner is not None and isinstance(c, int) and not isinstance(c, bool):
            return inner[0], inner[1] + (c if e.op is Op.ADD else -c)
    return None


def _stencil_offset(idx: tuple[ir.Expr, ...], alias: dict[str, int], ndim: int) -> tuple[int, ...] | None:
    """The offset vector of an access whose position p is tid[p] + o_p, for all p."""
    if len(idx) != ndim:
        return None
    out = []
    for pos, e in enumerate(idx):
        parsed = _offset(e, alias)
        if parsed is None or parsed[0] != pos:
            return None
        out.append(parsed[1])
    return tuple(out)


def _shift(e: ir.Expr, o: tuple[int, ...]) -> ir.Expr:
    """`e` as thread (tid - o) evaluates it."""
    return map_expr(e, lambda x: b.sub(x, b.const(o[x.axis], I64)) if isinstance(x, ir.Tid) and o[x.axis] else x)


def _neighbour(body, o: tuple[int, ...], plan: dict, acc: dict[str, str], sums: set[str], alias,
               ndim) -> tuple[ir.Stmt, ...]:
    """Thread (tid - o)'s statements, keeping of all its writes only the
    contributions to the gathered shadows at offset o (into the accumulators):
    its stores, atomic adds and Active scalars' `sums` are dropped."""
    out: list[ir.Stmt] = []
    for s in body:
        if isinstance(s, ir.AtomicAdd) and s.array in plan:
            if _stencil_offset(s.indices, alias, ndim) == o:
                a = acc[s.array]
                out.append(ir.Assign(a, b.add(b.var(a, s.value.type), _shift(s.value, o))))
        elif not isinstance(s, (ir.Store, ir.AtomicAdd)) and not (isinstance(s, ir.Assign) and s.name in sums):
            out.append(with_blocks(with_exprs(s, lambda e: _shift(e, o)),
                                   lambda blk: _neighbour(blk, o, plan, acc, sums, alias, ndim)))
    return tuple(out)


def _all(tests: list[ir.Expr], op: Op = Op.AND) -> ir.Expr:
    out = tests[0]
    for t in tests[1:]:
        out = ir.Apply(op, (out, t), type=BOOL)
    return out


def _is_thread(o: tuple[int, ...]) -> ir.Expr:
    """Whether neighbour tid - o is a thread of the launch: 0 <= tid - o < gn on every axis."""
    tests = []
    for axis, c in enumerate(o):
        t = b.sub(ir.Tid(axis, type=I64), b.const(c, I64)) if c else ir.Tid(axis, type=I64)
        tests += [b.cmp(Op.GE, t, b.const(0, I64)), b.cmp(Op.LT, t, b.var(f"{EXTENT}{axis}", I64))]
    return _all(tests)


def _loads(exprs) -> set[str]:
    return {e.array for x in exprs for e in ir.walk_expr(x) if isinstance(e, ir.Load)}


def _reads_after_writes(body, written: set[str]) -> set[str]:
    """Arrays a thread of `body` may load after it stored or atomically added into them (`written`: the
    arrays written before `body`, updated in place). The replay drops every write, so such a load would
    read memory as it was before the thread's own write."""
    stale: set[str] = set()
    for s in body:
        if isinstance(s, (ir.For, ir.While)):
            inside = {x.array for x in ir.walk_stmts(s.body) if isinstance(x, (ir.Store, ir.AtomicAdd))}
            # a later iteration reads what an earlier one wrote
            stale |= (_loads(ir.stmt_exprs(s)) | _loads(ir.all_exprs(s.body))) & (written | inside)
            written |= inside
        elif isinstance(s, ir.If):
            stale |= _loads(ir.stmt_exprs(s)) & written
            then, orelse = set(written), set(written)
            stale |= _reads_after_writes(s.then, then) | _reads_after_writes(s.orelse, orelse)
            written |= then | orelse
        else:
            stale |= _loads(ir.stmt_exprs(s)) & written  # a store's value and indices are read before it writes
            if isinstance(s, (ir.Store, ir.AtomicAdd)):
                written.add(s.array)
    return stale


def gatherable(k: ir.Kernel, shadows: set[str]) -> dict[str, set[tuple[int, ...]]]:
    """Shadows that `k` only updates by atomic adds at affine-stencil offsets,
    with those offsets; none when a thread of `k` reads memory it wrote itself
    (the gather's replay drops writes, so it could not see them)."""
    if _reads_after_writes(k.body, set()):
        return {}
    alias = tid_aliases(k)
    ndim = k.tid_ndim
    found: dict[str, set] = {}
    bad: set[str] = set()
    for s in ir.walk_stmts(k.body):
        if isinstance(s, ir.AtomicAdd) and s.array in shadows:
            o = _stencil_offset(s.indices, alias, ndim)
            if o is None:
                bad.add(s.array)
            else:
                found.setdefault(s.array, set()).add(o)
        elif isinstance(s, ir.Store) and s.array in shadows:
            bad.add(s.array)
    for e in ir.all_exprs(k.body):
        if isinstance(e, ir.Load) and e.array in shadows:
            bad.add(e.array)
    return {a: o for a, o in found.items() if a not in bad}


def without_atomics_on(k: ir.Kernel, arrays: set[str]) -> ir.Kernel:
    """`k` with its atomic adds into `arrays` removed (a gather computes them)."""
    return without(k, lambda s: isinstance(s, ir.AtomicAdd) and s.array in arrays)


def gather_kernel(source: ir.Kernel, plan: dict[str, set[tuple[int, ...]]], taped: bool = True,
                  sums: frozenset[str] = frozenset()) -> Gather:
    """The gather kernel for `plan` (shadow → offsets), built from `source`, a
    reverse kernel that replays every value it needs (the split reverse);
    `sums`: its locals that sum Active scalars' derivatives (the reverse's, not the gather's).
    Without a tape, the tape pointers it would read from the count array are dropped."""
    ndim = source.tid_ndim
    if not taped:
        source = replace(source, body=tuple(
            s for s in source.body
            if not (isinstance(s, ir.Assign) and isinstance(s.value, ir.Load) and s.value.array == COUNT)))
    alias = tid_aliases(source)
    offsets = sorted(set().union(*plan.values()))
    types = {p.name: p.type.dtype for p in source.params if p.name in plan}
    acc = {a: names.gather_accumulator(a) for a in plan}
    local = {n: t for n, t in source.locals if n not in sums} | {acc[a]: types[a] for a in plan}
    body: list[ir.Stmt] = [ir.Assign(acc[a], b.const(0, types[a])) for a in sorted(plan)]
    for n, o in enumerate(offsets):
        # each neighbour gets its own names: its index locals are then assigned once
        # (tid - o), which lets interior splitting fold the neighbour's boundary tests
        renamed = {x: names.neighbour(x, n) for x, _ in source.locals if x not in acc.values() and x not in sums}
        local |= {renamed[x]: t for x, t in source.locals if x in renamed}
        copy = rename_locals(_neighbour(source.body, o, plan, acc, sums, alias, ndim), renamed)
        body.append(ir.If(_is_thread(o), copy))
    tids = tuple(ir.Tid(a, type=I64) for a in range(ndim))
    primal_of = {names.shadow(p.name): p.name for p in source.params}
    for a in sorted(plan):
        # tid is in a's reach: some tid - o (o an offset of a) is a thread, and tid is inside a
        # (whose shape is its primal's: the primal keeps its name in every lane of vector mode)
        reached = _all([_is_thread(o) for o in sorted(plan[a])], Op.OR)
        inside = [b.cmp(Op.LT, ir.Tid(axis, type=I64), ir.Shape(primal_of[a], axis, type=I64))
                  for axis in range(ndim)]
        body.append(ir.If(_all([reached, *inside]),
                          (ir.Store(a, tids, b.add(ir.Load(a, tids, type=types[a]), b.var(acc[a], types[a]))),)))
    params = source.params + tuple(ir.Param(f"{EXTENT}{a}", I64) for a in range(ndim))
    param_names = {p.name for p in params}
    kernel = replace(source, name=source.name.replace("_rev", "_gather"), params=params, body=tuple(body),
                     locals=tuple(sorted((n, t) for n, t in local.items() if n not in param_names)), interior=None)
    reach = tuple(max(0, *(o[axis] for o in offsets)) for axis in range(ndim))
    return Gather(kernel, tuple(sorted(plan)), tuple(offsets), reach)
