"""`gkm.allreduce(x, out=None, comm=None)`: the sum over ranks, as custom rules
(docs/distributed.md#seeding).

out = Σ_r x_r on every rank. The loss is L = Σ_r L_r, each rank's own part, so
∂L/∂x_r = Σ_s ∂L_s/∂out_s: the reverse adds the sum over ranks of the out adjoints into
every rank's x adjoint and zeroes the out adjoint (out was overwritten), Enzyme's
convention; in place, x's adjoint becomes the sum of the ranks' adjoints. Forward mode:
ẋ summed like x. A value replicated on every rank (an allreduce's result) enters L once
per rank that seeds it: seed it on one rank for L = that value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

from ..errors import RuleError
from ..program.loop import entering_loop
from ..rules import custom_rule
from ..runtime.arrays import is_array, is_cupy_array, module_of
from . import deadline
from .agreement import DistributedError, agree_schedule_once, read_only
from .control import control, reduced_on


def _sum(comm: Any, a: Any, into: Any = None, direct: bool = False) -> None:
    """into[...] = Σ_ranks a (into None: in place), through contiguous host buffers; `direct`: a CuPy array's
    through device buffers (a CUDA-aware MPI, `cuda_aware=True`), the current stream synchronised first. With the
    deadline (deadline.py): past it, the group's control is broken, so every later call over its ranks is refused."""
    target = a if into is None else into
    xp = module_of(a)
    owner = control(comm, "gkm.allreduce")
    deadline.refuse_if_broken(owner, "gkm.allreduce")  # the reverse's sums run without a check of their own

    def where() -> str:
        return f"gkm.allreduce over {deadline.ranks(comm)}: the sum's Allreduce, waiting for the other ranks' parts"
    if direct and xp is not np:
        mine = xp.ascontiguousarray(a)
        got = xp.empty_like(mine)
        xp.cuda.get_current_stream().synchronize()
        deadline.allreduce(comm, mine, got, MPI.SUM, owner, where)
        target[...] = got
        return
    mine = np.ascontiguousarray(a.get() if is_cupy_array(a) else a.view(np.ndarray))
    got = np.empty_like(mine)
    deadline.allreduce(comm, mine, got, MPI.SUM, owner, where)
    if module_of(target) is np:
        target[...] = got
    else:
        target[...] = module_of(target).asarray(got)


def _lanes(a: Any, width: int) -> tuple:
    dval = getattr(a, "dval", None)
    if dval is None:
        return (None,) * width
    return (dval,) if width == 1 else tuple(dval)


def _agree(comm: Any, x: Any, active: int, out: Any = None, recorded: bool = False) -> None:
    """Before any data moves: one small Allreduce (agreement.agree_fast) that every rank passes an array of one
    dtype and size and that a program differentiates the call on every rank or on none (`active`: its
    reverse, or its forward rule's tangent sum, will send messages); then, in a checkpointed loop's first
    forward, that every rank takes the loop's schedule (once per loop and communicator). A read-only target
    is refused here, in the rule (a program unlocks what a rule writes only for the call)."""
    target = x if out is None else out
    problem = None
    if read_only(target):
        problem = f"{'x' if out is None else 'out'} is read-only (its writeable flag is off); the sum is written there"
    group = control(comm, "gkm.allreduce")  # every call over comm's ranks checks on one communicator (control.py)
    group.agree(problem, "gkm.allreduce", None if problem else x.dtype, 0 if problem else int(x.size), int(active),
                () if problem else tuple(x.shape), site=("gkm.allreduce",))
    reduced_on(group)  # where a loop's entry agrees while no grid is alive
    if recorded:  # a program's call: met by the others at its reverse's start or its end (control.py)
        group.pending += 1
    agree_schedule_once(group, entering_loop(), comm)


@custom_rule(reads=(), writes=("x",))
def _allreduce_in_place(x: Any, comm: Any, direct: bool) -> None:
    _agree(comm, x, 0)
    _sum(comm, x, None, direct)


@_allreduce_in_place.augmented_primal
def _(config: Any, x: Any, comm: Any, direct: Any) -> None:
    _agree(comm.val, x.val, config.width, recorded=True)  # differentiated: its reverse sums once per shadow
    _sum(comm.val, x.val, None, direct.val)  # always: a rank skipping it would leave the others waiting
    return None


@_allreduce_in_place.reverse
def _(config: Any, tape: Any, x: Any, comm: Any, direct: Any) -> tuple:
    for dx in _lanes(x, config.width):  # x_new = Σ_r x_r: dx_r <- Σ_s dx_s
        if dx is not None:
            _sum(comm.val, dx, None, direct.val)
    return (None, None, None)


@_allreduce_in_place.forward
def _(config: Any, x: Any, comm: Any, direct: Any) -> None:
    _agree(comm.val, x.val, sum(dx is not None for dx in _lanes(x, config.width)), recorded=True)
    _sum(comm.val, x.val, None, direct.val)
    for dx in _lanes(x, config.width):
        if dx is not None:
            _sum(comm.val, dx, None, direct.val)


@custom_rule(reads=(), writes=("out",))
def _allreduce_into(x: Any, out: Any, comm: Any, direct: bool) -> None:
    _agree(comm, x, 0, out)
    _sum(comm, x, out, direct)


@_allreduce_into.augmented_primal
def _(config: Any, x: Any, out: Any, comm: Any, direct: Any) -> None:
    _agree(comm.val, x.val, config.width, out.val, True)  # differentiated: its reverse sums once per shadow
    _sum(comm.val, x.val, out.val, direct.val)  # always: a rank skipping it would leave the others waiting
    return None


@_allreduce_into.reverse
def _(config: Any, tape: Any, x: Any, out: Any, comm: Any, direct: Any) -> tuple:
    xp = module_of(x.val)
    for dx, dout in zip(_lanes(x, config.width), _lanes(out, config.width)):
        # every rank joins the sum (its dout may be absent: zeros), so no rank waits for another
        total = xp.zeros_like(x.val) if dout is None else dout.copy()
        _sum(comm.val, total, None, direct.val)
        if dx is not None:
            dx += total
        if dout is not None:
            dout[...] = 0
    return (None, None, None, None)


@_allreduce_into.forward
def _(config: Any, x: Any, out: Any, comm: Any, direct: Any) -> None:
    _agree(comm.val, x.val, sum(dout is not None for dout in _lanes(out, config.width)), out.val, True)
    _sum(comm.val, x.val, out.val, direct.val)
    for dx, dout in zip(_lanes(x, config.width), _lanes(out, config.width)):
        if dout is not None:
            _sum(comm.val, dx if dx is not None else module_of(x.val).zeros_like(x.val), dout, direct.val)


def _same(x: Any, out: Any) -> bool:
    """`out` is `x`, or a view of exactly its memory: allreduce(x, x) is the sum in place. Taken as the call into
    `out`, its reverse would add the summed adjoint into dx and then zero dout, the same array: a zero gradient."""
    if out is x:
        return True
    if isinstance(x, np.ndarray) and isinstance(out, np.ndarray):
        return x.__array_interface__["data"][0] == out.__array_interface__["data"][0] and x.strides == out.strides
    return False


def _overlap(x: Any, out: Any) -> bool:
    # bounds first (cheap); then the exact test, so that interleaved views (x = a[::2], out = a[1::2]) pass
    return isinstance(x, np.ndarray) and isinstance(out, np.ndarray) and np.may_share_memory(x, out) \
        and bool(np.shares_memory(x, out))


def allreduce(x: Any, out: Any = None, comm: Any = None, op: Any = None, cuda_aware: Any = None) -> Any:
    """out = Σ over the ranks of `comm` (default MPI.COMM_WORLD) of `x` (in place when out is None); returns
    the array written. Differentiated (Enzyme's convention; docs/distributed.md#seeding): in reverse mode
    x's adjoint gets the sum over ranks of out's adjoint, and out's adjoint is zeroed. `op` must be None or
    MPI.SUM: other reductions raise RuleError (the ranks that passed a sum raise DistributedError). Collective:
    every rank calls it with an array of one shape and dtype, or every rank raises before any data moves; in a
    checkpointed loop, every rank takes the loop's schedule (gk.ProgramError otherwise). `cuda_aware`: CuPy
    arrays summed through device buffers (a CUDA-aware MPI); None: the grid's `cuda_aware` where `comm` is a
    gkm.Cartesian, else False (staged through host memory)."""
    if cuda_aware is None:
        cuda_aware = getattr(comm, "cuda_aware", False) is True
    comm = MPI.COMM_WORLD if comm is None else getattr(comm, "comm", comm)  # a Cartesian grid: its comm
    if not isinstance(comm, MPI.Intracomm) or comm == MPI.COMM_NULL:  # a freed grid's is null
        raise DistributedError(f"gkm.allreduce: comm must be a live mpi4py intracommunicator or gkm.Cartesian, got "
                               f"{type(comm).__name__}{' (freed)' if isinstance(comm, MPI.Comm) else ''}")
    problem = None
    if type(cuda_aware) is not bool:
        problem = f"gkm.allreduce: cuda_aware must be True, False or None, got {cuda_aware!r}"
    elif op is not None and op != MPI.SUM:  # agreed like a bad array: a rank refusing alone would hang the others
        problem = f"gkm.allreduce differentiates sums only (op=MPI.SUM), got op={op!r}"
    elif not is_array(x):
        problem = f"x must be an array (wrap a scalar as np.array([s])), got {type(x).__name__}"
    elif x.dtype.kind not in "iufc":  # MPI sums numbers: a bool or object array would fail on every rank, unclearly
        problem = f"x must be an array of numbers (int, float or complex), got dtype {x.dtype}"
    elif out is not None and (not is_array(out) or tuple(out.shape) != tuple(x.shape) or out.dtype != x.dtype):
        problem = f"out must be an array of x's shape {tuple(x.shape)} and dtype {x.dtype}, got " \
                  f"{getattr(out, 'shape', type(out).__name__)}"
    elif out is not None and _same(x, out):  # out is x: the sum in place (its reverse differs: dx <- Σ dx)
        out = None
    elif out is not None and _overlap(x, out):
        problem = "out overlaps x without being x (a view of another part of its memory); the sum would read " \
                  "what it has written"
    if problem is not None:  # raised on every rank: the others raise in the call's own agreement (_agree)
        try:
            control(comm, "gkm.allreduce").agree(problem, "gkm.allreduce", None, site=("gkm.allreduce",))
        except DistributedError as e:
            if op is not None and op != MPI.SUM:
                raise RuleError(problem, hint="for a max or min, reduce with mpi4py outside the differentiated "
                                              "program") from e
            raise
    if out is None:
        _allreduce_in_place(x, comm, cuda_aware)
        return x
    _allreduce_into(x, out, comm, cuda_aware)
    return out
