"""The benchmark scripts' one timing helper: rounds that interleave the versions a table compares (their
order rotated per round, so a drift in the machine's speed, another process or a frequency change, falls
on every version alike rather than on whichever runs last), medians over the rounds, and the machine and
its load that every table is printed under (report.run_lines)."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path


def interleaved(timers: dict[str, Callable[[], float]], rounds: int, rotate: bool = True,
                after_round: Callable[[int, dict[str, list[float]]], None] | None = None) -> dict[str, list[float]]:
    """Each timer's measurements over `rounds` rounds; a round calls every timer once, in an order rotated
    by one per round unless `rotate` is false. A timer measures one thing and returns its time;
    `after_round(r, times)` is called after round r (progress lines)."""
    names = list(timers)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for k in range(len(names)):
            name = names[(k + r) % len(names)] if rotate else names[k]
            times[name].append(timers[name]())
        if after_round is not None:
            after_round(r, times)
    return times


def medians(times: dict[str, list[float]]) -> dict[str, float]:
    return {name: statistics.median(t) for name, t in times.items()}


def timed(fn: Callable[[], object], clock: Callable[[], float] = time.perf_counter,
          sync: Callable[[], object] | None = None, setup: Callable[[], object] | None = None) -> Callable[[], float]:
    """A timer of one call of `fn`, in seconds of `clock`; `setup` (resetting inputs) runs first, untimed,
    and `sync` (a device synchronisation) before the clock starts and before it stops."""
    def timer() -> float:
        if setup is not None:
            setup()
        if sync is not None:
            sync()
        t0 = clock()
        fn()
        if sync is not None:
            sync()
        return clock() - t0
    return timer


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> str:
    return f"{cpu_model()}, {os.cpu_count()} cores"


def load_average() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]
