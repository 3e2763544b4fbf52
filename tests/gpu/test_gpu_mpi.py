"""gradkern.mpi on device arrays (docs/distributed.md, "Not yet"; issue 32 item 5): a 2-rank job of
tests/support/mpi_cases_gpu.py, whose exchanges (plain, checkpointed, forward mode) and allreduce on device
arrays give the NumPy run's derivatives on the same ranks. On CuPy arrays (a GPU) every message is staged
through a host buffer (`.get()`, then back to the device); on hostcuda (`-m full`) the kernels run the CUDA
backend's C and the blocks are host memory, so the staging copies are NumPy's. Skipped, saying so, without
mpi4py, mpiexec (the mpich wheel's, on the GPU machine: docs/hostcuda.md, "The prepared GPU check"), a GPU or
g++."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest
from support.devices import HAS_GPU

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None,
                       reason="mpi4py is not installed (pip install 'gradkern[mpi]')"),
]

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
no_mpiexec = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec on PATH or beside the interpreter (pip install "
                                                         "mpich; on the GPU machine ci/gpu_check.py unpacks the wheel)")


def _job(tmp_path, device: str, names: list[str]) -> None:
    env = dict(os.environ, GRADKERN_COMPILE_WORKERS="0", MPIR_CVAR_POLLS_BEFORE_YIELD="10", NUMBA_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(TESTS, "support"), TESTS, env.get("PYTHONPATH"))
                                        if p)
    job = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "mpi4py",
                          os.path.join(TESTS, "support", "mpi_cases_gpu.py"), str(tmp_path), device, *names],
                         env=env, capture_output=True, text=True, timeout=240)
    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)
               if (tmp_path / f"rank{r}.json").exists()]
    assert job.returncode == 0 and len(reports) == 2, f"exit {job.returncode}\n{job.stdout[-2000:]}\n" \
                                                      f"{job.stderr[-4000:]}"
    failed = {case: result for report in reports for case, result in report.items() if result != "ok"}
    assert not failed, failed
    if names:
        assert all(set(report) == set(names) for report in reports)


@no_mpiexec
@pytest.mark.skipif(not HAS_GPU, reason="no CUDA GPU (CuPy)")
def test_exchanges_and_allreduce_on_cupy_arrays_on_2_ranks(tmp_path):
    """Every case: CuPy blocks staged through host memory give the NumPy run's derivatives."""
    _job(tmp_path, "cupy", [])


@no_mpiexec
def test_exchanges_and_allreduce_on_fake_cupy_arrays_on_2_ranks(tmp_path):
    """The CuPy job's staging path in CI, on fakecupy (tests/support/fakecupy.py): blocks that are no NumPy
    arrays, read back by `.get()` and written by `.set()` as CuPy's are, the exchange's reverse with corners and
    the allreduce program equal to the Numba run (no GPU has run the CuPy job yet: issue 32); and the same with
    `cuda_aware=True`, the blocks handed to MPI by their `__cuda_array_interface__` (the fake's pointers are
    host memory, which this MPICH, not CUDA-aware, reads as such)."""
    from gradkern.backends.hostcuda import compiler
    if compiler() is None:
        pytest.skip("g++ is not on the PATH: the stand-in compiles its kernels with it")
    _job(tmp_path, "fakecupy", ["exchanges_reverse", "allreduce", "exchanges_reverse_cuda_aware",
                                "allreduce_cuda_aware"])


@no_mpiexec
@pytest.mark.full
def test_exchanges_and_allreduce_on_the_cuda_path_on_2_ranks(tmp_path):
    """The CPU twin of the CuPy job, on hostcuda: the exchange's reverse with corners and the allreduce program,
    every launch through the CUDA backend's C, equal to the Numba run. `full` (`-m full`): from an empty cache
    it costs 17 s of CPU (two ranks compiling the same kernels for both backends, load 9 on 2 cores), past this
    area's CI budget. CI's test of the staging path on host memory is tests/mpi/test_mpi.py's
    test_cases_on_the_cuda_path (2 ranks on hostcuda: finite differences, vector and split mode, the allreduce
    seeding table), whose blocks are NumPy's."""
    from gradkern.backends.hostcuda import compiler
    if compiler() is None:
        pytest.skip("g++ is not on the PATH: backend hostcuda is unavailable")
    _job(tmp_path, "hostcuda", ["exchanges_reverse", "allreduce"])
