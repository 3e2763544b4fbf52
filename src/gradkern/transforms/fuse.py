"""A reverse loop fused into its forward twin (docs/adjoint-forms.md, section 10).

The fused kernel runs a loop's forward iterations (`for i in range(s, t, d): F`), then, later in the same
block, its reverse (`for r in range(0, n): i = s + r*d; R`, in forward order where its iterations commute,
transforms/reverse.py). Where every one of the section's conditions holds, the two become one loop,

    H; for i in range(s, t, d): F; R; L

with H the statements between them that R depends on (hoisted above the loop) and L the rest (after it). Each
statement runs as often as before and every access to one memory location, or one local, keeps its order, so
the results are bit for bit those of the two loops: only accesses proved independent change places. What fails
a condition stays as it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..ir import build as b
from ..ir import nodes as ir
from ..ir.ops import Op


@dataclass
class Effects:
    """What statements read and write: locals by name, memory by array (a name is one buffer: docs/launches.md
    merges exact aliases and refuses any other overlap with a written array or a shadow)."""

    reads: set[str] = field(default_factory=set)
    writes: set[str] = field(default_factory=set)
    loads: set[str] = field(default_factory=set)
    stores: set[str] = field(default_factory=set)

    def conflicts(self, other: Effects) -> bool:
        """Whether running the two in the other order could change a result (read-write or write-write)."""
        return bool(self.writes & (other.reads | other.writes) or other.writes & self.reads
                    or self.stores & (other.loads | other.stores) or other.stores & self.loads)


def effects(body: tuple[ir.Stmt, ...] | list[ir.Stmt]) -> Effects:
    out = Effects()
    for s in ir.walk_stmts(tuple(body)):
        if isinstance(s, ir.Assign):
            out.writes.add(s.name)
        elif isinstance(s, ir.For):
            out.writes.add(s.var)
        elif isinstance(s, (ir.Store, ir.AtomicAdd)):
            out.stores.add(s.array)
            if isinstance(s, ir.AtomicAdd):
                out.loads.add(s.array)
        for e in ir.stmt_exprs(s):
            for x in ir.walk_expr(e):
                if isinstance(x, ir.Var):
                    out.reads.add(x.name)
                elif isinstance(x, ir.Load):
                    out.loads.add(x.array)
    return out


def _accesses(body: tuple[ir.Stmt, ...], array: str) -> list[tuple[ir.Expr, ...]]:
    """The index tuples of every load, store and atomic add of `array` in `body`."""
    out = [s.indices for s in ir.walk_stmts(body) if isinstance(s, (ir.Store, ir.AtomicAdd)) and s.array == array]
    out += [x.indices for s in ir.walk_stmts(body) for e in ir.stmt_exprs(s) for x in ir.walk_expr(e)
            if isinstance(x, ir.Load) and x.array == array]
    return out


def _separates(e: ir.Expr, var: str, varying: set[str]) -> bool:
    """Whether index `e` is `i`, `i + c`, `c + i` or `i - c` for the loop variable i and a c that is the same at
    every iteration (no load, no local the loop writes): distinct iterations then give distinct values (adding
    c is a bijection of the integers, also modulo 2**64)."""
    def is_i(x: ir.Expr) -> bool:
        return isinstance(x, ir.Var) and x.name == var

    def invariant(c: ir.Expr) -> bool:
        return not any(isinstance(x, (ir.Load, ir.InBounds)) or isinstance(x, ir.Var) and x.name in varying
                       for x in ir.walk_expr(c))

    if is_i(e):
        return True
    if isinstance(e, ir.Apply) and e.op is Op.ADD:
        return (is_i(e.args[0]) and invariant(e.args[1])) or (is_i(e.args[1]) and invariant(e.args[0]))
    return isinstance(e, ir.Apply) and e.op is Op.SUB and is_i(e.args[0]) and invariant(e.args[1])


def independent_iterations(forward: tuple[ir.Stmt, ...], reverse: tuple[ir.Stmt, ...], var: str,
                           varying: set[str]) -> bool:
    """Condition (c): no element touched by `reverse` at one iteration and by `forward` at another, one of the
    two writing it. Proved per array both touch, one writing: some index position holds the same separating
    expression (`_separates`) in every access of that array in both bodies."""
    f, r = effects(forward), effects(reverse)
    for array in (f.stores & (r.loads | r.stores)) | (r.stores & f.loads):
        indices = _accesses(forward, array) + _accesses(reverse, array)
        if not any(len({ix[d] for ix in indices}) == 1 and _separates(indices[0][d], var, varying)
                   for d in range(len(indices[0]))):
            return False
    return True


@dataclass(frozen=True)
class Fusion:
    """Why two loops were or were not fused (for the tests and the dump)."""

    block: tuple[ir.Stmt, ...] | None
    reason: str

    def __bool__(self) -> bool:
        return self.block is not None


def fuse_pair(block: tuple[ir.Stmt, ...], a: int, z: int) -> Fusion:
    """The kernel body `block` with forward loop block[a] and reverse loop block[z] fused, or the reason they
    may not be."""
    fwd, rev = block[a], block[z]
    if not (isinstance(fwd, ir.For) and isinstance(rev, ir.For)):
        return Fusion(None, "not two loops")
    i, r = fwd.var, rev.var
    # the reverse loop's shape: r over range(0, n) in forward order, `i = s + r*d` first
    if not (b.is_const(rev.start, 0) and b.is_const(rev.step, 1) and isinstance(rev.stop, ir.Var) and rev.body):
        return Fusion(None, "the reverse loop does not run forward from 0")
    first, rbody = rev.body[0], rev.body[1:]
    if not (isinstance(first, ir.Assign) and first.name == i
            and first.value == b.iteration_value(fwd.start, fwd.step, r)):
        return Fusion(None, "the reverse loop does not recompute the forward loop's variable")
    if not (isinstance(fwd.step, ir.Const) and fwd.step.value != 0):
        return Fusion(None, "the forward loop's step is not a nonzero constant")
    between, others = block[a + 1:z], block[:a] + block[a + 1:z] + block[z + 1:]
    n = rev.stop.name
    count = [s for s in between if isinstance(s, ir.Assign) and s.name == n]
    if len(count) != 1 or count[0].value != b.trip_count(fwd.start, fwd.stop, fwd.step) \
            or sum(isinstance(s, ir.Assign) and s.name == n for s in ir.walk_stmts(block)) != 1:
        return Fusion(None, "the reverse loop's trip count is not the forward loop's")
    bounds = effects([ir.Assign("_", x) for x in (fwd.start, fwd.stop, fwd.step)])
    if bounds.loads or bounds.reads & (effects(fwd.body).writes | effects(between).writes | {i}):
        return Fusion(None, "the forward loop's bounds may change before the reverse loop")
    # (b) locals: the reverse reads none the forward body writes but i (the same value at each iteration),
    # the forward reads none the reverse writes, neither writes one the other writes; r and i are read nowhere
    # else (the fused loop has no r; i after it is its last value, which the reverse loop also left)
    fe, re_ = effects(fwd.body), effects(rbody)
    if i in fe.writes or i in re_.writes or r in re_.reads or r in re_.writes:
        return Fusion(None, "a loop body writes the loop variable")
    if (fe.writes - {i}) & re_.reads or re_.writes & (fe.reads | fe.writes):
        return Fusion(None, "the loops share a local one of them writes")
    if {i, r} & effects(others).reads:
        return Fusion(None, "the loop variable is read outside the two loops")
    # (c) memory: iteration p's reverse never touches what iteration q != p's forward touches, one writing
    if not independent_iterations(fwd.body, rbody, i, fe.writes | re_.writes | {i}):
        return Fusion(None, "an array may be touched at two iterations (an index that does not separate them)")
    # (a) the statements between: H (what the reverse depends on, and what that depends on) moves above the
    # forward loop, which it must commute with; L (the rest) moves below the reverse, which it commutes with
    rev_effects = effects(rbody)
    rev_effects.writes.add(i)
    hoisted = [effects([s]).conflicts(rev_effects) for s in between]
    for m in range(len(between) - 1, -1, -1):
        if hoisted[m]:
            for k in range(m):
                hoisted[k] = hoisted[k] or effects([between[k]]).conflicts(effects([between[m]]))
    fwd_effects = effects([fwd])
    if any(h and effects([s]).conflicts(fwd_effects) for s, h in zip(between, hoisted)):
        return Fusion(None, "a statement the reverse loop depends on cannot move above the forward loop")
    fused = replace(fwd, body=fwd.body + rbody)
    out = (*block[:a], *(s for s, h in zip(between, hoisted) if h), fused,
           *(s for s, h in zip(between, hoisted) if not h), *block[z + 1:])
    return Fusion(out, "fused")


def strided_walk(loop: ir.For) -> bool:
    """Whether the loop's variable indexes some array at a position other than its last: each iteration then
    touches other cache lines (`gemv_t`'s column), which a second walk fetches again. Fusing only pays there: a
    walk along the last axis (`matvec`'s row) is cache-resident for the reverse loop, which vectorises alone and
    not beside the forward loop's in-order sum (section 10's measurements)."""
    accesses = [s.indices for s in ir.walk_stmts(loop.body) if isinstance(s, (ir.Store, ir.AtomicAdd))]
    accesses += [x.indices for e in ir.all_exprs(loop.body) for x in ir.walk_expr(e) if isinstance(x, ir.Load)]
    return any(isinstance(v, ir.Var) and v.name == loop.var for ix in accesses for e in ix[:-1]
               for v in ir.walk_expr(e))


def fuse_loops(k: ir.Kernel) -> tuple[ir.Kernel, list[str]]:
    """`k` with every reverse loop of its body's top level (only there are the two siblings: a nested loop's
    forward and reverse sit in different blocks) fused into its forward twin where section 10's conditions hold
    and the forward loop walks a strided axis (`strided_walk`); the variables of the loops fused, for the dump."""
    fused: list[str] = []
    body = tuple(k.body)
    z = 0
    while z < len(body):
        s = body[z]
        if isinstance(s, ir.For) and s.body and isinstance(s.body[0], ir.Assign):
            var = s.body[0].name
            a = next((a for a in range(z - 1, -1, -1) if isinstance(body[a], ir.For) and body[a].var == var), None)
            f = fuse_pair(body, a, z) if a is not None and strided_walk(body[a]) else None
            if f:
                fused.append(var)
                body, z = f.block, a
                continue
        z += 1
    return (replace(k, body=body) if fused else k), fused
