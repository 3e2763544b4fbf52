"""Ready-made differentiable HPC kernels (`gradkern.kernels`), one family per
module, and library calls with custom rules (docs/custom-rules.md): solves and spectral
operators. Every kernel's docstring states its maths, which arguments it
reads, writes or updates in place, and its launch domain."""

from . import blas, dense, lattice, losses, particles, sparse, spectral, stencils, transport, tridiagonal
from .blas import *  # noqa: F403
from .dense import *  # noqa: F403
from .lattice import *  # noqa: F403
from .losses import *  # noqa: F403
from .particles import *  # noqa: F403
from .sparse import *  # noqa: F403
from .spectral import *  # noqa: F403
from .stencils import *  # noqa: F403
from .transport import *  # noqa: F403
from .tridiagonal import *  # noqa: F403

FAMILIES = (blas, sparse, stencils, transport, lattice, particles, losses, tridiagonal, dense, spectral)
__all__ = [name for family in FAMILIES for name in family.__all__]
