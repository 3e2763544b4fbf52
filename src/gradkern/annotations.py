"""Activity annotations (Enzyme's vocabulary, docs/getting-started.md) and mode markers.

An annotation wraps a primal argument and says how its derivative is carried:
`Const(x)` (none), `Active(s)` (a scalar whose derivative is returned),
`Duplicated(x, dx)` (a shadow buffer updated in place), `DuplicatedNoNeed`
(the same, but the primal result need not be computed) and
`BatchDuplicated(x, (dx1, ..., dxk))` (k shadows at once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import AnnotationError


class Mode:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"gk.{self.name}"


Reverse = Mode("Reverse")
Forward = Mode("Forward")


@dataclass(frozen=True)
class Annotation:
    val: Any


class Const(Annotation):
    """No derivative flows through this argument."""

    def __init__(self, val: Any, *shadow: Any):
        if shadow:
            from .errors import AnnotationError
            raise AnnotationError("gk.Const takes the primal only, but a shadow was given",
                                  hint="use gk.Duplicated(x, dx) to get a derivative for x")
        object.__setattr__(self, "val", val)


@dataclass(frozen=True)
class Active(Annotation):
    """A scalar whose derivative `autodiff` returns."""


_MISSING = object()


def _pair(cls: type, val: Any, second: Any, extra: tuple, what: str) -> None:
    """AnnotationError (not Python's TypeError) when a newcomer leaves out the shadow or adds an argument."""
    if val is _MISSING or second is _MISSING or extra:
        from .errors import AnnotationError
        given = sum(x is not _MISSING for x in (val, second)) + len(extra)
        raise AnnotationError(f"gk.{cls.__name__} takes the primal and {what}, got {given} argument"
                              f"{'' if given == 1 else 's'}",
                              hint=f"gk.{cls.__name__}(x, {'dx' if what == 'its shadow' else '(dx1, dx2)'}): the "
                                   "shadow is a buffer of x's shape and dtype (np.zeros_like(x)) updated in place")


@dataclass(frozen=True, init=False)
class Duplicated(Annotation):
    """A primal with its shadow: the derivative lives in `dval`, updated in place."""

    dval: Any

    def __init__(self, val: Any = _MISSING, dval: Any = _MISSING, *extra: Any):
        _pair(type(self), val, dval, extra, "its shadow")
        object.__setattr__(self, "val", val)
        object.__setattr__(self, "dval", dval)


@dataclass(frozen=True, init=False)
class DuplicatedNoNeed(Duplicated):
    """As Duplicated, but the primal's new value need not be computed."""


@dataclass(frozen=True, init=False)
class BatchDuplicated(Annotation):
    """A primal with k shadows, differentiated together (vector mode)."""

    dvals: tuple

    def __init__(self, val: Any = _MISSING, dvals: Any = _MISSING, *extra: Any):
        _pair(type(self), val, dvals, extra, "a tuple of its k shadows")
        object.__setattr__(self, "val", val)
        object.__setattr__(self, "dvals", dvals)

    @property
    def dval(self) -> tuple:
        """The k shadows, under the name a rule reads (docs/custom-rules.md: `.dval` is a tuple of k shadows)."""
        return self.dvals


def primal(arg: Any) -> Any:
    """The primal value of a possibly annotated argument."""
    return arg.val if isinstance(arg, Annotation) else arg


def activity_pattern(activities: tuple, labels: list) -> tuple:
    """autodiff_thunk's activities as annotation classes, for a kernel and a program alike: each an annotation
    class or an annotated example; anything else (a plain number, `int`, None) an AnnotationError naming the
    argument by its label (`labels`, quoted names), before anything runs (docs/shadows-and-modes.md, "Fused and
    split")."""
    for name, a in zip(labels, activities):
        if not isinstance(a, Annotation) and not (isinstance(a, type) and issubclass(a, Annotation)):
            raise AnnotationError(f"autodiff_thunk: the activity of {name} must be an annotation class "
                                  f"(gk.Const, gk.Active, gk.Duplicated, ...) or an annotated example; got {a!r}")
    return tuple(a if isinstance(a, type) else type(a) for a in activities)
