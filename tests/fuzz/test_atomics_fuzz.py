"""Atomic-add forms fuzzer (docs/adjoint-forms.md#5-atomic-adds-on-the-cpu): random kernels full of atomic
adds, compiled for the CPU in every form, checked against brute-force oracles.

The generator writes 1- and 2-D kernels `def <name>(x, y, w, idx, m)` whose threads add into a 1-D `x`
and a 2-D `y` at the thread's row plus a constant (`i`, `i + 1`, an alias `ii = i + 2`, `i - 1` under a
guard), at data (`idx[i]`, `idx[i] % 3`), at constants and parameters (`0`, `m`), at the inner thread
index or a loop variable, inside `if`/`else` on data or indices and `for q in range(2)` loops. Values are
small dyadic rationals, so every sum is exact whatever its order.

Oracles, per kernel and launch:
* results: the CPU backend's parallel entry, forced to 2, 3 and one-per-outer-index chunks, with copies
  (SPARSE_RATIO 0) and with sparse privatisation wherever it is printed (SPARSE_RATIO inf), equals the
  reference interpreter (the threads in order) bit for bit;
* the bound of adds per thread that sizes the spill lists (`_gkb_cap_X = K * ...` in the printed source)
  is at least the count of adds any thread makes, counted by a twin kernel that adds 1 per add to the
  thread's own counter, run on the interpreter;
* a target printed as owned with row offset c (`X[_gkb_t0 + c] += _gkb_row_X`) receives adds only at
  `tid[0] + c`: the twin adds, per add, 1, the offset and its square into moments that must be c-exact;
* the generator exercises both forms (some kernels own rows, some spill).

GRADKERN_FUZZ_ATOMICS sets the number of kernels (CI default 10), GRADKERN_FUZZ_SEED the seed.
A local long run: GRADKERN_FUZZ_ATOMICS=200 pytest -s -n0 tests/fuzz/test_atomics_fuzz.py
"""

from __future__ import annotations

import os
import re

import numpy as np

import gradkern as gk
from fuzz.test_race_fuzz import load_kernels
from gradkern.backends import numba_cpu, numba_plan

N_KERNELS = int(os.environ.get("GRADKERN_FUZZ_ATOMICS", "10"))
SEED = int(os.environ.get("GRADKERN_FUZZ_SEED", "0"))


class _Generator:
    """One random kernel's source, and its twin's (the same body, each add followed by the oracles' adds)."""

    def __init__(self, rng: np.random.Generator, name: str):
        self.rng, self.name = rng, name
        self.ndim = 1 + int(rng.random() < 0.5)
        self.lines: list[str] = []
        self.twin: list[str] = []
        self.loop = 0  # depth of `for` loops around the statement being written

    def pick(self, xs):
        return xs[self.rng.integers(len(xs))]

    def emit(self, depth: int, text: str, twin: list[str] | None = None):
        self.lines.append("    " * depth + text)
        self.twin += ["    " * depth + t for t in [text, *(twin or [])]]

    def x_index(self) -> tuple[str, str | None]:
        """An index into x, and the guard it needs (None: always in range)."""
        forms = [("i", None), ("i + 1", None), ("ii", None), ("i - 1", "i >= 1"), ("idx[i]", None),
                 ("idx[i] % 3", None), ("0", None), ("m", None)]
        if self.ndim == 2:
            forms.append(("j", None))
        if self.loop:
            forms.append(("q", None))
        return self.pick(forms)

    def value(self) -> str:
        return self.pick(["wv", "0.5 * wv", "1.0", "wv + 0.25"] + (["wv * q"] if self.loop else []))

    def add(self, depth: int):
        if self.rng.random() < 0.75:
            at, guard = self.x_index()
            if guard is not None:
                self.emit(depth, f"if {guard}:")
                depth += 1
            offset = f"({at}) - i"
            self.emit(depth, f"gk.atomic_add(x, {at}, {self.value()})",
                      ["gk.atomic_add(cnt, (t, 0), 1.0)", "gk.atomic_add(mom, 0, 1.0)",
                       f"gk.atomic_add(mom, 1, ({offset}) * 1.0)",
                       f"gk.atomic_add(mom, 2, ({offset}) * ({offset}) * 1.0)"])
        else:
            row = self.pick(["i", "i + 1", "idx[i] % y.shape[0]", "0"])
            col = self.pick(["0", "idx[i] % y.shape[1]"] + (["j"] if self.ndim == 2 else []))
            self.emit(depth, f"gk.atomic_add(y, ({row}, {col}), {self.value()})",
                      ["gk.atomic_add(cnt, (t, 1), 1.0)"])

    def block(self, depth: int, count: int):
        for _ in range(count):
            r = self.rng.random()
            if r < 0.55 or depth >= 3:
                self.add(depth)
            elif r < 0.8:
                self.emit(depth, f"if {self.pick(['wv > 0.0', 'i % 2 == 0', 'idx[i] > m'])}:")
                self.block(depth + 1, int(self.rng.integers(1, 3)))
                if self.rng.random() < 0.6:
                    self.emit(depth, "else:")
                    self.block(depth + 1, int(self.rng.integers(1, 3)))
            else:
                self.emit(depth, "for q in range(2):")
                self.loop += 1
                self.block(depth + 1, int(self.rng.integers(1, 3)))
                self.loop -= 1

    def source(self) -> str:
        head = "i, j = gk.tid()" if self.ndim == 2 else "i = gk.tid()"
        flat = "i * w.shape[1] + j" if self.ndim == 2 else "i"
        self.emit(1, head, [f"t = {flat}"])
        self.emit(1, "ii = i + 2")
        self.emit(1, "wv = w[i, j]" if self.ndim == 2 else "wv = w[i]")
        self.block(1, int(self.rng.integers(2, 6)))
        twin = [f"def {self.name}_twin(x, y, w, idx, m, cnt, mom):", *self.twin[0:]]
        self.twin_source = "\n".join(twin) + "\n"
        return "\n".join([f"def {self.name}(x, y, w, idx, m):", *self.lines]) + "\n"


def _arguments(rng, g: _Generator):
    n0 = int(rng.choice([1, 2, 3, 5, 17, 40]))
    dim = (n0, int(rng.choice([1, 3, 4]))) if g.ndim == 2 else (n0,)
    nx = max(dim) + 3
    w = rng.integers(-8, 9, dim).astype(np.float64) / 4
    idx = rng.integers(0, nx, n0)
    if rng.random() < 0.5:
        idx = np.sort(idx)  # sorted indices, as sensors are: few spills
    x = rng.integers(-4, 5, nx).astype(np.float64)
    y = rng.integers(-4, 5, (nx, 5)).astype(np.float64) / 2
    return dim, [x, y, w, idx, int(rng.integers(0, nx))]


def _forms(source: str) -> tuple[dict[str, int], dict[str, int]]:
    """From a printed module: the owned targets and their row offsets, the spilled ones and their bounds."""
    owned = {a: int(f"{sign}{c}" if c else "0") for a, sign, c in
             re.findall(r"\n +(\w+)\[_gkb_t0(?: ([+-]) (\d+))?\] \+= _gkb_row_\1\n", source)}
    spilled = {a: int(k) for a, k in re.findall(r"_gkb_cap_(\w+) = (\d+) \*", source)}
    return owned, spilled


def _check(stats: dict, rng, g: _Generator, module, monkeypatch) -> None:
    kernel, twin = getattr(module, g.name), getattr(module, f"{g.name}_twin")
    dim, args = _arguments(rng, g)
    want = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    gk.launch(kernel, dim, *want, backend="interp")
    threads = int(np.prod(dim))
    cnt, mom = np.zeros((threads, 2)), np.zeros(3)
    gk.launch(twin, dim, *[a.copy() if isinstance(a, np.ndarray) else a for a in args], cnt, mom, backend="interp")
    owned, spilled = _forms(gk.inspect(kernel, *args, dim=dim).source)
    stats["owned"] += bool(owned)
    stats["spilled"] += bool(spilled)
    for a, bound in spilled.items():  # the bound sizes the lists: no thread may add more
        assert cnt[:, 0 if a == "x" else 1].max(initial=0) <= bound, (a, bound, g.source())
    if "x" in owned:  # every add to x at tid[0] + c
        c = owned["x"]
        assert mom[1] == c * mom[0] and mom[2] == c * c * mom[0], (c, mom, g.source())
    for chunks in (2, 3, dim[0]):
        for ratio in (0.0, float("inf")):
            monkeypatch.setattr(numba_plan, "private_chunks",
                                lambda copy_bytes, n0, mixed=False, width=0, c=chunks: min(c, n0))
            monkeypatch.setattr(numba_plan, "SPARSE_RATIO", ratio)
            got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
            gk.launch(kernel, dim, *got)
            for x, y, name in zip(got[:2], want[:2], "xy"):
                np.testing.assert_array_equal(x, y, err_msg=f"{name}, {chunks} chunks, ratio {ratio}\n{g.source()}")


def test_atomic_forms_add_what_the_serial_threads_add(tmp_path, monkeypatch):
    monkeypatch.setattr(numba_cpu, "SERIAL_THREADS", 0)
    rng = np.random.default_rng(SEED)
    gens = [_Generator(rng, f"atomics_{SEED}_{n}") for n in range(N_KERNELS)]
    sources = []
    for g in gens:
        sources += [g.source(), g.twin_source]
    module = load_kernels(str(tmp_path / f"atomics_module_{SEED}.py"), sources)
    stats = {"owned": 0, "spilled": 0}
    for g in gens:
        _check(stats, rng, g, module, monkeypatch)
    assert stats["owned"] >= 1 and stats["spilled"] >= 1, stats
