"""Reverse-mode CPU cost: `gk.autodiff` against `gk.launch` and against a hand-written Numba adjoint.

Part 1, gradient cost (float64). For saxpy `y = a*x + y` (x, y Duplicated, a Active), one 1-D
Allen-Cahn step (u, un Duplicated; c and dt Const, in gradkern and in the hand-written version), one
2-D heat step with the 5-point stencil (u, un Duplicated, c Const) and a matrix-vector product
(A, x, y Duplicated, dim = rows), it times:

* the primal `gk.launch`, and `gk.autodiff` (primal and reverse in one call), both with argument
  validation included; goal: autodiff <= 3x primal;
* a hand-written `@numba.njit(parallel=True)` primal and adjoint (`prange`), called one after the
  other; goal: gk.autodiff <= 1.3x hand-written primal + adjoint.

Hand-written adjoints (what an expert writes, docs/adjoint-forms.md):
* saxpy: `dx += a*dy`, `da = sum(x*dy)` as a `prange` reduction; dy is unchanged (y is updated in place
  and dL/dy_before = dL/dy_after).
* Allen-Cahn: a gather, `du[i] += (1 - 2c + dt(1 - 3u_i^2)) dun[i] + c (dun[i-1] + dun[i+1])` over
  `prange(2, n - 2)`, the four points next to the fixed ends done before it, then a second `prange`
  pass zeroing dun (un is write-only).
* heat_step_2d: the same gather in 2-D, `prange` over rows, a branch-free inner loop for the points whose
  neighbours are all interior and a masked formula for the two-point frame, then a pass zeroing dun.
* matvec: the primal is one `prange` over rows; the adjoint is a `prange` over one block of rows per
  thread doing `dA[i, j] += dy[i]*x[j]` and accumulating `A[i, j]*dy[i]` into the block's private copy of
  dx, which are summed into dx afterwards (race-free, row-major streaming), and zeroing dy.

Before timing, each case runs gradkern and the hand-written version from identical inputs and checks
that primal outputs, shadows and Active derivatives agree (np.allclose, rtol 1e-10, atol 1e-12 times
the largest magnitude). Every timed call starts from the same state: primals and shadows are reset
from saved copies before it, outside the timed region. Median of --runs interleaved runs after warm-up.

Part 2, compile latency of the Allen-Cahn adjoint, each measured in a fresh `python -c` process, median
of 3: the time from just before the first `gk.autodiff` call to its return, with GRADKERN_CACHE_DIR a
fresh empty folder (cold) or one populated by an earlier process (warm); and the same for the
hand-written Allen-Cahn primal + adjoint (their source, taken from this file, written to a temporary
module): cold = `numba.njit(cache=False)`, warm = `cache=True` with a populated NUMBA_CACHE_DIR. Both
processes import Numba before the timed call (gradkern imports it lazily, at its first compile: the first
call alone would otherwise count ~0.15-0.3 s of `import numba` that the hand-written process pays at
import). The whole process's wall time (interpreter start, imports, compile, run) is reported as well.
Goals: gradkern cold <= 1.5x hand-written cold; gradkern warm <= 0.5 s.

    python benchmarks/kernels/reverse_cpu.py            # full sizes, print the tables
    python benchmarks/kernels/reverse_cpu.py --quick    # tiny sizes, 2 runs: smoke test (still checks results)
    python benchmarks/kernels/reverse_cpu.py --write    # wait for a quiet machine, then write benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (benchpath.py)
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path
from references import (
    allen_cahn_adjoint,
    allen_cahn_primal,
    heat_adjoint,
    heat_primal,
    matvec_adjoint,
    matvec_primal,
    saxpy_adjoint,
    saxpy_primal,
)
from report import RESULTS, git_revision, write_section
from timing import interleaved, load_average, machine, timed

import gradkern as gk
from gradkern.kernels import allen_cahn_step, heat_step_2d, matvec, saxpy

GOAL_PRIMAL = 3.0  # gk.autodiff / gk.launch
GOAL_HAND = 1.3  # gk.autodiff / hand-written primal + adjoint
GOAL_COLD = 1.5  # gradkern cold compile / hand-written cold compile
GOAL_WARM = 0.5  # seconds, gradkern warm first call
SECTION = "## reverse_cpu.py"
ROOT = Path(__file__).resolve().parents[2]
C_AC, DT_AC = 0.2, 0.01  # Allen-Cahn c = dt/h^2 and dt
C_HEAT = 0.2


# ---------------------------------------------------------------- cases


@dataclass
class Case:
    """One benchmark, all four callables working on the same arrays. `reset()` restores every primal
    and shadow to its initial state; `state()` copies what a run leaves (outputs, shadows); the
    gradient callables return the Active derivatives (a tuple, possibly empty)."""

    name: str
    size: str
    elements: int
    gk_primal: Callable[[], object]
    gk_grad: Callable[[], tuple]
    hand_primal: Callable[[], object]
    hand_grad: Callable[[], tuple]
    reset: Callable[[], None]
    primal_out: list[str]  # names of arrays the primal writes
    shadows: list[str]
    arrays: dict[str, np.ndarray]


def make_case(name: str, size: str, elements: int, arrays: dict[str, np.ndarray], **kw) -> Case:
    saved = {k: v.copy() for k, v in arrays.items()}

    def reset():
        for k, v in arrays.items():
            np.copyto(v, saved[k])

    return Case(name, size, elements, reset=reset, arrays=arrays, **kw)


def case_saxpy(n: int, rng: np.random.Generator) -> Case:
    a = 1.5
    ar = {"x": rng.random(n), "y": rng.random(n), "dx": rng.uniform(-1, 1, n), "dy": rng.uniform(-1, 1, n)}
    x, y, dx, dy = ar["x"], ar["y"], ar["dx"], ar["dy"]

    def gk_grad():
        return (gk.autodiff(saxpy, gk.Active(a), gk.Duplicated(x, dx), gk.Duplicated(y, dy))[0],)

    def hand_grad():
        saxpy_primal(a, x, y)
        return (saxpy_adjoint(a, x, dx, dy),)

    return make_case("saxpy (a Active)", f"n = {n:,}", n, ar,
                     gk_primal=lambda: gk.launch(saxpy, n, a, x, y), gk_grad=gk_grad,
                     hand_primal=lambda: saxpy_primal(a, x, y), hand_grad=hand_grad,
                     primal_out=["y"], shadows=["dx", "dy"])


def case_allen_cahn(n: int, rng: np.random.Generator) -> Case:
    c, dt = C_AC, DT_AC
    ar = {"u": rng.random(n), "un": np.full(n, np.nan), "du": rng.uniform(-1, 1, n), "dun": rng.uniform(-1, 1, n)}
    u, un, du, dun = ar["u"], ar["un"], ar["du"], ar["dun"]

    def gk_grad():
        gk.autodiff(allen_cahn_step, gk.Duplicated(u, du), gk.Duplicated(un, dun), gk.Const(c), gk.Const(dt))
        return ()

    def hand_grad():
        allen_cahn_primal(u, un, c, dt)
        allen_cahn_adjoint(u, du, dun, c, dt)
        return ()

    return make_case("allen_cahn_step (c Const)", f"n = {n:,}", n, ar,
                     gk_primal=lambda: gk.launch(allen_cahn_step, n, u, un, c, dt), gk_grad=gk_grad,
                     hand_primal=lambda: allen_cahn_primal(u, un, c, dt), hand_grad=hand_grad,
                     primal_out=["un"], shadows=["du", "dun"])


def case_heat(n: int, rng: np.random.Generator) -> Case:
    c = C_HEAT
    shape = (n, n)
    ar = {"u": rng.random(shape), "un": np.full(shape, np.nan), "du": rng.uniform(-1, 1, shape),
          "dun": rng.uniform(-1, 1, shape)}
    u, un, du, dun = ar["u"], ar["un"], ar["du"], ar["dun"]

    def gk_grad():
        gk.autodiff(heat_step_2d, gk.Duplicated(u, du), gk.Duplicated(un, dun), gk.Const(c))
        return ()

    def hand_grad():
        heat_primal(u, un, c)
        heat_adjoint(du, dun, c)
        return ()

    return make_case("heat_step_2d (c Const)", f"{n} x {n}", n * n, ar,
                     gk_primal=lambda: gk.launch(heat_step_2d, shape, u, un, c), gk_grad=gk_grad,
                     hand_primal=lambda: heat_primal(u, un, c), hand_grad=hand_grad,
                     primal_out=["un"], shadows=["du", "dun"])


def case_matvec(rows: int, cols: int, rng: np.random.Generator) -> Case:
    ar = {"A": rng.uniform(-1, 1, (rows, cols)), "x": rng.uniform(-1, 1, cols), "y": np.full(rows, np.nan),
          "dA": rng.uniform(-1, 1, (rows, cols)), "dx": rng.uniform(-1, 1, cols), "dy": rng.uniform(-1, 1, rows)}
    A, x, y, dA, dx, dy = (ar[k] for k in ("A", "x", "y", "dA", "dx", "dy"))
    blocks = max(1, min(numba.get_num_threads(), rows))

    def gk_grad():
        gk.autodiff(matvec, gk.Duplicated(A, dA), gk.Duplicated(x, dx), gk.Duplicated(y, dy), dim=rows)
        return ()

    def hand_grad():
        matvec_primal(A, x, y)
        matvec_adjoint(A, x, dA, dx, dy, blocks)
        return ()

    return make_case("matvec (A, x, y Duplicated)", f"{rows} x {cols}", rows * cols, ar,
                     gk_primal=lambda: gk.launch(matvec, rows, A, x, y), gk_grad=gk_grad,
                     hand_primal=lambda: matvec_primal(A, x, y), hand_grad=hand_grad,
                     primal_out=["y"], shadows=["dA", "dx", "dy"])


# ---------------------------------------------------------------- part 1: timing


def close(got: np.ndarray | float, expected: np.ndarray | float) -> bool:
    scale = float(np.max(np.abs(expected))) if np.size(expected) else 0.0
    return bool(np.allclose(got, expected, rtol=1e-10, atol=1e-12 * max(scale, 1e-300)))


def check(case: Case) -> None:
    """Run gradkern and the hand-written version from identical inputs; primal outputs, shadows and
    Active derivatives must agree."""
    for label, gk_fn, hand_fn, names in (("primal", case.gk_primal, case.hand_primal, case.primal_out),
                                         ("gradient", case.gk_grad, case.hand_grad, case.primal_out + case.shadows)):
        case.reset()
        got_d = gk_fn()
        got = {k: case.arrays[k].copy() for k in names}
        case.reset()
        exp_d = hand_fn()
        for k in names:
            e = case.arrays[k]
            if not close(got[k], e):
                raise AssertionError(f"{case.name}: {label}: '{k}' differs between gradkern and hand-written "
                                     f"(max abs diff {np.nanmax(np.abs(got[k] - e)):.3e}, "
                                     f"max abs {np.nanmax(np.abs(e)):.3e})")
        if label == "gradient":
            if len(got_d) != len(exp_d) or not all(close(g, e) for g, e in zip(got_d, exp_d)):
                raise AssertionError(f"{case.name}: Active derivatives differ: gradkern {got_d}, hand {exp_d}")
    case.reset()


@dataclass
class Row:
    name: str
    size: str
    elements: int
    gk_primal_ms: float
    gk_grad_ms: float
    hand_primal_ms: float
    hand_grad_ms: float

    @property
    def ratio_primal(self) -> float:
        return self.gk_grad_ms / self.gk_primal_ms

    @property
    def ratio_hand(self) -> float:
        return self.gk_grad_ms / self.hand_grad_ms

    @property
    def hand_ratio(self) -> float:
        return self.hand_grad_ms / self.hand_primal_ms


def run_case(case: Case, runs: int) -> Row:
    """Warm up, check, then time `runs` interleaved calls of each version (order rotated per run);
    the state is reset before every call, outside the timed region."""
    fns = [case.gk_primal, case.gk_grad, case.hand_primal, case.hand_grad]
    for fn in fns:  # warm-up: compile
        case.reset()
        fn()
    check(case)
    times = interleaved({str(k): timed(fn, setup=case.reset) for k, fn in enumerate(fns)}, runs)
    med = [statistics.median(times[str(k)]) * 1e3 for k in range(len(fns))]
    return Row(case.name, case.size, case.elements, *med)


def gradient_table(rows: list[Row]) -> str:
    head = ["kernel", "size", "gk.launch ms", "gk.autodiff ms", "autodiff / launch", f"goal <= {GOAL_PRIMAL:g}x",
            "hand primal ms", "hand primal + adjoint ms", "hand (p+a) / p", "gk.autodiff / hand p+a",
            f"goal <= {GOAL_HAND:g}x"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ok1 = "ok" if r.ratio_primal <= GOAL_PRIMAL else "MISSED"
        ok2 = "ok" if r.ratio_hand <= GOAL_HAND else "MISSED"
        lines.append(f"| {r.name} | {r.size} | {r.gk_primal_ms:.2f} | {r.gk_grad_ms:.2f} | {r.ratio_primal:.2f} | "
                     f"{ok1} | {r.hand_primal_ms:.2f} | {r.hand_grad_ms:.2f} | {r.hand_ratio:.2f} | "
                     f"{r.ratio_hand:.2f} | {ok2} |")
    return "\n".join(lines)


# ---------------------------------------------------------------- part 2: compile latency

_GK_SCRIPT = """
import json, time
t0 = time.perf_counter()
import numpy as np
import gradkern as gk
import numba  # gradkern imports Numba at its first compile; the hand-written module imports it here too
from gradkern.kernels import allen_cahn_step
t1 = time.perf_counter()
n = {n}
u = np.linspace(0.0, 1.0, n); un = np.zeros(n); du = np.zeros(n); dun = np.ones(n)
t2 = time.perf_counter()
gk.autodiff(allen_cahn_step, gk.Duplicated(u, du), gk.Duplicated(un, dun), gk.Const({c}), gk.Const({dt}))
t3 = time.perf_counter()
assert np.isfinite(du).all() and not dun.any()
print(json.dumps({{"import": t1 - t0, "first": t3 - t2}}))
"""

_HAND_SCRIPT = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
sys.path.insert(0, {moddir!r})
import {modname} as h
t1 = time.perf_counter()
n = {n}
u = np.linspace(0.0, 1.0, n); un = np.zeros(n); du = np.zeros(n); dun = np.ones(n)
t2 = time.perf_counter()
h.allen_cahn_primal(u, un, {c}, {dt})
h.allen_cahn_adjoint(u, du, dun, {c}, {dt})
t3 = time.perf_counter()
assert np.isfinite(du).all() and not dun.any()
print(json.dumps({{"import": t1 - t0, "first": t3 - t2}}))
"""


def hand_module_source(cache: bool) -> str:
    """references.py's hand-written Allen-Cahn primal and adjoint as a module, njit(cache=...)."""
    parts = ["import numba", "from numba import prange", ""]
    for fn in (allen_cahn_primal, allen_cahn_adjoint):
        src = inspect.getsource(fn.py_func)
        assert src.startswith("@numba.njit(parallel=True)\n")
        parts.append("\n" + src.replace("@numba.njit(parallel=True)", f"@numba.njit(parallel=True, cache={cache})", 1))
    return "\n".join(parts)


@dataclass
class Latency:
    first_s: float  # just before the first call to its return
    import_s: float
    wall_s: float  # whole process, measured by the parent


def run_process(code: str, env: dict[str, str]) -> Latency:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"compile-latency subprocess failed ({p.returncode}):\n{p.stderr}")
    d = json.loads(p.stdout.strip().splitlines()[-1])
    return Latency(d["first"], d["import"], wall)


def median_latency(ls: list[Latency]) -> Latency:
    return Latency(statistics.median(x.first_s for x in ls), statistics.median(x.import_s for x in ls),
                   statistics.median(x.wall_s for x in ls))


def compile_latency(reps: int, n: int = 1000) -> dict[str, Latency]:
    """Cold and warm first-call latency for gradkern and the hand-written Numba, in fresh processes."""
    base = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "GRADKERN_CACHE_DIR")}
    out: dict[str, list[Latency]] = {"gk cold": [], "hand cold": [], "gk warm": [], "hand warm": []}
    with tempfile.TemporaryDirectory(prefix="gk_reverse_bench_") as tmp_s:
        tmp = Path(tmp_s)
        gk_code = _GK_SCRIPT.format(n=n, c=C_AC, dt=DT_AC)
        mods = {}
        for cache in (False, True):
            moddir = tmp / f"hand_cache_{cache}"
            moddir.mkdir()
            modname = f"hand_allen_cahn_{'cached' if cache else 'nocache'}"
            (moddir / f"{modname}.py").write_text(hand_module_source(cache))
            mods[cache] = _HAND_SCRIPT.format(moddir=str(moddir), modname=modname, n=n, c=C_AC, dt=DT_AC)
        gk_dir = None
        for r in range(reps):  # cold: every process gets fresh, empty cache folders
            gk_dir = tmp / f"gk_cold_{r}"
            gk_dir.mkdir()
            out["gk cold"].append(run_process(gk_code, {**base, "GRADKERN_CACHE_DIR": str(gk_dir)}))
            nb_dir = tmp / f"numba_cold_{r}"
            nb_dir.mkdir()
            out["hand cold"].append(run_process(mods[False], {**base, "NUMBA_CACHE_DIR": str(nb_dir)}))
        # warm: gradkern reuses the last cold run's folder; the hand-written cache is populated once first
        nb_warm = tmp / "numba_warm"
        nb_warm.mkdir()
        run_process(mods[True], {**base, "NUMBA_CACHE_DIR": str(nb_warm)})
        if not any(nb_warm.rglob("*.nbi")):
            raise RuntimeError("the hand-written module's Numba cache was not written")
        for _ in range(reps):
            out["gk warm"].append(run_process(gk_code, {**base, "GRADKERN_CACHE_DIR": str(gk_dir)}))
            out["hand warm"].append(run_process(mods[True], {**base, "NUMBA_CACHE_DIR": str(nb_warm)}))
    return {k: median_latency(v) for k, v in out.items()}


def latency_table(lat: dict[str, Latency]) -> str:
    head = ["version", "cold: first call s", "cold: process wall s", "warm: first call s", "warm: process wall s",
            "import s (warm)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for who, label in (("gk", "gradkern `gk.autodiff`"), ("hand", "hand-written Numba primal + adjoint")):
        c, w = lat[f"{who} cold"], lat[f"{who} warm"]
        lines.append(f"| {label} | {c.first_s:.3f} | {c.wall_s:.3f} | {w.first_s:.3f} | {w.wall_s:.3f} | "
                     f"{w.import_s:.3f} |")
    cold_ratio = lat["gk cold"].first_s / lat["hand cold"].first_s
    wall_ratio = lat["gk cold"].wall_s / lat["hand cold"].wall_s
    warm = lat["gk warm"].first_s
    lines += ["", f"* gradkern cold / hand-written cold (first call): {cold_ratio:.2f}x "
                  f"(goal <= {GOAL_COLD:g}x: {'ok' if cold_ratio <= GOAL_COLD else 'MISSED'})",
              f"* the same, whole cold process (interpreter, imports, compile, run): {wall_ratio:.2f}x",
              f"* gradkern warm first call: {warm:.3f} s (goal <= {GOAL_WARM:g} s: "
              f"{'ok' if warm <= GOAL_WARM else 'MISSED'})"]
    return "\n".join(lines)


# ---------------------------------------------------------------- report


def wait_for_quiet(threshold: float, poll: float = 10.0, limit: float = 900.0) -> float:
    """Wait until the 1-minute load average is below `threshold` (at most `limit` s); return it."""
    t0 = time.monotonic()
    load = load_average()
    while load >= threshold and time.monotonic() - t0 < limit:
        print(f"waiting for a quiet machine: 1-minute load average {load:.2f} >= {threshold}", file=sys.stderr,
              flush=True)
        time.sleep(poll)
        load = load_average()
    if load >= threshold:
        print(f"warning: load average still {load:.2f} after {limit:.0f} s; measuring anyway", file=sys.stderr)
    return load


def section(rows: list[Row], lat: dict[str, Latency] | None, args: argparse.Namespace, command: str,
            load_start: float, load_end: float, revision: str) -> str:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = [
        SECTION,
        "",
        "Reverse mode, float64. `gk.launch` (primal) and `gk.autodiff` (primal + reverse in one call, "
        "shadows updated in place), both with argument validation, against a hand-written "
        "`@numba.njit(parallel=True)` primal and adjoint called one after the other, all on the same arrays. "
        "Hand-written adjoints: saxpy `dx += a*dy` and `da = sum(x*dy)` (prange reduction); the stencils a "
        "gather (`du[i] += k(u_i)*dun[i] + c*(dun[i-1] + dun[i+1])`, 2-D alike, a masked formula on the "
        "frame next to the fixed edges) followed by a pass zeroing dun; matvec a prange over one row block per "
        "thread doing `dA[i, j] += dy[i]*x[j]` and accumulating `A[i, j]*dy[i]` into a per-block copy of dx, "
        "summed after. saxpy's `a` is Active; Allen-Cahn's c and dt and the heat step's c are Const in both "
        "versions. Before timing, outputs, shadows and Active derivatives of both versions were checked "
        "equal from identical inputs (`np.allclose`, rtol 1e-10, atol 1e-12 x max magnitude). Primals and "
        f"shadows are reset before every call, outside the timed region; median of {args.runs} interleaved "
        "runs after warm-up.",
        "",
        f"* command: `{command}`",
        f"* date: {now}",
        f"* machine: {machine()}, Numba threads: {numba.get_num_threads()} "
        f"({numba.threading_layer()} layer); 1-minute load average at start {load_start:.2f}, "
        f"at end {load_end:.2f}",
        f"* versions: Python {platform.python_version()}, NumPy {np.__version__}, Numba {numba.__version__}, "
        f"gradkern {gk.__version__} (commit {revision})",
        "",
        gradient_table(rows),
        "",
    ]
    if lat is not None:
        text += [
            f"Compile latency of the Allen-Cahn gradient (n = 1000), each in a fresh `python -c` process, "
            f"median of {args.compile_reps}. \"First call\": from just before the first `gk.autodiff` call "
            "to its return (gradkern), or before the first call of the hand-written primal to the return of "
            "the hand-written adjoint; \"process wall\": the whole process, interpreter start and imports "
            "included, measured by the parent. Cold: GRADKERN_CACHE_DIR a fresh empty folder / hand-written "
            "`numba.njit(parallel=True, cache=False)`; warm: GRADKERN_CACHE_DIR populated by an earlier "
            "process / `cache=True` with a populated NUMBA_CACHE_DIR (module written to a temporary file).",
            "",
            latency_table(lat),
            "",
        ]
    return "\n".join(text)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes, 2 runs, 1 compile process each (smoke test)")
    p.add_argument("--write", action="store_true", help=f"write the tables to {RESULTS.name}")
    p.add_argument("--runs", type=int, default=None, help="timed runs per version (default 11, --quick 2)")
    p.add_argument("--compile-reps", type=int, default=None, help="processes per latency (default 3, --quick 1)")
    p.add_argument("--no-compile", action="store_true", help="skip part 2 (compile latency)")
    p.add_argument("--compile-only", action="store_true", help="run part 2 (compile latency) only; not with --write")
    p.add_argument("--no-wait", action="store_true", help="with --write: do not wait for a load average < 0.5")
    args = p.parse_args(argv)
    if args.compile_only and (args.write or args.no_compile):
        p.error("--compile-only goes with neither --write nor --no-compile")
    args.runs = args.runs or (2 if args.quick else 11)
    args.compile_reps = args.compile_reps or (1 if args.quick else 3)
    n1d, n2d, mv = (2**10, 48, (64, 32)) if args.quick else (2**22, 2048, (2048, 1024))

    revision = git_revision()
    if args.write and not args.no_wait:
        load_start = wait_for_quiet(0.5)
    else:
        load_start = load_average()
        if load_start > 0.5:
            print(f"warning: 1-minute load average is {load_start:.2f}; other processes may disturb the timings",
                  file=sys.stderr)
    rng = np.random.default_rng(0)
    print(f"Numba threads: {numba.get_num_threads()}", flush=True)
    rows = []
    cases = (lambda: case_saxpy(n1d, rng), lambda: case_allen_cahn(n1d, rng), lambda: case_heat(n2d, rng),
             lambda: case_matvec(*mv, rng))
    for make in () if args.compile_only else cases:
        case = make()
        rows.append(run_case(case, args.runs))
        print(f"  {case.name}: checked, timed", file=sys.stderr, flush=True)
        del case
    print(f"CPU: {machine()}; Numba threads: {numba.get_num_threads()} "
          f"({numba.threading_layer()} layer); median of {args.runs} runs; float64")
    if rows:
        print(gradient_table(rows))
    lat = None
    if not args.no_compile:
        print("  compile latency (fresh processes) ...", file=sys.stderr, flush=True)
        lat = compile_latency(args.compile_reps)
        print()
        print(f"Compile latency, Allen-Cahn gradient, median of {args.compile_reps} fresh processes")
        print(latency_table(lat))
    load_end = load_average()
    print(f"1-minute load average: start {load_start:.2f}, end {load_end:.2f}")
    if args.quick:
        print("(--quick: arrays this small time per-call overhead, not the kernels)")
    if args.write:
        command = shlex.join(["python", os.path.relpath(sys.argv[0]), *(argv if argv is not None else sys.argv[1:])])
        write_section(section(rows, lat, args, command, load_start, load_end, revision), SECTION, RESULTS)
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
