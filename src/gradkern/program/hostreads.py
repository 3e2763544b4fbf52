"""Element reads and whole-array reductions of a program's active arrays as Active scalars (docs/host-code.md,
"Reductions and element reads"): `v[3]`, `out[0]`, `v.sum()`, `np.dot(p, ap)`, `np.linalg.norm(r)`, `v.max()`
inside a program. Each is a launch of a kernel generated in the kernel language that writes the value into a fresh
1-element array `b` (one thread; a reduction is a loop in that thread: deterministic, and summed in the order of the
elements), followed by a *read* of `b[0]` (record.py `read_scalar`): an Active scalar (scalars.ReadScalar) that
host arithmetic and later launches carry, and whose adjoint the sweep adds into `b`'s shadow just before that
launch's reverse (steps.Step.read_back, scalarsweep.py). The pipeline differentiates the generated kernel; no
derivative is written here. Before session 57 each was a derived scalar (derived.py), refused by a launch taking it.

What stays as it was (a derived scalar, refused where a launch takes it): a reduction with `axis=` (but one naming
every axis; along one axis of a 2-4-axis array it is an array launch: hostaxes.py), `dtype=`, `out=`, `keepdims=`,
`where=` or `initial=`, of an array host code computed (derived), of an integer array; `np.dot` of arrays of 2 or
more axes; `np.median`, `np.std`, `np.var`, ...; and any of them inside a checkpointed loop's step
(recorder.in_loop), where a recomputed step's scalar tape is not replayed. Reads of arrays nothing active reached
are NumPy's, as before. Elementary functions of an Active scalar (`np.sqrt(c)`,
`math.exp(c)`) are one-thread launches too (`elementary`)."""

from __future__ import annotations

import linecache
import operator
import sys
from typing import Any

import numpy as np

from .. import intrinsics
from ..ir.types import MAX_NDIM
from ..kernel import KernelFunction, kernel
from ..recording import active_recorder
from ..runtime.arrays import shares_elements
from ..runtime.binding import exactly_aliased
from ..runtime.launch import launch
from . import hostufuncs  # noqa: F401  (its ufunc methods first: the reductions below go on to them)
from .derived import _NUMPY, _OURS, carry, constant, constants, origin_of, user_frame, where
from .hostcalls import _Flat
from .hostcode import _FLOATS, SHAPES, TrackedArray, _origin, _read, plain, tracker
from .hostops import copy as copy_launch
from .hostops import fill as fill_launch
from .scalars import ELEMENTARY, ActiveScalar

# ndarray.sum's and .max's bodies: `u.sum()` called there is the user's
_METHODS = __import__("numpy._core._methods", fromlist=["_"]).__file__
_AXES = ("a0", "a1", "a2", "a3", "a4")
# reduction -> (operands, the accumulator's start, its update from `p` (the element, or the product), its final
# value); max and min propagate NaN as NumPy's do (the kernel's max returns its first operand when the second is NaN)
_REDUCE = {
    "sum": (1, "0.0", "acc = acc + p", "acc"),
    "mean": (1, "0.0", "acc = acc + p", "acc / n"),
    "dot": (2, "0.0", "acc = acc + p", "acc"),
    "norm": (1, "0.0", "acc = acc + p * p", "gk.sqrt(acc)"),
    "max": (1, "x[{first}]", "if p != p or acc != acc:\n    acc = acc + p\nelse:\n    acc = max(acc, p)", "acc"),
    "min": (1, "x[{first}]", "if p != p or acc != acc:\n    acc = acc + p\nelse:\n    acc = min(acc, p)", "acc"),
}
_KERNELS: dict[tuple[str, int], KernelFunction] = {}
# elementary functions of Active scalars (NumPy's ufunc names and `math`'s) -> (operands, the kernel expression)
_LN10, _LN2 = 2.302585092994046, 0.6931471805599453
_ELEMENTARY = {
    **{n: (1, f"gk.{n}({{0}})") for n in ("sqrt", "exp", "expm1", "log", "log1p", "sin", "cos", "tan", "sinh",
                                          "cosh", "tanh", "erf", "erfc")},
    **{n: (1, f"gk.{n[3:] if n.startswith('arc') else n}({{0}})")
       for n in ("arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "asin", "acos", "atan", "asinh",
                 "acosh", "atanh")},
    "log10": (1, f"gk.log({{0}}) / {_LN10!r}"), "log2": (1, f"gk.log({{0}}) / {_LN2!r}"),
    "arctan2": (2, "gk.atan2({0}, {1})"), "atan2": (2, "gk.atan2({0}, {1})"), "hypot": (2, "gk.hypot({0}, {1})"),
    # session 58: `np.square(np.linalg.norm(r))`, `np.reciprocal(s)`, `math.fabs(s)`
    "square": (1, "{0} * {0}"), "reciprocal": (1, "1.0 / {0}"), "fabs": (1, "abs({0})"),
}


def _source(fname: str, lines: list[str]) -> KernelFunction:
    source = "\n".join(lines) + "\n"
    filename = f"<gradkern host read {fname}>"  # inspect reads a kernel's source through linecache
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"gk": intrinsics}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102  generated from the tables here only
    return kernel(namespace[fname])


def _read_kernel(ndim: int) -> KernelFunction:
    """`out[0] = x[i0, ...]`, one thread."""
    key = ("read", ndim)
    k = _KERNELS.get(key)
    if k is None:
        idx = ", ".join(f"i{n}" for n in range(ndim))
        fname = f"host_read_{ndim}"
        k = _KERNELS[key] = _source(fname, [f"def {fname}(out, x, {idx}):", "    t = gk.tid()",
                                            f"    out[t] = x[{idx}]"])
    return k


def _reduce_kernel(name: str, ndim: int) -> KernelFunction:
    """The reduction `name` of every element of `x` (and `y`: a dot product), in the order of the elements, by one
    thread, into `out[0]`."""
    key = (name, ndim)
    k = _KERNELS.get(key)
    if k is None:
        operands, start, update, final = _REDUCE[name]
        idx = ", ".join(_AXES[:ndim])
        fname = f"host_{name}_{ndim}"
        params = ["out", "x"] + (["y"] if operands == 2 else []) + (["n"] if name == "mean" else [])
        lines = [f"def {fname}({', '.join(params)}):", "    t = gk.tid()",
                 "    acc = " + start.format(first=", ".join("0" * ndim))]
        indent = "    "
        for axis in range(ndim):
            lines.append(f"{indent}for {_AXES[axis]} in range(x.shape[{axis}]):")
            indent += "    "
        lines.append(f"{indent}p = x[{idx}]" + (f" * y[{idx}]" if operands == 2 else ""))
        lines += [indent + u for u in update.split("\n")]
        lines.append(f"    out[t] = {final}")
        k = _KERNELS[key] = _source(fname, lines)
    return k


def _elementary_kernel(name: str, pattern: str) -> KernelFunction:
    """`out[0] = f(x0, ...)`, one thread; `pattern` says per operand `a` (an Active scalar) or `c` (a number)."""
    key = (name, pattern)
    k = _KERNELS.get(key)
    if k is None:
        fname = f"host_scalar_{name}_{pattern}"
        params = ", ".join(f"x{n}" for n in range(len(pattern)))
        k = _KERNELS[key] = _source(fname, [f"def {fname}(out, {params}):", "    t = gk.tid()",
                                            "    out[t] = " + _ELEMENTARY[name][1].format(
                                                *(f"x{n}" for n in range(len(pattern))))])
    return k


def elementary(name: str, operands: tuple) -> Any:
    """`name` (`np.sqrt`, `math.exp`, ...) of Active scalars and numbers as a one-thread launch and a read, or
    NotImplemented (not in the table, or no read can be made here: a checkpointed loop's step)."""
    reader = _reader()
    if reader is None or name not in _ELEMENTARY or _ELEMENTARY[name][0] != len(operands) \
            or not any(isinstance(x, ActiveScalar) for x in operands):
        return NotImplemented
    args = []
    for x in operands:
        if not isinstance(x, ActiveScalar):
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
                return NotImplemented
            x = float(constant(x))
        args.append(x)
    out = np.empty(1)
    launch(_elementary_kernel(name, "".join("a" if isinstance(x, ActiveScalar) else "c" for x in args)), (1,),
           out, *args)
    return _read_from(reader, out, f"`{name}` of an Active scalar", [])


def _reader(user: bool = False) -> Any:
    """The recorder's `read_scalar` where a read can be one (a program's recording or forward mode, outside a
    checkpointed loop's step), else None. `user`: only where host code asks, not NumPy's own code (np.savetxt
    iterating a row, np.median's mean): what NumPy computes inside a function stays derived, as before."""
    rec = active_recorder()
    if rec is None or rec.in_loop or (user and _inside_numpy()):
        return None
    return getattr(rec, "read_scalar", None)


def _inside_numpy() -> bool:
    """Whether the first caller outside gradkern (and outside the bodies of ndarray's methods, `u.sum()`'s
    `_methods._sum`) is NumPy's own code."""
    f = sys._getframe(2)
    while f is not None and (f.f_code.co_filename.startswith(_OURS) or f.f_code.co_filename == _METHODS):
        f = f.f_back
    return f is not None and f.f_code.co_filename.startswith(_NUMPY)


def _what(text: str) -> str:
    frame = user_frame()
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip() if frame is not None else ""
    return f"{text} at {where(frame)}" + (f" (`{line}`)" if line else "")


def _operand(x: Any, host: Any) -> np.ndarray | None:
    """`x` as the launch takes it, where it fits a read: a float array (1-5 axes, not empty) no host code computed
    from an active array; else None."""
    if not isinstance(x, np.ndarray) or x.dtype not in _FLOATS or not 1 <= x.ndim <= MAX_NDIM or x.size == 0:
        return None
    if host.origin(x) is not None:
        return None  # derived: its values came from host code the tape does not see (refused where taken)
    return host.plain_view(x) if isinstance(x, TrackedArray) else plain(x)


def reduce(name: str, arrays: tuple, text: str) -> Any:
    """`name` of `arrays` (one, two for a dot product, of one shape and dtype) as a launch and a read, or
    NotImplemented when it does not fit or involves nothing active."""
    reader, host = _reader(user=True), tracker()
    if reader is None or host is None:
        return NotImplemented
    views = [_operand(a, host) for a in arrays]
    if any(v is None for v in views) or len({(v.shape, v.dtype) for v in views}) != 1:
        return NotImplemented
    if not any(host.active(v) for v in views):
        return NotImplemented  # no derivative is involved: NumPy's, as before
    _read()
    x = views[0]
    if len(views) == 2 and not exactly_aliased(*views) and shares_elements(*views):
        # np.dot(v[1:], v[:-1]): overlapping views' shadows would overlap in the generated kernel (refused as a
        # kernel's shifted views are); the second is copied by a launch first, so the adjoint flows through it
        second = np.empty(x.shape, x.dtype)
        copy_launch(second, views[1])
        views = [x, second]
    out = np.empty(1, x.dtype)
    extra = (float(x.size),) if name == "mean" else ()
    launch(_reduce_kernel(name, x.ndim), (1,), out, *views, *extra)
    return _read_from(reader, out, text, views)


def element(a: Any, key: Any) -> Any:
    """`a[key]` with one integer per axis, as a launch and a read, or NotImplemented."""
    reader, host = _reader(user=True), tracker()
    if reader is None or host is None:
        return NotImplemented
    parts = key if isinstance(key, tuple) else (key,)
    if len(parts) != a.ndim or any(isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, np.integer))
                                   for p in parts):
        return NotImplemented
    v = _operand(a, host)
    if v is None or not host.active(v):
        return NotImplemented
    index = []
    for p, n in zip(parts, v.shape):
        i = operator.index(p)
        if not -n <= i < n:
            return NotImplemented  # NumPy's IndexError
        index.append(i + n if i < 0 else i)
    _read()
    out = np.empty(1, v.dtype)
    launch(_read_kernel(v.ndim), (1,), out, v, *index)
    return _read_from(reader, out, "an element read", [v])


def flat_element(a: Any, i: Any) -> Any:
    """`a.flat[i]`, `a.take(i)`: the element at the flat (C-order) index `i` as an element read (session 58: `take`
    was a silent constant, `flat[i]` a derived scalar), or NotImplemented (NumPy's, or its IndexError)."""
    if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)) or not isinstance(a, np.ndarray) \
            or a.ndim == 0:
        return NotImplemented
    i, n = operator.index(i), a.size
    if not -n <= i < n:
        return NotImplemented
    return element(a, tuple(int(k) for k in np.unravel_index(i % n, a.shape)))


def _read_from(reader: Any, out: np.ndarray, text: str, sources: list) -> Any:
    """The read of `out[0]` (record.py), remembering where host code made it (for NumPy's conversions of it)."""
    s = reader(out, _what(text))
    s._gk_origin = _origin(text.strip("`"), sources)
    return s


# -- the entry points: the array class's indexing, ufunc reductions and NumPy functions -------------------------------

_getitem = TrackedArray.__getitem__
_ufunc = TrackedArray.__array_ufunc__
_REDUCE_UFUNCS = {"add": "sum", "maximum": "max", "minimum": "min"}
# the keywords a whole-array reduction passes with their defaults' values (`u.sum()`: axis=None, dtype=None, ...)
_WHOLE = {"axis": (None,), "dtype": (None,), "keepdims": (False,), "where": (True,), "out": (None,)}


def _getitem_read(self: Any, key: Any) -> Any:
    got = element(self, key) if isinstance(key, (int, np.integer, tuple)) else NotImplemented
    return got if got is not NotImplemented else _getitem(self, key)


def _every_axis(axis: Any, ndim: int) -> bool:
    """`axis=` naming every axis of an array of `ndim` (`np.sum(v, axis=0)` of a vector): a whole reduction."""
    axes = axis if isinstance(axis, tuple) else (axis,)
    if not all(isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)) for a in axes):
        return False
    return sorted(int(a) % ndim for a in axes if -ndim <= a < ndim) == list(range(ndim)) and len(axes) == ndim


def _whole(kwargs: dict, arrays: tuple) -> bool:
    """The keywords of a reduction of `arrays` whole: the defaults', or an `axis=` naming every axis (session 58)."""
    ndims = {a.ndim for a in arrays if isinstance(a, np.ndarray)}
    return all(k in _WHOLE and any(v is d for d in _WHOLE[k])
               or k == "axis" and len(ndims) == 1 and _every_axis(v, min(ndims)) for k, v in kwargs.items())


def _array_ufunc(self: Any, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    name = ufunc.__name__
    if method == "reduce" and name in _REDUCE_UFUNCS and len(inputs) == 1 and _whole(kwargs, inputs):
        got = reduce(_REDUCE_UFUNCS[name], inputs, f"`{_REDUCE_UFUNCS[name]}` of an array")
        if got is not NotImplemented:
            return got
    if method == "__call__" and name == "matmul" and len(inputs) == 2 and not kwargs \
            and all(isinstance(x, np.ndarray) and x.ndim == 1 for x in inputs):
        got = reduce("dot", inputs, "`@` of two vectors")
        if got is not NotImplemented:
            return got
    return _ufunc(self, ufunc, method, *inputs, **kwargs)


def _function(name: str, count: int, vectors: bool = False) -> Any:
    """SHAPES' handler of the NumPy function reducing `count` arrays whole (`np.sum(u)`, `np.dot(u, v)`)."""
    def handler(func: Any, args: tuple, kwargs: dict) -> Any:
        if count == 1 and len(args) == 2 and "axis" not in kwargs:  # np.sum(v, 0): the axis given by position
            args, kwargs = args[:1], {**kwargs, "axis": args[1]}
        if len(args) != count or not all(isinstance(a, np.ndarray) for a in args) or not _whole(kwargs, args):
            return NotImplemented
        if vectors and any(a.ndim != 1 for a in args):
            return NotImplemented  # np.dot of matrices: a product, not a reduction
        return reduce(name, args, f"`np.{func.__name__}`")
    return handler


def _norm(func: Any, args: tuple, kwargs: dict) -> Any:
    """np.linalg.norm(u): the 2-norm of the flattened array (no `ord`, `axis`, `keepdims`)."""
    if len(args) != 1 or any(v is not None and v is not False for v in kwargs.values()) \
            or set(kwargs) - {"ord", "axis", "keepdims"} or not isinstance(args[0], np.ndarray):
        return NotImplemented
    return reduce("norm", args, "`np.linalg.norm`")


def _take(func: Any, args: tuple, kwargs: dict) -> Any:
    """np.take(u, i) / u.take(i) with one integer and NumPy's defaults (no `axis` but 0 of a vector, `out`, `mode`):
    the element read of the flattened array."""
    names = ("a", "indices", "axis", "out", "mode")
    given = {**dict(zip(names, args)), **kwargs}
    if len(args) > len(names) or set(given) - set(names) or "indices" not in given or given.get("out") is not None \
            or given.get("mode", "raise") != "raise" or not isinstance(given["a"], np.ndarray) \
            or given.get("axis") not in (None, *((0, -1) if given["a"].ndim == 1 else ())):
        return NotImplemented
    return flat_element(given["a"], given["indices"])


def _take_method(self: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> Any:
    """ndarray.take is C without a NumPy function: as np.take, which comes through `__array_function__`."""
    return np.take(self, indices, axis=axis, out=out, mode=mode)


def _round_method(self: Any, decimals: Any = 0, out: Any = None) -> Any:
    """ndarray.round with `decimals`: its C multiplies into a fresh output, which the elementwise launch locks,
    then rounds that output in place (a host write refused naming the wrong thing, session 58); as np.round, a
    derived array. `decimals=0` is NumPy's `rint` (an elementwise launch), as before."""
    if decimals == 0 and out is None:
        return _ndarray_round(self)
    return np.round(self, decimals, out)


def _flat_getitem(self: Any, key: Any) -> Any:
    got = flat_element(self._array, key) if tracker() is not None else NotImplemented
    return got if got is not NotImplemented else _flat_item(self, key)


def _full_like(func: Any, args: tuple, kwargs: dict) -> Any:
    """np.full_like(u, s) with an Active scalar `s` (a read's, an Active argument's): a fresh array like `u` and a
    fill launch taking `s` (session 58; NumPy's own fill would convert `s`, refused as float() of it is)."""
    value = args[1] if len(args) > 1 else kwargs.get("fill_value")
    if len(args) > 2 or set(kwargs) - {"fill_value", "dtype"} or not isinstance(value, ActiveScalar) \
            or _reader(user=True) is None or not isinstance(args[0], np.ndarray):
        return NotImplemented
    out = np.empty_like(args[0], dtype=kwargs.get("dtype"))
    if not isinstance(out, TrackedArray) or not 1 <= out.ndim <= MAX_NDIM or out.size == 0:
        return NotImplemented
    fill_launch(out, value)
    return out


_function_call = TrackedArray.__array_function__


def _array_function(self: Any, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
    """A NumPy function given a list holding a read's Active scalar (`np.where(m, [s] * n, 0.0)`): NumPy would make
    an object array of it; run on the values, its result remembers the read as a derived one's (refused where a
    launch takes it), as for a derived scalar in a list (hostcalls.py)."""
    origin = next((origin_of(a) for a in (*args, *kwargs.values()) if isinstance(a, (list, tuple))
                   and origin_of(a) is not None), None)
    if origin is not None and tracker() is not None:
        return carry(func(*plain(constants(args)), **plain(constants(kwargs))), origin)
    return _function_call(self, func, types, args, kwargs)


TrackedArray.__array_function__ = _array_function
TrackedArray.take = _take_method
_ndarray_round = TrackedArray.round
TrackedArray.round = _round_method
_flat_item = _Flat.__getitem__
_Flat.__getitem__ = _flat_getitem
ELEMENTARY.append(elementary)  # scalars.py's `np.sqrt(c)`, hostcalls.py's `math.sqrt(c)`
TrackedArray.__getitem__ = _getitem_read
TrackedArray.__array_ufunc__ = _array_ufunc
for _name, _handler in (("sum", _function("sum", 1)), ("mean", _function("mean", 1)),
                        ("max", _function("max", 1)), ("amax", _function("max", 1)),
                        ("min", _function("min", 1)), ("amin", _function("min", 1)),
                        ("dot", _function("dot", 2, vectors=True)), ("vdot", _function("dot", 2)),
                        ("norm", _norm), ("full_like", _full_like), ("take", _take)):
    SHAPES[_name] = _handler

