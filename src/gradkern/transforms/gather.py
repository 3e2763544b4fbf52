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
    # (axis, array, position): a periodic wrap lands anywhere below array.shape[position] along axis
    wraps: tuple[tuple[int, str, int], ...] = ()


@dataclass(frozen=True)
class Shift:
    """Where an access lands relative to its thread: tid + offset on every
    axis, wrapped around `modulus` (an expression of shapes) on periodic axes."""

    offsets: tuple[int, ...]
    moduli: tuple[ir.Expr | None, ...]


@dataclass(frozen=True)
class Site:
    """A gathered access: its shadow, the constant indices at its positions that
    no tid component indexes (`None` at the others), and its shift."""

    array: str
    fixed: tuple[int | None, ...]
    shift: Shift


class _Names:
    """The one value of each local every binding of which is the same
    expression (flow-insensitive, as tid_aliases): what an index is built from."""

    def __init__(self, k: ir.Kernel):
        bound: dict[str, list] = {}
        for s in ir.walk_stmts(k.body):
            if isinstance(s, ir.Assign):
                bound.setdefault(s.name, []).append(s.value)
            elif isinstance(s, ir.For):
                bound.setdefault(s.var, []).append(None)
        params = {p.name for p in k.params}
        self.value = {n: v[0] for n, v in bound.items()
                      if n not in params and v[0] is not None and all(x == v[0] for x in v)}

    def resolve(self, e: ir.Expr, depth: int = 0) -> ir.Expr:
        while isinstance(e, ir.Var) and e.name in self.value and depth < 64:
            e, depth = self.value[e.name], depth + 1
        return e

    def invariant(self, e: ir.Expr, depth: int = 0) -> ir.Expr | None:
        """`e` with its locals replaced by their values when it is built only from
        constants and shapes (the same in every thread); else None."""
        e = self.resolve(e)
        if isinstance(e, (ir.Const, ir.Shape)):
            return e
        if isinstance(e, ir.Apply) and e.op in (Op.ADD, Op.SUB, Op.MUL, Op.CAST) and depth < 16:
            args = [self.invariant(a, depth + 1) for a in e.args]
            return None if any(a is None for a in args) else replace(e, args=tuple(args))
        return None

    def axis_offset(self, e: ir.Expr) -> tuple[int, int, ir.Expr | None] | None:
        """(axis, c, None) when e is tid[axis] + c for an integer constant c; (axis, ±1, M) when e is
        the periodic neighbour (tid[axis] ± 1) mod M, spelled `i + 1 if i < M - 1 else 0` or
        `i - 1 if i > 0 else M - 1` (`>= 1` and `!=` tests too), M an expression of shapes."""
        e = self.resolve(e)
        if isinstance(e, ir.Tid):
            return e.axis, 0, None
        if isinstance(e, ir.Apply) and e.op is Op.CAST and e.type == I64:
            return self.axis_offset(e.args[0])
        if isinstance(e, ir.Apply) and e.op in (Op.ADD, Op.SUB) and isinstance(e.args[1], ir.Const):
            inner = self.axis_offset(e.args[0])
            c = e.args[1].value
            if inner is not None and inner[2] is None and isinstance(c, int) and not isinstance(c, bool):
                return inner[0], inner[1] + (c if e.op is Op.ADD else -c), None
        if isinstance(e, ir.Select):
            return self._periodic(e)
        return None

    def _periodic(self, e: ir.Select) -> tuple[int, int, ir.Expr] | None:
        step = self.axis_offset(e.a)
        cond = self.resolve(e.cond)
        if step is None or step[2] is not None or step[1] not in (1, -1) or not isinstance(cond, ir.Apply) \
                or cond.op not in (Op.LT, Op.GT, Op.GE, Op.NE):
            return None
        axis, o, _ = step
        t = self.axis_offset(cond.args[0])
        if t != (axis, 0, None):
            return None
        bound = self.invariant(cond.args[1])
        if o == 1:  # i + 1 if i < M - 1 (or i != M - 1) else 0
            other = self.invariant(e.b)
            m = _plus_one(bound) if cond.op in (Op.LT, Op.NE) else None
            ok = other is not None and _is_int(other, 0)
        else:  # i - 1 if i > 0 (i >= 1, i != 0) else M - 1
            ok = (cond.op in (Op.GT, Op.NE) and _is_int(bound, 0)) or (cond.op is Op.GE and _is_int(bound, 1))
            m = _plus_one(self.invariant(e.b))
        return (axis, o, m) if ok and m is not None else None


def _is_int(e: ir.Expr | None, v: int) -> bool:
    return isinstance(e, ir.Const) and not isinstance(e.value, bool) and e.value == v


def _plus_one(e: ir.Expr | None) -> ir.Expr | None:
    """M when e is M - 1 (M an invariant expression)."""
    if isinstance(e, ir.Apply) and e.op is Op.SUB and _is_int(e.args[1], 1):
        return e.args[0]
    return None


def _site(array: str, idx: tuple[ir.Expr, ...], names: _Names, ndim: int) -> Site | None:
    """The gathered form of an access `array[idx]`: every tid component indexes
    exactly one position (at a constant or periodic offset), the other positions
    are integer constants (a D2Q9 population's direction)."""
    fixed: list[int | None] = []
    offsets: list[int | None] = [None] * ndim
    moduli: list[ir.Expr | None] = [None] * ndim
    for e in idx:
        parsed = names.axis_offset(e)
        if parsed is not None:
            axis, c, m = parsed
            if axis >= ndim or offsets[axis] is not None:
                return None
            offsets[axis], moduli[axis] = c, m
            fixed.append(None)
            continue
        value = names.resolve(e)
        if not (isinstance(value, ir.Const) and isinstance(value.value, int) and not isinstance(value.value, bool)):
            return None
        fixed.append(value.value)
    if any(o is None for o in offsets):
        return None
    return Site(array, tuple(fixed), Shift(tuple(offsets), tuple(moduli)))


def _order(shift: Shift) -> tuple:
    """Shifts in the order of their offsets (the order the neighbours are summed in), periodic ones last."""
    return shift.offsets, tuple(str(m) for m in shift.moduli)


def _position(site: Site, axis: int) -> int:
    """The index position that tid[axis] indexes."""
    return [p for p, v in enumerate(site.fixed) if v is None][axis]


def _source_thread(shift: Shift, axis: int) -> ir.Expr:
    """The thread (along `axis`) whose access at `shift` lands on this thread's element."""
    t, o, m = ir.Tid(axis, type=I64), shift.offsets[axis], shift.moduli[axis]
    back = b.sub(t, b.const(o, I64)) if o else t
    if m is None or not o:
        return back
    if o > 0:  # t - o, wrapped below 0
        return b.select(b.cmp(Op.GE, t, b.const(o, I64)), back, b.add(back, m))
    return b.select(b.cmp(Op.LT, back, m), back, b.sub(back, m))  # t - o, wrapped at M


def _shift(e: ir.Expr, shift: Shift) -> ir.Expr:
    """`e` as the thread whose access at `shift` lands here evaluates it."""
    return map_expr(e, lambda x: _source_thread(shift, x.axis) if isinstance(x, ir.Tid) and shift.offsets[x.axis]
                    else x)


def _neighbour(body, shift: Shift, acc: dict, sums: set[str], known: _Names, ndim) -> tuple[ir.Stmt, ...]:
    """The statements of the thread whose accesses at `shift` land here, keeping
    of all its writes only the contributions to the gathered shadows at that
    shift (into the accumulators): its stores, atomic adds and Active scalars'
    `sums` are dropped."""
    out: list[ir.Stmt] = []
    for s in body:
        site = _site(s.array, s.indices, known, ndim) if isinstance(s, ir.AtomicAdd) else None
        if site is not None and (site.array, site.fixed) in acc:
            if site.shift == shift:
                a = acc[(site.array, site.fixed)]
                out.append(ir.Assign(a, b.add(b.var(a, s.value.type), _shift(s.value, shift))))
        elif not isinstance(s, (ir.Store, ir.AtomicAdd)) and not (isinstance(s, ir.Assign) and s.name in sums):
            out.append(with_blocks(with_exprs(s, lambda e: _shift(e, shift)),
                                   lambda blk: _neighbour(blk, shift, acc, sums, known, ndim)))
    return tuple(out)


def _all(tests: list[ir.Expr], op: Op = Op.AND) -> ir.Expr:
    out = tests[0]
    for t in tests[1:]:
        out = ir.Apply(op, (out, t), type=BOOL)
    return out


def _is_thread(shift: Shift) -> ir.Expr:
    """Whether the thread whose access at `shift` lands here is a thread of the launch (0 <= it < gn on every
    axis); on a periodic axis this thread's element must also lie below the modulus (the wrap lands only there)."""
    tests = []
    for axis, (c, m) in enumerate(zip(shift.offsets, shift.moduli)):
        t = _source_thread(shift, axis)
        if m is not None and c:
            tests.append(b.cmp(Op.LT, ir.Tid(axis, type=I64), m))  # then 0 <= t < M
        else:
            tests.append(b.cmp(Op.GE, t, b.const(0, I64)))
        tests.append(b.cmp(Op.LT, t, b.var(f"{EXTENT}{axis}", I64)))
    return _all(tests)


def _eager_loads(e: ir.Expr):
    """The loads `e` always evaluates (not those under a select's branch or a short-circuit operand)."""
    if isinstance(e, ir.Load):
        yield e
    if isinstance(e, ir.Select):
        yield from _eager_loads(e.cond)
        return
    kids = ir.children(e)
    if isinstance(e, ir.Apply) and e.op in (Op.AND, Op.OR):
        kids = kids[:1]
    for c in kids:
        yield from _eager_loads(c)


def _wraps_are_whole(k: ir.Kernel, sites: list[Site], known: _Names) -> bool:
    """Whether every periodic modulus is an array's extent `X.shape[p]` at which
    every thread accesses X (or its shadow), unconditionally, at position p by
    its own tid component: the launch's bounds then keep every thread below
    the modulus, where the wrapped index is the neighbour's (tid ± 1) mod M."""
    primal_of = {names.shadow(p.name): p.name for p in k.params}
    at_tid: set[tuple[str, int, int]] = set()
    for s in k.body:  # top level: run by every thread
        accesses = [x for e in ir.stmt_exprs(s) for x in _eager_loads(e)]
        if isinstance(s, (ir.Store, ir.AtomicAdd)):
            accesses.append(s)
        for x in accesses:
            for pos, e in enumerate(x.indices):
                parsed = known.axis_offset(e)
                if parsed is not None and parsed[1:] == (0, None):
                    at_tid.add((primal_of.get(x.array, x.array), pos, parsed[0]))
    for site in sites:
        for axis, m in enumerate(site.shift.moduli):
            if m is not None and not (isinstance(m, ir.Shape) and (m.array, m.axis, axis) in at_tid):
                return False
    return True


def _distinct(written: tuple | None, read: tuple, known: _Names) -> bool:
    """Whether two accesses surely touch different elements: at some position both indices are integer
    constants, and different ones (two directions of a D2Q9 population); `written` None: any element."""
    if written is None:
        return False
    for x, y in zip(written, read):
        x, y = known.resolve(x), known.resolve(y)
        if isinstance(x, ir.Const) and isinstance(y, ir.Const) and x.value != y.value:
            return True
    return False


def _reads_after_writes(body, written: dict[str, set], known: _Names) -> set[str]:
    """Arrays a thread of `body` may load after it stored or atomically added into the same element
    (`written`: array -> the index tuples written before `body`, None for any element; updated in place).
    The replay drops every write, so such a load would read memory as it was before the thread's own write."""
    stale: set[str] = set()

    def check(exprs, w: dict[str, set]) -> None:
        for x in exprs:
            for e in ir.walk_expr(x):
                if isinstance(e, ir.Load) and not all(_distinct(ix, e.indices, known) for ix in w.get(e.array, ())):
                    stale.add(e.array)

    for s in body:
        if isinstance(s, (ir.For, ir.While)):
            # a later iteration reads what an earlier one wrote, at indices that change between iterations
            for x in ir.walk_stmts(s.body):
                if isinstance(x, (ir.Store, ir.AtomicAdd)):
                    written.setdefault(x.array, set()).add(None)
            check(list(ir.stmt_exprs(s)) + list(ir.all_exprs(s.body)), written)
        elif isinstance(s, ir.If):
            check(ir.stmt_exprs(s), written)
            then = {a: set(v) for a, v in written.items()}
            orelse = {a: set(v) for a, v in written.items()}
            stale |= _reads_after_writes(s.then, then, known) | _reads_after_writes(s.orelse, orelse, known)
            for branch in (then, orelse):
                for a, v in branch.items():
                    written.setdefault(a, set()).update(v)
        else:
            check(ir.stmt_exprs(s), written)  # a store's value and indices are read before it writes
            if isinstance(s, (ir.Store, ir.AtomicAdd)):
                written.setdefault(s.array, set()).add(s.indices)
    return stale


def gatherable(k: ir.Kernel, shadows: set[str]) -> dict[str, list[Site]]:
    """Shadows that `k` only updates by atomic adds at affine-stencil offsets
    (constant or periodic, the other positions constant), with those sites;
    none when a thread of `k` reads memory it wrote itself (the gather's replay
    drops writes, so it could not see them)."""
    known = _Names(k)
    if _reads_after_writes(k.body, {}, known):
        return {}
    found: dict[str, list[Site]] = {}
    bad: set[str] = set()
    for s in ir.walk_stmts(k.body):
        if isinstance(s, ir.AtomicAdd) and s.array in shadows:
            site = _site(s.array, s.indices, known, k.tid_ndim)
            if site is None:
                bad.add(s.array)
            else:
                found.setdefault(s.array, []).append(site)
        elif isinstance(s, ir.Store) and s.array in shadows:
            bad.add(s.array)
    for e in ir.all_exprs(k.body):
        if isinstance(e, ir.Load) and e.array in shadows:
            bad.add(e.array)
    for a, sites in found.items():
        if len({tuple(v is None for v in site.fixed) for site in sites}) != 1 or not _wraps_are_whole(k, sites, known):
            bad.add(a)  # tid components at different positions, or a wrap the launch may not keep to
    return {a: sorted(set(sites), key=lambda site: (_order(site.shift), site.fixed)) for a, sites in found.items()
            if a not in bad}


def without_atomics_on(k: ir.Kernel, arrays: set[str]) -> ir.Kernel:
    """`k` with its atomic adds into `arrays` removed (a gather computes them)."""
    return without(k, lambda s: isinstance(s, ir.AtomicAdd) and s.array in arrays)


def gather_kernel(source: ir.Kernel, plan: dict[str, list[Site]], taped: bool = True,
                  sums: frozenset[str] = frozenset()) -> Gather:
    """The gather kernel for `plan` (shadow → sites), built from `source`, a
    reverse kernel that replays every value it needs (the split reverse);
    `sums`: its locals that sum Active scalars' derivatives (the reverse's, not the gather's).
    Without a tape, the tape pointers it would read from the count array are dropped."""
    ndim = source.tid_ndim
    if not taped:
        source = replace(source, body=tuple(
            s for s in source.body
            if not (isinstance(s, ir.Assign) and isinstance(s.value, ir.Load) and s.value.array == COUNT)))
    known = _Names(source)
    shifts = sorted({site.shift for sites in plan.values() for site in sites}, key=_order)
    types = {p.name: p.type.dtype for p in source.params if p.name in plan}
    # one accumulator per shadow and constant index (a D2Q9 shadow: one per direction)
    slots = sorted({(site.array, site.fixed) for sites in plan.values() for site in sites},
                   key=lambda slot: (slot[0], tuple(-1 if v is None else v for v in slot[1])))
    acc = {slot: names.gather_accumulator(*slot) for slot in slots}
    local = {n: t for n, t in source.locals if n not in sums} | {acc[slot]: types[slot[0]] for slot in slots}
    body: list[ir.Stmt] = [ir.Assign(acc[slot], b.const(0, types[slot[0]])) for slot in slots]
    for n, shift in enumerate(shifts):
        # each neighbour gets its own names: its index locals are then assigned once
        # (tid - o), which lets interior splitting fold the neighbour's boundary tests
        renamed = {x: names.neighbour(x, n) for x, _ in source.locals
                   if x not in acc.values() and x not in sums}
        local |= {renamed[x]: t for x, t in source.locals if x in renamed}
        copy = rename_locals(_neighbour(source.body, shift, acc, sums, known, ndim), renamed)
        body.append(ir.If(_is_thread(shift), copy))
    primal_of = {names.shadow(p.name): p.name for p in source.params}
    for slot in slots:
        a, fixed = slot
        here = [site for site in plan[a] if site.fixed == fixed]
        # the element is reached: some thread's access lands on it; and it is inside a
        # (whose shape is its primal's: the primal keeps its name in every lane of vector mode)
        reached = _all([_is_thread(s) for s in sorted({site.shift for site in here}, key=_order)], Op.OR)
        index = tuple(b.const(v, I64) if v is not None else ir.Tid(fixed[:p].count(None), type=I64)
                      for p, v in enumerate(fixed))
        inside = [b.cmp(Op.LT, ir.Tid(axis, type=I64), ir.Shape(primal_of[a], _position(here[0], axis), type=I64))
                  for axis in range(ndim)]
        body.append(ir.If(_all([reached, *inside]),
                          (ir.Store(a, index, b.add(ir.Load(a, index, type=types[a]), b.var(acc[slot], types[a]))),)))
    params = source.params + tuple(ir.Param(f"{EXTENT}{a}", I64) for a in range(ndim))
    param_names = {p.name for p in params}
    kernel = replace(source, name=source.name.replace("_rev", "_gather"), params=params, body=tuple(body),
                     locals=tuple(sorted((n, t) for n, t in local.items() if n not in param_names)), interior=None)
    reach = tuple(max(0, *(s.offsets[axis] for s in shifts)) for axis in range(ndim))
    wraps = {(axis, m.array, m.axis) for s in shifts for axis, m in enumerate(s.moduli) if m is not None}
    return Gather(kernel, tuple(sorted(plan)), tuple(s.offsets for s in shifts), reach, tuple(sorted(wraps)))
