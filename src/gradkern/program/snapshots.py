"""Snapshot storage of a checkpointed loop (docs/checkpointed-loops.md#how-it-works):
copies of (part of) the loop's state at a step, kept in RAM (a copy beside
the array, on its device), in host memory (`storage="host"`: CuPy arrays
copied out) or on disk (a schedule's DISK storage, NumPy arrays only), and
the bytes they hold, now and at peak.

A snapshot of the loop's first forward is open: it copies each buffer when a
step first writes it after the snapshot's step (copy-on-write), and skips a
buffer that step first overwrites whole without reading it (its contents at
the snapshot's step are never read again), unless the snapshot must keep it.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
from checkpoint_schedules import StorageType

from ..errors import ProgramError
from ..runtime.arrays import device_memory, from_host, is_cupy_array, to_host
from .schedule import DiskSnapshots
from .shadows import memory_root


class SnapshotStore:
    """Where a loop's snapshots keep their copies, and how many bytes they hold."""

    def __init__(self, storage: str):
        self.storage = storage  # "device" or "host" (gk.checkpointed_loop's storage=)
        self.disk: DiskSnapshots | None = None  # made on the first DISK snapshot
        self.bytes_held = 0
        self.peak_bytes = 0

    def store(self, root: Any, storage: StorageType) -> Any:
        """A copy of `root` where `storage` (the schedule's) and the loop's storage= say."""
        if storage == StorageType.DISK:
            if is_cupy_array(root):
                raise ProgramError("disk snapshots are for NumPy arrays; this loop's state is on the GPU",
                                   hint="a schedule storing in RAM (storage='host' keeps it in host memory)")
            self.disk = self.disk or DiskSnapshots()
            return ("disk", self.disk.write([root]))
        if self.storage == "host" and device_memory(root):
            return ("host", to_host(root))
        return ("copy", root.copy())

    def load(self, root: Any, data: Any) -> None:
        """Write a copy `store` made back into `root`."""
        kind, payload = data
        if isinstance(root, np.ndarray) and not root.flags.writeable:
            root.flags.writeable = True  # locked by the program's guard while it recorded
        if kind == "disk":
            self.disk.read_into(payload, [root])
        elif kind == "host":
            from_host(root, payload)
        else:
            root[...] = payload

    def drop(self, data: Any) -> None:
        if data[0] == "disk" and self.disk is not None:
            self.disk.delete(data[1])

    def held(self, nbytes: int) -> None:
        self.bytes_held += nbytes
        self.peak_bytes = max(self.peak_bytes, self.bytes_held)

    def close(self) -> None:
        if self.disk is not None:
            self.disk.close()
            self.disk = None


class Snapshot:
    """A copy of (part of) the loop state at step `at` (None: not known): (buffer, copy) pairs.
    `skip_dead`: a restart point may leave out buffers the steps after it overwrite whole before reading
    them; a segment's end state may not (the segment's reverse may read them)."""

    def __init__(self, at: int | None, storage: StorageType, store: SnapshotStore, skip_dead: bool = True):
        self.at, self.storage, self.store, self.skip_dead = at, storage, store, skip_dead
        # id(buffer) -> (buffer or its weak reference, copy, bytes)
        self.copies: dict[int, tuple[Any, Any, int]] = {}
        self.used: set[int] = set()  # buffers a launch took since the snapshot's step (open snapshots)
        self.skipped: set[int] = set()  # buffers first overwritten whole, unread, after it: not kept

    @property
    def nbytes(self) -> int:
        return sum(size for _, _, size in self.copies.values())

    def add(self, root: Any, ref: Any = None) -> None:
        """Copy `root` in; `ref`, a weak reference to it, is kept instead of `root` (the first forward's)."""
        self.copies[id(root)] = (ref or root, self.store.store(root, self.storage), int(root.nbytes))
        self.store.held(int(root.nbytes))

    def before_write(self, written: dict[int, Any], taken: dict[int, Any], refs: dict[int, Any], dead: set[int],
                     may_skip: Any) -> None:
        """An open snapshot before a launch that takes the buffers `taken` and writes `written` (id -> buffer,
        `roots`) runs: each buffer written for the first time since the snapshot's step is copied (`refs`: id ->
        its weak reference), or skipped when the launch overwrites it whole unread (`dead`), no launch took it
        before, and `may_skip(self, key)`."""
        for key, root in written.items():
            if key not in self.copies and key not in self.skipped:
                if key in dead and key not in self.used and may_skip(self, key):
                    self.skipped.add(key)  # its contents at the snapshot's step are never read
                else:
                    self.add(root, refs[key])
        self.used.update(taken)

    def freed(self, ref: Any) -> None:
        """The buffer `ref` referred to was freed (a step's temporary): its copy goes too."""
        for key in [k for k, (r, _, _) in self.copies.items() if r is ref]:
            self.remove(key)

    def keep_only(self, state: dict[int, Any]) -> None:
        """Once the state is known: drop the copies of other buffers, and hold the state's buffers."""
        for key in [k for k, (ref, _, _) in self.copies.items() if k not in state or ref() is None]:
            self.remove(key)
        self.copies = {k: (state[k], d, size) for k, (_, d, size) in self.copies.items()}

    def remove(self, key: int) -> None:
        _, data, size = self.copies.pop(key)
        self.store.drop(data)
        self.store.held(-size)

    def restore(self, defer: Deferred | None = None) -> None:
        """Write the copies back into their buffers; with `defer`, those a launch may read in place
        (`in_place`) are handed to it instead, not written (Deferred)."""
        for ref, data, _ in self.copies.values():
            root = ref() if isinstance(ref, weakref.ref) else ref
            if root is None:
                continue
            if defer is not None and data[0] == "copy" and in_place(root, data[1]):
                defer[id(root)] = (root, data[1])
            else:
                self.store.load(root, data)

    def free(self) -> None:
        for key in list(self.copies):
            self.remove(key)


def in_place(root: Any, copy: Any) -> bool:
    """Whether a launch may read `copy` in place of the buffer `root` (Deferred): both NumPy arrays in host
    memory (not hostcuda's stand-in for a GPU, whose buffers the guard fingerprints), of one dtype, shape and
    strides."""
    return type(copy) is np.ndarray and isinstance(root, np.ndarray) and not device_memory(root) and \
        copy.dtype == root.dtype and copy.shape == root.shape and copy.strides == root.strides


class Deferred(dict):
    """A restore not written into its buffers yet (docs/checkpointed-loops.md#a-restore-read-in-place):
    id(buffer) -> (buffer, the snapshot's copy). Until it is settled, what the buffer holds is the copy's
    contents; the launches of the untaped advance that follows the restore read the copy in place (`reading`),
    and a buffer that such a launch overwrites whole unread, or that the state's record says is dead when the
    advance ends (`resolve`), is never written from the copy. Everything else writes it first (`settle`): the
    loop's other hooks, a launch that reads the buffer otherwise, a rule call, host code reading or writing a
    TrackedArray (hostcode.py `_read`)."""

    def settle(self, keys: list | None = None) -> None:
        """Write the copies into their buffers (all, or those of `keys`). The buffer's write flag is left as it
        is (the recomputation's guard may hold it read-only; a launch's signature saw it so)."""
        for key in list(self) if keys is None else keys:
            root, copy = self.pop(key)
            locked = not root.flags.writeable
            if locked:
                root.setflags(True)
            try:
                root[...] = copy
            finally:
                if locked:
                    root.setflags(False)

    def reading(self, params: Any, given: tuple, plain: tuple, bound: Any, whole: Any, tracked: type) -> Any:
        """A launch of an untaped step about to run (or be held) with the values of `bound`; `plain`: its
        unwrapped arguments, one per parameter (`given` as passed), `whole()`: the buffers it overwrites whole
        without reading them (record.overwritten_whole). Returns the Bound to run: where the launch only reads a
        deferred buffer, through a TrackedArray viewing all of it, the copy in its place; a buffer it overwrites
        whole unread (passed once) is dropped, never written from the copy; any other use settles it first."""
        values = bound.values
        touched: dict[int, list[int]] = {}
        for n, v in enumerate(plain):
            if isinstance(v, np.ndarray):
                root = memory_root(v)
                hit = self.get(id(root))
                if hit is not None and hit[0] is root:
                    touched.setdefault(id(root), []).append(n)
        if not touched:
            return bound
        # the kernel's values one per parameter, as given (no merged aliases): positions are the parameters'
        aligned = len(values) == len(plain) and all(values[n] is plain[n] for ns in touched.values() for n in ns)
        load, swap = [], []
        for key, ns in touched.items():
            root, copy = self[key]
            if any(params[n].written for n in ns):
                if len(ns) == 1 and any(r is root for r in whole()):
                    del self[key]  # overwritten whole unread: what the copy holds is never read
                else:
                    load.append(key)
            elif aligned and all(isinstance(given[n], tracked) and _all_of(plain[n], root) for n in ns):
                swap.extend((n, copy) for n in ns)
            else:
                load.append(key)
        if load:
            self.settle(load)
        if not swap:
            return bound
        values = list(values)
        for n, copy in swap:
            values[n] = copy
        return bound.with_values(values)

    def resolve(self, at: int, dead: Any) -> list[int]:
        """The untaped advance ended with the state at step `at`: the buffers `dead(key)` says no step reads
        before overwriting them whole are dropped (returned: what they hold is not the state), the others
        settled."""
        dropped = [key for key in self if dead(key)]
        for key in dropped:
            del self[key]
        self.settle()
        return dropped


def _all_of(view: np.ndarray, root: np.ndarray) -> bool:
    """Whether `view` shows all of `root` as `root` does (same first byte, dtype, shape and strides)."""
    return view is root or (view.dtype == root.dtype and view.shape == root.shape and view.strides == root.strides
                            and view.__array_interface__["data"][0] == root.__array_interface__["data"][0])


def roots(views: list) -> dict[int, Any]:
    """id -> memory root of each of `views` (an open snapshot's `before_write` takes them)."""
    return {id(memory_root(v)): memory_root(v) for v in views}
