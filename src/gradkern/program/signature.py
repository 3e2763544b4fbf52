"""The program function's parameters (docs/programs.md#arguments-of-a-program): the arguments given to
`gk.autodiff(fn, ...)`, `autodiff_thunk`, `gk.inspect` and forward mode are checked against `fn`'s
signature before anything runs, so that too many or too few of them is a `gk.ProgramError` naming what `fn`
takes and what came (not `fn`'s own TypeError after a shadow was registered or a buffer written), and every
message about an argument names it by its parameter's name, as a kernel's messages do."""

from __future__ import annotations

import inspect
from collections.abc import Callable

from ..errors import ProgramError
from .returns import refuse_derived_return

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _signature(fn: Callable) -> inspect.Signature | None:
    got = getattr(fn, "signature", None)  # a function with a custom rule keeps its own (rules.py)
    if isinstance(got, inspect.Signature):
        return got
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or an extension's callable: nothing to read
        return None


def _title(fn: Callable, sig: inspect.Signature | None) -> str:
    name = getattr(fn, "__name__", None) or getattr(fn, "name", None) or type(fn).__name__
    return f"{name}{sig}" if sig is not None else str(name)


def names(fn: Callable, count: int) -> list[str]:
    """The names messages give arguments 0 .. count - 1 of `fn`: its positional parameters' names, then
    `args[k]` for what its `*args` takes; `argument n` where the signature says nothing."""
    sig = _signature(fn)
    params = list(sig.parameters.values()) if sig is not None else []
    positional = [p.name for p in params if p.kind in _POSITIONAL]
    star = next((p.name for p in params if p.kind is inspect.Parameter.VAR_POSITIONAL), None)
    out = []
    for n in range(count):
        if n < len(positional):
            out.append(positional[n])
        elif star is not None:
            out.append(f"{star}[{n - len(positional)}]")
        else:
            out.append(f"argument {n}")
    return out


_LAZY = ((inspect.isgeneratorfunction, "a generator function", "remove its yield"),
         (inspect.iscoroutinefunction, "an async function", "make it a plain def"),
         (inspect.isasyncgenfunction, "an async generator function", "make it a plain def without yield"))


def refuse_lazy(fn: Callable, verb: str, what: str = "program") -> None:
    """ProgramError for a generator or async function: calling one runs none of its body, so its launches would
    never happen and the derivative would be silently zero (docs/programs.md#arguments-of-a-program)."""
    for test, kind, fix in _LAZY:
        if test(fn):
            name = getattr(fn, "__name__", None) or type(fn).__name__
            raise ProgramError(f"{verb}: {what} '{name}' is {kind}; calling it runs none of its body, so its "
                               f"launches would never run; {'nothing' if what == 'program' else 'no step'} ran",
                               hint=fix)


def check_ran(result: object, fn: Callable, verb: str, what: str = "program") -> None:
    """ProgramError when calling `fn` gave a generator or a coroutine (a callable object or a wrapper around a
    lazy function, which `refuse_lazy` cannot see): none of its body ran. The object is closed unrun. A returned
    value that carries a derivative is refused too (returns.py)."""
    if inspect.isgenerator(result) or inspect.iscoroutine(result) or inspect.isasyncgen(result):
        closing = getattr(result, "close", None) if not inspect.isasyncgen(result) else None
        if closing is not None:
            closing()  # a coroutine never awaited would warn at its collection
        name = getattr(fn, "__name__", None) or type(fn).__name__
        raise ProgramError(f"{verb}: {what} '{name}' returned a {type(result).__name__} instead of running: none "
                           "of its body ran, so its launches would never run", hint="remove its yield, or its async")
    refuse_derived_return(result, fn, verb, what)


def check_count(fn: Callable, count: int, verb: str) -> None:
    """ProgramError unless `fn` can be called with `count` positional arguments (its signature, read without
    calling it) and is no generator or async function (refuse_lazy); nothing is done otherwise."""
    refuse_lazy(fn, verb)
    sig = _signature(fn)
    if sig is None:
        return
    try:
        sig.bind(*range(count))
    except TypeError:
        params = list(sig.parameters.values())
        required = [p.name for p in params if p.default is p.empty
                    and p.kind in (*_POSITIONAL, inspect.Parameter.KEYWORD_ONLY)]
        positional = [p for p in params if p.kind in _POSITIONAL]
        star = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
        keyword_only = [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is p.empty]
        if keyword_only:
            expected = (f"keyword-only parameter{'s' if len(keyword_only) > 1 else ''} "
                        f"{', '.join(repr(k) for k in keyword_only)} without a default, which a program cannot be "
                        "given (its arguments are passed by position)")
            hint = "give them defaults, or make them positional"
        else:
            low = sum(1 for p in positional if p.default is p.empty)
            many = f"at least {low}" if star else f"{low}" if low == len(positional) else \
                f"{low} to {len(positional)}"
            missing = [p.name for p in positional[count:] if p.default is p.empty]
            expected = f"{many} argument{'' if many == '1' else 's'}"
            if missing:
                expected += f"; {', '.join(repr(m) for m in missing)} {'is' if len(missing) == 1 else 'are'} missing"
            hint = f"{verb}({getattr(fn, '__name__', 'fn')}, {', '.join(required) or '...'})"
        raise ProgramError(f"{verb} of program {_title(fn, sig)} was given {count} argument"
                           f"{'' if count == 1 else 's'}; it takes {expected}; nothing ran", hint=hint) from None


def refuse_keywords(verb: str, fn: Callable, keywords: dict, takes: str) -> None:
    """ProgramError naming the first keyword `verb` was given that is not its own (`takes`): a program's
    arguments are passed by position, as a kernel's are."""
    if not keywords:
        return
    word = next(iter(keywords))
    sig = _signature(fn)
    params = list(sig.parameters) if sig is not None else []
    name = getattr(fn, "__name__", "fn")
    if word in params:
        raise ProgramError(f"{verb} got '{word}' as a keyword; a program's arguments are passed by position "
                           f"(program {_title(fn, sig)}); nothing ran",
                           hint=f"{verb}({name}, {', '.join(params)})")
    raise ProgramError(f"{verb} got the keyword '{word}', which is neither one of {verb}'s ({takes}) nor a "
                       f"parameter of program {_title(fn, sig)}; nothing ran",
                       hint=f"pass the program's arguments by position: {verb}({name}, {', '.join(params)})")


def label(name: str) -> str:
    """How a message names an argument: 'u', or argument 3 where the signature gave no name."""
    return name if name.startswith("argument ") else f"'{name}'"

