"""CuPy arrays host code makes while a program records (docs/host-code.md#device-arrays-made-by-host-code).

NumPy's host operations on active arrays are followed (hostcode.py) or refused; CuPy's cannot be: its
ndarray methods cannot be wrapped. So a launch that reads `w = u.copy()` of a CuPy `u` would run with the
derivative through the copy dropped. What can be seen is the allocation: CuPy's memory pool calls a
`cupy.cuda.MemoryHook` on every allocation and free. While a program with CuPy arguments records, this
module keeps the allocations made since it started (gradkern's own, saves and prints, included: they are
never a launch's argument) that no launch has yet overwritten whole. A launch or rule call that would read
one (record.refuse_host_made) is refused before anything runs: its contents came from CuPy code the program
cannot differentiate. Once a launch overwrites such an array whole without reading it (`gk.copy`, `gk.fill`,
any kernel the analysis finds storing every element first), its contents are the program's own.
"""

from __future__ import annotations

import bisect
import sys
from typing import Any

from ..errors import ProgramError
from ..runtime.arrays import is_cupy_array
from .guard import name_of


class FreshDeviceMemory:
    """The live device allocations made while recording, as sorted start addresses and their ends."""

    def __init__(self, cupy: Any):
        self.starts: list[int] = []
        self.ends: dict[int, int] = {}
        self.hook = _hook_class(cupy)(self)

    def allocated(self, ptr: int, size: int) -> None:
        if ptr not in self.ends:
            bisect.insort(self.starts, ptr)
        self.ends[ptr] = ptr + max(int(size), 1)

    def freed(self, ptr: int) -> None:
        if self.ends.pop(ptr, None) is not None:
            del self.starts[bisect.bisect_left(self.starts, ptr)]

    def _start(self, a: Any) -> int | None:
        """The start of the recorded allocation holding CuPy array `a`'s first element, or None."""
        if not self.starts or not is_cupy_array(a) or a.size == 0:
            return None
        ptr = a.data.ptr
        i = bisect.bisect_right(self.starts, ptr) - 1
        if i >= 0 and ptr < self.ends[self.starts[i]]:
            return self.starts[i]
        return None

    def holds(self, a: Any) -> bool:
        """Whether `a` lies in memory host code allocated while recording that no launch has overwritten."""
        return self._start(a) is not None

    def written(self, a: Any) -> None:
        """A launch overwrites `a` whole: its contents are the program's from now on."""
        start = self._start(a)
        if start is not None:
            self.freed(start)


def host_made_error(a: Any, where: str) -> ProgramError:
    """The refusal of a launch or rule call `where` that would read `a`, which `holds`."""
    return ProgramError(
        f"{where} takes {name_of(a)} (a CuPy array, {a.shape} {a.dtype}), which host code made while the program "
        "records and which no launch has overwritten: gradkern cannot follow CuPy's operations (`u.copy()`, "
        "`cupy.concatenate`, `cupy.asarray`), so a derivative through its contents would be dropped; nothing ran "
        "and no shadow was changed",
        hint="make it with a launch that writes it whole: gk.copy(w, u) into w = cupy.empty_like(u), "
             "gk.fill(w, value); or make it before the program and pass it in (docs/host-code.md)")


def fresh_memory(call: tuple) -> FreshDeviceMemory | None:
    """A tracker for a program called with `call`, where CuPy is imported and an argument is a CuPy array."""
    cupy = sys.modules.get("cupy")
    if cupy is None or not any(is_cupy_array(a) for a in call):
        return None
    return FreshDeviceMemory(cupy)


_HOOKS: dict[int, type] = {}


def _hook_class(cupy: Any) -> type:
    """A `cupy.cuda.MemoryHook` subclass telling a FreshDeviceMemory of each allocation and free (once per
    cupy module: a test may install a stand-in)."""
    cls = _HOOKS.get(id(cupy))
    if cls is None:
        base = cupy.cuda.MemoryHook

        class _Fresh(base):
            def __init__(self, tracker: FreshDeviceMemory):
                super().__init__()
                self.tracker = tracker
                self.name = f"gradkern-fresh-{id(self)}"  # CuPy refuses two active hooks of one name

            def malloc_postprocess(self, **kw: Any) -> None:
                self.tracker.allocated(kw["mem_ptr"], kw["mem_size"])

            def free_postprocess(self, **kw: Any) -> None:
                self.tracker.freed(kw["mem_ptr"])

        cls = _HOOKS[id(cupy)] = _Fresh
    return cls
