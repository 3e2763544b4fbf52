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
        self.skipped: set[int] = set()  # buffers first overwritten whole, unread, after it: not kept
        self.serial: int | None = None  # its number among the first forward's open snapshots (OpenSnapshots)

    @property
    def nbytes(self) -> int:
        return sum(size for _, _, size in self.copies.values())

    def add(self, root: Any, ref: Any = None) -> None:
        """Copy `root` in; `ref`, a weak reference to it, is kept instead of `root` (the first forward's)."""
        self.copies[id(root)] = (ref or root, self.store.store(root, self.storage), int(root.nbytes))
        self.store.held(int(root.nbytes))

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


class OpenSnapshots:
    """The first forward's open snapshots, in the order they were opened, indexed by buffer so that a launch
    visits only the snapshots that have yet to see a buffer it writes (docs/checkpointed-loops.md#open-snapshots-
    indexed-by-buffer), not all of them: each snapshot sees each buffer once (copies or skips it), so the
    per-launch cost does not grow with the snapshots held. Exactly the decisions of a walk over every open
    snapshot in order: a snapshot has not seen a buffer iff it was opened after the launch that last wrote it, or
    the copy it had was dropped with the buffer (`freed`); a launch took a buffer since a snapshot's step iff the
    last launch taking it came after the snapshot was opened (`taken_at`)."""

    def __init__(self) -> None:
        self.snaps: list[Snapshot] = []  # ascending serial
        self.serial = 0  # the next snapshot's
        # keyed by id(buffer): each buffer is alive while its key is here, since `freed` forgets a freed buffer's
        # key everywhere before another array can be given its id (docs/programs.md#objects-keyed-by-identity)
        self.seen_from: dict[int, int] = {}  # id(buffer) -> the first serial not to have seen it
        self.taken_at: dict[int, int] = {}  # id(buffer) -> `serial` when a launch last took it
        # id(weak reference to a buffer a launch took) -> (id(buffer), the open snapshots that copied or skipped it)
        self.watched: dict[int, tuple[int, list[Snapshot]]] = {}

    def __bool__(self) -> bool:
        return bool(self.snaps)

    def __iter__(self) -> Any:
        return iter(self.snaps)

    def __contains__(self, snap: Any) -> bool:
        return snap is not None and snap.serial is not None and snap in self.snaps

    def append(self, snap: Snapshot) -> None:
        snap.serial, self.serial = self.serial, self.serial + 1
        self.snaps.append(snap)

    def remove(self, snap: Snapshot) -> None:
        self.snaps.remove(snap)
        snap.serial = None

    def clear(self) -> None:
        for snap in self.snaps:
            snap.serial = None
        self.__init__()

    def unseen(self, key: int) -> list[Snapshot]:
        """The open snapshots that have neither copied nor skipped the buffer `key`, in the order opened."""
        start, snaps = self.seen_from.get(key, 0), self.snaps
        n = len(snaps)
        while n and snaps[n - 1].serial >= start:
            n -= 1
        return snaps[n:]

    def before_write(self, written: dict[int, Any], taken: dict[int, Any], refs: dict[int, Any], dead: set[int],
                     may_skip: Any) -> None:
        """Before a launch that takes the buffers `taken` and writes `written` (id -> buffer, `roots`) runs: each
        open snapshot that has not seen a written buffer copies it (`refs`: id -> its weak reference), or skips it
        when the launch overwrites it whole unread (`dead`), no launch took it since the snapshot's step, and
        `may_skip(snap, key)`."""
        watched = self.watched
        for key, root in written.items():
            unseen = self.unseen(key)
            if unseen:
                ref = refs[key]
                holders = watched.setdefault(id(ref), (key, []))[1]
                for snap in unseen:
                    if key in dead and self.taken_at.get(key, -1) <= snap.serial and may_skip(snap, key):
                        snap.skipped.add(key)  # its contents at the snapshot's step are never read
                    else:
                        snap.add(root, ref)
                    holders.append(snap)
            self.seen_from[key] = self.serial
        for key in taken:
            self.taken_at[key] = self.serial
            ref = refs[key]
            if id(ref) not in watched:
                watched[id(ref)] = (key, [])

    def freed(self, ref: Any) -> None:
        """The buffer `ref` referred to was freed (a step's temporary): the open snapshots' copies of it go too,
        and everything kept under its id is forgotten (called while it is being freed, before any other array
        can be given its id), so that a buffer given its id later is a new one: unseen by every open snapshot,
        taken by no launch yet. Kept, the snapshots that had seen the temporary would take that buffer as seen too
        and never copy it (docs/programs.md#objects-keyed-by-identity)."""
        key, holders = self.watched.pop(id(ref), (None, ()))
        if key is None:
            return
        for snap in holders:
            hit = snap.copies.get(key)
            if hit is not None and hit[0] is ref:
                if snap.serial is not None:
                    snap.remove(key)
            else:
                snap.skipped.discard(key)
        self.seen_from.pop(key, None)
        self.taken_at.pop(key, None)


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

    def holding(self, root: Any) -> Any:
        """The array whose contents `root` holds now: the snapshot's copy while its restore is not written (of
        `root`'s dtype, shape and strides: `in_place`), else `root`."""
        hit = self.get(id(root))
        return hit[1] if hit is not None and hit[0] is root else root

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
