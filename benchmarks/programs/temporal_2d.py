"""Temporal blocking of a 2-D stencil step on the CPU (issue 33 item 2; docs/checkpointed-loops.md, "2-D steps"):
k steps of the library's `allen_cahn_step_2d` (5-point Laplacian, edges kept) over an nx x ny state, tiles as
bands of whole rows (a band plus its halo of k rows in two scratch bands of a worker's L2).

Rows, each the time of advancing one state by k steps (median of --rounds interleaved rounds; one thread:
`time.process_time`, two: wall time), both buffers checked bit for bit:

* `hand x k`: k launches of a hand-written Numba step (each thread a contiguous run of rows, a row's inner loop
  over plain row views, which vectorises);
* `hand blocked k`: a hand-written temporally blocked pass of all k steps (bands of --band rows, the same row
  loop), state k into a third buffer;
* `gk x k`: k prepared `gk.launch`es of `allen_cahn_step_2d` over ping-pong buffers (a recomputation with
  GRADKERN_TEMPORAL=0);
* `gk blocked k`: the same launches through gradkern's generated blocked form (runtime/blocked.py: k - 1 steps in
  one pass and the last launch as prepared, k even), bands of its default rows (`BAND_BYTES`) unless --band.

    python benchmarks/programs/temporal.py --2d                 # 2048^2 and 4096^2, k = 4, 8, 16
    python benchmarks/programs/temporal.py --2d --loop          # a checkpointed loop of the 2-D step
    python benchmarks/programs/temporal.py --3d --sizes 128,256  # heat_step_3d over sizes x 128 x 128, gk only
"""

from __future__ import annotations

import statistics
import time

import numba
import numpy as np
from timing import interleaved, load_average, timed

import gradkern as gk
from gradkern.kernels import allen_cahn_step_2d, heat_step_3d
from gradkern.runtime import blocked as gk_blocked
from gradkern.runtime.call import prepare
from gradkern.runtime.launch import run as gk_run

DT = 1e-5
C = 0.2


@numba.njit(cache=True)
def _rows(src, s0, dst, d0, a, b, nx, c, dt):
    """dst[g - d0] = one step at rows g in [a, b), reading src rows g - s0 and g - s0 ± 1; edges copied."""
    ny = src.shape[1]
    for g in range(a, b):
        y = dst[g - d0]
        x = src[g - s0]
        if g == 0 or g == nx - 1:
            for j in range(ny):
                y[j] = x[j]
            continue
        up = src[g - 1 - s0]
        dn = src[g + 1 - s0]
        y[0] = x[0]
        y[ny - 1] = x[ny - 1]
        for j in range(1, ny - 1):
            uij = x[j]
            lap = up[j] + dn[j] + x[j - 1] + x[j + 1] - 4.0 * uij
            y[j] = uij + c * lap + dt * (uij - uij ** 3)


@numba.njit(cache=True)
def _bands(u, out, k, band, first, last, scratch, c, dt):
    """Bands first … last-1: k steps of each, its halo of k rows included, in `scratch`; state k into out."""
    nx = u.shape[0]
    for t in range(first, last):
        i0 = t * band
        i1 = min(i0 + band, nx)
        lo = max(i0 - k, 0)
        hi = min(i1 + k, nx)
        for s in range(k):
            a = lo + s + 1 if lo > 0 else 0
            b = hi - s - 1 if hi < nx else nx
            if s == k - 1:
                _rows(u if s == 0 else scratch[(s - 1) % 2], 0 if s == 0 else lo, out, 0, i0, i1, nx, c, dt)
            elif s == 0:
                _rows(u, 0, scratch[0], lo, a, b, nx, c, dt)
            else:
                _rows(scratch[(s - 1) % 2], lo, scratch[s % 2], lo, a, b, nx, c, dt)


@numba.njit(parallel=True)  # not cached: Numba cannot cache it (dynamic globals)
def hand_blocked(u, out, k, band, c, dt):
    """k steps from u into out in one pass: each thread a contiguous run of bands of `band` rows."""
    nx = u.shape[0]
    nb = (nx + band - 1) // band
    parts = numba.get_num_threads()
    for p in numba.prange(parts):
        _bands(u, out, k, band, p * nb // parts, (p + 1) * nb // parts, np.empty((2, band + 2 * k, u.shape[1])),
               c, dt)


@numba.njit(parallel=True)  # not cached: Numba cannot cache it (dynamic globals)
def hand_step(u, un, c, dt):
    """One step u -> un, each thread a contiguous run of rows."""
    nx = u.shape[0]
    parts = numba.get_num_threads()
    for p in numba.prange(parts):
        _rows(u, 0, un, 0, p * nx // parts, (p + 1) * nx // parts, nx, c, dt)


def _ping_pong(step, u, v, k):
    for s in range(k):
        step(u, v, C, DT) if s % 2 == 0 else step(v, u, C, DT)


def measure(u0, k: int, band: int | None, rounds: int, clock) -> dict[str, float]:
    """The four ways of advancing u0 by k steps (module doc), checked bit for bit, timed interleaved; medians."""
    u, v, out = np.empty_like(u0), np.empty_like(u0), np.empty_like(u0)

    def reset():
        u[...] = u0
        v[...] = 0.0

    launches = [prepare(allen_cahn_step_2d, (u, v, C, DT) if s % 2 == 0 else (v, u, C, DT), u0.shape, "cpu",
                        "launch")[1] for s in range(k)]
    form = gk_blocked.blocked_step(allen_cahn_step_2d, launches[0], 0, 1)
    assert not isinstance(form, str), form
    gk_blocked.BAND_ROWS = band

    def gk_steps():
        for bound in launches:
            gk_run(bound.call, bound)

    reset()
    gk_steps()
    both = u.copy(), v.copy()
    hand_band = band or gk_blocked._tile(u0)
    hand_blocked(u0, out, k, hand_band, C, DT)
    assert np.array_equal(out, both[k % 2]), "the hand-written blocked pass differs from the launches"
    reset()
    _ping_pong(hand_step, u, v, k)
    assert np.array_equal(u, both[0]) and np.array_equal(v, both[1]), "the hand-written step differs"
    reset()
    form.run(launches)
    assert np.array_equal(u, both[0]) and np.array_equal(v, both[1]), "the generated blocked form differs"
    del both
    times = interleaved({
        "hand": timed(lambda: _ping_pong(hand_step, u, v, k), clock=clock, setup=reset),
        "hand_blocked": timed(lambda: hand_blocked(u, out, k, hand_band, C, DT), clock=clock, setup=reset),
        "gk": timed(gk_steps, clock=clock, setup=reset),
        "gk_blocked": timed(lambda: form.run(launches), clock=clock, setup=reset),
    }, rounds)
    gk_blocked.BAND_ROWS = None
    return {name: statistics.median(t[1:] if len(t) > 2 else t) for name, t in times.items()} | {"band": hand_band}


def table(edges: list[int], ks: list[int], threads: list[int], band: int | None, rounds: int) -> list[str]:
    lines = ["| state | MiB | threads | k | band rows | hand x k (ms) | hand blocked k (ms) | gk x k (ms) | "
             "gk blocked k (ms) | gk x k / gk blocked | hand x k / hand blocked | gk blocked / hand blocked |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n in edges:
        u0 = np.random.default_rng(0).uniform(-0.9, 0.9, (n, n))
        for nt in threads:
            numba.set_num_threads(nt)
            for k in ks:
                m = measure(u0, k, band, rounds, time.process_time if nt == 1 else time.perf_counter)
                lines.append(f"| {n}^2 | {n * n * 8 / 2**20:g} | {nt} | {k} | {m['band']} | {m['hand'] * 1e3:.1f} | "
                             f"{m['hand_blocked'] * 1e3:.1f} | {m['gk'] * 1e3:.1f} | {m['gk_blocked'] * 1e3:.1f} | "
                             f"{m['gk'] / m['gk_blocked']:.2f} | {m['hand'] / m['hand_blocked']:.2f} | "
                             f"{m['gk_blocked'] / m['hand_blocked']:.2f} |")
                print(lines[-1], f"(load {load_average():.2f})", flush=True)
    return lines


def table_3d(sizes: list[int], ks: list[int], band: int | None, rounds: int) -> list[str]:
    """k prepared launches of the library's `heat_step_3d` (7 points, faces kept) over n x 128 x 128 against the
    same launches through the generated blocked form (bands of planes), one thread, process time; bit for bit."""
    numba.set_num_threads(1)
    lines = ["| state | MiB | k | band planes | gk x k (ms) | gk blocked k (ms) | gk x k / gk blocked |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for n in sizes:
        u0 = np.random.default_rng(0).uniform(-0.9, 0.9, (n, 128, 128))
        u, v = np.empty_like(u0), np.empty_like(u0)
        for k in ks:
            launches = [prepare(heat_step_3d, (u, v, 0.1) if s % 2 == 0 else (v, u, 0.1), u0.shape, "cpu",
                                "launch")[1] for s in range(k)]
            form = gk_blocked.blocked_step(heat_step_3d, launches[0], 0, 1)
            assert not isinstance(form, str), form
            gk_blocked.BAND_ROWS = band

            def reset(u=u, v=v, u0=u0):
                u[...] = u0
                v[...] = 0.0

            def gk_steps(launches=launches):
                for bound in launches:
                    gk_run(bound.call, bound)

            reset()
            gk_steps()
            both = u.copy(), v.copy()
            reset()
            form.run(launches)
            assert np.array_equal(u, both[0]) and np.array_equal(v, both[1]), "the generated blocked form differs"
            times = interleaved({"gk": timed(gk_steps, clock=time.process_time, setup=reset),
                                 "gk_blocked": timed(lambda form=form, launches=launches: form.run(launches),
                                                     clock=time.process_time, setup=reset)}, rounds)
            m = {name: statistics.median(t) for name, t in times.items()}
            lines.append(f"| {n}x128x128 | {u0.nbytes / 2**20:g} | {k} | {band or gk_blocked._tile(u0)} | "
                         f"{m['gk'] * 1e3:.1f} | {m['gk_blocked'] * 1e3:.1f} | {m['gk'] / m['gk_blocked']:.2f} |")
            print(lines[-1], f"(load {load_average():.2f})", flush=True)
            gk_blocked.BAND_ROWS = None
    return lines


@gk.kernel
def sum_squares_2d(u, E):
    i, j = gk.tid()
    gk.atomic_add(E, 0, u[i, j] * u[i, j])


def gradkern_args(u0, c):
    """checkpoint.py's `gradkern_args` for a 2-D state."""
    return (gk.Duplicated(u0.copy(), np.zeros_like(u0)), gk.Duplicated(np.zeros_like(u0), np.zeros_like(u0)),
            gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(c))


def program(steps: int, snapshots: int):
    """checkpoint.py's loop in 2-D (temporal.py --2d --loop): step t launches u -> v (t even) or v -> u (t odd);
    E = sum u^2 after it."""
    def simulate(u, v, E, c):
        def step(t):
            if t % 2 == 0:
                gk.launch(allen_cahn_step_2d, u.shape, u, v, c, DT)
            else:
                gk.launch(allen_cahn_step_2d, u.shape, v, u, c, DT)
        gk.checkpointed_loop(step, steps, snapshots=snapshots)
        gk.launch(sum_squares_2d, u.shape, u, E)
    return simulate
