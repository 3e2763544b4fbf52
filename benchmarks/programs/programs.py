"""A program's gradient (issue 15, docs/programs.md): the 1-D Allen-Cahn loop over
ping-pong buffers, T launches of `gradkern.kernels.allen_cahn_step`, then a loss
kernel E = sum u^2; the gradient of E w.r.t. the initial state and c.

Three ways, in one process, median of --runs after a warm-up; gradkern and the hand-written adjoint
interleaved, then JAX's runs on their own (a JAX call leaves work behind that the next method timed would pay;
main() says what was measured):
* gradkern: `gk.autodiff(program, ...)`: recording (every launch prepared and
  run as its augmented primal, copy-on-write saves of overwritten states), then
  the reverse sweep;
* hand-written store-all (Numba, `prange`): the primal writes every state into
  a (T + 1, N) buffer allocated once and reused by every call, then a gather
  adjoint sweeps back through them (the adjoint of the Dirichlet ends done
  explicitly), dc summed per step;
* JAX `grad` of the same loop with `lax.fori_loop`, where JAX is installed
  (`pip install "gradkern[bench]"`), float64 enabled.

Peak memory: NumPy allocations during one call (tracemalloc sees NumPy's
buffers) in one more, untimed call, the inputs excluded, made after the buffers
either side keeps between calls were given back (`gk.release_memory()`, the
hand-written version's states), so that it counts everything the call uses;
JAX's are not visible to tracemalloc and are not reported. Every method's
gradient is checked against gradkern's before timing.

    python benchmarks/programs/programs.py                 # N = 10**6, T = 100
    python benchmarks/programs/programs.py --quick         # small, a smoke test
    python benchmarks/programs/programs.py --write         # and write RESULTS.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (benchpath.py)
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path
from report import publish, run_lines
from timing import interleaved, timed

import gradkern as gk
from gradkern.kernels import allen_cahn_step

DT = 1e-5


@gk.kernel
def sum_squares(u, E):
    i = gk.tid()
    gk.atomic_add(E, 0, u[i] * u[i])


def program(steps: int):
    def simulate(u, v, E, c):
        n = u.shape[0]
        for _ in range(steps // 2):
            gk.launch(allen_cahn_step, n, u, v, c, DT)
            gk.launch(allen_cahn_step, n, v, u, c, DT)
        gk.launch(sum_squares, n, u, E)
    return simulate


_GK_BUFFERS: dict = {}  # n -> the program's arrays and shadows, reused by every call as a user's loop would


def run_gradkern(u0, c, steps):
    n = u0.size
    if n not in _GK_BUFFERS:
        _GK_BUFFERS[n] = tuple(np.empty(k) for k in (n, n, 1, n, n, 1))
    u, v, E, du, dv, dE = _GK_BUFFERS[n]
    u[...] = u0
    for a in (v, E, du, dv):
        a[...] = 0.0
    dE[...] = 1.0
    grads = gk.autodiff(program(steps), gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Duplicated(E, dE),
                        gk.Active(c))
    return du.copy(), grads[3]


@numba.njit(parallel=True, cache=True)
def _step(u, un, c, dt):
    n = u.shape[0]
    for i in numba.prange(n):
        if i == 0 or i == n - 1:
            un[i] = u[i]
        else:
            ui = u[i]
            un[i] = ui + c * (u[i - 1] - 2.0 * ui + u[i + 1]) + dt * (ui - ui ** 3)


@numba.njit(parallel=True, cache=True)
def _adjoint(u, dun, du, c, dt):
    """du = J^T dun for one step (du overwritten), and the step's dc."""
    n = u.shape[0]
    dc = 0.0
    for i in numba.prange(n):
        if i == 0 or i == n - 1:
            g = dun[i]
        else:
            ui = u[i]
            g = dun[i] * (1.0 - 2.0 * c + dt * (1.0 - 3.0 * ui * ui))
            dc += dun[i] * (u[i - 1] - 2.0 * ui + u[i + 1])
        if i - 1 >= 1 and i - 1 <= n - 2:
            g += c * dun[i - 1]
        if i + 1 >= 1 and i + 1 <= n - 2:
            g += c * dun[i + 1]
        du[i] = g
    return dc


_HAND_BUFFERS: dict = {}  # (steps, n) -> the states and two adjoint buffers, kept between calls


def run_hand(u0, c, steps, parts=None):
    n = u0.size
    if (steps, n) not in _HAND_BUFFERS:
        _HAND_BUFFERS[steps, n] = np.empty((steps + 1, n)), np.empty(n), np.empty(n)
    states, adj, nxt = _HAND_BUFFERS[steps, n]
    states[0] = u0
    t0 = time.perf_counter()
    for t in range(steps):
        _step(states[t], states[t + 1], c, DT)
    t1 = time.perf_counter()
    np.multiply(states[steps], 2.0, out=adj)
    dc = 0.0
    for t in range(steps - 1, -1, -1):
        dc += _adjoint(states[t], adj, nxt, c, DT)
        adj, nxt = nxt, adj
    if parts is not None:
        parts["hand primal"].append((t1 - t0) / steps)
        parts["hand adjoint"].append((time.perf_counter() - t1) / steps)
    return adj.copy(), dc


def step_parts(u0, c, steps, rounds: int = 5) -> dict[str, float]:
    """Median ms per step of each of gradkern's runs of allen_cahn_step (by role: the augmented primal, which
    also writes its save, and the gather) and of the hand-written primal and adjoint, interleaved."""
    from gradkern.runtime.call import observing
    parts = {"hand primal": [], "hand adjoint": []}

    def observe(run, dim, seconds):
        if run.spec.typed.name.startswith("allen_cahn_step"):
            parts.setdefault(f"gk {run.role}", []).append(seconds)
    for _ in range(rounds):
        with observing(observe):
            run_gradkern(u0, c, steps)
        run_hand(u0, c, steps, parts)
    return {k: statistics.median(v) * 1e3 for k, v in parts.items()}


def jax_gradient(steps):
    """JAX's jit(grad) of the loop (`lax.fori_loop`, float64) w.r.t. (u0, c), or None where JAX is not
    importable (also benchmarks/gpu/gpu_loops.py's JAX row)."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def step(u, c):
        inner = u[1:-1] + c * (u[:-2] - 2.0 * u[1:-1] + u[2:]) + DT * (u[1:-1] - u[1:-1] ** 3)
        return jnp.concatenate([u[:1], inner, u[-1:]])

    def loss(u0, c):
        u = jax.lax.fori_loop(0, steps, lambda _, u: step(u, c), u0)
        return jnp.sum(u * u)

    return jax.jit(jax.grad(loss, argnums=(0, 1)))


def jax_runner(steps):
    g = jax_gradient(steps)
    if g is None:
        return None

    def run(u0, c):
        du, dc = g(u0, c)
        return np.asarray(du.block_until_ready()), float(dc)
    return run


def peak_memory(f) -> int:
    """Peak bytes NumPy allocated during one call (a separate, untimed call: tracing slows Python down), the
    buffers kept between calls given back first."""
    gk.release_memory()
    _HAND_BUFFERS.clear()
    _GK_BUFFERS.clear()
    tracemalloc.start()
    tracemalloc.reset_peak()
    f()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def gpu_main(args) -> None:
    """The same gradient on a GPU: gradkern's program against hand-written CUDA and JAX (gpu_loops.py)."""
    import cupy
    import gpu_loops as gl
    n, steps = args.n, args.steps + args.steps % 2
    u0 = cupy.asarray(np.random.default_rng(0).uniform(-0.9, 0.9, n).astype(args.dtype))
    hand = "hand-written store-all (CUDA)"
    rows = {"gradkern program (gk.autodiff)": gl.gradkern_runner(cupy, steps),
            hand: gl.hand_runner(cupy, steps, args.dtype)}
    jrun = gl.jax_runner(steps)
    if jrun is not None:
        rows["JAX jit(grad) (fori_loop)"] = jrun
    times, peaks = gl.run_rows(cupy, rows, u0, args.runs)
    text = "\n".join([
        "## programs.py --gpu", "",
        f"The gradient of programs.py's Allen-Cahn program on a GPU, {args.dtype}, CuPy arrays "
        "(benchmarks/gpu/gpu_loops.py: "
        "the rows, the timing and the peak of CuPy's memory pool during one call, inputs excluded). Median of "
        f"{args.runs} interleaved runs after a warm-up, each ended by a synchronisation; every gradient checked "
        "against gradkern's (rtol 1e-9).", "",
        *run_lines(f"python benchmarks/programs/programs.py --gpu --n {n} --dtype {args.dtype}"
                   f"{' --write' if args.write else ''}"),
        gl.device_line(cupy),
        f"* N = {n:,}, T = {steps}; JAX: {'importable' if jrun is not None else 'not importable, no row'}", "",
        *gl.table(times, peaks, hand, n * np.dtype(args.dtype).itemsize), ""])
    publish(text, "## programs.py --gpu", args.write)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--write", action="store_true")
    p.add_argument("--gpu", action="store_true", help="CuPy arrays, the generated CUDA kernels (gpu_loops.py)")
    p.add_argument("--dtype", default="float64", choices=("float64", "float32"),
                   help="--gpu only: issue 33's goal is N = 2**24 float32 (`--n 16777216 --dtype float32`)")
    args = p.parse_args()
    if args.quick:
        args.n, args.steps, args.runs = 1000, 10, 2
    if args.gpu:
        gpu_main(args)
        return
    n, steps = args.n, args.steps + args.steps % 2
    rng = np.random.default_rng(0)
    u0 = rng.uniform(-0.9, 0.9, n)
    c = 0.2
    methods = {"gradkern program (gk.autodiff)": lambda: run_gradkern(u0, c, steps),
               "hand-written store-all (Numba)": lambda: run_hand(u0, c, steps)}
    jrun = jax_runner(steps)
    if jrun is not None:
        methods["JAX grad (fori_loop)"] = lambda: jrun(u0, c)
    ref = None
    for name, f in methods.items():  # warm-up (compiles) and the check
        du, dc = f()
        if ref is None:
            ref = du, dc
        scale = np.max(np.abs(ref[0]))
        assert np.allclose(du, ref[0], rtol=1e-9, atol=1e-12 * scale), name
        assert abs(dc - ref[1]) <= 1e-9 * max(abs(ref[1]), 1e-30), (name, dc, ref[1])
    # JAX is timed on its own, after the interleaved pair: a JAX call leaves work running after it returns
    # (about 400,000 minor page faults a call here, its buffers mapped and unmapped), and the method timed next in
    # the same process paid for it: session 49, AMD EPYC, load 1.2, gradkern 242-250 ms right after a JAX call
    # against 119-121 ms after the hand-written one, and the hand-written adjoint 249 ms after JAX against 120
    # ms; after a second's pause neither paid anything.
    pair = {name: timed(f) for name, f in methods.items() if not name.startswith("JAX")}
    times = interleaved(pair, args.runs, rotate=False)
    if jrun is not None:
        times.update(interleaved({"JAX grad (fori_loop)": timed(methods["JAX grad (fori_loop)"])}, args.runs,
                                 rotate=False))
    peaks = {name: peak_memory(f) for name, f in methods.items()}
    hand = statistics.median(times["hand-written store-all (Numba)"])
    hand_peak = peaks["hand-written store-all (Numba)"]
    small = rng.uniform(-0.9, 0.9, 64)  # host cost: the same loop where the kernels take next to nothing
    host = interleaved({"gk": timed(lambda: run_gradkern(small, c, steps))}, max(args.runs, 5), rotate=False)
    host_us = statistics.median(host["gk"]) / steps * 1e6
    per_step = step_parts(u0, c, steps)
    rows = []
    for name in methods:
        t = statistics.median(times[name])
        mem = f"{peaks[name] / 1e6:.0f}" if not name.startswith("JAX") else "n/a"
        mem_ratio = f"{peaks[name] / hand_peak:.2f}" if not name.startswith("JAX") else ""
        rows.append(f"| {name} | {t:.3f} | {t / hand:.2f} | {mem} | {mem_ratio} |")
    text = "\n".join([
        "## programs.py", "",
        "The gradient of a program: the 1-D Allen-Cahn loop over ping-pong buffers (T launches of "
        "`allen_cahn_step`, then E = sum u^2 by a kernel), w.r.t. the initial state and c; float64. Median of "
        f"{args.runs} runs after a warm-up, gradkern and the hand-written adjoint interleaved, JAX's runs after them "
        "(a JAX call leaves work running after it returns, which the next method timed paid: up to 2x; "
        "benchmarks/programs/programs.py, main); every gradient checked against gradkern's first "
        "(rtol 1e-9). Peak memory: NumPy allocations during one call (tracemalloc), inputs excluded.", "",
        *run_lines(f"python benchmarks/programs/programs.py{' --write' if args.write else ''}"),
        f"* N = {n:,}, T = {steps}; JAX: {'installed' if jrun is not None else 'not installed, no row'}", "",
        "| method | time (s) | vs hand-written | peak memory (MB) | memory vs hand-written |",
        "|---|---:|---:|---:|---:|", *rows, "",
        f"Host cost per step (the same loop at N = 64, where the kernels take next to nothing; a step is one "
        f"launch, its recording and its reverse): {host_us:.1f} us.", "",
        "Per step (ms, median of 5 interleaved calls; gradkern's by role, observed launches): " +
        ", ".join(f"{k} {v:.3f}" for k, v in per_step.items()) + ".", ""])
    publish(text, "## programs.py", args.write)


if __name__ == "__main__":
    main()
