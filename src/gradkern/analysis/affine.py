"""Static race proofs for affine accesses under guards (DESIGN §5).

Each access to a written array is described by its index as linear forms
over integer unknowns (the tid components, the loop variables around it, the
kernel's scalar parameters and shapes), plus the linear constraints that hold
where it executes: 0 <= tid, loop ranges, and the comparisons of the enclosing
`if` conditions. Two accesses by different threads race when a system

    context(thread 1) ∧ context(thread 2) ∧ index1 = index2 ∧ tid1 ≠ tid2

has an integer solution; Fourier–Motzkin elimination proves that it has none
(infeasible over the rationals implies over the integers, so a proof is
sound; failing to prove only sends the launch to the exact run-time check).
A flattened index `r * s + c` with 0 <= c < s provable in its context is
compared as the pair (r, c), which keeps LU, triangular and correlation-style
kernels linear.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..ir import nodes as ir
from ..ir.ops import Op

Form = dict  # unknown name ("" for the constant) -> integer coefficient
MAX_CONSTRAINTS = 400


def _add(a: Form, b: Form, k: int = 1) -> Form:
    out = dict(a)
    for n, c in b.items():
        out[n] = out.get(n, 0) + k * c
        if out[n] == 0:
            del out[n]
    return out


def _const(f: Form) -> int | None:
    return f.get("", 0) if all(n == "" for n in f) else None


@dataclass
class _Context:
    constraints: list  # forms f meaning f <= 0
    env: dict  # local name -> linear form (stable, affine definitions)


class _Linearizer:
    """Linear forms of integer expressions for one thread (`tag` names its unknowns)."""

    def __init__(self, k: ir.Kernel, tag: str):
        self.tag = tag
        self.k = k
        counts: dict[str, int] = {}
        for s in ir.walk_stmts(k.body):
            if isinstance(s, ir.Assign):
                counts[s.name] = counts.get(s.name, 0) + 1
        self.counts = counts
        self.params = {p.name for p in k.params if not p.is_array}

    def form(self, e: ir.Expr, env: dict) -> Form | None:
        if isinstance(e, ir.Const):
            return {"": int(e.value)} if isinstance(e.value, (int, bool)) else None
        if isinstance(e, ir.Tid):
            return {f"{self.tag}t{e.axis}": 1}
        if isinstance(e, ir.Shape):
            return {f"shape:{e.array}:{e.axis}": 1}  # shared by both threads
        if isinstance(e, ir.Var):
            if e.name in env:
                return env[e.name]
            if e.name in self.params and e.name not in self.counts:
                return {f"param:{e.name}": 1}
            return None
        if isinstance(e, ir.Apply):
            if e.op is Op.CAST and e.type.is_int and e.args[0].type.is_int:
                return self.form(e.args[0], env)
            if e.op in (Op.ADD, Op.SUB):
                a, b = self.form(e.args[0], env), self.form(e.args[1], env)
                return None if a is None or b is None else _add(a, b, 1 if e.op is Op.ADD else -1)
            if e.op is Op.NEG:
                a = self.form(e.args[0], env)
                return None if a is None else {n: -c for n, c in a.items()}
            if e.op is Op.MUL:
                a, b = self.form(e.args[0], env), self.form(e.args[1], env)
                if a is None or b is None:
                    return None
                for x, y in ((a, b), (b, a)):
                    c = _const(x)
                    if c is not None:
                        return {n: c * v for n, v in y.items() if c * v}
        return None

    def condition(self, e: ir.Expr, env: dict, holds: bool) -> list[Form]:
        """Linear constraints implied by `e` being `holds` (those it can express)."""
        if isinstance(e, ir.Apply) and e.op is Op.NOT:
            return self.condition(e.args[0], env, not holds)
        if isinstance(e, ir.Apply) and e.op in (Op.AND, Op.OR):
            if (e.op is Op.AND) == holds:  # a conjunction: both parts hold
                return self.condition(e.args[0], env, holds) + self.condition(e.args[1], env, holds)
            return []  # a disjunction says nothing linear
        if not (isinstance(e, ir.Apply) and e.op in (Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE)):
            return []
        a, b = self.form(e.args[0], env), self.form(e.args[1], env)
        if a is None or b is None or not e.args[0].type.is_int:
            return []
        d = _add(a, b, -1)  # a - b
        op = e.op if holds else {Op.LT: Op.GE, Op.LE: Op.GT, Op.GT: Op.LE, Op.GE: Op.LT,
                                 Op.EQ: Op.NE, Op.NE: Op.EQ}[e.op]
        one = {"": 1}
        if op is Op.LT:
            return [_add(d, one)]  # a - b + 1 <= 0
        if op is Op.LE:
            return [d]
        if op is Op.GT:
            return [_add({n: -c for n, c in d.items()}, one)]
        if op is Op.GE:
            return [{n: -c for n, c in d.items()}]
        if op is Op.EQ:
            return [d, {n: -c for n, c in d.items()}]
        return []


@dataclass
class Access:
    array: str
    indices: tuple
    write: bool
    ctx: _Context


def _accesses(k: ir.Kernel, lin: _Linearizer, arrays: set[str]) -> list[Access] | None:
    """Every access to `arrays` with its context, or None if one has no linear index."""
    out: list[Access] = []
    base = [{f"{lin.tag}t{a}": -1} for a in range(k.tid_ndim)]  # tid >= 0

    def record(array, idx, write, ctx):
        out.append(Access(array, idx, write, _Context(list(ctx.constraints), dict(ctx.env))))

    def exprs(e: ir.Expr, ctx: _Context):
        for x in ir.walk_expr(e):
            if isinstance(x, ir.Load) and x.array in arrays:
                record(x.array, x.indices, False, ctx)

    def block(body, ctx: _Context):
        for s in body:
            for e in ir.stmt_exprs(s):
                exprs(e, ctx)
            if isinstance(s, ir.Assign):
                f = lin.form(s.value, ctx.env) if s.value.type.is_int else None
                if lin.counts.get(s.name) == 1 and f is not None:
                    ctx.env[s.name] = f
                else:
                    ctx.env.pop(s.name, None)
            elif isinstance(s, ir.Store) and s.array in arrays:
                record(s.array, s.indices, True, ctx)
            elif isinstance(s, ir.AtomicAdd) and s.array in arrays:
                return False
            elif isinstance(s, ir.If):
                for branch, holds in ((s.then, True), (s.orelse, False)):
                    inner = _Context(ctx.constraints + lin.condition(s.cond, ctx.env, holds), dict(ctx.env))
                    if block(branch, inner) is False:
                        return False
            elif isinstance(s, ir.For):
                inner = _Context(list(ctx.constraints), dict(ctx.env))
                v = {f"{lin.tag}loop:{s.var}:{id(s)}": 1}
                inner.env[s.var] = v
                start, stop = lin.form(s.start, ctx.env), lin.form(s.stop, ctx.env)
                if isinstance(s.step, ir.Const) and s.step.value > 0:
                    if start is not None:
                        inner.constraints.append(_add(start, v, -1))  # start - v <= 0
                    if stop is not None:
                        inner.constraints.append(_add(_add(v, stop, -1), {"": 1}))  # v - stop + 1 <= 0
                if block(s.body, inner) is False:
                    return False
            elif isinstance(s, ir.While):
                inner = _Context(list(ctx.constraints), {n: f for n, f in ctx.env.items()})
                if block(s.body, inner) is False:
                    return False
        return True

    if block(k.body, _Context(base, {})) is False:
        return None
    return out


def _elimination_cost(rows: list, n: str) -> int:
    """How many rows eliminating `n` adds (pairs of opposite signs, minus those removed)."""
    pos = sum(1 for r in rows if r.get(n, 0) > 0)
    neg = sum(1 for r in rows if r.get(n, 0) < 0)
    return pos * neg - pos - neg


def _feasible(constraints: list[Form]) -> bool:
    """Fourier–Motzkin over the rationals: False only when surely infeasible."""
    rows = [{n: Fraction(c) for n, c in f.items()} for f in constraints]
    while True:
        for r in rows:
            if all(n == "" for n in r) and r.get("", 0) > 0:
                return False
        names = sorted({n for r in rows for n in r if n != ""})
        if not names:
            return True
        v = min(names, key=lambda n, rows=rows: _elimination_cost(rows, n))
        pos = [r for r in rows if r.get(v, 0) > 0]
        neg = [r for r in rows if r.get(v, 0) < 0]
        rest = [r for r in rows if r.get(v, 0) == 0]
        new = []
        for p in pos:
            for q in neg:
                a, b = p[v], -q[v]
                row = {}
                for n in set(p) | set(q):
                    c = p.get(n, 0) * b + q.get(n, 0) * a
                    if n != v and c != 0:
                        row[n] = c
                new.append(row)
        rows = rest + new
        if len(rows) > MAX_CONSTRAINTS:
            return True  # too big to decide: no proof


def _index_forms(acc: Access, lin: _Linearizer, strides: dict) -> list[Form] | None:
    """Linear forms of an access's index positions; a flattened position
    `r * s + c` (s a parameter or shape, 0 <= c < s provable) becomes (r, c)."""
    out: list[Form] = []
    for pos, e in enumerate(acc.indices):
        f = lin.form(e, acc.ctx.env)
        if f is not None and pos not in strides:
            out.append(f)
            continue
        split = _split_row(e, acc, lin, strides.get(pos))
        if split is None:
            return None
        out.extend(split)
    return out


def _split_row(e: ir.Expr, acc: Access, lin: _Linearizer, stride: ir.Expr | None) -> list[Form] | None:
    if stride is None or not (isinstance(e, ir.Apply) and e.op is Op.ADD):
        return None
    for scaled, rest in (e.args, e.args[::-1]):
        if isinstance(scaled, ir.Apply) and scaled.op is Op.MUL:
            for r, s in (scaled.args, scaled.args[::-1]):
                if s != stride:
                    continue
                rf, cf, sf = lin.form(r, acc.ctx.env), lin.form(rest, acc.ctx.env), lin.form(s, acc.ctx.env)
                if rf is None or cf is None or sf is None:
                    continue
                # 0 <= c <= s - 1 must hold wherever the access runs
                below = _feasible(acc.ctx.constraints + [_add(cf, {"": 1})])  # c <= -1 possible?
                above = _feasible(acc.ctx.constraints + [_add(_add(sf, cf, -1), {"": 0})])  # c >= s possible?
                if not below and not above:
                    return [rf, cf]
    return None


def _strides(accesses: list[Access], lin: _Linearizer) -> dict[str, dict[int, ir.Expr]]:
    """For each array, the positions indexed as `r * s + c` by some access, with
    s a scalar parameter nobody assigns or a shape."""
    out: dict[str, dict[int, ir.Expr]] = {}
    for acc in accesses:
        for pos, e in enumerate(acc.indices):
            if isinstance(e, ir.Apply) and e.op is Op.ADD:
                for scaled in e.args:
                    if isinstance(scaled, ir.Apply) and scaled.op is Op.MUL:
                        for s in scaled.args:
                            if isinstance(s, ir.Shape) or isinstance(s, ir.Var) and s.name in lin.params \
                                    and s.name not in lin.counts:
                                out.setdefault(acc.array, {}).setdefault(pos, s)
    return out


def proves_race_free(k: ir.Kernel, arrays: set[str]) -> bool:
    """Whether no two threads touch a common element of `arrays` with one of
    them writing it (see module doc); False when the proof does not go through."""
    if k.tid_ndim == 0 or not arrays:
        return not arrays
    lin1, lin2 = _Linearizer(k, "a:"), _Linearizer(k, "b:")
    acc1, acc2 = _accesses(k, lin1, arrays), _accesses(k, lin2, arrays)
    if acc1 is None or acc2 is None:
        return False
    strides = _strides(acc1, lin1)
    for x in acc1:
        fx = _index_forms(x, lin1, strides.get(x.array, {}))
        if fx is None:
            return False
        for y in acc2:
            if y.array != x.array or not (x.write or y.write):
                continue
            fy = _index_forms(y, lin2, strides.get(y.array, {}))
            if fy is None or len(fx) != len(fy):
                return False
            system = x.ctx.constraints + y.ctx.constraints
            for a, b in zip(fx, fy):
                d = _add(a, b, -1)
                system = system + [d, {n: -c for n, c in d.items()}]
            for axis in range(k.tid_ndim):  # tid1 != tid2: they differ on some axis, in some direction
                t1, t2 = {f"a:t{axis}": 1}, {f"b:t{axis}": 1}
                for lo, hi in ((t1, t2), (t2, t1)):
                    if _feasible(system + [_add(_add(lo, hi, -1), {"": 1})]):  # lo - hi + 1 <= 0
                        return False
    return True
