"""The one specialisation cache: for a kernel and a validated binding, the
pipeline's output for a mode (primal, reverse or forward) and an activity
pattern, built once and kept on the kernel. The pipeline merges aliases and
picks the backend object itself; the runtime only supplies the key."""

from __future__ import annotations

from typing import Any

from ..backends import backend
from ..kernel import KernelFunction
from ..pipeline import (
    ForwardSpecialization,
    ReverseSpecialization,
    Specialization,
    specialize,
    specialize_forward,
    specialize_reverse,
)
from ..pipeline_cache import specialization
from .arrays import is_array
from .binding import Binding
from .cache import cache_dir


def _stored(kind: str, fn, *args: Any) -> Any:
    """`fn(*args)`, the pipeline of `kind`, loaded from the disk cache where it was stored (pipeline_cache.py)."""
    return specialization(kind, args, lambda: fn(*args), cache_dir() / "specs")


def strided_lanes(b: Binding, shadows: dict[str, tuple]) -> frozenset[tuple[str, int]]:
    """The (parameter, lane) shadows that are not C-contiguous, where the backend's key holds strides."""
    if not backend(b.backend).strides_in_key:
        return frozenset()
    return frozenset((n, lane) for n, dxs in shadows.items() for lane, dx in enumerate(dxs)
                     if is_array(dx) and not dx.flags.c_contiguous)


def _cached(kernel: KernelFunction, key: tuple, build) -> Any:
    spec = kernel._specs.get(key)
    if spec is None:
        with kernel._lock:
            spec = kernel._specs.get(key)
            if spec is None:
                spec = kernel._specs[key] = build()
    return spec


def primal_specialization(kernel: KernelFunction, b: Binding) -> Specialization:
    """What `gk.launch` runs for binding `b`."""
    return _cached(kernel, b.key, lambda: _stored("primal", specialize, kernel.ir, b.type_map(kernel.ir), len(b.dim),
                                                  b.backend, frozenset(b.strided), b.aliases))


def reverse_specialization(kernel: KernelFunction, b: Binding, shadows: dict, active: tuple,
                           no_need: tuple = (), lanes: int = 1) -> ReverseSpecialization:
    """Reverse mode for binding `b`, shadows (one per lane) by parameter, Active scalars."""
    strided = strided_lanes(b, shadows)
    no_need = frozenset(n for n in no_need if n in shadows)
    key = ("reverse", b.key, tuple(sorted(shadows)), active, tuple(sorted(strided)), tuple(sorted(no_need)), lanes)
    return _cached(kernel, key, lambda: _stored(
        "reverse", specialize_reverse, kernel.ir, b.type_map(kernel.ir), len(b.dim), b.backend, set(shadows),
        set(active), frozenset(b.strided), strided, no_need, lanes, b.aliases))


def forward_specialization(kernel: KernelFunction, b: Binding, tangents: dict, lanes: int,
                           primal_stores: bool = True) -> ForwardSpecialization:
    """Forward mode for binding `b` and tangents (one per lane) by parameter;
    `primal_stores=False`: the tangent work alone (pipeline.specialize_forward)."""
    strided = strided_lanes(b, tangents)
    key = ("forward", b.key, tuple(sorted(tangents)), tuple(sorted(strided)), lanes, primal_stores)

    def build():
        arrays = {n for n in tangents if is_array(tangents[n][0])}
        return _stored("forward", specialize_forward, kernel.ir, b.type_map(kernel.ir), len(b.dim), b.backend,
                       arrays, set(tangents) - arrays, frozenset(b.strided), strided, lanes, b.aliases, primal_stores)
    return _cached(kernel, key, build)
