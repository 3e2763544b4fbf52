"""Reductions along axes of a program's active arrays as launches (docs/host-code.md, "Reductions along an
axis"): `np.sum(F, axis=2)`, `F.sum(0)`, `np.mean(u, axis=1)`, `F.max(axis=0)`, `np.min(u, 1, keepdims=True)`
inside a program, the density `rho = np.sum(F, 2)` of a lattice-Boltzmann code or a column sum of a state; since
session 63 several axes too (`np.sum(patch * w, axis=(1, 2, 3))`, a convolution's window, a max pool's
`x.max(axis=(2, 4))`), of an array of up to 5 axes whose result a launch holds (1-3 axes).
Each is one launch of a kernel generated in the kernel language: a thread per element of the result, looping over
the reduced axes in order (so a sum is the recursive sum, as a whole-array read's is: hostreads.py), into a fresh
array that later host code and launches take as any launch's output. The pipeline differentiates the generated
kernel; no derivative is written here. Until session 62 each was a derived array, refused by a launch taking it.

As for elementwise NumPy (hostufuncs.py), outside a checkpointed loop's step a reduction is a launch when its array
is active and not derived, and inside a step every one that fits is a launch (a derived operand taken as
`gk.Const`, the result derived), so a recomputed step makes the launches its first forward made. What does not fit
stays as it was (a derived array): `dtype=`, `out=`, `where=`, `initial=`, an integer array, an empty array, a
result of more axes than a launch has (every axis is a whole reduction: hostreads.py's read).
`np.var` and `np.std` along axes are NumPy's two passes of such launches (`_moment`)"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..annotations import Const
from ..ir.types import MAX_LAUNCH_NDIM, MAX_NDIM
from ..kernel import KernelFunction
from ..recording import active_recorder
from ..runtime.launch import launch
from . import hostreads  # noqa: F401  (its whole-array handlers first: each is wrapped below)
from .hostcode import _FLOATS, SHAPES, TrackedArray, _read, plain, tracker
from .hostreads import _REDUCE, _source

_KERNELS: dict[tuple[str, int, tuple[int, ...]], KernelFunction] = {}
# the reductions along an axis: the whole-array table's sum, mean, max and min (hostreads._REDUCE)
_NAMES = ("sum", "mean", "max", "min")


def _axis_kernel(name: str, ndim: int, axes: tuple[int, ...]) -> KernelFunction:
    """`out[i...] = name of x[i..., k, i...]` over the reduced indices k (the axes `axes` of `ndim`, ascending,
    looped nested in that order: C order over them), a thread per element of out."""
    key = (name, ndim, axes)
    k = _KERNELS.get(key)
    if k is None:
        _, start, update, final = _REDUCE[name]
        outer = iter([f"i{n}" for n in range(ndim - len(axes))])
        loops = {a: "k" if len(axes) == 1 else f"k{m}" for m, a in enumerate(axes)}
        index = [loops[a] if a in loops else next(outer) for a in range(ndim)]
        kept = [i for a, i in enumerate(index) if a not in loops]
        first = ", ".join("0" if a in loops else i for a, i in enumerate(index))
        fname = f"host_{name}_axis_{ndim}_{'_'.join(map(str, axes))}"
        lines = [f"def {fname}(out, x{', n' if name == 'mean' else ''}):",
                 f"    {', '.join(kept)} = gk.tid()",
                 "    acc = " + start.format(first=first)]
        indent = "    "
        for a in axes:
            lines.append(f"{indent}for {loops[a]} in range(x.shape[{a}]):")
            indent += "    "
        lines.append(f"{indent}p = x[{', '.join(index)}]")
        lines += [indent + u for u in update.split("\n")]
        lines.append(f"    out[{', '.join(kept)}] = {final}")
        k = _KERNELS[key] = _source(fname, lines)
    return k


def _axes(axis: Any, ndim: int) -> tuple[int, ...] | None:
    """`axis=` (an integer or a tuple of them, NumPy's negative ones included) as distinct ascending axes of an
    array of `ndim`, or None where NumPy would refuse it or it names no axis."""
    given = axis if isinstance(axis, tuple) else (axis,)
    if not given or any(isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer))
                        or not -ndim <= a < ndim for a in given):
        return None
    axes = tuple(sorted({int(a) % ndim for a in given}))
    return axes if len(axes) == len(given) else None


def axis_reduce(name: str, x: Any, axis: Any, keepdims: bool) -> Any:
    """`name` of `x` along `axis` (an integer, or a tuple of them but not every axis: session 63) as a launch into a
    fresh array, or NotImplemented when it does not fit or needs none (hostcode.py's derived array then)."""
    host, rec = tracker(), active_recorder()
    if host is None or rec is None or not isinstance(x, np.ndarray) or x.dtype not in _FLOATS \
            or not 2 <= x.ndim <= MAX_NDIM or x.size == 0 or keepdims not in (True, False):
        return NotImplemented
    axes = _axes(axis, x.ndim)
    if axes is None or not 1 <= x.ndim - len(axes) <= MAX_LAUNCH_NDIM:
        return NotImplemented  # (every axis: a whole reduction, hostreads.py's read)
    derived, loop = host.origin(x), rec.in_loop
    if derived is not None and not loop:
        return NotImplemented  # its values came from host code the tape does not see
    v = host.plain_view(x) if isinstance(x, TrackedArray) else plain(x)
    if not (loop or host.active(v)):
        return NotImplemented  # no derivative is involved: NumPy computes it
    _read()
    shape = tuple(n for a, n in enumerate(v.shape) if a not in axes)
    dst = np.empty(shape, v.dtype)
    extra = (float(np.prod([v.shape[a] for a in axes])),) if name == "mean" else ()
    launch(_axis_kernel(name, v.ndim, axes), shape, dst, Const(v) if derived is not None else v, *extra)
    if keepdims:
        dst = dst.reshape(tuple(1 if a in axes else n for a, n in enumerate(v.shape)))
    result = dst.view(TrackedArray)
    result._gk_origin = derived
    return result


def _keywords(kwargs: dict) -> bool:
    """The keywords an axis reduction takes: NumPy's defaults but for `axis` and `keepdims`."""
    return all(k in ("axis", "keepdims") or k in ("dtype", "out") and v is None or k == "where" and v is True
               for k, v in kwargs.items())


def _function(name: str, whole: Any) -> Any:
    """SHAPES' handler of `np.sum` (...): the whole-array read first (hostreads.py), else along an axis."""
    def handler(func: Any, args: tuple, kwargs: dict) -> Any:
        got = whole(func, args, kwargs)
        if got is not NotImplemented:
            return got
        if len(args) == 2 and "axis" not in kwargs:  # np.sum(F, 2): the axis given by position
            args, kwargs = args[:1], {**kwargs, "axis": args[1]}
        if len(args) != 1 or "axis" not in kwargs or not _keywords(kwargs):
            return NotImplemented
        return axis_reduce(name, args[0], kwargs["axis"], kwargs.get("keepdims", False))
    return handler


_MOMENT_NAMES = ("a", "axis", "dtype", "out", "ddof", "keepdims")


def _moment(name: str) -> Any:
    """SHAPES' handler of `np.var` and `np.std` along one or several axes of an active array (`u.std(axis=0)` comes
    here through hostcode's `_through`): NumPy's own two passes, each a launch of this module or hostufuncs.py: the
    mean along the axes (kept as a broadcast operand), the squared deviations, their sum over `count - ddof`, and
    `np.sqrt` for std. No derivative is written here. The whole array's (`u.var()`) stays a derived scalar: as an
    Active scalar `float(u.var())`, a port's way to say it wants the constant, would be refused (float() of an
    Active scalar is), where it is accepted today (tests/program/test_ported_loops.py's srad)."""
    def handler(func: Any, args: tuple, kwargs: dict) -> Any:
        given = {**dict(zip(_MOMENT_NAMES, args)), **kwargs}
        x, axis = given.get("a"), given.get("axis")
        ddof, keepdims = given.get("ddof", 0), given.get("keepdims", False)
        if len(args) > len(_MOMENT_NAMES) or set(given) - {*_MOMENT_NAMES, "where"} \
                or not _keywords({k: v for k, v in given.items() if k in ("dtype", "out", "where")}) \
                or isinstance(ddof, (bool, np.bool_)) or not isinstance(ddof, (int, np.integer)) \
                or not isinstance(x, np.ndarray) or _axes(axis, x.ndim) is None:
            return NotImplemented
        count = int(np.prod([x.shape[a] for a in _axes(axis, x.ndim)]))
        if count - ddof <= 0:
            return NotImplemented  # (ddof >= the count: NumPy's warning and its NaN or inf)
        mean = axis_reduce("mean", x, axis, True)  # checks the rest: an active float array of 2-5 axes
        if mean is NotImplemented:
            return NotImplemented
        deviation = x - mean  # launches (hostufuncs.py), the mean broadcast along the axis
        total = axis_reduce("sum", deviation * deviation, axis, keepdims)
        var = total / float(count - ddof)
        return np.sqrt(var) if name == "std" else var
    return handler


_ufunc = TrackedArray.__array_ufunc__
_UFUNCS = {"add": "sum", "maximum": "max", "minimum": "min"}


def _array_ufunc(self: Any, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """`F.sum(axis=0)`, `F.max(1)`: ndarray's methods reduce through the ufunc (`np.add.reduce(F, 0)`)."""
    if method == "reduce" and ufunc.__name__ in _UFUNCS and len(inputs) == 1 and kwargs.get("axis") is not None \
            and _keywords({k: v[0] if k == "out" and isinstance(v, tuple) and len(v) == 1 else v
                           for k, v in kwargs.items()}):
        got = axis_reduce(_UFUNCS[ufunc.__name__], inputs[0], kwargs["axis"], kwargs.get("keepdims", False))
        if got is not NotImplemented:
            return got
    return _ufunc(self, ufunc, method, *inputs, **kwargs)


TrackedArray.__array_ufunc__ = _array_ufunc
for _name, _reduction in (("sum", "sum"), ("mean", "mean"), ("max", "max"), ("amax", "max"), ("min", "min"),
                          ("amin", "min")):
    SHAPES[_name] = _function(_reduction, SHAPES[_name])
SHAPES["var"], SHAPES["std"] = _moment("var"), _moment("std")
