"""One control communicator per group of processes (docs/distributed.md#deadlocks-and-how-gradkern-prevents-them):
every check that gradkern.mpi settles with a collective on a group (an exchange's, an allreduce's, a checkpointed
loop's entry, a reverse's start) runs on that group's control communicator, one Allreduce of one format
(agreement.agree_fast), and names the call it was made for (its `site`). Ranks of one group that reached different
calls (one more exchange on one rank; an exchange on another grid of the same ranks; a loop's entry agreed over
another grid) therefore meet in the same collective and see that their sites differ, instead of each waiting in a
collective of its own communicator.

The control of a group is a Dup of the first communicator over it that gradkern used (a grid's, an allreduce's):
made collectively, at a call every process of the group makes, so every process of the group has one control for
it or none, and looks it up alike (MPI.Group.Compare, IDENT). A control is freed when the last grid over its group
is freed (`grid.free()` on every rank), by a decision its ranks agree on (`grid_freed`): grids made and not freed
over the group, none on every rank; the control's not the latest gkm.allreduce's, and no program's calls on it
waiting for their agreement, on every rank. A later call over the group makes a new one
(docs/distributed.md#its-own-communicators-and-tags).

A control counts the calls a program made on it since the last reverse's start or forward-mode program's end
(`pending`); that point agrees on them (before_reverse, program/collectives.py), so a rank whose plain Python loop made
one call fewer meets the others' extra call there. Grids over the group take their identity from its count of grids
made (`made`: every process of the group makes the same grids over it)."""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

from ..errors import GradkernError
from ..program.collectives import register, unregister
from . import deadline
from .agreement import agree_fast

END = "the program's end (its reverse's start)"  # the site where before_reverse agrees
_controls: list[Control] = []  # the controls, oldest first
_by_comm: dict[int, tuple] = {}  # id(comm) -> (comm, its control): the comm held, so that its id is not reused
_last_reduced: Control | None = None  # the control of the latest gkm.allreduce


class Control:
    """The control communicator of one group of processes."""

    def __init__(self, comm: Any):
        self.comm: Any = None  # a Dup of comm, made by open()
        self.group = comm.Get_group()
        self.made = 0  # grids made over the group: a grid's identity among them
        self.live = 0  # grids made over the group and not freed (grid.free()): the same on every process of it
        self.broken: str | None = None  # a wait on its communicator passed its deadline (deadline.py): refuse
        # "reduce" once a gkm.allreduce ran on the group: the latest such group agrees on a loop's entry while no grid
        # is alive (program/collectives.py)
        self.scope: str | None = None
        self.pending = 0  # calls a program made here since the last reverse's start or forward-mode program's end

    def open(self, comm: Any, what: str) -> None:
        """The Dup of `comm`: collective over the group, made at a call every process of it makes; with the deadline
        (a process whose partners never make the call raises there, and the control stays broken)."""
        self.comm = deadline.dup(comm, self, lambda: f"{what}: making the control communicator of "
                                                     f"{deadline.ranks(comm)}, at their first gradkern.mpi call "
                                                     "over them (a collective: every rank of comm makes it)")

    def agree(self, problem: str | None, what: str, dtype: Any, size: int = 0, active: int = 0, shape: tuple = (),
              site: tuple = ()) -> None:
        """agreement.agree_fast on this group's control. Refused, it raises on every process of the group at this
        call, and each forgets the calls counted since the last agreement: a program that raised at an exchange
        cannot leave a count that would make the next reverse agree on some processes only."""
        deadline.refuse_if_broken(self, what)
        try:
            agree_fast(self.comm, problem, what, dtype, size, active, shape, site, self)
        except GradkernError:
            self.pending = 0
            raise

    def agree_loop(self, entry: Any) -> None:
        """A checkpointed loop's entry while no grid is alive (program/collectives.py): the group of the latest
        gkm.allreduce agrees on the loop's schedule."""
        from .agreement import agree_schedule

        agree_schedule(self, entry, memory=False, scope="the ranks of the latest gkm.allreduce")

    def start_program(self) -> None:
        """A program starts: only its own calls are counted (program/collectives.py)."""
        self.pending = 0

    def before_reverse(self) -> None:
        """Before the reverse of a program's recorded steps, and at a forward-mode program's end: when it made calls
        here since the last such point, every process agrees that it has reached it. A process whose extra call (a
        plain Python loop of another trip count) still waits in its check meets this one there, and both raise."""
        if self.pending:
            self.pending = 0
            self.agree(None, END, None, site=(END,))

    def grid_freed(self, label: str) -> None:
        """`grid.free()` of a grid over the group, on every process of it (a collective call): when none made over
        it remains unfreed, free the control if every process of the group can (none has it as its latest
        gkm.allreduce's, where loops agree while no grid is alive, or counts a program's calls on it not yet
        agreed): one check of the call's site, then one Allreduce(MIN) of whether each can, so every process frees
        it or none does. A freed control's group gets a new one at its next call."""
        self.live -= 1
        if self.live or self.broken is not None:  # broken: nothing can be agreed on it any more
            return
        what = f"grid.free() of {label}"
        self.agree(None, what, None, site=("grid.free()", label))
        mine = np.array([self is not _last_reduced and not self.pending], dtype=np.int64)
        every = np.empty_like(mine)
        deadline.allreduce(self.comm, mine, every, MPI.MIN, self,
                           lambda: f"{what}: whether every rank of {deadline.ranks(self.comm)} frees their control "
                                   "communicator")
        if every[0]:
            self.comm.Free()
            self.group.Free()
            _controls.remove(self)
            unregister(self)
            for key in [k for k, (_, c) in _by_comm.items() if c is self]:
                del _by_comm[key]


def control(comm: Any, what: str = "gradkern.mpi") -> Control:
    """The control of `comm`'s group, made (collectively) at the group's first call (`what`: that call, named if
    its making passes the deadline)."""
    hit = _by_comm.get(id(comm))
    if hit is not None and hit[0] is comm:
        return hit[1]
    for key in [k for k, (c, _) in _by_comm.items() if c == MPI.COMM_NULL]:  # communicators freed since
        del _by_comm[key]
    group = comm.Get_group()
    try:
        found = next((c for c in _controls if MPI.Group.Compare(group, c.group) == MPI.IDENT), None)
    finally:
        group.Free()
    if found is None:
        found = Control(comm)
        _controls.append(found)  # kept if its making passes the deadline: broken, it refuses every later call
        register(found)  # the program layer calls its agree_loop and before_reverse (program/collectives.py)
        found.open(comm, what)
    _by_comm[id(comm)] = (comm, found)
    return found


def reduced_on(found: Control) -> None:
    """A gkm.allreduce ran on the group: the group of the latest one is where loops agree while no grid is alive
    (the one control of scope "reduce"). The registry's order stays that of the controls' making, the same on every
    process of a group: before_reverse runs their collectives in that order."""
    global _last_reduced
    if found is not _last_reduced:
        if _last_reduced is not None:
            _last_reduced.scope = None
        found.scope = "reduce"
        _last_reduced = found
