"""Random kernels that try to make the tape planner elide a value that is overwritten before the reverse needs it
(tests/fuzz/test_crossmode_fuzz.py, docs/testing.md "The program save fuzzer and the
cross-mode fuzzer").

A kernel is `def <name>(a, b, x, out, idx, c, k, m)` launched over n threads, one per element:
* a, b: float arrays of length n, read and overwritten in place at the thread's element, spelled so that the
  element coincides with the one read only at run time: `a[i + k]` with k == 0, `a[idx[i]]` with idx the
  identity (the launch passes an int array; the analyses see an arbitrary index), and through an exact alias
  (the launch passes the same array as a and b, sometimes);
* x: read only, at the thread's element and its neighbour's `x[(i + 1) % n]` (a gather in the reverse);
* out: written at the thread's element or at `out[idx[i]]`, and read back;
* c: a float scalar (Active), m: a loop's trip count.
The body reads an element into a local, overwrites the element (directly, through `+ k`, through `idx`, in a
loop that carries the overwrite from one iteration to the next), and uses the local afterwards, so a planner that
recomputes the local from memory instead of taping it reads the new value. Branches test integers only (the thread
index, the loop variable, `idx[i]`): no kink, so central differences never cross one. Values stay bounded (sin,
tanh, factors below 1).
"""

from __future__ import annotations

import numpy as np

from support.generators import TextGenerator, import_path

PARAMS = ("a", "b", "x", "out", "idx", "c", "k", "m")
READS = ("a[i]", "a[i + k]", "a[idx[i]]", "b[i]", "b[i + k]", "b[idx[i]]", "x[i]", "x[(i + 1) % n]", "out[i]", "c")
WRITES = ("a[i]", "a[i + k]", "a[idx[i]]", "b[i]", "b[i + k]", "b[idx[i]]", "out[i]", "out[idx[i]]")


class Generator(TextGenerator):
    """One random kernel (module doc)."""

    def __init__(self, rng: np.random.Generator, name: str):
        super().__init__(rng, name)
        self.budget = 0

    def leaf(self) -> str:
        xs = list(READS) + self.visible() * 3
        if self.loops:
            xs += [f"0.25 * {self.loops[-1]}"]
        return self.pick(xs)

    def expr(self, depth: int) -> str:
        if depth <= 0 or self.chance(0.25):
            return self.leaf()
        e = self.expr(depth - 1)
        if self.chance(0.4):
            return self.pick([f"gk.sin({e})", f"gk.tanh({e})", f"gk.cos({e}) * 0.5", f"{e} * {e} * 0.25",
                              f"gk.exp(0.5 * gk.sin({e}))"])
        f = self.expr(depth - 1)
        return self.pick([f"({e} + {f}) * 0.5", f"{e} * {f} * 0.5", f"({e} - {f} * 0.5)",
                          f"{e} / (1.5 + gk.tanh({f}))"])

    def statement(self, depth: int):
        self.budget -= 1
        kinds = ["read", "read", "overwrite", "overwrite", "use", "int_if"]
        if self.budget > 0 and len(self.loops) < 2:
            kinds += ["loop", "loop"]
        getattr(self, "s_" + self.pick(kinds))(depth)

    def s_read(self, depth: int):
        t = self.fresh()
        self.emit(depth, f"{t} = {self.expr(2)}")
        self.scopes[-1].append(t)

    def s_overwrite(self, depth: int):
        target = self.pick(WRITES)
        op = self.pick(["=", "=", "+=", "*="])
        value = self.expr(2)
        if op == "*=":
            value = f"gk.tanh({value})"
        self.emit(depth, f"{target} {op} {value}")
        self.features.add("overwrite through " + ("k" if "+ k" in target else "idx" if "idx" in target else "own"))

    def s_use(self, depth: int):
        vs = self.visible()
        if not vs:
            return self.s_read(depth)
        t = self.pick(vs)
        self.emit(depth, f"{self.pick(('out[i]', 'a[i]', 'b[i + k]'))} = {self.expr(1)} * {t}")

    def s_int_if(self, depth: int):
        q = self.loops[-1] if self.loops else "i"
        self.emit(depth, f"if {self.pick([f'{q} % 2 == 0', 'idx[i] > 2', 'i < n - 1', f'{q} == 1'])}:")
        self.block(depth + 1, int(self.r.integers(1, 3)))
        if self.chance(0.5):
            self.emit(depth, "else:")
            self.block(depth + 1, int(self.r.integers(1, 3)))

    def s_loop(self, depth: int):
        q = self.fresh("q")
        self.features.add("loop-carried overwrite")
        self.emit(depth, f"for {q} in {self.pick(['range(m)', 'range(m - 1, -1, -1)', 'range(1, m)'])}:")
        self.loops.append(q)
        self.scopes.append([])
        # the loop's own read-overwrite-use: the value read this iteration is overwritten, then used
        t = self.fresh("s")
        target = self.pick(("a[i]", "a[i + k]", "a[idx[i]]", "b[i]", "b[idx[i]]"))
        self.emit(depth + 1, f"{t} = {target}")
        self.scopes[-1].append(t)
        self.emit(depth + 1, f"{target} = gk.sin({t}) * c + 0.3 * {self.expr(1)}")
        for _ in range(int(self.r.integers(0, 3))):
            self.statement(depth + 1)
        self.emit(depth + 1, f"out[i] = out[i] * 0.5 + gk.tanh({t}) * {self.leaf()}")
        self.scopes.pop()
        self.loops.pop()

    def source(self) -> str:
        self.lines = []
        self.budget = int(self.r.integers(4, 10))
        self.emit(0, "@gk.kernel")
        self.emit(0, f"def {self.name}({', '.join(PARAMS)}):")
        self.emit(1, "i = gk.tid()")
        self.emit(1, "n = x.shape[0]")
        self.scopes = [[]]
        for _ in range(int(self.r.integers(3, 7))):
            self.statement(1)
        t = self.visible()
        self.emit(1, f"out[i] = out[i] + {self.pick(t) if t else 'a[i]'} * 0.5")
        return "\n".join(self.lines)


def load_module(path: str, sources: list[str]):
    with open(path, "w") as f:
        f.write("import gradkern as gk\n\n\n" + "\n\n\n".join(sources) + "\n")
    return import_path(path)


def inputs(rng: np.random.Generator, n: int, m: int) -> dict:
    return {"a": rng.uniform(-1.0, 1.0, n), "b": rng.uniform(-1.0, 1.0, n), "x": rng.uniform(-1.0, 1.0, n),
            "out": rng.uniform(-1.0, 1.0, n), "idx": np.arange(n, dtype=np.int64), "c": float(rng.uniform(0.3, 0.9)),
            "k": 0, "m": m}
