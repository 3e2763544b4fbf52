"""A device function call that writes an array the rest of its statement reads (docs/kernel-language.md,
"Vectors through device functions"): refused, naming both.

The lowerer emits a called function's body before the statement that uses its value (frontend/inline.py; a
vector-valued call is unpacked into temporaries before it, frontend/vector_calls.py), so in
`out[i, 1] = out[i, 0] + put(out, i, v).x` the read of `out[i, 0]` would see what `put` wrote, where Python reads
it first: a silent wrong value (session 58's red-team: 12.0 where Python gives 2.0). The call's own arguments are
evaluated before it in both, so reads there are fine; any other read of a written array in the statement (an
augmented assignment's target included: `out[i, 0] += put(...)` reads it first) is refused.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from .. import intrinsics as gk
from .callables import DeviceFunctionMarker
from .vector_calls import resolver

_WRITERS = frozenset({id(gk.atomic_add), id(gk.store_vec2), id(gk.store_vec3), id(gk.store_vec4)})


def _written_params(fn: DeviceFunctionMarker, seen: tuple[int, ...]) -> set[int]:
    """The positions of `fn`'s parameters whose arrays it (or a device function it calls) writes."""
    tree = fn.parsed.tree
    params = [a.arg for a in tree.args.args]
    resolve = resolver(fn.parsed)
    names = set(_written_names(tree, resolve, (*seen, id(fn.parsed))))
    return {k for k, p in enumerate(params) if p in names}


def _written_names(tree: ast.AST, resolve: Callable[[ast.expr], Any], seen: tuple[int, ...]) -> list[str]:
    out: list[str] = []
    for n in ast.walk(tree):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AugAssign) else []
        out += [t.value.id for t in targets if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)]
        if isinstance(n, ast.Call) and n.args:
            fn = resolve(n.func)
            if id(fn) in _WRITERS and isinstance(n.args[0], ast.Name):
                out.append(n.args[0].id)
            elif isinstance(fn, DeviceFunctionMarker) and id(fn.parsed) not in seen:
                out += [a.id for k, a in enumerate(n.args) if isinstance(a, ast.Name)
                        and k in _written_params(fn, seen)]
    return out


def _reads(e: ast.AST, name: str, skip: ast.AST) -> ast.AST | None:
    """A read of array `name` in `e` outside the call `skip` (whose arguments are evaluated before it)."""
    todo = [e]
    while todo:
        n = todo.pop()
        if n is skip:
            continue
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == name \
                and isinstance(n.ctx, ast.Load):
            return n
        if isinstance(n, ast.Call) and any(isinstance(a, ast.Name) and a.id == name for a in n.args):
            return n  # passed to another call, which may read it: a vector-valued call is hoisted before it
        todo += list(ast.iter_child_nodes(n))
    return None


def check_call_order(tree: ast.FunctionDef, resolve: Callable[[ast.expr], Any], fail: Callable[..., Any]) -> None:
    """Refuse a statement whose device function call writes an array the statement reads elsewhere."""
    for s in ast.walk(tree):
        if not isinstance(s, ast.stmt) or isinstance(s, ast.FunctionDef):
            continue
        parts = [getattr(s, f) for f in ("value", "test", "iter") if isinstance(getattr(s, f, None), ast.expr)]
        if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Subscript):
            parts.append(ast.Subscript(s.target.value, s.target.slice, ast.Load()))  # read before the value
        for call in (c for p in parts for c in ast.walk(p) if isinstance(c, ast.Call)):
            fn = resolve(call.func)
            if not isinstance(fn, DeviceFunctionMarker):
                continue
            for k in _written_params(fn, ()):
                arg = call.args[k] if k < len(call.args) else None
                if not isinstance(arg, ast.Name):
                    continue
                hit = next((r for p in parts if (r := _reads(p, arg.id, call)) is not None), None)
                if hit is not None:
                    fail(call, f"'{fn.name}' writes '{arg.id}', which its statement also reads "
                               f"('{ast.unparse(hit)}'): the call runs before the statement's other reads, "
                               "where Python reads them first",
                         f"call it in a statement of its own first: 'r = {ast.unparse(call)}'")
