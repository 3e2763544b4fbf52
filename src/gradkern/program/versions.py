"""Copy-on-write versions of a program's buffers (docs/programs.md#what-is-recorded-and-saved).

One object per recording keeps which buffers' current contents a recorded
reverse reads; a step about to write a view asks it first, and it saves the
view's old contents when they are still read, to be written back when the
reverse passes the step. Launches (record.py), rule calls (rulestep.py) and a
checkpointed loop's taped segments (checkpoint.py) each have one and call it;
none of them writes its tables.

Versions are kept per buffer (the array that owns the memory): a launch that
writes a whole buffer makes its old contents unneeded by later steps until
some step's reverse reads the buffer again.
"""

from __future__ import annotations

from typing import Any

from .savepool import POOL
from .shadows import memory_root
from .steps import Saved


class Versions:
    """Which buffers' current contents a recorded reverse reads, and the saves a write makes of them."""

    def __init__(self, read: dict[int, Any] | None = None):
        """`read`: buffers (id -> buffer) whose current contents a reverse recorded elsewhere reads."""
        self._needed: dict[int, bool] = {key: True for key in read or {}}
        # the buffers `_needed` names, kept alive so that their ids stay theirs
        self._roots: dict[int, Any] = dict(read or {})

    def before_write(self, view: Any, saves: list[Saved]) -> None:
        """A step is about to write `view`: its old contents go to `saves` if a recorded reverse reads them."""
        root = memory_root(view)
        self._roots.setdefault(id(root), root)
        if self._needed.get(id(root)):
            saves.append(Saved(view, POOL.copy_of(view)))

    def needed(self, view: Any) -> bool:
        """Whether a recorded reverse reads `view`'s buffer as it is now (a write must save it first)."""
        return bool(self._needed.get(id(memory_root(view))))

    def save_filled(self, view: Any, saves: list[Saved]) -> Any:
        """A step about to write `view`, needed, copies its old contents itself as it writes (the augmented
        primal's saves): returns the buffer it fills, recorded in `saves`."""
        root = memory_root(view)
        self._roots.setdefault(id(root), root)
        data = POOL.empty_like(view)
        saves.append(Saved(view, data))
        return data

    def written(self, view: Any) -> None:
        """A launch wrote `view` (all of it): when it spans its buffer, no recorded reverse reads the new contents
        yet (the elements a launch writes never overlap, so a view as large as its buffer is all of it)."""
        root = memory_root(view)
        if view.nbytes == root.nbytes:
            self._needed[id(root)] = False

    def read_by_reverse(self, view: Any) -> None:
        """A recorded step's reverse reads `view`'s buffer as it is now."""
        root = memory_root(view)
        self._roots.setdefault(id(root), root)
        self._needed[id(root)] = True

    def read(self) -> dict[int, Any]:
        """The buffers (id -> buffer) whose current contents a recorded reverse reads."""
        return {key: self._roots[key] for key, needed in self._needed.items() if needed}
