"""The test cases of the kernel library (gradkern.kernels): one LibraryCase
per exported kernel, kept beside its family in tests/support/cases_<family>.py (each
holds a CASES dict) and gathered here. tests/library/test_library.py runs every case
(NumPy reference, float32, check_grad in both modes, race proofs, repeated
indices); tests/support/signatures.py adds them to the signatures that nvcc compiles
(tests/backends/test_cuda.py) and the GPU checks against the CPU (tests/gpu/test_gpu.py)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import gradkern as gk


@dataclass(frozen=True)
class LibraryCase:
    """How to test one library kernel.

    make(rng, dtype) gives the launch's plain arguments: random, never zero,
    float arrays and float scalars in `dtype` (index arrays int64), small
    (tens of elements: the suite compiles, it does not compute). dim(args) is
    the launch extent. reference(*args) computes, in NumPy and on copies, the
    value of every argument after the launch (a list as long as args).
    float32_terms bounds the rounding steps behind one output element
    (including a reduction's length) and float32_gain how much the kernel can
    amplify a relative error of its inputs; the float32 launch must agree
    with the float64 reference to terms·gain·eps32·(largest magnitude among
    inputs and outputs), the classical forward error bound γ_k ≈ k·u of a
    k-step evaluation. accumulates names the arguments updated by
    gk.atomic_add (those kernels must pass with repeated indices, which
    `repeated(args)` shows are present); every other kernel's launch and
    reverse must be proved race-free at compile time (no run-time check).
    wrt names the arguments differentiated (Duplicated arrays, Active
    scalars); None: every float array and every float scalar."""

    kernel: gk.KernelFunction
    make: Callable[[np.random.Generator, np.dtype], list]
    dim: Callable[[list], Any]
    reference: Callable[..., list]
    float32_terms: int = 8
    float32_gain: float = 4.0
    accumulates: tuple[str, ...] = ()
    repeated: Callable[[list], bool] | None = None
    wrt: tuple[str, ...] | None = None
    check_grad_options: dict | None = None

    def params(self) -> list[str]:
        return [p.name for p in self.kernel.ir.params]

    def annotated(self, args: list) -> list:
        """The arguments of a reverse-mode call: Duplicated (zero shadows) for
        differentiated arrays, Active for differentiated scalars, Const else."""
        out = []
        for name, a in zip(self.params(), args):
            if isinstance(a, np.ndarray):
                wanted = a.dtype.kind == "f" if self.wrt is None else name in self.wrt
                out.append(gk.Duplicated(a, np.zeros_like(a)) if wanted else gk.Const(a))
            elif isinstance(a, (float, np.floating)) and (self.wrt is None or name in self.wrt):
                out.append(gk.Active(a))
            else:
                out.append(gk.Const(a))
        return out


def rand(rng: np.random.Generator, shape: Any, dtype: Any, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    """Uniform in [lo, hi), in dtype: random and (almost surely) never zero."""
    return rng.uniform(lo, hi, shape).astype(dtype)


def scalar(rng: np.random.Generator, lo: float, hi: float) -> float:
    """A random float scalar (a Python float takes the float type of the launch's arrays)."""
    return float(rng.uniform(lo, hi))


def _gather() -> tuple[dict[str, LibraryCase], dict[str, str]]:
    out: dict[str, LibraryCase] = {}
    aliases: dict[str, str] = {}
    for path in sorted(Path(__file__).parent.glob("cases_*.py")):
        module = importlib.import_module(f"support.{path.stem}")
        clash = set(out) & set(module.CASES)
        assert not clash, f"{path.name}: cases named twice: {sorted(clash)}"
        out.update(module.CASES)
        aliases.update(getattr(module, "ALIASES", {}))
    return out, aliases


# ALIASES (from a cases module's optional ALIASES dict): an exported name -> the exported kernel it is bound
# to (`saxpy = axpy`), tested through its target's case
CASES, ALIASES = _gather()
