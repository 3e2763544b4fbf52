"""The decorator objects: `@gk.kernel` → KernelFunction, `@gk.func` → DeviceFunction.

A kernel is parsed and lowered at decoration (so syntax errors show at once);
a name it uses that is not defined yet (a helper defined further down the
module) is looked up again at first launch. Specialisations are cached per
argument signature in memory; compiled code is cached on disk by the backend.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from .errors import KernelSyntaxError, LaunchError
from .frontend.callables import DeviceFunctionMarker, KernelMarker
from .frontend.captured import Captured, describe
from .frontend.lower import Lowered, Unresolved, lower_function, lower_kernel
from .frontend.parse import ParsedFunction, parse_function
from .frontend.vector_calls import takes_vectors
from .ir import nodes as ir


class SpecCache(dict):
    """A kernel's specialisations by key. `generation` counts the times it was emptied: the runtime's
    prepared calls (runtime/call.py, docs/prepared-call.md) hold specialisations and are valid for one
    generation."""

    generation = 0

    def clear(self) -> None:
        self.generation += 1
        super().clear()

    def __delitem__(self, key) -> None:
        self.generation += 1
        super().__delitem__(key)

    def pop(self, *args):
        self.generation += 1
        return super().pop(*args)

    def popitem(self):
        self.generation += 1
        return super().popitem()


class KernelFunction(KernelMarker):
    """A compute kernel: launched over a 1-3-D domain with `gk.launch`."""

    def __init__(self, fn: Callable[..., Any]):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = fn.__name__
        self._parsed: ParsedFunction = parse_function(fn)
        self._ir: ir.Kernel | None = None
        self._specs: SpecCache = SpecCache()
        self._lock = threading.Lock()
        self._captured: Captured | None = None  # the module-level names it read, where any (`check_module_names`)
        try:
            self._lower()
        except Unresolved:
            pass  # retried at first use, when later definitions exist

    def _lower(self) -> None:
        got: list = []
        self._ir = lower_kernel(self._parsed, got)
        self._captured = got[0] if got[0].entries else None

    @property
    def ir(self) -> ir.Kernel:
        """The untyped IR (device functions inlined)."""
        if self._ir is None:
            self._lower()
        return self._ir

    def check_module_names(self) -> None:
        """LaunchError, before anything runs, if a module-level name the kernel read when it was made (its
        constants, tables and device functions: frontend/captured.py) no longer holds what it read."""
        hit = self._captured.changed() if self._captured is not None else None
        if hit is not None:
            name, old, now = hit
            raise LaunchError(f"kernel '{self.name}' read the module-level name '{name}' when it was made "
                              f"({describe(old)}), and it is {describe(now)} now: a kernel's module-level "
                              "names are constants, read once (docs/kernel-language.md, \"Module-level names "
                              "are read once\"); nothing ran",
                              hint=f"pass '{name}' as an argument, or make the kernel again after changing it "
                                   f"({self.name} = gk.kernel({self.name}.fn))")

    def __call__(self, *args, **kwargs):
        raise LaunchError(f"kernel '{self.name}' cannot be called directly",
                            hint=f"launch it: gk.launch({self.name}, dim, *args)")

    def __repr__(self) -> str:
        return f"<gradkern kernel {self.name}>"

    def __reduce__(self) -> str:
        """Pickled by reference, as the function it decorates is: by module and qualified name, so another
        process (multiprocessing) gets its own, with its own caches; one defined inside a function cannot be
        pickled, as such a function cannot (docs/errors.md#hostile-inputs)."""
        return self.__qualname__


class DeviceFunction(DeviceFunctionMarker):
    """A scalar device function, inlined into the kernels that call it. Called
    from Python, it runs as the plain Python function it is."""

    def __init__(self, fn: Callable[..., Any]):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = fn.__name__
        self._parsed = self.parsed = parse_function(fn)
        try:
            lower_function(self._parsed, is_kernel=False)  # report syntax errors at decoration
        except Unresolved:
            pass
        except KernelSyntaxError:
            if not takes_vectors(self.parsed):  # else its calls pass vectors, and report what they cannot
                raise

    def lowered(self, stack: tuple[str, ...] = (), widths: tuple[int, ...] | None = None) -> Lowered:
        """Lowered afresh for each call site, so `stack` catches recursion through any path; `widths`: the
        vectors the call passes (frontend/vector_calls.py)."""
        return lower_function(self._parsed, is_kernel=False, stack=stack, widths=widths)

    def __call__(self, *args):
        return self.fn(*args)

    def __repr__(self) -> str:
        return f"<gradkern device function {self.name}>"

    def __reduce__(self) -> str:
        """Pickled by reference, as the function it decorates is: by module and qualified name, so another
        process (multiprocessing) gets its own, with its own caches; one defined inside a function cannot be
        pickled, as such a function cannot (docs/errors.md#hostile-inputs)."""
        return self.__qualname__


def kernel(fn: Callable[..., Any]) -> KernelFunction:
    """Decorate a compute kernel written in the kernel language (docs/kernel-language.md)."""
    return KernelFunction(fn)


def func(fn: Callable[..., Any]) -> DeviceFunction:
    """Decorate a device function that kernels (and other device functions) call."""
    return DeviceFunction(fn)
