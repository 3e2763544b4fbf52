"""The recorded steps of a program's tape (docs/programs.md#the-steps-of-a-tape): a
launch (or a rule call, rulestep.py) with what its reverse needs, its kernel
tape and the copy-on-write saves of what it overwrote, written back when the
reverse passes it. Every kind of step (a launch, a rule call, a checkpointed
loop, checkpoint.py) offers the same small interface, `ProgramStep`: the tape,
its report and its sweep ask nothing else of a step."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from ..runtime.call import Bound
from ..runtime.reverse import Tape, run_reverse
from .collectives import before_reverse
from .contents import Contents
from .savepool import POOL
from .scalars import ActiveScalar
from .shadows import _same_geometry, memory_root, populate, release


class Saved:
    """The old contents of a view a launch overwrote, written back when the
    reverse passes that launch (the reverse before it sees its own post-state)
    and freed then. (A class with slots, not a dataclass: one is made per save
    and step of a time loop; docs/programs.md#host-cost-per-step.)"""

    __slots__ = ("view", "data", "nbytes")

    def __init__(self, view: Any, data: Any):
        self.view, self.data, self.nbytes = view, data, int(data.nbytes)

    def whole(self, root: Any) -> bool:
        """Whether the save holds all of `root` laid out as `root` is (a C-ordered copy of the whole of a
        C-contiguous buffer): then it can stand for the buffer (contents.py)."""
        return root.flags.c_contiguous and _same_geometry(self.view, root)

    def restore(self) -> None:
        if isinstance(self.view, np.ndarray) and not self.view.flags.writeable:
            self.view.flags.writeable = True  # made while the program had its buffer locked
        self.view[...] = self.data
        POOL.give(self.data)
        self.data = None


class ProgramStep(Protocol):
    """What a program's tape asks of each of its steps."""

    number: int  # its place in the program (launches, rule calls and loops counted together)
    kernel: str  # what the report names: the kernel, the rule, or "checkpointed_loop"
    stats: Any  # a checkpointed loop's ScheduleStats (steps advanced, recomputed, reversed); None for the others

    @property
    def where(self) -> str:
        """Where the program is once the step has run (the host-write guard names it)."""

    @property
    def saved_bytes(self) -> int:
        """The bytes it holds for its reverse beside its tape (copy-on-write saves, snapshots)."""

    @property
    def tape_bytes(self) -> int:
        """The bytes of its kernel tapes (or a rule's tape)."""

    def roots_written_back(self) -> list:
        """The buffers its reverse writes primal values into."""

    def run_reverse(self, lanes: int, contents: Contents) -> None:
        """Its reverse, on the arrays as it left them (`contents` holds some of them: contents.py); afterwards
        they hold, through `contents`, what they held before it ran."""


def after_launch(number: int, kernel: str) -> str:
    """Where a program is after its launch `number` (of `kernel`, or of a rule). gradkern's own kernels say what
    made them (session 63: "kernel '_fill1'" named no line the user wrote)."""
    if kernel.startswith(("_copy", "_fill")):
        return f"after launch {number} (kernel '{kernel}': a gk.{kernel[1:5]}, or a host assignment or copy)"
    if kernel.startswith("host_"):
        return f"after launch {number} (kernel '{kernel}': host NumPy code as a launch)"
    return f"after launch {number} (kernel '{kernel}')"


@dataclass(slots=True)
class Step:
    """One recorded launch. (Slots: one is made per launch of a time loop, and none ever needs a `__dict__`:
    docs/programs.md#session-48-fewer-objects-and-passes-per-step.)"""

    stats: ClassVar[Any] = None

    number: int
    kernel: str
    prepared: Bound | None  # a prepared reverse call's values (runtime/call.py); None: nothing active
    tape: Tape | None
    saves: list[Saved] = field(default_factory=list)
    scalars: dict[int, ActiveScalar] = field(default_factory=dict)  # parameter position -> its Active scalar
    arrays: tuple | None = None  # contents.array_positions of the prepared values, where the recorder knows them
    # the temporaries' shadows this launch made (it first wrote them): no reverse before its own reads them,
    # so they are given back once it has run (docs/programs.md, "Program shapes")
    made: list | tuple = ()
    mapped: list | tuple = ()  # the temporaries' shadows in mappings it takes: populated first
    cleared: tuple = ()  # the parameters it overwrites whole: its reverse leaves their shadows +0.0 (renames.py)
    moved: tuple | None = None  # a pure move's (destination, source) parameters (record.moved_positions)
    # host reads of its 1-element output (hostreads.py): (the ReadScalar, the output's shadows, the ScalarSweep)
    reads: tuple = ()

    @property
    def where(self) -> str:
        if self.reads:  # a host read's launch: the user's line, not the generated kernel's name (session 58)
            return f"after launch {self.number} ({self.reads[0][0].what})"
        return after_launch(self.number, self.kernel)

    def __str__(self) -> str:
        """Its `where`: the host-write guard keeps the step where it notes where an array was locked and formats
        it only where an error names it (guard.locked_settled)."""
        return self.where

    @property
    def saved_bytes(self) -> int:
        return sum(s.nbytes for s in self.saves)

    @property
    def tape_bytes(self) -> int:
        return self.tape.nbytes if self.tape is not None else 0

    def roots_written_back(self) -> list:
        """The buffers this step's reverse writes primal values into (its saves' buffers)."""
        return [memory_root(s.view) for s in self.saves]

    def run_reverse(self, lanes: int, contents: Contents) -> None:
        """This launch's reverse (on the arrays as the launch left them; a copy's by renaming shadows where
        `contents.renames` can: renames.py), then its saves passed back."""
        if self.reads:
            self.read_back(lanes)
        renames = contents.renames
        if renames is not None and renames.moved(self):
            self.tape = None
        else:
            if self.mapped:
                if renames is None:
                    populate(self.mapped)
                else:
                    renames.populate(self.mapped)
            got = self.derivatives(contents)
            if got is not None:
                for pos, s in self.scalars.items():
                    d = got[pos]
                    if lanes > 1:
                        s.adjoint = s.adjoint + np.asarray(d)  # per lane
                    elif type(d) is float:
                        s.adjoint = s.adjoint + d
                    else:  # on a GPU, not read yet (scalars.py)
                        s.add_device(d)
        for saved in reversed(self.saves):
            contents.passed(saved)
        if self.made:
            if renames is None:
                release(self.made)
            else:
                renames.release(self.made)

    def read_back(self, lanes: int) -> None:
        """Before this launch's reverse: the adjoint of each scalar host code read from its output, complete now
        (scalarsweep.py), added into the output's shadow, per lane (docs/host-code.md, "Reductions and element
        reads")."""
        for s, shadows, sweep in self.reads:
            sweep.down_to(s.order)
            a = s.adjoint
            if shadows is None:  # read from an inactive launch (a Const's sum): its value has no derivative
                pass
            elif lanes == 1:
                shadows[0][0] += a
            else:
                for k, d in enumerate(np.broadcast_to(np.asarray(a, dtype=float), (lanes,)).tolist()):
                    shadows[k][0] += d
            s.adjoint = 0.0
        self.reads = ()

    def derivatives(self, contents: Contents) -> tuple | None:
        """The reverse itself: shadows accumulated, one entry per parameter returned (None: no derivative).
        A launch's reverse reads the saves `contents` holds in place of their buffers."""
        if self.prepared is None:
            return None
        bound = self.prepared
        values = contents.values(bound.values, self.arrays)
        renames = contents.renames
        derivatives = renames.derivatives(bound.derivatives) if renames is not None else None
        if values is not None or derivatives is not None:
            bound = bound.with_values(bound.values if values is None else values, derivatives)
        got = run_reverse(bound, self.tape, True)
        self.tape = None  # freed once used
        if renames is not None:
            renames.reversed(bound.derivatives, self.cleared)
        return got


def reverse_steps(steps: list[ProgramStep], lanes: int, contents: Contents | None = None) -> None:
    """The reverse of recorded steps, last first, each on the arrays as it left them. Without `contents`, the
    buffers end holding what they held before the steps ran."""
    before_reverse()  # collectives that agree before any reverse message (program/collectives.py)
    own = contents is None
    if own:
        contents = Contents(final=False)
    try:
        for step in reversed(steps):
            step.run_reverse(lanes, contents)
    finally:
        if own:
            contents.finish()
