"""Numbers read from GRADKERN_* environment variables (docs/environment.md), checked where they are read.

A value that is no number, or one below the variable's least value, is a `ConfigurationError` naming the
variable, what it takes and what came (docs/errors.md#hostile-inputs): Python's own `ValueError` from `int()`
named neither, and most of these are read at import, so `import gradkern` failed with
`invalid literal for int() with base 10: 'junk'`. An unset or empty (blank) variable takes the default.
"""

from __future__ import annotations

import math
import os

from .errors import ConfigurationError


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    return value if value is not None and value.strip() else None


def env_int(name: str, default: int, minimum: int | None = 0) -> int:
    """The integer in environment variable `name` (`default` when unset or blank); `minimum` None: any."""
    value = _raw(name)
    if value is None:
        return default
    try:
        number = int(value.strip(), 10)
    except ValueError:
        number = None
    if number is None or (minimum is not None and number < minimum):
        floor = f" >= {minimum}" if minimum is not None else ""
        raise ConfigurationError(f"environment variable {name} must be an integer{floor}, got {value!r}",
                                 hint="unset it for its default, or see docs/environment.md")
    return number


def env_float(name: str, default: float, minimum: float = 0.0) -> float:
    """The real number in environment variable `name` (`default` when unset or blank), not NaN, at least
    `minimum` (inf is taken: 'always')."""
    value = _raw(name)
    if value is None:
        return default
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if math.isnan(number) or number < minimum:
        raise ConfigurationError(f"environment variable {name} must be a number >= {minimum:g}, got {value!r}",
                                 hint="unset it for its default, or see docs/environment.md")
    return number
