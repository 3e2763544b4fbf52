"""Fourier–Motzkin feasibility of linear systems over the integers or rationals, for the race and bounds proofs
(analysis/affine.py, analysis/bounds.py; docs/bounds.md).

`feasible` is memoised: a kernel's proofs are asked again for every specialisation of it (float64 and float32,
the primal and each derivative kernel's race check, the bounds of each launch signature), and each asks the same
systems; in a test file of ten ported kernels 363 distinct systems were asked 5,507 times, 4.4 of 4.6 s in repeats
(docs/compile-time.md, "The proofs' systems"). The answer is a pure function of the system as given: the rows in
their order, each row's coefficients in their insertion order (`_solve_equalities` picks the first unknown of
coefficient ±1, so order can matter near the size limit), and `integers`. That exact sequence is the key, so a
remembered answer is the answer the same call computes: proofs stay deterministic whatever ran before.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from fractions import Fraction

Form = dict  # unknown name ("" for the constant) -> integer coefficient
MAX_CONSTRAINTS = 400
MEMO_SIZE = 8192  # systems remembered (least recently used dropped); a few MB at most
_memo: OrderedDict = OrderedDict()


def feasible(constraints: list[Form], integers: bool = False) -> bool:
    """Fourier–Motzkin over the rationals: False only when surely infeasible.
    With `integers`, equalities are solved first for an unknown of coefficient
    ±1, and each row is tightened for integer unknowns as it is made
    (`_tighten`): still False only when surely no integer solution."""
    key = (integers, tuple(tuple(f.items()) for f in constraints))
    got = _memo.get(key)
    if got is not None:
        _memo.move_to_end(key)
        return got
    got = _feasible(constraints, integers)
    _memo[key] = got
    if len(_memo) > MEMO_SIZE:
        _memo.popitem(last=False)
    return got


def _elimination_cost(rows: list, n: str) -> int:
    """How many rows eliminating `n` adds (pairs of opposite signs, minus those removed)."""
    pos = sum(1 for r in rows if r.get(n, 0) > 0)
    neg = sum(1 for r in rows if r.get(n, 0) < 0)
    return pos * neg - pos - neg


def eliminate(rows: list, v: str) -> list:
    """Fourier–Motzkin: `rows` (f <= 0 each) with `v` eliminated, each pair of
    rows with opposite signs of `v` combined."""
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
    return rest + new


def _feasible(constraints: list[Form], integers: bool) -> bool:
    """`feasible` computed."""
    if integers:  # integer coefficients stay so: no fractions needed
        rows = _solve_equalities([{n: c for n, c in f.items() if c} for f in constraints])
    else:
        rows = [{n: Fraction(c) for n, c in f.items() if c} for f in constraints]
    while True:
        if integers:
            rows = [_tighten(r) for r in rows]
        for r in rows:
            if all(n == "" for n in r) and r.get("", 0) > 0:
                return False
        names = sorted({n for r in rows for n in r if n != ""})
        if not names:
            return True
        v = min(names, key=lambda n, rows=rows: _elimination_cost(rows, n))
        rows = eliminate(rows, v)
        if len(rows) > MAX_CONSTRAINTS:
            return True  # too big to decide: no proof


def _solve_equalities(rows: list[dict]) -> list[dict]:
    """Rows r and -r are r = 0; where r has an unknown of coefficient ±1, that
    unknown is eliminated from every other row by r = 0 (exact over the integers)."""
    while True:
        present = {frozenset(r.items()) for r in rows}
        for r in rows:
            neg = {n: -c for n, c in r.items()}
            v = next((n for n, c in r.items() if n != "" and abs(c) == 1), None)
            if v is None or frozenset(neg.items()) not in present:
                continue
            out = []
            for row in rows:
                if row is r or row == neg:
                    continue
                k = row.get(v, 0) * r[v]  # row[v] / r[v], r[v] being ±1
                combined = {n: row.get(n, 0) - k * r.get(n, 0) for n in set(row) | set(r)}
                out.append({n: c for n, c in combined.items() if c})
            rows = out
            break
        else:
            return rows


def _tighten(row: dict) -> dict:
    """Σ a·x + c <= 0 over integers x (integer a, c), with g the gcd of the a's:
    Σ (a/g)·x + ceil(c/g) <= 0. Every integer solution of the system satisfies
    every row of its projections, so it satisfies these too."""
    g = math.gcd(*(c for n, c in row.items() if n != ""))
    if g <= 1:
        return row
    out = {n: c // g for n, c in row.items() if n != ""}
    out[""] = -(-row.get("", 0) // g)  # ceil
    return out
