"""Programs (DESIGN §6): derivatives of Python functions that launch many
kernels. Recorded through the runtime's hook; never reads a kernel body."""

from .run import ProgramTape, forward, record, reverse, split, sweep
from .scalars import ActiveScalar

__all__ = ["ProgramTape", "ActiveScalar", "forward", "record", "reverse", "split", "sweep"]
