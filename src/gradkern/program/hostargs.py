"""A launch's or rule call's arguments unwrapped for the runtime inside a program (record.py, checkpoint.py):
TrackedArrays as plain views the host-write guard follows, `gk.Const(x)` as x, and a gk.ProgramError naming the
launch, the argument, the host operation and its line where host code computed one from an active array
(docs/host-code.md "What is refused"). Moved out of hostcode.py (session 57), which keeps the tracked arrays and
their NumPy operations."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..annotations import Const
from ..errors import ProgramError
from ..recording import active_recorder
from .derived import DerivedScalar, constant
from .derived import user_frame as _user_frame
from .derived import where as _where
from .hostcode import _FIX, HostTracker, TrackedArray, _names, plain
from .scalars import ActiveScalar


def unwrap_args(args: tuple, what: Any, params: Any = ()) -> tuple:
    """A launch's or rule call's arguments as the runtime takes them: TrackedArrays as plain views,
    `gk.Const(x)` as x. ProgramError if one was computed on the host from an active array (and is not
    wrapped in Const): `what` names the launch (or returns its name, called only then: a time loop's
    launches make no string), `params` its parameters (the kernel's, with their `.name`, or the rule's names)."""
    recorder = active_recorder()
    host, guard = getattr(recorder, "host", None), getattr(recorder, "guard", None)
    if host is not None:
        out = _unwrap_plain(args, host, guard)
        if out is not None:
            return out
    if callable(what):
        what = what()
    # every launch of a time loop comes here: the arguments are looked at in one pass where no Const wraps a
    # TrackedArray (then the guard follows the tracked ones first, as below) (docs/programs.md#host-cost-per-step)
    tracked = None
    for a in args:
        t = type(a)
        if t is TrackedArray or (t is not float and t is not int and t is not ActiveScalar
                                 and isinstance(a.val if isinstance(a, Const) else a, TrackedArray)):
            if tracked is None:
                tracked = []
            tracked.append(a.val if isinstance(a, Const) else a)
    if guard is not None and tracked:  # locked with their buffers from now on
        guard.follow(tracked)
    checking = host is not None and host.checking
    tainted = checking and bool(host.tainted)
    out, views = [], {}  # an array passed twice is one view twice (a rule's in-place argument pair)
    for n, a in enumerate(args):
        t = type(a)
        if t is TrackedArray:
            if checking and (a._gk_origin is not None or tainted) and host.origin(a) is not None:
                _refuse_origin(host, a, _param(params, n), what)
            v = views.get(id(a))
            if v is None:
                v = views[id(a)] = plain(a) if host is None else host.plain_view(a)
            out.append(v)
            continue
        if t is float or t is int or t is ActiveScalar:
            out.append(a)
            continue
        if isinstance(a, Const):
            v = a.val
            out.append(views.setdefault(id(v), host.plain_view(v) if host is not None and isinstance(v, TrackedArray)
                                        else plain(constant(v))))
            continue
        if not isinstance(a, np.ndarray):
            if isinstance(a, DerivedScalar):
                if checking and a._gk_origin is not None and a._gk_origin.host is host:  # type(s)(x): as np.float64(s)
                    _refuse_scalar(a, _param(params, n), what)
                a = constant(a)
            out.append(a)
            continue
        if checking and host.origin(a) is not None:
            _refuse_origin(host, a, _param(params, n), what)
        if isinstance(a, TrackedArray):
            v = views.get(id(a))
            if v is None:
                v = views[id(a)] = plain(a) if host is None else host.plain_view(a)
            out.append(v)
        else:
            out.append(a)
    return tuple(out)


def _unwrap_plain(args: tuple, host: HostTracker, guard: Any) -> tuple | None:
    """`unwrap_args` where every argument is a TrackedArray, a float, an int or an ActiveScalar (a time loop's
    launches) and none was computed on the host from an active array: each TrackedArray followed by the guard
    where it does not hold it yet, then its plain view, in one pass (following one TrackedArray changes no other
    one's flags, so following each just before its view is following them all first); None otherwise (the full
    path, which follows them all before it refuses one). docs/programs.md#host-cost-per-step"""
    held = guard.arrays if guard is not None else None
    checking = host.checking
    tainted = checking and bool(host.tainted)
    out = []
    for a in args:
        t = type(a)
        if t is TrackedArray:
            if checking and (a._gk_origin is not None or tainted) and host.origin(a) is not None:
                return None
            if held is not None:
                ref = held.get(id(a))
                if ref is None or ref() is not a:
                    guard.follow((a,))
            out.append(host.plain_view(a))  # the same view for an array passed twice (plain_view keeps it)
        elif t is float or t is int or t is ActiveScalar:
            out.append(a)
        else:
            return None
    return tuple(out)


def _param(params: Any, n: int) -> str:
    """How a message names a launch's or rule call's argument n: by its parameter's name."""
    if n >= len(params):
        return f"argument {n}"
    return f"argument '{getattr(params[n], 'name', params[n])}'"


def _refuse_scalar(a: Any, param: str, what: str) -> None:
    """The ProgramError of `unwrap_args` for a scalar argument (`param`) that host code reduced from an active
    array (derived.py)."""
    raise ProgramError(f"{what} takes a scalar ({param}) at {_where(_user_frame())} that host code computed "
                       f"from an active array: {a._gk_origin.describe()}; its derivative would be lost, so it did "
                       "not run and no shadow changed",
                       hint="compute it in a kernel (gk.atomic_add sums into a small array that the next launch "
                            "reads), or pass float(x) or gk.Const(x) to say that no derivative through it is wanted")


def _refuse_origin(host: HostTracker, a: Any, param: str, what: str) -> None:
    """The ProgramError of `unwrap_args` for an argument (`param`) that host code computed from an active array."""
    frame = _user_frame()
    raise ProgramError(f"{what} takes {_names(frame, [plain(a)])} ({param}) at {_where(frame)}, "
                       f"which host code computed from an active array: {host.origin(a).describe()}; its "
                       "derivative would be lost, so it did not run and no shadow changed", hint=_FIX)
