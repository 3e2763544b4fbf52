"""The reference interpreter as a backend (`backend="interp"`): nothing is
generated or compiled; the typed IR itself runs, one thread after another.
It is the test oracle (ir/interp.py), and raises IndexError out of bounds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..ir import nodes as ir
from ..ir.interp import interpret
from .base import Backend, Generated, LaunchInfo, check_launch_ndim


@dataclass(frozen=True)
class InterpLaunch(LaunchInfo):
    """The kernel as printed (bounds checks included): what the interpreter runs."""

    kernel: ir.Kernel


class InterpBackend(Backend):
    name = "interp"
    blocks_steps = True
    # it runs the serial check, and builds the GPU's two-launch form too, so tests compare them
    race_check_forms = ("serial", "parallel")

    def generate(self, k: ir.Kernel, launch_ndim: int, *, parallel: bool, strided: frozenset[str],
                 header: str) -> Generated:
        check_launch_ndim(launch_ndim)
        return Generated(info=InterpLaunch(k))

    def compile(self, code: Generated, cache: Path) -> Any:
        return None

    def run(self, typed: ir.Kernel, code: Generated, entry: Any, parallel: bool, dim: tuple[int, ...],
            values: list) -> None:
        interpret(code.info.kernel if code.info is not None else typed, dim, values)

    def array_module(self) -> Any:
        return np
