"""Inlining of device functions: a call to a @gk.func becomes the callee's
body, lowered afresh for the call site, with every local prefixed by a fresh
`_gk<n>_<name>_` (ir/names.py) and its array parameters replaced by the
caller's arrays; the call's value is the callee's RESULT local (and, for a
function returning several values, its extra result locals: frontend/multi_returns.py).
The renaming itself is ir/rewrite.py's."""

from __future__ import annotations

import ast
from typing import Any

from ..errors import KernelSyntaxError
from ..ir import nodes as ir
from ..ir.names import RESULT
from ..ir.rewrite import rename
from .callables import DeviceFunctionMarker
from .multi_returns import extra
from .vector_calls import called_here, explains


def inline_call(lw: Any, call: ast.Call, fn: DeviceFunctionMarker) -> ir.Expr:
    """Emit into `lw`'s current block the statements of the call (each scalar
    argument bound to the callee's prefixed parameter, in argument order, then
    the renamed body); return the expression of the call's value."""
    return inline_values(lw, call, fn, 1)[0]


def inline_values(lw: Any, call: ast.Call, fn: DeviceFunctionMarker, count: int) -> list[ir.Expr]:
    """As inline_call, for a call whose `count` values are unpacked (`a, b = f(x)`): their expressions. A call
    made as a statement has `count` 0: the function may return nothing (it writes arrays, as C's `void` helpers
    do), and a value it returns is dropped, as Python drops it."""
    loc = lw.p.loc(call)
    if lw.lazy:
        lw.fail(call, f"call to device function '{fn.name}' inside a condition, 'and'/'or' "
                      "or a conditional expression", hint="assign its result to a local first")
    if fn.name in lw.stack:
        lw.fail(call, f"recursive call to '{fn.name}' is not supported")
    try:
        callee = fn.lowered(lw.stack)
    except KernelSyntaxError as err:  # for the widths this call passes: refused at the call (vector_calls.py)
        if not explains(fn):
            raise
        lw.fail(call, called_here(fn, getattr(fn, "widths", None), err), hint=err.hint, cls=type(err))
    lw.captured.merge(callee.captured)
    starred = next((a for a in call.args if isinstance(a, ast.Starred)), None)
    if starred is not None:  # counted as one argument: "'g' takes 2 arguments, got 1" for g(*f(x))
        lw.fail(starred, f"starred arguments are not supported in a call of device function '{fn.name}'",
                hint="unpack into names first: 'a, b = f(...)', then pass them: 'g(a, b)'")
    if len(call.args) != len(callee.params):
        lw.fail(call, f"'{fn.name}' takes {len(callee.params)} arguments, got {len(call.args)}")
    if count and not callee.returns_value:
        lw.fail(call, f"device function '{fn.name}' returns no value, and its call is used as one",
                hint=f"call it as a statement, '{fn.name}(...)', or give it a 'return'")
    if count and callee.results != count:
        many = f"'{', '.join(f'v{k}' for k in range(callee.results))} = {fn.name}(...)'"
        lw.fail(call, f"device function '{fn.name}' returns {callee.results} value{'s' * (callee.results > 1)}, "
                      f"{'unpacked into ' + str(count) + ' names' if count > 1 else 'used as one'}",
                hint=f"unpack them: {many}" if callee.results > 1 else "assign it to one name")
    if callee.tid_arity:
        lw.note_tid(call, callee.tid_arity)
    prefix = lw.namer.numbered(fn.name) + "_"
    arrays = {}
    for name, a in zip(callee.params, call.args):
        if name in callee.array_names:
            arrays[name] = lw.array_name(a)
        else:  # lowered in place: the argument may itself emit statements (a nested call)
            lw.emit(ir.Assign(prefix + name, lw.expr(a), loc=loc))
    lw.block.extend(rename(callee.body, prefix, arrays))
    return [ir.Var(prefix + (extra(k) if k else RESULT), loc=loc) for k in range(count)]
