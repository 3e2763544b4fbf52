"""What the runtime accepts as an array, and which device it lives on: NumPy
arrays run on the CPU, CuPy arrays on the GPU. CuPy is imported only when a
GPU array or the GPU itself is asked for."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ..backends import backend, default_name
from ..errors import BackendUnavailableError

INSTALL_HINT = 'install CuPy for your CUDA version: pip install "gradkern[cuda12]" or "gradkern[cuda13]"'


_HOST = (np.ndarray, float, int, bool, np.float32, np.float64, np.int32, np.int64, np.bool_)


_CUPY_NDARRAY: Any = None  # cupy.ndarray, once CuPy has been imported


def is_cupy_array(x: Any) -> bool:
    # A CuPy array is recognised by its class, never by reading
    # __cuda_array_interface__: CuPy synchronises the stream to export it.
    # Checked many times per launch, so the common cases come first.
    global _CUPY_NDARRAY
    t = type(x)
    if t is _CUPY_NDARRAY:
        return True
    if t in _HOST:
        return False
    if _CUPY_NDARRAY is None and "cupy" in sys.modules:
        _CUPY_NDARRAY = getattr(sys.modules["cupy"], "ndarray", None)
    if _CUPY_NDARRAY is not None and isinstance(x, _CUPY_NDARRAY):
        return True
    return t.__module__.split(".")[0] == "cupy" and hasattr(x, "__cuda_array_interface__")


def is_device_array(x: Any) -> bool:
    """Any array in GPU memory (CuPy, PyTorch, Numba, JAX...)."""
    if type(x) in _HOST or isinstance(x, np.generic):
        return False
    return is_cupy_array(x) or hasattr(x, "__cuda_array_interface__")


def _address(x: Any) -> int:
    if isinstance(x, np.ndarray):
        return x.ctypes.data
    data = getattr(x, "data", None)
    ptr = getattr(data, "ptr", None)  # CuPy: no export, no synchronisation
    return ptr if isinstance(ptr, int) else x.__cuda_array_interface__["data"][0]


def device_memory(x: Any) -> bool:
    """Whether `x` is treated as device memory (programs: fingerprinted, host snapshots copied out of it):
    a CuPy array, or a NumPy array while 'hostcuda' is the default backend of
    NumPy launches, the host's stand-in for a GPU, so that CI runs those paths (docs/hostcuda.md)."""
    if isinstance(x, np.ndarray):
        return default_name() == "hostcuda"
    return is_cupy_array(x)


def module_of(x: Any) -> Any:
    """The array module of `x`'s memory: cupy for a CuPy array, numpy otherwise (hostcuda included)."""
    if is_cupy_array(x):
        import cupy
        return cupy
    return np


def to_host(x: Any) -> np.ndarray:
    """A NumPy copy of device memory `x` (device to host on a GPU; a copy of the buffer on hostcuda)."""
    return x.get() if is_cupy_array(x) else np.array(x, copy=True)


def from_host(x: Any, values: np.ndarray) -> None:
    """Write the NumPy array `values` into device memory `x` (host to device on a GPU)."""
    if is_cupy_array(x):
        x.set(values)
    else:
        x[...] = values


def is_array(x: Any) -> bool:
    t = type(x)
    return t is np.ndarray or t is _CUPY_NDARRAY or isinstance(x, np.ndarray) or is_cupy_array(x)


def cupy_module(why: str):
    """CuPy, or BackendUnavailableError saying how to install it."""
    try:
        import cupy
    except Exception as e:  # ImportError, or a CUDA library that fails to load
        raise BackendUnavailableError(f"{why}, but CuPy cannot be imported ({type(e).__name__}: {e})",
                                      hint=INSTALL_HINT) from None
    return cupy


_ARRAY_MODULES: dict[str, Any] = {}


def array_module(backend_name: str):
    """Where a backend's buffers (tapes, counters, accumulators) are allocated
    (asked once per backend: a few calls per launch)."""
    xp = _ARRAY_MODULES.get(backend_name)
    if xp is None:
        xp = _ARRAY_MODULES[backend_name] = backend(backend_name).array_module()
    return xp


_UNTOUCHED: dict[tuple, Any] = {}


def untouched(backend_name: str, shape: tuple, dtype) -> Any:
    """A zero array that no kernel reads or writes (an empty tape, an unused
    counter), made once per device, shape and dtype: allocating and clearing
    it on every call would cost a GPU launch more than the kernels need."""
    xp = array_module(backend_name)
    device = xp.cuda.runtime.getDevice() if xp is not np else None
    key = (backend_name, device, shape, np.dtype(dtype))
    a = _UNTOUCHED.get(key)
    if a is None:
        a = _UNTOUCHED[key] = xp.zeros(shape, dtype)
    return a


def owned_nbytes(a: Any) -> int:
    """Bytes `a` holds for its owner: 0 for a shared untouched stand-in."""
    return 0 if any(a is u for u in _UNTOUCHED.values()) else int(a.nbytes)


class _Interface:
    def __init__(self, interface: dict):
        self.__array_interface__ = interface


def geometry(x: Any) -> np.ndarray:
    """A NumPy array with `x`'s address, shape, strides and dtype, for overlap
    tests only (np.shares_memory reads no data). For a CuPy array it points
    into device memory and must never be read."""
    if isinstance(x, np.ndarray):
        return x
    return np.asarray(_Interface({"shape": tuple(x.shape), "typestr": x.dtype.str, "data": (_address(x), True),
                                  "strides": tuple(x.strides), "version": 3}))


def byte_bounds(x: Any) -> tuple[int, int]:
    """[first, last) byte addresses an array's elements can occupy."""
    ptr = _address(x)
    if x.flags.c_contiguous:
        return ptr, ptr + x.nbytes
    lo = hi = ptr
    for n, s in zip(x.shape, x.strides):
        if n == 0:
            return ptr, ptr
        if s < 0:
            lo += s * (n - 1)
        else:
            hi += s * (n - 1)
    return lo, hi + x.itemsize


def shares_elements(a: Any, b: Any) -> bool:
    """Whether two arrays have a byte in common, exactly: disjoint interleaved views (the columns a[:, 0] and
    a[:, 1], the halves u[0::2] and u[1::2]) have none. NumPy's exact solver on the arrays' geometry (no data is
    read, so CuPy arrays are tested where they live); where it gives up, they are taken to share. The one
    element-level overlap test of launches (runtime/annotate.py, binding.py) and programs (program/shadows.py)."""
    try:
        return np.shares_memory(geometry(a), geometry(b), max_work=10**6)
    except np.exceptions.TooHardError:
        return True


def overlapping_elements(x: Any) -> bool:
    """Whether two distinct elements of `x` share a byte (a broadcast view, or
    `as_strided` with strides shorter than what they step over). Exact, from
    shape, strides and item size only: no data is read, so CuPy arrays are
    tested where they live. When NumPy's exact solver gives up, the answer is
    True: this guards arrays that will be written, where a wrong "no" races."""
    flags = x.flags
    if flags.c_contiguous or flags.f_contiguous or x.size <= 1:
        return False
    axes = sorted((abs(s), n) for n, s in zip(x.shape, x.strides) if n > 1)
    if axes[0][0] == 0:
        return True
    # Sufficient: with the axes sorted by stride, each stride steps past
    # everything the shorter axes cover (what slices of a real array do).
    covered = x.itemsize
    for s, n in axes:
        if s < covered:
            return _overlap_exact(geometry(x))
        covered += s * (n - 1)
    return False


def overlap_reason(x: Any) -> str:
    """Why `overlapping_elements(x)` holds, in the user's words."""
    for axis, (n, s) in enumerate(zip(x.shape, x.strides)):
        if s == 0 and n > 1:
            return f"a broadcast view, stride 0 on axis {axis}"
    return f"strides {tuple(x.strides)} for shape {tuple(x.shape)} and item size {x.itemsize}"


def _overlap_exact(g: np.ndarray) -> bool:
    """Exact internal overlap by halving one axis at a time: two elements whose
    index on `axis` differs lie in the two halves (NumPy's solver decides
    whether those share memory), or both in the first ceil(n/2) indices up to a
    translation; elements with the same index on `axis` are the same problem
    one axis down."""
    for axis in range(g.ndim):
        while g.shape[axis] > 1:
            n = g.shape[axis]
            h = n // 2
            first = (slice(None),) * axis + (slice(0, h),)
            second = (slice(None),) * axis + (slice(h, n),)
            try:
                if np.shares_memory(g[first], g[second], max_work=10**6):
                    return True
            except np.exceptions.TooHardError:
                return True
            g = g[(slice(None),) * axis + (slice(0, n - h),)]
        g = g[(slice(None),) * axis + (slice(0, 1),)]
    return False


def held_memory(b: Any) -> Any:
    """Where `b` is the base of an array gradkern placed in memory of its own (program/savepool.py: `Memory`,
    whose type says `gk_memory`): that memory, the owner of the array and of its views as an allocation is
    (`b` itself, or the base of the array `b` when `b` is a view's base); None otherwise."""
    if getattr(type(b), "gk_memory", False):
        return b
    if type(b) is np.ndarray and getattr(type(b.base), "gk_memory", False):
        return b.base
    return None


def outside_its_memory(x: Any) -> bool:
    """Whether an array's elements reach outside the memory it is a view of
    (`as_strided` with wrong strides or shape: reading it can crash the
    process). Views NumPy made by slicing stay inside their base, so the usual
    array costs two attribute reads; only views built around other objects
    (as_strided's, CuPy's) are measured, against the last NumPy array on their
    chain of bases or CuPy's own allocation. Memory of unknown extent (raw
    pointers, foreign GPU memory) is trusted."""
    if isinstance(x, np.ndarray):
        base = x.base
        if base is None or (type(base) is np.ndarray and base.flags.owndata) or held_memory(base) is not None:
            return False
        root, b = x, base
        while b is not None:  # the last NumPy array on the chain of bases holds the memory
            if isinstance(b, np.ndarray):
                root = b
            b = getattr(b, "base", None)
        if root is x:
            return False
        start, end = _address(root), _address(root) + root.nbytes
        if not (root.flags.c_contiguous or root.flags.f_contiguous):
            start, end = byte_bounds(root)
    else:  # CuPy: the allocation behind the pointer, when CuPy made it
        mem = getattr(getattr(x, "data", None), "mem", None)
        if type(mem).__name__ == "UnownedMemory":  # wrapped foreign memory: its size is whatever the wrapper said
            return False
        start, size = getattr(mem, "ptr", None), getattr(mem, "size", 0)
        if not isinstance(start, int) or not isinstance(size, int) or size <= 0:
            return False
        end = start + size
    if x.size == 0:
        return False
    lo, hi = byte_bounds(x)
    return lo < start or hi > end


def misaligned_on_device(x: Any) -> bool:
    """A GPU array whose first element is not at a multiple of its item size:
    the GPU faults on such loads (and the fault poisons the CUDA context),
    where the CPU backend reads NumPy's unaligned arrays correctly."""
    return not isinstance(x, np.ndarray) and _address(x) % x.itemsize != 0


def describe(x: Any) -> str:
    if is_array(x):
        where = "CuPy" if is_cupy_array(x) else "NumPy"
        return f"a {where} {x.dtype} array of shape {tuple(x.shape)}"
    return type(x).__name__
