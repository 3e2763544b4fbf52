"""Checkpointed loops (issue 16, docs/checkpointed-loops.md): the time and peak memory of the
gradient of the 1-D Allen-Cahn loop, stored or checkpointed.

The problem: u0 of N float64, T steps, one launch of
`gradkern.kernels.allen_cahn_step` per step over ping-pong buffers (step t
writes v from u when t is even, u from v when t is odd; T is even, so the
final state is in u), then E = sum u^2 by a kernel; the gradient of E w.r.t.
u0 and c. Rows:

* primal only (gradkern launches, no derivative): the reference for memory;
* gradkern store-all: `gk.autodiff` of the program with a plain Python loop
  of launches (every overwritten state saved copy-on-write);
* gradkern checkpointed: the same program with the loop written as
  `gk.checkpointed_loop(step, T, snapshots=s)` (default binomial schedule);
* hand-written store-all (Numba, as in programs.py): the primal writes every
  state into a preallocated (T + 1, N) buffer, a gather adjoint sweeps back;
* JAX (where installed, float64): `grad` of a `lax.scan` over the T steps
  (store-all), and of two-level schemes, an outer `lax.scan` over `outer`
  segments, each `jax.checkpoint` of an inner `lax.scan` of T / outer steps
  (10 x 100, 40 x 25 and 100 x 10 for T = 1000);
* gradkern at JAX's budgets: for each two-level JAX row, the loop written as
  `gk.checkpointed_loop(step, T, memory=M)`, M = that row's peak memory less
  gradkern's own working arrays (the primal's peak and the two shadows), so
  that its whole peak is comparable with JAX's; the schedule it picked is
  named in the row.

Time: all rows in this process, warmed up, gradients checked against gradkern
store-all's (gradkern's checkpointed rows bit for bit: the same launches in the
same order; the others rtol 1e-9), then the median of --runs interleaved runs.

Peak memory: each row in a fresh subprocess (`--one ROW`) with
MALLOC_MMAP_THRESHOLD_=65536, so that freed arrays go back to the system: it
runs the row once at N = 64 (compiles, warms up; JAX rows are also compiled
ahead of time for the full size, not run: a full-size JAX run left 3 GB
resident that the next call reused; gradkern rows also at N = 1024, which starts
Numba's thread pool), then records its resident set size,
resets the kernel's high-water mark (`/proc/self/clear_refs`) and runs the row
at full size; the peak is VmHWM minus that RSS, i.e. everything the
call allocated (its working buffers and outputs included), the inputs u0 and c
excluded. In units of one state (N x 8 bytes) it reads as "states".

Its resolution: Linux counts a process's resident pages in per-CPU counters that reach the shared count in
batches of max(32, 2 x CPUs) pages (percpu_counter), and records the high-water mark at each unmap from the
shared count alone (update_hiwater_rss), while VmRSS in /proc/self/status is the exact sum (on this kernel,
6.18; the `rss` field of /proc/self/stat shows the batched count). So a peak recorded when a buffer is freed
reads low by the pages still pending per CPU, up to (batch - 1) x CPUs pages (`rss_slack`: 62 pages, 0.12
states at N = 2**18 on 2 CPUs), by an amount that depends on the pages the process touched before. Measured
(two 2 MiB NumPy arrays touched and freed, 1,026 pages with malloc's header page each): 996 to 1,025 pages read,
a sawtooth of period 32 in the pages touched beforehand, with or without a warm-up; the primal row's 11 to 28
missing pages are this. No exact high-water mark is available, so every row reads alike through it, and the
goal line gives the resolution of "above primal" (a difference of two such peaks: +- the slack).

So the goal of issue 33 (snapshots = 10 at most 12 states above the primal) is decided on exact counts
(peaks.py): glibc's high-water mark of its mmapped chunks around the same call (every malloc of 64 KiB or
more: NumPy's arrays, Numba's NRT, CPython's large objects), in arrays of one state, beside tracemalloc's peak
(NumPy's data and Python's objects; the same call in another fresh process), Numba NRT's allocation count and
the RSS column. Sampling VmRSS (exact at each read) from a thread is no sharper: a peak between two samples is missed.

The children run with OMP_WAIT_POLICY=passive: after each parallel launch, libgomp's idle worker threads
otherwise spin for a while before they sleep, and on a loaded machine that spinning took the CPU from the
other processes and cost the children 2-4x their CPU time (session 49: `--one gk-s10 --quick` 2.7-6.9 CPU s
against 1.5 s, load 13-15; docs/performance.md, "Idle OpenMP threads spin"). A child measures memory, never
time; the timed rows in the main process run with the environment they are given.

    python benchmarks/programs/checkpoint.py               # N = 2**18, T = 1000
    python benchmarks/programs/checkpoint.py --quick       # small (fewer rows): about 18 CPU s, under a minute
    python benchmarks/programs/checkpoint.py --write       # and write RESULTS.md and checkpoint.png
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (benchpath.py)
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path
from peaks import LargeAllocations, exact_above, nrt_allocations, s10_goal, traced_peak
from programs import _adjoint, _step
from report import publish, run_lines
from timing import interleaved, load_average, timed

import gradkern as gk
from gradkern.kernels import allen_cahn_step
from gradkern.runtime import blocked as gk_blocked

DT = 1e-5
C = 0.2
SNAPSHOTS = (4, 10, 32, 100)
PRIMAL, STORE_ALL, HAND = "primal", "gk", "hand"
JAX_SCAN, JAX_TWO = "jax-scan", "jax-two-level"
HERE = Path(__file__).resolve().parent
STARTED = time.perf_counter()  # --quick's goal line: the script's wall time from here (its imports excluded)


def ckpt(s: int) -> str:
    return f"gk-s{s}"


def jax_two(outer: int) -> str:
    return f"{JAX_TWO}-{outer}"


def at_budget(memory: int) -> str:
    return f"gk-m{memory}"


def row_name(key: str, steps: int, plans: dict | None = None) -> str:
    if key.startswith("gk-s"):
        return f"gradkern `checkpointed_loop`, snapshots = {key[4:]}"
    if key.startswith("gk-m"):
        plan = (plans or {}).get(key)
        picked = f": {plan}" if plan else ""
        return f"gradkern `checkpointed_loop`, memory = {int(key[4:]) / 1e6:.1f} MB{picked}"
    if key.startswith(JAX_TWO):
        outer = int(key[len(JAX_TWO) + 1:])
        return f"JAX two-level `jax.checkpoint`, {outer} x {steps // outer}"
    return {PRIMAL: "primal only (gradkern launches, no gradient)", STORE_ALL: "gradkern store-all (`gk.autodiff`)",
            HAND: "hand-written store-all adjoint (Numba)", JAX_SCAN: "JAX store-all (`grad` of `lax.scan`)"}[key]


# -- gradkern ----------------------------------------------------------------------------------------------------


@gk.kernel
def sum_squares(u, E):
    i = gk.tid()
    gk.atomic_add(E, 0, u[i] * u[i])


def program(steps: int, snapshots: int | None, storage: str = "device", memory: int | None = None):
    """The loop as a program: step t launches u -> v (t even) or v -> u (t odd); E = sum u^2 after it
    (`storage`: where a checkpointed loop keeps its snapshots; `memory`: its budget instead of snapshots)."""
    def simulate(u, v, E, c):
        n = u.shape[0]

        def step(t):
            if t % 2 == 0:
                gk.launch(allen_cahn_step, n, u, v, c, DT)
            else:
                gk.launch(allen_cahn_step, n, v, u, c, DT)
        if memory is not None:
            gk.checkpointed_loop(step, steps, memory=memory, storage=storage)
        elif snapshots is None:
            for t in range(steps):
                step(t)
        else:
            gk.checkpointed_loop(step, steps, snapshots=snapshots, storage=storage)
        gk.launch(sum_squares, n, u, E)
    return simulate


def gradkern_args(u0, c):
    n = u0.size
    return (gk.Duplicated(u0.copy(), np.zeros(n)), gk.Duplicated(np.zeros(n), np.zeros(n)),
            gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(c))


def gradkern_runner(steps: int, snapshots: int | None, memory: int | None = None):
    f = program(steps, snapshots, memory=memory)

    def run(u0, c):
        args = gradkern_args(u0, c)
        grads = gk.autodiff(f, *args)
        return args[0].dval, grads[3]
    return run


def primal_runner(steps: int):
    f = program(steps, None)

    def run(u0, c):
        u, v, E = u0.copy(), np.zeros(u0.size), np.zeros(1)
        f(u, v, E, c)
        return None
    return run


def loop_stats(steps: int, snapshots: int | None, u0, c, memory: int | None = None) -> dict:
    """Split mode, to read the loop's entry of the program tape: steps recomputed, snapshot bytes, the plan
    memory= picked."""
    fwd, rev = gk.autodiff_thunk(program(steps, snapshots, memory=memory), gk.Duplicated, gk.Duplicated,
                                 gk.Duplicated, gk.Active)
    args = gradkern_args(u0, c)
    tape = fwd(*args)
    rev(*args, tape)
    entry = next(s for s in tape.steps if s.kernel == "checkpointed_loop")
    plan = entry.plan
    return {"steps_recomputed": entry.stats.steps_recomputed, "snapshot_peak_bytes": entry.peak_bytes,
            "peak_snapshots": entry.stats.peak_snapshots,
            **({"plan": f"{plan.kind}, {plan.snapshots} snapshots, segments of {plan.segment}"} if plan else {})}


# -- hand-written store-all (programs.py's step and adjoint) -------------------------------------------------------


def hand_runner(steps: int):
    def run(u0, c):
        n = u0.size
        states = np.empty((steps + 1, n))
        states[0] = u0
        for t in range(steps):
            _step(states[t], states[t + 1], c, DT)
        adj = 2.0 * states[steps]
        nxt = np.empty(n)
        dc = 0.0
        for t in range(steps - 1, -1, -1):
            dc += _adjoint(states[t], adj, nxt, c, DT)
            adj, nxt = nxt, adj
        return adj, dc
    return run


# -- JAX -----------------------------------------------------------------------------------------------------------


def jax_runner(steps: int, outer: int | None):
    """`grad` of a scan over the steps (outer None), or of `outer` checkpointed segments of steps / outer steps."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def step(u, c):
        inner = u[1:-1] + c * (u[:-2] - 2.0 * u[1:-1] + u[2:]) + DT * (u[1:-1] - u[1:-1] ** 3)
        return jnp.concatenate([u[:1], inner, u[-1:]])

    def scan(u, c, length):
        return jax.lax.scan(lambda u, _: (step(u, c), None), u, None, length=length)[0]

    if outer is None:
        def final(u0, c):
            return scan(u0, c, steps)
    else:
        segment = jax.checkpoint(lambda u, c: scan(u, c, steps // outer))

        def final(u0, c):
            return jax.lax.scan(lambda u, _: (segment(u, c), None), u0, None, length=outer)[0]

    def loss(u0, c):
        u = final(u0, c)
        return jnp.sum(u * u)

    g = jax.jit(jax.grad(loss, argnums=(0, 1)))
    fn = {"call": g}

    def run(u0, c):
        du, dc = fn["call"](u0, c)
        return np.asarray(du.block_until_ready()), float(dc)

    def prepare(u0, c):  # compile ahead of time for these shapes, without running (the memory child)
        fn["call"] = g.lower(u0, c).compile()
    run.prepare = prepare
    return run


def runner(key: str, steps: int):
    if key == PRIMAL:
        return primal_runner(steps)
    if key == STORE_ALL:
        return gradkern_runner(steps, None)
    if key.startswith("gk-s"):
        return gradkern_runner(steps, int(key[4:]))
    if key.startswith("gk-m"):
        return gradkern_runner(steps, None, int(key[4:]))
    if key == HAND:
        return hand_runner(steps)
    if key == JAX_SCAN:
        return jax_runner(steps, None)
    if key.startswith(JAX_TWO):
        return jax_runner(steps, int(key[len(JAX_TWO) + 1:]))
    raise ValueError(key)


def inputs(n: int):
    return np.random.default_rng(0).uniform(-0.9, 0.9, n), C


# -- peak memory, one row per subprocess -------------------------------------------------------------------------


def rss_slack() -> int:
    """Bytes a recorded RSS high-water mark may read low by (docstring: the per-CPU batches of the kernel's
    RSS counter, percpu_counter_batch = max(32, 2 x CPUs) pages)."""
    cpus = os.cpu_count() or 1
    return (max(32, 2 * cpus) - 1) * cpus * os.sysconf("SC_PAGE_SIZE")


def _status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split(":")
                out[key] = int(value.split()[0]) * 1024
    return out


def child(key: str, n: int, steps: int, traced: bool = False) -> None:
    """--one ROW: warm up at N = 64, then one measured call at full size; prints a JSON line (`traced`: the
    call under tracemalloc instead, peaks.py)."""
    f = runner(key, steps)
    f(*inputs(64))  # compiles, builds the schedule
    if not key.startswith("jax"):
        # the parallel launches (64 threads run serial twins), Numba's thread pool, and the blocked form of the
        # recomputed steps (held only for states of GRADKERN_TEMPORAL_BYTES: docs/checkpointed-loops.md), so
        # that no compilation counts in the measured call's peak
        floor, gk_blocked.MIN_BYTES = gk_blocked.MIN_BYTES, 0
        f(*inputs(1024))
        gk_blocked.MIN_BYTES = floor
    u0, c = inputs(n)
    if hasattr(f, "prepare"):
        f.prepare(u0, c)  # JAX specialises on the shape: compiled for the full size, not run
    gc.collect()
    if traced:  # its own process: tracemalloc's bookkeeping is resident memory and slows Python (peaks.py)
        peak, left = traced_peak(lambda: f(u0, c))
        print(json.dumps({"traced_peak": peak, "traced_left": left}))
        return
    before = _status()["VmRSS"]
    nrt = nrt_allocations()
    with open("/proc/self/clear_refs", "w") as cr:
        cr.write("5")  # the high-water mark (VmHWM) back to the current RSS
    with LargeAllocations() as large:
        f(u0, c)
    peak = _status()["VmHWM"] - before
    out = {"peak_bytes": peak, "rss_before": before, "large_peak": large.peak, "large_raised": large.raised,
           "large_left": large.after}
    if nrt is not None:
        out["nrt_allocations"] = nrt_allocations() - nrt
    if key.startswith("gk-s"):
        out.update(loop_stats(steps, int(key[4:]), u0, c))
    if key.startswith("gk-m"):
        out.update(loop_stats(steps, None, u0, c, int(key[4:])))
    print(json.dumps(out))


def measure_memory(key: str, n: int, steps: int, traced: bool = True) -> dict:
    """The row's peaks, each from a fresh process: RSS and glibc's large allocations, then (`traced`, not JAX's
    rows, whose allocations tracemalloc does not see) tracemalloc's."""
    # OMP_WAIT_POLICY=passive: OpenMP's idle threads sleep instead of spinning after each parallel launch; a child
    # measures memory, never time, and the spinning cost it 2-4x its CPU time on a loaded machine (module docstring)
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "NUMBA_NRT_STATS": "1", "OMP_WAIT_POLICY": "passive"}
    out = {}
    for extra in ([], ["--traced"]) if traced and not key.startswith("jax") else ([],):
        cmd = [sys.executable, str(Path(__file__).resolve()), "--one", key, "--n", str(n), "--steps", str(steps),
               *extra]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"--one {key} {' '.join(extra)} failed:\n{proc.stderr}")
        out.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    return out


# -- the table ---------------------------------------------------------------------------------------------------


def check(name: str, got, ref, exact: bool = False) -> None:
    """`got` against gradkern store-all's gradient `ref`: bit for bit where `exact` (a gradkern checkpointed row:
    the same launches in the same order, docs/checkpointed-loops.md), else within rtol 1e-9."""
    du, dc = got
    if exact:
        assert np.array_equal(du, ref[0]) and dc == ref[1], f"{name}: not bit-identical to gradkern store-all's"
        return
    scale = np.max(np.abs(ref[0]))
    assert np.allclose(du, ref[0], rtol=1e-9, atol=1e-12 * scale), name
    assert abs(dc - ref[1]) <= 1e-9 * max(abs(ref[1]), 1e-30), (name, dc, ref[1])


def plot(rows: list[dict], path: Path, title: str) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    styles = {"gk": ("o", "C0"), "hand": ("s", "C2"), "jax": ("^", "C3"), "primal": ("x", "0.5")}
    for r in rows:
        kind = r["key"].split("-")[0]
        marker, color = styles[kind]
        mb = max(r["peak_bytes"], 1e4) / 1e6  # a log axis: a peak under 10 kB drawn at 10 kB
        ax.scatter(mb, r["time"], marker=marker, color=color, s=40)
        ax.annotate(r["short"], (mb, r["time"]), textcoords="offset points", xytext=(5, 4),
                    fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("peak memory above the inputs (MB, log scale)")
    ax.set_ylabel("time of the gradient (s)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def short_name(key: str, steps: int) -> str:
    if key.startswith(JAX_TWO):
        outer = int(key[len(JAX_TWO) + 1:])
        return f"JAX {outer}x{steps // outer}"
    if key.startswith("gk-m"):
        return f"gk mem={int(key[4:]) / 1e6:.1f}MB"
    return {PRIMAL: "primal (no gradient)", STORE_ALL: "gk store-all", HAND: "hand store-all",
            JAX_SCAN: "JAX scan"}.get(key, f"gk s={key[4:]}")


def gpu_main(args) -> None:
    """Store-all and checkpointed on a GPU, snapshots on the device or copied to the host, against hand-written
    CUDA (gpu_loops.py): time and the peak of CuPy's memory pool."""
    import cupy
    import gpu_loops as gl
    n, steps = args.n, args.steps
    if args.quick:
        n, steps, args.runs = 2 ** 14, 100, 1
    u0 = cupy.asarray(np.random.default_rng(0).uniform(-0.9, 0.9, n))
    hand = "hand-written store-all (CUDA)"
    rows = {"gradkern store-all": gl.gradkern_runner(cupy, steps)}
    for s in (10, 30):
        rows[f"gradkern checkpointed, {s} snapshots on the device"] = gl.gradkern_runner(cupy, steps, s)
    rows["gradkern checkpointed, 10 snapshots on the host"] = gl.gradkern_runner(cupy, steps, 10, "host")
    rows[hand] = gl.hand_runner(cupy, steps)
    times, peaks = gl.run_rows(cupy, rows, u0, args.runs)
    text = "\n".join([
        "## checkpoint.py --gpu", "",
        "checkpoint.py's Allen-Cahn loop on a GPU, float64, CuPy arrays (benchmarks/gpu/gpu_loops.py: the rows, the "
        "timing and the peak of CuPy's memory pool during one call, inputs excluded; one state = N x 8 bytes). "
        f"Median of {args.runs} interleaved runs after a warm-up, each ended by a synchronisation; every gradient "
        "checked against gradkern store-all's (rtol 1e-9). Snapshots \"on the host\": `storage=\"host\"`.", "",
        *run_lines(f"python benchmarks/programs/checkpoint.py --gpu{' --write' if args.write else ''}"),
        gl.device_line(cupy),
        f"* N = {n:,}, T = {steps}", "",
        *gl.table(times, peaks, hand, n * 8), ""])
    publish(text, "## checkpoint.py --gpu", args.write)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=2 ** 18)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--outer", default="10,40,100", help="segment counts of JAX's two-level schemes, comma-separated")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--write", action="store_true")
    p.add_argument("--no-jax", action="store_true", help="leave the JAX rows out")
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--gpu", action="store_true", help="CuPy arrays, the generated CUDA kernels (gpu_loops.py)")
    args = p.parse_args()
    if args.gpu:
        gpu_main(args)
        return
    snapshots = SNAPSHOTS
    if args.quick:  # the rows the goals read, small: under a minute on 2 cores
        args.n, args.steps, args.outer, args.runs, snapshots = 2 ** 14, 100, "10", 1, (10,)
    n, steps = args.n, args.steps
    if args.one:
        child(args.one, n, steps, args.traced)
        return
    outers = [int(o) for o in str(args.outer).split(",")]
    if steps % 2 or any(steps % o for o in outers):
        p.error("--steps must be even and a multiple of every --outer")

    have_jax = not args.no_jax and jax_runner(2, None) is not None
    keys = [PRIMAL, STORE_ALL, *(ckpt(s) for s in snapshots)] + ([] if args.quick else [HAND])
    state = n * 8
    mem = {}

    def memory_of(k: str) -> None:
        # --quick: tracemalloc's process only for the rows the goal reads (under a minute)
        mem[k] = measure_memory(k, n, steps, traced=not args.quick or k in (PRIMAL, ckpt(10)))
        print(f"memory {k}: {mem[k]}", file=sys.stderr, flush=True)

    memory_of(PRIMAL)
    budgets = []
    if have_jax:
        keys += ([] if args.quick else [JAX_SCAN]) + [jax_two(o) for o in outers]
        for o in outers:  # JAX's peaks first: they are the budgets of the memory= rows
            memory_of(jax_two(o))
            # gradkern's own working arrays (the primal's u, v and the shadows du, dv) are not the loop's
            budget = mem[jax_two(o)]["peak_bytes"] - mem[PRIMAL]["peak_bytes"] - 2 * state
            if budget > 0:
                budgets.append((o, at_budget(budget)))
        keys += [k for _, k in budgets]
    u0, c = inputs(n)
    methods = {k: runner(k, steps) for k in keys}
    ref = None
    for k, f in methods.items():  # warm-up (compiles) and the check against gradkern store-all
        got = f(u0, c)
        if k == STORE_ALL:
            ref = got
        elif k != PRIMAL:
            check(row_name(k, steps), got, ref, exact=k.startswith(("gk-s", "gk-m")))

    def progress(r: int, times: dict[str, list[float]]) -> None:
        print(f"run {r + 1}/{args.runs}: " + ", ".join(f"{k} {times[k][-1]:.2f} s" for k in keys),
              f"(load {load_average():.2f})", file=sys.stderr, flush=True)

    times = interleaved({k: timed(lambda f=f: f(u0, c)) for k, f in methods.items()}, args.runs, rotate=False,
                        after_round=progress)
    del methods
    gc.collect()
    for k in keys:
        if k not in mem:
            memory_of(k)

    primal_peak = mem[PRIMAL]["peak_bytes"]
    plans = {k: m["plan"] for k, m in mem.items() if "plan" in m}
    has_hand = HAND in times
    t_hand = statistics.median(times[HAND]) if has_hand else None
    t_gk = statistics.median(times[STORE_ALL])
    rows, lines = [], []
    for k in keys:
        t = statistics.median(times[k])
        m = mem[k]
        rows.append({"key": k, "short": short_name(k, steps), "time": t, "peak_bytes": m["peak_bytes"]})
        recomputed = str(m["steps_recomputed"]) if "steps_recomputed" in m else ""
        snap = f"{m['snapshot_peak_bytes'] / state:.1f}" if "snapshot_peak_bytes" in m else ""
        above = "" if k == PRIMAL else f"{(m['peak_bytes'] - primal_peak) / state:.1f}"
        arrays, traced = exact_above(m, mem[PRIMAL], state)
        vs_hand = f"{t / t_hand:.2f}" if has_hand else ""
        lines.append(f"| {row_name(k, steps, plans)} | {t:.3f} | {vs_hand} | {t / t_gk:.2f} | "
                     f"{m['peak_bytes'] / 1e6:.1f} | {m['peak_bytes'] / state:.1f} | {above} | {arrays} | {traced} | "
                     f"{recomputed} | {snap} |")

    def peak(k):
        return mem[k]["peak_bytes"]

    def t(k):
        return statistics.median(times[k])

    goals = []
    if has_hand:
        goals.append(f"* gradkern store-all / hand-written adjoint: {t_gk / t_hand:.2f}x (goal <= 1.2x: "
                     f"{'met' if t_gk <= 1.2 * t_hand else 'MISSED'})")
    s10 = ckpt(10)
    goals.append(s10_goal(mem[s10], mem[PRIMAL], state, rss_slack()) + f"; {t(s10) / t_gk:.2f}x gradkern "
                 f"store-all's time (goal <= 1.5x: {'met' if t(s10) <= 1.5 * t_gk else 'MISSED'})")
    for jk in [k for k in keys if k == JAX_SCAN or k.startswith(JAX_TWO)]:
        rivals = [k for k in keys if k.startswith("gk") and peak(k) <= peak(jk)]
        ahead = [k for k in rivals if t(k) < t(jk)]
        desc = ", ".join(f"{short_name(k, steps)} {t(k):.3f} s at {peak(k) / 1e6:.1f} MB" for k in rivals) or "none"
        faster = ", ".join(short_name(k, steps) for k in ahead) or "none"
        goals.append(f"* {row_name(jk, steps)} ({t(jk):.3f} s at {peak(jk) / 1e6:.1f} MB): gradkern rows at equal "
                     f"or lower memory: {desc}; ahead in time: {faster}")
    if args.quick:  # issue 33: --quick under a minute; CPU seconds, which the machine's load distorts less
        cpu = sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                  for f in ("ru_utime", "ru_stime"))
        wall = time.perf_counter() - STARTED
        goals.append(f"* --quick: {wall:.0f} s wall (imports excluded; goal < 60 s: {'met' if wall < 60 else 'MISSED'}"
                     f"), {cpu:.1f} CPU s with its children, at load {load_average():.2f} on {os.cpu_count()} cores")
    command = "python benchmarks/programs/checkpoint.py" + (" --quick" if args.quick else "") + \
        (f" --runs {args.runs}" if args.runs != 5 and not args.quick else "") + (" --write" if args.write else "")
    text = "\n".join([
        "## checkpoint.py", "",
        "Checkpointed loops (issues 16, 33): the gradient of the 1-D Allen-Cahn loop w.r.t. u0 and c, float64, T "
        "steps of one `allen_cahn_step` launch each over ping-pong buffers (step t: u -> v for even t, v -> u for "
        "odd t), then E = sum u^2 by a kernel. gradkern checkpointed: `gk.checkpointed_loop(step, T, snapshots=s)` "
        "with the default (binomial) schedule, or `memory=M` at each JAX two-level row's budget (M = that row's "
        "peak less the primal's peak and gradkern's two shadows; the row names the schedule memory= picked). "
        f"Time: median of {args.runs} interleaved runs in one process after a warm-up; every gradient checked "
        "against gradkern store-all's (rtol 1e-9). Peak memory: each row in a fresh subprocess, warmed up at "
        "N = 64 and 1024 (JAX rows at 64, then compiled ahead of time for the full size), then the kernel's RSS "
        "high-water mark during the first full-size call minus the RSS before it (MALLOC_MMAP_THRESHOLD_=65536 so "
        "freed arrays leave the RSS): everything the call allocates, its working buffers and outputs "
        "included, the inputs u0 and c not; the high-water mark is the kernel's batched RSS count, which may read "
        f"{rss_slack() // os.sysconf('SC_PAGE_SIZE')} pages ({rss_slack() / state:.2f} states) low, by an amount "
        "that varies from process to process (checkpoint.py's docstring). One state = N x 8 bytes. "
        "\"Snapshot peak\": the loop's own count of snapshot bytes (the tape's loop entry, split mode), in states.",
        "",
        *run_lines(command),
        f"* N = {n:,} (one state {state / 2 ** 20:.2f} MiB), T = {steps}; JAX: "
        f"{'installed' if have_jax else 'not run'}", "",
        "| method | time (s) | vs hand-written | vs gradkern store-all | peak memory (MB) | peak (states) | "
        "above primal (states) | arrays above primal (exact) | traced above primal (states, exact) | "
        "steps recomputed | snapshot peak (states) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|", *lines, "",
        "Goals of issues 16 and 33 (this run):", "", *goals, ""])
    publish(text, "## checkpoint.py", args.write)
    if args.write:
        png = HERE / "checkpoint.png"
        if plot(rows, png, f"Allen-Cahn gradient, N = {n:,} float64, T = {steps} ({os.cpu_count()} CPU cores)"):
            print(f"wrote {png}")


if __name__ == "__main__":
    main()
