"""Vector mode benchmark (issue 9): BatchDuplicated with k = 8 shadows against
8 separate gk.autodiff calls, for the 2-D heat step (5-point stencil), in
reverse and forward mode, on the CPU and (when CuPy and a GPU are present) on
the GPU. Goal: batch >= 1.5x faster on the CPU, >= 3x on the GPU.

    python benchmarks/kernels/batch.py               # CPU (and GPU if present), writes RESULTS.md
    python benchmarks/kernels/batch.py --quick       # small sizes, a smoke test
    python benchmarks/kernels/batch.py --no-gpu --no-write --lane-group 2   # another CPU lane group (measuring)
    python benchmarks/kernels/batch.py --no-gpu --no-write --launches       # where each call's time goes
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (benchpath.py)
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path
from timing import interleaved, medians, timed

K = 8
C = 0.1


def launch_times(calls: dict, reps: int, reset) -> dict:
    """Per variant, each kernel's median total time per call (ms) and the launches per call: where a call's
    time goes (--launches). Times every run of the prepared calls through the runtime's seam
    (runtime/call.py: observing), CPU only (no sync)."""
    from gradkern.runtime.call import observing
    seen: list = []
    out = {}
    with observing(lambda run, dim, seconds: seen.append((run.spec.typed.name, seconds))):
        for key, fn in calls.items():
            per: dict = {}
            counts = []
            for _ in range(reps):
                reset()
                seen.clear()
                fn()
                counts.append(len(seen))
                total: dict = {}
                for name, dt in seen:
                    total[name] = total.get(name, 0.0) + dt
                for name, dt in total.items():
                    per.setdefault(name, []).append(dt)
            out[key] = ({name: float(np.median(ts)) * 1e3 for name, ts in per.items()}, int(np.median(counts)))
    return out


def bench(xp, n: int, reps: int, sync, launches: bool = False) -> dict:
    import gradkern as gk
    from gradkern.kernels.stencils import heat_step_2d

    rng = np.random.default_rng(0)
    u = xp.asarray(rng.uniform(0.2, 1.0, (n, n)))
    un = xp.asarray(rng.uniform(0.2, 1.0, (n, n)))
    seeds_u = [xp.asarray(rng.standard_normal((n, n))) for _ in range(K)]
    seeds_un = [xp.asarray(rng.standard_normal((n, n))) for _ in range(K)]
    du = [s.copy() for s in seeds_u]
    dun = [s.copy() for s in seeds_un]

    def reset():
        for a, s in zip(du + dun, seeds_u + seeds_un):
            a[...] = s

    calls = {
        ("reverse", "batch"): lambda: gk.autodiff(heat_step_2d, gk.BatchDuplicated(u, tuple(du)),
                                                  gk.BatchDuplicated(un, tuple(dun)), gk.Const(C)),
        ("reverse", "separate"): lambda: [gk.autodiff(heat_step_2d, gk.Duplicated(u, du[j]),
                                                      gk.Duplicated(un, dun[j]), gk.Const(C)) for j in range(K)],
        ("forward", "batch"): lambda: gk.autodiff(heat_step_2d, gk.BatchDuplicated(u, tuple(du)),
                                                  gk.BatchDuplicated(un, tuple(dun)), gk.Const(C), mode=gk.Forward),
        ("forward", "separate"): lambda: [gk.autodiff(heat_step_2d, gk.Duplicated(u, du[j]),
                                                      gk.Duplicated(un, dun[j]), gk.Const(C), mode=gk.Forward)
                                          for j in range(K)],
    }
    # the batch must equal the separate calls
    for mode in ("reverse", "forward"):
        reset()
        calls[(mode, "batch")]()
        got = [a.copy() for a in du + dun]
        reset()
        calls[(mode, "separate")]()
        err = max(float(xp.max(xp.abs(g - a))) for g, a in zip(got, du + dun))
        assert err <= 1e-12 * max(1.0, max(float(xp.max(xp.abs(a))) for a in du + dun)), (mode, err)
    for fn in calls.values():  # compile and warm
        reset()
        fn()
    # rounds: each round times every variant once, in a rotated order, so that a busy spell of a shared
    # machine does not fall on one column
    times = interleaved({key: timed(fn, sync=sync, setup=reset) for key, fn in calls.items()}, reps)
    if launches:
        for (mode, variant), (per, count) in launch_times(calls, reps, reset).items():
            print(f"{n}x{n} {mode} {variant}: {count} launches; " +
                  ", ".join(f"{name} {ms:.2f} ms" for name, ms in per.items()))
    return medians(times)


def cpu_group() -> str:
    from gradkern.backends import backend
    return str(backend("cpu").lane_group or K)


def main() -> None:
    from report import cpu_model, git_revision, publish

    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--cpu-n", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--gpu-n", type=int, nargs="+", default=[1024, 4096])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--no-gpu", action="store_true")
    ap.add_argument("--launches", action="store_true",
                    help="also print each kernel's time per call (CPU), and how many launches a call makes")
    ap.add_argument("--lane-group", type=int, default=None,
                    help="run the CPU's lanes in groups of this many (Backend.lane_group; 0: all in one launch)")
    a = ap.parse_args()
    if a.lane_group is not None:
        from gradkern.backends import backend
        backend("cpu").lane_group = a.lane_group
    if a.quick:
        a.cpu_n, a.gpu_n, a.reps = [128], [256], 2
    import numba

    rows = []
    for n in a.cpu_n:
        rows.append(("CPU", f"{cpu_model()}, {numba.get_num_threads()} Numba threads", n,
                     bench(np, n, a.reps, lambda: None, a.launches), 1.5))
    gpu_note = "no GPU here"
    if not a.no_gpu:
        try:
            import cupy
            if cupy.cuda.runtime.getDeviceCount() > 0:
                dev = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
                for n in a.gpu_n:
                    rows.append(("GPU", dev, n, bench(cupy, n, a.reps, lambda: cupy.cuda.Device().synchronize()),
                                 3.0))
                gpu_note = ""
        except ImportError:
            gpu_note = "CuPy not installed"
    lines = ["## batch.py", "",
             f"- date: {datetime.date.today().isoformat()}; command: `python benchmarks/kernels/batch.py"
             f"{' --quick' if a.quick else ''}`; revision {git_revision()}",
             f"- 2-D heat step (`gradkern.kernels.heat_step_2d`), float64, k = {K} shadows: one "
             "`gk.BatchDuplicated` call against 8 `gk.Duplicated` calls (median of "
             f"{a.reps} rounds, the variants interleaved in each, each call synchronised); CPU lanes in groups "
             f"of {cpu_group()}" + (f"; {gpu_note}" if gpu_note else ""),
             "",
             "| device | size | mode | 8 separate calls (ms) | one batch call (ms) | speed-up | goal |",
             "|---|---|---|---:|---:|---:|---|"]
    for where, what, n, res, goal in rows:
        for mode in ("reverse", "forward"):
            sep, bat = res[(mode, "separate")], res[(mode, "batch")]
            ratio = sep / bat
            lines.append(f"| {where}: {what} | {n}×{n} | {mode} | {sep * 1e3:.2f} | {bat * 1e3:.2f} | {ratio:.2f}× | "
                         f"≥ {goal}× {'met' if ratio >= goal else 'MISSED'} |")
    publish("\n".join(lines) + "\n", "## batch.py", write=not a.quick and not a.no_write)


if __name__ == "__main__":
    main()
