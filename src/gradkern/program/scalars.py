"""Active scalars inside a program (docs/programs.md). `fn` receives each Active argument as an `ActiveScalar`:
launches recognise it (and sum its derivative over every launch it reaches), host arithmetic on it (`r = c * dt /
h**2`, `c % p`) is recorded on a small scalar tape and differentiated. Comparisons (`==` included), roundings
(`int(c)`, `round(c)`, `math.ceil(c)`, `c // p`, `np.floor(c)`: piecewise constant, their derivative zero wherever
it exists) and predicates (`bool(c)`, `np.isfinite(c)`) give plain values; `np.minimum(c, p)` and `np.maximum` the
operand chosen, as `min` and `max`. Elementary functions (`np.sqrt(c)`, `math.exp(c)`) are one-thread launches of
the kernel-language function and a read (hostreads.py, session 57: the derivative stays in the kernel table,
transforms/derivatives.py). What would lose the derivative is refused: `float(c)`, other NumPy functions of it
(docs/host-code.md, "Active scalars in host code"). The value without its derivative is `c.value`. In forward mode
the same scalar carries its tangent (`c.tangent`) through the same arithmetic. `ReadScalar`: the Active scalar of a
read (`v[3]`, `u.sum()`: hostreads.py), whose `float()` on the user's line is the constant (DESIGN.md §6)."""

from __future__ import annotations

import linecache
import math
import sys
from typing import Any

import numpy as np

from ..annotations import Annotation, BatchDuplicated, Duplicated
from ..errors import ProgramError
from ..recording import active_recorder
from ..runtime.arrays import module_of
from .derived import _NUMPY, _OURS, PICKLING, PICKLING_HINT, READ, TRACKED, derived, user_frame, where

# hostreads.elementary, set by hostreads.py (which imports this module): `np.sqrt(c)` as a one-thread launch
ELEMENTARY: list = []
# hostufuncs.elementwise, which makes `c * y` a launch where `y` is a plain array the program did not track (a grid
# captured from the module: session 63, refused before); filled by hostufuncs.py, which imports this module
ARRAYWISE: list = []


class ActiveScalar:
    """A float that carries a derivative through host arithmetic and launches."""

    __slots__ = ("value", "parents", "_adjoint", "pending", "order", "tangent")
    _created = 0

    def __init__(self, value: float, parents: tuple = (), tangent: float = 0.0):
        self.value = float(value)
        self.parents = parents  # ((ActiveScalar, partial derivative), ...)
        self._adjoint = 0.0
        self.pending: list | None = None  # launches' derivatives still on the GPU (`add_device`)
        # forward mode: the tangent, carried along as the value is computed
        self.tangent = tangent if not parents else sum(d * p.tangent for p, d in parents)
        ActiveScalar._created += 1
        self.order = ActiveScalar._created  # creation order: a topological order of the scalar tape

    @property
    def adjoint(self) -> Any:
        """The derivative reached so far: the pending device derivatives added first."""
        if self.pending:
            self._settle()
        return self._adjoint

    @adjoint.setter
    def adjoint(self, value: Any) -> None:
        self.pending = None
        self._adjoint = value

    def add_device(self, d: Any) -> None:
        """Add a launch's derivative still in its 1-element device array, unread (runtime/reverse.py
        `run_reverse(device=True)`): read with the others when the adjoint is read, or every 256 of them, and
        added in the order they came, as the host adds floats (docs/programs.md, "On a GPU: no synchronisation
        per step")."""
        pending = self.pending
        if pending is None:
            self.pending = [d]
        else:
            pending.append(d)
            if len(pending) >= 256:  # a bounded list (each holds a pool block): one read per 256 launches
                self._settle()

    def _settle(self) -> None:
        pending, self.pending = self.pending, None
        values = module_of(pending[0]).concatenate(pending).get()  # one synchronisation for all of them
        a = self._adjoint
        for v in values.tolist():
            a = a + v
        self._adjoint = a

    def with_tangent(self, lanes: int) -> Annotation:
        """This scalar as a forward-mode call takes it: Duplicated with its tangent (k of them in vector mode)."""
        if lanes == 1:
            return Duplicated(self.value, self.tangent)
        return BatchDuplicated(self.value, tuple(float(t) for t in np.broadcast_to(self.tangent, (lanes,))))

    def __repr__(self) -> str:
        return f"ActiveScalar({self.value!r})"

    def __format__(self, spec: str) -> str:
        """`f"{etime:.3f}"` in a time loop's report: the value (printing drops no derivative; before, any format
        spec raised Python's TypeError)."""
        return format(self.value, spec)

    def __copy__(self) -> ActiveScalar:
        """`copy.copy(c)`: `c` itself, as for a float. Its value never changes (host arithmetic makes new
        scalars), and a new object would take adjoints that no sweep reads back: `copy.deepcopy` of a read
        dropped its derivative silently (session 62; docs/host-code.md, "Active scalars in host code")."""
        return self

    def __deepcopy__(self, memo: Any) -> ActiveScalar:
        return self

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Pickling, while a program records: refused (what is unpickled would be a plain number, the derivative
        through it dropped; mpi4py's `comm.allreduce(s)` pickles its operand, and raised Python's TypeError about
        a weakref); after it, the number."""
        if active_recorder() is None:
            return float, (self.value,)
        self._refuse(f"{PICKLING} of an Active scalar", hint=PICKLING_HINT)

    def __reduce__(self) -> Any:
        return self.__reduce_ex__(2)

    # a real number's attributes, as Python's float and NumPy's float64 have them (session 58: `s.real` of a read
    # raised AttributeError); the derivative stays with the scalar
    @property
    def real(self) -> ActiveScalar:
        return self

    @property
    def imag(self) -> float:
        return 0.0

    def conjugate(self) -> ActiveScalar:
        return self

    def round(self, decimals: int = 0, out: Any = None) -> float:
        """`np.round(c, 2)` / `np.around` (NumPy calls this method): a rounding, a plain number as round(c, 2)."""
        if out is not None:
            self._refuse("np.round(..., out=) of an Active scalar")
        return round(self.value, decimals)

    # -- what would drop the derivative -------------------------------------------------------------------------
    def _refuse(self, what: str, hint: str = ""):
        frame = user_frame()
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip() if frame is not None else ""
        raise ProgramError(f"{what} at {where(frame)}" + (f" (`{line}`)" if line else "")
                           + " inside a differentiated program would drop its derivative",
                           hint=hint or "keep it as it is (arithmetic with + - * / ** is differentiated, launches "
                                        "take it; math.* functions call float()), or use .value where no "
                                        "derivative is wanted")

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """NumPy's ufuncs of an Active scalar. Arithmetic with NumPy scalars (`np.float64(2.0) * c`) is the
        operators below; any other ufunc (`np.exp(c)`) is refused, naming the line and the spelling that works
        (docs/host-code.md): its derivative belongs to the kernel table, which kernels reach."""
        # NumPy hands a NumPy scalar operand over as a 0-d array (comparisons)
        inputs = tuple(x[()] if type(x) is np.ndarray and x.ndim == 0 else x for x in inputs)
        if method == "reduce" and len(inputs) == 1 and ufunc.__name__ in ("add", "multiply", "maximum", "minimum") \
                and kwargs.get("axis") in (None, 0, ()) and kwargs.get("dtype") is None \
                and kwargs.get("out") is None and not kwargs.get("keepdims") and kwargs.get("initial") is None \
                and kwargs.get("where", True) is True:
            # `np.sum(s)` of a scalar (Mocz's `np.sum(np.sum(m * v**2))`, the inner sum a read): the one value, with
            # its derivative (session 63: a TypeError from calling the ufunc with one operand)
            return self
        rule = _UFUNC_ARITHMETIC.get(ufunc.__name__) if method == "__call__" and not kwargs else None
        if rule is not None and len(inputs) == 2 and all(_is_number(x) for x in inputs):
            return _binary(*inputs, *rule)
        if ufunc.__name__ in _COMPARISONS and method == "__call__" and not kwargs:
            if all(map(_is_number, inputs)):
                return bool(ufunc(*(_value(x) for x in inputs)))  # a plain boolean, as the comparison operators give
            # with an array (`(r1 <= radius) & (radius < r2)`, NPBench's azimint; refused before session 63): a
            # boolean array, a mask, through which no derivative flows, as through `u > 0`
            return ufunc(*(_value(x) for x in inputs))
        if ufunc.__name__ in _SELECTIONS and method == "__call__" and not kwargs and all(map(_is_number, inputs)):
            return _SELECTIONS[ufunc.__name__](*inputs)  # the operand chosen, as min() and max() return it
        if ufunc.__name__ in _ROUNDINGS and method == "__call__" and not kwargs and all(map(_is_number, inputs)):
            return ufunc(*(_value(x) for x in inputs))  # piecewise constant: a plain NumPy scalar
        if ufunc.__name__ in _PREDICATES and method == "__call__" and not kwargs:
            return bool(ufunc(self.value))  # a NaN guard's np.isfinite(dt): a plain boolean, as a comparison
        if ufunc.__name__ in ("negative", "positive", "absolute") and method == "__call__" and not kwargs:
            return {"negative": ActiveScalar.__neg__, "positive": ActiveScalar.__pos__,
                    "absolute": ActiveScalar.__abs__}[ufunc.__name__](self)
        if method == "__call__" and not kwargs and ELEMENTARY and all(map(_is_number, inputs)):
            got = ELEMENTARY[0](ufunc.__name__, inputs)  # `np.sqrt(c)`: a one-thread launch and a read (hostreads.py)
            if got is not NotImplemented:
                return got
        name = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        origin = next((x._gk_origin for x in inputs if isinstance(x, ReadScalar) and x._gk_origin is not None), None)
        if origin is not None and not any(isinstance(x, np.ndarray) for x in inputs):
            # a read's scalar where no launch can be made: a derived scalar, refused where a launch takes it (as
            # before session 57); compared or printed, it is its value
            return derived(np.float64(ufunc(*(_value(x) for x in inputs))), origin)
        if any(isinstance(x, TRACKED[0]) for x in inputs):  # `c * u` in a program: a launch (hostufuncs.py)
            return NotImplemented
        if method == "__call__" and ARRAYWISE and set(kwargs) <= {"out", "where", "dtype"} \
                and any(isinstance(x, np.ndarray) and x.size for x in inputs):
            got = ARRAYWISE[0](ufunc.__name__, inputs, kwargs.get("out"), kwargs.get("where", True),
                               kwargs.get("dtype"))
            if got is not NotImplemented:
                return got
        if method == "__call__" and not kwargs and any(isinstance(x, np.ndarray) for x in inputs) \
                and all(x.size == 0 for x in inputs if isinstance(x, np.ndarray)):
            # `alpha * A[i, :0]` (NPBench's symm at i = 0): an empty result holds no derivative to drop
            return ufunc(*(_value(x) for x in inputs))
        if any(isinstance(x, np.ndarray) for x in inputs):
            self._refuse(f"{name} of an Active scalar and an array",
                         hint="pass the Active scalar to a kernel and compute the array there (launches take "
                              "Active scalars)")
        self._refuse(f"{name}() of an Active scalar",
                     hint=f"pass the Active scalar to the kernel that needs {name} of it and compute it there "
                          "(math.* and np.* work in kernels; a one-thread kernel can write coefficients into a "
                          "small array that later launches read), or use .value where no derivative is wanted")

    def __float__(self):
        if active_recorder() is None:  # kept past its program call (a read's product): nothing records it now
            return self.value
        self._refuse("float() of an Active scalar",
                     hint="keep it as it is (arithmetic with + - * / ** is differentiated, launches take it; math.* "
                          "functions call float(): test it with np.isfinite(c), np.isnan(c) or a comparison "
                          "instead of math.isfinite), or use .value where no derivative is wanted (`'%g' % c.value`; "
                          "an f-string, f'{c:.3g}', formats the value as it is)")

    # -- roundings: piecewise constant, so the plain rounded value is the right constant (docs/host-code.md) -----
    def __int__(self): return int(self.value)
    def __round__(self, ndigits=None): return round(self.value, ndigits)
    def __floor__(self): return math.floor(self.value)
    def __ceil__(self): return math.ceil(self.value)
    def __trunc__(self): return math.trunc(self.value)
    def __floordiv__(self, o): return self.value // _value(o) if _is_number(o) else NotImplemented
    def __rfloordiv__(self, o): return _value(o) // self.value if _is_number(o) else NotImplemented
    def __divmod__(self, o): return (self // o, self % o) if _is_number(o) else NotImplemented
    def __rdivmod__(self, o): return (o // self, o % self) if _is_number(o) else NotImplemented

    def __index__(self):
        self._refuse("an Active scalar used as an index")

    def as_integer_ratio(self):  # fractions.Fraction's and statistics' exact conversion (a crash before session 57)
        self._refuse("an exact conversion (statistics.mean, as_integer_ratio) of an Active scalar")

    def __bool__(self):  # `if damping:`: c != 0, a comparison (before session 54 refused)
        return bool(self.value)

    # -- comparisons: plain booleans (their derivative is zero) ----------------------------------------------
    def __lt__(self, o): return self.value < _value(o)
    def __le__(self, o): return self.value <= _value(o)
    def __gt__(self, o): return self.value > _value(o)
    def __ge__(self, o): return self.value >= _value(o)
    # by value: without these, `c == 1.0` fell back to identity, False whatever c's value (a silent wrong branch)
    def __eq__(self, o): return self.value == _value(o) if _is_number(o) else NotImplemented
    def __ne__(self, o): return self.value != _value(o) if _is_number(o) else NotImplemented
    def __hash__(self): return hash(self.value)

    # -- differentiated arithmetic ------------------------------------------------------------------------------
    def __neg__(self): return ActiveScalar(-self.value, ((self, -1.0),))
    def __pos__(self): return self
    def __abs__(self): return ActiveScalar(abs(self.value), ((self, 1.0 if self.value >= 0 else -1.0),))

    def __add__(self, o): return _binary(self, o, *_ADD)
    def __radd__(self, o): return _binary(o, self, *_ADD)
    def __sub__(self, o): return _binary(self, o, *_SUB)
    def __rsub__(self, o): return _binary(o, self, *_SUB)
    def __mul__(self, o): return _binary(self, o, *_MUL)
    def __rmul__(self, o): return _binary(o, self, *_MUL)
    def __truediv__(self, o): return _binary(self, o, *_DIV)
    def __rtruediv__(self, o): return _binary(o, self, *_DIV)
    def __pow__(self, o): return _binary(self, o, _pow, _dpow)
    def __rpow__(self, o): return _binary(o, self, _pow, _dpow)
    def __mod__(self, o): return _binary(self, o, *_MOD)
    def __rmod__(self, o): return _binary(o, self, *_MOD)


# (value, partials) of host arithmetic on Active scalars: the operators above and NumPy's ufuncs of the same name
_ADD = (lambda a, b: a + b, lambda a, b: (1.0, 1.0))
_SUB = (lambda a, b: a - b, lambda a, b: (1.0, -1.0))
_MUL = (lambda a, b: a * b, lambda a, b: (b, a))
_DIV = (lambda a, b: a / b, lambda a, b: (1.0 / b, -a / (b * b)))
_MOD = (lambda a, b: a % b, lambda a, b: (1.0, -float(a // b)))  # a - b floor(a / b), the floor a constant


def _pow(a: float, b: float) -> float:
    return a ** b


def _dpow(a: float, b: float) -> tuple[float, float]:
    # the kernel table's conventions (transforms/derivatives.py): d/da a**0 = 0, d/db 0**b = 0
    da = 0.0 if b == 0 else b * a ** (b - 1)
    db = 0.0 if a == 0 else a ** b * math.log(a) if a > 0 else math.nan
    return da, db


_UFUNC_ARITHMETIC = {"add": _ADD, "subtract": _SUB, "multiply": _MUL, "true_divide": _DIV, "divide": _DIV,
                     "power": (_pow, _dpow), "remainder": _MOD}
_SELECTIONS = {"minimum": lambda a, b: b if _value(b) < _value(a) else a,
               "maximum": lambda a, b: b if _value(b) > _value(a) else a}
_SELECTIONS.update(fmin=_SELECTIONS["minimum"], fmax=_SELECTIONS["maximum"])
_ROUNDINGS = ("floor", "ceil", "trunc", "rint", "sign", "floor_divide")
_PREDICATES = ("isfinite", "isnan", "isinf", "signbit")  # before session 54 refused as dropping a derivative
_COMPARISONS = ("less", "less_equal", "greater", "greater_equal", "equal", "not_equal")


def _value(x: Any) -> float:
    return x.value if isinstance(x, ActiveScalar) else x


def _binary(a: Any, b: Any, f, df) -> Any:
    if not _is_number(a) or not _is_number(b):
        return NotImplemented
    # a DerivedScalar's (None: type(s)(x)); a ReadScalar's origin is no derived value's: its derivative is carried
    origin = next((x._gk_origin for x in (a, b) if not isinstance(x, ActiveScalar)
                   and getattr(x, "_gk_origin", None) is not None), None)
    if origin is not None and origin.host is getattr(active_recorder(), "host", None):  # this call's
        raise ProgramError(f"arithmetic of an Active scalar with a scalar that host code computed from an active "
                           f"array ({origin.describe()}) would drop the latter's derivative",
                           hint="compute it in a kernel, or pass float(x) where no derivative through it is wanted")
    va, vb = _value(a), _value(b)
    da, db = df(va, vb)
    parents = tuple((x, d) for x, d in ((a, da), (b, db)) if isinstance(x, ActiveScalar))
    return ActiveScalar(f(va, vb), parents)


def _is_number(x: Any) -> bool:
    return isinstance(x, (ActiveScalar, int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def non_finite(s: ActiveScalar, name: str, call: str) -> ProgramError:
    """The refusal of a reverse-mode launch or rule call (`call`) taking the Active scalar `s` whose value is NaN or
    infinite (`v.max()` of an array holding a NaN), as `gk.Active(nan)` is refused: naming the call's line, the
    argument and, for a read, where host code made it (session 58: before, runtime's message named neither)."""
    frame = user_frame()
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip() if frame is not None else ""
    made = f", {s.what}" if isinstance(s, ReadScalar) and s.what else ""
    return ProgramError(f"{call} at {where(frame)}" + (f" (`{line}`)" if line else "")
                        + f" takes the Active scalar '{name}' with the non-finite value {s.value}{made}; its "
                        "derivative is not defined, so nothing of the call ran and no shadow changed",
                        hint="test it on the host first (`if not np.isfinite(s): ...`), or pass s.value where no "
                             "derivative is wanted")


def refuse_scalar_dim(dim: Any, call: str) -> None:
    """A launch's `dim` holding an Active scalar (`gk.launch(k, n_read, ...)`, a read or an Active argument): an
    extent has no derivative and the runtime's message named no line; refused here naming it (session 58)."""
    if isinstance(dim, ActiveScalar) or isinstance(dim, tuple) and any(isinstance(d, ActiveScalar) for d in dim):
        frame = user_frame()
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip() if frame is not None else ""
        raise ProgramError(f"{call} at {where(frame)}" + (f" (`{line}`)" if line else "") + " takes an Active "
                           f"scalar as its dim ({dim!r}); a launch's extent must be a non-negative int",
                           hint="use int(s) (a constant: the extent has no derivative)")


class ReadScalar(ActiveScalar):
    """An Active scalar host code read or reduced from an array a launch wrote (`v[3]`, `u.sum()`, `np.dot(p, ap)`:
    hostreads.py): a launch copied (or reduced) it into a 1-element array `b`, and its adjoint goes into `b`'s at
    that launch's position in the sweep (steps.Step.reads). `what` names the operation and the line. `float(s)`
    and `s.item()` on the user's line are the constant (DESIGN.md §6: values reduced to Python numbers are
    constants); a conversion inside NumPy or gradkern (`np.linspace(0, s)`, `np.full_like(plain, s)`) is refused as
    `float()` of an Active scalar is (docs/host-code.md, "Reductions and element reads")."""

    __slots__ = ("what", "_gk_origin")

    def __init__(self, value: Any, what: str = "", tangent: Any = 0.0):
        # `type(s)(s)` (a constructor, as np.float64(s)): the constant, a scalar no read feeds
        super().__init__(value.value if isinstance(value, ActiveScalar) else value, (), tangent)
        self.what = what
        # where host code read it (hostcode.Origin): NumPy constructors and math functions that would convert it to
        # a plain number (`np.full(n, s)`, `np.array([s])`, `math.sqrt(s)`) carry it as a derived scalar's origin
        # (hostcalls.py, derived.py), so that a launch taking their result is refused as before session 57
        self._gk_origin = None

    def __float__(self):
        caller = sys._getframe(1).f_code.co_filename  # C code calling __float__ has no frame: the one calling it
        if caller.startswith((_OURS, _NUMPY)):
            super().__float__()
        return self.value

    def item(self) -> float:
        return self.value

    def as_integer_ratio(self):  # statistics.mean's exact conversion: named by the read's line
        frame = user_frame()
        raise ProgramError(f"an exact rational (`statistics.mean`, `as_integer_ratio`) of {self.what or 'a read'}, "
                           f"taken at {where(frame)}, would drop its derivative",
                           hint="keep it as it is (host arithmetic on it is differentiated), compute it in a kernel, "
                                "or pass float(s) to say that no derivative through it is wanted")

    def tolist(self) -> float:
        return self.value

    # a NumPy scalar's methods that host code calls on a reduction's result (before session 57 it was one)
    def astype(self, dtype: Any) -> ActiveScalar:
        """`s.astype(np.float32)`: the value rounded to the type, its derivative 1 (as a kernel's cast)."""
        if np.dtype(dtype).kind != "f":
            self._refuse(f"astype({np.dtype(dtype)}) of an Active scalar", hint="use int(s), a rounding")
        return ActiveScalar(float(np.dtype(dtype).type(self.value)), ((self, 1.0),))

    def clip(self, lo: Any = None, hi: Any = None) -> Any:
        """`s.clip(lo, hi)` (and `np.clip(s, lo, hi)`, which calls it): max and min, the operand chosen."""
        out = self
        if lo is not None:
            out = _SELECTIONS["maximum"](out, lo)
        if hi is not None:
            out = _SELECTIONS["minimum"](out, hi)
        return out

    def __str__(self) -> str:
        return str(self.value)


READ.extend((ReadScalar, ActiveScalar))  # derived.py's conversions (constant, origin_of) know them by this list
