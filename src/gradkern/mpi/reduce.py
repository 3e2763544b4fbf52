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
from ..rules import custom_rule
from ..runtime.arrays import is_array, is_cupy_array, module_of
from .agreement import DistributedError, agree_fast


def _sum(comm: Any, a: Any, into: Any = None) -> None:
    """into[...] = Σ_ranks a (into None: in place), through contiguous host buffers."""
    target = a if into is None else into
    mine = np.ascontiguousarray(a.get() if is_cupy_array(a) else a.view(np.ndarray))
    got = np.empty_like(mine)
    comm.Allreduce(mine, got, op=MPI.SUM)
    if module_of(target) is np:
        target[...] = got
    else:
        target[...] = module_of(target).asarray(got)


def _lanes(a: Any, width: int) -> tuple:
    dval = getattr(a, "dval", None)
    if dval is None:
        return (None,) * width
    return (dval,) if width == 1 else tuple(dval)


@custom_rule(reads=(), writes=("x",))
def _allreduce_in_place(x: Any, comm: Any) -> None:
    _sum(comm, x)


@_allreduce_in_place.reverse
def _(config: Any, tape: Any, x: Any, comm: Any) -> tuple:
    for dx in _lanes(x, config.width):  # x_new = Σ_r x_r: dx_r <- Σ_s dx_s
        if dx is not None:
            _sum(comm.val, dx)
    return (None, None)


@_allreduce_in_place.forward
def _(config: Any, x: Any, comm: Any) -> None:
    _sum(comm.val, x.val)
    for dx in _lanes(x, config.width):
        if dx is not None:
            _sum(comm.val, dx)


@custom_rule(reads=(), writes=("out",))
def _allreduce_into(x: Any, out: Any, comm: Any) -> None:
    _sum(comm, x, out)


@_allreduce_into.reverse
def _(config: Any, tape: Any, x: Any, out: Any, comm: Any) -> tuple:
    xp = module_of(x.val)
    for dx, dout in zip(_lanes(x, config.width), _lanes(out, config.width)):
        # every rank joins the sum (its dout may be absent: zeros), so no rank waits for another
        total = xp.zeros_like(x.val) if dout is None else dout.copy()
        _sum(comm.val, total)
        if dx is not None:
            dx += total
        if dout is not None:
            dout[...] = 0
    return (None, None, None)


@_allreduce_into.forward
def _(config: Any, x: Any, out: Any, comm: Any) -> None:
    _sum(comm.val, x.val, out.val)
    for dx, dout in zip(_lanes(x, config.width), _lanes(out, config.width)):
        if dout is not None:
            _sum(comm.val, dx if dx is not None else module_of(x.val).zeros_like(x.val), dout)


def allreduce(x: Any, out: Any = None, comm: Any = None, op: Any = None) -> Any:
    """out = Σ over the ranks of `comm` (default MPI.COMM_WORLD) of `x` (in place when out is None); returns
    the array written. Differentiated (Enzyme's convention; docs/distributed.md#seeding): in reverse mode
    x's adjoint gets the sum over ranks of out's adjoint, and out's adjoint is zeroed. `op` must be None or
    MPI.SUM: other reductions raise RuleError. Collective: every rank calls it with an array of one shape
    and dtype, or every rank raises DistributedError before any data moves."""
    if op is not None and op != MPI.SUM:
        raise RuleError(f"gkm.allreduce differentiates sums only (op=MPI.SUM), got op={op!r}",
                        hint="for a max or min, reduce with mpi4py outside the differentiated program")
    comm = MPI.COMM_WORLD if comm is None else getattr(comm, "comm", comm)  # a Cartesian grid: its comm
    if not isinstance(comm, MPI.Intracomm):
        raise DistributedError(f"gkm.allreduce: comm must be an mpi4py intracommunicator or a gkm.Cartesian, got "
                               f"{type(comm).__name__}")
    problem = None
    if not is_array(x):
        problem = f"x must be an array (wrap a scalar as np.array([s])), got {type(x).__name__}"
    elif out is not None and (not is_array(out) or tuple(out.shape) != tuple(x.shape) or out.dtype != x.dtype):
        problem = f"out must be an array of x's shape {tuple(x.shape)} and dtype {x.dtype}, got " \
                  f"{getattr(out, 'shape', type(out).__name__)}"
    agree_fast(comm, problem, "gkm.allreduce", None if problem else x.dtype, 0 if problem else int(x.size))
    if out is None:
        _allreduce_in_place(x, comm)
        return x
    _allreduce_into(x, out, comm)
    return out
