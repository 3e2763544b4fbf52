"""Damaged caches, round six (docs/caching.md, "The pipeline's output"): the pipeline's own cache
(gradkern/pipeline_cache.py, `<GRADKERN_CACHE_DIR>/v<version>/specs/<key>.spec`), attacked beyond what
tests/runtime/test_pipeline_cache.py checks (an entry cut short, a bit flipped, emptied, a directory, another key's).

Found this round: the `specs` folder as a file or as a link to itself turned the pipeline cache off for good,
silently (every process ran the pipeline again; `mkdir` failed on it and the folder was never healed): it is now
gradkern's folder like `numba`, made afresh with one CacheWarning. An entry whose seal and key hold but whose
value is not what the pipeline returns (a crafted file, a value of another class) crashed the launch with an
AttributeError: it is damage now. Every case runs on the interpreter backend (the pipeline runs in full, nothing is
compiled), and checks the numbers against the kernel's formula.

Already right, checked here: another gradkern or Python version's entries are never read; a pipeline function
monkeypatched makes a call neither read nor write the disk. Probed this round and already right (kept out of the
suite: fresh processes on one cache, a module rewritten between them): a stale entry after the kernel's body, a
`@gk.func` it calls (and one that calls), or a global it reads changed, each with the same file and lines (the
frontend's IR is the key: another key, a miss; the old text again loads the old entry). Custom rules
(`gk.custom_rule`) run in host code, outside the pipeline: no entry holds them."""

from __future__ import annotations

import errno
import pickle
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import gradkern as gk
from gradkern import pipeline, pipeline_cache
from gradkern.backends.cache_files import seal, unseal
from gradkern.runtime.cache import cache_dir

N = 6


@gk.kernel
def cubed(x, y):
    i = gk.tid()
    y[i] = x[i] * x[i] * x[i]


@gk.kernel
def halved(x, y):
    i = gk.tid()
    y[i] = 0.5 * x[i]


def _x():
    return np.linspace(0.5, 1.5, N)


def _run(kernel=cubed):
    """A launch and a gradient of `kernel` from a cold specialisation; the numbers checked against its formula
    exactly (x**3 and 3x**2, or x/2 and 1/2: the interpreter computes them as written, in float64)."""
    kernel._specs.clear()
    x, y = _x(), np.zeros(N)
    gk.launch(kernel, N, x, y, backend="interp")
    dx = np.zeros(N)
    gk.autodiff(kernel, gk.Duplicated(x, dx), gk.Duplicated(np.zeros(N), np.ones(N)), dim=N, backend="interp")
    if kernel is cubed:
        np.testing.assert_array_equal(y, x * x * x)
        np.testing.assert_allclose(dx, 3.0 * x * x, rtol=1e-15)  # (x*x)*1 + x*(x+x) vs 3*x*x: rounding only
    else:
        np.testing.assert_array_equal(y, 0.5 * x)
        np.testing.assert_array_equal(dx, np.full(N, 0.5))


def _specs():
    return cache_dir() / "specs"


def _entries():
    return sorted(p for p in _specs().glob("*.spec") if p.is_file() and not p.is_symlink())


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADKERN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(pipeline_cache, "_unusable", set())
    return tmp_path


def _warned(expect: str | None):
    """Run `_run()` and check the CacheWarnings: exactly one matching `expect`, or none."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _run()
    got = [str(w.message) for w in caught if issubclass(w.category, gk.CacheWarning)]
    if expect is None:
        assert got == []
    else:
        assert len(got) == 1 and expect in got[0], got


def _leftovers():
    return [p.name for p in _specs().iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("how", ["garbage", "a link to itself", "a link to nowhere", "swapped"])
def test_more_damage_to_an_entry_is_healed(cache, how):
    _run()  # writes the primal's and the reverse's entries
    entries = _entries()
    assert len(entries) == 2
    if how == "swapped":  # two entries' files exchanged (both whole, sealed, each another key's)
        a, b = (p.read_bytes() for p in entries)
        entries[0].write_bytes(b)
        entries[1].write_bytes(a)
    else:
        entry = entries[0]
        entry.unlink()
        if how == "garbage":
            entry.write_bytes(np.random.default_rng(6).bytes(4096))
        else:
            entry.symlink_to(entry.name if how == "a link to itself" else "nowhere.spec")
    runs = sum(pipeline_cache.runs.values())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _run()
    got = sorted(str(w.message) for w in caught if issubclass(w.category, gk.CacheWarning))
    # a link to nowhere reads as no entry (a miss, rebuilt silently: the move of the new entry replaces the link)
    damaged = entries if how == "swapped" else [] if how == "a link to nowhere" else entries[:1]
    assert len(got) == len(damaged) and all(p.name in m for p, m in zip(damaged, got)), got
    assert sum(pipeline_cache.runs.values()) == runs + max(len(damaged), 1)  # rebuilt, never loaded
    assert _entries() == entries and not _leftovers()
    assert not (_specs() / "nowhere.spec").exists()  # nothing made at a link's target
    loads = sum(pipeline_cache.loads.values())
    _warned(None)  # healed: loaded, silently
    assert sum(pipeline_cache.loads.values()) == loads + 2


@pytest.mark.parametrize("how", ["a file", "a link to itself"])
def test_a_specs_folder_that_is_no_folder_is_made_afresh(cache, how):
    _specs().parent.mkdir(parents=True)
    if how == "a file":
        _specs().write_text("a file where the specs folder goes")
    else:
        _specs().symlink_to("specs")
    _warned(f"{_specs()} was damaged")
    assert _specs().is_dir() and not _specs().is_symlink() and len(_entries()) == 2
    loads = sum(pipeline_cache.loads.values())
    _warned(None)
    assert sum(pipeline_cache.loads.values()) == loads + 2


def _reseal(entry: Path, value) -> None:
    """Write `value` into `entry` as its own (the right format and key, sealed): what only a crafted file holds."""
    fmt, key, _ = pickle.loads(unseal(entry.read_bytes()))
    entry.write_bytes(seal(pickle.dumps((fmt, key, value))))


class Marker:
    """A foreign object: unpickling it must not be taken for a specialisation."""


@pytest.mark.parametrize("value", [42, "source", Marker(), (1, 2, 3)], ids=["int", "str", "foreign", "tuple"])
def test_a_sealed_entry_holding_no_specialisation_is_damage(cache, value):
    _run()
    for entry in _entries():
        _reseal(entry, value)
    runs = sum(pipeline_cache.runs.values())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _run()
    got = [str(w.message) for w in caught if issubclass(w.category, gk.CacheWarning)]
    assert len(got) == 2 and all("where a" in m for m in got), got
    assert sum(pipeline_cache.runs.values()) == runs + 2
    _warned(None)


def test_a_reverse_entry_in_a_primal_entrys_place_is_damage(cache):
    """Whole, sealed and of a class the pipeline returns, but another kind's: a primal launch given a reverse
    specialisation would have run the augmented primal's roles as its own."""
    _run()
    primal, = [p for p in _entries() if type(pickle.loads(unseal(p.read_bytes()))[2]) is pipeline.Specialization]
    reverse, = [p for p in _entries() if p != primal]
    _reseal(primal, pickle.loads(unseal(reverse.read_bytes()))[2])
    _warned(f"{primal.name} was damaged (a ReverseSpecialization where a Specialization goes)")


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS], ids=["full", "read-only"])
def test_a_cache_that_cannot_be_written_keeps_nothing_and_leaks_nothing(cache, monkeypatch, code):
    """A full disk (half the entry written) or a read-only filesystem: the call runs, right, silently (the
    Numba cache warns about the directory once); no temporary file is left, nothing later is tried there.
    Simulated (the tests run as root, whom a mode does not stop)."""
    real = pipeline_cache.replace_with
    tries = []

    def failing(path, write):
        def half(tmp):
            tmp.write_bytes(b"half an entry")
            tries.append(path)
            raise OSError(code, "simulated", str(tmp))
        real(path, half)
    monkeypatch.setattr(pipeline_cache, "replace_with", failing)
    _warned(None)
    assert len(tries) == 1 and _entries() == [] and not _leftovers()
    _warned(None)  # the directory is known unusable: not tried again
    assert len(tries) == 1


_WRITER = textwrap.dedent("""
    import sys
    import numpy as np
    sys.path.insert(0, {tests!r})
    from gradkern import pipeline_cache
    from gradkern.runtime.cache import cache_dir
    from gradkern.runtime.specialize import primal_specialization
    from gradkern.runtime.binding import bind
    from runtime.test_damaged_cache6 import halved
    b = bind(halved.ir, 6, (np.zeros(6), np.zeros(6)), "interp", False)
    spec = primal_specialization(halved, b)
    key = pipeline_cache.key("primal", (halved.ir, b.type_map(halved.ir), 1, "interp", frozenset(b.strided),
                                        b.aliases))
    sys.stdout.write("ready\\n")
    sys.stdout.flush()
    sys.stdin.readline()  # both start writing at once
    for _ in range(300):
        pipeline_cache._store(cache_dir() / "specs", key, spec)
    print(key)
""")


def test_two_processes_writing_one_entry_at_once_leave_it_whole(cache):
    import os
    tests = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "GRADKERN_CACHE_DIR": str(cache)}
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER.format(tests=tests)], env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in range(2)]
    for p in procs:
        assert p.stdout.readline() == "ready\n"
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    keys = {p.communicate(timeout=120)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs) and len(keys) == 1
    key, = keys
    assert [p.name for p in _entries()] == [f"{key}.spec"] and not _leftovers()
    halved._specs.clear()
    loads = pipeline_cache.loads.get("primal", 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gk.CacheWarning)
        x, y = _x(), np.zeros(N)
        gk.launch(halved, N, x, y, backend="interp")
    assert pipeline_cache.loads.get("primal", 0) == loads + 1
    np.testing.assert_array_equal(y, 0.5 * x)


@pytest.mark.parametrize("other", ["gradkern", "python"])
def test_an_entry_of_another_version_is_never_read(cache, monkeypatch, other):
    """Another gradkern has another version folder and another key; another Python another key: its entries
    stay where they are, unread (a miss: the pipeline runs), and this version's are written beside them."""
    _run()
    theirs = set(_entries())
    pipeline_cache._sources.cache_clear()
    try:
        with monkeypatch.context() as m:
            if other == "gradkern":
                m.setattr(pipeline_cache, "__version__", "0.0.0-other")
            else:
                m.setattr(sys, "version_info", (*sys.version_info[:2], sys.version_info[2] + 1))
            runs, loads = sum(pipeline_cache.runs.values()), sum(pipeline_cache.loads.values())
            _warned(None)
            assert sum(pipeline_cache.runs.values()) == runs + 2 and sum(pipeline_cache.loads.values()) == loads
            assert theirs < set(_entries())
    finally:
        pipeline_cache._sources.cache_clear()


def test_a_patched_stage_is_never_served_from_nor_written_to_the_disk(cache, monkeypatch):
    """A warm entry, then a pipeline function replaced (a test's monkeypatch, which may change the output): the
    call neither loads the stored output nor writes one, and once the patch is undone the entry loads again."""
    _run()
    entries = {p: p.read_bytes() for p in _entries()}
    real = pipeline.specialize

    def specialize(*args, **kwargs):  # the same output: what matters is that the key cannot know it
        return real(*args, **kwargs)
    with monkeypatch.context() as m:
        m.setattr(pipeline, "specialize", specialize)
        cubed._specs.clear()
        x, y = _x(), np.zeros(N)
        loads = sum(pipeline_cache.loads.values())
        assert pipeline_cache.key("primal", (cubed.ir, {}, 1, "interp", frozenset(), ())) is None
        gk.launch(cubed, N, x, y, backend="interp")  # runtime/specialize.py calls its own reference: the real one
        np.testing.assert_array_equal(y, x * x * x)
        assert sum(pipeline_cache.loads.values()) == loads  # the patch seen: the disk bypassed
        assert {p: p.read_bytes() for p in _entries()} == entries
    _warned(None)
    assert sum(pipeline_cache.loads.values()) == loads + 2
