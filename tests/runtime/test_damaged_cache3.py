"""Damaged caches, round three (docs/caching.md#damaged-entries): what stands where a cache file goes that is no
file at all. A FIFO blocked the first read of it forever (the process hung at its first launch), a link to
/dev/zero was read until memory ran out, a sparse file of terabytes would have been too; now every cache file is
read through `cache_files.read_file`, which reads regular files only (and none past `MAX_BYTES`), so each of these
is damage: discarded and rebuilt with one `CacheWarning` naming the file, the launch correct. Also: an index whose
version field was edited (another version's: a silent miss), a data file removed while its index stays (a silent
miss), and a cache directory that is a symbolic link to itself or to nowhere (kept in memory, one warning).

Not probed here: a cache directory without write permission is tests/backends/test_cache.py's (and is skipped
there for root, which writes anyway); a full disk cannot be made without root's mounts (hostcuda's answer to it is
tests/backends/test_hostcuda.py's); two processes compiling or healing one entry at once are test_cache.py's."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import gradkern as gk
from gradkern.backends.cache_files import MAX_BYTES, read_file
from gradkern.backends.hostcuda import compiler


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def _dev_null(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/null")


def _sparse(path: Path) -> None:
    """A file of MAX_BYTES + 1 bytes that takes no disk: its read would allocate them all."""
    with open(path, "r+b") as f:
        f.truncate(MAX_BYTES + 1)


def _other_version(path: Path) -> None:
    """The index's version field (a pickled string before its sealed payload) edited to another version's."""
    data = path.read_bytes()
    version = pickle.loads(data)
    head = len(pickle.dumps(version, protocol=-1))
    assert pickle.dumps(version, protocol=-1) == data[:head]
    path.write_bytes(pickle.dumps("0.0.1 gradkern-nbc-0", protocol=-1) + data[head:])


DAMAGE = {  # kind -> (which file of the entry, what is done to it, whether it warns)
    "fifo_nbc": ("nbc", _fifo, True),
    "fifo_nbi": ("nbi", _fifo, True),
    "fifo_py": ("py", _fifo, True),
    "dev_zero_nbc": ("nbc", _dev_zero, True),
    "dev_zero_nbi": ("nbi", _dev_zero, True),
    "dev_null_py": ("py", _dev_null, True),
    "sparse_nbc": ("nbc", _sparse, True),
    "other_version_nbi": ("nbi", _other_version, False),  # another version's index: a plain miss
    "removed_nbc": ("nbc", Path.unlink, False),  # removed after its index was written: a plain miss
}

MODULE = "import gradkern as gk\n" + "".join(f'''

@gk.kernel
def {kind}(a, x, y, b):
    i = gk.tid()
    y[i] = a * x[i] + b
''' for kind in [*DAMAGE, "plain"])

RUNNER = '''
import json
import sys
import warnings

import numpy as np

import gradkern as gk
from gradkern.runtime.execute import entry_of

import damagedmod

report = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for kind in sys.argv[1:]:
        x, y = np.arange(1.0, 17.0), np.full(16, -7.0)
        kernel = getattr(damagedmod, kind)
        gk.launch(kernel, x.size, 2.5, x, y, 0.75)
        (spec,) = kernel._specs.values()
        entry = entry_of(spec)
        report[kind] = {"correct": y.tolist() == (2.5 * x + 0.75).tolist(),
                        "hits": sum(entry.stats.cache_hits.values()),
                        "misses": sum(entry.stats.cache_misses.values()),
                        "source": entry.py_func.__code__.co_filename}
print(json.dumps({"kernels": report, "warnings": [[w.category.__name__, str(w.message)] for w in caught]}))
'''


def _run(src: Path, cache: Path, kinds) -> dict:
    env = dict(os.environ)
    env["GRADKERN_CACHE_DIR"] = str(cache)
    env["GRADKERN_SERIAL_THREADS"] = "0"  # the parallel entry, whose dispatcher the runner's counters read
    for name in ("GRADKERN_DUMP", "GRADKERN_BOUNDSCHECK", "GRADKERN_BACKEND"):
        env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [env.get("PYTHONPATH")])])
    # a hang is the failure a FIFO caused: the timeout turns it into one
    proc = subprocess.run([sys.executable, str(src / "runner.py"), *kinds], cwd=src, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"subprocess failed:\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for kind, k in result["kernels"].items():
        assert k["correct"], (kind, result)
    others = [w for w in result["warnings"] if w[0] != "CacheWarning"]
    assert not others, others
    return result


def _setup(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "damagedmod.py").write_text(MODULE)
    (src / "runner.py").write_text(textwrap.dedent(RUNNER))
    return src


def _entry_files(source: str) -> dict[str, Path]:
    py = Path(source)
    pycache = py.parent / "__pycache__"
    (nbi,) = pycache.glob(f"{py.stem}.*.nbi")
    (nbc,) = pycache.glob(f"{py.stem}.*.nbc")
    return {"py": py, "nbi": nbi, "nbc": nbc}


def test_what_is_no_regular_file_is_damage_never_read(tmp_path):
    src, cache = _setup(tmp_path), tmp_path / "cache"
    kinds = list(DAMAGE)
    first = _run(src, cache, kinds)
    assert not first["warnings"]
    damaged = {}
    for kind, (which, damage, _) in DAMAGE.items():
        damaged[kind] = _entry_files(first["kernels"][kind]["source"])[which]
        damage(damaged[kind])

    healed = _run(src, cache, kinds)
    messages = [m for _, m in healed["warnings"]]
    for kind, (which, _, warns) in DAMAGE.items():
        named = [m for m in messages if str(damaged[kind]) in m]
        assert len(named) == int(warns), (kind, messages)
        if warns:
            assert "was damaged" in named[0] and "discarded and rebuilt" in named[0], named
        k = healed["kernels"][kind]
        # a rewritten source leaves Numba's index, made from the same text, valid; the others compile afresh
        assert (k["hits"], k["misses"]) == ((1, 0) if which == "py" else (0, 1)), (kind, k)
        assert _entry_files(k["source"])[which].is_file(), kind  # a regular file again
    assert len(messages) == sum(warns for _, _, warns in DAMAGE.values()), messages

    warm = _run(src, cache, kinds)
    assert not warm["warnings"], warm["warnings"]
    for kind, k in warm["kernels"].items():
        assert (k["hits"], k["misses"]) == (1, 0), (kind, k)


@pytest.mark.parametrize("where", ["link to itself", "link to nowhere"])
def test_a_cache_directory_that_is_a_broken_link_keeps_code_in_memory(tmp_path, where):
    src = _setup(tmp_path)
    cache = tmp_path / "cache"
    cache.symlink_to("cache" if where == "link to itself" else tmp_path / "nowhere")
    result = _run(src, cache, ["plain"])
    (message,) = [m for _, m in result["warnings"]]
    assert f"cannot use the cache directory {cache}" in message and "kept in memory" in message, message
    assert result["kernels"]["plain"]["misses"] == 1
    assert not (tmp_path / "nowhere").exists()  # nothing was made at the link's target


def test_read_file_reads_regular_files_only(tmp_path):
    """The unit under the test above, with each refusal's reason."""
    path = tmp_path / "f"
    path.write_bytes(b"payload")
    assert read_file(path) == b"payload"
    with pytest.raises(FileNotFoundError):
        read_file(tmp_path / "missing")
    with pytest.raises(IsADirectoryError):
        read_file(tmp_path)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(OSError, match="a FIFO where a regular file should be"):
        read_file(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    with pytest.raises(OSError, match="a device where a regular file should be"):
        read_file(tmp_path / "zero")
    _sparse(path)
    with pytest.raises(OSError, match=f"{MAX_BYTES + 1} bytes, more than any cache file gradkern writes"):
        read_file(path)
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(OSError):
        read_file(tmp_path / "loop")


@pytest.mark.skipif(compiler() is None, reason="g++ is not on the PATH")
def test_hostcuda_libraries_that_are_no_regular_file_are_rebuilt(tmp_path):
    """hostcuda's library (read for its checksum before the dynamic loader maps it) and its source files: a FIFO
    there hung the process, a link to /dev/zero exhausted its memory. Each is damage now, rebuilt with one
    warning. Made in copies of the cache that no library of this process was loaded from."""
    from gradkern.backends import backend
    from gradkern.backends.hostcuda import HostCudaBackend
    from gradkern.ir.types import F64, Array
    from gradkern.kernels.blas import saxpy
    from gradkern.pipeline import specialize

    spec = specialize(saxpy.ir, {"a": F64, "x": Array(F64, 1), "y": Array(F64, 1)}, 1, "hostcuda")

    def works(cache):
        x, y = np.arange(5.0), np.ones(5)
        lib = HostCudaBackend().compile(spec.code, cache)  # a fresh object: nothing kept in memory
        HostCudaBackend.run(backend("hostcuda"), spec.typed, spec.code, lib, True, (5,), [np.float64(2.0), x, y])
        np.testing.assert_array_equal(y, 2.0 * x + 1.0)
        return lib.path

    built = works(tmp_path / "built").name
    for n, (suffix, damage) in enumerate([(".so", _fifo), (".so", _dev_zero), (".so", _sparse), (".cu", _fifo),
                                          (".cpp", _dev_zero)]):
        cache = tmp_path / f"copy{n}"
        shutil.copytree(tmp_path / "built", cache)
        path = (cache / "hostcuda" / built).with_suffix(suffix)
        if suffix != ".so":
            (cache / "hostcuda" / built).unlink()  # so that the sources are read: the library is rebuilt
        damage(path)
        with pytest.warns(gk.CacheWarning, match=rf"{path.name} was damaged \(OSError: .*(FIFO|device|bytes)"):
            assert works(cache).name == built
        assert path.is_file()


POOL_MODULE = '''
import numpy as np

import gradkern as gk

N = 4096  # past SERIAL_THREADS: the parent's launches are parallel regions


@gk.kernel
def heat(u, v, c):
    i = gk.tid()
    if i == 0 or i == u.shape[0] - 1:
        v[i] = u[i]
    else:
        v[i] = u[i] + c * (u[i - 1] - 2.0 * u[i] + u[i + 1])


@gk.kernel
def energy(u, E):
    i = gk.tid()
    gk.atomic_add(E, 0, u[i] * u[i])


def program(u, v, E, c):
    for _ in range(3):
        gk.launch(heat, N, u, v, c)
        gk.launch(heat, N, v, u, c)
    gk.launch(energy, N, u, E)


def work(seed):
    """A program's gradient: stencils (interior and edges), an atomic sum, their reverses. Bit-for-bit lists."""
    rng = np.random.default_rng(seed)
    u, v, E = rng.uniform(0.5, 2.0, N), np.zeros(N), np.zeros(1)
    du, dv, dE = np.zeros(N), np.zeros(N), np.ones(1)
    dc = gk.autodiff(program, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Duplicated(E, dE), gk.Active(0.1))[3]
    return [float(E[0]), float(dc), du.tolist()]
'''

POOL_RUNNER = '''
import json
import multiprocessing
import sys

import numba

import poolmod

if __name__ == "__main__":
    before = [poolmod.work(seed) for seed in (1, 2)]  # parallel regions in this process first
    try:
        layer = numba.threading_layer()
    except ValueError:
        layer = None
    out = {"layer": layer, "before": before}
    for method in ("fork", "spawn"):
        with multiprocessing.get_context(method).Pool(2) as pool:
            out[method] = pool.map(poolmod.work, [1, 2])
    print(json.dumps(out))
'''


def test_pool_workers_forked_after_parallel_launches_run_and_agree(tmp_path):
    """multiprocessing's default start method on Linux forks. After a parallel launch on Numba's OpenMP threading
    layer, GNU OpenMP terminated a forked child at its first parallel region ('Terminating: fork() called from a
    process already using GNU OpenMP'), and the Pool, replacing its dead workers, hung. A forked child now runs
    every launch serially (backends/numba_cpu.py: its serial twin, or the function compiled without
    parallel=True): the same values. Spawned workers compile into the shared cache at once, and agree too."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "poolmod.py").write_text(POOL_MODULE)
    (src / "runner.py").write_text(POOL_RUNNER)
    env = dict(os.environ)
    env["GRADKERN_CACHE_DIR"] = str(tmp_path / "cache")
    env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [env.get("PYTHONPATH")])])
    for name in ("GRADKERN_DUMP", "GRADKERN_BOUNDSCHECK", "GRADKERN_BACKEND"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, str(src / "runner.py")], cwd=src, env=env, capture_output=True,
                          text=True, timeout=600)  # the hang this guards against becomes a failure
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "Terminating" not in proc.stderr, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # serial and parallel forms compute every value identically (docs/performance.md): equal, not close
    assert out["fork"] == out["before"]
    assert out["spawn"] == out["before"]
