"""The module-level names a kernel read when it was lowered, and whether they still hold what it read
(docs/kernel-language.md, "Module-level names are read once"). A kernel's free names are constants, folded
in when it is made (as Numba freezes a function's globals when it compiles it); a launch after one of them
was rebound (`SCALE = 3.0`) is refused by the runtime, never run on the old value silently. Tables are tuples
(immutable); of a module-level array a kernel may read only the shape, which `resize` can change in place."""

from __future__ import annotations

import types
from typing import Any

import numpy as np

_MISSING = object()
_NUMBERS = (bool, int, float, complex, np.bool_, np.integer, np.floating)


class Captured:
    """(source, name) -> (source, name, value read, an array's shape): a source is the function's module
    globals (a dict) or its closure's cell."""

    __slots__ = ("entries",)

    def __init__(self):
        self.entries: dict = {}

    def add(self, fn: Any, name: str, value: Any) -> Any:
        """`name`, read as `value` by function `fn` (through its closure's cell, else its module's globals),
        kept; modules and names that are not `fn`'s (builtins, gradkern's own) are not. Returns `value`."""
        if isinstance(value, types.ModuleType):
            return value
        code = fn.__code__
        if name in code.co_freevars:
            source: Any = fn.__closure__[code.co_freevars.index(name)]
        elif fn.__globals__.get(name, _MISSING) is value:
            source = fn.__globals__
        else:
            return value
        key = (id(source), name)
        if key not in self.entries:
            saved = value.shape if isinstance(value, np.ndarray) else None
            self.entries[key] = (source, name, value, saved)
        return value

    def merge(self, other: Captured | None) -> None:
        """What a device function inlined into this one read."""
        if other is not None:
            for key, entry in other.entries.items():
                self.entries.setdefault(key, entry)

    def changed(self) -> tuple[str, Any, Any] | None:
        """(name, the value read, the value now) of the first name that no longer holds what was read, or None.
        An array resized in place comes back as (name, 'its shape ... when read', the array)."""
        for source, name, value, saved in self.entries.values():
            if type(source) is dict:
                now = source.get(name, _MISSING)
            else:
                try:
                    now = source.cell_contents
                except ValueError:  # the cell was emptied (`del`)
                    now = _MISSING
            if now is value:
                if saved is not None and now.shape != saved:
                    return name, f"shape {saved} when the kernel was made", now
                continue
            if saved is None and _same(value, now):
                continue
            return name, value, now
        return None


def _same(a: Any, b: Any) -> bool:
    """Equal numbers of one type (a name rebound to an equal value: `SCALE = 2.0` again), equal tuples."""
    if type(a) is not type(b):
        return False
    if isinstance(a, _NUMBERS):
        return a == b or (a != a and b != b)
    if type(a) is tuple:
        try:
            return bool(a == b)
        except (TypeError, ValueError):
            return False
    return False


def describe(v: Any) -> str:
    """A value as the refusal names it."""
    if v is _MISSING:
        return "no longer defined"
    text = v if isinstance(v, str) else repr(v)
    return text if len(text) <= 60 else text[:57] + "..."
