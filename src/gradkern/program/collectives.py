"""Collectives that a reverse-mode program calls at two fixed points that every process reaches alike
(docs/distributed.md#deadlocks-and-how-gradkern-prevents-them): a checkpointed loop's entry (nsteps=0
included) and the start of every reverse of recorded steps (the sweep's, and each checkpointed segment's),
before any reverse message. gradkern.mpi registers each grid here while it lives; the program layer calls
them through this list, never importing gradkern.mpi. An object has `agree_loop(entry)` (entry: a
loop.LoopSchedule) and `before_reverse()`, each collective over its processes or a no-op on all of them."""

from __future__ import annotations

from typing import Any

_live: list = []  # the registered objects, the most recently registered last


def register(obj: Any) -> None:
    _live.append(obj)


def unregister(obj: Any) -> None:
    _live[:] = [c for c in _live if c is not obj]


def at_loop_entry(entry: Any) -> None:
    """The most recently registered object agrees on the loop's schedule (the others may span processes that
    do not run this program: a rank checking a single-process copy of the problem alone)."""
    if _live:
        _live[-1].agree_loop(entry)


def before_reverse() -> None:
    """Every registered object, in the order registered (each decides from what every process recorded alike
    whether it communicates)."""
    for obj in list(_live):
        obj.before_reverse()
