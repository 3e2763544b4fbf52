"""Language fuzzer: random kernels over the whole accepted language (tests/support/langfuzz.py draws them:
1-D to 3-D launches, gathers and atomic scatters through an int index array with repeated indices, loops,
while/break/continue, local arrays, @gk.func calls, in-place updates, kinks), every mode checked against
brute-force oracles (docs/testing.md, "The language fuzzer").

Per kernel:
1. primal: the plain launch on the interpreter and on the kernel's backend (the compiled CPU backend every
   GRADKERN_FUZZ_CPU_EVERY-th, hostcuda every GRADKERN_FUZZ_HOSTCUDA_EVERY-th where g++ is) against a plain
   Python run of the same text in float64, rtol 1e-12 (the same operations in the same order; only the
   elementary functions' last bits and the order of the atomic adds into `tot` may differ: a few ulps, which
   the kernels' bounded values (|v| < ~10, derivatives O(1)) keep far under 1e-12 relative);
   every GRADKERN_FUZZ_LANGUAGE_F32-th kernel also runs in float32, each backend against the interpreter
   (rtol 1e-5: float32 elementary functions of different libraries differ by an ulp, 6e-8, and a kernel chains
   at most ~100 operations) and against the float64 Python run (rtol 1e-3);
2. gradkern.testing.check_grad: reverse mode (Duplicated, Active, Const) against float64 central differences
   per coordinate, the dot-product test <w, Jv> = <J^T w, v> and forward mode; inputs are redrawn until every
   condition and kink argument is MARGIN from its kink (the Python run measures it), so no difference crosses
   one. A kernel whose reverse is refused (the tape size depending on an overwritten array) is checked in
   forward mode;
3. split mode (autodiff_thunk) against fused autodiff: primals bit for bit with the plain launch, shadows and
   Active derivatives rtol 1e-12 (the same expressions; only chunked sums' order differs);
4. vector mode: BatchDuplicated with k = 2 lanes, reverse and forward, each lane against its own Duplicated call,
   rtol 1e-12.
A kernel gradkern refuses (at gk.kernel, the launch or a transform) must raise a GradkernError subclass: those are
counted per class and message; anything else (a crash, a Numba or C++ error leaking out) fails the test.
GRADKERN_FUZZ_LANGUAGE sets the number of kernels (CI: 12), GRADKERN_FUZZ_SEED the seed.
A long run: GRADKERN_FUZZ_LANGUAGE=2000 GRADKERN_FUZZ_SEED=3 python -m pytest -s -n0 tests/fuzz/test_language_fuzz.py
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field

import numpy as np
import pytest
from support import langfuzz, langfuzz_run

import gradkern as gk
from fuzz.test_race_fuzz import _HAS_GPP, HOSTCUDA_EVERY, fuzz_backend
from fuzz.test_tape_fuzz import on_backend
from gradkern.testing import check_grad

N_KERNELS = int(os.environ.get("GRADKERN_FUZZ_LANGUAGE", "12"))
SEED = int(os.environ.get("GRADKERN_FUZZ_SEED", "0"))
# every mode on the compiled CPU backend costs Numba ~30-120 s of compiles per kernel (the primal in two dtypes and
# layouts, fused and split reverse, forward, two-lane vector modes): a long run's knob; CI compiles the primal alone
CPU_EVERY = int(os.environ.get("GRADKERN_FUZZ_CPU_EVERY", "0"))
CPU_PRIMAL_EVERY = int(os.environ.get("GRADKERN_FUZZ_LANGUAGE_CPU_PRIMAL", "12"))
F32_EVERY = int(os.environ.get("GRADKERN_FUZZ_LANGUAGE_F32", "4"))
MARGIN = 2e-4


@dataclass
class Stats:
    kernels: int = 0
    checked: int = 0
    skipped: int = 0
    backends: dict = field(default_factory=dict)
    features: dict = field(default_factory=dict)
    refused: dict = field(default_factory=dict)  # "stage: Class: message" -> kernel names
    failures: list = field(default_factory=list)
    f32: int = 0
    split: int = 0
    batch: int = 0
    forward_only: int = 0
    seconds: dict = field(default_factory=dict)  # backend -> seconds spent on its kernels

    def refusals(self) -> int:
        return sum(len(v) for v in self.refused.values())

    def __str__(self) -> str:
        return (f"{self.kernels} kernels, {self.checked} checked {self.backends}, {self.skipped} skipped near a kink; "
                f"{self.refusals()} refusals ({self.refusals() / max(1, self.kernels):.0%}), {self.forward_only} "
                f"checked in forward mode only; float32 {self.f32}, split {self.split}, batch {self.batch}; "
                f"failures: {len(self.failures)}; seconds {({k: round(v) for k, v in self.seconds.items()})}")


def _refusal(stats: Stats, stage: str, e: gk.GradkernError, name: str):
    why = str(e).splitlines()[0]
    why = why.split(f"(in {name}): ", 1)[-1].replace(f"'{name}'", "K")
    stats.refused.setdefault(f"{stage}: {type(e).__name__}: {why[:120]}", []).append(name)


def _dims(rng: np.random.Generator) -> tuple:
    nd = int(rng.integers(1, 4))
    return ((int(rng.integers(2, 7)),), (int(rng.integers(2, 4)), int(rng.integers(2, 4))),
            (2, int(rng.integers(2, 4)), int(rng.integers(1, 3))))[nd - 1]


def _annotated(rng: np.random.Generator, values: dict, f32: bool = False) -> tuple:
    out = []
    for p in langfuzz.PARAMS:
        v = values[p]
        if p in ("idx", "m"):
            out.append(gk.Const(v.copy()) if p == "idx" else v)
        elif p == "c":
            out.append(gk.Active(v) if rng.random() < 0.7 else gk.Const(v))
        elif p in ("x", "w") and rng.random() < 0.3:
            out.append(gk.Const(v.copy()))
        else:
            out.append(gk.Duplicated(v.copy(), rng.standard_normal(v.shape)))
    return tuple(out)


LAYOUT: dict = {}  # the current kernel's layout of x, y, out (and shadows): "C", "F" or "slice" (every other element)


def _copy(v, name: str = ""):
    """A copy of v in the current kernel's layout for `name`: C order, Fortran order, or a strided view."""
    if not isinstance(v, np.ndarray):
        return v
    kind = LAYOUT.get(name, "C")
    if kind == "F":
        return np.asfortranarray(v).copy(order="F")
    if kind == "slice":
        base = np.zeros(v.shape[:-1] + (2 * v.shape[-1],), v.dtype)
        view = base[..., ::2]
        view[...] = v
        return view
    return v.copy()


def copies(args) -> tuple:
    return tuple(gk.Duplicated(_copy(a.val, p), _copy(a.dval, p)) if isinstance(a, gk.Duplicated) else
                 gk.Const(_copy(a.val, p)) if isinstance(a, gk.Const) else a for p, a in zip(langfuzz.PARAMS, args))


def _close(a, b, rtol, atol) -> bool:
    return np.allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol, atol=atol)


def _backends(backend: str, index: int) -> tuple:
    """The kernel's backend, the interpreter, and the compiled CPU every CPU_PRIMAL_EVERY-th kernel."""
    extra = ("cpu",) if CPU_PRIMAL_EVERY and index % CPU_PRIMAL_EVERY == 0 else ()
    return tuple(dict.fromkeys(("interp", backend) + extra))


def _launches(stats, fail, kernel, dims, values, expected, backend, index, dtype=np.float64) -> list | None:
    """The plain launch on each backend against the Python run (module doc, 1); in float32 against the
    interpreter's float32 run too. The kernel's backend's arrays, or None on a failure."""
    single = dtype == np.float32
    mixed = single and index % (2 * F32_EVERY) == 0  # x and w in float32, the rest in float64
    values = {k: v.astype(dtype) if isinstance(v, np.ndarray) and v.dtype.kind == "f" and (not mixed or k in "xw")
              else v for k, v in values.items()}
    stats.f32 += single
    runs = {}
    for b in _backends(backend, index):
        plain = [_copy(v, p) for p, v in values.items()]
        gk.launch(kernel, dims, *plain, backend=b)
        runs[b] = plain
        for k, (p, v) in enumerate(zip(langfuzz.PARAMS, plain)):
            if not isinstance(v, np.ndarray) or v.dtype.kind != "f":
                continue
            if v.dtype != values[p].dtype:
                return fail(f"{dtype.__name__} on {b}: '{p}' came back as {v.dtype}")
            if not _close(v, expected[p], 1e-3 if single else 1e-12, 1e-3 if single else 1e-12):
                return fail(f"{dtype.__name__} on {b}: '{p}' {v.tolist()} differs from the Python run's "
                            f"{expected[p].tolist()}")
            if single and not _close(v, runs["interp"][k], 1e-5, 1e-5):
                return fail(f"float32 on {b}: '{p}' {v.tolist()} differs from the interpreter's")
    return runs[backend]


def _split(stats, fail, kernel, dims, args, plain, backend):
    fused, apart = copies(args), copies(args)
    want = gk.autodiff(kernel, *fused, dim=dims, backend=backend)
    forward, reverse = gk.autodiff_thunk(kernel, *(type(a) if isinstance(a, gk.Annotation) else gk.Const
                                                   for a in args), dim=dims, backend=backend)
    tape = forward(*apart)
    got = reverse(*apart, tape)
    stats.split += 1
    for p, a, b, v in zip(langfuzz.PARAMS, fused, apart, plain):
        if isinstance(a, (gk.Duplicated, gk.Const)) and isinstance(v, np.ndarray):
            for label, arr in (("fused", a.val), ("split", b.val)):
                if not np.array_equal(arr, v):
                    return fail(f"{label} primal '{p}' {arr.tolist()} differs from the plain launch's {v.tolist()}")
        if isinstance(a, gk.Duplicated) and not _close(b.dval, a.dval, 1e-12, 1e-13):
            return fail(f"split shadow '{p}' {b.dval.tolist()} differs from the fused one {a.dval.tolist()}")
    for p, e, x in zip(langfuzz.PARAMS, want, got):
        if (e is None) != (x is None) or (e is not None and not math.isclose(x, e, rel_tol=1e-12, abs_tol=1e-13)):
            return fail(f"split derivative of '{p}' {x} differs from the fused one {e}")


def _batch(stats, fail, kernel, dims, args, backend, rng, mode):
    """k = 2 lanes against one Duplicated call per lane."""
    seeds = [{p: rng.standard_normal(np.shape(a.val)) for p, a in zip(langfuzz.PARAMS, args)
              if isinstance(a, gk.Duplicated) or (mode is gk.Forward and isinstance(a, gk.Active))} for _ in range(2)]

    def one(lane):
        out = []
        for p, a in zip(langfuzz.PARAMS, args):
            if p in lane:
                v = _copy(a.val, p)
                out.append(gk.Duplicated(v, _copy(lane[p], p) if isinstance(v, np.ndarray) else float(lane[p])))
            else:
                out.append(copies([a])[0])
        return out
    singles = [one(s) for s in seeds]
    results = [gk.autodiff(kernel, *s, dim=dims, mode=mode, backend=backend) for s in singles]
    batch = []
    for p, a in zip(langfuzz.PARAMS, args):
        if p in seeds[0] and isinstance(a.val, np.ndarray):
            batch.append(gk.BatchDuplicated(_copy(a.val, p), tuple(_copy(s[p], p) for s in seeds)))
        elif p in seeds[0]:
            batch.append(gk.BatchDuplicated(a.val, tuple(float(s[p]) for s in seeds)))
        else:
            batch.append(copies([a])[0])
    got = gk.autodiff(kernel, *batch, dim=dims, mode=mode, backend=backend)
    stats.batch += 1
    for k, p in enumerate(langfuzz.PARAMS):
        b = batch[k]
        if not isinstance(b, gk.BatchDuplicated):
            continue
        for lane in range(2):
            s = singles[lane][k]
            if isinstance(b.val, np.ndarray) and not _close(b.dvals[lane], s.dval, 1e-12, 1e-13):
                return fail(f"{mode} batch lane {lane} of '{p}' {np.asarray(b.dvals[lane]).tolist()} differs from "
                            f"its Duplicated call's {np.asarray(s.dval).tolist()}")
    if mode is gk.Reverse:
        for k, p in enumerate(langfuzz.PARAMS):
            if isinstance(args[k], gk.Active):
                for lane in range(2):
                    if not math.isclose(got[k][lane], results[lane][k], rel_tol=1e-12, abs_tol=1e-13):
                        return fail(f"batch lane {lane} derivative of '{p}' {got[k][lane]} differs from "
                                    f"{results[lane][k]}")


def check_kernel(stats: Stats, rng, g: langfuzz.Generator, text: str, src: str, fn, dims, backend: str, index: int):
    case = f"{g.name} (GRADKERN_FUZZ_SEED={SEED}) on {backend}, dims {dims}\nfeatures: {sorted(g.features)}\n{src}"

    def fail(what: str):
        stats.failures.append(f"{what}\n{case}")
        print(f"FAILURE {stats.failures[-1]}", flush=True)
    LAYOUT.clear()
    LAYOUT.update({p: ("C", "C", "F", "slice")[int(rng.integers(4))] for p in ("x", "y", "out")})
    if index % 3 == 1:
        LAYOUT["idx32"] = "yes"
    case = case.replace("\nfeatures", f" layouts {LAYOUT}\nfeatures")
    stage = "gk.kernel"
    try:
        kernel = gk.kernel(fn)
        for attempt in range(12):
            values = langfuzz_run.inputs(rng, dims)
            if "idx32" in LAYOUT:
                values["idx"] = values["idx"].astype(np.int32)
            expected, margin = langfuzz_run.python_run(text, g.name, dims, values)
            if margin >= MARGIN:
                break
        else:
            stats.skipped += 1
            return
        stats.checked += 1
        for b in _backends(backend, index):
            stats.backends[b] = stats.backends.get(b, 0) + 1
        for f in g.features:
            stats.features[f] = stats.features.get(f, 0) + 1
        stage = "launch"
        plain = _launches(stats, fail, kernel, dims, values, expected, backend, index)
        if plain is None:
            return
        if F32_EVERY and index % F32_EVERY == 0:
            stage = "float32 launch"
            _launches(stats, fail, kernel, dims, values, expected, backend, index, np.float32)
        args = _annotated(rng, values)
        stage = "check_grad"
        try:
            with on_backend(backend):
                report = check_grad(kernel, *args, dim=dims, raise_on_failure=False)
        except gk.GradkernError as e:
            _refusal(stats, "reverse", e, g.name)
            stage = "check_grad forward"
            with on_backend(backend):
                report = check_grad(kernel, *args, dim=dims, mode=gk.Forward, raise_on_failure=False)
            stats.forward_only += 1
            if not report.ok:
                return fail(f"check_grad (forward):\n{report}")
            stage = "forward batch"
            return _batch(stats, fail, kernel, dims, args, backend, rng, gk.Forward)
        if not report.ok:
            return fail(f"check_grad:\n{report}")
        stage = "split"
        _split(stats, fail, kernel, dims, args, plain, backend)
        stage = "reverse batch"
        _batch(stats, fail, kernel, dims, args, backend, rng, gk.Reverse)
        stage = "forward batch"
        _batch(stats, fail, kernel, dims, args, backend, rng, gk.Forward)
    except gk.GradkernError as e:
        _refusal(stats, stage, e, g.name)
    except Exception as e:  # noqa: BLE001 - a crash or a leaked backend error is a finding
        fail(f"{stage}: {type(e).__name__}: {e}")


def fuzz(directory: str, count: int = N_KERNELS, seed: int = SEED, batch: int = 40) -> Stats:
    stats = Stats()
    rng = np.random.default_rng(seed)
    for first in range(0, count, batch):
        gens, dims = [], []
        for x in range(min(batch, count - first)):
            d = _dims(rng)
            dims.append(d)
            gens.append(langfuzz.Generator(rng, f"lfuzz_{seed}_{first + x}", len(d)))
        texts = [g.source() for g in gens]
        sources = [langfuzz.kernel_source(t, seed * 100003 + first + x) for x, t in enumerate(texts)]
        module = langfuzz.load_module(os.path.join(directory, f"lfuzz_module_{seed}_{first}.py"), sources, seed)
        for x, (g, text, src) in enumerate(zip(gens, texts, sources)):
            stats.kernels += 1
            backend = fuzz_backend(first + x, CPU_EVERY, HOSTCUDA_EVERY)
            start = time.perf_counter()
            check_kernel(stats, rng, g, text, src, getattr(module, g.name), dims[x], backend, first + x)
            stats.seconds[backend] = stats.seconds.get(backend, 0.0) + time.perf_counter() - start
            if stats.kernels % 10 == 0:
                print(f"after {stats.kernels}: {stats}", flush=True)
    return stats


def test_random_kernels_over_the_language(tmp_path):
    stats = fuzz(str(tmp_path))
    print(stats)
    for f, k in sorted(stats.features.items()):
        print(f"  {f}: {k} kernels")
    for why, names in sorted(stats.refused.items()):
        print(f"  refused ({why}): {len(names)} kernels, e.g. {names[0]}")
    assert not stats.failures, "\n\n".join(stats.failures[:3])
    assert stats.checked >= 0.6 * stats.kernels and stats.split and stats.batch
    assert stats.backends.get("hostcuda") or not _HAS_GPP or not HOSTCUDA_EVERY or stats.kernels < HOSTCUDA_EVERY


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_text_runs_in_python(seed):
    """The generator's text runs in plain Python (the primal's oracle) and its kernel spelling parses."""
    rng = np.random.default_rng(seed)
    for nd in (1, 2, 3):
        g = langfuzz.Generator(rng, "probe", nd)
        text = g.source()
        dims = ((4,), (2, 3), (2, 2, 2))[nd - 1]
        langfuzz_run.python_run(text, "probe", dims, langfuzz_run.inputs(rng, dims))
        assert "GT(" not in langfuzz.kernel_source(text, seed)
