"""Ready-made differentiable HPC kernels (`gradkern.kernels`)."""

from .blas import matvec, saxpy
from .stencils import allen_cahn_step, heat_step_2d, laplace_2d

__all__ = ["saxpy", "matvec", "allen_cahn_step", "laplace_2d", "heat_step_2d"]
