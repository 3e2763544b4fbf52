"""Bounds proofs for affine accesses, decided at each launch (docs/launches.md).

What is proved: at a launch (its dim, integer scalars and array shapes), that
every index position of every access whose index is affine stays inside its
axis, 0 <= index <= extent - 1, in every thread that makes the access.

How: the access analysis of the race proofs (analysis/affine.py) gives, per
access, the linear form of each index and the linear constraints that hold
where the access runs: 0 <= tid, loop ranges, the comparisons of enclosing
conditions (and, here, of the `and`/`or` operands and conditional-expression
branches that evaluate it only when a condition holds), with disjunctions
(`!=`, `or`, a negated `and`) kept as alternatives. A condition on a bool
local counts as the condition its value was computed from
(analysis/conditions.py), so the guards `continue`, `break` and early
`return` establish count too: `return` is structured into if/else by the
frontend, `continue` and `break` into flags (docs/bounds.md). Products such as `i * n`
are forms too, with `param:n*tid:0` an unknown: linear once the launch
substitutes its scalars and shapes. A launch adds 0 <= tid[a] <= dim[a] - 1,
and then

    context ∧ index <= -1        context ∧ index >= extent

must both be infeasible: Fourier–Motzkin over the rationals (infeasible over
the rationals implies infeasible over the integers), each row tightened for
integer unknowns (2q <= 7 is q <= 3), once per choice of an alternative in
each disjunction. As for race proofs, the forms equal the machine
values only where the index arithmetic does not wrap: the proof holds at a
launch where its `Check`s hold (analysis/overflow.py).

The other way round: where the constraints are the whole condition for
reaching the access (every enclosing condition linear, loops of unit step,
no `while` before it), an integer solution of `context ∧ index outside` is a
thread that makes the access with that index: the launch is refused at once,
naming it. The solution is searched for by back-substitution through the
eliminations, and checked.

An index with no linear form (indirect `x[idx[i]]`, `i % n`) is not proved:
only the generated checks of GRADKERN_BOUNDSCHECK=1 cover it. An affine
position not proved at a launch is not an error either: the runtime then runs
the exact check, the bounds-checked kernel on scratch copies
(runtime/bounds_check.py), which also sees data-dependent guards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from ..errors import Loc
from ..ir import nodes as ir
from ..ir.ops import Op
from .affine import Linearizer, accesses, add_forms
from .fourier_motzkin import MAX_CONSTRAINTS, eliminate, feasible
from .overflow import Exactness, tid_unknown
from .races import control_locals

MAX_SPLITS = 4  # disjunctions split on per query (each of at most MAX_ALTERNATIVES); the rest are dropped


@dataclass(frozen=True)
class Site:
    """One access: per index position its linear form (None where it has none),
    and the constraints (f <= 0) and disjunctions (alternatives, each a tuple of
    such constraints) that hold where it runs."""

    kind: str  # "reads", "writes" or "atomically adds to"
    text: str
    array: str
    loc: Loc | None
    positions: tuple[dict | None, ...]
    constraints: tuple[dict, ...]
    eithers: tuple[tuple[tuple[dict, ...], ...], ...]
    exact: bool  # every thread satisfying the constraints and disjunctions makes the access


@dataclass(frozen=True)
class Outside:
    """A thread that makes access `site` with index `index` on `axis`, outside its array."""

    site: Site
    axis: int
    index: int
    thread: tuple[int, ...]


@dataclass(frozen=True)
class BoundsProof:
    """The affine access sites of a kernel, decided per launch by `decide`.
    `verdicts` and `exact` are the runtime's caches: launch key -> verdict, and
    the full keys of launches the exact check found inside their arrays."""

    sites: tuple[Site, ...]
    exactness: Exactness  # what the forms of every site rely on (no index operation wraps)
    arrays: tuple[tuple[int, str], ...]  # (parameter position, name) of the arrays whose shapes a proof reads
    ints: tuple[tuple[int, str], ...]  # (parameter position, name) of the integer scalars it reads
    # no index, branch or loop bound reads an array: which elements a launch touches is a
    # function of its dim, scalars and shapes, and so is the exact check's verdict
    data_independent: bool = False
    unaffine: int = 0  # index positions with no linear form (checked only with GRADKERN_BOUNDSCHECK=1)
    verdicts: dict = field(default_factory=dict, compare=False)
    exact: set = field(default_factory=set, compare=False)

    def key(self, dim: tuple[int, ...], values) -> tuple:
        """What `decide` depends on: the dim, the shapes and integer scalars it reads."""
        return (dim, *[values[n].shape for n, _ in self.arrays], *[values[n] for n, _ in self.ints])

    def decide(self, dim: tuple[int, ...], values) -> bool | Outside:
        """For a launch over `dim` with these parameter values (in kernel order):
        True when every affine index position is proved inside its axis in every
        thread, an `Outside` access when one surely leaves its array, else False."""
        scalars = {name: int(values[n]) for n, name in self.ints}
        shapes = {name: tuple(int(x) for x in values[n].shape) for n, name in self.arrays}
        if not self.exactness.holds(dim, scalars, shapes):
            return False
        known = {f"param:{name}": v for name, v in scalars.items()}
        known |= {f"shape:{name}:{a}": x for name, s in shapes.items() for a, x in enumerate(s)}
        threads = [bound for a, n in enumerate(dim)  # 0 <= tid[a] <= dim[a] - 1
                   for bound in ({tid_unknown(a): -1}, {tid_unknown(a): 1, "": 1 - n})]
        proved, seen = True, {}
        for site in self.sites:
            context = [_substitute(c, known) for c in site.constraints] + threads
            eithers = [[[_substitute(f, known) for f in alt] for alt in e] for e in site.eithers]
            extent = shapes[site.array]
            for axis, form in enumerate(site.positions):
                if form is None:
                    continue
                f = _substitute(form, known)
                for bad in (add_forms(f, {"": 1}), add_forms({"": extent[axis]}, f, -1)):  # f <= -1, f >= extent
                    query = _frozen(context + [bad]), tuple(tuple(_frozen(alt) for alt in e) for e in eithers)
                    if query not in seen:
                        seen[query] = _possible(context + [bad], eithers)
                    if not seen[query]:
                        continue
                    point = _point(context + [bad], eithers) if site.exact else None
                    if point is not None:
                        thread = tuple(point.get(tid_unknown(a), 0) for a in range(len(dim)))
                        return Outside(site, axis, _value(f, point), thread)
                    proved = False
        return proved


def bounds_proof(k: ir.Kernel) -> BoundsProof:
    """The access sites of typed kernel `k` whose bounds a launch can prove."""
    lin = Linearizer(k, "", products=True)
    sites, checks, unaffine = [], frozenset(), 0
    for acc in accesses(k, lin, bounds=True):
        positions = []
        for e in acc.indices:
            f = lin.form(e, acc.ctx.env)
            positions.append(None if f is None else f.form)
            if f is None:
                unaffine += 1
            else:
                checks |= f.checks
        if all(p is None for p in positions):
            continue
        checks |= acc.ctx.checks | {c for e in acc.ctx.eithers for c in e.checks}
        sites.append(Site(ir.ACCESS_VERBS[type(acc.node)], acc.node.target, acc.array, acc.node.loc,
                          tuple(positions), tuple(acc.ctx.constraints), tuple(e.alternatives for e in acc.ctx.eithers),
                          acc.ctx.exact))
    exactness = Exactness(checks, tuple(lin.loops))
    names = _unknowns(sites, exactness)
    position = {p.name: n for n, p in enumerate(k.params)}
    arrays = sorted({s.array for s in sites} | {n.split(":")[1] for n in names if n.startswith("shape:")})
    ints = sorted({n.split(":")[1] for n in names if n.startswith("param:")})
    return BoundsProof(tuple(sites), exactness, tuple((position[a], a) for a in arrays),
                       tuple((position[p], p) for p in ints), _data_independent(k), unaffine)


def _unknowns(sites: list[Site], exactness: Exactness) -> set[str]:
    """Every unknown the proof mentions (monomials split into their factors)."""
    out: set[str] = set()
    for s in sites:
        alternatives = (f for e in s.eithers for alt in e for f in alt)
        for f in (*s.constraints, *alternatives, *(p for p in s.positions if p is not None)):
            out.update(x for n in f if n for x in n.split("*"))
    for c in exactness.checks:
        out.update(x for m, _ in c.value for x in m)
    for lp in exactness.loops:
        for r in lp.ranges:
            out.update(x for p in r[:2] if p is not None for m, _ in p for x in m)
    return out


def _substitute(form: dict, known: dict[str, int]) -> dict:
    """`form` with the known unknowns replaced by their values (in every monomial)."""
    out: dict = {}
    for name, c in form.items():
        rest = []
        for x in name.split("*") if name else ():
            v = known.get(x)
            if v is None:
                rest.append(x)
            else:
                c *= v
        key = "*".join(rest)
        out[key] = out.get(key, 0) + c
    return {n: c for n, c in out.items() if c}


def _frozen(forms: list[dict]) -> tuple:
    return tuple(tuple(sorted(f.items())) for f in forms)


def _live(eithers: list) -> list | None:
    """The disjunctions with their alternatives that may hold (a constant row > 0
    rules one out), none that surely holds (an alternative left empty); None if
    one can never hold (the access never runs)."""
    out = []
    for e in eithers:
        alternatives = []
        for alt in e:
            rows = [f for f in alt if not all(n == "" for n in f)]
            if any(f.get("", 0) > 0 for f in alt if all(n == "" for n in f)):
                continue
            if not rows:
                break  # this alternative holds: so does the disjunction
            alternatives.append(rows)
        else:
            if not alternatives:
                return None
            out.append(alternatives)
    return out


def _possible(system: list[dict], eithers: list) -> bool:
    """Whether `system` (f <= 0 each) with `eithers` (one alternative of each holds)
    may have an integer solution: False only when surely not."""
    if not feasible(system, integers=True):
        return False
    live = _live(eithers)
    if not live:
        return live is not None
    # past MAX_SPLITS the split drops disjunctions (sound, weaker); each one alone may still decide it: a
    # 3-D stencil's else branch holds six (i != 0, k != n - 1, ...), and each access needs only its own
    if len(live) > MAX_SPLITS and any(not _possible(system, [e]) for e in live):
        return False
    first, rest = live[0], live[1:MAX_SPLITS]
    return any(_possible(system + alt, rest) for alt in first)


def _value(f: dict, point: dict) -> int:
    return sum(c * (1 if n == "" else point[n]) for n, c in f.items())


def _point(system: list[dict], eithers: list) -> dict | None:
    """An integer solution of `system` with `eithers`, or None if none was found:
    eliminate the unknowns (thread indices last), then give each, in reverse,
    the least integer its rows allow given those already chosen."""
    if any("*" in n for f in system for n in f):
        return None  # a product of unknowns: its value is not free
    live = _live(eithers)
    if live is None or len(live) > MAX_SPLITS:
        return None
    if live:
        for alt in live[0]:
            found = _point(system + alt, live[1:])
            if found is not None:
                return found
        return None
    rows = [{n: Fraction(c) for n, c in f.items()} for f in system]
    stages = []
    while True:
        if any(all(n == "" for n in r) and r.get("", 0) > 0 for r in rows):
            return None
        names = sorted({n for r in rows for n in r if n != ""}, key=lambda n: (n.startswith("tid:"), n))
        if not names:
            break
        v = names[0]
        stages.append((v, [r for r in rows if r.get(v, 0)]))
        rows = eliminate(rows, v)
        if len(rows) > MAX_CONSTRAINTS:
            return None
    point: dict = {}
    for v, rows in reversed(stages):
        lo, hi = None, None
        for r in rows:
            rest = sum((c * (1 if n == "" else point[n]) for n, c in r.items() if n != v), Fraction(0))
            bound = -rest / r[v]  # r[v] * v + rest <= 0
            if r[v] > 0:
                hi = bound if hi is None else min(hi, bound)
            else:
                lo = bound if lo is None else max(lo, bound)
        x = math.ceil(lo) if lo is not None else math.floor(hi) if hi is not None else 0
        if hi is not None and x > hi:
            return None
        point[v] = x
    if all(_value(f, point) <= 0 for f in system):
        return point
    return None


def _data_independent(k: ir.Kernel) -> bool:
    """Whether no index, branch, loop bound or short-circuit reads an array."""
    live = control_locals(k.body)

    def reads(e: ir.Expr) -> bool:
        return any(isinstance(x, ir.Load) for x in ir.walk_expr(e))

    for s in ir.walk_stmts(k.body):
        if isinstance(s, ir.Assign) and s.name in live and reads(s.value):
            return False
        if isinstance(s, (ir.If, ir.While, ir.For)) and any(reads(e) for e in ir.stmt_exprs(s)):
            return False
        if isinstance(s, (ir.Store, ir.AtomicAdd)) and any(reads(i) for i in s.indices):
            return False
    for e in ir.all_exprs(k.body):
        if isinstance(e, ir.Load) and any(reads(i) for i in e.indices):
            return False
        if isinstance(e, ir.Select) and reads(e.cond):
            return False
        if isinstance(e, ir.Apply) and e.op in (Op.AND, Op.OR) and reads(e.args[0]):
            return False
    return True

