"""GPU benchmark (issue 8): the 1-D Allen-Cahn step, N = 2**24 float32, T = 100
steps with every state stored, then the adjoint of the whole loop.

Rows: gradkern's generated primal and reverse against hand-written CUDA
kernels (the step, and its gather adjoint followed by zeroing the consumed
adjoint, the same contract as gk.autodiff), JAX's `grad` and PyTorch's
backward of the same loop when importable, achieved bandwidth against a
device-to-device copy, and cold (empty caches) and warm (a new process, caches
kept) time to the first gradient. Times are medians over repetitions, taken
with CUDA events on CuPy's stream.

    python benchmarks/gpu/gpu.py            # prints the table, writes RESULTS.md
    python benchmarks/gpu/gpu.py --quick    # small sizes, a smoke test
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # benchmarks/ (benchpath.py)
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path
from timing import interleaved, medians  # noqa: E402

C, DT = 0.2, 0.01

HAND = r"""
extern "C" __global__ void ac_step(const float* __restrict__ u, float* __restrict__ un, float c, float dt,
                                   long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        if (i == 0 || i == n - 1) {
            un[i] = u[i];
        } else {
            float ui = u[i];
            un[i] = ui + c * (u[i - 1] - 2.0f * ui + u[i + 1]) + dt * (ui - ui * ui * ui);
        }
    }
}

// du[j] += sum_i d(un[i])/d(u[j]) * dun[i]: each thread gathers its own element
extern "C" __global__ void ac_adjoint(const float* __restrict__ u, float* __restrict__ du,
                                      const float* __restrict__ dun, float c, float dt, long long n) {
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < n;
         j += (long long)blockDim.x * gridDim.x) {
        float acc;
        if (j == 0 || j == n - 1) {
            acc = dun[j];
        } else {
            float uj = u[j];
            acc = (1.0f - 2.0f * c + dt * (1.0f - 3.0f * uj * uj)) * dun[j];
        }
        if (j - 1 >= 1 && j - 1 <= n - 2) acc += c * dun[j - 1];
        if (j + 1 >= 1 && j + 1 <= n - 2) acc += c * dun[j + 1];
        du[j] += acc;
    }
}
"""


def first_gradient(n: int) -> dict:
    """Run in a fresh process: seconds to the first gradient, and to a second one."""
    import cupy

    t0 = time.perf_counter()
    import gradkern as gk
    from gradkern.kernels.stencils import allen_cahn_step
    t1 = time.perf_counter()
    rng = np.random.default_rng(0)
    u = cupy.asarray(rng.uniform(0.2, 1.0, n).astype(np.float32))
    un, du, dun = cupy.empty_like(u), cupy.zeros_like(u), cupy.ones_like(u)
    cupy.cuda.Device().synchronize()

    def grad():
        gk.autodiff(allen_cahn_step, gk.Duplicated(u, du), gk.DuplicatedNoNeed(un, dun), gk.Const(np.float32(C)),
                    gk.Const(np.float32(DT)))
        cupy.cuda.Device().synchronize()

    t2 = time.perf_counter()
    grad()
    t3 = time.perf_counter()
    grad()
    t4 = time.perf_counter()
    return {"import": t1 - t0, "first": t3 - t2, "second": t4 - t3}


def profile_host(n: int) -> None:
    """Where the host time of one launch and one autodiff goes (cProfile)."""
    import cProfile
    import pstats

    import cupy

    import gradkern as gk
    from gradkern.kernels.stencils import allen_cahn_step
    u, un, du, dun = (cupy.ones(n, np.float32) for _ in range(4))
    c, dt = np.float32(C), np.float32(DT)
    calls = {
        "launch": lambda: gk.launch(allen_cahn_step, n, u, un, c, dt),
        "autodiff": lambda: gk.autodiff(allen_cahn_step, gk.Duplicated(u, du), gk.DuplicatedNoNeed(un, dun),
                                        gk.Const(c), gk.Const(dt)),
    }
    for name, fn in calls.items():
        fn()
        cupy.cuda.Device().synchronize()
        t = time.perf_counter()
        for _ in range(500):
            fn()
        host = (time.perf_counter() - t) / 500
        cupy.cuda.Device().synchronize()
        print(f"{name}: {host * 1e6:.1f} µs host time per call")
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(200):
            fn()
        pr.disable()
        cupy.cuda.Device().synchronize()
        pstats.Stats(pr).sort_stats("tottime").print_stats(18)
    # kernel by kernel at 2**24 points (graph replay of 20 launches): where the reverse's GPU time goes
    n = 2**24
    u, un, du, dun = (cupy.asarray(np.random.default_rng(k).uniform(0.2, 1, n).astype(np.float32)) for k in range(4))
    h_step, h_adj = (cupy.RawModule(code=HAND).get_function(f) for f in ("ac_step", "ac_adjoint"))
    sm = cupy.cuda.Device().attributes["MultiProcessorCount"]
    grid, block = (min(-(-n // 256), sm * 32),), (256,)
    parts = {
        "hand step": lambda: h_step(grid, block, (u, un, c, dt, np.int64(n))),
        "hand adjoint (gather only)": lambda: h_adj(grid, block, (u, du, dun, c, dt, np.int64(n))),
        "fill(0)": lambda: dun.fill(0),
        "gk.launch step": lambda: gk.launch(allen_cahn_step, n, u, un, c, dt),
        "gk.autodiff (gather + zeroing kernel)": lambda: gk.autodiff(
            allen_cahn_step, gk.Duplicated(u, du), gk.DuplicatedNoNeed(un, dun), gk.Const(c), gk.Const(dt)),
    }
    for name, fn in parts.items():
        ms = graph_ms(cupy, lambda fn=fn: [fn() for _ in range(20)], 5)
        print(f"{name}: {ms / 20 * 1e3:.1f} µs per call (graph replay)")


def compile_times(n: int) -> dict:
    """Cold: empty gradkern and CuPy caches; warm: a new process with them kept."""
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "GRADKERN_CACHE_DIR": f"{d}/gk", "CUPY_CACHE_DIR": f"{d}/cupy"}
        out = {}
        for label in ("cold", "warm"):
            r = subprocess.run([sys.executable, __file__, "--first-gradient", str(n)], env=env, capture_output=True,
                               text=True, check=True)
            out[label] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


def event_timer(cupy, fn, stream=None):
    """A timer (timing.interleaved's) of one call of `fn`: seconds between CUDA events recorded around it on
    `stream` (the current stream when None)."""
    def timer() -> float:
        with stream if stream is not None else contextlib.nullcontext():
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            fn()
            stop.record()
            stop.synchronize()
        return cupy.cuda.get_elapsed_time(start, stop) / 1e3
    return timer


def captured(cupy, fn):
    """`fn`'s launches captured once in a CUDA graph (after a warm-up call): (replay, the graph's stream)."""
    fn()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        fn()
        graph = stream.end_capture()
    return graph.launch, stream


def median_ms(cupy, fn, reps: int) -> float:
    fn()  # warm-up
    return 1e3 * medians(interleaved({"fn": event_timer(cupy, fn)}, reps))["fn"]


def graph_ms(cupy, fn, reps: int) -> float:
    """Median time of replaying `fn`'s launches as one CUDA graph."""
    replay, stream = captured(cupy, fn)
    return 1e3 * medians(interleaved({"fn": event_timer(cupy, replay, stream)}, reps))["fn"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2**24)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--first-gradient", type=int, default=0)
    ap.add_argument("--profile", action="store_true", help="profile the host side of launch and autodiff")
    a = ap.parse_args()
    if a.first_gradient:
        print(json.dumps(first_gradient(a.first_gradient)))
        return
    if a.quick:
        a.n, a.steps, a.reps = 2**16, 5, 2
    if a.profile:
        profile_host(2**16)
        return
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import cupy

    import gradkern as gk
    from gradkern.kernels.stencils import allen_cahn_step

    n, T = a.n, a.steps
    f32 = np.float32
    c, dt = f32(C), f32(DT)
    mod = cupy.RawModule(code=HAND)
    h_step, h_adj = mod.get_function("ac_step"), mod.get_function("ac_adjoint")
    sm = cupy.cuda.Device().attributes["MultiProcessorCount"]
    grid, block = (min(-(-n // 256), sm * 32),), (256,)
    rng = np.random.default_rng(0)
    u0 = rng.uniform(0.2, 1.0, n).astype(f32)
    w = rng.standard_normal(n).astype(f32)  # the loss is <w, u_T>
    U = cupy.empty((T + 1, n), f32)  # every state stored
    U[0] = cupy.asarray(u0)
    w_d = cupy.asarray(w)
    lam, du = cupy.empty(n, f32), cupy.empty(n, f32)

    def gk_primal():
        for t in range(T):
            gk.launch(allen_cahn_step, n, U[t], U[t + 1], c, dt)

    def hand_primal():
        for t in range(T):
            h_step(grid, block, (U[t], U[t + 1], c, dt, np.int64(n)))

    def gk_reverse():
        lam[...] = w_d
        du.fill(0)
        x, y = lam, du
        for t in reversed(range(T)):  # y += J_t^T x, x zeroed (write-only output): then swap
            gk.autodiff(allen_cahn_step, gk.Duplicated(U[t], y), gk.DuplicatedNoNeed(U[t + 1], x), gk.Const(c),
                        gk.Const(dt))
            x, y = y, x
        return x

    def hand_reverse():
        lam[...] = w_d
        du.fill(0)
        x, y = lam, du
        for t in reversed(range(T)):
            h_adj(grid, block, (U[t], y, x, c, dt, np.int64(n)))
            x.fill(0)
            x, y = y, x
        return x

    # correctness first: the same states and the same gradient as the hand-written kernels
    hand_primal()
    states_hand = U[T].copy()
    g_hand = hand_reverse().copy()
    gk_primal()
    primal_err = float(cupy.max(cupy.abs(U[T] - states_hand)) / cupy.max(cupy.abs(states_hand)))
    g_gk = gk_reverse().copy()
    grad_err = float(cupy.linalg.norm(g_gk - g_hand) / cupy.linalg.norm(g_hand))
    assert primal_err < 1e-5 and grad_err < 1e-5, (primal_err, grad_err)

    big = cupy.empty(2**28, f32)
    big2 = cupy.empty_like(big)
    copy_ms = median_ms(cupy, lambda: cupy.copyto(big2, big), a.reps)
    copy_bw = 2 * big.nbytes / copy_ms / 1e6  # GB/s, read + write
    big = big2 = None  # noqa: F841  (freed before the frameworks allocate)
    loops = {"gk_primal": gk_primal, "hand_primal": hand_primal, "gk_reverse": gk_reverse,
             "hand_reverse": hand_reverse}
    timers = {name: event_timer(cupy, fn) for name, fn in loops.items()}
    # the same loops captured once in a CUDA graph and replayed: GPU time of the kernels, no Python per launch
    timers |= {name + "_graph": event_timer(cupy, *captured(cupy, fn)) for name, fn in loops.items()}
    # each primal timed twice per round: the spread between identical timers
    timers |= {"gk_primal_again": event_timer(cupy, gk_primal), "hand_primal_again": event_timer(cupy, hand_primal)}
    rows = {name: 1e3 * t for name, t in medians(interleaved(timers, a.reps)).items()}

    extra = {}
    cupy.get_default_memory_pool().free_all_blocks()
    try:
        extra["jax"] = jax_grad(u0, w, T, a.reps)
    except ImportError as e:
        extra["jax"] = f"not importable ({e})"
    try:
        extra["torch"] = torch_grad(u0, w, T, a.reps)
    except ImportError as e:
        extra["torch"] = f"not importable ({e})"
    for name in ("jax", "torch"):
        if isinstance(extra[name], dict):
            g = extra[name].pop("grad")
            extra[name]["grad_rel_err_vs_gk"] = float(np.linalg.norm(g - g_gk.get()) / np.linalg.norm(g_hand.get()))

    compile_n = 2**20
    ct = compile_times(compile_n)
    report(a, n, T, rows, extra, copy_bw, primal_err, grad_err, ct, compile_n)


def jax_grad(u0, w, T, reps) -> dict:
    import jax
    import jax.numpy as jnp

    def step(u):
        ui = u[1:-1]
        inner = ui + C * (u[:-2] - 2.0 * ui + u[2:]) + DT * (ui - ui ** 3)
        return u.at[1:-1].set(inner)

    def loss(u, wv):
        return jnp.sum(wv * jax.lax.fori_loop(0, T, lambda t, x: step(x), u))

    g = jax.jit(jax.grad(loss))
    ud, wd = jnp.asarray(u0), jnp.asarray(w)
    out = g(ud, wd).block_until_ready()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        g(ud, wd).block_until_ready()
        times.append((time.perf_counter() - t) * 1e3)
    return {"ms": float(np.median(times)), "grad": np.asarray(out), "device": str(jax.devices()[0])}


def torch_grad(u0, w, T, reps) -> dict:
    import torch

    ud = torch.tensor(u0, device="cuda")
    wd = torch.tensor(w, device="cuda")

    def run():
        x = ud.clone().requires_grad_(True)
        u = x
        for _ in range(T):
            ui = u[1:-1]
            inner = ui + C * (u[:-2] - 2.0 * ui + u[2:]) + DT * (ui - ui ** 3)
            u = torch.cat([u[:1], inner, u[-1:]])
        (wd * u).sum().backward()
        return x.grad

    g = run()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        run()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e3)
    return {"ms": float(np.median(times)), "grad": g.cpu().numpy()}


def report(a, n, T, rows, extra, copy_bw, primal_err, grad_err, ct, compile_n) -> None:
    import cupy
    from report import git_revision, publish

    dev = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode()
    step_bytes_primal = 8 * n  # read u, write un
    step_bytes_rev = 20 * n  # read u and dun, read+write du, zero dun
    p, hp = rows["gk_primal"], rows["hand_primal"]
    r, hr = rows["gk_reverse"], rows["hand_reverse"]
    bw = lambda ms, per_step: per_step * T / ms / 1e6  # noqa: E731  GB/s
    lines = [
        "## GPU (benchmarks/gpu/gpu.py)",
        "",
        f"- machine: {dev}; CuPy {cupy.__version__}, CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}",
        f"- date: {datetime.date.today().isoformat()}; command: `python benchmarks/gpu/gpu.py"
        f"{' --quick' if a.quick else ''}`; revision {git_revision()}",
        f"- problem: 1-D Allen-Cahn step, N = {n:,} float32, T = {T} steps, every state stored; loss <w, u_T>; "
        f"median of {a.reps} runs (CUDA events)",
        f"- checks: final state vs hand-written max rel. diff {primal_err:.1e}; gradient rel. error vs hand-written "
        f"{grad_err:.1e}",
        "",
        "| what | time (ms, T steps) | per step (µs) | bandwidth (GB/s) | vs hand-written | goal |",
        "|---|---:|---:|---:|---:|---|",
        f"| device-to-device copy | | | {copy_bw:.0f} | | reference |",
        f"| hand-written primal | {hp:.2f} | {hp / T * 1e3:.1f} | {bw(hp, step_bytes_primal):.0f} | 1.00 | |",
        f"| gradkern primal (`gk.launch`) | {p:.2f} | {p / T * 1e3:.1f} | {bw(p, step_bytes_primal):.0f} | "
        f"{p / hp:.2f} | ≤ 1.05 {'met' if p / hp <= 1.05 else 'MISSED'} |",
        f"| hand-written adjoint (gather + zero) | {hr:.2f} | {hr / T * 1e3:.1f} | {bw(hr, step_bytes_rev):.0f} "
        "| 1.00 | |",
        f"| gradkern reverse (`gk.autodiff`) | {r:.2f} | {r / T * 1e3:.1f} | {bw(r, step_bytes_rev):.0f} | "
        f"{r / hr:.2f} | ≤ 1.2 {'met' if r / hr <= 1.2 else 'MISSED'} |",
        f"| gradkern primal + reverse | {p + r:.2f} | | | {(p + r) / (hp + hr):.2f} | |",
    ]
    pg, hpg, rg, hrg = (rows[k + "_graph"] for k in ("gk_primal", "hand_primal", "gk_reverse", "hand_reverse"))
    lines += [
        f"| hand-written primal, CUDA graph replay | {hpg:.2f} | {hpg / T * 1e3:.1f} | "
        f"{bw(hpg, step_bytes_primal):.0f} | 1.00 | |",
        f"| gradkern primal, CUDA graph replay | {pg:.2f} | {pg / T * 1e3:.1f} | {bw(pg, step_bytes_primal):.0f} | "
        f"{pg / hpg:.2f} | kernels alone |",
        f"| hand-written adjoint, CUDA graph replay | {hrg:.2f} | {hrg / T * 1e3:.1f} | "
        f"{bw(hrg, step_bytes_rev):.0f} | 1.00 | |",
        f"| gradkern reverse, CUDA graph replay | {rg:.2f} | {rg / T * 1e3:.1f} | {bw(rg, step_bytes_rev):.0f} | "
        f"{rg / hrg:.2f} | kernels alone |",
    ]
    for name, label in (("jax", "JAX `jit(grad)` of the loop"), ("torch", "PyTorch forward + backward")):
        v = extra[name]
        if isinstance(v, dict):
            verdict = ""
            if name == "jax":
                verdict = f"gradkern ahead: {'met' if p + r < v['ms'] else 'MISSED'}"
            lines.append(f"| {label} | {v['ms']:.2f} | | | {v['ms'] / (hp + hr):.2f} | {verdict} "
                         f"(gradient rel. diff vs gradkern {v['grad_rel_err_vs_gk']:.1e}) |")
        else:
            lines.append(f"| {label} | {v} | | | | |")
    lines += [
        f"| spread: gradkern primal again | {rows['gk_primal_again']:.2f} | | | | |",
        f"| spread: hand-written primal again | {rows['hand_primal_again']:.2f} | | | | |",
        "",
        f"Time to the first gradient (N = {compile_n:,}, a new process; `import gradkern` not included):",
        "",
        "| cache | first gradient (s) | second gradient (s) | compile = first − second (s) | goal |",
        "|---|---:|---:|---:|---|",
    ]
    for label in ("cold", "warm"):
        d = ct[label]
        comp = d["first"] - d["second"]
        goal = f"≤ 0.1 {'met' if comp <= 0.1 else 'MISSED'}" if label == "warm" else ""
        lines.append(f"| {label} | {d['first']:.3f} | {d['second']:.4f} | {comp:.3f} | {goal} |")
    publish("\n".join(lines) + "\n", "## GPU (benchmarks/gpu/gpu.py)", write=not a.no_write and not a.quick)


if __name__ == "__main__":
    main()
