"""Race-analysis fuzzer (docs/adjoint-forms.md "Races"): random kernels from templates,
checked against a brute-force oracle.

The generator builds kernels from templates that stress how names are bound
and how indices are computed: loop variables outliving their loops, locals
rebound by assignments, augmented assignments, tuple swaps, branches and
`while` loops (the thread index itself included; grid-stride loops), guards, flattened indices
`i * n + k`, indirect indices `idx[i]`, thread-dependent loop bounds
`range(i + 1, m)`, negative steps, early returns, `if <condition>: continue`
(or break) in loops, bool locals guarding blocks, index arithmetic that wraps
(`np.int32(i * 2**32)`, `i * 2**62`), 1-D to 3-D launches, arrays of 1, 2, 4
and 5 dimensions (docs/language.md), reads
and writes of one array at different indices, atomic adds; a third of them
mutate an HPC pattern the static analysis decides (gemm's own rows, LU's
guarded update, correlation's mirrored write, stencils, triangular rows,
flattened 2-D tiles), after random rebindings of the locals it uses. Each
kernel is written to a module file (gk.kernel reads the source) and launched
a few times with random extents, scalars and index arrays.

The oracle runs the same Python source per thread in plain Python (threads
in lexicographic order, as the run-time check does), with machine integers
emulated by NumPy int64 scalars, and records which thread touches which
element how (read, write, atomic add). A launch races when a thread writes an
element another thread reads or writes, or atomically adds to an element
another thread reads or writes plainly. Serial order decides it exactly: if
the serial run has no such pair, every thread saw only the initial values and
its own writes, so every interleaving touches the same elements. Launches
where some access leaves its array are not kernels' defined behaviour and are
skipped.

Properties, per launch:
* soundness: when gradkern proves a launch race-free statically (no run-time
  check at it: `gk.inspect(...).race_check` is False), the oracle agrees;
* exactness: `gk.launch` raises gk.RaceError iff the oracle says the launch
  races, leaving every buffer unchanged; a race-free launch gives the
  oracle's results. So there are no false alarms;
* on the interpreter, `gk.autodiff` never runs a racy launch (it raises, every
  buffer unchanged) and never refuses a race-free one as racy.

GRADKERN_FUZZ_RACES sets the number of kernels (CI default 60),
GRADKERN_FUZZ_SEED the seed, GRADKERN_FUZZ_CPU_EVERY how often a kernel also
runs on the compiled CPU backend (default every 10th),
GRADKERN_FUZZ_HOSTCUDA_EVERY how often on hostcuda, the generated CUDA C run
on the host (default every 5th, where g++ is; the rest run on the
reference interpreter, which runs the same pipeline and run-time check).
A local long run: GRADKERN_FUZZ_RACES=3000 pytest -s -n0 tests/fuzz/test_race_fuzz.py
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass, field

import numpy as np
from support.generators import import_path

import gradkern as gk
from gradkern.backends.hostcuda import compiler

_HAS_GPP = compiler() is not None

N_KERNELS = int(os.environ.get("GRADKERN_FUZZ_RACES", "60"))
SEED = int(os.environ.get("GRADKERN_FUZZ_SEED", "0"))
CPU_EVERY = int(os.environ.get("GRADKERN_FUZZ_CPU_EVERY", "10"))
# how often a kernel runs on hostcuda, the CUDA backend's C on the host (docs/hostcuda.md): its run-time check
# and launch code are the CUDA path's own. Compiling one costs g++ about 0.1-0.3 s, less than Numba.
HOSTCUDA_EVERY = int(os.environ.get("GRADKERN_FUZZ_HOSTCUDA_EVERY", "5"))
LAUNCHES = 3  # per kernel
L1, L2 = 64, 16  # extents of the 1-D written array, and of each axis of the 2-D one
L_HIGH = {4: 12, 5: 9}  # of each axis of a 4-D and a 5-D one
WRAP64 = 4611686018427387904  # 2**62: i * WRAP64 * 4 == i * 2**64 wraps to 0
WRAP32 = 4294967296  # 2**32: int32(i * 2**32) == 0


PATTERNS = ("rows", "lu", "mirror", "stencil", "triangle", "tile", "offset", "loopvar", "direction")


# -- the generator ---------------------------------------------------------------------------------------------------
class _Generator:
    """One random kernel's source: `def <name>(a, b, idx, out, m, n)`, `a` written."""

    def __init__(self, rng: np.random.Generator, name: str):
        self.r = rng
        self.name = name
        # a third of the kernels mutate an HPC pattern the static analysis must decide
        self.pattern = PATTERNS[int(rng.integers(len(PATTERNS)))] if rng.random() < 0.35 else None
        if self.pattern is None:
            self.ndim = 1 + int(rng.random() < 0.35)  # launch dimensions
            r = rng.random()
            self.rank = 2 if r < 0.3 else 4 if r < 0.45 else 5 if r < 0.57 else 1  # `a`'s dimensions
            if self.rank > 2 and rng.random() < 0.4:
                self.ndim = 3
        else:
            two = rng.random() < 0.5
            self.ndim, self.rank = {"rows": (1, 1), "lu": (2, 2), "mirror": (1, 1),
                                    "stencil": (1, 1), "triangle": (1, 1), "tile": (2, 1),
                                    "offset": (1 + two, 1 + two), "loopvar": (1 + two, 1 + two),
                                    "direction": (1, 2)}[self.pattern]
        self.tids = ["i", "j", "t"][:self.ndim]
        self.wild = rng.random() < 0.4  # indirect indices and data-dependent or non-affine guards too
        self.tame = not self.wild and rng.random() < 0.5
        self.atoms = ["i", "p", "q", "k", "r"] + self.tids[1:]
        self.lines: list[str] = []
        self.loops: list[str] = []  # the variables of the loops around: the frontend refuses assigning them
        self.features: set[str] = {f"{self.ndim}-D launch", f"{self.rank}-D array"}

    def pick(self, xs):
        return xs[int(self.r.integers(len(xs)))]

    def chance(self, p: float) -> bool:
        return bool(self.r.random() < p)

    def c(self, hi: int = 3) -> int:
        return int(self.r.integers(0, hi))

    def emit(self, depth: int, text: str):
        self.lines.append("    " * (depth + 1) + text)

    # -- expressions -----------------------------------------------------------------------------------------------
    def atom(self) -> str:
        return self.pick(self.atoms)

    def position(self, flat: bool) -> str:
        """One index position: affine in the locals, flattened, indirect, or wrapping."""
        a, c = self.atom(), self.c()
        t = int(self.r.integers(100))
        if t < 36:
            return a if c == 0 else f"{a} + {c}"
        if t < 44:
            return f"{self.c(2) + 2} * {a} + {c}"
        if t < 56 and flat:
            self.features.add("flattened index")
            return f"{self.pick(['i', 'p'])} * n + {self.pick(['k', 'r'] + self.tids[1:])}"
        if t < 64 and self.wild:
            self.features.add("indirect index")
            return f"idx[{a}]"
        if t < 68:
            return f"m - 1 - {a}"
        if t < 74:
            return str(c)
        if t < 76:
            return f"{a} - 1"
        if t < 81:
            self.features.add("wrapping index")
            return self.pick([f"np.int32({a} * {WRAP32}) + {self.atom()}", f"{a} * 4 * {WRAP64} + {c}",
                              f"{a} * {WRAP64} * 4 + {a}", f"np.int32({a} * {WRAP32} + {a})"])
        return a

    def position_high(self) -> str:
        """One index position of a 4-D or 5-D array: tamer, so that the accesses of all positions together
        often stay inside the array."""
        a, t = self.atom(), int(self.r.integers(100))
        if t < 60:
            return a if t < 30 else f"{a} + {self.c()}"
        if t < 75:
            return str(self.c())
        if t < 83:
            return f"2 * {a}"
        if t < 91 and self.wild:
            self.features.add("indirect index")
            return f"idx[{a}] % 4"
        return f"{a} % 3"

    def index(self) -> str:
        if self.rank > 2:
            return ", ".join(self.position_high() for _ in range(self.rank))
        if self.rank > 1:
            return ", ".join(self.position(False) for _ in range(self.rank))
        return self.position(True)

    def condition(self) -> str:
        a, b, c = self.atom(), self.atom(), self.c(4)
        affine = [f"{a} < m", f"{a} > {c}", f"{a} == {c}", f"{a} != {c}", f"{a} >= n", f"{a} < {b}",
                  f"{a} <= {b} + 1", f"{a} < m and {b} > {c}", f"not ({a} < {c})", f"{a} < m or {b} == {c}"]
        wild = [f"a[{self.index()}] > 0.5", f"idx[{a}] > {c}", f"{a} % 2 == 0"]
        return self.pick(affine + wild if self.wild else affine)

    def value(self) -> str:
        return self.pick(["1.0", "s", f"a[{self.index()}] * 0.5", f"b[{self.index()}] + 1.0", "s + 2.0"])

    def bounds(self) -> str:
        lo = self.pick(["0", "1", self.atom(), f"{self.atom()} + 1"])
        hi = self.pick(["m", "n", "3", self.atom(), f"{self.atom()} + 2"])
        t = int(self.r.integers(10))
        if lo not in ("0", "1") or hi not in ("m", "n", "3"):
            self.features.add("thread-dependent loop bounds")
        if t == 0:
            self.features.add("negative step")
            return f"{hi}, {lo}, -1"
        if t == 1:
            return f"{lo}, {hi}, 2"
        return f"{lo}, {hi}" if lo != "0" else hi

    # -- statements ------------------------------------------------------------------------------------------------
    def block(self, depth: int, count: int):
        for _ in range(count):
            self.statement(depth)

    def statement(self, depth: int):
        if self.loops and self.chance(0.08):  # the rest of the loop's body runs under `not <condition>`
            word = self.pick(["continue", "continue", "break"])
            self.features.add(word)
            self.emit(depth, f"if {self.condition()}:")
            self.emit(depth + 1, word)
            return
        if depth < 2 and self.chance(0.04):  # what a bool local's value implies guards the block
            self.features.add("bool local")
            self.emit(depth, f"ok = {self.condition()}")
            if self.chance(0.5):
                self.emit(depth, f"if {self.condition()}:")
                self.emit(depth + 1, f"ok = {self.pick(['False', 'True', self.condition()])}")
            self.emit(depth, f"if {self.pick(['', 'not '])}ok:")
            self.block(depth + 1, 1 + self.c(2))
            return
        t = int(self.r.integers(100))
        if self.tame and t >= 70:  # fewer rebindings: more kernels the static analysis can decide
            t = int(self.r.integers(70))
        if t < 18:
            self.emit(depth, f"a[{self.index()}] = {self.value()}")
        elif t < 27:
            self.emit(depth, f"a[{self.index()}] += 1.0")
        elif t < 40:
            self.emit(depth, f"s += a[{self.index()}]")
        elif t < 45:
            idx = self.index()
            self.features.add("atomic add")
            self.emit(depth, f"gk.atomic_add(a, {'(' + idx + ')' if self.rank > 1 else idx}, 1.0)")
        elif t < 58 and depth < 2:
            self.features.add("guard")
            self.emit(depth, f"if {self.condition()}:")
            self.block(depth + 1, 1 + self.c(2))
            if self.chance(0.4):
                self.emit(depth, "else:")
                self.block(depth + 1, 1 + self.c(2))
        elif t < 70 and depth < 2 and self.rank == 1 and self.chance(0.2):
            self.grid_stride(depth)
        elif t < 70 and depth < 2:
            v = self.pick(["k", "r"])
            self.emit(depth, f"for {v} in range({self.bounds()}):")
            self.loops.append(v)
            self.block(depth + 1, 1 + self.c(2))
            self.loops.pop()
        elif t < 92:
            self.rebind(depth)
        elif t < 95 and depth == 0:  # an early return (the frontend refuses one inside a loop)
            self.features.add("early return")
            self.emit(depth, f"if {self.condition()}:")
            self.emit(depth + 1, "return")
        else:
            self.emit(depth, f"s += b[{self.index()}]")

    def rebind(self, depth: int):
        """A new binding of a local the indices use (every kind the language has)."""
        free = [v for v in ("p", "q", "k", "r") if v not in self.loops]
        x = self.pick(free)
        y = self.pick([v for v in free if v != x])
        t = int(self.r.integers(100))
        if t < 22:
            values = ["i", "i + 1", "m - 1", self.atom(), str(self.c())] + self.tids[1:]
            self.emit(depth, f"{x} = {self.pick(values + (['idx[i]'] if self.wild else []))}")
        elif t < 40:  # the loop variable outlives its loop
            self.features.add("loop variable outlives its loop")
            self.emit(depth, f"for {x} in range({self.bounds()}):")
            self.emit(depth + 1, "pass" if self.chance(0.5) else f"s += a[{self.index()}]")
        elif t < 55:
            self.features.add("rebound in a branch")
            self.emit(depth, f"if {self.condition()}:")
            self.emit(depth + 1, f"{x} = {self.pick([str(self.c()), 'i', 'm - 1', y + ' + 1'])}")
        elif t < 68:
            self.features.add("augmented assignment")
            self.emit(depth, f"{x} += {self.c(3)}")
        elif t < 80:
            self.features.add("tuple swap")
            self.emit(depth, f"{x}, {y} = {y}, {x}")
        elif t < 90:
            self.features.add("while loop")
            self.emit(depth, f"while {x} < m:")
            self.emit(depth + 1, f"{x} += 1")
        elif t < 95:  # the thread index itself, rebound by a loop
            tid = self.pick(self.tids)
            self.features.add("thread index rebound")
            self.emit(depth, f"for {tid} in range({self.pick(['m', 'n', '2'])}):")
            self.emit(depth + 1, "pass")
        else:
            self.features.add("thread index rebound")
            self.emit(depth, f"i = {self.pick(['i + 0', 'i + 1', 'p'])}")

    def grid_stride(self, depth: int):
        """CUDA's grid-stride loop over a local `g` nothing else binds (so it ends: every stride is at least 1);
        race-free when it starts at the thread index with a stride of at least the launch (at most 8)."""
        self.features.add("grid-stride while")
        self.emit(depth, f"g = {self.pick(['i', 'i', 'i + 1', 'p', '0'])}")
        self.emit(depth, f"while g < {self.pick(['n', 'm', 'n + m', '12'])}:")
        self.emit(depth + 1, self.pick(["a[g] = s + 1.0", "a[g] += 1.0", "s += a[g]", "a[g] = a[g] * 0.5 + b[g]",
                                        "a[g] = b[g] * s"]))
        self.emit(depth + 1, f"g += {self.pick(['8', '8', 'n + 1', 'm + 1', '1', '2'])}")

    def source(self) -> str:
        head = f"{', '.join(self.tids)} = gk.tid()"
        self.lines = [f"def {self.name}(a, b, idx, out, m, n):", f"    {head}", "    p = i",
                      f"    q = {'j' if self.ndim > 1 else 'i + 1'}", f"    k = {self.pick(['0', 'i'])}",
                      "    r = i", "    s = 0.0"]
        if self.pattern is None:
            self.block(0, 2 + self.c(4))
        else:
            for _ in range(self.c(3)):
                self.rebind(0)
            self.features.add(f"pattern: {self.pattern}")
            getattr(self, "pattern_" + self.pattern)()
            if self.chance(0.3):
                self.statement(0)
        self.emit(0, f"out[{', '.join(self.tids)}] = s")
        return "\n".join(self.lines) + "\n"

    # -- HPC patterns, each with mutations that may make it race -----------------------------------------------------
    def row(self) -> str:
        return self.pick(["i", "i", "p", "q"])

    def pattern_rows(self):
        """gemm-style own rows a[i * n + k] for k in range(n)."""
        v = self.pick(["k", "r"])
        start = self.pick(["0", "0", "1", "i", "max(n - 2, 0)", "m"])
        stop = self.pick(["n", "n", "n", "n + 1", "m"])
        row, col = self.row(), self.pick([v, v, v, "k + 1", "r"])
        self.emit(0, f"for {v} in range({start}, {stop}):")
        self.emit(1, f"a[{row} * n + {col}] = a[{row} * n + {col}] * 0.5 + b[{self.row()} * n + {v}]")

    def pattern_lu(self):
        """LU's update under i > m and j > m (m the pivot)."""
        lo = self.pick([">", ">", ">="])
        self.emit(0, f"if i {lo} m and j {self.pick(['>', '>', '>='])} m:")
        self.emit(1, f"a[i, j] -= a[i, {self.pick(['m', 'm', 'm + 1', 'p'])}] * a[{self.pick(['m', 'm', 'q'])}, j]")

    def pattern_mirror(self):
        """correlation's mirrored write s[k * m + i] = s[i * m + k] for k > i."""
        self.emit(0, f"if i < {self.pick(['m', 'm', 'm + 1'])}:")
        self.emit(1, "a[i * m + i] = 1.0")
        self.emit(1, f"for k in range({self.pick(['i + 1', 'i + 1', 'i', '0'])}, {self.pick(['m', 'm', 'm + 1'])}):")
        self.emit(2, f"a[i * m + k] = b[{self.pick(['k', 'i'])}]")
        self.emit(2, f"a[k * m + {self.pick(['i', 'i', 'i + 1'])}] = a[i * m + k]")

    def pattern_stencil(self):
        """A stencil into another array, or in place."""
        self.emit(0, f"if {self.pick(['0 < i and i < m', '0 < i', 'i < m', '1 < i and i < m - 1'])}:")
        src = self.pick(["b", "b", "a"])
        self.emit(1, f"a[{self.pick(['i', 'i', 'i + 1', 'p'])}] = {src}[i - 1] + {src}[i + 1]")

    def pattern_triangle(self):
        """A triangular row: the thread reads its row below the diagonal, writes the diagonal."""
        self.emit(0, f"if {self.pick(['i < n', 'i < n', 'i <= n', 'i < m'])}:")
        self.emit(1, f"for k in range({self.pick(['i', 'i', 'i + 1', 'n'])}):")
        self.emit(2, f"s += a[i * n + {self.pick(['k', 'k', 'k + 1'])}]")
        self.emit(1, f"a[i * n + {self.pick(['i', 'i', 'p', 'q'])}] = s")

    def at(self, row: str) -> str:
        """An index of `a` (or `b`) at row `row`: `row, j` for a 2-D array in a 2-D launch."""
        return f"{row}, {self.pick(['j', 'j', 'j', 'j + 1'])}" if self.rank == 2 else row

    def pattern_offset(self):
        """Veros's offset writes: `i1 = i + c` indexes the accesses of `a` (thread-own at tid + c while
        every access has the same offset); mutations read or write at another offset or rebind i1."""
        c = self.pick(["1", "1", "2", "0"])
        self.emit(0, f"i1 = {self.pick([f'i + {c}', f'i + {c}', f'{c} + i', f'p + {c}'])}")
        if self.chance(0.2):
            self.features.add("offset alias rebound")
            self.emit(0, self.pick(["if i < m:", "if i > 1:"]))
            self.emit(1, f"i1 = {self.pick(['i + 2', 'i', f'i + {c}'])}")
        if self.chance(0.1):
            self.emit(0, "i1 += 0")
        read = self.pick(["i1", "i1", "i1", "i1 + 1", "i1 - 1", f"i + {c}"])
        self.emit(0, f"a[{self.at('i1')}] = b[{self.at('i')}] * 2.0 + a[{self.at(read)}]")
        if self.chance(0.5):
            self.emit(0, f"s += a[{self.at(self.pick(['i1', 'i1', 'i1 + 1', f'i + {c}']))}] * b[{self.at('i1')}]")

    def pattern_loopvar(self):
        """Loop-variable offsets: `for ip in range(2)` reads (or writes) `x[i + ip]`, a stencil once unrolled."""
        loop = self.pick(["range(2)", "range(2)", "range(3)", "range(1, 3)", "range(0, 4, 2)", "range(2, 0, -1)",
                          "range(n)"])
        src = self.pick(["b", "b", "a"])
        self.emit(0, f"for ip in {loop}:")
        at = self.at(self.pick(["i + ip", "i + ip", "ip + i", "i + 1 + ip"]))
        self.emit(1, f"s += {src}[{at}] * {src}[{self.at('i + 1')}]")
        if self.chance(0.3):
            self.emit(1, f"a[{self.at(self.pick(['i + ip', 'i + 1']))}] = s")
        self.emit(0, f"a[{self.at(self.pick(['i + 1', 'i + 1', 'i', 'i + 2']))}] = s")

    def pattern_direction(self):
        """Lattice-Boltzmann's populations `a[q, x ± 1]`: constant rows beside a periodic stencil, a pull's form
        (transforms/pull.py); mutations wrap to a constant or past the array, read a row through a rebound
        local or the thread index, or write a row."""
        self.emit(0, "n1 = a.shape[1]")
        self.emit(0, f"ip = i + 1 if i < n1 - 1 else {self.pick(['i + 1 - n1', 'i + 1 - n1', '0', 'i - n1'])}")
        self.emit(0, f"im = i - 1 if {self.pick(['i > 0', 'i > 0', 'i >= 1', 'i > m'])} else i - 1 + n1")
        for _ in range(1 + self.c(3)):
            row, at = self.pick(["0", "1", "2", "k", "2"]), self.pick(["ip", "im", "i", "i + 1", "ip"])
            other = self.pick(["b[0, i]", "2.0", f"a[{self.pick(['0', '1'])}, {self.pick(['i', 'ip', 'im'])}]"])
            self.emit(0, f"s += a[{row}, {at}] * {other}")
        if self.chance(0.15):
            self.emit(0, f"a[{self.pick(['0', '1', '2'])}, i] = s")

    def pattern_tile(self):
        """A 2-D launch over a flattened tile: a[i * n + j] where j < n."""
        guard, col = self.pick(['j < n', 'j < n', 'j <= n', 'i < m']), self.pick(['j', 'j', 'j + 1', 'q'])
        if self.chance(0.5):
            self.emit(0, f"if {guard}:")
            self.emit(1, f"a[i * n + {col}] = b[j] + {self.pick(['1.0', 'a[j]'])}")
            return
        # as C ports write it: the flattened index in a local, bound before or under the guard, maybe
        # rebound (itself, in a branch, or the names it was computed from) before the access
        self.features.add("flattened index in a local")
        early = self.chance(0.5)
        if early:
            self.emit(0, f"f = i * n + {col}")
        self.emit(0, f"if {guard}:")
        if not early:
            self.emit(1, f"f = i * n + {col}")
        self.emit(1, self.pick(["pass", "pass", "q = q + 1", "j = 0", "i = i + 1", "f += 1", "f = i * n + q"]))
        if self.chance(0.3):
            self.emit(1, f"if {self.condition()}:")
            self.emit(2, f"f = {self.pick(['0', 'q', 'i * n'])}")
        self.emit(1, f"a[f] = b[j] + {self.pick(['1.0', 'a[j]', 'a[f]'])}")


# -- the oracle ------------------------------------------------------------------------------------------------------
class _OutOfBounds(Exception):
    pass


class _Recorded:
    """An array whose every element access is logged as (array, element, kind, thread)."""

    def __init__(self, name: str, data: np.ndarray, log: list, state: dict):
        self.name, self.data, self.log, self.state = name, data, log, state

    @property
    def shape(self):
        return tuple(np.int64(s) for s in self.data.shape)

    def __len__(self):
        return self.data.shape[0]

    def _element(self, index) -> tuple[int, ...]:
        idx = index if isinstance(index, tuple) else (index,)
        if len(idx) != self.data.ndim:
            raise _OutOfBounds
        out = []
        for x, extent in zip(idx, self.data.shape):
            x = int(x)
            if not 0 <= x < extent:  # kernels index inside their arrays; negative indices do not wrap
                raise _OutOfBounds
            out.append(x)
        return tuple(out)

    def __getitem__(self, index):
        e = self._element(index)
        self.log.append((self.name, e, "r", self.state["tid"]))
        return self.data[e]

    def __setitem__(self, index, value):
        e = self._element(index)
        self.log.append((self.name, e, "w", self.state["tid"]))
        self.data[e] = value

    def atomic_add(self, index, value):
        e = self._element(index)
        self.log.append((self.name, e, "a", self.state["tid"]))
        self.data[e] += value


class _FakeGk:
    def __init__(self, state: dict):
        self.state = state

    def tid(self):
        t = self.state["tid"]
        return tuple(np.int64(x) for x in t) if len(t) > 1 else np.int64(t[0])

    @staticmethod
    def atomic_add(array: _Recorded, index, value):
        array.atomic_add(index, value)


class _FakeNp:
    @staticmethod
    def int32(x):  # a narrowing cast keeps the low 32 bits
        return np.int64(x).astype(np.int32)


def _range(*args):
    return (np.int64(v) for v in range(*(int(a) for a in args)))


@dataclass
class Verdict:
    racy: bool
    arrays: dict  # the arrays after the serial run
    shared: frozenset = frozenset()  # arrays with an element two threads touch (in any way)
    log: list = field(default_factory=list)  # (array, element, kind, thread) of every access, in order


def oracle(function_source: str, name: str, dim: tuple, arrays: dict, m: int, n: int) -> Verdict | None:
    """Run the kernel per thread in plain Python; None if an access leaves its array."""
    log: list = []
    state: dict = {"tid": None}
    data = {k: v.copy() for k, v in arrays.items()}
    rec = {k: _Recorded(k, v, log, state) for k, v in data.items()}
    ns = {"gk": _FakeGk(state), "np": _FakeNp, "range": _range, "math": math}
    exec(function_source, ns)
    f = ns[name]
    with np.errstate(over="ignore"):
        for t in itertools.product(*(range(d) for d in dim)):
            state["tid"] = t
            try:
                f(rec["a"], rec["b"], rec["idx"], rec["out"], np.int64(m), np.int64(n))
            except _OutOfBounds:
                return None
    touched: dict = {}
    for array, element, kind, thread in log:
        touched.setdefault((array, element), []).append((thread, kind))
    racy = False
    shared = set()
    for (array, _), accesses in touched.items():
        writers = {t for t, k in accesses if k == "w"}
        plain = {t for t, k in accesses if k != "a"}
        atomic = {t for t, k in accesses if k == "a"}
        others = {t for t, _ in accesses}
        if len(others) > 1:
            shared.add(array)
        if any(others - {w} for w in writers) or any(plain - {x} for x in atomic):
            racy = True
    return Verdict(racy, data, frozenset(shared), log)


# -- the run ---------------------------------------------------------------------------------------------------------
@dataclass
class Stats:
    kernels: int = 0
    launches: int = 0
    skipped_out_of_bounds: int = 0
    racy: int = 0
    race_free: int = 0
    proven: int = 0  # launches proven race-free statically (no run-time check)
    checked: int = 0  # launches that ran the exact run-time check
    checked_race_free: int = 0  # of those, race-free: the static analysis could not prove them
    cpu_launches: int = 0
    hostcuda_launches: int = 0
    gradients: int = 0  # race-free launches differentiated (gk.autodiff, interpreter)
    plain_adds: int = 0  # of their arrays, those whose adjoint is a plain add (checked: no element shared)
    gathers: int = 0  # ... a gather (checked, as every form, by the dot-product test against forward mode)
    pulls: int = 0  # ... a pull (transforms/pull.py; checked the same way)
    saved_in_place: int = 0  # arrays claimed saved in place (facts.saved_in_place), checked against the log
    features: dict = field(default_factory=dict)  # template feature -> [launches, racy, proven]
    disagreements: list = field(default_factory=list)  # proven race-free, but racy: must stay empty
    wrong: list = field(default_factory=list)  # RaceError iff racy, buffers, results: must stay empty
    other: list = field(default_factory=list)  # failures that are not about races (printed)

    def __str__(self) -> str:
        return (f"{self.kernels} kernels, {self.launches} launches ({self.skipped_out_of_bounds} more skipped: an "
                f"access out of bounds); oracle: {self.racy} racy, {self.race_free} race-free; statically proven: "
                f"{self.proven}, run-time checked: {self.checked} ({self.checked_race_free} of them race-free); "
                f"on the compiled CPU backend: {self.cpu_launches}, on hostcuda: {self.hostcuda_launches}; "
                f"differentiated: {self.gradients} (plain adds: "
                f"{self.plain_adds}, gathers: {self.gathers}, pulls: {self.pulls}); "
                f"saved in place: {self.saved_in_place}; "
                f"disagreements: {len(self.disagreements)}; wrong end-to-end: {len(self.wrong)}; "
                f"other failures: {len(self.other)}")


def _arguments(rng: np.random.Generator, g: _Generator):
    dim = (int(rng.integers(1, 9)),) if g.ndim == 1 else \
        tuple(int(rng.integers(1, 5 if g.ndim == 2 else 4)) for _ in range(g.ndim))
    shape = (L1,) if g.rank == 1 else (L2, L2) if g.rank == 2 else (L_HIGH[g.rank],) * g.rank
    if g.pattern == "direction":  # rows of a lattice about as long as the launch: wraps taken, launches past them
        shape = (3, int(rng.integers(1, 9)))
    arrays = {"a": rng.uniform(0.0, 1.0, shape), "b": rng.uniform(0.0, 1.0, shape),
              "idx": (rng.permutation(16) % L2 if rng.random() < 0.5 else rng.integers(0, L2, 16)).astype(np.int64),
              "out": np.zeros(dim)}
    return dim, arrays, int(rng.integers(0, 6)), int(rng.integers(1, 6))


def load_kernels(path: str, sources: list[str]):
    """Write `sources` as @gk.kernel functions into the module file `path` (gk.kernel reads
    the source) and import it."""
    with open(path, "w") as f:
        f.write("import numpy as np\n\nimport gradkern as gk\n\n")
        for src in sources:
            f.write("\n@gk.kernel\n" + src)
    return import_path(path)


def fuzz_backend(index: int, cpu_every: int, hostcuda_every: int) -> str:
    """The backend kernel `index` of a fuzz run launches on: the compiled CPU backend for every `cpu_every`-th,
    hostcuda for every `hostcuda_every`-th of the others (where g++ is), else the interpreter."""
    if cpu_every and index % cpu_every == 0:
        return "cpu"
    if hostcuda_every and index % hostcuda_every == hostcuda_every // 2 and _HAS_GPP:
        return "hostcuda"
    return "interp"


def fuzz_kernels(directory: str, stats, generator, name: str, check, launches: int, count: int, seed: int,
                 cpu_every: int, batch: int = 100, hostcuda_every: int = 0):
    """Make `count` random kernels with `generator(rng, kernel_name)`, load them `batch` at a
    time from module files in `directory`, and `check(stats, rng, generator, source, kernel,
    backend)` each `launches` times on the backend fuzz_backend picks. Returns `stats`."""
    rng = np.random.default_rng(seed)
    for first in range(0, count, batch):
        gens = [generator(rng, f"{name}_{seed}_{first + x}") for x in range(min(batch, count - first))]
        sources = [g.source() for g in gens]
        module = load_kernels(os.path.join(directory, f"{name}_module_{seed}_{first}.py"), sources)
        for x, (g, src) in enumerate(zip(gens, sources)):
            stats.kernels += 1
            backend = fuzz_backend(first + x, cpu_every, hostcuda_every)
            for _ in range(launches):
                check(stats, rng, g, src, getattr(module, g.name), backend)
    return stats


def fuzz(directory: str, count: int = N_KERNELS, seed: int = SEED, cpu_every: int = CPU_EVERY,
         hostcuda_every: int = HOSTCUDA_EVERY) -> Stats:
    """Generate `count` kernels and check every launch (see module doc)."""
    return fuzz_kernels(directory, Stats(), _Generator, "fuzz", _check_launch, LAUNCHES, count, seed, cpu_every,
                        hostcuda_every=hostcuda_every)


def _check_launch(stats: Stats, rng, g: _Generator, src: str, kernel, backend: str):
    dim, arrays, m, n = _arguments(rng, g)
    verdict = oracle(src, g.name, dim, arrays, m, n)
    if verdict is None:
        stats.skipped_out_of_bounds += 1
        return
    stats.launches += 1
    for f in g.features:
        counts = stats.features.setdefault(f, [0, 0, 0])
        counts[0] += 1
        counts[1] += verdict.racy
    stats.racy += verdict.racy
    stats.race_free += not verdict.racy
    args = [arrays["a"].copy(), arrays["b"].copy(), arrays["idx"].copy(), arrays["out"].copy(), m, n]
    case = f"{g.name} dim={dim} m={m} n={n} idx={arrays['idx'].tolist()}\n{src}"
    checked = gk.inspect(kernel, *args, dim=dim, backend=backend).race_check  # the launch below, as it runs
    _check_saved_in_place(stats, kernel, args, dim, verdict, case)
    stats.proven += not checked
    for f in g.features:
        stats.features[f][2] += not checked
    stats.checked += checked
    stats.checked_race_free += checked and not verdict.racy
    if not checked and verdict.racy:
        stats.disagreements.append("proven race-free, but it races: " + case)
    stats.cpu_launches += backend == "cpu"
    stats.hostcuda_launches += backend == "hostcuda"
    try:
        gk.launch(kernel, dim, *args, backend=backend)
        refused = False
    except gk.RaceError:
        refused = True
    except Exception as e:  # noqa: BLE001 - any other failure is a finding too
        stats.wrong.append(f"{backend}: {type(e).__name__}: {e}\n{case}")
        return
    if backend == "interp":
        _check_gradient(stats, arrays, dim, m, n, verdict, kernel, case)
    if refused != verdict.racy:
        stats.wrong.append(f"{backend}: RaceError={refused} but the oracle says racy={verdict.racy}: {case}")
    elif refused:
        for k, a in zip(("a", "b", "idx", "out"), args):
            if not np.array_equal(a, arrays[k]):
                stats.wrong.append(f"{backend}: refused, but '{k}' changed: {case}")
    else:
        for k, a in zip(("a", "b", "idx", "out"), args):
            if not np.allclose(a, verdict.arrays[k], rtol=1e-13, atol=1e-13):
                stats.wrong.append(f"{backend}: '{k}' differs from the serial run: {case}")


def _check_saved_in_place(stats: Stats, kernel, args: list, dim: tuple, verdict: Verdict, case: str):
    """facts.saved_in_place (an augmented primal copies such an array's old element before the thread's first
    store: docs/programs.md#saved-copies-and-the-sweep), against the oracle's log: a claimed array is only ever
    written, each thread writing only its own element, and every thread writes it."""
    from gradkern.runtime.call import prepare
    try:
        call, _ = prepare(kernel, tuple(x.copy() if isinstance(x, np.ndarray) else x for x in args), dim, None,
                          "launch")
    except gk.GradkernError:
        return
    threads = set(itertools.product(*(range(d) for d in dim)))
    for name in call.spec.facts.saved_in_place:
        stats.saved_in_place += 1
        accesses = [(e, k, t) for a, e, k, t in verdict.log if a == name]
        if any(k != "w" or tuple(e) != tuple(t) for e, k, t in accesses) or {t for _, _, t in accesses} != threads:
            stats.disagreements.append(f"'{name}' is claimed saved in place, but the oracle disagrees: {case}")


def _check_gradient(stats: Stats, arrays: dict, dim, m: int, n: int, verdict: Verdict, kernel, case: str):
    """gk.autodiff never runs a racy launch (it raises, every buffer unchanged)
    and never refuses a race-free one as racy."""
    a, da, out, dout = arrays["a"].copy(), np.ones_like(arrays["a"]), arrays["out"].copy(), np.ones_like(arrays["out"])
    before = [x.copy() for x in (a, da, out, dout)]
    try:
        gk.autodiff(kernel, gk.Duplicated(a, da), gk.Const(arrays["b"].copy()), gk.Const(arrays["idx"].copy()),
                    gk.Duplicated(out, dout), m, n, dim=dim, backend="interp")
    except gk.RaceError:
        if not verdict.racy:
            stats.wrong.append("autodiff refused a race-free launch as racy: " + case)
        if any(not np.array_equal(x, y) for x, y in zip((a, da, out, dout), before)):
            stats.wrong.append("autodiff refused, but a buffer changed: " + case)
        return
    except gk.GradkernError:  # not differentiable (a while loop, say): refused before anything runs
        if any(not np.array_equal(x, y) for x, y in zip((a, da, out, dout), before)):
            stats.wrong.append("autodiff refused, but a buffer changed: " + case)
        return
    except Exception as e:  # noqa: BLE001 - not a race property: reported, not asserted here
        stats.other.append(f"autodiff: {type(e).__name__}: {e}\n{case}")
        return
    stats.gradients += 1
    if verdict.racy:
        stats.wrong.append("autodiff ran a racy launch: " + case)
        return
    _check_adjoint_forms(stats, arrays, dim, m, n, verdict, kernel, case)


def _check_adjoint_forms(stats: Stats, arrays: dict, dim, m: int, n: int, verdict: Verdict, kernel, case: str):
    """A race-free launch's adjoint forms (docs/adjoint-forms.md): an array whose shadow takes plain adds
    has no element two threads touch in the oracle's run (else the adds would race on a parallel
    backend, silently), and the gradient, whatever its forms, passes the dot-product test against
    forward mode, <w, J v> = <J^T w, v>, which has no gathers, atomics or plain adds to get wrong."""
    rng = np.random.default_rng(len(case))

    def annotated(seeds: dict):  # fresh primals each time: every mode starts from the launch's inputs
        return (gk.Duplicated(arrays["a"].copy(), seeds["a"]), gk.Const(arrays["b"].copy()),
                gk.Const(arrays["idx"].copy()), gk.Duplicated(arrays["out"].copy(), seeds["out"]), m, n)

    forms = gk.inspect(kernel, *annotated({k: np.zeros_like(arrays[k]) for k in ("a", "out")}), dim=dim,
                       mode=gk.Reverse).adjoint_forms
    for array, form in forms.items():
        stats.plain_adds += form == "plain add"
        stats.gathers += form == "gather"
        stats.pulls += form == "pull"
        if form == "plain add" and array in verdict.shared:
            stats.disagreements.append(f"'{array}' takes plain adds, but two threads touch an element: {case}")
    v = {k: rng.standard_normal(arrays[k].shape) for k in ("a", "out")}
    w = {k: rng.standard_normal(arrays[k].shape) for k in ("a", "out")}
    tangents = {k: x.copy() for k, x in v.items()}
    adjoints = {k: x.copy() for k, x in w.items()}
    try:
        gk.autodiff(kernel, *annotated(tangents), dim=dim, mode=gk.Forward, backend="interp")
    except gk.GradkernError as e:
        stats.other.append(f"forward mode: {type(e).__name__}: {e}\n{case}")
        return
    gk.autodiff(kernel, *annotated(adjoints), dim=dim, backend="interp")
    terms = [w[k] * tangents[k] for k in w] + [adjoints[k] * v[k] for k in v]
    forward, reverse = sum(float(t.sum()) for t in terms[:2]), sum(float(t.sum()) for t in terms[2:])
    # the same products summed in different orders: float64 rounding, ~1e-16 per term of the scale
    scale = sum(float(np.abs(t).sum()) for t in terms)
    if not abs(forward - reverse) <= 1e-12 * scale + 1e-300:
        stats.wrong.append(f"dot-product test: <w, Jv> = {forward!r}, <J^T w, v> = {reverse!r} ({forms}): {case}")


def test_static_proofs_are_sound_and_the_run_time_check_exact(tmp_path):
    stats = fuzz(str(tmp_path))
    print(stats)
    for f, (launches, racy, proven) in sorted(stats.features.items()):
        print(f"  {f}: {launches} launches, {racy} racy, {proven} proven statically")
    for x in stats.other[:3]:
        print("not a race property:", x)
    assert not stats.disagreements, "\n\n".join(stats.disagreements[:5])
    assert not stats.wrong, "\n\n".join(stats.wrong[:5])
    # the generator must reach both verdicts and both paths
    assert stats.racy and stats.race_free and stats.proven and stats.checked
    assert stats.hostcuda_launches or not _HAS_GPP or not HOSTCUDA_EVERY
