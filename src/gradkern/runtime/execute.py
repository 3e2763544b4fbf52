"""Compile and run one specialisation through its backend object. Takes
parameter values in the kernel's order and never looks inside kernel bodies."""

from __future__ import annotations

from typing import Any

from ..backends import backend
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
    """Run one specialisation over `dim` with the values of its parameters."""
    backend(spec.backend).run(spec.typed, spec.code, entry_of(spec), spec.parallel, dim, values)
