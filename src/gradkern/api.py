"""The user's verbs (docs/getting-started.md). `autodiff` and `autodiff_thunk` dispatch on
what `f` is: a kernel, a function with a custom rule (§7), or a program (§6:
a Python function that launches kernels)."""

from __future__ import annotations

from typing import Any

from . import program
from .annotations import Forward, Reverse
from .errors import LaunchError
from .kernel import DeviceFunction, KernelFunction
from .program.savepool import POOL
from .rules import CustomRule
from .runtime.binding import check_keywords
from .runtime.forward import forward as forward_kernel
from .runtime.inspect import Inspection
from .runtime.inspect import inspect as inspect_kernel
from .runtime.jacobian import jacobian
from .runtime.launch import launch
from .runtime.reverse import Tape
from .runtime.reverse import reverse as reverse_kernel
from .runtime.reverse import split as split_kernel


def _not_differentiable(f: Any, verb: str) -> LaunchError:
    return LaunchError(f"{verb} takes a @gk.kernel or a Python function that launches kernels (a program); "
                       f"got {type(f).__name__}")


def _is_program(f: Any) -> bool:
    return callable(f) and not isinstance(f, (KernelFunction, DeviceFunction))


def autodiff(f: Any, *args: Any, mode: Any = Reverse, dim: Any = None, backend: str | None = None,
             **keywords: Any) -> Any:
    """Differentiate `f` at the annotated arguments (docs/getting-started.md, docs/shadows-and-modes.md).

    Reverse mode (default): shadows of Duplicated arrays are accumulated in
    place; returns one entry per argument, the derivative for Active scalars
    (summed over threads), None for the others. Forward mode: each shadow of
    an array `f` changes becomes the tangent of its new value; returns None."""
    if keywords:
        if _is_program(f):
            program.refuse_keywords("gk.autodiff", f, keywords, "mode=, dim= and backend=")
        check_keywords("gk.autodiff", f, keywords, "mode=, dim= and backend=")
    if mode is not Reverse and mode is not Forward:
        raise LaunchError(f"mode must be gk.Reverse or gk.Forward, got {mode!r}")
    if isinstance(f, KernelFunction):
        if mode is Forward:
            return forward_kernel(f, args, dim, backend)
        return reverse_kernel(f, args, dim, backend)
    if _is_program(f):
        if dim is not None or backend is not None:
            raise LaunchError("dim= and backend= belong to the launches inside a program, not to autodiff of it")
        if isinstance(f, CustomRule):
            return program.rule_alone(f, args, "forward" if mode is Forward else "reverse")
        return program.forward(f, args) if mode is Forward else program.reverse(f, args)
    raise _not_differentiable(f, "autodiff")


def autodiff_thunk(f: Any, *activities: Any, dim: Any = None, backend: str | None = None, **keywords: Any):
    """Split reverse mode (Enzyme's autodiff_thunk): returns (forward, reverse).

    `activities` gives each argument's annotation class (gk.Duplicated,
    gk.Active, gk.Const, ...) or an annotated example. `forward(*args)` runs
    the augmented primal (primals updated as by launch) and returns a Tape;
    `reverse(*args, tape)` runs the reverse on the arrays in their post-forward
    state and returns what autodiff would."""
    if keywords:
        if _is_program(f):
            program.refuse_keywords("gk.autodiff_thunk", f, keywords, "dim= and backend=")
        check_keywords("gk.autodiff_thunk", f, keywords, "dim= and backend=")
    if isinstance(f, KernelFunction):
        return split_kernel(f, activities, dim, backend)
    if _is_program(f):
        if dim is not None or backend is not None:
            raise LaunchError("dim= and backend= belong to the launches inside a program, not to autodiff_thunk")
        return program.split(f, activities, alone=isinstance(f, CustomRule))
    raise _not_differentiable(f, "autodiff_thunk")


def inspect(f: Any, *args: Any, dim: Any = None, mode: Any = None, backend: str | None = None,
            **keywords: Any) -> Any:
    """What gradkern generates for a kernel call (runtime.inspect: nothing compiled or run), or what a
    program's reverse keeps, launch by launch: `gk.inspect(tape)` of a ProgramTape, or `gk.inspect(fn, *args)`,
    which records the program (running it, as autodiff_thunk's forward does) and frees the tape."""
    if keywords:
        if _is_program(f) and not isinstance(f, program.ProgramTape):
            program.refuse_keywords("gk.inspect", f, keywords, "dim=, mode= and backend=")
        check_keywords("gk.inspect", f, keywords, "dim=, mode= and backend=")
    if isinstance(f, program.ProgramTape):
        if args or dim is not None or mode is not None or backend is not None:
            raise LaunchError("gk.inspect(tape) takes the program tape alone")
        return f.inspect()
    if _is_program(f):
        if dim is not None or mode is not None or backend is not None:
            raise LaunchError("dim=, mode= and backend= belong to kernels; gk.inspect of a program records it "
                              "in reverse mode")
        return program.inspect(f, args)
    return inspect_kernel(f, *args, dim=dim, mode=mode, backend=backend)


__all__ = ["autodiff", "autodiff_thunk", "launch", "inspect", "Inspection", "jacobian", "Tape"]


def release_memory() -> int:
    """Give back the buffers gradkern keeps between calls for reuse (docs/programs.md#saved-copies-and-the-sweep):
    the free buffers of programs' saved copies and of their temporaries' shadows, the arrays host code's copies
    inside programs are lent (docs/programs.md#program-shapes; those still in use stay with their users), and
    the CPU backend's zeroed private copies. Returns the bytes freed. Nothing a tape holds is touched."""
    from .backends.numba_plan import SLOTS

    return POOL.clear() + SLOTS.clear()

