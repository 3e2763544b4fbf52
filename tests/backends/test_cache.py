"""The on-disk cache works across processes: the first process compiles with
Numba (cache miss) and writes the generated module and Numba's index/data files
under $GRADKERN_CACHE_DIR; a second process loads the compiled code from there
(cache hit) and gives the same, correct result. Editing the kernel must not
load stale code."""

from __future__ import annotations

import concurrent.futures
import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

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
dtype = sys.argv[3] if len(sys.argv) > 3 else "float64"
x = np.arange(1.0, 17.0, dtype=dtype)
y = np.full(16, -7.0, dtype=dtype)
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


def _run(tmp: Path, cache: Path, a: float, b: float, dtype: str = "float64") -> dict:
    env = dict(os.environ)
    env["GRADKERN_CACHE_DIR"] = str(cache)
    env["GRADKERN_SERIAL_THREADS"] = "0"  # the parallel entry, whose dispatcher the runner's counters read
    env.pop("GRADKERN_DUMP", None)
    env.pop("GRADKERN_BOUNDSCHECK", None)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp), *filter(None, [env.get("PYTHONPATH")])])
    proc = subprocess.run([sys.executable, str(tmp / "runner.py"), repr(a), repr(b), dtype], cwd=tmp, env=env,
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


def test_processes_compiling_the_same_kernel_at_once_share_a_fresh_cache(tmp_path):
    """Two processes per signature (float64, float32) compile one kernel into an empty
    cache at the same moment: all succeed, and the cache they leave behind loads
    each signature's own code (a lost index entry may cost one more compile)."""
    src = tmp_path / "src"
    cache = tmp_path / "cache"
    src.mkdir()
    (src / "cachemod.py").write_text(textwrap.dedent(KERNEL_MODULE))
    (src / "runner.py").write_text(textwrap.dedent(RUNNER))
    dtypes = ["float64", "float32", "float64", "float32"]
    with concurrent.futures.ThreadPoolExecutor(len(dtypes)) as pool:
        runs = list(pool.map(lambda dtype: _run(src, cache, 2.5, 0.75, dtype), dtypes))
    for run in runs:
        assert run["y"] == run["expected"], run
    assert len(list(_numba_dir(cache).glob("gradkern_gen_*.py"))) == 1
    for dtype in ("float64", "float32"):
        again = _run(src, cache, -1.25, 3.0, dtype)
        assert again["y"] == again["expected"], again
        warm = _run(src, cache, 0.5, -2.0, dtype)
        assert warm["y"] == warm["expected"], warm
        assert warm["hits"] and not warm["misses"], (dtype, warm)


def test_a_save_racing_another_never_indexes_the_other_signatures_code(tmp_path):
    """Numba numbered data files by the index it had read: a second process that read
    the index before this one wrote it, and saved between this one's index and data
    writes, left the index naming its signature at this one's code. Played out in one
    process with two views of one cache entry."""
    from gradkern.backends.numba_cache import _HealingCacheFile

    def view():
        return _HealingCacheFile(str(tmp_path), "mod.f-3.py311", ("stamp", 1))

    first, second = view(), view()
    key_a, key_b = (("float64",), "target"), (("float32",), "target")
    second._load_index = lambda: {}  # what it read before the first process saved
    numba_save_data = first._save_data

    def save_data_after_the_other_saves(name, data):
        second.save(key_b, "code for float32")
        numba_save_data(name, data)

    first._save_data = save_data_after_the_other_saves
    first.save(key_a, "code for float64")
    fresh = view()
    assert fresh.load(key_a) in (None, "code for float64")
    assert fresh.load(key_b) in (None, "code for float32")
    assert fresh.load(key_a) or fresh.load(key_b)


def test_a_data_file_holding_another_signatures_code_is_damage_not_loaded(tmp_path):
    """Numba loaded whatever a data file held for the signature its index named: the float32 entry's file
    copied over the float64 one's (a valid entry of another signature) was rebuilt as the float64 code and the
    launch failed unboxing its arrays (a TypeError, or wrong values where the layouts agree). The file names
    and holds its key (numba_cache._HealingCacheFile.load): another's is damage, discarded and recompiled."""
    src = tmp_path / "src"
    cache = tmp_path / "cache"
    src.mkdir()
    (src / "cachemod.py").write_text(textwrap.dedent(KERNEL_MODULE))
    (src / "runner.py").write_text(textwrap.dedent(RUNNER))
    for dtype in ("float64", "float32"):
        assert _run(src, cache, 2.5, 0.75, dtype)["misses"]
    first, second = sorted((_numba_dir(cache) / "__pycache__").glob("*.nbc"))
    data = first.read_bytes()
    first.write_bytes(second.read_bytes())
    second.write_bytes(data)
    for dtype in ("float64", "float32"):
        run = _run(src, cache, 2.5, 0.75, dtype)
        assert run["y"] == run["expected"], (dtype, run)
    for dtype in ("float64", "float32"):
        warm = _run(src, cache, 0.5, -2.0, dtype)
        assert warm["y"] == warm["expected"] and warm["hits"] and not warm["misses"], (dtype, warm)


# ---- a cache that heals -------------------------------------------------------------------------------
# Each damage kind gets its own kernel (its own cache entry), so one process heals all of them.

def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garbage(path: Path) -> None:
    path.write_bytes(random.Random(path.name).randbytes(path.stat().st_size))


def _directory(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "stray").write_text("a non-empty directory")


def _flip(path: Path) -> None:
    """One bit changed in the middle of the file, which keeps its size and (mostly) still parses: a disk that
    flips bits. Numba loaded such a data file as code (docs/caching.md#checksums)."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def _loop(path: Path) -> None:
    """A symbolic link to itself where the file goes: opening it fails with ELOOP."""
    path.unlink()
    path.symlink_to(path.name)


DAMAGE = {  # kind -> (which file of the entry, what is done to it)
    "truncated_nbc": ("nbc", _truncate),
    "empty_nbc": ("nbc", lambda p: p.write_bytes(b"")),
    "garbage_nbc": ("nbc", _garbage),
    "directory_nbc": ("nbc", _directory),
    "truncated_nbi": ("nbi", _truncate),
    "empty_nbi": ("nbi", lambda p: p.write_bytes(b"")),
    "garbage_nbi": ("nbi", _garbage),
    "directory_nbi": ("nbi", _directory),
    "non_utf8_py": ("py", lambda p: p.write_bytes(b"\xff\xfe\x00 not UTF-8 \xc3\x28\n")),
    "directory_py": ("py", _directory),
    "flipped_nbc": ("nbc", _flip),
    "flipped_nbi": ("nbi", _flip),
    "looped_nbc": ("nbc", _loop),
    "looped_nbi": ("nbi", _loop),
    "flipped_py": ("py", _flip),
    "empty_py": ("py", lambda p: p.write_bytes(b"")),
    "looped_py": ("py", _loop),
}

HEAL_MODULE = "import gradkern as gk\n" + "".join(f'''

@gk.kernel
def {kind}(a, x, y, b):
    i = gk.tid()
    y[i] = a * x[i] + b
''' for kind in DAMAGE)

HEAL_RUNNER = '''
import json
import os
import sys
import warnings

import numpy as np

import gradkern as gk
from gradkern.backends.numba_cpu import _serial_twin
from gradkern.runtime.execute import entry_of

import healmod

parallel = os.environ["GRADKERN_SERIAL_THREADS"] == "0"
report = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for kind in sys.argv[1:]:
        x = np.arange(1.0, 17.0)
        y = np.full(16, -7.0)
        kernel = getattr(healmod, kind)
        gk.launch(kernel, x.size, 2.5, x, y, 0.75)
        (spec,) = kernel._specs.values()
        entry = entry_of(spec)  # the parallel entry; a launch of 16 threads otherwise runs its serial twin
        entry = entry if parallel else _serial_twin(entry, spec.code.info.serial)
        report[kind] = {
            "correct": y.tolist() == (2.5 * x + 0.75).tolist(),
            "hits": sum(entry.stats.cache_hits.values()),
            "misses": sum(entry.stats.cache_misses.values()),
            "source": entry.py_func.__code__.co_filename,
        }
warned = [[w.category.__name__, str(w.message), w.filename] for w in caught]
print(json.dumps({"kernels": report, "warnings": warned}))
'''


def _heal_run(tmp: Path, cache: Path, kinds, parallel: bool = False) -> dict:
    """A process launching each of `kinds`' kernels: their parallel entries (`parallel`) or, as a launch of 16
    threads does by default, their serial twins, whose cache entries are files of the same kind, written and
    healed by the same code (backends/numba_cache.py), in a third of a parallel entry's compile time (0.08 s
    of CPU against 0.26 s for these kernels, session 52): most of these tests' processes run the twins, and
    the quick subset (ONE_OF_EACH) the parallel entries, so both kinds of entry are healed in CI."""
    env = dict(os.environ)
    env["GRADKERN_CACHE_DIR"] = str(cache)
    env["GRADKERN_SERIAL_THREADS"] = "0" if parallel else "256"  # which entry the runner's counters read
    env.pop("GRADKERN_DUMP", None)
    env.pop("GRADKERN_BOUNDSCHECK", None)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp), *filter(None, [env.get("PYTHONPATH")])])
    proc = subprocess.run([sys.executable, str(tmp / "heal_runner.py"), *kinds], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"subprocess failed:\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for kind, k in result["kernels"].items():
        assert k["correct"], (kind, result)
    return result


def _heal_setup(tmp_path: Path) -> tuple[Path, Path]:
    src = tmp_path / "src"
    src.mkdir()
    (src / "healmod.py").write_text(HEAL_MODULE)
    (src / "heal_runner.py").write_text(textwrap.dedent(HEAL_RUNNER))
    return src, tmp_path / "cache"


def _entry_files(source: str) -> dict[str, Path]:
    """The generated module of one kernel and Numba's index and (only) data file beside it."""
    py = Path(source)
    pycache = py.parent / "__pycache__"
    (nbi,) = pycache.glob(f"{py.stem}.*.nbi")
    (nbc,) = pycache.glob(f"{py.stem}.*.nbc")
    return {"py": py, "nbi": nbi, "nbc": nbc}


def _cache_warnings(result: dict) -> list[str]:
    """The messages of the CacheWarnings a run gave (and no other warning), each at the user's line."""
    others = [w for w in result["warnings"] if w[0] != "CacheWarning"]
    assert not others, others
    for _, message, filename in result["warnings"]:
        assert Path(filename).name == "heal_runner.py", (filename, message)
    return [message for _, message, _ in result["warnings"]]


def _assert_warm(result: dict) -> None:
    assert not result["warnings"], result["warnings"]
    for kind, k in result["kernels"].items():
        assert (k["hits"], k["misses"]) == (1, 0), (kind, k)


# one damage of each file (the quick subset), then all the others
ONE_OF_EACH = ["truncated_nbc", "garbage_nbi", "non_utf8_py", "flipped_nbc"]


@pytest.mark.parametrize("kinds", [
    pytest.param(ONE_OF_EACH, id="one-of-each"),
    pytest.param([k for k in DAMAGE if k not in ONE_OF_EACH], id="the-others", marks=pytest.mark.slow),
])
def test_damaged_entries_are_discarded_rebuilt_and_warm_again(tmp_path, kinds):
    src, cache = _heal_setup(tmp_path)
    parallel = kinds == ONE_OF_EACH
    first = _heal_run(src, cache, kinds, parallel)
    assert not first["warnings"]
    damaged = {}
    for kind in kinds:
        which, damage = DAMAGE[kind]
        path = _entry_files(first["kernels"][kind]["source"])[which]
        damage(path)
        damaged[kind] = path

    healed = _heal_run(src, cache, kinds, parallel)
    messages = _cache_warnings(healed)
    for kind, path in damaged.items():
        # one warning per damaged entry, naming the file
        assert sum(str(path) in m for m in messages) == 1, (kind, messages)
        k = healed["kernels"][kind]
        # a damaged source is rewritten and Numba's index, made from the same text, still loads
        assert (k["hits"], k["misses"]) == ((1, 0) if DAMAGE[kind][0] == "py" else (0, 1)), (kind, k)
        assert _entry_files(k["source"])[DAMAGE[kind][0]].is_file()
    assert len(messages) == len(kinds), messages

    _assert_warm(_heal_run(src, cache, kinds, parallel))


def test_a_file_where_a_cache_folder_goes_is_replaced(tmp_path):
    src, cache = _heal_setup(tmp_path)
    kinds = ["truncated_nbc"]
    numba_dir = _numba_dir(cache)
    numba_dir.parent.mkdir(parents=True)
    numba_dir.write_text("a file where the folder of generated modules goes")
    first = _heal_run(src, cache, kinds)
    (message,) = _cache_warnings(first)
    assert f"{numba_dir} was damaged" in message
    assert first["kernels"]["truncated_nbc"]["misses"] == 1

    shutil.rmtree(numba_dir / "__pycache__")
    (numba_dir / "__pycache__").write_text("a file where Numba's folder goes")
    second = _heal_run(src, cache, kinds)
    (message,) = _cache_warnings(second)
    assert f"{numba_dir / '__pycache__'} was damaged" in message
    assert second["kernels"]["truncated_nbc"]["misses"] == 1

    _assert_warm(_heal_run(src, cache, kinds))


@pytest.mark.parametrize("where", ["existing file", "under a file", "read-only directory"])
def test_unusable_cache_directory_falls_back_to_memory(tmp_path, where):
    src, _ = _heal_setup(tmp_path)
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    if where == "existing file":
        cache = blocker
    elif where == "under a file":
        cache = blocker / "cache"
    else:
        cache = tmp_path / "read-only"
        cache.mkdir(mode=0o555)
    kinds = ["truncated_nbc", "empty_nbc"]  # two kernels, one warning
    result = _heal_run(src, cache, kinds)
    if where == "read-only directory" and os.access(cache, os.W_OK):
        # root writes into read-only directories: the directory is usable, so it is used, silently
        assert _cache_warnings(result) == []
        assert any(_numba_dir(cache).glob("*.py"))
        return
    (message,) = _cache_warnings(result)
    assert str(_numba_dir(cache)) in message and "kept in memory" in message
    for kind in kinds:
        assert result["kernels"][kind]["misses"] == 1
    assert blocker.read_text() == "not a directory"
    if where == "read-only directory":
        assert not any(cache.iterdir())


@pytest.mark.slow
def test_processes_heal_a_shared_cache_at_once(tmp_path):
    src, cache = _heal_setup(tmp_path)
    kinds = list(DAMAGE)
    first = _heal_run(src, cache, kinds)
    for kind, (which, damage) in DAMAGE.items():
        damage(_entry_files(first["kernels"][kind]["source"])[which])
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        runs = list(pool.map(lambda _: _heal_run(src, cache, kinds), range(3)))
    for run in runs:
        _cache_warnings(run)  # each heals what it finds damaged; results are checked in _heal_run
    _assert_warm(_heal_run(src, cache, kinds))
