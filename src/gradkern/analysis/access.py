"""Access analysis: which elements of each array a thread touches.

For each array it decides whether every access stays in the thread's own
*slab* (the positions indexed by the thread's own tid components, all of them,
the same positions at every access, each plus a constant offset that is the
same at every access: `K[i, j]`, or `K[ti + 1, j]` through `i = ti + 1`;
ir/indices.py, docs/adjoint-forms.md): then no two threads share an element
of it. A flattened index `i * s + r` counts as a row of its own: i a tid
component, s the same loop-invariant stride at every access, and r a loop
variable whose range provably lies in [0, s) (gemm's `c[i*n + j]` for j in
range(n)).

Why it is sound. Names are followed flow-insensitively, so every binding
counts: a tid component plus c is recognised only through `gk.tid()` itself,
`+`/`-` of integer constants, or a local every binding of which is that same
component plus the same c (a loop variable, an augmented assignment, a tuple
swap or a branch assigning anything else disqualifies it; ir/indices.py);
the row's r must be bound only by loops, each of range(start, s) with start
>= 0 and a positive step, so it holds a value in [0, s) wherever it is read,
its loops included or not; s must be built from constants, shapes and
parameters nothing binds. Distinct threads then differ in some tid component,
hence at that slab position (tid + c is injective, in machine integers too:
adding a constant modulo 2^w is a bijection), hence touch distinct elements —
provided the row arithmetic is exact: `tid * s` and `tid * s + r` (and the
arithmetic in s and in the loops' starts) must not wrap. Those are `Check`s
(analysis/overflow.py), kept per array in `LaunchFacts.row_exactness`: the race
proof holds only at launches where they hold, and a gradient that accumulates
into such an array's shadow with plain adds is refused at a launch where they
may fail (runtime/race_check.py). As everywhere, elements are compared by
index, which is exact for accesses inside their arrays (docs/launches.md).

A *segment* counts as a slab too, for an array the kernel only reads: the
loop variable k of `for k in range(p[t], p[t + 1])` (every loop binding k
alike), t a tid component and p an integer array the kernel never writes —
the CSR pattern `data[k]` for k in row t's entries. Distinct threads get
disjoint segments exactly when p is non-decreasing on [0, dim[t's axis]],
which only the data says: such arrays are listed in `LaunchFacts.segments`
with their p, and a gradient that accumulates into their shadows with plain
adds checks p at each launch (runtime/race_check.py). They never take part in
race proofs (the kernel does not write them).

These facts drive the rest:

* races (analysis/races.py): a kernel whose written arrays are all own, and
  whose atomic targets are touched only by atomic adds, is proven race-free;
  any other kernel gets the exact run-time check before it runs;
* launches: a launch known to be race-free runs in parallel, its atomic adds
  privatised per chunk on the CPU (a target also read or written plainly is
  read through the chunk's copy: backends/numba_syntax.py, PrivatizedSyntax);
* adjoints (transforms/reverse.py): accumulation into the shadow of an own
  array is a plain add, into any other shadow an atomic add. (Race-freedom
  makes the elements a kernel *writes* thread-exclusive, but elements it only
  reads, like LU's pivot row, are shared even within a written array.)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import nodes as ir
from ..ir.indices import Indices, indices
from ..ir.ops import Op
from .moves import Move, move
from .overflow import Check, Exactness, Loop, Poly, add, const, mul, tid_unknown, unknown


@dataclass(frozen=True)
class LaunchFacts:
    own: frozenset[str]  # arrays every thread touches only in its own slab
    atomic_targets: frozenset[str]  # arrays updated with atomic adds (privatised on the CPU)
    written: frozenset[str]
    # own arrays indexed by flattened rows: the checks under which their rows are exact
    row_exactness: tuple[tuple[str, Exactness], ...] = ()
    # arrays every thread stores at its own tid on every path and the kernel never reads: a launch whose
    # dim is such an array's shape overwrites all of it without reading it
    overwritten: frozenset[str] = frozenset()
    # own arrays read in segments (module doc): (array, pointer array p, tid axis); their slabs are the
    # threads' own only at launches where p[0 .. dim[axis]] is non-decreasing
    segments: tuple[tuple[str, str, int], ...] = ()
    # overwritten arrays every store of which is at the thread's own element: a thread may copy its element's
    # old contents before its first store (transforms/reverse.py: the augmented primal's saves)
    saved_in_place: frozenset[str] = frozenset()
    # the kernel is a pure move, its reverse `d_src += d_dst; d_dst = 0` at a launch over dst whole (moves.py)
    moved: Move | None = None

    def exactness(self, arrays) -> Exactness:
        """The checks under which the own slabs of `arrays` are exclusive (analysis/overflow.py)."""
        out = Exactness()
        for a, e in self.row_exactness:
            if a in arrays:
                out = out.merge(e)
        return out


def _bits(t) -> int:
    return int(t.name[3:])  # int32, int64


class _Context:
    """What the slab test needs to know about a kernel's names. Names are
    followed flow-insensitively: a tid alias is bound only to that tid
    component, a loop variable of the tests only by loops (so it always holds
    a value of one of its ranges), a parameter of the tests by nothing."""

    def __init__(self, k: ir.Kernel):
        self.indices = indices(k)  # which indices are tid[axis] + c (ir/indices.py)
        self.alias = {n for n, (axis, c) in self.indices.offsets.items() if c == 0}
        self.assigned = {s.name for s in ir.walk_stmts(k.body) if isinstance(s, ir.Assign)}
        self.loops: dict[str, list[ir.For]] = {}
        for s in ir.walk_stmts(k.body):  # outer loops first
            if isinstance(s, ir.For):
                self.loops.setdefault(s.var, []).append(s)
        ints = {p.name for p in k.params if isinstance(p.type, ir.Scalar) and p.type.is_int}
        self.params = ints - self.assigned - set(self.loops)
        self.written = {s.array for s in ir.walk_stmts(k.body) if isinstance(s, (ir.Store, ir.AtomicAdd))}

    def tid_axis(self, e: ir.Expr) -> int | None:
        """The axis when e is exactly a tid component (offset 0)."""
        return self.indices.tid_axis(e)

    def loop_var(self, e: ir.Expr) -> bool:
        return isinstance(e, ir.Var) and e.name in self.loops and e.name not in self.assigned

    def invariant(self, e: ir.Expr) -> bool:
        """Built from constants, shapes and parameters nobody binds."""
        return all(isinstance(x, (ir.Const, ir.Shape, ir.Apply)) or isinstance(x, ir.Var)
                   and x.name not in self.assigned and x.name not in self.loops and x.name not in self.alias
                   for x in ir.walk_expr(e))

    def poly(self, e: ir.Expr) -> tuple[Poly, frozenset] | None:
        """An integer expression as a polynomial in tid components, loop variables,
        parameters and shapes, with the checks under which the machine value equals it."""
        if e.type is None or not e.type.is_int:
            return None
        axis = self.tid_axis(e)
        if axis is not None:
            return unknown(tid_unknown(axis)), frozenset()
        if isinstance(e, ir.Const):
            return const(int(e.value)), frozenset()
        if isinstance(e, ir.Shape):
            return unknown(f"shape:{e.array}:{e.axis}"), frozenset()
        if isinstance(e, ir.Var):
            if e.name in self.params:
                return unknown(f"param:{e.name}"), frozenset()
            return (unknown(f"loop:{e.name}"), frozenset()) if self.loop_var(e) else None
        if not isinstance(e, ir.Apply) or e.op not in (Op.CAST, Op.NEG, Op.ADD, Op.SUB, Op.MUL):
            return None
        args = [self.poly(a) for a in e.args]
        if any(a is None for a in args):
            return None
        checks = frozenset().union(*(c for _, c in args))
        if e.op is Op.CAST:
            p = args[0][0]
            return p, checks if _bits(e.type) >= _bits(e.args[0].type) else checks | {Check(p, _bits(e.type))}
        p = {Op.NEG: lambda: add((), args[0][0], -1), Op.ADD: lambda: add(args[0][0], args[1][0]),
             Op.SUB: lambda: add(args[0][0], args[1][0], -1), Op.MUL: lambda: mul(args[0][0], args[1][0])}[e.op]()
        return p, checks | {Check(p, _bits(e.type))}

    def nonnegative(self, e: ir.Expr, seen: frozenset = frozenset()) -> frozenset | None:
        """The checks under which every value of `e` is >= 0, or None."""
        if isinstance(e, ir.Const):
            return frozenset() if e.value >= 0 else None
        if isinstance(e, (ir.Tid, ir.Shape)) or self.tid_axis(e) is not None:
            return frozenset()
        if self.loop_var(e) and e.name not in seen:
            checks = frozenset()
            for f in self.loops[e.name]:
                c = self.nonnegative(f.start, seen | {e.name})
                if c is None or not (isinstance(f.step, ir.Const) and f.step.value > 0):
                    return None
                checks |= c
            return checks
        if isinstance(e, ir.Apply) and e.op is Op.MAX:  # max(a, b) >= a
            return next((c for c in (self.nonnegative(a, seen) for a in e.args) if c is not None), None)
        if isinstance(e, ir.Apply) and e.op in (Op.ADD, Op.MUL):  # >= 0 unless it wraps
            parts = [self.nonnegative(a, seen) for a in e.args]
            p = self.poly(e)
            if any(c is None for c in parts) or p is None:
                return None
            return p[1].union(*parts)
        return None

    def below(self, r: ir.Expr, stride: ir.Expr) -> frozenset | None:
        """The checks under which 0 <= r < stride for every value r takes: r a loop
        variable of range(start >= 0, stride) wherever it is bound."""
        if not self.loop_var(r):
            return None
        checks = frozenset()
        for f in self.loops[r.name]:
            c = self.nonnegative(f.start)
            if f.stop != stride or c is None or not (isinstance(f.step, ir.Const) and f.step.value > 0):
                return None
            checks |= c
        return checks

    def segment(self, e: ir.Expr) -> tuple | None:
        """("segment", axis, p) when e is a loop variable every binding of which is
        `range(p[t], p[t + 1])` (a positive constant step), t a tid component of
        `axis` and p an integer array the kernel never writes: thread t's values
        of e lie in [p[t], p[t + 1])."""
        if not self.loop_var(e):
            return None
        found = set()
        for f in self.loops[e.name]:
            start, stop = _uncast(f.start), _uncast(f.stop)
            if not (isinstance(f.step, ir.Const) and f.step.value > 0 and isinstance(start, ir.Load)
                    and isinstance(stop, ir.Load) and start.array == stop.array and len(start.indices) == 1
                    and len(stop.indices) == 1 and start.array not in self.written):
                return None
            axis = self.tid_axis(_uncast(start.indices[0]))
            if axis is None or self.indices.offset(_uncast(stop.indices[0])) != (axis, 1):
                return None
            found.add((axis, start.array))
        if len(found) != 1:
            return None
        axis, pointer = found.pop()
        return ("segment", axis, pointer)

    def row(self, e: ir.Expr) -> tuple[tuple, frozenset] | None:
        """(("row", axis, stride), checks) when e is tid * stride + r with 0 <= r <
        stride: distinct threads then get distinct rows if tid * stride + r does not wrap."""
        if not (isinstance(e, ir.Apply) and e.op is Op.ADD):
            return None
        for scaled, r in (e.args, e.args[::-1]):
            if isinstance(scaled, ir.Apply) and scaled.op is Op.MUL:
                for t, stride in (scaled.args, scaled.args[::-1]):
                    axis = self.tid_axis(t)
                    if axis is None or not self.invariant(stride):
                        continue
                    below, s = self.below(r, stride), self.poly(stride)
                    if below is None or s is None:
                        continue
                    product = mul(unknown(tid_unknown(axis)), s[0])
                    checks = below | s[1] | {Check(product, _bits(scaled.type)),
                                             Check(add(product, unknown(f"loop:{r.name}")), _bits(e.type))}
                    return ("row", axis, stride), checks
        return None

    def exactness(self, checks: frozenset) -> Exactness:
        """`checks` with the ranges of the loop variables they mention (and theirs)."""
        ranges: dict[str, tuple] = {}
        todo = [u for c in checks for m, _ in c.value for u in m]
        while todo:
            u = todo.pop()
            if not u.startswith("loop:") or u in ranges:
                continue
            rs = []
            for f in self.loops[u[5:]]:
                start, stop = self.poly(f.start), self.poly(f.stop)
                if start is None and self.nonnegative(f.start) is not None:
                    start = const(0), self.nonnegative(f.start)  # max(n - 2, 0): at least 0
                for b in (start, stop):
                    if b is not None:
                        checks |= b[1]
                        todo += [x for m, _ in b[0] for x in m]
                step = f.step.value if isinstance(f.step, ir.Const) else 0
                rs.append((start and start[0], stop and stop[0], (step > 0) - (step < 0)))
            ranges[u] = tuple(rs)
        order = [f"loop:{v}" for v in self.loops]  # first binding first
        return Exactness(checks, tuple(Loop(u, ranges[u]) for u in order if u in ranges))


def _uncast(e: ir.Expr) -> ir.Expr:
    while isinstance(e, ir.Apply) and e.op is Op.CAST:
        e = e.args[0]
    return e


def _slab(indices: tuple[ir.Expr, ...], ctx: _Context) -> tuple[tuple, frozenset]:
    """(position, ("tid", axis, c)) for each index position that is a tid
    component plus a constant c (ir/indices.py), (position, ("row", axis,
    stride)) for a flattened own row, or (position, ("segment", axis, p)) for a
    segment; with the checks the rows rely on."""
    out = []
    checks = frozenset()
    for pos, e in enumerate(indices):
        offset = ctx.indices.offset(e)
        if offset is not None:
            out.append((pos, ("tid", *offset)))
            continue
        segment = ctx.segment(e)
        if segment is not None:
            out.append((pos, segment))
            continue
        row = ctx.row(e)
        if row is not None:
            out.append((pos, row[0]))
            checks |= row[1]
    return tuple(out), checks


def own_arrays(k: ir.Kernel) -> frozenset[str]:
    """Arrays all of whose accesses lie in the accessing thread's own slab."""
    return _own(k)[0]


def _own(k: ir.Kernel) -> tuple[frozenset[str], dict[str, Exactness], tuple]:
    """`own_arrays`, for those with flattened rows the checks under which
    the rows are exact, and those read in segments as (array, p, axis)."""
    if k.tid_ndim == 0:
        return frozenset(), {}, ()
    ctx = _Context(k)
    slabs: dict[str, set] = {}
    checks: dict[str, frozenset] = {}

    def note(array, indices):
        slab, c = _slab(indices, ctx)
        slabs.setdefault(array, set()).add(slab)
        checks[array] = checks.get(array, frozenset()) | c

    for s in ir.walk_stmts(k.body):
        if isinstance(s, (ir.Store, ir.AtomicAdd)):
            note(s.array, s.indices)
    for e in ir.all_exprs(k.body):
        if isinstance(e, ir.Load):
            note(e.array, e.indices)
    out = set()
    segments = []
    for a, found in slabs.items():
        if len(found) != 1:
            continue
        slab = next(iter(found))
        axes = [x[1] for _, x in slab]
        if sorted(axes) != list(range(k.tid_ndim)):
            continue
        segmented = [(a, x[2], x[1]) for _, x in slab if isinstance(x, tuple) and x[0] == "segment"]
        if segmented and a in ctx.written:  # disjoint only if p is non-decreasing: never for a race proof
            continue
        out.add(a)
        segments += segmented
    return frozenset(out), {a: ctx.exactness(checks[a]) for a in sorted(out) if checks[a]}, tuple(sorted(segments))


def launch_facts(k: ir.Kernel) -> LaunchFacts:
    """The access facts of one typed kernel (see module doc)."""
    written = frozenset(s.array for s in ir.walk_stmts(k.body) if isinstance(s, (ir.Store, ir.AtomicAdd)))
    atomic = frozenset(s.array for s in ir.walk_stmts(k.body) if isinstance(s, ir.AtomicAdd))
    own, rows, segments = _own(k)
    loaded = {e.array for e in ir.all_exprs(k.body) if isinstance(e, ir.Load)} | atomic
    ix = indices(k)
    overwritten = frozenset(a for a in written - loaded if _stores_own_element(k.body, a, ix, k.tid_ndim))
    saved = frozenset(a for a in overwritten if all(_is_own_element(s.indices, ix, k.tid_ndim)
                                                    for s in ir.walk_stmts(k.body)
                                                    if isinstance(s, ir.Store) and s.array == a))
    return LaunchFacts(own, atomic, written, tuple(rows.items()), overwritten, segments, saved, move(k))


def _is_own_element(idx: tuple, ix: Indices, ndim: int) -> bool:
    """Whether `idx` are exactly (tid[0], ..., tid[ndim - 1])."""
    return len(idx) == ndim and all(ix.offset(e) == (axis, 0) for axis, e in enumerate(idx))


def _stores_own_element(body, array: str, ix: Indices, ndim: int) -> bool:
    """Whether every path through `body` stores `array` at the thread's own element (the IR has no early
    exit: a return is lowered to branches): a store on both sides of a branch counts, one inside a loop does
    not (the loop may run no iteration)."""
    for s in body:
        if isinstance(s, ir.Store) and s.array == array and _is_own_element(s.indices, ix, ndim):
            return True
        if isinstance(s, ir.If) and _stores_own_element(s.then, array, ix, ndim) and \
                _stores_own_element(s.orelse, array, ix, ndim):
            return True
    return False


def adjoint_is_exclusive(facts: LaunchFacts, array: str) -> bool:
    """Whether accumulating into `array`'s shadow needs no atomic (module doc)."""
    return array in facts.own
