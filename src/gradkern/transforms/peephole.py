"""The reverse sweep's peephole: identity round trips an adjoint makes through its target, removed in one
pass over each block (docs/compile-time.md, finding 12).

* `d = 0; ...; d = d + e` becomes `...; d = e` when nothing between touches d (reads or writes the local d,
  or any element of the array d is an element of) and e reads neither the local d nor d's array;
* `g = d; ...; d = g` loses its last statement when nothing between writes d or g and only assignments,
  stores and atomic adds lie between.
For an element `d = a[idx]`, both rules also need idx to name the same element at both ends: nothing from the
first on (the first included) assigns a local or stores into an array the index expressions read. Without these
conditions `a = 0; a = a + a * x`, `j = idx[j]; idx[j] = j` and `a[k] = 0; k = k + 1; a[k] = a[k] + e` were
rewritten into other computations (tests/fuzz/test_peephole_fuzz.py, session 52).

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


def _sets(s: ir.Stmt) -> set[tuple[str, str]]:
    """Every local `s` assigns (a loop's variable included) and array it stores or adds into, at any depth: what
    may change the element an index expression names."""
    out: set[tuple[str, str]] = set()
    for x in ir.walk_stmts((s,)):
        if isinstance(x, ir.Assign):
            out.add(("sets", x.name))
        elif isinstance(x, ir.For):
            out.add(("sets", x.var))
        elif isinstance(x, (ir.Store, ir.AtomicAdd)):
            out.add(("puts", x.array))
    return out


def _reads(es) -> set[tuple[str, str]]:
    """The locals and arrays expressions read."""
    out: set[tuple[str, str]] = set()
    for e in es:
        for n in ir.walk_expr(e):
            if isinstance(n, ir.Var):
                out.add(("local", n.name))
            elif isinstance(n, ir.Load):
                out.add(("array", n.array))
    return out


def _same_element(seen: _Seen, k: int, s: ir.Stmt) -> bool:
    """Whether the target of `s` is the element the kept statement at `k` named with the same index expressions:
    nothing from `k` on assigns a local or stores into an array those expressions read."""
    if not isinstance(s, ir.Store):
        return True
    deps = _reads(s.indices)
    return seen.last(*((("sets", n) if kind == "local" else ("puts", n)) for kind, n in deps)) < k


class _Seen:
    """The statements of a block kept so far (None where one was removed), and per key the positions of
    those with that key, in order."""

    def __init__(self) -> None:
        self.stmts: list[ir.Stmt | None] = []
        self.at: dict[tuple[str, str], list[int]] = {}

    def add(self, s: ir.Stmt) -> None:
        p = len(self.stmts)
        self.stmts.append(s)
        for key in _touched(s) | _written(s) | _sets(s):
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
                    and prev.value.value == 0 and _target_key(s) not in _reads((s.value.args[1],)) \
                    and _same_element(seen, k, s):
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
    return (isinstance(prev, ir.Assign) and prev.name == g and prev.value == target_value(s)
            and _same_element(seen, k, s))
