"""Generated code is a function of the kernel and its signature only
(docs/caching.md): processes with different PYTHONHASHSEED values, generating
in different orders, print every source byte for byte the same, and a warm
disk cache compiles nothing in a new process."""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HERE = Path(__file__).parents[1] / "support"
SEEDS = ("0", "1", "2", "12345")


def _env(seed: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GRADKERN_DUMP", "GRADKERN_BOUNDSCHECK")}
    return env | {"PYTHONHASHSEED": seed, **extra}


def _sources(seed: str, *flags: str, dump: Path | None = None) -> dict[str, str]:
    """Every source of tests/support/determinism_sources.py's calls, generated in a process with hash seed `seed`;
    with `dump`, each stage's text goes there too (GRADKERN_DUMP)."""
    env = _env(seed, **({"GRADKERN_DUMP": str(dump)} if dump else {}))
    proc = subprocess.run([sys.executable, str(HERE / "determinism_sources.py"), *flags], env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"generating sources failed (PYTHONHASHSEED={seed}):\n{proc.stderr}"
    return json.loads(proc.stdout)


def _assert_same(runs: dict[str, dict[str, str]]) -> None:
    (first, reference), *others = runs.items()
    assert reference, "no sources generated"
    for seed, sources in others:
        assert sources.keys() == reference.keys(), f"PYTHONHASHSEED={seed} generated other roles than {first}"
        differ = sorted(k for k in reference if sources[k] != reference[k])
        assert not differ, (f"{len(differ)} sources differ between PYTHONHASHSEED={first} and {seed}, "
                            f"e.g. {differ[:5]}")


def _runs(seeds: tuple[str, ...], *flags: str, dumps: Path | None = None) -> dict[str, dict[str, str]]:
    """The sources of one process per seed, run at once (each is one core's work). Every other process
    makes its calls in the opposite order: no source may depend on what the process generated before it.
    With `dumps`, process n dumps every stage into dumps/n."""
    with concurrent.futures.ThreadPoolExecutor(len(seeds)) as pool:
        found = [pool.submit(_sources, seed, *flags, *(("--reverse-order",) if n % 2 else ()),
                             dump=dumps / str(n) if dumps else None) for n, seed in enumerate(seeds)]
        return {seed: f.result() for seed, f in zip(seeds, found)}


def _dumped(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_a_sample_of_sources_is_the_same_under_every_hash_seed(tmp_path):
    """A sample that covers every role (tests/support/determinism_sources.py --sample), on both backends; what
    GRADKERN_DUMP writes (every stage's IR and notes) too, for the two processes that make their calls
    in the same order (a kernel name shared by two test modules is dumped twice, the later one kept)."""
    runs = _runs(SEEDS, "--sample", dumps=tmp_path)
    roles = {k.rsplit("/", 1)[1] for k in runs[SEEDS[0]]}
    assert {"primal", "race_check", "race_note", "race_look", "bounds_check", "fused", "augmented_primal",
            "reverse", "count", "gather", "forward_mode"} <= roles, roles
    _assert_same(runs)
    first, third = _dumped(tmp_path / "0"), _dumped(tmp_path / "2")
    assert first and first.keys() == third.keys()
    differ = sorted(name for name in first if first[name] != third[name])
    assert not differ, f"GRADKERN_DUMP files differ between PYTHONHASHSEED={SEEDS[0]} and {SEEDS[2]}: {differ[:5]}"


@pytest.mark.full
@pytest.mark.parametrize("boundscheck", [pytest.param(False, id="plain"), pytest.param(True, id="boundscheck")])
def test_every_source_is_the_same_under_every_hash_seed(boundscheck):
    """Every call of tests/support/signatures.py, in every mode, on both backends, in two processes (two seeds, the
    second in reverse call order). `full` (deselected in CI, `-m full` runs it): each process generates the
    whole corpus, 35 s of CPU plain and 55 s bounds-checked, both cores busy for a minute or more; the sample
    test above covers every role, both backends and the bounds-checked roles in CI (docs/testing.md)."""
    _assert_same(_runs(SEEDS[:2], "--boundscheck") if boundscheck else _runs(SEEDS[:2]))


# A program gradient in split mode (a stencil whose adjoint is gathered, a kernel whose reverse restores two
# locals one loop fixes and tapes per iteration, so a count kernel runs) and a fused reverse.
WARM_PROGRAM = '''
import json

import numpy as np

import gradkern as gk
from gradkern.backends import numba_cache


@gk.kernel
def smooth(u, v, c):
    i = gk.tid()
    if i == 0 or i == u.shape[0] - 1:
        v[i] = u[i]
    else:
        v[i] = u[i] + c * (u[i - 1] - 2.0 * u[i] + u[i + 1])


@gk.kernel
def two_locals(v, y, n):
    i = gk.tid()
    a = v[i]
    b = 2.0 * v[i]
    for k in range(n):
        a = gk.sin(a) * 1.5
        b = gk.cos(b) * 0.5
    y[i] = a * b


def program(u, v, y, c):
    gk.launch(smooth, u.shape[0], u, v, c)
    gk.launch(two_locals, v.shape[0], v, y, 3)


rng = np.random.default_rng(0)
u, v, y = rng.uniform(0.1, 1.0, 16), np.zeros(16), np.zeros(16)
du, dv, dy = np.zeros(16), np.zeros(16), rng.uniform(-1.0, 1.0, 16)
args = (gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Duplicated(y, dy), gk.Active(0.3))
forward, reverse = gk.autodiff_thunk(program, *args)
tape = forward(*args)
grads = reverse(*args, tape)
dv2, dy2 = np.zeros(16), rng.uniform(-1.0, 1.0, 16)
gk.autodiff(two_locals, gk.Duplicated(v, dv2), gk.Duplicated(y, dy2), 3)
print(json.dumps({"compiled": numba_cache.compiled, "loaded": numba_cache.loaded,
                  "gradients": [du.tolist(), grads[3], dv2.tolist()]}))
'''


def _run_program(tmp: Path, cache: Path, seed: str) -> dict:
    # serial twins for these tiny launches (the default): the parallel entries would only cost compile time
    env = _env(seed, GRADKERN_CACHE_DIR=str(cache), GRADKERN_SERIAL_THREADS="256")
    proc = subprocess.run([sys.executable, str(tmp / "warm_program.py")], cwd=tmp, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"subprocess failed (PYTHONHASHSEED={seed}):\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_warm_cache_compiles_nothing_under_another_hash_seed(tmp_path):
    (tmp_path / "warm_program.py").write_text(textwrap.dedent(WARM_PROGRAM))
    cache = tmp_path / "cache"
    cold = _run_program(tmp_path, cache, "0")
    assert not cold["loaded"], cold
    # every role the program runs was compiled by the first process, not left for later: the split pair,
    # the tape count, the gather (which does smooth's reverse work: transforms/fold.py), the fused reverse
    roles = {name.split(".", 1)[1] for name in cold["compiled"]}
    for role in ("two_locals_augmented_primal", "two_locals_rev", "two_locals_count", "two_locals_grad",
                 "smooth_augmented_primal", "smooth_gather"):
        assert any(r.startswith(role + "_") for r in roles), (role, roles)
    # seed 3 iterates the set {a, b} of restored locals in the other order than seed 0 (before docs/caching.md's
    # fix, the split pair of two_locals was compiled again here)
    warm = _run_program(tmp_path, cache, "3")
    assert warm["compiled"] == [], f"a warm cache compiled {warm['compiled']}"
    assert sorted(warm["loaded"]) == sorted(cold["compiled"])
    assert warm["gradients"] == cold["gradients"]
