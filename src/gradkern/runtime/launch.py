"""`gk.launch`: bind and validate the arguments, fetch or build the
specialisation for their signature, check bounds and races, run it. The runtime never
looks inside kernel bodies: it asks the pipeline for a specialisation and a
backend object to run it."""

from __future__ import annotations

from typing import Any

from ..annotations import Const
from ..errors import LaunchError
from ..kernel import KernelFunction
from ..pipeline import Specialization
from .binding import Binding, bind_entry, cached_entry, from_template, scalar_values
from .bounds_check import check_bounds
from .execute import run_spec
from .plans import Checks, Runner, checks_settled, int_positions, valid
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
    k = kernel if type(kernel) is KernelFunction else check_kernel(kernel)
    recorder = active_recorder()
    if recorder is not None:
        recorder.launch(k, dim, args, backend)
        return
    entry = cached_entry(k.ir, dim, args, backend)
    plan = None if entry is None else entry.plan
    if valid(plan, k):  # a signature launched before (runtime/plans.py)
        values = scalar_values(entry.template, args)
        if not plan.checks.settled(values):
            plan.check(from_template(entry.template, args))
        plan.runner(plan.dim, values)
        return
    if any(isinstance(a, Const) for a in args):  # gk.Const(x): x, with no derivative wanted (docs/host-code.md)
        launch(k, dim, *(a.val if isinstance(a, Const) else a for a in args), backend=backend)
        return
    spec, b = prepare_launch(k, dim, args, backend)
    run_spec(spec, b.dim, list(b.kernel_values))


class LaunchPlan:
    """A launch signature's plan: its specialisation, run directly, and its checks' outcomes."""

    __slots__ = ("kernel", "generation", "spec", "dim", "runner", "checks")

    def __init__(self, k: KernelFunction, spec: Specialization, b: Binding):
        self.kernel, self.generation = k, k._specs.generation
        self.spec, self.dim, self.runner = spec, b.dim, Runner(spec)
        self.checks = Checks(int_positions(spec))
        if checks_settled(spec, b):
            self.checks.record(b.kernel_values)

    def check(self, b: Binding) -> None:
        """Check bounds and races for binding `b` of this signature; remember the outcome where it is settled."""
        check_bounds(self.spec, b)
        check_races(self.spec, b, self.kernel.name)
        if checks_settled(self.spec, b):
            self.checks.record(b.kernel_values)


def prepare_launch(k: KernelFunction, dim: Any, args: tuple, backend: str | None):
    """Validate a launch, fetch its specialisation, check bounds and races; touches no buffer.
    Returns (specialisation, binding). A signature prepared before reuses its plan."""
    b, entry = bind_entry(k.ir, dim, args, backend)
    plan = None if entry is None else entry.plan
    if valid(plan, k):
        if not plan.checks.settled(b.kernel_values):
            plan.check(b)
        return plan.spec, b
    spec = primal_specialization(k, b)
    check_bounds(spec, b)
    check_races(spec, b, k.name)
    if entry is not None:
        entry.plan = LaunchPlan(k, spec, b)
    return spec, b
