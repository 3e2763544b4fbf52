"""Distributed programs over MPI (docs/distributed.md): a Cartesian domain decomposition whose
halo exchange, and a sum over ranks, are custom rules, so a rank's program records them like
launches, checkpointed loops recompute them and the reverse sweep runs their adjoints in
reverse order on every rank.

    from mpi4py import MPI
    import gradkern.mpi as gkm
    grid = gkm.Cartesian(MPI.COMM_WORLD, (nx, ny), ghosts=1, periodic=(False, True))
    u = grid.zeros(np.float64)
    grid.exchange(u)

Needs mpi4py and an MPI (`pip install "gradkern[mpi]"`); run as
`mpiexec -n P python -m mpi4py script.py`.
"""

from __future__ import annotations

try:
    from mpi4py import MPI  # noqa: F401  (initialises MPI, as any mpi4py program does)
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError("gradkern.mpi needs mpi4py and an MPI library: pip install 'gradkern[mpi]' "
                              f"(mpi4py and the mpich wheels); importing mpi4py failed: {e}", name="mpi4py") from e

from .cartesian import Cartesian
from .deadline import get_timeout, set_timeout
from .errors import DistributedError
from .gradcheck import check_grad
from .reduce import allreduce

__all__ = ["Cartesian", "DistributedError", "allreduce", "check_grad", "get_timeout", "set_timeout"]
