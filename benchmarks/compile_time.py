"""Compile time against kernel length (issue 14, item 11): a straight-line
kernel of n statements, generated as a file, compiled in a fresh process with
an empty cache: seconds to the first primal launch and to the first gradient
(`gk.autodiff`, fused reverse kernel), and the generated source sizes.

Two bodies: `distinct` (each statement defines a new local from the previous
one) and `reassigned` (one local reassigned n times, the worst case for
Numba's SSA reconstruction).

    python benchmarks/compile_time.py            # prints the table
    python benchmarks/compile_time.py --write    # and writes RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from report import publish, run_lines

STATEMENT = "gk.sin({prev}) * 1.5 + x[i] * {c:.2f}"


def kernel_source(n: int, reassigned: bool) -> str:
    lines = ["import gradkern as gk", "", "", "@gk.kernel", "def long_kernel(x, y):", "    i = gk.tid()",
             "    s = x[i]"]
    for k in range(n):
        c = 0.1 + 0.01 * k
        if reassigned:
            lines.append("    s = " + STATEMENT.format(prev="s", c=c))
        else:
            lines.append(f"    s{k} = " + STATEMENT.format(prev="s" if k == 0 else f"s{k - 1}", c=c))
    lines.append(f"    y[i] = {'s' if reassigned else f's{n - 1}'}")
    return "\n".join(lines) + "\n"


RUNNER = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import gradkern as gk
import longk
x = np.random.default_rng(0).uniform(0.5, 1.5, 256); y = np.zeros(256)
t0 = time.perf_counter(); gk.launch(longk.long_kernel, 256, x, y); t1 = time.perf_counter()
gk.autodiff(longk.long_kernel, gk.Duplicated(x, np.zeros(256)), gk.Duplicated(y, np.ones(256)))
t2 = time.perf_counter()
ins = gk.inspect(longk.long_kernel, x, y)
rev = gk.inspect(longk.long_kernel, gk.Duplicated(x, np.zeros(256)), gk.Duplicated(y, np.ones(256)), mode=gk.Reverse)
print(json.dumps({"primal": t1 - t0, "reverse": t2 - t1, "primal_kb": len(ins.source) / 1e3,
                  "fused_kb": len(rev.source) / 1e3}))
"""


def measure(n: int, reassigned: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "longk.py").write_text(kernel_source(n, reassigned))
        env = {**os.environ, "GRADKERN_CACHE_DIR": str(Path(tmp, "cache"))}
        out = subprocess.run([sys.executable, "-c", RUNNER, tmp], env=env, capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="25,50,100,200")
    p.add_argument("--write", action="store_true")
    args = p.parse_args()
    rows = []
    for n in map(int, args.sizes.split(",")):
        for reassigned in (False, True):
            m = measure(n, reassigned)
            rows.append(f"| {n} | {'reassigned' if reassigned else 'distinct'} | {m['primal']:.2f} | "
                        f"{m['reverse']:.2f} | {m['primal_kb']:.0f} | {m['fused_kb']:.0f} |")
            print(rows[-1], flush=True)
    text = "\n".join([
        "## compile_time.py", "",
        "Seconds from an empty cache to the first primal launch and to the first gradient (fused reverse kernel,"
        " `gk.autodiff`) of a straight-line kernel of n statements `s = sin(s) * 1.5 + x[i] * c` (each in a"
        " fresh process; Numba's compile dominates), and the generated source sizes.", "",
        *run_lines("python benchmarks/compile_time.py --write"), "",
        "| statements | locals | primal compile (s) | gradient compile (s) | primal source (kB) | fused source (kB) |",
        "|---:|---|---:|---:|---:|---:|", *rows, ""])
    publish(text, "## compile_time.py", args.write)


if __name__ == "__main__":
    main()
