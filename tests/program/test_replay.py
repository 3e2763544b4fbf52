"""A recorded launch replayed (program/replay.py, docs/programs.md#host-cost-per-step): the facts a recorder worked
out for a launch are reused by the next launch of the same kernel on the same array objects only while nothing
they depend on changed. Oracle: the same program recorded with every replay refused (each launch worked out in
full, the behaviour before replay.py), which must give bit-identical shadows, derivatives and final primals."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import gradkern as gk
from gradkern.kernels import allen_cahn_step
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
    # signed replays (the prepared call refilled without `signature` or annotations: call.refill_known) refused:
    # every replay prepared in full
    monkeypatch.setattr(LaunchFacts, "signed", lambda self, *a: None)
    _assert_identical(with_replays, _gradient(loop, arrays, 0.2))
    _without_replays(monkeypatch)
    _assert_identical(with_replays, _gradient(loop, arrays, 0.2))


def _assert_identical(got, want):
    """Two `_gradient` results bit for bit the same."""
    for a, b in zip(got, want):
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


def test_a_signed_replay_is_refused_when_what_the_signature_reads_changed():
    """The flags of an argument or a shadow, a shadow's geometry, a scalar's type, a launch shape of numpy
    integers or another backend: each makes `signed` answer None (the call is then
    prepared in full, which validates it)."""
    import gradkern.runtime.call as runtime_call
    from gradkern.program.scalars import ActiveScalar
    from gradkern.program.shadows import ShadowMap
    from gradkern.runtime.callkey import backend_name

    n = 16
    u, v, du, dv = np.ones(n), np.zeros(n), np.zeros(n), np.zeros(n)
    shadows = ShadowMap()
    shadows.register("u", u, (du,))
    shadows.register("v", v, (dv,))
    c = ActiveScalar(0.2)
    args = (u, v, c, 0.01)
    annotated = [gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Active(0.2), gk.Const(0.01)]
    call, bound = runtime_call.prepare(allen_cahn_step, tuple(annotated), n, None, "reverse")
    assert call.key is not None
    facts = LaunchFacts(allen_cahn_step, n, args, annotated, True, call, bound.given, (1,), (0,), (), (), 0)
    assert facts.signed(args, n, None) is call
    bound = runtime_call.again(call, allen_cahn_step, (u, v, 0.2, 0.01), facts.known)
    assert bound is not None and bound.values[0] is u and bound.values[1] is v and bound.values[2] == 0.2
    assert {name: tuple(id(d) for d in ds) for name, ds in bound.derivatives.items()} == \
        {name: (id(d),) for name, d in zip(call.names, (du, dv))}
    assert runtime_call.refill_known(call, (u, v, float("nan"), 0.01), *facts.known) is None  # prepare raises
    assert facts.signed((u, v, c, np.float32(0.01)), n, None) is None  # another scalar type
    assert facts.signed((u, v, ActiveScalar(0.5), 1), n, None) is None  # an int where a float was
    assert facts.signed((u, v, ActiveScalar(0.5), 0.02), n, None) is call  # other values of the same types
    assert facts.signed(args, (np.int64(n),), None) is None  # a launch shape `signature` does not key
    other = "cpu" if backend_name(None) == "hostcuda" else "hostcuda"
    assert facts.signed(args, n, other) is None  # another backend
    for a in (u, dv):
        a.flags.writeable = False
        assert facts.signed(args, n, None) is None  # flags (the binding refuses a read-only shadow)
        a.flags.writeable = True
        assert facts.signed(args, n, None) is call
    dv.shape = (2, n // 2)
    assert facts.signed(args, n, None) is None  # a shadow reshaped in place
    dv.shape = (n,)
    assert facts.signed(args, n, None) is call


def test_a_shadow_made_read_only_between_two_launches_raises_as_a_first_launch_would():
    """Bad input still raises before any buffer is touched when the launch before was replayed: the second
    launch's shadow is read-only, which `signed` sees (its flags) and the full preparation refuses."""
    n = 32
    u, v, du, dv = np.linspace(0.1, 0.9, n), np.zeros(n), np.zeros(n), np.zeros(n)

    def prog(u, v, c):
        gk.launch(allen_cahn_step, n, u, v, c, 0.01)
        gk.launch(allen_cahn_step, n, v, u, c, 0.01)
        gk.launch(allen_cahn_step, n, u, v, c, 0.01)  # a replay of the first
        dv.flags.writeable = False
        gk.launch(allen_cahn_step, n, v, u, c, 0.01)  # would be a replay of the second

    with pytest.raises(gk.AnnotationError):
        gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Active(0.2))
    dv.flags.writeable = True


def test_a_signed_replay_binds_the_objects_it_matched(monkeypatch):
    """The recorder skips `LaunchFacts.same` where a signed replay refilled the facts' own call (record.py): the
    runtime then bound the objects `matches` found (an array's value is never converted), so `same` holds for every
    such launch: asserted here at each one, over the ping-pong program and a repeated add."""
    record = importlib.import_module("gradkern.program.record")
    checked, last = [], []
    real_signed, real_again = LaunchFacts.signed, record.again

    def signed(self, *a):
        call = real_signed(self, *a)
        last[:] = [self] if call is not None else []
        return call

    def again(call, kernel, plain, known=None):
        bound = real_again(call, kernel, plain, known)
        if bound is not None:
            assert last[0].call is call and last[0].same(call, bound.given)
            checked.append(kernel.name)
        return bound

    monkeypatch.setattr(LaunchFacts, "signed", signed)
    monkeypatch.setattr(record, "again", again)
    n, steps = 64, 6
    rng = np.random.default_rng(5)

    def loop(u, v, E, c):
        ping_pong(u, v, E, c, steps)
        for _ in range(3):
            gk.launch(add_into, n, v, u)
            gk.launch(add_into, n, u, u)  # an array passed twice: prepared in full (no signed replay)

    _gradient(loop, (rng.uniform(-0.9, 0.9, n), np.zeros(n), np.zeros(1)), 0.2)
    assert checked.count("allen_cahn_step") >= steps - 2 and checked.count("add_into") >= 2


def test_the_facts_keep_mapped_only_for_their_own_shadows():
    a = np.zeros(8)
    facts = LaunchFacts(energy, 8, (a,), [gk.Const(a)], False, None, (a,), (), (), (), (), 0)
    other = {"u": (np.zeros(8),)}
    assert facts.mapped(other) == [] and facts._mapped is None  # not the facts' dict: worked out, not kept


@pytest.mark.parametrize("n", [64, 300])  # below and above SERIAL_THREADS: a twin, a primal chosen by timing
def test_a_sweep_replaying_one_prepared_call_is_bit_identical(monkeypatch, n):
    """The sweep reverses a prepared call of one run, and the recorder runs its augmented primal, through the
    backend's launcher once the call has run (runtime/reverse.py: `_replay`, `_launcher`, Backend.launcher): the
    same shadows, dc and final primals bit for bit as every launch through `Run.__call__`; and the launchers ran."""
    reverse = importlib.import_module("gradkern.runtime.reverse")
    steps = 12
    rng = np.random.default_rng(6)
    arrays = (rng.uniform(-0.9, 0.9, n), np.zeros(n), np.zeros(1))

    def loop(u, v, E, c):
        ping_pong(u, v, E, c, steps)

    made, real = [], reverse._replay

    def counted(bound, taped):
        got = real(bound, taped)
        if got is None:
            return None

        def replay(*a):
            made.append(bound.call.kernel.name)
            return got(*a)
        return replay

    calls = importlib.import_module("gradkern.runtime.call")._CALLS

    def forget():  # the prepared calls are kept across tests, each with its launchers once asked
        for call in list(calls.values()):
            call.replay = call.primal_launch = None

    forget()
    monkeypatch.setattr(reverse, "_replay", counted)
    replayed = _gradient(loop, arrays, 0.2)
    assert made.count("allen_cahn_step") >= 2 * steps - 2
    if n < importlib.import_module("gradkern.backends.numba_cpu").SERIAL_THREADS:  # a twin: no choice by timing
        assert any(c.primal_launch for c in calls.values() if c.kernel is allen_cahn_step)
    forget()
    monkeypatch.setattr(reverse, "_launcher", lambda *a: None)  # every launch through Run.__call__
    _assert_identical(replayed, _gradient(loop, arrays, 0.2))
    assert not any(c.primal_launch or c.replay for c in calls.values())
    forget()
