"""What each buffer holds for the step a program's sweep reverses now
(docs/programs.md#saved-copies-and-the-sweep).

A step's reverse reads the arrays as that step left them. Instead of writing
each save back into its buffer when the sweep passes the step that made it (a
copy per save, and a copy of every such buffer before the sweep so that the
primals end as the program left them), the sweep keeps a whole-buffer save
as the buffer's contents and hands the earlier steps' reverses views of the
save in place of the buffer's. A buffer is written only where that cannot be
done: a save of part of a buffer, or a step whose reverse reads buffers
through other means (a rule's reverse, a checkpointed loop); its final
contents are copied first, and written back when the sweep ends.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..runtime.arrays import is_array
from .savepool import POOL
from .shadows import _address, _same_geometry, _view_at, memory_root


def writable(a: Any) -> Any:
    """`a`, writable again (the program locks the arrays it recorded)."""
    if isinstance(a, np.ndarray) and not a.flags.writeable:
        a.flags.writeable = True  # locked by the program while it recorded
    return a


def array_positions(values: Any) -> tuple:
    """(position, id of its buffer) of each array among `values`."""
    return tuple((n, id(memory_root(v))) for n, v in enumerate(values) if is_array(v))


class Contents:
    """Buffers whose contents for the sweep are held by a save instead (id -> (buffer, save data)), and the
    final contents of the buffers the sweep wrote into."""

    def __init__(self, final: bool = True, renames: Any = None):
        """`final`: copy a buffer's contents before the sweep first writes it and write them back at the end
        (a program's sweep: the primals end as the program left them); otherwise buffers end holding what they
        held before the swept steps ran (a checkpointed loop's segment). `renames`: the sweep's renamed shadows
        (renames.ShadowRenames), or None."""
        self.held: dict[int, tuple[Any, Any]] = {}
        self.final: dict[int, tuple[Any, Any]] | None = {} if final else None
        self.renames = renames

    def values(self, values: list, arrays: tuple | None = None) -> list | None:
        """`values` with every array inside a held buffer replaced by the same view of its save, or None when
        none is. `arrays`: where known, (position, id of its buffer) of every array among `values`
        (replay.LaunchFacts.arrays_at, of the same objects: a view's buffer, its base, is fixed and alive)."""
        held = self.held
        if not held:
            return None
        if arrays is None:
            arrays = array_positions(values)
        out = None
        for n, key in arrays:
            entry = held.get(key)
            if entry is None:
                continue
            root, data = entry
            if out is None:
                out = list(values)
            v = values[n]
            out[n] = data if _same_geometry(v, root) else \
                _view_at(data, _address(v) + (_address(data) - _address(root)), v)
        return out

    def passed(self, saved: Any) -> None:
        """The sweep passed the step that made `saved`: the buffer's contents are its old ones again."""
        root = memory_root(saved.view)
        if saved.whole(root):
            old = self.held.pop(id(root), None)
            if old is not None:
                POOL.give(old[1])
            self.held[id(root)] = (root, saved.data)
            saved.data = None
            return
        self.settle(root)
        self.writing(root)
        saved.restore()

    def writing(self, root: Any) -> None:
        """The sweep is about to write into `root` itself."""
        if self.final is not None and id(root) not in self.final:
            self.final[id(root)] = (root, POOL.copy_of(root))

    def settle(self, root: Any | None = None) -> None:
        """Write the held contents into their buffers (`root`'s only, or every one), for a reverse that reads
        the buffers themselves; every one: the renamed shadows too (a rule's or a loop's reverse reads them)."""
        if root is None and self.renames is not None:
            self.renames.settle()
        keys = list(self.held) if root is None else [id(root)] if id(root) in self.held else []
        for key in keys:
            buffer, data = self.held.pop(key)
            self.writing(buffer)
            writable(buffer)[...] = data
            POOL.give(data)

    def finish(self) -> None:
        """The sweep ended (or failed): a held save is dropped, or written into its buffer where the buffers
        end as they were before the swept steps; the final contents written back; the user's shadows hold what
        stood for them."""
        if self.renames is not None:
            self.renames.settle(final=True)
        if self.final is None:
            self.settle()
            return
        for _, data in self.held.values():
            POOL.give(data)
        self.held = {}
        for root, data in self.final.values():
            writable(root)[...] = data
            POOL.give(data)
        self.final = {}
