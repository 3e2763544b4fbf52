"""A deadline on every wait gradkern.mpi does (docs/distributed.md#a-deadline-on-every-wait).

A rank that waits for a call the others never make (nsteps=0 on some ranks of a loop no check can see, a grid
whose ranks differ, a plain loop whose trip count is 0 on one rank) would wait for ever, and its job would burn
its allocation. So every wait of gradkern.mpi (its checks on a control communicator, a halo's messages, a sum's
Allreduce, the making of a control) posts non-blocking MPI calls and polls them against a deadline; past it, the
waiting rank raises DistributedError naming the call it waits in, what it expected and that the other ranks did
not arrive (under `python -m mpi4py` that ends the job).

Polling: MPI_Testall at once (a call whose partners are there completes in it, as fast as the blocking call,
measured); then Testall in a loop, yielding the core every 16 polls, for SPIN seconds plus 10 ns per byte (what a
blocking MPI wait does: it spins too, and a message of many bytes moves only while both sides drive it); then
asleep between polls for a tenth of the time waited so far, at most 10 ms, so a rank left waiting uses almost no
CPU and notices its partner at most a tenth of its wait late. No deadline (None): the blocking calls, as before.

After a wait passed its deadline its requests cannot be cancelled (a collective cannot), and the communicator
would pair the next call with the abandoned one: the object that owns it (a control, a grid's halo) is marked
`broken` and refuses every later call on this rank; the abandoned requests and their buffers are kept
(`_abandoned`), since MPI may still write them."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any

from mpi4py import MPI

from ..errors import ConfigurationError
from .errors import DistributedError

ENV = "GRADKERN_MPI_TIMEOUT"
DEFAULT = 600.0  # seconds: docs/distributed.md#a-deadline-on-every-wait says why
SPIN = 1e-3  # seconds of polling without sleep (plus 10 ns per byte moved)
_abandoned: list = []  # requests of waits that passed their deadline, with their buffers: MPI may still write them


def _parse(value: Any, name: str) -> float | None:
    """A deadline in seconds, a finite number > 0, or None (no deadline: `off`, `0`, None). Text only from the
    environment variable (`name` ENV); gkm.set_timeout takes numbers."""
    text = name == ENV
    if value is None or (text and value.strip().lower() in ("off", "0")):
        return None
    number = math.nan
    if text:
        try:
            number = float(value)
        except ValueError:
            pass
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    if number == 0:
        return None
    if not number > 0 or math.isinf(number):  # NaN fails the first test
        raise (ConfigurationError if name == ENV else DistributedError)(
            f"{name} must be a number of seconds > 0, or {'off' if name == ENV else 'None'} (no deadline), got "
            f"{value!r}", hint="see docs/distributed.md#a-deadline-on-every-wait")
    return number


_env = os.environ.get("GRADKERN_MPI_TIMEOUT", "")  # read at import; blank: the default
_timeout: float | None = _parse(_env, ENV) if _env.strip() else DEFAULT


def set_timeout(seconds: float | None) -> float | None:
    """Set the deadline of gradkern.mpi's waits on this process (`seconds` > 0, or None: wait for ever, as plain
    MPI); returns the previous one. The default is GRADKERN_MPI_TIMEOUT's, else 600 s. Each rank's is its own."""
    global _timeout
    previous, _timeout = _timeout, _parse(seconds, "gkm.set_timeout: seconds")
    return previous


def get_timeout() -> float | None:
    """The deadline of gradkern.mpi's waits on this process, in seconds (None: none)."""
    return _timeout


def refuse_if_broken(owner: Any, what: str) -> None:
    """`owner` (a control, a halo) had a wait pass its deadline: its communicator would pair this call with the
    abandoned one, so every later call on it is refused on this rank."""
    if owner is not None and owner.broken is not None:
        raise DistributedError(f"{what} on this rank: an earlier wait of gradkern.mpi on the same communicator passed "
                               f"its deadline ({owner.broken}); the communicator would pair this call with the "
                               "abandoned one", hint="end the job (`python -m mpi4py` does at the first error): the "
                                                     "ranks are out of step")


def ranks(comm: Any) -> str:
    """The ranks of `comm`, as ranks of MPI.COMM_WORLD (abbreviated as a range when they are one)."""
    world = MPI.COMM_WORLD.Get_group()
    group = comm.Get_group()
    try:
        found = MPI.Group.Translate_ranks(group, list(range(group.size)), world)
    finally:
        group.Free()
        world.Free()
    if len(found) > 2 and found == list(range(found[0], found[0] + len(found))):
        return f"ranks {found[0]}-{found[-1]}"
    return "rank " + str(found[0]) if len(found) == 1 else "ranks " + ", ".join(map(str, found[:16])) + \
        (", ..." if len(found) > 16 else "")


def world_rank(comm: Any, rank: int) -> int:
    """Rank `rank` of `comm` as a rank of MPI.COMM_WORLD."""
    group, world = comm.Get_group(), MPI.COMM_WORLD.Get_group()
    try:
        return MPI.Group.Translate_ranks(group, [rank], world)[0]
    finally:
        group.Free()
        world.Free()


def wait(requests: list, owner: Any, where: Callable[[], str], keep: tuple = (), nbytes: int = 0) -> None:
    """Complete `requests` (posted non-blocking MPI calls) or, past the deadline, raise DistributedError naming
    `where()` (the call and what it expects), `owner` (a control, a halo, or None) marked broken, the requests and
    `keep` (their buffers) kept for MPI."""
    if MPI.Request.Testall(requests):
        return
    start = time.perf_counter()
    end = start + (_timeout if _timeout is not None else math.inf)  # None: a caller that polls anyway waits for ever
    spin = SPIN + nbytes * 1e-8
    polls = 0
    while True:
        if MPI.Request.Testall(requests):
            return
        now = time.perf_counter()
        if now > end:
            break
        waited = now - start
        polls += 1
        if waited >= spin:
            time.sleep(min(0.01, waited / 10))
        elif polls % 16 == 0:  # as MPICH's own waits on an oversubscribed machine (MPIR_CVAR_POLLS_BEFORE_YIELD)
            os.sched_yield()
    _abandoned.append((requests, keep))
    message = f"{where()}; the other ranks did not arrive within the deadline ({_timeout:g} s)"
    if owner is not None:
        owner.broken = message
    raise DistributedError(f"rank {MPI.COMM_WORLD.rank} waited {time.perf_counter() - start:.1f} s in {message}",
                   hint="a rank that skipped this call waits elsewhere, or has ended: nsteps or a plain loop's trip "
                        "count that differs between ranks, a grid alive on some ranks only, grids over other sets "
                        "of ranks, a rank that raised without `python -m mpi4py`; or a rank slower than the "
                        f"deadline ({ENV}, gkm.set_timeout; docs/distributed.md#a-deadline-on-every-wait)")


def allreduce(comm: Any, mine: Any, got: Any, op: Any, owner: Any, where: Callable[[], str]) -> None:
    """comm.Allreduce(mine, got, op) with the deadline (blocking when there is none)."""
    if _timeout is None:
        comm.Allreduce(mine, got, op=op)
    else:
        wait([comm.Iallreduce(mine, got, op=op)], owner, where, (mine, got), getattr(got, "nbytes", 0))


def sendrecv(comm: Any, out: Any, dest: int, got: Any, source: int, tag: int, owner: Any,
             where: Callable[[], str]) -> None:
    """comm.Sendrecv(out -> dest, got <- source, one tag) with the deadline (blocking when there is none)."""
    if _timeout is None:
        comm.Sendrecv(out, dest=dest, sendtag=tag, recvbuf=got, source=source, recvtag=tag)
    else:
        wait([comm.Irecv(got, source=source, tag=tag), comm.Isend(out, dest=dest, tag=tag)], owner, where,
             (out, got), getattr(got, "nbytes", 0))


def arrive(comm: Any, where: Callable[[], str]) -> None:
    """Every rank of `comm` has reached this call (an Ibarrier with the deadline), before a blocking collective of
    objects that has no non-blocking form (a set-up call's allgather); nothing when there is no deadline."""
    if _timeout is not None:
        wait([comm.Ibarrier()], None, where)


def dup(comm: Any, owner: Any, where: Callable[[], str]) -> Any:
    """comm.Dup() with the deadline (blocking when there is none)."""
    if _timeout is None:
        return comm.Dup()
    new, request = comm.Idup()
    wait([request], owner, where, (new,))
    return new
