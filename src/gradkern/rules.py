"""Custom rules (docs/custom-rules.md, after EnzymeRules): the derivative of something
gradkern cannot see into (a library call, host code, a kernel with a
hand-written adjoint), given by the user as an augmented primal, a reverse
and a forward, and checked here: the registered functions' signatures when
they are registered, what a reverse or forward returns when it returns.

A call of a rule function goes to the recorder a program installs while it
records (recording.py, the hook launches go through too; program/rulestep.py
records it); without one it is a plain call of the primal. This module imports
only annotations, errors and that hook: it knows nothing of arrays beyond the
annotations the runtime builds for it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .annotations import Active, Annotation
from .errors import RuleError
from .recording import active_recorder, recording


@dataclass(frozen=True)
class RuleConfig:
    """What a rule is told about its call (docs/custom-rules.md)."""

    needs_primal: bool  # False only when every Duplicated argument is DuplicatedNoNeed
    needs_shadow: bool  # some argument carries a shadow (or tangent)
    width: int  # k of BatchDuplicated (then `.dval` is a tuple of k shadows), else 1
    overwritten: tuple[bool, ...]  # per argument: may its memory change between the call and its reverse


def _names(rule: str, params: tuple, names: Any, what: str) -> frozenset | None:
    if names is None:
        return None
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise RuleError(f"rule '{rule}': {what}= takes a tuple of parameter names, got {names!r}",
                        hint=f"{what}=('x',)")
    unknown = [n for n in names if n not in params]
    if unknown:
        raise RuleError(f"rule '{rule}': {what}= names {', '.join(repr(n) for n in unknown)}, which "
                        f"{'is not a parameter' if len(unknown) == 1 else 'are not parameters'} of the function "
                        f"({', '.join(params)})")
    return frozenset(names)


class CustomRule:
    """A function with a custom rule: call it as the function; register the
    rule's parts with `.augmented_primal`, `.reverse` and `.forward`."""

    def __init__(self, fn: Callable, reads: Any = None, writes: Any = None):
        if not callable(fn):
            raise RuleError(f"gk.custom_rule decorates a function, got {type(fn).__name__}")
        self.primal = fn
        self.name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
        try:
            self.signature = inspect.signature(fn)
        except (TypeError, ValueError):
            raise RuleError(f"rule '{self.name}': its function has no signature gradkern can read",
                            hint="wrap it in a Python function with named parameters") from None
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        odd = [p.name for p in self.signature.parameters.values() if p.kind not in kinds]
        if odd:
            raise RuleError(f"rule '{self.name}': parameter '{odd[0]}' is variadic or keyword-only; a rule's "
                            "function takes named positional parameters, one per argument its rule sees")
        self.params = tuple(self.signature.parameters)
        self.reads = _names(self.name, self.params, reads, "reads")
        self.writes = _names(self.name, self.params, writes, "writes")
        self._augmented: Callable | None = None
        self._reverse: Callable | None = None
        self._forward: Callable | None = None
        # the argument patterns whose reverse returned well-formed entries once (program/rulestep.py)
        self.validated: set[tuple] = set()
        functools.update_wrapper(self, fn)

    def __repr__(self) -> str:
        return f"<custom rule {self.name}>"

    def __reduce__(self) -> str:
        """Pickled by reference, by module and qualified name, as a kernel is (docs/errors.md#hostile-inputs)."""
        return self.name

    # -- registration -------------------------------------------------------------------------------------------
    def _check_signature(self, f: Any, role: str, lead: tuple) -> None:
        want = ", ".join(lead + self.params)
        if not callable(f):
            raise RuleError(f"the {role} of rule '{self.name}' must be a function ({want}), got {type(f).__name__}")
        try:
            inspect.signature(f).bind(*range(len(lead) + len(self.params)))
        except TypeError:
            raise RuleError(f"the {role} of rule '{self.name}' must take ({want}); it takes "
                            f"{inspect.signature(f)}") from None
        except ValueError:
            pass  # no signature to read (a builtin): its call will say

    def augmented_primal(self, f: Callable) -> Callable:
        """Register (config, *args) -> tape: the primal (when config.needs_primal) and what the reverse needs
        that the runtime does not keep. Optional: without it the primal runs and the tape is None."""
        self._check_signature(f, "augmented_primal", ("config",))
        self._augmented = f
        return f

    def reverse(self, f: Callable) -> Callable:
        """Register (config, tape, *args) -> one entry per argument (the derivative of each Active one,
        None for the others), accumulating into the arguments' `.dval` in place."""
        self._check_signature(f, "reverse", ("config", "tape"))
        self._reverse = f
        return f

    def forward(self, f: Callable) -> Callable:
        """Register (config, *args) -> None: the primal (when config.needs_primal), and each written argument's
        `.dval` made the tangent of its new value."""
        self._check_signature(f, "forward", ("config",))
        self._forward = f
        return f

    # -- calls ----------------------------------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        recorder = active_recorder()
        if recorder is None:
            return self.primal(*args, **kwargs)
        return recorder.rule(self, self.bind(args, kwargs))

    def bind(self, args: tuple, kwargs: dict) -> tuple:
        """The call's arguments in parameter order, defaults filled in."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise RuleError(f"rule '{self.name}' called with arguments its function does not take: {e}") from None
        bound.apply_defaults()
        return tuple(bound.arguments[p] for p in self.params)

    def kept(self, n: int) -> bool:
        """Whether the runtime keeps argument n's post-call contents for the reverse (`reads`)."""
        return self.reads is None or self.params[n] in self.reads

    def may_write(self, n: int) -> bool:
        """Whether the rule may write argument n (`writes`; every argument when it is not given)."""
        return self.writes is None or self.params[n] in self.writes

    def require(self, mode: str) -> None:
        """RuleError unless the part `mode` ("reverse" or "forward") is registered: raised when the mode
        first reaches the rule, before anything of the call runs."""
        if (self._reverse if mode == "reverse" else self._forward) is None:
            raise RuleError(f"rule '{self.name}' has no {mode} rule, and {mode} mode reached a call of it",
                            hint=f"register one with @{self.__name__}.{mode}")

    def run_augmented(self, config: RuleConfig, args: tuple) -> Any:
        """The augmented primal (the primal alone when none is registered); returns the rule's tape."""
        with recording(None):
            if self._augmented is None:
                if config.needs_primal:
                    self.primal(*(a.val for a in args))
                return None
            return self._augmented(config, *args)

    def run_reverse(self, config: RuleConfig, tape: Any, args: tuple) -> tuple:
        """The reverse; returns its entries checked: a float (k floats in vector mode) per Active argument."""
        self.require("reverse")
        with recording(None):
            got = self._reverse(config, tape, *args)
        return self.check_reverse(got, args, config.width)

    def run_forward(self, config: RuleConfig, args: tuple) -> None:
        self.require("forward")
        with recording(None):
            got = self._forward(config, *args)
        if got is not None:
            raise RuleError(f"the forward rule of '{self.name}' returned {_describe(got)}; it returns None and "
                            "writes the tangents of the arguments it changes into their .dval")

    # -- structure checks -------------------------------------------------------------------------------------------
    def check_reverse(self, got: Any, args: tuple, width: int) -> tuple:
        n = len(self.params)
        if not isinstance(got, (tuple, list)) or len(got) != n:
            raise RuleError(f"the reverse of rule '{self.name}' returned {_describe(got)}; it must return a tuple of "
                            f"{n} entries, one per argument ({', '.join(self.params)}): the derivative of each "
                            "gk.Active argument, None for the others")
        out = []
        for name, a, g in zip(self.params, args, got):
            if not isinstance(a, Active):
                if g is not None:
                    kind = type(a).__name__ if isinstance(a, Annotation) else "Const"
                    raise RuleError(f"the reverse of rule '{self.name}' returned a derivative for argument '{name}', "
                                    f"which is {kind}, not Active; return None for it",
                                    hint="derivatives of arrays are accumulated into their .dval in place")
                out.append(None)
            else:
                out.append(self._derivative(name, g, width))
        return tuple(out)

    def _derivative(self, name: str, g: Any, width: int) -> Any:
        where = f"the reverse of rule '{self.name}' returned"
        if width == 1:
            return _scalar(g, f"{where} {_describe(g)} for the Active argument '{name}', where a real number "
                              "(its derivative) is due")
        lanes = _lanes(g)
        if lanes is None or len(lanes) != width:
            raise RuleError(f"{where} {_describe(g)} for the Active argument '{name}' in vector mode; a tuple of "
                            f"{width} real numbers (one derivative per lane) is due")
        return tuple(_scalar(x, f"{where} {_describe(x)} in lane {k} for the Active argument '{name}', where a "
                                "real number is due") for k, x in enumerate(lanes))


def _lanes(g: Any) -> list | None:
    if isinstance(g, (tuple, list)):
        return list(g)
    if getattr(g, "ndim", None) == 1:
        return [g[k] for k in range(g.shape[0])]
    return None


def _scalar(g: Any, message: str) -> float:
    """`g` as a float if it is a real number (a 0-d array included); RuleError otherwise."""
    if isinstance(g, bool) or g is None or isinstance(g, complex):
        raise RuleError(message)
    if getattr(g, "ndim", 0) != 0 or getattr(getattr(g, "dtype", None), "kind", "f") not in "fiu":
        raise RuleError(message, hint="derivatives of arrays go into their .dval in place; an Active argument's is "
                                      "a number")
    try:
        return float(g)
    except (TypeError, ValueError):
        raise RuleError(message) from None


def _describe(x: Any) -> str:
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of {len(x)} entries"
    if hasattr(x, "shape") and getattr(x, "ndim", 0):
        return f"an array of shape {tuple(x.shape)}"
    return repr(x) if x is None or isinstance(x, (int, float)) else f"a {type(x).__name__}"


def custom_rule(fn: Callable | None = None, *, reads: Any = None, writes: Any = None) -> Any:
    """`@gk.custom_rule` or `@gk.custom_rule(reads=(...), writes=(...))`: give `fn` a custom rule.

    `reads`: the array arguments whose contents right after the call the reverse reads; in a program the
    runtime keeps them for it (copy-on-write, only if a later step overwrites them) and tells the rule
    `config.overwritten` False for them, True for the other arrays. Default: every array argument.
    `writes`: the arguments the function may write. Default: every array argument. In a program a
    written argument's old contents are saved when an earlier step's reverse still reads them, and a
    shadow is made for it; naming the written ones spares the others that copy (a write outside
    `writes` raises RuleError)."""
    if fn is None:
        return lambda f: CustomRule(f, reads, writes)
    return CustomRule(fn, reads, writes)
