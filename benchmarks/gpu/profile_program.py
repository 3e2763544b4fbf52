"""Where a program's gradient spends its host time on a GPU: cProfile of gpu_loops.py's gradkern store-all
runner (programs.py --gpu's problem, N = 1,000,000 float64, T = 100) after a warm-up, top functions by own
time; once with the host-write guard's fingerprints (the default) and once with them off. For reading, not for
RESULTS.md's goals (the timed rows are programs.py's).

    python benchmarks/gpu/profile_program.py [--n N] [--steps T] [--top K]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time

import gpu_loops as gl
import numpy as np


def main() -> None:
    import cupy
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--top", type=int, default=30)
    args = p.parse_args()
    u0 = cupy.asarray(np.random.default_rng(0).uniform(-0.9, 0.9, args.n))
    for mode in ("auto", "off"):
        os.environ["GRADKERN_HOST_WRITE_CHECK"] = mode
        run = gl.gradkern_runner(cupy, args.steps)
        run(u0)
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        run(u0)
        cupy.cuda.Device().synchronize()
        wall = time.perf_counter() - t0
        prof = cProfile.Profile()
        prof.enable()
        run(u0)
        cupy.cuda.Device().synchronize()
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.top)
        print(f"## GRADKERN_HOST_WRITE_CHECK={mode}: one gradient {wall * 1e3:.1f} ms "
              f"({wall / args.steps * 1e6:.0f} us per step, host and device)\n")
        print(out.getvalue())


if __name__ == "__main__":
    main()
