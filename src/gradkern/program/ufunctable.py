"""The NumPy ufuncs a program's host code may run as launches, and the kernels generated for them in the kernel
language (docs/host-code.md, "Elementwise NumPy"): per ufunc its operands and the kernel expression of them, from
which one kernel per (ufunc, axes, operand pattern) is written, compiled by the pipeline as any kernel and
differentiated by it (the derivative table of transforms/derivatives.py): no derivative is written here.

An operand pattern has one token per operand: `a` an array parameter indexed by the thread's indices, `a[0.]` an
array broadcast along the axes marked `0` (indexed 0 there: NumPy's broadcasting of a length-1 axis), `s` a scalar
parameter, `o` read from `out` (in place), a digit the same array as that operand; then `?TOKEN` for a `where=`
mask (an int32 array: the kernel writes only where it is non-zero, elsewhere `out` keeps its value) and `:DTYPE`
for `dtype=` naming another float type (each operand cast to it, as NumPy casts the inputs to the loop's type)."""

from __future__ import annotations

import linecache
import re

import numpy as np

from .. import intrinsics
from ..ir.types import MAX_LAUNCH_NDIM
from ..kernel import KernelFunction, kernel

# ufunc name -> the kernel's function of one operand
_MATH = {"sqrt": "gk.sqrt", "exp": "gk.exp", "expm1": "gk.expm1", "log": "gk.log", "log1p": "gk.log1p",
         "sin": "gk.sin", "cos": "gk.cos", "tan": "gk.tan", "arcsin": "gk.asin", "arccos": "gk.acos",
         "arctan": "gk.atan", "sinh": "gk.sinh", "cosh": "gk.cosh", "tanh": "gk.tanh", "arcsinh": "gk.asinh",
         "arccosh": "gk.acosh", "arctanh": "gk.atanh", "cbrt": "np.cbrt", "exp2": "np.exp2", "log2": "np.log2",
         "log10": "np.log10", "floor": "gk.floor", "ceil": "np.ceil", "trunc": "np.trunc", "rint": "np.rint",
         "sign": "gk.sign"}
# NumPy's deg2rad and rad2deg multiply by these (pi / 180 and 180 / pi rounded to float64)
_DEG, _RAD = "0.017453292519943295", "57.29577951308232"
# ufunc name -> (operands, the kernel expression of them); a name below with "" has its own body (_body)
OPS: dict[str, tuple[int, str]] = {
    "add": (2, "{0} + {1}"), "subtract": (2, "{0} - {1}"), "multiply": (2, "{0} * {1}"),
    "true_divide": (2, "{0} / {1}"), "divide": (2, "{0} / {1}"), "negative": (1, "-{0}"), "positive": (1, "{0}"),
    "absolute": (1, "abs({0})"), "fabs": (1, "abs({0})"), "square": (1, "{0} * {0}"),
    "reciprocal": (1, "1.0 / {0}"), "deg2rad": (1, f"{{0}} * {_DEG}"), "radians": (1, f"{{0}} * {_DEG}"),
    "rad2deg": (1, f"{{0}} * {_RAD}"), "degrees": (1, f"{{0}} * {_RAD}"),
    # the kernel's pow: u ** v with an array exponent too (its conventions at u <= 0: transforms/derivatives.py)
    "power": (2, "{0} ** {1}"), "maximum": (2, ""), "minimum": (2, ""), "fmax": (2, ""), "fmin": (2, ""),
    # the kernel's % is Python's, which is NumPy's for floats (the result has the divisor's sign, fmod's
    # remainder moved by one divisor; NaN for a zero divisor as NumPy's: error_model='numpy', C's fmod)
    "remainder": (2, "{0} % {1}"), "fmod": (2, "gk.fmod({0}, {1})"), "copysign": (2, "gk.copysign({0}, {1})"),
    "arctan2": (2, "gk.atan2({0}, {1})"), "hypot": (2, "gk.hypot({0}, {1})"),
    "clip": (3, "gk.clamp({0}, {1}, {2})"), "where": (3, ""),
    **{name: (1, f"{fn}({{0}})") for name, fn in _MATH.items()},
}
_KERNELS: dict[tuple[str, int, str], KernelFunction] = {}  # (operation, axes, operands' pattern) -> its kernel
_TID = ("i", "i, j", "i, j, k")
_INDICES = ("i", "j", "k", "m", "n")
_SPELL = str.maketrans({"[": "B", "]": "E", ".": "I", "?": "W", ":": "C"})  # a pattern as a name's part
_TOKEN = re.compile(r"a\[[0.]+\]|[aso]|\d")


def _kernel(name: str, ndim: int, pattern: str) -> KernelFunction:
    """The kernel of `name` over `ndim` axes for `pattern` (the module's docstring), made on first use."""
    key = (name, ndim, pattern)
    k = _KERNELS.get(key)
    if k is None:
        k = _KERNELS[key] = _generate(name, ndim, pattern)
    return k


def token(shape: tuple, full: tuple) -> str:
    """The pattern token of an array of `shape` (as many axes as `full`) read at the indices of `full`."""
    mask = "".join("0" if n == 1 and m != 1 else "." for n, m in zip(shape, full, strict=True))
    return "a" if "0" not in mask else f"a[{mask}]"


def _body(name: str, operand, target: str) -> list[str]:
    if name == "where":  # the condition an int32 array: no derivative through it
        return [f"if {operand(0)} != 0:", f"    {target} = {operand(1)}", "else:", f"    {target} = {operand(2)}"]
    if name in ("maximum", "minimum"):  # NumPy's NaN propagation, which the kernel's max/min lack (a + b is NaN)
        fn = name[:3]
        return [f"p0 = {operand(0)}", f"p1 = {operand(1)}", "if p0 != p0 or p1 != p1:", f"    {target} = p0 + p1",
                "else:", f"    {target} = {fn}(p0, p1)"]
    if name in ("fmax", "fmin"):  # NumPy's fmax/fmin: the operand that is not NaN (NaN when both are)
        fn = name[1:]
        return [f"p0 = {operand(0)}", f"p1 = {operand(1)}", "if p1 != p1:", f"    {target} = p0",
                "elif p0 != p0:", f"    {target} = p1", "else:", f"    {target} = {fn}(p0, p1)"]
    return [f"{target} = " + OPS[name][1].format(*(operand(n) for n in range(OPS[name][0])))]


def _generate(name: str, ndim: int, pattern: str) -> KernelFunction:
    fname = f"host_{name}_{ndim}_{pattern.translate(_SPELL)}"
    operands, _, cast = pattern.partition(":")
    operands, _, where = operands.partition("?")
    tokens = _TOKEN.findall(operands)
    idx = _INDICES[:ndim]

    def at(tok: str) -> str:
        return ", ".join(idx) if tok in "ao" else ", ".join("0" if c == "0" else v for c, v in zip(tok[2:-1], idx))

    def operand(n: int) -> str:
        t = tokens[n]
        e = {"s": f"x{n}", "o": f"out[{at('o')}]"}.get(t) or (f"x{n}[{at(t)}]" if t[0] == "a" else
                                                             f"x{t}[{at(tokens[int(t)])}]")
        return f"np.{cast}({e})" if cast and not (name == "where" and n == 0) else e
    params = ["out"] + [f"x{n}" for n, t in enumerate(tokens) if t[0] in "as"] + (["wm"] if where else [])
    body = _body(name, operand, f"out[{at('o')}]")
    if where:
        body = [f"if wm[{at(where)}] != 0:"] + ["    " + b for b in body]
    lines = [f"def {fname}({', '.join(params)}):", f"    {_TID[min(ndim, MAX_LAUNCH_NDIM) - 1]} = gk.tid()"]
    indent = "    "
    for axis, var in ((3, "m"), (4, "n"))[:max(ndim - MAX_LAUNCH_NDIM, 0)]:  # trailing axes: loops (as hostops)
        lines.append(f"{indent}for {var} in range(out.shape[{axis}]):")
        indent += "    "
    lines += [indent + b for b in body]
    return _compiled(fname, lines, f"<gradkern host ufunc {name} {ndim} {pattern}>")


def pack_kernel(count: int) -> KernelFunction:
    """The kernel of `w[a:b] = [s0, s1, ...]` with `count` scalars (Active ones among them): thread i stores
    parameter i, so the launch takes each scalar as any launch does (an Active one's derivative is returned)."""
    key = ("pack", 1, "s" * count)
    k = _KERNELS.get(key)
    if k is None:
        fname = f"host_pack_{count}"
        lines = [f"def {fname}(out, {', '.join(f'x{n}' for n in range(count))}):", "    i = gk.tid()"]
        for n in range(count):
            lines += [f"    {'if' if n == 0 else 'elif'} i == {n}:", f"        out[i] = x{n}"]
        k = _KERNELS[key] = _compiled(fname, lines, f"<gradkern host pack {count}>")
    return k


def _compiled(fname: str, lines: list[str], filename: str) -> KernelFunction:
    source = "\n".join(lines) + "\n"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # inspect reads it there
    namespace = {"gk": intrinsics, "np": np}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102  generated from the tables above only
    return kernel(namespace[fname])
