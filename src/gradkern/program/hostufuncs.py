"""Elementwise NumPy on a program's arrays as launches (docs/host-code.md, "Elementwise NumPy"): a ufunc call or
arithmetic operator on arrays of one shape and float dtype and on scalars (`u + dt * f`, `np.sqrt(u)`,
`np.maximum(u, 0.0)`, `np.clip(u, lo, hi, out=u)`, `u *= 0.5`, `np.where(mask, a, b)`) is one launch of a kernel
generated in the kernel language for (operation, axes, which operands are arrays or scalars), so it is recorded,
taped and differentiated by the pipeline as any launch: no derivative is written here. `out=` and the in-place
operators are launches that write the buffer when no launch has taken it yet; into an array a launch has taken
they stay host writes, refused by the guard as the contract's host-write rule says. Operand views that overlap
without being the same view (`u[1:] - u[:-1]`) are copied first by `gk.copy` (a shadow may not overlap another
one): NumPy's "as if the inputs were read before the output is written".

What does not fit (broadcasting other than scalars, mixed dtypes, a ufunc not in `OPS`, `where=`, `dtype=`, a
reduction, an array exponent) goes on to hostcode.py's `__array_ufunc__` / `__array_function__`: a derived array,
refused by the launch that takes it. Boolean and integer operands (a mask) are constants in the float dtype.

Outside a checkpointed loop an operation becomes a launch when an operand is active (has a shadow or tangent) or is
an Active scalar, and one with an operand host code computed from an active array (a derived array or scalar) is
hostcode's; inside a loop's step every one that fits is a launch, a derived operand taken as `gk.Const` and the
result derived, since a recomputed step must make the launches its first forward made, and a step's temporaries get
their shadows (on which both activity and derived-ness depend) only in taped segments (as copies: hostcode.py)."""

from __future__ import annotations

import linecache
from typing import Any

import numpy as np

from .. import intrinsics
from ..annotations import Const
from ..ir.types import MAX_LAUNCH_NDIM, MAX_NDIM
from ..kernel import KernelFunction, kernel
from ..recording import active_recorder
from ..runtime.arrays import shares_elements
from ..runtime.launch import launch
from .derived import DerivedScalar, constant
from .hostcode import SHAPES, TrackedArray, _read, _view_key, plain, tracker
from .hostops import copy as gk_copy
from .scalars import ActiveScalar
from .shadows import memory_root

# ufunc name -> (operands, the kernel expression of them); `power` takes a scalar exponent only (elementwise)
_MATH = {"sqrt": "sqrt", "exp": "exp", "expm1": "expm1", "log": "log", "log1p": "log1p", "sin": "sin",
         "cos": "cos", "tan": "tan", "arcsin": "asin", "arccos": "acos", "arctan": "atan", "sinh": "sinh",
         "cosh": "cosh", "tanh": "tanh", "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh"}
OPS: dict[str, tuple[int, str]] = {
    "add": (2, "{0} + {1}"), "subtract": (2, "{0} - {1}"), "multiply": (2, "{0} * {1}"),
    "true_divide": (2, "{0} / {1}"), "divide": (2, "{0} / {1}"), "negative": (1, "-{0}"), "positive": (1, "{0}"),
    "absolute": (1, "abs({0})"), "fabs": (1, "abs({0})"), "square": (1, "{0} * {0}"),
    "power": (2, "{0} ** {1}"), "maximum": (2, "max({0}, {1})"), "minimum": (2, "min({0}, {1})"),
    "arctan2": (2, "gk.atan2({0}, {1})"), "hypot": (2, "gk.hypot({0}, {1})"),
    "clip": (3, "gk.clamp({0}, {1}, {2})"), "where": (3, ""),
    **{name: (1, f"gk.{fn}({{0}})") for name, fn in _MATH.items()},
}
_FLOATS = (np.dtype("float32"), np.dtype("float64"))
_KERNELS: dict[tuple[str, int, str], KernelFunction] = {}  # (operation, axes, operands' pattern) -> its kernel
_TID = ("i", "i, j", "i, j, k")


def _kernel(name: str, ndim: int, pattern: str) -> KernelFunction:
    """The kernel of `name` over `ndim` axes; `pattern` says, per operand, `a` (an array parameter), `s` (a scalar
    parameter), `o` (read from `out`: in place) or a digit (the same array as that operand)."""
    key = (name, ndim, pattern)
    k = _KERNELS.get(key)
    if k is None:
        k = _KERNELS[key] = _generate(name, ndim, pattern)
    return k


def _generate(name: str, ndim: int, pattern: str) -> KernelFunction:
    fname = f"host_{name}_{ndim}_{pattern}"
    idx = ", ".join(("i", "j", "k", "m", "n")[:ndim])
    params = ["out"] + [f"x{n}" for n, p in enumerate(pattern) if p in "as"]

    def operand(n: int) -> str:
        p = pattern[n]
        return {"a": f"x{n}[{idx}]", "s": f"x{n}", "o": f"out[{idx}]"}.get(p) or f"x{p}[{idx}]"
    if name == "where":  # the condition an int32 array: no derivative through it
        body = [f"if {operand(0)} != 0:", f"    out[{idx}] = {operand(1)}", "else:", f"    out[{idx}] = {operand(2)}"]
    elif name in ("maximum", "minimum"):  # NumPy's NaN propagation, which the kernel's max/min lack (a + b is NaN)
        body = [f"p0 = {operand(0)}", f"p1 = {operand(1)}", "if p0 != p0 or p1 != p1:", f"    out[{idx}] = p0 + p1",
                "else:", f"    out[{idx}] = {OPS[name][1].format('p0', 'p1')}"]
    else:
        body = [f"out[{idx}] = " + OPS[name][1].format(*(operand(n) for n in range(len(pattern))))]
    lines = [f"def {fname}({', '.join(params)}):", f"    {_TID[min(ndim, MAX_LAUNCH_NDIM) - 1]} = gk.tid()"]
    indent = "    "
    for axis, var in ((3, "m"), (4, "n"))[:max(ndim - MAX_LAUNCH_NDIM, 0)]:  # trailing axes: loops (as hostops)
        lines.append(f"{indent}for {var} in range(out.shape[{axis}]):")
        indent += "    "
    lines += [indent + b for b in body]
    source = "\n".join(lines) + "\n"
    filename = f"<gradkern host ufunc {fname}>"  # inspect reads a kernel's source through linecache
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"gk": intrinsics}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102  generated from the table above only
    return kernel(namespace[fname])


def _scalar(x: Any, host: Any) -> tuple[Any, Any]:
    """(`x` as a launch takes it, or None when it is no scalar operand that fits; the origin of a scalar host code
    computed from an active array, else None)."""
    if isinstance(x, ActiveScalar):
        return x, None
    origin = None
    if isinstance(x, DerivedScalar):
        if x._gk_origin is not None and x._gk_origin.host is host:
            origin = x._gk_origin
        x = constant(x)
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
        return None, None
    return float(x), origin


def elementwise(name: str, operands: tuple, out: Any) -> Any:
    """`name` of `operands` into `out` (None: a new array) as a launch, or NotImplemented when it does not fit or
    needs none (hostcode.py takes it then)."""
    host, rec = tracker(), active_recorder()
    if host is None or rec is None or name not in OPS or OPS[name][0] != len(operands):
        return NotImplemented
    if isinstance(out, tuple):
        if len(out) != 1:
            return NotImplemented
        out = out[0]
    if out is not None and not isinstance(out, np.ndarray):
        return NotImplemented
    # inside a checkpointed loop's step whether an operand is derived depends on its shadows, which a step's
    # temporaries have only in taped segments: there a derived operand is a launch too (the same launches in every
    # run of the step), whose result is derived in turn
    loop, derived, consts = rec.in_loop, None, set()
    arrays, values, integers, shape, dtype, active = [], [], [], None, None, False
    for n, x in enumerate(operands):
        if isinstance(x, np.ndarray) and (x.ndim > 0 or name == "where" and n == 0):
            if host.origin(x) is not None and not (name == "where" and n == 0):
                if not loop:
                    return NotImplemented  # its values came from host code the tape does not see
                derived = derived or host.origin(x)
                consts.add(n)
            v = host.plain_view(x) if isinstance(x, TrackedArray) else plain(x)
            if shape is None:
                shape = v.shape
            if v.shape != shape:
                return NotImplemented  # broadcasting: not elementwise over one shape
            if name == "where" and n == 0:
                v = (v != 0).astype(np.int32)  # a kernel's array holds no booleans
            elif v.dtype.kind in "biu":
                integers.append(n)  # a mask or counts (`u * (u > 0)`): a constant, in the float dtype below
            else:
                if v.dtype not in _FLOATS or (dtype is not None and v.dtype != dtype):
                    return NotImplemented
                dtype = v.dtype
                active = active or host.active(v)
            arrays.append(n)
            values.append(v)
        else:
            s, origin = _scalar(x[()] if isinstance(x, np.ndarray) else x, host)  # a 0-d array: a scalar to NumPy
            if s is None or name == "where" and n == 0 or origin is not None and not loop:
                return NotImplemented
            derived = derived or origin
            active = active or isinstance(s, ActiveScalar)
            values.append(s)
    if dtype is None or not 1 <= len(shape) <= MAX_NDIM or not np.prod(shape):
        return NotImplemented
    if name == "power" and arrays[-1] == 1:
        return NotImplemented  # an array exponent: not a constant one
    given = [x.value if isinstance(x, ActiveScalar) else constant(x) for x in operands[1 if name == "where" else 0:]]
    if np.result_type(*[plain(x) for x in given]) != dtype:
        return NotImplemented  # NumPy's result would have another dtype (a float64 scalar with float32 arrays)
    for n in integers:
        values[n] = np.asarray(values[n], dtype)  # a new array: no derivative flows through integers
    if out is not None:
        if host.origin(out) is not None and not loop:
            return NotImplemented
        dst = host.plain_view(out) if isinstance(out, TrackedArray) else plain(out)
        if dst.shape != shape or dst.dtype != dtype:
            return NotImplemented
        guard = getattr(rec, "guard", None)
        if guard is not None and guard.taken(dst):
            return NotImplemented  # NumPy writing into an array the tape depends on: a refused host write (docs)
        active = active or host.active(dst)
    if not (active or loop):
        return NotImplemented  # no derivative is involved: NumPy computes it (a loop's step: always a launch)
    _read()
    dst = np.empty(shape, dtype) if out is None else dst
    pattern, args = [], [dst]
    for n, v in enumerate(values):
        if n not in arrays:
            pattern.append("s")
            args.append(v)
            continue
        if v is dst or _same_view(v, dst):
            pattern.append("o")
            continue
        same = next((m for m in arrays[:arrays.index(n)] if _same_view(values[m], v)), None)
        if same is not None:
            pattern.append(str(same))
            continue
        if _overlaps(v, [dst] + [values[m] for m in arrays if m != n]):
            copied = np.empty(shape, v.dtype)  # NumPy reads every input before it writes: so does the copy
            gk_copy(copied, v)
            v = values[n] = copied
        pattern.append("a")
        args.append(Const(v) if n in consts else v)  # derived: the result is refused, not this launch
    launch(_kernel(name, len(shape), "".join(pattern)), shape[:MAX_LAUNCH_NDIM], *args)
    if out is not None:
        if derived is not None:
            host.taint(dst, derived)
        return out
    result = dst.view(TrackedArray)
    result._gk_origin = derived
    return result


def _same_view(a: np.ndarray, b: np.ndarray) -> bool:
    return a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and a.strides == b.strides \
        and a.shape == b.shape and a.dtype == b.dtype


def _overlaps(a: np.ndarray, others: list) -> bool:
    root = memory_root(a)
    return any(memory_root(b) is root and not _same_view(a, b) and shares_elements(a, b) for b in others)


_ufunc = TrackedArray.__array_ufunc__
# the keywords that may come with the defaults' values (NumPy's clip passes casting=None)
_DEFAULTS = {"casting": (None, "same_kind"), "order": (None, "K"), "dtype": (None,)}


def _array_ufunc(self: Any, ufunc: Any, method: str, *inputs: Any, out: Any = None, **kwargs: Any) -> Any:
    if method == "__call__" and all(k in _DEFAULTS and isinstance(v, (str, type(None))) and v in _DEFAULTS[k]
                                    for k, v in kwargs.items()):
        got = elementwise(ufunc.__name__, inputs, out)
        if got is not NotImplemented:
            return got
    return _ufunc(self, ufunc, method, *inputs, out=out, **kwargs)


def _where(func: Any, args: tuple, kwargs: dict) -> Any:
    return elementwise("where", args, None) if len(args) == 3 and not kwargs else NotImplemented


def _clip(func: Any, args: tuple, kwargs: dict) -> Any:
    """np.clip(u, ...): NumPy's own, which calls u.clip, the ufunc clip (or maximum, minimum) above."""
    if not args or not isinstance(args[0], TrackedArray) or tracker() is None:
        return NotImplemented
    return func._implementation(*args, **kwargs)


_setitem = TrackedArray.__setitem__  # hostcode's (a copy or fill launch, a host write, or refused)


def _assigned(self: Any, key: Any, value: Any) -> None:
    """`u[1:-1] *= 0.5` is `v = u[1:-1]; v *= 0.5` (a launch, above), then `u[1:-1] = v`: the values onto
    themselves, which changes nothing and is no host write (one would be refused: a launch has taken u)."""
    if isinstance(value, np.ndarray) and tracker() is not None:
        target = np.ndarray.__getitem__(plain(self), _view_key(plain(key)))
        if target.base is not None and _same_view(target, plain(value)):
            return
    _setitem(self, key, value)


TrackedArray.__array_ufunc__ = _array_ufunc
TrackedArray.__setitem__ = _assigned
SHAPES["where"], SHAPES["clip"] = _where, _clip  # hostcode's __array_function__ asks them first
