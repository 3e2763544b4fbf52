"""Dead-assignment elimination, before a kernel is printed.

The transforms write many values no statement reads: a gather's neighbour
copies of a reverse body keep the adjoints of locals only one neighbour
needs, tape cursors of untaped bodies, adjoints reset after their last use.
Numba types and LLVM optimises every one of them, so they cost compile time
(and block the parfor pass's simple cases). A backward liveness pass over
the structured body removes each assignment whose value no later statement
can read; stores and atomic adds are the only effects. Expressions are pure,
except InBounds (a bounds-checked access records what it saw), so an
assignment whose value holds one stays.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import nodes as ir
from ..ir.rewrite import with_blocks


def _reads(exprs) -> set[str]:
    return {x.name for e in exprs for x in ir.walk_expr(e) if isinstance(x, ir.Var)}


def _effectful(e: ir.Expr) -> bool:
    return any(isinstance(x, ir.InBounds) for x in ir.walk_expr(e))


def _live_in(body: tuple[ir.Stmt, ...], live: set[str]) -> set[str]:
    """The locals `body` may read before writing, given those read after it."""
    live = set(live)
    for s in reversed(body):
        live = _stmt_live_in(s, live)
    return live


def _loop_head(s: ir.For | ir.While, live_out: set[str]) -> set[str]:
    """Live at the top of each iteration: after the loop, or by a later iteration (a fixpoint)."""
    head = set(live_out) | _reads(ir.stmt_exprs(s))
    while True:
        grown = head | _live_in(s.body, head)
        if grown == head:
            return head
        head = grown


def _stmt_live_in(s: ir.Stmt, live: set[str]) -> set[str]:
    if isinstance(s, ir.Assign):
        if s.name not in live and not _effectful(s.value):
            return live
        return (live - {s.name}) | _reads((s.value,))
    if isinstance(s, ir.If):
        return _live_in(s.then, live) | _live_in(s.orelse, live) | _reads((s.cond,))
    if isinstance(s, (ir.For, ir.While)):
        return _loop_head(s, live)
    return live | _reads(ir.stmt_exprs(s))  # Store, AtomicAdd


def _prune(body: tuple[ir.Stmt, ...], live: set[str]) -> tuple[ir.Stmt, ...]:
    out: list[ir.Stmt] = []
    live = set(live)
    for s in reversed(body):
        if isinstance(s, ir.Assign) and s.name not in live and not _effectful(s.value):
            continue
        if isinstance(s, ir.If):
            s = replace(s, then=_prune(s.then, live), orelse=_prune(s.orelse, live))
            if not s.then and not s.orelse:
                continue  # its condition is pure
        elif isinstance(s, (ir.For, ir.While)):
            while True:  # until the pruned body's own liveness keeps all of it: a statement kept only for a
                # read that was pruned (a tape cursor's `p = p - 1` beside its dropped load) goes too, or it
                # would read a local whose definition before the loop is pruned by the pruned loop's liveness
                head = _loop_head(s, live)
                pruned = with_blocks(s, lambda b, head=head: _prune(b, head))
                if pruned == s:
                    break
                s = pruned
            if isinstance(s, ir.For) and not s.body and s.var not in live:
                continue  # an empty counted loop ends (a while loop is kept: it may not)
        live = _stmt_live_in(s, live)
        out.append(s)
    return tuple(reversed(out))


def live_slice(body: tuple[ir.Stmt, ...], live: set[str]) -> tuple[ir.Stmt, ...]:
    """`body` without the assignments whose values reach neither an effect nor the locals `live` after it
    (a gather's neighbour copy keeps what its accumulators need: transforms/gather.py)."""
    return _prune(body, set(live))


def eliminate_dead(k: ir.Kernel) -> ir.Kernel:
    """`k` without the assignments nothing reads (locals die with their thread)."""
    body = _prune(k.body, set())
    interior = k.interior and replace(k.interior, body=_prune(k.interior.body, set()))
    deferred = k.deferred and replace(k.deferred, body=_prune(k.deferred.body, set()))
    bodies = body + (interior.body if interior else ()) + (deferred.body if deferred else ())
    used = {n for s in ir.walk_stmts(bodies)
            for n in ([s.name] if isinstance(s, ir.Assign) else [s.var] if isinstance(s, ir.For) else [])}
    used |= {x.name for e in ir.all_exprs(bodies) for x in ir.walk_expr(e) if isinstance(x, ir.Var)}
    locals_ = tuple((n, t) for n, t in k.locals if n in used)
    return replace(k, body=body, interior=interior, deferred=deferred, locals=locals_)
