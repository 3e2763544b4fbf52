"""gradkern.mpi's hangs that were not caught (issue 32), session 55: tests/support/mpi_cases_hangs.py in one job of 3
ranks on the interpreter (GRADKERN_BACKEND=interp: no kernel compiled per rank): a grid kept alive on one rank only,
nsteps=0 on one rank of a loop that only allreduces while no grid is alive, and plain loops whose trip counts differ
between ranks, each refused on every rank (docs/distributed.md#deadlocks-and-how-gradkern-prevents-them). Each case
was a deadlock before; the timeout makes a regression fail instead of hanging CI. Skipped, with the reason, without
mpi4py or mpiexec."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from .test_mpi import SUPPORT, _mpiexec, pytestmark  # noqa: F401  (the same skips: no mpi4py, no mpiexec)


def test_uncaught_hangs_are_refused_on_every_rank(tmp_path):
    """Every case passes on every rank (each refusal raised on every rank, no buffer of the refused call changed);
    a hang (some rank waiting for a message) fails at the timeout: the job takes ~5 s on two busy cores."""
    nranks = 3
    try:
        job = _mpiexec(nranks, [os.path.join(SUPPORT, "mpi_cases_hangs.py"), str(tmp_path)], timeout=120,
                       env={"GRADKERN_BACKEND": "interp"})
    except subprocess.TimeoutExpired:
        pytest.fail(f"P={nranks}: timed out (a hang: some rank waits for a message)")
    failures = []
    for rank in range(nranks):
        report = tmp_path / f"rank{rank}.json"
        if not report.exists():
            failures.append(f"rank {rank}: no report (exit {job.returncode})\n{job.stderr[-3000:]}")
            continue
        failures += [f"rank {rank} case {case}:\n{result}" for case, result in json.loads(report.read_text()).items()
                     if result != "ok"]
    if job.returncode:
        failures.append(f"exit status {job.returncode}\n{job.stderr[-3000:]}")
    assert not failures, "\n".join(failures)
