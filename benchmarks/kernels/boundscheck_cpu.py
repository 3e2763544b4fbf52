"""The numba backend's bounds-check helper, inlined by Numba or called (issue 29; docs/bounds.md):
compile time of a bounds-checked kernel with many checked indices in nested loops
(GRADKERN_BOUNDSCHECK=1), and run time of spmv's exact bounds check at 2**20 rows (the
bounds-checked index skeleton the runtime runs before a launch its proof cannot decide).
Each measurement in a fresh process with an empty cache; `--variants` picks how the helper is
declared: `current` (inline='always' up to numba_loops.INLINE_CHECKS checked indices), `inline`
(always), `call` (never). CPU seconds are reported beside wall seconds: on a loaded machine the
wall time of a compile is mostly waiting.

    python benchmarks/kernels/boundscheck_cpu.py --variants current,inline,call --what primal,spmv
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (benchpath.py)
import benchpath  # noqa: E402,F401  the shared modules and every part on sys.path
from report import run_lines
from timing import interleaved

KERNEL = '''
import gradkern as gk


@gk.kernel
def iso_checked(a, b, dz, out):
    i, k = gk.tid()
    nz = a.shape[1]
    s = 0.0
    for kr in range(2):
        if k == 0 and kr == 0:
            continue
        if k == nz - 1 and kr == 1:
            continue
        for ip in range(2):
            if i == 0 and ip == 0:
                continue
            if i == a.shape[0] - 1 and ip == 1:
                break
            d = a[i + 2 * ip - 1, k + kr - 1] - a[i, k]
            e = b[i + 2 * ip - 1, k + kr - 1] - b[i, k]
            s += (d * b[i, k + kr - 1] + e * a[i + 2 * ip - 1, k]) / dz[k + kr - 1]
    out[i, k] = s
'''

RUNNER = '''
import json, os, sys, time
variant, what = sys.argv[2], sys.argv[3]
sys.path.insert(0, sys.argv[1])
import numpy as np
import gradkern.backends.numba_loops as nl
if variant != "current":
    nl.INLINE_CHECKS = 10 ** 9 if variant == "inline" else -1
import gradkern as gk
rng = np.random.default_rng(0)
if what in ("primal", "gradient"):
    import isok
    a, b, dz = rng.uniform(0.5, 1.5, (64, 32)), rng.uniform(0.5, 1.5, (64, 32)), rng.uniform(0.5, 1.5, 32)
    out = np.zeros((64, 32))
    t0, c0 = time.perf_counter(), time.process_time()
    if what == "primal":
        gk.launch(isok.iso_checked, (64, 32), a, b, dz, out)
    else:
        gk.autodiff(isok.iso_checked, gk.Duplicated(a, np.zeros_like(a)), gk.Duplicated(b, np.zeros_like(b)),
                    gk.Duplicated(dz, np.zeros_like(dz)), gk.Duplicated(out, np.ones_like(out)))
    print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}))
else:
    from gradkern.kernels import spmv
    from gradkern.runtime.bounds_check import _exact_check
    from gradkern.runtime.call import prepare
    m, per = 2 ** 20, 8
    indptr = np.arange(0, m * per + 1, per, dtype=np.int64)
    indices = rng.integers(0, m, m * per)
    data, x, y = rng.uniform(0.5, 1.5, m * per), rng.uniform(0.5, 1.5, m), np.zeros(m)
    gk.launch(spmv, m, indptr, indices, data, x, y)
    prepared, bound = prepare(spmv, (indptr, indices, data, x, y), m, None, "launch")
    spec, bnd = prepared.spec, bound.b
    launches, checks = [], []
    for _ in range(7):
        s = time.perf_counter()
        gk.launch(spmv, m, indptr, indices, data, x, y)
        launches.append(time.perf_counter() - s)
        s = time.perf_counter()
        _exact_check(spec, bnd)
        checks.append(time.perf_counter() - s)
    print(json.dumps({"launch": float(np.median(launches)), "check": float(np.median(checks))}))
'''


def measure(variant: str, what: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "isok.py").write_text(KERNEL)
        env = {**os.environ, "GRADKERN_CACHE_DIR": str(Path(tmp, "cache"))}
        env.pop("GRADKERN_BOUNDSCHECK", None)
        if what != "spmv":
            env["GRADKERN_BOUNDSCHECK"] = "1"
        out = subprocess.run([sys.executable, "-c", RUNNER, tmp, variant, what], env=env, capture_output=True,
                             text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--variants", default="current,inline,call")
    p.add_argument("--what", default="primal,spmv", help="primal, gradient (slow inlined: minutes), spmv")
    p.add_argument("--rounds", type=int, default=1)
    args = p.parse_args()
    print("\n".join(run_lines("python benchmarks/kernels/boundscheck_cpu.py " + " ".join(sys.argv[1:]))))
    timers = {f"{what:8} {variant:8}": lambda what=what, variant=variant: measure(variant, what)
              for what in args.what.split(",") for variant in args.variants.split(",")}

    def show(r: int, runs: dict) -> None:
        for label, measured in runs.items():
            print(f"round {r + 1} {label} {measured[-1]}", flush=True)

    interleaved(timers, args.rounds, after_round=show)  # each round measures every variant, in a rotated order


if __name__ == "__main__":
    main()
