"""Program shapes (issue 33, docs/programs.md "Program shapes"): the gradient of time loops other than
programs.py's ping-pong Allen-Cahn, each against a hand-written Numba store-all adjoint.

* inplace_1d: the 1-D Allen-Cahn step as two kernels, its right-hand side into a scratch array the program
  allocates (`np.empty_like(u)`), then `axpy` updating u in place: every step overwrites the state the
  previous step's reverse reads (a copy-on-write save that no launch writes itself). Loss E = sum u^2;
  the gradient w.r.t. u0 and c.
* wave_2d: the 2-D acoustic wave equation (`wave_step_2d`) over three rotating buffers, a point source
  (`add_source`, one thread) every step; loss E = sum u^2 of the last field; the gradient w.r.t. the
  velocity model and both initial fields (an inverse problem's shape).
* misfit_1d: programs.py's ping-pong Allen-Cahn with a misfit against data at m sensors after every step
  (`l2_misfit` of the new state against that step's row of observations): the loss accumulated every step.
* copy_2d: the 2-D Allen-Cahn step written as users write explicit updates, `u_old = u.copy()` (a host
  NumPy operation, which gradkern turns into a `gk.copy` launch) and then the step from u_old into u.
* pingpong_2d: the same 2-D step over ping-pong buffers (copy_2d without its copies: what they cost).

Each hand-written version stores every state in a (T + 1)-state buffer allocated once and kept between calls
(programs.py's convention), and its adjoint is one gather kernel per step over the stored states (Numba,
`prange`). In one process, interleaved, median of --runs after a warm-up; every hand-written gradient checked
against gradkern's first (rtol 1e-9). Peak memory: NumPy allocations during one more, untimed call
(tracemalloc), made after the buffers either side keeps between calls were given back, inputs excluded.
Host cost per step: the same loop at a size where the kernels take next to nothing. Per step: each kernel's
runs by role (observed launches) and the hand-written primal and adjoint, ms.

    NUMBA_NUM_THREADS=1 python benchmarks/programs/program_shapes.py             # N = 10**6 points, T = 50
    python benchmarks/programs/program_shapes.py --quick                         # small, a smoke test
    python benchmarks/programs/program_shapes.py --only wave_2d --write          # and write RESULTS.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (benchpath.py)
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path
from programs import _adjoint as _ac_adjoint  # programs.py's hand-written 1-D Allen-Cahn step and adjoint
from programs import _step as _ac_step
from report import publish, run_lines
from timing import interleaved, timed

import gradkern as gk
from gradkern.kernels import (
    add_source,
    allen_cahn_step,
    allen_cahn_step_2d,
    axpy,
    l2_misfit,
    sum_squares,
    sum_squares_2d,
    wave_step_2d,
)

DT = 1e-5
C = 0.2
WAVE_C = 0.1  # dt^2/h^2; stable for WAVE_C * max(vel)^2 <= 1/2 (vel <= 2 here)
AC2_C = 0.2  # dt/h^2 of the 2-D Allen-Cahn step (stable for <= 1/4)


@gk.kernel
def ac_rhs(u, f, c, dt):
    """f = c (u_{i-1} - 2u_i + u_{i+1}) + dt (u_i - u_i^3) inside, 0 at the ends (the step's increment)."""
    i = gk.tid()
    if i == 0 or i == u.shape[0] - 1:
        f[i] = 0.0
    else:
        ui = u[i]
        f[i] = c * (u[i - 1] - 2.0 * ui + u[i + 1]) + dt * (ui - ui ** 3)


# ---- hand-written kernels ---------------------------------------------------------------------------

@numba.njit(parallel=True, cache=True)
def _ac_rhs(u, f, c, dt):
    n = u.shape[0]
    for i in numba.prange(n):
        if i == 0 or i == n - 1:
            f[i] = 0.0
        else:
            ui = u[i]
            f[i] = c * (u[i - 1] - 2.0 * ui + u[i + 1]) + dt * (ui - ui ** 3)


@numba.njit(parallel=True, cache=True)
def _add(u, f, un):
    for i in numba.prange(u.shape[0]):
        un[i] = u[i] + f[i]


@numba.njit(cache=True)
def _misfit(u, sensors, obs):
    e = 0.0
    for k in range(sensors.shape[0]):
        d = u[sensors[k]] - obs[k]
        e += 0.5 * d * d
    return e


@numba.njit(cache=True)
def _misfit_adjoint(u, sensors, obs, du):
    for k in range(sensors.shape[0]):
        du[sensors[k]] += u[sensors[k]] - obs[k]


@numba.njit(parallel=True, cache=True)
def _wave(up, u, un, vel, c):
    nx, ny = u.shape
    for i in numba.prange(nx):
        for j in range(ny):
            if i == 0 or j == 0 or i == nx - 1 or j == ny - 1:
                un[i, j] = 0.0
            else:
                v = vel[i, j]
                un[i, j] = 2.0 * u[i, j] - up[i, j] + c * v * v * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1]
                                                                   + u[i, j + 1] - 4.0 * u[i, j])


@numba.njit(parallel=True, cache=True)
def _wave_adjoint(u, vel, a_next, a_cur, a_prev, dvel, c):
    """One leapfrog step's adjoint: g = a_next inside (the edges are set to 0); a_cur += 2g + Lap^T(c vel^2 g),
    a_prev = -g (stored: no earlier step reached it yet), dvel += 2 c vel g Lap(u)."""
    nx, ny = u.shape
    for i in numba.prange(nx):
        for j in range(ny):
            inside = i >= 1 and j >= 1 and i <= nx - 2 and j <= ny - 2
            g = a_next[i, j] if inside else 0.0
            v = vel[i, j]
            acc = 2.0 * g - 4.0 * c * v * v * g
            if i - 1 >= 1 and j >= 1 and j <= ny - 2:
                acc += c * vel[i - 1, j] ** 2 * a_next[i - 1, j]
            if i + 1 <= nx - 2 and j >= 1 and j <= ny - 2:
                acc += c * vel[i + 1, j] ** 2 * a_next[i + 1, j]
            if j - 1 >= 1 and i >= 1 and i <= nx - 2:
                acc += c * vel[i, j - 1] ** 2 * a_next[i, j - 1]
            if j + 1 <= ny - 2 and i >= 1 and i <= nx - 2:
                acc += c * vel[i, j + 1] ** 2 * a_next[i, j + 1]
            a_cur[i, j] += acc
            a_prev[i, j] = -g
            if inside:
                lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
                dvel[i, j] += 2.0 * c * v * g * lap


@numba.njit(parallel=True, cache=True)
def _ac2_step(u, un, c, dt):
    nx, ny = u.shape
    for i in numba.prange(nx):
        for j in range(ny):
            if i == 0 or j == 0 or i == nx - 1 or j == ny - 1:
                un[i, j] = u[i, j]
            else:
                uij = u[i, j]
                lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * uij
                un[i, j] = uij + c * lap + dt * (uij - uij ** 3)


@numba.njit(parallel=True, cache=True)
def _ac2_adjoint(u, dun, du, c, dt):
    """du = J^T dun for one 2-D Allen-Cahn step (du overwritten), and the step's dc."""
    nx, ny = u.shape
    dc = 0.0
    for i in numba.prange(nx):
        for j in range(ny):
            if i == 0 or j == 0 or i == nx - 1 or j == ny - 1:
                g = dun[i, j]
            else:
                uij = u[i, j]
                g = dun[i, j] * (1.0 - 4.0 * c + dt * (1.0 - 3.0 * uij * uij))
                dc += dun[i, j] * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * uij)
            if j >= 1 and j <= ny - 2:
                if i - 1 >= 1:
                    g += c * dun[i - 1, j]
                if i + 1 <= nx - 2:
                    g += c * dun[i + 1, j]
            if i >= 1 and i <= nx - 2:
                if j - 1 >= 1:
                    g += c * dun[i, j - 1]
                if j + 1 <= ny - 2:
                    g += c * dun[i, j + 1]
            du[i, j] = g
    return dc


# ---- the shapes -------------------------------------------------------------------------------------

class Shape:
    """One program shape: gradkern's gradient (`gradkern()`) and the hand-written one (`hand(parts)`), each
    returning the same tuple of arrays and floats; both keep their buffers between calls (`release()`)."""

    name = ""
    what = ""

    def __init__(self, n: int, steps: int):
        self.n, self.steps = n, steps
        self.rng = np.random.default_rng(0)
        self.kept: dict = {}

    def release(self) -> None:
        self.kept.clear()

    def buffers(self, key: str, make: Callable[[], tuple]) -> tuple:
        if key not in self.kept:
            self.kept[key] = make()
        return self.kept[key]


class InPlace1D(Shape):
    name = "inplace_1d"
    what = "1-D Allen-Cahn as rhs into a scratch array + in-place axpy, E = sum u^2"

    def __init__(self, n, steps):
        super().__init__(n, steps)
        self.u0 = self.rng.uniform(-0.9, 0.9, n)

    def program(self):
        steps = self.steps

        def simulate(u, E, c):
            n = u.shape[0]
            f = np.empty_like(u)
            for _ in range(steps):
                gk.launch(ac_rhs, n, u, f, c, DT)
                gk.launch(axpy, n, 1.0, f, u)
            gk.launch(sum_squares, n, u, E)
        return simulate

    def gradkern(self):
        n = self.n
        u, E, du, dE = self.buffers("gk", lambda: tuple(np.empty(k) for k in (n, 1, n, 1)))
        u[...] = self.u0
        E[...] = 0.0
        du[...] = 0.0
        dE[...] = 1.0
        g = gk.autodiff(self.program(), gk.Duplicated(u, du), gk.Duplicated(E, dE), gk.Active(C))
        return du.copy(), g[2]

    def hand(self, parts=None):
        n, T = self.n, self.steps
        states, f, adj, nxt = self.buffers("hand", lambda: (np.empty((T + 1, n)), np.empty(n), np.empty(n),
                                                            np.empty(n)))
        states[0] = self.u0
        t0 = time.perf_counter()
        for t in range(T):
            _ac_rhs(states[t], f, C, DT)
            _add(states[t], f, states[t + 1])
        t1 = time.perf_counter()
        np.multiply(states[T], 2.0, out=adj)
        dc = 0.0
        for t in range(T - 1, -1, -1):
            dc += _ac_adjoint(states[t], adj, nxt, C, DT)
            adj, nxt = nxt, adj
        _note(parts, t0, t1, T)
        return adj.copy(), dc


class Wave2D(Shape):
    name = "wave_2d"
    what = "2-D wave, 3 rotating buffers + a point source per step, E = sum u^2; d/d(vel, u0, u1)"

    def __init__(self, n, steps):
        super().__init__(n, steps)
        self.shape = (round(n ** 0.5),) * 2
        self.p0 = self.rng.uniform(-1.0, 1.0, self.shape)
        self.q0 = self.rng.uniform(-1.0, 1.0, self.shape)
        self.vel0 = self.rng.uniform(1.0, 2.0, self.shape)
        self.wavelet = np.sin(0.3 * np.arange(steps))
        self.src = (self.shape[0] // 2, self.shape[0] // 3)

    def program(self):
        steps, wavelet, (si, sj) = self.steps, self.wavelet, self.src

        def simulate(p, q, r, vel, E):
            dim = p.shape
            for t in range(steps):
                gk.launch(wave_step_2d, dim, p, q, r, vel, WAVE_C)
                gk.launch(add_source, 1, r, si, sj, float(wavelet[t]))
                p, q, r = q, r, p
            gk.launch(sum_squares_2d, dim, q, E)
        return simulate

    def gradkern(self):
        s = self.shape
        (p, q, r, vel, E, dp, dq, dr, dvel, dE) = self.buffers(
            "gk", lambda: tuple(np.empty(k) for k in (s, s, s, s, 1, s, s, s, s, 1)))
        p[...], q[...], r[...], vel[...], E[...] = self.p0, self.q0, 0.0, self.vel0, 0.0
        for a in (dp, dq, dr, dvel):
            a[...] = 0.0
        dE[...] = 1.0
        gk.autodiff(self.program(), gk.Duplicated(p, dp), gk.Duplicated(q, dq), gk.Duplicated(r, dr),
                    gk.Duplicated(vel, dvel), gk.Duplicated(E, dE))
        return dp.copy(), dq.copy(), dvel.copy()

    def hand(self, parts=None):
        s, T = self.shape, self.steps
        states, a0, a1, a2, dvel = self.buffers("hand", lambda: (np.empty((T + 2, *s)), np.empty(s), np.empty(s),
                                                                  np.empty(s), np.empty(s)))
        states[0], states[1] = self.p0, self.q0
        vel, (si, sj) = self.vel0, self.src
        t0 = time.perf_counter()
        for t in range(T):
            _wave(states[t], states[t + 1], states[t + 2], vel, WAVE_C)
            states[t + 2, si, sj] += self.wavelet[t]
        t1 = time.perf_counter()
        dvel[...] = 0.0
        complete, accum, store = a0, a1, a2
        np.multiply(states[T + 1], 2.0, out=complete)
        accum[...] = 0.0
        for m in range(T + 1, 1, -1):  # the step that made state m read states m-1 and m-2
            _wave_adjoint(states[m - 1], vel, complete, accum, store, dvel, WAVE_C)
            complete, accum, store = accum, store, complete
        _note(parts, t0, t1, T)
        return accum.copy(), complete.copy(), dvel.copy()


class Misfit1D(Shape):
    name = "misfit_1d"
    what = "1-D Allen-Cahn ping-pong, a misfit at m sensors after every step (loss summed over steps)"

    def __init__(self, n, steps):
        super().__init__(n, steps)
        self.u0 = self.rng.uniform(-0.9, 0.9, n)
        m = max(n // 1000, 4)
        self.sensors = np.linspace(1, n - 2, m).astype(np.int64)
        self.obs = self.rng.uniform(-0.5, 0.5, (steps, m))

    def program(self):
        steps, sensors, obs = self.steps, self.sensors, self.obs

        def simulate(u, v, E, c):
            n, m = u.shape[0], sensors.shape[0]
            for t in range(0, steps, 2):
                gk.launch(allen_cahn_step, n, u, v, c, DT)
                gk.launch(l2_misfit, m, v, sensors, obs[t], E)
                gk.launch(allen_cahn_step, n, v, u, c, DT)
                gk.launch(l2_misfit, m, u, sensors, obs[t + 1], E)
        return simulate

    def gradkern(self):
        n = self.n
        u, v, E, du, dv, dE = self.buffers("gk", lambda: tuple(np.empty(k) for k in (n, n, 1, n, n, 1)))
        u[...] = self.u0
        for a in (v, E, du, dv):
            a[...] = 0.0
        dE[...] = 1.0
        g = gk.autodiff(self.program(), gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Duplicated(E, dE),
                        gk.Active(C))
        return du.copy(), g[3]

    def hand(self, parts=None):
        n, T = self.n, self.steps
        states, adj, nxt = self.buffers("hand", lambda: (np.empty((T + 1, n)), np.empty(n), np.empty(n)))
        states[0] = self.u0
        t0 = time.perf_counter()
        e = 0.0
        for t in range(T):
            _ac_step(states[t], states[t + 1], C, DT)
            e += _misfit(states[t + 1], self.sensors, self.obs[t])
        t1 = time.perf_counter()
        adj[...] = 0.0
        dc = 0.0
        for t in range(T - 1, -1, -1):
            _misfit_adjoint(states[t + 1], self.sensors, self.obs[t], adj)
            dc += _ac_adjoint(states[t], adj, nxt, C, DT)
            adj, nxt = nxt, adj
        _note(parts, t0, t1, T)
        return adj.copy(), dc


class Copy2D(Shape):
    name = "copy_2d"
    what = "2-D Allen-Cahn as `u_old = u.copy()` (host op) then the step u_old -> u, E = sum u^2"

    def __init__(self, n, steps):
        super().__init__(n, steps)
        self.shape = (round(n ** 0.5),) * 2
        self.u0 = self.rng.uniform(-0.9, 0.9, self.shape)

    def program(self):
        steps = self.steps

        def simulate(u, E, c):
            for _ in range(steps):
                u_old = u.copy()
                gk.launch(allen_cahn_step_2d, u.shape, u_old, u, c, DT)
            gk.launch(sum_squares_2d, u.shape, u, E)
        return simulate

    def gradkern(self):
        s = self.shape
        u, E, du, dE = self.buffers("gk", lambda: tuple(np.empty(k) for k in (s, 1, s, 1)))
        u[...] = self.u0
        E[...] = 0.0
        du[...] = 0.0
        dE[...] = 1.0
        g = gk.autodiff(self.program(), gk.Duplicated(u, du), gk.Duplicated(E, dE), gk.Active(AC2_C))
        return du.copy(), g[2]

    def hand(self, parts=None):
        s, T = self.shape, self.steps
        states, adj, nxt = self.buffers("hand", lambda: (np.empty((T + 1, *s)), np.empty(s), np.empty(s)))
        states[0] = self.u0
        t0 = time.perf_counter()
        for t in range(T):
            _ac2_step(states[t], states[t + 1], AC2_C, DT)
        t1 = time.perf_counter()
        np.multiply(states[T], 2.0, out=adj)
        dc = 0.0
        for t in range(T - 1, -1, -1):
            dc += _ac2_adjoint(states[t], adj, nxt, AC2_C, DT)
            adj, nxt = nxt, adj
        _note(parts, t0, t1, T)
        return adj.copy(), dc


class PingPong2D(Copy2D):
    name = "pingpong_2d"
    what = "2-D Allen-Cahn over ping-pong buffers (copy_2d without the copy), E = sum u^2"

    def program(self):
        steps = self.steps

        def simulate(u, v, E, c):
            for _ in range(steps // 2):
                gk.launch(allen_cahn_step_2d, u.shape, u, v, c, DT)
                gk.launch(allen_cahn_step_2d, u.shape, v, u, c, DT)
            gk.launch(sum_squares_2d, u.shape, u, E)
        return simulate

    def gradkern(self):
        s = self.shape
        u, v, E, du, dv, dE = self.buffers("gk", lambda: tuple(np.empty(k) for k in (s, s, 1, s, s, 1)))
        u[...] = self.u0
        for a in (v, E, du, dv):
            a[...] = 0.0
        dE[...] = 1.0
        g = gk.autodiff(self.program(), gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Duplicated(E, dE),
                        gk.Active(AC2_C))
        return du.copy(), g[3]


SHAPES = {s.name: s for s in (InPlace1D, Wave2D, Misfit1D, Copy2D, PingPong2D)}


def _note(parts, t0: float, t1: float, steps: int) -> None:
    if parts is not None:
        parts.setdefault("hand primal", []).append((t1 - t0) / steps)
        parts.setdefault("hand adjoint", []).append((time.perf_counter() - t1) / steps)


def _same(name: str, got: tuple, ref: tuple) -> None:
    for k, (a, b) in enumerate(zip(got, ref, strict=True)):
        if isinstance(b, np.ndarray):
            scale = np.max(np.abs(b))
            assert np.allclose(a, b, rtol=1e-9, atol=1e-12 * scale), (name, k, np.max(np.abs(a - b)), scale)
        else:
            assert abs(a - b) <= 1e-9 * max(abs(b), 1e-30), (name, k, a, b)


def peak_memory(shape: Shape, f) -> int:
    """Peak bytes NumPy allocated during one call (untimed), the buffers kept between calls given back."""
    gk.release_memory()
    shape.release()
    tracemalloc.start()
    tracemalloc.reset_peak()
    f()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def step_parts(shape: Shape, rounds: int = 3) -> dict[str, float]:
    """Median ms per step of gradkern's runs by kernel and role (observed launches; each call's sum over
    its launches divided by the steps), and of the hand-written primal and adjoint, interleaved."""
    from gradkern.runtime.call import observing
    parts: dict[str, list[float]] = {}
    for _ in range(rounds):
        call: dict[str, float] = {}

        def observe(run, dim, seconds, call=call):
            key = run.spec.typed.name  # the kernel's name and its role (ac_rhs_gather)
            call[key] = call.get(key, 0.0) + seconds
        with observing(observe):
            shape.gradkern()
        for k, v in call.items():
            parts.setdefault(f"gk {k}", []).append(v / shape.steps)
        shape.hand(parts)
    return {k: statistics.median(v) * 1e3 for k, v in parts.items()}


def measure(cls, n: int, steps: int, runs: int) -> dict:
    gk.release_memory()  # each shape from the same state: none of the earlier shapes' kept buffers
    shape = cls(n, steps)
    shape.gradkern()  # warm-up: compiles, and fills the save pool and the replays as a user's loop would
    ref = shape.gradkern()
    _same(shape.name, shape.hand(), ref)
    times = interleaved({"gk": timed(shape.gradkern), "hand": timed(shape.hand)}, runs)
    peaks = {"gk": peak_memory(shape, shape.gradkern), "hand": peak_memory(shape, shape.hand)}
    small = cls(64, steps)  # 8 x 8 for the 2-D shapes
    small.gradkern()
    host = interleaved({"gk": timed(small.gradkern)}, max(runs, 5))
    parts = step_parts(shape)
    shape.release()  # the next shape runs without this one's buffers
    return {"shape": shape, "gk": statistics.median(times["gk"]), "hand": statistics.median(times["hand"]),
            "peaks": peaks, "host_us": statistics.median(host["gk"]) / steps * 1e6, "parts": parts}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=1_000_000, help="points per state (2-D shapes: the nearest square)")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--only", action="append", choices=sorted(SHAPES), help="run only these shapes")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--write", action="store_true")
    args = p.parse_args()
    if args.quick:
        args.n, args.steps, args.runs = 1024, 6, 2
    steps = args.steps + args.steps % 2
    names = args.only or list(SHAPES)
    results = []
    for name in names:
        r = measure(SHAPES[name], args.n, steps, args.runs)
        results.append(r)
        print(f"{name}: gradkern {r['gk']:.3f} s, hand {r['hand']:.3f} s, {r['gk'] / r['hand']:.2f}x", flush=True)
    rows, notes = [], []
    for r in results:
        s = r["shape"]
        pk = r["peaks"]
        rows.append(f"| {s.name} | {s.what} | {r['gk']:.3f} | {r['hand']:.3f} | {r['gk'] / r['hand']:.2f} | "
                    f"{pk['gk'] / 1e6:.0f} | {pk['hand'] / 1e6:.0f} | {pk['gk'] / pk['hand']:.2f} | "
                    f"{r['host_us']:.0f} |")
        notes.append(f"- {s.name}: " + ", ".join(f"{k} {v:.3f}" for k, v in r["parts"].items()) + ".")
    command = "python benchmarks/programs/program_shapes.py" + "".join(f" --only {n}" for n in args.only or ())
    text = "\n".join([
        "## program_shapes.py", "",
        "The gradient of time-loop programs of several shapes (docs/programs.md, \"Program shapes\"), each "
        "against a hand-written Numba store-all adjoint (states preallocated and kept between calls, one "
        f"gather per step), float64. Median of {args.runs} interleaved runs after a warm-up; every gradient "
        "checked against gradkern's first (rtol 1e-9). Peak memory: NumPy allocations during one call "
        "(tracemalloc), inputs excluded. Host: gradkern's time per step of the same loop at 64 points.", "",
        *run_lines(f"{command}{' --write' if args.write else ''}"),
        f"* N = {args.n:,} points a state (2-D: the nearest square), T = {steps}; "
        f"Numba threads: {numba.get_num_threads()}", "",
        "| shape | program | gradkern (s) | hand-written (s) | gradkern / hand | peak MB | hand peak MB | "
        "memory vs hand | host us/step |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|", *rows, "",
        "Per step (ms, median of 3 interleaved calls; gradkern's by kernel and role, observed launches):", *notes,
        ""])
    publish(text, "## program_shapes.py", args.write)


if __name__ == "__main__":
    main()
