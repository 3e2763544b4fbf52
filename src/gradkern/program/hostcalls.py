"""Host calls that CPython and NumPy make on a derived scalar without calling any of its methods
(docs/host-code.md, "Host operations, one by one"): `math.sqrt(s)` (a NumPy float64 scalar is a Python `float`,
whose value `math` reads directly), `np.array([s])`, `np.asarray(s)`, `np.full(n, s)` (NumPy converts a NumPy
scalar without a method call), `np.frombuffer(u.tobytes())`. Each used to make a plain number or array from a
derived one: a launch taking it dropped the derivative silently.

While a program records, the `math` module's functions (and those `statistics` binds under its own names) and
those NumPy constructors are wrappers that carry the origin, as `np.sqrt(s)` does: a float result is a derived
scalar, an array made from a derived scalar or a derived array a derived array, and a launch taking either is
refused (hostcode.py). Anything else passes through unchanged: the same result, by the same function. Numba types a
wrapper as the function it wraps, so whatever it compiles meanwhile (a kernel's `_gk_math.sin`, its own `math.pow`,
a user's @njit helper) calls the original; and its registries are loaded before the first wrapper is in place
(`_numba_ready`). NumPy's allocators (`np.zeros`, `np.empty`, `np.ones`, and `np.full` of a plain value) give
TrackedArrays, as `np.zeros_like(u)` does, so reads of a scratch array a launch wrote carry their origin; the
wrappers are in place again while a checkpointed loop's reverse recomputes a step (`rerecording`). What the
wrappers cannot see, and the page lists: names bound before (`from math import sqrt`), `decimal.Decimal(s)`,
another thread's host code, a list holding a derived scalar given to another NumPy function.

Also here, on the array class (hostcode.TrackedArray), the ways out of NumPy's view of an array that its
methods give: `u.flat` reads carry the origin, `u.tobytes()` of a derived array gives bytes that remember it,
a pointer to the values of a derived array (`u.ctypes.data_as`) is refused (C code reading it is not seen);
and on the derived scalars, `as_integer_ratio` (what `fractions.Fraction(s)` and `statistics.mean` read) is
refused."""

from __future__ import annotations

import contextlib
import functools
import linecache
import math
import statistics
import sys
import threading
from typing import Any

import numpy as np

from ..errors import ProgramError
from .derived import (
    _NUMPY,
    _OURS,
    CLASSES,
    PICKLING,
    PICKLING_HINT,
    DerivedScalar,
    carry,
    constant,
    constants,
    origin_of,
)
from .derived import user_frame as _user_frame
from .derived import where as _where
from .hostcode import TrackedArray, _origin, _read, _result, track, tracker
from .hostshapes import contiguous
from .scalars import ELEMENTARY, ActiveScalar, ReadScalar

# the math functions whose result is a float computed from a float argument (the rest return ints or booleans,
# or round: floor, ceil, trunc, isqrt, factorial, comb, perm, gcd, lcm, isclose, isfinite, isinf, isnan)
_MATH = ("acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "copysign", "cos", "cosh", "degrees",
         "dist", "erf", "erfc", "exp", "exp2", "expm1", "fabs", "fmod", "frexp", "fsum", "gamma", "hypot", "ldexp",
         "lgamma", "log", "log10", "log1p", "log2", "modf", "nextafter", "pow", "prod", "radians", "remainder",
         "sin", "sinh", "sqrt", "tan", "tanh", "ulp", "sumprod")
# NumPy's constructors, and the functions that join what they are given: each converts a list holding a derived
# scalar (`np.concatenate([[s], [t]])`) without a method call or a dispatch on it
_NUMPY_CALLS = ("array", "asarray", "asanyarray", "ascontiguousarray", "asfortranarray", "full", "frombuffer",
          "fromiter", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack", "block", "append")
_COPIES = ("ascontiguousarray", "asfortranarray")  # NumPy does not dispatch them: a copy of one is a launch here
# NumPy's allocators: an array host code allocates without an array argument (`np.zeros(1)`) is the TrackedArray
# `np.zeros_like(u)` gives, so what host code reads from it after a launch wrote it carries the origin (session 56:
# TeaLeaf's `out[0]` of a `np.zeros(1)` reduction scratch, passed to a launch, dropped its derivative silently)
# (session 63: the constructors of ranges and identities too, whose plain arrays took active values unseen:
# `w = np.linspace(0, 1, n); w[:] = 2 * x` gave a constant, NPBench's probes)
_ALLOCATORS = ("zeros", "empty", "ones", "linspace", "arange", "eye", "identity", "logspace", "geomspace", "tri")


class _Wrapper:
    """A function `f` of `math` or NumPy as a program's host code sees it: `call(f, *args, **kwargs)`."""

    def __init__(self, f: Any, call: Any):
        functools.update_wrapper(self, f)
        self._call = call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if sys._getframe(1).f_code.co_filename.startswith(_OURS):  # gradkern's own calls: not host code
            return self.__wrapped__(*args, **kwargs)
        return self._call(self.__wrapped__, *args, **kwargs)

    def __repr__(self) -> str:
        return repr(self.__wrapped__)

    # equal to the function it wraps, and hashed as it: a table keyed by `math.fabs` finds its entry given the
    # wrapper, as Numba's lowering does when its own code reads `math.fabs` while a program records
    def __eq__(self, other: object) -> bool:
        return other is self or other is self.__wrapped__ or (
            isinstance(other, _Wrapper) and other.__wrapped__ is self.__wrapped__)

    def __hash__(self) -> int:
        return hash(self.__wrapped__)


_SEQUENCES = (list, tuple)
_DERIVED = frozenset((*CLASSES, ReadScalar))  # a read's Active scalar converted to a number: derived (scalars.py)


def _origin_in(values: Any) -> Any:
    """The origin of the first derived scalar in `values` (lists and tuples looked into, nested ones too), or None:
    `origin_of` at C speed for the long lists `np.array(list)` is given (a set of the items' types first)."""
    if type(values) in _DERIVED:
        return values._gk_origin
    if type(values) not in _SEQUENCES:
        return origin_of(values) if isinstance(values, (dict, DerivedScalar)) else None
    kinds = set(map(type, values))
    if kinds & _DERIVED:
        return origin_of(values)
    if kinds & {list, tuple, dict}:
        for x in values:
            if type(x) in _SEQUENCES or type(x) is dict:
                got = _origin_in(x)
                if got is not None:
                    return got
    return None


def _holds_active(values: Any) -> bool:
    """Whether `values` (lists and tuples looked into) hold an Active scalar."""
    if isinstance(values, ActiveScalar):
        return True
    return type(values) in _SEQUENCES and any(_holds_active(x) for x in values)


def _math_call(f: Any, *args: Any, **kwargs: Any) -> Any:
    host = tracker()
    if host is None:
        return f(*args, **kwargs)
    # an iterator (fsum's generator) is read once: as a list, looked into and passed on
    args = tuple(list(a) if hasattr(a, "__next__") else a for a in args)
    if ELEMENTARY and not kwargs and any(isinstance(a, ActiveScalar) for a in args):
        got = ELEMENTARY[0](f.__name__, args)  # `math.sqrt(c)`: a one-thread launch and a read (hostreads.py)
        if got is not NotImplemented:
            return got
    origin = _origin_in(args) or (_origin_in(kwargs) if kwargs else None)
    if origin is None and _holds_active(args):  # no launch fits (`math.fsum([c])`): derived, refused where taken
        origin = _origin(f"math.{f.__name__} of an Active scalar", [])
    if origin is None:  # an array (math.fsum(u), math.sqrt(u[3:4])) that depends on an active one
        arrays = [a for a in args if isinstance(a, np.ndarray) and host.derived(a)]
        if not arrays:
            return f(*args, **kwargs)
        origin = host.origin(arrays[0]) or _origin(f"math.{f.__name__}", arrays)
    r = f(*constants(args), **constants(kwargs))
    return tuple(_float(x, origin) for x in r) if isinstance(r, tuple) else _float(r, origin)


def _float(r: Any, origin: Any) -> Any:
    return carry(np.float64(r), origin) if isinstance(r, float) else r  # (math.prod of NumPy scalars: one)


def _numpy_call(f: Any, *args: Any, **kwargs: Any) -> Any:
    host = tracker()
    if host is None:
        return f(*args, **kwargs)
    if f.__name__ == "fromiter" and args and not isinstance(args[0], np.ndarray):
        # session 58: NumPy's C code calls float() of each element with no Python frame between, so an iterator
        # of reads (`np.fromiter(iter([v[0], v[1]]), float)`) gave a plain array silently: looked into as a list
        args = (list(args[0]), *args[1:])
    source = args[0] if args else None
    if isinstance(source, TrackedArray) and (f.__name__ in _COPIES or (
            f.__name__ == "array" and kwargs.get("copy", True) is True
            and not sys._getframe(2).f_code.co_filename.startswith(_NUMPY))):  # hostshapes.py
        # `u_old = np.array(u)` on the user's line: a copy by a launch, as u.copy() (session 62; until then a copy
        # no launch made, refused where a launch took it); a positional dtype as the keyword the copy reads
        if f.__name__ == "array" and len(args) > 1:
            args, kwargs = args[:1], {**kwargs, "dtype": args[1]}
        return contiguous(f, *args, **kwargs)
    if isinstance(source, memoryview) and isinstance(source.obj, np.ndarray):
        source = source.obj  # np.asarray(memoryview(u)): u's values
    if isinstance(source, np.ndarray) and host.derived(source):  # np.array(u): as u[...] is (hostcode.py)
        return _result(f(*args, **kwargs), [source], f"np.{f.__name__}", host)
    origin = _origin_in(args[:2]) or (_origin_in(kwargs) if kwargs else None) or getattr(source, "_gk_origin", None)
    if origin is None and _holds_active(args[:2]):  # `np.array([c, 2 * s])`: NumPy would make an object array
        origin = _origin(f"np.{f.__name__} of an Active scalar", [])
    if origin is None:
        r = f(*args, **kwargs)
        return _allocated(r) if f.__name__ == "full" else r
    return carry(f(*constants(args), **constants(kwargs)), origin)


def _allocated(r: Any) -> Any:
    """`r`, a new array host code allocated, as a TrackedArray (hostcode.track: float arrays only); NumPy's own
    calls (np.linspace's np.empty, ...) keep their plain arrays."""
    return r if sys._getframe(3).f_code.co_filename.startswith(_NUMPY) else track(r)


def _alloc_call(f: Any, *args: Any, **kwargs: Any) -> Any:
    r = f(*args, **kwargs)
    return r if tracker() is None else _allocated(r)


_ORIGINAL = {math: {n: getattr(math, n) for n in _MATH if hasattr(math, n)},
             np: {n: getattr(np, n) for n in (*_NUMPY_CALLS, *_ALLOCATORS)}}
# statistics binds math's functions under its own names (`from math import fsum`): fmean, geometric_mean, ...
_ORIGINAL[statistics] = {n: f for n, f in vars(statistics).items() if _ORIGINAL[math].get(n) is f}
_WRAPPED = {math: {n: _Wrapper(f, _math_call) for n, f in _ORIGINAL[math].items()},
            np: {n: _Wrapper(f, _alloc_call if n in _ALLOCATORS else _numpy_call) for n, f in _ORIGINAL[np].items()}}
_WRAPPED[statistics] = {n: _WRAPPED[math][n] for n in _ORIGINAL[statistics]}
# recordings: programs recording now (all threads); the wrappers are in their modules while there are any. Numba
# types a wrapper as the function it wraps (_numba_ready), so kernels compiled meanwhile see the originals
_STATE = {"recordings": 0, "applied": False, "numba": False}
_LOCK = threading.Lock()


def _apply() -> None:
    on = bool(_STATE["recordings"])
    if on and not _STATE["numba"]:
        _numba_ready()
    if on != _STATE["applied"]:
        for module, functions in (_WRAPPED if on else _ORIGINAL).items():
            module.__dict__.update(functions)
        _STATE["applied"] = on


def _numba_ready() -> None:
    """Numba's typing and lowering registries loaded before a wrapper is first in place: a registry module Numba
    imports at its first compile declares `np.concatenate` by reading `np.concatenate` (`@infer_global(...)`), and
    read while the wrapper is there it would declare the wrapper, leaving `np.concatenate` untyped in every @njit
    function compiled after, for the rest of the process."""
    from numba.core.registry import cpu_target
    from numba.extending import typeof_impl
    cpu_target.typing_context.refresh()
    cpu_target.target_context.refresh()

    @typeof_impl.register(_Wrapper)
    def _typeof_wrapper(val: _Wrapper, c: Any) -> Any:
        # a wrapper is typed as the function it wraps: what Numba compiles while a program records (its own
        # `math.pow` in `int_power`, a recomputed segment's kernel, a user's @njit helper) calls the original
        return cpu_target.typing_context.resolve_value_type(val.__wrapped__)

    _STATE["numba"] = True


def recording_started() -> None:
    """A program starts recording: the wrappers, until the last one recording ends. (From the start, not from the
    first derived scalar: `math.sqrt(u.sum())` looks `math.sqrt` up before it calls `u.sum()`.)"""
    with _LOCK:
        _STATE["recordings"] += 1
        _apply()


def recording_ended() -> None:
    with _LOCK:
        _STATE["recordings"] -= 1
        _apply()


@contextlib.contextmanager
def rerecording(on: bool) -> Any:
    """The wrappers in place while a checkpointed loop's reverse recomputes a step (`on`), as they were when the
    step first ran: its host code allocates and converts as it did then (a `np.zeros(n)` is a TrackedArray both
    times, so its `.astype` is the copy launch it was)."""
    if not on:
        yield
        return
    recording_started()
    try:
        yield
    finally:
        recording_ended()


# -- the derived scalars: exact rationals ---------------------------------------------------------------------------


def _as_integer_ratio(self: Any) -> Any:
    host = tracker()
    if host is not None and host.checking and (self._gk_origin is None or self._gk_origin.host is host):
        frame = _user_frame()
        raise ProgramError(f"an exact rational of a scalar that host code computed from an active array "
                           f"({self._gk_origin.describe() if self._gk_origin else 'an unknown operation'}), taken at "
                           f"{_where(frame)} (`fractions.Fraction(s)`, `statistics.mean`), would drop its "
                           "derivative", hint="compute it in a kernel, use NumPy (np.mean of the values), or "
                                              "pass float(s) to say that no derivative through it is wanted")
    return float.as_integer_ratio(constant(self))


# What a pickle makes of a derived scalar is its plain NumPy scalar: mpi4py's lowercase collectives
# (`comm.allreduce(s)`, `comm.bcast(s)`) pickle their operands, even on one rank, and the result, taken by a launch,
# was accepted as a constant with the derivative through `s` dropped (session 62). Refused while the program that
# made it records; after it, or another call's, it is the constant it is there.
def _reduce_ex(self: Any, protocol: Any = 2) -> Any:
    host = tracker()
    if host is not None and host.checking and (self._gk_origin is None or self._gk_origin.host is host):
        frame = _user_frame()
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip() if frame is not None else ""
        raise ProgramError(f"{PICKLING} of a scalar that host code computed from an active array "
                           f"({self._gk_origin.describe() if self._gk_origin else 'an unknown operation'}), at "
                           f"{_where(frame)}" + (f" (`{line}`)" if line else "") + ", would drop its derivative: "
                           "what is unpickled is a plain number", hint=PICKLING_HINT)
    return constant(self).__reduce_ex__(protocol)


for _cls in CLASSES:
    _cls.as_integer_ratio = _as_integer_ratio
    _cls.__reduce_ex__ = _reduce_ex
    _cls.__reduce__ = lambda self: _reduce_ex(self)


# -- the array class: the ways out of NumPy's view of an array ------------------------------------------------------


class _Flat:
    """`u.flat` of a TrackedArray inside a program: element reads carry the origin as `u[3]` does; writes go
    through `u.reshape(-1)` when it is a view, else NumPy's flatiter after the host-write checks."""

    def __init__(self, array: TrackedArray):
        self._array = array
        self._flat = array.view(np.ndarray).flat

    def __getitem__(self, key: Any) -> Any:
        _read()
        return _result(self._flat[key], [self._array], "ndarray.flat", tracker())

    def __setitem__(self, key: Any, value: Any) -> None:
        flat = np.ndarray.reshape(self._array, -1)  # a view or a copy, without launches (hostshapes.py)
        if not np.shares_memory(flat, self._array):
            frame = _user_frame()
            raise ProgramError(f"a write through `.flat` of a non-contiguous array at {_where(frame)} inside a "
                               "differentiated program", hint="write through u.reshape(-1) of a contiguous copy, "
                                                              "or in a kernel")
        flat[key] = value

    def __iter__(self) -> Any:
        return (self[k] for k in range(self._array.size))

    def __len__(self) -> int:
        return self._array.size

    # session 58 (red team): NumPy's flatiter's own ways out were plain arrays of the values, without their origin
    # (`u.flat.copy()[2]`, `np.array(u.flat)`, `u.flat.base` took into a launch: a silent constant)
    @property
    def base(self) -> Any:
        """The array, as NumPy's `flat.base` is (its reads are the array's)."""
        return self._array

    def copy(self) -> Any:
        """`u.flat.copy()`: a 1-D copy, remembering its origin as `u.flatten()` of a derived array does."""
        _read()
        return _result(self._flat.copy(), [self._array], "ndarray.flat", tracker())

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        """`np.array(u.flat)`: NumPy makes a plain array of what this returns, so no origin can travel with it;
        refused where the values depend on an active array (docs/host-code.md, "Reductions and element reads")."""
        _read()
        host = tracker()
        whole = self._array.view(np.ndarray)
        if host is not None and (host.active(whole) or host.derived(whole)):
            frame = _user_frame()
            raise ProgramError(f"`np.array` (or `np.asarray`) of `.flat` of an array an active array reached, at "
                               f"{_where(frame)}, inside a differentiated program would drop its derivative",
                               hint="use u.flatten() or u.ravel(), which carry it, or "
                                    "np.array([float(x) for x in u.flat]) where no derivative is wanted")
        return np.asarray(self._flat.copy(), dtype=dtype)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._flat, name)


def _flat(self: TrackedArray) -> Any:
    if tracker() is None:
        return self.view(np.ndarray).flat
    return _Flat(self)


class _DerivedBytes(bytes):
    """The bytes of an array host code derived from an active one: `np.frombuffer` of them is derived again."""

    _gk_origin: Any = None


def _tobytes(self: TrackedArray, order: str = "C") -> bytes:
    _read()
    r = np.ndarray.tobytes(self.view(np.ndarray), order)
    host = tracker()
    if host is None or not host.derived(self):
        return r
    out = _DerivedBytes(r)
    out._gk_origin = host.origin(self) or _origin("ndarray.tobytes", [self.view(np.ndarray)])
    return out


class _Ctypes:
    """`u.ctypes` of an array that depends on an active one, inside a program: its address (`.data`) is a number, but
    a pointer to its values (`.data_as(...)`, passing it to a C function) is refused: C code reading them is not
    seen, so a derivative through what it computes would be lost."""

    def __init__(self, plain: np.ndarray):
        self._ctypes = np.ndarray.ctypes.__get__(plain)

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        frame = _user_frame()
        raise ProgramError(f"a ctypes pointer to an array that depends on an active one, at {_where(frame)}: C code "
                           "reading it is not seen, so a derivative through what it computes would be lost",
                           hint="compute it in a kernel, or take .ctypes of u.view(np.ndarray) to say that no "
                                "derivative through it is wanted")

    data_as = _refuse

    @property
    def _as_parameter_(self) -> Any:
        return self._refuse()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctypes, name)


def _ctypes(self: TrackedArray) -> Any:
    plain = self.view(np.ndarray)
    host = tracker()
    if host is not None and host.checking and not sys._getframe(1).f_code.co_filename.startswith(_OURS) \
            and host.derived(self):  # gradkern's own reads of the address (shadows.py) are not host code
        return _Ctypes(plain)
    return np.ndarray.ctypes.__get__(plain)


TrackedArray.flat = property(_flat)
TrackedArray.tobytes = _tobytes
TrackedArray.ctypes = property(_ctypes)
