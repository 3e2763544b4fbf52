"""A recorded launch replayed (program/replay.py, docs/programs.md#host-cost-per-step): the facts a recorder worked
out for a launch are reused by the next launch of the same kernel on the same array objects only while nothing
they depend on changed. Oracle: the same program recorded with every replay refused (each launch worked out in
full, the behaviour before replay.py), which must give bit-identical shadows, derivatives and final primals."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import gradkern as gk
from gradkern.program.replay import LaunchFacts, Replays
from program.test_programs import energy, ping_pong

program_replay = importlib.import_module("gradkern.program.replay")


@gk.kernel
def add_into(x, y):
    i = gk.tid()
    y[i] = y[i] + x[i]


@gk.kernel
def times(x, y, c):
    i = gk.tid()
    y[i] = c * x[i]


def _gradient(fn, arrays, c):
    """Shadows, dc and final primals of `fn(*arrays, c)`, the last array's shadow seeded with ones."""
    xs = [a.copy() for a in arrays]
    ds = [np.zeros_like(a) for a in arrays]
    ds[-1][...] = 1.0
    got = gk.autodiff(fn, *(gk.Duplicated(x, d) for x, d in zip(xs, ds)), gk.Active(c))
    return ds, got[-1], xs


def _without_replays(monkeypatch):
    monkeypatch.setattr(Replays, "find", lambda self, *a: None)


def test_ping_pong_is_bit_identical_with_and_without_replays(monkeypatch):
    n, steps = 300, 12
    rng = np.random.default_rng(3)
    arrays = (rng.uniform(-0.9, 0.9, n), np.zeros(n), np.zeros(1))
    def loop(u, v, E, c):
        ping_pong(u, v, E, c, steps)

    with_replays = _gradient(loop, arrays, 0.2)
    _without_replays(monkeypatch)
    without = _gradient(loop, arrays, 0.2)
    for a, b in zip(with_replays, without):
        for x, y in zip(a if isinstance(a, list) else [a], b if isinstance(b, list) else [b]):
            assert np.array_equal(x, y)


def test_a_shadow_given_between_two_launches_on_the_same_arrays_is_seen():
    """tmp has no shadow at the first add_into (a Const), gets one when `times` writes an active value into it; the
    second add_into, the same kernel on the same objects, must take it (a replay of the first would drop du)."""
    n = 64

    def prog(u, out, c):
        tmp = np.ones_like(u)
        gk.launch(add_into, n, tmp, out)
        gk.launch(times, n, u, tmp, c)
        gk.launch(add_into, n, tmp, out)

    rng = np.random.default_rng(4)
    u = rng.uniform(-1, 1, n)
    (du, dout), dc, (u_end, out_end) = _gradient(prog, (u, np.zeros(n)), 0.5)
    assert np.array_equal(du, np.full(n, 0.5)) and dc == pytest.approx(u.sum(), rel=1e-12)
    assert np.allclose(out_end, 1.0 + 0.5 * u)


def test_facts_refuse_other_objects_and_changed_geometry():
    a, b = np.zeros(8), np.zeros(8)
    facts = LaunchFacts(energy, 8, (a, b), [gk.Const(a), gk.Const(b)], False, None, (a, b), (1,), (), (), (), 0)
    assert facts.matches(energy, 8, (a, b), 0)
    assert not facts.matches(energy, 8, (a, b), 1)  # a shadow registered or removed since
    assert not facts.matches(energy, (8,), (a, b), 0)  # another launch shape
    assert not facts.matches(energy, 8, (a, np.zeros(8)), 0)  # another object with the same geometry
    b.shape = (2, 4)  # the same object, reshaped in place
    assert not facts.matches(energy, 8, (a, b), 0)
    b.shape = (8,)
    assert facts.matches(energy, 8, (a, b), 0) and facts.same(None, (a, b)) and not facts.same(None, (a, a))


def test_the_replays_kept_are_bounded(monkeypatch):
    monkeypatch.setattr(program_replay, "MAX_REPLAYS", 4)
    replays, kept = Replays(), []
    for _ in range(10):
        a = np.zeros(4)
        kept.append(a)
        replays.keep(LaunchFacts(energy, 4, (a,), [gk.Const(a)], False, None, (a,), (), (), (), (), 0), (a,), None)
    assert len(replays.entries) <= 4
