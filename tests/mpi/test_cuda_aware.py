"""`cuda_aware` of gkm.Cartesian and gkm.allreduce (docs/distributed.md, "CuPy arrays"): anything but a bool is
refused with DistributedError (on every rank: agreed like any bad argument; here one rank, COMM_SELF) before any
data moves. The device-buffer path itself runs on 2 ranks on the CuPy stand-in
(tests/gpu/test_gpu_mpi.py::test_exchanges_and_allreduce_on_fake_cupy_arrays_on_2_ranks)."""

from __future__ import annotations

import numpy as np
import pytest

MPI = pytest.importorskip("mpi4py.MPI", reason="mpi4py is not installed (pip install 'gradkern[mpi]')")
gkm = pytest.importorskip("gradkern.mpi")


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_a_grid_refuses_a_cuda_aware_that_is_not_a_bool(bad):
    with pytest.raises(gkm.DistributedError, match="cuda_aware must be True or False"):
        gkm.Cartesian(MPI.COMM_SELF, (8,), cuda_aware=bad)


def test_a_grid_keeps_its_flag_and_allreduce_refuses_a_bad_one():
    grid = gkm.Cartesian(MPI.COMM_SELF, (8,), cuda_aware=True)
    try:
        assert grid.cuda_aware is True and grid.halo.cuda_aware is True
        x = np.arange(3.0)
        with pytest.raises(gkm.DistributedError, match="cuda_aware must be True, False or None"):
            gkm.allreduce(x, comm=MPI.COMM_SELF, cuda_aware="no")
        np.testing.assert_array_equal(x, np.arange(3.0))
        np.testing.assert_array_equal(gkm.allreduce(x, comm=grid), np.arange(3.0))  # NumPy: staged as ever
    finally:
        grid.free()
