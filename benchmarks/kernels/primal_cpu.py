"""Primal CPU speed: gradkern's generated Numba against hand-written Numba.

For saxpy, one 1-D Allen-Cahn step and the 2-D 5-point Laplacian, both versions
are compiled (warm-up), checked to agree, then timed alternately (median of
--runs launches each). The gradkern time is a full `gk.launch` (argument
validation included); the hand-written time is a direct call of the
`@numba.njit(parallel=True)` function. Goal: gradkern <= 1.2x hand-written.

Hand-written versions (what an expert would write):
* saxpy: one `prange` loop.
* allen_cahn_step: the two end points are copied outside the loop, the
  interior is a branch-free `prange(1, n - 1)` loop.
* laplace_2d: `prange` over rows; the first and last rows are zeroed, every
  other row zeroes its two edge points and runs a branch-free inner loop
  over `range(1, n1 - 1)`.
The arithmetic is written in the same order as the gradkern kernels
(including `ui ** 3`), with constants of the arrays' dtype, so both versions
round identically. Both versions run on the same input and output arrays:
on this kind of machine the placement of a 128 MiB buffer alone can move a
kernel's time by tens of per cent.

Traffic model for GB/s: the minimum bytes an ideal kernel moves (saxpy reads
x and y and writes y: 3 arrays; the stencils read u and write the output:
2 arrays), ignoring write-allocate reads and stencil-neighbour reloads.

    python benchmarks/kernels/primal_cpu.py            # full sizes, print the table
    python benchmarks/kernels/primal_cpu.py --quick    # small sizes, smoke test
    python benchmarks/kernels/primal_cpu.py --write    # also write benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (benchpath.py)
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path
from references import saxpy_hand, stencils_hand
from report import RESULTS, git_revision, write_section
from timing import interleaved, load_average, machine, timed

import gradkern as gk
from gradkern.kernels import allen_cahn_step, laplace_2d, saxpy

GOAL = 1.2
SECTION = "## primal_cpu.py"


# ---------------------------------------------------------------- cases


@dataclass
class Case:
    """One benchmark. `hand()` and `gradkern()` each run the kernel once, on the
    same input and output arrays (so both see the same memory placement);
    `reset()` puts `output` back to a state from which a run must rebuild it."""

    name: str
    elements: int
    dtype: np.dtype
    bytes_moved: int
    hand: Callable[[], None]
    gradkern: Callable[[], None]
    output: np.ndarray
    reset: Callable[[], None]


def make_saxpy(n: int, dtype: np.dtype, rng: np.random.Generator) -> Case:
    a = dtype.type(1.5)
    x = rng.random(n).astype(dtype)
    y0 = rng.random(n).astype(dtype)
    y = y0.copy()

    def reset():
        y[:] = y0

    return Case("saxpy", n, dtype, 3 * n * dtype.itemsize,
                lambda: saxpy_hand(a, x, y), lambda: gk.launch(saxpy, n, a, x, y), y, reset)


def make_allen_cahn(n: int, dtype: np.dtype, rng: np.random.Generator) -> Case:
    # the scalars have the arrays' dtype in both versions (gradkern would
    # convert Python floats to float32 for float32 arrays anyway)
    c, dt = dtype.type(0.2), dtype.type(0.01)
    u = rng.random(n).astype(dtype)
    un = np.empty_like(u)
    allen_cahn_hand = stencils_hand(dtype)[0]
    return Case("allen_cahn_step", n, dtype, 2 * n * dtype.itemsize,
                lambda: allen_cahn_hand(u, un, c, dt), lambda: gk.launch(allen_cahn_step, n, u, un, c, dt),
                un, lambda: un.fill(np.nan))


def make_laplace(n: int, dtype: np.dtype, rng: np.random.Generator) -> Case:
    u = rng.random((n, n)).astype(dtype)
    out = np.empty_like(u)
    laplace_hand = stencils_hand(dtype)[1]
    return Case("laplace_2d", n * n, dtype, 2 * n * n * dtype.itemsize,
                lambda: laplace_hand(u, out), lambda: gk.launch(laplace_2d, (n, n), u, out),
                out, lambda: out.fill(np.nan))


# ---------------------------------------------------------------- timing


@dataclass
class Row:
    name: str
    elements: int
    dtype: str
    hand_ms: float
    gk_ms: float
    hand_gbs: float
    gk_gbs: float

    @property
    def ratio(self) -> float:
        return self.gk_ms / self.hand_ms


def run_case(case: Case, runs: int) -> Row:
    """Warm up, check agreement, then time `runs` interleaved launches of each."""
    case.hand()
    case.gradkern()
    case.reset()
    case.hand()
    expected = case.output.copy()
    case.reset()
    case.gradkern()
    got = case.output
    assert np.allclose(got, expected), f"{case.name} {case.dtype}: gradkern and hand-written differ " \
                                       f"(max abs diff {np.nanmax(np.abs(got - expected))})"
    times = interleaved({"hand": timed(case.hand), "gradkern": timed(case.gradkern)}, runs)  # order alternates
    mh, mg = statistics.median(times["hand"]), statistics.median(times["gradkern"])
    return Row(case.name, case.elements, case.dtype.name, mh * 1e3, mg * 1e3,
               case.bytes_moved / mh / 1e9, case.bytes_moved / mg / 1e9)


# ---------------------------------------------------------------- report


def table(rows: list[Row]) -> str:
    head = ["kernel", "elements", "dtype", "hand-written ms", "gradkern ms", "ratio gk/hand",
            "hand GB/s", "gradkern GB/s", f"goal <= {GOAL}x"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ok = "ok" if r.ratio <= GOAL else "MISSED"
        lines.append(f"| {r.name} | {r.elements:,} | {r.dtype} | {r.hand_ms:.3f} | {r.gk_ms:.3f} | "
                     f"{r.ratio:.2f} | {r.hand_gbs:.1f} | {r.gk_gbs:.1f} | {ok} |")
    return "\n".join(lines)


def section(rows: list[Row], args: argparse.Namespace, command: str, load: float) -> str:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join([
        SECTION,
        "",
        "Generated primal (`gk.launch`, validation included) vs hand-written `@numba.njit(parallel=True)` "
        f"with `prange` over the outer index, both on the same arrays; median of {args.runs} interleaved runs "
        "each after warm-up; results checked equal (`np.allclose`). GB/s from minimum traffic (saxpy 3 "
        "arrays, stencils 2). Hand-written boundaries: Allen-Cahn copies the two ends outside a "
        "`prange(1, n - 1)` loop; laplace_2d zeroes rows 0 and n-1 and each row's two edge points, with a "
        "branch-free inner loop over `range(1, n1 - 1)`. Hand-written constants have the arrays' dtype.",
        "",
        f"* command: `{command}`",
        f"* date: {now}",
        f"* machine: {machine()}, Numba threads: {numba.get_num_threads()} "
        f"({numba.threading_layer()} layer); 1-minute load average at start: {load:.2f}",
        f"* versions: Python {platform.python_version()}, NumPy {np.__version__}, Numba {numba.__version__}, "
        f"gradkern {gk.__version__} (commit {git_revision()})",
        "",
        table(rows),
        "",
    ])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes and few runs (smoke test)")
    p.add_argument("--write", action="store_true", help=f"write the table to {RESULTS.name}")
    p.add_argument("--runs", type=int, default=None, help="timed runs per version (default 15, --quick 3)")
    p.add_argument("--dtypes", default="float64,float32", help="comma-separated (default float64,float32)")
    args = p.parse_args(argv)
    args.runs = args.runs or (3 if args.quick else 15)
    n1d, n2d = (2**12, 64) if args.quick else (2**24, 4096)

    load = load_average()
    if load > 0.5:
        print(f"warning: 1-minute load average is {load:.2f}; other processes may disturb the timings",
              file=sys.stderr)
    rng = np.random.default_rng(0)
    print(f"Numba threads: {numba.get_num_threads()}", flush=True)
    rows = []
    for name in args.dtypes.split(","):
        dtype = np.dtype(name)
        for make, n in ((make_saxpy, n1d), (make_allen_cahn, n1d), (make_laplace, n2d)):
            case = make(n, dtype, rng)
            rows.append(run_case(case, args.runs))
            print(f"  {case.name} {dtype.name}: done", file=sys.stderr, flush=True)
            del case
    print(f"CPU: {machine()}; Numba threads: {numba.get_num_threads()} "
          f"({numba.threading_layer()} layer); median of {args.runs} runs")
    print(table(rows))
    if args.quick:
        print("(--quick: arrays this small time gk.launch's per-call overhead, not the kernels)")
    if args.write:
        command = shlex.join(["python", os.path.relpath(sys.argv[0]), *(argv if argv is not None else sys.argv[1:])])
        write_section(section(rows, args, command, load), SECTION, RESULTS)
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
