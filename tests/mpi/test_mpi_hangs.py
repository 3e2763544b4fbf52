"""gradkern.mpi's hangs that were not caught (issue 32), session 55: tests/support/mpi_cases_hangs.py in one job of 3
ranks on the interpreter (GRADKERN_BACKEND=interp: no kernel compiled per rank): a grid kept alive on one rank only,
nsteps=0 on one rank of a loop that only allreduces while no grid is alive, and plain loops whose trip counts differ
between ranks, each refused on every rank (docs/distributed.md#deadlocks-and-how-gradkern-prevents-them). Each case
was a deadlock before; the timeout makes a regression fail instead of hanging CI. Skipped, with the reason, without
mpi4py or mpiexec."""

from __future__ import annotations

from .test_mpi import job_failures, pytestmark  # noqa: F401  (the same skips: no mpi4py, no mpiexec)


def test_uncaught_hangs_are_refused_on_every_rank(tmp_path):
    """Every case passes on every rank (each refusal raised on every rank, no buffer of the refused call changed);
    a hang (some rank waiting for a message) fails at the timeout: the job takes ~5 s on two busy cores."""
    failures = job_failures(3, "mpi_cases_hangs.py", tmp_path, 120, {"GRADKERN_BACKEND": "interp"})
    assert not failures, "\n".join(failures)
