"""Host computations on a program's arrays (docs/host-code.md): NumPy code in
`fn` that makes an array from an active one (`u.copy()`, `u * 2.0`,
`np.sin(u)`, `np.copyto(w, u)`, `u[idx]`) would hand later launches values
whose derivative the tape cannot see. Each is differentiated or refused,
never dropped:

* `fn` receives its NumPy float arrays as `TrackedArray` views, whose NumPy
  operations come here. Copies (`u.copy()`, `np.copy`, `np.copyto`, `astype`
  to a float type, `w[...] = u`, `w[:] = 0.0`, `w.fill(c)`) become `gk.copy` /
  `gk.fill` launches, recorded and differentiated like any launch.
* Elementwise ufuncs of one shape and float dtype are launches of generated kernels (hostufuncs.py).
  Any other operation with an active input (one that shares memory with an
  array that has a shadow, or is itself such a result) makes a float result
  that remembers where it came from (`Origin`); a launch or rule call that
  takes it raises `gk.ProgramError` naming the operation, the arrays and the
  line, before anything is touched. `gk.Const(w)` says no derivative is wanted.
* A host write into an active array that is not a copy, a fill or an elementwise launch (hostufuncs.py:
  `u *= 2` is one; `u %= 2`, `np.cbrt(u, out=u)`, `np.add.at(u, j, w)`, `u.put(j, w)`) raises
  `gk.ProgramError` before it writes; so does any host write into an array a launch has taken (guard.py),
  copies and fills included: those go through `gk.copy`/`gk.fill` by name. NumPy writing into its first
  argument (`np.add.at(w, j, v)`, `np.put`, `w.sort()`) is checked as `out=` is: a fresh `w` remembers a
  derived input's origin.

Results keep the class, so what is computed from them is seen too. `u.sum()`, `u[3]`
of an active array are reads (hostreads.py); other reductions (`np.median(u)`) remember
their origin (derived.py) and a launch taking one is refused; values reduced to Python
numbers (`float(u.max())`) are constants, as `.item()` is in PyTorch. What
is not seen: arrays that reach NumPy as plain `ndarray` (`u.view(np.ndarray)`,
arrays `fn` allocates with `np.zeros(n)` and a launch later makes active;
`np.asarray(u)` is seen by hostcalls.py); docs/host-code.md lists them.
"""

from __future__ import annotations

import linecache
import sys
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ProgramError
from ..ir.types import MAX_NDIM
from ..recording import active_recorder
from ..runtime.arrays import byte_bounds
from .derived import _NUMPY, TRACKED, DerivedScalar, constant, derived
from .derived import user_frame as _user_frame
from .derived import where as _where
from .hostops import copy as gk_copy
from .hostops import fill as gk_fill
from .savepool import POOL
from .scalars import ActiveScalar
from .shadows import memory_root

_FIX = ("compute it in a kernel (gk.launch), copy with gk.copy(dst, src) or u.copy() (differentiated), "
        "or pass gk.Const(x) to the launch to say that no derivative through it is wanted")
_FLOATS = (np.dtype("float32"), np.dtype("float64"))  # what a launch's float array holds (not float16)
_COPYABLE = tuple(np.dtype(t) for t in ("float32", "float64", "int32", "int64"))  # what a kernel's array holds
_LIKE = ("zeros_like", "empty_like", "ones_like", "full_like")  # new arrays whose values depend on no input
# NumPy functions that write into their first argument (session 57: `np.put(n, j, w)` of derived values into a
# fresh array handed a later launch a constant, silently): that write is checked as `out=`'s is
_WRITES_FIRST = ("put", "place", "putmask", "fill_diagonal", "put_along_axis")
SHAPES: dict[str, Any] = {}  # NumPy function name -> the launches it makes (hostshapes.py, hostufuncs.py fill it)


@dataclass(frozen=True)
class Origin:
    """Where host code made an array from an active one: the operation, its array inputs, the user's line."""

    op: str
    inputs: str
    where: str
    line: str
    # the program call whose host code made it: to another call (a value kept past its call, or handed to another
    # thread's) it is a constant, computed from nothing that call differentiates (docs/host-code.md)
    host: Any = field(default=None, compare=False, repr=False)
    # computed from a program argument's memory (whose shadow carries the derivative; program/returns.py)
    argument: bool = field(default=False, compare=False, repr=False)

    def describe(self) -> str:
        src = f" (`{self.line}`)" if self.line else ""
        return f"`{self.op}` of {self.inputs} at {self.where}{src}"


def _names(frame: Any, arrays: list) -> str:
    """'u', 'u' and 'v', or 'an array': the names the user's frame gives `arrays`."""
    out = []
    for a in arrays:
        root = memory_root(a)
        hits = [n for n, v in (frame.f_locals.items() if frame is not None else ())
                if isinstance(v, np.ndarray) and (v is a or memory_root(v) is root)]
        exact = [n for n in hits if frame.f_locals[n] is a]
        name = (exact or hits or [None])[0]
        text = f"'{name}'" if name else f"an array of shape {tuple(a.shape)}"
        if text not in out:
            out.append(text)
    return " and ".join(out) if out else "an array"


def _origin(op: str, inputs: list) -> Origin:
    frame, host = _user_frame(), tracker()
    entry = _numpy_entry(frame)
    if entry is not None:  # made inside a NumPy function the user called (np.unique's copy): named by it
        op = f"np.{entry}"
    argument = host is not None and any(host.from_argument(a) for a in inputs)
    if frame is None:
        return Origin(op, _names(None, inputs), "an unknown line", "", host, argument)
    where = f"{frame.f_code.co_filename}:{frame.f_lineno}"
    return Origin(op, _names(frame, inputs), where, linecache.getline(frame.f_code.co_filename,
                                                                     frame.f_lineno).strip(), host, argument)


def _numpy_entry(user: Any) -> str | None:
    """The outermost NumPy function between the user's frame and the current one (`unique`,
    `vectorize.__call__`: what the user called, gradkern's dispatch between them), else None."""
    f, entry = sys._getframe(2), None
    while f is not None and f is not user:
        if f.f_code.co_filename.startswith(_NUMPY):
            entry = f
        f = f.f_back
    name = getattr(entry.f_code, "co_qualname", entry.f_code.co_name) if f is not None and entry is not None else "_"
    return None if name.startswith("_") else name  # (ndarray's methods written in Python, `_sum`: the op names it)


class HostTracker:
    """One program call's view of its host code: which arrays are active (have shadows or tangents) and
    which buffers host code wrote derived values into. `checking` is False while a reverse sweep
    recomputes checkpointed steps (what recording accepted is not refused halfway through a sweep)."""

    def __init__(self, shadows: Any):
        self.shadows = shadows
        # id(buffer) -> (weak reference to the buffer, origin of its contents)
        self.tainted: dict[int, tuple[Any, Origin]] = {}
        self.checking = True
        self.writes = 0  # host writes into the program's arrays so far (outputs.py: a loop's launches not rerun)
        # id(TrackedArray) -> (weak reference to it, its plain view): the view every launch taking it gets
        self.views: dict[int, tuple[Any, np.ndarray]] = {}

    def plain_view(self, a: TrackedArray) -> np.ndarray:
        """`a` as a plain ndarray, the same view object at every launch that passes `a` while it keeps its
        shape, strides, dtype and write flag (a view's memory cannot move): the program's bookkeeping of a
        launch then finds the objects of the step before (docs/programs.md#host-cost-per-step)."""
        key = id(a)
        entry = self.views.get(key)
        if entry is not None and entry[0]() is a:
            v = entry[1]
            if v.shape == a.shape and v.strides == a.strides and v.dtype == a.dtype \
                    and v.flags.writeable == a.flags.writeable:
                return v
        v = a.view(np.ndarray)
        views = self.views
        views[key] = (weakref.ref(a, lambda _, key=key: views.pop(key, None)), v)
        return v

    def recorded(self) -> None:
        """The program's recording is over: the steps a sweep recomputes were checked when they were recorded."""
        self.checking = False

    def active(self, a: Any) -> bool:
        """`a` shares memory with an array that has a shadow (or tangent)."""
        if not isinstance(a, np.ndarray) or a.size == 0:
            return False
        lo, hi = byte_bounds(a)
        return any(lo < e.hi and e.lo < hi for e in self.shadows.entries)

    def origin(self, a: Any) -> Origin | None:
        """Where `a`'s values were computed on the host from an active array (None: they were not)."""
        got = getattr(a, "_gk_origin", None)
        if got is not None and got.host is self:  # another call's origin: a constant here
            return got
        if not self.tainted:
            return None
        kept = self.tainted.get(id(memory_root(a))) if isinstance(a, np.ndarray) else None
        return kept[1] if kept is not None and kept[0]() is memory_root(a) else None

    def from_argument(self, a: Any) -> bool:
        """`a` lies in a program argument's memory or host code computed it from one (program/returns.py)."""
        got = self.origin(a)
        if got is not None:
            return got.argument
        if not isinstance(a, np.ndarray) or a.size == 0:
            return False
        lo, hi = byte_bounds(a)
        return any(lo < e.hi and e.lo < hi and not e.internal for e in self.shadows.entries)

    def derived(self, a: Any) -> bool:
        return self.active(a) or self.origin(a) is not None

    def taint(self, buffer: Any, origin: Origin) -> None:
        if origin is not None and origin.host is self:  # another call's derived value is a constant here
            root = memory_root(buffer)
            self.tainted[id(root)] = (weakref.ref(root), origin)


def tracker() -> HostTracker | None:
    return getattr(active_recorder(), "host", None)


def _guard() -> Any:
    """The host-write guard of the recorder taking launches now (a checkpointed loop's recomputation has its
    own), or None."""
    return getattr(active_recorder(), "guard", None)


def _read() -> None:
    """Host code is about to read (or write) a program's array: a checkpointed loop's step recorder hears of it
    (checkpoint.py `_Untaped.host_reads`, `CheckpointedLoop.host_read`)."""
    hook = getattr(active_recorder(), "host_reads", None)
    if hook is not None:
        hook()


# -- the array class fn receives ----------------------------------------------------------------------------------


def plain(x: Any) -> Any:
    """`x` as a plain ndarray view (TrackedArray), its items so (tuples, lists), else itself."""
    if isinstance(x, TrackedArray):
        return x.view(np.ndarray)
    if isinstance(x, (tuple, list)):
        return type(x)(plain(v) for v in x)
    return x


def _arrays_in(x: Any) -> list:
    if isinstance(x, np.ndarray):
        return [x]
    if isinstance(x, (tuple, list)):
        return [a for v in x for a in _arrays_in(v)]
    if isinstance(x, dict):
        return [a for v in x.values() for a in _arrays_in(v)]
    return []


def numpy_called() -> bool:
    """Whether the TrackedArray method calling this was called by NumPy's own code, not the user's."""
    return sys._getframe(2).f_code.co_filename.startswith(_NUMPY)


def track(a: Any) -> Any:
    """`a` as a TrackedArray view when it is a NumPy float or complex array, else `a`. (Complex ones since session
    63: a plain `np.zeros(n, complex)` took `w[:] = x` of an active x unseen, and what host code computed from it
    was a constant: NPBench's stockham_fft, its derivative dropped silently. No launch takes a complex array; what
    host code computes from one that holds an active array's values is derived, refused where a launch takes it.)"""
    if type(a) is np.ndarray and a.dtype.kind in "fc":
        return a.view(TrackedArray)
    return a


def _result(r: Any, inputs: list, op: str, host: HostTracker | None) -> Any:
    """Wrap what an operation returned: a view of an input inherits its origin; a new float array made from
    a derived input gets an origin; other results are returned as they are."""
    if isinstance(r, (tuple, list)):
        return type(r)(_result(x, inputs, op, host) for x in r)
    if isinstance(r, np.ndarray) and type(r) is np.ndarray and r.dtype.kind == "O" and host is not None:
        # an object array (np.frompyfunc's, np.vectorize's: Python's function called on each element as a plain
        # float): derived where an input is, so its float conversion is (session 63: a plain result, silently)
        sources = [a for a in inputs if host.derived(a)]
        if sources:
            out = r.view(TrackedArray)
            out._gk_origin = _origin(op, sources)
            return out
        return r
    if not isinstance(r, np.ndarray) or type(r) is not np.ndarray or r.dtype.kind not in "fc":
        if host is not None and (type(r) is np.float64 or type(r) is np.float32):  # a reduction, an element read
            sources = [a for a in inputs if host.derived(a)]
            if sources:
                return derived(r, _origin(op, sources))
        if host is not None and (type(r) is np.complex128 or type(r) is np.complex64):
            # a derived complex array's element (`for z in pts`) or reduction: no derived complex scalar class, so
            # a 0-d array that keeps the origin (until session 63 a plain scalar: NPBench's contour_integral)
            sources = [a for a in inputs if host.derived(a)]
            if sources:
                out = np.asarray(r).view(TrackedArray)
                out._gk_origin = _origin(op, sources)
                return out
        return r
    out = r.view(TrackedArray)
    root = memory_root(r)
    for a in inputs:
        if memory_root(a) is root:  # a view of an input
            out._gk_origin = getattr(a, "_gk_origin", None) or (host.origin(a) if host else None)
            return out
    if host is not None:
        sources = [a for a in inputs if host.derived(a)]
        if sources:
            out._gk_origin = _origin(op, sources)
    return out


class TrackedArray(np.ndarray):
    """A view of a program's array whose NumPy operations are differentiated, marked or refused
    (module docstring). Outside a program it behaves as the ndarray it views."""

    _gk_origin: Origin | None = None

    def __array_finalize__(self, obj: Any) -> None:
        if not isinstance(obj, TrackedArray):
            return
        if self.base is not None and memory_root(self) is memory_root(obj):  # a view: same values, same origin
            self._gk_origin = obj._gk_origin
            return
        host = tracker()  # a copy made by an ndarray method this class does not handle by name
        if host is not None and host.derived(obj) and self.dtype.kind in "fcO":  # (object: np.vectorize's)
            self._gk_origin = _origin("an ndarray method", [obj])

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, out: Any = None, **kwargs: Any) -> Any:
        _read()
        host = tracker()
        op = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        arrays = _arrays_in(inputs)
        if out is not None:
            _check_write(host, op, _arrays_in(out), arrays)
            kwargs["out"] = plain(out)
        if method == "at":  # `np.add.at(a, idx, w)` writes into a: as out= (session 57: PIC's deposit was silent)
            _check_write(host, op, _arrays_in(inputs[:1]), arrays)
        r = getattr(ufunc, method)(*plain(inputs), **kwargs)
        if out is not None:
            return out[0] if isinstance(out, tuple) and len(out) == 1 else out
        return _result(r, arrays, op, host)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        _read()
        name = func.__name__
        if name == "copy" and args and isinstance(args[0], TrackedArray):
            return args[0].copy()
        if name == "copyto":
            return _copyto(*args, **kwargs)
        if name in SHAPES:  # joins, pads, rolls, reshaped copies (copy launches), np.where, np.clip (hostufuncs.py)
            got = SHAPES[name](func, args, kwargs)
            if got is not NotImplemented:
                return got
        host = tracker()
        op = f"np.{name}"
        arrays = _arrays_in(args) + _arrays_in(kwargs)
        if "out" in kwargs and kwargs["out"] is not None:
            _check_write(host, op, _arrays_in(kwargs["out"]), arrays)
        if name in _WRITES_FIRST:
            _check_write(host, op, _arrays_in(args[:1] or [kwargs.get("a", kwargs.get("arr"))]), arrays)
        r = func(*plain(args), **{k: plain(v) for k, v in kwargs.items()})
        if name in _LIKE:
            return r.view(TrackedArray) if type(r) is np.ndarray and r.dtype.kind in "fc" else r
        return _result(r, arrays, op, host)

    def __getitem__(self, key: Any) -> Any:
        _read()
        r = plain(self)[plain(key)]
        return _result(r, [self], "indexing with an index array" if isinstance(r, np.ndarray) else "an element read",
                       tracker())

    # -- copies: launches, so that they are differentiated ---------------------------------------------------------
    def copy(self, order: str = "C") -> Any:
        if numpy_called():
            return self.numpy_copy("ndarray.copy", order)
        return self._copied("ndarray.copy", None, order)

    def numpy_copy(self, op: str, order: str = "C") -> Any:
        """A copy NumPy's own code makes (np.unique's, np.percentile's, which then sort it in place): a plain copy,
        derived where self is active or derived (session 63: it was a launch, and NumPy's in-place sort of it a
        refused host write naming NumPy's internal line; now a launch taking the result is refused naming the
        user's line, as for any NumPy function that is no launch)."""
        return _result(np.array(plain(self), order=order, copy=True), [self], op, tracker())

    def __copy__(self) -> Any:
        """`copy.copy(u)`, `copy.deepcopy(u)` (a restart kept as `saved = copy.deepcopy(state)`): the copy launch
        of `u.copy()`, differentiated; until session 62 a copy no launch made, refused where a launch took it."""
        return self._copied("copy.copy", None, "F" if self.flags.f_contiguous and not self.flags.c_contiguous
                            else "C")

    def __deepcopy__(self, memo: Any) -> Any:
        return self.__copy__()  # float elements: nothing deeper to copy

    def astype(self, dtype: Any, order: str = "K", casting: str = "unsafe", subok: bool = True,
               copy: bool = True) -> Any:
        _read()
        dtype = np.dtype(dtype)
        if dtype == self.dtype and not copy:
            return self
        if dtype.kind not in "fc":  # an integer or boolean image of the values: no derivative flows through it
            return np.ndarray.astype(plain(self), dtype, order=order, casting=casting, copy=copy)
        if dtype not in _FLOATS:  # complex or float16: no launch holds it; derived where self is (session 63: a
            # complex copy was a plain array, its derivative dropped silently where host code went on with it)
            return _result(np.ndarray.astype(plain(self), dtype, order=order, casting=casting, copy=True), [self],
                           "ndarray.astype", tracker())
        return self._copied("ndarray.astype", dtype, "C" if order in ("K", "A") else order)

    def _copied(self, op: str, dtype: Any, order: str) -> Any:
        _read()
        host = tracker()
        src = plain(self) if host is None else host.plain_view(self)  # the same view at every step: replay.py
        rec = active_recorder()
        if _launchable(src) and rec is not None and self._gk_origin is None \
                and (host is None or host.origin(src) is None):
            lend = order != "F" and getattr(rec, "lends_copies", False)  # a state copied every step: kept memory
            out = POOL.leased(src, dtype or src.dtype) if lend else \
                np.empty(src.shape, dtype or src.dtype, order="F" if order == "F" else "C")
            gk_copy(out, src)
            return out.view(TrackedArray)
        r = np.array(src, dtype=dtype, order=order, copy=True)
        return _result(r, [self], op, host)

    def fill(self, value: Any) -> None:
        self[...] = value

    def __setitem__(self, key: Any, value: Any) -> None:
        _read()
        host = tracker()
        if host is None or active_recorder() is None:
            np.ndarray.__setitem__(plain(self), key, plain(value))
            return
        whole = plain(self)
        _writable(whole, host)
        target = whole[_view_key(key)]
        if target.base is None or memory_root(target) is not memory_root(whole):  # an index array: a copy
            # a derived value (the value itself, not its plain view: a TrackedArray's origin is its attribute;
            # session 63) marks a fresh array derived, as a slice's write does
            origin = host.origin(value)
            if host.active(whole) or host.active(value) or isinstance(value, ActiveScalar):
                frame = _user_frame()
                raise ProgramError(f"a host write to {_names(frame, [whole])} through an index array at "
                                   f"{_where(frame)} inside a differentiated program involves an active array; "
                                   "nothing was written", hint="write it in a kernel")
            np.ndarray.__setitem__(whole, key, plain(value))
            host.taint(whole, origin)
            return
        _write(host, "an assignment", target, value)

    def __repr__(self) -> str:
        _read()
        return repr(plain(self))


TRACKED.append(TrackedArray)  # derived.py's arrays computed from derived scalars


def _reading(name: str) -> Any:
    """ndarray's method `name`, run after what a recomputation holds (`_read`): it reads the values."""
    method = getattr(np.ndarray, name)

    def read(self: Any, *args: Any, **kwargs: Any) -> Any:
        _read()
        return method(self, *args, **kwargs)
    read.__name__ = read.__qualname__ = name
    return read


# the methods that read values without a ufunc or a NumPy function (those come through __array_ufunc__ and
# __array_function__); `view` is not one (plain() makes the launches' views with it)
for _name in ("item", "tolist", "tobytes", "tofile", "argmax", "argmin", "argsort", "argpartition", "nonzero",
              "searchsorted", "flatten", "ravel", "__iter__", "__contains__", "__float__", "__int__",
              "__bool__", "__index__", "__complex__", "__str__", "__format__",
              "__reduce__", "__reduce_ex__"):
    setattr(TrackedArray, _name, _reading(_name))


def _through(func: Any) -> Any:
    """ndarray's method that NumPy writes in Python ending in `dtype.type(result)` (which makes a plain scalar of
    a derived one: `u.mean()`), or in C without a ufunc (`u.dot(v)`), as the NumPy function, which comes
    through `__array_function__`."""
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return func(self, *args, **kwargs)
    method.__name__ = method.__qualname__ = func.__name__
    return method


for _func in (np.dot, np.mean, np.var, np.std):
    setattr(TrackedArray, _func.__name__, _through(_func))


def _writing(name: str) -> Any:
    """ndarray's method `name`, which writes the array in place without a ufunc or a NumPy function (`u.put(j,
    w)`, `u.sort()`): the write checked as `out=`'s is (refused into an active or taken array; the array then
    remembers a derived input's origin)."""
    method = getattr(np.ndarray, name)

    def write(self: Any, *args: Any, **kwargs: Any) -> Any:
        _read()
        _check_write(tracker(), f"ndarray.{name}", [self], [self] + _arrays_in(args) + _arrays_in(kwargs))
        return method(plain(self), *plain(args), **{k: plain(v) for k, v in kwargs.items()})
    write.__name__ = write.__qualname__ = name
    return write


for _name in ("put", "sort", "partition"):
    setattr(TrackedArray, _name, _writing(_name))


def _view_key(key: Any) -> Any:
    """`key` with an Ellipsis, so that a basic index gives a view (a 0-d one for one element)."""
    parts = key if isinstance(key, tuple) else (key,)
    return parts if any(p is Ellipsis for p in parts) else (*parts, Ellipsis)


def _launchable(a: Any) -> bool:
    return isinstance(a, np.ndarray) and a.dtype in _FLOATS and 1 <= a.ndim <= MAX_NDIM and a.size > 0


def _check_write(host: HostTracker | None, op: str, outs: list, inputs: list) -> None:
    """A host operation writes `outs`: refused into an active array; its output buffers remember a derived
    input's origin."""
    if host is None:
        return
    for o in outs:
        _writable(plain(o), host)
        if host.active(plain(o)):
            frame = _user_frame()
            line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip() if frame is not None else ""
            raise ProgramError(f"`{op}` writes its result into {_names(frame, [plain(o)])}, an active array, on the "
                               f"host at {_where(frame)}{f' (`{line}`)' if line else ''}: its derivative would be "
                               "lost; nothing was written",
                               hint="write it as a kernel, or compute into a new array and gk.copy(dst, it)")
    sources = [a for a in inputs if host.derived(a)]  # not plain(a): it would lose a TrackedArray's origin
    if sources:
        origin = _origin(op, [plain(a) for a in sources])
        for o in outs:
            host.taint(plain(o), origin)


def _writable(dst: Any, host: HostTracker) -> None:
    """A host write into an array the program's tape depends on is refused as the host-write guard refuses
    it (program/guard.py), naming the array and the launch after which it happened, whatever the operation:
    a read-only array as NumPy refuses it, a fingerprinted one before it changes."""
    if isinstance(dst, np.ndarray) and not dst.flags.writeable:
        raise ValueError("assignment destination is read-only")
    host.writes += 1
    guard = _guard()
    if guard is not None:
        guard.refuse_write(dst)


def _write(host: HostTracker, op: str, dst: Any, value: Any) -> None:
    """dst[...] = value inside a program: a launch where a derivative is involved, else NumPy's write."""
    _writable(dst, host)
    # a derived TrackedArray's origin is its attribute, which its plain view loses: until session 63 `out[...] =
    # np.cumsum(u)` into a Duplicated output copied it as a constant, and into a fresh array left it unmarked
    # (NPBench's covariance2 and conv2d_bias: the derivative dropped, silently)
    origin = host.origin(value) if isinstance(value, np.ndarray) else None
    value = plain(value)
    if isinstance(value, ActiveScalar) or (isinstance(value, (int, float, np.number)) and host.active(dst)):
        if dst.ndim == 0:
            dst = dst.reshape(1)
        if not _launchable(dst):
            raise ProgramError(f"{op} to an active array of shape {dst.shape} inside a differentiated program",
                               hint="write it in a kernel")
        gk_fill(dst, value)
        return
    if isinstance(value, np.ndarray) and (host.active(dst) or origin is not None or host.active(value)):
        if origin is not None:
            if host.active(dst):
                frame = _user_frame()
                raise ProgramError(f"{op} writes {_names(frame, [value])}, which host code computed from an active "
                                   f"array ({origin.describe()}), into {_names(frame, [dst])}, an active array, at "
                                   f"{_where(frame)}: its derivative would be lost; nothing was written", hint=_FIX)
            host.taint(dst, origin)
            np.copyto(dst, value)
            return
        if dst.ndim == 0 and value.size == 1:
            dst, value = dst.reshape(1), value.reshape(1)
        if value.shape != dst.shape or not _launchable(dst) or value.dtype not in _COPYABLE:
            frame = _user_frame()
            raise ProgramError(f"{op} of an array of shape {value.shape} to {_names(frame, [dst])} of shape "
                               f"{dst.shape} at {_where(frame)} involves an active array and is not a plain copy "
                               "(same shape, float, 1-5 axes); nothing was written", hint="write it in a kernel")
        gk_copy(dst, value)
        return
    if isinstance(value, DerivedScalar):  # `w[:] = u.sum()` into an array nothing active reached: derived now
        host.taint(dst, value._gk_origin)
    np.copyto(dst, constant(value))


def _copyto(dst: Any, src: Any, casting: str = "same_kind", where: Any = True) -> None:
    host = tracker()
    if host is None or active_recorder() is None:
        np.copyto(plain(dst), plain(src), casting=casting, where=plain(where))
        return
    if where is not True:
        _check_write(host, "np.copyto", [dst], _arrays_in(src))
        np.copyto(plain(dst), plain(src), casting=casting, where=plain(where))
        return
    _write(host, "np.copyto", plain(dst), src)


# -- launches and rule calls --------------------------------------------------------------------------------------
