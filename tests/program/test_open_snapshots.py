"""The first forward's open snapshots indexed by buffer (program/snapshots.py `OpenSnapshots`,
docs/checkpointed-loops.md#open-snapshots-indexed-by-buffer). Oracle: the walk it replaced, every open snapshot
in the order opened asked of each buffer a launch writes, run beside it on the same launches; after every
launch and every freed temporary, each open snapshot must have copied and skipped exactly the buffers the walk
says."""

from __future__ import annotations

import pytest

from gradkern.program.snapshots import OpenSnapshots
from program.test_checkpoint import PROGRAMS, args_for, checkpointed, one_launch_per_step
from program.test_recompute import _gradient


class _Walk:
    """The walk over every open snapshot (the code before the index): per snapshot, the buffers it copied,
    skipped, and those a launch took since it was opened."""

    def __init__(self):
        self.kept: dict[int, tuple[set, set, set]] = {}  # id(snapshot) -> (copied, skipped, used)
        self.keys: dict[int, int] = {}  # id(weak reference) -> id(buffer), of every buffer a launch took
        self.freed_calls = self.freed_copies = 0

    def of(self, snap):
        return self.kept.setdefault(id(snap), (set(), set(), set()))

    def before_write(self, open_, written, taken, refs, dead, may_skip):
        for key in taken:
            self.keys[id(refs[key])] = key
        for snap in open_.snaps:
            copied, skipped, used = self.of(snap)
            for key in written:
                if key not in copied and key not in skipped:
                    (skipped if key in dead and key not in used and may_skip(snap, key) else copied).add(key)
            used.update(taken)

    def freed(self, open_, ref):
        """A freed buffer is forgotten by every open snapshot (copied, skipped, taken since): a buffer given its id
        later is a new one (docs/programs.md#objects-keyed-by-identity)."""
        self.freed_calls += 1
        key = self.keys.pop(id(ref), None)
        for snap in open_.snaps:
            copied, skipped, used = self.of(snap)
            self.freed_copies += any(r is ref for r, _, _ in snap.copies.values())
            copied.discard(key)
            skipped.discard(key)
            used.discard(key)

    def agrees(self, open_):
        for snap in open_.snaps:
            copied, skipped, _ = self.of(snap)
            assert set(snap.copies) == copied and snap.skipped == skipped


@pytest.mark.parametrize("name", [*PROGRAMS, "one_launch_per_step"])
@pytest.mark.parametrize("snapshots", [2, 5, 20])
def test_the_index_decides_as_a_walk_over_every_open_snapshot(name, snapshots, monkeypatch):
    nsteps, n = 20, 12
    walk = _Walk()
    before_write, freed = OpenSnapshots.before_write, OpenSnapshots.freed

    def checked_write(self, written, taken, refs, dead, may_skip):
        walk.before_write(self, written, taken, refs, dead, may_skip)
        before_write(self, written, taken, refs, dead, may_skip)
        walk.agrees(self)

    def checked_freed(self, ref):
        walk.freed(self, ref)
        freed(self, ref)
        walk.agrees(self)
    monkeypatch.setattr(OpenSnapshots, "before_write", checked_write)
    monkeypatch.setattr(OpenSnapshots, "freed", checked_freed)
    make = one_launch_per_step if name == "one_launch_per_step" else PROGRAMS[name]
    _gradient(make(checkpointed(snapshots)), args_for("heat_ping_pong" if name == "one_launch_per_step" else name,
                                                      n, nsteps))
    assert walk.kept  # snapshots were open while launches wrote
    if name == "time_dependent":  # its steps' temporaries are freed while snapshots are open
        # (a temporary its step overwrites whole unread is skipped, not copied, by the snapshots open before it: so
        # freed_copies is not asserted)
        assert walk.freed_calls
