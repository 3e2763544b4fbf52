"""Renamed shadows in a program's sweep (program/renames.py, docs/programs.md, "Renamed shadows"): where a
copy's source shadow is known to be zero, the copy's reverse is a renaming, and the gradients are bit for bit
those of the sweep without it (GRADKERN_SHADOW_RENAME=0): the user's shadows accumulate, a source read again
declines it, copies of copies, custom rules and checkpointed loops in the sweep, and a small fuzz of random
programs of copies and steps."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import gradkern as gk
from gradkern.backends import set_default
from gradkern.backends.hostcuda import compiler
from gradkern.kernels import allen_cahn_step
from gradkern.program import renames, shadows
from program.test_programs import energy
from program.test_rules import scale

N = 300
T = 4


@pytest.fixture(autouse=True)
def mapped_temporaries(monkeypatch):
    """Every temporary's shadow in a mapping of its own (what the renaming takes), whatever its size."""
    monkeypatch.setattr(shadows, "MAPPED", 1)


@pytest.fixture
def count(monkeypatch):
    """How many copies' reverses were renamings."""
    got = {"moved": 0}
    moved = renames.ShadowRenames.moved

    def counted(self, step):
        done = moved(self, step)
        got["moved"] += done
        return done
    monkeypatch.setattr(renames.ShadowRenames, "moved", counted)
    return got


def _step(src, dst, c):
    gk.launch(allen_cahn_step, N, src, dst, c, 0.01)


def _run(program, monkeypatch, arrays, seeds, rename: bool):
    """The program's gradient with the renaming on or off: the shadows and the Active scalar's derivative."""
    monkeypatch.setenv("GRADKERN_SHADOW_RENAME", "1" if rename else "0")
    xs = [a.copy() for a in arrays]
    ds = [s.copy() for s in seeds]
    got = gk.autodiff(program, *[gk.Duplicated(x, d) for x, d in zip(xs, ds)], gk.Active(0.2))
    return ds, got[-1], xs


def _same_floats(program, monkeypatch, arrays, seeds):
    """Renamed and not, bit for bit (the signs of zeros too); returns the renamed run's shadows."""
    off = _run(program, monkeypatch, arrays, seeds, False)
    on = _run(program, monkeypatch, arrays, seeds, True)
    for a, b in zip(off[0] + off[2], on[0] + on[2]):
        np.testing.assert_array_equal(b, a)
        np.testing.assert_array_equal(np.signbit(b), np.signbit(a))
    assert on[1] == off[1]
    return on[0]


def _inputs(seed: int = 0):
    r = np.random.default_rng(seed)
    return [r.uniform(-0.9, 0.9, N), np.zeros(1)], [np.zeros(N), np.ones(1)]


def copy_then_step(u, E, c):
    for _ in range(T):
        u_old = u.copy()
        _step(u_old, u, c)
    gk.launch(energy, N, u, E)


@pytest.mark.parametrize("seeded", [False, True])
def test_a_copy_then_a_step_is_renamed_with_the_same_floats(monkeypatch, count, seeded):
    arrays, seeds = _inputs()
    if seeded:  # a nonzero seed of u's shadow: the step's reverse consumes it, the copy's still renames
        seeds[0] = np.random.default_rng(1).uniform(-1, 1, N)
    _same_floats(copy_then_step, monkeypatch, arrays, seeds)
    assert count["moved"] == T


def test_a_shadow_the_program_only_reads_accumulates(monkeypatch, count):
    """w is only read (copied): its shadow, nonzero on entry, is accumulated into, never renamed."""
    def program(u, w, E, c):
        w_old = w.copy()  # once: w's shadow gets one add, seed + g, bit for bit
        _step(w_old, u, c)
        copy_then_step(u, E, c)

    r = np.random.default_rng(2)
    arrays = [r.uniform(-0.9, 0.9, N), r.uniform(-0.9, 0.9, N), np.zeros(1)]
    seed = r.uniform(-1, 1, N)
    got = _same_floats(program, monkeypatch, arrays, [np.zeros(N), seed, np.ones(1)])
    assert count["moved"] == T  # u's copies; w's is an add
    from_zero = _run(program, monkeypatch, arrays, [np.zeros(N), np.zeros(N), np.ones(1)], True)[0]
    np.testing.assert_array_equal(got[1], seed + from_zero[1])  # nothing of the entry value is lost


def test_a_source_read_again_after_its_copy_is_not_renamed(monkeypatch, count):
    def program(u, E, c):
        for _ in range(T):
            u_old = u.copy()
            gk.launch(energy, N, u, E)  # u read after the copy: its shadow is not zero at the copy's reverse
            _step(u_old, u, c)
        gk.launch(energy, N, u, E)

    _same_floats(program, monkeypatch, *_inputs(3))
    assert count["moved"] == 0


def test_copies_of_copies_are_renamed(monkeypatch, count):
    def program(u, E, c):
        for _ in range(T):
            a = u.copy()
            b = a.copy()
            _step(b, u, c)
        gk.launch(energy, N, u, E)

    _same_floats(program, monkeypatch, *_inputs(4))
    assert count["moved"] == 2 * T


def test_a_rule_before_the_copies_sees_its_shadows(monkeypatch, count):
    """A custom rule's reverse reads the shadows themselves: the renamed ones are written back before it."""
    def program(u, w, E, c):
        scale(u, w, c)  # w = c u (NumPy host code with a rule)
        copy_then_step(u, E, c)
        gk.launch(energy, N, w, E)

    r = np.random.default_rng(5)
    arrays = [r.uniform(-0.9, 0.9, N), np.zeros(N), np.zeros(1)]
    _same_floats(program, monkeypatch, arrays, [np.zeros(N), np.zeros(N), np.ones(1)])
    assert count["moved"] == T


def test_a_checkpointed_loop_with_a_copy_inside(monkeypatch, count):
    """Inside the loop's segments nothing is renamed; the copies after the loop are, and the renamed shadows are
    written back before the loop's reverse. The same floats as without renaming and as a plain loop."""
    def program(u, E, c, checkpointed=True):
        def step(t):
            u_old = u.copy()
            _step(u_old, u, c)
        if checkpointed:
            gk.checkpointed_loop(step, 5, snapshots=2)
        else:
            for t in range(5):
                step(t)
        copy_then_step(u, E, c)

    got = _same_floats(program, monkeypatch, *_inputs(6))
    assert count["moved"] == T  # the copies after the loop
    plain = _run(lambda u, E, c: program(u, E, c, False), monkeypatch, *_inputs(6), True)[0]
    np.testing.assert_allclose(got[0], plain[0], rtol=1e-12, atol=1e-14)


def _random_program(rng: np.random.Generator):
    """Random copies, steps (each overwrites its destination whole), losses and rule calls over two user
    buffers and the temporaries the copies make."""
    kinds = rng.choice(["copy", "step", "energy", "rule"], size=int(rng.integers(3, 12)), p=[0.4, 0.4, 0.1, 0.1])
    ops = [(str(k), int(rng.integers(0, 8)), int(rng.integers(0, 8))) for k in kinds]

    def program(u, v, E, c):
        arrays = [u, v]
        for kind, a, b in ops:
            x, y = arrays[a % len(arrays)], arrays[b % len(arrays)]
            if kind == "copy":
                arrays.append(x.copy())
            elif kind == "energy":
                gk.launch(energy, N, x, E)
            elif y is not x and kind == "step":
                _step(x, y, c)
            elif y is not x:
                scale(x, y, c)
        gk.launch(energy, N, u, E)
        gk.launch(energy, N, v, E)
    return program, ops


@pytest.mark.parametrize("case", range(12))
def test_random_programs_of_copies_give_the_same_floats(monkeypatch, count, case):
    rng = np.random.default_rng(1000 + case)
    program, ops = _random_program(rng)
    arrays = [rng.uniform(-0.9, 0.9, N), rng.uniform(-0.9, 0.9, N), np.zeros(1)]
    seeds = [rng.uniform(-1, 1, N) if rng.integers(0, 2) else np.zeros(N), np.zeros(N), np.ones(1)]
    try:
        _same_floats(program, monkeypatch, arrays, seeds)
    except AssertionError as e:
        raise AssertionError(f"case {case}: {ops}\n{e}") from e


@pytest.mark.skipif(compiler() is None, reason="g++ is not on the PATH: backend hostcuda is unavailable")
def test_renamed_on_hostcuda_with_the_same_floats(monkeypatch, count):
    """The renaming is the sweep's, whatever backend runs the kernels: on hostcuda (the CUDA C on the host)
    the same floats with it on and off."""
    before = set_default("hostcuda")
    try:
        _same_floats(copy_then_step, monkeypatch, *_inputs(7))
    finally:
        set_default(before)
    assert count["moved"] == T


def test_renaming_holds_at_most_one_more_shadow(monkeypatch):
    """The memory that stands for the user's shadow is one mapping more at the peak than the sweep without
    renaming holds (docs/programs.md, "Renamed shadows": 433 against 425 MB for copy_2d at 1000²)."""
    def peak(rename: bool) -> int:
        gk.release_memory()
        tracemalloc.start()
        tracemalloc.reset_peak()
        _run(copy_then_step, monkeypatch, *_inputs(8), rename)
        got = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return got

    _run(copy_then_step, monkeypatch, *_inputs(8), True)  # compiled before tracemalloc watches
    off, on = peak(False), peak(True)
    assert on - off <= N * 8 + 1024
