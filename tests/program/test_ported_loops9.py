"""A ninth round of third-party host loops as programs (docs/programs.md, "Ported host loops", session 56): the
ports in tests/support/ported_loops9*.py (Taichi's MGPCG example, HPGMG's full multigrid, TeaLeaf's PPCG solver,
Castro's retry with subcycling, pyro2's Burgers driver, CloverLeaf's advection sweeps, Veros' rotated time levels,
HPCG's multigrid preconditioner, Warp's cloth substeps), leaning on loops nested in loops (CG around a V-cycle
around red-black sweeps, V-cycles from each level of a full-multigrid pass, CG presteps then flexible CG around
Chebyshev inner steps, frames around substeps, a recursive V-cycle), a step discarded and its state restored from
memory, dt from a CFL reduction with the last step cut, sweeps on transposed views in an order toggled on the host,
three time levels permuted on the host, and exits on derived scalars. Each port's gradient is checked by
gradkern.testing.check_grad (central differences in float64 and the dot-product test, random non-zero inputs) and,
where its loop is checkpointable, its gk.checkpointed_loop gradient against the store-all one
(support/ported_loops.py: check_loop_gradient)."""

from __future__ import annotations

import numpy as np
import pytest
from support import ported_loops9 as p9
from support import ported_loops9_apps as pa
from support.ported_harness import on_interpreter
from support.ported_loops import assert_same_gradient, plain, round_tests

import gradkern as gk


def _u(rng, *shape, lo=0.5, hi=1.5):
    return rng.uniform(lo, hi, shape)


def _dup(a):
    return gk.Duplicated(a, np.zeros_like(a))


def _padded(a):
    """`a` inside a zero halo a cell wide."""
    out = np.zeros((a.shape[0] + 2, a.shape[1] + 2))
    out[1:-1, 1:-1] = a
    return out


def _density(rng, n=12):
    """Castro's profile: a steep bump on a thin background, so a subcycle at CFL 1.8 drives a cell negative."""
    return 0.05 + np.exp(-((np.arange(n) - 5.0) / 1.2) ** 2) * _u(rng, n, lo=0.8, hi=1.2)


def _cloth(rng):
    """A 3 x 3 cloth just above the ground (y up), so its free particles reach the contact within the substeps."""
    q = np.array([[0.2 * x, 0.004 + 0.004 * y, 0.2 * y] for y in range(3) for x in range(3)])
    return q + _u(rng, 9, 3, lo=-0.002, hi=0.002)


def _specs(rng):
    """name -> (program, its arguments, the loop -> program factory whose checkpointed twin is checked, or None)."""
    column = np.zeros((6, 3))
    u, h = column.copy(), column.copy()
    u[:, 1], h[:, 1] = _u(rng, 6, lo=-0.5, hi=0.5), _u(rng, 6)  # Veros' tau = 1 holds the initial state
    return {
        "taichi_mgpcg": (p9.taichi_mgpcg(), [_dup(_padded(_u(rng, 4, 4, lo=-1.0, hi=1.0))), _dup(np.zeros((6, 6))),
                                             gk.Active(0.3)], p9.taichi_mgpcg_loop),
        "hpgmg_fmg": (p9.hpgmg_fmg(), [_dup(_padded(_u(rng, 8, 8, lo=-1.0, hi=1.0))), _dup(np.zeros((10, 10))),
                                       gk.Active(0.3)], None),
        "tealeaf_ppcg": (p9.tealeaf_ppcg(), [_dup(_padded(_u(rng, 4, 5))), _dup(_u(rng, 6, 7)), gk.Active(0.4)],
                         None),
        "castro_retry": (p9.castro_retry(plain), [_dup(_density(rng)), gk.Active(1.0)], p9.castro_retry),
        "pyro_burgers": (p9.pyro_burgers(), [_dup(_u(rng, 6, 5, lo=0.2, hi=1.0)), _dup(_u(rng, 6, 5, lo=-1.0, hi=-0.2)),
                                             gk.Active(0.8)], None),
        "clover_advection": (pa.clover_advection(), [_dup(_u(rng, 3, 4)), _dup(_u(rng, 3, 4)),
                                                     _dup(_u(rng, 3, 5, lo=-1.0, hi=1.0)),
                                                     _dup(_u(rng, 4, 4, lo=-1.0, hi=1.0)), gk.Active(0.1)],
                             pa.clover_advection_loop),
        "veros_levels": (pa.veros_rotated(), [_dup(u), _dup(h), gk.Active(0.981)], pa.veros_levels),
        "hpcg_mg": (pa.hpcg_mg(), [_dup(_u(rng, 16)), _dup(np.zeros(16)), gk.Active(0.2)], None),
        "warp_cloth": (pa.warp_cloth(), [_dup(_cloth(rng)), _dup(_u(rng, 9, 3, lo=-0.1, hi=0.1)),
                                         _dup(np.zeros((9, 3))), _dup(np.zeros((9, 3))),
                                         _dup(_u(rng, 12, lo=30.0, hi=50.0))],
                       pa.warp_cloth_loop),
    }


# Every port's check runs in CI on the interpreter (docs/testing.md "Test time") but FULL's, whose patterns CI meets
# elsewhere: the cloth's toggled states in the swap test below (the same launches, store-all, against the parity
# spelling). The Numba backend's gradient runs in CI for NUMBA_SAMPLE (Veros' levels: two 1-D kernels on column
# views chosen by host indices), the others' under `full`.
FULL = {"warp_cloth"}
NUMBA_SAMPLE = {"veros_levels"}
globals().update(round_tests(_specs, FULL, NUMBA_SAMPLE))


@pytest.mark.parametrize("name, parity", [("clover_advection", pa.clover_advection(plain)),
                                          ("veros_levels", pa.veros_levels(plain)),
                                          ("warp_cloth", pa.warp_cloth(plain))])
def test_host_toggles_and_rotations_are_the_parity_spelling(name, parity, monkeypatch):
    """CloverLeaf's `advect_x = .NOT. advect_x`, Veros' `taum1, tau, taup1 = tau, taup1, taum1` and Warp's
    `(state_0, state_1) = (state_1, state_0)`, each kept on the host across a plain loop: the same launches as the
    checkpointable spelling (the direction, the levels, the states from t), so the same gradient and primals."""
    on_interpreter(monkeypatch)
    program, args, _ = _specs(np.random.default_rng(3))[name]
    assert_same_gradient(program, parity, args)


def test_the_data_driven_paths_are_taken(monkeypatch):
    """The host decisions each port exists for happen on these inputs: MGPCG and HPCG's CG stop on their residual
    before the cap, so do FMG's V-cycles after the FMG pass, PPCG switches from CG after its presteps and stops on
    its error, Castro retries a failed subcycle (two accepted subcycles in a step: one retry), pyro's loop cuts its
    last step to tmax."""
    on_interpreter(monkeypatch)
    specs = _specs(np.random.default_rng(1))

    def values(name):
        return [a.val.copy() if isinstance(a, gk.Duplicated) else a.val for a in specs[name][1]]
    mg, hp, pp, sw, sub, steps, vc = [], [], [], [], [], [], []
    p9.taichi_mgpcg(iterations=mg)(*values("taichi_mgpcg"))
    p9.hpgmg_fmg(vcycles=vc)(*values("hpgmg_fmg"))
    pa.hpcg_mg(iterations=hp)(*values("hpcg_mg"))
    p9.tealeaf_ppcg(iterations=pp, switched=sw)(*values("tealeaf_ppcg"))
    p9.castro_retry(plain, subcycles=sub)(*values("castro_retry"))
    u, v, cfl = values("pyro_burgers")
    p9.pyro_burgers(steps=steps)(u, v, cfl)
    assert 1 < mg[0] < p9.MGPCG["max_iters"] and 1 < hp[0] < pa.HPCG_MG["max_iter"], (mg, hp)
    assert sw == [p9.PPCG["presteps"]] and sw[0] < pp[0] < p9.PPCG["max_iters"], (sw, pp)
    assert max(sub) > 1 and min(sub) == 1, sub
    assert 1 < steps[0] < p9.BURGERS["max_steps"], steps
    assert 0 < vc[0] < p9.FMG["max_vcycles"], vc


def test_tealeaf_eigenvalue_bounds_from_the_cg_presteps_are_refused_naming_the_line(monkeypatch):
    """TeaLeaf's own spelling: the Chebyshev bounds from the presteps' `alpha = rro / pw`, `beta = rrn / rro`
    read on the host from `np.zeros(1)` arrays, then np.linalg.eigvalsh of their Lanczos matrix. Before session 56
    the reads were plain numbers and the program ran with d(bounds)/d(inputs) dropped, no error; now refused at the
    first launch taking a coefficient, naming the line of the bounds, with no shadow changed. The port configures the
    bounds (tealeaf_cheby's spelling)."""
    on_interpreter(monkeypatch)
    rng = np.random.default_rng(24)
    args = [gk.Duplicated(_padded(_u(rng, 4, 5)), rng.random((6, 7))), gk.Duplicated(_u(rng, 6, 7), rng.random((6, 7))),
            gk.Active(0.4)]
    shadows = [a.dval.copy() for a in args[:2]]
    with pytest.raises(gk.ProgramError, match=r"kernel 'ppcg_init_sd'\) takes a scalar \(argument 'theta'\).*"
                                              r"ported_loops9\.py:\d+ \(`return eig\.min\(\), eig\.max\(\)`\)"):
        gk.autodiff(p9.tealeaf_ppcg(estimate=True), *args)
    for a, s in zip(args[:2], shadows):
        np.testing.assert_array_equal(a.dval, s)
