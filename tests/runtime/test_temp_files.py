"""Temporary files gradkern makes outside its cache, and when they go (docs/caching.md#temporary-files).

Before session 52 the suite left hundreds of empty `gradkern-snapshots-*` directories and a few
`gradkern-hostcuda-*` ones in /tmp: a checkpointed loop's disk snapshots were removed only when its reverse
ran (a split thunk's forward whose reverse never came left them for good), and hostcuda's private directory,
taken where the cache directory cannot be used, was never removed. Each test here points the temporary
directory at its own folder and checks that nothing is left there."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import checkpoint_schedules as cs
import numpy as np
import pytest

import gradkern as gk


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """tempfile's directory, for this test alone (mkdtemp reads tempfile.tempdir)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@gk.kernel
def grow_into(u, v, c):
    i = gk.tid()
    v[i] = u[i] + c * u[i] * u[i]


@gk.kernel
def copy_into(v, u):
    i = gk.tid()
    u[i] = v[i]


def on_disk(fail_at=None):
    """A program whose checkpointed loop keeps two of its snapshots on disk (multistage: 1 in RAM, 2 on disk);
    its launches run on the interpreter: nothing to compile."""
    def program(u, v, c, nsteps):
        def step(t):
            if t == fail_at:
                raise KeyError("a step that raises")
            gk.launch(grow_into, u.shape[0], u, v, c, backend="interp")
            gk.launch(copy_into, u.shape[0], v, u, backend="interp")
        gk.checkpointed_loop(step, nsteps, schedule=cs.MultistageCheckpointSchedule(nsteps, 1, 2))
    return program


def arguments():
    rng = np.random.default_rng(52)
    return [gk.Duplicated(rng.uniform(0.1, 0.5, 6), rng.uniform(0.5, 1.0, 6)), gk.Duplicated(np.zeros(6), np.zeros(6)),
            gk.Active(0.1), 6]


def test_a_split_forward_whose_reverse_never_runs_leaves_no_snapshot_directory(private_tmp, frozen_heap):
    fwd, _ = gk.autodiff_thunk(on_disk(), gk.Duplicated, gk.Duplicated, gk.Active, gk.Const)
    tape = fwd(*arguments())
    assert [p.name[:19] for p in private_tmp.iterdir()] == ["gradkern-snapshots-"]  # the schedule stored on disk
    del tape
    gc.collect()
    assert list(private_tmp.iterdir()) == []


@pytest.mark.parametrize("split", [False, True], ids=["autodiff", "thunk"])
def test_a_gradient_or_a_failed_forward_leaves_nothing(private_tmp, split):
    if split:
        fwd, rev = gk.autodiff_thunk(on_disk(), gk.Duplicated, gk.Duplicated, gk.Active, gk.Const)
        args = arguments()
        rev(*args, fwd(*args))
    else:
        gk.autodiff(on_disk(), *arguments())
    assert list(private_tmp.iterdir()) == []
    with pytest.raises(KeyError, match="a step that raises"):
        gk.autodiff(on_disk(fail_at=4), *arguments())  # after its first snapshot on disk
    assert list(private_tmp.iterdir()) == []


EXIT = r'''
import sys
import numpy as np
from gradkern.backends import hostcuda
from gradkern.program.schedule import DiskSnapshots

snapshots = DiskSnapshots()  # held to the end, never closed: a tape alive when the process exits
snapshots.write([np.ones(3)])
private = hostcuda._private_dir()  # hostcuda's directory for the rest of the process
(private / "gk_x.so").write_bytes(b"library")
print(snapshots.dir, private)
'''


def test_directories_kept_for_the_process_go_when_it_exits(tmp_path):
    folder = tmp_path / "tmp"
    folder.mkdir()
    done = subprocess.run([sys.executable, "-c", EXIT], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TMPDIR": str(folder)})
    assert done.returncode == 0, done.stderr[-3000:]
    made = done.stdout.split()
    assert len(made) == 2 and all(m.startswith(str(folder)) for m in made)
    assert list(folder.iterdir()) == []


# A stand-in for g++: a driver whose compiler pass (a child, as cc1plus is) writes its assembly into TMPDIR and
# keeps working; the driver waits for it.
FAKE_COMPILER = r"""#!/bin/sh
sh -c 'echo "$TMPDIR" > "$0/tmpdir"; echo assembly > "$TMPDIR/ccFAKE.s"; echo $$ > "$0/pass"; exec sleep 60' "$1" &
wait
"""


def test_an_interrupted_compile_leaves_no_compiler_pass_running_and_no_file(tmp_path, private_tmp):
    """Ctrl-C during hostcuda's g++: subprocess.run killed the driver alone, so cc1plus ran on (orphaned, its CPU
    spent for nothing) and its `ccXXXXXX.s` stayed in TMPDIR for good (seen with g++ 12). The compiler now runs in a
    process group of its own with a private TMPDIR: the group is killed, the folder removed."""
    from gradkern.backends import hostcuda

    fake = tmp_path / "fake-g++"
    fake.write_text(FAKE_COMPILER)
    fake.chmod(0o755)
    main = threading.get_ident()

    def interrupt():  # a real SIGINT to the main thread once the compiler pass is at work, as Ctrl-C sends
        while not (tmp_path / "pass").exists() or not (tmp_path / "pass").read_text().strip():
            time.sleep(0.01)
        signal.pthread_kill(main, signal.SIGINT)

    # a KeyboardInterrupt raised inside a gc callback (hypothesis installs one) or a finalizer is printed and
    # dropped: the SIGINT would be lost and the compile would finish; with the collector off and no callbacks, it
    # lands in this thread's own code. (The one CI printed from hypothesis's callback was execnet's SIGINT to a
    # worker slow to exit, not this test's: tests/conftest.py's pytest_sessionfinish, docs/testing.md.)
    callbacks, enabled = gc.callbacks[:], gc.isenabled()
    gc.callbacks.clear()
    gc.disable()
    try:
        threading.Thread(target=interrupt, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            hostcuda.run_compiler([str(fake), str(tmp_path)])
    finally:
        gc.callbacks[:] = callbacks
        if enabled:
            gc.enable()
    private = (tmp_path / "tmpdir").read_text().strip()
    assert private.startswith(str(private_tmp)) and not os.path.exists(private)
    assert list(private_tmp.iterdir()) == []
    pid = int((tmp_path / "pass").read_text())
    deadline = time.monotonic() + 10
    while _running(pid) and time.monotonic() < deadline:  # SIGKILL is delivered at once; reaping takes a moment
        time.sleep(0.01)
    assert not _running(pid)


def test_an_interrupt_inside_popen_after_the_fork_still_kills_the_compile(tmp_path, private_tmp, monkeypatch):
    """Ctrl-C can land inside subprocess.Popen once the compiler runs (its last lines, after the fork), when no
    Popen object, no pid, comes back to run_compiler: under load session 61 saw the interrupted-compile test fail
    so. The processes holding the compile's private TMPDIR are found and killed (session 62)."""
    from gradkern.backends import hostcuda

    fake = tmp_path / "fake-g++"
    fake.write_text(FAKE_COMPILER)
    fake.chmod(0o755)

    class Interrupted(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            deadline = time.monotonic() + 60
            while not (tmp_path / "pass").exists() or not (tmp_path / "pass").read_text().strip():
                assert time.monotonic() < deadline, "the fake compiler never started its pass"
                time.sleep(0.01)
            raise KeyboardInterrupt  # before __init__ returns: run_compiler never sees the object

    monkeypatch.setattr(subprocess, "Popen", Interrupted)
    with pytest.raises(KeyboardInterrupt):
        hostcuda.run_compiler([str(fake), str(tmp_path)])
    monkeypatch.undo()
    private = (tmp_path / "tmpdir").read_text().strip()
    assert private.startswith(str(private_tmp)) and not os.path.exists(private)
    pid = int((tmp_path / "pass").read_text())
    deadline = time.monotonic() + 10
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _running(pid)


def _running(pid: int) -> bool:
    """Whether process `pid` exists and is no zombie (killed, awaiting its reaper)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
