"""Collectives that a reverse-mode program calls at two fixed points that every process reaches alike
(docs/distributed.md#deadlocks-and-how-gradkern-prevents-them): a checkpointed loop's entry (nsteps=0
included) and the start of every reverse of recorded steps (the sweep's, and each checkpointed segment's),
before any reverse message. gradkern.mpi registers each grid here while it lives; the program layer calls
them through this list, never importing gradkern.mpi. An object has `agree_loop(entry)` (entry: a
loop.LoopSchedule), `before_reverse()`, each collective over its processes or a no-op on all of them, and `scope`
(which loops' entries it may agree on: "grid", "reduce" or None); optionally `start_program()`, called (no
collective) when a program's forward starts.

The list holds weak references: a grid the program dropped (its last reference gone; CPython frees it then,
on every process of an SPMD program alike, since a grid holds no reference cycle) takes no part, and a program
that makes grids as it goes does not keep them all alive."""

from __future__ import annotations

import weakref
from typing import Any

_live: list[weakref.ref] = []  # the registered objects, the most recently registered last


def _objects() -> list:
    """The registered objects still alive, oldest first (dead references dropped)."""
    alive = [(r, o) for r in _live if (o := r()) is not None]
    _live[:] = [r for r, _ in alive]
    return [o for _, o in alive]


def register(obj: Any) -> None:
    _live.append(weakref.ref(obj))


def unregister(obj: Any) -> None:
    _live[:] = [r for r in _live if r() is not None and r() is not obj]


def at_loop_entry(entry: Any) -> None:
    """The most recently registered object alive of the first `scope` that has one ("grid": the most recently made
    grid; else "reduce": the group of the latest allreduce) agrees on the loop's schedule (the others may span
    processes that do not run this program: a rank checking a single-process copy of the problem alone)."""
    live = _objects()
    for scope in ("grid", "reduce"):
        scoped = [o for o in live if getattr(o, "scope", None) == scope]
        if scoped:
            scoped[-1].agree_loop(entry)
            return


def at_program_start() -> None:
    """A program's forward starts: every registered object that counts a program's calls (`start_program`)
    forgets those of earlier programs, which may have run on other processes than this one (a rank checking a
    single-process copy alone) or left calls uncounted-for (a loop's final state rebuilt after the reverse)."""
    for obj in _objects():
        start = getattr(obj, "start_program", None)
        if start is not None:
            start()


def before_reverse() -> None:
    """Every registered object alive, in the order registered (each decides from what every process recorded
    alike whether it communicates)."""
    for obj in _objects():
        obj.before_reverse()
