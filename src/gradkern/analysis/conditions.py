"""Conditions as linear facts, and what a bool local's value implies (docs/bounds.md).

A condition being true (or false) is described, as far as linear forms can
say it, by an `Implied`: constraints (forms f, each meaning f <= 0),
disjunctions (`Either`), the checks the forms rely on (no index operation
wraps), and whether these say all the condition does (`exact`).
`Linearizer.implied` (analysis/affine.py) builds them from comparisons,
`and`, `or` and `not`; this module combines them.

A bool local carries a `Flag`: what its value being true, and false,
implies. The frontend lowers `continue` and `break` into such locals
(frontend/jumps.py): `cnt = False; if c: cnt = True; if not cnt: rest`.
After that `if`, `cnt` is `c ? True : False`, so `not cnt` implies `not c`,
and `rest` runs under `not c` as it does in the user's code. In general,
after `if c: A else: B` a bool local `v` holds

    v  <=>  (c and v_A) or (not c and v_B)

with v_A, v_B its values at the ends of the branches; a local a branch
leaves unknown contributes nothing (sound: fewer facts). Every fact is over
the analysis' unknowns (thread indices, loop variables of the current
iteration, parameters, shapes), which do not change while the fact lives:
the walk forgets a flag exactly where it forgets a name's linear form (on
entering and leaving a loop that binds it).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import nodes as ir
from ..ir.ops import Op
from ..ir.types import BOOL


@dataclass(frozen=True)
class Either:
    """At least one of `alternatives` holds, each a conjunction of forms f <= 0
    (`!=`, `or`, a negated `and`); `checks`: what their forms rely on."""

    alternatives: tuple[tuple[dict, ...], ...]
    checks: frozenset = frozenset()


MAX_ALTERNATIVES = 4  # per Either: a disjunction of conjunctions of disjunctions is expanded up to this

# constraints, checks, disjunctions, exact (they hold exactly when the condition does)
Implied = tuple[list, frozenset, list, bool]
NOTHING: Implied = ([], frozenset(), [], False)  # says nothing
ALWAYS: Implied = ([], frozenset(), [], True)
NEVER: Implied = ([{"": 1}], frozenset(), [], True)  # 1 <= 0


def expand(constraints: list, eithers: list[Either]) -> list[tuple] | None:
    """`constraints ∧ eithers` as alternatives (conjunctions), or None past MAX_ALTERNATIVES."""
    alternatives = [tuple(constraints)]
    for e in eithers:
        alternatives = [a + b for a in alternatives for b in e.alternatives]
        if len(alternatives) > MAX_ALTERNATIVES:
            return None
    return alternatives


def _never(alternative: tuple) -> bool:
    """Whether a conjunction holds a constant row c <= 0 with c > 0."""
    return any(all(n == "" for n in f) and f.get("", 0) > 0 for f in alternative)


def both(a: Implied, b: Implied) -> Implied:
    return a[0] + b[0], a[1] | b[1], a[2] + b[2], a[3] and b[3]


def _impossible(x: Implied) -> bool:
    """Whether `x`'s constraints surely never hold (a constant row, or a disjunction of such alternatives)."""
    return _never(tuple(x[0])) or any(all(_never(alt) for alt in e.alternatives) for e in x[2])


def either(a: Implied, b: Implied) -> Implied:
    """What `a or b` implies: `b` where `a` can never hold (and the other way round), else one disjunction
    of their alternatives, those that can never hold left out."""
    if _impossible(a):
        return b
    if _impossible(b):
        return a
    alternatives = []
    for x in (a, b):
        alts = expand(x[0], x[2])
        if alts is None:
            return NOTHING
        alternatives += [alt for alt in alts if not _never(alt)]
    exact = a[3] and b[3]
    if not alternatives:
        return NEVER[0], frozenset(), [], exact
    if () in alternatives:  # a part that always holds: so does the disjunction
        return [], frozenset(), [], exact
    checks = a[1] | b[1] | {c for x in a[2] + b[2] for c in x.checks}
    if len(alternatives) == 1:
        return list(alternatives[0]), checks, [], exact
    return [], frozenset(), [Either(tuple(alternatives), checks)], exact


@dataclass(frozen=True)
class Flag:
    """What a bool local's value implies: `true` when it is True, `false` when it is False."""

    true: Implied
    false: Implied

    def when(self, holds: bool) -> Implied:
        c, k, e, x = self.true if holds else self.false
        return list(c), k, list(e), x

    @staticmethod
    def of(true: Implied, false: Implied) -> Flag | None:
        """The flag, or None when it says nothing either way."""
        if true == NOTHING and false == NOTHING:
            return None
        return Flag((tuple(true[0]), true[1], tuple(true[2]), true[3]),
                    (tuple(false[0]), false[1], tuple(false[2]), false[3]))


CONSTANT = {True: Flag(ALWAYS, NEVER), False: Flag(NEVER, ALWAYS)}  # a bool local known to be True, False


def known(cond: ir.Expr, holds: bool) -> dict[str, bool]:
    """The bool names whose value `cond` being `holds` fixes (`not brk and not cnt` true: both False)."""
    if isinstance(cond, ir.Var) and cond.type == BOOL:
        return {cond.name: holds}
    if isinstance(cond, ir.Apply) and cond.op is Op.NOT:
        return known(cond.args[0], not holds)
    if isinstance(cond, ir.Apply) and cond.op is (Op.AND if holds else Op.OR):
        return known(cond.args[0], holds) | known(cond.args[1], holds)
    return {}


def merge_flag(cond_true: Implied, cond_false: Implied, then: Flag | None, orelse: Flag | None) -> Flag | None:
    """A bool local after `if c: ... else: ...` (see module doc): `then`/`orelse` its flag at the end of each
    branch (None: unknown there), `cond_true`/`cond_false` what c and `not c` imply before the `if`."""
    if then is None and orelse is None:
        return None
    if then == orelse:
        return then

    def value(holds: bool) -> Implied:
        a = then.when(holds) if then is not None else NOTHING
        b = orelse.when(holds) if orelse is not None else NOTHING
        return either(both(cond_true, a), both(cond_false, b))

    return Flag.of(value(True), value(False))
