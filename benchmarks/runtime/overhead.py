"""Per-call overhead of a tiny launch: what gradkern adds around a kernel that does almost nothing.

An 8-element float64 saxpy (`gradkern.kernels.saxpy`, `y = a*x + y` in place) timed as

* `gk.launch(saxpy, 8, a, x, y)`;
* `gk.autodiff(saxpy, gk.Active(a), gk.Duplicated(x, dx), gk.Duplicated(y, dy))` (reverse mode);
* `gk.autodiff(saxpy, gk.Duplicated(a, 1.0), gk.Duplicated(x, tx), gk.Duplicated(y, ty), mode=gk.Forward)`;
* the bare call of an equivalent hand-written `@numba.njit` function (serial loop), the floor;
* a program of --steps launches of that saxpy (ping-pong between x and y, `a` Active), per launch:
  recorded (`autodiff_thunk`'s forward: each launch validated and run as its augmented primal), and
  recorded then reversed (forward + reverse sweep): the sweep runs what the recording prepared and
  validates nothing, so the difference of the two rows is its per-launch cost.

Every call validates its arguments as a first call would (nothing is skipped because the arrays are the
same objects); the arrays are not reset between calls (their values do not change the work). Each round
times a batch of --calls calls of every version, the versions interleaved and their order rotated per
round; the table gives the median over --rounds rounds of the time per call.
Goals (idle machine): gk.launch <= 10 us, gk.autodiff <= 40 us. On a shared machine, `--clock cpu` times
the process's CPU time (time.process_time) instead of the wall clock: a batch another process preempts is
not charged for the wait.

    python benchmarks/runtime/overhead.py             # print the table
    python benchmarks/runtime/overhead.py --profile   # and the top of a cProfile of each gradkern version
    python benchmarks/runtime/overhead.py --write     # also write its section of benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (benchpath.py)
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path
from report import run_lines, write_section
from timing import interleaved, load_average, machine, medians

import gradkern as gk
from gradkern.kernels import saxpy

SECTION = "## overhead.py"
GOALS_US = {"gk.launch": 10.0, "gk.autodiff (Reverse, a Active)": 40.0}
N = 8
A = 1.5


@numba.njit
def hand_saxpy(a, x, y):
    for i in range(x.shape[0]):
        y[i] = a * x[i] + y[i]


def ping_pong(a, x, y, steps):
    """A program of `steps` saxpy launches, alternating which array is updated."""
    for t in range(steps):
        if t % 2:
            gk.launch(saxpy, N, a, y, x)
        else:
            gk.launch(saxpy, N, a, x, y)


def versions(steps: int = 0) -> dict[str, Callable[[], object]]:
    """The timed callables by name; each program version is called with per-launch division (PER)."""
    rng = np.random.default_rng(0)
    x, y = rng.random(N), rng.random(N)
    dx, dy = np.zeros(N), rng.uniform(-1, 1, N)
    tx, ty = rng.uniform(-1, 1, N), np.zeros(N)
    out = {
        "numba.njit (hand-written, serial)": lambda: hand_saxpy(A, x, y),
        "gk.launch": lambda: gk.launch(saxpy, N, A, x, y),
        "gk.autodiff (Reverse, a Active)": lambda: gk.autodiff(saxpy, gk.Active(A), gk.Duplicated(x, dx),
                                                                gk.Duplicated(y, dy)),
        "gk.autodiff (Forward)": lambda: gk.autodiff(saxpy, gk.Duplicated(A, 1.0), gk.Duplicated(x, tx),
                                                     gk.Duplicated(y, ty), mode=gk.Forward),
    }
    if steps:
        fwd, rev = gk.autodiff_thunk(ping_pong, gk.Active, gk.Duplicated, gk.Duplicated, gk.Const)
        px, py, pdx, pdy = rng.random(N), rng.random(N), np.zeros(N), rng.uniform(-1, 1, N)

        def program_args():
            return gk.Active(0.5), gk.Duplicated(px, pdx), gk.Duplicated(py, pdy), steps
        out[PROGRAM_RECORD] = lambda: fwd(*program_args())
        out[PROGRAM_SWEEP] = lambda: rev(*program_args(), fwd(*program_args()))
        PER[PROGRAM_RECORD] = PER[PROGRAM_SWEEP] = steps
    return out


PROGRAM_RECORD = "program: record, per launch"
PROGRAM_SWEEP = "program: record + reverse sweep, per launch"
PER: dict[str, int] = {}  # calls of a version that count as this many launches


def measure(fns: dict[str, Callable[[], object]], rounds: int, calls: int,
            clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Median over `rounds` of the per-call time (µs) of a batch of `calls` calls, versions interleaved
    (a program version's calls are fewer, its time per launch)."""
    for fn in fns.values():  # warm-up: compile, fill the caches
        for _ in range(20):
            fn()

    def batch(name: str, fn: Callable[[], object]) -> Callable[[], float]:
        n = max(1, calls // PER.get(name, 1))

        def timer() -> float:
            t0 = clock()
            for _ in range(n):
                fn()
            return (clock() - t0) / (n * PER.get(name, 1)) * 1e6
        return timer

    return medians(interleaved({name: batch(name, fn) for name, fn in fns.items()}, rounds))


def table(us: dict[str, float]) -> str:
    floor = us["numba.njit (hand-written, serial)"]
    lines = ["| version | µs per call | / bare njit | goal |", "|---|---|---|---|"]
    for name, t in us.items():
        goal = GOALS_US.get(name)
        verdict = "" if goal is None else f"<= {goal:g} µs: {'ok' if t <= goal else 'MISSED'}"
        lines.append(f"| {name} | {t:.1f} | {t / floor:.0f}x | {verdict} |")
    return "\n".join(lines)


def profile(fns: dict[str, Callable[[], object]], calls: int, top: int = 15) -> None:
    for name, fn in fns.items():
        if name.startswith("numba"):
            continue
        n = max(1, calls // PER.get(name, 1))
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(n):
            fn()
        pr.disable()
        print(f"\n### cProfile of {n} calls: {name} (sorted by own time)")
        pstats.Stats(pr, stream=sys.stdout).sort_stats("tottime").print_stats(top)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=31, help="interleaved rounds (default 31)")
    p.add_argument("--calls", type=int, default=200, help="calls per version per round (default 200)")
    p.add_argument("--steps", type=int, default=20, help="launches of the program rows (default 20; 0: none)")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="time the wall clock (default) or the process's CPU time (a shared machine)")
    p.add_argument("--profile", action="store_true", help="print a cProfile of each gradkern version")
    p.add_argument("--write", action="store_true", help="write the table to benchmarks/RESULTS.md")
    args = p.parse_args(argv)
    load_start = load_average()
    if load_start > 0.5:
        print(f"warning: 1-minute load average is {load_start:.2f}; other processes disturb the timings",
              file=sys.stderr)
    fns = versions(args.steps)
    us = measure(fns, args.rounds, args.calls, time.perf_counter if args.clock == "wall" else time.process_time)
    load_end = load_average()
    text = "\n".join([
        SECTION, "",
        f"Per-call overhead, 8-element float64 saxpy, every argument validated on every call; median over "
        f"{args.rounds} interleaved rounds of {args.calls} calls (program rows: launches) each, "
        f"{'wall-clock' if args.clock == 'wall' else 'process CPU'} time. The floor is the bare call of a "
        f"hand-written serial `numba.njit` saxpy; the program rows run {args.steps} launches per call. "
        f"1-minute load average at start {load_start:.2f}, at end "
        f"{load_end:.2f}; Numba threads: {numba.get_num_threads()}.", "",
        *run_lines(shlex.join(["python", os.path.relpath(sys.argv[0]),
                               *(argv if argv is not None else sys.argv[1:])])), "",
        table(us), ""])
    print(f"CPU: {machine()}")
    print(table(us))
    print(f"1-minute load average: start {load_start:.2f}, end {load_end:.2f}")
    if args.profile:
        profile(fns, 2000)
    if args.write:
        write_section(text, SECTION)
        print("wrote benchmarks/RESULTS.md")


if __name__ == "__main__":
    main()
