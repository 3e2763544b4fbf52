"""Temporal blocking on the CPU (issue 33 item 2, the moonshot): does recomputing k steps of the
1-D Allen-Cahn stencil per pass over cache-sized tiles beat k sequential launches?

A checkpointed loop's untaped recomputation (docs/checkpointed-loops.md) advances a restored snapshot
by k steps whose intermediate states nobody reads: only the last one is needed. k sequential launches
stream the whole state through memory k times (read u, write v, per step). A temporally blocked pass
streams it once: each thread takes a tile of B points plus a halo of k on each side (overlapped
tiles: the halo is recomputed by both neighbours), runs the k steps inside two scratch buffers of
B + 2k points that stay in its L2, each step one point narrower at an artificial tile end (the
trapezoid: the points a step can still compute correctly from the tile's halo), and writes the tile's
B points of state k. At a global end the step's own boundary rule (un[0] = u[0]) applies. The blocked
pass does the same arithmetic on the same operands in the same order, so its result is bit-identical
to the sequential launches' (checked).

Rows, each the time of advancing one state by k steps (median of --rounds interleaved rounds), at
state sizes that fit in L2, in L3, and far beyond L3, with 1 and 2 Numba threads:

* `hand _step x k`: k launches of programs.py's hand-written step (the reference, one `prange` loop
  with the boundary test inside);
* `sweep x k`: k launches of this file's untiled sweep (each thread a contiguous chunk, the same
  branch-free interior loop as the blocked pass): the blocked pass's exact sequential twin;
* `blocked k`: one temporally blocked pass, tiles of --tile points.
* `gk x k`: k `gk.launch`es of gradkern's own `allen_cahn_step` (the library's) over ping-pong buffers, prepared
  once (`runtime/launch.run`): what a checkpointed loop's recomputation runs with GRADKERN_TEMPORAL=0;
* `gk blocked k`: the same k prepared launches through gradkern's generated blocked form
  (transforms/temporal.py, runtime/blocked.py): k - 1 steps in one blocked pass and the last launch as
  prepared (k even), so both buffers end as the k launches leave them; what the recomputation runs.

    python benchmarks/programs/temporal.py             # the table
    python benchmarks/programs/temporal.py --quick     # small sizes only, a few seconds
    python benchmarks/programs/temporal.py --write     # and replace its section of RESULTS.md
    python benchmarks/programs/temporal.py --loop --sizes 16777216 --steps 100 --snapshots 4,10
        # a checkpointed loop's gradient (checkpoint.py's program) with and without blocking, interleaved
    python benchmarks/programs/temporal.py --2d [--loop] [--sizes 2048,4096]
        # the 2-D step (temporal_2d.py: bands of rows; --sizes are edges of square states)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (benchpath.py)
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path
from programs import _step
from report import publish, run_lines
from timing import interleaved, load_average, timed

from gradkern.kernels import allen_cahn_step
from gradkern.runtime import blocked as gk_blocked
from gradkern.runtime.call import prepare
from gradkern.runtime.launch import run as gk_run

DT = 1e-5
C = 0.2
SECTION = "## temporal.py"


@numba.njit(cache=True)
def _stencil(src, s0, dst, d0, a, b, n, c, dt):
    """dst[g - d0] = one Allen-Cahn step at global points g in [a, b), reading src[g - s0 ± 1]; the global
    ends copy (un[0] = u[0], un[n-1] = u[n-1]). Its own function, called per chunk or tile: Numba compiles it
    outside the parallel region, where its loop vectorises."""
    if a == 0:
        dst[-d0] = src[-s0]
        a = 1
    if b == n:
        dst[n - 1 - d0] = src[n - 1 - s0]
        b = n - 1
    x = src[a - 1 - s0:b + 1 - s0]  # views: indices from 0 up need no negative-index test, so the loop vectorises
    y = dst[a - d0:b - d0]
    for j in range(b - a):
        ui = x[j + 1]
        y[j] = ui + c * (x[j] - 2.0 * ui + x[j + 2]) + dt * (ui - ui ** 3)


@numba.njit(cache=True)
def _tiles(u, out, k, tile, first, last, scratch, c, dt):
    """Tiles first … last-1: k steps of each, its halo of k included, in `scratch`; state k into out."""
    n = u.shape[0]
    for t in range(first, last):
        i0 = t * tile
        i1 = min(i0 + tile, n)
        lo = max(i0 - k, 0)
        hi = min(i1 + k, n)
        for s in range(k):
            # after step s + 1 a point is right if its stencil's reach, s + 1, stays inside [lo, hi) or meets
            # a global end
            a = lo + s + 1 if lo > 0 else 0
            b = hi - s - 1 if hi < n else n
            src, s0 = (u, 0) if s == 0 else (scratch[(s - 1) % 2], lo)
            if s == k - 1:
                _stencil(src, s0, out, 0, i0, i1, n, c, dt)
            else:
                _stencil(src, s0, scratch[s % 2], lo, a, b, n, c, dt)


@numba.njit(parallel=True, cache=True)
def sweep(u, un, c, dt):
    """One step u -> un, each thread a contiguous chunk (the loop of `blocked`'s tiles)."""
    n = u.shape[0]
    parts = numba.get_num_threads()
    for p in numba.prange(parts):
        _stencil(u, 0, un, 0, p * n // parts, (p + 1) * n // parts, n, c, dt)


@numba.njit(parallel=True, cache=True)
def blocked(u, out, k, tile, c, dt):
    """k steps from u into out in one pass: each thread a contiguous run of tiles of `tile` points, each tile
    with a halo of k, stepped in two scratch buffers of tile + 2k points (its L2), state k written to out."""
    n = u.shape[0]
    ntiles = (n + tile - 1) // tile
    parts = numba.get_num_threads()
    for p in numba.prange(parts):
        _tiles(u, out, k, tile, p * ntiles // parts, (p + 1) * ntiles // parts, np.empty((2, tile + 2 * k)), c, dt)


def steps(step, u, v, k):
    """k launches of `step` over ping-pong buffers: state k in u for even k, in v for odd."""
    for s in range(k):
        if s % 2 == 0:
            step(u, v, C, DT)
        else:
            step(v, u, C, DT)


def measure(u0, k: int, tile: int, rounds: int) -> dict[str, float]:
    """The three ways of advancing u0 by k steps, checked bit for bit against each other, then timed in
    `rounds` interleaved rounds (each run from u0); their medians in seconds."""
    n = u0.size
    u, v, out = np.empty(n), np.empty(n), np.empty(n)

    def reset():
        u[...] = u0

    reset()
    steps(sweep, u, v, k)
    ref = (u if k % 2 == 0 else v).copy()
    reset()
    steps(_step, u, v, k)
    assert np.array_equal(ref, u if k % 2 == 0 else v), "hand _step and sweep differ"
    blocked(u0, out, k, tile, C, DT)
    assert np.array_equal(ref, out), (n, k, "the blocked pass differs from the sequential launches")
    launches = [prepare(allen_cahn_step, (u, v, C, DT) if s % 2 == 0 else (v, u, C, DT), n, "cpu", "launch")[1]
                for s in range(k)]
    form = gk_blocked.blocked_step(allen_cahn_step, launches[0], 0, 1)
    assert not isinstance(form, str), form
    gk_blocked.TILE = tile

    def gk_steps():
        for bound in launches:
            gk_run(bound.call, bound)

    reset()
    gk_steps()
    assert np.array_equal(ref, u if k % 2 == 0 else v), "gradkern's launches differ"
    both = u.copy(), v.copy()
    reset()
    form.run(launches)
    assert np.array_equal(both[0], u) and np.array_equal(both[1], v), "the generated blocked form differs"
    del ref, both
    times = interleaved({
        "hand": timed(lambda: steps(_step, u, v, k), setup=reset),
        "sweep": timed(lambda: steps(sweep, u, v, k), setup=reset),
        "blocked": timed(lambda: blocked(u, out, k, tile, C, DT), setup=reset),
        "gk": timed(gk_steps, setup=reset),
        "gk_blocked": timed(lambda: form.run(launches), setup=reset),
    }, rounds)
    return {name: statistics.median(t) for name, t in times.items()}


def table(sizes: list[int], ks: list[int], threads: list[int], tile: int, rounds: int) -> tuple[list[str], list]:
    lines = ["| state (MiB) | threads | k | hand _step x k (ms) | sweep x k (ms) | blocked k (ms) | "
             "sweep / blocked | hand / blocked | blocked GB/s (state in + out) | gk x k (ms) | gk blocked k (ms) | "
             "gk x k / gk blocked | gk blocked / blocked |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    rows = []
    for n in sizes:
        u0 = np.random.default_rng(0).uniform(-0.9, 0.9, n)
        for nt in threads:
            numba.set_num_threads(nt)
            for k in ks:
                m = measure(u0, k, tile, rounds)
                rows.append({"n": n, "threads": nt, "k": k, **m})
                gbs = 2 * n * 8 / m["blocked"] / 1e9
                lines.append(f"| {n * 8 / 2**20:g} | {nt} | {k} | {m['hand'] * 1e3:.2f} | {m['sweep'] * 1e3:.2f} | "
                             f"{m['blocked'] * 1e3:.2f} | {m['sweep'] / m['blocked']:.2f} | "
                             f"{m['hand'] / m['blocked']:.2f} | {gbs:.1f} | {m['gk'] * 1e3:.2f} | "
                             f"{m['gk_blocked'] * 1e3:.2f} | {m['gk'] / m['gk_blocked']:.2f} | "
                             f"{m['gk_blocked'] / m['blocked']:.2f} |")
                print(lines[-1], f"(load {load_average():.2f})", flush=True)
    return lines, rows


def loop_table(sizes: list[int], steps: int, snapshots: list[int], rounds: int, planar: bool = False) -> list[str]:
    """checkpoint.py's loop (one Allen-Cahn launch per step over ping-pong buffers, E = sum u^2 after it) under
    `gk.checkpointed_loop(snapshots=s)`: its gradient with the recomputation's launches blocked and with
    GRADKERN_TEMPORAL=0 (the module flag switched between runs), interleaved; checked bit for bit. `planar`:
    temporal_2d.py's 2-D loop over states of sizes x sizes, timed in process time (one thread)."""
    if planar:
        from temporal_2d import gradkern_args, program
    else:
        from checkpoint import gradkern_args, program
    clock = time.process_time if planar else time.perf_counter

    import gradkern as gk
    from gradkern.program import checkpoint as gk_checkpoint

    lines = ["| state (MiB) | steps | snapshots | steps recomputed | launches blocked | gradient, not blocked (s) | "
             "gradient, blocked (s) | not blocked / blocked |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n in sizes:
        u0 = np.random.default_rng(0).uniform(-0.9, 0.9, (n, n) if planar else n)
        for s in snapshots:
            f = program(steps, s)
            kinds = (gk.Duplicated, gk.Duplicated, gk.Duplicated, gk.Active)
            got: dict[bool, tuple] = {}

            def gradient(flag: bool, f=f, kinds=kinds, u0=u0, got=got) -> None:
                gk_checkpoint.TEMPORAL = flag
                fwd, rev = gk.autodiff_thunk(f, *kinds)
                args = gradkern_args(u0, C)
                tape = fwd(*args)
                dc = rev(*args, tape)[3]
                loop = next(x for x in tape.steps if x.kernel == "checkpointed_loop")
                got[flag] = (args[0].dval, args[1].dval, dc, loop.stats)

            for flag in (False, True):
                gradient(flag)
            assert all(np.array_equal(a, b) for a, b in zip(got[False][:3], got[True][:3])), "gradients differ"
            stats = got[True][3]
            got.clear()
            times = interleaved({"off": timed(lambda: gradient(False), clock=clock),
                                 "on": timed(lambda: gradient(True), clock=clock)}, rounds)
            gk_checkpoint.TEMPORAL = True
            off, on = statistics.median(times["off"]), statistics.median(times["on"])
            lines.append(f"| {u0.nbytes / 2**20:g} | {steps} | {s} | {stats.steps_recomputed} | "
                         f"{stats.steps_blocked} | {off:.2f} | {on:.2f} | {off / on:.2f} |")
            print(lines[-1], f"(load {load_average():.2f})", flush=True)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, k = 4 and 16, 3 rounds")
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=None,
                    help="state sizes in points, comma-separated (default 2**17, 2**21, 2**24, 2**27)")
    ap.add_argument("--ks", type=lambda s: [int(x) for x in s.split(",")], default=[4, 16])
    ap.add_argument("--threads", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2])
    ap.add_argument("--tile", type=int, default=16384, help="tile points (default 16384: 2 x 128 KiB of scratch)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--write", action="store_true", help="replace this script's section of RESULTS.md")
    ap.add_argument("--loop", action="store_true", help="a checkpointed loop's gradient with and without blocking")
    ap.add_argument("--steps", type=int, default=100, help="--loop: the loop's steps")
    ap.add_argument("--snapshots", type=lambda s: [int(x) for x in s.split(",")], default=[4, 10])
    ap.add_argument("--2d", dest="planar", action="store_true", help="the 2-D step (temporal_2d.py)")
    ap.add_argument("--3d", dest="volume", action="store_true", help="the 3-D heat step (temporal_2d.py)")
    ap.add_argument("--band", type=int, default=None, help="--2d: band rows (default: runtime/blocked.py's)")
    args = ap.parse_args()
    if args.volume:
        import temporal_2d
        temporal_2d.table_3d(args.sizes or [128, 256], args.ks if args.ks != [4, 16] else [4, 8, 16], args.band,
                             args.rounds)
        return
    if args.planar:
        import temporal_2d
        if args.loop:
            loop_table(args.sizes or [1024], args.steps, args.snapshots, args.rounds, planar=True)
        else:
            threads = [t for t in args.threads if t <= numba.config.NUMBA_NUM_THREADS]
            temporal_2d.table(args.sizes or [2048, 4096], args.ks if args.ks != [4, 16] else [4, 8, 16], threads,
                              args.band, args.rounds)
        return
    if args.loop:
        loop_table(args.sizes or [2**24], args.steps, args.snapshots, args.rounds)
        return
    sizes = args.sizes or ([2**14, 2**17] if args.quick else [2**17, 2**21, 2**24, 2**27])
    rounds = 3 if args.quick else args.rounds
    threads = [t for t in args.threads if t <= numba.config.NUMBA_NUM_THREADS]
    command = "python benchmarks/programs/temporal.py " + " ".join(sys.argv[1:])
    lines, _ = table(sizes, args.ks, threads, args.tile, rounds)
    text = "\n".join([SECTION, "", __doc__.split("\n\n")[1].replace("\n", " ").strip(), "",
                      *run_lines(command.strip()), "", *lines])
    publish(text, SECTION, args.write)


if __name__ == "__main__":
    main()
