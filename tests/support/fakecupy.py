"""fakecupy: a NumPy-backed stand-in for CuPy, so that CI runs gradkern's CuPy code paths (docs/hostcuda.md,
"CuPy's paths on a stand-in").

`installed()` puts `MODULE` in `sys.modules["cupy"]` for a test and takes it out again, with every cache of the
cupy module in gradkern reset both ways. Its `ndarray` is no NumPy subclass: it holds a NumPy view of a host
allocation (`Memory`) and offers only the part of CuPy's surface gradkern and its GPU tests use, so a NumPy-only
attribute read on a "device" array fails as it does on CuPy (AttributeError; `flags` has only CuPy's three),
and so does an implicit conversion to NumPy (TypeError, as CuPy's `__array__`). `RawModule(code=...)` compiles
the CUDA C with hostcuda's g++ route (backends/hostcuda.py `build`; `__CUDACC__` is not defined, so a source's
host branch is taken) and a kernel call runs the grid on the host with the arrays' buffers.

What it cannot show: real device memory (a host pointer is dereferenced without a copy), streams and
asynchronous errors (every call finishes before it returns), NVRTC's dialect (g++ compiles the source), and
CuPy's own numerics (NumPy computes every array expression).
"""

from __future__ import annotations

import contextlib
import operator
import sys
import types
import weakref
from typing import Any

import numpy as np

_SCALARS = (bool, int, float, complex, np.generic)
# NumPy's constructors as imported: while a program records, gradkern wraps np.asarray and its kin to follow host
# code (program/hostcalls.py); the fake's "device" work is no host code, and CuPy calls none of them
_asarray, _array, _ascontiguousarray = np.asarray, np.array, np.ascontiguousarray


_HOOKS: list = []  # the entered MemoryHooks, innermost last


class MemoryHook:
    """cupy.cuda.MemoryHook: entered with `with`, told of every allocation (`malloc_postprocess`) and free
    (`free_postprocess`) with CuPy's keywords; names must differ among the entered ones, as CuPy's."""

    name = "MemoryHook"

    def __enter__(self) -> MemoryHook:
        if any(h.name == self.name for h in _HOOKS):
            raise RuntimeError(f"memory hook {self.name} already exists")
        _HOOKS.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _HOOKS.remove(self)

    def malloc_postprocess(self, **kw: Any) -> None:
        pass

    def free_postprocess(self, **kw: Any) -> None:
        pass


def _freed(ptr: int, size: int) -> None:
    for h in list(_HOOKS):
        h.free_postprocess(device_id=0, mem_size=size, mem_ptr=ptr, pmem_id=0)


class Memory:
    """An allocation (cupy.cuda.memory.Memory): `ptr`, `size`; its bytes are the NumPy array `buffer`. The
    entered MemoryHooks hear of it and of its free, as those of CuPy's pool."""

    def __init__(self, nbytes: int, buffer: np.ndarray | None = None):
        self.buffer = np.zeros(max(int(nbytes), 1), np.uint8) if buffer is None else buffer
        self.ptr = self.buffer.ctypes.data
        self.size = int(nbytes)
        if _HOOKS:
            for h in list(_HOOKS):
                h.malloc_postprocess(device_id=0, size=self.size, mem_size=max(self.size, 1), mem_ptr=self.ptr,
                                     pmem_id=id(self))
            weakref.finalize(self, _freed, self.ptr, max(self.size, 1))


class MemoryPointer:
    """A pointer into a Memory (cupy.cuda.MemoryPointer): `ptr`, `mem`, and `+ bytes`."""

    def __init__(self, mem: Memory, offset: int):
        self.mem, self.offset = mem, int(offset)
        self.ptr = mem.ptr + self.offset

    def __add__(self, n: int) -> MemoryPointer:
        return MemoryPointer(self.mem, self.offset + operator.index(n))


class Flags:
    """CuPy's flags: these three attributes, nothing NumPy has besides (no aligned, writeable, num)."""

    __slots__ = ("c_contiguous", "f_contiguous", "owndata")

    def __init__(self, c: bool, f: bool, own: bool):
        self.c_contiguous, self.f_contiguous, self.owndata = c, f, own

    def __getitem__(self, name: str) -> bool:
        return getattr(self, {"C_CONTIGUOUS": "c_contiguous", "F_CONTIGUOUS": "f_contiguous",
                              "OWNDATA": "owndata"}[name])


class Device:
    """cupy.cuda.Device: one device, id 0, with two multiprocessors (hostcuda's grid size)."""

    def __init__(self, device: int | None = None):
        self.id = 0 if device is None else int(device)
        if self.id != 0:
            raise RuntimeError(f"fakecupy has one device (0), not {self.id}")
        self.attributes = {"MultiProcessorCount": 2}

    def use(self) -> None:
        pass

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc) -> None:
        pass


def _unwrap(x: Any, what: str = "operand") -> Any:
    """A fake array's NumPy view; a NumPy array is refused, as CuPy refuses it ('Unsupported type')."""
    if type(x) is ndarray:
        return x._a
    if isinstance(x, np.ndarray):
        raise TypeError(f"Unsupported type {type(x)} (a NumPy array as a CuPy {what}: fakecupy refuses it as "
                        "CuPy does)")
    if isinstance(x, (tuple, list)):
        return type(x)(_unwrap(v, what) for v in x)
    return x


def _inside(r: np.ndarray, mem: Memory) -> bool:
    if r.size == 0:
        return False
    lo = r.__array_interface__["data"][0]
    return mem.ptr <= lo < mem.ptr + len(mem.buffer)


def _owned(r: Any) -> ndarray:
    """A new fake array in an allocation of its own holding NumPy result `r` (a copy, or a scalar)."""
    r = _asarray(r)
    if not (r.flags.c_contiguous or r.flags.f_contiguous) or r.base is not None:
        r = r.copy()
    if not r.size:
        mem = Memory(0)
        return ndarray._make(np.ndarray(r.shape, r.dtype, mem.buffer), mem, None)
    mem = Memory(r.nbytes, r.reshape(-1, order="A").view(np.uint8))
    return ndarray._make(r, mem, None)


class ndarray:  # noqa: N801 (CuPy's name)
    """cupy.ndarray on a host allocation (module docstring). `ndarray(shape, dtype, memptr, strides)` as CuPy."""

    __slots__ = ("_a", "data", "base", "__weakref__")
    __module__ = "cupy"  # as CuPy's: code that recognises CuPy by its module name (kernels/_arguments.py) sees one

    def __init__(self, shape, dtype=float, memptr: MemoryPointer | None = None, strides=None, order: str = "C"):
        shape = tuple(int(n) for n in shape) if isinstance(shape, (tuple, list)) else (int(shape),)
        dtype = np.dtype(dtype)
        if memptr is None:
            memptr = MemoryPointer(Memory(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize), 0)
        self._a = np.ndarray(shape, dtype, memptr.mem.buffer, memptr.offset, strides, order)
        self.data, self.base = memptr, None

    @classmethod
    def _make(cls, a: np.ndarray, mem: Memory, base: ndarray | None) -> ndarray:
        x = object.__new__(cls)
        x._a, x.base = a, base
        x.data = MemoryPointer(mem, (a.__array_interface__["data"][0] - mem.ptr) if a.size else 0)
        return x

    def _result(self, r: Any) -> ndarray:
        """NumPy result `r` of an operation on self: a view of self's memory (base: self's owner), or a copy."""
        if isinstance(r, np.ndarray) and _inside(r, self.data.mem):
            return ndarray._make(r, self.data.mem, self.base if self.base is not None else self)
        return _owned(r)

    # ---- what CuPy's arrays describe themselves by --------------------------------------------------------------
    shape = property(lambda self: self._a.shape)
    strides = property(lambda self: self._a.strides)
    dtype = property(lambda self: self._a.dtype)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    ndim = property(lambda self: self._a.ndim)
    itemsize = property(lambda self: self._a.itemsize)
    device = property(lambda self: Device(0))
    T = property(lambda self: self._result(self._a.T))
    real = property(lambda self: self._result(self._a.real))
    imag = property(lambda self: self._result(self._a.imag))

    @property
    def flags(self) -> Flags:
        f = self._a.flags
        return Flags(f.c_contiguous, f.f_contiguous, self.base is None)

    @property
    def __cuda_array_interface__(self) -> dict:
        a = self._a
        return {"shape": a.shape, "typestr": a.dtype.str, "data": (self.data.ptr, False), "version": 3,
                "strides": None if a.flags.c_contiguous else a.strides}

    def __array__(self, *args, **kwargs):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a "
                        "NumPy array explicitly.")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        try:
            inputs = _unwrap(inputs)
            if "out" in kwargs:
                kwargs["out"] = _unwrap(kwargs["out"])
        except TypeError:
            return NotImplemented
        r = getattr(ufunc, method)(*inputs, **kwargs)
        return _owned(r) if "out" not in kwargs else kwargs["out"]

    def __array_function__(self, func, types, args, kwargs):
        # NEP 18, as CuPy: np.<function>(fake array) is the fake module's function of that name; one it lacks is a
        # TypeError from NumPy
        mine = getattr(MODULE, func.__name__, None) if func.__module__ == "numpy" else None
        return NotImplemented if mine is None else mine(*args, **kwargs)

    def __repr__(self) -> str:
        return f"fakecupy.ndarray({self._a!r})"

    # ---- copies to and from the host ----------------------------------------------------------------------------
    def get(self, stream=None) -> np.ndarray:
        return _array(self._a, copy=True)

    def set(self, arr: np.ndarray, stream=None) -> None:
        if not isinstance(arr, np.ndarray) or arr.shape != self.shape:
            raise ValueError(f"set: a NumPy array of shape {self.shape} is required")
        self._a[...] = arr

    # ---- views, copies, reductions --------------------------------------------------------------------------------
    def __getitem__(self, key):
        return self._result(self._a[_unwrap(key, "index")])

    def __setitem__(self, key, value):
        self._a[_unwrap(key, "index")] = value._a if type(value) is ndarray else value

    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __bool__(self) -> bool:
        return bool(self._a)

    def __float__(self) -> float:
        return float(self._a)

    def __int__(self) -> int:
        return int(self._a)

    def __complex__(self) -> complex:
        return complex(self._a)

    def item(self):
        return self._a.item()

    def tolist(self):
        return self._a.tolist()

    def copy(self, order: str = "C") -> ndarray:
        return _owned(self._a.copy(order))

    def astype(self, dtype, order: str = "K", copy: bool = True) -> ndarray:
        if not copy and np.dtype(dtype) == self.dtype:
            return self
        return _owned(self._a.astype(dtype, order=order))

    def view(self, dtype=None) -> ndarray:
        return self._result(self._a.view() if dtype is None else self._a.view(dtype))

    def reshape(self, *shape, order: str = "C") -> ndarray:
        return self._result(self._a.reshape(*shape, order=order))

    def ravel(self, order: str = "C") -> ndarray:
        return self._result(self._a.ravel(order))

    def transpose(self, *axes) -> ndarray:
        return self._result(self._a.transpose(*axes))

    def swapaxes(self, a: int, b: int) -> ndarray:
        return self._result(self._a.swapaxes(a, b))

    def squeeze(self, axis=None) -> ndarray:
        return self._result(self._a.squeeze(axis))

    def fill(self, value) -> None:
        self._a.fill(value)

    def conj(self) -> ndarray:
        return _owned(self._a.conj())


def _reduction(name: str):
    def method(self, *args, **kwargs):
        return _owned(getattr(self._a, name)(*_unwrap(args), **kwargs))
    method.__name__ = name
    return method


for _name in ("sum", "max", "min", "any", "all", "mean", "prod", "argmax", "argmin", "dot"):
    setattr(ndarray, _name, _reduction(_name))


def _binary(op, reflected: bool = False, inplace: bool = False):
    def method(self, other):
        if isinstance(other, np.ndarray):
            raise TypeError(f"Unsupported type {type(other)} (a NumPy array with a CuPy array: fakecupy refuses "
                            "it as CuPy does)")
        o = other._a if type(other) is ndarray else other
        if not isinstance(o, (np.ndarray, *_SCALARS)):
            return NotImplemented
        if inplace:
            op(self._a, o)
            return self
        return _owned(op(o, self._a) if reflected else op(self._a, o))
    return method


for _name, _op in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("truediv", operator.truediv), ("floordiv", operator.floordiv), ("mod", operator.mod),
                   ("pow", operator.pow), ("and", operator.and_), ("or", operator.or_), ("xor", operator.xor),
                   ("lshift", operator.lshift), ("rshift", operator.rshift), ("matmul", operator.matmul)):
    setattr(ndarray, f"__{_name}__", _binary(_op))
    setattr(ndarray, f"__r{_name}__", _binary(_op, reflected=True))
    setattr(ndarray, f"__i{_name}__", _binary(getattr(operator, f"i{_name}"), inplace=True))
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(ndarray, f"__{_name}__", _binary(getattr(operator, _name)))
ndarray.__neg__ = lambda self: _owned(-self._a)
ndarray.__pos__ = lambda self: _owned(+self._a)
ndarray.__abs__ = lambda self: _owned(abs(self._a))
ndarray.__invert__ = lambda self: _owned(~self._a)
ndarray.__hash__ = None


# ---- the module's functions: only those gradkern and its GPU tests call -------------------------------------------

def asarray(a, dtype=None, order=None) -> ndarray:
    if type(a) is ndarray:
        return a if dtype is None or np.dtype(dtype) == a.dtype else a.astype(dtype)
    return _owned(_array(a, dtype=dtype, order=order or "K", copy=True))


def array(a, dtype=None, copy: bool = True, order: str = "K") -> ndarray:
    if type(a) is ndarray:
        return a.astype(a.dtype if dtype is None else dtype, order=order) if copy else asarray(a, dtype)
    return asarray(a, dtype)


def asnumpy(a, stream=None) -> np.ndarray:
    return a.get() if type(a) is ndarray else _asarray(a)


def _made(make):
    def fn(*args, **kwargs):
        return _owned(make(*_unwrap(args), **kwargs))
    fn.__name__ = make.__name__
    return fn


zeros, empty, ones, full, arange = (_made(f) for f in (np.zeros, np.empty, np.ones, np.full, np.arange))
zeros_like, empty_like, ones_like, full_like = (_made(f) for f in (np.zeros_like, np.empty_like, np.ones_like,
                                                                    np.full_like))
concatenate, stack, flatnonzero = (_made(f) for f in (np.concatenate, np.stack, np.flatnonzero))


def may_share_memory(a: ndarray, b: ndarray, max_work=None) -> bool:
    return np.may_share_memory(_unwrap(a), _unwrap(b))


def shares_memory(a: ndarray, b: ndarray, max_work=None) -> bool:
    return np.shares_memory(_unwrap(a), _unwrap(b), max_work)


def sum(a: ndarray, axis=None, dtype=None) -> ndarray:  # noqa: A001 (CuPy's name)
    return a.sum(axis=axis, dtype=dtype)


def vdot(a: ndarray, b: ndarray) -> ndarray:
    return _owned(np.vdot(_unwrap(a), _unwrap(b)))


def swapaxes(a: ndarray, x: int, y: int) -> ndarray:
    return a.swapaxes(x, y)


def ascontiguousarray(a, dtype=None) -> ndarray:
    """`a` itself when it is C-contiguous already (as CuPy), else a contiguous copy."""
    if type(a) is not ndarray:
        return asarray(_ascontiguousarray(a, dtype))
    if a._a.flags.c_contiguous and (dtype is None or np.dtype(dtype) == a.dtype):
        return a
    return _owned(_ascontiguousarray(a._a, dtype))


# ---- kernels: CUDA C compiled by hostcuda's g++ route, run on the host ------------------------------------------

class RawModule:
    """cupy.RawModule(code=..., options=...): `get_function(name)` is a kernel compiled on its first call."""

    def __init__(self, code: str | None = None, options: tuple = (), **kwargs):
        if code is None or kwargs.get("path"):
            raise NotImplementedError("fakecupy.RawModule takes code= only")
        self.code, self.options = code, tuple(options)

    def get_function(self, name: str) -> RawKernel:
        return RawKernel(self.code, name)


_LIBRARIES: dict[tuple[str, str], Any] = {}  # (source, entry) -> hostcuda Library: fake kernels only


class RawKernel:
    """A kernel of a RawModule: `kernel(grid, block, args)` runs the grid on the host (hostcuda's launcher)."""

    def __init__(self, code: str, name: str, options: tuple = ()):
        self.code, self.name = code, name

    def __call__(self, grid, block, args, *, shared_mem: int = 0, stream=None) -> None:
        from gradkern.backends import backend
        from gradkern.backends.hostcuda import Library, build
        from gradkern.runtime.cache import cache_dir
        grid, block = (tuple(g) if isinstance(g, tuple) else (g,) for g in (grid, block))
        if any(int(n) != 1 for n in grid[1:] + block[1:]):
            raise NotImplementedError(f"fakecupy launches one-dimensional grids only, got {grid} x {block}")
        host = backend("hostcuda")
        lib = _LIBRARIES.get((self.code, self.name))
        if lib is None:
            launcher, handle, path = build(self.code, self.name, cache_dir() / "hostcuda")
            lib = _LIBRARIES[(self.code, self.name)] = Library(host, self.name, launcher, handle, path)
        host.launch(lib, int(grid[0]), int(block[0]), tuple(_unwrap(a, "kernel argument") for a in args))


# ---- the module -------------------------------------------------------------------------------------------------

def _module() -> types.ModuleType:
    m = types.ModuleType("cupy", __doc__)
    names = ("ndarray asarray array asnumpy zeros empty ones full arange zeros_like empty_like ones_like full_like "
             "concatenate stack flatnonzero ascontiguousarray may_share_memory shares_memory sum vdot swapaxes "
             "RawModule RawKernel")
    for n in names.split():
        setattr(m, n, globals()[n])
    for n in ("float16", "float32", "float64", "complex64", "complex128", "int8", "int16", "int32", "int64",
              "uint8", "uint16", "uint32", "uint64", "bool_", "dtype", "newaxis", "pi"):
        setattr(m, n, getattr(np, n))
    runtime = types.SimpleNamespace(getDevice=lambda: 0, getDeviceCount=lambda: 1,
                                    getDeviceProperties=lambda d: {"name": b"fakecupy (NumPy on the host)"})
    memory = types.SimpleNamespace(Memory=Memory, MemoryPointer=MemoryPointer)
    # what the shipped rules call (kernels/dense.py, kernels/spectral.py), computed by NumPy
    m.linalg = types.SimpleNamespace(solve=_made(np.linalg.solve))
    m.fft = types.SimpleNamespace(rfft=_made(np.fft.rfft), irfft=_made(np.fft.irfft), rfftfreq=_made(np.fft.rfftfreq))
    stream = types.SimpleNamespace(ptr=0, synchronize=lambda: None)  # the null stream, the fake's only one
    m.cuda = types.SimpleNamespace(Device=Device, runtime=runtime, memory=memory, MemoryPointer=MemoryPointer,
                                   MemoryHook=MemoryHook, get_current_stream=lambda: stream)
    return m


MODULE = _module()


@contextlib.contextmanager
def installed():
    """`MODULE` as sys.modules["cupy"] inside; gradkern's caches of the cupy module and of what was compiled
    with it (runtime/arrays.py, backends/cuda.py, program/fingerprint.py, runtime/execute.py, runtime/call.py,
    the 'cuda' backend object) start empty inside and are put back as they were after, so that neither a real
    CuPy nor the fake sees the other's state."""
    import gradkern.backends as backends
    from gradkern.backends import cuda
    from gradkern.program import fingerprint
    from gradkern.runtime import arrays, call, execute
    missing = object()
    before = sys.modules.get("cupy", missing)
    caches = (arrays._ARRAY_MODULES, arrays._UNTOUCHED, cuda._kernels, fingerprint._KERNELS, fingerprint._SLABS,
              execute._ENTRIES, call._CALLS)
    saved = [dict(c) for c in caches]
    cuda_backend, ndarray_type = backends._REGISTRY.pop("cuda", None), arrays._CUPY_NDARRAY

    def reset() -> None:
        for c in caches:
            c.clear()
        backends._REGISTRY.pop("cuda", None)
        arrays._CUPY_NDARRAY = None

    reset()
    sys.modules["cupy"] = MODULE
    try:
        yield MODULE
    finally:
        reset()
        for c, s in zip(caches, saved):
            c.update(s)
        if cuda_backend is not None:
            backends._REGISTRY["cuda"] = cuda_backend
        arrays._CUPY_NDARRAY = ndarray_type
        if before is missing:
            del sys.modules["cupy"]
        else:
            sys.modules["cupy"] = before


class FakeDevice:
    """tests/support/devices.py's Device for fakecupy: `to`, `host`, `running` (the fake installed inside)."""

    name = "fakecupy"
    xp = MODULE
    array = ndarray

    def to(self, a):
        """A fake device array with the layout of NumPy array `a` (a view keeps its offset and strides into a copy
        of its base)."""
        try:  # tests/support as the package `support` (pytest), or on the path itself (the MPI jobs)
            from support.devices import laid_out_like
        except ImportError:
            from devices import laid_out_like
        return laid_out_like(MODULE, a, self.host)

    def host(self, a):
        return a.get() if type(a) is ndarray else a

    def running(self):
        return contextlib.nullcontext()  # launches on fake arrays run on 'cuda' (installed() is the test's fixture)


FAKE = FakeDevice()
