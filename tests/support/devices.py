"""The devices the GPU tests run on (docs/hostcuda.md): CuPy arrays on a CUDA GPU, and hostcuda, NumPy arrays
launched on the CUDA backend's own generated C run on the host (the default backend of NumPy launches switched
to 'hostcuda' while the device side runs). A test takes the `device` fixture (tests/conftest.py), builds its arrays with
`device.to` / `device.xp`, runs the device side inside `device.running()` and brings results back with
`device.host`; the CPU reference runs outside it, on the Numba backend."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

try:
    import cupy
    HAS_GPU = cupy.cuda.runtime.getDeviceCount() > 0
except Exception:  # no CuPy, or no driver
    cupy, HAS_GPU = None, False


def laid_out_like(xp: Any, a: Any, host: Any) -> Any:
    """An array of module `xp` (NumPy, CuPy or the stand-in) with the layout of NumPy array `a`: a view keeps its
    offset and strides into a copy of its base, on memory of its own (`host` reads it back for the check);
    anything else unchanged."""
    if not isinstance(a, np.ndarray):
        return a
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    offset = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    root = np.ascontiguousarray(root)
    if xp is np:
        out = np.ndarray(a.shape, a.dtype, root.copy(), offset, a.strides)
    else:
        out = xp.ndarray(a.shape, a.dtype, xp.asarray(root).data + offset, strides=a.strides)
    assert np.array_equal(host(out), a, equal_nan=a.dtype.kind in "fc")
    return out


@dataclass(frozen=True)
class Device:
    name: str
    xp: Any  # the array module: cupy or numpy
    array: type  # the device array type

    def to(self, a):
        """A device array with the layout of NumPy array `a` (views keep their offset and strides into a copy
        of their base), on its own memory; anything else unchanged."""
        return laid_out_like(self.xp, a, self.host)

    def host(self, a):
        """A NumPy array of device array `a` (a copy from a GPU)."""
        return a.get() if self.xp is not np and isinstance(a, self.array) else a

    @contextlib.contextmanager
    def running(self):
        """Launches on NumPy arrays inside run on hostcuda (CuPy arrays always run on 'cuda')."""
        if self.xp is not np:
            yield
            return
        from gradkern.backends import set_default
        before = set_default("hostcuda")
        try:
            yield
        finally:
            set_default(before)


CUPY = Device("cupy", cupy, cupy.ndarray) if cupy is not None else None
HOSTCUDA = Device("hostcuda", np, np.ndarray)


def device_params() -> list:
    """pytest params of every device: each skips, with its reason, where it cannot run. (gradkern is imported
    here, not at the top: conftest.py sets the environment it reads first.)"""
    from gradkern.backends.hostcuda import compiler
    return [pytest.param(CUPY, id="cupy", marks=pytest.mark.skipif(not HAS_GPU, reason="no CUDA GPU (CuPy)")),
            pytest.param(HOSTCUDA, id="hostcuda",
                         marks=pytest.mark.skipif(compiler() is None, reason="g++ is not on the PATH"))]
