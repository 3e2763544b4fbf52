"""Serial twins of kernels whose thread body loops (docs/performance.md#parallel-or-serial-by-measurement):
PolyBench's seidel-2d as one thread's loop (`dim = 1`, Gauss-Seidel in place over an n x n array), launched
through `gk.launch` (as shipped), its parallel entry and its serial twin, beside a hand-written `numba.njit`
loop; then a Jacobi sweep over the rows of an n x n array split among `dim = 2` threads (each thread's loop
over half the rows), short and long, parallel entry against serial twin: whether "fewer threads than Numba
runs" would be right for loop bodies too. Interleaved rounds, medians, at Numba's thread count (run with
NUMBA_NUM_THREADS=2 to see the parallel region's cost).

    NUMBA_NUM_THREADS=2 python benchmarks/kernels/serial_loops.py [--runs 30] [--write]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (benchpath.py)
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path
from report import publish, run_lines
from timing import interleaved, timed

import gradkern as gk
from gradkern.backends import numba_cpu


@gk.kernel
def seidel_2d(A):
    """One Gauss-Seidel sweep of PolyBench's seidel-2d, in place, by one thread."""
    t = gk.tid()  # noqa: F841  one thread
    for i in range(1, A.shape[0] - 1):
        for j in range(1, A.shape[1] - 1):
            A[i, j] = (A[i - 1, j - 1] + A[i - 1, j] + A[i - 1, j + 1] + A[i, j - 1] + A[i, j] + A[i, j + 1]
                       + A[i + 1, j - 1] + A[i + 1, j] + A[i + 1, j + 1]) / 9.0


@gk.kernel
def jacobi_rows(u, v, rows):
    """Thread t smooths `rows` rows of u into v, from row 1 + t * rows (u's first and last rows untouched)."""
    t = gk.tid()
    for i in range(1 + t * rows, 1 + (t + 1) * rows):
        for j in range(1, u.shape[1] - 1):
            v[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1])


@numba.njit(cache=True)
def _seidel_hand(A):
    for i in range(1, A.shape[0] - 1):
        for j in range(1, A.shape[1] - 1):
            A[i, j] = (A[i - 1, j - 1] + A[i - 1, j] + A[i - 1, j + 1] + A[i, j - 1] + A[i, j] + A[i, j + 1]
                       + A[i + 1, j - 1] + A[i + 1, j] + A[i + 1, j + 1]) / 9.0


def _forced(fn, serial: bool | None):
    """fn with the twins as shipped (None), always (True: both thresholds past any launch) or never (False)."""
    names = ("SERIAL_THREADS", "LOOP_SERIAL_THREADS")

    def run():
        old = {n: getattr(numba_cpu, n) for n in names}
        if serial is not None:
            for n in names:
                setattr(numba_cpu, n, 1 << 62 if serial else 0)
        try:
            fn()
        finally:
            for n, v in old.items():
                setattr(numba_cpu, n, v)
    return run


def _table(ways: dict, runs: int) -> dict[str, float]:
    for _ in range(3):
        for f in ways.values():
            f()
    times = interleaved({k: timed(f) for k, f in ways.items()}, runs)
    return {k: statistics.median(t) * 1e6 for k, t in times.items()}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--write", action="store_true")
    args = p.parse_args()
    lines = ["| case | hand njit (us) | gk as shipped (us) | gk parallel entry (us) | gk serial twin (us) |",
             "|---|---:|---:|---:|---:|"]
    for n in (16, 128):
        A = np.random.default_rng(0).uniform(size=(n, n))
        launch = lambda A=A: gk.launch(seidel_2d, 1, A)  # noqa: E731
        us = _table({"hand": lambda A=A: _seidel_hand(A), "shipped": _forced(launch, None),
                     "parallel": _forced(launch, False), "twin": _forced(launch, True)}, args.runs)
        lines.append(f"| seidel-2d {n}x{n}, dim = 1 | " + " | ".join(f"{us[k]:.1f}" for k in us) + " |")
    for n in (16, 512):
        u, v = np.random.default_rng(1).uniform(size=(n, n)), np.zeros((n, n))
        rows = (n - 2) // 2
        launch = lambda u=u, v=v, rows=rows: gk.launch(jacobi_rows, 2, u, v, rows)  # noqa: E731
        us = _table({"shipped": _forced(launch, None), "parallel": _forced(launch, False),
                     "twin": _forced(launch, True)}, args.runs)
        lines.append(f"| jacobi rows {n}x{n}, dim = 2 | — | " + " | ".join(f"{us[k]:.1f}" for k in us) + " |")
    text = "\n".join(["## serial_loops.py", "",
                      f"Kernels whose thread body loops, launched on 1 or 2 threads (module doc), median of {args.runs}"
                      f" interleaved rounds; Numba threads: {numba.get_num_threads()}.", "",
                      *run_lines(f"python benchmarks/kernels/serial_loops.py{' --write' if args.write else ''}"),
                      "", *lines, ""])
    publish(text, "## serial_loops.py", args.write)


if __name__ == "__main__":
    main()
