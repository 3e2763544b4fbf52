"""The closest supported spelling of a call a kernel cannot make (issue 19,
item 6): users port kernels from NumPy, Numba, Warp and CUDA, and reach for
the functions they know."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

_ALLOCATE = ("a kernel cannot allocate arrays: for a small fixed-size per-thread array use "
             "gk.local((n,), gk.float64); for more, pass a scratch array as an argument")
_HINTS: dict[str, str] = {
    # NumPy array functions have no meaning on one thread's numbers
    "where": "use a conditional expression: `a if cond else b`",
    "select": "use a conditional expression: `a if cond else b`",
    "sum": "accumulate in a loop, or with gk.atomic_add across threads",
    "prod": "multiply in a loop",
    "mean": "accumulate in a loop and divide",
    "dot": "for vectors use gk.dot (with gk.vec2/vec3/vec4); for arrays, a loop",
    "cross": "use gk.cross on gk.vec3 values",
    "linalg.norm": "use gk.length on a gk.vec2/vec3/vec4, or math.sqrt of a sum of squares",
    "norm": "use gk.length on a gk.vec2/vec3/vec4, or math.sqrt of a sum of squares",
    "zeros": _ALLOCATE,
    "empty": _ALLOCATE,
    "ones": _ALLOCATE,
    "array": _ALLOCATE,
    "round": "use math.floor(x + 0.5) (or int() to truncate toward zero)",
    "modf": "unpack it into two names: 'frac, whole = math.modf(x)'",
    "square": "use x * x",
    "isnan": "use x != x",
    "isinf": "use abs(x) == math.inf",
    "isfinite": "use abs(x) < math.inf",
    "print": "kernels cannot print: store what you want to see into an array argument",
}


def hint_for(fn: Any, spelled: str) -> str:
    """The hint of a refused call of `fn`, written `spelled` in the kernel."""
    name = getattr(fn, "__name__", spelled.rsplit(".", 1)[-1])
    module = getattr(fn, "__module__", "") or ""
    key = "linalg.norm" if fn is getattr(np.linalg, "norm", None) else name
    hint = _HINTS.get(key)
    if hint is None and (module.startswith("numpy") or fn is math.fsum):
        hint = "NumPy's array functions are not kernel code: write the loop over one thread's values"
    return hint or "kernels can call math functions, gk intrinsics and @gk.func device functions"


# CUDA's and C's fast-math names that math, NumPy and gk lack (session 58, ported kernels round 11:
# docs/kernel-language.md "Eleventh round"): `gk.rsqrt(x)` or `np.fma(a, b, c)` is refused as an unknown
# attribute; the hint writes the spelling that works
MISSING_FUNCTION_HINTS: dict[str, str] = {
    "rsqrt": "write 1.0 / math.sqrt(x)",
    "rsqrtf": "write 1.0 / math.sqrt(x)",
    "invsqrt": "write 1.0 / math.sqrt(x)",
    "rcbrt": "write 1.0 / np.cbrt(x)",
    "fma": "write a * b + c (rounded twice where C's fma rounds once; the derivative is the same)",
    "fmaf": "write a * b + c (rounded twice where C's fma rounds once; the derivative is the same)",
    "exp10": "write 10.0 ** x",
    "sincos": "write s = math.sin(x) and c = math.cos(x)",
    "fdividef": "write a / b",
}


# constructs the lowerer refuses, by AST node name: the closest supported spelling
CONSTRUCT_HINTS: dict[str, str] = {
    "List": "for per-thread storage use f = gk.local((n,), gk.float64); for constants, a module-level tuple",
    "ListComp": "for per-thread storage use f = gk.local((n,), gk.float64) and a loop over range(n)",
    "Tuple": "for constants use a module-level tuple (a table), indexed by constants or loop variables",
}
