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
    """Launch on CuPy's current stream, passing what the kernel's `abi` lists."""
    from ..backends.cuda import BLOCK, grid_for
    args = []
    for kind, i, a, convert in _marshalling(spec):
        if kind == 0:
            args.append(np.int64(dim[i]))
        elif kind == 1:
            args.append(convert(values[i]) if convert is not None else values[i])
        elif kind == 2:
            args.append(np.int64(values[i].shape[a]))
        else:
            v = values[i]
            args.append(np.int64(v.strides[a] // v.itemsize))
    total = 1
    for n in dim:
        total *= n
    grid = grid_for(total, _multiprocessors()) if spec.parallel else 1
    kernel((grid,), (BLOCK if spec.parallel else 1,), tuple(args))


_PLANS: dict[int, tuple] = {}


def _marshalling(spec: Specialization) -> tuple:
    """The abi as (kind, index, axis, scalar conversion) tuples, once per specialisation."""
    plan = _PLANS.get(id(spec))
    if plan is None or plan[0] is not spec:
        kinds = {"dim": 0, "value": 1, "extent": 2, "stride": 3}
        items = []
        for item in spec.abi:
            kind = kinds[item[0]]
            i = item[1]
            p = spec.typed.params[i] if kind else None
            convert = p.type.numpy if kind == 1 and not isinstance(p.type, Array) else None
            items.append((kind, i, item[2] if len(item) > 2 else 0, convert))
        plan = _PLANS[id(spec)] = (spec, tuple(items))
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
