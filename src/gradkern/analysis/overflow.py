"""When integer index arithmetic is exact: the launch conditions of the static
access proofs (analysis/affine.py, analysis/access.py).

Those proofs treat index expressions as integers: `i * 4 + 1`, the row `r`
and column `c` of `r * n + c`. Machine integers wrap instead: int64 arithmetic
is exact modulo 2**64 and a cast to int32 keeps the low 32 bits, so every
thread computes the index 0 in `a[i * 2**62 * 4]` or `a[np.int32(i * 2**32)]`,
and a proof over the integers says nothing about them. So every proof carries
the arithmetic it relied on as `Check`s: a polynomial in the proof's unknowns
(thread indices, scalar parameters, shapes, loop variables) whose exact value
must lie in the range of the type that computed it. If every check holds for
every value its unknowns can take, no operation the proof used wrapped, each
machine value equals the exact one, and the proof holds.

`Exactness.holds` decides this for one launch by interval arithmetic, from
the launch extents (0 <= tid[a] < dim[a]), the scalar arguments, the shapes and
the loop variables' ranges; `holds_always` for every launch, from the types'
ranges alone. Interval arithmetic over-approximates, so "holds" is sound; a
launch where it fails is only sent to the exact run-time check.

Unknowns are named as the proofs name them: `t<axis>` (a thread index,
possibly behind a thread tag such as `a:t0`), `param:<name>`,
`shape:<array>:<axis>`, and a loop variable by the name of its `Loop`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Poly = tuple  # ((monomial: sorted tuple of unknowns, coefficient: int), ...), sorted; () is 0
INT64 = (-(1 << 63), (1 << 63) - 1)
MAX_DIM = (1 << 63) - 1  # a launch extent is an int64


def poly(terms: dict) -> Poly:
    """The canonical polynomial of {monomial: coefficient}."""
    return tuple(sorted((m, c) for m, c in terms.items() if c))


def linear(form: dict) -> Poly:
    """A linear form {unknown: coefficient, "": constant} as a polynomial (an
    unknown `a*b` of analysis/affine.py's products is the monomial a·b)."""
    return poly({(() if n == "" else tuple(n.split("*"))): c for n, c in form.items()})


def add(a: Poly, b: Poly, k: int = 1) -> Poly:
    out = dict(a)
    for m, c in b:
        out[m] = out.get(m, 0) + k * c
    return poly(out)


def mul(a: Poly, b: Poly) -> Poly:
    out: dict = {}
    for ma, ca in a:
        for mb, cb in b:
            m = tuple(sorted(ma + mb))
            out[m] = out.get(m, 0) + ca * cb
    return poly(out)


def const(v: int) -> Poly:
    return poly({(): v})


def unknown(name: str) -> Poly:
    return (((name,), 1),)


def tid_unknown(axis: int, tag: str = "") -> str:
    """The unknown of thread index component `axis` (`tag` tells two threads apart)."""
    return f"{tag}tid:{axis}"


def int_range(bits: int) -> tuple[int, int]:
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


@dataclass(frozen=True)
class Check:
    """The exact value of `value` lies in the signed range of `bits`, for every
    value of its unknowns (an operation of that width did not wrap)."""

    value: Poly
    bits: int


@dataclass(frozen=True)
class Loop:
    """A loop variable: it takes values of `range(start, stop, step)` for each of
    its `ranges` (start/stop None where not polynomial; step's sign, 0 if unknown)."""

    name: str
    ranges: tuple[tuple[Poly | None, Poly | None, int], ...]


@dataclass(frozen=True)
class Exactness:
    """The checks a proof relies on, with the loop variables they mention."""

    checks: frozenset[Check] = frozenset()
    loops: tuple[Loop, ...] = ()

    def merge(self, other: Exactness) -> Exactness:
        seen = {lp.name for lp in self.loops}
        return Exactness(self.checks | other.checks,
                         self.loops + tuple(lp for lp in other.loops if lp.name not in seen))

    @property
    def trivial(self) -> bool:
        return not self.checks

    def holds(self, dim: tuple[int, ...], scalars: dict[str, int], shapes: dict[str, tuple[int, ...]]) -> bool:
        """Whether no checked operation wraps in this launch (0 <= tid[a] < dim[a])."""
        def base(name: str):
            if name.startswith("param:"):
                v = scalars.get(name[6:])
                return None if v is None else (int(v), int(v))
            if name.startswith("shape:"):
                array, axis = name[6:].rsplit(":", 1)
                s = shapes.get(array)
                return None if s is None else (int(s[int(axis)]), int(s[int(axis)]))
            axis = _tid_axis(name)
            if axis is not None:
                return (0, dim[axis] - 1) if axis < len(dim) else None
            return None
        return self._holds(base)

    def holds_always(self, param_bits: dict[str, int]) -> bool:
        """Whether no checked operation wraps in any launch: thread indices in
        [0, 2**63 - 2], shapes in [0, 2**63 - 1], each integer parameter in its
        type's range (`param_bits`: 1 for bool, 32 or 64)."""
        def base(name: str):
            if name.startswith("param:"):
                bits = param_bits.get(name[6:])
                return None if bits is None else (0, 1) if bits == 1 else int_range(bits)
            if name.startswith("shape:"):
                return 0, MAX_DIM
            if _tid_axis(name) is not None:
                return 0, MAX_DIM - 1
            return None
        return self._holds(base)

    def _holds(self, base) -> bool:
        known: dict[str, tuple[int, int]] = {}

        def value(name: str) -> tuple[int, int]:
            got = known.get(name)
            if got is None:
                got = base(name)
            return INT64 if got is None else got

        for lp in self.loops:  # outer loops first: a range's bounds mention only earlier unknowns
            lo, hi = INT64[1], INT64[0]
            for start, stop, step in lp.ranges:
                a = INT64 if start is None else interval(start, value)
                b = INT64 if stop is None else interval(stop, value)
                r = (a[0], b[1] - 1) if step > 0 else (b[0] + 1, a[1]) if step < 0 else (min(a[0], b[0]),
                                                                                          max(a[1], b[1]))
                if r[0] <= r[1]:  # an empty range never binds the variable
                    lo, hi = min(lo, r[0]), max(hi, r[1])
            # a loop variable is an int64; if it never takes a value, nothing it guards runs: any value will do
            lo, hi = max(lo, INT64[0]), min(hi, INT64[1])
            known[lp.name] = (lo, hi) if lo <= hi else (0, 0)
        for c in self.checks:
            lo, hi = interval(c.value, value)
            rlo, rhi = int_range(c.bits)
            if lo < rlo or hi > rhi:
                return False
        return True


_TID = re.compile(r"(?:[a-z]:)?tid:(\d)")


def _tid_axis(name: str) -> int | None:
    m = _TID.fullmatch(name)
    return int(m.group(1)) if m else None


def interval(p: Poly, value) -> tuple[int, int]:
    """Bounds of a polynomial when each unknown u lies in value(u) (interval arithmetic)."""
    lo = hi = 0
    for m, c in p:
        a, b = c, c
        for u in m:
            x, y = value(u)
            corners = (a * x, a * y, b * x, b * y)
            a, b = min(corners), max(corners)
        lo, hi = lo + a, hi + b
    return lo, hi
