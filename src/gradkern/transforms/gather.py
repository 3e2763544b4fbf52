"""Scatter → gather rewrite of affine-stencil adjoints (docs/adjoint-forms.md).

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

Periodic stencils. An index written with its wrap-around as the thread
index plus an offset in every branch, `ip = i + 1 if i < n - 1 else i + 1 - n`
(n = u.shape[0], the axis's modulus M), reads at one of the offsets
o = c + s·M (s in -1, 0, 1). Each such offset is a neighbour candidate
j - o like a constant one; an atomic add whose index has several offsets is
kept in candidate o's replay only where its index lands on j (tested), and
only for the first of its offsets with o's value (two can coincide on tiny
arrays: each thread's contribution is counted once). On an axis with wraps
the gather runs over the modulus M as well (a wrap lands anywhere in it).

The gather kernel runs after the augmented primal (it may read the tape) and
before the reverse that zeroes write-only shadows (it reads them), and that
reverse no longer updates the gathered shadows. Where the backend allows,
transforms/fold.py folds that reverse's remaining work into the gather.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from ..environment import env_int
from ..ir import build as b
from ..ir import names
from ..ir import nodes as ir
from ..ir.indices import indices
from ..ir.names import GATHER_EXTENT as EXTENT
from ..ir.ops import Op
from ..ir.rewrite import map_expr, rename_locals, with_blocks, with_exprs
from ..ir.types import BOOL, I64
from .dce import live_slice
from .reverse import COUNT
from .simplify import without

# An offset vector: per launch axis (c, s), the index tid + c + s·M with M the axis's wrap modulus (s = 0: none).

# The statements of the neighbour copies (each sliced to what its accumulators need, the wrapped candidates
# not counted: the CPU's interior drops them) past which a gather replays its neighbours in a loop over the
# offsets instead of one copy per offset (docs/compile-time.md, finding 10): a copy is a reverse body, and
# Numba's compile time grows with the code it is given; bodies this long are outlined into a serial function on
# the CPU (backends/numba_loops.py, OUTLINE_STATEMENTS = 96), which is not vectorised either way. The looped
# gather carries its unrolled twin, whose interior the CPU prints where keeps_interior allows (docs/adjoint-forms.md,
# section 7). GRADKERN_LOOP_STATEMENTS: for measuring.
LOOP_STATEMENTS = env_int("GRADKERN_LOOP_STATEMENTS", 192)
Offset = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Gather:
    kernel: ir.Kernel  # the gather kernel: params of the source, then the launch extents
    arrays: tuple[str, ...]  # the shadows it computes
    offsets: tuple[tuple[int | str, ...], ...]  # per axis c, or "c+M"/"c-M" for a wrap (for reading)
    reach: tuple[int, ...]  # per axis, how far past the launch extent the accesses land
    # per axis, the (array, axis) whose extent is the wrap modulus M, or None: the gather covers M too
    wraps: tuple[tuple[str, int] | None, ...] = ()
    # its own copy (offset 0) sums the Active scalars (gather_kernel's `own_sums`, where it has one)
    sums_kept: bool = False
    # the shadows whose stores its own copy makes (gather_kernel's `own_stores` that no other copy reads)
    stores_kept: tuple[str, ...] = ()
    # it does all the reverse's work (transforms/fold.py), and clears these shadows after their last read
    reverse_folded: bool = False
    folded: tuple[str, ...] = ()
    # a pull (transforms/pull.py): runs after the reverse (or fused) kernel, from the scratch slots it taped
    pulls: bool = False
    # a looped gather's twin with one copy per offset, for its interior only (pipeline._generate)
    unrolled: ir.Kernel | None = None


class _Offsets:
    """The offsets at which a kernel's accesses index, per axis: tid + c, through
    locals that hold tid + c (ir/indices.py) or are set once before all their uses, and for
    periodic indices a select whose arms are each tid + c + s·M (M the extent
    `x.shape[axis]` of one array, the same for every wrap along that axis). It extends the kernel's index
    analysis (ir/indices.py) by those once-set locals, selects and shape terms: on an index with none of
    them it gives what `Indices.offset` gives, at the position of its axis (tests/transforms/test_gather.py)."""

    def __init__(self, k: ir.Kernel):
        self.alias = indices(k).offsets  # locals holding tid[axis] + c (ir/indices.py)
        self.ndim = k.tid_ndim
        count: dict[str, int] = {}
        for s in ir.walk_stmts(k.body):
            if isinstance(s, ir.Assign):
                count[s.name] = count.get(s.name, 0) + 1
            elif isinstance(s, ir.For):
                count[s.var] = 2
        uses: dict[str, int] = {}
        for e in ir.all_exprs(k.body):
            if isinstance(e, ir.Var):
                uses[e.name] = uses.get(e.name, 0) + 1
        # locals set once, in a block before all their uses: every use sees that value. Each block is walked
        # once, from its end, counting the uses after each statement (one pass per nesting level, not one per
        # assignment: unrolled bodies have thousands of statements, docs/compile-time.md)
        self.defs: dict[str, ir.Expr] = {}

        def scan(block: tuple[ir.Stmt, ...]) -> None:
            after: dict[str, int] = {}
            for s in reversed(block):
                if isinstance(s, ir.Assign) and count[s.name] == 1 and after.get(s.name, 0) == uses.get(s.name, 0):
                    self.defs[s.name] = s.value
                for e in ir.all_exprs((s,)):
                    if isinstance(e, ir.Var):
                        after[e.name] = after.get(e.name, 0) + 1
                for inner in ir.blocks(s):
                    scan(inner)
        scan(k.body)
        self.assigned = set(count)
        self.modulus: dict[int, ir.Shape] = {}

    def _fixed(self, e: ir.Expr) -> bool:
        """Whether e reads only locals set once before their uses (or tid aliases) and parameters: its
        value where an add uses a select is the value it had where the select was made."""
        return all(not isinstance(x, ir.Var) or x.name in self.alias or x.name in self.defs
                   or x.name not in self.assigned for x in ir.walk_expr(e))

    def _resolve(self, e: ir.Expr, depth: int = 0) -> ir.Expr:
        while isinstance(e, ir.Var) and e.name not in self.alias and e.name in self.defs and depth < 64:
            e, depth = self.defs[e.name], depth + 1
        return e

    def _shape(self, e: ir.Expr) -> ir.Shape | None:
        e = self._resolve(e)
        if isinstance(e, ir.Apply) and e.op is Op.CAST:
            e = self._resolve(e.args[0])
        return e if isinstance(e, ir.Shape) else None

    def axis(self, e: ir.Expr, pos: int) -> frozenset[tuple[int, int]] | None:
        """The offsets (c, s) of index position `pos` holding e, or None."""
        e = self._resolve(e)
        if isinstance(e, ir.Tid):
            return frozenset({(0, 0)}) if e.axis == pos else None
        if isinstance(e, ir.Var) and e.name in self.alias:
            axis, c = self.alias[e.name]
            return frozenset({(c, 0)}) if axis == pos else None
        if isinstance(e, ir.Select):
            a, b_ = self.axis(e.a, pos), self.axis(e.b, pos)
            if a is None or b_ is None or not self._fixed(e.cond):
                return None
            return a | b_
        if not (isinstance(e, ir.Apply) and e.op in (Op.ADD, Op.SUB)):
            return None
        x, y = e.args
        if e.op is Op.ADD and self.axis(x, pos) is None:
            x, y = y, x  # M + (tid + c), c + tid
        inner = self.axis(x, pos)
        if inner is None:
            return None
        sign = 1 if e.op is Op.ADD else -1
        y = self._resolve(y)
        if isinstance(y, ir.Const) and isinstance(y.value, int) and not isinstance(y.value, bool):
            return frozenset((c + sign * y.value, w) for c, w in inner)
        m = self._shape(y)
        if m is None or self.modulus.setdefault(pos, m) != m:
            return None
        out = frozenset((c, w + sign) for c, w in inner)
        return out if all(-1 <= w <= 1 for _, w in out) else None

    def of(self, idx: tuple[ir.Expr, ...]) -> frozenset[Offset] | None:
        """The offset vectors of an access, or None when one position is no stencil index."""
        if len(idx) != self.ndim:
            return None
        per_axis = [self.axis(e, pos) for pos, e in enumerate(idx)]
        if any(a is None for a in per_axis):
            return None
        return frozenset(itertools.product(*(sorted(a) for a in per_axis)))

    def value(self, o: Offset, axis: int) -> ir.Expr:
        """Offset o's value along `axis`: c + s·M."""
        c, s = o[axis]
        out = b.const(c, I64)
        if s:
            m = self.modulus[axis]
            out = b.add(out, m) if s > 0 else b.sub(out, m)
        return out

    def shifted(self, e: ir.Expr, o: Offset) -> ir.Expr:
        """`e` as thread (tid - o) evaluates it."""
        def sub(x: ir.Expr) -> ir.Expr:
            if not isinstance(x, ir.Tid) or o[x.axis] == (0, 0):
                return x
            c, s = o[x.axis]
            out = b.sub(x, b.const(c, I64)) if c else x
            if s:
                m = self.modulus[x.axis]
                out = b.sub(out, m) if s > 0 else b.add(out, m)
            return out
        return map_expr(e, sub)

    def is_thread(self, o: Offset) -> ir.Expr:
        """Whether neighbour tid - o is a thread of the launch: 0 <= tid - o < gn on every axis. A wrap
        also gets the same test written as tid against launch invariants, which the CPU's interior
        splitting folds to False: for s = 1, tid >= M + c (tid - o >= 0); for s = -1, tid < gn - M + c
        (tid - o < gn), a bound in which two extents cancel, which the split takes for a lower edge
        (transforms/split.py): c where gn = M, so the interior carries no wrapped candidate. The one form of
        this hint, for the replay gather and the pull alike (transforms/pull.py)."""
        tests = []
        for axis, (c, s) in enumerate(o):
            tid = ir.Tid(axis, type=I64)
            t = self.shifted(tid, o)
            gn = b.var(f"{EXTENT}{axis}", I64)
            if s > 0:
                tests.append(b.cmp(Op.GE, tid, b.add(self.modulus[axis], b.const(c, I64))))
            elif s < 0:
                tests.append(b.cmp(Op.LT, tid, b.add(b.sub(gn, self.modulus[axis]), b.const(c, I64))))
            tests += [b.cmp(Op.GE, t, b.const(0, I64)), b.cmp(Op.LT, t, gn)]
        return _all(tests)

    def shifted_by(self, e: ir.Expr, at: tuple[ir.Expr, ...]) -> ir.Expr:
        """`e` as thread (tid - o) evaluates it, o's value along each axis (c + s·M) the expressions `at`."""
        return map_expr(e, lambda x: b.sub(x, at[x.axis]) if isinstance(x, ir.Tid) else x)

    def is_thread_at(self, at: tuple[ir.Expr, ...]) -> ir.Expr:
        """Whether neighbour tid - o is a thread of the launch, o's values the expressions `at` (without the
        tests `is_thread` adds for the interior split, which they imply)."""
        tests = []
        for axis, o in enumerate(at):
            t = b.sub(ir.Tid(axis, type=I64), o)
            tests += [b.cmp(Op.GE, t, b.const(0, I64)), b.cmp(Op.LT, t, b.var(f"{EXTENT}{axis}", I64))]
        return _all(tests)

    def _arm(self, e: ir.Expr, pos: int, want: tuple[int, int]) -> ir.Expr | bool:
        """Whether index position `pos` holding e takes an arm at offset `want`: a condition on the
        selects' conditions (as the thread evaluates them), or a constant."""
        e = self._resolve(e)
        if not isinstance(e, ir.Select):
            return self.axis(e, pos) == {want}
        a, other = self._arm(e.a, pos, want), self._arm(e.b, pos, want)
        if a is True and other is True:
            return True
        parts = []
        if a is not False:
            parts.append(e.cond if a is True else _all([e.cond, a]))
        if other is not False:
            no = ir.Apply(Op.NOT, (e.cond,), type=BOOL)
            parts.append(no if other is True else _all([no, other]))
        return _all(parts, Op.OR) if parts else False

    def lands(self, idx: tuple[ir.Expr, ...], o: Offset) -> ir.Expr | bool:
        """Whether an atomic add at `idx` lands at offset o: True, False or a test of the arms its selects
        take. Counting each add only at the offset of the arm it takes counts it once, even where two
        offsets have one value (then both candidates replay the same thread)."""
        tests = [self._arm(e, p, o[p]) for p, e in enumerate(idx)]
        if any(t is False for t in tests):
            return False
        tests = [t for t in tests if t is not True]
        return _all(tests) if tests else True


def _neighbour(body, o: Offset, plan: dict, acc: dict[str, str], sums: set[str], at: _Offsets,
               kept: frozenset[str] = frozenset()) -> tuple[ir.Stmt, ...]:
    """Thread (tid - o)'s statements, keeping of all its writes only the
    contributions to the gathered shadows at offset o (into the accumulators):
    its stores, atomic adds and Active scalars' `sums` are dropped, but for its
    writes into the arrays `kept` (the gather's own copy keeps the Active scalars'
    sums and its thread-own shadows' stores: transforms/fold.py, where `sums` is then empty)."""
    out: list[ir.Stmt] = []
    for s in body:
        if isinstance(s, ir.AtomicAdd) and s.array in plan:
            test = at.lands(s.indices, o)
            if test is not False:
                a = acc[s.array]
                add = ir.Assign(a, b.add(b.var(a, s.value.type), at.shifted(s.value, o)))
                out.append(add if test is True else ir.If(at.shifted(test, o), (add,)))
        elif isinstance(s, (ir.Store, ir.AtomicAdd)) and s.array in kept:
            out.append(with_exprs(s, lambda e: at.shifted(e, o)))
        elif not isinstance(s, (ir.Store, ir.AtomicAdd)) and not (isinstance(s, ir.Assign) and s.name in sums):
            out.append(with_blocks(with_exprs(s, lambda e: at.shifted(e, o)),
                                   lambda blk: _neighbour(blk, o, plan, acc, sums, at, kept)))
    return tuple(out)


def _neighbour_at(body, n: ir.Expr, offsets: list, at: tuple[ir.Expr, ...], plan: dict, acc: dict[str, str],
                  sums: set[str], where: _Offsets) -> tuple[ir.Stmt, ...]:
    """`_neighbour` for offset number `n` (a loop index) of `offsets`, whose values along the axes are the
    expressions `at`: an atomic add lands where it lands at that offset (`lands`, per offset number)."""
    out: list[ir.Stmt] = []
    for s in body:
        if isinstance(s, ir.AtomicAdd) and s.array in plan:
            cases = []
            for k, o in enumerate(offsets):
                test = where.lands(s.indices, o)
                if test is not False:
                    is_k = b.cmp(Op.EQ, n, b.const(k, I64))
                    cases.append(is_k if test is True else _all([is_k, test]))
            if cases:
                a = acc[s.array]
                add = ir.Assign(a, b.add(b.var(a, s.value.type), where.shifted_by(s.value, at)))
                out.append(ir.If(where.shifted_by(_all(cases, Op.OR), at), (add,)))
        elif not isinstance(s, (ir.Store, ir.AtomicAdd)) and not (isinstance(s, ir.Assign) and s.name in sums):
            out.append(with_blocks(with_exprs(s, lambda e: where.shifted_by(e, at)),
                                   lambda blk: _neighbour_at(blk, n, offsets, at, plan, acc, sums, where)))
    return tuple(out)


def _statement_count(body) -> int:
    return sum(1 for _ in ir.walk_stmts(body))


def _offset_loop(source: ir.Kernel, offsets: list, plan: dict, acc: dict[str, str], sums: set[str],
                 at: _Offsets, local: dict) -> ir.Stmt:
    """One replay inside a loop over the offsets (their components chosen by the loop index): the neighbour's
    statements printed once instead of once per offset. Locals the replay may read before it assigns them
    are set to zero at each iteration, as each unrolled copy's own names start at zero."""
    n = b.var(names.GATHER_NEIGHBOUR, I64)
    comps = tuple(b.var(names.gather_offset(axis), I64) for axis in range(source.tid_ndim))
    choose = []
    for axis, comp in enumerate(comps):
        value = at.value(offsets[-1], axis)
        for k in range(len(offsets) - 2, -1, -1):
            value = b.select(b.cmp(Op.EQ, n, b.const(k, I64)), at.value(offsets[k], axis), value)
        choose.append(ir.Assign(comp.name, value))
        local[comp.name] = I64
    local[n.name] = I64
    copy = _neighbour_at(source.body, n, offsets, comps, plan, acc, sums, at)
    first: set[str] = set()
    seen: set[str] = set()
    for s in copy:
        if isinstance(s, ir.Assign):
            seen |= {e.name for e in ir.walk_expr(s.value) if isinstance(e, ir.Var)}
            if s.name not in seen:
                first.add(s.name)
            seen.add(s.name)
        else:
            seen |= {e.name for e in ir.all_exprs((s,)) if isinstance(e, ir.Var)}
            seen |= {x.name for x in ir.walk_stmts((s,)) if isinstance(x, ir.Assign)}
    loop_vars = {x.var for x in ir.walk_stmts(copy) if isinstance(x, ir.For)}
    mentioned = {e.name for e in ir.all_exprs(copy) if isinstance(e, ir.Var)} | \
        {x.name for x in ir.walk_stmts(copy) if isinstance(x, ir.Assign)}
    params = {p.name for p in source.params}
    zero = tuple(ir.Assign(x, b.const(0, local[x])) for x in sorted(mentioned)
                 if x in local and x not in first and x not in loop_vars and x not in params
                 and x not in acc.values() and x not in (n.name, *(c.name for c in comps)))
    return ir.For(n.name, b.const(0, I64), b.const(len(offsets), I64), b.const(1, I64),
                  (*choose, ir.If(at.is_thread_at(comps), zero + copy)))


def _all(tests: list[ir.Expr], op: Op = Op.AND) -> ir.Expr:
    out = tests[0]
    for t in tests[1:]:
        out = ir.Apply(op, (out, t), type=BOOL)
    return out


def _loads(exprs) -> set[str]:
    return {e.array for x in exprs for e in ir.walk_expr(x) if isinstance(e, ir.Load)}


def _kept_loads(s: ir.Stmt) -> list[ir.Load]:
    """The loads of statement `s` itself (not of its blocks) that a neighbour's replay evaluates: `_neighbour`
    drops every store with what it reads (a plain add's `dx[i] = dx[i] + g` included) and keeps the rest."""
    if isinstance(s, ir.Store):
        return []
    return [e for x in ir.stmt_exprs(s) for e in ir.walk_expr(x) if isinstance(e, ir.Load)]


def _split_constant(e: ir.Expr) -> tuple[ir.Expr | None, int]:
    """e as base + c, c an integer constant folded from e's constant terms (base None: e is constant)."""
    if isinstance(e, ir.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return None, e.value
    if isinstance(e, ir.Apply) and e.op in (Op.ADD, Op.SUB, Op.MUL) and len(e.args) == 2:
        (bx, cx), (by, cy) = _split_constant(e.args[0]), _split_constant(e.args[1])
        if e.op is Op.MUL:
            return (None, cx * cy) if bx is None and by is None else (e, 0)
        if by is None:
            return bx, cx + cy if e.op is Op.ADD else cx - cy
        if bx is None and e.op is Op.ADD:
            return by, cx + cy
    return e, 0


class _Written:
    """Per array, the indices a thread wrote so far (None: anywhere, as a loop's writes), and whether a load
    may see one of them: not when some position is `base + c` in both with one base whose every name keeps
    its value through the thread (a tid alias or a name nobody assigns) and two different constants. Unrolled
    copies of a loop (`Ai[i, j, k, ip, kr]`) write and read distinct elements that way."""

    def __init__(self, fixed: frozenset[str], at: dict | None = None):
        self.fixed = fixed
        self.at: dict[str, list | None] = dict(at or {})

    def copy(self) -> _Written:
        return _Written(self.fixed, {a: (None if w is None else list(w)) for a, w in self.at.items()})

    def add(self, array: str, indices: tuple[ir.Expr, ...] | None) -> None:
        if array in self.at and self.at[array] is None:
            return
        if indices is None:
            self.at[array] = None
        else:
            self.at.setdefault(array, []).append(tuple(indices))

    def merge(self, other: _Written) -> None:
        for a, w in other.at.items():
            for idx in [None] if w is None else w:
                if idx is None or idx not in (self.at.get(a) or []):
                    self.add(a, idx)

    def _apart(self, x: ir.Expr, y: ir.Expr) -> bool:
        (bx, cx), (by, cy) = _split_constant(x), _split_constant(y)
        # |cx - cy| < 2^31: distinct in any integer type an index has (int32 wraps at 2^32)
        if cx == cy or abs(cx - cy) >= 2**31 or bx != by:
            return False
        return bx is None or all(v.name in self.fixed for v in ir.walk_expr(bx) if isinstance(v, ir.Var))

    def stale(self, load: ir.Load) -> bool:
        if load.array not in self.at:
            return False
        done = self.at[load.array]
        if done is None:
            return True
        idx = load.indices
        return not all(len(w) == len(idx) and any(self._apart(a, b) for a, b in zip(idx, w)) for w in done)


def _reads_after_writes(body, written: _Written) -> set[str]:
    """Arrays a thread of `body` may load, in what a neighbour's replay evaluates, after it stored or
    atomically added into the same element (`written`: what was written before `body`, updated in place).
    The replay drops every write, so such a load would read memory as it was before the thread's own write."""
    stale: set[str] = set()
    for s in body:
        if isinstance(s, (ir.For, ir.While)):
            inside = {x.array for x in ir.walk_stmts(s.body) if isinstance(x, (ir.Store, ir.AtomicAdd))}
            for a in inside:  # a later iteration may read what an earlier one wrote, at any index
                written.add(a, None)
            loads = _kept_loads(s) + [e for x in ir.walk_stmts(s.body) for e in _kept_loads(x)]
            stale |= {e.array for e in loads if written.stale(e)}
        elif isinstance(s, ir.If):
            stale |= {e.array for e in _kept_loads(s) if written.stale(e)}
            then, orelse = written.copy(), written.copy()
            stale |= _reads_after_writes(s.then, then) | _reads_after_writes(s.orelse, orelse)
            written.merge(then)
            written.merge(orelse)
        else:
            # a write's own value and indices are read before it writes
            stale |= {e.array for e in _kept_loads(s) if written.stale(e)}
            if isinstance(s, (ir.Store, ir.AtomicAdd)):
                written.add(s.array, s.indices)
    return stale


def gatherable(k: ir.Kernel, shadows: set[str]) -> dict[str, set[Offset]]:
    """Shadows that `k` only updates by atomic adds at affine-stencil offsets
    (periodic ones included), with those offsets; none when a thread of `k`
    reads memory it wrote itself (the gather's replay drops writes, so it
    could not see them)."""
    at = _Offsets(k)
    assigned = {s.name for s in ir.walk_stmts(k.body) if isinstance(s, ir.Assign)} | \
        {s.var for s in ir.walk_stmts(k.body) if isinstance(s, ir.For)}
    fixed = frozenset(at.alias) | frozenset(p.name for p in k.params if p.name not in assigned)
    if _reads_after_writes(k.body, _Written(fixed)):
        return {}
    found: dict[str, set] = {}
    bad: set[str] = set()
    for s in ir.walk_stmts(k.body):
        if isinstance(s, ir.AtomicAdd) and s.array in shadows:
            offsets = at.of(s.indices)
            if offsets is None:
                bad.add(s.array)
            else:
                found.setdefault(s.array, set()).update(offsets)
    bad |= plainly_accessed(k.body, shadows)
    return {a: o for a, o in found.items() if a not in bad}


def plainly_accessed(body: tuple[ir.Stmt, ...], shadows: set[str]) -> set[str]:
    """Those of `shadows` that `body` stores or loads (not only adds to atomically): no gather or pull for them."""
    return {s.array for s in ir.walk_stmts(body) if isinstance(s, ir.Store) and s.array in shadows} | \
        {e.array for e in ir.all_exprs(body) if isinstance(e, ir.Load) and e.array in shadows}


def without_atomics_on(k: ir.Kernel, arrays: set[str]) -> ir.Kernel:
    """`k` with its atomic adds into `arrays` removed (a gather computes them)."""
    return without(k, lambda s: isinstance(s, ir.AtomicAdd) and s.array in arrays)


def gather_kernel(source: ir.Kernel, plan: dict[str, set[Offset]], taped: bool = True,
                  sums: frozenset[str] = frozenset(), own_sums: frozenset[str] = frozenset(),
                  own_stores: frozenset[str] = frozenset()) -> Gather:
    """The gather kernel for `plan` (shadow → offsets), built from `source`, a
    reverse kernel that replays every value it needs (the split reverse);
    `sums`: its locals that sum Active scalars' derivatives (the reverse's, not the gather's,
    unless `own_sums`, the accumulator arrays they are added to, is given: then the copy of
    offset 0 keeps them, where there is one copy per offset, and `Gather.sums_kept` says so);
    `own_stores`: shadows whose stores that copy makes too, of which those no other copy loads
    (`Gather.stores_kept`; transforms/fold.py proves the rest).
    Without a tape, the tape pointers it would read from the count array are dropped."""
    ndim = source.tid_ndim
    if not taped:
        source = replace(source, body=tuple(
            s for s in source.body
            if not (isinstance(s, ir.Assign) and isinstance(s.value, ir.Load) and s.value.array == COUNT)))
    at = _Offsets(source)
    for s in ir.walk_stmts(source.body):
        if isinstance(s, ir.AtomicAdd) and s.array in plan:
            at.of(s.indices)  # finds the wraps' moduli
    offsets = sorted(set().union(*plan.values()))
    types = {p.name: p.type.dtype for p in source.params if p.name in plan}
    acc = {a: names.gather_accumulator(a) for a in plan}
    body: list[ir.Stmt] = [ir.Assign(acc[a], b.const(0, types[a])) for a in sorted(plan)]
    # each copy only what its accumulator adds need: a neighbour whose adds reach tid through one face
    # replays that face's slice of the reverse, not the whole thread (then counted against LOOP_STATEMENTS)
    live = set(acc.values())
    copies = [live_slice(_neighbour(source.body, o, plan, acc, sums, at), live) for o in offsets]
    # counted over the copies the interior keeps (no wrap: a wrapped candidate is never a thread there)
    looped = len(offsets) > 1 and sum(_statement_count(c) for c, o in zip(copies, offsets)
                                      if not any(s for _, s in o)) > LOOP_STATEMENTS
    own = ((0, 0),) * ndim
    alone = not looped and own in offsets  # one copy per offset, one of them the own copy
    kept = bool(own_sums) and alone
    others = {e.array for c, o in zip(copies, offsets) if o != own for e in ir.all_exprs(c) if isinstance(e, ir.Load)}
    stores_kept = frozenset(own_stores - others) if alone else frozenset()
    if kept or stores_kept:  # the own copy keeps the sums and their adds into the accumulators, and the stores
        copies[offsets.index(own)] = live_slice(_neighbour(source.body, own, plan, acc, frozenset() if kept else sums,
                                                           at, (own_sums if kept else frozenset()) | stores_kept), live)
    local = {n: t for n, t in source.locals if n not in sums or kept} | {acc[a]: types[a] for a in plan}
    unrolled_local = dict(local)
    unrolled: list[ir.Stmt] = list(body)
    for n, o in enumerate(offsets):
        # each neighbour gets its own names: its index locals are then assigned once
        # (tid - o), which lets interior splitting fold the neighbour's boundary tests
        renamed = {x: names.neighbour(x, n) for x, _ in source.locals if x not in acc.values() and x not in sums}
        unrolled_local |= {renamed[x]: t for x, t in source.locals if x in renamed}
        unrolled.append(ir.If(at.is_thread(o), rename_locals(copies[n], renamed)))
    if looped:
        body.append(_offset_loop(source, offsets, plan, acc, sums, at, local))
    else:
        body, local = unrolled, unrolled_local
    tids = tuple(ir.Tid(a, type=I64) for a in range(ndim))
    primal_of = {names.shadow(p.name): p.name for p in source.params}
    stores: list[ir.Stmt] = []
    for a in sorted(plan):
        # tid is in a's reach: some tid - o (o an offset of a) is a thread, and tid is inside a
        # (whose shape is its primal's: the primal keeps its name in every lane of vector mode)
        reached = _all([at.is_thread(o) for o in sorted(plan[a])], Op.OR)
        inside = [b.cmp(Op.LT, ir.Tid(axis, type=I64), ir.Shape(primal_of[a], axis, type=I64))
                  for axis in range(ndim)]
        stores.append(ir.If(_all([reached, *inside]),
                            (ir.Store(a, tids, b.add(ir.Load(a, tids, type=types[a]), b.var(acc[a], types[a]))),)))
    params = source.params + tuple(ir.Param(f"{EXTENT}{a}", I64) for a in range(ndim))
    param_names = {p.name for p in params}

    def made(stmts: list[ir.Stmt], owned: dict) -> ir.Kernel:
        return replace(source, name=source.name.replace("_rev", "_gather"), params=params, body=(*stmts, *stores),
                       locals=tuple(sorted((n, t) for n, t in owned.items() if n not in param_names)), interior=None)
    kernel = made(body, local)
    # a looped gather carries its unrolled twin (the same sums in the same order): the CPU prints the twin's
    # split interior beside the looped body (docs/adjoint-forms.md, section 7)
    return Gather(kernel, tuple(sorted(plan)), *described(at, offsets, ndim), sums_kept=kept,
                  stores_kept=tuple(sorted(stores_kept)),
                  unrolled=made(unrolled, unrolled_local) if looped else None)


def described(at: _Offsets, offsets: list[Offset], ndim: int) -> tuple[tuple, tuple, tuple]:
    """A gather's (or a pull's) `offsets` as `Gather` records them: shown, reach, wraps (transforms/pull.py)."""
    reach = tuple(max(0, *(c for o in offsets for c, s in [o[axis]] if s == 0)) for axis in range(ndim))
    wraps = tuple((at.modulus[axis].array, at.modulus[axis].axis) if any(o[axis][1] for o in offsets) else None
                  for axis in range(ndim))
    shown = tuple(tuple(c if not s else f"{c}{'+' if s > 0 else '-'}M" for c, s in o) for o in offsets)
    return shown, reach, wraps
