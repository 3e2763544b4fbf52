"""The kernel library's cost: every gradkern.kernels kernel at a bandwidth-bound size, primal and gradient.

The rows are discovered, not listed: every `benchmarks/library/library_<family>.py`
(but library_rows.py, which defines `Row`) holds a list `ROWS` of
`library_rows.Row`. A row's `name` is its kernel's name in gradkern.kernels
(a label may follow after a space: `"saxpy (a Const)"`). For each row, at
the size its `setup(rng, n)` makes of n (default 2**22 points), it times:

* primal: `gk.launch(kernel, dim, *args)`;
* gradient: `gk.autodiff(kernel, ...)` in reverse mode (a primal and its
  reverse, argument validation included): every float array the row
  differentiates (Row.wrt; None: every float array and float scalar) is
  `Duplicated` with a shadow seeded uniform in [-1, 1), each differentiated
  float scalar `Active`, the rest `Const`;
* hand (where the row has one): `Row.hand(args, shadows)`, a hand-written
  Numba primal followed by its adjoint on the same arrays and shadows; the
  driver first runs it and gk.autodiff from one state and checks that they
  leave the same primals and shadows (np.allclose, rtol 1e-9).

Every call starts from the same state: primals and shadows are restored
from saved copies before it, outside the timed region (a gradient call
changes the shadows of what the kernel writes, a primal call may update its
inputs in place). The variants are timed in rounds, interleaved (the order
rotated each round) after one warm-up call each (compiling); the table gives
medians. The machine's copy bandwidth is measured in the same run, before
and after the rows (a parallel Numba copy and `np.copyto` of a 128 MiB
float64 array, the better of the two and of the two runs; bytes read plus
bytes written per second, as STREAM counts a copy).

Bandwidth: primal GB/s = Row.traffic(args) (the fewest bytes the primal
must move) / primal time; gradient GB/s = (Row.traffic(args) + 2 x the bytes
of every shadow: each read and written once) / gradient time, the traffic a
fused primal-and-adjoint would need at least. Rows with traffic 0
(compute-bound, n-body) are reported in time only. Goals (issue 33):
gradient/hand <= 1.3 where a hand-written adjoint exists, and gradient/primal
<= 3, or, for a byte-bound row, no worse than the hand-written adjoint's own
ratio: gradient/primal <= hand/hand primal, both primals timed in the same
rounds, or gradient <= hand (a gradkern primal faster than the hand-written
one does not count against the gradient); a missed goal's reason comes from
REASONS below (filled in when the cause is known), "—" otherwise.

    python benchmarks/library/library.py                        # full size, print the table
    python benchmarks/library/library.py --quick                # tiny sizes, 3 rounds: a smoke test
    python benchmarks/library/library.py --only saxpy,stencils  # rows by kernel or family name
    python benchmarks/library/library.py --write                # also RESULTS.md's section and library/library.png
    python benchmarks/library/library.py --gpu                  # the same on CuPy arrays (needs CuPy and a CUDA GPU)
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import shlex
import statistics
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # benchmarks/ (benchpath.py); also when a test imports this file
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path
from library_rows import Row  # noqa: E402
from report import publish, run_lines  # noqa: E402
from timing import interleaved, machine, timed  # noqa: E402

import gradkern as gk  # noqa: E402
import gradkern.kernels as library  # noqa: E402

GOAL_PRIMAL = 3.0  # gradient / primal
GOAL_HAND = 1.3  # gradient / hand-written primal + adjoint
SECTION = "## library.py"
PNG = HERE / "library.png"
COPY_ELEMENTS = 2**24  # 128 MiB of float64: beyond the caches of most machines (not a 260 MiB L3: RESULTS.md)
# Why a kernel misses a goal, by row name, from gk.inspect's plan and the bytes each pass moves (shown in the
# table's last column). "Not profiled" where the cause is not known yet.
_STENCIL = ("byte bound: the gradient is the gather (which also clears the output's shadow, docs/adjoint-forms.md "
            "section 6) and the primal, ~3x the primal's traffic")
# The periodic gathers (docs/adjoint-forms.md, section 7), measured with library.py --only transport on one
# thread at load 3.4: the interior replays only the unwrapped candidates, each sliced to the faces that reach the
# cell, so each face's partials are computed twice (once per cell's output shadow) where the hand adjoint adds
# the two shadows first and computes them once; evaluated by its coefficients (section 11), the interior computes
# a face's partials once where they cost most (burgers_rusanov_1d).
_WRAP = "periodic gather: the interior replays {copies} sliced copies ({statements} straight-line statements); {rest}"
REASONS: dict[str, str] = {
    "axpy": ("fused since issue 33 (Active a's sum reassociated, so the loop vectorises: docs/adjoint-forms.md "
             "section 9): 6 streams for the primal's 3; one thread: 2.14-2.18x (2.80-2.87x as two passes)"),
    "scal": ("fused, Active a's sum reassociated (adjoint-forms.md 9): 4 streams for the primal's 2; one thread: "
             "2.11-2.15x (3.13-3.44x with the sum in order)"),
    "ger": ("fused, alpha's and each row's dx sums reassociated (adjoint-forms.md 9): one thread 1.79-1.87x "
            "(4.7-6.7x with in-order sums, two passes)"),
    "gemv_t": ("one thread per column walks A with stride n (16 KiB, a page per element); since issue 33 the "
               "reverse loop is fused into the forward one (adjoint-forms.md section 10): A's column walked once, "
               "3 strided accesses per element (A, dA read and written) for the primal's 1, was 4; one thread "
               "1.96-2.06x (2.91-2.93x as two loops, alternating runs, load 4.4), 2 threads 2.23x (2.56x, load 4.3)"),
    "d2q9_step": ("byte bound: f's shadow pulled (adjoint-forms.md 8), fused kernel then pull move 75 values a cell "
                  "against the primal's 19 (3.9x) and the hand-written adjoint's 85; quiet: 0.75x hand (1 thread), "
                  "0.83x (2)"),
    "d2q9_equilibrium": ("byte bound: the fused gradient moves 36 values a cell against the primal's 12 (3.0x); its "
                         "242-statement body ran outlined, unvectorised, 5x slower until issue 33"),
    "l2_misfit": "u's shadow takes atomic adds at sensors that may repeat: sparse privatisation (adjoint-forms.md 5)",
    "l2_misfit_2d": "u's shadow takes atomic adds at sensors that may repeat: sparse privatisation",
    "nbody_forces": ("compute bound (all pairs of 2048 particles); the fused gradient runs the primal's pair loop, "
                     "then a reverse loop recomputing each pair (adjoint-forms.md 12): alone 2.95-3.00x the primal "
                     "(one thread, process time). Not the divider (2 divisions a pair instead of 5: 3.95x against "
                     "4.01x); since issue 33 the quotient is read once (a shadow add made LLVM reload mass[j] and "
                     "divide again) and adds into zeroed adjoints are assignments: 58 instructions, 4 divisions a "
                     "pair for 65 and 5, 4.01-4.06x -> 3.63-3.64x (process time, load 3.6-9). The hand-written "
                     "adjoint (both ends of each pair pulled in one loop, 1 division and 1 sqrt a pair) costs the "
                     "same: 3.64x its primal, gradkern 1.00x it; library.py at load 1.7, one thread: 3.67x, 1.00x "
                     "hand (hand 3.72x its primal), was 4.05x, 1.10x; the forward loop alone is 1x of the 3.67x"),
    "leapfrog": ("one thread 1.93-2.08x; 2 threads 3.62x in session 41's quiet run, 1.99x in session 42's (load 3.7). "
                 "The outlined body (151 IR statements) adds Active dt's term to its chunk's slot at every thread; "
                 "the two chunks' slots shared a cache line until numba_loops.PAD (an A/B at load 3.5: inconclusive)"),
    "spmv_t": "not profiled (the same random dy reads as the hand adjoint)",
    "laplace_2d": _STENCIL, "heat_step_2d": _STENCIL, "wave_step_2d": _STENCIL,
    # vs hand, session 42 (one thread, loaded machine, one process): signed indices made the parfor loops
    # gathers and scatters (docs/performance.md); printed unsigned, the gradient went 1.08 -> 0.86x hand (3-D),
    # 0.98 -> 0.68x (allen_cahn_step_2d), 0.82 -> 0.45x (allen_cahn_step), 0.80 -> 0.65x (heat_step_2d)
    "heat_step_3d": _STENCIL, "allen_cahn_step_2d": _STENCIL,
    "laplace9_2d": _STENCIL + "; vs hand: the 9-point gather's frame, not profiled",
    "add_source": ("one point: host cost per call, not bandwidth. Each timed call follows the row's reset (two 32 MiB "
                   "arrays restored), which leaves the caches cold: measured at 2048^2, gk.launch 59 us and "
                   "gk.autodiff 165 us after a reset (3.9 and 24.5 us warm), a bare Numba call 20 us"),
    "upwind_1d": _WRAP.format(copies=3, statements=69, rest="the hand adjoint's 5 streams; 0.92x hand on one thread"),
    "upwind_2d": _WRAP.format(copies=5, statements=132, rest="each face's upwind partials twice; 1.13x hand, "
                              "3.6x primal (hand 3.2x) on one thread"),
    "burgers_rusanov_1d": ("periodic gather, its interior (3 sliced copies) evaluated by its coefficients "
                           "(adjoint-forms.md 11): each face's Rusanov partials once per cell, 79 printed statements "
                           "against 167 replayed; one thread at load 2: 0.62-0.64x hand, 3.6x primal (hand 3.1x; "
                           "replayed: 0.96-1.01x, 5.4x); above 3x its primal as the hand adjoint is"),
    "shallow_water_2d": ("periodic gather past LOOP_STATEMENTS (its unwrapped sliced copies: 1013 statements), "
                         "replayed in a loop over the 9 candidates beside its unrolled twin's interior "
                         "(adjoint-forms.md 7), by its coefficients (587 statements, section 11); one thread at "
                         "load 5.8: 0.48x hand, 2.72x primal (looped alone: 3.14x hand); cold first gradient 9.6-10.6 "
                         "s CPU against 5.4-6.0 looped alone"),
}


# -- the rows ----------------------------------------------------------------------------------------------------


def discover(folder: Path = HERE) -> list[tuple[str, Row]]:
    """(family, row) for every Row of every benchmarks/library/library_<family>.py, in file order."""
    found = []
    for path in sorted(folder.glob("library_*.py")):
        if path.stem in ("library_rows",):
            continue
        module = importlib.import_module(path.stem)
        rows = getattr(module, "ROWS", None)
        if not isinstance(rows, list) or not all(isinstance(r, Row) for r in rows):
            raise TypeError(f"{path.name}: ROWS must be a list of library_rows.Row")
        found += [(path.stem.removeprefix("library_"), row) for row in rows]
    return found


def kernel_of(row: Row) -> gk.KernelFunction:
    """The library kernel a row times: gradkern.kernels.<the row name's first word>."""
    name = row.name.split()[0]
    kernel = getattr(library, name, None)
    if not isinstance(kernel, gk.KernelFunction):
        raise LookupError(f"row {row.name!r}: gradkern.kernels has no kernel named {name!r}")
    return kernel


def params(kernel: gk.KernelFunction) -> list[str]:
    return list(inspect.signature(kernel.__wrapped__).parameters)


def select(rows: list[tuple[str, Row]], only: str | None) -> list[tuple[str, Row]]:
    """The rows named in `only` (comma-separated kernel, row or family names); all when None."""
    if not only:
        return rows
    wanted = {w.strip() for w in only.split(",") if w.strip()}
    names = {family for family, _ in rows} | {r.name for _, r in rows} | {r.name.split()[0] for _, r in rows}
    unknown = wanted - names
    if unknown:
        raise SystemExit(f"--only: no row or family named {', '.join(sorted(unknown))}; "
                         f"the rows: {', '.join(r.name for _, r in rows) or '(none)'}")
    return [(f, r) for f, r in rows if {f, r.name, r.name.split()[0]} & wanted]


# -- where the arrays live: NumPy on the CPU, or CuPy on a GPU ------------------------------------------------------


class Device:
    """NumPy arrays on the CPU: perf_counter times; copy bandwidth by Numba and NumPy."""

    name = "CPU"

    def __init__(self):
        self.xp = np

    def asarray(self, a: Any) -> Any:
        return a

    def sync(self) -> None:
        pass

    def seconds(self, fn: Callable[[], Any]) -> float:
        return timed(fn, sync=self.sync)()

    def describe(self) -> str:
        import numba
        return (f"{machine()}; Numba {numba.__version__}, {numba.get_num_threads()} "
                f"threads ({numba.threading_layer()} layer)")

    def copies(self) -> dict[str, Callable[[Any, Any], None]]:
        return {"numba prange copy": _numba_copy(), "np.copyto": lambda src, dst: np.copyto(dst, src)}


class GPU(Device):
    """CuPy arrays on the current CUDA device: each call synchronised; copy bandwidth by CuPy."""

    name = "GPU"

    def __init__(self):
        try:
            import cupy
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as e:  # no CuPy, or a CuPy without a driver: say which
            raise SystemExit(f"--gpu needs CuPy and a CUDA GPU: {type(e).__name__}: {e}") from e
        if count < 1:
            raise SystemExit("--gpu needs a CUDA GPU: CuPy sees none")
        self.xp = cupy

    def asarray(self, a: Any) -> Any:
        return self.xp.asarray(a) if isinstance(a, np.ndarray) else a

    def sync(self) -> None:
        self.xp.cuda.Device().synchronize()

    def describe(self) -> str:
        props = self.xp.cuda.runtime.getDeviceProperties(self.xp.cuda.Device().id)
        return f"{props['name'].decode()}, CuPy {self.xp.__version__}"

    def copies(self) -> dict[str, Callable[[Any, Any], None]]:
        xp = self.xp
        return {"cupy.copyto": lambda src, dst: xp.copyto(dst, src),
                "device-to-device memcpy": lambda src, dst: dst.data.copy_from_device(src.data, src.nbytes)}


def _numba_copy() -> Callable[[Any, Any], None]:
    import numba

    @numba.njit(parallel=True, fastmath=False)
    def copy(src, dst):
        for i in numba.prange(src.shape[0]):
            dst[i] = src[i]
    return copy


def copy_bandwidth(device: Device, elements: int, reps: int) -> tuple[float, str]:
    """The best median bandwidth (GB/s, bytes read + written) of the device's ways to copy a float64 array."""
    src = device.asarray(np.random.default_rng(1).random(elements))
    dst = device.xp.empty_like(src)
    best, how = 0.0, ""
    for label, copy in device.copies().items():
        copy(src, dst)  # warm-up: compile, touch the pages
        t = statistics.median(device.seconds(lambda c=copy: c(src, dst)) for _ in range(reps))
        if 2 * src.nbytes / t / 1e9 > best:
            best, how = 2 * src.nbytes / t / 1e9, label
    assert bool((dst == src).all())
    return best, how


# -- one row ---------------------------------------------------------------------------------------------------------


@dataclass
class Result:
    family: str
    name: str
    size: str = ""
    primal_ms: float = float("nan")
    grad_ms: float = float("nan")
    hand_ms: float | None = None
    hand_primal_ms: float | None = None
    traffic: int = 0
    grad_traffic: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return self.grad_ms / self.primal_ms

    @property
    def ratio_hand(self) -> float | None:
        return None if self.hand_ms is None else self.grad_ms / self.hand_ms

    @property
    def hand_ratio(self) -> float | None:
        """The hand-written gradient over the hand-written primal: what a byte-bound row costs by hand."""
        return None if self.hand_ms is None or self.hand_primal_ms is None else self.hand_ms / self.hand_primal_ms

    @property
    def met(self) -> bool:
        if self.ratio_hand is None:
            return self.ratio <= GOAL_PRIMAL
        # byte bound: the hand-written adjoint's own gradient/primal is the floor (issue 33's goal)
        # no slower than the hand-written gradient, or no larger a multiple of its primal than the hand-written
        # one (a gradkern primal faster than the hand-written one must not count against its gradient)
        byte_bound = self.ratio_hand <= 1.0 or (self.hand_ratio is not None and self.ratio <= self.hand_ratio)
        return self.ratio_hand <= GOAL_HAND and (self.ratio <= GOAL_PRIMAL or byte_bound)


def _size(dim: Any) -> str:
    return " x ".join(f"{d:,}" for d in dim) if isinstance(dim, tuple) else f"{dim:,}"


class Prepared:
    """A row's arrays on the device, their saved copies, and the three callables on them."""

    def __init__(self, row: Row, kernel: gk.KernelFunction, device: Device, n: int, seed: int):
        rng = np.random.default_rng(seed)
        args, self.dim = row.setup(rng, n)
        self.device, self.kernel = device, kernel
        self.args = [device.asarray(a) for a in args]
        names = params(kernel)
        if len(names) != len(self.args):
            raise TypeError(f"row {row.name!r}: setup gave {len(self.args)} arguments, {kernel.__name__} takes "
                            f"{len(names)}")
        self.shadows: dict[str, Any] = {}
        self.active: set[str] = set()
        for name, a in zip(names, args):
            wanted = row.wrt is None or name in row.wrt
            if isinstance(a, np.ndarray) and a.dtype.kind == "f" and wanted:
                self.shadows[name] = device.asarray(rng.uniform(-1.0, 1.0, a.shape).astype(a.dtype))
            elif isinstance(a, (float, np.floating)) and wanted:
                self.active.add(name)
        self.names = names
        self.traffic = int(row.traffic(args))
        self.grad_traffic = self.traffic + 2 * sum(int(s.nbytes) for s in self.shadows.values()) if self.traffic else 0
        arrays = [a for a in self.args if hasattr(a, "nbytes")] + list(self.shadows.values())
        self.saved = [(a, a.copy()) for a in arrays]
        self.hand = None if row.hand is None or isinstance(device, GPU) else row.hand
        self.hand_primal = row.hand_primal if self.hand else None

    def reset(self) -> None:
        for a, saved in self.saved:
            a[...] = saved

    def primal(self) -> None:
        gk.launch(self.kernel, self.dim, *self.args)

    def gradient(self) -> None:
        annotated = []
        for name, a in zip(self.names, self.args):
            if name in self.shadows:
                annotated.append(gk.Duplicated(a, self.shadows[name]))
            elif name in self.active:
                annotated.append(gk.Active(a))
            else:
                annotated.append(gk.Const(a))
        gk.autodiff(self.kernel, *annotated, dim=self.dim)

    def run_hand(self) -> None:
        self.hand(self.args, self.shadows)

    def run_hand_primal(self) -> None:
        self.hand_primal(self.args)

    def state(self) -> list[np.ndarray]:
        return [np.array(a.get() if hasattr(a, "get") else a, copy=True) for a, _ in self.saved]

    def check_hand(self) -> str | None:
        """None if the hand-written primal + adjoint leaves what gk.autodiff leaves, else what differs."""
        self.reset()
        self.gradient()
        got = self.state()
        self.reset()
        self.run_hand()
        want = self.state()
        self.reset()
        labels = [f"argument {i}" for i, a in enumerate(self.args) if hasattr(a, "nbytes")]
        labels += [f"shadow of {name}" for name in self.shadows]
        for label, g, w in zip(labels, got, want):
            scale = float(np.max(np.abs(w))) if w.size else 0.0
            if not np.allclose(g, w, rtol=1e-9, atol=1e-12 * max(scale, 1e-300), equal_nan=True):
                return f"hand-written adjoint differs from gradkern's ({label})"
        return None


def measure(family: str, row: Row, device: Device, n: int, runs: int, seed: int = 0) -> Result:
    """Warm up, check the hand-written adjoint, then `runs` interleaved rounds of every variant."""
    result = Result(family, row.name)
    try:
        p = Prepared(row, kernel_of(row), device, n, seed)
        result.size, result.traffic, result.grad_traffic = _size(p.dim), p.traffic, p.grad_traffic
        variants = [p.primal, p.gradient] + ([p.run_hand] if p.hand else [])
        variants += [p.run_hand_primal] if p.hand_primal else []
        for fn in variants:  # warm-up: compiles
            p.reset()
            fn()
        if p.hand:
            mismatch = p.check_hand()
            if mismatch:
                result.notes.append(mismatch)
        times = interleaved({str(k): timed(fn, sync=device.sync, setup=p.reset) for k, fn in enumerate(variants)},
                            runs)
        ms = [statistics.median(times[str(k)]) * 1e3 for k in range(len(variants))]
        result.primal_ms, result.grad_ms = ms[0], ms[1]
        result.hand_ms = ms[2] if p.hand else None
        result.hand_primal_ms = ms[3] if p.hand_primal else None
    except Exception as e:  # one broken row must not stop the others: it is reported as failed
        traceback.print_exc()
        result.notes.append(f"failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".rstrip(": "))
    return result


# -- the report --------------------------------------------------------------------------------------------------


def _f(x: float | None, fmt: str) -> str:
    return "—" if x is None or x != x else format(x, fmt)


def table(results: list[Result], copy_gbs: float) -> str:
    head = ["kernel", "family", "size", "primal ms", "primal GB/s", "% of copy", "gradient ms", "gradient GB/s",
            "% of copy", "gradient / primal", "hand ms", "hand / hand primal", "gradient / hand",
            f"goal met (≤ {GOAL_PRIMAL:g}, ≤ {GOAL_HAND:g})", "reason"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        failed = any(note.startswith("failed") for note in r.notes)
        pbw = r.traffic / r.primal_ms / 1e6 if r.traffic else None
        gbw = r.grad_traffic / r.grad_ms / 1e6 if r.grad_traffic else None
        met = "—" if failed else ("yes" if r.met else "no")
        reason = "; ".join([*r.notes, *([REASONS.get(r.name, "—")] if not failed and not r.met else [])]) or "—"
        lines.append("| " + " | ".join([
            f"`{r.name}`", r.family, r.size or "—", _f(r.primal_ms, ".3f"), _f(pbw, ".1f"),
            _f(pbw and 100 * pbw / copy_gbs, ".0f"), _f(r.grad_ms, ".3f"), _f(gbw, ".1f"),
            _f(gbw and 100 * gbw / copy_gbs, ".0f"), _f(r.ratio, ".2f"), _f(r.hand_ms, ".3f"),
            _f(r.hand_ratio, ".2f"), _f(r.ratio_hand, ".2f"), met, reason]) + " |")
    return "\n".join(lines)


def plot(results: list[Result], copy_gbs: float, path: Path, title: str) -> bool:
    """A bar chart: each kernel's primal and gradient bandwidth as a fraction of the copy bandwidth."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no PNG written", file=sys.stderr)
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in results if r.traffic and r.primal_ms == r.primal_ms]
    if not shown:
        print("no bandwidth-bound row was timed: no PNG written", file=sys.stderr)
        return False
    y = np.arange(len(shown))
    primal = [r.traffic / r.primal_ms / 1e6 / copy_gbs for r in shown]
    grad = [r.grad_traffic / r.grad_ms / 1e6 / copy_gbs for r in shown]
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.42 * len(shown)), layout="constrained")
    ax.barh(y - 0.2, primal, 0.4, label="primal (gk.launch)")
    ax.barh(y + 0.2, grad, 0.4, label="gradient (gk.autodiff, reverse)")
    ax.axvline(1.0, color="k", lw=1, ls="--")
    ax.set_yticks(y, [f"{r.name} ({r.family})" for r in shown])
    ax.invert_yaxis()
    ax.set_xlabel(f"fraction of the copy bandwidth ({copy_gbs:.1f} GB/s)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")
    return True


def section(results: list[Result], copy: tuple[float, str], copies: list[float], device: Device,
            args: argparse.Namespace, command: str, copy_bytes: int) -> str:
    met = sum(r.met for r in results if not any(n.startswith("failed") for n in r.notes))
    lines = [SECTION + (" --gpu" if args.gpu else ""), "",
             f"Every gradkern.kernels kernel with a row (benchmarks/library/library_<family>.py) at n = {args.n:,} "
             f"(each row's setup sizes itself from n); float64; median of {args.runs} interleaved rounds, every "
             "call from the same state (restored outside the timed region). Gradient = one `gk.autodiff` call "
             "in reverse mode (primal and adjoint, shadows seeded random); hand = a hand-written Numba primal "
             "followed by its adjoint, checked equal to gradkern's first. Bandwidth from each row's minimum "
             "traffic (gradient: plus each shadow read and written once).", "",
             *run_lines(command),
             f"* device: {device.describe()}",
             f"* copy bandwidth: {copy[0]:.1f} GB/s ({copy[1]}, {copy_bytes / 2**20:.0f} MiB float64, read + write; "
             f"the better of the runs before and after the rows: {', '.join(f'{c:.1f}' for c in copies)})",
             f"* goals met: {met} of {len(results)} rows", "",
             table(results, copy[0]), ""]
    if not args.gpu:
        lines.append(f"![primal and gradient bandwidth per kernel]({PNG.name})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes (n = 2**10), 3 rounds: a smoke test")
    p.add_argument("--n", type=int, default=None, help="the size each row's setup gets (default 2**22)")
    p.add_argument("--runs", type=int, default=None, help="timed rounds (default 11, --quick 3)")
    p.add_argument("--only", default=None, help="comma-separated kernel, row or family names")
    p.add_argument("--write", action="store_true", help="write RESULTS.md's section and benchmarks/library/library.png")
    p.add_argument("--png", type=Path, default=None, help="write the bar chart here (without --write)")
    p.add_argument("--gpu", action="store_true", help="CuPy arrays on the GPU (needs CuPy and a CUDA GPU)")
    args = p.parse_args(argv)
    args.n = args.n or (2**10 if args.quick else 2**22)
    args.runs = args.runs or (3 if args.quick else 11)
    device = GPU() if args.gpu else Device()
    rows = select(discover(), args.only)
    if not rows:
        print("no rows: no benchmarks/library/library_<family>.py defines ROWS", file=sys.stderr)
        return 1
    reps = 3 if args.quick else 10
    elements = 2**20 if args.quick else COPY_ELEMENTS
    copies = [copy_bandwidth(device, elements, reps)]
    print(f"copy bandwidth: {copies[0][0]:.1f} GB/s ({copies[0][1]})", file=sys.stderr, flush=True)
    results = []
    for family, row in rows:
        results.append(measure(family, row, device, args.n, args.runs))
        r = results[-1]
        print(f"  {row.name}: primal {r.primal_ms:.3f} ms, gradient {r.grad_ms:.3f} ms"
              + (f", hand {r.hand_ms:.3f} ms" if r.hand_ms is not None else "")
              + (f" ({'; '.join(r.notes)})" if r.notes else ""), file=sys.stderr, flush=True)
    copies.append(copy_bandwidth(device, elements, reps))
    copy = max(copies)
    command = shlex.join(["python", "benchmarks/library/library.py", *(sys.argv[1:] if argv is None else argv)])
    text = section(results, copy, [c[0] for c in copies], device, args, command, 8 * elements)
    publish(text, SECTION + (" --gpu" if args.gpu else ""), args.write and not args.quick)
    title = f"gradkern.kernels, primal and gradient bandwidth / copy bandwidth\n{device.describe()}"
    if args.write and not args.quick:
        plot(results, copy[0], PNG.with_name("library_gpu.png") if args.gpu else PNG, title)
    if args.png:
        plot(results, copy[0], args.png, title)
    if args.quick:
        print("(--quick: arrays this small time per-call overhead, not bandwidth; nothing written)")
    return 1 if any(note.startswith("failed") for r in results for note in r.notes) else 0


if __name__ == "__main__":
    sys.exit(main())
