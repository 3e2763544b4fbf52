"""Two-phase gathers (a *pull*) for stencil adjoints beside constant index positions (docs/adjoint-forms.md,
section 8).

A lattice-Boltzmann step reads `f[q, x - e_q]` for nine constant q: an axis indexed by a constant beside
the launch axes' stencil offsets. The replay gather (transforms/gather.py) refuses it, and would replay a
neighbour's whole collision adjoint once per offset (nine times per cell) if it did not. A pull does what
a hand-written adjoint does instead:

1. the reverse (or the fused kernel) runs as before, except that each atomic add `dx[idx] += v` of a
   pulled shadow adds into a local of its *site* (one per distinct index), and each thread stores its
   sites' sums into scratch slots of its own tape row, `tape[tid, first + n]`, at its end;
2. a pull kernel over the gather domain adds, for element j, every neighbour's scratch value that lands
   there: for each site n and each offset o of its index (`tid + c + s·M` per launch axis, as the replay
   gather's), `dx[key, j] += tape[j - o, first + n]` where j - o is a thread and its index takes the arm
   of offset o (periodic selects, tested as the replay gather tests them: each add counted once).

Sound for every kernel it accepts: a site's index, with every local replaced by its one definition, is an
expression of the thread index, shapes, constants and unassigned scalar parameters only (no loads), so
the pull recomputes for thread j - o exactly the element the reverse would have added to; the scratch
holds exactly the sum of the thread's adds at that site (zero where none ran); the shadow is otherwise
neither loaded nor stored by the reverse, so moving its adds after the reverse changes no value read.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from ..ir import build as b
from ..ir import names
from ..ir import nodes as ir
from ..ir.ops import Op
from ..ir.rewrite import map_expr, with_blocks
from ..ir.types import I64, Scalar
from .gather import EXTENT, Gather, Offset, _all, _Offsets, described, plainly_accessed
from .reverse import TAPE


@dataclass(frozen=True)
class Site:
    """The atomic adds of one shadow at one index: `key` per index position its constant (None at a launch
    axis's position, in axis order), `indices` the index inlined (ir expressions of tid, shapes, constants
    and parameters), `offsets` where along the launch axes it lands."""

    array: str
    key: tuple[int | None, ...]
    indices: tuple[ir.Expr, ...]
    offsets: frozenset[Offset]


class _Inliner:
    """Locals replaced by their one definition (`_Offsets.defs`) or tid alias, down to the thread index,
    shapes, constants and unassigned scalar parameters; None for anything else (a load, a local assigned
    twice, a loop variable)."""

    def __init__(self, k: ir.Kernel, at: _Offsets):
        self.at = at
        assigned = {s.name for s in ir.walk_stmts(k.body) if isinstance(s, ir.Assign)} | \
            {s.var for s in ir.walk_stmts(k.body) if isinstance(s, ir.For)}
        self.params = {p.name for p in k.params if not p.is_array and p.name not in assigned}

    def __call__(self, e: ir.Expr, depth: int = 0) -> ir.Expr | None:
        if depth > 64:
            return None
        failed = False

        def pre(x: ir.Expr) -> ir.Expr | None:
            nonlocal failed
            if isinstance(x, ir.Load):
                failed = True
            elif isinstance(x, ir.Var):
                if x.name in self.at.alias:
                    axis, c = self.at.alias[x.name]
                    return b.add(ir.Tid(axis, type=I64), b.const(c, I64)) if c else ir.Tid(axis, type=I64)
                if x.name in self.at.defs:
                    out = self(self.at.defs[x.name], depth + 1)
                    if out is None:
                        failed = True
                        return x
                    return out
                if x.name not in self.params:
                    failed = True
            return None
        out = map_expr(e, pre=pre)
        return None if failed else out


def _slot(at: _Offsets, idx: tuple[ir.Expr, ...]) -> tuple[tuple[int | None, ...], frozenset[Offset]] | None:
    """An index's constant positions and offsets: each position a non-negative integer constant or, in order,
    a stencil index of launch axis 0, 1, ... (every axis once)."""
    key: list[int | None] = []
    axes: list[int] = []
    for p, e in enumerate(idx):
        r = at._resolve(e)
        if isinstance(r, ir.Const) and isinstance(r.value, int) and not isinstance(r.value, bool) and r.value >= 0:
            key.append(r.value)
        else:
            key.append(None)
            axes.append(p)
    if len(axes) != at.ndim:
        return None
    per_axis = [at.axis(idx[p], a) for a, p in enumerate(axes)]
    if any(x is None for x in per_axis):
        return None
    return tuple(key), frozenset(itertools.product(*(sorted(x) for x in per_axis)))


def _axis_positions(key: tuple[int | None, ...]) -> list[int]:
    return [p for p, c in enumerate(key) if c is None]


def pull_sites(k: ir.Kernel, shadows: set[str]) -> tuple[Site, ...]:
    """The sites of the shadows of `k` (a reverse kernel) that a pull can take: every access of the shadow is
    an atomic add at an index `_slot` reads and the inliner resolves, arm conditions included."""
    at = _Offsets(k)
    inline = _Inliner(k, at)
    found: dict[tuple, Site] = {}
    bad: set[str] = set()
    for s in ir.walk_stmts(k.body):
        if isinstance(s, ir.AtomicAdd) and s.array in shadows:
            slot = _slot(at, s.indices)
            idx = tuple(inline(e) for e in s.indices)
            if slot is None or any(e is None for e in idx) or \
                    any(_lands(at, inline, s.indices, slot[0], o) is None for o in slot[1]):
                bad.add(s.array)
                continue
            site = found.setdefault((s.array, idx), Site(s.array, slot[0], idx, slot[1]))
            if site.offsets != slot[1] or site.key != slot[0]:
                bad.add(s.array)
    bad |= plainly_accessed(k.body, shadows)
    # one thread per element: every site of a shadow has its launch axes at the same positions (`u[i, 0]` beside
    # `u[3, i]` would have threads 3 and 0 both add into u[3, 0])
    patterns: dict[str, set] = {}
    for (a, _), site in found.items():
        patterns.setdefault(a, set()).add(tuple(c is None for c in site.key))
    bad |= {a for a, p in patterns.items() if len(p) > 1}
    return tuple(site for (a, _), site in found.items() if a not in bad)


def _lands(at: _Offsets, inline: _Inliner, idx: tuple[ir.Expr, ...], key: tuple[int | None, ...],
           o: Offset) -> ir.Expr | bool | None:
    """Whether an add at `idx` lands at offset o (True, False, or a test inlined), None where the test cannot
    be inlined."""
    tests = [at._arm(idx[p], axis, o[axis]) for axis, p in enumerate(_axis_positions(key))]
    if any(t is False for t in tests):
        return False
    tests = [t for t in tests if t is not True]
    if not tests:
        return True
    out = inline(_all(tests))
    return out


def to_scratch(k: ir.Kernel, sites: tuple[Site, ...], first: int, tape_float: Scalar) -> ir.Kernel | None:
    """Phase 1: `k` with each atomic add into a site's shadow summed into the site's local, stored into tape
    slot `first + n` at the thread's end; None where an add matches no site."""
    at = _Offsets(k)
    inline = _Inliner(k, at)
    pulled = {s.array for s in sites}
    number = {(s.array, s.indices): n for n, s in enumerate(sites)}
    local = {n: names.pull_site(n) for n in range(len(sites))}
    types = {p.name: p.type.dtype for p in k.params if p.name in pulled}
    missing = False

    def rewrite(body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        nonlocal missing
        out = []
        for s in body:
            if isinstance(s, ir.AtomicAdd) and s.array in pulled:
                n = number.get((s.array, tuple(inline(e) for e in s.indices)))
                if n is None:
                    missing = True
                    continue
                t = types[s.array]
                out.append(ir.Assign(local[n], b.add(b.var(local[n], t), s.value)))
            else:
                out.append(with_blocks(s, rewrite))
        return tuple(out)
    body = rewrite(k.body)
    if missing:
        return None
    tids = tuple(ir.Tid(a, type=I64) for a in range(k.tid_ndim))
    zero = tuple(ir.Assign(local[n], b.const(0, types[s.array])) for n, s in enumerate(sites))
    store = tuple(ir.Store(TAPE, (*tids, b.const(first + n, I64)), _as(b.var(local[n], types[s.array]), tape_float))
                  for n, s in enumerate(sites))
    locals_ = dict(k.locals) | {local[n]: types[s.array] for n, s in enumerate(sites)}
    return replace(k, body=zero + body + store, locals=tuple(sorted(locals_.items())))


# a bound past every thread index (interior splitting clamps its bounds into +-2^62 too: transforms/split.py)
_FAR = 2**62


def _unless(cond: ir.Expr) -> ir.Expr:
    """A launch-invariant bound W: 0 where `cond` holds, past every thread index otherwise. A test `tid < W` is
    then `not cond` and `tid >= W` is `cond`, for every thread, and interior splitting folds either: W is an
    upper bound, below which the interior lies (where `cond` holds, W = 0 leaves no interior)."""
    return b.mul(b.sub(b.const(1, I64), b.cast(cond, I64)), b.const(_FAR, I64))


def _as(e: ir.Expr, t: Scalar) -> ir.Expr:
    return e if e.type == t else b.cast(e, t)


def pull_kernel(source: ir.Kernel, sites: tuple[Site, ...], first: int, tape_float: Scalar) -> Gather:
    """Phase 2: the pull kernel over the gather domain (the params of `source`, the reverse kernel, then the
    launch extents), adding each site's scratch slot of every neighbour whose add lands at the thread."""
    at = _Offsets(source)
    inline = _Inliner(source, at)
    for s in ir.walk_stmts(source.body):
        if isinstance(s, ir.AtomicAdd):
            _slot(at, s.indices)  # finds the wraps' moduli
    ndim = source.tid_ndim
    types = {p.name: p.type.dtype for p in source.params if p.name in {s.array for s in sites}}
    groups: dict[tuple[str, tuple], list[int]] = {}
    for n, s in enumerate(sites):
        groups.setdefault((s.array, s.key), []).append(n)
    acc = {g: names.pull_accumulator(g[0], m) for m, g in enumerate(groups)}
    body: list[ir.Stmt] = [ir.Assign(acc[g], b.const(0, types[g[0]])) for g in groups]
    index_of = {}  # a site's index expressions as the kernel wrote them, for the arm tests
    for s in ir.walk_stmts(source.body):
        if isinstance(s, ir.AtomicAdd) and s.array in types:
            index_of.setdefault((s.array, tuple(inline(e) for e in s.indices)), s.indices)
    for g, members in groups.items():
        t = types[g[0]]
        for n in members:
            site = sites[n]
            for o in sorted(site.offsets):
                lands = _lands(at, inline, index_of[(site.array, site.indices)], site.key, o)
                if lands is False:
                    continue
                test = at.is_thread(o) if lands is True else _all([at.is_thread(o), at.shifted(lands, o)])
                shifted = tuple(at.shifted(ir.Tid(axis, type=I64), o) for axis in range(ndim))
                value = _as(ir.Load(TAPE, (*shifted, b.const(first + n, I64)), type=tape_float), t)
                body.append(ir.If(test, (ir.Assign(acc[g], b.add(b.var(acc[g], t), value)),)))
    primal_of = {names.shadow(p.name): p.name for p in source.params}
    offsets: set[Offset] = set()
    for g, members in groups.items():
        array, key = g
        mine = sorted(set().union(*(sites[n].offsets for n in members)))
        offsets |= set(mine)
        positions = _axis_positions(key)
        idx = tuple(b.const(c, I64) if c is not None else ir.Tid(positions.index(p), type=I64)
                    for p, c in enumerate(key))
        inside = [b.cmp(Op.LT, e, ir.Shape(primal_of[array], p, type=I64)) for p, e in enumerate(idx)
                  if key[p] is None]
        # a constant position inside its axis, as a test of tid[0] the interior split folds (`_unless`)
        inside += [b.cmp(Op.LT, ir.Tid(0, type=I64), _unless(b.cmp(Op.GE, b.const(c, I64),
                                                                   ir.Shape(primal_of[array], p, type=I64))))
                   for p, c in enumerate(key) if c is not None]
        reached = _all([at.is_thread(o) for o in mine], Op.OR)
        t = types[array]
        body.append(ir.If(_all([reached, *inside]),
                          (ir.Store(array, idx, b.add(ir.Load(array, idx, type=t), b.var(acc[g], t))),)))
    params = source.params + tuple(ir.Param(f"{EXTENT}{a}", I64) for a in range(ndim))
    local = {acc[g]: types[g[0]] for g in groups}
    kernel = replace(source, name=source.name.replace("_rev", "_pull"), params=params, body=tuple(body),
                     locals=tuple(sorted(local.items())), interior=None, deferred=None)
    return Gather(kernel, tuple(sorted(types)), *described(at, sorted(offsets), ndim), pulls=True)
