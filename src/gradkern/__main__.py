"""`python -m gradkern demo` (the main job, on the CPU), `python -m gradkern demo --list` and
`demo NAME [args...]` (the examples, gradkern.examples), and `python -m gradkern info`."""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import os
import pkgutil
import platform
import shutil
import sys
import time
from pathlib import Path
from types import ModuleType


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
    from .backends.hostcuda import COMPILER, compiler
    cxx = compiler()
    print(f"{COMPILER:<10} {cxx or 'not on PATH (backend hostcuda unavailable)'}")
    backends = ["interp (reference interpreter)"]
    try:
        importlib.import_module("numba")
        backends.insert(0, "cpu (numba)")
    except ImportError:
        pass
    backends.append("cuda (CUDA C through CuPy/NVRTC)" if names else
                    "cuda: code generation only (gk.inspect(..., backend='cuda')); running needs CuPy and a GPU")
    if cxx:
        backends.append("hostcuda (the CUDA C run on the host through g++: a test backend)")
    print(f"backends   {', '.join(backends)}")
    from .backends import default_name
    from .errors import LaunchError
    try:
        default = default_name()
    except LaunchError as e:
        default = f"invalid ({e.message})"
    print(f"default    {default} (of NumPy launches; GRADKERN_BACKEND)")
    print(f"cache      {cache_dir()}{_unusable(cache_dir())}")
    return 0


def _unusable(directory: Path) -> str:
    """' (unusable: why)' where the cache directory cannot be made or written, else '' (creates nothing): a
    launch then keeps compiled code in memory, with one CacheWarning (docs/caching.md#damaged-entries). The
    version folder `directory` itself, when no folder, is damage a launch replaces: the folder above decides."""
    existing = directory if directory.is_dir() else directory.parent
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        why = f"{existing} is not a directory"
    elif not os.access(existing, os.W_OK | os.X_OK):
        why = f"{existing} is not writable"
    else:
        return ""
    return f" (unusable: {why}; compiled code is kept in memory; set GRADKERN_CACHE_DIR)"


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
    it against NumPy; then differentiate a program (the time loop over
    ping-pong buffers and an energy kernel) with respect to the initial state
    and the coefficient, and check that gradient against finite differences."""
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

    n, steps = grad_n, grad_steps + grad_steps % 2
    h, dt, c, u0 = _allen_cahn_setup(n)
    print(f"\n2. a program: {steps} launches over ping-pong buffers, then an energy kernel (n = {n:,});")
    print("   its gradient with respect to the initial state u_0 and the coefficient c, by gk.autodiff_thunk")
    energy_kernel = _energy_kernel()

    def simulate(u, v, E, c):
        for _ in range(steps // 2):
            gk.launch(allen_cahn_step, n, u, v, c, dt)
            gk.launch(allen_cahn_step, n, v, u, c, dt)
        gk.launch(energy_kernel, n, u, E, h)

    def loss(start, coefficient):
        u, v, E = start.copy(), np.zeros(n), np.zeros(1)
        simulate(u, v, E, coefficient)
        return float(E[0])

    u, v, E = u0.copy(), np.zeros(n), np.zeros(1)
    du, dv = np.zeros(n), np.zeros(n)
    args = (gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Duplicated(E, np.ones(1)), gk.Active(c))
    forward, reverse = gk.autodiff_thunk(simulate, gk.Duplicated, gk.Duplicated, gk.Duplicated, gk.Active)
    t0 = time.perf_counter()
    tape = forward(*args)
    energy = float(E[0])
    dc = reverse(*args, tape)[3]
    elapsed = time.perf_counter() - t0
    u2, v2, E2 = u0.copy(), np.zeros(n), np.zeros(1)
    again = (gk.Duplicated(u2, np.zeros(n)), gk.Duplicated(v2, np.zeros(n)), gk.Duplicated(E2, np.ones(1)),
             gk.Active(c))
    t0 = time.perf_counter()
    reverse(*again, forward(*again))
    warm = time.perf_counter() - t0
    print(f"  E(u_T) = {energy:.10f}; recording + reverse sweep in {elapsed:.2f} s (compiling included), "
          f"{warm:.2f} s the second time")
    print(f"  tape: {tape.saved_bytes / 1e6:.2f} MB saved copy-on-write ({steps - 1} states of {n * 8 / 1e3:.0f} kB: "
          f"each launch overwrites the state the previous launch's reverse reads), "
          f"{tape.kernel_tape_bytes / 1e3:.1f} kB kernel tapes")
    print(f"  {'derivative':>12}  {'reverse mode':>16}  {'finite differences':>18}  {'rel. error':>10}")
    worst = 0.0
    eps = 1e-6
    for j in (1, n // 7, n // 3, n // 2, n - 2, None):
        if j is None:
            fd = (loss(u0, c + eps * c) - loss(u0, c - eps * c)) / (2 * eps * c)
            got, label = dc, "dE/dc"
        else:
            up, um = u0.copy(), u0.copy()
            up[j] += eps
            um[j] -= eps
            fd = (loss(up, c) - loss(um, c)) / (2 * eps)
            got, label = du[j], f"dE/du0[{j}]"
        rel = abs(got - fd) / max(abs(fd), 1e-12)
        worst = max(worst, rel)
        print(f"  {label:>12}  {got:>16.10e}  {fd:>18.10e}  {rel:>10.2e}")
    grad_ok = worst < 1e-5
    print("  the gradient matches finite differences" if grad_ok else "  GRADIENT MISMATCH")
    return 0 if ok and grad_ok else 1


def _energy_kernel():
    """E += sum h (1/2 ((u_{i+1} - u_i)/h)^2 + 1/4 (u_i^2 - 1)^2), as a kernel (the program's loss)."""
    import gradkern as gk

    @gk.kernel
    def allen_cahn_energy(u, E, h):
        i = gk.tid()
        w = 0.25 * (u[i] * u[i] - 1.0) * (u[i] * u[i] - 1.0)
        if i < u.shape[0] - 1:
            d = (u[i + 1] - u[i]) / h
            w += 0.5 * d * d
        gk.atomic_add(E, 0, h * w)

    return allen_cahn_energy


def _examples() -> ModuleType:
    """The package gradkern.examples: installed, or in a development checkout (PYTHONPATH=src) the top-level
    examples/ folder beside src/, loaded under that name."""
    try:
        return importlib.import_module("gradkern.examples")
    except ModuleNotFoundError as e:
        if e.name != "gradkern.examples":
            raise
    folder = Path(__file__).resolve().parent.parent.parent / "examples"
    spec = importlib.util.spec_from_file_location("gradkern.examples", folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    if spec is None or not (folder / "__init__.py").is_file():
        raise ModuleNotFoundError("gradkern.examples is not installed and no examples/ folder is beside src/",
                                  name="gradkern.examples")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gradkern.examples"] = module
    spec.loader.exec_module(module)
    return module


def examples() -> dict[str, str]:
    """Every example module (name -> the first line of its docstring), read from the source, not imported."""
    package = _examples()
    found = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.ispkg:
            continue
        spec = importlib.util.find_spec(f"{package.__name__}.{info.name}")
        try:
            doc = ast.get_docstring(ast.parse(Path(spec.origin).read_text())) or ""
        except (OSError, SyntaxError, TypeError, ValueError) as e:
            doc = f"(its docstring could not be read: {type(e).__name__})"
        found[info.name] = doc.strip().splitlines()[0] if doc.strip() else "(no docstring)"
    return found


def run_example(name: str, args: list[str]) -> int:
    """`demo NAME [args...]`: gradkern.examples.NAME.main(args); an unknown NAME lists the names (exit 2)."""
    names = examples()
    if name not in names:
        print(f"python -m gradkern demo: no example named {name!r}; the examples are: {', '.join(names)} "
              "(python -m gradkern demo --list)", file=sys.stderr)
        return 2
    module = importlib.import_module(f"{_examples().__name__}.{name}")
    argv0, sys.argv[0] = sys.argv[0], f"python -m gradkern demo {name}"  # the example's argparse usage line
    try:
        return int(module.main(list(args)) or 0)
    finally:
        sys.argv[0] = argv0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if len(argv) >= 2 and argv[0] == "demo" and not argv[1].startswith("-"):
        return run_example(argv[1], argv[2:])  # everything after NAME is the example's
    parser = argparse.ArgumentParser(prog="python -m gradkern", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="run the CPU demo (an Allen-Cahn time loop and its gradient), or an example",
                       usage="python -m gradkern demo [--list] [--n N] [--steps S] [--grad-n N] [--grad-steps S]\n"
                             "       python -m gradkern demo NAME [example arguments: --quick, --out DIR, ...]",
                       description="Without NAME: a 1-D Allen-Cahn time loop checked against NumPy, then the "
                                   "gradient of a program over it checked against finite differences. With NAME: "
                                   "the example gradkern.examples.NAME (--list names them), given every argument "
                                   "after NAME.")
    d.add_argument("--list", action="store_true", help="list the examples (gradkern.examples) and exit")
    d.add_argument("--n", type=int, default=1_000_000, help="grid points of the time loop")
    d.add_argument("--steps", type=int, default=200, help="its time steps")
    d.add_argument("--grad-n", type=int, default=2_000, help="grid points of the differentiated program")
    d.add_argument("--grad-steps", type=int, default=200, help="its time steps")
    sub.add_parser("info", help="versions, backends, GPU and nvcc")
    args = parser.parse_args(argv)
    if args.command == "info":
        return info()
    if args.list:
        names = examples()
        width = max(map(len, names), default=0)
        for name, summary in names.items():
            print(f"{name:<{width}}  {summary}")
        print("\nrun one: python -m gradkern demo NAME [--quick] [--out DIR]  (NAME --help: its options)")
        return 0
    return demo(args.n, args.steps, args.grad_n, args.grad_steps)


if __name__ == "__main__":
    sys.exit(main())
