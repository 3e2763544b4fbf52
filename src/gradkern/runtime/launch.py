"""`gk.launch`: bind and validate the arguments, fetch or build the
specialisation for their signature, check bounds and races, run it. The runtime never
looks inside kernel bodies: it asks the pipeline for a specialisation and a
backend object to run it."""

from __future__ import annotations

from typing import Any

from ..errors import LaunchError
from ..kernel import KernelFunction
from .binding import bind
from .bounds_check import check_bounds
from .execute import run_spec
from .race_check import check_races
from .recording import active_recorder
from .specialize import primal_specialization


def check_kernel(kernel: Any) -> KernelFunction:
    if not isinstance(kernel, KernelFunction):
        raise LaunchError(f"the first argument must be a @gk.kernel, got {type(kernel).__name__}",
                          hint="decorate the function with @gk.kernel")
    return kernel


def launch(kernel: KernelFunction, dim: Any, *args: Any, backend: str | None = None) -> None:
    """Run `kernel` over the launch domain `dim` (int or tuple of 1-3 ints).
    Arrays are updated in place; every argument is validated first. Inside a
    program being differentiated, the program's recorder takes the launch."""
    k = check_kernel(kernel)
    recorder = active_recorder()
    if recorder is not None:
        recorder.launch(k, dim, args, backend)
        return
    spec, b = prepare_launch(k, dim, args, backend)
    run_spec(spec, b.dim, list(b.kernel_values))


def prepare_launch(k: KernelFunction, dim: Any, args: tuple, backend: str | None):
    """Validate a launch, fetch its specialisation, check bounds and races; touches no buffer.
    Returns (specialisation, binding)."""
    b = bind(k.ir, dim, args, backend)
    spec = primal_specialization(k, b)
    check_bounds(spec, b)
    check_races(spec, b, k.name)
    return spec, b
