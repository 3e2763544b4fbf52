"""Parallel or serial (docs/performance.md#parallel-or-serial-by-measurement): the 1-D Allen-Cahn primal at
2^20 and 2^21 points, float64, five ways in interleaved rounds (median): the hand-written `prange` loop (the
ends by a branch inside it, as in programs.py), the same loop serial, `gk.launch` with the choice off (the
parallel entry), `gk.launch` of the serial twin, and `gk.launch` as shipped (measured choice,
backends/numba_choice.py; its warm-up and trials are part of the first rounds, before the timed ones).

    python benchmarks/kernels/serial_choice.py [--runs 30] [--write]
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
from programs import DT, _step
from report import publish, run_lines
from timing import interleaved, timed

import gradkern as gk
from gradkern.backends import numba_choice, numba_cpu
from gradkern.kernels import allen_cahn_step


@numba.njit(cache=True)
def _step_serial(u, un, c, dt):
    n = u.shape[0]
    for i in range(n):
        if i == 0 or i == n - 1:
            un[i] = u[i]
        else:
            ui = u[i]
            un[i] = ui + c * (u[i - 1] - 2.0 * ui + u[i + 1]) + dt * (ui - ui ** 3)


def _with(setting: str, value, fn):
    def run():
        module = numba_choice if setting == "ENABLED" else numba_cpu
        old = getattr(module, setting)
        setattr(module, setting, value)
        try:
            fn()
        finally:
            setattr(module, setting, old)
    return run


def _row(n: int, runs: int) -> str:
    u = np.random.default_rng(0).uniform(-0.9, 0.9, n)
    v = np.empty(n)

    def launch():
        gk.launch(allen_cahn_step, n, u, v, 0.2, DT)
    ways = {"hand prange": lambda: _step(u, v, 0.2, DT), "hand serial": lambda: _step_serial(u, v, 0.2, DT),
            "gk parallel": _with("ENABLED", False, launch),
            "gk serial twin": _with("SERIAL_THREADS", 1 << 62, launch), "gk choice": launch}
    for _ in range(numba_choice.WARM + 2 * (numba_choice.TRIALS + 1) + 2):
        for f in ways.values():
            f()
    times = interleaved({k: timed(f) for k, f in ways.items()}, runs)
    ms = {k: statistics.median(t) * 1e3 for k, t in times.items()}
    chosen = [s for (_, bits), s in numba_choice.CHOICE.chosen().items() if bits == n.bit_length()]
    return (f"| {n:,} | " + " | ".join(f"{ms[k]:.3f}" for k in ways) +
            f" | {'serial' if chosen and chosen[-1] else 'parallel'} |")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--write", action="store_true")
    args = p.parse_args()
    lines = ["| points | hand prange (ms) | hand serial (ms) | gk parallel (ms) | gk serial twin (ms) | "
             "gk measured choice (ms) | choice |", "|---:|---:|---:|---:|---:|---:|---|"]
    for n in (1 << 20, 1 << 21):
        lines.append(_row(n, args.runs))
    text = "\n".join(["## serial_choice.py", "",
                      "The 1-D Allen-Cahn primal, float64, five ways (module doc), median of "
                      f"{args.runs} interleaved rounds; Numba threads: {numba.get_num_threads()}.", "",
                      *run_lines(f"python benchmarks/kernels/serial_choice.py{' --write' if args.write else ''}"),
                      "", *lines, ""])
    publish(text, "## serial_choice.py", args.write)


if __name__ == "__main__":
    main()
