"""`python -m gradkern demo` (the main job, on the CPU) and `python -m gradkern info`."""

from __future__ import annotations

import argparse
import importlib
import platform
import shutil
import sys
import time


def info() -> int:
    """Versions, backends and devices, like `numba -s`."""
    import numpy as np

    from ._version import __version__
    from .runtime.cache import cache_dir

    print(f"gradkern   {__version__}")
    print(f"python     {platform.python_version()} ({sys.executable})")
    print(f"platform   {platform.platform()}")
    print(f"numpy      {np.__version__}")
    for name in ("numba", "cupy"):
        try:
            mod = importlib.import_module(name)
            print(f"{name:<10} {mod.__version__}")
        except Exception as e:  # an absent or broken install is what this command reports
            print(f"{name:<10} not available ({type(e).__name__}: {e})".rstrip())
    gpu = "none"
    names = []
    try:
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
        names = [cupy.cuda.runtime.getDeviceProperties(d)["name"].decode() for d in range(n)]
        gpu = ", ".join(names) if names else "none"
    except Exception as e:
        gpu = f"none ({type(e).__name__})"
    print(f"gpu        {gpu}")
    nvcc = shutil.which("nvcc")
    print(f"nvcc       {nvcc or 'not on PATH'}")
    backends = ["interp (reference interpreter)"]
    try:
        importlib.import_module("numba")
        backends.insert(0, "cpu (numba)")
    except ImportError:
        pass
    backends.append("cuda (CUDA C through CuPy/NVRTC)" if names else
                    "cuda: code generation only (gk.inspect(..., backend='cuda')); running needs CuPy and a GPU")
    print(f"backends   {', '.join(backends)}")
    print(f"cache      {cache_dir()}")
    return 0


def _allen_cahn_setup(n: int):
    import numpy as np

    h = 1.0 / (n - 1)
    dt = 0.2 * h * h
    x = np.linspace(0.0, 1.0, n)
    rng = np.random.default_rng(0)
    u0 = 0.5 * np.sin(np.pi * x) + sum(0.1 * rng.standard_normal() * np.sin(k * np.pi * x) for k in range(2, 8))
    return h, dt, dt / (h * h), u0


def _energy(u, h):
    """E(u) = sum h (1/2 ((u_{i+1} - u_i)/h)^2 + 1/4 (u_i^2 - 1)^2), and dE/du."""
    import numpy as np

    du = np.diff(u) / h
    e = float(np.sum(0.5 * du * du) * h + np.sum(0.25 * (u * u - 1) ** 2) * h)
    g = h * u * (u * u - 1)
    g[:-1] -= du
    g[1:] += du
    return e, g


def demo(n: int = 1_000_000, steps: int = 200, grad_n: int = 2_000, grad_steps: int = 200) -> int:
    """Run a 1-D Allen-Cahn time loop on the CPU with a gradkern kernel and check
    it against NumPy; then differentiate the final energy with respect to the
    initial state (reverse mode through every step, shadows updated in place)
    and check that gradient against finite differences."""
    import numpy as np

    import gradkern as gk
    from gradkern.kernels import allen_cahn_step

    h, dt, c, u0 = _allen_cahn_setup(n)
    print(f"gradkern {gk.__version__} demo on the CPU: 1-D Allen-Cahn u_t = u_xx + u - u^3")
    print(f"\n1. time loop: n = {n:,}, {steps} explicit steps")
    t0 = time.perf_counter()
    u, un = u0.copy(), np.empty_like(u0)
    gk.launch(allen_cahn_step, n, u, un, c, dt)  # compile (or load from cache) and first step
    first = time.perf_counter() - t0
    u, un = un, u
    print(f"  first launch (compile or cache load): {first:.2f} s")
    print(f"  {'step':>6}  {'energy':>14}")
    print(f"  {0:>6}  {_energy(u0, h)[0]:>14.8f}")
    t0 = time.perf_counter()
    for s in range(1, steps):
        gk.launch(allen_cahn_step, n, u, un, c, dt)
        u, un = un, u
        if (s + 1) % (steps // 4) == 0:
            print(f"  {s + 1:>6}  {_energy(u, h)[0]:>14.8f}")
    elapsed = time.perf_counter() - t0
    ref = u0.copy()
    for _ in range(steps):
        r = ref.copy()
        r[1:-1] = ref[1:-1] + c * (ref[:-2] - 2 * ref[1:-1] + ref[2:]) + dt * (ref[1:-1] - ref[1:-1] ** 3)
        ref = r
    err = float(np.max(np.abs(u - ref)))
    rate = (steps - 1) * n / elapsed / 1e6
    print(f"  {steps - 1} launches in {elapsed:.3f} s ({rate:.0f} M points/s); max |gradkern - numpy| = {err:.2e}")
    ok = err <= 1e-12
    print("  matches the NumPy reference" if ok else "  MISMATCH against the NumPy reference")

    n, steps = grad_n, grad_steps
    h, dt, c, u0 = _allen_cahn_setup(n)
    print(f"\n2. gradient of the final energy E(u_T) with respect to u_0: n = {n:,}, T = {steps} steps")

    def final_energy(start):
        u, un = start.copy(), np.empty_like(start)
        for _ in range(steps):
            gk.launch(allen_cahn_step, n, u, un, c, dt)
            u, un = un, u
        return _energy(u, h)[0]

    t0 = time.perf_counter()
    states = [u0.copy()]  # the loop keeps every state; each step's reverse needs its input
    for _ in range(steps):
        nxt = np.empty_like(u0)
        gk.launch(allen_cahn_step, n, states[-1], nxt, c, dt)
        states.append(nxt)
    energy, adjoint = _energy(states[-1], h)
    for t in range(steps - 1, -1, -1):
        d_in = np.zeros(n)  # d(u_t): accumulated by the step's reverse
        gk.autodiff(allen_cahn_step, gk.Duplicated(states[t], d_in), gk.Duplicated(states[t + 1], adjoint), c, dt)
        adjoint = d_in
    elapsed = time.perf_counter() - t0
    print(f"  E(u_T) = {energy:.10f}; primal + reverse through {steps} steps in {elapsed:.2f} s")
    print(f"  {'index':>6}  {'reverse mode':>16}  {'finite differences':>18}  {'rel. error':>10}")
    worst = 0.0
    for j in (1, n // 7, n // 3, n // 2, n - 2):
        eps = 1e-6
        up, um = u0.copy(), u0.copy()
        up[j] += eps
        um[j] -= eps
        fd = (final_energy(up) - final_energy(um)) / (2 * eps)
        rel = abs(adjoint[j] - fd) / max(abs(fd), 1e-12)
        worst = max(worst, rel)
        print(f"  {j:>6}  {adjoint[j]:>16.10e}  {fd:>18.10e}  {rel:>10.2e}")
    grad_ok = worst < 1e-5
    print("  the gradient matches finite differences" if grad_ok else "  GRADIENT MISMATCH")
    return 0 if ok and grad_ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gradkern", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="run the CPU demo: an Allen-Cahn time loop and its gradient")
    d.add_argument("--n", type=int, default=1_000_000)
    d.add_argument("--steps", type=int, default=200)
    d.add_argument("--grad-n", type=int, default=2_000)
    d.add_argument("--grad-steps", type=int, default=200)
    sub.add_parser("info", help="versions, backends, GPU and nvcc")
    args = parser.parse_args(argv)
    if args.command == "info":
        return info()
    return demo(args.n, args.steps, args.grad_n, args.grad_steps)


if __name__ == "__main__":
    sys.exit(main())
