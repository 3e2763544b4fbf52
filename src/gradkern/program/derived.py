"""Scalars host code reduced from an active array (docs/host-code.md, "What stays a constant"): `np.median(u)`,
`u.std()`, `u.sum(axis=0)`, reductions of derived arrays and any read inside a checkpointed loop's step (since session
57 `u.sum()`, `u.max()`, `u[3]`, `np.dot(u, v)` of an active `u` are reads, differentiated: hostreads.py; until then
they were derived too) inside a program. Their values depend on `u`, and no launch
records how; passed to a launch they would drop that derivative silently (a ported Rodinia srad's `q0sqr`,
PolyBench fdtd-2d's `_fict_[t]` of a differentiated `_fict_`). Each is a NumPy float scalar of a subclass
that remembers its origin through host arithmetic (`s / n - m * m`, `np.sqrt(s)`); a launch or rule call
that takes one raises `gk.ProgramError` naming the operation and the line (`hostcode.unwrap_args`).
`float(s)` or `s.item()` is the constant (the derivative through it is not wanted, as `.item()` in
PyTorch); comparisons, printing and control flow read it as the number it is. The origin is carried by
the scalar's own methods (`s.astype(np.float32)`, `s.clip(0, 1)`) and into arrays made from it
(`np.full_like(u, s)`, `np.full(n, s, dtype=float)`, `w[:] = s`, `ones * s`: hostcode.py refuses a launch
that takes them); what NumPy and CPython do without calling a method of the scalar (`math.sqrt(s)`,
`np.full(n, s)` without a dtype, `np.array([s])`) is seen by hostcalls.py's wrappers while a program records."""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

from ..recording import active_recorder

_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the gradkern package
_NUMPY = os.path.dirname(os.path.abspath(np.__file__))

# hostcode.TrackedArray, set by hostcode.py when it is defined (hostcode imports this module, so this one does not
# import it back: the import-cycle check)
TRACKED: list = []
# scalars.ReadScalar and ActiveScalar, set by scalars.py (which imports this module): an Active scalar read from an
# array, which NumPy's constructors and `math` see as a derived scalar (its `_gk_origin`) where they would make a plain
# number of it
READ: list = []


# what pickling a read or a derived scalar is called, and the spellings that work, in the refusals of
# scalars.ActiveScalar.__reduce_ex__ and hostcalls.py's derived scalars (session 62)
PICKLING = ("pickling (mpi4py's comm.allreduce, comm.bcast, comm.send and comm.gather pickle their operands; "
            "pickle.dumps; multiprocessing)")
PICKLING_HINT = ("combine a value over MPI ranks with gradkern.mpi.allreduce on a 1-element array (`b = np.zeros(1); "
                 "b[0] = s; gkm.allreduce(b)`: a sum, differentiated; docs/distributed.md), or pass float(s) to say "
                 "that no derivative through it is wanted")


def user_frame() -> Any:
    """The innermost frame outside gradkern and NumPy: the user's line."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith((_OURS, _NUMPY)):
        f = f.f_back
    return f


def where(frame: Any) -> str:
    """`file:line` of `frame` (user_frame's)."""
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "an unknown line"


class DerivedScalar:
    """What the derived float scalars are an instance of: `_gk_origin` (hostcode.Origin) is where host code
    made it. (NumPy's scalar type comes first in each class's bases, or NumPy takes it for an object.)"""

    _gk_origin: Any = None


def origin_of(values: Any) -> Any:
    """The origin of the first derived scalar in `values` (arguments: tuples, lists and dicts are looked
    into), or None."""
    if isinstance(values, DerivedScalar) or (READ and type(values) is READ[0]):
        return values._gk_origin
    if isinstance(values, (tuple, list, dict)):
        for x in values.values() if isinstance(values, dict) else values:
            got = origin_of(x)
            if got is not None:
                return got
    return None


def constants(x: Any) -> Any:
    """`x` with every derived scalar in it (tuples, lists and dicts looked into) as its plain scalar: NumPy
    would dispatch a function called with one back to `_array_function`."""
    if isinstance(x, (tuple, list)):
        return type(x)(constants(v) for v in x)
    if isinstance(x, dict):
        return {k: constants(v) for k, v in x.items()}
    return constant(x)


def _array_function(self: Any, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
    """A NumPy function dispatched on a derived scalar (`np.copyto(a, s)` inside `np.full(n, s, dtype=...)`,
    `np.full_like(plain, s)`, `np.clip(s, 0, 1)`): run on the plain values; an array it writes or returns
    remembers the origin."""
    origin = origin_of(args) or origin_of(kwargs)
    r = func(*constants(args), **constants(kwargs))
    if func.__name__ == "copyto":  # the destination now holds the derived value
        _taint(args[0] if args else kwargs.get("dst"), origin)
        return r
    if kwargs.get("out") is not None:
        _taint(kwargs["out"], origin)
        return r
    return carry(r, origin)


def _taint(out: Any, origin: Any) -> None:
    """Host code wrote a value computed from a derived scalar into `out` (an array or a tuple of them): its
    buffer remembers the origin (hostcode.HostTracker.taint), so that a launch taking it is refused."""
    host = getattr(active_recorder(), "host", None)
    for a in out if isinstance(out, tuple) else (out,):
        if host is not None and isinstance(a, np.ndarray) and a.dtype.kind in "fc":
            host.taint(a, origin)


# piecewise constant: a derivative of zero wherever there is one, so their value is a constant, as round()'s
_STEPS = frozenset((np.floor, np.ceil, np.trunc, np.rint, np.sign))


def _array_ufunc(self: Any, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    out = kwargs.get("out")
    outs = out if isinstance(out, tuple) else (out,)
    origin = next(x._gk_origin for x in (*inputs, *outs) if isinstance(x, DerivedScalar))
    if any(isinstance(o, DerivedScalar) for o in outs):
        # a scalar as out=: NumPy's `_lerp` (np.percentile, np.quantile) writes `subtract(..., out=r)` into the
        # 0-d array `add(..., out=...)` gave, which the override protocol hands over without its `out=...`, so a
        # derived scalar came back instead: a scalar cannot be written into, and NumPy goes on with `r`, whose
        # value is the same interpolation rounded once differently (session 63: a StopIteration here before)
        kwargs = {k: v for k, v in kwargs.items() if k not in ("out", "where")}
        return carry(getattr(ufunc, method)(*[constant(x) for x in inputs], **kwargs), origin)
    r = getattr(ufunc, method)(*[constant(x) for x in inputs], **kwargs)
    if ufunc in _STEPS and method == "__call__" and len(inputs) == 1:
        return r
    if kwargs.get("out") is not None:  # np.multiply(s, 2.0, out=w)
        _taint(kwargs["out"], origin)
        return r
    return carry(r, origin)


def carry(r: Any, origin: Any) -> Any:
    """What an operation with a derived scalar returned, remembering `origin`: a float scalar as a derived one,
    a float array as a TrackedArray (hostcode.py refuses a launch that takes it)."""
    if isinstance(r, np.ndarray) and r.dtype.kind == "f":
        out = r.view(TRACKED[0])
        if out._gk_origin is None:
            out._gk_origin = origin
        return out
    return derived(r, origin)


class _Derived64(np.float64, DerivedScalar):
    pass


class _Derived32(np.float32, DerivedScalar):
    pass


_CLASSES = {np.float64: _Derived64, np.float32: _Derived32}
_BASES = {_Derived64: np.float64, _Derived32: np.float32}


def derived(value: Any, origin: Any) -> Any:
    """`value` (a NumPy float64 or float32 scalar) remembering `origin`; any other value as it is."""
    cls = _CLASSES.get(_BASES.get(type(value), type(value)))
    if cls is None or origin is None:
        return value
    out = cls(value)
    out._gk_origin = origin
    return out


def constant(x: Any) -> Any:
    """A derived scalar as its plain NumPy scalar; anything else as it is."""
    base = _BASES.get(type(x))
    if base is None and READ and isinstance(x, READ[1]):  # an Active scalar: its value (the caller carries an origin)
        return np.float64(x.value)
    return base(x) if base is not None else x


def _operator(name: str) -> Any:
    def op(self: Any, *other: Any, **kwargs: Any) -> Any:
        r = getattr(_BASES[type(self)], name)(constant(self), *[constant(o) for o in other], **kwargs)
        return r if r is NotImplemented else carry(r, self._gk_origin)
    op.__name__ = name
    return op


def _divmod(name: str) -> Any:
    """divmod(s, c): the quotient is a floor (a constant, as round() is), the remainder s - q*c is derived."""
    def op(self: Any, other: Any) -> Any:
        r = getattr(_BASES[type(self)], name)(constant(self), constant(other))
        return r if r is NotImplemented else (r[0], carry(r[1], self._gk_origin))
    op.__name__ = name
    return op


# (floor division is left out: a floor, a constant where it has a derivative, as round() is)
for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
              "__mod__", "__rmod__", "__pow__", "__rpow__", "__neg__", "__pos__",
              "__abs__",
              # the scalar's methods whose float results depend on its value (rounding is left out: its
              # derivative is zero wherever it has one, so a rounded value is a constant, as an int() is)
              "astype", "clip", "conj", "conjugate", "copy", "sum", "prod", "mean", "max", "min", "std", "var",
              "reshape", "squeeze", "ravel", "flatten", "__copy__", "__deepcopy__"):
    for _cls in _BASES:
        setattr(_cls, _name, _operator(_name))
for _cls in _BASES:
    _cls.__array_ufunc__ = _array_ufunc
    _cls.__array_function__ = _array_function
    _cls.__divmod__ = _divmod("__divmod__")
    _cls.__rdivmod__ = _divmod("__rdivmod__")
    # a floor: its derivative is zero wherever it has one, so its value is a constant (as round()'s; NumPy's
    # np.floor_divide of one stays derived: stricter)
    _cls.__floordiv__ = lambda self, o, _b=_BASES[_cls]: _b.__floordiv__(constant(self), constant(o))
    _cls.__rfloordiv__ = lambda self, o, _b=_BASES[_cls]: _b.__rfloordiv__(constant(self), constant(o))
CLASSES = tuple(_BASES)
