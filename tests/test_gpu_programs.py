"""Programs, checkpointed loops and custom rules on a device (tests/devices.py; DESIGN §6, 8; §6.1; §7): on
CuPy, saves, snapshots and internal shadows on the device, the fingerprint host-write guard, and the shipped
rules over cupy.fft / cupy.linalg / the CUDA Thomas kernel; on hostcuda, every kernel a program launches runs
the CUDA backend's C. Both give the gradients the NumPy run on the Numba backend gives (float64: 1e-10
relative, the backends' kernels and libraries round differently in the last bits and the loops compound it)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from devices import CUPY, HAS_GPU
from test_checkpoint import heat_ping_pong
from test_programs import ping_pong
from test_rules import implicit_diffusion

import gradkern as gk
import gradkern.kernels as library

pytestmark = pytest.mark.gpu

RTOL = 1e-10


def _gradients(prog, arrays, scalars, seeds, device=None):
    """gk.autodiff of prog on `device` (None: NumPy on the Numba backend): the shadows and primals (on the host)
    and the Active derivatives."""
    to = device.to if device else np.copy
    prim, shadows = [to(a) for a in arrays], [to(s) for s in seeds]
    with device.running() if device else contextlib.nullcontext():
        got = gk.autodiff(prog, *[gk.Duplicated(p, d) for p, d in zip(prim, shadows)], *scalars)
    host = device.host if device else np.asarray
    return [host(d) for d in shadows], [g for g in got if g is not None], [host(p) for p in prim]


def _same(device, prog, arrays, scalars, seeds):
    want = _gradients(prog, arrays, scalars, seeds)
    got = _gradients(prog, arrays, scalars, seeds, device)
    for a, b in zip(want[0] + want[2], got[0] + got[2]):
        np.testing.assert_allclose(b, a, rtol=RTOL, atol=1e-13)
    np.testing.assert_allclose(got[1], want[1], rtol=RTOL)


def _inputs(n, seed=0):
    r = np.random.default_rng(seed)
    return [r.uniform(0.2, 0.8, n), r.uniform(0.2, 0.8, n), np.zeros(1)], [np.zeros(n), np.zeros(n), np.ones(1)]


def test_program_on_gpu_equals_cpu(device):
    arrays, seeds = _inputs(64)
    _same(device, ping_pong, arrays, (gk.Active(0.2), 5), seeds)


@pytest.mark.parametrize("storage", ["device", "host"])
def test_checkpointed_loop_on_gpu_equals_cpu(storage, device):
    arrays, seeds = _inputs(64, 1)
    prog = heat_ping_pong(lambda step, nsteps: gk.checkpointed_loop(step, nsteps, snapshots=3, storage=storage))
    _same(device, prog, arrays, (gk.Active(0.2), 9), seeds)


@pytest.mark.skipif(not HAS_GPU, reason="no CUDA GPU (CuPy): the fingerprint guard is for CuPy arrays, which "
                    "cannot be made read-only (NumPy's guard: test_programs.py)")
def test_host_write_to_a_device_array_is_refused():
    cupy = CUPY.xp

    def prog(u, v, E, c):
        gk.launch(library.allen_cahn_step, u.shape[0], u, v, c, 0.01)
        v[0] = 3.0  # a host write CuPy cannot refuse: the fingerprint finds it before the next launch
        gk.launch(library.allen_cahn_step, u.shape[0], v, u, c, 0.01)
    u, v = cupy.asarray(np.random.rand(16)), cupy.asarray(np.random.rand(16))
    du, dv = cupy.zeros(16), cupy.ones(16)
    with pytest.raises(gk.ProgramError, match="host write"):
        gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Duplicated(cupy.zeros(1), cupy.ones(1)),
                    gk.Active(0.2))
    assert float(du.sum()) == 0.0 and float(dv.sum()) == 16.0


@pytest.mark.parametrize("loop", ["plain", "checkpointed"])
def test_implicit_diffusion_with_rules_on_gpu_equals_cpu(loop, device):
    def plain(step, nsteps):
        for t in range(nsteps):
            step(t)
    prog = implicit_diffusion(plain if loop == "plain" else
                              lambda step, nsteps: gk.checkpointed_loop(step, nsteps, snapshots=2))
    r = np.random.default_rng(2)
    n = 33
    arrays = [r.uniform(0.2, 0.8, n), r.uniform(0.2, 0.8, n), r.random(n)]
    _same(device, prog, arrays, (gk.Active(0.8), 4), [np.zeros(n), np.zeros(n), r.random(n)])


@pytest.mark.parametrize("rule", ["tridiagonal_solve", "dense_solve", "poisson_periodic", "spectral_derivative"])
def test_shipped_rules_on_gpu_equal_cpu(rule, device):
    """Each shipped rule alone: primal and reverse on CuPy equal NumPy's."""
    r = np.random.default_rng(3)
    n, m = 16, 3
    if rule == "tridiagonal_solve":
        b = r.uniform(3.0, 4.0, (n, m))
        args = [r.uniform(-1, 1, (n, m)), b, r.uniform(-1, 1, (n, m)), r.random((n, m)), r.random((n, m))]
        scalars = ()
    elif rule == "dense_solve":
        A = r.uniform(-1, 1, (m, n, n)) + 4 * n * np.eye(n)
        args = [A, r.random((m, n)), r.random((m, n))]
        scalars = ()
    else:
        args = [r.random((m, n)), r.random((m, n))]
        scalars = (gk.Active(2.5),)
    fn = getattr(library, rule)
    seeds = [np.zeros_like(a) for a in args[:-1]] + [r.random(args[-1].shape)]

    def prog(*xs):
        fn(*xs)
    _same(device, prog, args, scalars, seeds)
