"""gradkern's host time per step on CuPy's paths without a GPU: gpu_loops.py's Allen-Cahn store-all gradient
(one step = a launch recorded and its reverse) on fakecupy's arrays (tests/support/fakecupy.py: the 'cuda'
backend's path, kernels run by hostcuda's launcher) against NumPy arrays on hostcuda, at a small N so that the
kernels cost little; CPU time per step, then the functions of runtime/ and program/ whose cumulative share of
the profiled time differs most (cProfile with a CPU-time clock, the garbage collector off while profiled). For
reading the slow paths CuPy arrays take (docs/hostcuda.md, "CuPy's paths on a stand-in"), not for RESULTS.md:
the fake's own calls cost Python microseconds where CuPy's cost launches.

    python benchmarks/gpu/profile_fakecupy.py [--n N] [--steps T] [--top K]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import sys
import time
from pathlib import Path

import gpu_loops as gl  # noqa: I001 (first: it puts benchmarks/ and the repository's parts on sys.path)
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from support.fakecupy import installed  # noqa: E402

from gradkern.backends import set_default  # noqa: E402


def measure(xp, n: int, steps: int) -> tuple[float, dict, float]:
    """CPU seconds per gradient, and {function: (calls, cumulative seconds)} of runtime/ and program/ with the
    profiled total."""
    run = gl.gradkern_runner(xp, steps)
    u0 = xp.asarray(np.random.default_rng(0).uniform(-0.9, 0.9, n))
    run(u0)
    run(u0)
    gc.collect()
    gc.disable()  # a collection's pause lands on whichever function allocates
    try:
        t0 = time.process_time()
        for _ in range(3):
            run(u0)
        cpu = (time.process_time() - t0) / 3
        prof = cProfile.Profile(time.process_time)
        prof.enable()
        run(u0)
        prof.disable()
    finally:
        gc.enable()
    prof.create_stats()
    found: dict = {}
    total = 0.0
    for (path, _line, name), (_, calls, own, cum, _) in prof.stats.items():
        total += own
        if "/gradkern/runtime/" in path or "/gradkern/program/" in path:
            key = f"{path.split('/gradkern/')[1]}:{name}"
            c, t = found.get(key, (0, 0.0))
            found[key] = (c + calls, t + cum)
    return cpu, found, total


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--top", type=int, default=20)
    args = p.parse_args()
    before = set_default("hostcuda")
    try:
        host = measure(np, args.n, args.steps)
    finally:
        set_default(before)
    with installed() as cupy:
        fake = measure(cupy, args.n, args.steps)
    for what, (cpu, _, _) in (("NumPy on hostcuda", host), ("fakecupy on 'cuda'", fake)):
        print(f"{what}: N = {args.n}, T = {args.steps}: {cpu / args.steps * 1e6:.0f} us of CPU per step")
    print("\nshare of the profiled time (cumulative), calls per step; fakecupy minus NumPy, largest first:")
    rows = []
    for key in set(host[1]) | set(fake[1]):
        hc, ht = host[1].get(key, (0, 0.0))
        fc, ft = fake[1].get(key, (0, 0.0))
        rows.append((ft / fake[2] - ht / host[2], key, hc / args.steps, ht / host[2], fc / args.steps, ft / fake[2]))
    rows.sort(reverse=True)
    print(f"{'function':48s} {'NumPy calls':>11s} {'share':>6s} {'fake calls':>10s} {'share':>6s}")
    for _, key, hc, hs, fc, fs in rows[:args.top]:
        print(f"{key[:48]:48s} {hc:11.2f} {hs:6.1%} {fc:10.2f} {fs:6.1%}")


if __name__ == "__main__":
    main()
