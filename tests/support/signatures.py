"""Every kernel signature the test suite launches or differentiates, in one
list, so that backends can be checked against all of them: the corpus (each
dtype, primal), the reverse-mode cases, the HPC-style kernels, 4-D and 5-D arrays, the kernel
library and the tape-minimality kernels (primal and reverse), and the
race-check kernels."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
from analysis import test_races
from frontend import test_dims, test_local_arrays
from library import test_hpc_kernels
from transforms import test_gather, test_kinks, test_reverse, test_tape

import gradkern as gk
from support.corpus import CORPUS
from support.library_cases import CASES as LIBRARY


@dataclass(frozen=True)
class Signature:
    label: str
    kernel: gk.KernelFunction
    args: tuple  # plain arguments for a primal launch, annotated ones for reverse mode
    dim: Any
    mode: Any = None  # None (launch) or gk.Reverse


def corpus_args(case, dtype) -> tuple:
    seed = zlib.crc32(f"{case.name}/{np.dtype(dtype).name}".encode())
    return case.make(np.random.default_rng(seed), np.dtype(dtype))


def _primal(args: tuple) -> tuple:
    return tuple(a.val if isinstance(a, gk.Annotation) else a for a in args)


def _forward(args: tuple) -> tuple:
    """The same call in forward mode: Active scalars take a tangent."""
    return tuple(gk.Duplicated(a.val, 1.0) if isinstance(a, gk.Active) else a for a in args)


def _batch(args: tuple, k: int) -> tuple:
    def lanes(a):
        return tuple(a.dval.copy() if hasattr(a.dval, "copy") else a.dval for _ in range(k))
    return tuple(gk.BatchDuplicated(a.val, lanes(a)) if isinstance(a, gk.Duplicated) else a for a in args)


def _to32(args: tuple) -> tuple:
    return tuple(gk.Duplicated(a.val.astype(np.float32), a.dval.astype(np.float32)) if isinstance(a, gk.Duplicated)
                 else a for a in args)


def reverse_cases(seed: int = 7) -> list[tuple[str, gk.KernelFunction, tuple, Any]]:
    """(label, kernel, annotated args, dim) of every reverse-mode case."""
    out = []
    for name, make in sorted(test_reverse.CASES.items()):
        kernel, args, dim = make(np.random.default_rng(seed))
        out.append((f"reverse/{name}", kernel, args, dim))
    for name in ("saxpy", "allen_cahn", "heat_2d", "loop_sin", "branchy"):
        kernel, args, dim = test_reverse.CASES[name](np.random.default_rng(seed))
        out.append((f"reverse/{name}-float32", kernel, _to32(args), dim))
    for name, make in sorted(test_gather.CASES.items()):  # partial-domain stencils: gathers past the launch
        kernel, args, dim = make(np.random.default_rng(seed))
        out.append((f"gather/{name}", kernel, args, dim))
    for name, make in sorted(test_kinks.SMOOTH.items()):  # pow with run-time exponents, abs, min, max...
        kernel, args = make(np.random.default_rng(seed))
        out.append((f"kinks/{name}", kernel, args, None))
    for name, kernel, args, dim in test_hpc_kernels._cases(np.random.default_rng(seed)):
        out.append((f"hpc/{name}", kernel, args, dim))
    for name, make in sorted(test_local_arrays.CASES.items()):  # local arrays, tables, break, continue
        kernel, args, dim = make(np.random.default_rng(seed))
        out.append((f"local/{name}", kernel, args, dim))
    for name, make in sorted(test_dims.CASES.items()):  # 4-D and 5-D arrays, literal-tuple loops
        kernel, args, dim = make(np.random.default_rng(seed))
        out.append((f"dims/{name}", kernel, args, dim))
    for name, make in sorted(test_tape.CASES.items()):  # what the tape leaves out is recomputed or restored
        kernel, args, dim = make(np.random.default_rng(seed))
        out.append((f"tape/{name}", kernel, args, dim))
    for name, case in sorted(LIBRARY.items()):  # the kernel library, gradkern.kernels
        args = case.make(np.random.default_rng(seed), np.dtype(np.float64))
        out.append((f"library/{name}", case.kernel, tuple(case.annotated(args)), case.dim(args)))
    return out


RACY = [  # (label, kernel, dim, args maker): launches the race check must refuse
    ("inplace_stencil", test_races.inplace_stencil, 8, lambda r: (test_races.rand(r, 8),)),
    ("scatter", test_races.scatter, 6, lambda r: (test_races.rand(r, 6), np.array([0, 1, 1, 2, 3, 4]),
                                                  test_races.rand(r, 6))),
    ("atomic_then_read", test_races.atomic_then_read, 4, lambda r: (test_races.rand(r, 4), np.array([1, 0, 3, 2]),
                                                                    test_races.rand(r, 4))),
    ("row_broadcast", test_races.row_broadcast, (3, 4), lambda r: (test_races.rand(r, 3), test_races.rand(r, 4))),
    # the check's branch reads an array the kernel writes: run serially on scratch copies
    ("data_dependent_target", test_races.data_dependent_target, 6,
     lambda r: (test_races.rand(r, 6), np.array([0, 1, 1, 2, 3, 4]), test_races.rand(r, 6))),
]


def all_signatures() -> list[Signature]:
    out = []
    for case in CORPUS:
        for dt in case.dtypes:
            args = corpus_args(case, dt)
            out.append(Signature(f"corpus/{case.name}-{np.dtype(dt).name}", case.kernel, args, case.dim(args)))
    for n, (label, kernel, args, dim) in enumerate(reverse_cases()):
        out.append(Signature(label + "/primal", kernel, _primal(args), dim))
        out.append(Signature(label, kernel, args, dim, gk.Reverse))
        out.append(Signature(label + "/tangent", kernel, _forward(args), dim, gk.Forward))
        if n % 4 == 0:  # vector mode, both modes, on a sample
            out.append(Signature(label + "/batch", kernel, _batch(args, 2), dim, gk.Reverse))
            out.append(Signature(label + "/batch-tangent", kernel, _batch(_forward(args), 2), dim, gk.Forward))
    for label, kernel, dim, make in RACY:
        out.append(Signature(f"racy/{label}", kernel, make(np.random.default_rng(0)), dim))
    return out
