"""A synthetic "big real kernel" of any size (session 51, docs/compile-time.md finding 12), in the shape of a
ported physics routine: 24 1-D input arrays, 4 2-D coefficient arrays (n x 4), 8 scalars and 4 outputs (40
parameters with the run-time trip count m); a local array; per block two temporaries from the inputs and the
scalars, a nested constant loop (4 x 2) updating the local array, a data-dependent branch, a run-time-bounded
loop and a reassigned accumulator (about 12 statements per block); the outputs written at the end. Used by
benchmarks/compile/bigkernel.py (compile time against size) and tests/transforms/test_compile_scaling.py
(our passes' work is linear in the size)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

import gradkern as gk

N_IN, N_COEF, N_SCALAR, N_OUT = 24, 4, 8, 4


def kernel_source(blocks: int) -> str:
    """The kernel's module source (module doc)."""
    ins = [f"x{k}" for k in range(N_IN)]
    coefs = [f"w{k}" for k in range(N_COEF)]
    scalars = [f"c{k}" for k in range(N_SCALAR)]
    outs = [f"y{k}" for k in range(N_OUT)]
    params = ", ".join(ins + coefs + scalars + outs + ["m"])
    lines = ["import gradkern as gk", "", "", "@gk.kernel", f"def big_kernel({params}):", "    i = gk.tid()",
             "    loc = gk.local((4,), gk.float64)", "    acc = x0[i]"]
    for j in range(blocks):
        a, b_, c = ins[j % N_IN], ins[(3 * j + 1) % N_IN], ins[(5 * j + 2) % N_IN]
        w, s, t = coefs[j % N_COEF], scalars[j % N_SCALAR], scalars[(j + 3) % N_SCALAR]
        lines += [
            f"    t{j} = {a}[i] * {s} + gk.sin({b_}[i]) * {t}",
            f"    u{j} = gk.sqrt({c}[i] * {c}[i] + t{j} * t{j} + 1.0)",
            "    for k in range(4):",
            "        for l in range(2):",
            f"            loc[k] = loc[k] + {w}[i, k] * (t{j} + l * u{j}) * 0.25",
            f"    if t{j} > u{j} * 0.5:",
            f"        v{j} = gk.exp(-t{j} * t{j}) * loc[{j % 4}]",
            "    else:",
            f"        v{j} = t{j} / u{j} + loc[{(j + 1) % 4}]",
            "    for r in range(m):",
            f"        acc = acc * 0.5 + v{j} * {a}[i]",
            f"    acc = acc + v{j} * u{j}",
        ]
    for k, y in enumerate(outs):
        lines.append(f"    {y}[i] = acc * {0.5 + k} + loc[{k}]")
    return "\n".join(lines) + "\n"


def load(blocks: int, folder: str):
    """The kernel of `blocks` blocks, imported from a file written in `folder` (frontend needs a source file)."""
    path = Path(folder, f"big_{blocks}.py")
    path.write_text(kernel_source(blocks))
    spec = importlib.util.spec_from_file_location(f"big_{blocks}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.big_kernel


def arguments(n: int = 16, seed: int = 0) -> tuple[list, int]:
    """Random inputs away from zero: the plain arguments, and the launch extent."""
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(0.5, 1.5, n) for _ in range(N_IN)] + [rng.uniform(0.5, 1.5, (n, 4)) for _ in range(N_COEF)]
    return [*arrays, *rng.uniform(0.1, 0.9, N_SCALAR).tolist(), *[np.zeros(n) for _ in range(N_OUT)], 2], n


def annotated(args: list, forward: bool = False) -> list:
    """Duplicated arrays (zero shadows; outputs seeded with ones), Active scalars (Duplicated(s, 1.0) forward)."""
    out = []
    for k, a in enumerate(args):
        if isinstance(a, np.ndarray):
            out.append(gk.Duplicated(a, np.ones_like(a) if k >= N_IN + N_COEF else np.zeros_like(a)))
        elif isinstance(a, float):
            out.append(gk.Duplicated(a, 1.0) if forward else gk.Active(a))
        else:
            out.append(gk.Const(a))
    return out
