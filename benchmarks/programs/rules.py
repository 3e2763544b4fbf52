"""A custom rule in a program's time loop (issue 17, docs/custom-rules.md): the gradient
of an implicit (backward-Euler) heat loop whose every step is a call of
`gradkern.kernels.tridiagonal_solve`.

The problem: u_t = kappa u_xx with fixed ends, T steps of
(I - r L) u_new = u_old, r = kappa dt / h^2, on m independent rods of n points
((n, m) arrays, one system per column; the CPU default is one rod of
N = 10^6 points). The loss is L = <w, u_T> for a fixed random w; the gradient
is dL/du0 and dL/dkappa. Variants, timed in one process, interleaved, median
of --runs after a warm-up:

* primal: the loop program called plainly (T solves, no derivative);
* gradkern: `gk.autodiff` of the loop program, u0 Duplicated (its shadow
  seeded with w) and kappa Active: host arithmetic gives r, a kernel launch
  builds the bands a, b, c from r, then T rule calls solve in place. The rule's
  reverse solves A^T lambda = u-bar with the same Thomas kernel and
  accumulates -lambda x into the internal shadows of a, b, c, whose kernel's
  reverse sums them into dr;
* hand-written adjoint: the forward solves into a (T, n, m) buffer (the T
  states the reverse reads), the reverse does T transposed solves
  lambda = A^{-T} lambda in place with the same Thomas kernel (`thomas` of
  gradkern.kernels.tridiagonal, launched directly) and accumulates
  dr += sum_interior lambda (L x_t) (a Numba `prange` reduction; CuPy: a
  ReductionKernel); dkappa = dr dt / h^2.

Both gradients are checked to agree (relative 1e-10) before timing. Memory:
what each keeps for its reverse (gradkern: the program tape's bytes, from
`gk.autodiff_thunk`'s forward; hand-written: its stored states), and on the
CPU the peak of NumPy allocations during one call (tracemalloc), inputs
excluded. `--profile` prints where a gk.autodiff call's time goes (cProfile).

    python benchmarks/programs/rules.py                 # CPU: N = 10**6, T = 100
    python benchmarks/programs/rules.py --quick         # small, a smoke test
    python benchmarks/programs/rules.py --write         # and write RESULTS.md
    python benchmarks/programs/rules.py --gpu           # CuPy: 2**24 unknowns, 16384 rods of 1024 points, T = 100
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (benchpath.py)
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path
from programs import peak_memory
from report import publish, run_lines
from timing import interleaved, medians, timed

import gradkern as gk
from gradkern.kernels import implicit_heat_rows_batched, tridiagonal_solve
from gradkern.kernels.tridiagonal import thomas

KAPPA = 1.0


def array_module(x):
    """numpy, or cupy for a CuPy array (imported only then)."""
    if isinstance(x, np.ndarray):
        return np
    import cupy
    return cupy


def implicit_heat(u, kappa, dt, h, steps):
    """The program: `steps` backward-Euler steps of the (n, m) state u, in place."""
    xp = array_module(u)
    a, b, c = (xp.empty_like(u) for _ in range(3))
    gk.launch(implicit_heat_rows_batched, u.shape, a, b, c, kappa * dt / h**2)
    for _ in range(steps):
        tridiagonal_solve(a, b, c, u, u)


# -- hand-written adjoint --------------------------------------------------------------------------------------------


@numba.njit(parallel=True, cache=True)
def _stencil_dot(lam, x):
    """sum over interior rows i and columns j of lam[i, j] (x[i-1, j] - 2 x[i, j] + x[i+1, j])."""
    n, m = x.shape
    s = 0.0
    for i in numba.prange(1, n - 1):
        for j in range(m):
            s += lam[i, j] * (x[i - 1, j] - 2.0 * x[i, j] + x[i + 1, j])
    return s


def stencil_dot(xp):
    """_stencil_dot for NumPy arrays; for CuPy ones a reduction kernel, its sum left on the device."""
    if xp is np:
        return _stencil_dot
    dot = xp.ReductionKernel("T lam, T xm, T x0, T xq", "T s", "lam * (xm - 2 * x0 + xq)", "a + b", "s = a", "0",
                             "stencil_dot")
    return lambda lam, x: dot(lam[1:-1], x[:-2], x[1:-1], x[2:])


class HandAdjoint:
    """A hand-written store-all adjoint of the loop. Its buffers are allocated once and reused by every
    gradient, as an optimisation loop would: the bands, the T states u_1 .. u_T (what the reverse reads) in
    one (T, n, m) buffer, the Thomas scratch and lambda."""

    def __init__(self, shape: tuple, steps: int, xp):
        self.bands = tuple(xp.empty(shape) for _ in range(3))
        self.states, self.scratch, self.lam = xp.empty((steps, *shape)), xp.empty(shape), xp.empty(shape)
        self.dot = stencil_dot(xp)

    @property
    def nbytes(self) -> int:
        return sum(x.nbytes for x in (*self.bands, self.states, self.scratch, self.lam))

    def gradient(self, u0, w, kappa, dt, h):
        """(dL/du0, dL/dkappa) for L = <w, u_T>; dL/du0 is this object's lambda buffer."""
        a, b, c = self.bands
        r = kappa * dt / h**2
        for band, end, inside in zip(self.bands, (0.0, 1.0, 0.0), (-r, 1.0 + 2.0 * r, -r)):
            band[...] = inside
            band[0], band[-1] = end, end
        m, states, scratch = u0.shape[1], self.states, self.scratch
        previous = u0
        for t in range(states.shape[0]):
            gk.launch(thomas, m, a[1:], b, c[:-1], previous, states[t], scratch)
            previous = states[t]
        lam, dr = self.lam, 0.0
        lam[...] = w
        for t in range(states.shape[0] - 1, -1, -1):
            gk.launch(thomas, m, c[:-1], b, a[1:], lam, lam, scratch)  # A^T: off-diagonals swapped
            dr += self.dot(lam, states[t])  # d(A^{-1} d)/dr = A^{-1} L x: dr += <lambda, L x_t>
        return lam, float(dr) * dt / h**2


# -- the variants ----------------------------------------------------------------------------------------------------


class Problem:
    def __init__(self, n: int, m: int, steps: int, xp):
        self.n, self.m, self.steps, self.xp = n, m, steps, xp
        self.h = 1.0 / (n - 1)
        self.dt = self.h**2  # r = 1 at kappa = 1
        rng = np.random.default_rng(0)
        self.u0 = xp.asarray(rng.uniform(-1.0, 1.0, (n, m)))
        self.w = xp.asarray(rng.uniform(-1.0, 1.0, (n, m)))
        self.adjoint = HandAdjoint((n, m), steps, xp)

    def sync(self):
        if self.xp is not np:
            self.xp.cuda.Device().synchronize()

    def primal(self):
        u = self.u0.copy()
        implicit_heat(u, KAPPA, self.dt, self.h, self.steps)
        self.sync()
        return u

    def gradkern_args(self):
        return (gk.Duplicated(self.u0.copy(), self.w.copy()), gk.Active(KAPPA), gk.Const(self.dt), gk.Const(self.h),
                gk.Const(self.steps))

    def gradkern(self):
        args = self.gradkern_args()
        grads = gk.autodiff(implicit_heat, *args)
        self.sync()
        return args[0].dval, grads[1]

    def hand(self):
        du, dkappa = self.adjoint.gradient(self.u0, self.w, KAPPA, self.dt, self.h)
        self.sync()
        return du, dkappa

    def tape_bytes(self) -> dict:
        """What gradkern's reverse holds, from the program tape of a split forward (the reverse then run)."""
        fwd, rev = gk.autodiff_thunk(implicit_heat, gk.Duplicated, gk.Active, gk.Const, gk.Const, gk.Const)
        args = self.gradkern_args()
        tape = fwd(*args)
        got = {"bytes": tape.bytes, "saved": tape.saved_bytes, "kernel tapes": tape.kernel_tape_bytes,
               "internal shadows": tape.shadows.internal_bytes}
        rev(*args, tape)
        return got


def relative(got, ref) -> float:
    """|got - ref| / |ref| for numbers, in the 2-norm for (NumPy or CuPy) arrays."""
    if isinstance(ref, float):
        return abs(got - ref) / abs(ref)
    xp = array_module(ref)
    return float(xp.linalg.norm(got - ref) / xp.linalg.norm(ref))


# Where a call's time goes: a function's own time (cProfile's tottime) by the first group whose test it passes.
# The compiled kernels are functions of the generated modules, named after the kernel.
GROUPS = (
    ("Thomas solves (`thomas`)", lambda fn: fn.startswith("thomas")),
    ("band shadows, da/db/dc -= lambda x (`multiply_subtract`)", lambda fn: fn.startswith("multiply_subtract")),
    ("bands kernel (`implicit_heat_rows_batched`, its reverse)",
     lambda fn: fn.startswith("implicit_heat_rows_batched")),
    ("dkappa reduction (`_stencil_dot`)", lambda fn: fn == "_stencil_dot"),
    ("copy-on-write saves, restores, copies",
     lambda fn: fn in ("restore", "<method 'copy' of 'numpy.ndarray' objects>")),
)
OTHER = "the rest: Python (recording, launch validation, rule bookkeeping), allocations"


def profiled(f):
    pr = cProfile.Profile()
    pr.enable()
    f()
    pr.disable()
    return pstats.Stats(pr, stream=io.StringIO())


def breakdown(stats) -> dict[str, tuple[float, int]]:
    """(seconds, calls) per group of one profiled call; the rest is everything else."""
    total = stats.total_tt
    got = {name: [0.0, 0] for name, _ in GROUPS}
    for (_, _, fn), (_, calls, tottime, _, _) in stats.stats.items():
        for name, test in GROUPS:
            if test(fn):
                got[name][0] += tottime
                got[name][1] += calls
                break
    got[OTHER] = [total - sum(t for t, _ in got.values()), 0]
    return {name: (t, c) for name, (t, c) in got.items()}


def breakdown_rows(parts: dict[str, dict]) -> list[str]:
    """A table: one column per profiled method, one row per group with time in it."""
    names = list(parts)
    groups = [g for g in (*(g for g, _ in GROUPS), OTHER) if any(parts[m][g][0] > 0 for m in names)]
    rows = ["| where (one call, cProfile) | " + " | ".join(f"{m}: s (calls)" for m in names) + " |",
            "|---|" + "---:|" * len(names)]
    for g in groups:
        cells = [f"{parts[m][g][0]:.3f}" + (f" ({parts[m][g][1]})" if parts[m][g][1] else "") for m in names]
        rows.append(f"| {g} | " + " | ".join(cells) + " |")
    rows.append("| total | " + " | ".join(f"{sum(t for t, _ in parts[m].values()):.3f}" for m in names) + " |")
    return rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=None, help="points per rod (default 10**6; --gpu: 1024)")
    p.add_argument("--m", type=int, default=None, help="rods, one system each (default 1; --gpu: 16384)")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--gpu", action="store_true", help="CuPy arrays, the generated CUDA kernels")
    p.add_argument("--profile", action="store_true", help="also print cProfile of one gk.autodiff call")
    p.add_argument("--write", action="store_true")
    args = p.parse_args()
    if args.gpu:
        import cupy as xp
        n, m = args.n or 1024, args.m or 16384
    else:
        xp = np
        n, m = args.n or 1_000_000, args.m or 1
    if args.quick:
        n, m, args.steps, args.runs = 1000, 4, 10, 2
    prob = Problem(n, m, args.steps, xp)

    ref_du, ref_dk = prob.hand()  # warm-up (compiles) and the check
    ref_du = ref_du.copy()
    du, dk = prob.gradkern()
    err_du, err_dk = relative(du, ref_du), relative(dk, ref_dk)
    print(f"gradkern vs hand-written: dL/du0 relative difference {err_du:.1e}, dL/dkappa {err_dk:.1e} "
          f"({dk:.12e} vs {ref_dk:.12e})")
    assert err_du <= 1e-10 and err_dk <= 1e-10, (err_du, err_dk)
    prob.primal()

    names = {"primal": "primal: the loop program called plainly",
             "gradkern": "gradkern: `gk.autodiff` of the program",
             "hand": "hand-written adjoint (same Thomas kernel)"}
    methods = {"primal": prob.primal, "gradkern": prob.gradkern, "hand": prob.hand}
    med = medians(interleaved({key: timed(f) for key, f in methods.items()}, args.runs, rotate=False))
    ratio = med["gradkern"] / med["hand"]

    # on the GPU, kernels run asynchronously: cProfile would see only their launches
    parts = {"gradkern": breakdown(profiled(prob.gradkern)), "hand-written": breakdown(profiled(prob.hand))} \
        if xp is np else None
    tape = prob.tape_bytes()
    state = n * m * 8
    stored = args.steps * state  # the hand-written adjoint's (T, n, m) states
    keeps = {"gradkern": tape["bytes"], "hand": stored}
    # the hand-written adjoint's buffers were allocated before the call: counted in
    peaks = {key: peak_memory(f) + (prob.adjoint.nbytes if key == "hand" else 0) for key, f in methods.items()} \
        if xp is np else None
    rows = []
    for key in methods:
        kept = f"{keeps[key] / 1e6:.1f} ({keeps[key] / state:.1f})" if key in keeps else ""
        peak = f"{peaks[key] / 1e6:.1f}" if peaks else "n/a"
        rows.append(f"| {names[key]} | {med[key]:.3f} | {med[key] / med['hand']:.2f} | "
                    f"{med[key] / med['primal']:.2f} | {kept} | {peak} |")
    device = "GPU (CuPy)" if xp is not np else f"CPU, {numba.get_num_threads()} Numba threads"
    text = "\n".join([
        "## rules.py", "",
        "A custom rule in a program's time loop (issue 17): the gradient of the implicit (backward-Euler) heat loop "
        "u_t = kappa u_xx, fixed ends, T steps of (I - r L) u_new = u_old, each a `gradkern.kernels."
        "tridiagonal_solve` call (Thomas algorithm, one system per column), w.r.t. the initial state and kappa "
        "(Active; r = kappa dt / h^2 by host arithmetic, the bands built by a kernel), loss <w, u_T>; float64. "
        "Hand-written adjoint: the T states stored in one buffer allocated once (as an optimisation loop would "
        "reuse it), T transposed solves with the same Thomas kernel plus a `prange` reduction for dkappa. Median "
        f"of {args.runs} interleaved runs after a warm-up. \"Keeps\": what the reverse holds (gradkern: the program "
        "tape's `bytes`; hand-written: its stored states), in MB and in states of n x m x 8 bytes. Peak: NumPy "
        "allocations during one call (tracemalloc), inputs excluded, the hand-written adjoint's buffers included.",
        "",
        *run_lines(f"python benchmarks/programs/rules.py{' --gpu' if args.gpu else ''}"
                   f"{' --write' if args.write else ''}"),
        f"* {device}; n = {n:,} points x m = {m:,} rods, T = {args.steps}; gradients: gradkern vs hand-written "
        f"relative difference {err_du:.1e} (dL/du0), {err_dk:.1e} (dL/dkappa)",
        f"* gradkern's tape: {tape['saved'] / 1e6:.1f} MB saved states, {tape['kernel tapes'] / 1e6:.1f} MB kernel "
        f"tapes, {tape['internal shadows'] / 1e6:.1f} MB internal shadows (of a, b, c)", "",
        "| method | time (s) | vs hand-written | vs primal | keeps, MB (states) | peak memory (MB) |",
        "|---|---:|---:|---:|---:|---:|", *rows, "",
        f"gradkern / hand-written: {ratio:.2f}x (goal <= 1.2x: {'met' if ratio <= 1.2 else 'MISSED'}); "
        f"memory kept: {tape['bytes'] / stored:.2f}x the hand-written adjoint's.", "",
        *(["Where the time goes (one more call of each, under cProfile: a function's own time, grouped):", "",
           *breakdown_rows(parts), ""] if parts else [])])
    publish(text, "## rules.py", args.write)
    if args.profile:
        stats = profiled(prob.gradkern)
        stats.stream = sys.stdout
        stats.strip_dirs().sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
