"""Elementwise NumPy on a program's arrays as launches (docs/host-code.md, "Elementwise NumPy"): a ufunc call or
arithmetic operator on arrays and scalars (`u + dt * f`, `np.sqrt(u)`, `np.maximum(u, 0.0)`, `u + row`,
`np.clip(u, lo, hi, out=u)`, `u *= 0.5`, `np.where(mask, a, b)`, `np.multiply(a, b, out=w, where=m)`) is one launch
of a kernel generated in the kernel language (ufunctable.py), so it is recorded, taped and differentiated by the
pipeline as any launch: no derivative is written here. Operands broadcast by NumPy's rules (a broadcast operand is
read at index 0 along its length-1 axes: its derivative is the pipeline's reverse of a shared read, the sum over
those axes); the result dtype is NumPy's (`np.result_type`), integer and boolean arrays constants in it. `out=` and
the in-place operators are launches that write the buffer when no launch has taken it yet; into an array a launch
has taken they stay host writes, refused by the guard as the contract's host-write rule says. Operand views that
overlap without being the same view (`u[1:] - u[:-1]`) are copied first by `gk.copy` (a shadow may not overlap
another one): NumPy's "as if the inputs were read before the output is written".

What does not fit (complex dtypes, a ufunc not in the table, `where=` without `out=`, a reduction, a ufunc method)
goes on to hostcode.py's `__array_ufunc__` / `__array_function__`: a derived array, refused by the launch that takes
it.

Outside a checkpointed loop an operation becomes a launch when an operand is active (has a shadow or tangent) or is
an Active scalar, and one with an operand host code computed from an active array (a derived array or scalar) is
hostcode's; inside a loop's step every one that fits is a launch, a derived operand taken as `gk.Const` and the
result derived, since a recomputed step must make the launches its first forward made, and a step's temporaries get
their shadows (on which both activity and derived-ness depend) only in taped segments (as copies: hostcode.py)."""

from __future__ import annotations

import linecache
from typing import Any

import numpy as np

from ..annotations import Const
from ..errors import ProgramError
from ..ir.types import MAX_LAUNCH_NDIM, MAX_NDIM
from ..recording import active_recorder
from ..runtime.arrays import shares_elements
from ..runtime.launch import launch
from .derived import DerivedScalar, constant, user_frame
from .derived import where as where_of
from .hostcode import _FLOATS, SHAPES, TrackedArray, _names, _read, _view_key, _writable, plain, tracker
from .hostops import copy as gk_copy
from .scalars import ARRAYWISE, ActiveScalar
from .shadows import memory_root
from .ufunctable import OPS, _kernel, pack_kernel, token


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
    return x, origin


def _view(x: Any, host: Any) -> np.ndarray:
    return host.plain_view(x) if isinstance(x, TrackedArray) else plain(x)


def elementwise(name: str, operands: tuple, out: Any, where: Any = True, dtype: Any = None) -> Any:
    """`name` of `operands` into `out` (None: a new array) as a launch, or NotImplemented when it does not fit or
    needs none (hostcode.py takes it then). `where` and `dtype` are the ufunc's keywords."""
    host, rec = tracker(), active_recorder()
    if host is None or rec is None or name not in OPS or OPS[name][0] != len(operands):
        return NotImplemented
    if isinstance(out, tuple):
        if len(out) != 1:
            return NotImplemented
        out = out[0]
    if out is not None and not isinstance(out, np.ndarray) or where is not True and (
            out is None or not isinstance(where, np.ndarray)):
        return NotImplemented  # where= without out= leaves NumPy's uninitialised values: hostcode's
    # inside a checkpointed loop's step whether an operand is derived depends on its shadows, which a step's
    # temporaries have only in taped segments: there a derived operand is a launch too (the same launches in every
    # run of the step), whose result is derived in turn
    loop, derived, consts = rec.in_loop, None, set()
    arrays, values, integers, active, floats = [], [], [], False, False
    for n, x in enumerate(operands):
        cond = name == "where" and n == 0
        if isinstance(x, np.ndarray) and (x.ndim > 0 or any(isinstance(y, np.ndarray) and y.ndim > 0
                                                             for y in operands)):
            if host.origin(x) is not None and not cond:
                if not loop:
                    return NotImplemented  # its values came from host code the tape does not see
                derived = derived or host.origin(x)
                consts.add(n)
            v = _view(x, host)
            if cond:
                v = (v != 0).astype(np.int32)  # a kernel's array holds no booleans
            elif v.dtype.kind in "biu" or v.dtype == np.float16:
                integers.append(n)  # a mask or counts (`u * (u > 0)`): a constant (no launch writes one), in the
                # loop's float dtype below
            elif v.dtype not in _FLOATS:
                return NotImplemented  # complex: no kernel type
            else:
                active, floats = active or host.active(v), True
            arrays.append(n)
            values.append(v)
        else:
            s, origin = _scalar(x[()] if isinstance(x, np.ndarray) else x, host)  # a 0-d array with no array
            if s is None or cond or origin is not None and not loop:
                return NotImplemented
            derived = derived or origin
            active = active or isinstance(s, ActiveScalar)
            floats = floats or isinstance(s, ActiveScalar)
            values.append(s)
    mask = None if where is True else (_view(where, host) != 0).astype(np.int32)  # a constant, as np.where's
    try:  # NumPy's broadcasting of the operands (and of out and the mask, which must not grow out)
        shape = np.broadcast_shapes(*(values[n].shape for n in arrays), *(() if out is None else (out.shape,)),
                                    *(() if mask is None else (mask.shape,)))
    except ValueError:
        return NotImplemented  # NumPy raises its own error
    if not (arrays and floats) or not 1 <= len(shape) <= MAX_NDIM or not np.prod(shape):
        # (constants alone, `np.where(mask, 1.0, 0.0)` or `np.arange(n) * 0.5`, stay NumPy's in a loop's step too)
        return NotImplemented
    given = [x.value if isinstance(x, ActiveScalar) else constant(x) for x in operands[1 if name == "where" else 0:]]
    result = np.result_type(*[plain(x) for x in given])  # NumPy's: weak Python scalars, strong arrays
    try:
        loop_type = result if dtype is None else np.dtype(dtype)  # dtype= names the loop's type: inputs cast to it
    except TypeError:
        return NotImplemented
    if result not in _FLOATS or loop_type not in _FLOATS or not np.can_cast(
            result, loop_type, "same_kind"):
        return NotImplemented  # an integer result, or a cast NumPy's default casting refuses
    cast = "" if dtype is None or loop_type == result else ":" + loop_type.name
    for n in integers:
        values[n] = np.asarray(values[n], loop_type)  # a new array: no derivative flows through integers
    for n, v in enumerate(values):
        if n not in arrays and not isinstance(v, ActiveScalar):
            values[n] = loop_type.type(v)  # NumPy casts a scalar to the loop's type first
    if out is not None:
        if host.origin(out) is not None and not loop:
            return NotImplemented
        dst = _view(out, host)
        if dst.shape != shape or dst.dtype not in _FLOATS or not np.can_cast(loop_type, dst.dtype, "same_kind"):
            return NotImplemented
        guard = getattr(rec, "guard", None)
        if guard is not None and guard.taken(dst):
            return NotImplemented  # NumPy writing into an array the tape depends on: a refused host write (docs)
        active = active or host.active(dst)
    if not (active or loop):
        return NotImplemented  # no derivative is involved: NumPy computes it (a loop's step: always a launch)
    _read()
    dst = np.empty(shape, loop_type) if out is None else dst
    pattern, args, padded = [], [dst], {}
    for n, v in enumerate(values):
        if n not in arrays:
            pattern.append("s")
            args.append(v)
            continue
        v = padded[n] = v.reshape((1,) * (len(shape) - v.ndim) + v.shape)  # NumPy's leading length-1 axes
        if v is dst or _same_view(v, dst):
            pattern.append("o")
            continue
        same = next((m for m in arrays[:arrays.index(n)] if _same_view(padded[m], v)), None)
        if same is not None:
            pattern.append(str(same))
            continue
        if _overlaps(v, [dst] + [values[m] for m in arrays if m != n]):
            copied = np.empty(v.shape, v.dtype)  # NumPy reads every input before it writes: so does the copy
            gk_copy(copied, v)
            v = padded[n] = values[n] = copied  # (the later operands need not copy theirs)
        pattern.append(token(v.shape, shape))
        args.append(Const(v) if n in consts else v)  # derived: the result is refused, not this launch
    if mask is not None:
        mask = mask.reshape((1,) * (len(shape) - mask.ndim) + mask.shape)
        pattern.append("?" + token(mask.shape, shape))
        args.append(mask)
    launch(_kernel(name, len(shape), "".join(pattern) + cast), shape[:MAX_LAUNCH_NDIM], *args)
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
# the keywords that may come with the defaults' values (NumPy's clip passes casting=None); where= and dtype= are
# elementwise's
_DEFAULTS = {"casting": (None, "same_kind"), "order": (None, "K")}


def _array_ufunc(self: Any, ufunc: Any, method: str, *inputs: Any, out: Any = None, **kwargs: Any) -> Any:
    where, dtype = kwargs.get("where", True), kwargs.get("dtype")
    if method == "__call__" and all(k in ("where", "dtype") or k in _DEFAULTS and isinstance(v, (str, type(None)))
                                    and v in _DEFAULTS[k] for k, v in kwargs.items()):
        got = elementwise(ufunc.__name__, inputs, out, where, dtype)
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


_PACKED = 16  # the most scalars one `w[a:b] = [...]` launch takes (one branch per scalar in its kernel)


def _assigned(self: Any, key: Any, value: Any) -> None:
    """`u[1:-1] *= 0.5` is `v = u[1:-1]; v *= 0.5` (a launch, above), then `u[1:-1] = v`: the values onto
    themselves, which changes nothing and is no host write (one would be refused: a launch has taken u).
    `w[0:2] = [c, 1.5]` with Active scalars in the list is a launch that takes them (_pack)."""
    if isinstance(value, np.ndarray) and tracker() is not None:
        target = np.ndarray.__getitem__(plain(self), _view_key(plain(key)))
        if target.base is not None and _same_view(target, plain(value)):
            return
    if isinstance(value, (list, tuple)) and tracker() is not None and any(isinstance(x, ActiveScalar) for x in value):
        _pack(self, key, value)
        return
    if isinstance(value, np.ndarray) and value.size and tracker() is not None and _broadcast(self, key, value):
        return
    _setitem(self, key, value)


def _broadcast(self: Any, key: Any, value: np.ndarray) -> bool:
    """`out[...] = row`, `w[1:] = u.max(axis=1, keepdims=True)`, `out[...] = np.broadcast_to(u, shape)`: NumPy
    broadcasts the value into the view, which no copy launch does (a shadow read through a zero stride would
    alias itself); `np.positive(value, out=view)` is the launch (its reverse sums over the broadcast axes), done
    here where it fits (session 63: refused before, or an internal AliasingError for a broadcast view)."""
    target = np.ndarray.__getitem__(plain(self), _view_key(plain(key)))
    if target.base is None:  # an index array: hostcode's
        return False
    v = plain(value)
    if any(st == 0 and n > 1 for st, n in zip(v.strides, v.shape)):  # a broadcast view: its elements, once each
        value = value[tuple(slice(0, 1) if st == 0 and n > 1 else slice(None) for st, n in zip(v.strides, v.shape))]
    if value.shape == target.shape or value.ndim > target.ndim:
        return False
    try:
        if np.broadcast_shapes(value.shape, target.shape) != target.shape:
            return False
    except ValueError:
        return False  # NumPy's own error, from hostcode's write
    return elementwise("positive", (value,), target) is not NotImplemented


def _pack(self: Any, key: Any, value: Any) -> None:
    """`w[a:b] = [s0, s1, ...]` (a list or tuple with Active scalars, numbers besides) into a 1-D float view of as
    many elements: one launch of ufunctable.pack_kernel, or ProgramError naming the line before anything is
    written (docs/host-code.md, "Elementwise NumPy")."""
    host, whole = tracker(), plain(self)
    target = np.ndarray.__getitem__(whole, _view_key(plain(key)))
    scalars = [_scalar(x, host) for x in value]
    if target.base is None or target.ndim != 1 or target.shape[0] != len(value) or target.dtype not in (
            np.float32, np.float64) or len(value) > _PACKED or any(s is None or o is not None for s, o in scalars):
        frame = user_frame()
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip() if frame is not None else ""
        raise ProgramError(f"an assignment of a list with Active scalars to {_names(frame, [whole])} at "
                           f"{where_of(frame)}{f' (`{line}`)' if line else ''} inside a differentiated program is "
                           f"a launch only for a 1-D float view of as many elements, at most {_PACKED}, and "
                           "numbers or Active scalars in the list; nothing was written",
                           hint="assign the elements one by one (w[k] = c is a fill launch), or write them in a "
                                "kernel that takes the Active scalars")
    _writable(target, host)  # into an array a launch has taken: the guard's refusal, as any host write
    _read()
    launch(pack_kernel(len(value)), len(value), target,
           *(s if isinstance(s, ActiveScalar) else target.dtype.type(s) for s, _ in scalars))


TrackedArray.__array_ufunc__ = _array_ufunc
TrackedArray.__setitem__ = _assigned
SHAPES["where"], SHAPES["clip"] = _where, _clip  # hostcode's __array_function__ asks them first
ARRAYWISE.append(elementwise)  # `c * y` of an Active scalar and a plain array (scalars.py)
