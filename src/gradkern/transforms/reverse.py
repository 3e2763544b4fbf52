"""Reverse mode: typed kernel → augmented primal, reverse sweep, and their fusion.

Per thread, the augmented primal runs the primal and pushes onto a per-thread tape every
value a derivative formula needs that the reverse cannot recompute; the reverse
sweep walks the statements backwards, popping those values, and accumulates
adjoints (`d_x += ∂·g`, STYLE §4) into shadows and adjoint locals.

What is taped, what is recomputed and what is restored once per block is
planned by transforms/tape.py (its module doc states the rule and the bound
on recomputation); this module builds the kernels from that plan. Pushes
and pops keep stack order: a statement's values are pushed just before it
and popped by its reverse, a loop's bounds and a branch's condition after
it (popped before the reverse loop or branch), a block's restored locals at
its end (popped at the start of its reverse).

Shadow semantics (docs/shadows-and-modes.md): a store `y[idx] = e` reads g = dy[idx], sets
dy[idx] = 0 (the overwritten value no longer reaches the loss) and sends g
into e; a load `x[idx]` adds its adjoint into dx[idx].

An Active scalar's derivative is a sum over every thread: each thread adds
its contributions, converted to float64, into a float64 local, and adds that
once into a one-element float64 accumulator at its end (atomically; the CPU
privatises it per chunk). The sum over n threads of float32 terms then has
the rounding of float64 sums (relative error ~n·1e-16 in the worst case), not
of float32 ones (10⁷ terms of 0.1 were off by 4% when summed in float32).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..analysis.access import adjoint_is_exclusive, launch_facts
from ..analysis.activity import Activity
from ..errors import InternalError
from ..ir import build as b
from ..ir import names
from ..ir import nodes as ir
from ..ir.names import PASS
from ..ir.ops import Op
from ..ir.rewrite import map_expr
from ..ir.types import F32, F64, I64, Array, Scalar
from .derivatives import partials
from .peephole import peephole
from .saves import saves_of
from .tape import Needs, Restore, has_reverse, plan_tape
from .tape_count import count_skeleton, guard_pushes, within
from .zeros import drop_zero_adds

# Two tapes per thread: floats (in the kernel's widest float type) and integers
# (loop bounds, branch conditions, indices); `COUNT[tid, lane]` is each one's fill.
TAPE, TP, ITAPE, ITP, COUNT = PASS + "tape", PASS + "tp", PASS + "itape", PASS + "itp", names.PUSH_COUNTS
LANES = ((TAPE, TP), (ITAPE, ITP))
# Active scalars' derivatives are summed in float64, also in float32 kernels
ACCUMULATOR = F64


@dataclass
class ReverseKernels:
    """The generated kernels of one reverse-mode specialisation.

    fused: augmented primal + reverse in one thread body (used by autodiff);
    augmented_primal/reverse: the split pair (autodiff_thunk), sharing the tape;
    count: a skeleton that counts each thread's pushes when that depends on
    run-time values (None when `static_slots` bounds it)."""

    fused: ir.Kernel
    augmented_primal: ir.Kernel
    reverse: ir.Kernel
    count: ir.Kernel | None
    static_slots: tuple[int, int] | None  # (float slots, int slots) per thread
    tape_float: Scalar
    shadows: dict[str, str]
    accumulators: dict[str, str]
    tape_ndim: int
    adjoint_forms: tuple[tuple[str, str], ...]  # (array, "plain add" | "atomic add") per shadow
    sums: dict[str, str] = field(default_factory=dict)  # Active scalar -> its per-thread float64 sum (a local)
    accumulator_type: Scalar = ACCUMULATOR  # of the accumulators, whatever the scalar's type
    counted: bool = True  # the augmented primal stores each thread's push counts (paths push different numbers)
    # the arrays whose old contents the augmented primal copies into its save parameters, when its switch is on
    saved_in_place: tuple[str, ...] = ()


@dataclass
class _Builder:
    k: ir.Kernel
    act: Activity
    launch_ndim: int
    locals: dict[str, Scalar] = field(default_factory=dict)
    namer: names.Namer = field(default_factory=names.Namer)
    fused: bool = False  # building the fused kernel: the plan's kept locals are neither pushed nor restored
    # the fused kernel's taped values outside loops, held in locals by statement path (`held`)
    registers: dict[tuple[int, ...], list[ir.Var]] = field(default_factory=dict)
    loops: int = 0  # loops around the statement being built

    def __post_init__(self):
        self.locals = dict(self.k.locals)
        types = [t for _, t in self.k.locals] + [p.type.dtype if isinstance(p.type, Array) else p.type
                                                for p in self.k.params]
        # float32 kernels tape float32; any float64 value makes the float tape float64
        self.tape_float = F64 if F64 in types or not any(t == F32 for t in types) else F32
        facts = self.facts = launch_facts(self.k)
        self.exclusive = {a for a in self.act.arrays if adjoint_is_exclusive(facts, a)}
        self.plan = plan_tape(self.k, self.act)
        self.sums = {n: names.active_sum(n) for n in sorted(self.act.scalars)}
        self.summed: set[str] = set()  # the Active scalars some statement contributes to

    def needs(self, path: tuple[int, ...]) -> Needs:
        return self.plan.stmts.get(path, Needs())

    def restores(self, path: tuple[int, ...]) -> tuple[Restore, ...]:
        """The locals the reverse of the block at `path` restores (the fused kernel still holds the kept ones)."""
        return tuple(r for r in self.plan.restores.get(path, ()) if not (self.fused and r.kept))

    # -- names ----------------------------------------------------------------
    def fresh(self, what: str, t: Scalar) -> str:
        name = self.namer.fresh(what)
        self.locals[name] = t
        return name

    def adjoint(self, name: str) -> str:
        n = names.shadow(name)
        self.locals.setdefault(n, self.locals.get(name) or self.k.local_types.get(name))
        return n

    def tids(self) -> tuple[ir.Expr, ...]:
        return tuple(ir.Tid(a, type=I64) for a in range(self.launch_ndim))

    # -- tape -----------------------------------------------------------------
    def lane(self, t: Scalar) -> tuple[str, str, Scalar]:
        return (TAPE, TP, self.tape_float) if t.is_float else (ITAPE, ITP, I64)

    def push(self, x: ir.Expr) -> list[ir.Stmt]:
        tape, ptr, lt = self.lane(x.type)
        tp = b.var(ptr, I64)
        return [ir.Store(tape, (*self.tids(), tp), b.cast(x, lt)), ir.Assign(ptr, b.add(tp, b.const(1, I64)))]

    def held(self, path: tuple[int, ...], x: ir.Expr) -> list[ir.Stmt]:
        """In the fused kernel, a taped value of a statement outside loops is kept in a local, not pushed: its
        reverse runs later in the same thread (`pops`), as the in-place square's `t`
        (docs/shadows-and-modes.md#what-the-tape-holds). The same value (a push casts exactly), no tape traffic."""
        v = self.fresh("h", x.type)
        self.registers.setdefault(path, []).append(b.var(v, x.type))
        return [ir.Assign(v, x)]

    def pop(self, t: Scalar, into: str | None = None) -> tuple[list[ir.Stmt], ir.Var]:
        """Pop a value of type t into a fresh local (or into local `into`)."""
        tape, ptr, lt = self.lane(t)
        tp = b.var(ptr, I64)
        tmp = into or self.fresh("v", t)
        return ([ir.Assign(ptr, b.sub(tp, b.const(1, I64))),
                 ir.Assign(tmp, b.cast(ir.Load(tape, (*self.tids(), tp), type=lt), t))], b.var(tmp, t))

    # -- augmented primal -----------------------------------------------------
    def augmented_block(self, body, path: tuple[int, ...] = ()) -> list[ir.Stmt]:
        """The augmented primal of a block; its popped restores are pushed at its end."""
        out: list[ir.Stmt] = []
        for j, s in enumerate(body):
            out.extend(self.augmented_stmt(s, path + (j,)))
        for r in self.restores(path):
            if r.value is None:
                out += self.push(b.var(r.name, r.type))
        return out

    def augmented_stmt(self, s: ir.Stmt, path: tuple[int, ...]) -> list[ir.Stmt]:
        needs = self.needs(path)
        taped = needs.taped
        if isinstance(s, (ir.Assign, ir.Store, ir.AtomicAdd)):
            out = []
            for x, guard in zip(taped, needs.guards or (None,) * len(taped)):
                # a value of a branch not taken is never evaluated (it may read outside an array):
                # the tape gets 0 there, which the reverse, under the same condition, never uses
                value = x if guard is None else b.select(guard, x, b.const(0, x.type))
                out += self.held(path, value) if self.fused and not self.loops else self.push(value)
            return out + [s]
        if isinstance(s, ir.If):
            new = replace(s, then=tuple(self.augmented_block(s.then, path + (0,))),
                          orelse=tuple(self.augmented_block(s.orelse, path + (1,))))
            if not taped:
                return [new]
            c = self.fresh("c", s.cond.type)
            return [ir.Assign(c, s.cond), replace(new, cond=b.var(c, s.cond.type)), *self.push(b.var(c, s.cond.type))]
        if isinstance(s, ir.For):
            self.loops += 1
            body = tuple(self.augmented_block(s.body, path + (0,)))
            self.loops -= 1
            pre, post, bounds = [], [], []
            for x in (s.start, s.stop, s.step):
                if x not in taped:
                    bounds.append(x)
                else:
                    t = self.fresh("lb", I64)
                    pre.append(ir.Assign(t, x))
                    post += self.push(b.var(t, I64))
                    bounds.append(b.var(t, I64))
            return [*pre, replace(s, start=bounds[0], stop=bounds[1], step=bounds[2], body=body), *post]
        if isinstance(s, ir.While):
            if not has_reverse(s.body, self.act):
                return [s]
            # counted as it runs; the reverse runs its body's reverse that many times (docs/adjoint-forms.md 13)
            self.loops += 1
            body = tuple(self.augmented_block(s.body, path + (0,)))
            self.loops -= 1
            wc = self.fresh("wc", I64)
            count = b.var(wc, I64)
            trips = self.held(path, count) if self.fused and not self.loops else self.push(count)
            step = ir.Assign(wc, b.add(count, b.const(1, I64)))
            return [ir.Assign(wc, b.const(0, I64)), replace(s, body=(*body, step)), *trips]
        raise InternalError(f"reverse: unknown statement {type(s).__name__}", getattr(s, "loc", None))

    # -- reverse sweep --------------------------------------------------------
    def reverse_block(self, body, path: tuple[int, ...] = ()) -> list[ir.Stmt]:
        """The reverse sweep of a block: its restores (pops in reverse order of the
        pushes, then replays in program order), then its statements backwards."""
        restores = self.restores(path)
        out: list[ir.Stmt] = []
        for r in reversed(restores):
            if r.value is None:
                out += self.pop(r.type, into=r.name)[0]
        out += [ir.Assign(r.name, r.value) for r in restores if r.value is not None]
        for j in range(len(body) - 1, -1, -1):
            out.extend(self.reverse_stmt(body[j], path + (j,)))
        return out

    def pops(self, needs: Needs, path: tuple[int, ...]) -> tuple[list[ir.Stmt], dict[ir.Expr, ir.Expr]]:
        """A statement's taped values popped (or read from the locals that hold them: `held`) and its
        recomputed locals re-evaluated, with what each becomes in the reverse."""
        out: list[ir.Stmt] = []
        env: dict[ir.Expr, ir.Expr] = {}
        held = self.registers.get(path) if self.fused else None
        for n, x in reversed(list(enumerate(needs.taped))):
            if held is not None:
                env[x] = held[n]
                continue
            stmts, v = self.pop(x.type)
            out += stmts
            env[x] = v
        for x, value in needs.recomputed:
            tmp = self.fresh("v", x.type)
            out.append(ir.Assign(tmp, value))
            env[x] = b.var(tmp, x.type)
        return out, env

    def reverse_stmt(self, s: ir.Stmt, path: tuple[int, ...]) -> list[ir.Stmt]:
        if isinstance(s, ir.Assign):
            if s.name not in self.act.locals:
                return []
            out, env = self.pops(self.needs(path), path)
            d = self.adjoint(s.name)
            t = self.locals[d]
            g = self.fresh("g", t)
            out += [ir.Assign(g, b.var(d, t)), ir.Assign(d, b.const(0, t))]
            return out + self.propagate(s.value, b.var(g, t), env)
        if isinstance(s, (ir.Store, ir.AtomicAdd)):
            if s.array not in self.act.arrays:
                return []
            out, env = self.pops(self.needs(path), path)
            idx = tuple(self.subst(i, env) for i in s.indices)
            t = s.value.type
            g = self.fresh("g", t)
            shadow = names.shadow(s.array)
            out.append(ir.Assign(g, ir.Load(shadow, idx, type=t)))
            if isinstance(s, ir.Store):  # the overwritten value no longer reaches the loss
                out.append(ir.Store(shadow, idx, b.const(0, t)))
            return out + self.propagate(s.value, b.var(g, t), env)
        if isinstance(s, ir.If):
            if not has_reverse(s.then + s.orelse, self.act):
                return []
            pre, env = self.pops(self.needs(path), path)
            return [*pre, ir.If(self.subst(s.cond, env), tuple(self.reverse_block(s.then, path + (0,))),
                                tuple(self.reverse_block(s.orelse, path + (1,))), loc=s.loc)]
        if isinstance(s, ir.For):
            if not has_reverse(s.body, self.act):
                return []
            pre, env = self.pops(self.needs(path), path)
            start, stop, step = (self.subst(x, env) for x in (s.start, s.stop, s.step))
            n = self.fresh("n", I64)
            r = self.fresh("r", I64)
            zero, one = b.const(0, I64), b.const(1, I64)
            body = peephole([ir.Assign(s.var, b.iteration_value(start, step, r)),
                             *self.reverse_block(s.body, path + (0,))])
            if _iterations_commute(body):  # forward order vectorises; the sums are the same up to rounding
                loop = ir.For(r, zero, b.var(n, I64), one, tuple(body), loc=s.loc)
            else:
                loop = ir.For(r, b.sub(b.var(n, I64), one), b.const(-1, I64), b.const(-1, I64), tuple(body),
                              loc=s.loc)
            return [*pre, ir.Assign(n, b.trip_count(start, stop, step)), loop]
        if isinstance(s, ir.While):
            if not has_reverse(s.body, self.act):
                return []
            held = self.registers.get(path) if self.fused else None
            pre, n = ([], held[0]) if held else self.pop(I64)
            r = self.fresh("r", I64)
            body = peephole(self.reverse_block(s.body, path + (0,)))
            if _iterations_commute(body):
                return [*pre, ir.For(r, b.const(0, I64), n, b.const(1, I64), tuple(body), loc=s.loc)]
            return [*pre, ir.For(r, b.sub(n, b.const(1, I64)), b.const(-1, I64), b.const(-1, I64), tuple(body),
                                 loc=s.loc)]
        raise InternalError(f"reverse: unknown statement {type(s).__name__}", getattr(s, "loc", None))

    def subst(self, e: ir.Expr, env: dict[ir.Expr, ir.Expr]) -> ir.Expr:
        """`e` with taped sub-expressions and recomputed locals replaced by their values in the reverse."""
        return map_expr(e, pre=env.get)

    def propagate(self, e: ir.Expr, g: ir.Expr, env) -> list[ir.Stmt]:
        """Statements adding g·∂e/∂(each active leaf of e) into that leaf's adjoint."""
        if not self.act.expr(e):
            return []
        if isinstance(e, ir.Var):
            if e.name in self.act.scalars:  # into the thread's float64 sum (flushed by sum_flush)
                self.summed.add(e.name)
                total = self.sums[e.name]
                self.locals[total] = ACCUMULATOR
                return [ir.Assign(total, b.add(b.var(total, ACCUMULATOR), b.cast(g, ACCUMULATOR)))]
            d = self.adjoint(e.name)
            return [ir.Assign(d, b.add(b.var(d, e.type), g))]
        if isinstance(e, ir.Load):
            shadow = names.shadow(e.array)
            idx = tuple(self.subst(i, env) for i in e.indices)
            if e.array not in self.exclusive:  # other threads read this element too
                return [ir.AtomicAdd(shadow, idx, g)]
            return [ir.Store(shadow, idx, b.add(ir.Load(shadow, idx, type=e.type), g))]
        if isinstance(e, ir.Select):
            return [ir.If(self.subst(e.cond, env), tuple(self.propagate(e.a, g, env)),
                          tuple(self.propagate(e.b, g, env)))]
        if isinstance(e, ir.Apply):
            entry = partials(e.op, e.loc)
            args = tuple(self.subst(a, env) for a in e.args)
            out: list[ir.Stmt] = []
            y = self.subst(e, env)
            if _reloads(y) and any("y" in r and self.act.expr(a) for a, r in zip(e.args, entry.reads)):
                # the result, in a local read before this statement's adds (docs/adjoint-forms.md section 12)
                name = self.fresh("y", y.type)
                out.append(ir.Assign(name, y))
                y = b.var(name, y.type)
            for a, p in zip(e.args, entry.at(args, y)):
                if p is None or not self.act.expr(a):
                    continue
                contrib = b.mul(g, b.cast(p, g.type)) if p.type != g.type else b.mul(g, p)
                if isinstance(contrib, (ir.Var, ir.Const)):
                    gi = contrib
                else:
                    name = self.fresh("g", g.type)
                    out.append(ir.Assign(name, contrib))
                    gi = b.var(name, g.type)
                out += self.propagate(a, b.cast(gi, a.type), env)
            return out
        return []

    # -- assembly -------------------------------------------------------------
    def adjoint_inits(self) -> list[ir.Stmt]:
        return [ir.Assign(self.adjoint(n), b.const(0, self.locals[n])) for n in sorted(self.act.locals)] + \
            [ir.Assign(self.sums[n], b.const(0, ACCUMULATOR)) for n in sorted(self.summed)]

    def sum_flush(self) -> list[ir.Stmt]:
        """Each thread's sum of an Active scalar's derivative, added once into its accumulator."""
        return [ir.AtomicAdd(names.accumulator(n), (b.const(0, I64),), b.var(self.sums[n], ACCUMULATOR))
                for n in sorted(self.summed)]

    def static_slots(self, body, uniform: bool = False) -> tuple[int, int] | None:
        """(float, int) pushes per thread along the longest path, or None if a loop pushes;
        with `uniform`, None also when two paths push different numbers."""
        tapes = (TAPE, ITAPE)
        total = [0, 0]
        for s in body:
            if isinstance(s, ir.Store) and s.array in tapes:
                total[tapes.index(s.array)] += 1
            elif isinstance(s, ir.If):
                t, e = self.static_slots(s.then, uniform), self.static_slots(s.orelse, uniform)
                if t is None or e is None or (uniform and t != e):
                    return None
                total = [x + max(y, z) for x, y, z in zip(total, t, e)]
            elif isinstance(s, (ir.For, ir.While)):
                if any(isinstance(x, ir.Store) and x.array in tapes for x in ir.walk_stmts(s.body)):
                    return None
        return total[0], total[1]


def _reloads(e: ir.Expr) -> bool:
    """Whether `e` computes on a load, which a backend reloads after a store into a shadow (adjoint-forms.md 12)."""
    return isinstance(e, ir.Apply) and any(isinstance(x, ir.Load) for x in ir.walk_expr(e))


def _accumulations(body: list[ir.Stmt]) -> set[str]:
    """Locals that `body` only ever adds into (`s = s + e`, e not reading s) and
    reads nowhere else: like memory updated by accumulation, their iterations commute."""
    adds, other = set(), set()
    for x in ir.walk_stmts(tuple(body)):
        reads = {n.name for e in ir.stmt_exprs(x) for n in ir.walk_expr(e) if isinstance(n, ir.Var)}
        if isinstance(x, ir.Assign) and isinstance(x.value, ir.Apply) and x.value.op is Op.ADD \
                and x.value.args[0] == ir.Var(x.name, type=x.value.type) \
                and x.name not in {n.name for n in ir.walk_expr(x.value.args[1]) if isinstance(n, ir.Var)}:
            adds.add(x.name)
            other |= reads - {x.name}
        else:
            other |= reads | ({x.name} if isinstance(x, ir.Assign) else set())
    return adds - other


def _iterations_commute(body: list[ir.Stmt]) -> bool:
    """Whether the iterations of a reverse loop body may run in any order: it
    pops nothing, carries no value from one iteration to the next (every local
    it assigns is assigned at its top level before any read, or only added
    into), and writes memory only by accumulation (`X[I] = X[I] + e` or atomic adds)."""
    assigned = {x.name for x in ir.walk_stmts(tuple(body)) if isinstance(x, ir.Assign)} - _accumulations(body)
    if assigned & {TP, ITP}:
        return False
    for x in ir.walk_stmts(tuple(body)):
        if isinstance(x, ir.Store) and not (isinstance(x.value, ir.Apply) and x.value.op is Op.ADD
                                            and x.value.args[0] == ir.Load(x.array, x.indices, type=x.value.type)):
            return False
    defined: set[str] = set()
    for x in body:
        used = {n.name for y in ir.walk_stmts((x,)) for e in ir.stmt_exprs(y) for n in ir.walk_expr(e)
                if isinstance(n, ir.Var)}
        if (used & assigned) - defined:
            return False
        if isinstance(x, ir.Assign):
            defined.add(x.name)
    return True


def reverse_kernels(k: ir.Kernel, act: Activity, launch_ndim: int) -> ReverseKernels:
    """Build the fused, augmented primal, reverse and count kernels for typed kernel `k`."""
    bld = _Builder(k, act, launch_ndim)
    tids = bld.tids()
    augmented, reverse = bld.augmented_block(k.body), bld.reverse_block(k.body)
    bld.fused = True  # the locals the plan keeps are still in registers when the fused reverse needs them
    fused_augmented, fused_reverse = bld.augmented_block(k.body), bld.reverse_block(k.body)
    inits, flush = bld.adjoint_inits(), bld.sum_flush()
    tp0 = [ir.Assign(ptr, b.const(0, I64)) for _, ptr in LANES]
    for _, ptr in LANES:
        bld.locals[ptr] = I64
    static = bld.static_slots(augmented)
    count_store = [ir.Store(COUNT, (*tids, b.const(n, I64)), b.var(ptr, I64)) for n, (_, ptr) in enumerate(LANES)]
    count_load = [ir.Assign(ptr, ir.Load(COUNT, (*tids, b.const(n, I64)), type=I64))
                  for n, (_, ptr) in enumerate(LANES)]

    tape_ndim = launch_ndim + 1
    shadows = {p.name: names.shadow(p.name) for p in k.params if p.name in act.arrays}
    accs = {p.name: names.accumulator(p.name) for p in k.params if p.name in act.scalars}
    tape_p = (ir.Param(TAPE, Array(bld.tape_float, tape_ndim), is_array=True, written=True),
              ir.Param(ITAPE, Array(I64, tape_ndim), is_array=True, written=True))
    count_p = ir.Param(COUNT, Array(I64, launch_ndim + 1), is_array=True, written=True)
    shadow_ps = tuple(ir.Param(shadows[p.name], p.type, is_array=True, written=True)
                      for p in k.params if p.name in shadows)
    acc_ps = tuple(ir.Param(accs[p.name], Array(ACCUMULATOR, 1), is_array=True, written=True)
                   for p in k.params if p.name in accs)
    local_items = tuple(sorted((n, t) for n, t in bld.locals.items() if n not in {p.name for p in k.params}))

    def kernel(name, params, body):
        return replace(k, name=f"{k.name}_{name}", params=params, body=tuple(body), tid_ndim=launch_ndim,
                       locals=local_items, interior=None)

    followed, n = frozenset(names.shadow(x) for x in act.locals), len(inits)  # zeros.py: the adjoint locals
    fused_reverse, reverse = (drop_zero_adds(inits + peephole(r), followed)[n:] for r in (fused_reverse, reverse))
    fused_ps, fused_body = k.params + shadow_ps + acc_ps + tape_p, [*inits, *fused_reverse]
    count = None
    if static is None:  # the tape is sized by the count kernel: every push guarded (tape_count.guard_pushes)
        written = {s.array for s in ir.walk_stmts(k.body) if isinstance(s, (ir.Store, ir.AtomicAdd))}
        skeleton = count_skeleton(augmented, written, {TP, ITP})
        count = kernel("count", k.params + (count_p,), [*tp0, *skeleton, *count_store])
        augmented = list(guard_pushes(augmented, (TAPE, ITAPE)))
        fused_augmented = list(guard_pushes(fused_augmented, (TAPE, ITAPE)))
        # a thread that overflowed stores its pointers (the runtime raises) and skips its reverse, which
        # would pop slots it never wrote
        fused_ps += (count_p,)
        fused_body = [*inits, ir.If(within(LANES, tape_ndim - 1), tuple(fused_reverse), tuple(count_store))]
    fused = kernel("grad", fused_ps, [*tp0, *fused_augmented, *fused_body, *flush])
    uniform = bld.static_slots(augmented, uniform=True)
    if uniform is not None:  # every thread pushes the same: its reverse starts from that constant, no counts kept
        count_store = []
        count_load = [ir.Assign(ptr, b.const(uniform[n], I64)) for n, (_, ptr) in enumerate(LANES)]
    save_ps, saving, saved = saves_of(k, bld.facts.saved_in_place if launch_ndim == k.tid_ndim else frozenset(), tids)
    aug = kernel("augmented_primal", k.params + tape_p + (count_p,) + save_ps, [*tp0, *saving, *augmented,
                                                                               *count_store])
    rev = kernel("rev", k.params + shadow_ps + acc_ps + tape_p + (count_p,), [*count_load, *inits, *reverse, *flush])
    forms = tuple((a, "plain add" if a in bld.exclusive else "atomic add") for a in sorted(act.arrays))
    sums = {n: bld.sums[n] for n in sorted(bld.summed)}
    return ReverseKernels(fused, aug, rev, count, static, bld.tape_float, shadows, accs, tape_ndim, forms, sums,
                          counted=uniform is None, saved_in_place=saved)
