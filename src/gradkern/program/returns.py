"""What a program or a checkpointed step returns is not differentiated (docs/programs.md, "What a program
returns"): derivatives travel through the arrays a program writes, and every differentiating verb drops the
return value. A returned value that carries a derivative (an Active scalar, a scalar or array host code computed
from an active array, a temporary a launch wrote from active inputs) is most likely the loss the user meant to
differentiate; dropping it silently would leave every derivative zero, so it is refused naming what came."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ProgramError
from ..runtime.arrays import byte_bounds
from .derived import DerivedScalar
from .hostcode import TrackedArray, tracker
from .scalars import ActiveScalar, ReadScalar

_LOOKED_INTO = 64  # items of nested tuples, lists and dicts looked at (a returned list of diagnostics stays cheap)


def _items(value: Any, out: list) -> None:
    if len(out) >= _LOOKED_INTO:
        return
    if isinstance(value, (tuple, list)):
        for v in value:
            _items(v, out)
    elif isinstance(value, dict):
        for v in value.values():
            _items(v, out)
    else:
        out.append(value)


def _carried(x: Any, host: Any) -> str | None:
    """How `x` carries a derivative of this program call that no argument's shadow carries, or None."""
    if isinstance(x, ActiveScalar):
        return _scalar_carried(x, host)
    origin = getattr(x, "_gk_origin", None) if isinstance(x, (DerivedScalar, TrackedArray)) else None
    if origin is None and isinstance(x, TrackedArray) and x.size:
        origin = host.origin(x)
    if origin is not None:
        if origin.host is not host or origin.argument:
            return None
        kind = "scalar" if isinstance(x, DerivedScalar) else "array"
        return f"a{'' if kind == 'scalar' else 'n'} {kind} host code computed from a temporary: {origin.describe()}"
    # a plain view says no derivative is wanted (host-code.md); a plain array that owns its memory is a temporary
    # allocated without an argument (`np.zeros(n)`), whose shadow says whether launches made it active
    plain_own = type(x) is np.ndarray and x.base is None
    if not (isinstance(x, TrackedArray) or plain_own) or x.size == 0:
        return None
    lo, hi = byte_bounds(x)
    covering = [e for e in host.shadows.entries if lo < e.hi and e.lo < hi]
    if covering and all(e.internal for e in covering):
        return (f"a temporary array (shape {tuple(x.shape)}) that launches wrote from active inputs (the program's "
                "own shadow of it is dropped with it)")
    return None


def _scalar_carried(x: ActiveScalar, host: Any) -> str | None:
    """`_carried` of an Active scalar: one computed from an Active argument carries its derivative; one computed
    from reads only (hostreads.py) carries what the read arrays' shadows do not where a read is of a temporary (a
    read of an argument's memory is carried by that argument's shadow, as a derived scalar's was before session 57)."""
    stack, seen, temporary = [x], set(), None
    while stack:
        s = stack.pop()
        if id(s) in seen:
            continue
        seen.add(id(s))
        if s.parents:
            stack.extend(p for p, _ in s.parents)
        elif not isinstance(s, ReadScalar):
            return "an Active scalar (a value computed from an Active argument on the host)"
        elif temporary is None and s._gk_origin is not None and s._gk_origin.host is host \
                and not s._gk_origin.argument:
            temporary = s._gk_origin
    return None if temporary is None else f"a scalar host code computed from a temporary: {temporary.describe()}"


def refuse_derived_return(result: Any, fn: Callable, verb: str, what: str) -> None:
    """ProgramError when `result` (what `fn` returned while a program records) carries a derivative."""
    if result is None:
        return
    host = tracker()
    if host is None or not host.checking:  # not recording, or a sweep's recomputation (checked when recorded)
        return
    items: list = []
    _items(result, items)
    for x in items:
        why = _carried(x, host)
        if why is not None:
            name = getattr(fn, "__name__", None) or type(fn).__name__
            raise ProgramError(
                f"{verb}: {what} '{name}' returned {why}; what a {what} returns is not differentiated (derivatives "
                "travel through the arrays a program writes), so its derivative would be lost",
                hint="write the value into an array argument with a kernel and seed that argument's shadow (a "
                     "loss: gk.Duplicated(E, np.ones(1))); return float(s) or a.view(np.ndarray) to return the "
                     "value without its derivative")
