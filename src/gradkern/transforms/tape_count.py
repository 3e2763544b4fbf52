"""The count kernel of a taped reverse: each thread's pushes, when they depend on the data (a run-time loop bound,
a branch around pushes, a `while` loop's trip count: docs/adjoint-forms.md section 13). The runtime sizes the tape
by the largest count (runtime/reverse.py: tape_slots); the augmented primal stores the pointer it really reached
and the reverse starts from that one, so a count only has to bound the pushes from above
(docs/shadows-and-modes.md, "Taped loops").

The count kernel and the kernels that push are different kernels: if their evaluations differed (a float
condition compiled with another contraction), a thread could push more than was counted. Every push of a tape
sized by a count is therefore guarded (`guard_pushes`): a push past the thread's slots writes nothing, and the
pointer, still advanced, records the overflow, which the runtime checks after the launch
(docs/adjoint-forms.md section 13, "The tape guard")."""

from __future__ import annotations

from ..errors import NotDifferentiableError
from ..ir import nodes as ir
from ..ir.ops import Op
from ..ir.rewrite import with_blocks
from ..ir.types import BOOL, I64


def count_skeleton(augmented: list[ir.Stmt], written: set[str], pointers: set[str]) -> tuple[ir.Stmt, ...]:
    """The augmented primal reduced to what decides the number of pushes: control flow,
    the locals it depends on, and the tape pointers. Stores are dropped, so this
    control flow must not read arrays the kernel writes (it would see stale values),
    with one way out: a branch whose condition reads such values (`if v > best:` over a table the
    thread fills, session 49) counts the pushes of both arms, one after the other, when neither arm
    decides anything else (assigns no local the count needs): an upper bound of either arm's."""
    stale = _stale_loads(tuple(augmented), written)
    tainted = _tainted(tuple(augmented), stale)
    merged: dict[int, ir.Expr] = {}  # id of each arm taken unconditionally: its branch's condition

    def unstale(body):
        out = []
        for st in body:
            st = with_blocks(st, unstale)
            if isinstance(st, ir.If) and _reads(st.cond, stale, tainted):
                for arm in (st.then, st.orelse):
                    if arm:
                        merged[id(arm)] = st.cond
                        out.append(ir.If(ir.Const(True, type=BOOL, loc=st.loc), arm, (), loc=st.loc))
            else:
                out.append(st)
        return tuple(out)
    augmented = list(unstale(tuple(augmented)))

    def control_vars(body) -> set[str]:
        used = set(pointers)
        for st in ir.walk_stmts(body):
            if isinstance(st, (ir.If, ir.While, ir.For)):
                for e in ir.stmt_exprs(st):
                    used |= {x.name for x in ir.walk_expr(e) if isinstance(x, ir.Var)}
        return used

    def block(body, live: set[str]):
        out = []
        for st in body:
            if isinstance(st, (ir.Store, ir.AtomicAdd)):
                continue
            if isinstance(st, ir.Assign):
                if st.name in live:
                    out.append(st)
            else:
                out.append(with_blocks(st, lambda blk: block(blk, live)))
        return tuple(out)

    live = control_vars(augmented)
    while True:  # close `live` under the assignments that feed it
        grown = set(live)
        for st in ir.walk_stmts(tuple(augmented)):
            if isinstance(st, ir.Assign) and st.name in grown:
                grown |= {x.name for x in ir.walk_expr(st.value) if isinstance(x, ir.Var)}
        if grown == live:
            break
        live = grown
    for st in ir.walk_stmts(tuple(augmented)):
        for arm in ir.blocks(st):
            if id(arm) in merged:
                for inner in ir.walk_stmts(arm):
                    if isinstance(inner, ir.Assign) and inner.name in live and inner.name not in pointers:
                        _refuse(_stale_origin(merged[id(arm)], tuple(augmented), stale) or inner)
    skeleton = block(tuple(augmented), live)
    for st in ir.walk_stmts(skeleton):
        for e in ir.stmt_exprs(st):
            for x in ir.walk_expr(e):
                if isinstance(x, ir.Load) and id(x) in stale:
                    _refuse(x)
    return skeleton


def guard_pushes(body: tuple[ir.Stmt, ...] | list[ir.Stmt], tapes: tuple[str, ...]) -> tuple[ir.Stmt, ...]:
    """`body` with every push (a store into one of `tapes` at `[*tid, tp]`) made `if tp < slots: push`, slots
    the tape's last extent. The pointer's increment is left as it is, so a pointer past the slots after the
    pushes is the overflow: one compare and one branch per push."""
    out = []
    for st in body:
        if isinstance(st, ir.Store) and st.array in tapes:
            slot = st.indices[-1]
            room = ir.Shape(st.array, len(st.indices) - 1, type=I64)
            out.append(ir.If(ir.Apply(Op.LT, (slot, room), type=BOOL), (st,), (), loc=st.loc))
        else:
            out.append(with_blocks(st, lambda blk: guard_pushes(blk, tapes)))
    return tuple(out)


def within(pointers: tuple[tuple[str, str], ...], axis: int) -> ir.Expr:
    """Whether every (tape, pointer) pointer is within its tape's slots (extent `axis`): no push was dropped."""
    tests = [ir.Apply(Op.LE, (ir.Var(ptr, type=I64), ir.Shape(tape, axis, type=I64)), type=BOOL)
             for tape, ptr in pointers]
    out = tests[0]
    for t in tests[1:]:
        out = ir.Apply(Op.AND, (out, t), type=BOOL)
    return out


def _refuse(at: ir.Node) -> None:
    array = f"'{at.array}'" if isinstance(at, ir.Load) else "an array"
    raise NotDifferentiableError(
        f"the tape size depends on {array}, which the kernel overwrites", at.loc,
        hint="make loop bounds and branch conditions around taped loops independent of it")


def _stale_origin(e: ir.Expr, body: tuple[ir.Stmt, ...], stale: set[int]) -> ir.Load | None:
    """A stale load that `e` reads, directly or through the locals it reads (to name the array)."""
    exprs, seen = [e], set()
    while exprs:
        x = exprs.pop(0)
        for n in ir.walk_expr(x):
            if isinstance(n, ir.Load) and id(n) in stale:
                return n
            if isinstance(n, ir.Var) and n.name not in seen:
                seen.add(n.name)
                exprs += [st.value for st in ir.walk_stmts(body) if isinstance(st, ir.Assign) and st.name == n.name]
    return None


def _reads(e: ir.Expr, stale: set[int], tainted: set[str]) -> bool:
    return any((isinstance(x, ir.Load) and id(x) in stale) or (isinstance(x, ir.Var) and x.name in tainted)
               for x in ir.walk_expr(e))


def _tainted(body: tuple[ir.Stmt, ...], stale: set[int]) -> set[str]:
    """The locals whose value may come from a stale load, directly or through other locals (flow-insensitive)."""
    out: set[str] = set()
    while True:
        grown = set(out)
        for st in ir.walk_stmts(body):
            if isinstance(st, ir.Assign) and st.name not in grown and _reads(st.value, stale, grown):
                grown.add(st.name)
        if grown == out:
            return out
        out = grown


def _stale_loads(body: tuple[ir.Stmt, ...], written: set[str]) -> set[int]:
    """The loads (by id) of written arrays that may run after the thread itself stored into that array: the
    count skeleton, which drops stores, could see another value there than the primal. A load that runs before
    any store of its array (earlier in program order, and in no loop that stores into it) sees what the primal
    sees: no other thread writes what this one reads (the race check refuses such launches)."""
    out: set[int] = set()
    stored: set[str] = set()

    def stores(b) -> set[str]:
        return {st.array for st in ir.walk_stmts(b) if isinstance(st, (ir.Store, ir.AtomicAdd))}

    def visit(b, looping: set[str]) -> None:
        for st in b:
            inner = looping | stores((st,)) if isinstance(st, ir.While) else looping
            for e in ir.stmt_exprs(st):
                out.update(id(x) for x in ir.walk_expr(e) if isinstance(x, ir.Load) and x.array in written
                           and (x.array in stored or x.array in inner))
            if isinstance(st, (ir.Store, ir.AtomicAdd)):
                stored.add(st.array)
            for blk in ir.blocks(st):
                visit(blk, looping | stores((st,)) if isinstance(st, (ir.For, ir.While)) else looping)
    visit(body, set())
    return out
