"""Index-set splitting fuzzer (transforms/split.py): random kernels full of
boundary tests, checked against a brute-force oracle.

The generator writes 1-, 2- and 3-D kernels `def <name>(u, v, out, m, n)`
whose bodies test the thread index against everything the splitter folds and
everything it must leave alone: a tid or a tid alias (`jm = j - 1`) compared
with constants, shapes (`u.shape[1] - 2`), integer parameters (`m`, `n - 1`,
`m // 2`, `min(m, u.shape[0] - 1)`), expressions of outer tids (`j < i + 1`),
inner tids (never folded on the outer axis), loop variables, int locals and
data (`u[i, j] > 0.5`), floats; with `== != < <= > >=`, either operand order,
chained comparisons `0 < j < m - 1`, `and`/`or`/`not`, conditional
expressions, bool locals, nested `if`/`elif`/`else` and `for q in range(...)`
loops. Aliases are sometimes rebound later (`ii = 0`, `ii += 1`, in a branch,
in a loop, or as a loop variable `for ii in range(2)`), which must stop them
from counting where they no longer hold the tid. Test outcomes feed stored
values, clamped indices (`u[i, min(max(j + d, 0), u.shape[1] - 1)]`), guarded
neighbour reads and branches around the one store each thread makes to its
own `out` element (launches are race-free). The parameters take values that
put the boundaries inside, at and outside the launch, sometimes the extremes
of int64 or int32 (a bound computed from them must not wrap).

The oracle, per kernel and launch, at the IR level: the kernel as the
pipeline prints it (typed, versioned locals, thread indices), split with
`split_interior`, runs its interior for the threads inside every range and its
general body elsewhere, "inside" as the CPU printer realises the ranges (outer
axis: max(lo, 0) <= t < hi; innermost: lo' = min(max(lo, 0), n), hi' =
min(max(hi, lo'), n)); `realised` builds that as one body `if inside:
interior else: general`. The threads are independent (each writes only its
own element of `out`, which nobody reads), so the reference interpreter runs,
for each thread inside, the interior and the unsplit typed body, and compares.

Properties:
* soundness: the split kernel's results are bit-identical to the unsplit
  kernel's (only tests are folded, never arithmetic changed);
* structure: a range's bounds read only parameters nobody assigns, shapes,
  constants and the tids of outer axes;
* end to end (a few kernels): `gk.launch` on the compiled CPU backend equals
  the interpreter bit for bit, and so do reverse and forward `gk.autodiff`
  for some of them (their fused and gather kernels are split too);
* the generator exercises splitting: many kernels get ranges on each of the
  axes, and many tests are folded.

GRADKERN_FUZZ_SPLIT sets the number of kernels (CI default 150),
GRADKERN_FUZZ_SEED the seed, GRADKERN_FUZZ_SPLIT_CPU the number of kernels
that also run compiled (default 2: a short 1-D one, also differentiated, and a 2-D one; every
axis split).
A local long run: GRADKERN_FUZZ_SPLIT=3000 pytest -s -n0 tests/fuzz/test_split_fuzz.py
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field, replace

import numpy as np

import gradkern as gk
from fuzz.test_race_fuzz import fuzz_kernels
from gradkern.ir import build as b
from gradkern.ir import nodes as ir
from gradkern.ir.indices import indices
from gradkern.ir.interp import _Frame
from gradkern.ir.ops import COMPARISONS, Op
from gradkern.ir.printer import format_kernel
from gradkern.ir.types import BOOL, I64
from gradkern.pipeline import PRIMAL_STAGES, Request, run_stages
from gradkern.runtime.binding import bind
from gradkern.transforms.simplify import simplify_block
from gradkern.transforms.split import split_interior
from gradkern.transforms.versions import version_locals

N_KERNELS = int(os.environ.get("GRADKERN_FUZZ_SPLIT", "150"))
SEED = int(os.environ.get("GRADKERN_FUZZ_SEED", "0"))
N_CPU = int(os.environ.get("GRADKERN_FUZZ_SPLIT_CPU", "2"))
LAUNCHES = 4  # per kernel
SHORT = 9  # lines of the kernel differentiated (its reverse and tangent kernels compile in seconds)
CPU_DIMS = (1, 2, 2, 3)  # the launch dimensions of the kernels that run compiled, in turn (3-D ones compile slowly)
TIDS = ("i", "j", "k")
EXTREMES = (2**63 - 1, -2**63, 2**62, -2**62 - 3, 2**31 - 1, -2**31)


# -- the generator ---------------------------------------------------------------------------------------------------
@dataclass
class _Alias:
    name: str
    axis: int
    offset: int
    rebind: str | None  # how it is rebound later ("top", "aug", "branch", "loop", "for"), or never
    rebound: bool = False


class _Generator:
    """One random kernel's source: `def <name>(u, v, out, m, n)`, reading u and v, writing out at the thread's own
    element."""

    def __init__(self, rng: np.random.Generator, name: str):
        self.r = rng
        self.name = name
        self.ndim = int(rng.choice([1, 2, 3], p=[0.25, 0.4, 0.35]))
        self.tids = TIDS[:self.ndim]
        self.lines: list[str] = []
        self.aliases: list[_Alias] = []
        self.loops: list[str] = []  # loop variables in scope
        self.ints: list[str] = []  # int locals defined so far at the top level
        self.features: set[str] = {f"{self.ndim}-D launch"}

    def pick(self, xs):
        return xs[int(self.r.integers(len(xs)))]

    def chance(self, p: float) -> bool:
        return bool(self.r.random() < p)

    def c(self, lo: int = 0, hi: int = 3) -> int:
        return int(self.r.integers(lo, hi + 1))

    def emit(self, depth: int, text: str):
        self.lines.append("    " * (depth + 1) + text)

    @property
    def own(self) -> str:
        return ", ".join(self.tids)

    # -- expressions -----------------------------------------------------------------------------------------------
    def offset(self, x: str, c: int) -> str:
        return x if c == 0 else f"{x} + {c}" if c > 0 else f"{x} - {-c}"

    def subject(self, axis: int) -> str:
        """The tested side: the tid of `axis`, an alias of it, or tid + c written out."""
        names = [a.name for a in self.aliases if a.axis == axis and a.name not in self.loops]
        t = self.c(0, 9)
        if names and t < 4:
            return self.pick(names)
        if t < 6:
            return self.offset(self.tids[axis], self.c(-2, 2))
        return self.tids[axis]

    def bound(self, axis: int) -> str:
        """What a tid is compared with: foldable (constants, shapes, parameters, outer tids) or not (inner
        tids, loop variables, int locals, data-free floats)."""
        a = axis
        arr = self.pick(["u", "u", "out", "v"])
        forms = [str(self.c(-2, 8)), str(self.c(0, 2)),
                 f"{arr}.shape[{a}]", f"{arr}.shape[{a}] - {self.c(1, 3)}", f"u.shape[{self.c(0, self.ndim - 1)}] - 1",
                 "m", "n", f"m - {self.c(1, 2)}", f"n + {self.c(1, 2)}", "m // 2", "n % 3", f"{self.c(1, 3)} * m",
                 f"min(m, u.shape[{a}] - 1)", "max(n, 2)", "m - n", "-m"]
        if a > 0:
            self.features.add("outer tid in a bound")
            forms += [self.offset(self.tids[self.c(0, a - 1)], self.c(-1, 2)) for _ in range(2)]
            forms.append(f"m - {self.tids[0]}")
        if a < self.ndim - 1:
            self.features.add("inner tid in a bound")
            forms.append(self.offset(self.tids[self.c(a + 1, self.ndim - 1)], self.c(-1, 1)))
        if self.loops:
            forms.append(self.pick(self.loops))
        if self.ints:
            forms.append(self.pick(self.ints))
        if self.chance(0.05):
            self.features.add("float bound")
            return self.pick(["2.5", "m * 0.5"])
        return self.pick(forms)

    def comparison(self) -> str:
        axis = self.c(0, self.ndim - 1)
        x, y = self.subject(axis), self.bound(axis)
        op = self.pick(["==", "!=", "<", "<=", ">", ">="])
        t = self.c(0, 9)
        if t < 2:
            self.features.add("chained comparison")
            lo = self.pick(["0", "1", "-1", f"{self.c(0, 3)}", "n"])
            return f"{lo} {self.pick(['<', '<='])} {x} {self.pick(['<', '<='])} {y}"
        if t < 5:
            return f"{y} {op} {x}"
        return f"{x} {op} {y}"

    def condition(self, depth: int = 0) -> str:
        t = self.c(0, 19)
        if t < 2:
            self.features.add("data-dependent test")
            return self.pick([f"u[{self.own}] > 0.5", f"v[{self.own}] < u[{self.own}]"])
        if t < 3 and self.loops:
            return f"{self.pick(self.loops)} {self.pick(['<', '==', '>='])} {self.pick(list(self.tids) + ['m'])}"
        if depth < 1 and t < 6:
            return f"{self.condition(depth + 1)} {self.pick(['and', 'or'])} {self.condition(depth + 1)}"
        if depth < 2 and t < 7:
            return f"not ({self.condition(depth + 1)})"
        if depth < 1 and t < 8:
            return f"({self.condition(depth + 1)}) {self.pick(['and', 'or'])} ({self.condition(depth + 1)})"
        return self.comparison()

    def clamped(self, axis: int, shift: str) -> str:
        """u read at the thread's element moved along `axis` by `shift`, clamped into u."""
        idx = list(self.tids)
        idx[axis] = f"min(max({self.tids[axis]} + {shift}, 0), u.shape[{axis}] - 1)"
        return f"u[{', '.join(idx)}]"

    def value(self, depth: int = 0) -> str:
        t = self.c(0, 13)
        if t < 2:
            return f"u[{self.own}]"
        if t < 3:
            return f"v[{self.own}]"
        if t < 5:
            self.features.add("clamped read")
            return self.clamped(self.c(0, self.ndim - 1), str(self.c(-2, 2)))
        if t < 6:
            return "s"
        if t < 7:
            return f"{self.pick(self.tids)} * 0.25"
        if depth < 2 and t < 9:
            self.features.add("conditional expression")
            return f"({self.value(depth + 1)} if {self.condition()} else {self.value(depth + 1)})"
        if depth < 2 and t < 11:
            return f"({self.value(depth + 1)} {self.pick(['+', '-', '*'])} {self.value(depth + 1)})"
        return self.pick(["0.5", "1.5", "2.0"])

    # -- statements ------------------------------------------------------------------------------------------------
    def block(self, depth: int, count: int):
        for _ in range(count):
            self.statement(depth)

    def statement(self, depth: int):
        t = self.c(0, 99)
        if t < 18:
            self.emit(depth, f"s {self.pick(['+=', '=', '-='])} {self.value()}")
        elif t < 36 and depth < 2:
            self.features.add("if")
            self.emit(depth, f"if {self.condition()}:")
            self.block(depth + 1, self.c(1, 2))
            while self.chance(0.35):
                self.features.add("elif")
                self.emit(depth, f"elif {self.condition()}:")
                self.block(depth + 1, self.c(1, 2))
            if self.chance(0.5):
                self.emit(depth, "else:")
                self.block(depth + 1, self.c(1, 2))
        elif t < 44:
            self.features.add("conditional expression")
            self.emit(depth, f"s += {self.value(1)} if {self.condition()} else {self.value(1)}")
        elif t < 50:
            self.features.add("bool local")
            f = f"f{len(self.lines)}"
            self.emit(depth, f"{f} = {self.condition()}")
            self.emit(depth, f"s += {self.value(1)} if {f} else 0.5")
        elif t < 58:
            self.features.add("test in an index")
            d = f"d{len(self.lines)}"
            self.emit(depth, f"{d} = {self.c(-2, 2)} if {self.condition()} else {self.c(-2, 2)}")
            self.emit(depth, f"s += {self.clamped(self.c(0, self.ndim - 1), d)}")
            if depth == 0:
                self.ints.append(d)
        elif t < 68 and depth < 2 and len(self.loops) < 2:
            self.features.add("loop")
            q = self.pick([x for x in ("q", "p") if x not in self.loops])
            self.emit(depth, f"for {q} in range({self.pick(['3', 'min(m, 3)', 'max(min(n, 2), 0)', self.tids[-1]])}):")
            self.loops.append(q)
            self.block(depth + 1, self.c(1, 2))
            self.loops.pop()
        elif t < 80:
            self.neighbours(depth)
        elif t < 90:
            self.rebind(depth)
        elif depth > 0:
            self.features.add("store in a branch")
            self.emit(depth, f"out[{self.own}] = s")
        else:
            self.emit(depth, f"s *= {self.pick(['0.5', '-1.0'])}")

    def neighbours(self, depth: int):
        """A stencil read of u's neighbours along one axis, under a guard that keeps it inside u (the guard's
        own test through a tid and a never rebound alias of it, and other tests beside)."""
        self.features.add("guarded neighbours")
        a = self.c(0, self.ndim - 1)
        t, w = self.tids[a], self.c(1, 2)
        stable = [x for x in self.aliases if x.axis == a and x.rebind is None]
        lo = self.pick([f"{t} >= {w}", f"{t} - {w} >= 0", f"0 < {t} - {w - 1}", f"{w} <= {t}"])
        hi = self.pick([f"{t} < u.shape[{a}] - {w}", f"{t} + {w} < u.shape[{a}]", f"u.shape[{a}] - {w} > {t}",
                        f"{t} + {w} <= u.shape[{a}] - 1"])
        if stable and self.chance(0.5):
            x = self.pick(stable)  # x = t + c
            lo = f"{x.name} >= {w + x.offset}"
            self.features.add("alias in a guard")
        guard = self.pick([f"{lo} and {hi}", f"{hi} and {lo}", f"{w - 1} < {t} < u.shape[{a}] - {w}"])
        if self.chance(0.4):
            guard = f"{guard} and {self.condition(1)}"
        idx = lambda s: ", ".join(f"{x} {s}" if n == a else x for n, x in enumerate(self.tids))  # noqa: E731
        self.emit(depth, f"if {guard}:")
        self.emit(depth + 1, f"s += u[{idx(f'- {w}')}] - 2.0 * u[{self.own}] + u[{idx(f'+ {w}')}]")
        if self.chance(0.3):
            self.emit(depth, "else:")
            self.emit(depth + 1, f"s += {self.value(1)}")

    def rebind(self, depth: int, x: _Alias | None = None):
        """An alias's later rebinding, in the way chosen when it was made."""
        if x is None:
            pending = [a for a in self.aliases if a.rebind is not None and a.name not in self.loops]
            if not pending or (depth and self.chance(0.5)):
                self.emit(depth, f"s += {self.value()}")
                return
            x = self.pick(pending)
        d = 0 if x.rebind in ("top", "aug") else depth  # at the top level the versions pass renames the new value
        if d != depth:
            self.emit(depth, f"s += {self.value()}")  # this statement's place; the rebinding comes later
            return
        self.features.add(f"alias rebound ({x.rebind})")
        x.rebound = True
        text = f"{x.name} += 1" if x.rebind == "aug" else f"{x.name} = {self.pick(['0', 'm', self.tids[x.axis]])}"
        if x.rebind == "branch":
            self.emit(d, f"if {self.condition()}:")
            self.emit(d + 1, text)
        elif x.rebind == "loop":
            self.emit(d, f"for {self.pick([q for q in ('q', 'p', 'r') if q not in self.loops])} in range(2):")
            self.emit(d + 1, f"{x.name} += 1")
        elif x.rebind == "for":
            self.emit(d, f"for {x.name} in range({self.pick(['2', 'min(m, 2)', '0'])}):")
            self.emit(d + 1, "s += 0.5")
        else:
            self.emit(d, text)

    def source(self) -> str:
        head = ", ".join(self.tids) + " = gk.tid()"
        self.lines = [f"def {self.name}(u, v, out, m, n):", f"    {head}"]
        for n in range(self.c(0, 3)):
            axis = self.c(0, self.ndim - 1)
            c = self.c(-2, 2)
            name = f"{self.tids[axis]}{'p' if c >= 0 else 'm'}{abs(c)}_{n}"
            rebind = self.pick(["top", "aug", "branch", "loop", "for"]) if self.chance(0.35) else None
            self.aliases.append(_Alias(name, axis, c, rebind))
            self.emit(0, f"{name} = {self.offset(self.tids[axis], c)}")
        if self.chance(0.3):
            self.features.add("int local bound")  # a local: never invariant, whatever it holds
            self.emit(0, f"lim = {self.pick(['m - 1', 'u.shape[0] - 2', str(self.c(0, 3))])}")
            self.ints.append("lim")
        if self.chance(0.1):
            self.features.add("parameter rebound")  # an assigned parameter is no invariant either
            self.emit(0, self.pick(["m = m - 1", "n += 2", "m = n"]))
        self.emit(0, f"s = {self.pick(['0.0', f'u[{self.own}]', f'v[{self.own}] * 0.5'])}")
        self.block(0, self.c(2, 4))
        for x in self.aliases:
            if x.rebind is not None and not x.rebound:  # every alias chosen to be rebound is, at least once
                self.rebind(0, x)
                self.statement(0)
        t = self.c(0, 9)
        if t < 6:
            self.emit(0, f"out[{self.own}] = s")
        else:
            self.features.add("store in a branch")
            self.emit(0, f"if {self.condition()}:")
            self.emit(1, f"out[{self.own}] = s")
            if t < 8:
                self.emit(0, "else:")
                self.emit(1, f"out[{self.own}] = -s")
        return "\n".join(self.lines) + "\n"


# -- the oracle ------------------------------------------------------------------------------------------------------
def printed_kernel(typed: ir.Kernel) -> ir.Kernel:
    """What pipeline._generate hands split_interior (no bounds checks): versioned locals, thread indices."""
    k = version_locals(typed)
    return replace(k, thread_indices=frozenset(indices(k).tid_copies))


def _apply(op: Op, a: ir.Expr, c: ir.Expr) -> ir.Expr:
    return b.apply(op, a, c, t=BOOL if op in COMPARISONS or op is Op.AND else I64)


def realised(k: ir.Kernel, dim: tuple[int, ...]) -> ir.Kernel:
    """`k` (split) as one body: its interior for the threads inside every range as the CPU printer realises them
    (backends/numba_loops.py, LoopPrinter.loop_nest), its general body elsewhere."""
    last = len(dim) - 1
    inside: ir.Expr | None = None
    for r in k.interior.ranges:
        t, n, zero = ir.Tid(r.axis, type=I64), b.const(dim[r.axis], I64), b.const(0, I64)
        lo = _apply(Op.MAX, r.lo, zero)
        if r.axis < last:
            hi = n if r.hi is None else r.hi
        else:
            lo = _apply(Op.MIN, lo, n)
            hi = n if r.hi is None else _apply(Op.MIN, _apply(Op.MAX, r.hi, lo), n)
        test = _apply(Op.AND, _apply(Op.GE, t, lo), _apply(Op.LT, t, hi))
        inside = test if inside is None else _apply(Op.AND, inside, test)
    return replace(k, body=(ir.If(inside, k.interior.body, k.body),), interior=None)


def range_reads_outside(k: ir.Kernel) -> list[str]:
    """What each range's bounds read that they may not: a local, an assigned parameter, memory, the tid of its own
    axis or an inner one."""
    assigned = {s.name for s in ir.walk_stmts(k.body) if isinstance(s, ir.Assign)}
    params = {p.name for p in k.params}
    bad = []
    for r in k.interior.ranges:
        for e in (r.lo, r.hi):
            for x in ir.walk_expr(e) if e is not None else ():
                if (isinstance(x, ir.Tid) and x.axis >= r.axis) or isinstance(x, (ir.Load, ir.Select, ir.InBounds)) \
                        or (isinstance(x, ir.Var) and (x.name not in params or x.name in assigned)):
                    bad.append(f"range {r} reads {x}")
    axes = [r.axis for r in k.interior.ranges]
    if axes != sorted(set(axes)) or not all(0 <= a < k.tid_ndim for a in axes):
        bad.append(f"range axes {axes}")
    return bad


def comparisons(body: tuple[ir.Stmt, ...]) -> int:
    return sum(isinstance(e, ir.Apply) and e.op in COMPARISONS for e in ir.all_exprs(body))


# -- the run ---------------------------------------------------------------------------------------------------------
@dataclass
class Stats:
    kernels: int = 0
    launches: int = 0
    split: int = 0  # kernels with an interior
    by_ranges: dict = field(default_factory=dict)  # (launch ndim, ranges) -> kernels
    on_axis: list = field(default_factory=lambda: [0, 0, 0])  # kernels with a range on axis 0, 1, 2
    folds: int = 0  # comparisons the interiors do not evaluate any more
    interior_threads: int = 0  # threads that ran an interior body
    edge_threads: int = 0  # threads of split kernels that ran the general body
    extreme: int = 0  # launches with a parameter at an extreme of its type
    cpu_kernels: int = 0
    cpu_launches: int = 0
    gradients: int = 0
    features: dict = field(default_factory=dict)  # feature -> kernels, split kernels
    seen: dict = field(default_factory=dict)  # kernel name -> 0, or its number among those that run compiled too
    typed: dict = field(default_factory=dict)  # (kernel name, binding key) -> typed kernel, split kernel
    wrong: list = field(default_factory=list)

    def __str__(self) -> str:
        ranges = ", ".join(f"{d}-D with {n} ranges: {c}" for (d, n), c in sorted(self.by_ranges.items()))
        return (f"{self.kernels} kernels, {self.launches} launches ({self.extreme} at an extreme parameter); "
                f"split: {self.split} kernels ({ranges}); a range on axis 0/1/2: {self.on_axis}; tests folded: "
                f"{self.folds}; threads in an interior: {self.interior_threads}, on an edge: {self.edge_threads}; "
                f"compiled: {self.cpu_kernels} kernels, {self.cpu_launches} launches, {self.gradients} gradients; "
                f"wrong: {len(self.wrong)}")


def _arguments(rng: np.random.Generator, g: _Generator):
    """A launch: extents 1..7 (at most 150 threads), arrays sometimes larger, parameters around the extents."""
    dim = [int(rng.integers(1, 8)) for _ in range(g.ndim)]
    while np.prod(dim) > 150:
        dim[int(np.argmax(dim))] -= int(rng.integers(1, 3))
    dim = tuple(dim)

    def extent(d: int) -> int:
        return d + (int(rng.integers(1, 4)) if rng.random() < 0.3 else 0)

    shape = tuple(extent(d) for d in dim)
    arrays = {"u": rng.uniform(0.0, 1.0, shape), "v": rng.uniform(0.0, 1.0, shape),
              "out": rng.uniform(0.0, 1.0, tuple(extent(d) for d in dim))}
    wide = rng.random() < 0.15  # int32 parameters
    scalars = []
    for _ in range(2):
        if rng.random() < 0.1:
            x = int(rng.choice([e for e in EXTREMES if not wide or -2**31 <= e < 2**31]))
        else:
            x = int(rng.integers(-2, max(dim) + 4))
        scalars.append(np.int32(x) if wide else x)
    return dim, arrays, scalars


def _values(scalars):
    return [x if isinstance(x, np.integer) else np.int64(x) for x in scalars]


def _check_launch(stats: Stats, rng, g: _Generator, src: str, kernel, backend: str):
    dim, arrays, scalars = _arguments(rng, g)
    case = f"{g.name} dim={dim} m, n={[int(x) for x in scalars]} shapes={[a.shape for a in arrays.values()]}\n{src}"
    args = [arrays["u"], arrays["v"], arrays["out"], *scalars]
    stats.launches += 1
    stats.extreme += any(abs(int(x)) > 2**30 for x in scalars)
    first = g.name not in stats.seen
    try:
        binding = bind(kernel.ir, dim, tuple(args), "interp")
        if (g.name, binding.key) not in stats.typed:  # the pipeline's first stages, as specialize runs them
            request = Request(kernel.ir, binding.type_map(kernel.ir), len(dim), "interp")
            typed = run_stages(PRIMAL_STAGES[:2], request).kernels["primal"]
            stats.typed[g.name, binding.key] = typed, split_interior(printed_kernel(typed))
        typed, split = stats.typed[g.name, binding.key]
    except Exception as e:  # noqa: BLE001 - any failure is a finding
        stats.wrong.append(f"pipeline: {type(e).__name__}: {e}\n{case}")
        return
    if first:
        cpu = (split.interior is not None and stats.cpu_kernels < N_CPU and len(split.interior.ranges) == g.ndim
               and g.ndim == CPU_DIMS[stats.cpu_kernels % len(CPU_DIMS)]
               and (stats.cpu_kernels > 0 or len(g.lines) <= SHORT))  # the first is differentiated too: short
        stats.cpu_kernels += cpu
        stats.seen[g.name] = cpu and stats.cpu_kernels  # the how-manieth compiled kernel it is
        _count(stats, g, split)
    if split.interior is None:
        return
    bad = range_reads_outside(split)
    if bad:
        stats.wrong.append(f"{'; '.join(bad)}\n{case}")
    # Threads are independent (each writes only its own element of `out`, which nobody reads): the threads
    # outside the ranges run the general body, as unsplit; each one inside runs the interior and, for the
    # oracle, the unsplit body
    test = realised(split, dim).body[0].cond
    params = [p.name for p in typed.params]
    values = dict(zip(params, [arrays["u"], arrays["v"], arrays["out"], *_values(scalars)]))
    ints = {k: x for k, x in values.items() if not isinstance(x, np.ndarray)}
    want, got = ({k: x.copy() for k, x in values.items() if isinstance(x, np.ndarray)} for _ in range(2))
    inside = 0
    try:
        with np.errstate(all="ignore"):
            for t in itertools.product(*map(range, dim)):
                if _Frame(split, got, ints, t, dim).val(test):
                    inside += 1
                    _Frame(typed, want, ints, t, dim).run(typed.body)
                    _Frame(split, got, ints, t, dim).run(split.interior.body)
    except Exception as e:  # noqa: BLE001 - any failure is a finding
        stats.wrong.append(f"interpreter: {type(e).__name__}: {e}\n{case}\n{format_kernel(split)}")
        return
    if got["out"].tobytes() != want["out"].tobytes():
        stats.wrong.append(f"the interior's out differs from the unsplit kernel's\n{case}\n{format_kernel(split)}")
    stats.interior_threads += inside
    stats.edge_threads += int(np.prod(dim)) - inside
    if stats.seen[g.name]:  # int64 parameters: one compiled signature per kernel
        _end_to_end(stats, kernel, dim, arrays, [int(x) for x in scalars], case, gradients=stats.seen[g.name] == 1)


def _count(stats: Stats, g: _Generator, split: ir.Kernel):
    for f in g.features:
        counts = stats.features.setdefault(f, [0, 0])
        counts[0] += 1
        counts[1] += split.interior is not None
    if split.interior is None:
        return
    stats.split += 1
    key = (g.ndim, len(split.interior.ranges))
    stats.by_ranges[key] = stats.by_ranges.get(key, 0) + 1
    for r in split.interior.ranges:
        stats.on_axis[r.axis] += 1
    stats.folds += comparisons(simplify_block(split.body)) - comparisons(split.interior.body)


def _end_to_end(stats: Stats, kernel, dim, arrays, scalars, case: str, gradients: bool):
    """The compiled CPU backend against the interpreter, bit for bit; reverse and forward derivatives too when
    `gradients` (the reverse sums a shadow's contributions in another order on the CPU: to rounding)."""
    stats.cpu_launches += 1
    outs = []
    for backend in ("cpu", "interp"):
        out = arrays["out"].copy()
        gk.launch(kernel, dim, arrays["u"], arrays["v"], out, *scalars, backend=backend)
        outs.append(out)
    if outs[0].tobytes() != outs[1].tobytes():
        stats.wrong.append(f"cpu launch differs from the interpreter's\n{case}")
    if not gradients:
        return
    stats.gradients += 1
    rng = np.random.default_rng(len(case))
    seeds = [rng.uniform(0.5, 1.5, arrays[k].shape) for k in ("u", "out", "u", "v")]
    results = []
    for backend in ("cpu", "interp"):
        u, du, out, dout = arrays["u"].copy(), seeds[2].copy(), arrays["out"].copy(), seeds[1].copy()
        gk.autodiff(kernel, gk.Duplicated(u, du), gk.Const(arrays["v"]), gk.Duplicated(out, dout), *scalars,
                    dim=dim, backend=backend)
        tu, tout = seeds[0].copy(), seeds[1].copy()
        fu, fout = arrays["u"].copy(), arrays["out"].copy()
        gk.autodiff(kernel, gk.Duplicated(fu, tu), gk.Const(arrays["v"]), gk.Duplicated(fout, tout), *scalars,
                    dim=dim, backend=backend, mode=gk.Forward)
        results.append((u, du, out, dout, fout, tout))
    (u, du, out, dout, fout, tout), want = results
    for name, x, y in (("reverse du", du, want[1]), ("reverse dout", dout, want[3])):
        if not np.allclose(x, y, rtol=1e-13, atol=1e-13):
            stats.wrong.append(f"cpu {name} differs from the interpreter's\n{case}")
    exact = (("reverse out", out, want[2]), ("forward out", fout, want[4]), ("forward tangent", tout, want[5]))
    for name, x, y in exact:
        if x.tobytes() != y.tobytes():
            stats.wrong.append(f"cpu {name} differs from the interpreter's\n{case}")


def fuzz(directory: str, count: int = N_KERNELS, seed: int = SEED) -> Stats:
    """Generate `count` kernels and check every launch (see module doc)."""
    return fuzz_kernels(directory, Stats(), _Generator, "sfuzz", _check_launch, LAUNCHES, count, seed, 0)


def test_split_interiors_compute_what_the_unsplit_body_computes(tmp_path):
    stats = fuzz(str(tmp_path))
    print(stats)
    for f, (kernels, split) in sorted(stats.features.items()):
        print(f"  {f}: {kernels} kernels, {split} split")
    assert not stats.wrong, "\n\n".join(stats.wrong[:5])
    # the generator must exercise splitting on every axis, with threads on both sides of the ranges
    n, text = stats.kernels, str(stats)
    assert stats.split > n // 2 and stats.folds > 3 * n, text
    assert all(stats.on_axis[a] > n // 20 for a in range(3)), text
    assert all(stats.by_ranges.get((d, d), 0) > 0 for d in (1, 2, 3)), text
    assert stats.interior_threads > stats.launches and stats.edge_threads > stats.launches, text
    assert stats.cpu_kernels == N_CPU and (stats.gradients > 0) == (N_CPU > 0), text
