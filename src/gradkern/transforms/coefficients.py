"""A gather's straight-line interior evaluated by its coefficients: the adjoint's linearity in the
shadows it reads (docs/adjoint-forms.md, section 11).

A replayed gather (transforms/gather.py) sums, for element j, what each neighbour thread's reverse
adds there. Each neighbour's copy multiplies the shadow it reads (`d_un[j + o]`) through a chain of
partials, `g2 = -g1; g3 = g2 * c; ...`: a face shared by two cells is differentiated twice, once in
each copy, with a different shadow at the head of the chain, so no common subexpression remains.
The adjoint is linear in the shadows it reads, so the same sum is

    out = sum over the shadow loads a of  a * coef(a),

coef(a) the sum over the paths from a to `out` of the product of the chain's factors: primal values
only, built backward from `out` (coef(out) = 1; coef(x) = the sum over x's uses v of coef(v) times the
factor). Built backward, a face's coefficient below the point where the shadow enters is the same
expression of the same loads in both copies that differentiate it, and the compiler's value
numbering computes it once: each face's partials once per cell, as a hand-written adjoint does.

What it accepts (else the body is left as it is): a straight-line body (assignments, stores, atomic
adds); every assignment that reads a shadow load or a linear local is linear: a shadow load alone, a
float constant 0 (a zeroed adjoint), or sums, differences, negations of linear values and products of
one with a primal factor (no division, no select, no affine constant); shadow loads and linear locals
appear elsewhere only in the values of stores and atomic adds, never in an index. A local assigned
again is a new version. Sound for every such body: each shadow load is read where it stood (into a
temporary of its own), each factor is evaluated where its statement stood (into a temporary, unless it
is a constant or a local assigned once and already), and every value a store or atomic add consumes is
the same linear form of the same loaded values, only with its products associated from the output side
(rounding may differ in the last bits, and with a non-finite factor which outputs are NaN; nothing else
is moved).
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import build as b
from ..ir import nodes as ir
from ..ir.ops import Op
from ..ir.rewrite import map_expr
from ..ir.types import Scalar

_PREFIX = "_gk_kf"  # a factor, evaluated where its statement stood
_COEF = "_gk_kc"  # a coefficient, built backward from an output
_OUT = "_gk_ko"  # an output's value, before the statement that consumes it


class _Refused(Exception):
    pass


class _Linear:
    """One pass over a straight-line body: linear assignments dropped and recorded by version (a local
    assigned again is a new version), each consumer's linear values emitted before it."""

    def __init__(self, shadows: set[str], twice: set[str], assigned: set[str]):
        self.shadows = shadows
        self.twice = twice  # locals assigned more than once: a factor reading one is copied where it stands
        self.pending = set(assigned)  # locals the body has yet to assign: likewise
        self.terms: dict[str, list[tuple[str, ir.Expr]]] = {}  # version: (source version, factor)
        self.atoms: dict[str, str] = {}  # version: the temporary holding its shadow load
        self.types: dict[str, Scalar] = {}
        self.order: list[str] = []  # versions in statement order
        self.current: dict[str, str] = {}  # linear local: its version now
        self.new_locals: dict[str, Scalar] = {}
        self.out: list[ir.Stmt] = []
        self.count = 0

    def _fresh(self, prefix: str, t: Scalar) -> str:
        self.count += 1
        name = f"{prefix}{self.count}"
        self.new_locals[name] = t
        return name

    def _touches(self, e: ir.Expr) -> bool:
        return any((isinstance(x, ir.Var) and x.name in self.current)
                   or (isinstance(x, ir.Load) and x.array in self.shadows) for x in ir.walk_expr(e))

    def _factor(self, p: ir.Expr) -> ir.Expr:
        """A primal factor: a constant or a local assigned once as it is, anything else evaluated here into a
        temporary."""
        if self._touches(p):
            raise _Refused
        if isinstance(p, ir.Const) or (isinstance(p, ir.Var) and p.name not in self.twice | self.pending):
            return p
        name = self._fresh(_PREFIX, p.type)
        self.out.append(ir.Assign(name, p))
        return b.var(name, p.type)

    def _parse(self, e: ir.Expr) -> list[tuple[str, ir.Expr]]:
        """`e` as a sum of (linear version, factor) terms."""
        one = b.const(1, e.type)
        if isinstance(e, ir.Var) and e.name in self.current:
            return [(self.current[e.name], one)]
        if isinstance(e, ir.Const) and e.value == 0:
            return []
        if isinstance(e, ir.Apply) and e.op in (Op.ADD, Op.SUB) and e.type == e.args[0].type == e.args[1].type:
            left, right = self._parse(e.args[0]), self._parse(e.args[1])
            if e.op is Op.SUB:
                right = [(n, _neg(f)) for n, f in right]
            return left + right
        if isinstance(e, ir.Apply) and e.op is Op.NEG:
            return [(n, _neg(f)) for n, f in self._parse(e.args[0])]
        if isinstance(e, ir.Apply) and e.op is Op.MUL and e.type == e.args[0].type == e.args[1].type:
            x, y = e.args
            if self._touches(x) and not self._touches(y):
                f = self._factor(y)
                return [(n, b.mul(g, f)) for n, g in self._parse(x)]
            if self._touches(y) and not self._touches(x):
                f = self._factor(x)
                return [(n, b.mul(f, g)) for n, g in self._parse(y)]
        raise _Refused

    def _value(self, version: str) -> ir.Expr:
        """Emit the value of a linear version as the sum of its shadow loads times their coefficients, built
        backward from it."""
        t = self.types[version]
        coef: dict[str, ir.Expr] = {version: b.const(1, t)}
        value: ir.Expr | None = None
        for v in reversed(self.order):
            if v not in coef:
                continue
            c = coef[v]
            if not isinstance(c, (ir.Const, ir.Var)):
                n = self._fresh(_COEF, c.type)
                self.out.append(ir.Assign(n, c))
                c = b.var(n, c.type)
            if v in self.atoms:
                term = b.mul(b.var(self.atoms[v], self.types[v]), c)
                value = term if value is None else b.add(value, term)
                continue
            for src, f in self.terms[v]:
                contribution = b.mul(c, f)
                coef[src] = contribution if src not in coef else b.add(coef[src], contribution)
        n = self._fresh(_OUT, t)
        self.out.append(ir.Assign(n, value if value is not None else b.const(0, t)))
        return b.var(n, t)

    def _define(self, name: str, t: Scalar) -> str:
        version = f"{name}#{len(self.order)}"
        self.types[version] = t
        self.order.append(version)
        self.current[name] = version
        return version

    def rewrite(self, body: tuple[ir.Stmt, ...], float_types: dict[str, Scalar]) -> None:
        for s in body:
            if isinstance(s, ir.Assign):
                v = s.value
                t = float_types.get(s.name)
                if isinstance(v, ir.Load) and v.array in self.shadows and t == v.type and \
                        not any(map(self._touches, v.indices)):
                    temp = self._fresh(_PREFIX, t)
                    self.out.append(ir.Assign(temp, v))
                    self.atoms[self._define(s.name, t)] = temp
                elif t is not None and isinstance(v, ir.Const) and v.value == 0:
                    self._define(s.name, t)
                    self.terms[self.current[s.name]] = []
                elif self._touches(v):
                    if t is None or v.type != t:
                        raise _Refused
                    terms = self._parse(v)
                    self.terms[self._define(s.name, t)] = terms
                else:
                    self.current.pop(s.name, None)
                    self.out.append(s)
                self.pending.discard(s.name)
            elif isinstance(s, (ir.Store, ir.AtomicAdd)):
                if any(map(self._touches, s.indices)):
                    raise _Refused
                used = [x.name for x in ir.walk_expr(s.value) if isinstance(x, ir.Var) and x.name in self.current]
                values = {n: self._value(self.current[n]) for n in dict.fromkeys(used)}
                self.out.append(replace(s, value=_substitute(s.value, values)))
            else:
                raise _Refused


def _neg(f: ir.Expr) -> ir.Expr:
    return b.const(-f.value, f.type) if isinstance(f, ir.Const) else b.neg(f)


def _substitute(e: ir.Expr, values: dict[str, ir.Expr]) -> ir.Expr:
    return map_expr(e, pre=lambda x: values.get(x.name) if isinstance(x, ir.Var) else None)


def by_coefficients(k: ir.Kernel, shadows: set[str]) -> ir.Kernel:
    """`k` with its interior evaluated by its coefficients where the module's conditions hold; `k` itself
    otherwise (no interior, nothing linear, or a body outside what is accepted)."""
    if k.interior is None:
        return k
    body = k.interior.body
    assigned: dict[str, int] = {}
    for s in ir.walk_stmts(body):
        if isinstance(s, ir.Assign):
            assigned[s.name] = assigned.get(s.name, 0) + 1
    float_types = {n: t for n, t in k.locals if isinstance(t, Scalar) and t.is_float}
    lin = _Linear(shadows, {n for n, c in assigned.items() if c > 1}, set(assigned))
    try:
        lin.rewrite(body, float_types)
    except _Refused:
        return k
    if not lin.atoms:
        return k
    locals_ = dict(k.locals) | lin.new_locals
    return replace(k, interior=replace(k.interior, body=tuple(lin.out)), locals=tuple(sorted(locals_.items())))
