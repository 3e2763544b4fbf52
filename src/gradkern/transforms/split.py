"""Index-set splitting of the launch axes.

Stencil kernels test the thread index against the boundaries (`j == 0`,
`i == n - 1`, `0 < j < n - 1`); inside the launch loops such a branch stops
vectorisation. For each launch axis, innermost first, this pass finds
comparisons of that axis's tid plus or minus a constant (or of a local that
holds such a value wherever it is set, `jm = j - 1`) with values that do not
vary along that axis or any inner one,
chooses a range lo <= tid < hi in which each comparison has a known value, and
folds those values into a copy of the body. The kernel gets that copy with one
range per axis that had such tests (`Kernel.interior`): it computes what the
body computes for every thread inside all the ranges, since each fold replaced
a test by the value it has there. The CPU backend prints the general body for
threads outside a range, the interior body inside. Which side of a test is
"interior" is a heuristic (a constant bound is a lower boundary, and so is one
in which extents cancel, `gn - M + c`; any other an upper one); every choice is
correct, only the interior's size depends on it.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import build as b
from ..ir import nodes as ir
from ..ir.indices import indices
from ..ir.names import GATHER_EXTENT
from ..ir.ops import COMPARISONS, Op
from ..ir.rewrite import map_expr, rename_locals, with_blocks, with_exprs
from ..ir.types import I64
from .simplify import simplify_block, simplify_expr

_FLIP = {Op.LT: Op.GT, Op.LE: Op.GE, Op.GT: Op.LT, Op.GE: Op.LE, Op.EQ: Op.EQ, Op.NE: Op.NE}
# A bound is `y - c` (+ 1) computed in int64, for a test `tid + c op y`: with |c| < _OFFSET and y clamped into
# [-_LIMIT, _LIMIT] that cannot wrap, and the clamp decides no test differently (|tid + c| < _LIMIT in any launch).
_LIMIT = 2**62
_OFFSET = 2**31


def _small(y: ir.Expr) -> bool:
    """y is a shape or a tid, plus or minus a small constant: far inside int64 in any launch."""
    if isinstance(y, (ir.Shape, ir.Tid)):
        return True
    if isinstance(y, ir.Apply) and y.op is Op.CAST:
        return _small(y.args[0])
    return (isinstance(y, ir.Apply) and y.op in (Op.ADD, Op.SUB) and _small(y.args[0])
            and isinstance(y.args[1], ir.Const) and abs(y.args[1].value) < _OFFSET)


def _clamped(y: ir.Expr) -> ir.Expr:
    """int64 `y` moved into [-_LIMIT, _LIMIT] where it might lie outside."""
    if isinstance(y, ir.Const):
        return b.const(min(max(y.value, -_LIMIT), _LIMIT), I64)
    if _small(y):
        return y
    return b.apply(Op.MIN, b.apply(Op.MAX, y, b.const(-_LIMIT, I64)), b.const(_LIMIT, I64))


def _extents(y: ir.Expr) -> int | None:
    """How many extents (array shapes, a gather's launch extents) y adds, less those it subtracts, when y
    is built from them and integer constants by + and -; else None. Where they cancel (`gn - M + c`, a
    wrapped gather neighbour's test) the bound is a constant on every launch that is not past its arrays,
    so it is a lower edge like a constant."""
    if isinstance(y, ir.Const):
        return 0 if isinstance(y.value, int) else None
    if isinstance(y, ir.Shape) or isinstance(y, ir.Var) and y.name.startswith(GATHER_EXTENT):
        return 1
    if isinstance(y, ir.Apply) and y.op is Op.CAST:
        return _extents(y.args[0])
    if isinstance(y, ir.Apply) and y.op in (Op.ADD, Op.SUB):
        x, z = _extents(y.args[0]), _extents(y.args[1])
        if x is None or z is None:
            return None
        return x + z if y.op is Op.ADD else x - z
    return None


class _Splitter:
    """The folds of one launch axis: which locals hold its tid, which values are
    invariant along it, and the bounds its folded tests need."""

    def __init__(self, k: ir.Kernel, axis: int):
        self.k = k
        self.axis = axis
        self.params = {p.name for p in k.params}
        self.assigned = {s.name for s in ir.walk_stmts(k.body) if isinstance(s, ir.Assign)} | \
            {s.var for s in ir.walk_stmts(k.body) if isinstance(s, ir.For)}
        # which indices are tid[axis] + c, through locals (`j = tid[1]`, then `jm = j - 1`; ir/indices.py)
        self.indices = indices(k)
        self.lower: list[ir.Expr] = []
        self.upper: list[ir.Expr] = []

    def offset(self, e: ir.Expr) -> int | None:
        """c when e is tid[axis] + c (c an integer constant), through aliases, else None (ir/indices.py)."""
        return self.indices.offset_on(e, self.axis)

    def invariant(self, e: ir.Expr) -> bool:
        """Constant along this axis and every inner one, and computable before their
        loops: built from constants, parameters nobody assigns, shapes and the tid
        components of outer axes (never a local: its value is a thread's)."""
        for x in ir.walk_expr(e):
            if isinstance(x, ir.Tid) and x.axis >= self.axis:
                return False
            if isinstance(x, ir.Var) and (x.name in self.assigned or x.name not in self.params):
                return False
            if isinstance(x, (ir.Load, ir.Select, ir.InBounds)):
                return False
        return True

    def test(self, e: ir.Apply) -> bool | None:
        """The value of comparison `e` in the interior, recording the bound it needs."""
        op, (x, y) = e.op, e.args
        c = self.offset(x)
        if c is None:
            c, op, (x, y) = self.offset(y), _FLIP[op], (y, x)
        if c is None or abs(c) >= _OFFSET or not self.invariant(y) or not y.type.is_int:
            return None
        bound = simplify_expr(b.sub(_clamped(b.cast(y, I64)), b.const(c, I64)))  # j op bound
        one = b.const(1, I64)
        low = isinstance(bound, ir.Const) or _extents(y) == 0
        if op in (Op.EQ, Op.NE):
            (self.lower.append(b.add(bound, one)) if low else self.upper.append(bound))
            return op is Op.NE
        if op in (Op.LT, Op.LE):  # j < bound holds below it
            edge = bound if op is Op.LT else b.add(bound, one)
            (self.lower.append(edge) if low else self.upper.append(edge))
            return not low
        edge = b.add(bound, one) if op is Op.GT else bound  # j > bound holds from edge on
        (self.lower.append(edge) if low else self.upper.append(edge))
        return low

    def fold(self, e: ir.Expr) -> ir.Expr:
        """`e` with each boundary test replaced by its interior value (pre-order,
        left to right: the bounds are recorded in that order)."""
        def known(x: ir.Expr) -> ir.Expr | None:
            if isinstance(x, ir.Apply) and x.op in COMPARISONS:
                value = self.test(x)
                if value is not None:
                    return ir.Const(value, type=x.type)
            return None
        return map_expr(e, pre=known)

    def block(self, body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        return tuple(self.stmt(s) for s in body)

    def stmt(self, s: ir.Stmt) -> ir.Stmt:
        if not isinstance(s, ir.For):  # a loop's bounds are left as written
            s = with_exprs(s, self.fold)
        return with_blocks(s, self.block)


def _fold_chain(xs: list[ir.Expr], op: Op) -> ir.Expr:
    xs = list(dict.fromkeys(simplify_expr(x) for x in xs))  # each bound once
    out = xs[0]
    for x in xs[1:]:
        out = b.apply(op, out, x)
    return simplify_expr(out)


def split_interior(k: ir.Kernel) -> ir.Kernel:
    """`k` with an interior body and its per-axis ranges, for the launch axes
    with boundary tests; `k` unchanged when no axis has any."""
    if k.tid_ndim == 0 or k.interior is not None:
        return k
    body = simplify_block(k.body)
    ranges: list[ir.AxisRange] = []
    for axis in reversed(range(k.tid_ndim)):
        sp = _Splitter(k, axis)
        folded = simplify_block(sp.block(body))
        if not (sp.lower or sp.upper) or folded == body:
            continue
        lo = _fold_chain([b.const(0, I64), *sp.lower], Op.MAX)
        hi = _fold_chain(sp.upper, Op.MIN) if sp.upper else None
        ranges.insert(0, ir.AxisRange(axis, lo, hi))
        body = folded
    if not ranges:
        return k
    return replace(k, interior=ir.Interior(tuple(ranges), body))


def with_interior_of(k: ir.Kernel, twin: ir.Kernel) -> ir.Kernel:
    """`k` with the interior of `twin`, a split kernel with k's parameters that computes what k computes for
    every thread (a looped gather's unrolled twin, transforms/gather.py): its locals renamed apart from k's.
    Correct for any such twin: inside the ranges the twin's interior computes what the twin does, which is
    what k does; elsewhere k's own body runs. `k` unchanged when the twin has no interior."""
    if twin.interior is None or k.interior is not None or k.params != twin.params:
        return k
    bounds = [e for r in twin.interior.ranges for e in (r.lo, r.hi) if e is not None]
    mine = {n for n, _ in twin.locals}
    if any(isinstance(x, ir.Var) and x.name in mine for e in bounds for x in ir.walk_expr(e)):
        return k  # a range reading a local (not made by split_interior): not renamed, so not taken
    taken = {n for n, _ in k.locals} | {p.name for p in k.params} | {n for n, _ in twin.locals}
    renamed: dict[str, str] = {}
    for n, _ in twin.locals:
        if n in dict(k.locals):
            fresh = f"{n}_in"
            while fresh in taken:
                fresh += "_"
            taken.add(fresh)
            renamed[n] = fresh
    locals_ = dict(k.locals) | {renamed.get(n, n): t for n, t in twin.locals}
    return replace(k, locals=tuple(sorted(locals_.items())),
                   thread_indices=k.thread_indices | {renamed.get(n, n) for n in twin.thread_indices},
                   interior=ir.Interior(twin.interior.ranges, rename_locals(twin.interior.body, renamed)))
