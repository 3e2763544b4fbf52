"""gk.interop: the cost of crossing from PyTorch or JAX into gradkern, and a time loop's gradient through each.

* Per call: an 8-element float64 saxpy (`gradkern.kernels.saxpy`, `y = a*x + y`) as `gk.launch` and as the
  operation of each framework (`torch_function(saxpy, "y")`, `jax_function(saxpy, "y")`, eager and under
  `jax.jit`), and its gradient: `gk.autodiff` against a forward and backward through each framework
  (torch: `torch.autograd.grad`; JAX: a jitted `jax.grad` of `sum(y)`).
* A time loop: the ping-pong Allen-Cahn program of docs/interop.md (`--n` points, `--steps` steps of two
  launches, then an energy), its gradient with respect to u0 and c by `gk.autodiff` directly and through
  each framework (goal: within 10% of gradkern's).

Timings are medians over --rounds interleaved rounds (benchmarks/runtime/overhead.py's `measure`), per call.

    python benchmarks/runtime/interop.py            # print the tables
    python benchmarks/runtime/interop.py --write    # also write its section of benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (benchpath.py)
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path
from overhead import measure
from report import publish, run_lines
from timing import load_average, machine

import gradkern as gk
from gradkern.kernels import allen_cahn_step, saxpy, sum_squares

SECTION = "## interop.py"
LOOP_GOAL = 1.10


def simulate(u, v, E, c, nsteps):
    for _ in range(nsteps):
        gk.launch(allen_cahn_step, u.size, u, v, c, 0.01)
        gk.launch(allen_cahn_step, u.size, v, u, c, 0.01)
    gk.launch(sum_squares, u.size, u, E)


def frameworks() -> dict:
    out = {}
    try:
        import torch
        out["torch"] = torch
    except ImportError:
        print("torch is not installed: its rows are left out", file=sys.stderr)
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        out["jax"] = jax
    except ImportError:
        print("JAX is not installed: its rows are left out", file=sys.stderr)
    return out


def per_call(fw: dict) -> dict[str, Callable[[], object]]:
    """The tiny saxpy: a launch and a gradient, directly and through each framework."""
    rng = np.random.default_rng(0)
    x, y, dx, dy = rng.random(8), rng.random(8), np.zeros(8), np.ones(8)
    out = {"gk.launch": lambda: gk.launch(saxpy, 8, 1.5, x, y),
           "gk.autodiff (gradient)": lambda: gk.autodiff(saxpy, gk.Active(1.5), gk.Duplicated(x, dx),
                                                         gk.Duplicated(y, dy))}
    if "torch" in fw:
        torch = fw["torch"]
        top = gk.interop.torch_function(saxpy, "y")
        tx, ty = torch.from_numpy(x.copy()), torch.from_numpy(y.copy())
        ta = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
        gx = tx.clone().requires_grad_()
        ones = torch.ones(8, dtype=torch.float64)
        out["torch: operation"] = lambda: top(1.5, tx, ty)
        out["torch: forward + backward"] = lambda: torch.autograd.grad(top(ta, gx, ty), (ta, gx), ones)
    if "jax" in fw:
        jax = fw["jax"]
        jnp = jax.numpy
        op = gk.interop.jax_function(saxpy, "y")
        jx, jy, ja = jnp.asarray(x), jnp.asarray(y), jnp.asarray(1.5)
        jitted = jax.jit(lambda a, x, y: op(a, x, y))
        grad = jax.jit(jax.grad(lambda a, x, y: jnp.sum(op(a, x, y)), argnums=(0, 1)))
        out["JAX: operation (eager)"] = lambda: op(1.5, jx, jy).block_until_ready()
        out["JAX: operation (jit)"] = lambda: jitted(ja, jx, jy).block_until_ready()
        out["JAX: grad (jit)"] = lambda: jax.block_until_ready(grad(ja, jx, jy))
    return out


def time_loop(fw: dict, n: int, steps: int) -> dict[str, Callable[[], object]]:
    """The ping-pong program's gradient with respect to u0 and c."""
    u0 = np.random.default_rng(1).uniform(-0.5, 0.5, n)

    def direct():
        u, du = u0.copy(), np.zeros(n)
        return gk.autodiff(simulate, gk.Duplicated(u, du), gk.Duplicated(np.zeros(n), np.zeros(n)),
                           gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.2), steps)
    out = {"gk.autodiff": direct}
    if "torch" in fw:
        torch = fw["torch"]
        top = gk.interop.torch_function(simulate, "E")
        tu = torch.from_numpy(u0.copy()).requires_grad_()
        tc = torch.tensor(0.2, dtype=torch.float64, requires_grad=True)
        zeros, e0 = torch.zeros(n, dtype=torch.float64), torch.zeros(1, dtype=torch.float64)
        out["torch"] = lambda: torch.autograd.grad(top(tu, zeros, e0, tc, steps).sum(), (tu, tc))
    if "jax" in fw:
        jax = fw["jax"]
        jnp = jax.numpy
        op = gk.interop.jax_function(simulate, "E")
        grad = jax.jit(jax.grad(lambda u, c: op(u, jnp.zeros(n), jnp.zeros(1), c, steps)[0], argnums=(0, 1)))
        ju, jc = jnp.asarray(u0), jnp.asarray(0.2)
        out["JAX (jit)"] = lambda: jax.block_until_ready(grad(ju, jc))
    return out


def table(us: dict[str, float], base: str, goal: float | None = None) -> str:
    lines = ["| version | µs per call | / " + base + (" | goal |" if goal else " |"),
             "|---|---|---|" + ("---|" if goal else "")]
    for name, t in us.items():
        ratio = t / us[base]
        verdict = "" if goal is None or name == base else f" <= {goal:.2f}x: {'ok' if ratio <= goal else 'MISSED'} |"
        lines.append(f"| {name} | {t:.1f} | {ratio:.2f}x |" + (verdict or (" |" if goal else "")))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    p.add_argument("--calls", type=int, default=50, help="calls per version per round, tiny kernel (default 50)")
    p.add_argument("--n", type=int, default=10_000, help="points of the time loop (default 10000)")
    p.add_argument("--steps", type=int, default=100, help="steps of two launches (default 100)")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="time the wall clock (default) or the process's CPU time (a shared machine)")
    p.add_argument("--write", action="store_true", help="write the tables to benchmarks/RESULTS.md")
    args = p.parse_args(argv)
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    fw = frameworks()
    load = load_average()
    small = measure(per_call(fw), args.rounds, args.calls, clock)
    loop = measure(time_loop(fw, args.n, args.steps), max(3, args.rounds // 3), 1, clock)
    versions = ", ".join(f"{name} {getattr(m, '__version__', '?')}" for name, m in fw.items())
    text = "\n".join([
        SECTION, "",
        f"gk.interop ({versions}; CPU). Per call: an 8-element float64 saxpy; median over {args.rounds} "
        f"interleaved rounds of {args.calls} calls. The time loop: the ping-pong Allen-Cahn program, "
        f"n = {args.n}, {args.steps} steps of two launches and an energy, its gradient with respect to u0 and c "
        f"(goal: within {LOOP_GOAL - 1:.0%} of gk.autodiff). {'Wall-clock' if args.clock == 'wall' else 'Process CPU'} "
        f"time; 1-minute load average at start {load:.2f}; Numba threads: {numba.get_num_threads()}.", "",
        *run_lines(shlex.join(["python", os.path.relpath(sys.argv[0]),
                               *(argv if argv is not None else sys.argv[1:])])), "",
        table(small, "gk.launch"), "", table(loop, "gk.autodiff", LOOP_GOAL), ""])
    print(f"CPU: {machine()}")
    publish(text, SECTION, args.write)


if __name__ == "__main__":
    main()
