"""The recorded steps of a program's tape (docs/programs.md): a launch (or a rule
call, rulestep.py) with what its reverse needs, its kernel tape and the
copy-on-write saves of what it overwrote, written back when the reverse
passes it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..runtime.call import Bound
from ..runtime.reverse import Tape, run_reverse
from .scalars import ActiveScalar
from .shadows import memory_root


@dataclass
class Saved:
    """The old contents of a view a launch overwrote, written back when the
    reverse passes that launch (the reverse before it sees its own post-state)
    and freed then."""

    view: Any
    data: Any
    nbytes: int = 0

    def __post_init__(self):
        self.nbytes = int(self.data.nbytes)

    def restore(self) -> None:
        if isinstance(self.view, np.ndarray) and not self.view.flags.writeable:
            self.view.flags.writeable = True  # made while the program had its buffer locked
        self.view[...] = self.data
        self.data = None


@dataclass
class Launched:
    """Where a forward-mode program was when it locked an array (the host-write guard names it)."""

    number: int
    kernel: str


@dataclass
class Step:
    """One recorded launch."""

    number: int
    kernel: str
    prepared: Bound | None  # a prepared reverse call's values (runtime/call.py); None: nothing active
    tape: Tape | None
    saves: list[Saved] = field(default_factory=list)
    scalars: dict[int, ActiveScalar] = field(default_factory=dict)  # parameter position -> its Active scalar

    @property
    def saved_bytes(self) -> int:
        return sum(s.nbytes for s in self.saves)

    @property
    def tape_bytes(self) -> int:
        return self.tape.nbytes if self.tape is not None else 0

    def roots_written_back(self) -> list:
        """The buffers this step's reverse writes primal values into (its saves' buffers)."""
        return [memory_root(s.view) for s in self.saves]

    def run_reverse(self, lanes: int) -> None:
        """This launch's reverse (on the arrays as the launch left them), then its saves written back."""
        got = self.derivatives()
        if got is not None:
            for pos, s in self.scalars.items():
                s.adjoint = s.adjoint + (np.asarray(got[pos]) if lanes > 1 else got[pos])  # per lane in vector mode
        for saved in reversed(self.saves):
            saved.restore()

    def derivatives(self) -> tuple | None:
        """The reverse itself: shadows accumulated, one entry per parameter returned (None: no derivative)."""
        if self.prepared is None:
            return None
        got = run_reverse(self.prepared, self.tape)
        self.tape = None  # freed once used
        return got


def reverse_steps(steps: list, lanes: int) -> None:
    """The reverse of recorded steps, last first, each on the arrays as it left them."""
    for step in reversed(steps):
        step.run_reverse(lanes)
