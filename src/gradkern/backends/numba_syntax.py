"""How the CPU backend spells IR as Python for Numba: the operators, the
generated module's imports, the bounds-check helper, and the syntax of a thread
body (`NumbaSyntax`) and of one whose atomic adds go to private copies
(`PrivatizedSyntax`, with numba_plan.MixedPlan for targets also accessed
plainly). backends/numba_loops.py prints kernels with them."""

from __future__ import annotations

import math
import re
from collections import Counter

from ..ir import nodes as ir
from ..ir.ops import FUNCTIONS, Op
from ..ir.types import Scalar
from .printer import Syntax


def _imported(python: str) -> str:
    """An op table's Python spelling (`math.sin({0})`) with the generated module's names for math and NumPy."""
    return python.replace("math.", "_gk_math.", 1) if python.startswith("math.") else \
        python.replace("np.", "_gk_np.", 1) if python.startswith("np.") else python


PY_OPS = {
    Op.ADD: "({0} + {1})", Op.SUB: "({0} - {1})", Op.MUL: "({0} * {1})", Op.DIV: "({0} / {1})",
    Op.FLOORDIV: "({0} // {1})", Op.MOD: "({0} % {1})", Op.POW: "({0} ** {1})", Op.NEG: "(-{0})",
    Op.EQ: "({0} == {1})", Op.NE: "({0} != {1})", Op.LT: "({0} < {1})", Op.LE: "({0} <= {1})",
    Op.GT: "({0} > {1})", Op.GE: "({0} >= {1})",
    Op.AND: "({0} and {1})", Op.OR: "({0} or {1})", Op.NOT: "(not {0})",
    # the elementary functions: the op table's Python spelling, through this module's own imports
    **{op: _imported(f.python) for op, f in FUNCTIONS.items()},
    Op.BITAND: "({0} & {1})", Op.BITOR: "({0} | {1})", Op.BITXOR: "({0} ^ {1})", Op.INVERT: "(~{0})",
    # int64 shifts by an amount outside [0, 64) are poison in LLVM: the amount is tested first (Op.LSHIFT);
    # `<<` in uint64, as the wrapping ops (WRAPPING): of two literals, CPython would fold `2 << 63` into an
    # int Numba cannot type
    Op.LSHIFT: "(_gk_int64(_gk_uint64({0}) << _gk_uint64({1})) if {1} >= 0 and {1} < 64 else 0)",
    Op.RSHIFT: "(({0} >> {1}) if {1} >= 0 and {1} < 64 else ({0} >> 63))",
}
WRAPPING = {Op.ADD: "+", Op.SUB: "-", Op.MUL: "*"}  # integer ops printed through uint64 (NumbaSyntax.apply)
# The generated module's own names are all reserved (_gk...), so a kernel's
# parameters and locals (np, math, float32, ...) cannot shadow them. Names the
# printer itself introduces (launch extents, thread indices, chunks, interior
# bounds, private copies) start with _gkb_, a prefix no IR pass generates:
# a pass's fresh local _gk_n1 must never clobber the launch extent.
IMPORTS = ["import math as _gk_math", "", "import numpy as _gk_np",
            "from numba import njit as _gk_njit", "from numba import prange as _gk_prange",
            "from numpy import float32 as _gk_float32", "from numpy import float64 as _gk_float64",
            "from numpy import int32 as _gk_int32", "from numpy import int64 as _gk_int64",
            "from numpy import uint64 as _gk_uint64"]


def unsigned(index: str) -> str:
    """An array index as Numba should read it: unsigned, so that it adds no negative-index wrap-around.
    An index outside its array is an error, negative ones included (docs/launches.md#bounds), so the
    wrap-around Numba adds to a signed index is dead code; but LLVM cannot prove it so inside a parfor
    (whose bounds come from the schedule), and there it turns the loads of `u[i - 1]` into per-lane
    selects and the loop into gathers and scatters: the interior of the 1-D Allen-Cahn primal ran
    about 2x slower than with unsigned indices at one thread
    (docs/performance.md#unsigned-indices-and-the-index-set-split)."""
    if index.isdigit():
        return index
    inner = index[len("_gk_int64("):-1]
    if index.startswith("_gk_int64(_gk_uint64(") and _balanced(inner):
        return inner  # a wrapping + - * (NumbaSyntax.apply): already the unsigned value
    return f"_gk_uint64({index})"


def unsigned_literals(source: str) -> list[str]:
    """The module-level uint64 constants that `source` reads (`NumbaSyntax.unsigned_operand`): Numba freezes a
    global as a typed constant, where each `_gk_uint64(1)` in a body was a call to type and lower."""
    return [f"_gkb_U{v} = _gk_uint64({v})" for v in sorted({int(m) for m in _LITERAL.findall(source)})]


_LITERAL = re.compile(r"\b_gkb_U(\d+)\b")


def _balanced(text: str) -> bool:
    """Whether no closing parenthesis in `text` closes one opened before it."""
    depth = 0
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            return False
    return depth == 0


def unsigned_copy(name: str) -> str:
    """The local that holds `_gk_uint64(name)` where the printer keeps one (`NumbaSyntax.copies`)."""
    return f"_gkb_u_{name}"


def unsigned_copies(body: tuple[ir.Stmt, ...], params: frozenset[str], tid: str) -> frozenset[str]:
    """The names in a thread body that keep an unsigned copy (`NumbaSyntax.copies`): each local that is an
    array index by itself more often than it is defined (assigned, or a loop's variable), and each thread
    index (printed `tid.format(axis)`) that is one at least twice. Every index is cast (`unsigned`); one
    that is a bare name then reads the copy, cast once where the name is defined, instead of a cast of
    its own: the same values with fewer casts for Numba's typing and IR passes
    (docs/performance.md#one-cast-per-definition-not-per-index). Parameters keep a cast per index:
    one read before its first definition in the body would have no copy."""
    uses: Counter = Counter()
    defs: Counter = Counter()
    for s in ir.walk_stmts(body):
        if isinstance(s, (ir.Assign, ir.For)):
            defs[s.name if isinstance(s, ir.Assign) else s.var] += 1
        indexed = [x.indices for e in ir.stmt_exprs(s) for x in ir.walk_expr(e) if isinstance(x, ir.Load)]
        indexed += [s.indices] if isinstance(s, (ir.Store, ir.AtomicAdd)) else []
        uses.update(i.name if isinstance(i, ir.Var) else tid.format(i.axis)
                    for ix in indexed for i in ix if isinstance(i, (ir.Var, ir.Tid)))
    tids = {tid.format(a) for a in range(3)}
    return frozenset(n for n, c in uses.items() if (c >= 2 if n in tids else c > defs[n] > 0 and n not in params))


# ir.InBounds: an index outside [0, n) records the access and the thread (the first one wins; one
# int64 store, so a racing store from another thread cannot mix its fields in) and becomes 0.
# Inlined by Numba (inline='always', in its IR, before typing) only in a kernel of at most
# INLINE_CHECKS checked indices: there it makes the check ~5x faster (spmv's exact check at 2**20
# rows: 68 ms inlined, 333 ms called); in a larger kernel each inlined copy adds blocks to Numba's
# IR, and compile time grows faster than the sites (46 sites: 28 s CPU inlined, 8.6 s called; a
# gradient of 649: over 460 s inlined, 118 s called). docs/bounds.md has the measurements.
INLINE_CHECKS = 8
CHECK = ["@_gk_njit(cache=True, error_model='numpy'{inline})",
          "def _gkb_check(i, n, site, nsites, oob, thread):",
          "    if i >= 0 and i < n:",
          "        return _gk_int64(i)",
          "    if oob[0] == 0:",
          "        oob[0] = thread * nsites + site + 1",
          "    return _gk_int64(0)"]


class NumbaSyntax(Syntax):
    def __init__(self, launch_ndim: int = 1):
        super().__init__(ops=PY_OPS, empty_block="pass", tid="_gkb_t{0}")
        self.launch_ndim = launch_ndim
        # the names (locals, thread indices) of the body being printed that keep an unsigned copy, defined
        # after each of their definitions and read by every index that is the bare name: one cast per
        # definition instead of one per index (`unsigned_copies`; empty outside a thread body)
        self.copies: frozenset[str] = frozenset()
        # each int64 wrapping + - * printed (`apply`): its text, and the uint64 value inside the cast back
        self.wrapped: dict[str, str] = {}

    def unsigned(self, index: str) -> str:
        """`unsigned(index)`, read from its unsigned copy where the body keeps one, or the unsigned value of a
        wrapping + - * this syntax printed."""
        return unsigned_copy(index) if index in self.copies else self.wrapped.get(index) or unsigned(index)

    def unsigned_operand(self, operand: str) -> str:
        """An operand of a wrapping + - * as uint64 with as few calls as Numba must type: a literal is the module's
        constant (`unsigned_literals`), a name with an unsigned copy reads it, a wrapping result is already
        unsigned (`unsigned`) (docs/compile-time.md, finding 15)."""
        return f"_gkb_U{operand}" if operand.isdigit() else self.unsigned(operand)

    def in_bounds(self, index: str, array: str, axis: int, site: int, nsites: int) -> str:
        """As Syntax's, a constant index and the site numbers passed as int64 values: Numba compiles a called
        function once per value of a literal argument (one `_gkb_check` per site: compile-time.md, 14)."""
        index = f"_gk_int64({index})" if index.strip("()-").isdigit() else index
        return super().in_bounds(index, array, axis, f"_gk_int64({site})", f"_gk_int64({nsites})")

    def defined(self, name: str) -> list[str]:
        return [f"{unsigned_copy(name)} = _gk_uint64({name})"] if name in self.copies else []

    def copy(self, name: str, value: str, is_int: bool) -> str:
        # m = int64(i), not m = i: Numba's parfor pass refuses a later write to a
        # plain alias of the prange index (m = i; m += 2). Indexing is free of
        # negative-index checks either way: every index is printed unsigned (`unsigned`).
        return f"{name} = _gk_int64({value})" if is_int else f"{name} = {value}"

    def literal(self, value, t: Scalar) -> str:
        if t.is_bool:
            return "True" if value else "False"
        if t.is_int:
            v = int(value)
            # parenthesised when negative: -2 ** 2 would parse as -(2 ** 2)
            return (repr(v) if v >= 0 else f"({v})") if t.name == "int64" else f"_gk_int32({v})"
        v = float(value)
        if math.isfinite(v):
            text = repr(v) if v >= 0 else f"({v!r})"
        else:
            text = "_gk_math.nan" if math.isnan(v) else ("_gk_math.inf" if v > 0 else "(-_gk_math.inf)")
        return text if t.name == "float64" else f"_gk_float32({text})"

    def cast(self, operand: str, src: Scalar, dst: Scalar) -> str:
        return f"bool({operand})" if dst.is_bool else f"_gk_{dst.name}({operand})"

    def index(self, array: str, indices: list[str]) -> str:
        return f"{array}[{', '.join(map(self.unsigned, indices))}]"

    def apply(self, e: ir.Apply, args: list[str]) -> str | None:
        if e.op in (Op.NEG, Op.INVERT) and e.type.is_int:
            # a thread index is a `prange` loop's unsigned index, which Numba negates and inverts unsigned
            # (-i was 2**64 - i): the operand is cast to the IR's signed type first (a no-op on a signed value)
            return f"({'-' if e.op is Op.NEG else '~'}_gk_{e.type.name}({args[0]}))"
        if e.op in WRAPPING and e.type.is_int:
            # Numba marks signed + - * `nsw` (no signed wrap): LLVM may then assume they never overflow and fold
            # `(a - b) >> 63` to `a < b ? -1 : 0`, wrong where the difference wraps. Unsigned ones carry no flag
            # and wrap; the cast back keeps the bits (docs/language.md#integer-arithmetic)
            inner = f"{self.unsigned_operand(args[0])} {WRAPPING[e.op]} {self.unsigned_operand(args[1])}"
            text = f"_gk_{e.type.name}({inner})"
            if e.type.name == "int64":
                self.wrapped[text] = f"({inner})"
            return text
        if e.op is Op.FLOORDIV and e.type.is_int and not (isinstance(e.args[1], ir.Const) and e.args[1].value != -1):
            # Numba's INT64_MIN // -1 is 0; NumPy's, the interpreter's and CUDA's is the wrapped negation,
            # INT64_MIN (docs/language.md#integer-arithmetic): // -1 is spelled as the negation, which wraps
            negated = f"(-_gk_{e.type.name}({args[0]}))"
            if isinstance(e.args[1], ir.Const):
                return negated
            return f"({negated} if {args[1]} == -1 else ({args[0]} // {args[1]}))"
        base, expo = (e.args + (None,))[:2]
        if e.op is not Op.POW or not (base.type.is_float and expo.type.is_int):
            return None
        # Numba's float ** negative int raises ZeroDivisionError at 0 (whatever the error
        # model); a float exponent gives IEEE's inf there, as the interpreter and CUDA do
        negative = f"({args[0]} ** _gk_{base.type.name}({args[1]}))"
        if isinstance(expo, ir.Const):
            return negative if expo.value < 0 else None
        return f"(({args[0]} ** {args[1]}) if {args[1]} >= 0 else {negative})"

    def for_open(self, var, start, stop, step, step_node) -> list[str]:
        if isinstance(step_node, ir.Const) and step_node.value == 1:
            return [f"for {var} in range({start}, {stop}):"]
        return [f"for {var} in range({start}, {stop}, {step}):"]


# A register sum carried from thread to thread (an Active scalar's, an owned row's over the inner axes) is
# added through `_gkb_radd`, compiled with fastmath's `reassoc` alone: inlined into the launch loop, its add
# lets LLVM keep the sum in vector lanes (the loop vectorises; in fixed order it could not), every other
# operation of the loop keeping its exact IEEE meaning (docs/adjoint-forms.md, section 9). Not cached on its
# own: it is compiled into its callers, whose cached code a warm process loads without it.
REASSOCIATED_ADD = ["@_gk_njit(cache=False, fastmath={'reassoc'}, error_model='numpy', boundscheck=False)",
                    "def _gkb_radd(a, b):", "    return a + b"]


class PrivatizedSyntax(NumbaSyntax):
    """Atomic adds go to the running chunk's private copy of their target, `_gkb_priv_X[c]`, summed into X
    after the loop. A *mixed* target X (one the kernel also loads or stores plainly) has no such copy
    (numba_plan.MixedPlan): an add the pipeline marked as landing in row `tid[0] + c` (`ir.AtomicAdd.row`,
    analysis/rows.py) goes straight to X, since chunks running at once never reach a common row that way;
    every other add to X goes to the running slot's copy `_gkb_pb_X[s]` (its row flagged in
    `_gkb_rows_X[s]`), and then a plain load of X reads `X[idx] + _gkb_pb_X[s, idx]` and a plain store
    also zeroes `_gkb_pb_X[s, idx]`.

    Why this is the serial result: a launch runs only once it is known race-free (proved, or checked
    exactly at run time: analysis/races.py, where an atomic add conflicts with another thread's plain
    access of the element). So an element a thread accesses plainly receives atomic adds from that
    thread alone: at such an access X holds its straight adds and the slot's copy its other ones, a
    load sees both, a store discards both, and the adds after the store reach X directly or in the sum
    after the loop. Elements no thread accesses plainly are summed over the chunks (or slots) as before.
    (Derivative kernels inherit the property from their primal: a shadow is accessed plainly where the
    primal stores or atomically adds, and receives atomic adds where the primal loads.) Results differ
    from the serial loop's only in the order of the atomic adds' sums."""

    def __init__(self, launch_ndim: int = 1, mixed: frozenset[str] = frozenset(),
                 shared: frozenset[str] = frozenset(),
                 accumulators: dict[tuple[str, tuple[str, ...]], str] | None = None,
                 owned: frozenset[str] = frozenset(), rows: dict[str, str] | None = None,
                 spill: frozenset[str] = frozenset()):
        super().__init__(launch_ndim)
        self.mixed = mixed
        self.owned = owned  # targets whose rows the chunk owns (numba_plan.owned_rows): no copy
        self.rows = rows or {}  # their register accumulators of the outer index, where the body is inline
        self.spill = spill  # targets with spill lists (sparse privatisation, numba_loops.LoopPrinter.chunks)
        self.shared = shared  # mixed targets with adds not marked with a row: per-slot copies
        self.accumulators = accumulators or {}
        self.temporaries = 0
        # set once a sum is printed through `_gkb_radd`: the printer then adds its definition, and the launch
        # is never timed against its serial twin (numba_cpu.CpuLaunch.reassociated)
        self.reassociates = False

    def reassociated(self, acc: str, value: str) -> str:
        """`acc += value` for a sum LLVM may reassociate (REASSOCIATED_ADD)."""
        self.reassociates = True
        return f"{acc} = _gkb_radd({acc}, {value})"

    def atomic_index(self, array: str, indices: list[str]) -> str:
        return f"_gkb_priv_{array}[{', '.join(['_gkb_c', *map(self.unsigned, indices)])}]"

    def atomic(self, array: str, indices: list[str], value: str) -> str:
        acc = self.accumulators.get((array, tuple(indices)))
        return self.reassociated(acc, value) if acc is not None else super().atomic(array, indices, value)

    def shared_index(self, array: str, indices: list[str]) -> str:
        return f"_gkb_pb_{array}[{', '.join(['_gkb_s', *map(self.unsigned, indices)])}]"

    def atomic_stmt(self, s: ir.AtomicAdd, indices: list[str], value: str) -> str:
        if s.array in self.spill:
            a = s.array
            return f"_gkb_k_{a} = _gkb_spill{len(indices)}({a}, _gkb_si_{a}, _gkb_sv_{a}, _gkb_c, _gkb_k_{a}, " \
                f"_gkb_lo_{a}, _gkb_hi_{a}, {', '.join(indices)}, {value})"
        if s.array in self.owned:  # the chunk owns the row: its register, or the target itself
            acc = self.rows.get(s.array)
            if acc is None:
                return f"{self.index(s.array, indices)} += {value}"
            # in 1-D a row is one thread's: nothing carried from thread to thread
            return self.reassociated(acc, value) if self.launch_ndim > 1 else f"{acc} += {value}"
        if s.array not in self.mixed:
            return self.atomic(s.array, indices, value)
        if s.row is not None:  # chunks running at once never add to a common row this way
            return f"{self.index(s.array, indices)} += {value}"
        # the row index is printed twice: index expressions have no side effects
        return f"{self.shared_index(s.array, indices)} += {value}; _gkb_rows_{s.array}[_gkb_s, {indices[0]}] = 1"

    def load(self, e: ir.Load, indices: list[str]) -> str:
        if e.array not in self.shared:
            return super().load(e, indices)
        # the indices are printed twice: index expressions have no side effects (an ir.InBounds records
        # the same first out-of-bounds access again), and nothing is written between the two reads
        text = f"({self.index(e.array, indices)} + {self.shared_index(e.array, indices)})"
        return f"_gk_int32({text})" if e.type.name == "int32" else text  # Numba adds int32s as int64

    def store_lines(self, s: ir.Store, indices: list[str], value: str) -> list[str]:
        if s.array not in self.shared:
            return super().store_lines(s, indices, value)
        lines = []
        if any(isinstance(x, ir.Load) and x.array == s.array for i in s.indices for x in ir.walk_expr(i)):
            # an index that reads X would read it again after the first write: evaluate each once
            names = [f"_gkb_s{self.temporaries + n}" for n in range(len(indices))]
            self.temporaries += len(indices)
            lines += [f"{n} = {i}" for n, i in zip(names, indices)]
            indices = names
        # the value (which may read X[idx]) is evaluated before either write
        return lines + [f"{self.index(s.array, indices)} = {value}", f"{self.shared_index(s.array, indices)} = 0"]


def private_sums(copied: tuple[str, ...], ndims: dict[str, int]) -> list[str]:
    """The chunks' private copies summed into their targets in one parallel loop over the targets' rows
    (each row of each target by one worker): every element gets its copies' values in chunk order, the
    order of the serial sums `X += copy[c]`, so the same result."""
    rows = ", ".join(f"{a}.shape[0]" for a in copied)
    lines = [f"        for _gkb_r0 in _gk_prange({f'max({rows})' if len(copied) > 1 else rows}):"]
    for a in copied:
        rest = [f"_gkb_r{d}" for d in range(1, ndims[a])]
        at = ", ".join(["_gkb_r0", *rest])
        lines.append(f"            if _gkb_r0 < {a}.shape[0]:")
        for d, r in enumerate(rest, 1):
            lines.append(f"{'    ' * (3 + d)}for {r} in range({a}.shape[{d}]):")
        pad = "    " * (4 + len(rest))
        # a sum of its own per target: one name for all would take the widest type, and round differently
        lines += [f"{pad}_gkb_v_{a} = {a}[{at}]",
                  f"{pad}for _gkb_k in range(_gkb_chunks):",
                  f"{pad}    _gkb_v_{a} += _gkb_priv_{a}[_gkb_k, {at}]",
                  f"{pad}{a}[{at}] = _gkb_v_{a}"]
    return lines


def spill_function(ndim: int) -> list[str]:
    """`_gkb_spillN`, an add of sparse privatisation to an N-D target (LoopPrinter.chunks): straight into the
    target in a row the chunk owns, otherwise appended to the chunk's spill list; returns the list's length."""
    idx = [f"i{d}" for d in range(ndim)]
    return ["@_gk_njit(cache=True, error_model='numpy', boundscheck=False)",
            f"def _gkb_spill{ndim}(x, si, sv, c, k, lo, hi, {', '.join(idx)}, v):",
            "    if i0 >= lo and i0 < hi:",
            f"        x[{', '.join(idx)}] += v",
            "        return k",
            *[f"    si[c, k, {d}] = i{d}" for d in range(ndim)],
            "    sv[c, k] = v",
            "    return k + 1"]


def register_accumulators(k: ir.Kernel, private: tuple[str, ...],
                          mixed: tuple[str, ...]) -> dict[tuple[str, tuple[str, ...]], str]:
    """A register accumulator per element that a privatised float target's atomic adds all hit at
    constant indices (an Active scalar's sum): `acc += v` in the chunk's loop, added to the chunk's
    private copy once after it. The copy's element would otherwise be loaded and stored at every
    thread (LLVM cannot keep it in a register beside the other stores), a chain through memory that
    made saxpy's gradient latency-bound. The register's adds may be reassociated (numba_syntax
    `_gkb_radd`, docs/adjoint-forms.md section 9): the same terms, grouped so that the loop vectorises."""
    bodies = k.body + (k.interior.body if k.interior is not None else ())
    adds = [s for s in ir.walk_stmts(bodies) if isinstance(s, ir.AtomicAdd)]
    types = {p.name: p.type for p in k.params}
    sx = NumbaSyntax(k.tid_ndim)
    out: dict[tuple[str, tuple[str, ...]], str] = {}
    for a in private:
        mine = [s for s in adds if s.array == a]
        if a in mixed or not types[a].dtype.is_float or \
                not all(isinstance(i, ir.Const) for s in mine for i in s.indices) or \
                any(s.value.type != types[a].dtype for s in mine):  # a wider sum would round differently
            continue
        for s in mine:
            key = (a, tuple(sx.literal(i.value, i.type) for i in s.indices))
            out.setdefault(key, f"_gkb_acc{len(out)}")
    return out
