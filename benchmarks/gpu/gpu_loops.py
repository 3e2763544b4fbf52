"""The Allen-Cahn time loop's gradient on a GPU (issue 30 item 6): what
`programs.py --gpu` and `checkpoint.py --gpu` run.

The problem is theirs (checkpoint.py's program, programs.py's JAX gradient), on CuPy arrays in
float64: u0 of N elements, T steps of
`gradkern.kernels.allen_cahn_step` over ping-pong buffers, then E = sum u^2 by
a kernel; the gradient of E w.r.t. u0 and c. Rows:

* gradkern store-all: `gk.autodiff` of the program with a plain loop (saves on
  the device, copy-on-write);
* gradkern checkpointed: the loop as `gk.checkpointed_loop(step, T,
  snapshots=s, storage=...)`, snapshots in device memory or copied to the host;
* hand-written store-all CUDA: a (T + 1, N) buffer of every state, the step
  kernel, then a gather adjoint per step (each thread sums its own element's
  adjoint, no atomics) whose dE/dc terms go into a per-element vector summed
  once at the end;
* JAX `jit(grad)` of the same loop with `lax.fori_loop` on the GPU, where JAX
  is importable (programs.py only).

Time: every row warmed up and its gradient checked against gradkern
store-all's (rtol 1e-9), then the median of interleaved runs, each ended by a
device synchronisation. Peak device memory: the bytes CuPy's memory pool hands
out during one more call, through a `cupy.cuda.MemoryHook` (JAX's allocator is
not CuPy's: not reported), the inputs excluded.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (benchpath.py)
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path
import checkpoint
import numpy as np
import programs
from timing import interleaved, medians, timed

import gradkern as gk

DT = checkpoint.DT
C = 0.2

# Float64 and the contract of gk.autodiff: the adjoint of a step overwrites du (the step's output adjoint is
# consumed by the swap), and the dE/dc term of each interior element is summed into dcv[j] by its own thread.
HAND = r"""
extern "C" __global__ void ac_step(const double* __restrict__ u, double* __restrict__ un, double c, double dt,
                                   long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        if (i == 0 || i == n - 1) {
            un[i] = u[i];
        } else {
            double ui = u[i];
            un[i] = ui + c * (u[i - 1] - 2.0 * ui + u[i + 1]) + dt * (ui - ui * ui * ui);
        }
    }
}

extern "C" __global__ void ac_adjoint(const double* __restrict__ u, const double* __restrict__ dun,
                                      double* __restrict__ du, double* __restrict__ dcv, double c, double dt,
                                      long long n) {
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < n;
         j += (long long)blockDim.x * gridDim.x) {
        double g;
        if (j == 0 || j == n - 1) {
            g = dun[j];
        } else {
            double uj = u[j];
            g = dun[j] * (1.0 - 2.0 * c + dt * (1.0 - 3.0 * uj * uj));
            dcv[j] += dun[j] * (u[j - 1] - 2.0 * uj + u[j + 1]);
        }
        if (j - 1 >= 1 && j - 1 <= n - 2) g += c * dun[j - 1];
        if (j + 1 >= 1 && j + 1 <= n - 2) g += c * dun[j + 1];
        du[j] = g;
    }
}
"""


def gradkern_runner(cupy, steps: int, snapshots: int | None = None, storage: str = "device"):
    """gk.autodiff of the program on u0's dtype."""
    f = checkpoint.program(steps, snapshots, storage)

    def run(u0):
        n, dtype = u0.size, u0.dtype
        du = cupy.zeros(n, dtype)
        grads = gk.autodiff(f, gk.Duplicated(u0.copy(), du), gk.Duplicated(cupy.zeros(n, dtype), cupy.zeros(n, dtype)),
                            gk.Duplicated(cupy.zeros(1, dtype), cupy.ones(1, dtype)), gk.Active(C))
        return du, float(grads[3])
    return run


def hand_source(dtype) -> str:
    """HAND for `dtype`: float32 computes in float throughout (its literals made float: `2.0` would promote
    each expression to double and slow the hand-written kernels down)."""
    if np.dtype(dtype) == np.float64:
        return HAND
    return re.sub(r"\b(\d+\.\d+)\b", r"\1f", HAND.replace("double", "float"))


def hand_runner(cupy, steps: int, dtype=np.float64):
    module = cupy.RawModule(code=hand_source(dtype))
    step, adjoint = module.get_function("ac_step"), module.get_function("ac_adjoint")
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    c, dt = np.dtype(dtype).type(C), np.dtype(dtype).type(DT)

    def run(u0):
        n = u0.size
        grid, block, m = (min(-(-n // 256), sms * 32),), (256,), np.int64(n)
        states = cupy.empty((steps + 1, n), dtype)
        states[0] = u0
        for t in range(steps):
            step(grid, block, (states[t], states[t + 1], c, dt, m))
        lam, nxt, dcv = 2 * states[steps], cupy.empty(n, dtype), cupy.zeros(n, dtype)
        for t in reversed(range(steps)):
            adjoint(grid, block, (states[t], lam, nxt, dcv, c, dt, m))
            lam, nxt = nxt, lam
        return lam, float(dcv.sum())
    return run


def jax_runner(steps: int):
    """JAX's jit(grad) of the loop on its default device (programs.py's), or None where JAX is not
    importable."""
    g = programs.jax_gradient(steps)
    if g is None:
        return None
    import jax
    cache: dict = {}

    def run(u0):
        key = id(u0)
        if key not in cache:  # the input moved to JAX's device once, as CuPy's is already there
            cache.clear()
            cache[key] = jax.device_put(np.asarray(u0.get()))
        du, dc = g(cache[key], u0.dtype.type(C))  # c of u0's dtype: a float64 c would promote float32's steps
        return du.block_until_ready(), float(dc)
    return run


def peak_bytes(cupy, fn) -> int:
    """The most bytes CuPy's memory pool had handed out at once during fn() (the inputs excluded)."""
    class Peak(cupy.cuda.MemoryHook):
        name = "gradkern_benchmark_peak"

        def __init__(self):
            self.now = self.peak = 0

        def malloc_postprocess(self, **kw):
            self.now += kw["mem_size"]
            self.peak = max(self.peak, self.now)

        def free_postprocess(self, **kw):
            self.now -= kw["mem_size"]

    hook = Peak()
    cupy.cuda.Device().synchronize()
    with hook:
        fn()
        cupy.cuda.Device().synchronize()
    return hook.peak


def as_numpy(x) -> np.ndarray:
    return x.get() if hasattr(x, "get") else np.asarray(x)


def run_rows(cupy, rows: dict, u0, runs: int) -> tuple[dict, dict]:
    """Warm up and check each row against the first, then time `runs` interleaved rounds (each call ended by
    a synchronisation) and measure each row's peak pool bytes. Returns (median seconds, peak bytes or None)."""
    ref = None
    for name, f in rows.items():
        du, dc = f(u0)
        du = as_numpy(du)
        if ref is None:
            ref = du, dc
            continue
        scale = float(np.max(np.abs(ref[0])))
        # float64: the rows differ in the order of their sums alone. float32 (eps 6e-8): dE/dc sums 2^24 terms a
        # step in another order (block sums against a per-element vector summed once), ~sqrt(N) eps = 2.4e-4 of
        # its magnitude, and du carries T = 100 steps' roundings: 1e-3 tells a wrong gradient from rounding
        rtol, atol = (1e-9, 1e-12) if du.dtype == np.float64 else (1e-3, 1e-4)
        assert np.allclose(du, ref[0], rtol=rtol, atol=atol * scale), name
        assert abs(dc - ref[1]) <= rtol * max(abs(ref[1]), 1e-30), (name, dc, ref[1])
    sync = cupy.cuda.Device().synchronize
    times = interleaved({name: timed(lambda f=f: f(u0), sync=sync) for name, f in rows.items()}, runs)
    peaks = {name: None if name.startswith("JAX") else peak_bytes(cupy, lambda f=f: f(u0))
             for name, f in rows.items()}
    return medians(times), peaks


def device_line(cupy) -> str:
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    return f"* GPU: {name}, {props['totalGlobalMem'] / 2 ** 30:.0f} GiB; CuPy {cupy.__version__}"


def table(times: dict, peaks: dict, hand: str, state_bytes: int) -> list[str]:
    """Markdown rows: time, ratio to the hand-written row, peak pool memory in MB and in states."""
    lines = ["| method | time (s) | vs hand-written | peak device memory (MB) | peak (states) |",
             "|---|---:|---:|---:|---:|"]
    for name, t in times.items():
        p = peaks[name]
        mem = ("n/a", "") if p is None else (f"{p / 1e6:.1f}", f"{p / state_bytes:.1f}")
        lines.append(f"| {name} | {t:.4f} | {t / times[hand]:.2f} | {mem[0]} | {mem[1]} |")
    return lines
