"""The on-disk cache works across processes: the first process compiles with
Numba (cache miss) and writes the generated module and Numba's index/data files
under $GRADKERN_CACHE_DIR; a second process loads the compiled code from there
(cache hit) and gives the same, correct result. Editing the kernel must not
load stale code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import gradkern as gk

KERNEL_MODULE = '''
import gradkern as gk


@gk.kernel
def axpb(a, x, y, b):
    i = gk.tid()
    y[i] = a * x[i] + b
'''

RUNNER = '''
import json
import sys

import numpy as np

import gradkern as gk
from gradkern.runtime.cache import cache_dir
from gradkern.runtime.execute import entry_of

import cachemod

a, b = float(sys.argv[1]), float(sys.argv[2])
x = np.arange(1.0, 17.0)
y = np.full(16, -7.0)
gk.launch(cachemod.axpb, x.size, a, x, y, b)
hits, misses = [], []
for spec in cachemod.axpb._specs.values():
    stats = entry_of(spec).stats
    hits += [str(sig) for sig, n in stats.cache_hits.items() if n]
    misses += [str(sig) for sig, n in stats.cache_misses.items() if n]
print(json.dumps({
    "hits": hits,
    "misses": misses,
    "y": y.tolist(),
    "expected": (a * x + b).tolist(),
    "cache_dir": str(cache_dir()),
    "version": gk.__version__,
}))
'''


def _run(tmp: Path, cache: Path, a: float, b: float) -> dict:
    env = dict(os.environ)
    env["GRADKERN_CACHE_DIR"] = str(cache)
    env.pop("GRADKERN_DUMP", None)
    env.pop("GRADKERN_BOUNDSCHECK", None)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp), *filter(None, [env.get("PYTHONPATH")])])
    proc = subprocess.run([sys.executable, str(tmp / "runner.py"), repr(a), repr(b)], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"subprocess failed:\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _numba_dir(cache: Path) -> Path:
    return cache / f"v{gk.__version__}" / "numba"


def test_second_process_loads_compiled_code_from_disk(tmp_path):
    src = tmp_path / "src"
    cache = tmp_path / "cache"
    src.mkdir()
    (src / "cachemod.py").write_text(textwrap.dedent(KERNEL_MODULE))
    (src / "runner.py").write_text(textwrap.dedent(RUNNER))

    first = _run(src, cache, 2.5, 0.75)
    assert first["cache_dir"] == str(cache / f"v{gk.__version__}")
    assert first["y"] == first["expected"]
    assert first["misses"], f"first process should compile (cache miss): {first}"
    assert not first["hits"], f"first process cannot hit an empty cache: {first}"

    numba_dir = _numba_dir(cache)
    generated = sorted(numba_dir.glob("gradkern_gen_*.py"))
    assert len(generated) == 1, generated
    pycache = numba_dir / "__pycache__"
    assert list(pycache.glob("*.nbi")), f"no Numba index in {pycache}"
    assert list(pycache.glob("*.nbc")), f"no Numba data in {pycache}"
    stamp = generated[0].stat().st_mtime_ns
    cached_files = sorted(p.name for p in pycache.iterdir())

    second = _run(src, cache, 2.5, 0.75)
    assert second["y"] == second["expected"] == first["expected"]
    assert second["hits"], f"second process should load from the cache: {second}"
    assert not second["misses"], f"second process should not compile again: {second}"
    # the generated module was not rewritten (that would invalidate Numba's index) and nothing new was compiled
    assert generated[0].stat().st_mtime_ns == stamp
    assert sorted(p.name for p in pycache.iterdir()) == cached_files

    # different scalar values are the same signature: still a hit, and the new values are used
    third = _run(src, cache, -1.25, 3.0)
    assert third["y"] == third["expected"]
    assert third["hits"] and not third["misses"], third


def test_edited_kernel_is_recompiled_not_loaded_stale(tmp_path):
    src = tmp_path / "src"
    cache = tmp_path / "cache"
    src.mkdir()
    (src / "runner.py").write_text(textwrap.dedent(RUNNER))
    (src / "cachemod.py").write_text(textwrap.dedent(KERNEL_MODULE))
    first = _run(src, cache, 2.0, 1.0)
    assert first["misses"] and first["y"] == first["expected"]

    # the same kernel name and signature, a different body: must compile afresh
    (src / "cachemod.py").write_text(textwrap.dedent(KERNEL_MODULE).replace("a * x[i] + b", "a * x[i] - b"))
    second = _run(src, cache, 2.0, 1.0)
    assert second["misses"] and not second["hits"], second
    x = [float(v) for v in range(1, 17)]
    assert second["y"] == [2.0 * v - 1.0 for v in x]
    assert len(list(_numba_dir(cache).glob("gradkern_gen_*.py"))) == 2
