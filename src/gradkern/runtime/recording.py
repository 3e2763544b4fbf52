"""The hook through which a program records its launches (docs/programs.md): while
a recorder is installed, `gk.launch` hands each launch to it instead of
running it. The runtime defines the hook; `gradkern.program` installs
recorders (the runtime never imports it). A context variable, so threads and
asyncio tasks record separately."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ..kernel import KernelFunction


class Recorder:
    """Receives the launches made while it is installed."""

    def launch(self, kernel: KernelFunction, dim: Any, args: tuple, backend: str | None) -> None:
        raise NotImplementedError


_current: ContextVar[Recorder | None] = ContextVar("gradkern_recorder", default=None)


def active_recorder() -> Recorder | None:
    return _current.get()


@contextmanager
def recording(recorder: Recorder | None) -> Iterator[None]:
    """Install `recorder` (None: none) for the calls made inside the block."""
    token = _current.set(recorder)
    try:
        yield
    finally:
        _current.reset(token)
