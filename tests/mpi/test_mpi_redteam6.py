"""gradkern.mpi red team, session 53: tests/support/mpi_cases6.py (real distributed patterns against the single-process
gradient of the same global problem and finite differences across ranks; hostile inputs refused on every rank) in one
job of 4 ranks (2x2 and 2x2x1 process grids, uneven blocks) and one of 3 (uneven 1-D blocks, a 3x1 grid), on the
interpreter (GRADKERN_BACKEND=interp: no kernel compiled per rank; the Numba path of the exchange and allreduce rules
is the same Python, run by tests/mpi/test_mpi.py). Skipped, with the reason, without mpi4py or mpiexec."""

from __future__ import annotations

import pytest

from .test_mpi import job_failures, pytestmark  # noqa: F401  (the same skips: no mpi4py, no mpiexec)


@pytest.mark.parametrize("nranks", [4])
def test_ported_patterns_and_hostile_inputs(tmp_path, nranks):
    """Every case passes on every rank; a hang (some rank waiting for a message) fails at the timeout."""
    failures = job_failures(nranks, "mpi_cases6.py", tmp_path, 180, {"GRADKERN_BACKEND": "interp"})
    assert not failures, "\n".join(failures)
