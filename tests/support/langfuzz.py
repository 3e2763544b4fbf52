"""Random kernels over the whole kernel language (tests/fuzz/test_language_fuzz.py, docs/testing.md).

A kernel is `def <name>(x, y, out, w, idx, tot, c, m)` launched over a 1-D, 2-D or 3-D domain D:
* x, y, out: float arrays of shape D; x only read (at the thread's own index, at a neighbour's
  `(i + 1) % n`, by a gather), y updated in place at the thread's own index (`y[I] = f(y[I])`), out
  written at the thread's own index and read after;
* w: a float vector of length L, only read (`w[p]` in loops, `w[idx[I]]`);
* idx: an int64 array of shape D with values in [0, L), repeated (gathers, and scatters by `gk.atomic_add`);
* tot: a float vector of length L, the shared output of `gk.atomic_add(tot, idx[I], v)` and `(tot, 0, v)`;
* c: a float scalar (Active or Const; reassigned sometimes), m: the int trip count (1 <= m <= L).
The body draws: locals reassigned in straight lines, in loops (the tape's hard case) and in branches;
`if/elif/else` on data and on the thread index; `a if p else b`; `for` over `range(m)`, `range(3)`,
`range(1, m)`, downward and triangular nested ranges; `for ... break/continue`; `while` loops with
`break`/`continue` (integer-only ones, and ones computing active values, whose reverse counts the iterations);
`return` inside for loops (nested too), while loops and a `@gk.func` (`lf_search`);
local arrays (`gk.local((3,))`, filled and read in unrolled loops); small vectors (`gk.vec3`, `dot`, `cross`,
`length`, `normalize`, components by name, by constant and in loops over `range(3)` or a literal tuple, which the
frontend unrolls); `@gk.func` calls (one with a branch; three taking and returning vec3, `lf_vnorm`, `lf_vcross`
and `lf_vstep`, with a loop and early returns, called in run-time loops, while loops and branches);
`+ - * / **`, sin cos tanh exp log sqrt abs min max clamp in gk.*, math.* and builtin spellings.

Kinks are written as calls in the generated text: GT(p, q) for `p > q`, ABS(e), MIN(a, b), MAX(a, b),
CLAMP(x, lo, hi). `kernel_source` turns them into the language's spellings; `langfuzz_run.python_run` executes the text
itself thread by thread in float64 (the primal's oracle) and records the least distance of any of them from
its kink, so the test redraws inputs until finite differences cannot cross one. An exact tie is not counted: with
random inputs it comes only from constants (`ABS(0.25 * i)` at i = 0, `FLOOR(2.0 * 0.5)`) or the same value on both
sides (`MIN(t, t)`), where no difference crosses a kink.
"""

from __future__ import annotations

import ast
import zlib

import numpy as np

from support.generators import TextGenerator, import_path

PARAMS = ("x", "y", "out", "w", "idx", "tot", "c", "m")
VECTOR_BLOCKS = 0.35  # the share of kernels calling lf_vstep in loops and branches (Generator.vector_block)
TID = {1: "i", 2: "i, j", 3: "i, j, h"}
FUNCS = '''
@gk.func
def lf_soft(a, b):
    return gk.tanh(a) * b + 0.5 * gk.sin(a)


@gk.func
def lf_branch(a, b):
    r = a * b
    if GT(a, 0.4):
        r = gk.cos(b) + a
    return r


@gk.func
def lf_search(a, b):
    r = a
    for k in range(3):
        r = gk.sin(r) * 0.8 + b * 0.3
        if GT(r, 0.5):
            return r * 1.5
    return r - 0.25


@gk.func
def lf_vnorm(a):
    return gk.normalize(a)


@gk.func
def lf_vcross(a, b):
    r = gk.cross(a, b)
    return r


@gk.func
def lf_vstep(a, b, s):
    if GT(a.x, 0.8):
        return -a
    r = a
    for k in range(2):
        r = r * 0.5 + b * s
    if GT(s, 0.3):
        return gk.cross(r, gk.vec3(0.5, -0.25, 1.0)) * 0.5
    return r - 0.25 * b
'''


class Generator(TextGenerator):
    """One random kernel (module doc)."""

    def __init__(self, rng: np.random.Generator, name: str, ndim: int):
        super().__init__(rng, name)
        self.ndim, self.I = ndim, TID[ndim]
        self.budget = 0
        self.below_m: set[str] = set()  # loop variables < m (w[m - 1 - p] is in bounds)
        self.selects = 0  # conditional expressions being drawn (a gk.func call there is refused: rarely drawn)
        self.vr = np.random.default_rng(zlib.crc32(name.encode()))  # vector_calls' draws, apart from self.r's
        self.vcalls = 0
        self.vblocks = int(self.vr.random() < VECTOR_BLOCKS)  # kernels given a vector_block

    # -- expressions
    def leaf(self) -> str:
        rest = self.I[1:]  # ", j" or ", j, h" or ""
        xs = [f"x[{self.I}]", f"y[{self.I}]", "c", "0.5", "1.5", f"out[{self.I}]", f"w[idx[{self.I}]]",
              f"x[(i + 1) % n{rest}]", "0.25 * i", f"0.5 * float((idx[{self.I}] + i) // 2)",
              "0.25 * (i % 3)", f"0.5 * float((idx[{self.I}] - 2) // 2)", "0.25 * float((i - 2) % 3)",
              f"0.25 * float(int(-0.5 * float(idx[{self.I}]) - 0.25))", f"0.125 * float(idx[{self.I}] ^ i)",
              "0.125 * float((i << 1) | 1)", "0.25 * float(-i >> 1)", f"0.125 * float((idx[{self.I}] - i) % -3)"]
        if self.loops:
            p = self.loops[-1]
            xs += [f"w[{p}]", f"0.25 * {p}"] + ([f"w[m - 1 - {p}]"] if p in self.below_m else [])
        xs += self.visible() * 2
        return self.pick(xs)

    def expr(self, depth: int) -> str:
        if depth <= 0 or self.chance(0.2):
            return self.leaf()
        kind = self.pick(["unary", "unary", "binary", "binary", "kink", "select"] +
                         (["func"] if not self.selects or self.chance(0.05) else []))
        if kind == "unary":
            e = self.expr(depth - 1)
            return self.pick([f"gk.sin({e})", f"math.cos({e})", f"gk.tanh({e})", f"gk.exp(gk.tanh({e}))",
                              f"gk.sqrt({e} * {e} + 0.5)", f"-{e}", f"{e} ** 2", f"({e} * {e} + 0.25) ** 1.5",
                              f"math.log(1.5 + gk.sin({e}))", f"np.tanh({e})", f"gk.sinh(0.5 * {e})",
                              f"math.atan({e})", f"gk.erf({e})", f"gk.expm1(0.5 * {e})", f"math.log1p({e} * {e})",
                              f"gk.hypot({e}, 0.5)", f"gk.atan2({e}, 1.5)", f"gk.cosh(0.5 * {e})",
                              f"np.exp(-{e} * {e})"])
        if kind == "kink":
            self.features.add("abs/min/max/clamp")
            a, b = self.expr(depth - 1), self.expr(depth - 1)
            return self.pick([f"ABS({a})", f"MIN({a}, {b})", f"MAX({a}, {b})", f"CLAMP({a}, 0.1, 0.9)",
                              f"FLOOR(2.0 * {a}) * {b}", f"SIGN({a}) * {b}", f"FMOD({a}, 0.7)",
                              f"float(INT(2.0 * {a})) * {b}"])
        if kind == "select":
            self.features.add("conditional expression")
            self.selects += 1
            text = f"({self.expr(depth - 1)} if {self.cond()} else {self.expr(depth - 1)})"
            self.selects -= 1
            return text
        if kind == "func":
            self.features.add("gk.func call")
            f = self.pick(['lf_soft', 'lf_branch', 'lf_search'])
            if f == "lf_search":
                self.features.add("return inside a loop")
            return f"{f}({self.expr(depth - 1)}, {self.expr(depth - 1)})"
        a, b = self.expr(depth - 1), self.expr(depth - 1)
        return self.pick([f"({a} + {b})", f"({a} - {b})", f"{a} * {b} * 0.5", f"{a} / (1.5 + gk.tanh({b}))"])

    def cond(self) -> str:
        p = [f"x[{self.I}]", f"y[{self.I}]", f"w[idx[{self.I}]]", f"gk.sin({self.expr(1)})"]
        if self.loops:
            p.append(f"w[{self.loops[-1]}]")
        if self.chance(0.3):
            p += self.visible()
        text = f"GT({self.pick(p)}, {self.pick(['0.0', '0.3', '0.5', '0.8'])})"
        if self.chance(0.15):
            text = f"{text} and GT({self.pick(p)}, 0.4)"
        return text

    def index_cond(self) -> str:
        self.features.add("branch on the thread index")
        forms = ["i % 2 == 0", "i == 0", "i + 1 < n", "i > 1"]
        if self.ndim > 1:
            forms += ["i + j > 1", "j == 0 or i == 1"]
        if self.loops:
            forms += [f"{self.loops[-1]} % 2 == 1", f"{self.loops[-1]} < i"]
        return self.pick(forms)

    # -- statements
    def target(self, depth: int) -> str:
        vs = self.visible()
        if vs and self.chance(0.8):
            return self.pick(vs)
        t = self.fresh()
        self.emit(depth, f"{t} = {self.expr(2)}")
        self.scopes[-1].append(t)
        return t

    def statement(self, depth: int):
        if self.vblocks and self.vr.random() < 0.15:
            self.vector_block(depth)
        self.budget -= 1
        kinds = ["new", "chain", "store", "store", "if", "index_if", "augmented", "param", "select", "tuple_loop",
                 "vector", "array_augmented"]
        if self.budget > 0 and len(self.loops) < 2 and depth < 4:
            kinds += ["loop", "loop", "jump_loop", "local_array"] + ["while"]
        if self.loops:
            kinds += ["carry", "carry"]
        if not self.loops and depth < 3:
            kinds.append("early_return")
        getattr(self, "s_" + self.pick(kinds))(depth)

    def s_new(self, depth: int):
        t = self.fresh()
        self.emit(depth, f"{t} = {self.expr(int(self.r.integers(1, 4)))}")
        self.scopes[-1].append(t)

    def s_chain(self, depth: int):
        self.features.add("local reassigned")
        s = self.target(depth)
        form = self.pick(["gk.sin({s}) * c", "gk.tanh({s} * {e})", "{s} * 0.5 + gk.cos({e}) * 0.5"])
        for _ in range(int(self.r.integers(1, 6))):
            self.emit(depth, f"{s} = " + form.format(s=s, e=self.leaf()))

    def s_store(self, depth: int):
        e = self.expr(2)
        own = self.I
        form = self.pick([f"out[{own}] = {{e}}", f"out[{own}] += {{e}}", f"y[{own}] = gk.sin(y[{own}]) * {{e}}",
                          f"gk.atomic_add(tot, idx[{own}], {{e}})", "gk.atomic_add(tot, 0, {e})",
                          f"y[{own}] = y[{own}] * 0.5 + {{e}}"])
        self.features.add("atomic add" if "atomic" in form else "in-place update" if "y[" in form else "store")
        self.emit(depth, form.format(e=e))

    def s_tuple_loop(self, depth: int):
        self.features.add("loop over a literal tuple")
        s, v = self.target(depth), self.fresh("v")
        self.emit(depth, f"for {v} in (0.5, {self.leaf()}, {self.pick(['c', f'x[{self.I}]', '-0.25'])}):")
        self.emit(depth + 1, f"{s} = {s} * 0.5 + gk.sin({v}) * {self.leaf()}")

    def s_vector(self, depth: int):
        self.features.add("small vectors")
        s, v = self.target(depth), self.fresh("vec")
        self.emit(depth, f"{v} = gk.vec3({self.expr(1)}, 1.5 + gk.sin({s}), {self.leaf()})")
        # normalize and cross through device functions taking and returning vectors (session 58; the same picks,
        # so every seed draws the kernel it drew before, with the calls in place of their inlined bodies)
        form = self.pick([f"gk.length({v}) * 0.5", f"gk.dot({v}, {v}) * 0.25 + {v}.x", f"lf_vnorm({v}).y + {v}[2]",
                          f"lf_vcross({v}, gk.vec3(0.5, {s}, 1.0)).z", "loop"])
        if form.startswith("lf_v"):
            self.features.add("vectors through a gk.func")
        if form != "loop":
            self.emit(depth, f"{s} = {form}")
            if form.startswith("lf_v"):
                self.vector_calls(depth, s, v)
            return
        # a loop over the components, unrolled by the frontend (session 57, docs/kernel-language.md; its
        # hand-unrolled twin: tests/frontend/test_vector_loops.py)
        self.features.add("loop over a vector's components")
        k = self.fresh("k")
        self.emit(depth, f"for {k} in {self.pick(['range(3)', '(2, 0, 1)', 'range(2, -1, -1)'])}:")
        self.emit(depth + 1, f"{s} = {s} * 0.5 + {v}[{k}] * {self.leaf()}")

    def vector_block(self, depth: int):
        """In some kernels (`self.vblocks`), once, where a statement is drawn (in the kernel's loops and branches
        too): a vec3 of a visible local and the thread's values, given to vector_calls, the result added to
        tot."""
        vr, names = self.vr, self.visible() or ["c"]
        self.vblocks -= 1
        s, v = names[int(vr.integers(len(names)))], f"vb{self.vcalls}"
        self.emit(depth, f"{v} = gk.vec3({s}, x[{self.I}] * 0.5, -0.75)")
        t = f"tb{self.vcalls}"
        self.emit(depth, f"{t} = {s}")
        self.vector_calls(depth, t, v, 1.0)
        self.emit(depth, f"gk.atomic_add(tot, 0, {t} * 0.5)")  # live: out and y may be overwritten after

    def vector_calls(self, depth: int, s: str, v: str, p: float = 0.5):
        """With probability `p`, calls of `lf_vstep` (a vector function with early returns on three paths and a
        vector local reassigned in a loop; a return inside the loop would make its trip count depend on data,
        and the kernel's reverse refused where that data was overwritten) in a run-time `range` loop, a `while`
        loop or the two arms of an `if` (session 58's red-team), drawn from a generator of their own
        (`self.vr`), so every seed draws the rest of its kernel as before. The oracle is python_run's: the text
        itself run by Python on langfuzz_run.FakeGk's tuples of floats."""
        vr = self.vr
        if vr.random() >= p:
            return
        self.features.add("vector gk.func calls in loops and branches")
        u, k = f"vq{self.vcalls}", f"kq{self.vcalls}"
        self.vcalls += 1
        form = ("range", "while", "if")[int(vr.integers(3))]
        if form == "range":
            self.emit(depth, f"{u} = {v}")
            self.emit(depth, f"for {k} in range(m):")
            self.emit(depth + 1, f"{u} = lf_vstep({u}, {v}, c * 0.25)")
        elif form == "while":
            self.emit(depth, f"{u} = {v} * 0.5")
            self.emit(depth, f"{k} = 0")
            self.emit(depth, f"while {k} < 2:")
            self.emit(depth + 1, f"{u} = lf_vstep({u}, gk.vec3(0.25, {s}, -0.5), 0.4)")
            self.emit(depth + 1, f"{k} += 1")
        else:
            self.emit(depth, f"if GT({v}.x, {s}):")
            self.emit(depth + 1, f"{u} = lf_vstep({v}, -{v}, 0.6)")
            self.emit(depth, "else:")
            self.emit(depth + 1, f"{u} = lf_vstep(gk.vec3({s}, 0.5, 1.0), {v}, 0.1)")
        self.emit(depth, f"{s} = gk.dot({u}, {v}) * 0.25 + {u}.y")

    def s_array_augmented(self, depth: int):
        self.features.add("augmented assignment to an element")
        e = self.expr(2)
        self.emit(depth, self.pick([f"out[{self.I}] -= {e}", f"y[{self.I}] *= gk.tanh({e})",
                                    f"out[{self.I}] /= 1.5 + {e} * {e}"]))

    def s_if(self, depth: int):
        self.features.add("if/elif/else on data")
        s = self.target(depth)
        self.emit(depth, f"if {self.cond()}:")
        self.emit(depth + 1, f"{s} = {self.expr(2)}")
        self.block(depth + 1, int(self.r.integers(0, 2)))
        if self.chance(0.4):
            self.features.add("elif")
            self.emit(depth, f"elif {self.cond()}:")
            self.emit(depth + 1, f"{s} = gk.sin({s}) * {self.expr(1)}")
        if self.chance(0.7):
            self.emit(depth, "else:")
            self.emit(depth + 1, f"{s} = {s} * 0.5 + {self.expr(1)}")
            self.block(depth + 1, int(self.r.integers(0, 2)))

    def s_index_if(self, depth: int):
        s = self.target(depth)
        self.emit(depth, f"if {self.index_cond()}:")
        self.emit(depth + 1, f"{s} = {self.expr(2)}")
        self.block(depth + 1, int(self.r.integers(0, 2)))
        if self.chance(0.5):
            self.emit(depth, f"elif {self.index_cond()}:")
            self.emit(depth + 1, f"{s} = {s} + {self.expr(1)}")
        self.emit(depth, "else:")
        self.emit(depth + 1, f"{s} = gk.tanh({s})")

    def s_augmented(self, depth: int):
        e = self.expr(2)
        self.emit(depth, self.pick([f"{self.target(depth)} += gk.sin({e})", f"{self.target(depth)} *= gk.tanh({e})",
                                    f"{self.target(depth)} -= 0.5 * {e}", f"{self.target(depth)} /= 1.5 + {e} * {e}"]))

    def s_param(self, depth: int):
        self.features.add("scalar parameter reassigned")
        self.emit(depth, f"c = {self.pick(['gk.sin(c) * 1.25', 'c * 0.5 + gk.tanh({e})'])}".format(e=self.expr(1)))

    def s_select(self, depth: int):
        self.features.add("conditional expression")
        s = self.target(depth)
        self.selects += 1
        self.emit(depth, f"{s} = {self.expr(2)} if {self.cond()} else gk.tanh({self.expr(1)})")
        self.selects -= 1

    def s_early_return(self, depth: int):
        self.features.add("early return")
        self.emit(depth, f"if {self.pick([self.cond(), self.index_cond()])}:")
        self.emit(depth + 1, f"out[{self.I}] = {self.expr(2)}")
        self.emit(depth + 1, "return")

    def loop_var(self) -> str:
        return "pqr"[len(self.loops)] if self.chance(0.7) else self.fresh("p")

    def open_loop(self, depth: int) -> str:
        p = self.loop_var()
        ranges = ["range(m)", "range(m)", "range(1, m)", "range(m - 1, -1, -1)", "range(3)"]
        if self.loops:
            ranges.append(f"range({self.loops[-1]} + 1)")
            self.features.add("nested loop")
        rng = self.pick(ranges)
        self.emit(depth, f"for {p} in {rng}:")
        if rng != "range(3)" and ("+ 1" not in rng or self.loops[-1] in self.below_m):
            self.below_m.add(p)
        else:
            self.below_m.discard(p)
        self.loops.append(p)
        self.scopes.append([])
        return p

    def close_loop(self):
        self.scopes.pop()
        self.loops.pop()

    def carry(self, depth: int, s: str):
        self.features.add("loop-carried local")
        e = self.expr(2)
        form = self.pick(["gk.sin({s}) * c + 0.5 * {e}", "gk.tanh({s} * {e})", "{s} * 0.5 + gk.cos({e}) * 0.5",
                          "{s} * gk.tanh({e})"])
        self.emit(depth, f"{s} = " + form.format(s=s, e=e))

    def s_carry(self, depth: int):
        outer = [v for sc in self.scopes[:-1] for v in sc]
        self.carry(depth, self.pick(outer)) if outer else self.s_chain(depth)

    def s_loop(self, depth: int):
        s = self.target(depth)
        self.open_loop(depth)
        self.carry(depth + 1, s)
        for _ in range(int(self.r.integers(0, 3))):
            self.statement(depth + 1)
        self.close_loop()

    def s_jump_loop(self, depth: int):
        self.features.add("for with break/continue")
        s = self.target(depth)
        p = self.open_loop(depth)
        self.emit(depth + 1, f"if {p} == 1:")
        self.emit(depth + 2, "continue")
        self.carry(depth + 1, s)
        self.emit(depth + 1, f"if {self.pick([f'GT({s}, 0.7)', f'{p} == 2', self.cond()])}:")
        if self.chance(0.2):
            self.features.add("return inside a loop" if len(self.loops) == 1 else "return inside nested loops")
            self.emit(depth + 2, f"out[{self.I}] = {s}")
            self.emit(depth + 2, "return")
        else:
            self.emit(depth + 2, "break")
        self.close_loop()
        if self.chance(0.3):
            self.features.add("for ... else")
            self.emit(depth, "else:")
            self.emit(depth + 1, f"{s} = {s} * 0.5 + {self.leaf()}")

    def s_while(self, depth: int):
        q, cnt = self.fresh("q"), self.fresh("cnt")
        self.emit(depth, f"{q} = 0")
        self.emit(depth, f"{cnt} = 0")
        self.emit(depth, f"while {q} < m:")
        self.emit(depth + 1, f"{q} += 1")
        self.emit(depth + 1, f"if {q} % 3 == 2:")
        self.emit(depth + 2, "continue")
        self.emit(depth + 1, f"{cnt} += 1")
        leave = False
        if self.chance(0.35):  # active values in the while: the reverse counts its iterations
            self.features.add("while computing active values")
            s = self.pick(self.visible() or ["c"])
            if s == "c":
                self.features.add("scalar parameter reassigned")
            self.emit(depth + 1, f"{s} = {s} * 0.5 + gk.sin(w[{q} - 1])")
            self.emit(depth + 1, f"if GT({s}, 0.9):")
            leave = self.chance(0.25)
            if leave:
                self.features.add("return inside a while")
                self.emit(depth + 2, f"out[{self.I}] = {s}")
        else:
            self.features.add("integer while")
            self.emit(depth + 1, f"if {cnt} > 2 or {self.pick(['i == 1', f'{q} == m - 1'])}:")
        self.emit(depth + 2, "return" if leave else "break")
        s = self.target(depth)
        self.emit(depth, f"for {self.fresh('p')} in range({cnt}):")
        self.emit(depth + 1, f"{s} = {s} * 0.5 + gk.sin({s})")

    def s_local_array(self, depth: int):
        self.features.add("local array")
        if self.chance(0.3):
            f, q, q2 = self.fresh("f"), self.fresh("u"), self.fresh("u")
            s = self.target(depth)
            self.emit(depth, f"{f} = gk.local((2, 2))")
            self.emit(depth, f"for {q} in range(2):")
            self.emit(depth + 1, f"for {q2} in range(2):")
            self.emit(depth + 2, f"{f}[{q}, {q2}] = gk.sin({s} + {q} - {q2}) * {self.leaf()}")
            self.emit(depth, f"{s} = {f}[0, 0] * {f}[1, 1] - {f}[0, 1] * {f}[1, 0]")
            return
        f, q = self.fresh("f"), self.fresh("u")
        self.emit(depth, f"{f} = gk.local((3,))")
        self.emit(depth, f"for {q} in range(3):")
        self.loops.append(q)
        self.emit(depth + 1, f"{f}[{q}] = {self.expr(2)}")
        self.loops.pop()
        s = self.target(depth)
        if self.chance(0.5):
            q2 = self.fresh("u")
            self.emit(depth, f"for {q2} in range(3):")
            self.emit(depth + 1, f"{s} = {s} * 0.5 + {f}[{q2}] * {f}[2 - {q2}]")
        else:
            self.emit(depth, f"{f}[1] = {f}[1] * {f}[0] + {s}")
            self.emit(depth, f"{s} = {f}[0] + gk.sin({f}[1]) - {f}[2]")

    def source(self) -> str:
        self.lines = [f"def {self.name}({', '.join(PARAMS)}):", f"    {self.I} = gk.tid()", "    n = x.shape[0]"]
        self.scopes = [[]]
        t = self.fresh()
        self.emit(1, f"{t} = {self.pick([f'x[{self.I}]', f'x[{self.I}] * 0.5 + c', f'gk.sin(y[{self.I}])'])}")
        self.scopes[0].append(t)
        self.budget = int(self.r.integers(3, 8))
        while self.budget > 0:
            self.statement(1)
        top = self.scopes[0]
        if self.chance(0.05):  # a race: gk.RaceError at the launch, or, where none happened, the Python run's values
            self.features.add("racy access")
            rest = self.I[1:]
            self.emit(1, self.pick([f"out[(i + 1) % n{rest}] = {top[-1]}", f"{top[-1]} += y[(i + 1) % n{rest}]",
                                    f"y[(i + 1) % n{rest}] = 0.5 * {top[-1]}"]))
            self.emit(1, f"y[{self.I}] = 0.5 * y[{self.I}]")
        tail = f" + 0.5 * out[{self.I}]" if self.chance(0.5) else ""
        self.emit(1, f"out[{self.I}] = " + " + ".join(top[-3:]) + tail)
        return "\n".join(self.lines) + "\n"


# -- the kernel's spelling of the kink calls ------------------------------------------------------------------------
class _Spelling(ast.NodeTransformer):
    """GT(p, q) -> p > q; ABS/MIN/MAX/CLAMP -> one of the language's spellings (drawn per call site)."""

    def __init__(self, rng: np.random.Generator):
        self.r = rng

    def visit_Call(self, node):
        self.generic_visit(node)
        if not isinstance(node.func, ast.Name):
            return node
        f = node.func.id
        if f == "GT":
            return ast.Compare(node.args[0], [ast.Gt()], [node.args[1]])
        spell = {"ABS": ["gk.abs", "abs", "np.abs", "math.fabs"], "MIN": ["gk.min", "min"],
                 "MAX": ["gk.max", "max"], "CLAMP": ["gk.clamp", "np.clip"], "FLOOR": ["gk.floor", "math.floor"],
                 "SIGN": ["gk.sign", "np.sign"], "FMOD": ["gk.fmod", "math.fmod"], "INT": ["int"]}.get(f)
        if spell is None:
            return node
        name = spell[int(self.r.integers(len(spell)))]
        return ast.Call(ast.parse(name, mode="eval").body, node.args, [])


def kernel_source(text: str, seed: int) -> str:
    return ast.unparse(_Spelling(np.random.default_rng(seed)).visit(ast.parse(text))) + "\n"


def load_module(path: str, sources: list[str], seed: int):
    """Write the functions (undecorated) into module `path`, import it; the caller wraps each in gk.kernel."""
    with open(path, "w") as f:
        f.write("import math\n\nimport numpy as np\n\nimport gradkern as gk\n\n")
        f.write(kernel_source(FUNCS, seed))
        for src in sources:
            f.write("\n\n" + src)
    return import_path(path)
