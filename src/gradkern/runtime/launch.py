"""`gk.launch`: prepare the call (runtime/call.py: bind and validate the arguments, fetch or build the
specialisation for their signature, check bounds and races) and run it. The runtime never looks inside
kernel bodies: it asks the pipeline for a specialisation and a backend object to run it."""

from __future__ import annotations

from typing import Any

from ..errors import LaunchError
from ..kernel import KernelFunction
from ..recording import active_recorder
from .binding import check_keywords
from .call import Bound, PreparedCall, prepare


def check_kernel(kernel: Any) -> KernelFunction:
    if not isinstance(kernel, KernelFunction):
        raise LaunchError(f"the first argument must be a @gk.kernel, got {type(kernel).__name__}",
                          hint="decorate the function with @gk.kernel")
    return kernel


def launch(kernel: KernelFunction, dim: Any, *args: Any, backend: str | None = None, **keywords: Any) -> None:
    """Run `kernel` over the launch domain `dim` (int or tuple of 1-3 ints).
    Arrays are updated in place; every argument is validated first. Inside a
    program being differentiated, the program's recorder takes the launch."""
    if keywords:
        check_keywords("gk.launch", kernel, keywords, "backend=")
    k = kernel if type(kernel) is KernelFunction else check_kernel(kernel)
    recorder = active_recorder()
    if recorder is not None:
        recorder.launch(k, dim, args, backend)
        return
    call, bound = prepare(k, args, dim, backend, "launch")
    for r in call.runs:
        r(call.dim, bound.values)


def run(call: PreparedCall, bound: Bound) -> None:
    """Run a prepared launch (or every run of a prepared call in order, with the kernel's values alone)."""
    for r in call.runs:
        r(call.dim, bound.values)
