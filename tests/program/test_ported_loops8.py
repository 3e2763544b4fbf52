"""An eighth round of third-party host loops as programs (docs/programs.md, "Ported host loops", session 55): the
ports in tests/support/ported_loops8*.py (NVIDIA Warp's wave and SPH example steps, Taichi's mpm88 substep loop,
NVIDIA cuda-samples' FDTD3d, reduction, HSOpticalFlow, bilateralFilter and BlackScholes drivers, Rodinia's CUDA
hotspot driver, PolyBench/GPU's 3-D convolution), leaning on host time fed into launches, names swapped, halos
copied with the volume, device-to-device copies of shrinking slices and back into a launch's input, pyramids of views
with a solver loop per warp, launches running a count of steps the host computed, a run-time plane index, a launch
repeated over its own results. Each port's gradient is checked by gradkern.testing.check_grad (central differences
in float64 and the dot-product test, random non-zero inputs) and, where its loop is checkpointable, its
gk.checkpointed_loop gradient against the store-all one (support/ported_loops.py: check_loop_gradient); the
spellings gradkern refuses are refused naming the line and the spelling that works, which is ported too."""

from __future__ import annotations

import numpy as np
import pytest
from support import ported_loops8 as p8
from support import ported_loops8_apps as pa
from support.ported_harness import on_interpreter
from support.ported_loops import assert_same_gradient, check_loop_gradient, checkpointed, plain, round_tests

import gradkern as gk


def _u(rng, *shape, lo=0.5, hi=1.5):
    return rng.uniform(lo, hi, shape)


def _dup(a):
    return gk.Duplicated(a, np.zeros_like(a))


def _frames(rng, n):
    """HSOpticalFlow's two frames: the second the first shifted a pixel right, plus noise."""
    i0 = _u(rng, n, n, lo=0.0, hi=1.0)
    return i0, np.roll(i0, 1, axis=1) + _u(rng, n, n, lo=-0.05, hi=0.05)


def _specs(rng):
    """name -> (program, its arguments, the loop -> program factory whose checkpointed twin is checked, or None)."""
    n = p8.WAVE["width"] * p8.WAVE["height"]
    particles = 4
    i0, i1 = _frames(rng, 4)
    return {
        "warp_wave": (p8.warp_wave(), [_dup(_u(rng, n, lo=-0.2, hi=0.2)), _dup(_u(rng, n, lo=-0.2, hi=0.2)),
                                       _dup(np.zeros(n)), gk.Active(1.0), gk.Active(0.5)], p8.warp_wave_parity),
        "mpm88": (p8.mpm88(plain), [_dup(_u(rng, particles, 2, lo=0.38, hi=0.62)),
                                    _dup(_u(rng, particles, 2, lo=-1.0, hi=1.0)),
                                    _dup(_u(rng, particles, 2, 2, lo=-0.5, hi=0.5)),
                                    _dup(_u(rng, particles, lo=0.9, hi=1.1)), gk.Active(400.0)], p8.mpm88),
        "warp_sph": (p8.warp_sph(plain), [_dup(_u(rng, particles, 3, lo=0.3, hi=1.3)),
                                          _dup(_u(rng, particles, 3, lo=-0.3, hi=0.3)), gk.Active(0.025)], p8.warp_sph),
        "fdtd3d": (p8.fdtd3d(), [_dup(_u(rng, 10, 11, 9)), _dup(np.zeros((10, 11, 9))),
                                 _dup(_u(rng, p8.FDTD_RADIUS + 1, lo=0.05, hi=0.15))], p8.fdtd3d_parity),
        "cuda_reduction": (p8.cuda_reduction(), [_dup(_u(rng, 21)), _dup(np.zeros(1))], None),
        "hs_optical_flow": (p8.hs_optical_flow(), [_dup(i0), _dup(i1), _dup(np.zeros((4, 4))), _dup(np.zeros((4, 4))),
                                                   gk.Active(0.1)], p8.hs_optical_flow),
        "rodinia_hotspot": (pa.rodinia_hotspot(), [gk.Const(_u(rng, 4, 4, lo=0.0, hi=1e-3)),
                                                   _dup(_u(rng, 4, 4, lo=320.0, hi=340.0)),
                                                   _dup(_u(rng, 4, 4, lo=320.0, hi=340.0)), _dup(np.zeros((4, 4))),
                                                   gk.Active(0.0005)], pa.rodinia_hotspot),
        "polybench_conv3d": (pa.polybench_conv3d(plain), [_dup(_u(rng, 5, 4, 5)), _dup(_u(rng, 5, 4, 5)),
                                                          gk.Active(0.6)], pa.polybench_conv3d),
        "bilateral": (pa.bilateral(plain), [_dup(_u(rng, 4, 5, lo=0.0, hi=1.0)), _dup(np.zeros((4, 5))),
                                            gk.Active(1.2), gk.Active(0.4)], pa.bilateral),
        "black_scholes": (pa.black_scholes_loop(plain), [_dup(np.zeros(5)), _dup(np.zeros(5)),
                                                         _dup(_u(rng, 5, lo=5.0, hi=30.0)),
                                                         _dup(_u(rng, 5, lo=1.0, hi=100.0)),
                                                         _dup(_u(rng, 5, lo=0.25, hi=10.0)), gk.Active(0.02),
                                                         gk.Active(0.30)], pa.black_scholes_loop),
    }


# Every port's check runs in CI on the interpreter (docs/testing.md "Test time") but FULL's, whose patterns CI meets
# elsewhere: hotspot's and HSOpticalFlow's toggles in the swap test below (the same launches, store-all, against the
# parity spelling) and the view regression test, mpm88's kernels in tests/library/test_ported_hpc5.py. The Numba
# backend's gradient runs in CI for NUMBA_SAMPLE (the reduction: one kernel, slices of shrinking length), the others'
# under `full`.
FULL = {"hs_optical_flow", "rodinia_hotspot", "mpm88"}
NUMBA_SAMPLE = {"cuda_reduction"}
globals().update(round_tests(_specs, FULL, NUMBA_SAMPLE))


@pytest.mark.parametrize("name, parity", [("warp_wave", p8.warp_wave_parity(plain)),
                                          ("fdtd3d", p8.fdtd3d_parity(plain)),
                                          ("hs_optical_flow", p8.hs_optical_flow(plain)),
                                          ("rodinia_hotspot", pa.rodinia_hotspot(plain))])
def test_swaps_of_names_are_the_parity_spelling(name, parity, monkeypatch):
    """Warp's `(grid0, grid1) = (grid1, grid0)` with the time summed on the host, FDTD3d's pointer toggle,
    HSOpticalFlow's Swap(du0, du1) and hotspot's `src`/`dst` index toggle with the result read from
    `MatrixTemp[ret]`: the same launches as the checkpointable spelling (buffers from the step's
    parity, the time s * dt), so the same gradient and primals."""
    on_interpreter(monkeypatch)
    program, args, _ = _specs(np.random.default_rng(3))[name]
    assert_same_gradient(program, parity, args)


# -- the spellings a porting user writes first ------------------------------------------------------------------------
def _refused(match, program, *args):
    shadows = [a.dval.copy() for a in args if isinstance(a, gk.Duplicated)]
    with pytest.raises(gk.ProgramError, match=match) as info:
        gk.autodiff(program, *args)
    assert "gradkern/" not in str(info.value).replace("tests/program", "")  # the user's lines, not ours
    for a, s in zip([a for a in args if isinstance(a, gk.Duplicated)], shadows):
        np.testing.assert_array_equal(a.dval, s)
    return info.value


def test_reduction_device_to_device_copy_in_numpy_is_refused_naming_gk_copy(monkeypatch):
    """reduction.cpp's `cudaMemcpy(d_intermediateSums, d_odata, s, DeviceToDevice)` as NumPy writes it,
    `inter[:s] = odata[:s]`: the first pass's copy goes into a fresh array (a gk.copy), the second's into the array
    the first pass's launch took, which the host-write guard refuses naming the line and gk.copy (the port's
    spelling); nothing changed."""
    on_interpreter(monkeypatch)
    rng = np.random.default_rng(20)
    info = _refused(r"host write to 'inter' at .*ported_loops8\.py:\d+ \(`inter\[:s\] = odata\[:s\]",
                    p8.cuda_reduction(host_copy=True), gk.Duplicated(_u(rng, 21), rng.random(21)),
                    gk.Duplicated(np.zeros(1), np.ones(1)))
    assert "gk.copy(dst, src)" in str(info)


def test_optical_flow_copy_back_in_numpy_is_refused_naming_gk_copy(monkeypatch):
    """ComputeFlowGold's final `memcpy(u0, u, ...)` ("solution is not in the specified array") as
    `np.copyto(u0, u)`: u0 is the argument the finest level's adds wrote; refused naming the line and gk.copy."""
    on_interpreter(monkeypatch)
    _, args, _ = _specs(np.random.default_rng(21))[("hs_optical_flow")]
    info = _refused(r"host write to .*'u0'.* at .*ported_loops8\.py:\d+ \(`copy_back\(u0, u\)`\)",
                    p8.hs_optical_flow(copy_back=np.copyto), *args)
    assert "gk.copy(dst, src)" in str(info)


def test_wave_time_summed_across_checkpointed_substeps_is_refused_naming_t_times_dt(monkeypatch):
    """Warp's `self.sim_time += self.sim_dt` kept in a nonlocal across checkpointed substeps: a recomputed substep
    reads the time the last one left, so its displacement centre differs; refused when the reverse recomputes it,
    the hint naming `t * dt`."""
    on_interpreter(monkeypatch)
    _, args, _ = _specs(np.random.default_rng(22))["warp_wave"]
    with pytest.raises(gk.ProgramError, match=r"launched 'wave_displace' .* with other scalar arguments") as info:
        gk.autodiff(p8.warp_wave_time_kept(checkpointed), *args)
    assert "`t * dt`" in str(info.value)


# -- a checkpointed step launched on another view of the same buffer (program/loopstate.py) -------------------------
@gk.kernel
def _advance(src, dst, c):
    i = gk.tid()
    dst[i] = src[i] + c * src[i] * src[i]


def _toggled_rows(u, c):
    """Two time levels as the rows of one (2, n) array, the current one an index toggled on the host (nbody's
    `m_currentRead = 1 - m_currentRead` into one allocation)."""
    cur = 0

    def step(t):
        nonlocal cur
        gk.launch(_advance, u.shape[1], u[cur], u[1 - cur], c)
        cur = 1 - cur
    gk.checkpointed_loop(step, 5, snapshots=2)


def _parity_rows(u, c):
    def step(t):
        gk.launch(_advance, u.shape[1], u[t % 2], u[1 - t % 2], c)
    gk.checkpointed_loop(step, 5, snapshots=2)


def test_a_recomputed_step_on_another_row_of_the_same_array_is_refused(monkeypatch):
    """Before: the recompute check compared each launch's buffers, not where in them its views lay, so a step that
    picked a row of one (2, n) array by an index kept outside the step recomputed on the other row and the gradient
    was silently wrong (d/dc -12.4 where central differences give -71.3). Now the view (offset, shape, strides) is
    part of the step's signature: refused naming the step, the launch and both views; the row picked by t's parity
    is checked by check_grad."""
    on_interpreter(monkeypatch)
    rng = np.random.default_rng(23)
    u = _u(rng, 2, 3, lo=0.5, hi=1.0)
    with pytest.raises(gk.ProgramError, match=r"on another part of the same array than when it was recorded \(its "
                                              r"array argument 1: shape \(3,\) at byte offset 0 then, shape \(3,\) "
                                              r"at byte offset 24 recomputed\)") as info:
        gk.autodiff(_toggled_rows, gk.Duplicated(u.copy(), np.ones((2, 3))), gk.Active(0.3))
    assert "`cur = 1 - cur`" in str(info.value)
    check_loop_gradient(_parity_rows, gk.Duplicated(u.copy(), np.zeros((2, 3))), gk.Active(0.3))
