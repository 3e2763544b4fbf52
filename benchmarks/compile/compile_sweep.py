"""Compile time of every kernel the project ports (session 51): the kernel library's cases
(tests/support/library_cases.py) and the ported kernels (tests/support/ported.py, ported_hpc_cases.py,
ported_hpc3_cases.py), cold and warm, per mode, ranked.

For each kernel and mode (primal `gk.launch`, `gk.autodiff` reverse, `gk.autodiff` forward), fresh
processes: cold, with an empty GRADKERN_CACHE_DIR of its own, then warm ones on the cache the cold one wrote,
each with another PYTHONHASHSEED, all with GRADKERN_COMPILE_WORKERS=0 (no compile worker: the process's CPU
time is all the compile work). Each times its first call: process CPU seconds (`time.process_time`, what the
load of other work inflates least) and wall seconds, and reports what the call compiled (the CompileLog of
compile_time.py: Numba functions compiled or loaded, their generated module lines and `prange` loops) and
gradkern's own pipeline time (its stages and source generation). The warm processes (session 52): one that
stores the pipeline's output (pipeline_cache.py; untimed), then `--rounds` pairs, interleaved, of a warm first
call that runs the pipeline (GRADKERN_PIPELINE_CACHE=0: "pipeline") and one that loads it ("stored"), with the
CPU seconds of Numba's own cache loads inside each (`Dispatcher.compile` of the generated functions, disk
hits); the warm columns are the medians. The table ranks by cold CPU seconds; the 1-minute load average is
recorded at the start and the end.

    python benchmarks/compile/compile_sweep.py                       # every kernel, every mode
    python benchmarks/compile/compile_sweep.py --only lulesh,cfd      # names containing either
    python benchmarks/compile/compile_sweep.py --modes reverse --no-warm --json /tmp/sweep.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (benchpath.py)
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path

ROOT = Path(__file__).resolve().parents[2]
MODES = ("primal", "reverse", "forward")
SOURCES = ("library", "ported", "ported_hpc", "ported_hpc3")


def _cases(source: str) -> list[tuple]:
    """(name, kernel, annotated args, dim) of one source's kernels (programs left out), float64, seed 5."""
    import numpy as np

    import gradkern as gk

    sys.path.insert(0, str(ROOT / "tests"))
    rng = np.random.default_rng(5)
    if source == "library":
        from support.library_cases import CASES
        out = []
        for name, case in CASES.items():
            args = case.make(rng, np.dtype(np.float64))
            out.append((name, case.kernel, case.annotated(args), case.dim(args)))
        return out
    module = {"ported": "support.ported", "ported_hpc": "support.ported_hpc_cases",
              "ported_hpc3": "support.ported_hpc3_cases"}[source]
    import importlib
    rows = importlib.import_module(module).cases(rng)
    return [(r[0], r[1], r[2], r[3]) for r in rows if isinstance(r[1], gk.KernelFunction)]


def child(spec: dict) -> dict:
    """One first call in this fresh process: spec's source, name and mode."""
    from compile_time import CompileLog
    from support.ported import primal_values

    import gradkern as gk

    _, kernel, args, dim = next(c for c in _cases(spec["source"]) if c[0] == spec["name"])
    log = CompileLog(pipeline=not spec.get("warm"))
    prof = None
    if spec.get("profile"):
        import cProfile
        prof = cProfile.Profile()
        prof.enable()
    c0, w0 = time.process_time(), time.perf_counter()
    if spec["mode"] == "primal":
        gk.launch(kernel, dim, *primal_values(args))
    elif spec["mode"] == "forward":  # an Active scalar takes a tangent in forward mode: Duplicated(s, 1.0)
        gk.autodiff(kernel, *[gk.Duplicated(a.val, 1.0) if isinstance(a, gk.Active) else a for a in args],
                    dim=dim, mode=gk.Forward)
    else:
        gk.autodiff(kernel, *args, dim=dim)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    if prof is not None:
        prof.disable()
        prof.dump_stats(spec["profile"])
    if spec.get("warm"):
        from gradkern import pipeline_cache
        ours = [c for c in log.compiles if c["module"].startswith("gradkern_gen_")]
        return dict(cpu=cpu, wall=wall, compiled=sum(not c["hit"] for c in ours), loaded=sum(c["hit"] for c in ours),
                    numba_load=sum(c["cpu"] for c in ours if c["hit"]), runs=sum(pipeline_cache.runs.values()),
                    stored=sum(pipeline_cache.loads.values()))
    rows = log.rows()
    compiled = [r for r in rows if not r["hit"]]
    return dict(cpu=cpu, wall=wall, compiled=len(compiled), loaded=len(rows) - len(compiled),
                numba=sum(r["seconds"] for r in compiled), llvm=sum(r["llvm"] for r in compiled),
                lines=sum(r["lines"] for r in {r["module"]: r for r in rows}.values()),
                pranges=sum(r["pranges"] for r in {r["module"]: r for r in rows}.values()),
                ours=sum(log.stages.values()), functions=[f"{r['role']}:{r['function']}" for r in compiled])


def _run(spec: dict, cache: Path, seed: int, stored: bool = True) -> dict:
    env = {**os.environ, "GRADKERN_CACHE_DIR": str(cache), "PYTHONHASHSEED": str(seed),
           "GRADKERN_PIPELINE_CACHE": "1" if stored else "0",
           "GRADKERN_COMPILE_WORKERS": "0",  # every compile in the timed process: its CPU time is the whole work
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], env=env, capture_output=True,
                         text=True)
    if out.returncode:
        return dict(error=out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"rc {out.returncode}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _warm(spec: dict, cache: Path, rounds: int) -> dict:
    """The warm processes of one row (module doc): the medians of `rounds` interleaved pairs, CPU seconds."""
    spec = {**spec, "warm": True}
    prime = _run(spec, cache, 2)
    if "error" in prime:
        return prime
    got: dict[str, list] = {"pipeline": [], "stored": []}
    for r in range(rounds):
        for kind in ("pipeline", "stored") if r % 2 == 0 else ("stored", "pipeline"):
            got[kind].append(_run(spec, cache, 3 + r, stored=kind == "stored"))
    if any("error" in x for xs in got.values() for x in xs):
        return next(x for xs in got.values() for x in xs if "error" in x)
    med = {k: _median([x["cpu"] for x in xs]) for k, xs in got.items()}
    load_cpu = _median([x["numba_load"] for xs in got.values() for x in xs])
    last = got["stored"][-1]
    return dict(pipeline=med["pipeline"], stored=med["stored"], numba_load=load_cpu,
                compiled=max(x["compiled"] for xs in got.values() for x in xs),
                runs=max(x["runs"] for x in got["stored"]), loaded_specs=last["stored"])


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def names(only: list[str]) -> list[tuple[str, str]]:
    """(source, name) of every kernel, those whose name contains one of `only` if given."""
    out = []
    for source in SOURCES:
        for c in _cases(source):
            if not only or any(o in c[0] for o in only):
                out.append((source, c[0]))
    return out


def load() -> float:
    return os.getloadavg()[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child")
    ap.add_argument("--only", default="", help="comma-separated name fragments")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--no-warm", action="store_true")
    ap.add_argument("--rounds", type=int, default=1, help="interleaved pairs of warm processes per row")
    ap.add_argument("--json", help="write every row here too")
    ap.add_argument("--top", type=int, default=0, help="print only the N slowest rows (0: all)")
    a = ap.parse_args()
    if a.child:
        sys.path.insert(0, str(ROOT / "tests"))
        print(json.dumps(child(json.loads(a.child))))
        return
    modes = [m for m in a.modes.split(",") if m]
    rows = []
    start = load()
    t_start = time.strftime("%H:%M", time.gmtime())
    with tempfile.TemporaryDirectory() as tmp:
        for k, (source, name) in enumerate(names([o for o in a.only.split(",") if o])):
            for mode in modes:
                cache = Path(tmp, f"{k}-{mode}")
                spec = dict(source=source, name=name, mode=mode)
                cold = _run(spec, cache, 1)
                warm = {} if a.no_warm or "error" in cold else _warm(spec, cache, a.rounds)
                rows.append(dict(source=source, name=name, mode=mode, cold=cold, warm=warm, load=load()))
                print(f"{name:24s} {mode:8s} cold {cold.get('cpu', float('nan')):6.2f} s CPU "
                      f"{cold.get('compiled', '-')} fn  warm CPU {warm.get('pipeline', float('nan')):5.3f} s -> "
                      f"{warm.get('stored', float('nan')):5.3f} s  load {rows[-1]['load']:.2f} "
                      f"{cold.get('error', '') or warm.get('error', '')}", file=sys.stderr, flush=True)
                if a.json:  # after every row: a sweep stopped early keeps what it measured
                    Path(a.json).write_text(json.dumps(rows, indent=1))
    print(table(rows, start, load(), t_start, a.top))


def table(rows: list[dict], start: float, end: float, t_start: str, top: int = 0) -> str:
    """The rows ranked by cold CPU seconds, as a Markdown table."""
    ranked = sorted(rows, key=lambda r: -r["cold"].get("cpu", 1e9))
    if top:
        ranked = ranked[:top]
    head = (f"started {t_start} UTC, 1-minute load {start:.2f} at the start, {end:.2f} at the end\n\n"
            "| kernel | mode | cold CPU (s) | cold wall (s) | Numba compile (s) | of it LLVM (s) | gradkern's own (s) "
            "| functions compiled | module lines | prange loops | warm CPU, pipeline (s) | warm CPU, stored (s) "
            "| of it Numba's cache load (s) | stored above Numba's load (s) | pipeline runs, stored |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    lines, nan = [head], float("nan")
    for r in ranked:
        c, w = r["cold"], r["warm"]
        if "error" in c:
            lines.append(f"| {r['name']} | {r['mode']} | error: {c['error'][:80]} |")
            continue
        lines.append(f"| {r['name']} | {r['mode']} | {c['cpu']:.2f} | {c['wall']:.2f} | {c['numba']:.2f} | "
                     f"{c['llvm']:.2f} | {c['ours']:.2f} | {c['compiled']} | {c['lines']} | {c['pranges']} | "
                     f"{w.get('pipeline', nan):.3f} | {w.get('stored', nan):.3f} | {w.get('numba_load', nan):.3f} | "
                     f"{w.get('stored', nan) - w.get('numba_load', nan):.3f} | {w.get('runs', '-')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
