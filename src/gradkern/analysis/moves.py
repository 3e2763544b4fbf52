"""Pure moves: kernels whose reverse is exactly `d_src += d_dst; d_dst = 0` (docs/programs.md, "Renamed shadows").

A kernel is a *move* from `src` into `dst` when its body is, up to integer locals, exactly

    i, j, ... = gk.tid()                      # the thread's own element, every axis of the launch
    for m in range(dst.shape[3]):             # optional: one loop per trailing axis, over all of it
        dst[i, j, ..., m] = src[i, j, ..., m]

that is: one store, of one load, the same index expressions on both sides, the first `tid_ndim` of them the
thread's own tid components in order (ir/indices.py: `tid[axis] + 0` through any chain of aliases), each further
one the variable of an enclosing loop `range(0, a.shape[p], 1)` over that very position p (a in {dst, src}),
bound by nothing else; src and dst distinct float arrays of one dtype and of as many dimensions as indices (so
no cast); nothing else stored or atomically added, no branch or while loop, every other statement an
assignment of an integer or bool local that loads nothing (no float local, hence no Active scalar reaches
anything); no interior or deferred body. Anything else is refused: a scaled copy, `src[i] + 0.0`, a shifted
or permuted index, a guard, a partial loop, a second write.

What it proves, with the launch conditions `program/record.py: moved_positions` adds (a launch over exactly
dst's leading `tid_ndim` extents, dst and src of one shape, each its whole buffer, in no other argument): the
threads and loop iterations enumerate every element of dst exactly once, and each reads src at the same
element. The reverse of a store of a load is, per element e (DESIGN's table, transforms/reverse.py): g =
d_dst[e]; d_dst[e] = 0; d_src[e] += g; the load's partial is the identity, so nothing is multiplied. Over the
launch that is `d_src += d_dst; d_dst = 0` as whole arrays, with each element's add rounded once. A
program's sweep may then rename shadows in place of running it (program/renames.py).
tests/fuzz/test_moves_fuzz.py checks every accepted random kernel's generated reverse against that oracle.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import nodes as ir
from ..ir.indices import indices


@dataclass(frozen=True)
class Move:
    """A kernel's reverse is `d_src += d_dst; d_dst = 0` at a launch over dst's first `ndim` extents (module doc)."""

    dst: str
    src: str
    ndim: int  # the kernel's tid axes: a launch's dim must be exactly dst.shape[:ndim]


def _counts_from_zero(s: ir.For) -> bool:
    """Whether the loop is `range(0, stop, 1)`."""
    return isinstance(s.start, ir.Const) and s.start.value == 0 and not isinstance(s.start.value, bool) \
        and isinstance(s.step, ir.Const) and s.step.value == 1 and not isinstance(s.step.value, bool)


def move(k: ir.Kernel) -> Move | None:
    """The move `k` is, or None (module doc)."""
    if k.tid_ndim == 0 or k.interior is not None or k.deferred is not None:
        return None
    types = dict(k.locals)
    loops: list[ir.For] = []
    body = k.body
    store = None
    while store is None:
        rest = [s for s in body if not isinstance(s, ir.Assign)]
        for s in body:
            if isinstance(s, ir.Assign) and (types.get(s.name) is None or types[s.name].is_float
                                             or any(isinstance(e, ir.Load) for e in ir.walk_expr(s.value))):
                return None
        if len(rest) != 1:
            return None
        s = rest[0]
        if isinstance(s, ir.Store):
            store = s
        elif isinstance(s, ir.For) and _counts_from_zero(s):
            loops.append(s)
            body = s.body
        else:
            return None
    value = store.value
    if not isinstance(value, ir.Load) or value.array == store.array or value.indices != store.indices:
        return None
    params = {p.name: p for p in k.params}
    dst, src = params.get(store.array), params.get(value.array)
    if dst is None or src is None or not isinstance(dst.type, ir.Array) or dst.type != src.type \
            or not dst.type.dtype.is_float:
        return None
    idx = store.indices
    nd = k.tid_ndim
    if len(idx) != dst.type.ndim or len(idx) != nd + len(loops):
        return None
    ix = indices(k)
    if any(ix.offset(e) != (axis, 0) for axis, e in enumerate(idx[:nd])):
        return None
    binds: dict[str, int] = {}
    for s in ir.walk_stmts(k.body):
        name = s.name if isinstance(s, ir.Assign) else s.var if isinstance(s, ir.For) else None
        if name is not None:
            binds[name] = binds.get(name, 0) + 1
    trailing = list(idx[nd:])
    for f in loops:  # each loop runs its variable over all of one trailing position, bound by nothing else
        stop = f.stop
        at = [p for p, e in enumerate(trailing) if isinstance(e, ir.Var) and e.name == f.var]
        if binds.get(f.var) != 1 or len(at) != 1 or not isinstance(stop, ir.Shape) \
                or stop.array not in (dst.name, src.name) or stop.axis != nd + at[0]:
            return None
        trailing[at[0]] = None
    return Move(dst.name, src.name, nd)
