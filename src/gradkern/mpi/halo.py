"""The halo exchange as a custom rule (docs/distributed.md#the-halo-exchange).

Axis by axis, d = 0 … D-1, each rank sends its first and last `g` owned layers along d to
its low and high neighbours, which store them in their ghost layers; the slabs span the
padded range of the earlier axes (whose ghosts are already filled, so corners travel in two
hops) and, along the later ones, the cells the rank holds: its owned cells and the ghosts on
a non-periodic global edge, which are boundary cells of the global padded array (a 9-point
stencil next to such an edge reads them through a corner). A neighbour across a non-periodic
global edge is MPI.PROC_NULL: nothing is sent there and those ghosts keep their values. A
periodic axis of one rank copies locally. So every rank's padded block is a window of one
global padded array, whatever the number of ranks.

The exchange is linear, E = E_{D-1} ⋯ E_0, and each E_d only copies owned cells into ghost
cells (disjoint sets), so its adjoint is E_0ᵀ ⋯ E_{D-1}ᵀ with E_dᵀ: send each filled ghost
slab's adjoint back to the neighbour it came from, which adds it into the owned slab it sent,
then zero that ghost slab's adjoint (the ghost values were overwritten: ∂L/∂ghost_before = 0).
The two phases of an axis run in a fixed order, so the sums are the same on every run. The
reverse moves the bytes of the forward, in the opposite direction; neither tapes anything.
Forward mode exchanges the primal and then each tangent the same way (E is linear).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

from ..annotations import Const
from ..rules import custom_rule
from ..runtime.arrays import is_array, is_cupy_array, module_of
from . import deadline
from .agreement import DistributedError, read_only


def _host(a: Any) -> np.ndarray:
    """A contiguous host copy of `a` (CuPy staged through host memory)."""
    return np.ascontiguousarray(a.get() if is_cupy_array(a) else a.view(np.ndarray))


def device_sendrecv(comm: Any, xp: Any, out: Any, shape: tuple, dest: int, source: int, tag: int, owner: Any = None,
                    where: Any = None) -> Any:
    """A CUDA-aware MPI's exchange of CuPy arrays: `out` (made contiguous on the device) sent to `dest`, a new
    device array of `shape` received from `source`; the current stream synchronised first, so that MPI, which
    knows no CUDA stream, reads what the kernels before it wrote (docs/distributed.md, "CuPy arrays"). With the
    deadline (deadline.sendrecv; `owner`, `where`: the halo and the wait's words)."""
    out = xp.ascontiguousarray(out)
    got = xp.empty(shape, dtype=out.dtype)
    xp.cuda.get_current_stream().synchronize()
    deadline.sendrecv(comm, out, dest, got, source, tag, owner, where or (lambda: "a device exchange"))
    return got


class HaloPlan:
    """What one grid's exchanges need: the slabs of each axis, the neighbours, the traffic communicator
    and the tags (a base derived from the grid, + 2·axis + phase; + 8 for the reverse's messages).
    `sent` counts the bytes this rank sent, by direction of the sweep ("forward", "reverse")."""

    def __init__(self, comm: Any, local_shape: tuple, ghosts: int, neighbours: list, tag: int, checks: str = "every",
                 control: Any = None, label: str = "", cuda_aware: bool = False):
        self.comm, self.local_shape, self.ghosts, self.neighbours, self.tag = comm, local_shape, ghosts, neighbours, tag
        self.cuda_aware = cuda_aware  # CuPy slabs handed to MPI as device buffers (`device_sendrecv`)
        self.control, self.label = control, label  # the group's control communicator (control.py), the grid's name
        self.checks = checks
        self.in_program: str | None = None  # set by grid.exchange: "reverse", "forward" (a program's mode) or None
        # checks="first": (count, digest) of the shadow counts of the exchanges a reverse-mode program recorded
        # since the last agreement (agree_activity, at its reverse's start)
        self.pending = (0, 0)
        self.agreed: tuple | None = None  # (dtype, trailing shape) of the first exchange, agreed by every rank
        self.ndim = len(local_shape)
        self.padded_shape = tuple(n + 2 * ghosts for n in local_shape)
        self.sent = {"forward": 0, "reverse": 0}
        self.freed = False  # set by grid.free(): the communicator is gone
        self.broken: str | None = None  # a wait on `comm` passed its deadline (deadline.py): every later one refused
        g = ghosts
        # the cells this rank holds along each axis: its owned ones, and the ghosts on a non-periodic global
        # edge (boundary values: cells of the global padded array that no other rank holds)
        held = [slice(0 if low == MPI.PROC_NULL else g, m + g + (g if high == MPI.PROC_NULL else 0))
                for m, (low, high) in zip(local_shape, neighbours)]
        self.slabs = []  # per axis: own_lo, ghost_hi, own_hi, ghost_lo
        for d, n in enumerate(local_shape):
            def slab(lo: int, hi: int, d: int = d) -> tuple:
                return tuple(slice(None) if e < d else slice(lo, hi) if e == d else held[e]
                             for e in range(len(local_shape)))
            self.slabs.append((slab(g, 2 * g), slab(n + g, n + 2 * g), slab(n, n + g), slab(0, g)))

    def check(self, u: Any, active: int = 0) -> None:
        """Refuse, on every rank and before any message, a block that does not fit this rank's part, or a call a
        program differentiates (`active`: how many shadows its reverse exchanges, vector mode's width; 0 when none) on
        some ranks only, or with another width."""
        problem = None
        if not is_array(u):
            problem = f"exchange takes this rank's padded block, an array of shape {self.padded_shape}; got " \
                      f"{type(u).__name__}"
        elif tuple(u.shape[:self.ndim]) != self.padded_shape:
            problem = f"exchange got an array of shape {tuple(u.shape)}, but this rank's padded block is " \
                      f"{self.padded_shape} (the grid's zeros() makes one)"
        elif u.dtype.kind not in "biufc":  # MPI has no datatype for it: every rank would fail alike, unclearly
            problem = f"exchange moves numbers (bool, int, float or complex), got an array of dtype {u.dtype}"
        elif read_only(u):
            problem = "exchange got a read-only array (its writeable flag is off); it writes the ghost cells"
        if self.checks == "first" and self.agreed is not None and self.in_program != "forward":  # no collective
            if problem is None and (u.dtype, tuple(u.shape[self.ndim:])) != self.agreed:
                problem = f"exchange got {u.dtype} blocks with trailing axes {tuple(u.shape[self.ndim:])}; the " \
                          f"grid's first exchange agreed on {self.agreed[0]} and {self.agreed[1]}"
            if problem is not None:
                raise DistributedError(f"grid.exchange was refused on rank {self.comm.rank} alone (checks='first'): "
                                       f"{problem}", hint="under `python -m mpi4py` the job aborts; checks='every' "
                                                          "refuses on every rank")
            if self.in_program == "reverse":
                count, digest = self.pending
                self.pending = (count + 1, (digest * 1_000_003 + 1 + active) % (1 << 61))
            return
        trailing = int(np.prod(u.shape[self.ndim:])) if problem is None else 0
        self.control.agree(problem, "grid.exchange", u.dtype if problem is None else None, trailing, int(active),
                           tuple(u.shape[self.ndim:]) if problem is None else (), site=("grid.exchange", self.label))
        if self.in_program is not None:  # met by the others at their reverse's start or program's end (control.py)
            self.control.pending += 1
        self.agreed = (u.dtype, tuple(u.shape[self.ndim:]))

    def agree_activity(self) -> None:
        """checks="first": one Allreduce of the digest of the shadow counts recorded since the last
        agreement, when there are any (every rank recorded the same exchanges, so all or none take part), or
        DistributedError on every rank: a rank whose array was Const where another's was Duplicated would skip
        an exchange's reverse that its neighbours wait in."""
        count, digest = self.pending
        if not count:
            return
        self.pending = (0, 0)
        mine = np.array([digest, -digest, count, -count], dtype=np.int64)
        got = np.empty_like(mine)
        deadline.refuse_if_broken(self, f"the reverse's start on {self.label}")
        deadline.allreduce(self.comm, mine, got, MPI.MAX, self,
                           lambda: f"the reverse's start on {self.label} (checks='first'): the check of the "
                                   f"exchanges' activity that every rank of {deadline.ranks(self.comm)} makes there")
        if got[0] != -got[1] or got[2] != -got[3]:
            raise DistributedError(f"grid.exchange (checks='first'): a program differentiates some of its {count} "
                                   "exchanges since the last agreement on some ranks only, or with another vector "
                                   "width (an array Const on one rank and Duplicated on another, or BatchDuplicated of "
                                   "another width); their reverses would wait for each other for ever. "
                                   "Refused on every rank before the reverse's first message",
                                   hint="annotate the array alike on every rank (docs/distributed.md#deadlocks-and-how-"
                                        "gradkern-prevents-them)")

    def _sendrecv(self, a: Any, send: tuple, dest: int, recv: tuple, source: int, tag: int, add: bool,
                  direction: str) -> None:
        """a[recv] = (or +=) what `source` sends of its a[send], while this rank sends its a[send] to `dest`."""
        if (dest == MPI.PROC_NULL and source == MPI.PROC_NULL) or not self.ghosts:
            return
        xp = module_of(a)
        if dest == source == self.comm.rank:  # a periodic axis of one rank
            values = a[send].copy()
        elif self.cuda_aware and xp is not np:
            values = device_sendrecv(self.comm, xp, a[send], a[recv].shape, dest, source, tag, self,
                                     lambda: self._where(dest, source, direction, tag))
            if dest != MPI.PROC_NULL:
                self.sent[direction] += a[send].nbytes
            if source == MPI.PROC_NULL:
                return
        else:
            out = _host(a[send])
            got = np.empty(a[recv].shape, dtype=a.dtype)
            deadline.sendrecv(self.comm, out, dest, got, source, tag, self,
                              lambda: self._where(dest, source, direction, tag))
            if dest != MPI.PROC_NULL:
                self.sent[direction] += out.nbytes
            if source == MPI.PROC_NULL:
                return
            values = got if xp is np else xp.asarray(got)
        if add:
            a[recv] += values
        else:
            a[recv] = values

    def _where(self, dest: int, source: int, direction: str, tag: int) -> str:
        """The words of a halo message's wait that passed its deadline (deadline.py)."""
        parts = [f"the slab from rank {deadline.world_rank(self.comm, source)}" if source != MPI.PROC_NULL else "",
                 f"its slab's send to rank {deadline.world_rank(self.comm, dest)}" if dest != MPI.PROC_NULL else ""]
        return f"grid.exchange on {self.label} (its {direction}), axis {(tag - self.tag) % 8 // 2}: waiting for " \
               f"{' and for '.join(p for p in parts if p)}"

    def _alive(self) -> None:
        if self.freed:  # every rank freed it alike (SPMD): MPI would say 'Invalid communicator'
            raise DistributedError("an exchange ran on a grid that was freed since the program recorded it (a split "
                                   "program's reverse after grid.free())", hint="free the grid after the reverse")
        deadline.refuse_if_broken(self, f"grid.exchange on {self.label}")

    def forward(self, u: Any) -> None:
        """Fill u's ghosts from the neighbours' owned cells (axis by axis)."""
        self._alive()
        for d, (own_lo, ghost_hi, own_hi, ghost_lo) in enumerate(self.slabs):
            low, high = self.neighbours[d]
            self._sendrecv(u, own_lo, low, ghost_hi, high, self.tag + 2 * d, False, "forward")
            self._sendrecv(u, own_hi, high, ghost_lo, low, self.tag + 2 * d + 1, False, "forward")

    def reverse(self, du: Any) -> None:
        """The adjoint: ghost adjoints back to their owners, added into the owned cells they came from, in a
        fixed order; the ghost adjoints that the forward overwrote zeroed."""
        self._alive()
        for d in reversed(range(self.ndim)):
            own_lo, ghost_hi, own_hi, ghost_lo = self.slabs[d]
            low, high = self.neighbours[d]
            self._sendrecv(du, ghost_lo, low, own_hi, high, self.tag + 8 + 2 * d + 1, True, "reverse")
            if low != MPI.PROC_NULL:
                du[ghost_lo] = 0
            self._sendrecv(du, ghost_hi, high, own_lo, low, self.tag + 8 + 2 * d, True, "reverse")
            if high != MPI.PROC_NULL:
                du[ghost_hi] = 0


def _plain(a: Any) -> Any:
    """A NumPy view without a subclass (a program's TrackedArray), or the CuPy array."""
    return a.view(np.ndarray) if isinstance(a, np.ndarray) else a


def _lanes(u: Any, width: int) -> tuple:
    if isinstance(u, Const) or not hasattr(u, "dval"):
        return ()
    return (u.dval,) if width == 1 else tuple(u.dval)


@custom_rule(reads=(), writes=("u",))
def exchange_rule(u: Any, plan: HaloPlan) -> None:
    """`grid.exchange(u)`: the primal."""
    plan.check(u)
    plan.forward(_plain(u))


@exchange_rule.augmented_primal
def _(config: Any, u: Any, plan: Any) -> None:
    plan.val.check(u.val, active=len(_lanes(u, config.width)))  # the ranks whose reverse will send messages
    plan.val.forward(_plain(u.val))  # always: a rank skipping it would leave its neighbours waiting
    return None  # nothing taped: the reverse reads no primal value


@exchange_rule.reverse
def _(config: Any, tape: Any, u: Any, plan: Any) -> tuple:
    for du in _lanes(u, config.width):
        plan.val.reverse(_plain(du))
    return (None, None)


@exchange_rule.forward
def _(config: Any, u: Any, plan: Any) -> None:
    plan.val.check(u.val, active=len(_lanes(u, config.width)))  # the ranks that will exchange tangents
    plan.val.forward(_plain(u.val))
    for tangent in _lanes(u, config.width):
        plan.val.forward(_plain(tangent))
