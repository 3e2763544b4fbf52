"""Damaged caches, round four (docs/caching.md#damaged-entries): an index whose entries point outside the cache
folder (`../../x.nbc`, an absolute path), resealed so that its checksum holds, is a plain miss that never reads
there; what is no regular file where a cache file goes (a FIFO, a device, a socket, a folder) is looked at and
never opened (opening a device runs its driver's open); processes started by spawn and by fork fill one cache
folder, whose name has spaces and a non-ASCII letter, at once with different kernels of the same name, each
running its own body.

Not probed: permissions changed between a write and a read (the suite runs as root here, which reads and writes
whatever the mode: tests/backends/test_cache.py skips it for root), another Python's index (Numba names it
`.pyXY.nbi`: never read by this one), another Numba's (round three's `other_version_nbi`)."""

from __future__ import annotations

import importlib
import io
import json
import multiprocessing
import os
import pickle
import socket
import subprocess
import sys
import textwrap
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import gradkern as gk
from gradkern.backends import cache_files
from gradkern.backends.cache_files import read_file, seal, unseal

# ---- what is no regular file is never opened ----------------------------------------------------------------------


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _device(path: Path) -> None:
    path.symlink_to("/dev/null")  # a character device (a node of its own needs root's mknod)


def _socket(path: Path) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()  # the socket file stays


def _folder(path: Path) -> None:
    path.mkdir()


@pytest.mark.parametrize("make", [_fifo, _device, _socket, _folder], ids=["fifo", "device", "socket", "folder"])
def test_what_is_no_regular_file_is_refused_without_being_opened(tmp_path, monkeypatch, make):
    """read_file opened every path (non-blocking) and looked at what it had opened: a device's driver ran its
    open first. Now it looks first; the regular file beside it is opened and read."""
    opened = []
    real_open = os.open

    def spy(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(cache_files.os, "open", spy)
    odd, plain = tmp_path / "odd.nbc", tmp_path / "plain.nbc"
    make(odd)
    plain.write_bytes(b"payload")
    with pytest.raises(OSError, match="where a regular file should be|a directory where a file should be"):
        read_file(odd)
    assert opened == []
    assert read_file(plain) == b"payload" and opened == [str(plain)]


# ---- an index pointing outside the cache ---------------------------------------------------------------------------

MODULE = '''
import gradkern as gk


@gk.kernel
def affine(a, x, y, b):
    i = gk.tid()
    y[i] = a * x[i] + b
'''

RUNNER = '''
import json
import warnings

import numpy as np

import gradkern as gk
from gradkern.runtime.execute import entry_of

import outsidemod

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    x, y = np.arange(1.0, 17.0), np.full(16, -7.0)
    gk.launch(outsidemod.affine, x.size, 2.5, x, y, 0.75)
    (spec,) = outsidemod.affine._specs.values()
    entry = entry_of(spec)
print(json.dumps({"correct": y.tolist() == (2.5 * x + 0.75).tolist(),
                  "hits": sum(entry.stats.cache_hits.values()), "misses": sum(entry.stats.cache_misses.values()),
                  "source": entry.py_func.__code__.co_filename,
                  "warnings": [[w.category.__name__, str(w.message)] for w in caught]}))
'''


def _run(src: Path, cache: Path) -> dict:
    env = dict(os.environ, GRADKERN_CACHE_DIR=str(cache), GRADKERN_SERIAL_THREADS="0")
    for name in ("GRADKERN_DUMP", "GRADKERN_BOUNDSCHECK", "GRADKERN_BACKEND"):
        env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [env.get("PYTHONPATH")])])
    proc = subprocess.run([sys.executable, str(src / "runner.py")], cwd=src, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["correct"], result
    return result


def _point_outside(index: Path, target: str) -> None:
    """Every entry of the index names `target`, the index resealed: its checksum holds (a tool, not a bit flip)."""
    data = index.read_bytes()
    with io.BytesIO(data) as f:
        version = pickle.load(f)
        stamp, overloads = pickle.loads(unseal(f.read()))
    payload = seal(pickle.dumps((stamp, {key: target for key in overloads}), protocol=-1))
    index.write_bytes(pickle.dumps(version, protocol=-1) + payload)


def test_an_index_entry_naming_a_file_outside_the_cache_is_a_miss_never_read(tmp_path):
    """The index names `../../stolen.nbc` (then an absolute path) and the entry's real code was moved there: had
    the load followed the name, the launch would hit. Each is a plain miss (a name that is not its key's),
    compiled afresh and right, without a warning, and the file outside is left as it was."""
    src, cache = tmp_path / "src", tmp_path / "cache"
    src.mkdir()
    (src / "outsidemod.py").write_text(MODULE)
    (src / "runner.py").write_text(textwrap.dedent(RUNNER))
    first = _run(src, cache)
    assert first["misses"] >= 1
    pycache = Path(first["source"]).parent / "__pycache__"
    for n, where in enumerate(["relative", "absolute"]):
        (index,) = pycache.glob("*.nbi")
        (code,) = pycache.glob("*.nbc")
        outside = tmp_path / f"stolen{n}.nbc"
        code.replace(outside)
        before = outside.read_bytes()
        _point_outside(index, os.path.relpath(outside, pycache) if where == "relative" else str(outside))
        again = _run(src, cache)
        assert again["hits"] == 0 and again["misses"] >= 1, (where, again)
        assert not again["warnings"], (where, again["warnings"])
        assert outside.read_bytes() == before


# ---- processes filling one cache at once ---------------------------------------------------------------------------

KERNELS = {"squaremod": "x[i] * x[i]", "cubemod": "x[i] * x[i] * x[i]"}


def _launch_in_child(folder: str, module: str) -> tuple[list, list]:
    """In a pool worker: launch `module.step` (every module names its kernel `step`)."""
    if folder not in sys.path:
        sys.path.insert(0, folder)
    mod = importlib.import_module(module)
    x, y = np.linspace(0.5, 2.0, 8), np.zeros(8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gk.launch(mod.step, 8, x, y)
    return y.tolist(), [str(w.message) for w in caught]


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_processes_fill_one_cache_at_once_with_kernels_of_one_name(tmp_path, monkeypatch, method):
    """Two modules each define a kernel `step` with another body; two processes launch them at once, compiling
    into one cache folder named with spaces and a non-ASCII letter: each gets its own kernel's values, bit for
    bit, and no warning (the generated module is named by its source's hash, so the two never share an entry)."""
    folder = tmp_path / "modules"
    folder.mkdir()
    for module, body in KERNELS.items():
        (folder / f"{module}.py").write_text(f"import gradkern as gk\n\n\n@gk.kernel\ndef step(x, y):\n"
                                             f"    i = gk.tid()\n    y[i] = {body}\n")
    monkeypatch.setenv("GRADKERN_CACHE_DIR", str(tmp_path / "cache dir ü"))
    x = np.linspace(0.5, 2.0, 8)
    want = {"squaremod": (x * x).tolist(), "cubemod": (x * x * x).tolist()}  # the same products, bit for bit
    order = list(KERNELS)
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context(method)) as pool:
        results = list(pool.map(_launch_in_child, [str(folder)] * 2, order, timeout=300))
    for module, (values, caught) in zip(order, results, strict=True):
        assert not caught, caught
        assert values == want[module], module
    assert (tmp_path / "cache dir ü").is_dir()


# ---- a write interrupted ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, OSError])
def test_an_interrupted_write_leaves_no_temporary_file(tmp_path, interrupt):
    """Numba writes an index or data file to `<file>.tmp.<uuid>` and moves it in place, removing it on an
    Exception only: a KeyboardInterrupt (Ctrl-C during a first launch) left the half-written temporary file in
    the cache for good. gradkern's cache file removes it whatever interrupts the write, and the file it was to
    replace is left whole."""
    from gradkern.backends.numba_cache import _HealingCacheFile

    entry = _HealingCacheFile(str(tmp_path), "gradkern_gen_0.step-3.py311", (0.0, 0))
    index = tmp_path / "gradkern_gen_0.step-3.py311.nbi"
    index.write_bytes(b"whole")
    with pytest.raises(interrupt):
        with entry._open_for_write(str(index)) as f:
            f.write(b"half")
            raise interrupt("interrupted")
    assert sorted(p.name for p in tmp_path.iterdir()) == [index.name]
    assert index.read_bytes() == b"whole"
    with entry._open_for_write(str(index)) as f:
        f.write(b"new")
    assert index.read_bytes() == b"new" and len(list(tmp_path.iterdir())) == 1


def test_a_cache_directory_under_the_home_directory_is_spelled_with_a_tilde(tmp_path, monkeypatch):
    """GRADKERN_CACHE_DIR=~/gk set where no shell expands it (os.environ, a container's ENV) made a folder named
    `~` in the working directory; a leading `~` is the home directory now, as in a shell."""
    from gradkern.runtime.cache import cache_dir

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GRADKERN_CACHE_DIR", "~/gk")
    assert cache_dir().parent == tmp_path / "home" / "gk"
    monkeypatch.setenv("GRADKERN_CACHE_DIR", "gk relative")
    assert cache_dir().parent == Path("gk relative")  # relative to the working directory at each access
