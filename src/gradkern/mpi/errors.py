"""gradkern.mpi's error (docs/distributed.md#deadlocks-and-how-gradkern-prevents-them), in a module of its own so that
agreement.py and deadline.py both raise it without importing each other."""

from __future__ import annotations

from ..errors import GradkernError


class DistributedError(GradkernError):
    """A decomposition or collective used inconsistently: raised on every rank, before any message; or, on the rank
    that waits, a wait of gradkern.mpi that passed its deadline (docs/distributed.md#a-deadline-on-every-wait)."""
