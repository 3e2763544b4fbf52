"""gradkern.mpi red team (session 51): a step of a differentiated, checkpointed program that raises on one rank only,
in the recorded forward or in the reverse sweep's recomputation, ends the whole job under `python -m mpi4py`
(docs/distributed.md#running-under-mpiexec) instead of leaving the other rank waiting in an exchange for ever.
(The cases of tests/support/mpi_cases2.py run in tests/mpi/test_mpi.py's jobs.)"""

from __future__ import annotations

import time

import pytest

from .test_mpi import _mpiexec, pytestmark  # noqa: F401  (the same skips: no mpi4py, no mpiexec)

RAISES = """
import sys
import numpy as np
from mpi4py import MPI
import gradkern as gk
import gradkern.mpi as gkm

@gk.kernel
def smooth(u, v):
    i = gk.tid()
    v[i + 1] = 0.25 * u[i] + 0.5 * u[i + 1] + 0.25 * u[i + 2]

grid = gkm.Cartesian(MPI.COMM_WORLD, (8,), ghosts=1, periodic=True)
calls = [0]
def program(u, v):
    def step(t):
        calls[0] += 1
        if grid.comm.rank == 1 and calls[0] == int(sys.argv[1]):
            raise RuntimeError(f"step {t} fails on rank 1 alone (call {calls[0]})")
        grid.exchange(u)
        gk.launch(smooth, grid.local_shape, u, v)
        grid.exchange(v)
        gk.launch(smooth, grid.local_shape, v, u)
    gk.checkpointed_loop(step, 4, snapshots=2)
u = np.random.default_rng(grid.comm.rank).random(grid.padded_shape)
gk.autodiff(program, gk.Duplicated(u, np.ones_like(u)), gk.Duplicated(np.zeros_like(u), np.zeros_like(u)))
print("finished", flush=True)
"""


@pytest.mark.parametrize("call", [2, 6], ids=["recorded forward", "reverse recomputation"])
def test_a_step_raising_on_one_rank_ends_the_job(tmp_path, call):
    """Call 2 of the step is the recorded forward's second step; call 6 is a recomputation in the reverse sweep
    (11 calls in all: the 4 of the recorded forward, then the recomputations of the binomial schedule)."""
    script = tmp_path / "raises.py"
    script.write_text(RAISES)
    start = time.monotonic()
    job = _mpiexec(2, [str(script), str(call)], timeout=90)
    assert job.returncode != 0, job.stdout
    assert f"fails on rank 1 alone (call {call})" in job.stderr, job.stderr[-3000:]
    assert "finished" not in job.stdout
    assert time.monotonic() - start < 90
