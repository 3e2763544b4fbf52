"""Active scalars inside a program (docs/programs.md). `fn` receives each Active
argument as an `ActiveScalar`: launches recognise it (and sum its derivative
over every launch it reaches), host arithmetic on it (`r = c * dt / h**2`) is
recorded on a small scalar tape and differentiated. What would lose the
derivative is refused: `float(c)`, `int(c)`, NumPy functions of it. The value
without its derivative is `c.value`, for printing or control flow. In forward mode the same scalar
carries its tangent (`c.tangent`) through the same arithmetic."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..annotations import Annotation, BatchDuplicated, Duplicated
from ..errors import ProgramError


class ActiveScalar:
    """A float that carries a derivative through host arithmetic and launches."""

    __slots__ = ("value", "parents", "adjoint", "order", "tangent")
    __array_ufunc__ = None  # NumPy defers to our reflected operators instead of making an object array
    _created = 0

    def __init__(self, value: float, parents: tuple = (), tangent: float = 0.0):
        self.value = float(value)
        self.parents = parents  # ((ActiveScalar, partial derivative), ...)
        self.adjoint = 0.0
        # forward mode: the tangent, carried along as the value is computed
        self.tangent = tangent if not parents else sum(d * p.tangent for p, d in parents)
        ActiveScalar._created += 1
        self.order = ActiveScalar._created  # creation order: a topological order of the scalar tape

    def with_tangent(self, lanes: int) -> Annotation:
        """This scalar as a forward-mode call takes it: Duplicated with its tangent (k of them in vector mode)."""
        if lanes == 1:
            return Duplicated(self.value, self.tangent)
        return BatchDuplicated(self.value, tuple(float(t) for t in np.broadcast_to(self.tangent, (lanes,))))

    def __repr__(self) -> str:
        return f"ActiveScalar({self.value!r})"

    # -- what would drop the derivative -------------------------------------------------------------------------
    def _refuse(self, what: str):
        raise ProgramError(f"{what} of an Active scalar inside a differentiated program would drop its derivative",
                           hint="keep it as it is (arithmetic with + - * / ** is differentiated, launches take it), "
                                "or use .value where no derivative is wanted")

    def __float__(self):
        self._refuse("float()")

    def __int__(self):
        self._refuse("int()")

    def __index__(self):
        self._refuse("using as an index")

    def __bool__(self):
        self._refuse("the truth value")

    # -- comparisons: plain booleans (their derivative is zero) ----------------------------------------------
    def __lt__(self, o): return self.value < _value(o)
    def __le__(self, o): return self.value <= _value(o)
    def __gt__(self, o): return self.value > _value(o)
    def __ge__(self, o): return self.value >= _value(o)

    # -- differentiated arithmetic ------------------------------------------------------------------------------
    def __neg__(self): return ActiveScalar(-self.value, ((self, -1.0),))
    def __pos__(self): return self
    def __abs__(self): return ActiveScalar(abs(self.value), ((self, 1.0 if self.value >= 0 else -1.0),))

    def __add__(self, o): return _binary(self, o, lambda a, b: a + b, lambda a, b: (1.0, 1.0))
    def __radd__(self, o): return _binary(o, self, lambda a, b: a + b, lambda a, b: (1.0, 1.0))
    def __sub__(self, o): return _binary(self, o, lambda a, b: a - b, lambda a, b: (1.0, -1.0))
    def __rsub__(self, o): return _binary(o, self, lambda a, b: a - b, lambda a, b: (1.0, -1.0))
    def __mul__(self, o): return _binary(self, o, lambda a, b: a * b, lambda a, b: (b, a))
    def __rmul__(self, o): return _binary(o, self, lambda a, b: a * b, lambda a, b: (b, a))
    def __truediv__(self, o): return _binary(self, o, lambda a, b: a / b, lambda a, b: (1.0 / b, -a / (b * b)))
    def __rtruediv__(self, o): return _binary(o, self, lambda a, b: a / b, lambda a, b: (1.0 / b, -a / (b * b)))
    def __pow__(self, o): return _binary(self, o, _pow, _dpow)
    def __rpow__(self, o): return _binary(o, self, _pow, _dpow)


def _pow(a: float, b: float) -> float:
    return a ** b


def _dpow(a: float, b: float) -> tuple[float, float]:
    # the kernel table's conventions (transforms/derivatives.py): d/da a**0 = 0, d/db 0**b = 0
    da = 0.0 if b == 0 else b * a ** (b - 1)
    db = 0.0 if a == 0 else a ** b * math.log(a) if a > 0 else math.nan
    return da, db


def _value(x: Any) -> float:
    return x.value if isinstance(x, ActiveScalar) else x


def _binary(a: Any, b: Any, f, df) -> Any:
    if not _is_number(a) or not _is_number(b):
        return NotImplemented
    origin = getattr(a, "_gk_origin", None) or getattr(b, "_gk_origin", None)  # a DerivedScalar's (None: type(s)(x))
    if origin is not None:
        raise ProgramError(f"arithmetic of an Active scalar with a scalar that host code computed from an active "
                           f"array ({origin.describe()}) would drop the latter's derivative",
                           hint="compute it in a kernel, or pass float(x) where no derivative through it is wanted")
    va, vb = _value(a), _value(b)
    da, db = df(va, vb)
    parents = tuple((x, d) for x, d in ((a, da), (b, db)) if isinstance(x, ActiveScalar))
    return ActiveScalar(f(va, vb), parents)


def _is_number(x: Any) -> bool:
    return isinstance(x, (ActiveScalar, int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def backpropagate(reached: list[ActiveScalar]) -> None:
    """Push the adjoints of the scalars launches took back to the Active
    arguments they were computed from (reverse creation order is a topological order)."""
    seen: dict[int, ActiveScalar] = {}
    stack = list(reached)
    while stack:
        s = stack.pop()
        if id(s) not in seen:
            seen[id(s)] = s
            stack.extend(p for p, _ in s.parents)
    for s in sorted(seen.values(), key=lambda s: -s.order):
        for p, d in s.parents:
            p.adjoint += d * s.adjoint
        if s.parents:
            s.adjoint = 0.0
