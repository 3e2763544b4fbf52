"""What the runtime accepts as an array, and which device it lives on: NumPy
arrays run on the CPU, CuPy arrays on the GPU. CuPy is imported only when a
GPU array or the GPU itself is asked for."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ..backends import backend
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


def array_module(backend_name: str):
    """Where a backend's buffers (tapes, counters, accumulators) are allocated."""
    return backend(backend_name).array_module()


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


def describe(x: Any) -> str:
    if is_array(x):
        where = "CuPy" if is_cupy_array(x) else "NumPy"
        return f"a {where} {x.dtype} array of shape {tuple(x.shape)}"
    return type(x).__name__
