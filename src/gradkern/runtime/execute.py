"""Run one specialisation: the interpreter, the Numba entry, or a CUDA kernel
on CuPy's current stream. Takes parameter values in the kernel's order and
never looks inside kernel bodies."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.interp import interpret
from ..ir.types import Array
from ..pipeline import Specialization
from .cache import cache_dir


def run_spec(spec: Specialization, entry: Any, dim: tuple[int, ...], values: list) -> None:
    """Run one specialisation over `dim` with the values of its parameters."""
    if spec.backend == "interp":
        interpret(spec.typed, dim, values)
        return
    if 0 in dim:
        return
    if spec.backend == "cuda":
        _run_cuda(spec, entry, dim, values)
        return
    extra = []
    if spec.privatized:
        from ..backends.numba_cpu import private_chunks
        names = [p.name for p in spec.typed.params]
        copy_bytes = sum(values[names.index(a)].nbytes for a in spec.privatized)
        extra.append(private_chunks(copy_bytes, dim[0]))
    entry(*dim, *values, *extra)


def _run_cuda(spec: Specialization, kernel: Any, dim: tuple[int, ...], values: list) -> None:
    """Launch on CuPy's current stream: extents first, then each parameter (an
    array with its extents and, when the kernel takes them, element strides)."""
    from ..backends.cuda import BLOCK, grid_for
    args = [np.int64(n) for n in dim]
    for (kind, convert), v in zip(_marshalling(spec), values):
        if kind == _SCALAR:
            args.append(convert(v))
            continue
        args.append(v)
        args += [np.int64(n) for n in v.shape]
        if kind == _STRIDED:
            args += [np.int64(s // v.itemsize) for s in v.strides]
    total = 1
    for n in dim:
        total *= n
    grid = grid_for(total, _multiprocessors()) if spec.parallel else 1
    kernel((grid,), (BLOCK if spec.parallel else 1,), tuple(args))


_SCALAR, _CONTIGUOUS, _STRIDED = 0, 1, 2
_PLANS: dict[int, tuple] = {}


def _marshalling(spec: Specialization) -> tuple:
    """How each parameter travels (scalar, contiguous or strided array), once per specialisation.
    A contiguous array cannot reach a strided parameter's place: C-contiguity is part of the key."""
    plan = _PLANS.get(id(spec))
    if plan is None or plan[0] is not spec:
        kinds = tuple((_STRIDED if p.name in spec.strided else _CONTIGUOUS, None) if isinstance(p.type, Array)
                      else (_SCALAR, p.type.numpy) for p in spec.typed.params)
        plan = _PLANS[id(spec)] = (spec, kinds)
    return plan[1]


def _multiprocessors() -> int:
    import cupy
    dev = cupy.cuda.runtime.getDevice()
    sm = _SM.get(dev)
    if sm is None:
        sm = _SM[dev] = cupy.cuda.Device(dev).attributes["MultiProcessorCount"]
    return sm


_SM: dict[int, int] = {}


def entry_of(spec: Specialization) -> Any:
    """The compiled callable of a specialisation (None for the interpreter)."""
    if spec.backend == "interp":
        return None
    if spec.backend == "cuda":
        from ..backends.cuda import compile_kernel
        return compile_kernel(spec.source, spec.entry)
    from ..backends.numba_cpu import compile_source
    return compile_source(spec.source, spec.entry, cache_dir() / "numba")
