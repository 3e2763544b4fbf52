"""Compile and run one specialisation through its backend object. Takes
parameter values in the kernel's order and never looks inside kernel bodies."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends import backend
from ..errors import LaunchError
from ..pipeline import Specialization
from .cache import cache_dir

_ENTRIES: dict[int, tuple[Specialization, Any]] = {}


def entry_of(spec: Specialization) -> Any:
    """The compiled callable of a specialisation (None for the interpreter),
    compiled once: specialisations live as long as their kernel's cache."""
    hit = _ENTRIES.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    entry = backend(spec.backend).compile(spec.code, cache_dir())
    _ENTRIES[id(spec)] = (spec, entry)
    return entry


def run_spec(spec: Specialization, dim: tuple[int, ...], values: list) -> None:
    """Run one specialisation over `dim` with the values of its parameters.
    A bounds-checked one (GRADKERN_BOUNDSCHECK=1) also takes the out-of-bounds
    flag, read back after the launch: LaunchError names the access and a thread."""
    if not spec.bounds_sites:
        backend(spec.backend).run(spec.typed, spec.code, entry_of(spec), spec.parallel, dim, values)
        return
    found = run_flagged(spec, dim, values)
    if found is not None:
        raise out_of_bounds(spec, dim, values, *found, "GRADKERN_BOUNDSCHECK=1 caught it; the index was replaced "
                            "by 0, so other elements may have been changed")


def run_flagged(spec: Specialization, dim: tuple[int, ...], values: list) -> tuple[int, int] | None:
    """Run a bounds-checked specialisation; (access site, flat thread) of an
    access it found outside its array, or None."""
    be = backend(spec.backend)
    flag = be.array_module().zeros(1, np.int64)
    be.run(spec.typed, spec.code, entry_of(spec), spec.parallel, dim, [*values, flag])
    found = int(flag[0])  # on the GPU, the one read-back a checked launch costs
    if not found:
        return None
    return (found - 1) % len(spec.bounds_sites), (found - 1) // len(spec.bounds_sites)


def out_of_bounds(spec: Specialization, dim, values, site: int, thread: int, note: str) -> LaunchError:
    """The error for access `site` of a bounds-checked specialisation, made by `thread` (flat)."""
    access = spec.bounds_sites[site]
    names = [p.name for p in spec.typed.params]
    shape = tuple(values[names.index(access.array)].shape) if access.array in names else "?"
    t = tuple(int(x) for x in np.unravel_index(thread, dim))
    return outside_error(spec.typed.name, t, f"{access.kind} {access.text}", access.loc, access.array, shape, note)


def outside_error(kernel: str, thread: tuple[int, ...], access: str, loc, array: str, shape, note: str) -> LaunchError:
    """LaunchError: `thread` makes `access` (e.g. "reads x[i]") at `loc`, outside `array` of `shape`."""
    where = f" ({loc})" if loc else ""
    return LaunchError(f"kernel '{kernel}': thread {thread} {access}{where}, outside '{array}' of shape {shape} "
                       f"({note})", hint="check the launch domain and the index expressions")
