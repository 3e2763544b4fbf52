"""Compiling ahead in worker processes (runtime/compile_pool.py, docs/compile-time.md finding 7): what a
worker compiles the main process loads from the disk cache, the gradient is the one compiled in-process
bit for bit, a warm cache submits nothing, and a worker that never starts costs nothing but itself."""

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parents[1] / "support"


def _run(cache: Path, mode: str, workers: str, seed: str = "0") -> dict:
    env = dict(os.environ, GRADKERN_CACHE_DIR=str(cache), GRADKERN_COMPILE_WORKERS=workers, PYTHONHASHSEED=seed)
    proc = subprocess.run([sys.executable, str(HERE / "compile_pool_runner.py"), mode], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"subprocess failed:\n{proc.stderr}"
    return json.loads(proc.stdout)


def _reverse_functions(names: list[str]) -> set[str]:
    return {n.split(".")[1] for n in names if n.endswith(("_rev_1d", "_gather_1d"))}


def test_worker_compiles_the_reverse_and_the_gradient_is_the_same(tmp_path):
    pooled = _run(tmp_path / "pooled", "wait", "1")
    raced = _run(tmp_path / "raced", "plain", "1")  # the sweep takes pending jobs while the worker starts
    alone = _run(tmp_path / "alone", "plain", "0")
    stats = pooled["stats"]
    assert pooled["idle"] is True
    assert raced["stats"]["submitted"] == 2 and raced["stats"]["failed"] == 0
    # the program's two reverse functions (diffuse's gather, which does its reverse's work: transforms/fold.py,
    # and react's reverse), each submitted once (three steps each)
    assert stats["submitted"] == 2 and stats["compiled"] == 2 and stats["failed"] == 0 and stats["here"] == 0
    assert _reverse_functions(pooled["loaded"]) == {"diffuse_gather_1d", "react_rev_1d"}
    assert not _reverse_functions(pooled["compiled"])  # the main process compiled none of them
    assert alone["stats"]["submitted"] == 0
    assert _reverse_functions(alone["compiled"]) == {"diffuse_gather_1d", "react_rev_1d"}
    for name in ("du", "dv", "dc", "u"):
        assert pooled[name] == alone[name] == raced[name], name  # the same machine code: bit for bit


def test_a_warm_cache_submits_nothing(tmp_path):
    _run(tmp_path / "c", "plain", "1", seed="1")
    warm = _run(tmp_path / "c", "plain", "1", seed="2")
    assert warm["stats"]["submitted"] == 0
    assert warm["compiled"] == []


def test_a_worker_that_never_starts_leaves_the_work_to_the_launch(tmp_path):
    broken = _run(tmp_path / "broken", "broken", "1")
    alone = _run(tmp_path / "alone", "plain", "0")
    stats = broken["stats"]
    assert stats["submitted"] == 2 and stats["compiled"] == 0
    assert stats["here"] == 2  # the sweep took each pending job itself
    for name in ("du", "dv", "dc", "u"):
        assert broken[name] == alone[name], name
