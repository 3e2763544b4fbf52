"""The one hook through which a program records (docs/programs.md#the-recording-hook):
while a recorder is installed, `gk.launch` hands each launch to it
(`recorder.launch`) and a call of a function with a custom rule hands itself
to it (`recorder.rule`) instead of running. `gradkern.program` installs
recorders; the runtime and `rules.py` only ask for the installed one, and
neither imports `program/`. A context variable, so threads and asyncio tasks
record separately. It imports nothing of gradkern: `rules.py`, which imports
only annotations and errors besides, asks it too."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any


class Recorder:
    """Receives the launches and rule calls made while it is installed."""

    in_loop = False  # it records a step of a checkpointed loop (where a nested loop is refused)

    def launch(self, kernel: Any, dim: Any, args: tuple, backend: str | None) -> None:
        """A `gk.launch(kernel, dim, *args, backend=backend)`, recorded (and run) instead of launched."""
        raise NotImplementedError

    def rule(self, rule: Any, args: tuple) -> Any:
        """A call of the function of `rule` (a CustomRule) with `args` bound in parameter order; returns what
        the call returns."""
        raise NotImplementedError


_current: ContextVar[Recorder | None] = ContextVar("gradkern_recorder", default=None)


def active_recorder() -> Recorder | None:
    return _current.get()


@contextmanager
def recording(recorder: Recorder | None) -> Iterator[None]:
    """Install `recorder` for the launches and rule calls made inside the block (None: they run plainly)."""
    token = _current.set(recorder)
    try:
        yield
    finally:
        _current.reset(token)
