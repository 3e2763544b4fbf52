"""The tape guard's cost (docs/adjoint-forms.md, section 13, "The tape guard"): Newton's cube root to 1e-12
(5 to 6 iterations, one float pushed per iteration) over n threads on the Numba backend, `gk.autodiff` (count
kernel, fused kernel, host checks) and `autodiff_thunk`'s forward (count kernel, augmented primal, host check),
the kernel compiled with the guard against an identical kernel compiled with the guard patched out (pushes
unguarded, the fused reverse outside the guard's branch), timed alternately in one process so that both see the
same load. Prints minima and medians; writes nothing (benchmarks/RESULTS.md is written from quiet runs).

    python benchmarks/kernels/tape_guard_cpu.py [--n 1000000] [--runs 21]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import gradkern as gk
from gradkern.ir import nodes as ir
from gradkern.ir.types import BOOL
from gradkern.transforms import reverse as transforms_reverse


def newton_kernel():
    """A fresh kernel object each call: each compiles with the pipeline as it is patched at its first call."""

    @gk.kernel
    def newton_cbrt(x, y, tol):
        i = gk.tid()
        v = x[i]
        dv = 1.0
        while abs(dv) > tol:
            dv = (v * v * v - x[i]) / (3.0 * v * v)
            v = v - dv
        y[i] = v * v + gk.sin(v)
    return newton_cbrt


def calls(k, x, y, dx, dy) -> dict:
    n = len(x)
    fwd, _ = gk.autodiff_thunk(k, gk.Duplicated, gk.Duplicated, gk.Const, dim=n)
    return {"autodiff (fused)": lambda: gk.autodiff(k, gk.Duplicated(x, dx), gk.Duplicated(y, dy), 1e-12, dim=n),
            "split forward": lambda: fwd(gk.Duplicated(x, dx), gk.Duplicated(y, dy), 1e-12)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=21)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 3.0, a.n)
    y, dx, dy = np.zeros(a.n), np.zeros(a.n), np.ones(a.n)
    guarded = calls(newton_kernel(), x, y, dx, dy)
    for f in guarded.values():
        f()
    kept = transforms_reverse.guard_pushes, transforms_reverse.within
    transforms_reverse.guard_pushes = lambda body, tapes: tuple(body)
    transforms_reverse.within = lambda lanes, axis: ir.Const(True, type=BOOL)
    try:
        plain = calls(newton_kernel(), x, y, dx, dy)
        for f in plain.values():
            f()
    finally:
        transforms_reverse.guard_pushes, transforms_reverse.within = kept
    for name in guarded:
        times: dict[str, list[float]] = {"guard": [], "none": []}
        for _ in range(a.runs):
            for which, fs in (("guard", guarded), ("none", plain)):
                t = time.perf_counter()
                fs[name]()
                times[which].append(time.perf_counter() - t)
        g, p = sorted(times["guard"]), sorted(times["none"])
        mid = a.runs // 2
        print(f"n={a.n} {name}: guard min {g[0] * 1e3:.2f} ms, median {g[mid] * 1e3:.2f} ms; unguarded min "
              f"{p[0] * 1e3:.2f} ms, median {p[mid] * 1e3:.2f} ms; ratio of minima {g[0] / p[0]:.3f}, of "
              f"medians {g[mid] / p[mid]:.3f}")


if __name__ == "__main__":
    main()
