"""What a kernel body may call, as the frontend sees it.

The decorator objects of kernel.py (`KernelFunction`, `DeviceFunction`)
derive from these markers, so frontend/lower.py recognises them by isinstance
without importing kernel.py, which imports the frontend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import KernelSyntaxError, Loc
from ..ir import nodes as ir


class Unresolved(KernelSyntaxError):
    """A free name that is not defined (yet): lowering may be retried at launch (kernel.py)."""


@dataclass
class Lowered:
    """A lowered function: parameter names, body, the names it uses as arrays,
    whether it returns a value, the tid arity it unpacks (0 if none) and how
    many values it returns (frontend/multi_returns.py)."""

    name: str
    params: tuple[str, ...]
    body: tuple[ir.Stmt, ...]
    array_names: set[str]
    returns_value: bool
    tid_arity: int
    loc: Loc
    results: int = 1
    captured: Any = None  # the module-level names it read (frontend/captured.py)


class KernelMarker:
    """A @gk.kernel. A kernel body may not call one."""

    name: str


class DeviceFunctionMarker:
    """A @gk.func: inlined at each call site (frontend/inline.py)."""

    name: str
    parsed: Any  # its frontend/parse.py ParsedFunction

    def lowered(self, stack: tuple[str, ...] = (), widths: tuple[int, ...] | None = None) -> Lowered:
        """The function lowered afresh for one call site; `stack` holds the
        names of the functions being lowered around it, to reject recursion;
        `widths` those of the vectors the call passes (frontend/vector_calls.py)."""
        raise NotImplementedError
