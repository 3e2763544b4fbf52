"""What a kernel body may call, as the frontend sees it.

The decorator objects of kernel.py (`KernelFunction`, `DeviceFunction`)
derive from these markers, so frontend/lower.py recognises them by isinstance
without importing kernel.py, which imports the frontend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .lower import Lowered


class KernelMarker:
    """A @gk.kernel. A kernel body may not call one."""

    name: str


class DeviceFunctionMarker:
    """A @gk.func: inlined at each call site (frontend/inline.py)."""

    name: str

    def lowered(self, stack: tuple[str, ...] = ()) -> Lowered:
        """The function lowered afresh for one call site; `stack` holds the
        names of the functions being lowered around it, to reject recursion."""
        raise NotImplementedError
