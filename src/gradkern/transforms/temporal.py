"""Temporal blocking of a 1-D, 2-D or 3-D stencil step (docs/checkpointed-loops.md, "Temporal blocking of
recomputed steps" and "2-D steps"): from a step kernel that maps a state array `src` to `dst`, a kernel that runs
`steps` launches of it over ping-pong buffers in one pass over memory, with the same result to the bit.

The step must be a pure stencil step, which `blocked_kernel` proves or refuses with the reason:

* one to three launch axes; `src` and `dst` arrays of one dtype with one dimension per launch axis;
* it writes `dst` and nothing else, only at the thread's own index (`tid + 0` in each dimension, through the
  index analysis of ir/indices.py), on every path through the body (so every element of the launch is
  overwritten: a thread that skipped its store would leave an element of two steps before, which a tile
  cannot know);
* it never reads `dst`, and reads `src` only at `tid + c` for constant c (2-D: `[tid[0] + c, tid[1] + c']`,
  3-D likewise, after unrolling short offset loops, transforms/unroll.py); the reach r is the largest |c| (of
  axis 0: the other axes are never tiled, so c' may be anything the step's own launch reads); other arrays it
  reads anywhere (never written: the step writes only `dst`);
* no atomic adds.

A 2-D (3-D) step is tiled along axis 0 only: a tile is a band of whole rows (planes), every stage runs over all
their points, and the other axes' indices stay the global ones, so the step's own boundary branches on them apply
as in its launch; everything below about points holds for rows (planes).

Then step t's element g depends only on step t-1's elements g-r … g+r, computed by the same statements with
the thread index g, so each element of the last step can be computed from a window of the first state: the
blocked kernel gives each of its `workers` threads a contiguous run of tiles of `tile` points; per tile it
runs the k stages in two rows of `scratch` (its own: rows 2p and 2p+1, `tile + 2·k·r` wide), stage s over
the tile widened by (k-1-s)·r on each side — narrowed by r per stage at an artificial tile end, the global
ends 0 and n kept, where the step's own boundary branches apply because the thread index is global — and the
last stage writes the tile of `dst`. Every element is computed by the same expression on the same operands as
in the sequential launches, so the result is bit-identical (tests/transforms/test_temporal.py checks it on
random stencils against sequential launches; 2-D: test_temporal_2d.py). What a launch needs beyond the
step's (the runtime checks it, runtime/blocked.py): `steps >= 2`, src and dst distinct buffers of the launch's
shape. The kernel leaves `src` as it was; runtime/blocked.py runs one or two launches beside it so that both
buffers end as the sequential launches leave them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..ir import build as b
from ..ir import nodes as ir
from ..ir.indices import indices
from ..ir.names import TEMPORAL
from ..ir.ops import Op
from ..ir.rewrite import map_expr, with_blocks, with_exprs
from ..ir.types import I64, Array
from .split import split_interior
from .unroll import unroll_offset_loops

# the parameters the blocked kernel takes after the step's own, in this order
# (EXTENT1, EXTENT2: the launch's extents on axes 1 and 2, only for a 2-D or 3-D step)
SCRATCH, EXTENT, TILES, TILE, STEPS, WORKERS, EXTENT1, EXTENT2 = (TEMPORAL + n for n in (
    "scratch", "n", "ntiles", "tile", "steps", "workers", "ny", "nz"))
_LOCALS = _P, _T, _I0, _I1, _LO, _HI, _A, _B, _G, _S, _RD, _WR, _IL, _IH, _H, _JL, _JH, _Q, _QL, _QH = tuple(
    TEMPORAL + n for n in ("p", "t", "i0", "i1", "lo", "hi", "a", "b", "g", "s", "rd", "wr", "il", "ih", "h", "jl",
                           "jh", "q", "ql", "qh"))
_AXES, _EXTENTS, _SPLITS = (_G, _H, _Q), (EXTENT, EXTENT1, EXTENT2), ((_IL, _IH), (_JL, _JH), (_QL, _QH))


@dataclass(frozen=True)
class Blocked:
    """The blocked kernel of a step (None when refused, with the reason) and the step's reach r."""

    kernel: ir.Kernel | None
    reach: int = 0
    reason: str = ""


def _refused(reason: str) -> Blocked:
    return Blocked(None, 0, reason)


def _always_stores(body: tuple[ir.Stmt, ...], dst: str) -> bool:
    """Whether every path through `body` stores into `dst` (loops may run no iteration: they do not count)."""
    for s in body:
        if isinstance(s, ir.Store) and s.array == dst:
            return True
        if isinstance(s, ir.If) and _always_stores(s.then, dst) and _always_stores(s.orelse, dst):
            return True
    return False


def stencil_reach(k: ir.Kernel, src: str, dst: str) -> int | str:
    """The reach r of a pure stencil step from `src` to `dst` (module doc) along launch axis 0, or why it is not
    one."""
    params = {p.name: p for p in k.params}
    nd = k.tid_ndim
    if nd not in (1, 2, 3):
        return f"it launches over {nd} axes (temporal blocking is built for 1-D to 3-D steps only)"
    for name in (src, dst):
        t = params[name].type if name in params else None
        if not isinstance(t, Array) or t.ndim != nd:
            return f"'{name}' is not a {nd}-D array"
    if params[src].type != params[dst].type:
        return f"'{src}' and '{dst}' differ in dtype"
    if k.interior is not None or k.deferred is not None:
        return "the step is already split or folded"
    ix = indices(k)
    reach = 0
    for s in ir.walk_stmts(k.body):
        if isinstance(s, ir.AtomicAdd):
            return f"it adds atomically to '{s.array}'"
        if isinstance(s, ir.Store):
            if s.array != dst:
                return f"it writes '{s.array}', not only '{dst}'"
            if any(ix.offset(e) != (d, 0) for d, e in enumerate(s.indices)):
                return f"it writes {s.target}, not only its own element of '{dst}'"
    for e in ir.all_exprs(k.body):
        if isinstance(e, ir.Tid) and e.axis >= nd:
            return "it reads a thread index of another axis"
        if isinstance(e, ir.Load) and e.array == dst:
            return f"it reads '{dst}', which it writes"
        if isinstance(e, ir.Load) and e.array == src:
            offs = [ix.offset(x) for x in e.indices]
            if any(off is None or off[0] != d for d, off in enumerate(offs)):
                return f"it reads {e.target}, not at a constant offset of the thread index"
            reach = max(reach, abs(offs[0][1]))
    if not _always_stores(k.body, dst):
        return f"some path through it does not store into '{dst}'"
    return reach


def _tids(e: ir.Expr) -> ir.Expr | None:
    """The thread index of axis 0 as g, of axis 1 as h, of axis 2 as q (map_expr's `pre`)."""
    if isinstance(e, ir.Tid):
        at = b.var(_AXES[e.axis], I64)
        return b.cast(at, e.type) if e.type is not None else at
    return None


def _stage(body: tuple[ir.Stmt, ...], src: str, dst: str, read: ir.Expr | None,
           write: ir.Expr | None) -> tuple[ir.Stmt, ...]:
    """The step's body for the thread index g (2-D: (g, h)): reads of `src` from scratch row `read` (None: `src`
    itself) at row g + c - lo (2-D: the band's row g + c - lo, column h + c' as it was), its store into scratch
    row `write` (None: `dst` itself) at g - lo (2-D: row g - lo, column h)."""
    lo = b.var(_LO, I64)

    def pre(e: ir.Expr) -> ir.Expr | None:
        if isinstance(e, ir.Load) and e.array == src and read is not None:
            at = b.sub(b.index(map_expr(e.indices[0], pre=pre)), lo)
            return replace(e, array=SCRATCH, indices=(read, at, *(map_expr(x, pre=pre) for x in e.indices[1:])))
        return _tids(e)

    def fix(e: ir.Expr) -> ir.Expr:
        return map_expr(e, pre=pre)

    def block(stmts: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        out = []
        for s in stmts:
            s = with_blocks(with_exprs(s, fix), block)
            if isinstance(s, ir.Store) and s.array == dst and write is not None:
                s = replace(s, array=SCRATCH, indices=(write, b.sub(b.index(s.indices[0]), lo), *s.indices[1:]))
            out.append(s)
        return tuple(out)

    return block(body)


def _loop(var: str, start: ir.Expr, stop: ir.Expr, body: tuple[ir.Stmt, ...]) -> ir.For:
    return ir.For(var, start, stop, b.const(1, I64), body)


def _three(var: str, lo_name: str, hi_name: str, start: ir.Expr, stop: ir.Expr, lo: ir.Expr, hi: ir.Expr,
           outside: tuple[ir.Stmt, ...], middle: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
    """`var` over [start, stop) in three loops: `middle` over [lo, hi) clamped into it (lo_name, hi_name),
    `outside` before and after."""
    il, ih = b.var(lo_name, I64), b.var(hi_name, I64)
    return (ir.Assign(lo_name, b.apply(Op.MAX, start, b.apply(Op.MIN, stop, lo))),
            ir.Assign(hi_name, b.apply(Op.MAX, il, b.apply(Op.MIN, stop, hi))),
            _loop(var, start, il, outside), _loop(var, il, ih, middle), _loop(var, ih, stop, outside))


def _points(k: ir.Kernel, src: str, dst: str, start: ir.Expr, stop: ir.Expr, read: ir.Expr | None,
            write: ir.Expr | None) -> tuple[ir.Stmt, ...]:
    """The step at every point g of [start, stop) (2-D, 3-D: every row or plane g of it, each over all its
    points): where the step has an interior without boundary tests (transforms/split.py, as the CPU prints the
    step's own launch), three loops on each split axis, the interior's in the middle, whose innermost loop has no
    branch and vectorises; else one loop an axis. An inner axis's range may read the outer axes' indices
    (`ir.AxisRange`): it is computed inside their loops."""
    general = _stage(k.body, src, dst, read, write)
    inner = _stage(k.interior.body, src, dst, read, write) if k.interior is not None else None
    for axis in range(k.tid_ndim - 1, -1, -1):
        first, last = (start, stop) if axis == 0 else (b.const(0, I64), b.var(_EXTENTS[axis], I64))
        split = k.interior.on(axis) if k.interior is not None else None
        if inner is not None and split is not None:
            hi = b.index(map_expr(split.hi, pre=_tids)) if split.hi is not None else b.var(_EXTENTS[axis], I64)
            inner = _three(_AXES[axis], *_SPLITS[axis], first, last, b.index(map_expr(split.lo, pre=_tids)), hi,
                           general, inner)
        elif inner is not None:
            inner = (_loop(_AXES[axis], first, last, inner),)
        general = (_loop(_AXES[axis], first, last, general),)
    return inner if inner is not None else general


def blocked_kernel(k: ir.Kernel, src: str, dst: str) -> Blocked:
    """The blocked form of typed step kernel `k` from `src` to `dst` (module doc), or the reason it is refused.
    Its parameters: the step's, then SCRATCH (2·workers rows of tile + 2·steps·r; 2-D: 2·workers bands of
    tile + 2·steps·r rows of ny), EXTENT (the step's launch extent n, on axis 0), TILES (ceil(n / tile)), TILE,
    STEPS (>= 2) and WORKERS, and for a 2-D or 3-D step EXTENT1 (ny) and EXTENT2 (nz, 3-D); it is launched over
    `workers` threads."""
    if src == dst:
        return _refused("the step reads and writes the same array")
    k = unroll_offset_loops(k)
    reach = stencil_reach(k, src, dst)
    if isinstance(reach, str):
        return _refused(reach)
    k = split_interior(k)
    i64 = lambda v: b.const(v, I64)  # noqa: E731
    v = lambda name: b.var(name, I64)  # noqa: E731
    p, t, lo, hi, n, s = v(_P), v(_T), v(_LO), v(_HI), v(EXTENT), v(_S)
    r = i64(reach)
    two_p = b.mul(i64(2), p)

    def bounds(stage: ir.Expr) -> list[ir.Stmt]:
        """a, b of stage `stage`: the widened tile, one reach narrower per stage at an artificial end."""
        width = b.mul(b.add(stage, i64(1)), r)
        return [ir.Assign(_A, b.select(b.cmp(Op.GT, lo, i64(0)), b.add(lo, width), i64(0))),
                ir.Assign(_B, b.select(b.cmp(Op.LT, hi, n), b.sub(hi, width), n))]

    row = lambda stage: b.add(two_p, b.apply(Op.MOD, stage, i64(2)))  # noqa: E731
    last = b.sub(v(STEPS), i64(1))
    span = b.mul(v(STEPS), r)
    tile_body = (
        ir.Assign(_I0, b.mul(t, v(TILE))),
        ir.Assign(_I1, b.apply(Op.MIN, b.add(v(_I0), v(TILE)), n)),
        ir.Assign(_LO, b.apply(Op.MAX, b.sub(v(_I0), span), i64(0))),
        ir.Assign(_HI, b.apply(Op.MIN, b.add(v(_I1), span), n)),
        # stage 0: src -> scratch row 2p
        *bounds(i64(0)),
        ir.Assign(_WR, two_p),
        *_points(k, src, dst, v(_A), v(_B), None, v(_WR)),
        # stages 1 … steps-2: scratch -> scratch
        _loop(_S, i64(1), last, (
            *bounds(s),
            ir.Assign(_RD, row(b.sub(s, i64(1)))),
            ir.Assign(_WR, row(s)),
            *_points(k, src, dst, v(_A), v(_B), v(_RD), v(_WR)),
        )),
        # the last stage: scratch -> the tile of dst
        ir.Assign(_RD, row(b.sub(last, i64(1)))),
        *_points(k, src, dst, v(_I0), v(_I1), v(_RD), None),
    )
    first = b.apply(Op.FLOORDIV, b.mul(p, v(TILES)), v(WORKERS))
    end = b.apply(Op.FLOORDIV, b.mul(b.add(p, i64(1)), v(TILES)), v(WORKERS))
    body = (ir.Assign(_P, ir.Tid(0, type=I64)), _loop(_T, first, end, tile_body))
    nd = k.tid_ndim
    scratch = ir.Param(SCRATCH, Array(k.param(dst).type.dtype, nd + 1), is_array=True, written=True)
    extents = (EXTENT, TILES, TILE, STEPS, WORKERS, *_EXTENTS[1:nd])
    extra = (scratch, *(ir.Param(name, I64) for name in extents))
    ours = tuple((name, I64) for name in _LOCALS)
    blocked = replace(k, name=f"{k.name}_blocked", params=k.params + extra, body=body, locals=k.locals + ours,
                      thread_indices=frozenset(), interior=None)
    return Blocked(blocked, reach)


__all__ = ["Blocked", "blocked_kernel", "stencil_reach", "SCRATCH", "EXTENT", "TILES", "TILE", "STEPS", "WORKERS",
           "EXTENT1", "EXTENT2"]
