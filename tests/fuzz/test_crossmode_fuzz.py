"""Cross-mode and cross-backend fuzzer of the tape planner (transforms/tape.py, analysis/access.py; docs/testing.md
"The program save fuzzer and the cross-mode fuzzer"): random kernels that read an element, overwrite it where the
overwrite coincides with the read only at run time (`a[i + k]` with k == 0, `a[idx[i]]` with idx the identity,
`b[i]` with b passed as a too) or in a loop that carries the overwrite, then use the value read
(tests/support/crossfuzz.py draws them).

Per kernel, on the reference interpreter:
1. check_grad: reverse mode against float64 central differences per coordinate, the dot-product test, and forward
   mode (<w, J v> from forward mode against <J^T w, v> from reverse), with default tolerances (no kinks: branches
   test integers only);
2. split mode (the kernel's tape crosses launches, so nothing may be recomputed from overwritten memory) against
   fused `gk.autodiff`: primals bit for bit with the plain launch, shadows and the Active derivative to RTOL;
3. vector mode: two BatchDuplicated lanes against two Duplicated calls, reverse and forward, to RTOL;
4. inside a program: the kernel, then a launch that overwrites a, b, x and out in place nonlinearly (so the
   program must save what the kernel's reverse reads), against the store-everything chain by hand (the state
   copied, the second launch's autodiff, the state restored, the kernel's autodiff), to RTOL.
Every CROSS_EVERY-th kernel (none in CI; `test_crossmode_fuzz_compiled`, under `-m full`, runs two) also runs on
the compiled CPU backend (Numba) and hostcuda (the CUDA backend's C on the host, where g++ is): the plain launch,
the reverse (shadows, Active derivative) and the forward tangents
against the interpreter's, to RTOL.

RTOL = 1e-12 relative to the largest magnitude compared: every backend and mode evaluates the same IR expressions
in the same order per thread, values from registers, the tape (a float64 stored and loaded: exact) or a
recomputation from intact memory (exact); what may differ is the order of the Active scalar's per-thread sum (n <= 9
float64 terms of like size: <= n ulps of the sum) and the libm of sin/cos/tanh/exp (Numba's LLVM intrinsics,
g++'s libm, Python's math: within an ulp or two each, and a kernel chains < 100 operations whose derivatives stay
O(1) by construction): far below 1e-12.

GRADKERN_FUZZ_CROSSMODE sets the number of kernels (CI default 2, about 8 s each cold), GRADKERN_FUZZ_SEED the seed,
GRADKERN_FUZZ_CROSS_EVERY how often a kernel also runs on the compiled backends (CI default 0: never),
GRADKERN_FUZZ_CROSS_BACKENDS which (default cpu,hostcuda).
A local long run: GRADKERN_FUZZ_CROSSMODE=2000 GRADKERN_FUZZ_CROSS_EVERY=50 GRADKERN_FUZZ_CROSS_BACKENDS=cpu,hostcuda
pytest -s -n0 tests/fuzz/test_crossmode_fuzz.py
"""

from __future__ import annotations

import collections
import os

import numpy as np
import pytest
from support import crossfuzz

import gradkern as gk
from gradkern.backends.hostcuda import compiler
from gradkern.testing import check_grad

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample

N_KERNELS = int(os.environ.get("GRADKERN_FUZZ_CROSSMODE", "2"))
SEED = int(os.environ.get("GRADKERN_FUZZ_SEED", "0"))
CROSS_EVERY = int(os.environ.get("GRADKERN_FUZZ_CROSS_EVERY", "0"))
RTOL = 1e-12  # module doc
# the compiled backends (cpu: Numba, 30-120 s of compiles a kernel; hostcuda: g++, where it is)
COMPILED = tuple(b for b in os.environ.get("GRADKERN_FUZZ_CROSS_BACKENDS", "cpu,hostcuda").split(",")
                 if b and (b != "hostcuda" or compiler() is not None))


@gk.kernel
def cf_scramble(a, b, x, out):
    """Overwrites everything the fuzzed kernel reads, so its reverse in a program needs saved contents."""
    i = gk.tid()
    a[i] = gk.sin(a[i]) * b[i] + 0.5 * x[i]
    b[i] = gk.tanh(b[i] + out[i])
    x[i] = x[i] * out[i] * 0.5
    out[i] = gk.cos(out[i]) * a[i]


def _close(got, want) -> bool:
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return bool(np.max(np.abs(got - want), initial=0.0) <= RTOL * max(1.0, float(np.max(np.abs(want), initial=0.0))))


class Case:
    """One kernel's values; `args(shadows)` builds a call's arguments with `a` and `b` exactly aliased or not."""

    def __init__(self, rng, kernel, n: int, m: int, aliased: bool):
        self.kernel, self.n, self.aliased = kernel, n, aliased
        self.values = crossfuzz.inputs(rng, n, m)
        if aliased:
            self.values["b"] = self.values["a"]

    def arrays(self) -> dict:
        v = {p: (x.copy() if isinstance(x, np.ndarray) else x) for p, x in self.values.items()}
        if self.aliased:
            v["b"] = v["a"]
        return v

    def shadows(self, rng) -> dict:
        s = {p: rng.standard_normal(self.n) for p in ("a", "b", "x", "out")}
        if self.aliased:
            s["b"] = s["a"]
        return s

    def args(self, values, shadows, scalar="active", ctangent=0.0, lanes=None):
        out = []
        for p in crossfuzz.PARAMS:
            if p in ("a", "b", "x", "out"):
                out.append(gk.Duplicated(values[p], shadows[p]) if lanes is None
                           else gk.BatchDuplicated(values[p], tuple(s[p] for s in lanes)))
            elif p == "c":
                if scalar == "active":
                    out.append(gk.Active(values[p]))
                elif lanes is None:
                    out.append(gk.Duplicated(values[p], ctangent))
                else:
                    out.append(gk.BatchDuplicated(values[p], tuple(ctangent for _ in lanes)))
            else:
                out.append(gk.Const(values[p]))
        return out


def _copy_shadows(s: dict, aliased: bool) -> dict:
    c = {p: v.copy() for p, v in s.items()}
    if aliased:
        c["b"] = c["a"]
    return c


def _reverse(case, shadows, backend, rng=None):
    values = case.arrays()
    sh = _copy_shadows(shadows, case.aliased)
    grads = gk.autodiff(case.kernel, *case.args(values, sh), dim=case.n, backend=backend)
    return values, sh, grads[5]


def _forward(case, tangents, ct, backend):
    values = case.arrays()
    tg = _copy_shadows(tangents, case.aliased)
    gk.autodiff(case.kernel, *case.args(values, tg, scalar="dup", ctangent=ct), dim=case.n, mode=gk.Forward,
                backend=backend)
    return values, tg


def check_case(case, rng, stats, fail, cross_every: int):
    kernel, n = case.kernel, case.n
    plain = case.arrays()
    gk.launch(kernel, n, *[plain[p] for p in crossfuzz.PARAMS], backend="interp")

    # 1. finite differences, dot-product test, forward mode
    values = case.arrays()
    report = check_grad(kernel, *case.args(values, case.shadows(rng)), dim=n, raise_on_failure=False)
    if not report.ok:
        return fail(f"check_grad:\n{report}")

    # 2. split against fused
    seeds = case.shadows(rng)
    fused_v, fused_s, fused_c = _reverse(case, seeds, "interp")
    for p in ("a", "b", "x", "out"):
        if not np.array_equal(fused_v[p], plain[p]):
            return fail(f"fused autodiff left primal {p} {fused_v[p]} unlike the plain launch's {plain[p]}")
    split_v, split_s = case.arrays(), _copy_shadows(seeds, case.aliased)
    forward, reverse = gk.autodiff_thunk(kernel, *case.args(split_v, split_s), dim=n, backend="interp")
    sargs = case.args(split_v, split_s)
    tape = forward(*sargs)
    for p in ("a", "b", "x", "out"):
        if not np.array_equal(split_v[p], plain[p]):
            return fail(f"the split forward left primal {p} {split_v[p]} unlike the plain launch's {plain[p]}")
    sgrads = reverse(*sargs, tape)
    for p in ("a", "b", "x", "out"):
        if not _close(split_s[p], fused_s[p]):
            return fail(f"split shadow of {p} {split_s[p]} differs from fused {fused_s[p]}")
    if not _close(sgrads[5], fused_c):
        return fail(f"split d/dc {sgrads[5]} differs from fused {fused_c}")
    stats["split"] += 1

    # 3. vector mode
    lanes = [case.shadows(rng) for _ in range(2)]
    vv = case.arrays()
    vl = [_copy_shadows(s, case.aliased) for s in lanes]
    vgrads = gk.autodiff(kernel, *case.args(vv, None, lanes=vl), dim=n, backend="interp")
    for lane in range(2):
        _, one_s, one_c = _reverse(case, lanes[lane], "interp")
        for p in ("a", "b", "x", "out"):
            if not _close(vl[lane][p], one_s[p]):
                return fail(f"reverse lane {lane} of {p} {vl[lane][p]} differs from its Duplicated call {one_s[p]}")
        if not _close(vgrads[5][lane], one_c):
            return fail(f"reverse lane {lane} d/dc {vgrads[5][lane]} differs from {one_c}")
    ct = float(rng.standard_normal())
    fv = case.arrays()
    fl = [_copy_shadows(s, case.aliased) for s in lanes]
    gk.autodiff(kernel, *case.args(fv, None, scalar="dup", ctangent=ct, lanes=fl), dim=n, mode=gk.Forward,
                backend="interp")
    for lane in range(2):
        _, one_t = _forward(case, lanes[lane], ct, "interp")
        for p in ("a", "b", "x", "out"):
            if not _close(fl[lane][p], one_t[p]):
                return fail(f"forward lane {lane} of {p} {fl[lane][p]} differs from its Duplicated call {one_t[p]}")
    stats["vector"] += 1

    # 4. in a program, against the store-everything chain
    if not _program(case, seeds, fail):
        return
    stats["program"] += 1

    # cross-backend
    if cross_every and stats["kernels"] % cross_every == cross_every // 2:
        tangents = case.shadows(rng)
        want_t = _forward(case, tangents, ct, "interp")[1]
        for backend in COMPILED:
            got = case.arrays()
            gk.launch(kernel, n, *[got[p] for p in crossfuzz.PARAMS], backend=backend)
            if not all(_close(got[p], plain[p]) for p in ("a", "b", "out")):
                return fail(f"{backend}'s plain launch {got} differs from the interpreter's {plain}")
            _, gs, gc = _reverse(case, seeds, backend)
            for p in ("a", "b", "x", "out"):
                if not _close(gs[p], fused_s[p]):
                    return fail(f"{backend}'s reverse shadow of {p} {gs[p]} differs from the interpreter's "
                                f"{fused_s[p]}")
            if not _close(gc, fused_c):
                return fail(f"{backend}'s d/dc {gc} differs from the interpreter's {fused_c}")
            _, gt = _forward(case, tangents, ct, backend)
            for p in ("a", "b", "x", "out"):
                if not _close(gt[p], want_t[p]):
                    return fail(f"{backend}'s forward tangent of {p} {gt[p]} differs from the interpreter's "
                                f"{want_t[p]}")
            stats["backend " + backend] += 1


def _program(case, seeds, fail) -> bool:
    kernel, n = case.kernel, case.n

    def fn(a, b, x, out, idx, c, k, m):
        gk.launch(kernel, n, a, b, x, out, idx, c, k, m)
        gk.launch(cf_scramble, n, a, b, x, out)

    # the oracle: the state before each launch kept whole
    v = case.arrays()
    before = {p: v[p].copy() for p in ("a", "b", "x", "out")}
    gk.launch(kernel, n, *[v[p] for p in crossfuzz.PARAMS], backend="interp")
    middle = {p: v[p].copy() for p in ("a", "b", "x", "out")}
    sh = _copy_shadows(seeds, case.aliased)
    arrays = {p: middle[p].copy() for p in ("a", "b", "x", "out")}
    if case.aliased:
        arrays["b"] = arrays["a"]
    gk.autodiff(cf_scramble, *[gk.Duplicated(arrays[p], sh[p]) for p in ("a", "b", "x", "out")], dim=n,
                backend="interp")
    arrays = {p: before[p].copy() for p in ("a", "b", "x", "out")}
    if case.aliased:
        arrays["b"] = arrays["a"]
    grads = gk.autodiff(kernel, *case.args({**case.values, **arrays}, sh), dim=n, backend="interp")
    want_c = grads[5]

    got_v = case.arrays()
    got_s = _copy_shadows(seeds, case.aliased)
    from gradkern.backends import set_default
    old = set_default("interp")
    try:
        got = gk.autodiff(fn, *case.args(got_v, got_s))
    finally:
        set_default(old)
    for p in ("a", "b", "x", "out"):
        if not _close(got_s[p], sh[p]):
            fail(f"program shadow of {p} {got_s[p]} differs from the store-everything chain's {sh[p]}")
            return False
    if not _close(got[5], want_c):
        fail(f"program d/dc {got[5]} differs from the store-everything chain's {want_c}")
        return False
    return True


def fuzz(tmp_path, count: int, cross_every: int):
    rng = np.random.default_rng(SEED)
    stats = collections.Counter()
    failures: list[str] = []
    gens = [crossfuzz.Generator(rng, f"cfuzz_{SEED}_{x}") for x in range(count)]
    sources = [g.source() for g in gens]
    module = crossfuzz.load_module(str(tmp_path / f"cfuzz_module_{SEED}.py"), sources)
    for g, src in zip(gens, sources):
        n, m = int(rng.integers(3, 10)), int(rng.integers(1, 4))
        case = Case(rng, getattr(module, g.name), n, m, aliased=bool(rng.random() < 0.3))
        context = f"{g.name} (GRADKERN_FUZZ_SEED={SEED}), n {n}, m {m}, a and b aliased: {case.aliased}\n{src}"

        def fail(what, context=context):
            failures.append(f"{what}\n{context}")
            print("FAILURE", failures[-1], flush=True)
        try:
            check_case(case, rng, stats, fail, cross_every)
        except gk.GradkernError as e:
            stats["refused " + type(e).__name__] += 1
            print(f"refused: {type(e).__name__}: {e}\n{context}", flush=True)
        stats["kernels"] += 1
        stats["aliased"] += case.aliased
        for f in g.features:
            stats[f] += 1
    print(dict(stats))
    assert not failures, "\n\n".join(failures[:3])
    assert stats["program"] >= 0.8 * count
    assert not cross_every or count <= cross_every // 2 or all(stats["backend " + b] for b in COMPILED)
    return stats


def test_crossmode_fuzz(tmp_path):
    """CI's slice: N_KERNELS kernels on the interpreter (every CROSS_EVERY-th compiled too, where set)."""
    fuzz(tmp_path, N_KERNELS, CROSS_EVERY)


@pytest.mark.full
def test_crossmode_fuzz_compiled(tmp_path):
    """Two kernels, each also on the compiled CPU backend and hostcuda (docs/testing.md: `-m full`, beyond CI's
    time: one kernel's compiles in every mode take a minute or more on two cores)."""
    stats = fuzz(tmp_path, 2, 2)
    assert stats["backend cpu"]


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-s"])
