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

    import gradkern

    from .runtime.cache import cache_dir

    print(f"gradkern   {gradkern.__version__}")
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
    print(f"backends   {', '.join(backends)}")
    print(f"cache      {cache_dir()}")
    return 0


def demo(n: int = 1_000_000, steps: int = 200) -> int:
    """Run a 1-D Allen-Cahn time loop on the CPU with a gradkern kernel, check
    it against NumPy, and print the energy along the way."""
    import numpy as np

    import gradkern as gk
    from gradkern.kernels import allen_cahn_step

    h = 1.0 / (n - 1)
    dt = 0.2 * h * h
    c = dt / (h * h)
    x = np.linspace(0.0, 1.0, n)
    rng = np.random.default_rng(0)
    u0 = 0.1 * np.sin(6 * np.pi * x) + 0.05 * rng.standard_normal(n)
    u0[0] = u0[-1] = 0.0

    def energy(u):
        return float(np.sum(0.5 * (np.diff(u) / h) ** 2) * h + np.sum(0.25 * (u * u - 1) ** 2) * h)

    print(f"gradkern {gk.__version__} demo: 1-D Allen-Cahn u_t = u_xx + u - u^3, n = {n:,}, {steps} steps, CPU")
    t0 = time.perf_counter()
    u, un = u0.copy(), np.empty_like(u0)
    gk.launch(allen_cahn_step, n, u, un, c, dt)  # compile (or load from cache) and first step
    first = time.perf_counter() - t0
    u, un = un, u
    print(f"  first launch (compile or cache load): {first:.2f} s")
    print(f"  {'step':>6}  {'energy':>14}")
    print(f"  {0:>6}  {energy(u0):>14.8f}")
    t0 = time.perf_counter()
    for s in range(1, steps):
        gk.launch(allen_cahn_step, n, u, un, c, dt)
        u, un = un, u
        if (s + 1) % (steps // 4) == 0:
            print(f"  {s + 1:>6}  {energy(u):>14.8f}")
    elapsed = time.perf_counter() - t0
    ref = u0.copy()
    for _ in range(steps):
        r = ref.copy()
        r[1:-1] = ref[1:-1] + c * (ref[:-2] - 2 * ref[1:-1] + ref[2:]) + dt * (ref[1:-1] - ref[1:-1] ** 3)
        ref = r
    err = float(np.max(np.abs(u - ref)))
    rate = (steps - 1) * n / elapsed / 1e6
    print(f"  {steps - 1} launches in {elapsed:.3f} s ({rate:.0f} M points/s); "
          f"max |gradkern - numpy| = {err:.2e}")
    if err > 1e-12:
        print("  MISMATCH against the NumPy reference")
        return 1
    print("  matches the NumPy reference")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gradkern", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="run the CPU demo: an Allen-Cahn time loop")
    d.add_argument("--n", type=int, default=1_000_000)
    d.add_argument("--steps", type=int, default=200)
    sub.add_parser("info", help="versions, backends, GPU and nvcc")
    args = parser.parse_args(argv)
    if args.command == "info":
        return info()
    return demo(args.n, args.steps)


if __name__ == "__main__":
    sys.exit(main())
