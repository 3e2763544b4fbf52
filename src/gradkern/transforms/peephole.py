"""The reverse sweep's peephole: identity round trips an adjoint makes through its target, removed in one
pass over each block (docs/compile-time.md, finding 12).

* `d = 0; ...; d = d + e` becomes `...; d = e` when nothing between touches d (reads or writes the local d,
  or any element of the array d is an element of);
* `g = d; ...; d = g` loses its last statement when nothing between writes d or g and only assignments,
  stores and atomic adds lie between.

Each statement kept is indexed by what it touches (`_Seen`), so the statement a rule must look back to is
found without scanning the block: the pass is linear in the block's size (it was a backward scan, with a
walk of each statement passed, per accumulation: quadratic in a long straight-line reverse body)."""

from __future__ import annotations

from dataclasses import replace

from ..ir import nodes as ir
from ..ir.ops import Op
from ..ir.rewrite import with_blocks


def same_target(a: ir.Stmt, b_: ir.Stmt) -> bool:
    """Whether two assignments or stores write the same local or the same element (same index expressions)."""
    if isinstance(a, ir.Store) and isinstance(b_, ir.Store):
        return a.array == b_.array and a.indices == b_.indices
    return isinstance(a, ir.Assign) and isinstance(b_, ir.Assign) and a.name == b_.name


def target_value(s: ir.Stmt) -> ir.Expr:
    """The value an assignment's or a store's target holds, as an expression."""
    return ir.Load(s.array, s.indices, type=s.value.type) if isinstance(s, ir.Store) else ir.Var(s.name,
                                                                                                  type=s.value.type)


def _target_key(s: ir.Stmt) -> tuple[str, str]:
    return ("array", s.array) if isinstance(s, ir.Store) else ("local", s.name)


def _touched(s: ir.Stmt) -> set[tuple[str, str]]:
    """Every local and array statement `s` reads or writes, nested blocks included."""
    out: set[tuple[str, str]] = set()
    for x in ir.walk_stmts((s,)):
        if isinstance(x, ir.Assign):
            out.add(("local", x.name))
        elif isinstance(x, (ir.Store, ir.AtomicAdd)):
            out.add(("array", x.array))
        for e in ir.stmt_exprs(x):
            for n in ir.walk_expr(e):
                if isinstance(n, ir.Var):
                    out.add(("local", n.name))
                elif isinstance(n, ir.Load):
                    out.add(("array", n.array))
    return out


def _written(s: ir.Stmt) -> set[tuple[str, str]]:
    """What the round-trip rule looks back to: a top-level assignment (by name), store or atomic add (by
    array); any other statement ends the look-back."""
    if isinstance(s, ir.Assign):
        return {("assigns", s.name)}
    if isinstance(s, (ir.Store, ir.AtomicAdd)):
        return {("stores", s.array)}
    return {("other", "")}


class _Seen:
    """The statements of a block kept so far (None where one was removed), and per key the positions of
    those with that key, in order."""

    def __init__(self) -> None:
        self.stmts: list[ir.Stmt | None] = []
        self.at: dict[tuple[str, str], list[int]] = {}

    def add(self, s: ir.Stmt) -> None:
        p = len(self.stmts)
        self.stmts.append(s)
        for key in _touched(s) | _written(s):
            self.at.setdefault(key, []).append(p)

    def last(self, *keys: tuple[str, str]) -> int:
        """The position of the last kept statement with one of `keys`, -1 if none (removed ones dropped)."""
        best = -1
        for key in keys:
            ps = self.at.get(key)
            while ps and self.stmts[ps[-1]] is None:
                ps.pop()
            if ps and ps[-1] > best:
                best = ps[-1]
        return best


def peephole(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    """The block with both round trips removed (module doc); nested blocks too."""
    seen = _Seen()
    for s in stmts:
        s = with_blocks(s, lambda blk: peephole(list(blk)))
        if isinstance(s, (ir.Assign, ir.Store)) and isinstance(s.value, ir.Apply) and s.value.op is Op.ADD \
                and s.value.args[0] == target_value(s):
            k = seen.last(_target_key(s))  # the last statement that touches the target
            prev = seen.stmts[k] if k >= 0 else None
            if isinstance(prev, (ir.Assign, ir.Store)) and same_target(prev, s) and isinstance(prev.value, ir.Const) \
                    and prev.value.value == 0:
                seen.stmts[k] = None
                s = replace(s, value=s.value.args[1])
        if isinstance(s, (ir.Assign, ir.Store)) and isinstance(s.value, ir.Var) and _restores(seen, s):
            continue
        seen.add(s)
    return [s for s in seen.stmts if s is not None]


def _restores(seen: _Seen, s: ir.Stmt) -> bool:
    """Whether `s` (target = g) writes back the value g was read from, unchanged: the last statement that
    assigns g, assigns s's local, stores into s's array or is no assignment or store, is `g = <s's target>`."""
    g = s.value.name
    keys = [("assigns", g), ("other", "")]
    keys.append(("stores", s.array) if isinstance(s, ir.Store) else ("assigns", s.name))
    k = seen.last(*keys)
    prev = seen.stmts[k] if k >= 0 else None
    return isinstance(prev, ir.Assign) and prev.name == g and prev.value == target_value(s)
