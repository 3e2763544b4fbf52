"""Tape-planner fuzzer (transforms/tape.py, docs/adjoint-forms.md): random smooth kernels
that stress what the reverse sweep tapes, recomputes, or restores once per
block, checked against brute-force oracles.

The generator writes kernels `def <name>(x, y, A, B, w, out, tot, c, m)` (one
thread per row i; x, y, out of length n; A, B of shape (n, m); w of length m;
tot of length 1; c a float scalar, Active or not; m the trip count) out of:
* locals reassigned several times in straight-line code (`s = gk.sin(s) * c`
  repeated, chains shorter and longer than RECOMPUTE_LIMIT operations, so both
  the recompute and the tape paths are taken), and long expressions;
* locals assigned in both (or one) branch of an `if` on data (read-only `x[i]`
  or `B[i, k]`, or an active local), conditional expressions `a if p else b`
  with nonlinear values, `and` of two conditions;
* loops `for k in range(m)` (upward, from 1, downward) carrying nonlinear
  locals, bodies that overwrite an element they read (`y[i] = gk.sin(y[i]) *
  x[i]`, `A[i, k] = A[i, k] * t`), values computed before a loop and read by
  every iteration (a LayerNorm-like mean), nested loops (`range(m)` and the
  triangular `range(k + 1)`), a loop bound counted from data, atomic adds;
* loads of arrays the kernel writes later, and in-place updates of read arrays
  after they were read (`x[i] = x[i] * out[i]` at the end).
Indices are thread-own (row or element i) except reads of arrays the kernel
never writes (`w[k]`, `x[(i + 1) % n]` when x is read-only and
`B[(i + 1) % n, k]`, which make the array's adjoint a gather; the regression
tests at the end pin the gather bug they found; GRADKERN_FUZZ_TAPE_NEIGHBOURS=0
turns them off) and `gk.atomic_add(tot, 0, v)`, so every launch is race-free
and in bounds.
Values stay bounded (sin, cos, tanh, 0.5 factors, denominators >= 0.5).

Branch conditions are written `GT(p, q)` in the generated text: the kernel
reads `p > q`, while a plain-Python run of the same source (thread by thread,
the oracle of the primal) records the smallest |p - q| it meets. Inputs are
redrawn until every condition is at least MARGIN away from its tie, so finite
differences (steps ~1e-6) never cross a kink.

Oracle, per kernel:
1. the plain launch computes what the Python run does (rtol 1e-12);
2. check_grad with its default tolerances: reverse mode against float64
   central differences per coordinate, the dot-product test, forward mode;
3. split mode (`gk.autodiff_thunk`: tape = forward(*args), reverse(*args,
   tape)) against fused `gk.autodiff` on fresh copies: primals equal to the
   plain launch's bit for bit (the augmented primal computes the same values
   in the same order), shadows and Active derivatives equal to rtol 1e-12.
   Both evaluate the same derivative expressions in the same order; a value
   comes either from a register, the tape (a float64 stored and loaded, exact)
   or a recomputation of the same expression from the same intact inputs
   (exact), so only the order of the CPU's per-chunk reductions of shared
   shadows may differ: a few ulps, far below 1e-12 relative;
4. the tape bytes per thread (`gk.inspect(..., mode=gk.Reverse)`) are at most
   8 bytes per needed-value candidate the source allows: per statement
   execution one slot per node of its expressions, plus per block execution
   two slots per local assigned in it (restores, and the versions made where
   branches and loops merge), plus per loop or branch execution its bounds or
   condition. A plan that tapes more than that tapes something the reverse
   cannot need (or tapes per iteration what is fixed).

GRADKERN_FUZZ_TAPE sets the number of kernels (CI default 40), GRADKERN_FUZZ_SEED
the seed, GRADKERN_FUZZ_CPU_EVERY how often a kernel runs on the compiled CPU
backend (default every 20th), GRADKERN_FUZZ_HOSTCUDA_EVERY how often on
hostcuda, the CUDA backend's C on the host (default every 5th, where g++ is:
its device tape is laid out by the CUDA printer); the rest run everything,
check_grad included, on the reference interpreter, which runs the same
pipeline and tape plan.
Kernels the reverse refuses (NotDifferentiableError: "the tape size depends on
'out', which the kernel overwrites", a branch around taped values in a loop
reads an array the kernel writes) are counted, not failed.
A local long run: GRADKERN_FUZZ_TAPE=400 pytest -s tests/fuzz/test_tape_fuzz.py
"""

from __future__ import annotations

import ast
import contextlib
import functools
import math
import os
from dataclasses import dataclass, field
from unittest import mock

import numpy as np
import pytest
from support.generators import TextGenerator, import_path

import gradkern as gk
import gradkern.testing
from fuzz.test_race_fuzz import _HAS_GPP, HOSTCUDA_EVERY, fuzz_backend
from gradkern.testing import check_grad
from gradkern.transforms.tape import RECOMPUTE_LIMIT

N_KERNELS = int(os.environ.get("GRADKERN_FUZZ_TAPE", "40"))
SEED = int(os.environ.get("GRADKERN_FUZZ_SEED", "0"))
CPU_EVERY = int(os.environ.get("GRADKERN_FUZZ_CPU_EVERY", "20"))
# Reads of a read-only array at a neighbour's index (x[(i + 1) % n], B[(i + 1) % n, k]) make that array's adjoint a
# gather, which gives wrong gradients when the reverse also transforms another shadow in place (see
# test_gather_replays_in_place_shadow_updates below): off by default until that is fixed.
NEIGHBOURS = os.environ.get("GRADKERN_FUZZ_TAPE_NEIGHBOURS", "1") not in ("", "0")
MARGIN = 2e-4  # the least distance of a branch condition from its tie at the inputs (and the FD points)
PARAMS = "x, y, A, B, w, out, tot, c, m"


# -- the generator ---------------------------------------------------------------------------------------------------
class _Generator(TextGenerator):
    """One random kernel (see the module doc)."""

    def __init__(self, rng: np.random.Generator, name: str):
        super().__init__(rng, name)
        self.x_written = rng.random() < 0.35  # x[i] updated in place at the end: no neighbour reads of x
        self.ints: list[str] = []  # integer locals visible at top level (loop bounds counted from data)
        self.budget = 0  # statements still to emit

    # expressions
    def leaf(self) -> str:
        xs = ["x[i]", "y[i]", "c", "0.5", "1.5", "out[i]", "B[i, 0]"]
        if NEIGHBOURS and not self.x_written:
            xs.append("x[(i + 1) % n]")
        if self.loops:
            k = self.loops[-1]
            xs += [f"A[i, {k}]", f"B[i, {k}]", f"w[{k}]", f"0.25 * {k}", f"A[i, {k}]",
                   f"A[i, ({k} + 1) % m]", f"A[i, m - 1 - {k}]"] + ([f"B[(i + 1) % n, {k}]"] if NEIGHBOURS else [])
            if len(self.loops) > 1:
                xs += [f"A[i, {self.loops[0]}]", f"B[i, {self.loops[0]}]"]
        vs = self.visible()
        if vs:
            xs += vs * 2
        xs += [f"0.1 * {j}" for j in self.ints]
        return self.pick(xs)

    def expr(self, depth: int) -> str:
        if depth <= 0 or self.chance(0.2):
            return self.leaf()
        kind = self.pick(["unary", "unary", "binary", "binary", "select"])
        if kind == "unary":
            e = self.expr(depth - 1)
            return self.pick([f"gk.sin({e})", f"math.cos({e})", f"gk.tanh({e})", f"gk.exp(gk.tanh({e}))",
                              f"gk.sqrt({e} * {e} + 0.5)", f"0.5 * {e}", f"-{e}", f"gk.tanh({e}) ** 2",
                              f"math.log(1.5 + gk.sin({e}))"])
        if kind == "select":
            self.features.add("conditional expression")
            return f"({self.expr(depth - 1)} if {self.cond()} else {self.expr(depth - 1)})"
        a, b = self.expr(depth - 1), self.expr(depth - 1)
        return self.pick([f"({a} + {b})", f"({a} - {b})", f"{a} * {b} * 0.5", f"{a} / (1.5 + gk.tanh({b}))",
                          f"gk.sin({a}) * gk.cos({b})"])

    def cond(self) -> str:
        """A branch condition, away from its tie at the inputs (checked by the Python run)."""
        q = self.pick(["0.0", "0.3", "0.5", "0.8"])
        p = ["x[i]", "x[i]", "B[i, 0]", f"gk.sin({self.expr(1)})"]
        if self.loops:
            p += [f"B[i, {self.loops[-1]}]", f"A[i, {self.loops[-1]}]", f"w[{self.loops[-1]}]"]
        if self.chance(0.3):  # an active local: its tie moves with the inputs
            p += self.visible()
        text = f"GT({self.pick(p)}, {q})"
        if self.chance(0.15):
            self.features.add("and")
            text = f"{text} and GT({self.pick(p)}, {self.pick(['0.0', '0.4'])})"
        return text

    # statements
    def local(self) -> str:
        """A visible local, or a new one initialised here (at the current depth)."""
        vs = self.visible()
        return self.pick(vs) if vs and self.chance(0.8) else ""

    def new_local(self, depth: int, value: str | None = None) -> str:
        t = self.fresh()
        self.emit(depth, f"{t} = {value if value is not None else self.expr(2)}")
        self.scopes[-1].append(t)
        return t

    def target(self, depth: int) -> str:
        return self.local() or self.new_local(depth)

    def statement(self, depth: int):
        self.budget -= 1
        kinds = ["new", "chain", "chain", "long", "select", "store", "store"] + (["if"] if depth < 4 else [])
        if self.budget > 0 and len(self.loops) < 2:
            kinds += ["loop", "loop", "loop"] + (["mean", "count"] if not self.loops else [])
        if self.loops:
            kinds += ["carry", "carry", "overwrite", "overwrite"]
        kinds += ["augmented", "param", "both"] + (["early_return"] if not self.loops and depth < 3 else [])
        getattr(self, "s_" + self.pick(kinds))(depth)

    def s_new(self, depth: int):
        self.new_local(depth, self.expr(int(self.r.integers(1, 4))))

    def s_chain(self, depth: int):
        """One local reassigned r times in straight-line code."""
        s = self.target(depth)
        r = int(self.r.integers(1, 13))
        self.features.add("chain > RECOMPUTE_LIMIT ops" if r * 2 > RECOMPUTE_LIMIT else "short chain")
        form = self.pick(["gk.sin({s}) * c", "gk.sin({s}) * c + 0.5 * x[i]", "gk.tanh({s} * {e})",
                          "{s} * 0.5 + gk.cos({e}) * 0.5", "gk.sin({s}) * gk.cos({s}) + 0.25 * {e}"])
        for _ in range(r):
            self.emit(depth, f"{s} = " + form.format(s=s, e=self.leaf()))

    def s_long(self, depth: int):
        """A long expression (taped or recomputed by cost), reassigning a local or new."""
        self.features.add("long expression")
        s = self.local()
        if s:
            self.emit(depth, f"{s} = {self.expr(4)} + 0.5 * gk.sin({s})")
        else:
            self.new_local(depth, self.expr(4))

    def s_if(self, depth: int):
        self.features.add("if/else on data")
        s = self.target(depth)
        self.emit(depth, f"if {self.cond()}:")
        self.emit(depth + 1, f"{s} = {self.pick(['gk.sin({s}) * c', '{s} * {e}', '{e}'])}".format(
            s=s, e=self.expr(2)))
        self.block(depth + 1, int(self.r.integers(0, 2)))
        if self.chance(0.75):
            self.emit(depth, "else:")
            self.emit(depth + 1, f"{s} = {self.pick(['gk.cos({s}) + {e}', '{e}', '{s} * 0.5'])}".format(
                s=s, e=self.expr(2)))
            self.block(depth + 1, int(self.r.integers(0, 2)))

    def s_augmented(self, depth: int):
        self.features.add("augmented assignment")
        e = self.expr(2)
        forms = [f"{self.target(depth)} += gk.sin({e})", f"{self.target(depth)} *= gk.tanh({e})",
                 f"y[i] += 0.5 * {e}", f"out[i] *= gk.cos({e})"]
        if self.loops:
            forms.append(f"A[i, {self.loops[-1]}] *= gk.tanh({e})")
        self.emit(depth, self.pick(forms))

    def s_param(self, depth: int):
        """The scalar parameter c reassigned (read before: its value on entry)."""
        self.features.add("parameter reassigned")
        self.emit(depth, f"c = {self.pick(['gk.sin(c) * 1.25', 'c * 0.5 + gk.tanh({e})', 'gk.cos({e}) + c'])}"
                  .format(e=self.expr(2)))

    def s_both(self, depth: int):
        """A new local assigned in both branches, read after the if."""
        self.features.add("if/else on data")
        self.features.add("new local from both branches")
        t = self.fresh()
        self.emit(depth, f"if {self.cond()}:")
        self.emit(depth + 1, f"{t} = {self.expr(2)}")
        self.block(depth + 1, int(self.r.integers(0, 2)))
        self.emit(depth, "else:")
        self.emit(depth + 1, f"{t} = {self.expr(2)}")
        self.scopes[-1].append(t)

    def s_early_return(self, depth: int):
        self.features.add("early return")
        self.emit(depth, f"if {self.cond()}:")
        self.emit(depth + 1, f"out[i] = {self.expr(2)}")
        self.emit(depth + 1, "return")

    def s_select(self, depth: int):
        self.features.add("conditional expression")
        s = self.target(depth)
        self.emit(depth, f"{s} = {self.expr(2)} * gk.sin({s}) if {self.cond()} else gk.tanh({self.expr(2)})")

    def s_store(self, depth: int):
        e = self.expr(2)
        form = self.pick(["out[i] = {e}", "out[i] += {e}", "y[i] = y[i] * gk.tanh({e})",
                          "y[i] = gk.sin(y[i]) * x[i]", "gk.atomic_add(tot, 0, {e})", "out[i] = out[i] * {e}"])
        if "y[i] =" in form:
            self.features.add("overwrite of a read element")
        if "atomic" in form:
            self.features.add("atomic add")
        self.emit(depth, form.format(e=e))

    def loop_var(self) -> str:
        """Loop variables reused by sibling loops (k, l, p by nesting depth), sometimes fresh."""
        return self.fresh("k") if self.chance(0.3) else "klp"[len(self.loops)]

    def s_loop(self, depth: int):
        k = self.loop_var()
        outer = self.loops[-1] if self.loops else None
        ranges = ["range(m)", "range(m)", "range(1, m)", "range(m - 1, -1, -1)"]
        if outer:
            ranges += [f"range({outer} + 1)", f"range({outer} + 1)"]
            self.features.add("nested loop")
        rng = self.pick(ranges)
        self.features.add("downward loop" if "-1" in rng else "loop")
        s = self.target(depth)  # a local carried around the loop
        self.emit(depth, f"for {k} in {rng}:")
        self.loops.append(k)
        self.scopes.append([])
        self.carry(depth + 1, s)
        for _ in range(int(self.r.integers(0, 4))):
            self.statement(depth + 1)
        self.scopes.pop()
        self.loops.pop()

    def carry(self, depth: int, s: str):
        self.features.add("loop-carried local")
        e = self.expr(2)
        self.emit(depth, f"{s} = " + self.pick(["gk.sin({s}) * c + 0.5 * {e}", "gk.tanh({s} * {e})",
                                                "{s} * 0.5 + gk.cos({e}) * 0.5", "{s} + 0.25 * gk.sin({e})",
                                                "{s} * gk.tanh({e})"]).format(s=s, e=e))

    def s_carry(self, depth: int):
        outer = [v for sc in self.scopes[:-1] for v in sc]
        if outer:
            self.carry(depth, self.pick(outer))
        else:
            self.s_chain(depth)

    def s_overwrite(self, depth: int):
        k = self.loops[-1]
        t = self.pick(self.visible() or ["c"])
        self.features.add("overwrite of a read element")
        self.emit(depth, self.pick([f"A[i, {k}] = A[i, {k}] * gk.tanh({t})", f"A[i, {k}] = A[i, {k}] * {t} * 0.5",
                                    f"A[i, {k}] = gk.sin(A[i, {k}]) * {self.expr(1)}",
                                    "y[i] = gk.sin(y[i]) * x[i]", f"y[i] = y[i] * 0.5 + gk.sin(A[i, {k}])"]))

    def s_mean(self, depth: int):
        """A LayerNorm-like mean: summed in a loop, then read by every iteration of the next."""
        self.features.add("value before a loop read by every iteration")
        mu, k, k2 = self.fresh("mu"), self.loop_var(), self.loop_var()
        arr = self.pick(["A", "B"])
        self.emit(depth, f"{mu} = 0.0")
        self.emit(depth, f"for {k} in range(m):")
        self.emit(depth + 1, f"{mu} += {arr}[i, {k}]")
        self.emit(depth, f"{mu} = {mu} / m")
        s = self.target(depth)
        self.emit(depth, f"for {k2} in range(m):")
        self.emit(depth + 1, self.pick([f"A[i, {k2}] = (A[i, {k2}] - {mu}) * c",
                                        f"{s} = {s} + gk.sin({arr}[i, {k2}] - {mu}) * {mu}",
                                        f"{s} = {s} * 0.5 + ({arr}[i, {k2}] - {mu}) * ({arr}[i, {k2}] - {mu})"]))
        self.scopes[-1].append(mu)

    def s_count(self, depth: int):
        """A loop bound counted from data (an integer fixed after its loop)."""
        self.features.add("data-dependent loop bound")
        j, k, k2 = self.fresh("j"), self.loop_var(), self.loop_var()
        self.emit(depth, f"{j} = 0")
        self.emit(depth, f"for {k} in range(m):")
        self.emit(depth + 1, f"if GT(B[i, {k}], 0.5):")
        self.emit(depth + 2, f"{j} += 1")
        s = self.target(depth)
        self.emit(depth, f"for {k2} in range({j}):")
        self.loops.append(k2)
        self.carry(depth + 1, s)
        self.loops.pop()
        if depth == 1:
            self.ints.append(j)

    def source(self) -> str:
        """The kernel's text, conditions written GT(p, q)."""
        self.lines = [f"def {self.name}({PARAMS}):", "    i = gk.tid()", "    n = x.shape[0]"]
        self.scopes = [[]]
        self.new_local(1, self.pick(["x[i]", "x[i] * 0.5 + c", "gk.sin(y[i])"]))
        self.budget = int(self.r.integers(3, 9))
        while self.budget > 0:
            self.statement(1)
        top = self.scopes[0]
        self.emit(1, "out[i] = " + " + ".join(top[-4:]) + (" + 0.5 * out[i]" if self.chance(0.5) else ""))
        if self.x_written:
            self.features.add("in-place update of a read array")
            self.emit(1, self.pick(["x[i] = x[i] * out[i]", "x[i] = gk.sin(x[i]) * out[i] + y[i]"]))
        return "\n".join(self.lines) + "\n"


class _Comparisons(ast.NodeTransformer):
    """GT(p, q) -> p > q."""

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "GT":
            return ast.Compare(node.args[0], [ast.Gt()], [node.args[1]])
        return node


def kernel_source(text: str) -> str:
    return ast.unparse(_Comparisons().visit(ast.parse(text))) + "\n"


def load_kernels(path: str, sources: list[str]):
    """Write `sources` as @gk.kernel functions into module file `path` (gk.kernel reads the source), import it."""
    with open(path, "w") as f:
        f.write("import math\n\nimport gradkern as gk\n\n")
        for src in sources:
            f.write("\n@gk.kernel\n" + src)
    return import_path(path)


# -- the Python run: the primal's oracle, and how far each condition is from its tie --------------------------------
class _FakeGk:
    sin, cos, tanh, exp, sqrt, log = math.sin, math.cos, math.tanh, math.exp, math.sqrt, math.log

    def __init__(self):
        self.thread = 0

    def tid(self):
        return self.thread

    @staticmethod
    def atomic_add(a, index, v):
        a[index] += v


def python_run(text: str, name: str, n: int, values: dict) -> tuple[dict, float]:
    """Run the GT-form source thread by thread on copies of `values`: the arrays
    after the launch, and the smallest |p - q| of a condition evaluated."""
    fake = _FakeGk()
    margin = [math.inf]

    def gt(p, q):
        margin[0] = min(margin[0], abs(p - q))
        return p > q

    ns = {"gk": fake, "math": math, "GT": gt}
    exec(text, ns)
    f = ns[name]
    data = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in values.items()}
    for t in range(n):
        fake.thread = t
        f(*(data[p] for p in PARAMS.split(", ")))
    return data, margin[0]


# -- the run ---------------------------------------------------------------------------------------------------------
@dataclass
class Stats:
    kernels: int = 0
    checked: int = 0
    cpu: int = 0
    hostcuda: int = 0
    redrawn: int = 0  # inputs drawn again: a condition too near its tie
    skipped: int = 0  # no inputs far enough from every tie
    max_tape_bytes: int = 0
    taped: int = 0  # kernels whose plan tapes something
    features: dict = field(default_factory=dict)
    refused: dict = field(default_factory=dict)  # NotDifferentiableError's message -> kernels
    failures: list = field(default_factory=list)

    def __str__(self) -> str:
        return (f"{self.kernels} kernels, {self.checked} checked ({self.cpu} on the compiled CPU backend, "
                f"{self.hostcuda} on hostcuda), "
                f"{self.skipped} skipped near a kink, inputs redrawn {self.redrawn} times; {self.taped} tape "
                f"something (at most {self.max_tape_bytes} B per thread); {sum(len(v) for v in self.refused.values())} "
                f"refused (NotDifferentiableError); failures: {len(self.failures)}")


def _inputs(rng: np.random.Generator, g: _Generator) -> dict:
    n, m = int(rng.integers(2, 6)), int(rng.integers(1, 5))

    def u(*shape):
        return rng.uniform(-0.2, 1.2, shape)
    return {"x": u(n), "y": u(n), "A": u(n, m), "B": u(n, m), "w": u(m), "out": u(n), "tot": u(1),
            "c": float(rng.uniform(0.5, 1.5)), "m": m}


def _annotated(rng: np.random.Generator, g: _Generator, values: dict) -> tuple:
    """Annotations for reverse mode: most arrays Duplicated (seeds random), some read-only ones Const."""
    out = []
    for p in PARAMS.split(", "):
        v = values[p]
        if p == "m":
            out.append(v)
        elif p == "c":
            out.append(gk.Active(v) if rng.random() < 0.7 else v)
        elif p in ("B", "w") or (p == "x" and not g.x_written):
            out.append(gk.Const(v.copy()) if rng.random() < 0.3 else gk.Duplicated(v.copy(), rng.standard_normal(
                v.shape)))
        else:
            out.append(gk.Duplicated(v.copy(), rng.standard_normal(v.shape)))
    return tuple(out)


def copies(args) -> tuple:
    return tuple(type(a)(a.val.copy(), a.dval.copy()) if isinstance(a, gk.Duplicated) else
                 gk.Const(a.val.copy()) if isinstance(a, gk.Const) else a for a in args)


@contextlib.contextmanager
def on_backend(backend: str):
    """check_grad launches on the default (compiled CPU) backend; route it to `backend`."""
    if backend == "cpu":
        yield
        return
    with mock.patch.object(gradkern.testing, "launch", functools.partial(gk.launch, backend=backend)), \
            mock.patch.object(gradkern.testing, "autodiff", functools.partial(gk.autodiff, backend=backend)):
        yield


def tape_bound(text: str, m: int) -> int:
    """An upper bound on the tape bytes per thread from the source (module doc, 4)."""
    fn = ast.parse(text).body[0]
    slots = 0

    def trips(node) -> int:
        return m  # every loop here runs at most m times

    def visit(body, times: int):
        nonlocal slots
        assigned = set()
        for s in body:
            if isinstance(s, ast.For):
                slots += times * 3
                assigned.add(s.target.id)
                visit(s.body, times * trips(s))
            elif isinstance(s, ast.If):
                slots += times * sum(1 for _ in ast.walk(s.test))
                visit(s.body, times)
                visit(s.orelse, times)
            else:
                slots += times * sum(1 for _ in ast.walk(s))
            for t in ast.walk(s):
                if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store):
                    assigned.add(t.id)
        slots += times * 2 * len(assigned)

    visit(fn.body, 1)
    return 8 * slots


def _case(g: _Generator, text: str, src: str, values: dict, backend: str, seed: int) -> str:
    shapes = {k: (v.shape if isinstance(v, np.ndarray) else v) for k, v in values.items()}
    return (f"{g.name} (GRADKERN_FUZZ_SEED={seed}) on {backend}, n={values['x'].shape[0]} {shapes}\n"
            f"features: {sorted(g.features)}\n{src}")


def check_kernel(stats: Stats, rng: np.random.Generator, g: _Generator, text: str, src: str, kernel, backend: str,
                 seed: int):
    for attempt in range(12):
        values = _inputs(rng, g)
        n = values["x"].shape[0]
        expected, margin = python_run(text, g.name, n, values)
        if margin >= MARGIN:
            break
        stats.redrawn += 1
    else:
        stats.skipped += 1
        return
    stats.checked += 1
    stats.cpu += backend == "cpu"
    stats.hostcuda += backend == "hostcuda"
    for f in g.features:
        stats.features[f] = stats.features.get(f, 0) + 1
    case = _case(g, text, src, values, backend, seed)
    names = PARAMS.split(", ")

    def fail(what: str):
        stats.failures.append(f"{what}\n{case}")

    # 1. the plain launch against the Python run
    plain = [v.copy() if isinstance(v, np.ndarray) else v for v in values.values()]
    try:
        gk.launch(kernel, n, *plain, backend=backend)
    except Exception as e:  # noqa: BLE001 - any failure is a finding
        fail(f"launch: {type(e).__name__}: {e}")
        return
    for p, v in zip(names, plain):
        if isinstance(v, np.ndarray) and not np.allclose(v, expected[p], rtol=1e-12, atol=1e-12):
            fail(f"launch: '{p}' {v.tolist()} differs from the Python run's {expected[p].tolist()}")
            return

    args = _annotated(rng, g, values)
    # 2. check_grad: finite differences, dot-product test, forward mode
    try:
        with on_backend(backend):
            report = check_grad(kernel, *args, dim=n, raise_on_failure=False)
    except gk.NotDifferentiableError as e:  # a documented refusal (docs/kernel-language.md), not a wrong gradient
        stats.refused.setdefault(str(e).split(" (in ")[-1].split(":", 1)[-1].splitlines()[0].strip(), []).append(
            g.name)
        return
    except Exception as e:  # noqa: BLE001
        fail(f"check_grad: {type(e).__name__}: {e}")
        return
    if not report.ok:
        fail(f"check_grad:\n{report}")
        return

    # 3. split against fused, primals against the plain launch
    fused, apart = copies(args), copies(args)
    try:
        want = gk.autodiff(kernel, *fused, dim=n, backend=backend)
        forward, reverse = gk.autodiff_thunk(kernel, *(type(a) if isinstance(a, gk.Annotation) else gk.Const
                                                       for a in args), dim=n, backend=backend)
        tape = forward(*apart)
        got = reverse(*apart, tape)
    except Exception as e:  # noqa: BLE001
        fail(f"autodiff / autodiff_thunk: {type(e).__name__}: {e}")
        return
    for p, a, b, v in zip(names, fused, apart, plain):
        if not isinstance(a, gk.Annotation) or isinstance(a, gk.Active):
            continue
        for label, arr in (("fused", a.val), ("split", b.val)):
            if not np.array_equal(arr, v):
                fail(f"{label} primal '{p}' {arr.tolist()} differs from the plain launch's {v.tolist()}")
                return
        if isinstance(a, gk.Duplicated) and not np.allclose(b.dval, a.dval, rtol=1e-12, atol=1e-13):
            fail(f"split shadow '{p}' {b.dval.tolist()} differs from the fused one {a.dval.tolist()}")
            return
    for p, e, x in zip(names, want, got):
        if (e is None) != (x is None) or (e is not None and not math.isclose(x, e, rel_tol=1e-12, abs_tol=1e-13)):
            fail(f"split derivative of '{p}' {x} differs from the fused one {e}")
            return

    # 4. the tape bytes per thread against the bound from the source
    tape_bytes = gk.inspect(kernel, *copies(args), dim=n, mode=gk.Reverse, backend=backend).tape_bytes_per_thread
    stats.max_tape_bytes = max(stats.max_tape_bytes, tape_bytes)
    stats.taped += tape_bytes > 0
    bound = tape_bound(src, values["m"])
    if tape_bytes > bound:
        fail(f"tape: {tape_bytes} B per thread, more than the bound {bound} B from the source")


def fuzz(directory: str, count: int = N_KERNELS, seed: int = SEED, cpu_every: int = CPU_EVERY,
         batch: int = 50, hostcuda_every: int = HOSTCUDA_EVERY) -> Stats:
    stats = Stats()
    rng = np.random.default_rng(seed)
    for first in range(0, count, batch):
        gens = [_Generator(rng, f"tfuzz_{seed}_{first + x}") for x in range(min(batch, count - first))]
        texts = [g.source() for g in gens]
        sources = [kernel_source(t) for t in texts]
        module = load_kernels(os.path.join(directory, f"tfuzz_module_{seed}_{first}.py"), sources)
        for x, (g, text, src) in enumerate(zip(gens, texts, sources)):
            stats.kernels += 1
            backend = fuzz_backend(first + x, cpu_every, hostcuda_every)
            check_kernel(stats, rng, g, text, src, getattr(module, g.name), backend, seed)
    return stats


def test_tape_plans_give_the_gradients_of_random_kernels(tmp_path):
    stats = fuzz(str(tmp_path))
    print(stats)
    for f, k in sorted(stats.features.items()):
        print(f"  {f}: {k} kernels")
    for why, names in stats.refused.items():
        print(f"  refused ({why}): {len(names)} kernels, e.g. {names[0]}")
    assert not stats.failures, "\n\n".join(stats.failures[:3])
    refused = sum(len(v) for v in stats.refused.values())
    assert stats.checked - refused >= 0.75 * stats.kernels and stats.taped
    assert stats.hostcuda or not _HAS_GPP or not HOSTCUDA_EVERY
    assert stats.features.keys() >= {"loop-carried local", "if/else on data", "conditional expression",
                                     "overwrite of a read element", "chain > RECOMPUTE_LIMIT ops", "short chain"}


@pytest.mark.parametrize("seed", [1, 2])
def test_generator_sources_parse(seed):
    """The generator's text is the kernel's with GT(p, q) for p > q."""
    g = _Generator(np.random.default_rng(seed), "probe")
    text = g.source()
    assert "GT(" not in kernel_source(text) and ast.parse(text)


# -- found by this fuzzer ------------------------------------------------------------------------------------------
@gk.kernel
def stencil_after_own_write(x, out):
    i = gk.tid()
    out[i] = x[i]
    s = 0.0
    if i + 1 < x.shape[0]:
        s = x[i + 1]
    out[i] = out[i] * 0.5 + s


@gk.kernel
def neighbour_in_condition(x, out):
    i = gk.tid()
    n = x.shape[0]
    t = x[i]
    out[i] = t
    if x[(i + 1) % n] > 0.3:
        t = t * 2.0
    out[i] = t + out[i] * 0.5


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_gather_replays_in_place_shadow_updates(backend):
    """Found with GRADKERN_FUZZ_TAPE_NEIGHBOURS=1: x's adjoint was a gather (x is read at a neighbour's index),
    whose replay of the reverse dropped the in-place update of out's shadow (the reverse of `out[i] * 0.5`)
    and then read the stale value: dx = [1, 2, 2, 2]. A reverse whose threads read what they wrote is not
    gathered now (transforms/gather.py)."""
    x = np.array([0.1, 0.5, 0.9, 0.2])
    dx = np.zeros(4)
    gk.autodiff(stencil_after_own_write, gk.Duplicated(x, dx), gk.Duplicated(np.zeros(4), np.ones(4)), dim=4,
                backend=backend)
    np.testing.assert_allclose(dx, [0.5, 1.5, 1.5, 1.5], rtol=1e-14)


def test_inactive_neighbour_read_with_in_place_shadow_update():
    """The same gather bug, where the neighbour read is only a branch condition: dx was [3, 3, 2, 2]."""
    x = np.array([0.1, 0.5, 0.9, 0.2])
    dx = np.zeros(4)
    gk.autodiff(neighbour_in_condition, gk.Duplicated(x, dx), gk.Duplicated(np.zeros(4), np.ones(4)), dim=4,
                backend="interp")
    np.testing.assert_allclose(dx, [2.5, 2.5, 1.5, 1.5], rtol=1e-14)
