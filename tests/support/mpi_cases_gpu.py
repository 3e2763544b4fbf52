"""gradkern.mpi on device arrays, run on every rank of `mpiexec -n P python -m mpi4py tests/support/mpi_cases_gpu.py
OUT DEVICE` (tests/gpu/test_gpu_mpi.py; docs/distributed.md, "Not yet"). DEVICE is `cupy` (CuPy arrays on a GPU: the
exchanges and the allreduce stage them through host buffers, `.get()` and back), `fakecupy` (the same path on
tests/support/fakecupy.py's stand-in, in CI) or `hostcuda` (NumPy arrays whose
launches run the CUDA backend's C on the host, tests/support/devices.py: every kernel on the CUDA path, the
messages from host memory). Each rank runs mpi_cases.py's simulation (exchanges in a time loop, plain and
checkpointed) in reverse and forward mode and an allreduce program on DEVICE arrays and on NumPy arrays on the
Numba backend, on the same grid, and compares them (and the gathered gradients, on rank 0); it writes
OUT/rank<r>.json: {case: "ok" or the failure}."""

from __future__ import annotations

import json
import os
import sys
import traceback

import mpi_cases as mc
import numpy as np
from devices import CUPY, HOSTCUDA

import gradkern as gk
import gradkern.mpi as gkm

WORLD = mc.WORLD
# DEVICE against NumPy on the Numba backend, the same ranks and blocks: device math is a few ulps from glibc's
# and NVRTC contracts multiply-adds (docs/hostcuda.md), compounded over the loop's 2 T steps; as
# tests/gpu/test_gpu_programs.py, 1e-10 of the largest value. A lost or doubled halo term is O(1).
RTOL = 1e-10


def _run(device, name, checkpointed, mode, aware=False):
    """mc.simulate's derivatives on `device` (None: NumPy on the Numba backend), on a grid over WORLD (`aware`:
    its CuPy blocks handed to MPI as device buffers, `cuda_aware=True`): this rank's shadows (or tangents) as
    NumPy arrays, the gathered du (rank 0), and the summed dc / tE."""
    shape, ghosts, periodic, cd = mc.CONFIGS[name]
    grid = gkm.Cartesian(WORLD, shape, ghosts=ghosts, periodic=periodic, cuda_aware=aware and device is not None)
    to = device.to if device else np.copy
    host = device.host if device else np.asarray
    u0, v0 = mc.initial(shape, ghosts, 7)
    u, v = (to(mc.window(grid, a).copy()) for a in (u0, v0))
    like = None if device is None else u
    assert grid.zeros(like=like).__class__ is u.__class__  # a CuPy block when like is one
    c = 0.15
    rng = np.random.default_rng(11)
    with device.running() if device else _nothing():
        if mode == "reverse":
            du, dv, E, dE = grid.zeros(like=like), grid.zeros(like=like), to(np.zeros(1)), to(np.ones(1))
            got = gk.autodiff(mc.simulate, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Duplicated(E, dE),
                              gk.Active(c), grid, cd, checkpointed)
            out = {"u": host(u), "du": host(du), "dv": host(dv), "E": host(E)}
            scalar = WORLD.allreduce(float(got[3]))  # a float also where the derivative came from the device
            gathered = grid.gather(du, padded=True)
        else:
            tu, tv = (to(mc.window(grid, rng.standard_normal(u0.shape)).copy()) for _ in range(2))
            E, tE = to(np.zeros(1)), to(np.zeros(1))
            gk.autodiff(mc.simulate, gk.Duplicated(u, tu), gk.Duplicated(v, tv), gk.Duplicated(E, tE),
                        gk.Duplicated(c, 0.5), grid, cd, checkpointed, mode=gk.Forward)
            out = {"u": host(u), "tu": host(tu), "E": host(E)}
            scalar = WORLD.allreduce(float(host(tE)[0]))
            gathered = grid.gather(tu, padded=True)
    grid.free()
    return out, scalar, gathered


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _compare(device, name, checkpointed, mode, aware=False):
    got = _run(device, name, checkpointed, mode, aware)
    want = _run(None, name, checkpointed, mode)
    what = f"{name} {mode} ({'checkpointed' if checkpointed else 'plain'}) on rank {mc.RANK}"
    for key in want[0]:
        mc.close(got[0][key], want[0][key], f"{what}: {key}", RTOL)
    mc.close(np.asarray(got[1]), np.asarray(want[1]), f"{what}: the summed scalar", RTOL)
    if mc.RANK == 0:
        mc.close(got[2], want[2], f"{what}: gathered", RTOL)


def case_exchanges_reverse(device):
    _compare(device, "2d-9point", False, "reverse")  # faces and corners (a 9-point stencil), one axis periodic


def _direct_calls(module, name):
    """Count the calls of module.name (the device-buffer paths of halo.py and reduce.py): [count]."""
    count, real = [0], getattr(module, name)

    def counted(*a, **k):
        count[0] += 1
        return real(*a, **k)
    setattr(module, name, counted)
    return count, lambda: setattr(module, name, real)


def case_exchanges_reverse_cuda_aware(device):
    """The same exchanges with the blocks handed to MPI as device buffers (fakecupy's are host memory, which a
    MPI that is not CUDA-aware reads as such: the path's own code runs; on a GPU it needs a CUDA-aware MPI)."""
    from gradkern.mpi import halo
    count, undo = _direct_calls(halo, "device_sendrecv")
    try:
        _compare(device, "2d-9point", False, "reverse", aware=True)
    finally:
        undo()
    assert count[0] > 0, "no exchange took the device-buffer path"


def case_exchanges_reverse_1d_ghosts_2(device):
    _compare(device, "1d-periodic-g2", False, "reverse")


def case_exchanges_checkpointed(device):
    _compare(device, "2d-9point", True, "reverse")  # binomial, 2 snapshots on the device: exchanges recomputed


def case_exchanges_forward(device):
    _compare(device, "2d-9point", False, "forward")


@gk.kernel
def weighted_squares(x, w, E):
    i = gk.tid()
    gk.atomic_add(E, 0, w[i] * x[i] * x[i])


def weighted(x, w, E, aware=False):
    """A program: each rank's x summed over ranks in place, then sum(w x^2) into E."""
    gkm.allreduce(x, cuda_aware=aware)
    gk.launch(weighted_squares, x.shape[0], x, w, E)


def case_allreduce(device, aware=False):
    """gkm.allreduce on device arrays in a program (staged through host buffers; `aware`: handed to MPI as
    device buffers): the sum, and the reverse's sum over ranks of the adjoints, as the NumPy run's."""
    rng = np.random.default_rng(100 + mc.RANK)
    x0, w = rng.standard_normal(8), rng.standard_normal(8)
    results = []
    for dev in (device, None):
        to = dev.to if dev else np.copy
        host = dev.host if dev else np.asarray
        x, dx, E, dE = to(x0.copy()), to(np.zeros(8)), to(np.zeros(1)), to(np.ones(1))
        with dev.running() if dev else _nothing():
            gk.autodiff(weighted, gk.Duplicated(x, dx), gk.Const(to(w)), gk.Duplicated(E, dE),
                        aware and dev is not None)
        results.append((host(x), host(dx), host(E)))
    (x, dx, E), (xn, dxn, En) = results
    np.testing.assert_allclose(x, xn, rtol=1e-13, atol=1e-13)  # a sum of P numbers, the same MPI call
    np.testing.assert_allclose(x, WORLD.allreduce(x0), rtol=1e-13, atol=1e-13)
    mc.close(dx, dxn, f"allreduce dx on rank {mc.RANK}", RTOL)
    mc.close(E, En, f"allreduce E on rank {mc.RANK}", RTOL)
    assert np.any(dx != 0)


def case_allreduce_cuda_aware(device):
    from gradkern.mpi import reduce
    calls = [0]
    real = reduce._sum

    def counted(comm, a, into=None, direct=False):
        calls[0] += bool(direct)
        return real(comm, a, into, direct)
    reduce._sum = counted
    try:
        case_allreduce(device, aware=True)
    finally:
        reduce._sum = real
    assert calls[0] > 0, "no sum took the device-buffer path"


CASES = {name[5:]: f for name, f in globals().items() if name.startswith("case_")}


def main(out_dir: str, device_name: str, names: list[str]) -> None:
    if not names and device_name != "fakecupy" and os.environ.get("GRADKERN_TEST_CUDA_AWARE") != "1":
        # device pointers given to an MPI that is not CUDA-aware (the mpich wheel) crash it: those cases run on
        # a GPU only where the MPI is (GRADKERN_TEST_CUDA_AWARE=1), and in CI on the stand-in, whose are host's
        names = [n for n in CASES if not n.endswith("_cuda_aware")]
    if device_name == "fakecupy":  # the CuPy path's staging on the stand-in (fakecupy.py), installed as cupy
        from fakecupy import FAKE, installed
        with installed():
            _cases(out_dir, FAKE, names)
        return
    _cases(out_dir, {"cupy": CUPY, "hostcuda": HOSTCUDA}[device_name], names)


def _cases(out_dir: str, device, names: list[str]) -> None:
    report = {}
    for name in names or CASES:
        try:
            CASES[name](device)
            report[name] = "ok"
        except Exception:  # noqa: BLE001  (reported per case, then raised: python -m mpi4py aborts every rank)
            report[name] = traceback.format_exc()
            with open(os.path.join(out_dir, f"rank{mc.RANK}.json"), "w") as f:
                json.dump(report, f)
            raise
    with open(os.path.join(out_dir, f"rank{mc.RANK}.json"), "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
