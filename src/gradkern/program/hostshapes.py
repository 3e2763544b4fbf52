"""NumPy's shape and joining operations on a program's arrays as copy launches (docs/host-code.md, "Joins, pads,
rolls and reshaped copies"): `np.concatenate`, `np.stack` and its kin, `np.pad` (constant, edge, wrap, reflect,
symmetric), `np.roll`, `np.tile`, `np.repeat`, `np.resize`, `np.append`, `np.block` and the copies `np.reshape`,
`np.ravel`, `u.flatten()`, `np.ascontiguousarray` and `np.asfortranarray` make. Each result element is an element
of an input or a constant, at a position that does not depend on the values, so the result is a set of copies of
strided views: `out` is NumPy's own result (a fresh array: no aliasing), and each view of it that holds an input's
elements is written again by a `gk.copy` launch from a strided view of that input (an Active scalar's constant
region by `gk.fill`), recorded and differentiated as `u.copy()` is (hostcode.py).

Which elements go where is not derived from NumPy's code: the operation runs once more on integer arrays that hold
each input element's number (`_Inputs`), and the numbers it returns are split into boxes over which the inputs'
byte offsets are affine (`_boxes`), checked exactly. A box whose stride along an axis is zero (an edge pad, a
tile's new axis, a repeat) is copied at its first position and doubled within `out`, since a shadow may not
overlap itself (`_copies`). An
operation that takes more than `MAX_PIECES` copies, an input computed on the host (hostcode.Origin), a dtype a
kernel cannot hold, or a mode that computes values (`reflect_type="odd"`, "linear_ramp", "mean") is left to
hostcode's `__array_function__`: a launch taking the result is refused, as before. So is one taking a pad whose
value host code computed from an active array (`constant_values=u.sum()`), whatever the padded array."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.types import MAX_NDIM
from ..recording import active_recorder
from .derived import DerivedScalar, carry
from .derived import constant as number
from .hostcode import _FLOATS, SHAPES, TrackedArray, _arrays_in, _read, _result, numpy_called, plain, tracker
from .hostops import copy as gk_copy
from .hostops import fill as gk_fill
from .scalars import ActiveScalar
from .shadows import memory_root

MAX_PIECES = 256  # copies one operation may launch (a 3-D edge pad of width 4: 135); past it, refused as before
# the arguments that hold the data, by position and by name; the others (axis, shift, pad_width) pass as they are
_DATA = {"concatenate": ("arrays",), "stack": ("arrays",), "hstack": ("tup",), "vstack": ("tup",),
         "dstack": ("tup",), "column_stack": ("tup",), "row_stack": ("tup",), "block": ("arrays",),
         "append": ("arr", "values"), "pad": ("array",), "roll": ("a",), "tile": ("A",), "repeat": ("a",),
         "resize": ("a",), "reshape": ("a",), "ravel": ("a",), "ascontiguousarray": ("a",),
         "asfortranarray": ("a",), "array": ("object",)}  # np.array(u) of a user's line: hostcalls.py
_PADS = ("constant", "edge", "wrap", "reflect", "symmetric")  # the modes whose every element is copied
_CONSTANT = -1  # a result element that is a constant (NumPy wrote it; no launch)


class _Refused(Exception):
    """The operation is not a set of copies this module launches: hostcode's default path takes it."""


class _Inputs:
    """The inputs found in an operation's data arguments: the float arrays copies read (`sources`, numbered
    element by element in one sequence) and the Active scalars a constant pad takes (`scalars`, by code).
    `numbering`: make the index images (only once NumPy's result is known to be a copy)."""

    def __init__(self, host: Any, numbering: bool):
        self.host, self.sources, self.scalars, self.count, self.numbering = host, [], {}, 0, numbering
        self.derived = None  # the origin of a scalar host code computed from an active array, if one is given

    def walk(self, x: Any) -> tuple[Any, Any]:
        """(x as NumPy takes it, x's index image)."""
        if isinstance(x, np.ndarray):
            return self._array(x)
        if isinstance(x, (list, tuple)):
            pairs = [self.walk(v) for v in x]
            return type(x)(p[0] for p in pairs), type(x)(p[1] for p in pairs)
        return self.constant(x)

    def constant(self, x: Any) -> tuple[Any, Any]:
        if isinstance(x, ActiveScalar):
            code = _CONSTANT - 1 - len(self.scalars)
            self.scalars[code] = x
            return x.value, code
        if isinstance(x, DerivedScalar) and x._gk_origin is not None and x._gk_origin.host is self.host:
            self.derived = x._gk_origin  # a pad value computed on the host from an active array: the result too
            return number(x), _CONSTANT
        if isinstance(x, (list, tuple)):
            pairs = [self.constant(v) for v in x]
            return type(x)(p[0] for p in pairs), type(x)(p[1] for p in pairs)
        if isinstance(x, np.ndarray):
            return self._array(x)
        return x, _CONSTANT

    def _array(self, x: np.ndarray) -> tuple[Any, Any]:
        p = plain(x)
        if p.dtype.kind not in "fc" or p.size == 0:
            return p, np.full(p.shape, _CONSTANT, np.int64)
        if p.dtype not in _FLOATS or p.ndim == 0 or self.host.origin(p) is not None \
                or getattr(x, "_gk_origin", None) is not None:
            raise _Refused  # computed on the host from an active array, or not what a kernel holds
        first = self.count
        self.count += p.size
        self.sources.append(p)
        return p, np.arange(first, self.count, dtype=np.int64).reshape(p.shape) if self.numbering else None


def _walk_call(name: str, inputs: _Inputs, args: tuple, kwargs: dict) -> tuple:
    """(args, kwargs) as NumPy takes them and their index images."""
    names = _DATA[name]
    real, index = list(args), list(args)
    for k in range(min(len(names), len(args))):
        real[k], index[k] = inputs.walk(args[k])
    real_kw, index_kw = dict(kwargs), {}
    for key, v in kwargs.items():
        if key in names:
            real_kw[key], index_kw[key] = inputs.walk(v)
        elif key == "constant_values":
            real_kw[key], index_kw[key] = inputs.constant(v)
        elif key not in ("dtype", "casting"):  # the index image keeps NumPy's integers
            index_kw[key] = v
    if name == "pad":
        mode = args[2] if len(args) > 2 else kwargs.get("mode", "constant")
        if not isinstance(mode, str) or mode not in _PADS or kwargs.get("reflect_type", "even") != "even" \
                or set(kwargs) - {"mode", "constant_values", "reflect_type", "array", "pad_width"}:
            raise _Refused  # a pad that computes values (odd reflections, ramps, statistics) or leaves them unset
        if mode == "constant":  # not NumPy's 0, which numbers an input's first element
            index_kw.setdefault("constant_values", _CONSTANT)
    return tuple(real), real_kw, tuple(index), index_kw


def shaped(func: Any, args: tuple, kwargs: dict) -> Any:
    """`func(*args, **kwargs)` for one of the operations of this module, called from a program's host code with a
    TrackedArray among its data: a copy made by launches where it is one, else NotImplemented (hostcode's
    default path)."""
    host = tracker()
    name = func.__name__
    if host is None or active_recorder() is None or kwargs.get("out") is not None or name not in _DATA:
        return NotImplemented
    try:
        inputs = _Inputs(host, False)
        real, real_kw, _, _ = _walk_call(name, inputs, args, kwargs)
    except _Refused:
        return NotImplemented
    r = func(*real, **real_kw)
    if inputs.derived is not None:  # `np.pad(w, 1, constant_values=u.sum())`: refused at a launch, w inactive too
        return carry(r, inputs.derived)
    arrays = _arrays_in(args) + _arrays_in(kwargs)
    op = f"np.{name}"
    if not isinstance(r, np.ndarray) or r.dtype not in _FLOATS or r.size == 0 or r.ndim == 0 \
            or any(memory_root(r) is memory_root(a) for a in arrays):
        return _result(r, arrays, op, host)  # a view, an integer image, nothing to copy: as before
    inputs = _Inputs(host, True)
    _, _, index, index_kw = _walk_call(name, inputs, args, kwargs)
    try:
        if not inputs.sources:
            raise _Refused  # no float array to copy from (a TrackedArray of no elements)
        pieces = _pieces(r, np.asarray(func(*index, **index_kw)), inputs, name, real, real_kw)
    except _Refused:
        return _result(r, arrays, op, host)  # not a set of copies this module launches: refused at a launch
    for kind, dst, src in pieces:
        (gk_copy if kind == "copy" else gk_fill)(dst, src)
    return r.view(TrackedArray)


def contiguous(func: Any, a: Any, *args: Any, **kwargs: Any) -> Any:
    """`np.ascontiguousarray(a)` / `np.asfortranarray(a)` of a TrackedArray, which NumPy does not dispatch
    (hostcalls.py calls this): a view as before, a copy by a launch."""
    _read()
    got = shaped(func, (a, *args), kwargs)
    if got is NotImplemented:
        return _result(func(plain(a), *args, **kwargs), [a], f"np.{func.__name__}", tracker())
    return got


# -- where the elements go ----------------------------------------------------------------------------------------


def _pieces(r: np.ndarray, numbers: np.ndarray, inputs: _Inputs, name: str, real: tuple, real_kw: dict) -> list:
    """The launches that write `r` again: ("copy", view of r, strided view of a source) and ("fill", view of r,
    Active scalar), from the element numbers NumPy's operation put where (`numbers`, r's shape)."""
    if numbers.shape != r.shape or numbers.dtype.kind != "i":
        raise _Refused
    out, order = _viewed(r, name, real, real_kw)
    numbers = numbers.reshape(out.shape, order=order)
    sources = inputs.sources
    sizes = np.array([s.size for s in sources])
    owner = np.repeat(np.arange(len(sources)), sizes)
    offsets = np.concatenate([_offsets(s) for s in sources])
    known = numbers >= 0
    which = np.where(known, owner[np.where(known, numbers, 0)], numbers)
    byte = np.where(known, offsets[np.where(known, numbers, 0)], 0)
    pieces: list = []
    for box, sid in _boxes(which, byte):
        window = tuple(slice(lo, hi) for lo, hi in box)
        if sid < 0:
            if sid in inputs.scalars:
                pieces.append(("fill", _squeezed(out, box, {}), inputs.scalars[sid]))
        else:
            pieces += _copies(out, box, byte[window], sources[sid])
        if len(pieces) > MAX_PIECES:
            raise _Refused
    return pieces


def _viewed(r: np.ndarray, name: str, real: tuple, real_kw: dict) -> tuple[np.ndarray, str]:
    """`r` as the view whose boxes are fewest: a reshaped copy in its source's shape (one copy), a repeat with an
    axis of its own for the repeats (one copy per repeat), else `r`."""
    shape = None
    if name in ("reshape", "ravel") and isinstance(real[0], np.ndarray):
        shape = real[0].shape
    elif name == "repeat" and np.ndim(real[1] if len(real) > 1 else real_kw.get("repeats")) == 0:
        repeats = int(real[1] if len(real) > 1 else real_kw["repeats"])
        axis = real[2] if len(real) > 2 else real_kw.get("axis")
        if axis is None:
            shape = (r.size // max(repeats, 1), repeats)
        else:
            axis = axis % r.ndim
            shape = r.shape[:axis] + (r.shape[axis] // max(repeats, 1), repeats) + r.shape[axis + 1:]
    if shape is None or int(np.prod(shape)) != r.size:
        return r, "C"
    for order in ("C", "F"):  # the order in which `r`'s memory holds it in that shape
        v = r.reshape(shape, order=order)
        if memory_root(v) is memory_root(r):
            return v, order
    return r, "C"


def _offsets(a: np.ndarray) -> np.ndarray:
    """The byte offset of each of `a`'s elements (C order) from its memory's first byte."""
    start = a.__array_interface__["data"][0] - memory_root(a).__array_interface__["data"][0]
    grid = np.zeros(a.shape, np.int64) + start
    for k, (n, s) in enumerate(zip(a.shape, a.strides)):
        grid += (np.arange(n, dtype=np.int64) * s).reshape((n,) + (1,) * (a.ndim - k - 1))
    return grid.reshape(-1)


def _boxes(which: np.ndarray, byte: np.ndarray) -> list:
    """Boxes of `which`'s shape, each of one source (or one constant) whose byte offsets are affine: the box is
    split where the source changes, then where an offset's step along an axis changes (an exact test), so every
    box is a strided view."""
    todo, done = [tuple((0, n) for n in which.shape)], []
    while todo:
        box = todo.pop()
        window = tuple(slice(lo, hi) for lo, hi in box)
        ids = which[window]
        split = _change(ids)
        if split is None and ids.flat[0] >= 0:
            split = _bend(byte[window])
        if split is None:
            done.append((box, int(ids.flat[0])))
            if len(done) > MAX_PIECES:
                raise _Refused
            continue
        k, p = split
        lo, hi = box[k]
        todo += [_with(box, k, lo + p, hi), _with(box, k, lo, lo + p)]
    return done[::-1]


def _change(ids: np.ndarray) -> tuple | None:
    """(axis, position) of the first change of source in a box of source numbers; None when there is none."""
    for k in range(ids.ndim):
        if ids.shape[k] > 1:
            changes = np.diff(ids, axis=k) != 0
            if changes.any():
                return k, _first(changes, k) + 1
    return None


def _first(marks: np.ndarray, k: int) -> int:
    """The first position along axis k where `marks` holds anywhere."""
    return int(np.nonzero(np.moveaxis(marks, k, 0).reshape(marks.shape[k], -1).any(axis=1))[0][0])


def _bend(byte: np.ndarray) -> tuple | None:
    """(axis, position) where a box's byte offsets stop being affine (their step along some axis changes, first
    along some axis); None when they are affine."""
    for k in range(byte.ndim):
        if byte.shape[k] < 2:
            continue
        d = np.diff(byte, axis=k)
        if (d == d.flat[0]).all():
            continue
        for m in range(byte.ndim):
            if d.shape[m] < 2:
                continue
            changes = np.diff(d, axis=m) != 0
            if changes.any():
                q = _first(changes, m)
                if m != k:
                    return m, q + 1
                # the element where the step changes ends a run of nonzero steps (one copy) rather than a run of
                # zero steps (doubled copies): an edge pad's [0, 0, 1, 2] is [0] and [0, 1, 2], not [0, 0] and [1, 2]
                return m, q + (1 if (d.take(q, axis=k) == 0).all() else 2)
    return None


def _copies(out: np.ndarray, box: tuple, byte: np.ndarray, src: np.ndarray) -> list:
    """One box of one source: a copy from a strided view of its memory where no step is zero; along an axis
    whose step is zero (an edge pad, a tile's new axis, a repeat) the copy is at the first position, then doubled
    within `out` (positions [0, m) copied to [m, 2m)): a shadow may not overlap itself, so a source view cannot
    repeat an element."""
    steps = [int(byte.take([1], axis=k).flat[0] - byte.flat[0]) if byte.shape[k] > 1 else 0
             for k in range(byte.ndim)]
    kept = [k for k in range(byte.ndim) if steps[k] != 0]
    distinct = byte[tuple(slice(None) if k in kept else 0 for k in range(byte.ndim))]
    if np.unique(distinct).size != distinct.size:
        raise _Refused  # two result elements of one copy read one element (no operation here makes this)
    repeated = [k for k in range(byte.ndim) if steps[k] == 0 and byte.shape[k] > 1]
    dst = _squeezed(out, box, dict.fromkeys(repeated, 0))
    try:
        view = np.ndarray(dst.shape, src.dtype, buffer=memory_root(src), offset=int(byte.flat[0]),
                          strides=[steps[k] for k in kept] or [src.itemsize])
    except (TypeError, ValueError):  # memory that is not one buffer (an as_strided view's): refused as before
        raise _Refused from None
    pieces = [("copy", dst, view)]
    for n, k in enumerate(repeated):
        fixed = dict.fromkeys(repeated[n + 1:], 0)  # the axes not doubled yet: their first position
        lo, hi = box[k]
        m = 1
        while m < hi - lo:
            step = min(m, hi - lo - m)
            pieces.append(("copy", _squeezed(out, _with(box, k, lo + m, lo + m + step), fixed),
                           _squeezed(out, _with(box, k, lo, lo + step), fixed)))
            m += step
    return pieces


def _with(box: tuple, k: int, lo: int, hi: int) -> tuple:
    return box[:k] + ((lo, hi),) + box[k + 1:]


def _squeezed(out: np.ndarray, box: tuple, fixed: dict) -> np.ndarray:
    """The view of `out` over `box` with its axes of one element, and those `fixed` gives a position in (relative
    to the box), indexed away; one element as a 1-element view. 1-5 axes or _Refused."""
    keep = [k for k, (lo, hi) in enumerate(box) if k not in fixed and hi - lo > 1]
    index = [slice(lo, hi) if k in keep else lo + fixed.get(k, 0) for k, (lo, hi) in enumerate(box)]
    if not keep:
        index[-1] = slice(index[-1], index[-1] + 1)
    dst = out[tuple(index)]
    if not 1 <= dst.ndim <= MAX_NDIM:
        raise _Refused
    return dst


for _name in _DATA:
    SHAPES[_name] = shaped


# -- the ndarray methods that copy: reshape, ravel and flatten of a non-contiguous view, repeat ---------------------


def _reshape(self: TrackedArray, *args: Any, **kwargs: Any) -> Any:
    r = np.ndarray.reshape(self, *args, **kwargs)
    if tracker() is None or memory_root(r) is memory_root(self):
        return r  # a view, as before
    shape = kwargs.pop("shape", args[0] if len(args) == 1 else args)
    return np.reshape(self, shape, **kwargs)  # a copy: launches (shaped)


def _ravel(self: TrackedArray, order: str = "C") -> Any:
    _read()
    r = np.ndarray.ravel(self, order)
    if tracker() is None or memory_root(r) is memory_root(self):
        return r
    return np.ravel(self, order)


def _flatten(self: TrackedArray, order: str = "C") -> Any:
    _read()
    if tracker() is None:
        return np.ndarray.flatten(self, order)
    if numpy_called():  # np.unique's `ar.flatten()`, then sorted in place: NumPy's copy, derived
        return self.numpy_copy("ndarray.flatten", order)
    r = np.ravel(self, order)
    return r.copy() if memory_root(r) is memory_root(self) else r  # always a copy: u.copy()'s launch


def _repeat(self: TrackedArray, repeats: Any, axis: Any = None) -> Any:
    if tracker() is None:
        return np.ndarray.repeat(self, repeats, axis)
    return np.repeat(self, repeats, axis)


TrackedArray.reshape = _reshape
TrackedArray.ravel = _ravel
TrackedArray.flatten = _flatten
TrackedArray.repeat = _repeat
