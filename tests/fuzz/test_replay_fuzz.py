"""Replayed launches on temporaries fuzzer (program/replay.py, docs/programs.md#temporaries-replayed-session-47):
random time loops whose body (the same random list of operations every step, some only at some steps) makes
host copies of the state and of older copies (`u.copy()`, `astype`, a copy of a copy), steps from a copy into
the state (write-only and read-modify-write), reads copies kept from earlier steps, copies into an existing
copy (`gk.copy(w, v)`; `gk.copy(w, u)`, the launch `u.copy()` makes, into a copy that has its shadow), fills a
copy, launches on half of a copy or on a copy passed twice, copies an inactive array (no shadow: its memory
lent again), writes a plain array on the host, and adds losses of copies. The
brute-force oracle is the same program with every replay refused (`GRADKERN_REPLAY=off`: each launch worked
out in full): the shadows, the Active scalar's derivative and the final primals must agree to the bit. A
quarter of the programs must rebind some launch to other temporaries (else it tests little); some run at
2**17 points, where a temporary's shadow is a mapping of its own and the sweep renames shadows. Rebinding a
temporary's facts without looking up its own shadow (the last step's kept) fails the first batch.

GRADKERN_FUZZ_REPLAY sets the number of programs (CI default 24), GRADKERN_FUZZ_SEED the seed.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import gradkern as gk
from gradkern.program.replay import LaunchFacts

N_PROGRAMS = int(os.environ.get("GRADKERN_FUZZ_REPLAY", "24"))
SEED = int(os.environ.get("GRADKERN_FUZZ_SEED", "0"))
OPS = ("copy", "step", "step", "rmw_old", "copy_of_copy", "astype", "into_copy", "recopy", "fill_copy", "half",
       "twice", "inactive", "host", "loss", "some_t")


@gk.kernel
def step(x, y, c):
    i = gk.tid()
    y[i] = x[i] + c * gk.sin(x[i]) * x[i]


@gk.kernel
def rmw(x, y, c):
    i = gk.tid()
    y[i] = y[i] + c * x[i] * x[i]


@gk.kernel
def loss(x, E):
    i = gk.tid()
    gk.atomic_add(E, 0, x[i] * x[i])


def _program(rng: np.random.Generator, n: int):
    body = [str(op) for op in rng.choice(OPS, size=int(rng.integers(2, 6)))]
    if "step" not in body:
        body.insert(0, "step")
    if rng.random() < 0.7:
        body.insert(0, "copy")
    steps = int(rng.integers(3, 7))
    at = int(rng.integers(0, steps))

    def program(u, v, E, c):
        k = np.ones(n) * 0.25  # inactive: its copies get no shadow
        copies = [u.copy()]
        for t in range(steps):
            for op in body:
                last, old = copies[-1], copies[max(0, len(copies) - 3)]
                if op == "copy":
                    copies.append(u.copy())
                elif op == "step":
                    gk.launch(step, n, last, u, c)
                elif op == "rmw_old":
                    gk.launch(rmw, n, old, v, c)
                elif op == "copy_of_copy":
                    copies.append(last.copy())
                elif op == "astype":
                    copies.append(v.astype(np.float64))
                elif op == "into_copy":
                    gk.copy(last, v)
                elif op == "recopy":  # the launch `u.copy()` makes, into a copy that has its shadow
                    gk.copy(last, u)
                elif op == "fill_copy":
                    gk.fill(last, 0.5)
                elif op == "half":
                    gk.launch(rmw, n // 2, last[: n // 2], v[n // 2:], c)
                elif op == "twice":
                    w = u.copy()
                    gk.launch(rmw, n, w, w, c)
                    gk.launch(rmw, n, w, u, c)
                elif op == "inactive":
                    z = k.copy()
                    gk.launch(rmw, n, z, v, c)
                elif op == "host":
                    scratch = np.zeros_like(k)
                    scratch[::2] = 1.0 + t
                    gk.launch(rmw, n, gk.Const(scratch), v, c)
                elif op == "loss":
                    gk.launch(loss, n, last, E)
                elif op == "some_t" and t == at:
                    copies.append(u.copy())
                    gk.launch(step, n, copies[-1], v, c)
        gk.launch(loss, n, u, E)
        gk.launch(loss, n, v, E)

    return program, body


def _run(program, n: int, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    u, v = rng.uniform(-0.5, 0.5, n), rng.uniform(-0.5, 0.5, n)
    E = np.zeros(1)
    du, dv, dE = np.zeros(n), np.zeros(n), np.ones(1)
    g = gk.autodiff(program, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Duplicated(E, dE), gk.Active(0.1))
    return u, v, E, du, dv, g[3]


def _bits(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).reshape(-1).view(np.int64)


def test_random_programs_replayed_on_temporaries_are_bit_identical(monkeypatch):
    rng = np.random.default_rng(SEED)
    rebound, programs = [0], 0
    original = LaunchFacts.rebind

    def counted(self, *args):
        ok = original(self, *args)
        rebound[0] += ok
        return ok

    monkeypatch.setattr(LaunchFacts, "rebind", counted)
    with_rebinds = 0
    for case in range(N_PROGRAMS):
        n = 2 ** 17 if case % 8 == 7 else 8
        program, body = _program(rng, n)
        seed = int(rng.integers(1 << 30))
        monkeypatch.setenv("GRADKERN_REPLAY", "off")
        want = _run(program, n, seed)
        monkeypatch.setenv("GRADKERN_REPLAY", "on")
        before = rebound[0]
        got = _run(program, n, seed)
        for w, g, name in zip(want, got, ("u", "v", "E", "du", "dv", "dc")):
            assert np.array_equal(_bits(w), _bits(g)), f"program {case} ({body}, n={n}): {name} differs"
        with_rebinds += rebound[0] > before
        programs += 1
    assert with_rebinds >= programs // 4, f"only {with_rebinds} of {programs} programs rebound a launch"


@pytest.mark.parametrize("mode", ["objects", "off"])
def test_the_replay_switch_refuses_rebinding(monkeypatch, mode):
    """GRADKERN_REPLAY=objects replays only launches on the same objects, =off none; both the same gradients."""
    monkeypatch.setenv("GRADKERN_REPLAY", mode)
    calls = []
    monkeypatch.setattr(LaunchFacts, "rebind", lambda self, *a: calls.append(1) or False)
    program, _ = _program(np.random.default_rng(1), 8)
    _run(program, 8, 3)
    assert not calls
