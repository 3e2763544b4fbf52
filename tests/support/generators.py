"""What the random-kernel generators of tests/fuzz share: writing a kernel's text, and importing the module file
that gk.kernel reads the source from."""

from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np


def import_path(path: str):
    """Import the module file `path` under its file name (kept in sys.modules, where gk.kernel finds its source)."""
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class TextGenerator:
    """Random choices and indented lines; `scopes` holds the locals visible per block."""

    def __init__(self, rng: np.random.Generator, name: str):
        self.r = rng
        self.name = name
        self.lines: list[str] = []
        self.features: set[str] = set()
        self.scopes: list[list[str]] = []
        self.loops: list[str] = []  # enclosing loop variables, innermost last
        self.names = 0

    def pick(self, xs):
        return xs[int(self.r.integers(len(xs)))]

    def chance(self, p: float) -> bool:
        return bool(self.r.random() < p)

    def emit(self, depth: int, text: str):
        self.lines.append("    " * depth + text)

    def fresh(self, prefix: str = "t") -> str:
        self.names += 1
        return f"{prefix}{self.names}"

    def visible(self) -> list[str]:
        return [v for s in self.scopes for v in s]

    def block(self, depth: int, count: int):
        """`count` statements in a new scope (the subclass's `statement`)."""
        self.scopes.append([])
        for _ in range(count):
            self.statement(depth)
        self.scopes.pop()
