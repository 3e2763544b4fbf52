"""Gradients whose atomically updated shadow is also read and stored plainly ("mixed"), on the CPU:
the parallel launch (issue 18, item 5: backends/numba_plan.py's MixedPlan) against the serial loop the CPU
backend ran before it, in one process.

Kernels: one colour of a red-black Gauss-Seidel sweep (in place; du[i, j] read and zeroed by its owner,
du of the four neighbours accumulated atomically: rows i - 1, i, i + 1, so straight into du, the chunks
in two phases), LU's rank-1 update below pivot k (dA[i, j] read and zeroed by its owner, dA[i, k] added
straight, the pivot row dA[k, j] into per-slot copies kept between launches), both float64 on n x n (the
n-body force gradient written with gk.vec3 is not mixed: its position shadow only takes atomic adds, and
it always ran in parallel). "serial (before)" compiles the same kernel with the pipeline's generate stage
forced to parallel=False for kernels with mixed atomic targets, as the code before this change did (and
as the default did until GRADKERN_MIXED_PRIVATE_BYTES defaulted to 0); "default" is what gradkern does
now; "serial path" runs the parallel entry's own serial branch (`_gkb_chunks` = 0, no chunks). Each timed
call is `gk.autodiff` (argument validation and the race check included) from the same saved state,
reset outside the timed region; median of --runs interleaved runs after a warm-up call each. The
versions' shadows are checked equal (rtol 1e-12) first: sums in another order only.

    python benchmarks/kernels/mixed_cpu.py [--n 2048] [--runs 11]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (benchpath.py)
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path
from timing import interleaved, load_average, medians

import gradkern as gk
from gradkern import pipeline
from gradkern.backends import numba_plan
from gradkern.ir import nodes as ir


def red_black_sweep(u, f, colour, h2):
    i, j = gk.tid()
    if 0 < i < u.shape[0] - 1 and 0 < j < u.shape[1] - 1 and (i + j) % 2 == colour:
        u[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] + h2 * f[i, j])


def lu_update(A, k):
    i, j = gk.tid()
    if i > k and j > k:
        A[i, j] -= A[i, k] * A[k, j] / A[k, k]



@contextlib.contextmanager
def serial_when_mixed():
    """Generate as before issue 18.5: a kernel with an atomic target also accessed plainly runs serially."""
    real = pipeline._generate

    def old(request, typed, role, parallel=True, strided=frozenset()):
        stmts = list(ir.walk_stmts(typed.body))
        atomic = {s.array for s in stmts if isinstance(s, ir.AtomicAdd)}
        plain = {s.array for s in stmts if isinstance(s, ir.Store)} | \
            {e.array for e in ir.all_exprs(typed.body) if isinstance(e, ir.Load)}
        return real(request, typed, role, parallel and not (atomic & plain), strided)

    pipeline._generate = old
    try:
        yield
    finally:
        pipeline._generate = real


@contextlib.contextmanager
def serial_path(on: bool):
    """With `on`, privatised launches take their entry's serial branch (no chunks)."""
    real = numba_plan.private_chunks
    if on:
        numba_plan.private_chunks = lambda *args, **kwargs: 0
    try:
        yield
    finally:
        numba_plan.private_chunks = real


def timer(kernel, state: tuple, annotate, dim, serial: bool):
    """Seconds of one `gk.autodiff` from a copy of `state` (copied untimed), on the serial path if `serial`."""
    def run() -> float:
        with serial_path(serial):
            work = [a.copy() for a in state]
            t = time.perf_counter()
            gk.autodiff(kernel, *annotate(work), dim=dim)
            return time.perf_counter() - t
    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--runs", type=int, default=11)
    args = ap.parse_args()
    n = args.n
    rng = np.random.default_rng(0)
    A0 = rng.uniform(-1, 1, (n, n)) + n * np.eye(n)
    cases = [
        ("red_black_sweep", red_black_sweep, (n, n),
         lambda: (rng.uniform(0.5, 1.5, (n, n)), rng.uniform(-1, 1, (n, n)), rng.uniform(-1, 1, (n, n))),
         lambda s: (gk.Duplicated(s[0], s[2]), gk.Const(s[1]), 1, 0.25)),
        ("lu_update", lu_update, (n, n), lambda: (A0.copy(), rng.uniform(-1, 1, (n, n))),
         lambda s: (gk.Duplicated(s[0], s[1]), n // 4)),
    ]
    print(f"Numba threads {numba.get_num_threads()}, load at start {load_average():.2f}")
    for name, fn, dim, make, annotate in cases:
        state = make()
        versions = {}
        for label in ("serial", "default"):
            k = gk.kernel(fn)  # a kernel object of its own: its specialisations are cached on it
            with serial_when_mixed() if label == "serial" else contextlib.nullcontext():
                ins = gk.inspect(k, *annotate(state), dim=dim, mode=gk.Reverse)
                work = [a.copy() for a in state]
                gk.autodiff(k, *annotate(work), dim=dim)  # compiles (the serial one under the old rule)
            versions[label] = (k, work, ins.parallel)
        s, p = versions["serial"][1], versions["default"][1]
        for a, b in zip(s, p):
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12 * np.abs(a).max())
        assert not versions["serial"][2] and versions["default"][2]
        kernels = {"serial": versions["serial"][0], "default": versions["default"][0],
                   "serial path": versions["default"][0]}
        timers = {label: timer(k, state, annotate, dim, label == "serial path") for label, k in kernels.items()}
        ms = {label: 1e3 * t for label, t in medians(interleaved(timers, args.runs, rotate=False)).items()}
        size = "x".join(map(str, dim)) if isinstance(dim, tuple) else str(dim)
        print(f"{name} {size}: serial (before) {ms['serial']:.2f} ms, default {ms['default']:.2f} ms "
              f"(before / default {ms['serial'] / ms['default']:.2f}x), serial path {ms['serial path']:.2f} ms, "
              f"load {load_average():.2f}")
    print(f"load at end {load_average():.2f}")


if __name__ == "__main__":
    main()
