"""Where compiled code is cached on disk: $GRADKERN_CACHE_DIR, else the user
cache directory, one subfolder per gradkern version."""

from __future__ import annotations

import os
from pathlib import Path

from .._version import __version__


def cache_dir() -> Path:
    root = os.environ.get("GRADKERN_CACHE_DIR")
    if root:
        # `~` expanded: set from Python, a container's ENV or a .env file, no shell expands it, and `~/gk` made a
        # folder named `~` in the working directory (docs/environment.md)
        base = Path(root).expanduser()
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gradkern"
    return base / f"v{__version__}"
