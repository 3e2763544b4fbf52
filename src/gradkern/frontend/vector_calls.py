"""Small vectors as parameters and results of device functions (session 58; docs/kernel-language.md, "Vectors
through device functions"), as Warp's `spring_force(xa: wp.vec3, ...) -> wp.vec3` and CUDA's float3 helpers.

A @gk.func is lowered afresh for each call site (frontend/inline.py), so its parameters take the widths of the
call's arguments: the call `f(a, s)` with `a` a vec3 and `s` a number calls a *specialisation* of f (VectorCall)
whose parameters are `a`'s components, named as the scalariser names a vector local's components
(`_gkv_a_x`, ...), then `s`; inside f, `a` is a vec3 local from the start (the scalariser's widths are seeded).
A returned vector `return e` becomes `t = e; return t.x, t.y, t.z`, so f returns several numbers
(frontend/multi_returns.py), which the caller unpacks into temporaries: `_gkv7_x, _gkv7_y, _gkv7_z = f'(...)`,
hoisted before the statement that uses the call. Everything stays in the Python AST before lowering: the IR,
AD and the backends see the same scalar code a hand-inlined body gives. What the callee refuses for the widths it
is given (a vec2 whose `.z` it reads, a number it passes to gk.length) is refused at the call's line, naming
the function and the widths, with the callee's own line in the message.
"""

from __future__ import annotations

import ast
import builtins
import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import intrinsics as gk
from ..errors import KernelSyntaxError
from ..ir.names import VECTOR
from .callables import DeviceFunctionMarker, Lowered
from .parse import ParsedFunction, assigned_names

COMPONENTS = "xyzw"
CONSTRUCTORS = {id(gk.vec2): 2, id(gk.vec3): 3, id(gk.vec4): 4}
LOADS = {id(gk.load_vec2): 2, id(gk.load_vec3): 3, id(gk.load_vec4): 4}
STORES = {id(gk.store_vec2): 2, id(gk.store_vec3): 3, id(gk.store_vec4): 4}
API = frozenset({*CONSTRUCTORS, *LOADS, *STORES, id(gk.dot), id(gk.cross), id(gk.length), id(gk.normalize)})
_ANALYSING = threading.local()  # .stack: the device functions whose result width this thread is finding (recursion)


def component(name: str, c: int) -> str:
    return f"{VECTOR}{name}_{COMPONENTS[c]}"


@dataclass
class Vectors:
    """What the vector rewrites of one function share (frontend/rewrites.py): the widths of the parameters its
    call passes vectors to, whether it has vectors at all (found once), and the widths its device functions
    return, by (function, argument widths)."""

    seeds: dict[str, int]
    present: bool
    call_widths: dict[tuple, int | None] = field(default_factory=dict)

    @staticmethod
    def of(tree: ast.FunctionDef, resolve: Callable[[ast.expr], Any], seeds: dict[str, int]) -> Vectors:
        return Vectors(seeds, bool(seeds) or uses_vectors(tree, resolve))


def describe(widths: tuple[int, ...]) -> str:
    return ", ".join(f"vec{w}" if w else "number" for w in widths)


class VectorCall(DeviceFunctionMarker):
    """A device function specialised to vector arguments (`widths[k]` the width of the k-th argument, 0 for a
    number or an array): its lowering takes each vector's components as parameters."""

    def __init__(self, fn: DeviceFunctionMarker, widths: tuple[int, ...]):
        self.fn, self.widths, self.name, self.parsed = fn, widths, fn.name, fn.parsed

    def lowered(self, stack: tuple[str, ...] = (), widths: tuple[int, ...] | None = None) -> Lowered:
        return self.fn.lowered(stack, self.widths)


def flat_params(names: tuple[str, ...], widths: tuple[int, ...] | None) -> tuple[tuple[str, ...], dict[str, int]]:
    """(the parameters of a specialisation, the vector parameters' widths)."""
    if not widths:
        return names, {}
    flat: list[str] = []
    for name, w in zip(names, widths):
        flat += [component(name, c) for c in range(w)] if w else [name]
    return tuple(flat), {n: w for n, w in zip(names, widths) if w}


def resolver(parsed: ParsedFunction) -> Callable[[ast.expr], Any]:
    """What a callee of `parsed`'s body names (None for its locals and for what is undefined), without
    recording it: the lowerer of the function records what it reads when it lowers it."""
    fn = parsed.fn
    free = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    local = assigned_names(parsed.tree) | {a.arg for a in parsed.tree.args.args}

    def lookup(name: str) -> Any:
        if name in free:
            try:
                return free[name].cell_contents
            except ValueError:  # an empty cell: defined later in the enclosing function
                return None
        return fn.__globals__.get(name, getattr(builtins, name, None))

    def resolve(e: ast.expr) -> Any:
        if isinstance(e, ast.Name):
            return None if e.id in local else lookup(e.id)
        if isinstance(e, ast.Attribute):
            base = resolve(e.value)
            return None if base is None else getattr(base, e.attr, None)
        return None
    return resolve


def _fail_in(parsed: ParsedFunction) -> Callable[..., Any]:
    def fail(node: ast.AST, message: str, hint: str | None = None, cls=KernelSyntaxError):
        raise cls(message, parsed.loc(node), hint)
    return fail


def takes_vectors(parsed: ParsedFunction, seen: tuple[int, ...] = ()) -> bool:
    """Whether the function may be given vectors: it reads a local's or a parameter's component (`p.x`), calls
    the vector API or a device function that may. Lowered with numbers at its decoration, such a function may
    fail where a call passing vectors works: its errors are reported at its calls (kernel.py, inline.py)."""
    local = assigned_names(parsed.tree) | {a.arg for a in parsed.tree.args.args}
    if any(isinstance(n, ast.Attribute) and n.attr in COMPONENTS and isinstance(n.value, ast.Name)
           and n.value.id in local for n in ast.walk(parsed.tree)):
        return True
    return uses_vectors(parsed.tree, resolver(parsed), (*seen, id(parsed)))


def uses_vectors(tree: ast.FunctionDef, resolve: Callable[[ast.expr], Any], seen: tuple[int, ...] = ()) -> bool:
    """Whether the function's code has vectors: it calls the vector API, or a device function that may take
    them."""
    callees = [resolve(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)]
    if any(id(fn) in API for fn in callees):
        return True
    return any(isinstance(fn, DeviceFunctionMarker) and id(fn.parsed) not in seen and takes_vectors(fn.parsed, seen)
               for fn in callees)


def _call_signature(sc: Any, e: ast.Call, fn: DeviceFunctionMarker) -> tuple[int, ...]:
    n = len(fn.parsed.tree.args.args)
    if e.keywords:  # as for a call passing numbers (frontend/lower.py), not "takes 2 arguments, got 1"
        sc.fail(e, f"keyword arguments are not supported in calls of device functions: '{ast.unparse(e)}'",
                f"pass '{fn.name}' its {n} arguments by position")
    if len(e.args) != n or any(isinstance(a, ast.Starred) for a in e.args):
        sc.fail(e, f"'{fn.name}' takes {n} arguments, got {len(e.args)}")
    return tuple(sc.width(a) or 0 for a in e.args)


def call_width(sc: Any, e: ast.Call, fn: DeviceFunctionMarker) -> int | None:
    """The width of the vector a call of a device function returns (None: it returns numbers or nothing)."""
    widths = _call_signature(sc, e, fn)
    key = (id(fn), widths)
    if key not in sc.call_widths:
        stack = _ANALYSING.__dict__.setdefault("stack", [])
        if id(fn) in stack:
            sc.fail(e, f"recursive call to '{fn.name}' is not supported")
        stack.append(id(fn))
        try:
            sc.call_widths[key] = _result_width(type(sc), fn, widths)
        except KernelSyntaxError as err:
            sc.fail(e, called_here(fn, widths, err), err.hint, cls=type(err))
        finally:
            stack.pop()
    return sc.call_widths[key]


def _result_width(scalarizer: type, fn: DeviceFunctionMarker, widths: tuple[int, ...]) -> int | None:
    parsed = fn.parsed
    params, seeds = flat_params(tuple(a.arg for a in parsed.tree.args.args), widths)
    fail = _fail_in(parsed)
    sc = scalarizer(resolver(parsed), fail, params, Vectors(seeds, True))
    sc.collect(parsed.tree)
    return _returned(parsed.tree, sc, fail)


def _returned(tree: ast.FunctionDef, sc: Any, fail: Callable[..., Any]) -> int | None:
    """The width of the vector every `return` of `tree` gives, None when they give numbers; a vector among several
    values, or a vector on one path and a number (or another width) on another, is refused."""
    found: dict[int | None, ast.Return] = {}
    for r in ast.walk(tree):
        if isinstance(r, ast.Return) and r.value is not None:
            if isinstance(r.value, ast.Tuple):
                if any(sc.width(v) is not None for v in r.value.elts):
                    fail(r, "a device function returns one vector or numbers, not a vector among several values",
                         "return the vector alone, or its components with the other values")
                found.setdefault(None, r)
            else:
                found.setdefault(sc.width(r.value), r)
    if len(found) > 1:
        kinds = sorted(f"vec{w}" if w else "a number" for w in found)
        fail(list(found.values())[-1], f"'{tree.name}' returns {' and '.join(kinds)} on different paths",
             "return one width of vector (or numbers) on every path")
    return next(iter(found), None)


def flatten_returns(tree: ast.FunctionDef, sc: Any, new_name: Callable[[str], str],
                    fail: Callable[..., Any]) -> ast.FunctionDef:
    """`return e`, e a vector, → `t = e; return t.x, t.y, ...` (a copy of `tree`; `tree` itself when it returns
    no vector). `sc` has collected `tree`'s vector names."""
    if _returned(tree, sc, fail) is None:
        return tree

    class Flatten(ast.NodeTransformer):
        def visit_Return(self, r: ast.Return) -> Any:
            w = sc.width(r.value)
            t = new_name("vret")
            parts = [ast.Attribute(ast.Name(t, ast.Load()), COMPONENTS[c], ast.Load()) for c in range(w)]
            return [ast.copy_location(ast.Assign([ast.Name(t, ast.Store())], r.value), r),
                    ast.copy_location(ast.Return(ast.Tuple(parts, ast.Load())), r)]

    return ast.fix_missing_locations(Flatten().visit(copy.deepcopy(tree)))


def specialised_call(sc: Any, e: ast.Call, fn: DeviceFunctionMarker) -> ast.Call:
    """The call with each vector argument passed as its components, to the specialisation for their widths
    (bound in the lowerer's namespace by rewrites.py); the function itself when no argument is a vector."""
    widths = _call_signature(sc, e, fn)
    if not any(widths):
        return ast.copy_location(ast.Call(e.func, [sc.scalar(a) for a in e.args], []), e)
    args: list[ast.expr] = []
    for a, w in zip(e.args, widths):
        args += sc.components(a, w) if w else [sc.scalar(a)]
    name = sc.specialisations.setdefault((id(fn), widths), f"{VECTOR}call{len(sc.specialisations)}_{fn.name}")
    sc.namespace[name] = VectorCall(fn, widths)
    return ast.copy_location(ast.Call(ast.Name(name, ast.Load()), args, []), e)


def call_components(sc: Any, e: ast.Call, fn: DeviceFunctionMarker, width: int) -> list[ast.expr]:
    """The components of a call returning a vector: unpacked into temporaries before the statement."""
    if sc.lazy:
        sc.fail(e, f"call to device function '{fn.name}' inside a condition, 'and'/'or' or a conditional "
                   "expression", "assign its result to a local first")
    call = specialised_call(sc, e, fn)
    names = sc.fresh_components(width)
    sc.pre.append(ast.copy_location(ast.Assign([ast.Tuple([ast.Name(n, ast.Store()) for n in names], ast.Store())],
                                               call), e))
    return [ast.Name(n, ast.Load()) for n in names]


def called_here(fn: Any, widths: tuple[int, ...] | None, err: KernelSyntaxError) -> str:
    """The message of an error in a device function's body, raised again at its call."""
    return f"in '{fn.name}({describe(widths) if widths else 'numbers'})', called here: {err.message} (at {err.loc})"


def explains(fn: Any) -> bool:
    """Whether an error lowering `fn` for a call is raised again at the call (frontend/inline.py)."""
    return isinstance(fn, VectorCall) or (hasattr(fn, "parsed") and takes_vectors(fn.parsed))
