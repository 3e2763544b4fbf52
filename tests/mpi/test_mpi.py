"""gradkern.mpi under `mpiexec -n P python -m mpi4py` (docs/distributed.md): tests/support/mpi_cases.py on P = 1, 2,
3 (uneven blocks), 4 (a 2x2 grid, oversubscribed on two cores) ranks, each rank reporting every case; a
sample on the CUDA backend's path (hostcuda); and a job whose one rank raises ends instead of hanging.
Skipped, with the reason, without mpi4py or mpiexec."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

SUPPORT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support")
MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None,
                       reason="mpi4py is not installed (pip install 'gradkern[mpi]')"),
    pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec on PATH or beside the interpreter (pip install mpich)"),
]


def _mpiexec(nranks: int, args: list[str], timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env or {})}
    env.setdefault("GRADKERN_COMPILE_WORKERS", "0")  # P ranks already fill the cores
    env.setdefault("MPIR_CVAR_POLLS_BEFORE_YIELD", "10")  # oversubscribed: waiting ranks yield their core
    # and one Numba thread per rank: a parallel launch's threads on cores the ranks already fill cost ~10 ms each
    # to wake (docs/distributed.md#running-under-mpiexec)
    env.setdefault("NUMBA_NUM_THREADS", "1")
    return subprocess.run([MPIEXEC, "-n", str(nranks), sys.executable, "-m", "mpi4py", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def job_failures(nranks: int, script: str, out, timeout: float, env: dict | None = None,
                 names: list[str] | None = None) -> list[str]:
    """Run tests/support/`script` on `nranks` ranks (its cases `names`, all when None), writing its reports into
    `out`: the failures (a case's on a rank, a rank with no report, the job's exit status, or a timeout: a hang, some
    rank waiting for a message)."""
    try:
        job = _mpiexec(nranks, [os.path.join(SUPPORT, script), str(out), *(names or [])], timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return [f"P={nranks}: timed out (a hang: some rank waits for a message)"]
    failures = []
    for rank in range(nranks):
        report = out / f"rank{rank}.json"
        if not report.exists():
            failures.append(f"rank {rank}: no report (exit {job.returncode})\n{job.stderr[-3000:]}")
            continue
        failures += [f"rank {rank} case {case}:\n{result}" for case, result in json.loads(report.read_text()).items()
                     if result != "ok"]
    if job.returncode:
        failures.append(f"exit status {job.returncode}\n{job.stderr[-3000:]}")
    return failures


def test_cases_on_1_to_4_ranks(tmp_path):
    """Every case of tests/support/mpi_cases.py passes on every rank, for P = 1 (which compiles the kernels into the
    session's cache), then 2, 3 and 4 ranks."""
    failures = []
    for nranks in (1, 2, 3, 4):
        out = tmp_path / f"p{nranks}"
        out.mkdir()
        try:
            # P = 1 compiles every case's kernels into a cold cache: 195 s on an idle 2-core machine (session 58),
            # so 240 s timed it out beside another xdist worker; the later P's find the cache warm, and their
            # 240 s is the hang detector
            job = _mpiexec(nranks, [os.path.join(SUPPORT, "mpi_cases.py"), str(out)],
                           timeout=900 if nranks == 1 else 240)
        except subprocess.TimeoutExpired:
            failures.append(f"P={nranks}: timed out (a hang: some rank waits for a message)")
            continue
        for rank in range(nranks):
            report = out / f"rank{rank}.json"
            if not report.exists():
                failures.append(f"P={nranks} rank {rank}: no report (exit {job.returncode})\n{job.stderr[-3000:]}")
                continue
            for case, result in json.loads(report.read_text()).items():
                if result != "ok":
                    failures.append(f"P={nranks} rank {rank} case {case}:\n{result}")
        if job.returncode:
            failures.append(f"P={nranks}: exit status {job.returncode}\n{job.stderr[-3000:]}")
    assert not failures, "\n".join(failures)


def test_cases_on_the_cuda_path(tmp_path):
    """The kernels of a sample of the cases through the CUDA backend's own code (GRADKERN_BACKEND=hostcuda:
    the generated CUDA C compiled for the host, docs/hostcuda.md), on 2 ranks: finite differences, the seeding
    table, and the P-rank derivatives against single-process ones computed on the same path."""
    from gradkern.backends.hostcuda import compiler
    if compiler() is None:
        pytest.skip("g++ is not on the PATH: backend hostcuda is unavailable (as tests/test_hostcuda.py)")
    out = tmp_path / "p2"
    out.mkdir()
    env = {"GRADKERN_BACKEND": "hostcuda"}
    job = _mpiexec(2, [os.path.join(SUPPORT, "mpi_cases.py"), str(out), "finite_differences", "vector_and_split",
                       "allreduce_seeding"], timeout=240, env=env)
    reports = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2) if (out / f"rank{r}.json").exists()]
    assert job.returncode == 0 and len(reports) == 2, job.stderr[-3000:]
    failed = {case: result for report in reports for case, result in report.items() if result != "ok"}
    assert not failed, failed


ABORT = """
import sys
from mpi4py import MPI
import numpy as np
comm = MPI.COMM_WORLD
if comm.rank == 1:
    raise RuntimeError("rank 1 fails alone")
comm.Recv(np.empty(1), source=1)  # would wait for ever for the failed rank
"""


def test_an_exception_on_one_rank_ends_the_job(tmp_path):
    """Under `python -m mpi4py` an uncaught exception on one rank aborts every rank (no hang)."""
    script = tmp_path / "abort.py"
    script.write_text(ABORT)
    start = time.monotonic()
    job = _mpiexec(2, [str(script)], timeout=60)
    assert job.returncode != 0
    assert "rank 1 fails alone" in job.stderr
    assert time.monotonic() - start < 60
