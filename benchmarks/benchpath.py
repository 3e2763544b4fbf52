"""The benchmark scripts' one piece of sys.path handling (benchmarks/README.md).

A script lives in its part's folder (kernels/, programs/, library/, compile/, runtime/, gpu/) and is run as
`python benchmarks/<part>/<name>.py`; it starts with

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import benchpath

after which the shared modules here (timing, report) and the scripts of every part (programs, reverse_cpu,
overhead...) import by bare name, as they did when all of them sat in one folder. Part folders are appended,
after the script's own folder: a part folder's name never shadows a module (a folder without __init__.py is
only a namespace package when no module of that name is found anywhere on the path)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
PARTS = ("kernels", "programs", "library", "compile", "runtime", "gpu")

for _folder in (ROOT, *(ROOT / part for part in PARTS)):
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))
