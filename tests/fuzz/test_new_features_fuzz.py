"""Random kernels over the language's newest constructs against brute-force oracles (docs/testing.md, "The new
features' fuzzer"). tests/support/newfuzz.py draws them: tuple assignment (locals, own elements, the swap
`y[I], out[I] = out[I], y[I]`, an index bound left to right), chained assignment, `float("inf")` starting running
minima and argmins, nested loops with `break`/`continue`, returns under branches in loops, grid-stride loops
(`while` and three-argument `range`, atomics inside), negative integer divisors; and the whole of
tests/support/langfuzz.py's language besides (while loops computing active values, returns in loops, local
arrays, ...).

Per float kernel:
1. races and bounds: the kernel's text run thread by thread in Python, recording every thread's accesses
   (newfuzz.RecordingGk), decides whether the launch races (a thread writes an element another thread touches, or
   adds atomically to one another touches plainly; serial order decides it exactly: tests/fuzz/test_race_fuzz.py's
   doc) and whether some access leaves its array. `gk.launch` must raise gk.RaceError or gk.LaunchError exactly
   then (a race-free launch inside its arrays runs; the others raise), leaving every buffer unchanged; one that
   leaves an array is launched with GRADKERN_BOUNDSCHECK=1, since accesses the launch's bounds proof cannot
   decide (an index carried by a `while` loop) are checked only then (docs/launches.md), and where that check
   (not the proof before the launch) catches it, arrays may have changed, as its message says;
2. tests/fuzz/test_language_fuzz.py's `check_kernel`: the primal on the interpreter and the kernel's backend
   against the Python run in float64 (rtol 1e-12, and float32 runs), `check_grad` (reverse mode against float64
   central differences and the dot-product test against forward mode), split mode against fused, two
   BatchDuplicated lanes against separate calls, every refusal a GradkernError;
3. every CROSS_EVERY-th kernel (where g++ is): the primal on the compiled CPU backend (Numba) and on hostcuda (g++)
   bit for bit: both print the same IR in the same order, hostcuda with -ffp-contract=off (no FMA) and both call
   the platform's libm. The one exception is `tot` when atomics add to it: the adds' order differs (Numba's chunks,
   hostcuda's serial threads), so each element may differ by the bound of a sum of K terms in any order,
   K * eps * (|tot_0| + sum |v|) (each of the K roundings is at most eps times a partial sum, itself at most
   |tot_0| + sum |v|); the recording run gives K and sum |v| per element.

Integer kernels (`test_random_integer_expressions`): random int64 expressions over inputs at the edges
(INT64_MIN // -1, // 0, % -1, shifts by 64 or -1, products that overflow), stored into int64 and int32 results,
on the interpreter, the compiled CPU backend and hostcuda, against Python's integers with NumPy's int64 rules
(newfuzz.integer_oracle), bit for bit.

CI: GRADKERN_FUZZ_NEW=5 float kernels (seed GRADKERN_FUZZ_SEED=0, the interpreter and one on hostcuda; the Numba
and hostcuda cross-check off, GRADKERN_FUZZ_NEW_CROSS=0, as a Numba compile costs ~10 s) and
GRADKERN_FUZZ_NEW_INT=2 integer kernels of 24 expressions each (seed 0; the interpreter and hostcuda, Numba on the
first). A long run:
GRADKERN_FUZZ_NEW=2000 GRADKERN_FUZZ_NEW_CROSS=50 GRADKERN_FUZZ_NEW_INT=200 GRADKERN_FUZZ_SEED=7 \\
python -m pytest -s -n0 tests/fuzz/test_new_features_fuzz.py
"""

from __future__ import annotations

import os
import time
from unittest import mock

import numpy as np
import pytest
from support import langfuzz, langfuzz_run, newfuzz
from support.generators import import_path

import gradkern as gk
from fuzz.test_language_fuzz import Stats, _dims, _refusal, check_kernel
from fuzz.test_race_fuzz import _HAS_GPP, fuzz_backend

N_KERNELS = int(os.environ.get("GRADKERN_FUZZ_NEW", "5"))
N_INT = int(os.environ.get("GRADKERN_FUZZ_NEW_INT", "2"))
SEED = int(os.environ.get("GRADKERN_FUZZ_SEED", "0"))
CROSS_EVERY = int(os.environ.get("GRADKERN_FUZZ_NEW_CROSS", "0"))
HOSTCUDA_EVERY = int(os.environ.get("GRADKERN_FUZZ_HOSTCUDA_EVERY", "5"))
CPU_EVERY = int(os.environ.get("GRADKERN_FUZZ_CPU_EVERY", "0"))


def _check_races(stats: Stats, fail, kernel, g, text: str, dims, values: dict, backend: str) -> bool:
    """Property 1 (module doc); True when the launch is race-free and ran."""
    fake = newfuzz.RecordingGk()
    langfuzz_run.python_run(text, g.name, dims, fake.track(values), fake)
    races = fake.races()
    args = [v.copy() if isinstance(v, np.ndarray) else v for v in values.values()]
    # accesses the bounds proof cannot decide (a `while` loop's index) are checked where GRADKERN_BOUNDSCHECK=1
    checked = {"GRADKERN_BOUNDSCHECK": "1"} if fake.outside else {}
    try:
        with mock.patch.dict(os.environ, checked):
            gk.launch(kernel, dims, *args, backend=backend)
    except (gk.RaceError, gk.LaunchError) as e:
        if isinstance(e, gk.RaceError) and races and not fake.outside:
            stats.refused.setdefault("launch: RaceError (the oracle agrees)", []).append(g.name)
        elif not fake.outside:
            fail(f"{type(e).__name__} on a launch the oracle finds inside every array and race-free: "
                 f"{str(e).splitlines()[0]}")
        else:
            stats.refused.setdefault("launch: outside an array (the oracle agrees)", []).append(g.name)
        caught = "GRADKERN_BOUNDSCHECK=1 caught it" in str(e)  # in the launch itself, documented to change arrays
        for p, a, v in zip(langfuzz.PARAMS, args, values.values()):
            if isinstance(v, np.ndarray) and not caught and not np.array_equal(a, v):
                fail(f"{type(e).__name__}, but '{p}' was changed")
        return False
    if fake.outside:
        fail(f"the launch ran, but the oracle finds accesses outside their arrays: {fake.outside[:3]}")
    if races:
        fail(f"the launch ran, but the oracle finds races at {races[:3]}")
    return not races and not fake.outside


def _cross(fail, kernel, g, text: str, dims, values: dict):
    """Property 3 (module doc): Numba and hostcuda bit for bit, `tot` within the bound of a reordered sum."""
    fake = newfuzz.RecordingGk()
    tracked = fake.track(values)
    sums: dict = {}
    record = fake.atomic_add

    def atomic_add(a, index, v):  # K and sum |v| per element of tot
        k = a._key(index)
        n, s = sums.get(k, (0, 0.0))
        sums[k] = (n + 1, s + abs(float(v)))
        record(a, index, v)
    fake.atomic_add = atomic_add
    langfuzz_run.python_run(text, g.name, dims, tracked, fake)
    runs = {}
    for b in ("cpu", "hostcuda"):
        runs[b] = [v.copy() if isinstance(v, np.ndarray) else v for v in values.values()]
        gk.launch(kernel, dims, *runs[b], backend=b)
    eps = np.finfo(np.float64).eps
    for p, c, h, v0 in zip(langfuzz.PARAMS, runs["cpu"], runs["hostcuda"], values.values()):
        if not isinstance(c, np.ndarray) or np.array_equal(c, h):
            continue
        if p != "tot":
            return fail(f"Numba and hostcuda differ in '{p}': {c.tolist()} vs {h.tolist()}")
        for k in np.ndindex(*c.shape):
            n, s = sums.get(k, (0, 0.0))
            bound = n * eps * (abs(v0[k]) + s)
            if abs(c[k] - h[k]) > bound:
                return fail(f"Numba and hostcuda differ in tot{list(k)}: {c[k]!r} vs {h[k]!r}, more than {n} adds' "
                            f"bound {bound:.3g}")


def fuzz(directory: str, count: int = N_KERNELS, seed: int = SEED, batch: int = 40) -> Stats:
    stats = Stats()
    stats.races = 0
    stats.crossed = 0
    rng = np.random.default_rng(seed + 5000)
    for first in range(0, count, batch):
        gens, dims = [], []
        for x in range(min(batch, count - first)):
            d = _dims(rng)
            dims.append(d)
            gens.append(newfuzz.Generator(rng, f"nfuzz_{seed}_{first + x}", len(d)))
        texts = [g.source() for g in gens]
        sources = [langfuzz.kernel_source(t, seed * 100003 + first + x) for x, t in enumerate(texts)]
        module = langfuzz.load_module(os.path.join(directory, f"nfuzz_module_{seed}_{first}.py"), sources, seed)
        for x, (g, text, src) in enumerate(zip(gens, texts, sources)):
            index = first + x
            stats.kernels += 1
            backend = fuzz_backend(index, CPU_EVERY, HOSTCUDA_EVERY)
            case = f"{g.name} (GRADKERN_FUZZ_SEED={seed}) on {backend}, dims {dims[x]}\n{src}"

            def fail(what: str, case=case):
                stats.failures.append(f"{what}\n{case}")
                print(f"FAILURE {stats.failures[-1]}", flush=True)
            start = time.perf_counter()
            stage = "gk.kernel"
            try:
                kernel = gk.kernel(getattr(module, g.name))
                stage = "race oracle"
                values = langfuzz_run.inputs(rng, dims[x])
                if not _check_races(stats, fail, kernel, g, text, dims[x], values, backend):
                    continue
                stats.races += 1
                if CROSS_EVERY and _HAS_GPP and index % CROSS_EVERY == 0:
                    stage = "Numba against hostcuda"
                    _cross(fail, kernel, g, text, dims[x], values)
                    stats.crossed += 1
            except gk.GradkernError as e:
                _refusal(stats, stage, e, g.name)
                continue
            except Exception as e:  # noqa: BLE001 - a crash or a leaked backend error is a finding
                fail(f"{stage}: {type(e).__name__}: {e}")
                continue
            # index + 1: the language fuzzer's every-12th Numba primal (a ~10 s compile) not at CI's kernel 0
            check_kernel(stats, rng, g, text, src, getattr(module, g.name), dims[x], backend, index + 1)
            stats.seconds[backend] = stats.seconds.get(backend, 0.0) + time.perf_counter() - start
            if stats.kernels % 20 == 0:
                print(f"after {stats.kernels}: {stats}; race oracle {stats.races}, Numba/hostcuda {stats.crossed}",
                      flush=True)
    return stats


def test_random_kernels_with_the_new_features(tmp_path):
    stats = fuzz(str(tmp_path))
    print(f"{stats}; race oracle {stats.races}, Numba/hostcuda {stats.crossed}")
    for f, k in sorted(stats.features.items()):
        print(f"  {f}: {k} kernels")
    for why, names in sorted(stats.refused.items()):
        print(f"  refused ({why}): {len(names)} kernels, e.g. {names[0]}")
    assert not stats.failures, "\n\n".join(stats.failures[:3])
    assert stats.checked >= 0.5 * stats.kernels and stats.races >= 0.5 * stats.kernels


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_text_runs_in_python(seed):
    """The generator's text runs in plain Python (the oracle) and every new statement is drawn."""
    rng = np.random.default_rng(seed)
    features = set()
    for k in range(30):
        nd = 1 + k % 3
        g = newfuzz.Generator(rng, "probe", nd)
        text = g.source()
        dims = ((4,), (2, 3), (2, 2, 2))[nd - 1]
        fake = newfuzz.RecordingGk()
        langfuzz_run.python_run(text, "probe", dims, fake.track(langfuzz_run.inputs(rng, dims)), fake)
        assert "GT(" not in langfuzz.kernel_source(text, seed)
        features |= g.features
    assert {"tuple assignment", "chained assignment", "float('inf')", "grid-stride loop"} <= features


def _integer_backends(index: int) -> tuple:
    return ("interp",) + (("cpu",) if index == 0 or (CROSS_EVERY and index % CROSS_EVERY == 0) else ()) + \
        (("hostcuda",) if _HAS_GPP else ())


def test_random_integer_expressions(tmp_path):
    """Module doc, integer kernels: every backend bit for bit with Python's integers under NumPy's int64 rules."""
    rng = np.random.default_rng(SEED + 9000)
    failures, cases = [], 0
    for index in range(N_INT):
        name = f"ifuzz_{SEED}_{index}"
        text, trees = newfuzz.integer_kernel(rng, name, 24)
        path = os.path.join(str(tmp_path), f"{name}.py")
        with open(path, "w") as f:
            f.write("import gradkern as gk\n\n\n" + text)
        kernel = gk.kernel(getattr(import_path(path), name))
        n = int(rng.integers(3, 9))
        for in_type, res_type in ((np.int64, np.int64), (np.int32, np.int64), (np.int64, np.int32)):
            a, b = newfuzz.integer_inputs(rng, n, in_type)
            want = newfuzz.integer_oracle(trees, a, b, res_type)
            for backend in _integer_backends(index):
                res = np.zeros((n, len(trees)), res_type)
                try:
                    gk.launch(kernel, n, a, b, res, backend=backend)
                except Exception as e:  # noqa: BLE001 - a compile error leaking out is a finding
                    failures.append(f"{backend}: {type(e).__name__}: {str(e)[:300]}\n{text}")
                    continue
                cases += res.size
                for i, k in zip(*np.nonzero(res != want)):
                    failures.append(f"{backend} {np.dtype(in_type).name}->{np.dtype(res_type).name}: expression {k} "
                                    f"at u={a[i]}, v={b[i]}, w={a[(i + 1) % n]}: {res[i, k]} != {want[i, k]}\n{text}")
    print(f"{cases} integer results compared")
    assert not failures, "\n\n".join(failures[:3])
