"""Static race proofs for affine accesses under guards (docs/launches.md).

What is proved: for a set of arrays, that in a launch no element of them is
touched by two different threads with at least one of the two writing it
(atomic adds to them are not handled here: their proof fails).

How: each access is described by its index as linear forms over integer
unknowns — the tid components and loop variables of the thread making it
(tagged per thread), the kernel's integer scalar parameters and the shapes
(shared) — with the linear constraints that hold where it runs: 0 <= tid,
the ranges of the loops around it, the comparisons of enclosing `if` and
`while` conditions. Two threads touch a common element only if

    context(thread 1) ∧ context(thread 2) ∧ index1 = index2 ∧ tid1 ≠ tid2

has an integer solution; Fourier–Motzkin elimination shows it has none
(infeasible over the rationals implies infeasible over the integers). A
flattened index `r * s + c` (s a parameter or shape nothing binds) with
0 <= c < s provable in its context is compared as the pair (r, c), which
keeps LU, triangular and correlation-style kernels linear; so is a local
bound to such a sum (`k = i * n + j; y[k]`: `RowDef`, followed as any binding).

Why it is sound — each form is the value the thread computes:
* Every binding of a name counts, flow-sensitively: an assignment (augmented
  ones and unpacked tuples are assignments in the IR) replaces the name's
  form, or forgets it when the value is not affine; after an `if` a name keeps
  a form only if both branches leave it the same one; a `for` or `while`
  forgets, on entry and after it, every name its body binds (and a `for` its
  own variable), since the body runs any number of times and a loop variable
  outlives its loop with its last value or its value from before. A scalar
  parameter is a shared unknown only if nothing binds it.
* A `while` condition's loads are taken in the state of any iteration (what
  the body binds forgotten), and it constrains the body only through names the
  body does not bind.
* A bool local is followed the same way, as a `Flag`: what its value being
  true, or false, implies (analysis/conditions.py). After an `if` that binds
  it, it holds (c and its value at the end of the then branch) or (not c and
  its value at the end of the else branch); a condition on it in a branch fixes
  its value there. This is how the guards of `continue` and `break`, which the
  frontend lowers to flags (frontend/jumps.py), reach the accesses after them
  (docs/bounds.md).
* Machine integers wrap: every operation a form relies on (`+ - *`, negation,
  a narrowing cast, and r * s and r * s + c of a flattened index) contributes a
  `Check` that its exact value fits its type. The proof is returned as those
  checks (analysis/overflow.py's `Exactness`): it holds at every launch where
  they hold, and a launch where they do not gets the exact run-time check.
* Elements are compared by their index tuples, which is exact for accesses
  that stay inside their arrays (docs/launches.md: an index outside its array,
  negative ones included, is an error, not another element).
Failing to prove only sends the launch to the exact run-time check.

The same walk over the accesses (`accesses`) gives the bounds proofs of
analysis/bounds.py their sites, with what only they use: disjunctions (`!=`,
`or`, a negated `and`), whether the constraints are a site's whole path
condition, the conditions of lazily evaluated operands, loops of other steps
and with `min`/`max` ends, and products of unknowns. The race proof ignores
them, so its verdicts are those of its own walk.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import nodes as ir
from ..ir.ops import Op
from ..ir.types import BOOL
from .conditions import ALWAYS, CONSTANT, NEVER, NOTHING, Either, Flag, Implied, both, either, known, merge_flag
from .fourier_motzkin import feasible
from .overflow import Check, Exactness, Loop, add, linear, mul, tid_unknown

Form = dict  # unknown name ("" for the constant) -> integer coefficient


def add_forms(a: Form, b: Form, k: int = 1) -> Form:
    out = dict(a)
    for n, c in b.items():
        out[n] = out.get(n, 0) + k * c
        if out[n] == 0:
            del out[n]
    return out


def neg_form(f: Form) -> Form:
    return {n: -c for n, c in f.items()}


def _const(f: Form) -> int | None:
    return f.get("", 0) if all(n == "" for n in f) else None


def _product(a: Form, b: Form) -> Form:
    """a * b, each monomial an unknown of its own: its factors' names joined by '*' in order."""
    out: Form = {}
    for na, ca in a.items():
        for nb, cb in b.items():
            key = "*".join(sorted(x for n in (na, nb) if n for x in n.split("*")))
            out[key] = out.get(key, 0) + ca * cb
    return {n: c for n, c in out.items() if c}


def _bits(t) -> int:
    return int(t.name[3:])  # int32, int64


def bound_names(body: tuple[ir.Stmt, ...]) -> set[str]:
    """Every name a block binds: assigned locals and loop variables, nested blocks included."""
    out: set[str] = set()
    for s in ir.walk_stmts(body):
        if isinstance(s, ir.Assign):
            out.add(s.name)
        elif isinstance(s, ir.For):
            out.add(s.var)
    return out


@dataclass(frozen=True)
class Lin:
    """The linear form of an integer expression, and the checks (no operation
    wrapped) under which the machine value equals it."""

    form: dict
    checks: frozenset = frozenset()


@dataclass(frozen=True, eq=False)
class RowDef:
    """A local bound to a non-affine `r * s + c`: the sum and the environment of its binding."""

    expr: ir.Expr
    env: dict


@dataclass
class _Context:
    constraints: list  # forms f meaning f <= 0
    env: dict  # local name -> Lin of its current value, where it has one
    checks: frozenset = frozenset()  # what the constraints rely on
    # for the bounds proof (the race proof uses neither): the disjunctions that hold too (`Either`),
    # and whether all these are the whole condition for reaching this point: every thread (and
    # loop values) satisfying them does
    eithers: list = field(default_factory=list)
    exact: bool = True

    def inner(self, constraints=(), checks=frozenset(), forget=frozenset(), eithers=(), exact=True) -> _Context:
        env = {n: v for n, v in self.env.items() if n not in forget}
        return _Context(self.constraints + list(constraints), env, self.checks | checks,
                        self.eithers + list(eithers), self.exact and exact)


class Linearizer:
    """Linear forms of integer expressions for one thread (`tag` names its unknowns).
    With `products`, a product of two non-constant forms is a form too, each of its
    monomials (`param:n*tid:0`) an unknown of its own: linear once the launch
    substitutes the parameters and shapes (analysis/bounds.py)."""

    def __init__(self, k: ir.Kernel, tag: str, products: bool = False):
        self.tag = tag
        self.k = k
        self.products = products
        # a scalar parameter is the same in every thread only while nothing rebinds it
        ints = {p.name for p in k.params if isinstance(p.type, ir.Scalar) and p.type.is_int}
        self.params = ints - bound_names(k.body)
        self.loops: list[Loop] = []

    def form(self, e: ir.Expr, env: dict) -> Lin | None:
        if e.type is None or not e.type.is_int:
            return None
        if isinstance(e, ir.Const):
            return Lin({"": int(e.value)})
        if isinstance(e, ir.Tid):
            return Lin({tid_unknown(e.axis, self.tag): 1})
        if isinstance(e, ir.Shape):
            return Lin({f"shape:{e.array}:{e.axis}": 1})  # shared by both threads
        if isinstance(e, ir.Var):
            if isinstance(env.get(e.name), Lin):
                return env[e.name]
            return Lin({f"param:{e.name}": 1}) if e.name in self.params else None
        if not isinstance(e, ir.Apply):
            return None
        if e.op is Op.CAST:
            a = self.form(e.args[0], env)
            if a is None or _bits(e.type) >= _bits(e.args[0].type):
                return a  # a widening cast keeps the value
            return Lin(a.form, a.checks | {Check(linear(a.form), _bits(e.type))})  # narrowing: exact if it fits
        if e.op is Op.NEG:
            a = self.form(e.args[0], env)
            return None if a is None else self._result(e, neg_form(a.form), a.checks)
        if e.op in (Op.ADD, Op.SUB, Op.MUL):
            a, b = self.form(e.args[0], env), self.form(e.args[1], env)
            if a is None or b is None:
                return None
            if e.op is not Op.MUL:
                return self._result(e, add_forms(a.form, b.form, 1 if e.op is Op.ADD else -1), a.checks | b.checks)
            for x, y in ((a, b), (b, a)):
                c = _const(x.form)
                if c is not None:
                    return self._result(e, {n: c * v for n, v in y.form.items() if c * v}, a.checks | b.checks)
            if self.products:
                return self._result(e, _product(a.form, b.form), a.checks | b.checks)
        return None

    @staticmethod
    def _result(e: ir.Apply, f: Form, checks: frozenset) -> Lin:
        """An operation's form: exact if its exact value fits its type."""
        return Lin(f, checks | {Check(linear(f), _bits(e.type))})

    def condition(self, e: ir.Expr, env: dict, holds: bool) -> tuple[list[Form], frozenset]:
        """Linear constraints implied by `e` being `holds` (those it can express),
        and the checks they rely on."""
        constraints, checks, _, _ = self.implied(e, env, holds)
        return constraints, checks

    def implied(self, e: ir.Expr, env: dict, holds: bool) -> Implied:
        """`condition`, the disjunctions `e` being `holds` implies, and whether
        these say all it does (they hold exactly when `e` is `holds`)."""
        if isinstance(e, ir.Apply) and e.op is Op.NOT:
            return self.implied(e.args[0], env, not holds)
        if isinstance(e, ir.Const) and isinstance(e.value, bool):
            return ALWAYS if e.value == holds else NEVER
        if isinstance(e, ir.Var):  # a bool local: what its value implies (analysis/conditions.py)
            flag = env.get(e.name)
            return flag.when(holds) if isinstance(flag, Flag) else NOTHING
        if isinstance(e, ir.Apply) and e.op in (Op.AND, Op.OR):
            a = self.implied(e.args[0], env, holds)
            b = self.implied(e.args[1], env, holds)
            # a conjunction: both parts hold; a disjunction says nothing linear, but one of its parts holds
            return both(a, b) if (e.op is Op.AND) == holds else either(a, b)
        if not (isinstance(e, ir.Apply) and e.op in (Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE)):
            return NOTHING
        a, b = self.form(e.args[0], env), self.form(e.args[1], env)
        if a is None or b is None:
            return NOTHING
        d = add_forms(a.form, b.form, -1)  # a - b, exactly: no machine operation computes it
        op = e.op if holds else {Op.LT: Op.GE, Op.LE: Op.GT, Op.GT: Op.LE, Op.GE: Op.LT,
                                 Op.EQ: Op.NE, Op.NE: Op.EQ}[e.op]
        one = {"": 1}
        out = {Op.LT: [add_forms(d, one)], Op.LE: [d], Op.GT: [add_forms(neg_form(d), one)], Op.GE: [neg_form(d)],
               Op.EQ: [d, neg_form(d)], Op.NE: []}[op]
        # d != 0: d <= -1 or d >= 1 (integers)
        eithers = [Either(((add_forms(d, one),), (add_forms(neg_form(d), one),)), a.checks | b.checks)] \
            if op is Op.NE else []
        return out, (a.checks | b.checks) if out else frozenset(), eithers, True


@dataclass
class Access:
    array: str
    indices: tuple
    write: bool  # a plain store or an atomic add
    ctx: _Context
    atomic: bool = False
    node: object = None  # the Load, Store or AtomicAdd


def accesses(k: ir.Kernel, lin: Linearizer, bounds: bool = False) -> list[Access]:
    """Every access of every array with its context (see the module doc for how
    names are followed). For the bounds proof (`bounds`), a load in an operand
    evaluated only when another holds (the right of `and`/`or`, a branch of a
    conditional expression) also has that operand's constraints, and the
    variable of a loop of step s is start + s * q for an integer q >= 0. A
    context is exact (see `_Context`) unless a condition, a loop's range or a
    `while` before it (which may never end) says more than its constraints."""
    out: list[Access] = []
    base = _Context([{tid_unknown(a, lin.tag): -1} for a in range(k.tid_ndim)], {})  # tid >= 0
    after_while = False

    def record(node, write, ctx, atomic=False):
        out.append(Access(node.array, node.indices, write, ctx.inner(exact=not after_while), atomic, node))

    def given(ctx: _Context, cond: ir.Expr, holds: bool) -> _Context:
        constraints, checks, eithers, exact = lin.implied(cond, ctx.env, holds)
        return ctx.inner(constraints, checks, eithers=eithers, exact=exact)

    def under(ctx: _Context, cond: ir.Expr, holds: bool) -> _Context:
        """`given`, for a block: the bool locals `cond` fixes are known there (`if not cnt:`)."""
        inner = given(ctx, cond, holds)
        inner.env |= {n: CONSTANT[v] for n, v in known(cond, holds).items()}
        return inner

    def exprs(e: ir.Expr, ctx: _Context):
        if not bounds:
            for x in ir.walk_expr(e):
                if isinstance(x, ir.Load):
                    record(x, False, ctx)
            return
        if isinstance(e, ir.Load):
            record(e, False, ctx)
        if isinstance(e, ir.Apply) and e.op in (Op.AND, Op.OR):
            exprs(e.args[0], ctx)
            exprs(e.args[1], given(ctx, e.args[0], e.op is Op.AND))
        elif isinstance(e, ir.Select):
            exprs(e.cond, ctx)
            exprs(e.a, given(ctx, e.cond, True))
            exprs(e.b, given(ctx, e.cond, False))
        else:
            for c in ir.children(e):
                exprs(c, ctx)

    def block(body, ctx: _Context):
        nonlocal after_while
        for s in body:
            if isinstance(s, ir.While):
                # the condition runs before every iteration: with what the body binds unknown
                head = ctx.inner(forget=bound_names(s.body), exact=False)
                exprs(s.cond, head)
                block(s.body, under(head, s.cond, True))
                ctx.env = head.env
                after_while = True
                continue
            for e in ir.stmt_exprs(s):
                exprs(e, ctx)
            if isinstance(s, ir.Assign):
                f = lin.form(s.value, ctx.env)
                if f is None and s.value.type == BOOL:
                    f = Flag.of(lin.implied(s.value, ctx.env, True), lin.implied(s.value, ctx.env, False))
                if f is None and _is_row(s.value):
                    f = RowDef(s.value, dict(ctx.env))
                if f is None:
                    ctx.env.pop(s.name, None)
                else:
                    ctx.env[s.name] = f
            elif isinstance(s, (ir.Store, ir.AtomicAdd)):
                record(s, True, ctx, isinstance(s, ir.AtomicAdd))
            elif isinstance(s, ir.If):
                after, conds = [], [lin.implied(s.cond, ctx.env, holds) for holds in (True, False)]
                for branch, holds in zip((s.then, s.orelse), (True, False)):
                    inner = under(ctx, s.cond, holds)
                    block(branch, inner)
                    after.append(inner.env)
                before = ctx.env
                ctx.env = {n: v for n, v in after[0].items() if after[1].get(n) == v}
                bound = bound_names(s.then + s.orelse)
                for n in {n for env in (before, *after) for n, v in env.items() if isinstance(v, Flag)}:
                    ctx.env.pop(n, None)
                    if n not in bound:  # what `under` knew in a branch, not a new value
                        flag = before.get(n)
                    else:  # v <=> (c and v_then) or (not c and v_else)
                        flag = merge_flag(*conds, *(e.get(n) if isinstance(e.get(n), Flag) else None for e in after))
                    if flag is not None:
                        ctx.env[n] = flag
            elif isinstance(s, ir.For):
                loop(s, ctx)

    def ends(e: ir.Expr, env: dict, lower: bool, sign: int) -> list[Lin]:
        """The forms a loop's `range` argument bounds its variable by: its own, or, for
        the bounds proof, both arguments of a `max` bounding it from below or of a `min`
        bounding it from above (v >= max(a, b) is v >= a and v >= b)."""
        f = lin.form(e, env)
        if f is not None:
            return [f]
        if bounds and sign and isinstance(e, ir.Apply) and e.op is (Op.MAX if lower else Op.MIN):
            parts = [lin.form(a, env) for a in e.args]
            return parts if None not in parts else []
        return []

    def loop(s: ir.For, ctx: _Context):
        # range() evaluates its bounds once, before the loop; the body may run any
        # number of times, and the variable outlives the loop: forget all it binds
        step = s.step.value if isinstance(s.step, ir.Const) else None
        sign = 0 if step is None else 1 if step > 0 else -1
        starts, stops = ends(s.start, ctx.env, sign > 0, sign), ends(s.stop, ctx.env, sign < 0, sign)
        name = f"{lin.tag}loop:{s.var}:{len(lin.loops)}"
        v = {name: 1}
        forget = bound_names(s.body) | {s.var}
        constraints, checks = [], frozenset()
        for start in starts:
            checks |= start.checks
            if sign:  # start <= v, or v <= start
                constraints.append(add_forms(start.form, v, -1) if sign > 0 else add_forms(v, start.form, -1))
        for stop in stops:
            checks |= stop.checks
            if sign:  # v < stop, or stop < v
                d = add_forms(v, stop.form, -1) if sign > 0 else add_forms(stop.form, v, -1)
                constraints.append(add_forms(d, {"": 1}))
        strided = bounds and sign != 0 and len(starts) == 1 and abs(step) > 1
        if strided:  # v = start + step * q, q >= 0
            q = f"{lin.tag}stride:{s.var}:{len(lin.loops)}"
            d = add_forms(add_forms(v, starts[0].form, -1), {q: step}, -1)
            constraints += [d, neg_form(d), {q: -1}]
        lin.loops.append(Loop(name, ((linear(starts[0].form) if starts else None,
                                      linear(stops[0].form) if stops else None, sign),)))
        # every v the constraints allow is an iteration (with a step other than ±1, only for the bounds
        # proof), reached unless a `while` in an earlier iteration never ends
        exact = bool(starts and stops) and (step in (1, -1) or strided) and \
            not any(isinstance(x, ir.While) for x in ir.walk_stmts(s.body))
        inner = ctx.inner(constraints, checks, forget, exact=exact)
        inner.env[s.var] = Lin(v)
        block(s.body, inner)
        ctx.env = {n: x for n, x in ctx.env.items() if n not in forget}

    block(k.body, base)
    return out


def _accesses(k: ir.Kernel, lin: Linearizer, arrays: set[str]) -> list[Access] | None:
    """Every plain access to `arrays` with its context, or None if one is an atomic add."""
    out = [a for a in accesses(k, lin) if a.array in arrays]
    return None if any(a.atomic for a in out) else out


def _index_forms(acc: Access, lin: Linearizer, strides: dict) -> tuple[list[Form], frozenset] | None:
    """Linear forms of an access's index positions, and their checks; a flattened
    position `r * s + c` (s a parameter or shape, 0 <= c < s provable) becomes (r, c)."""
    out: list[Form] = []
    checks: frozenset = frozenset()
    for pos, e in enumerate(acc.indices):
        if pos not in strides:
            f = lin.form(e, acc.ctx.env)
            if f is None:
                return None
            out.append(f.form)
            checks |= f.checks
            continue
        split = _split_row(e, acc, lin, strides[pos])
        if split is None:
            return None
        out.extend(split[0])
        checks |= split[1]
    return out, checks


def _is_row(e: ir.Expr) -> bool:
    """Whether `e` has the shape `r * s + c` (either order) of a flattened index."""
    return isinstance(e, ir.Apply) and e.op is Op.ADD and e.type is not None and e.type.is_int \
        and any(isinstance(a, ir.Apply) and a.op is Op.MUL for a in e.args)


def _row(e: ir.Expr, env: dict) -> tuple[ir.Expr, dict]:
    """An index expression and the environment its names are read in: a local bound to a flattened
    index (`RowDef`) stands for the sum, read in the environment of its binding."""
    if isinstance(e, ir.Var) and isinstance(env.get(e.name), RowDef):
        return env[e.name].expr, env[e.name].env
    return e, env


def _split_row(e: ir.Expr, acc: Access, lin: Linearizer, stride: ir.Expr) -> tuple[list[Form], frozenset] | None:
    e, env = _row(e, acc.ctx.env)
    if not (isinstance(e, ir.Apply) and e.op is Op.ADD):
        return None
    for scaled, rest in (e.args, e.args[::-1]):
        if isinstance(scaled, ir.Apply) and scaled.op is Op.MUL:
            for r, s in (scaled.args, scaled.args[::-1]):
                if s != stride:
                    continue
                rf, cf, sf = lin.form(r, env), lin.form(rest, env), lin.form(s, env)
                if rf is None or cf is None or sf is None:
                    continue
                # 0 <= c <= s - 1 must hold wherever the access runs
                below = feasible(acc.ctx.constraints + [add_forms(cf.form, {"": 1})])  # c <= -1 possible?
                above = feasible(acc.ctx.constraints + [add_forms(sf.form, cf.form, -1)])  # c >= s possible?
                if not below and not above:
                    # r * s and r * s + c computed without wrapping: then equal indices mean equal (r, c)
                    product = mul(linear(rf.form), linear(sf.form))
                    checks = rf.checks | cf.checks | sf.checks | {
                        Check(product, _bits(scaled.type)), Check(add(product, linear(cf.form)), _bits(e.type))}
                    return [rf.form, cf.form], checks
    return None


def _strides(accesses: list[Access], lin: Linearizer) -> dict[str, dict[int, ir.Expr]]:
    """For each array, the positions indexed as `r * s + c` by some access, with
    s an integer parameter nothing binds or a shape."""
    out: dict[str, dict[int, ir.Expr]] = {}
    for acc in accesses:
        for pos, e in enumerate(acc.indices):
            e, _ = _row(e, acc.ctx.env)
            if isinstance(e, ir.Apply) and e.op is Op.ADD:
                for scaled in e.args:
                    if isinstance(scaled, ir.Apply) and scaled.op is Op.MUL:
                        for s in scaled.args:
                            if isinstance(s, ir.Shape) or isinstance(s, ir.Var) and s.name in lin.params:
                                out.setdefault(acc.array, {}).setdefault(pos, s)
    return out


def proves_race_free(k: ir.Kernel, arrays: set[str]) -> Exactness | None:
    """Whether no two threads touch a common element of `arrays` with one of
    them writing it (see module doc): the checks under which that holds, or
    None when the proof does not go through."""
    if not arrays:
        return Exactness()
    if k.tid_ndim == 0:
        return None
    lin1, lin2 = Linearizer(k, "a:"), Linearizer(k, "b:")
    acc1, acc2 = _accesses(k, lin1, arrays), _accesses(k, lin2, arrays)
    if acc1 is None or acc2 is None:
        return None
    strides = _strides(acc1, lin1)
    checks: frozenset = frozenset()
    forms2: dict[int, tuple | None] = {}
    for x in acc1:
        fx = _index_forms(x, lin1, strides.get(x.array, {}))
        if fx is None:
            return None
        checks |= fx[1] | x.ctx.checks
        for n, y in enumerate(acc2):
            if y.array != x.array or not (x.write or y.write):
                continue
            if n not in forms2:  # thread b's checks mirror thread a's
                forms2[n] = _index_forms(y, lin2, strides.get(y.array, {}))
            fy = forms2[n]
            if fy is None or len(fx[0]) != len(fy[0]):
                return None
            system = x.ctx.constraints + y.ctx.constraints
            for a, b in zip(fx[0], fy[0]):
                d = add_forms(a, b, -1)
                system = system + [d, neg_form(d)]
            for axis in range(k.tid_ndim):  # tid1 != tid2: they differ on some axis, in some direction
                t1, t2 = {tid_unknown(axis, "a:"): 1}, {tid_unknown(axis, "b:"): 1}
                for lo, hi in ((t1, t2), (t2, t1)):
                    if feasible(system + [add_forms(add_forms(lo, hi, -1), {"": 1})]):  # lo - hi + 1 <= 0
                        return None
    return Exactness(checks, tuple(lin1.loops))
