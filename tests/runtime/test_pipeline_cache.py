"""The pipeline's output on disk (gradkern/pipeline_cache.py, docs/caching.md "The pipeline's output"): its key
changes with every input that changes the output, a damaged entry is healed, and a warm process's first call
runs no pipeline. The interpreter backend keeps these cheap: the pipeline runs in full, nothing is compiled
(one small CPU-backend case checks that a warm process also compiles nothing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import gradkern as gk
from gradkern import pipeline, pipeline_cache
from gradkern.ir.types import SCALARS, Array
from gradkern.runtime.cache import cache_dir

SCALE = 3.0


@gk.kernel
def scaled(x, y):
    i = gk.tid()
    y[i] = SCALE * x[i] * x[i]


@gk.kernel
def stencil(a: float, x, y):
    i = gk.tid()
    if i > 0 and i < x.shape[0] - 1:
        y[i] = a * (x[i - 1] - 2.0 * x[i] + x[i + 1]) + gk.sin(x[i])


def _args(kernel, n=8):
    """The arguments runtime/specialize.py hands the primal pipeline for a float64 launch of `kernel`."""
    from gradkern.runtime.binding import bind
    x, y = np.linspace(0.5, 1.5, n), np.zeros(n)
    values = (2.0, x, y) if kernel is stencil else (x, y)
    b = bind(kernel.ir, n, values, "interp", False)
    return (kernel.ir, b.type_map(kernel.ir), len(b.dim), b.backend, frozenset(b.strided), b.aliases)


def test_the_key_changes_with_each_input(monkeypatch):
    base = _args(stencil)
    k = pipeline_cache.key("primal", base)
    assert k is not None and k == pipeline_cache.key("primal", _args(stencil))
    # the kernel (another body), the signature, the mode, the backend, the launch rank, the aliases
    assert pipeline_cache.key("primal", _args(scaled)) != k
    f32 = dict(base[1], x=Array(SCALARS["float32"], 1))
    assert pipeline_cache.key("primal", (base[0], f32, *base[2:])) != k
    assert pipeline_cache.key("forward", base) != k
    assert pipeline_cache.key("primal", (*base[:3], "cpu", *base[4:])) != k
    assert pipeline_cache.key("primal", (base[0], base[1], 2, *base[3:])) != k
    assert pipeline_cache.key("primal", (*base[:5], (("y", "x"),))) != k
    # an option read from the environment, and one a module holds
    monkeypatch.setenv("GRADKERN_BOUNDSCHECK", "1")
    assert pipeline_cache.key("primal", base) not in (k, None)
    monkeypatch.delenv("GRADKERN_BOUNDSCHECK")
    monkeypatch.setattr(pipeline, "FOLD", not pipeline.FOLD)
    assert pipeline_cache.key("primal", base) not in (k, None)
    monkeypatch.undo()
    assert pipeline_cache.key("primal", base) == k
    # a replaced function or a rule changed in place: no key (the disk is bypassed)
    monkeypatch.setattr(pipeline, "fuse_loops", lambda k: (k, ()))
    assert pipeline_cache.key("primal", base) is None
    monkeypatch.undo()
    from gradkern.backends import numba_loops  # a printer (recorded at its backend's first key)
    monkeypatch.setattr(numba_loops, "LoopPrinter", type("LoopPrinter", (), {}))
    assert pipeline_cache.key("primal", (*base[:3], "cpu", *base[4:])) is None
    monkeypatch.undo()
    from gradkern.ir.ops import Op
    from gradkern.transforms.derivatives import DERIVATIVES
    monkeypatch.setitem(DERIVATIVES, Op.SIN, lambda x: (x,))
    assert pipeline_cache.key("primal", base) is None
    monkeypatch.undo()
    assert pipeline_cache.key("primal", base) == k
    # a dump is written by the stages: no key
    monkeypatch.setenv("GRADKERN_DUMP", "/nonexistent")
    assert pipeline_cache.key("primal", base) is None


def test_a_global_the_kernel_reads_is_in_the_key(monkeypatch):
    before = pipeline_cache.key("primal", _args(scaled))
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 4.0)
    again = gk.kernel(scaled.fn)  # decorated anew: the frontend reads the global as it is now
    assert pipeline_cache.key("primal", (again.ir, *_args(scaled)[1:])) != before


def test_gradkerns_source_is_in_the_key(tmp_path):
    tree = tmp_path / "gradkern"
    (tree / "transforms").mkdir(parents=True)
    rule = tree / "transforms" / "derivatives.py"
    rule.write_text("SIN = 'cos'\n")
    first = pipeline_cache.tree_digest(tree)
    rule.write_text("SIN = '-cos'\n")  # another size
    assert pipeline_cache.tree_digest(tree) != first
    os.utime(rule, ns=(1, 1))  # the same size, another time of change
    second = pipeline_cache.tree_digest(tree)
    rule.write_text("SIN = '+cos'\n")
    os.utime(rule, ns=(2, 2))
    assert pipeline_cache.tree_digest(tree) != second


def _grad(kernel=stencil, backend="interp"):
    x, y = np.linspace(0.5, 1.5, 8), np.zeros(8)
    dx, dy = np.zeros(8), np.linspace(1.0, 2.0, 8)
    out = gk.autodiff(kernel, gk.Active(2.0), gk.Duplicated(x, dx), gk.Duplicated(y, dy), dim=8, backend=backend)
    return dx, out


def _entries() -> list[Path]:
    return sorted((cache_dir() / "specs").glob("*.spec"))


DAMAGE = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:100]),
    "one bit flipped": lambda p: p.write_bytes(bytes([p.read_bytes()[0] ^ 1]) + p.read_bytes()[1:]),
    "emptied": lambda p: p.write_bytes(b""),
    "a directory": lambda p: (p.unlink(), p.mkdir()),
}


@pytest.mark.parametrize("damage", [*DAMAGE, "another key's entry"])
def test_a_damaged_entry_is_rebuilt_with_one_warning(tmp_path, monkeypatch, damage):
    monkeypatch.setenv("GRADKERN_CACHE_DIR", str(tmp_path))
    stencil._specs.clear()
    want = _grad()
    entry, = [p for p in _entries() if p.stat().st_size > 0]
    if damage == "another key's entry":  # an entry copied over another's: whole, but not this key's
        scaled._specs.clear()
        gk.launch(scaled, 8, np.ones(8), np.zeros(8), backend="interp")
        other, = [p for p in _entries() if p != entry]
        entry.write_bytes(other.read_bytes())
    else:
        DAMAGE[damage](entry)
    stencil._specs.clear()
    runs = dict(pipeline_cache.runs)
    with pytest.warns(gk.CacheWarning, match=str(entry.name)) as caught:
        got = _grad()
    assert len([w for w in caught if issubclass(w.category, gk.CacheWarning)]) == 1
    assert pipeline_cache.runs.get("reverse", 0) == runs.get("reverse", 0) + 1
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1] == want[1]
    stencil._specs.clear()  # healed: the next specialisation loads it, silently
    loads = dict(pipeline_cache.loads)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gk.CacheWarning)
        again = _grad()
    assert pipeline_cache.loads.get("reverse", 0) == loads.get("reverse", 0) + 1
    np.testing.assert_array_equal(again[0], want[0])


_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    sys.path.insert(0, {tests!r})
    import gradkern as gk
    from gradkern import pipeline_cache
    from gradkern.backends import numba_cache
    from runtime.test_pipeline_cache import stencil, _grad
    backend = sys.argv[1]
    x, y = np.linspace(0.5, 1.5, 8), np.zeros(8)
    gk.launch(stencil, 8, 2.0, x, y, backend=backend)
    dx, da = _grad(stencil, backend)
    t = np.zeros(8)
    gk.autodiff(stencil, gk.Duplicated(2.0, 1.0), gk.Duplicated(x, np.ones(8)), gk.Duplicated(np.zeros(8), t),
                dim=8, backend=backend, mode=gk.Forward)
    print(json.dumps(dict(runs=pipeline_cache.runs, loads=pipeline_cache.loads, compiled=numba_cache.compiled,
                          out=[y.tolist(), dx.tolist(), float(da[0]), t.tolist()])))
""")


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_a_warm_process_runs_no_pipeline(tmp_path, backend):
    """Primal, reverse and forward in a fresh process on the cache a first process wrote (another hash seed):
    every specialisation loaded, none built, nothing compiled, the same numbers bit for bit."""
    tests = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "GRADKERN_CACHE_DIR": str(tmp_path), "GRADKERN_COMPILE_WORKERS": "0"}

    def run(seed):
        out = subprocess.run([sys.executable, "-c", _CHILD.format(tests=tests), backend], capture_output=True,
                             text=True, env={**env, "PYTHONHASHSEED": str(seed)}, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    cold, warm = run(1), run(2)
    assert cold["runs"] == {"primal": 1, "reverse": 1, "forward": 1}
    assert warm["runs"] == {} and warm["loads"] == {"primal": 1, "reverse": 1, "forward": 1}
    assert warm["compiled"] == []
    assert warm["out"] == cold["out"]


def test_off_and_dumps_run_the_pipeline(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADKERN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("GRADKERN_DUMP", str(tmp_path / "dump"))
    scaled._specs.clear()
    gk.launch(scaled, 8, np.ones(8), np.zeros(8), backend="interp")
    assert not _entries() and any((tmp_path / "dump").iterdir())
    monkeypatch.delenv("GRADKERN_DUMP")
    monkeypatch.setattr(pipeline_cache, "ENABLED", False)
    scaled._specs.clear()
    gk.launch(scaled, 8, np.ones(8), np.zeros(8), backend="interp")
    assert not _entries()


def test_a_loaded_specialisation_builds_what_it_left_out(tmp_path, monkeypatch):
    """The bounds-checked variant (asked where the bounds proof does not decide a launch) and a reverse role not
    yet printed come from one full pipeline run, the same code as a process that never loaded."""
    from gradkern.runtime.binding import bind
    from gradkern.runtime.specialize import primal_specialization, reverse_specialization
    monkeypatch.setenv("GRADKERN_CACHE_DIR", str(tmp_path))
    x = np.linspace(0.5, 1.5, 8)
    b = bind(stencil.ir, 8, (2.0, x, np.zeros(8)), "cpu", False)
    shadows = {"x": (np.zeros(8),), "y": (np.ones(8),)}

    def specs():
        stencil._specs.clear()
        return primal_specialization(stencil, b), reverse_specialization(stencil, b, shadows, ("a",))
    built, built_rs = specs()
    assert built.bounds is not None and built_rs.fused.source  # the fused role printed: stored
    loads = dict(pipeline_cache.loads)
    loaded, loaded_rs = specs()
    assert pipeline_cache.loads.get("primal", 0) == loads.get("primal", 0) + 1
    assert pipeline_cache.loads.get("reverse", 0) == loads.get("reverse", 0) + 1
    assert loaded is not built and loaded.source == built.source
    assert loaded.bounds_checked().source == built.bounds_checked().source
    assert loaded.bounds_checked().bounds_sites == built.bounds_checked().bounds_sites
    assert loaded_rs.fused.source == built_rs.fused.source
    assert loaded_rs.augmented_primal.source == built_rs.augmented_primal.source  # not stored: built lazily
    runs = dict(pipeline_cache.runs)
    _, again = specs()  # stored with the role it printed
    assert again.made.keys() >= {"fused", "augmented_primal"} and pipeline_cache.runs == runs
