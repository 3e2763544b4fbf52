"""The IR verifier: run after type inference and after every transformation,
so a broken invariant is reported by the pass that broke it, not by a backend."""

from __future__ import annotations

from ..errors import InternalError
from . import nodes as ir
from .indices import indices
from .ops import ARITHMETIC, COMPARISONS, LOGIC, Op
from .types import BOOL, I64, Array, Scalar


def verify(k: ir.Kernel, stage: str = "") -> ir.Kernel:
    """Check a typed kernel; raise InternalError naming the stage and node."""
    arrays = {p.name: p.type for p in k.params if isinstance(p.type, Array)}
    scalars = {p.name: p.type for p in k.params if isinstance(p.type, Scalar)}
    local = dict(k.locals)
    overlap = set(local) & (set(arrays) | set(scalars))
    where = f" after {stage}" if stage else ""

    def bad(msg, node):
        raise InternalError(f"invalid IR{where}: {msg} in `{node}`", getattr(node, "loc", None))

    if overlap:
        bad(f"locals shadow parameters {sorted(overlap)}", k.name)

    def var_type(name, node):
        t = local.get(name, scalars.get(name))
        if t is None:
            bad(f"unknown scalar '{name}'", node)
        return t

    def array(name, nidx, node) -> Array:
        t = arrays.get(name)
        if t is None:
            bad(f"unknown array '{name}'", node)
        if nidx is not None and nidx != t.ndim:
            bad(f"{nidx} indices for a {t.ndim}-D array", node)
        return t

    def expr(e: ir.Expr):
        t = getattr(e, "type", None)
        if not isinstance(t, Scalar):
            bad("untyped expression", e)
        for c in ir.children(e):
            expr(c)
        if isinstance(e, ir.Var) and var_type(e.name, e) != t:
            bad(f"'{e.name}' typed {t} but declared {var_type(e.name, e)}", e)
        elif isinstance(e, ir.Load):
            if array(e.array, len(e.indices), e).dtype != t:
                bad("load type differs from the array's dtype", e)
            if not all(i.type.is_int for i in e.indices):
                bad("non-integer index", e)
        elif isinstance(e, (ir.Tid, ir.Shape)):
            if t != I64:
                bad("tid/shape must be int64", e)
            if isinstance(e, ir.Tid) and e.axis >= k.tid_ndim:
                bad(f"tid axis {e.axis} in a kernel with {k.tid_ndim}-D tid", e)
            if isinstance(e, ir.Shape) and e.axis >= array(e.array, None, e).ndim:
                bad("shape axis out of range", e)
        elif isinstance(e, ir.InBounds):
            if not t.is_int or e.index.type != t or not 0 <= e.site < e.nsites:
                bad("checked index", e)
            if e.axis >= array(e.array, None, e).ndim:
                bad("checked axis out of range", e)
        elif isinstance(e, ir.Select):
            if e.cond.type != BOOL or e.a.type != t or e.b.type != t:
                bad("select operand types", e)
        elif isinstance(e, ir.Apply):
            ts = [a.type for a in e.args]
            if e.op in COMPARISONS:
                if t != BOOL or ts[0] != ts[1]:
                    bad("comparison operand types", e)
            elif e.op in LOGIC:
                if t != BOOL or any(x != BOOL for x in ts):
                    bad("logic on non-bool", e)
            elif e.op is Op.POW and ts[1].is_int and t.is_float:
                if ts[0] != t:
                    bad("pow base type", e)
            elif e.op in ARITHMETIC or e.op in (Op.MIN, Op.MAX):
                if ts[0] != ts[1] or ts[0] != t:
                    bad("binary operands of different types", e)
            elif e.op is not Op.CAST and ts[0] != t:
                bad("unary operand type differs from result", e)

    def block(body, loop_vars: set[str]):
        for s in body:
            for x in ir.stmt_exprs(s):
                expr(x)
            if isinstance(s, ir.Assign):
                if s.name in loop_vars:
                    bad(f"assignment to loop variable '{s.name}'", s)
                if var_type(s.name, s) != s.value.type:
                    bad(f"assigns {s.value.type} to '{s.name}' of type {var_type(s.name, s)}", s)
            elif isinstance(s, (ir.Store, ir.AtomicAdd)):
                if array(s.array, len(s.indices), s).dtype != s.value.type:
                    bad("stored value type differs from the array's dtype", s)
                if isinstance(s, ir.AtomicAdd) and s.row is not None and indices(k).offset_on(s.indices[0], 0) != s.row:
                    bad(f"atomic add marked as row tid[0] + {s.row}, which its index is not", s)
            elif isinstance(s, (ir.If, ir.While)):
                if s.cond.type != BOOL:
                    bad("non-bool condition", s)
            elif isinstance(s, ir.For):
                if var_type(s.var, s) != I64 or any(x.type != I64 for x in (s.start, s.stop, s.step)):
                    bad("loop bounds and variable must be int64", s)
            elif not isinstance(s, ir.Stmt):
                bad("not a statement", s)
            inner = loop_vars | ({s.var} if isinstance(s, ir.For) else set())
            for b in ir.blocks(s):
                block(b, inner)

    block(k.body, set())
    if k.interior is not None:
        axes = [r.axis for r in k.interior.ranges]
        if not axes or axes != sorted(set(axes)) or not all(0 <= a < k.tid_ndim for a in axes):
            bad(f"interior ranges on axes {axes} (ascending, distinct, each a tid axis)", k.name)
        for r in k.interior.ranges:
            for e in (r.lo, r.hi):
                if e is None:
                    continue
                expr(e)
                if e.type != I64:
                    bad("interior bound must be int64", e)
                for x in ir.walk_expr(e):  # computed before the loop of its axis
                    if isinstance(x, ir.Tid) and x.axis >= r.axis or isinstance(x, ir.Var) and x.name in local:
                        bad(f"interior bound of axis {r.axis} varies along it or an inner axis", e)
                    if isinstance(x, (ir.Load, ir.Select, ir.InBounds)):
                        bad(f"interior bound of axis {r.axis} reads memory or branches", e)
        block(k.interior.body, set())
    if k.deferred is not None:
        if len(k.deferred.extents) != k.tid_ndim or k.deferred.window < 0:
            bad("deferred statements need one extent per tid axis and a window >= 0", k.name)
        for e in k.deferred.extents:
            expr(e)
            if e.type != I64 or any(isinstance(x, (ir.Tid, ir.Load, ir.Select, ir.InBounds))
                                    or isinstance(x, ir.Var) and x.name in local for x in ir.walk_expr(e)):
                bad("a deferred extent must be an int64 launch invariant", e)
        block(k.deferred.body, set())
    return k
