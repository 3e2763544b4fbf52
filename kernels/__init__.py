"""Ready-made differentiable HPC kernels (`gradkern.kernels`), and library
calls with custom rules (DESIGN §7): solves and spectral operators."""

from .blas import matvec, saxpy
from .dense import dense_solve
from .spectral import poisson_periodic, spectral_derivative
from .stencils import allen_cahn_step, heat_step_2d, laplace_2d
from .tridiagonal import tridiagonal_solve

__all__ = ["saxpy", "matvec", "allen_cahn_step", "laplace_2d", "heat_step_2d",
           "tridiagonal_solve", "dense_solve", "poisson_periodic", "spectral_derivative"]
