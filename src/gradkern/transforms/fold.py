"""The reverse's last work folded into a stencil's gather (docs/adjoint-forms.md, section 6).

Once the gather (transforms/gather.py) computes a stencil's scattered adds, the reverse kernel of a
stencil such as un[i] = f(u[i-1], u[i], u[i+1], c) has jobs left: clear the consumed output shadow
(`d_un[i] = 0`, each thread its own elements), sum the Active scalars' terms, and add into the shadows
of arrays the thread reads or updates at its own element (`d_vel[i, j] += ...` of a wave step). All fold
into the gather, and the reverse launch goes:

* the sums: the gather's own copy (offset 0, thread t replaying itself) keeps the reverse's per-thread
  sums and their atomic adds into the accumulators (`gather_kernel(..., own_sums=...)`); the other
  copies drop them, as before;
* the own stores: the own copy also makes the reverse's stores into a shadow when every access of it in
  the reverse is in the thread's own slab (`own_slab`: for each launch axis one index position holding
  tid + c, the same in every access) and no other copy of the gather loads it (`Gather.stores_kept`).
  Then gather thread t is the only thread of the gather that touches those elements (launch thread t's,
  which no other launch thread touches), and it makes the same stores on the same values, in the
  reverse's order: the shadows are bit for bit the reverse launch's (docs/adjoint-forms.md, section 6);
* the clearing: the reverse's other (zero) stores, with what their indices and conditions need, become the
  gather kernel's deferred statements (`ir.Deferred`) over the launch domain. They run after every
  gather thread; a backend that runs rows in order within chunks runs them row-lagged instead.

The lag. Gather row t (launch axis 0) reads a consumed shadow s at rows t + d, d in D_s (constants,
from its loads). Thread i's zero store at i + z clears row x = i + z, which gather rows x - max D_s to
x - min D_s read; the last of them is row i + z - min D_s. So deferred row i may run right after gather
row i + lag with `lag` = max over the stores of (z - min D_s). All those readers ran before it in the
same chunk when the first, i + z - max D_s = (i + lag) - (lag - z + max D_s), is at or after the chunk's
start: `window` = max over the stores of (lag - z + max D_s). The inner axes need nothing: a row's inner
threads all run before the next row starts. For Allen–Cahn (D = {-1, 0, 1}, z = 0): lag 1, window 2.

Refused (None: the reverse launch stays) where this is not proved: a reverse with any other write left
(a store other than zero into an array that is not an own shadow no other copy reads, atomics into shadows),
a zero store outside the own copy inside a loop or not at
`tid + z` on every axis (no wrap), a consumed shadow the gather also computes, one the gather reads at an
index that is not a constant offset of tid on axis 0, deferred statements that read a shadow or an
accumulator or an own-stored shadow, and Active sums or own stores where the gather has no own copy (no
offset 0, or a looped gather).
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import build as b
from ..ir import names
from ..ir import nodes as ir
from ..ir.indices import indices
from ..ir.names import GATHER_EXTENT
from ..ir.rewrite import rename_locals, with_blocks
from ..ir.types import I64
from .dce import eliminate_dead
from .gather import Gather, Offset, _Offsets, gather_kernel
from .simplify import without


def _zero(e: ir.Expr) -> bool:
    return isinstance(e, ir.Const) and not isinstance(e.value, bool) and e.value == 0


def _writes(body: tuple[ir.Stmt, ...], looped: bool = False) -> list[tuple[ir.Stmt, bool]]:
    """Every store and atomic add of `body`, with whether it is inside a loop."""
    out = []
    for s in body:
        if isinstance(s, (ir.Store, ir.AtomicAdd)):
            out.append((s, looped))
        for blk in ir.blocks(s):
            out += _writes(blk, looped or isinstance(s, (ir.For, ir.While)))
    return out


def _merged(body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
    """`body` with each `if` whose branches are the same replaced by that branch (a condition has no
    effect): the reverse clears `d_un[i]` in both arms of a boundary test, and the deferred row then has
    no branch left."""
    out: list[ir.Stmt] = []
    for s in body:
        s = with_blocks(s, _merged)
        if isinstance(s, ir.If) and s.then == s.orelse:
            out.extend(s.then)
        else:
            out.append(s)
    return tuple(out)


def own_slab(k: ir.Kernel, array: str) -> bool:
    """Whether every access of `array` in `k` is in the accessing thread's own slab, statically: for each
    launch axis a, some index position holds tid[a] + c_a (ir/indices.py) in every load, store and atomic
    add of it, with the same position and c_a in each. Two threads then differ at that position on an
    axis where their indices differ (adding a constant is injective): they never touch one element."""
    ix = indices(k)
    common: set[tuple[int, int, int]] | None = None  # (axis, position, c)
    for s in ir.walk_stmts(k.body):
        if isinstance(s, (ir.Store, ir.AtomicAdd)) and s.array == array:
            accesses = [s.indices]
        else:
            accesses = []
        accesses += [e.indices for x in ir.stmt_exprs(s) for e in ir.walk_expr(x)
                     if isinstance(e, ir.Load) and e.array == array]
        for idx in accesses:
            found = {(o[0], p, o[1]) for p, e in enumerate(idx) for o in [ix.offset(e)] if o is not None}
            common = found if common is None else common & found
    return common is not None and {a for a, _, _ in common} == set(range(k.tid_ndim))


def fold_reverse(source: ir.Kernel, rest: ir.Kernel, plan: dict[str, set[Offset]], taped: bool,
                 sums: frozenset[str], accumulators: frozenset[str]) -> Gather | None:
    """The gather of `plan` built from `source` (the split reverse) that also does all the work of
    `rest` (the reverse without the gathered adds): its stores into thread-own shadows that no other copy
    reads and its Active sums in the own copy, its other (zero) stores as deferred statements. None where
    that is not proved sound (the module's docstring)."""
    ndim = source.tid_ndim
    writes = _writes(rest.body)
    shadows = {names.shadow(p.name) for p in source.params if p.is_array}
    own = frozenset(s.array for s, _ in writes if isinstance(s, ir.Store) and s.array in shadows and
                    s.array not in plan and s.array not in accumulators and own_slab(source, s.array))
    adds = any(isinstance(s, ir.AtomicAdd) for s, _ in writes)
    g = gather_kernel(source, plan, taped, sums, own_sums=accumulators if adds else frozenset(), own_stores=own)
    kept = frozenset(g.stores_kept)
    stores = [s for s, _ in writes if isinstance(s, ir.Store) and s.array not in kept]
    if any(looped for s, looped in writes if isinstance(s, ir.Store) and s.array not in kept) or \
            any(not _zero(s.value) or s.array in plan or s.array in accumulators for s in stores) or \
            any(s.array not in accumulators for s, _ in writes if isinstance(s, ir.AtomicAdd)):
        return None
    at = _Offsets(rest)
    zs: list[tuple[str, int]] = []  # (consumed shadow, z on axis 0) per zero store
    for s in stores:
        found = at.of(s.indices)
        if found is None or len(found) != 1 or any(w for _, w in next(iter(found))):
            return None
        zs.append((s.array, next(iter(found))[0][0]))
    consumed = frozenset(a for a, _ in zs)
    if adds and not g.sums_kept:
        return None
    reads: dict[str, set[int]] = {a: set() for a in consumed}  # D_s on axis 0
    # a looped gather's unrolled twin lends the CPU its interior (gather.py): its reads count too
    for k in (g.kernel, *((g.unrolled,) if g.unrolled is not None else ())):
        gat = _Offsets(k)
        for e in ir.all_exprs(k.body):
            if isinstance(e, ir.Load) and e.array in consumed:
                found = gat.axis(e.indices[0], 0) if e.indices else None
                if found is None or any(w for _, w in found):
                    return None
                reads[e.array] |= {c for c, _ in found}
    lag = max([z - min(reads[a]) for a, z in zs if reads[a]], default=0)
    window = max([lag - z + max(reads[a]) for a, z in zs if reads[a]], default=0)
    deferred = eliminate_dead(without(rest, lambda s: isinstance(s, ir.AtomicAdd) or
                                      isinstance(s, ir.Store) and s.array in kept or
                                      isinstance(s, ir.Assign) and s.name in sums))
    body = _merged(deferred.body)
    if any(isinstance(e, ir.Load) and (e.array in consumed | kept or e.array in plan or e.array in accumulators)
           for e in ir.all_exprs(body)):
        return None
    own = {n for n, _ in deferred.locals}
    renamed = {n: names.deferred(n) for n in own}
    kernel = g.kernel
    local = dict(kernel.locals) | {renamed[n]: t for n, t in deferred.locals}
    extents = tuple(b.var(f"{GATHER_EXTENT}{a}", I64) for a in range(ndim))
    kernel = replace(kernel, locals=tuple(sorted(local.items())),
                     deferred=ir.Deferred(rename_locals(body, renamed), extents, lag, max(window, 0)))
    return replace(g, kernel=kernel, reverse_folded=True, folded=tuple(sorted(consumed)))


def without_folded(k: ir.Kernel, g: Gather, accumulators: frozenset[str]) -> ir.Kernel:
    """`k` (the fused kernel) without the work a folded gather `g` does: its stores into the shadows `g`
    clears or its own copy updates, and its adds into the Active scalars' accumulators."""
    folded = set(g.folded) | set(g.stores_kept)
    return without(k, lambda s: isinstance(s, ir.Store) and s.array in folded or
                   isinstance(s, ir.AtomicAdd) and s.array in accumulators)
