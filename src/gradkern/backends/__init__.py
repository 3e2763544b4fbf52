"""The backends, one object each behind one small interface (DESIGN §4):
generate source from typed IR, compile it, run it over a launch domain.
The pipeline and the runtime ask the object; nothing tests backend names.

    cpu     typed IR → Python → numba.njit (backends/numba_cpu.py)
    cuda    typed IR → CUDA C → cupy.RawModule (backends/cuda.py)
    interp  the reference interpreter, the test oracle (backends/interp.py)

Backends only print IR: what is atomic, what is taped, what is split into an
interior is decided upstream and arrives on the IR.
"""

from __future__ import annotations

from ..errors import LaunchError
from .base import Backend, Generated, check_launch_ndim

_REGISTRY: dict[str, Backend] = {}
NAMES = ("cpu", "interp", "cuda")


def backend(name: str) -> Backend:
    """The backend object called `name` ('cpu', 'cuda' or 'interp'), created on first use."""
    b = _REGISTRY.get(name)
    if b is None:
        if name == "cpu":
            from .numba_cpu import NumbaBackend as cls
        elif name == "cuda":
            from .cuda import CudaBackend as cls
        elif name == "interp":
            from .interp import InterpBackend as cls
        else:
            raise LaunchError(f"backend must be one of {NAMES}, got {name!r}")
        b = _REGISTRY[name] = cls()
    return b


__all__ = ["Backend", "Generated", "backend", "NAMES", "check_launch_ndim"]
