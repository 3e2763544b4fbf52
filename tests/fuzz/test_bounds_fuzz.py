"""Bounds-proof fuzzer (docs/kernel-language.md; analysis/bounds.py): random affine kernels
from templates, launched at random dims, shapes and scalars, checked against a
brute-force oracle.

The templates read an array `a` (1-D to 5-D: 1-D to 3-D launches, and 4-D or
5-D arrays whose trailing axes are indexed by constants, `a.shape[r] - c` and
loop variables; docs/language.md) at affine indices — offsets,
strides, reversed `n - 1 - i`, constants (-1 included), flattened rows
`i * m + k` — under guards (`i < n`, ranges, `!=` from `not (i == 0 or ...)`,
shapes, data-dependent `x[i % 8] > 0.5`), inside conditional expressions and
`and` operands, under bool locals (`ok = i < n`, maybe changed in a branch;
`if not ok:`), in loops (one or two deep) with parameter bounds, unit or other
steps, upward or downward, after `if <guard>: continue` or `break` (maybe
inside another `if`, some guards data-dependent), after an early `return`,
and after `while` loops (some with a `continue`); then write `out` at an
injective index (so no launch races), guarded or not.

The oracle runs the kernel's Python source thread by thread with arrays that
raise on an index outside their axis (negative ones included), so it knows
whether a launch leaves an array and what it computes otherwise.

Properties, per launch:
* soundness: when the proof says every affine access is inside (`decide` is
  True), the oracle finds no access outside; when it names a thread
  (`Outside`), that thread does leave an array;
* exactness end to end: `gk.launch` raises gk.LaunchError iff the oracle finds
  an access outside (every index here is affine, so the exact check sees what
  the proof does not), leaving every buffer unchanged; otherwise it computes
  what the oracle does. On the interpreter `gk.autodiff` (reverse mode) too
  refuses exactly those launches, every primal and shadow unchanged.

GRADKERN_FUZZ_BOUNDS sets the number of kernels (CI default 40),
GRADKERN_FUZZ_SEED the seed, GRADKERN_FUZZ_CPU_EVERY how often a kernel also
runs on the compiled CPU backend (default every 20th),
GRADKERN_FUZZ_HOSTCUDA_EVERY how often on hostcuda (default every 5th: its
exact check runs the CUDA backend's bounds-checked kernel; the rest run on the
reference interpreter, which runs the same proof and exact check).
A local long run: GRADKERN_FUZZ_BOUNDS=2000 pytest -s -n0 tests/fuzz/test_bounds_fuzz.py
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass, field

import numpy as np

import gradkern as gk
from fuzz.test_race_fuzz import _HAS_GPP, HOSTCUDA_EVERY, fuzz_kernels
from gradkern.analysis.bounds import Outside
from gradkern.runtime.binding import bind
from gradkern.runtime.specialize import primal_specialization

N_KERNELS = int(os.environ.get("GRADKERN_FUZZ_BOUNDS", "40"))
SEED = int(os.environ.get("GRADKERN_FUZZ_SEED", "0"))
CPU_EVERY = int(os.environ.get("GRADKERN_FUZZ_CPU_EVERY", "20"))
LAUNCHES = 4  # per kernel


# -- the generator ---------------------------------------------------------------------------------------------------
class _Generator:
    """One random kernel: `def <name>(a, x, out, n, m)`, reading a and x, writing out."""

    def __init__(self, rng: np.random.Generator, name: str):
        self.r = rng
        self.name = name
        self.ndim = 1 + int(rng.random() < 0.35)
        self.extra = 0  # trailing axes of `a` past the launch's: a 4-D or 5-D array
        if rng.random() < 0.3:
            self.ndim = self.pick([1, 2, 3])
            self.extra = self.pick([4, 5]) - self.ndim
        self.lines: list[str] = []
        self.features: set[str] = set()
        self.loops = 0

    def pick(self, xs):
        return xs[int(self.r.integers(len(xs)))]

    def c(self, hi: int = 3) -> int:
        return int(self.r.integers(0, hi + 1))

    def emit(self, depth: int, text: str):
        self.lines.append("    " * depth + text)

    def index(self, loop: str | None = None) -> str:
        """An affine index of `a` (a tuple's text for 2-D and more)."""
        if self.extra:
            self.features.add(f"{self.ndim + self.extra}-D array")
            return ", ".join([self.launch_index(loop)] + [self.trailing(r, loop) for r in range(self.ndim,
                                                                                              self.ndim + self.extra)])
        return self.launch_index(loop)

    def trailing(self, r: int, loop: str | None) -> str:
        """An index on axis r of `a`, past the launch's axes."""
        forms = ["0", "1", str(self.c()), "-1", f"a.shape[{r}] - 1", f"a.shape[{r}] - {self.c()}"]
        if loop:
            forms += [loop, loop, f"{loop} + 1", f"a.shape[{r}] - 1 - {loop}"]
        return self.pick(forms)

    def launch_index(self, loop: str | None = None) -> str:
        c = self.c()
        if self.ndim == 3:
            forms = ["i, j, l", "i, j, l", f"i + {c}, j, l", f"i, j, l - {c}", "l, j, i", f"i, {self.c(1)}, l"]
            if loop:
                forms += [f"i, j, {loop}", f"{loop}, j, l"]
            return self.pick(forms)
        if self.ndim == 1:
            forms = ["i", "i", f"i + {c}", f"i - {c}", f"2 * i + {c}", "n - 1 - i", f"{self.pick([-1, 0, 2, 5])}"]
            if loop:
                forms += [loop, f"{loop} + i", f"i * m + {loop}", f"{loop} - 1", f"{c} - {loop}"]
            return self.pick(forms)
        forms = ["i, j", f"i + {c}, j", f"i, j - {c}", "j, i", f"i, {self.pick([-1, 0, 3])}",
                 f"i - {c}, j + {self.c(2)}"]
        if loop:
            forms += [f"i, {loop}", f"{loop}, j", f"{loop} - 1, j", f"i, {loop} + j"]
        return self.pick(forms)

    def guard(self) -> str:
        c = self.c(2)
        t = self.pick(["i", "j", "l"][:self.ndim]) if self.ndim > 1 else "i"
        g = self.pick([f"{t} < n", f"{t} >= {c} and {t} < n - {c}", f"{t} < a.shape[0] - {c}",
                       f"{t} != 0 and {t} != n - 1", f"not ({t} == 0 or {t} >= n - 1)", "x[i % 8] > 0.5",
                       f"{t} > {c} and x[i % 8] > 0.5", f"{t} + {c} <= m"])
        self.features.add("data-dependent guard" if "x[" in g else "!=" if "!=" in g or "not" in g else "guard")
        return g

    def jump_guard(self, k: str) -> str:
        """A condition on loop variable `k` (and the thread) for a `continue` or `break`."""
        c = self.c(2)
        t = self.pick(["i", "j"]) if self.ndim == 2 else "i"
        g = self.pick([f"{k} == {c}", f"{k} == 0 and {t} == 0", f"{k} + {t} >= n", f"{k} >= a.shape[0] - {c}",
                       f"{k} - {c} < 0", f"{k} < {c} or {k} >= m - {c}", f"{k} != {c}", f"x[{k} % 8] > 0.5",
                       f"{k} + {t} >= n or {t} == {c}", self.guard()])
        return g

    def flag(self, depth: int, loop: str | None):
        """A bool local the kernel computes, maybe changed in a branch, then guarding a read."""
        self.features.add("bool local")
        self.emit(depth, f"ok = {self.guard() if loop is None or self.r.random() < 0.5 else self.jump_guard(loop)}")
        if self.r.random() < 0.5:
            self.emit(depth, f"if {self.guard()}:")
            self.emit(depth + 1, f"ok = {self.pick(['False', 'True', self.guard()])}")
        self.emit(depth, f"if {self.pick(['', 'not '])}ok:")
        self.emit(depth + 1, f"s += a[{self.index(loop)}]")

    def jump(self, depth: int, k: str):
        """`if <guard>: continue` (or break), maybe inside another `if`, before a read in loop `k`'s body."""
        word = self.pick(["continue", "continue", "break"])
        self.features.add(word)
        if self.r.random() < 0.3:
            self.emit(depth, f"if {self.guard()}:")
            depth += 1
        self.emit(depth, f"if {self.jump_guard(k)}:")
        if self.r.random() < 0.3:
            self.emit(depth + 1, "s += 0.25")
        self.emit(depth + 1, word)
        self.read(depth, k)

    def read(self, depth: int, loop: str | None = None):
        kind = self.pick(["plain", "plain", "if", "else", "select", "and", "flag"])
        if kind == "flag":
            self.flag(depth, loop)
            return
        idx = self.index(loop)
        if kind == "plain":
            self.emit(depth, f"s += a[{idx}]")
        elif kind in ("if", "else"):
            self.emit(depth, f"if {self.guard()}:")
            self.emit(depth + 1, f"s += a[{idx}]")
            if kind == "else":
                self.emit(depth, "else:")
                self.emit(depth + 1, f"s -= a[{self.index(loop)}]")
        elif kind == "select":
            self.features.add("conditional expression")
            self.emit(depth, f"s += a[{idx}] if {self.guard()} else 1.0")
        else:
            self.features.add("and")
            self.emit(depth, f"if {self.guard()} and a[{idx}] > 0.25:")
            self.emit(depth + 1, "s += 1.0")

    def loop(self, depth: int):
        k = f"k{self.loops}"
        self.loops += 1
        lo = self.pick(["0", "1", "i", f"{self.c()}"])
        hi = self.pick(["m", "n", "a.shape[0]", f"i + {self.c()}"] + (["a.shape[1]"] if self.ndim == 2 else [])
                       + [f"a.shape[{r}]" for r in range(self.ndim, self.ndim + self.extra)] * 2)
        step = self.pick([1, 1, 2, -1])
        if step == -1:
            self.features.add("downward loop")
            self.emit(depth, f"for {k} in range({hi} - 1, {lo} - 1, -1):")
        else:
            self.features.add("loop" if step == 1 else "loop of step 2")
            self.emit(depth, f"for {k} in range({lo}, {hi}{', 2' if step == 2 else ''}):")
        if depth == 1 and self.r.random() < 0.3:  # an inner loop whose variable the jump guards test too
            k2 = f"k{self.loops}"
            self.loops += 1
            self.emit(depth + 1, f"for {k2} in range({self.pick(['2', 'm', f'{k} + 1'])}):")
            depth += 1
            k = self.pick([k, k2])
        if self.r.random() < 0.5:
            self.jump(depth + 1, k)
        else:
            self.read(depth + 1, k)
        if self.r.random() < 0.2:  # a read after the jump's `if`, and after the loop's other iterations
            self.read(depth + 1, k)

    def source(self) -> str:
        head = ("i", "i, j", "i, j, l")[self.ndim - 1] + " = gk.tid()"
        self.lines = [f"def {self.name}(a, x, out, n, m):", f"    {head}", "    s = 0.0"]
        for _ in range(1 + self.c(1)):
            what = self.pick(["read", "read", "loop", "loop", "while", "return"])
            if what == "read":
                self.read(1)
            elif what == "return":  # an early return (the frontend refuses one inside a loop)
                self.features.add("return")
                depth = 1
                if self.r.random() < 0.3:
                    self.emit(depth, f"if {self.guard()}:")
                    depth += 1
                self.emit(depth, f"if {self.pick([self.guard(), 'i >= n - 1', 'i == 0 or i > n - 2'])}:")
                self.emit(depth + 1, "return")
                self.read(1)
            elif what == "loop":
                self.loop(1)
            else:
                self.features.add("while")
                w = f"w{self.loops}"
                self.loops += 1
                self.emit(1, f"{w} = 0")
                self.emit(1, f"while {w} < m:")
                self.emit(2, f"{w} += 1")
                if self.r.random() < 0.3:
                    self.features.add("continue")
                    self.emit(2, f"if {w} == {self.c(2)}:")
                    self.emit(3, "continue")
                self.emit(2, "s += 0.5")
        c = self.c(2)
        target = "i, j, l" if self.ndim == 3 else \
            self.pick(["i, j", "i, j", f"i + {c}, j", "j, i"]) if self.ndim == 2 else \
            self.pick(["i", "i", "i", f"i + {c}", "n - 1 - i", "2 * i"])
        if self.r.random() < 0.3:
            self.emit(1, f"if {self.guard()}:")
            self.emit(2, f"out[{target}] = s")
        else:
            self.emit(1, f"out[{target}] = s")
        return "\n".join(self.lines) + "\n"


# -- the oracle ------------------------------------------------------------------------------------------------------
class _OutOfBounds(Exception):
    pass


class _Checked:
    """An array whose every index must lie inside its axis (no wrapping)."""

    def __init__(self, data: np.ndarray):
        self.data = data
        self.shape = data.shape

    def _element(self, index) -> tuple[int, ...]:
        idx = index if isinstance(index, tuple) else (index,)
        if len(idx) != self.data.ndim or not all(0 <= int(v) < n for v, n in zip(idx, self.data.shape)):
            raise _OutOfBounds
        return tuple(int(v) for v in idx)

    def __getitem__(self, index):
        return self.data[self._element(index)]

    def __setitem__(self, index, value):
        self.data[self._element(index)] = value


class _FakeGk:
    def __init__(self):
        self.thread: tuple[int, ...] = ()

    def tid(self):
        return self.thread if len(self.thread) > 1 else self.thread[0]


def oracle(source: str, name: str, dim: tuple, arrays: dict, n: int, m: int,
           threads=None) -> dict | None:
    """Run the kernel thread by thread in plain Python on copies; None if an
    access leaves its array, else the arrays after the launch."""
    fake = _FakeGk()
    ns = {"gk": fake, "math": math}
    exec(source, ns)
    f = ns[name]
    data = {k: v.copy() for k, v in arrays.items()}
    checked = {k: _Checked(v) for k, v in data.items()}
    for t in threads if threads is not None else itertools.product(*(range(d) for d in dim)):
        fake.thread = tuple(t)
        try:
            f(checked["a"], checked["x"], checked["out"], n, m)
        except _OutOfBounds:
            return None
    return data


# -- the run ---------------------------------------------------------------------------------------------------------
@dataclass
class Stats:
    kernels: int = 0
    launches: int = 0
    outside: int = 0  # launches the oracle finds leaving an array
    proved: int = 0  # the proof: every affine access inside
    named: int = 0  # the proof: this thread leaves an array
    undecided: int = 0  # the proof: neither (the exact check runs)
    refused: int = 0  # LaunchError
    cpu_launches: int = 0
    hostcuda_launches: int = 0
    gradients: int = 0  # launches also made through gk.autodiff (reverse mode, interpreter)
    features: dict = field(default_factory=dict)  # feature -> [launches, proved or named]
    unsound: list = field(default_factory=list)  # must stay empty
    wrong: list = field(default_factory=list)  # must stay empty

    @property
    def conclusive(self) -> int:
        return self.proved + self.named

    def __str__(self) -> str:
        return (f"{self.kernels} kernels, {self.launches} launches ({self.outside} leave an array per the oracle); "
                f"proof conclusive at {self.conclusive} ({self.proved} proved inside, {self.named} named a thread "
                f"outside), undecided at {self.undecided} (exact check); LaunchError at {self.refused}; on the "
                f"compiled CPU backend: {self.cpu_launches}, on hostcuda: {self.hostcuda_launches}; "
                f"through gk.autodiff: {self.gradients}; "
                f"unsound: {len(self.unsound)}; wrong end-to-end: {len(self.wrong)}")


def _arguments(rng: np.random.Generator, g: _Generator):
    """A launch: extents mostly a little inside the arrays, sometimes past them."""
    def extent(d: int) -> int:
        return max(1, d - 1 if rng.random() < 0.15 else d + int(rng.integers(0, 8)))

    if g.ndim == 1:
        dim = (int(rng.integers(1, 13)),)
    else:
        dim = tuple(int(rng.integers(1, 6 if g.ndim == 2 else 4)) for _ in range(g.ndim))
    trailing = tuple(int(rng.integers(1, 5)) for _ in range(g.extra))
    a = rng.uniform(0.0, 1.0, tuple(extent(d) for d in dim) + trailing)
    out = np.zeros(tuple(extent(d) for d in dim))
    n, m = int(rng.integers(0, dim[0] + 4)), int(rng.integers(0, 7))
    return dim, {"a": a, "x": rng.uniform(0.0, 1.0, 8), "out": out}, n, m


def fuzz(directory: str, count: int = N_KERNELS, seed: int = SEED, cpu_every: int = CPU_EVERY,
         hostcuda_every: int = HOSTCUDA_EVERY) -> Stats:
    """Generate `count` kernels and check every launch (see module doc)."""
    return fuzz_kernels(directory, Stats(), _Generator, "bfuzz", _check_launch, LAUNCHES, count, seed, cpu_every,
                        hostcuda_every=hostcuda_every)


def _check_launch(stats: Stats, rng, g: _Generator, src: str, kernel, backend: str):
    dim, arrays, n, m = _arguments(rng, g)
    expected = oracle(src, g.name, dim, arrays, n, m)
    stats.launches += 1
    stats.outside += expected is None
    args = [arrays["a"].copy(), arrays["x"].copy(), arrays["out"].copy(), n, m]
    case = f"{g.name} dim={dim} n={n} m={m} shapes={[v.shape for v in arrays.values()]}\n{src}"
    b = bind(kernel.ir, dim, tuple(args), "interp")
    verdict = primal_specialization(kernel, b).bounds.decide(b.dim, b.kernel_values)
    stats.proved += verdict is True
    stats.named += isinstance(verdict, Outside)
    stats.undecided += verdict is False
    for f in g.features:
        counts = stats.features.setdefault(f, [0, 0])
        counts[0] += 1
        counts[1] += verdict is not False
    if verdict is True and expected is None:
        stats.unsound.append("proved inside, but an access leaves its array: " + case)
    if isinstance(verdict, Outside) and oracle(src, g.name, dim, arrays, n, m, [verdict.thread]) is not None:
        stats.unsound.append(f"named thread {verdict.thread} ({verdict.site.text}), which stays inside: " + case)
    stats.cpu_launches += backend == "cpu"
    stats.hostcuda_launches += backend == "hostcuda"
    try:
        gk.launch(kernel, dim, *args, backend=backend)
        refused = False
    except gk.LaunchError:
        refused = True
    except Exception as e:  # noqa: BLE001 - any other failure is a finding too
        stats.wrong.append(f"{backend}: {type(e).__name__}: {e}\n{case}")
        return
    stats.refused += refused
    if refused != (expected is None):
        stats.wrong.append(f"{backend}: LaunchError={refused} but the oracle says outside={expected is None}: {case}")
    elif refused:
        for k, v in zip(("a", "x", "out"), args):
            if not np.array_equal(v, arrays[k]):
                stats.wrong.append(f"{backend}: refused, but '{k}' changed: {case}")
    elif not np.allclose(args[2], expected["out"], rtol=1e-13, atol=1e-13):
        stats.wrong.append(f"{backend}: 'out' differs from the oracle's: {case}")
    if backend == "interp":
        _check_gradient(stats, arrays, dim, n, m, expected is None, kernel, case)


def _check_gradient(stats: Stats, arrays: dict, dim, n: int, m: int, outside: bool, kernel, case: str):
    """gk.autodiff refuses exactly the launches that leave an array, every buffer
    unchanged; the derivative kernels of one that does not stay inside too (the
    interpreter raises IndexError past an array's end)."""
    a, da = arrays["a"].copy(), np.ones_like(arrays["a"])
    out, dout = arrays["out"].copy(), np.ones_like(arrays["out"])
    before = [v.copy() for v in (a, da, out, dout)]
    try:
        gk.autodiff(kernel, gk.Duplicated(a, da), gk.Const(arrays["x"].copy()), gk.Duplicated(out, dout), n, m,
                    dim=dim, backend="interp")
        refused = False
    except gk.LaunchError:
        refused = True
    except gk.GradkernError:  # not differentiable (a while loop, say): refused before anything runs
        return
    except Exception as e:  # noqa: BLE001 - any other failure is a finding too
        stats.wrong.append(f"autodiff: {type(e).__name__}: {e}\n{case}")
        return
    stats.gradients += 1
    if refused != outside:
        stats.wrong.append(f"autodiff: LaunchError={refused} but the oracle says outside={outside}: {case}")
    elif refused and any(not np.array_equal(v, w) for v, w in zip((a, da, out, dout), before)):
        stats.wrong.append("autodiff refused, but a buffer changed: " + case)


def test_the_bounds_proof_is_sound_and_launches_are_refused_exactly(tmp_path):
    stats = fuzz(str(tmp_path))
    print(stats)
    for f, (launches, conclusive) in sorted(stats.features.items()):
        print(f"  {f}: {launches} launches, proof conclusive at {conclusive}")
    assert not stats.unsound, "\n\n".join(stats.unsound[:5])
    assert not stats.wrong, "\n\n".join(stats.wrong[:5])
    # the generator must reach every verdict
    assert stats.proved and stats.named and stats.undecided and stats.refused < stats.launches
    assert stats.hostcuda_launches or not _HAS_GPP or not HOSTCUDA_EVERY
