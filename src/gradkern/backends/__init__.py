"""The backends, one object each behind one small interface (docs/architecture.md):
generate source from typed IR, compile it, run it over a launch domain.
The pipeline and the runtime ask the object; nothing tests backend names.

    cpu     typed IR → Python → numba.njit (backends/numba_cpu.py)
    cuda    typed IR → CUDA C → cupy.RawModule (backends/cuda.py)
    hostcuda  the same CUDA C → g++ → run on the host, NumPy memory (backends/hostcuda.py): the CUDA path in CI
    interp  the reference interpreter, the test oracle (backends/interp.py)

A launch on NumPy arrays that names no backend runs on `default_name()`:
$GRADKERN_BACKEND, else 'cpu' (docs/hostcuda.md).

Backends only print IR: what is atomic, what is taped, what is split into an
interior is decided upstream and arrives on the IR.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import LaunchError
from .base import Backend, Generated, check_launch_ndim

_REGISTRY: dict[str, Backend] = {}
NAMES = ("cpu", "interp", "cuda", "hostcuda")
HOST = ("cpu", "interp", "hostcuda")  # the backends that run NumPy arrays


def backend(name: str) -> Backend:
    """The backend object called `name` (one of NAMES), created on first use."""
    b = _REGISTRY.get(name)
    if b is None:
        if name == "cpu":
            from .numba_cpu import NumbaBackend as cls
        elif name == "cuda":
            from .cuda import CudaBackend as cls
        elif name == "interp":
            from .interp import InterpBackend as cls
        elif name == "hostcuda":
            from .hostcuda import HostCudaBackend as cls
        else:
            raise LaunchError(f"backend must be one of {NAMES}, got {name!r}")
        b = _REGISTRY[name] = cls()
    return b


def start_compile_worker() -> Any:
    """A new compile worker process (backends/compile_worker.py `Worker`), for runtime/compile_pool.py."""
    from .compile_worker import Worker
    return Worker()


def cache_warning(message: str) -> None:
    """Issue a CacheWarning's `message` (already prefixed) again at the user's line: a compile worker's."""
    from .cache_files import warn
    warn(message, prefix="")


_default: list[str] = []


def default_name() -> str:
    """The backend of a launch on NumPy arrays that names none: $GRADKERN_BACKEND (read on first use), else
    'cpu'. GRADKERN_BACKEND=hostcuda reruns any program or test suite on the CUDA path (docs/hostcuda.md)."""
    if not _default:
        name = os.environ.get("GRADKERN_BACKEND") or "cpu"
        if name not in HOST:
            raise LaunchError(f"GRADKERN_BACKEND={name!r}: the default backend of NumPy launches must be one of "
                              f"{HOST}", hint="CuPy arrays run on 'cuda' whatever the default")
        _default.append(name)
    return _default[0]


def set_default(name: str | None) -> str | None:
    """Make `name` the default backend of NumPy launches (None: $GRADKERN_BACKEND again); returns the one
    set before, for tests that switch it and back. Launches compare it in their cache keys."""
    if name is not None and name not in HOST:
        raise LaunchError(f"the default backend of NumPy launches must be one of {HOST}, got {name!r}")
    before = _default[0] if _default else None
    _default.clear()
    if name is not None:
        _default.append(name)
    return before


__all__ = ["Backend", "Generated", "backend", "NAMES", "HOST", "check_launch_ndim", "default_name", "set_default"]
