"""Damaged caches, round five (docs/caching.md#damaged-entries): what rounds one to four did not try.

The cache's version folder (`<GRADKERN_CACHE_DIR>/v<version>`) is gradkern's own, like the folders below it;
found as a file (or a link to nowhere) it sent every process to the memory fallback for good, compiling every
kernel afresh, since only the folders below it were healed. It is now damage like them: removed, made afresh,
one CacheWarning. GRADKERN_CACHE_DIR itself and the folders above it are the user's: never removed.

Probed this round and already right (kept out of the suite; session 52's report lists them): the cache directory
a link to a folder removed, or replaced by a file, while a process runs (memory fallback, one warning, results
right, on the CPU and hostcuda); a Numba index whose version field is a list nested a million deep, a dict or a
200 MB string (another version's index: a miss), and whose sealed payload is of the wrong shape or type
(damage, discarded); another Numba, Python, g++ or gradkern version (tests/runtime/test_damaged_cache3.py and
the keys: another index version, file name, library key or version folder)."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import gradkern as gk
from gradkern.backends.cache_files import make_folders


def damage(path, how):
    if how == "file":
        path.write_text("a file where a folder goes")
    elif how == "link to nowhere":
        path.symlink_to(path.parent / "nowhere")
    else:
        path.symlink_to(path.name)  # to itself


@pytest.mark.parametrize("how", ["file", "link to nowhere", "link to itself"])
@pytest.mark.parametrize("level", [0, 1, 2], ids=["version-folder", "backend-folder", "pycache"])
def test_a_folder_of_gradkerns_that_is_no_folder_is_made_afresh(tmp_path, how, level):
    root = tmp_path / "cache"  # GRADKERN_CACHE_DIR
    wanted = root / "v1" / "numba" / "__pycache__"
    broken = [root / "v1", root / "v1" / "numba", wanted][level]
    broken.parent.mkdir(parents=True, exist_ok=True)
    damage(broken, how)
    with pytest.warns(gk.CacheWarning, match=f"{broken} was damaged"):
        make_folders(wanted, owned=3)
    assert wanted.is_dir() and not broken.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]  # nothing made at a link's target
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_folders(wanted, owned=3)  # whole: silent


@pytest.mark.parametrize("how", ["file", "link to nowhere"])
def test_the_users_cache_directory_is_never_removed(tmp_path, how):
    root = tmp_path / "cache"
    damage(root, how)
    with pytest.raises(OSError):
        make_folders(root / "v1" / "numba", owned=2)
    assert root.is_symlink() or root.read_text() == "a file where a folder goes"
    assert not (tmp_path / "nowhere").exists()


@gk.kernel
def cube_plus(x, y):
    i = gk.tid()
    y[i] = x[i] * x[i] * x[i] + 1.0


def test_a_version_folder_that_is_a_file_is_healed_not_worked_around(tmp_path, monkeypatch):
    """End to end on the CPU backend: the launch warns that the version folder was damaged (it warned that the
    cache directory could not be used, and kept the code in memory), runs, and leaves its entry on disk."""
    root = tmp_path / "cache"
    monkeypatch.setenv("GRADKERN_CACHE_DIR", str(root))
    version = root / f"v{gk.__version__}"
    root.mkdir()
    version.write_text("a file where the version folder goes")
    x, y = np.linspace(0.5, 1.5, 4), np.zeros(4)
    with pytest.warns(gk.CacheWarning) as caught:
        gk.launch(cube_plus, 4, x, y, backend="cpu")
    assert [str(w.message) for w in caught if "damaged" in str(w.message)], [str(w.message) for w in caught]
    assert not [w for w in caught if "cannot use" in str(w.message)]
    np.testing.assert_array_equal(y, x * x * x + 1.0)  # the same operations in the same order
    assert any(p.suffix == ".nbi" for p in (version / "numba" / "__pycache__").iterdir())
    assert os.listdir(root) == [version.name]


def test_info_takes_a_damaged_version_folder_for_the_damage_a_launch_heals(tmp_path):
    """`python -m gradkern info` said such a cache was unusable (`v<version> is not a directory`)."""
    from gradkern.__main__ import _unusable

    root = tmp_path / "cache"
    root.mkdir()
    (root / "v1").write_text("a file where the version folder goes")
    assert _unusable(root / "v1") == ""
    (root / "v1").unlink()
    root.rmdir()
    root.write_text("the user's file")
    assert f"(unusable: {root} is not a directory" in _unusable(root / "v1")
