"""The error hierarchy: every error gradkern raises is a GradkernError.

Errors that concern kernel source carry a `Loc` and print the user's line with
a caret under the construct, so the message blames the user's code, never a
gradkern-internal file.
"""

from __future__ import annotations

import linecache
from dataclasses import dataclass


@dataclass(frozen=True)
class Loc:
    """A position in the user's source: file, 1-based line, 0-based column."""

    file: str
    line: int
    col: int = 0
    function: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"

    def excerpt(self) -> str:
        """The source line with a caret under the column, or '' if unavailable."""
        text = linecache.getline(self.file, self.line).rstrip("\n")
        if not text:
            return ""
        return f"    {text}\n    {' ' * self.col}^"


class GradkernError(Exception):
    """Base class of all gradkern errors: a message, optional location and hint."""

    def __init__(self, message: str, loc: Loc | None = None, hint: str | None = None):
        self.message = message
        self.loc = loc
        self.hint = hint
        super().__init__(self._format())

    def _format(self) -> str:
        parts = []
        if self.loc is not None:
            where = f"{self.loc}"
            if self.loc.function:
                where += f" (in {self.loc.function})"
            parts.append(f"{where}: {self.message}")
            excerpt = self.loc.excerpt()
            if excerpt:
                parts.append(excerpt)
        else:
            parts.append(self.message)
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)


class KernelSyntaxError(GradkernError):
    """The kernel uses a construct outside the kernel language (docs/kernel-language.md)."""


class KernelTypeError(GradkernError):
    """The kernel does not type-check for the given arguments."""


class LaunchError(GradkernError):
    """A launch was called with bad arguments (count, kind, dim, array types)."""


class AnnotationError(LaunchError):
    """An activity annotation does not fit its argument (Active on an array,
    a shadow of the wrong shape or dtype, ...)."""


class AliasingError(LaunchError):
    """Array arguments overlap in memory in a way the kernel cannot support."""


class ProgramError(GradkernError):
    """A program (a function that launches kernels, docs/programs.md) did something its
    derivative cannot follow: a host write to an array the tape depends on,
    host arithmetic that would drop a derivative."""


class RuleError(GradkernError):
    """A custom rule (docs/custom-rules.md) is malformed or missing: a reverse returning the
    wrong number of entries, a derivative for a non-Active argument, an array
    where a scalar is due, no reverse (or forward) where the mode needs one."""


class RaceError(GradkernError):
    """One thread writes an element that another thread reads or writes."""


class BackendUnavailableError(GradkernError):
    """The backend the arguments ask for is not installed or not available."""


class NotDifferentiableError(GradkernError):
    """The kernel uses a construct that the requested mode cannot differentiate."""


class TapeOverflowError(GradkernError):
    """A thread of a reverse-mode launch pushed more values than the count kernel counted for its tape: the
    pushes past the slots were dropped and the launch reported it (docs/adjoint-forms.md section 13)."""


class InteropError(GradkernError):
    """A gradkern operation inside PyTorch or JAX (docs/interop.md) was used outside its contract: an
    unknown output name, arguments on different devices, a complex dtype, a second-order derivative."""


class ConfigurationError(GradkernError):
    """A GRADKERN_* environment variable holds a value gradkern cannot use: no number, or one below the least
    the variable takes (docs/environment.md); raised where it is read, at import for most."""


class InternalError(GradkernError):
    """A gradkern bug: an invariant of the IR was broken by a pass."""


class CacheWarning(RuntimeWarning):
    """gradkern's disk cache was damaged (and rebuilt) or could not be used (code kept in memory)."""
