"""The Python-AST rewrites that run before lowering, in their order (docs/kernel-language.md, "Small vectors,
local arrays, constant tables"): each turns a construct of the language into simpler Python, so that the lowerer
(frontend/lower.py) and the IR see scalars, range loops and structured control flow only.

0. `frac, whole = math.modf(x)` → floor-based truncation (frontend/modf.py);
1. tuple returns of device functions → extra result locals (frontend/multi_returns.py);
2. `for v in (a, b)` → a range loop picking its element (frontend/literal_loops.py);
3. `return` inside loops → a flag and `break` (frontend/loop_returns.py);
4. `break` / `continue` / loop `else` → flags (frontend/jumps.py);
5. local arrays and constant tables → scalar locals and literals, unrolling the loops whose variable indexes one,
   or indexes a small vector (frontend/unroll.py);
6. small vectors → one scalar local per component (frontend/vectors.py).

Before step 0, a device function's returned vector becomes its components (`t = v; return t.x, t.y, t.z`, which
step 1 makes result locals) and, where its call passed vectors (`vector_params`), those parameters are vectors
from the start; step 6 turns a call passing or returning vectors into one passing and unpacking components
(frontend/vector_calls.py; docs/kernel-language.md, "Vectors through device functions").

Vectors are scalarised last (until session 57 they were first): a component named by the variable of a loop,
`v[k]` in `for k in range(3)`, is then a constant once step 5 has unrolled that loop, and a loop that may
`break` or `continue` has its flags before it is unrolled, as a loop over a local array does. Which names hold
vectors is found on the tree step 5 receives (vectors.prepare), which also refuses a vector returned or stored
into an element, as the scalariser did when it ran first, before steps 1-5 could rename what it refuses.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from . import call_order, jumps, literal_loops, loop_returns, modf, multi_returns, unroll, vector_calls, vectors


def rewrite(tree: ast.FunctionDef, *, params: tuple[str, ...], local_names: set[str], is_kernel: bool,
            resolve: Callable[[ast.expr], Any], free: Callable[[str], Any], new_name: Callable[[str], str],
            fail: Callable[..., Any], vector_params: dict[str, int]) -> tuple[ast.FunctionDef, int, dict[str, Any]]:
    """(the rewritten tree, how many values the function returns, names its code calls that the lowerer's
    namespace must hold). `tree` itself when nothing was rewritten. `vector_params`: the widths of the
    parameters a call passes vectors to (frontend/vector_calls.py); `params` has their components."""
    call_order.check_call_order(tree, resolve, fail)  # a call writing an array its statement reads: refused
    seeds = vector_calls.Vectors.of(tree, resolve, vector_params)  # shared by the three vector steps
    tree = vectors.check_before_rewrites(tree, resolve, fail, params, seeds, new_name, is_kernel)  # return v
    namespace: dict[str, Any] = {}
    modfs = modf.lower_modf(tree, resolve, new_name)  # t, ip = math.modf(x)
    if modfs is not tree:
        tree = modfs
        namespace.update(modf.NAMESPACE)
    tree, results = multi_returns.lower_tuple_returns(tree, fail, is_kernel)  # return a, b
    tree = literal_loops.lower_literal_loops(tree, new_name, fail)  # for v in (a, b)
    tree = loop_returns.lower_loop_returns(tree, new_name, fail, is_kernel)  # → break
    tree = jumps.lower_jumps(tree, new_name, fail)  # break/continue → flags
    is_vector = vectors.vector_test(tree, resolve, fail, params, seeds)
    unrolled = unroll.unroll(tree, free, resolve, fail, local_names, is_vector)  # local arrays, tables → literals
    if unrolled is not tree:
        namespace.update(unroll.NAMESPACE)
    scalar, names = vectors.scalarize(unrolled, resolve, fail, params, seeds)  # small vectors → scalars
    namespace.update(names)
    return scalar, results, namespace
