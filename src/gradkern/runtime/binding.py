"""Argument binding and validation for a launch (docs/errors.md).

Everything here only looks at the arguments: no buffer is touched, so a failed
check leaves every array exactly as it was. The result, `Binding`, carries the
type signature (the specialisation key) and the converted scalar values.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..backends import NAMES as BACKENDS
from ..backends import backend as backend_object
from ..backends import default_name
from ..errors import AliasingError, LaunchError
from ..ir import nodes as ir
from ..ir.infer import default_float
from ..ir.types import ARRAY_DTYPES, BOOL, I32, I64, MAX_LAUNCH_NDIM, MAX_NDIM, SCALARS, Array, Scalar, Type
from ..recording import active_recorder
from .arrays import (
    INSTALL_HINT,
    byte_bounds,
    cupy_module,
    geometry,
    held_memory,
    is_array,
    is_cupy_array,
    is_device_array,
    misaligned_on_device,
    outside_its_memory,
    overlap_reason,
    overlapping_elements,
    shares_elements,
)


@dataclass(frozen=True)
class Binding:
    """A validated launch: launch extents, per-parameter types and values."""

    dim: tuple[int, ...]
    types: tuple[Type, ...]
    values: tuple[Any, ...]
    backend: str
    names: tuple[str, ...] = ()
    aliases: tuple[tuple[str, str], ...] = ()  # (parameter, the earlier parameter it aliases exactly)
    strided: tuple[str, ...] = ()  # CUDA: array parameters that are not C-contiguous

    @property
    def key(self) -> tuple:
        return (self.backend, len(self.dim), self.types, self.aliases, self.strided)

    def type_map(self, k: ir.Kernel) -> dict[str, Type]:
        return {p.name: t for p, t in zip(k.params, self.types)}

    @property
    def kernel_values(self) -> tuple[Any, ...]:
        """The values of the specialised kernel's parameters (merged aliases dropped)."""
        if not self.aliases:
            return self.values
        merged = {m for m, _ in self.aliases}
        return tuple(v for n, v in zip(self.names, self.values) if n not in merged)


MAX_THREADS = 2**63 - 1  # thread indices and the launch's thread count are int64 on both backends


def _read_only_hint() -> str:
    """What to do about a read-only array a kernel writes. A recording program locks the arrays its tape depends
    on until it returns (docs/programs.md#when-a-program-raises): a gk.autodiff nested in it meets them locked."""
    if active_recorder() is not None:
        return ("pass a writable array; if it was writable when the program began, the recording program keeps "
                "the arrays its launches took read-only until it returns, so a gk.autodiff called inside it cannot "
                "write them: give that call arrays of its own")
    return "pass a writable array (x.copy() is one)"



def normalize_dim(dim: Any, kernel: ir.Kernel) -> tuple[int, ...]:
    if type(dim) is int and 0 <= dim <= MAX_THREADS and kernel.tid_ndim in (0, 1):  # the common case
        return (dim,)
    items = dim if isinstance(dim, (tuple, list)) else (dim,)
    ok = 1 <= len(items) <= 3 and all(
        isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_)) and n >= 0 for n in items)
    if not ok:
        raise LaunchError(f"dim must be a non-negative int or a tuple of 1 to 3 non-negative ints, got {dim!r}",
                          hint="e.g. gk.launch(kernel, n, ...) or gk.launch(kernel, (nx, ny), ...)")
    out = tuple(int(n) for n in items)
    total = 1
    for n in out:
        total *= n
    if total > MAX_THREADS or max(out) > MAX_THREADS:
        raise LaunchError(f"dim={dim!r} asks for {total} threads; a launch runs at most 2**63 - 1 "
                          "(thread indices are int64)", hint="launch over the extent of your arrays")
    if kernel.tid_ndim and len(out) != kernel.tid_ndim:
        n = kernel.tid_ndim
        raise LaunchError(
            f"kernel '{kernel.name}' unpacks gk.tid() into {n} ind{'ex' if n == 1 else 'ices'}, "
            f"so dim needs {n} entr{'y' if n == 1 else 'ies'}; got dim={dim!r}")
    return out


_BY_DTYPE = {np.dtype(name): t for name, t in SCALARS.items()}


def _scalar_type(x: Any) -> Scalar | None:
    """The strong type of a NumPy scalar, or None for a Python scalar (typed later)."""
    if isinstance(x, np.generic):
        return _BY_DTYPE.get(x.dtype)
    return None


def select_backend(names: list[str], args: tuple, backend: str | None, inspect_only: bool = False) -> str:
    """The backend the arrays' device implies (CuPy → 'cuda', NumPy → the default, 'cpu' unless
    $GRADKERN_BACKEND names another), checked against an explicit `backend`. Generating CUDA C (inspect)
    needs no GPU."""
    gpu = [n for n, a in zip(names, args) if is_device_array(a)]
    cpu = [n for n, a in zip(names, args) if isinstance(a, np.ndarray)]
    if gpu and cpu:
        raise LaunchError(f"arguments mix GPU arrays ({', '.join(gpu)}) and NumPy arrays ({', '.join(cpu)})",
                          hint="move them all to one device (cupy.asarray or .get())")
    if backend is not None and backend not in BACKENDS:
        raise LaunchError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if gpu:
        other = [n for n, a in zip(names, args) if is_device_array(a) and not is_cupy_array(a)]
        if other:
            cupy_module(f"argument '{other[0]}' is a GPU array")
            raise LaunchError(f"argument '{other[0]}' is a GPU array but not a CuPy array",
                              hint=f"wrap it without copying: cupy.asarray({other[0]})")
        if backend not in (None, "cuda"):
            raise LaunchError(f"backend={backend!r} runs on the host but CuPy arrays were passed ({', '.join(gpu)})",
                              hint="pass NumPy arrays, or leave backend unset")
        cupy_module(f"CuPy arrays were passed ({', '.join(gpu)})")
        return "cuda"
    if backend == "cuda" and not inspect_only:
        cupy_module("backend='cuda' was asked for")
        if cpu:
            raise LaunchError(f"backend='cuda' needs CuPy arrays; NumPy arrays were passed ({', '.join(cpu)})",
                              hint="move them to the GPU with cupy.asarray")
    return backend or default_name()


def check_count(kernel: ir.Kernel, args: tuple) -> None:
    """One argument per parameter, or a LaunchError naming what is missing."""
    params = kernel.params
    if len(args) != len(params):
        names = ", ".join(p.name for p in params)
        missing = [p.name for p in params[len(args):]]
        detail = f"missing {', '.join(repr(m) for m in missing)}" if missing else f"{len(args) - len(params)} too many"
        raise LaunchError(f"kernel '{kernel.name}' takes {len(params)} argument{'s' * (len(params) != 1)} "
                          f"({names}), got {len(args)}: {detail}")


def check_keywords(verb: str, f: Any, keywords: dict, takes: str) -> None:
    """No keyword but the verb's own (`takes`): a kernel's arguments go by position. A LaunchError naming the
    first stray keyword (was: Python's TypeError)."""
    if not keywords:
        return
    word = next(iter(keywords))
    params = [p.name for p in getattr(getattr(f, "ir", None), "params", ())]
    if word in params:
        raise LaunchError(f"{verb} got '{word}' as a keyword; a kernel's arguments are passed by position",
                          hint=f"{verb}({getattr(f, 'name', 'kernel')}, ..., {', '.join(params)})")
    raise LaunchError(f"{verb} takes no keyword '{word}'; its keywords are {takes}")


def default_dim(kernel: ir.Kernel, args: tuple) -> tuple[int, ...]:
    """The launch extent when none is given (docs/getting-started.md): the shape of the first
    array argument, which must then have 1 to 3 dimensions (a launch's axes)."""
    check_count(kernel, args)
    for p, a in zip(kernel.params, args):
        if is_array(a):
            if not 1 <= a.ndim <= MAX_NDIM:
                raise LaunchError(f"argument '{p.name}' has {a.ndim} dimensions; kernels take 1-D to "
                                  f"{MAX_NDIM}-D arrays (dim defaults to the shape of '{p.name}', the first array "
                                  "argument)", hint=_ndim_hint(p.name, a.ndim) + ", or give dim")
            n = kernel.tid_ndim
            if a.ndim > MAX_LAUNCH_NDIM:
                axes = n or MAX_LAUNCH_NDIM
                raise LaunchError(f"dim defaults to the shape {tuple(a.shape)} of '{p.name}', the first array "
                                  f"argument, but a launch has 1 to {MAX_LAUNCH_NDIM} axes",
                                  hint=f"give dim, e.g. dim={p.name}.shape[:{axes}]")
            if n and a.ndim != n:
                raise LaunchError(f"kernel '{kernel.name}' unpacks gk.tid() into {n} ind{'ex' if n == 1 else 'ices'}, "
                                  f"but dim defaults to the shape {tuple(a.shape)} of '{p.name}', the first array "
                                  f"argument", hint=f"give dim with {n} entr{'y' if n == 1 else 'ies'}")
            return tuple(a.shape)
    raise LaunchError("dim is needed: no array argument to take it from")


def numpy_made(a: Any) -> bool:
    """An array NumPy allocated, or a view NumPy sliced from one: inside its
    memory and, if C-contiguous, free of overlapping elements (checked first,
    on every launch)."""
    if type(a) is not np.ndarray:
        return False
    base = a.base
    return base is None or (type(base) is np.ndarray and base.flags.owndata) or held_memory(base) is not None


def _check_array(kernel: ir.Kernel, p: ir.Param, a: Any) -> None:
    """What no dtype or ndim says about an array: a mask the kernel would
    ignore, memory outside the array's own, elements that overlap where the
    kernel writes."""
    if isinstance(a, np.ma.MaskedArray):
        raise LaunchError(f"argument '{p.name}' is a masked array; kernels read and write every element and "
                          "would ignore its mask", hint=f"pass {p.name}.filled(value) or np.asarray({p.name})")
    if outside_its_memory(a):
        raise LaunchError(f"argument '{p.name}' (shape {tuple(a.shape)}, strides {tuple(a.strides)}) reaches outside "
                          "the memory it is a view of", hint="check the shape and strides given to as_strided")
    if misaligned_on_device(a):
        raise LaunchError(f"argument '{p.name}' starts at a device address that is not a multiple of its item size "
                          f"{a.itemsize}: the GPU cannot load it", hint=f"pass {p.name}.copy()")
    if p.written and overlapping_elements(a):
        raise AliasingError(f"argument '{p.name}' is written by kernel '{kernel.name}' but its elements overlap "
                            f"in memory ({overlap_reason(a)}): threads writing different elements would race",
                            hint=f"pass {p.name}.copy()")


def bind(kernel: ir.Kernel, dim: Any, args: tuple, backend: str | None = None, inspect_only: bool = False
         ) -> Binding:
    """Validate `args` against `kernel`'s parameters; raise LaunchError (or a
    subclass) naming the argument on the first problem. Every check, in order:
    a call whose signature was prepared before is not bound again
    (runtime/call.py, docs/prepared-call.md)."""
    return _bind(kernel, dim, args, backend, inspect_only)


def template_of(b: Binding) -> tuple:
    """What a prepared call keeps of a binding: everything but its values (it must not keep the caller's
    arrays alive), and how to convert each scalar."""
    return replace(b, values=()), tuple(None if isinstance(t, Array) else converter(name, t)
                                        for name, t in zip(b.names, b.types))


# A Python float past float32's range rounds to inf (np.float32 warns, RuntimeWarning): a float32 parameter
# refuses it, naming the argument, as an int past int64 is refused (docs/errors.md#hostile-inputs). Values at
# or past 2**128 - 2**103 (FLT_MAX and half its ulp) round to inf; NaN and the infinities pass as they are.
FLOAT32_EDGE = 2.0**128 - 2.0**103
_FLOAT32_CONVERTERS: dict[str, Any] = {}


def converter(name: str, t: Scalar) -> Any:
    """How a scalar argument `name` of type `t` is passed: NumPy's type, checked for float32."""
    if t.name != "float32":
        return t.numpy
    convert = _FLOAT32_CONVERTERS.get(name)
    if convert is None:
        def convert(a, name=name):
            if type(a) is not float or -FLOAT32_EDGE < a < FLOAT32_EDGE or a != a or a in (np.inf, -np.inf):
                return np.float32(a)
            raise LaunchError(f"argument '{name}' = {a!r} does not fit in float32 (its magnitude is at most "
                              f"{float(np.finfo(np.float32).max)!r}): the kernel's float32 parameter would get inf",
                              hint=f"pass a smaller value, or float64 arrays (and np.float64({name}))")
        _FLOAT32_CONVERTERS[name] = convert
    return convert


# np.may_share_memory without its __array_function__ dispatch (the keys test plain NumPy arrays only)
may_share_memory = getattr(np.may_share_memory, "_implementation", np.may_share_memory)
KEYED_SCALARS = frozenset({float, int, bool, np.float32, np.float64, np.int32, np.int64, np.bool_})


OWNDATA = 0x0004  # NPY_ARRAY_OWNDATA, a bit of ndarray.flags.num


def memory_owner(a: np.ndarray, flags: int) -> Any:
    """The array whose allocation holds the memory of `a` (a `numpy_made` array with these flags.num): `a`
    where it owns its data, its base where NumPy sliced it from one that does; None where unknown (no base,
    but not its own data either: memory a C extension wrapped; a signature then takes the full path)."""
    base = a.base
    if base is not None:
        return held_memory(base) or base
    return a if flags & OWNDATA else None


def disjoint(arrays: list, owners: list) -> bool:
    """Whether no two of these `numpy_made` arrays may share memory, given their `memory_owner`s (none
    None). Arrays of different allocations never do (a view NumPy sliced lies inside its base's memory:
    `numpy_made`), so where every owner differs, none do; otherwise np.may_share_memory decides each pair."""
    if len(set(map(id, owners))) == len(owners):
        return True
    for n, a in enumerate(arrays):
        for b in arrays[n + 1:]:
            if may_share_memory(a, b):
                return False
    return True


def _bind(kernel: ir.Kernel, dim: Any, args: tuple, backend: str | None, inspect_only: bool) -> Binding:
    """The full binding: every check, in order."""
    params = kernel.params
    check_count(kernel, args)
    launch_dim = normalize_dim(dim, kernel)

    backend = select_backend([p.name for p in params], args, backend, inspect_only)
    if backend == "cuda" and not inspect_only:
        _check_device(params, args)

    types: list[Type | None] = []
    strided = []
    strides_in_key, aligned_only = backend_object(backend).strides_in_key, backend_object(backend).aligned_only
    for p, a in zip(params, args):
        if (type(a) is float or type(a) is int) and not p.is_array:  # the common case first
            types.append(None if type(a) is float else _python_int(p, a))
        elif is_array(a):
            if not p.is_array and p.used:
                raise LaunchError(f"argument '{p.name}' is used as a scalar in kernel '{kernel.name}', "
                                  f"but an array of shape {a.shape} was passed",
                                  hint="pass a number, or index the array in the kernel")
            t = ARRAY_DTYPES.get(a.dtype)
            if t is None:
                raise LaunchError(f"argument '{p.name}' has dtype {a.dtype}; kernels take arrays of "
                                  "float32, float64, int32 or int64", hint=dtype_hint(p.name, a.dtype))
            if not 1 <= a.ndim <= MAX_NDIM:
                raise LaunchError(f"argument '{p.name}' has {a.ndim} dimensions; kernels take 1-D to "
                                  f"{MAX_NDIM}-D arrays", hint=_ndim_hint(p.name, a.ndim))
            flags = a.flags
            if p.written and isinstance(a, np.ndarray) and not flags.writeable:
                raise LaunchError(f"argument '{p.name}' is written by kernel '{kernel.name}' "
                                  "but the array is read-only", hint=_read_only_hint())
            if (p.written and not flags.c_contiguous) or not numpy_made(a):
                _check_array(kernel, p, a)
            if aligned_only and isinstance(a, np.ndarray) and not flags.aligned:  # CuPy's flags have no 'aligned'
                raise LaunchError(f"argument '{p.name}' is not aligned: its {a.dtype} elements start at addresses that "
                                  f"are not multiples of {a.itemsize} (e.g. np.frombuffer at an odd offset); backend "
                                  f"'{backend}' runs C++ that loads whole aligned elements",
                                  hint=f"pass {p.name}.copy(), which is aligned, or launch on the CPU backend")
            if not flags.c_contiguous:
                if strides_in_key:
                    if any(s % a.itemsize for s in a.strides):
                        raise LaunchError(f"argument '{p.name}' has strides {a.strides} that are not multiples of "
                                          f"its item size {a.itemsize}", hint=f"pass {p.name}.copy()")
                    strided.append(p.name)
            types.append(_array_type(t, a.ndim))
        elif p.is_array:
            raise LaunchError(f"argument '{p.name}' is indexed in kernel '{kernel.name}', so it must be a NumPy array "
                              f"(or a CuPy array); got {type(a).__name__}", hint=f"pass np.asarray({p.name})")
        elif isinstance(a, (bool, np.bool_)):
            types.append(BOOL)
        elif isinstance(a, np.generic) and _scalar_type(a) is not None:
            types.append(_scalar_type(a))
        elif isinstance(a, np.timedelta64):  # an np.integer subclass, but a duration with a unit: no number
            raise LaunchError(f"argument '{p.name}' must be a number (int, float, bool or NumPy scalar); got "
                              f"timedelta64 {a!r}", hint=f"pass a number of its unit: {p.name}.astype(np.int64)")
        elif isinstance(a, numbers.Integral):
            types.append(_python_int(p, a))
        elif isinstance(a, numbers.Real):
            types.append(None)  # a Python float: the kernel's default float, known below
        else:
            raise LaunchError(f"argument '{p.name}' must be a number (int, float, bool or NumPy scalar); "
                              f"got {type(a).__name__}")
    if None in types:  # Python floats take the kernel's default float
        fdefault = default_float({p.name: t for p, t in zip(params, types) if t is not None})
        types = [fdefault if t is None else t for t in types]

    values = []
    for p, a, t in zip(params, args, types):
        values.append(a if isinstance(t, Array) else converter(p.name, t)(a))
    aliases = _aliases(kernel, args)
    return Binding(launch_dim, tuple(types), tuple(values), backend, tuple(p.name for p in params), aliases,
                   tuple(strided))


_ARRAY_TYPES: dict[tuple, Array] = {}


def _ndim_hint(name: str, ndim: int) -> str:
    """What to pass instead of an array with no dimensions or more than a kernel takes (docs/language.md)."""
    if ndim == 0:
        return f"pass a 1-D array: {name}.reshape(1)"
    return (f"merge trailing axes: {name}.reshape({', '.join(f'{name}.shape[{a}]' for a in range(MAX_NDIM - 1))}, -1),"
            " and index the merged axis by a flattened index")


def _array_type(t: Scalar, ndim: int) -> Array:
    """Interned: equal signatures are then the same objects, cheap to hash and compare."""
    key = (t.name, ndim)
    at = _ARRAY_TYPES.get(key)
    if at is None:
        at = _ARRAY_TYPES[key] = Array(t, ndim)
    return at


def dtype_hint(name: str, dtype: np.dtype) -> str:
    native = dtype.newbyteorder("=") if dtype.byteorder in "<>" else None
    if native is not None and native in ARRAY_DTYPES:
        return f"{name} has non-native byte order ({dtype.str}): convert with {name}.astype(np.{native.name})"
    return f"convert with {name}.astype(np.float64)"


def _python_int(p: ir.Param, a: Any) -> Scalar:
    if not -2**63 <= int(a) < 2**63:
        raise LaunchError(f"argument '{p.name}' = {a} does not fit in int64")
    return I64


def current_device() -> int:
    """The current CUDA device's number, as CuPy reads it."""
    return cupy_module("CuPy arrays were passed").cuda.runtime.getDevice()


def _check_device(params, args) -> None:
    """The one GPU all CuPy arguments live on, which must be the current device."""
    current = current_device()
    for p, a in zip(params, args):
        if is_cupy_array(a) and a.device.id != current:
            raise LaunchError(f"argument '{p.name}' lives on GPU {a.device.id} but the current device is GPU "
                              f"{current}", hint=f"launch inside `with cupy.cuda.Device({a.device.id}):`")


def exactly_aliased(a: Any, b: Any) -> bool:
    """Same memory, shape, strides and dtype: one array passed twice. A stride on an axis of extent one is never
    used (`x.reshape(n, 1)` and `x[:, None]` differ only there), so only the others count (docs/launches.md)."""
    a, b = geometry(a), geometry(b)
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and a.shape == b.shape
            and a.dtype == b.dtype and all(s == t for n, s, t in zip(a.shape, a.strides, b.strides) if n > 1))


def _aliases(kernel: ir.Kernel, args: tuple) -> tuple[tuple[str, str], ...]:
    """Exactly aliased arrays are merged (docs/launches.md); any other overlap with a
    written array is refused."""
    arrays = [(p, a, byte_bounds(a)) for p, a in zip(kernel.params, args) if is_array(a)]
    out: dict[str, str] = {}
    for n, (p, a, (alo, ahi)) in enumerate(arrays):
        for q, b, (blo, bhi) in arrays[n + 1:]:
            if q.name in out or not (alo < bhi and blo < ahi):
                continue
            a, b = geometry(a), geometry(b)
            if exactly_aliased(a, b):
                out[q.name] = out.get(p.name, p.name)
                continue
            if not (p.written or q.written):
                continue
            if shares_elements(a, b):
                raise AliasingError(
                    f"arguments '{p.name}' and '{q.name}' overlap in memory without being the same array, and "
                    f"kernel '{kernel.name}' writes '{p.name if p.written else q.name}'",
                    hint="pass separate arrays (e.g. a .copy()), or the very same array for both")
    return tuple(out.items())


__all__ = ["Binding", "bind", "normalize_dim", "is_cupy_array", "BACKENDS", "I32", "INSTALL_HINT"]
