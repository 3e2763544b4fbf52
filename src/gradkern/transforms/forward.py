"""Forward mode (tangents): one pass over the kernel in program order that
carries, next to each active value, its tangent t_v = Σ ∂v/∂xᵢ · t_xᵢ, using
the derivative table reverse mode uses (transforms/derivatives.py).

Active expressions are lowered to temporaries first (each operation's primal
value and its partials, then the tangent), so nothing is recomputed and a
`Select` becomes an `If`: the branch not taken is never evaluated, as in the
primal (it may load out of bounds). A store writes the tangent array at the
same element as the primal (docs/shadows-and-modes.md: when the kernel changes x, dx becomes
the tangent of the new value); the tangent is computed before the primal store,
from the values the primal's right-hand side read. Partials are primal
temporaries, so vector mode (transforms/lanes.py) shares them between lanes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..analysis.activity import Activity
from ..errors import InternalError
from ..ir import build as b
from ..ir import names
from ..ir import nodes as ir
from ..ir.ops import Op
from ..ir.rewrite import with_blocks
from ..ir.types import Scalar
from .derivatives import NON_DIFFERENTIABLE, partials


@dataclass(frozen=True)
class ForwardKernel:
    kernel: ir.Kernel
    tangents: dict[str, str]  # primal parameter -> its tangent parameter


@dataclass
class _Builder:
    k: ir.Kernel
    act: Activity
    locals: dict[str, Scalar] = field(default_factory=dict)
    namer: names.Namer = field(default_factory=names.Namer)

    def __post_init__(self):
        self.local_types = dict(self.k.locals)

    def fresh(self, what: str, t: Scalar) -> str:
        name = self.namer.fresh(what)
        self.locals[name] = t
        return name

    def tangent_of_local(self, name: str, t: Scalar) -> str:
        tn = names.tangent(name)
        self.locals[tn] = t
        return tn

    # -- expressions: (statements, primal expression, tangent expression or None) --
    def expr(self, e: ir.Expr) -> tuple[list[ir.Stmt], ir.Expr, ir.Expr | None]:
        if not self.act.expr(e):
            return [], e, None
        if isinstance(e, ir.Var):
            return [], e, b.var(names.tangent(e.name), e.type)
        if isinstance(e, ir.Load):
            return [], e, ir.Load(names.tangent(e.array), e.indices, type=e.type, loc=e.loc)
        if isinstance(e, ir.Select):
            p, t = self.fresh("fp", e.type), self.fresh("ft", e.type)
            arms = []
            for arm in (e.a, e.b):
                stmts, pe, te = self.expr(arm)
                arms.append((*stmts, ir.Assign(p, pe, loc=e.loc),
                             ir.Assign(t, te if te is not None else b.const(0, e.type), loc=e.loc)))
            return [ir.If(e.cond, arms[0], arms[1], loc=e.loc)], b.var(p, e.type), b.var(t, e.type)
        if isinstance(e, ir.Apply):
            if e.op in NON_DIFFERENTIABLE:
                return [], e, None
            stmts: list[ir.Stmt] = []
            args, tans = [], []
            for a in e.args:
                s, pa, ta = self.expr(a)
                stmts += s
                if ta is not None and not isinstance(pa, (ir.Var, ir.Const)):
                    v = self.fresh("fp", pa.type)  # named once: the partials read it
                    stmts.append(ir.Assign(v, pa, loc=e.loc))
                    pa = b.var(v, pa.type)
                args.append(pa)
                tans.append(ta)
            y = replace(e, args=tuple(args))
            if e.op is Op.CAST:
                return stmts, y, (b.cast(tans[0], e.type) if tans[0] is not None else None)
            yv = self.fresh("fp", e.type)
            stmts.append(ir.Assign(yv, y, loc=e.loc))
            tangent = None
            for part, ta in zip(partials(e.op, e.loc).at(tuple(args), b.var(yv, e.type)), tans):
                if ta is None or part is None:
                    continue
                if part.type != e.type:
                    part = b.cast(part, e.type)
                if not isinstance(part, (ir.Var, ir.Const)):
                    pv = self.fresh("fd", e.type)  # a primal value: shared by every tangent lane
                    stmts.append(ir.Assign(pv, part, loc=e.loc))
                    part = b.var(pv, e.type)
                if ta.type != e.type:
                    ta = b.cast(ta, e.type)
                term = ta if b.is_const(part, 1) else b.mul(part, ta)
                tangent = term if tangent is None else b.add(tangent, term)
            return stmts, b.var(yv, e.type), tangent
        return [], e, None

    def tangent_value(self, t: ir.Expr | None, to: Scalar) -> ir.Expr:
        if t is None:
            return b.const(0, to)
        return t if t.type == to else b.cast(t, to)

    # -- statements ------------------------------------------------------------------
    def block(self, body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in body:
            out += self.stmt(s)
        return tuple(out)

    def hoist_indices(self, indices: tuple[ir.Expr, ...], out: list[ir.Stmt]) -> tuple[ir.Expr, ...]:
        """Indices that load memory are evaluated once: the primal store may change what they read."""
        fixed = []
        for i in indices:
            if any(isinstance(x, ir.Load) for x in ir.walk_expr(i)):
                v = self.fresh("fi", i.type)
                out.append(ir.Assign(v, i, loc=i.loc))
                i = b.var(v, i.type)
            fixed.append(i)
        return tuple(fixed)

    def stmt(self, s: ir.Stmt) -> list[ir.Stmt]:
        if isinstance(s, ir.Assign):
            t = self.local_types.get(s.name)
            if t is None or not t.is_float or s.name not in self.act.locals:
                return [s]
            stmts, pe, te = self.expr(s.value)
            tn = self.tangent_of_local(s.name, t)
            if te is not None and any(isinstance(x, ir.Var) and x.name == tn for x in ir.walk_expr(te)):
                tmp = self.fresh("ft", t)  # x = f(x): the tangent reads the old t_x
                return [*stmts, ir.Assign(tmp, self.tangent_value(te, t), loc=s.loc), replace(s, value=pe),
                        ir.Assign(tn, b.var(tmp, t), loc=s.loc)]
            return [*stmts, replace(s, value=pe), ir.Assign(tn, self.tangent_value(te, t), loc=s.loc)]
        if isinstance(s, ir.Store):
            if s.array not in self.act.arrays:
                return [s]
            out: list[ir.Stmt] = []
            idx = self.hoist_indices(s.indices, out)
            stmts, pe, te = self.expr(s.value)
            out += stmts
            t = s.value.type
            tv = self.fresh("ft", t)
            pv = self.fresh("fv", t)
            out += [ir.Assign(tv, self.tangent_value(te, t), loc=s.loc), ir.Assign(pv, pe, loc=s.loc),
                    replace(s, indices=idx, value=b.var(pv, t)),
                    ir.Store(names.tangent(s.array), idx, b.var(tv, t), loc=s.loc)]
            return out
        if isinstance(s, ir.AtomicAdd):
            if s.array not in self.act.arrays:
                return [s]
            out = []
            idx = self.hoist_indices(s.indices, out)
            stmts, pe, te = self.expr(s.value)
            out += [*stmts, replace(s, indices=idx, value=pe)]
            if te is not None:
                out.append(ir.AtomicAdd(names.tangent(s.array), idx, self.tangent_value(te, s.value.type),
                                        loc=s.loc))
            return out
        if isinstance(s, (ir.If, ir.For, ir.While)):
            return [with_blocks(s, self.block)]
        raise InternalError(f"forward mode has no rule for the statement `{s}`", s.loc)


def forward_kernel(k: ir.Kernel, act: Activity) -> ForwardKernel:
    """The tangent kernel of typed kernel `k`: its parameters, then one tangent
    per active array (same type) and per active scalar parameter."""
    bld = _Builder(k, act)
    inits = []
    # a local that is sometimes active starts with a zero tangent, as its value starts defined
    for name, t in k.locals:
        if name in act.locals and t.is_float:
            inits.append(ir.Assign(bld.tangent_of_local(name, t), b.const(0, t)))
    body = bld.block(k.body)
    tangents = {p.name: names.tangent(p.name) for p in k.params if p.name in act.arrays or p.name in act.scalars}
    tparams = tuple(ir.Param(tangents[p.name], p.type, is_array=p.is_array, written=p.written and p.is_array,
                             used=True)
                    for p in k.params if p.name in tangents)
    params = {p.name for p in k.params} | set(tangents.values())
    locals_ = dict(k.locals) | {n: t for n, t in bld.locals.items() if n not in params}
    kernel = replace(k, name=f"{k.name}_fwd", params=k.params + tparams, body=(*inits, *body),
                     locals=tuple(sorted(locals_.items())), interior=None)
    return ForwardKernel(kernel, tangents)
