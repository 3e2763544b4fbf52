"""Random kernels stressing the language's newest constructs (tests/fuzz/test_new_features_fuzz.py, docs/testing.md).

`Generator` draws kernels of tests/support/langfuzz.py's shape (the same parameters, Python run and spellings), with
these statements drawn more often than the rest of the language:
* tuple assignment: locals swapped and rotated, an own element and a local, two own elements swapped
  (`y[I], out[I] = out[I], y[I]`), an index bound left to right (`k = (i + 1) % n; k, out[k] = i, v` writes the
  thread's own element);
* chained assignment: `s = u = e`, `out[I] = s = e`, `out[I] = y[I] = e`;
* `float("inf")` / `math.inf` / `float("-inf")` as the start of a running minimum, maximum or argmin, and
  kept by a branch that may not replace it (`MIN(best, 2.0)` after);
* nested loops with `continue` and `break` in the inner and the outer loop, and a return under two branches
  inside a loop;
* grid-stride loops over w (`g = i; while g < L: ...; g += n`, and `for g in range(i, L, n)`), with active
  values carried and `gk.atomic_add(tot, g, v)` inside;
* integer `//` and `%` with negative divisors (`// -1`, `% -3`) among the leaves.
A racy variant writes a neighbour's element through a tuple or chained assignment; an outside variant reads past
an array's end (a grid-stride loop's bound off by one, `w[m - p]`, `x[i + 1]`).

`integer_kernel` draws a kernel of random int64 expressions (`+ - * // % << >> & | ^ ~`, unary minus, `abs`,
`min`, `max`, run-time
and constant divisors -1, 0 and others) over int64/int32 inputs at the edges (INT64_MIN, INT64_MAX, 0, +-1, shift
amounts outside [0, 64)); `integer_oracle` evaluates one in Python with NumPy's int64 rules
(docs/language.md#integer-arithmetic): wrap after every operation, `x // 0 == x % 0 == 0`, shifts outside
[0, 64) give 0 for `<<` and the sign for `>>`.
"""

from __future__ import annotations

import numpy as np

from support import langfuzz, langfuzz_run

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1


class Generator(langfuzz.Generator):
    """One random kernel (module doc); `racy` is set when a neighbour's element is written."""

    NEW = ["tuple", "tuple", "tuple_elements", "chained", "chained", "inf_search", "inf_branch"]
    LOOPED = ["nested_jumps", "branch_return", "grid_stride", "grid_stride"]

    def leaf(self) -> str:
        if self.chance(0.08):
            self.features.add("negative integer divisor")
            return self.pick([f"0.125 * float((idx[{self.I}] - i) // -1)", "0.25 * float((i - 3) // -2)",
                              f"0.125 * float((idx[{self.I}] * 5 - 7) % -3)", "0.25 * float((7 - i) % -1)"])
        return super().leaf()

    def statement(self, depth: int):
        if self.chance(0.55):
            self.budget -= 1
            kinds = list(self.NEW)
            if self.budget > 0 and len(self.loops) < 1 and depth < 3:
                kinds += self.LOOPED
            getattr(self, "s_" + self.pick(kinds))(depth)
        else:
            super().statement(depth)

    def two_locals(self, depth: int) -> tuple[str, str]:
        a = self.target(depth)
        rest = [v for v in self.visible() if v != a]
        if rest and self.chance(0.8):
            return a, self.pick(rest)
        b = self.fresh()
        self.emit(depth, f"{b} = {self.expr(1)}")
        self.scopes[-1].append(b)
        return a, b

    def s_tuple(self, depth: int):
        self.features.add("tuple assignment")
        a, b = self.two_locals(depth)
        if self.chance(0.3):
            c = self.fresh()
            self.emit(depth, f"{c} = {self.leaf()}")
            self.scopes[-1].append(c)
            self.emit(depth, f"{a}, {b}, {c} = {b}, {c} * 0.5 + {self.leaf()}, gk.sin({a})")
        else:
            self.emit(depth, f"{a}, {b} = {self.pick([b, f'gk.sin({b}) * {self.leaf()}'])}, "
                             f"{self.pick([a, f'{a} * 0.5 + {self.expr(1)}'])}")

    def s_tuple_elements(self, depth: int):
        self.features.add("tuple assignment to elements")
        own = self.I
        s = self.target(depth)
        kind = self.pick(["local", "swap", "swap", "index"])
        if kind == "local":
            self.emit(depth, self.pick([f"out[{own}], {s} = {s}, out[{own}] * 0.5 + {self.leaf()}",
                                        f"{s}, y[{own}] = y[{own}], gk.sin({s}) * {self.leaf()}"]))
        elif kind == "swap":
            self.emit(depth, f"y[{own}], out[{own}] = out[{own}], y[{own}]")
        else:  # the element's index bound earlier in the same statement (Python's left-to-right binding): the
            # neighbour's index before it, so an index evaluated too early writes another thread's element
            k = self.fresh("k")
            self.emit(depth, f"{k} = (i + 1) % n")
            self.emit(depth, f"{k}, out[{k}{self.I[1:]}] = i, {self.expr(1)}")
            self.emit(depth, f"{s} = {s} + out[{own}]")

    def s_chained(self, depth: int):
        self.features.add("chained assignment")
        own = self.I
        e = self.expr(2)
        kind = self.pick(["locals", "element", "elements", "element_last"])
        if kind == "locals":
            a, b = self.target(depth), self.fresh()
            self.emit(depth, f"{a} = {b} = {e}")
            self.scopes[-1].append(b)
            self.emit(depth, f"{a} = {a} * 0.5 + gk.sin({b})")
        elif kind == "element":
            s = self.target(depth)
            self.emit(depth, f"out[{own}] = {s} = {e}")
        elif kind == "elements":
            self.emit(depth, f"out[{own}] = y[{own}] = {e}")
        else:
            s = self.target(depth)
            self.emit(depth, f"{s} = out[{own}] = gk.tanh({e})")

    def s_inf_search(self, depth: int):
        self.features.add("float('inf')")
        s = self.target(depth)
        best, p = self.fresh("best"), self.fresh("p")
        low = self.chance(0.6)
        start = self.pick(['float("inf")', "math.inf"]) if low else self.pick(['float("-inf")', "-math.inf"])
        self.emit(depth, f"{best} = {start}")
        self.loops.append(p)
        e = self.expr(2)
        self.loops.pop()
        if self.chance(0.4):
            self.features.add("argmin/argmax")
            arg = self.fresh("arg")
            self.emit(depth, f"{arg} = 0")
            self.emit(depth, f"for {p} in range(m):")
            v = self.fresh("v")
            self.emit(depth + 1, f"{v} = {e}")
            self.emit(depth + 1, f"if GT({best}, {v}):" if low else f"if GT({v}, {best}):")
            self.emit(depth + 2, f"{best} = {v}")
            self.emit(depth + 2, f"{arg} = {p}")
            self.emit(depth, f"{s} = {s} * 0.5 + {best} + 0.25 * {arg}")
        else:
            self.emit(depth, f"for {p} in range(m):")
            self.emit(depth + 1, f"{best} = {'MIN' if low else 'MAX'}({best}, {e})")
            self.emit(depth, f"{s} = {s} * 0.5 + {best}")

    def s_inf_branch(self, depth: int):
        self.features.add("float('inf')")
        s, best = self.target(depth), self.fresh("best")
        self.emit(depth, f"{best} = float(\"inf\")")
        self.emit(depth, f"if {self.cond()}:")
        self.emit(depth + 1, f"{best} = {self.expr(2)}")
        self.emit(depth, f"{s} = {s} + MIN({best}, 2.0)")

    def s_nested_jumps(self, depth: int):
        self.features.add("break/continue in nested loops")
        s = self.target(depth)
        p = self.open_loop(depth)
        self.carry(depth + 1, s)
        q = self.open_loop(depth + 1)
        self.emit(depth + 2, f"if {self.pick([f'{q} == 1', f'{q} % 2 == 0', self.cond()])}:")
        self.emit(depth + 3, "continue")
        self.carry(depth + 2, s)
        self.emit(depth + 2, f"if {self.pick([f'GT({s}, 0.6)', f'{q} == 2', self.cond()])}:")
        self.emit(depth + 3, self.pick(["break", "break", "continue"]))
        self.close_loop()
        if self.chance(0.4):
            self.emit(depth + 1, "else:")
            self.emit(depth + 2, f"{s} = {s} * 0.5 + {self.leaf()}")
        self.emit(depth + 1, f"if {self.pick([f'{p} == 2', f'GT({s}, 0.8)', self.cond()])}:")
        self.emit(depth + 2, self.pick(["break", "continue"]))
        self.carry(depth + 1, s)
        self.close_loop()

    def s_branch_return(self, depth: int):
        self.features.add("return under branches in a loop")
        s = self.target(depth)
        self.open_loop(depth)
        self.carry(depth + 1, s)
        self.emit(depth + 1, f"if {self.index_cond()}:")
        self.emit(depth + 2, f"if {self.cond()}:")
        self.emit(depth + 3, f"out[{self.I}] = {s}")
        self.emit(depth + 3, "return")
        self.emit(depth + 2, f"{s} = {s} * 0.5 + {self.leaf()}")
        self.close_loop()

    def s_grid_stride(self, depth: int):
        self.features.add("grid-stride loop")
        s, g = self.target(depth), self.fresh("g")
        length = self.pick(["w.shape[0]", "tot.shape[0]"])
        atomic, spelled_while = self.chance(0.4), self.chance(0.5)
        if spelled_while:
            self.emit(depth, f"{g} = i")
            self.emit(depth, f"while {g} < {length}:")
        else:
            self.emit(depth, f"for {g} in range(i, {length}, n):")
        self.loops.append(g)
        self.emit(depth + 1, f"{s} = {s} * 0.5 + gk.sin(w[{g}]) * {self.expr(1)}")
        if atomic:
            self.features.add("atomic add")
            self.emit(depth + 1, f"gk.atomic_add(tot, {g}, 0.25 * {s})")
        self.loops.pop()
        if spelled_while:
            self.emit(depth + 1, f"{g} += n")

    def s_outside(self, depth: int):
        """An access that leaves its array (always, or for some m): gk.LaunchError, nothing changed."""
        self.features.add("access outside its array")
        s = self.target(depth)
        kind = self.pick(["stride", "stride", "shifted", "neighbour"])
        if kind == "stride":  # the grid-stride loop's bound off by one: some thread reaches g == len(w)
            g = self.fresh("g")
            self.emit(depth, f"{g} = i")
            self.emit(depth, f"while {g} <= w.shape[0]:")
            self.emit(depth + 1, f"{s} = {s} * 0.5 + gk.sin(w[{g}])")
            self.emit(depth + 1, f"{g} += n")
        elif kind == "shifted":  # w[m - p] at p = 0 leaves w when m == len(w)
            p = self.fresh("p")
            self.emit(depth, f"for {p} in range(m):")
            self.emit(depth + 1, f"{s} = {s} * 0.5 + w[m - {p}]")
        else:
            self.emit(depth, f"{s} = {s} + x[i + 1{self.I[1:]}]")

    def source(self) -> str:
        self.racy = False
        if self.chance(0.06):
            self.NEW = self.NEW + ["outside"] * 4  # this kernel's own list
        text = super().source()
        if self.chance(0.06):  # a neighbour's element written through the new forms: a race when n > 1
            self.racy = True
            self.features.add("racy tuple/chained store")
            rest = self.I[1:]
            lines = text.rstrip("\n").split("\n")
            last = lines.pop()
            lines.append("    " + self.pick([f"out[(i + 1) % n{rest}], y[{self.I}] = y[{self.I}], 0.5",
                                             f"out[(i + 1) % n{rest}] = y[{self.I}] = 0.25 * x[{self.I}]",
                                             f"y[{self.I}], y[(i + 1) % n{rest}] = 0.5, x[{self.I}]"]))
            lines.append(last)
            text = "\n".join(lines) + "\n"
        return text


# -- integer expressions -----------------------------------------------------------------------------------------
def wrap(v: int) -> int:
    return (v + 2 ** 63) % 2 ** 64 - 2 ** 63


def _floordiv(a: int, b: int) -> int:
    return 0 if b == 0 else wrap(a // b)


def _mod(a: int, b: int) -> int:
    return 0 if b == 0 else a % b


def _lshift(a: int, s: int) -> int:
    return wrap(a << s) if 0 <= s < 64 else 0


def _rshift(a: int, s: int) -> int:
    return a >> s if 0 <= s < 64 else (-1 if a < 0 else 0)


INT_BINARY = {"+": lambda a, b: wrap(a + b), "-": lambda a, b: wrap(a - b), "*": lambda a, b: wrap(a * b),
              "//": _floordiv, "%": _mod, "<<": _lshift, ">>": _rshift, "&": lambda a, b: a & b,
              "|": lambda a, b: a | b, "^": lambda a, b: a ^ b, "min": min, "max": max}


def int_expr(rng: np.random.Generator, depth: int, leaves: list[str]):
    """(text, tree): a random int64 expression; the tree is what `int_eval` reads."""
    if depth <= 0 or rng.random() < 0.25:
        if rng.random() < 0.3:
            c = int(rng.choice([-64, -3, -2, -1, 0, 1, 2, 3, 7, 63, 64, 65]))
            return (f"({c})" if c < 0 else str(c)), ("const", c)
        name = leaves[int(rng.integers(len(leaves)))]
        return name, ("leaf", name)
    r = rng.random()
    if r < 0.12:
        t, tree = int_expr(rng, depth - 1, leaves)
        op = ["-", "~", "abs"][int(rng.integers(3))]
        return (f"abs({t})" if op == "abs" else f"({op}{t})"), ("unary", op, tree)
    op = list(INT_BINARY)[int(rng.integers(len(INT_BINARY)))]
    a, ta = int_expr(rng, depth - 1, leaves)
    if op in ("min", "max"):
        b, tb = int_expr(rng, depth - 1, leaves)
        return f"{op}({a}, {b})", ("binary", op, ta, tb)
    if op in ("//", "%") and rng.random() < 0.4:  # a constant divisor: the backends print these apart
        c = int(rng.choice([-1, -1, -3, 0, 2, 7]))
        return f"({a} {op} {f'({c})' if c < 0 else c})", ("binary", op, ta, ("const", c))
    b, tb = int_expr(rng, depth - 1, leaves)
    return f"({a} {op} {b})", ("binary", op, ta, tb)


def int_eval(tree, env: dict) -> int:
    kind = tree[0]
    if kind == "const":
        return tree[1]
    if kind == "leaf":
        return env[tree[1]]
    if kind == "unary":
        v = int_eval(tree[2], env)
        return wrap(-v) if tree[1] == "-" else wrap(abs(v)) if tree[1] == "abs" else ~v
    return INT_BINARY[tree[1]](int_eval(tree[2], env), int_eval(tree[3], env))


def integer_kernel(rng: np.random.Generator, name: str, count: int) -> tuple[str, list]:
    """`def name(a, b, res)`: res[i, k] = the k-th random expression of u = a[i], v = b[i], w = a[(i + 1) % n]."""
    lines = [f"def {name}(a, b, res):", "    i = gk.tid()", "    n = a.shape[0]", "    u = a[i]", "    v = b[i]",
             "    w = a[(i + 1) % n]"]
    trees = []
    for k in range(count):
        text, tree = int_expr(rng, int(rng.integers(1, 5)), ["u", "v", "w"])
        lines.append(f"    res[i, {k}] = {text}")
        trees.append(tree)
    return "\n".join(lines) + "\n", trees


EDGES = [INT64_MIN, INT64_MIN + 1, -(2 ** 32) - 3, -65, -64, -63, -7, -3, -2, -1, 0, 1, 2, 3, 7, 63, 64, 65,
         2 ** 32 + 5, INT64_MAX - 1, INT64_MAX]


def integer_inputs(rng: np.random.Generator, n: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    info = np.iinfo(dtype)
    edges = [e for e in EDGES if info.min <= e <= info.max] + [info.min, info.max]
    pick = lambda: np.array([edges[int(rng.integers(len(edges)))] if rng.random() < 0.7 else  # noqa: E731
                             int(rng.integers(-100, 100)) for _ in range(n)], dtype=dtype)
    return pick(), pick()


def integer_oracle(trees: list, a: np.ndarray, b: np.ndarray, res_dtype) -> np.ndarray:
    """res as the kernel must leave it: each expression in int64 (NumPy's rules), stored with the low bits of
    res's type."""
    n = a.shape[0]
    out = np.zeros((n, len(trees)), dtype=res_dtype)
    bits = np.iinfo(res_dtype).bits
    for i in range(n):
        env = {"u": int(a[i]), "v": int(b[i]), "w": int(a[(i + 1) % n])}
        for k, tree in enumerate(trees):
            v = int_eval(tree, env)
            out[i, k] = (v + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)
    return out


# -- the race oracle ---------------------------------------------------------------------------------------------
class _Tracked:
    """An array that records which thread reads ('r'), writes ('w') or atomically adds to ('a') which element."""

    def __init__(self, name: str, array: np.ndarray, fake: RecordingGk):
        self.name, self.array, self.fake, self.shape = name, array, fake, array.shape

    def _key(self, key) -> tuple | None:
        """The element's index, or None (recorded in `fake.outside`) for one outside the array."""
        key = tuple(int(k) for k in (key if isinstance(key, tuple) else (key,)))
        if any(not 0 <= k < s for k, s in zip(key, self.shape)):
            self.fake.outside.append((self.name, key, self.fake.thread))
            return None
        return key

    def __getitem__(self, key):
        k = self._key(key)
        if k is None:
            return self.array.dtype.type(0)
        self.fake.touch(self.name, k, "r")
        return self.array[k]

    def __setitem__(self, key, value):
        k = self._key(key)
        if k is not None:
            self.fake.touch(self.name, k, "w")
            self.array[k] = value


class RecordingGk(langfuzz_run.FakeGk):
    """langfuzz's stand-in for `gk` that also records every array access of every thread (`accesses`)."""

    def __init__(self):
        super().__init__()
        self.accesses: dict = {}  # (array, element) -> {kind: set of threads}
        self.outside: list = []  # (array, index, thread) of each access outside its array

    def touch(self, name: str, element: tuple, kind: str):
        self.accesses.setdefault((name, element), {}).setdefault(kind, set()).add(self.thread)

    def atomic_add(self, a, index, v):
        k = a._key(index)
        if k is not None:
            self.touch(a.name, k, "a")
            a.array[k] += v

    def track(self, values: dict) -> dict:
        return {k: _Tracked(k, v.astype(np.float64) if v.dtype.kind == "f" else v.copy(), self)
                if isinstance(v, np.ndarray) else v for k, v in values.items()}

    def races(self) -> list:
        """The elements a thread writes (or atomically adds to) that another thread touches otherwise."""
        found = []
        for where, kinds in self.accesses.items():
            r, w, a = (kinds.get(k, set()) for k in "rwa")
            if any(t != u for t in w for u in r | w | a) or any(t != u for t in a for u in r | w):
                found.append(where)
        return found
