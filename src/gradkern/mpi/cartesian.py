"""`gkm.Cartesian` (docs/distributed.md#decomposition): a block decomposition of a global grid of
1-3 axes over an MPI communicator, each rank owning a block padded by `ghosts` cells per side.

Axis d of n cells over p ranks: rank coordinate k owns n // p cells, plus one for k < n % p
(uneven partitions are the earlier blocks one cell longer), starting at the sum of the earlier
blocks. Every rank computes every block from the global arguments alone, so the checks that
need no array (a block shorter than `ghosts`) hold on every rank at once; the construction
then agrees on the global arguments with one allgather, before the Cartesian communicator is
made. Halo traffic runs on a duplicate of that communicator (halo.py), so a user's own
messages on `grid.comm` never match the grid's.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
from mpi4py import MPI

from ..program.collectives import register, unregister
from ..program.hostcode import tracker
from ..program.loop import entering_loop
from ..program.record import ForwardRecorder
from ..recording import active_recorder
from ..runtime.arrays import is_array, is_cupy_array, module_of, to_host
from .agreement import DistributedError, agree, agree_schedule, agree_schedule_once, read_only
from .control import control
from .halo import HaloPlan, exchange_rule

# when an exchange agrees with every rank that its block fits (docs/distributed.md#what-it-costs): "every" exchange
# (one small Allreduce each), or the grid's "first" only, later ones checked on their own rank
CHECKS = ("every", "first")


def _block(n: int, p: int, k: int) -> tuple[int, int]:
    """(start, length) of block k of n cells over p blocks: the first n % p blocks one cell longer."""
    q, r = divmod(n, p)
    return k * q + min(k, r), q + (1 if k < r else 0)


def _integer(value: Any) -> bool:
    """An int (Python's or NumPy's), not a bool: a float such as 8.5 would be truncated silently."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _flag(value: Any) -> bool:
    """A bool (Python's or NumPy's), or the int 0 or 1 (a string would be taken one character per axis)."""
    return isinstance(value, (bool, np.bool_)) or (_integer(value) and value in (0, 1))


def _axes(name: str, value: Any, ndim: int, kind: type) -> tuple:
    """One value per axis: a scalar broadcast, or a sequence of ndim, each an int (kind int) or a flag (kind bool)."""
    valid = _integer if kind is int else _flag
    what = "an int" if kind is int else "a bool"
    if valid(value):
        return (value,) * ndim
    try:
        out = tuple(value) if not isinstance(value, (str, bytes)) else None
    except TypeError:
        out = None
    if out is None or not all(valid(v) for v in out):
        raise DistributedError(f"Cartesian: {name} must be {what} or one per axis, got {value!r}")
    if len(out) != ndim:
        raise DistributedError(f"Cartesian: {name} has {len(out)} entries for a grid of {ndim} axes")
    return out


class Cartesian:
    """A Cartesian decomposition of the global `shape` over `comm` (docs/distributed.md).

    Attributes: `shape` (global), `local_shape` (this rank's owned cells), `start` (global index of its
    first owned cell, per axis), `ghosts`, `padded_shape` (local_shape + 2 ghosts), `periodic`, `dims`
    (ranks per axis), `coords` (this rank's place in them), `comm` (the Cartesian communicator).
    `checks="every"` (default): each exchange first agrees with every rank that its block fits (one small
    Allreduce), so a bad block raises DistributedError on every rank; `checks="first"`: only the grid's first
    exchange does, the later ones check on their own rank (no collective: for very many ranks).
    `cuda_aware=True`: CuPy blocks go to MPI as device buffers (an MPI built CUDA-aware), not staged through
    host memory; `gkm.allreduce` over the grid does the same (docs/distributed.md, "CuPy arrays").
    A collective call: every rank of `comm` makes it with the same arguments, or every rank raises
    DistributedError."""

    def __init__(self, comm: Any, shape: Any, ghosts: int = 1, periodic: Any = False, dims: Any = None,
                 checks: str = "every", cuda_aware: bool = False):
        if not isinstance(comm, MPI.Intracomm) or comm == MPI.COMM_NULL:  # a freed one is null
            raise DistributedError(f"Cartesian: comm must be a live mpi4py intracommunicator (MPI.COMM_WORLD, a "
                                   f"Split of it), got {type(comm).__name__}"
                                   f"{' (freed)' if isinstance(comm, MPI.Comm) else ''}")
        problem, signature = None, None
        try:
            signature = self._plan(comm.size, shape, ghosts, periodic, dims)
            if checks not in CHECKS:
                raise DistributedError(f"Cartesian: checks must be one of {', '.join(CHECKS)}, got {checks!r}")
            if type(cuda_aware) is not bool:
                raise DistributedError(f"Cartesian: cuda_aware must be True or False, got {cuda_aware!r}")
            signature += (checks,)
        except DistributedError as e:
            problem = e.message
        agree(comm, problem, "Cartesian(...)", signature if problem is None else None)
        self.comm = comm.Create_cart(list(self.dims), list(self.periodic), reorder=False)
        self.coords = tuple(self.comm.Get_coords(self.comm.rank))
        blocks = [_block(n, p, k) for n, p, k in zip(self.shape, self.dims, self.coords)]
        self.start = tuple(s for s, _ in blocks)
        self.local_shape = tuple(n for _, n in blocks)
        self.padded_shape = tuple(n + 2 * self.ghosts for n in self.local_shape)
        neighbours = [self.comm.Shift(d, 1) for d in range(self.ndim)]  # (low, high) per axis
        # tags: a checksum of the plan, so two grids' messages differ even on one communicator
        tag = zlib.crc32(repr((self.shape, self.ghosts, self.periodic, self.dims)).encode()) % 1024
        # the grid's identity among those of its group, the same on every rank (each makes every grid over it)
        self.control = control(comm, "gkm.Cartesian(...)")
        self.control.made += 1
        self.control.live += 1  # until free(): the control is freed with its group's last grid (control.py)
        self.label = f"grid #{self.control.made} {self.shape}"
        self.cuda_aware = cuda_aware
        self.halo = HaloPlan(self.comm.Dup(), self.local_shape, self.ghosts, neighbours, 16 * tag, checks,
                             self.control, self.label, cuda_aware)
        register(self)  # weakly, until free(): programs call agree_loop and before_reverse (program/collectives.py)

    def _plan(self, size: int, shape: Any, ghosts: Any, periodic: Any, dims: Any) -> tuple:
        """Check the global arguments and set them; returns what every rank must agree on."""
        try:
            cells = (shape,) if _integer(shape) else tuple(shape)
        except TypeError:
            cells = None
        if cells is None or not all(_integer(n) for n in cells):  # 8.5 or True would be truncated silently
            raise DistributedError(f"Cartesian: shape must be a tuple of 1-3 positive ints, got {shape!r}")
        shape = tuple(int(n) for n in cells)
        if not 1 <= len(shape) <= 3 or min(shape) < 1:
            raise DistributedError(f"Cartesian: shape must have 1-3 axes of at least one cell, got {shape}")
        ndim = len(shape)
        if not _integer(ghosts) or ghosts < 0:
            raise DistributedError(f"Cartesian: ghosts must be an int >= 0, got {ghosts!r}")
        periodic = tuple(bool(p) for p in _axes("periodic", periodic, ndim, bool))
        if dims is None:
            dims = MPI.Compute_dims(size, ndim)
        dims = tuple(int(d) for d in _axes("dims", dims, ndim, int))
        if min(dims) < 1 or int(np.prod(dims)) != size:
            raise DistributedError(f"Cartesian: dims {dims} must be positive and multiply to the {size} ranks "
                                   "of comm", hint="leave dims=None for MPI.Compute_dims")
        for d, (n, p) in enumerate(zip(shape, dims)):
            if n < p:
                raise DistributedError(f"Cartesian: axis {d} has {n} cells for {p} ranks; every rank needs one")
            if ghosts > n // p:
                raise DistributedError(f"Cartesian: ghosts={ghosts} is larger than the smallest block of axis {d} "
                                       f"({n // p} cells: {n} over {p} ranks); a halo may only come from the "
                                       "neighbour's own cells", hint="use fewer ranks on that axis (dims=) or "
                                                                     "fewer ghosts")
        self.shape, self.ndim, self.ghosts, self.periodic, self.dims = shape, ndim, int(ghosts), periodic, dims
        return shape, int(ghosts), periodic, dims

    def __repr__(self) -> str:
        return (f"Cartesian(shape={self.shape}, ghosts={self.ghosts}, periodic={self.periodic}, dims={self.dims}; "
                f"rank {self.comm.rank} owns {self.local_shape} at {self.start})")

    # -- arrays ---------------------------------------------------------------------------------------------------
    def zeros(self, dtype: Any = np.float64, like: Any = None) -> Any:
        """A padded local block of zeros (`padded_shape`), a CuPy array when `like` is one."""
        xp = module_of(like) if like is not None else np
        return xp.zeros(self.padded_shape, dtype=dtype)

    def owned(self, local: Any) -> Any:
        """The view of `local`'s owned cells (without ghosts)."""
        g = self.ghosts
        return local[tuple(slice(g, g + n) for n in self.local_shape)]

    def exchange(self, u: Any) -> None:
        """Fill `u`'s ghost cells, faces and corners, from the neighbours' owned cells (docs/distributed.md);
        ghosts on a non-periodic global edge keep their values. A custom rule: differentiated, recorded by
        programs, recomputed by checkpointed loops. Collective: every rank calls it with its own block."""
        self._alive("exchange")
        agree_schedule_once(self.control, entering_loop(), self)  # once per loop and grid, before any message
        # checks="first" in a program: whether a call is differentiated may differ from one call to the next, and only
        # a collective compares it: a reverse-mode program's are agreed at its reverse's start (before_reverse), a
        # forward-mode program's at each call (its tangents move at once)
        recorder = active_recorder()
        self.halo.in_program = None if recorder is None else "forward" if isinstance(recorder, ForwardRecorder) \
            else "reverse"
        exchange_rule(u, self.halo)

    scope = "grid"  # program/collectives.py: a loop's entry agrees on the most recent grid alive

    def agree_loop(self, entry: Any) -> None:
        """At the entry of a checkpointed loop of a reverse-mode program, while this grid is the most recently
        made one alive on this rank (program/loop.py calls it, nsteps=0 included): every rank of the grid agrees
        on the loop's schedule and on this grid (one check on its ranks' control), or ProgramError (schedules) or
        DistributedError (grids) on every rank, before any step runs
        (docs/distributed.md#deadlocks-and-how-gradkern-prevents-them)."""
        # on its group's control (control.py): a rank whose most recent grid is another grid of the same ranks (kept
        # alive there alone) meets this agreement there and sees the other grid
        agree_schedule(self.control, entry, memory=False, scope=self.label)  # memory=: where the loop communicates
        if entry.memory is None:  # what the loop's first exchange and allreduce on this grid need not agree again
            entry.agreed[id(self)] = self
            entry.agreed[id(self.comm)] = self.comm

    def before_reverse(self) -> None:
        """Before the reverse of a program's recorded steps (program/collectives.py): with checks="first", every
        rank agrees on which of the grid's exchanges recorded since the last agreement are differentiated."""
        self.halo.agree_activity()

    # -- set-up and checks: not differentiated ---------------------------------------------------------------------
    def _window(self, coords: tuple, padded: bool, edges: bool) -> tuple:
        """Rank `coords`'s slice of the global array (padded: of the global padded array). `edges`: its owned
        cells extended by the ghosts on the global edges it lies on (what gather(padded=True) takes from it)."""
        g, out = self.ghosts, []
        for n, p, k in zip(self.shape, self.dims, coords):
            s, m = _block(n, p, k)
            if not padded:
                out.append(slice(s, s + m))
            elif not edges:
                out.append(slice(s, s + m + 2 * g))
            else:
                out.append(slice(s + (0 if k == 0 else g), s + g + m + (g if k == p - 1 else 0)))
        return tuple(out)

    def _local_part(self, window: tuple, padded: bool) -> tuple:
        """The part of this rank's padded block that `window` (of the global array) maps onto."""
        g = self.ghosts
        shift = [s - (0 if padded else g) for s in self.start]
        return tuple(slice(w.start - s, w.stop - s) for w, s in zip(window, shift))

    def _alive(self, what: str) -> None:
        """A freed grid's communicators are gone: say so (on every rank of an SPMD program alike) instead of MPI's
        'Invalid communicator'."""
        if self.halo is None:
            raise DistributedError(f"grid.{what}: the grid was freed (grid.free()); make a new gkm.Cartesian")

    def _check_local(self, local: Any, what: str, written: bool = False) -> str | None:
        if not is_array(local):
            return f"{what} needs this rank's padded block (an array of shape {self.padded_shape}), got " \
                   f"{type(local).__name__}"
        if tuple(local.shape[:self.ndim]) != self.padded_shape:
            return f"its block has shape {tuple(local.shape)}, but this rank's padded block is {self.padded_shape}"
        if written and read_only(local):
            return "its block is read-only (its writeable flag is off)"
        return None

    @staticmethod
    def _hidden(what: str, arrays: tuple) -> str | None:
        """scatter and gather are not differentiated: inside a program, on an array that has a derivative (or whose
        values host code computed from one), they would hide the dependency, a silently wrong gradient (a
        gathered u scattered into v gave dE/du = 0). Refused (docs/distributed.md#decomposition)."""
        host = tracker()
        if host is not None and any(is_array(a) and host.derived(a) for a in arrays):
            return f"{what} is not differentiated, and inside a program it got an array with a derivative (or " \
                   "computed from one): the gradient would not see the values it moves; call it outside " \
                   "gk.autodiff, or pass the array as gk.Const"
        return None

    def _check_root(self, root: Any) -> str | None:
        """A root every rank can agree on (its value is in the agreed signature: ranks naming different roots
        would each wait for the others' messages)."""
        if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= root < self.comm.size:
            return f"root must be a rank of the grid (an int in [0, {self.comm.size})), got {root!r}"
        return None

    def scatter(self, global_array: Any, local: Any, root: int = 0) -> None:
        """Copy the global array (on `root`; None elsewhere) into every rank's block: its owned cells when the
        array has the global `shape`, its whole padded block (ghosts included) when it has the global padded
        shape. Not differentiated. Collective; refused on every rank when an array does not fit."""
        g, rank = self.ghosts, self.comm.rank
        self._alive("scatter")
        problem = self._hidden("scatter", (local, global_array)) or self._check_local(local, "scatter", written=True) \
            or self._check_root(root)
        padded = None
        if rank == root and problem is None:
            full = tuple(n + 2 * g for n in self.shape)
            trailing = tuple(local.shape[self.ndim:])
            if not is_array(global_array) or tuple(global_array.shape[:self.ndim]) not in (self.shape, full) \
                    or tuple(global_array.shape[self.ndim:]) != trailing:  # else root alone would fail to copy
                problem = (f"the global array must have shape {self.shape + trailing} (owned cells) or "
                           f"{full + trailing} (padded), got "
                           f"{getattr(global_array, 'shape', type(global_array).__name__)}")
            elif not np.can_cast(global_array.dtype, local.dtype, "same_kind"):
                problem = f"the global array's dtype {global_array.dtype} does not convert to the blocks' {local.dtype}"
            else:
                padded = tuple(global_array.shape[:self.ndim]) == full
        agree(self.comm, problem, "scatter", (str(local.dtype), tuple(local.shape[self.ndim:]), int(root))
              if problem is None else None)
        padded = self.comm.bcast(padded, root=root)
        trailing = tuple(local.shape[self.ndim:])
        mine = self._window(self.coords, padded, edges=False)
        part = self._local_part(mine, padded)
        if rank == root:
            host = to_host(global_array) if is_cupy_array(global_array) else np.asarray(global_array)
            for r in range(self.comm.size):
                block = np.ascontiguousarray(host[self._window(tuple(self.comm.Get_coords(r)), padded, False)],
                                             dtype=local.dtype)
                if r == root:
                    local[part] = module_of(local).asarray(block)
                else:
                    self.comm.Send(block, dest=r, tag=1)
        else:
            block = np.empty(tuple(w.stop - w.start for w in mine) + trailing, dtype=local.dtype)
            self.comm.Recv(block, source=root, tag=1)
            local[part] = module_of(local).asarray(block)

    def gather(self, local: Any, root: int = 0, padded: bool = False) -> Any:
        """The global array of every rank's owned cells, on `root` (None elsewhere), as NumPy. `padded=True`:
        the global padded array, whose ghosts on the global edges come from the ranks on those edges (and
        whose other cells come from their owners). Not differentiated. Collective."""
        self._alive("gather")
        problem = self._hidden("gather", (local,)) or self._check_local(local, "gather") or self._check_root(root)
        agree(self.comm, problem, "gather", (str(local.dtype), tuple(local.shape[self.ndim:]), int(root),
                                             bool(padded)) if problem is None else None)
        trailing = tuple(local.shape[self.ndim:])
        host = to_host(local) if is_cupy_array(local) else np.asarray(local)
        mine = self._window(self.coords, padded, edges=True)
        block = np.ascontiguousarray(host[self._local_part(mine, padded)])
        if self.comm.rank != root:
            self.comm.Send(block, dest=root, tag=2)
            return None
        g = self.ghosts if padded else 0
        out = np.zeros(tuple(n + 2 * g for n in self.shape) + trailing, dtype=local.dtype)
        for r in range(self.comm.size):
            window = self._window(tuple(self.comm.Get_coords(r)), padded, edges=True)
            if r == root:
                out[window] = block
            else:
                got = np.empty(tuple(w.stop - w.start for w in window) + trailing, dtype=local.dtype)
                self.comm.Recv(got, source=r, tag=2)
                out[window] = got
        return out

    def free(self) -> None:
        """Free the grid's communicators (a long-lived program making many grids; the grid is unusable after:
        its calls raise DistributedError). Freeing it again does nothing. Refused inside a reverse-mode program,
        whose reverse exchanges on the grid (docs/distributed.md#decomposition). The last grid over its ranks
        freed, their control communicator is freed too, when every rank agrees it can (control.py)."""
        if self.halo is None:  # freed already: nothing left to free
            return
        recorder = active_recorder()
        if recorder is not None and not isinstance(recorder, ForwardRecorder):  # before anything is freed
            raise DistributedError("grid.free() inside a reverse-mode program: the program's reverse (and a "
                                   "checkpointed loop's recomputations) run the recorded exchanges on this grid's "
                                   "communicators, which free() would delete (MPI's 'Invalid communicator')",
                                   hint="free the grid after gk.autodiff returns")
        unregister(self)
        self.halo.comm.Free()
        self.comm.Free()
        self.halo.freed = True  # a split program's reverse recorded before free() still holds the plan
        self.halo = None
        self.control.grid_freed(self.label)
