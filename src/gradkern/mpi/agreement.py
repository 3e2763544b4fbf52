"""Checks that every rank agrees on before any message moves (docs/distributed.md#deadlocks):
a rank that raised alone would leave the others waiting for its messages, so each check
is settled by one small collective and, when any rank failed it, raises on every rank."""

from __future__ import annotations

import functools
import zlib
from typing import Any

import numpy as np
from mpi4py import MPI

from ..errors import ProgramError
from . import deadline
from .errors import DistributedError


def read_only(a: Any) -> bool:
    """A NumPy array whose writeable flag is off (CuPy arrays have none): a call that writes it would raise on
    its rank alone, after the messages before the write, so the checks refuse it on every rank first."""
    flags = getattr(a, "flags", None)
    return flags is not None and getattr(flags, "writeable", True) is False


def agree(comm: Any, problem: str | None, what: str, signature: Any = None) -> None:
    """Raise DistributedError on every rank of `comm` if any rank found `problem` (a message or None)
    or the ranks' `signature`s (small Python values: shapes, flags) differ. One allgather of small
    objects: for set-up calls (a grid, scatter, gather), not for every step; first every rank's arrival, with the
    deadline (deadline.arrive: an allgather of objects has no non-blocking form)."""
    deadline.arrive(comm, lambda: f"{what}: the set-up check that every rank of the communicator "
                                  f"({deadline.ranks(comm)}) makes before the call (a collective call)")
    found = comm.allgather((problem, signature))
    bad = [(r, p) for r, (p, _) in enumerate(found) if p is not None]
    if bad:
        detail = "; ".join(f"rank {r}: {p}" for r, p in bad)
        raise DistributedError(f"{what} was refused on every rank: {detail}",
                               hint="every rank must make the same call with arguments that fit the grid")
    signatures = [s for _, s in found]
    if any(s != signatures[0] for s in signatures):
        detail = "; ".join(f"rank {r}: {s}" for r, s in enumerate(signatures))
        raise DistributedError(f"{what}: the ranks disagree ({detail})",
                               hint="every rank must pass the same global arguments")


@functools.lru_cache(maxsize=1024)
def _code(site: tuple) -> int:
    """A 62-bit code of a call's site (its text: the same on every process), two checksums combined (kept: a grid's
    exchanges pass the same site every step)."""
    text = repr(site).encode()
    return (zlib.crc32(text) << 30) ^ zlib.adler32(text)


def agree_fast(comm: Any, problem: str | None, what: str, dtype: Any, size: int = 0, active: int = 0,
               shape: tuple = (), site: tuple = (), owner: Any = None) -> None:
    """`agree` for calls made every step: one Allreduce(MAX) of 27 integers (the code of the call's `site`, the
    highest failing rank, the dtype, the element count, `active` and `shape` (its length and first 8 axes) on every
    rank as max and -min), then DistributedError on every rank if any rank failed or they differ. The failing rank
    names its problem; the others name that rank. `site`: which call this is (a grid's exchange, an allreduce, a
    loop's entry, a reverse's start: control.py runs them all on one communicator per group), so ranks that reached
    different calls see it and raise, every one, with what each reached. `active`: how many shadows a program
    differentiates the call with (vector mode's width: its reverse sends messages for each), else 0: a rank that
    skipped the reverse of a call its neighbours reverse, or ran it for fewer shadows, would leave them waiting for
    ever. `shape`: arrays of one size in different shapes would move the same bytes into other elements. `owner`:
    the control whose communicator `comm` is, marked broken if the Allreduce passes its deadline (deadline.py)."""
    num = np.dtype(dtype).num if dtype is not None else -1
    dims = [len(shape), *shape[:8]] + [-1] * (8 - len(shape[:8]))
    code = _code(site)
    mine = np.array([code, -code, comm.rank + 1 if problem else 0, num, -num, size, -size, active, -active, *dims,
                     *(-d for d in dims)], dtype=np.int64)
    got = np.empty_like(mine)
    deadline.allreduce(comm, mine, got, MPI.MAX, owner,
                       lambda: f"{described(site, what)}: the check that every rank of {deadline.ranks(comm)} makes "
                               "on their control communicator before the call's first message (where their "
                               "exchanges, allreduces, loops' entries and programs' ends meet), waiting for the "
                               "other ranks to reach a call of theirs")
    if got[0] != -got[1]:  # every rank sees it alike, so every rank takes part in what follows
        _different_calls(comm, what, site, problem)
    got = got[2:]
    hint = "every rank must make the same call with arguments that fit the grid"
    if problem is not None:
        raise DistributedError(f"{what} was refused on every rank: rank {comm.rank}: {problem}", hint=hint)
    if got[0]:
        raise DistributedError(f"{what} was refused on every rank: rank {got[0] - 1} passed arguments that do "
                               "not fit (its message says how)", hint=hint)
    if got[1] != -got[2]:
        raise DistributedError(f"{what}: the ranks pass arrays of different dtypes (this rank: {np.dtype(dtype)})",
                               hint="give every rank's array one dtype")
    if got[3] != -got[4]:
        raise DistributedError(f"{what}: the ranks pass arrays of different sizes (this rank: {size} elements)",
                               hint="every rank must pass an array of the same shape")
    if any(got[7:16] != -got[16:]):
        raise DistributedError(f"{what}: the ranks pass arrays of one size in different shapes (this rank: "
                               f"{tuple(shape)})", hint="every rank must pass an array of the same shape")
    if got[5] != -got[6]:
        state = f"differentiates it with {active} shadow(s)" if active else "does not differentiate it"
        raise DistributedError(f"{what}: a program differentiates the call on some ranks only, or with another "
                               f"vector width (this rank {state}: its array is Const here and Duplicated on "
                               "another rank, or BatchDuplicated of another width); their reverses would wait for "
                               "each other for ever",
                               hint="annotate the array alike on every rank (docs/distributed.md#deadlocks-and-how-"
                                    "gradkern-prevents-them)")


LOOP = "a checkpointed loop's entry"  # the site of a loop's agreement: (LOOP, scope, the loop's schedule)


def described(site: tuple, what: str) -> str:
    """The call a check was made for, in words: `what`, and the grid or scope its `site` names."""
    if site[:1] == (LOOP,):
        return f"{LOOP}, agreed over {site[1]}"
    return what + (f" on {site[1]}" if len(site) > 1 else "")


def _different_calls(comm: Any, what: str, site: tuple, problem: str | None) -> None:
    """The ranks of `comm` reached different calls (their sites differ): one allgather of what each reached, then
    an error on every rank naming them. Loops' entries over one scope that differ only in their schedules:
    ProgramError (the schedules differ); anything else: DistributedError."""
    found = comm.allgather((site, what, problem))
    if all(s[:1] == (LOOP,) for s, _, _ in found) and len({s[1] for s, _, _ in found}) == 1:
        detail = "; ".join(f"rank {r}: nsteps={f[0]}, snapshots={f[1]}, schedule {f[2]}"
                           f"{' built with ' + f[5] if f[5] else ''}, storage {f[3]}"
                           for r, ((_, _, f), _, _) in enumerate(found))
        raise ProgramError(f"a checkpointed loop whose steps exchange halos or allreduce takes different schedules "
                           f"on different ranks ({detail}); their recomputations would wait for each other for ever",
                           hint="give gk.checkpointed_loop the same nsteps, snapshots and schedule on every rank")
    detail = "; ".join(f"rank {r}: {described(s, w)}" for r, (s, w, _) in enumerate(found))
    why = " (their most recent grids alive differ: a grid kept alive on some ranks only, dropped on the others)" \
        if all(s[:1] == (LOOP,) for s, _, _ in found) else ""
    raise DistributedError(f"the ranks reached different collective calls ({detail}){why}; each would wait for the "
                           "others for ever. Refused on every rank before the call's first message",
                           hint="every rank must make the same exchanges and allreduces in the same order (a plain "
                                "Python loop with the same trip count everywhere), and free a grid it is done with on "
                                "every rank (docs/distributed.md#deadlocks-and-how-gradkern-prevents-them)")


def agree_schedule_once(control: Any, entry: Any, key: Any) -> None:
    """`agree_schedule` once per loop and `key` (a grid, a communicator), on `control` (its group's). The key
    is held in the loop's `agreed`: one freed inside the loop cannot pass its id on to a new one, which would then
    skip this collective on some ranks only (docs/programs.md#objects-keyed-by-identity)."""
    if entry is not None and entry.agreed.get(id(key)) is not key:
        agree_schedule(control, entry)
        entry.agreed[id(key)] = key


def agree_schedule(control: Any, entry: Any, memory: bool = True, scope: str = "") -> None:
    """A checkpointed loop whose steps exchange or allreduce: every rank must take the same schedule (nsteps,
    snapshots, the schedule's class and the parameters it was built with, storage), or the ranks would recompute
    different steps and wait for each other's messages for ever. ProgramError on every rank otherwise, before the
    loop's first message; DistributedError when the ranks agree over different `scope`s (grids: one alive on some
    ranks only). `control`: a group's (control.py). `memory`: also refuse memory= (checked where the loop is known
    to communicate)."""
    control.agree(None, LOOP, None, site=(LOOP, scope, entry.describe()))
    if memory and entry.memory is not None:  # each rank would pick from its own block's sizes (program/budget.py)
        raise ProgramError("a checkpointed loop whose steps exchange halos or allreduce takes memory=, which each "
                           "rank would turn into a schedule from its own block's sizes; ranks of unequal blocks "
                           "would pick different ones and wait for each other for ever",
                           hint="pass the same snapshots= on every rank")
