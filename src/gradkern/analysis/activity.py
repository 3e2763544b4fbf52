"""Activity analysis: which values carry a derivative.

A value is active when it is floating point and depends on an active input:
an element of a Duplicated array or an Active scalar. Locals are active when
any assignment to them is (a fixpoint over loops). No derivative code is made
for inactive values, and Const arguments get no shadow parameter.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import nodes as ir
from ..ir.ops import Op


@dataclass(frozen=True)
class Activity:
    arrays: frozenset[str]  # Duplicated arrays: they have shadows
    scalars: frozenset[str]  # Active scalar parameters
    locals: frozenset[str]  # active locals

    def __str__(self) -> str:
        """The sets sorted (GRADKERN_DUMP's text is the same in every process, docs/caching.md)."""
        return "; ".join(f"active {what}: {', '.join(sorted(names)) or '-'}"
                         for what, names in (("arrays", self.arrays), ("scalars", self.scalars),
                                             ("locals", self.locals)))

    def expr(self, e: ir.Expr) -> bool:
        """Whether expression `e` carries a derivative."""
        if not e.type.is_float:
            return False
        if isinstance(e, ir.Var):
            return e.name in self.locals or e.name in self.scalars
        if isinstance(e, ir.Load):
            return e.array in self.arrays
        if isinstance(e, ir.Select):
            return self.expr(e.a) or self.expr(e.b)
        if isinstance(e, ir.Apply):
            if e.op is Op.CAST and not e.args[0].type.is_float:
                return False
            return any(self.expr(a) for a in e.args)
        return False


def analyze_activity(k: ir.Kernel, arrays: set[str], scalars: set[str]) -> Activity:
    act = Activity(frozenset(arrays), frozenset(scalars), frozenset())
    while True:
        active = set(act.locals)
        for s in ir.walk_stmts(k.body):
            if isinstance(s, ir.Assign) and s.name not in active and act.expr(s.value):
                active.add(s.name)
        if active == act.locals:
            return act
        act = Activity(act.arrays, act.scalars, frozenset(active))
