"""GRADKERN_BOUNDSCHECK=1 (transforms/boundscheck.py): every access of every
generated kernel is checked, parallel launches included, on every backend; a
launch that leaves an array raises LaunchError naming the access and a thread,
and never touches memory outside its arrays. The flag is read when a kernel is
first specialised, so these kernels are used only with it set."""

from __future__ import annotations

import math
import shutil
import subprocess

import numpy as np
import pytest

import gradkern as gk
from gradkern.backends.hostcuda import compiler

# hostcuda runs the CUDA backend's bounds-checked C on the host (docs/hostcuda.md)
BACKENDS = ["cpu", "interp", pytest.param("hostcuda", marks=pytest.mark.skipif(
    compiler() is None, reason="g++ is not on the PATH: backend hostcuda is unavailable"))]


@gk.kernel
def bc_saxpy(a, x, y):
    i = gk.tid()
    y[i] = a * x[i] + y[i]


@gk.kernel
def bc_gather(x, idx, out):
    i = gk.tid()
    out[i] = x[idx[i]] * 2.0


@gk.kernel
def bc_rows(A, out):
    i, j = gk.tid()
    out[i, j] = A[i, j + 1] - A[i, j]


@gk.kernel
def bc_select_taped(y, z):
    i = gk.tid()
    y[i] = math.sin(z[i - 5]) if i >= 5 else 0.0  # z[i - 5] only where i >= 5
    if i >= 4:
        z[i] = 0.0  # z is overwritten: the augmented primal tapes z[i - 5]


@pytest.fixture(autouse=True)
def boundscheck(monkeypatch):
    monkeypatch.setenv("GRADKERN_BOUNDSCHECK", "1")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_launch_past_its_arrays_is_caught_in_parallel_and_writes_nothing_outside_them(backend, rng):
    """Issue 14.7: dim 13 on 8-element views of 16-element buffers wrote elements 8-12 of the buffer."""
    xbuf, ybuf = rng.uniform(0.5, 1.5, 16), rng.uniform(0.5, 1.5, 16)
    before = ybuf.copy()
    with pytest.raises(gk.LaunchError) as e:
        gk.launch(bc_saxpy, 13, 2.0, xbuf[:8], ybuf[:8], backend=backend)
    msg = str(e.value)
    assert "bc_saxpy" in msg and "test_boundscheck.py:" in msg and "thread (" in msg and "shape (8,)" in msg
    thread = int(msg.split("thread (")[1].split(",")[0])
    assert 8 <= thread < 13
    np.testing.assert_array_equal(ybuf[8:], before[8:])  # nothing outside the view changed


@pytest.mark.parametrize("backend", BACKENDS)
def test_indirect_and_2d_accesses_are_checked(backend, rng):
    x, out = rng.uniform(0.5, 1.5, 6), np.zeros(5)
    idx = np.array([0, 5, 2, 6, 1])
    with pytest.raises(gk.LaunchError, match=r"thread \(3,\) reads x\[idx\[i\]\]"):
        gk.launch(bc_gather, 5, x, idx, out, backend=backend)
    idx[3] = 4
    gk.launch(bc_gather, 5, x, idx, out, backend=backend)
    np.testing.assert_array_equal(out, 2.0 * x[idx])
    A = rng.uniform(0.5, 1.5, (3, 4))
    with pytest.raises(gk.LaunchError, match=r"thread \(\d, 3\) reads A\[i, \(j \+ 1\)\]"):
        gk.launch(bc_rows, (3, 4), A, np.zeros((3, 4)), backend=backend)
    o = np.zeros((3, 3))
    gk.launch(bc_rows, (3, 3), A, o, backend=backend)
    np.testing.assert_array_equal(o, np.diff(A, axis=1))


def test_derivative_kernels_are_checked_too(rng):
    x, y = rng.uniform(0.5, 1.5, 8), rng.uniform(0.5, 1.5, 8)
    with pytest.raises(gk.LaunchError, match="bc_saxpy"):
        gk.autodiff(bc_saxpy, gk.Active(2.0), gk.Duplicated(x, np.zeros(8)), gk.Duplicated(y, np.ones(8)), dim=9)
    dx = np.zeros(8)
    da = gk.autodiff(bc_saxpy, gk.Active(2.0), gk.Duplicated(x, dx), gk.Duplicated(y, np.ones(8)), dim=8)[0]
    np.testing.assert_allclose(dx, 2.0, rtol=1e-15)
    np.testing.assert_allclose(da, x.sum(), rtol=1e-14)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_taped_value_of_a_branch_not_taken_is_not_read(backend, rng):
    """The augmented primal tapes z[i - 5] for the reverse; it must not read it
    where the conditional expression does not (threads 0-4: z[-5] ... z[-1])."""
    z = rng.uniform(0.5, 1.5, 8)
    dy, dz = rng.uniform(0.5, 1.5, 8), np.zeros(8)
    forward, reverse = gk.autodiff_thunk(bc_select_taped, gk.Duplicated, gk.Duplicated, backend=backend)
    y = np.zeros(8)
    z0, dy0 = z.copy(), dy.copy()
    tape = forward(gk.Duplicated(y, dy), gk.Duplicated(z, dz))
    reverse(gk.Duplicated(y, dy), gk.Duplicated(z, dz), tape)
    want = np.zeros(8)
    want[:3] = np.cos(z0[:3]) * dy0[5:]  # d y[i] / d z[i - 5], i >= 5; z[4:] overwritten: its adjoint is 0
    np.testing.assert_allclose(dz, want, rtol=1e-14)


def test_checks_are_generated_only_when_asked(monkeypatch):
    x = np.ones(4)
    assert "_gkb_check" in gk.inspect(bc_gather, x, np.zeros(4, np.int64), x.copy()).source
    assert "_gkb_check" in gk.inspect(bc_gather, x, np.zeros(4, np.int64), x.copy(), backend="cuda").source
    monkeypatch.setenv("GRADKERN_BOUNDSCHECK", "0")

    @gk.kernel
    def unchecked(x, idx, out):
        i = gk.tid()
        out[i] = x[idx[i]]

    assert "_gkb_check" not in gk.inspect(unchecked, x, np.zeros(4, np.int64), x.copy()).source


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
def test_checked_cuda_compiles(tmp_path):
    x = np.ones(4)
    ins = gk.inspect(bc_gather, x, np.zeros(4, np.int64), x.copy(), backend="cuda")
    path = tmp_path / "checked.cu"
    path.write_text(ins.source)
    r = subprocess.run(["nvcc", "-arch=sm_80", "-c", "-o", str(tmp_path / "checked.o"), str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
