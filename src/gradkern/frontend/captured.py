"""The module-level names a kernel read when it was lowered, and whether they still hold what it read
(docs/kernel-language.md, "Module-level names are read once"). A kernel's free names are constants, folded
in when it is made (as Numba freezes a function's globals when it compiles it); a launch after one of them
was rebound (`SCALE = 3.0`) is refused by the runtime, never run on the old value silently. Tables are tuples
(immutable); of a module-level array a kernel may read only the shape, which `resize` can change in place."""

from __future__ import annotations

import ast
import types
from typing import Any

import numpy as np

from .callables import DeviceFunctionMarker

_MISSING = object()
_NUMBERS = (bool, int, float, complex, np.bool_, np.integer, np.floating)
_FOLDED = (*_NUMBERS, tuple, DeviceFunctionMarker)  # attribute values a kernel folds in
_FIXED = ("numpy", "math", "cmath", "gradkern", "builtins")  # modules whose attributes are not rebound


class Captured:
    """(source, name, attributes) -> (source, name, attributes, value read, an array's shape): a source is the
    function's module globals (a dict) or its closure's cell; attributes, the dotted path read from the name."""

    __slots__ = ("entries",)

    def __init__(self):
        self.entries: dict = {}

    def add(self, fn: Any, name: str, value: Any) -> Any:
        """`name`, read as `value` by function `fn` (through its closure's cell, else its module's globals),
        kept; modules and names that are not `fn`'s (builtins, gradkern's own) are not. Returns `value`."""
        if not isinstance(value, types.ModuleType):
            self._keep(fn, name, (), value)
        return value

    def attribute(self, fn: Any, e: ast.Attribute, value: Any) -> Any:
        """A dotted name `fn` read (`cfg.dt`, `config.SCALE`, `mod.helper`), kept where its value is folded into
        the kernel (a number, a tuple, a device function) and its root is not NumPy, math or gradkern (whose
        attributes do not change). Returns `value`."""
        if not isinstance(value, _FOLDED):
            return value
        attrs: list[str] = []
        node: Any = e
        while isinstance(node, ast.Attribute):
            attrs.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            root = _read(fn, node.id)
            if not (isinstance(root, types.ModuleType) and root.__name__.split(".")[0] in _FIXED):
                self._keep(fn, node.id, tuple(reversed(attrs)), value)
        return value

    def _keep(self, fn: Any, name: str, attrs: tuple, value: Any) -> None:
        code = fn.__code__
        if name in code.co_freevars:
            source: Any = fn.__closure__[code.co_freevars.index(name)]
        elif name in fn.__globals__ and (attrs or fn.__globals__[name] is value):
            source = fn.__globals__
        else:
            return
        key = (id(source), name, attrs)
        if key not in self.entries:
            saved = value.shape if isinstance(value, np.ndarray) else None
            self.entries[key] = (source, name, attrs, value, saved)

    def merge(self, other: Captured | None) -> None:
        """What a device function inlined into this one read."""
        if other is not None:
            for key, entry in other.entries.items():
                self.entries.setdefault(key, entry)

    def changed(self) -> tuple[str, Any, Any] | None:
        """(name, the value read, the value now) of the first name that no longer holds what was read, or None.
        An array resized in place comes back as (name, 'its shape ... when read', the array)."""
        for source, name, attrs, value, saved in self.entries.values():
            if type(source) is dict:
                now = source.get(name, _MISSING)
            else:
                try:
                    now = source.cell_contents
                except ValueError:  # the cell was emptied (`del`)
                    now = _MISSING
            for a in attrs:
                now = getattr(now, a, _MISSING)
            if now is value:
                if saved is not None and now.shape != saved:
                    return ".".join((name, *attrs)), f"shape {saved} when the kernel was made", now
                continue
            if _same(value, now):
                continue
            return ".".join((name, *attrs)), value, now
        return None


def _read(fn: Any, name: str) -> Any:
    """What `name` is in function `fn`'s closure or module now."""
    code = fn.__code__
    if name in code.co_freevars:
        try:
            return fn.__closure__[code.co_freevars.index(name)].cell_contents
        except ValueError:
            return _MISSING
    return fn.__globals__.get(name, _MISSING)


def _same(a: Any, b: Any) -> bool:
    """Equal numbers of one type (a name rebound to an equal value: `SCALE = 2.0` again), equal tuples, arrays
    of one shape (a kernel reads only a module-level array's shape)."""
    if type(a) is not type(b):
        return False
    if type(a) is np.ndarray:
        return a.shape == b.shape
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
