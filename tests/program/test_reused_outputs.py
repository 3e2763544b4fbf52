"""A taped step's launch that is not rerun where its outputs already hold what it writes (program/outputs.py,
docs/checkpointed-loops.md#a-taped-step-after-a-restore). Oracle: the same programs with every such reuse refused
(each taped launch run, the behaviour before), which must give bit-identical shadows, derivatives and final
primals; and the launches reused are those binomial checkpointing restores with a `Move` before taping."""

from __future__ import annotations

import numpy as np
import pytest

import gradkern as gk
from gradkern.kernels import allen_cahn_step
from gradkern.program.checkpoint import CheckpointedLoop
from gradkern.program.outputs import LastWriters
from gradkern.program.schedule import BinomialSchedule
from program.test_checkpoint import PROGRAMS, args_for, checkpointed, energy, one_launch_per_step
from program.test_recompute import _gradient, _same


def count_at_close(monkeypatch, what) -> list[int]:
    """`what(loop)` of each checkpointed loop, appended as the loops end."""
    counts = []
    close = CheckpointedLoop.close

    def counted(self):
        if self.mode.name != "EXHAUSTED":
            counts.append(what(self))
        close(self)
    monkeypatch.setattr(CheckpointedLoop, "close", counted)
    return counts


def count_reused(monkeypatch) -> list[int]:
    """The launches each checkpointed loop did not rerun, appended as the loops end."""
    return count_at_close(monkeypatch, lambda loop: loop.writers.reused)


@pytest.fixture
def reused(monkeypatch):
    """The launches each checkpointed loop did not rerun, in order of the loops' ends."""
    return count_reused(monkeypatch)


def _moves_before_a_tape(nsteps: int, snapshots: int) -> int:
    """How often the default schedule (one snapshot kept for the final state) restores step n with a Move and
    then tapes step n."""
    actions = list(BinomialSchedule(nsteps, snapshots - 1))
    return sum(1 for a, b in zip(actions, actions[1:]) if type(a).__name__ == "Move"
               and type(b).__name__ == "Forward" and b.write_adj_deps and b.n0 == a.n)


@pytest.mark.parametrize("name", [*PROGRAMS, "one_launch_per_step"])
@pytest.mark.parametrize("snapshots", [2, 5])
def test_reused_outputs_give_the_gradients_of_launches_run_again(name, snapshots, reused, monkeypatch):
    nsteps, n = 20, 12
    make = one_launch_per_step if name == "one_launch_per_step" else PROGRAMS[name]
    arg_name = "heat_ping_pong" if name == "one_launch_per_step" else name
    got = _gradient(make(checkpointed(snapshots)), args_for(arg_name, n, nsteps))
    if name == "one_launch_per_step":  # after every Move the other buffer holds the taped step's output,
        # written by step n or restored from the snapshot at n + 1
        assert reused[-1] == _moves_before_a_tape(nsteps, snapshots) > 0
    elif name == "heat_ping_pong":  # two launches a step: the restored step's first output was overwritten since
        assert reused[-1] == 0
    monkeypatch.setattr(CheckpointedLoop, "_reusable", lambda self: False)
    want = _gradient(make(checkpointed(snapshots)), args_for(arg_name, n, nsteps))
    assert reused[-1] == 0
    _same(want, got)


def test_a_host_write_before_the_launch_is_seen():
    """A step that fills the buffer its launch then overwrites whole (a launch of its own, numbered before it), and
    writes a non-active array on the host (NumPy's write, counted), reruns the launch: the gradient is the plain
    loop's. (A host write into the buffer itself is refused: a launch took it, program/guard.py.)"""
    n, nsteps = 10, 16

    def program(loop):
        def run(u, v, w, E, c, k):
            def step(t):
                a, b = (u, v) if t % 2 == 0 else (v, u)
                gk.fill(b, 7.0)
                w[1] = float(t)  # a plain host write into a non-active array
                gk.launch(allen_cahn_step, n, a, b, c, 0.01)
            loop(step, k)
            gk.launch(energy, n, u, E)
        return run

    def args():
        rng = np.random.default_rng(5)
        return [gk.Duplicated(rng.uniform(-0.5, 0.5, n), np.zeros(n)), gk.Duplicated(np.zeros(n), np.zeros(n)),
                gk.Const(np.zeros(n)), gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.3), nsteps]

    def plain(step, k):
        for t in range(k):
            step(t)
    want = _gradient(program(plain), args())
    got = _gradient(program(checkpointed(3)), args())
    for a, b in zip(want[0], got[0], strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)
    assert got[1][0] == pytest.approx(want[1][0], rel=1e-12)


class _Host:
    writes = 0


class _Found:
    state: dict = {}
    steps: dict = {}


def test_last_writers_follow_launches_restores_and_host_writes():
    host = _Host()
    w = LastWriters(host, _Found())
    a, b, tmp = np.zeros(2), np.zeros(2), np.zeros(2)
    _Found.state = {id(a): a, id(b): b}
    _Found.steps = {3: 1, 4: 2, 5: 2}
    w.start(3)
    w.wrote([id(b), id(tmp)])  # launch 0 of step 3 writes b and a temporary
    w.start(3)
    assert w.holds([b], [b])  # the same launch again: b holds its output
    assert not w.holds([b], [])  # not overwritten whole
    assert not w.holds([b, tmp], [b, tmp])  # a temporary's id may be another's next time: never trusted
    w.start(4)
    assert not w.holds([b], [b])  # another step's launch
    w.start(3)
    host.writes += 1  # any host write forgets every buffer
    assert not w.holds([b], [b])
    w.wrote([id(b)])
    w.start(3)
    assert w.holds([b], [b])
    w.forget([id(b)])  # a reverse wrote it
    assert not w.holds([b], [b])
    w.start(3)
    w.wrote([id(b)])
    w.end(1)  # step 3, of signature 1, wrote b last in its launch 0
    w.restored([id(b), id(tmp)], 4)  # the state at step 4
    w.start(3)
    assert w.holds([b], [b])  # launch 0 of a step of signature 1 is the last to write b: it left state 4 there
    w.start(5)
    assert not w.holds([b], [b])  # another step
