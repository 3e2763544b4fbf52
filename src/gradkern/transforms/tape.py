"""What the reverse sweep reads and where it gets it: the tape, a
recomputation, or a local restored once per block (docs/shadows-and-modes.md: tape only what
is needed and destroyed).

The values the reverse needs (`needed`): what the partials of active
operands read (the derivative table's `reads`), the indices of active loads
and stores, and the branch conditions and loop bounds around reverse work.
Each is built from leaves, and each leaf comes from one place:

1. Available everywhere, used as written: constants, tid, shapes, scalar
   parameters the kernel never assigns, loop variables inside their loop (the
   reverse loop rebuilds them), and loads of arrays the kernel never writes
   (exactly aliased parameters are merged before, so an alias of a written
   array is written).
2. Restored once per block. The last top-level statement of a block B that
   assigns a local (an assignment, or a loop or branch assigning it inside)
   fixes the local's value for the rest of B. When a later statement of B
   needs it, the reverse of B restores it at its start, into the local itself:
   by replaying the assignment when its value is recomputable (4), or else by
   popping the value that the augmented primal pushes at the end of B. A value
   computed before a loop and read by every iteration (LayerNorm's mean) thus
   costs one slot per execution of B, not one per iteration; a local assigned
   once at the top of a loop body is replayed per reverse iteration. In the
   fused kernel a local whose last assignment in the whole kernel is outside
   every loop still holds that value when the reverse needs it: neither pushed
   nor restored.
3. Per statement, otherwise: a local whose value at the statement is not
   fixed (assigned again later in every enclosing block: each value of `s` in
   `s = sin(s) * c; s = sin(s) * c; ...`) is recomputed from its definition (4)
   when it can be, else pushed just before the statement and popped by its
   reverse; so is a load of an array the kernel writes anywhere (it may have
   been overwritten since). Per statement the cheaper of two choices in tape
   slots is taken: tape those leaves and recompute what the needed values
   build on them (`s`, not also `sin(s)`), or tape the needed values that
   contain them, whole.
4. Recomputable: an expression over (1), restored locals (2), and locals
   whose one reaching definition lies in the same loop iteration (not merged
   from branches, not carried around a loop) and is recomputable itself, of at
   most RECOMPUTE_LIMIT operations (arithmetic, calls, loads and selects;
   conversions are free) once those definitions are expanded. A longer chain
   is taped: a slot costs one store and one load, while a recomputation costs
   its operations every time the reverse needs the value. A chain of loads,
   additions, subtractions, multiplications and negations only (a stencil's
   linear combination, `lap = u[i-1, j] + ... - 4.0 * u[i, j]`) is recomputable
   up to LINEAR_LIMIT operations: such operations cost about a cycle each on
   values the thread's own stencil has just loaded, while the slot is 8 bytes
   stored (16 with the write-allocate) and loaded again from memory the tape
   occupies until the reverse (a program's whole loop), plus 16 bytes of
   per-thread push counters where the paths push different numbers of values
   (docs/programs.md, "Program shapes": 2.6x a hand-written adjoint from one
   taped Laplacian).

A loop-carried value (a running sum at iteration j, `s` in
`for k in range(n): s = sin(s) * 1.5`) is never recomputable: taped per
iteration when needed (docs/shadows-and-modes.md). A load is recomputed only from an
array the kernel never writes, so the memory it reads is intact.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..analysis.activity import Activity
from ..ir import nodes as ir
from ..ir.ops import Op
from ..ir.rewrite import with_children
from ..ir.types import BOOL, Scalar
from .derivatives import partials

# Operations a recomputed value may take once the local definitions it reads are expanded (rule 4).
# `s = x[i]; s = sin(s) * c; ...` recomputes its first four values (1, 3, 5, 7 operations) and tapes the rest.
RECOMPUTE_LIMIT = 8
# Operations a recomputed value may take when every one of them is a load, a conversion or one of LINEAR_OPS
# (rule 4): a 5-, 7- or 9-point Laplacian's 10 to 20.
LINEAR_LIMIT = 32
LINEAR_OPS = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.NEG, Op.CAST})

Path = tuple[int, ...]  # a statement: (index, block, index, block, ..., index) from the kernel body; a block: its
# statement's path and the block's position; the kernel body: ()


@dataclass(frozen=True)
class Restore:
    """A local the reverse of a block sets at its start (rule 2)."""

    name: str
    type: Scalar
    value: ir.Expr | None  # the replayed definition; None: popped (pushed at the end of the block)
    kept: bool  # assigned for the last time in the kernel here, outside loops: the fused kernel still holds it


@dataclass(frozen=True)
class Needs:
    """Where the reverse of one statement gets the values it reads (rule 3)."""

    taped: tuple[ir.Expr, ...] = ()  # pushed before the statement (bounds and conditions: after it), in this order
    recomputed: tuple[tuple[ir.Var, ir.Expr], ...] = ()  # locals re-evaluated from their expanded definitions
    # per taped value, the condition under which the statement evaluates it (None: always): a value of a
    # conditional expression's branch not taken is pushed as 0 (evaluating it could read outside an array)
    guards: tuple[ir.Expr | None, ...] = ()


@dataclass
class TapePlan:
    stmts: dict[Path, Needs] = field(default_factory=dict)
    restores: dict[Path, tuple[Restore, ...]] = field(default_factory=dict)  # by block


def needed(e: ir.Expr, act: Activity, out: list[tuple[ir.Expr, ir.Expr | None]], guard: ir.Expr | None = None
           ) -> None:
    """Append to `out` the sub-expressions of `e` whose values the reverse of `e`
    reads, each with the condition under which `e` evaluates it (`guard`; None: always)."""
    if not act.expr(e):
        return
    if isinstance(e, ir.Load):
        out.extend((i, guard) for i in e.indices)
    elif isinstance(e, ir.Select):
        out.append((e.cond, guard))
        needed(e.a, act, out, _both(guard, e.cond))
        needed(e.b, act, out, _both(guard, ir.Apply(Op.NOT, (e.cond,), type=BOOL)))
    elif isinstance(e, ir.Apply):
        for a, reads in zip(e.args, partials(e.op, e.loc).reads):
            if act.expr(a):  # only active operands' partials are evaluated
                out.extend((e if x == "y" else e.args[x], guard) for x in reads)
        for a in e.args:
            needed(a, act, out, guard)


def _both(guard: ir.Expr | None, cond: ir.Expr) -> ir.Expr:
    return cond if guard is None else ir.Apply(Op.AND, (guard, cond), type=BOOL)


def _either(a: ir.Expr | None, b_: ir.Expr | None) -> ir.Expr | None:
    return None if a is None or b_ is None else a if a == b_ else ir.Apply(Op.OR, (a, b_), type=BOOL)


def has_reverse(body, act: Activity) -> bool:
    """Whether a block does anything in the reverse sweep."""
    for s in ir.walk_stmts(body):
        if isinstance(s, ir.Assign) and s.name in act.locals:
            return True
        if isinstance(s, (ir.Store, ir.AtomicAdd)) and s.array in act.arrays:
            return True
    return False


def stmt_needed(s: ir.Stmt, act: Activity) -> list[tuple[ir.Expr, ir.Expr | None]]:
    """The values the reverse of an assignment or store reads, each with its guard (see `needed`)."""
    need: list[tuple[ir.Expr, ir.Expr | None]] = []
    if isinstance(s, ir.Assign) and s.name in act.locals:
        needed(s.value, act, need)
    elif isinstance(s, (ir.Store, ir.AtomicAdd)) and s.array in act.arrays:
        need.extend((i, None) for i in s.indices)
        needed(s.value, act, need)
    return need


@dataclass(frozen=True)
class _Value:
    """A value as the reverse re-evaluates it (expr None: it cannot), its
    operations, and the restored locals it reads as (block, name)."""

    expr: ir.Expr | None
    cost: int = 0
    restored: frozenset[tuple[Path, str]] = frozenset()
    linear: bool = True  # loads, conversions and LINEAR_OPS only

    @property
    def recomputable(self) -> bool:
        return self.expr is not None and (self.cost <= RECOMPUTE_LIMIT or (self.linear and self.cost <= LINEAR_LIMIT))


_NONE = _Value(None)
_AVAILABLE, _FIXED, _DEFINED, _TAPED = range(4)


@dataclass
class _Frame:
    """A block being scanned, at statement `index`."""

    path: Path
    body: tuple[ir.Stmt, ...]
    owner: ir.Stmt | None  # the statement the block belongs to; None: the kernel body
    final: dict[str, int]  # local -> the last statement of the block assigning it
    anywhere: set[str]  # locals assigned anywhere in the block
    last: dict[str, int] = field(default_factory=dict)  # local -> the last statement before `index` assigning it
    index: int = 0


class _Planner:
    def __init__(self, k: ir.Kernel, act: Activity):
        self.act = act
        self.written = {s.array for s in ir.walk_stmts(k.body) if isinstance(s, (ir.Store, ir.AtomicAdd))}
        self._assigned: dict[int, tuple[str, ...]] = {}
        self.assigned = set(self.assigns(k.body))
        self.frames: list[_Frame] = []
        self.definitions: dict[Path, _Value] = {}  # each assignment's value, expanded (rule 4)
        self.final_at: dict[tuple[Path, str], int] = {}
        self.final_rank: dict[tuple[Path, str], int] = {}  # the local's place among final_at's locals (`assigns`)
        self.kept: set[tuple[Path, str]] = set()
        self.types: dict[str, Scalar] = {}
        self.wanted: set[tuple[Path, str]] = set()  # restores some reverse statement reads
        self.plan = TapePlan()

    def assigns(self, body) -> tuple[str, ...]:
        """The locals a block assigns (loop variables included), nested blocks included, in the
        program order of their first assignment (an order that never depends on string hashing:
        it places the restores a statement fixes, docs/caching.md)."""
        out: dict[str, None] = {}
        for s in body:
            key = id(s)
            if key not in self._assigned:
                mine = dict.fromkeys((s.name,) if isinstance(s, ir.Assign) else (s.var,) if isinstance(s, ir.For)
                                     else ())
                for blk in ir.blocks(s):
                    mine.update(dict.fromkeys(self.assigns(blk)))
                self._assigned[key] = tuple(mine)
            out.update(dict.fromkeys(self._assigned[key]))
        return tuple(out)

    # -- the scan, in program order -----------------------------------------------------------------------------
    def block(self, body, path: Path, owner: ir.Stmt | None):
        final, rank = {}, {}  # local -> the last statement assigning it, and its place among that statement's
        for j, s in enumerate(body):
            for r, n in enumerate(self.assigns((s,))):
                final[n], rank[n] = j, r
        in_loop = any(isinstance(f.owner, (ir.For, ir.While)) for f in self.frames) or \
            isinstance(owner, (ir.For, ir.While))
        for n, j in final.items():
            self.final_at[(path, n)] = j
            self.final_rank[(path, n)] = rank[n]
            if not in_loop and all(f.final.get(n) == f.index for f in self.frames):
                self.kept.add((path, n))
        frame = _Frame(path, body, owner, final, set(self.assigns(body)))
        self.frames.append(frame)
        for j, s in enumerate(body):
            frame.index = j
            self.stmt(s, path + (j,))
            for n in self.assigns((s,)):
                frame.last[n] = j
        self.frames.pop()

    def stmt(self, s: ir.Stmt, p: Path):
        if isinstance(s, ir.Assign):
            self.definitions[p] = self.expand(s.value)
        act = self.act
        if isinstance(s, (ir.Assign, ir.Store, ir.AtomicAdd)):
            need = stmt_needed(s, act)
            if need:
                self.plan.stmts[p] = self.needs(need)
        elif isinstance(s, ir.If) and has_reverse(s.then + s.orelse, act):
            self.plan.stmts[p] = self.control((s.cond,))
        elif isinstance(s, ir.For) and has_reverse(s.body, act):
            self.plan.stmts[p] = self.control((s.start, s.stop, s.step))
        for n, blk in enumerate(ir.blocks(s)):
            self.block(blk, p + (n,), s)

    # -- where a local's value comes from ---------------------------------------------------------------------
    def local(self, name: str) -> tuple[int, Path | None]:
        """How the reverse gets local `name` at the current statement: available,
        fixed in a block (rule 2), defined by an assignment (rule 4), or taped."""
        if name not in self.assigned:
            return _AVAILABLE, None
        for f in reversed(self.frames):
            d = f.last.get(name)
            if d is not None:
                if f.final[name] == d:  # nothing in the block assigns it again
                    return _FIXED, f.path
                return (_DEFINED, f.path + (d,)) if isinstance(f.body[d], ir.Assign) else (_TAPED, None)
            if isinstance(f.owner, (ir.For, ir.While)):  # entering the body: values from before the loop
                if name in f.anywhere:
                    return _TAPED, None  # carried around the loop
                if isinstance(f.owner, ir.For) and f.owner.var == name:
                    return _AVAILABLE, None
        return _TAPED, None  # a parameter read before the kernel reassigns it

    def expand(self, e: ir.Expr) -> _Value:
        """`e` as the reverse re-evaluates it here, locals' definitions expanded (rule 4)."""
        if isinstance(e, ir.Var):
            how, where = self.local(e.name)
            if how == _AVAILABLE:
                return _Value(e)
            if how == _FIXED:
                self.types[e.name] = e.type
                return _Value(e, 0, frozenset({(where, e.name)}))
            if how == _DEFINED:
                x = self.definitions[where]
                return x if x.recomputable else _NONE
            return _NONE
        if isinstance(e, ir.Load) and e.array in self.written:
            return _NONE
        kids = [self.expand(c) for c in ir.children(e)]
        if any(x.expr is None for x in kids):
            return _NONE
        own = 0 if (isinstance(e, ir.Apply) and e.op is Op.CAST) or \
            not isinstance(e, (ir.Apply, ir.Load, ir.Select, ir.InBounds)) else 1
        linear = (isinstance(e, ir.Load) or not isinstance(e, (ir.Apply, ir.Select, ir.InBounds))
                  or (isinstance(e, ir.Apply) and e.op in LINEAR_OPS)) and all(x.linear for x in kids)
        return _Value(with_children(e, tuple(x.expr for x in kids)) if kids else e,
                      own + sum(x.cost for x in kids), frozenset().union(*(x.restored for x in kids)), linear)

    def leaves(self, e: ir.Expr, taped: list, recomputed: dict, restored: set):
        """Sort the leaves of needed value `e` by where they come from (rule 3)."""
        if isinstance(e, ir.Var) or (isinstance(e, ir.Load) and e.array in self.written):
            x = self.expand(e)
            if x.expr is None:
                if e not in taped:
                    taped.append(e)
            else:
                restored |= x.restored
                if isinstance(e, ir.Var) and x.expr is not e:
                    recomputed[e] = x.expr
            return
        for c in ir.children(e):
            self.leaves(c, taped, recomputed, restored)

    def needs(self, exprs: list[tuple[ir.Expr, ir.Expr | None]]) -> Needs:
        values: dict[ir.Expr, ir.Expr | None] = {}  # each needed value once, with the union of its guards
        for e, guard in exprs:
            if not isinstance(e, ir.Const):
                values[e] = _either(values[e], guard) if e in values else guard
        leaves: dict[ir.Expr, ir.Expr | None] = {}
        whole: dict[ir.Expr, ir.Expr | None] = {}
        per_value = []
        for e, guard in values.items():
            taped, recomputed, restored = [], {}, set()
            self.leaves(e, taped, recomputed, restored)
            per_value.append((taped, recomputed, restored))
            for x in taped:
                leaves[x] = _either(leaves[x], guard) if x in leaves else guard
            if taped:
                whole[e] = guard
        by_leaf = len(leaves) <= len(whole)
        recomputed, restored = {}, set()
        for taped, rec, res in per_value:
            if by_leaf or not taped:
                recomputed.update(rec)
                restored |= res
        self.wanted |= restored
        chosen = leaves if by_leaf else whole
        return Needs(tuple(chosen), tuple(recomputed.items()), tuple(chosen.values()))

    def control(self, exprs) -> Needs:
        """Branch conditions and loop bounds: recomputed, or taped whole (one slot each)."""
        taped, recomputed = [], {}
        for e in exprs:
            leaves, rec, res = [], {}, set()
            self.leaves(e, leaves, rec, res)
            if leaves:
                taped.append(e)
            else:
                recomputed.update(rec)
                self.wanted |= res
        return Needs(tuple(taped), tuple(recomputed.items()))

    # -- restores ------------------------------------------------------------------------------------------------
    def _program_order(self, key: tuple[Path, str]) -> tuple[Path, int, int]:
        return key[0], self.final_at[key], self.final_rank[key]

    def restores(self) -> dict[Path, tuple[Restore, ...]]:
        """Each block's restores (rule 2), in program order of their definitions: by the statement that
        fixes them, then by their first assignment in it (a loop fixes several locals at once). The order is
        total, so the tape's layout never follows the iteration order of a set (docs/caching.md)."""
        todo, chosen = list(self.wanted), {}  # `chosen` is a closure: the same whatever the order of `todo`
        while todo:
            key = todo.pop()
            if key in chosen:
                continue
            path, name = key
            x = self.definitions.get(path + (self.final_at[key],))
            replay = x is not None and x.recomputable
            chosen[key] = x.expr if replay else None
            if replay:
                todo += [r for r in x.restored if r not in chosen]
        out: dict[Path, list] = {}
        for (path, name), value in sorted(chosen.items(), key=lambda kv: self._program_order(kv[0])):
            out.setdefault(path, []).append(Restore(name, self.types[name], value, (path, name) in self.kept))
        return {p: tuple(rs) for p, rs in out.items()}


def plan_tape(k: ir.Kernel, act: Activity) -> TapePlan:
    """Where the reverse of typed kernel `k` gets each value it reads."""
    p = _Planner(k, act)
    p.block(k.body, (), None)
    p.plan.restores = p.restores()
    return p.plan
