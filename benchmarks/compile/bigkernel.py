"""A synthetic "big real kernel" (session 51): how compile time grows with a kernel's size.

The kernel of `blocks` blocks is tests/support/big_kernel.py's (40 parameters, a local array, per block a
nested constant loop, a data-dependent branch, a run-time-bounded loop and a reassigned accumulator: about 12
statements, so `blocks=40` is a 487-line body).

`python benchmarks/compile/bigkernel.py` times, per size, gradkern's own pipeline (every stage of the
primal, forward and reverse specialisations, and source generation: `gk.inspect`, which compiles nothing)
in this process, and with `--numba` the cold first primal and gradient (Numba included) each in a fresh
process with an empty cache; tests/transforms/test_compile_scaling.py pins that the pipeline's work grows
linearly with `blocks`.

    python benchmarks/compile/bigkernel.py --blocks 10,20,40,80
    python benchmarks/compile/bigkernel.py --blocks 10,20,40 --numba
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

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "support"))
from big_kernel import annotated, arguments, kernel_source, load  # noqa: E402  the generator: tests/support


def pipeline_seconds(blocks: int, folder: str) -> dict:
    """gradkern's own time (`gk.inspect`: every stage and source generation, no compile) per mode."""
    import gradkern as gk
    kernel = load(blocks, folder)
    args, n = arguments()
    out = {}
    for mode, call in (("primal", lambda: gk.inspect(kernel, *args, dim=n)),
                       ("reverse", lambda: gk.inspect(kernel, *annotated(args), dim=n, mode=gk.Reverse)),
                       ("forward", lambda: gk.inspect(kernel, *annotated(args, True), dim=n, mode=gk.Forward))):
        t0 = time.process_time()
        ins = call()
        out[mode] = time.process_time() - t0
        out[mode + "_kb"] = len(ins.source) / 1e3
    return out


CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import gradkern as gk
import bigkernel as bk
kernel = bk.load(int(sys.argv[2]), sys.argv[3])
args, n = bk.arguments()
t0 = time.process_time(); gk.launch(kernel, n, *args); t1 = time.process_time()
gk.autodiff(kernel, *bk.annotated(args), dim=n); t2 = time.process_time()
print(json.dumps({"primal": t1 - t0, "gradient": t2 - t1}))
"""


def numba_seconds(blocks: int, folder: str) -> dict:
    """Cold first primal and gradient, CPU seconds, in a fresh process with an empty cache and no worker."""
    env = {**os.environ, "GRADKERN_CACHE_DIR": str(Path(folder, f"cache{blocks}")), "GRADKERN_COMPILE_WORKERS": "0"}
    out = subprocess.run([sys.executable, "-c", CHILD, str(Path(__file__).parent), str(blocks), folder], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", default="10,20,40,80")
    ap.add_argument("--numba", action="store_true")
    a = ap.parse_args()
    nan = float("nan")
    print(f"1-minute load {os.getloadavg()[0]:.2f} at the start")
    print("| blocks | statements | primal pipeline (s) | reverse pipeline (s) | forward pipeline (s) "
          "| fused source (kB) | cold primal (s CPU) | cold gradient (s CPU) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for blocks in (int(x) for x in a.blocks.split(",")):
            p = pipeline_seconds(blocks, folder)
            c = numba_seconds(blocks, folder) if a.numba else {}
            lines = kernel_source(blocks).count("\n") - 5
            print(f"| {blocks} | {lines} | {p['primal']:.2f} | {p['reverse']:.2f} | {p['forward']:.2f} | "
                  f"{p['reverse_kb']:.0f} | {c.get('primal', nan):.2f} | {c.get('gradient', nan):.2f} |",
                  flush=True)
    print(f"1-minute load {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
