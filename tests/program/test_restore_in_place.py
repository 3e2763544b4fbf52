"""A restore read in place (program/snapshots.py `Deferred`, docs/checkpointed-loops.md#a-restore-read-in-place).
Oracle: the same programs with every restore written back at once (`checkpoint.IN_PLACE` False), which must give
bit-identical shadows, derivatives and final primals; and the launches that read a snapshot in place are those
after each restore (a `Copy`) that the schedule follows with an untaped advance."""

from __future__ import annotations

import pytest

from gradkern.program import checkpoint
from gradkern.program.schedule import BinomialSchedule
from gradkern.runtime import blocked
from program.test_checkpoint import PROGRAMS, args_for, checkpointed, one_launch_per_step
from program.test_recompute import _gradient, _same
from program.test_reused_outputs import count_at_close


def _copies_before_an_advance(nsteps: int, snapshots: int) -> int:
    """How often the default schedule (one snapshot kept for the final state) restores step n with a Copy and then
    advances from n without a tape."""
    actions = list(BinomialSchedule(nsteps, snapshots - 1))
    return sum(1 for a, b in zip(actions, actions[1:]) if type(a).__name__ == "Copy"
               and type(b).__name__ == "Forward" and not b.write_adj_deps and b.n0 == a.n)


@pytest.mark.parametrize("name", [*PROGRAMS, "one_launch_per_step"])
@pytest.mark.parametrize("snapshots", [2, 5])
@pytest.mark.parametrize("held", [False, True])
def test_restores_read_in_place_give_the_gradients_of_restores_written_back(name, snapshots, held, monkeypatch):
    nsteps, n = 20, 12
    if held:  # every recomputed run held for a blocked pass, whose first launch reads the snapshot in place
        monkeypatch.setattr(blocked, "MIN_BYTES", 0)
        monkeypatch.setattr(blocked, "TILE", 7)
    counts = count_at_close(monkeypatch, lambda loop: loop.stats.read_in_place)
    make = one_launch_per_step if name == "one_launch_per_step" else PROGRAMS[name]
    arg_name = "heat_ping_pong" if name == "one_launch_per_step" else name
    got = _gradient(make(checkpointed(snapshots)), args_for(arg_name, n, nsteps))
    if name == "one_launch_per_step":
        assert counts[-1] == _copies_before_an_advance(nsteps, snapshots) > 0
    monkeypatch.setattr(checkpoint, "IN_PLACE", False)
    want = _gradient(make(checkpointed(snapshots)), args_for(arg_name, n, nsteps))
    assert counts[-1] == 0
    _same(want, got)
