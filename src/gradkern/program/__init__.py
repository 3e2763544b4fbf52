"""Programs (docs/programs.md): derivatives of Python functions that launch many
kernels. Recorded through the runtime's hook; never reads a kernel body."""

from .report import LaunchRow, ProgramInspection
from .run import ProgramTape, forward, inspect, record, reverse, rule_alone, split, sweep
from .scalars import ActiveScalar
from .signature import refuse_keywords

__all__ = ["ProgramTape", "ProgramInspection", "LaunchRow", "ActiveScalar", "forward", "inspect", "record",
           "refuse_keywords", "reverse", "rule_alone", "split", "sweep"]
