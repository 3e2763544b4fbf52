"""The one hook through which a program records (docs/programs.md#the-recording-hook):
while a recorder is installed, `gk.launch` hands each launch to it
(`recorder.launch`) and a call of a function with a custom rule hands itself
to it (`recorder.rule`) instead of running. `gradkern.program` installs
recorders; the runtime and `rules.py` only ask for the installed one, and
neither imports `program/`. A context variable, so threads and asyncio tasks
record separately. It imports nothing of gradkern: `rules.py`, which imports
only annotations and errors besides, asks it too."""

from __future__ import annotations

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


class recording:  # noqa: N801  (used as a function: `with recording(r):`)
    """Install `recorder` for the launches and rule calls made inside the block (None: they run plainly). A
    class rather than a generator context manager: a checkpointed loop enters one per step it runs, and this
    costs about a third of @contextmanager's enter and exit (docs/programs.md#host-cost-per-step)."""

    __slots__ = ("recorder", "token")

    def __init__(self, recorder: Recorder | None):
        self.recorder = recorder

    def __enter__(self) -> None:
        self.token = _current.set(self.recorder)

    def __exit__(self, *exc: Any) -> None:
        _current.reset(self.token)
