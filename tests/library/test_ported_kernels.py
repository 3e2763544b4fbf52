"""Kernels ported from public GPU and HPC codes (tests/support/ported.py: Rodinia, the CUDA samples,
CloverLeaf, PolyBench-ACC, XSBench, miniWeather, ELL SpMV, WENO5, a 27-point stencil, a masked Jacobi, CUDA's
grid-stride loop, Rodinia particlefilter's binary search returning from its while loop), written
the way a porting user writes them. For each:

* the primal agrees on the Numba backend, hostcuda (the CUDA backend's source under g++) and the IR
  interpreter: every backend evaluates the same operations in the same order, so float64 results agree to a
  few ulps of the largest value (the interpreter's libm calls may differ from Numba's in the last bit); on Numba
  in CI for NUMBA_SAMPLE, `full` for the others, whose hostcuda runs CI checks against the interpreter;
* check_grad in float64: reverse and forward mode against central differences and the dot-product test,
  on random inputs away from kinks (the clamps of SRAD's coefficient and of correlation's stddev, WENO's
  and Black-Scholes' abs, the ELL padding: all decided the same way at x ± h);
* the race analysis: the launches listed in PROVED are proved race-free statically (no run-time check) in
  their primal and reverse; the rest are race-free too and run after the exact run-time check (indices the
  static proof does not cover: the 3-term flattening of hotspot3D, flattened indices whose column is not
  bounded by a guard, SRAD's neighbour tables), which passes.

These found two gaps, fixed: a constant-table index through a local assigned from unrolled loop variables
(stencil27, frontend/unroll.py) and a flattened index bound to a local (`k = i * cols + j; y[k] = ...`,
analysis/affine.py), which sent SRAD to the run-time check. Session 49 added the two forms session 48's port
had to refuse: a `while` loop computing active values in reverse mode (the grid-stride loop, run-time checked:
its index is not affine in the thread index) and `return` inside a loop (findIndexBin)."""

import numpy as np
import pytest
from support.ported import cases, primal_values
from support.ported_harness import round_tests

import gradkern as gk

NAMES = [c[0] for c in cases(np.random.default_rng(0))]
# proved race-free statically, primal and reverse
PROVED = {"black_scholes", "ideal_gas", "accelerate", "gemver_rank2", "gemver_xt", "gemver_w", "doitgen",
          "corr_std", "corr_reduce", "corr_symm", "xs_lookup", "spmv_ell", "weno5_faces", "stencil27",
          "jacobi_masked", "mw_flux_x", "mw_tend_x", "lavamd_box", "bp_layerforward", "srad_coeff", "srad_update",
          "particle_resample"}


def _case(name, seed=5):
    return next(c for c in cases(np.random.default_rng(seed)) if c[0] == name)


# Every port's derivative is checked in CI on the interpreter: the transforms' output, run without a compile (these
# 25 Numba gradients cost 72 s of CPU cold, the interpreter's check of all of them a fraction: docs/testing.md "Test
# time", session 52). The Numba backend's gradients run in CI for NUMBA_SAMPLE, chosen for what its printing of the
# reverse meets here: WENO's branches and divisions (weno5_faces), an inner loop over neighbours with exp
# (lavamd_box), a search loop over a table (xs_lookup), a symmetric write pattern (corr_symm); the others are marked
# `full` (pytest -m full runs them).
NUMBA_SAMPLE = {"weno5_faces", "lavamd_box", "xs_lookup", "corr_symm"}
# The primal on Numba, the interpreter and hostcuda for NUMBA_SAMPLE (compiled for its gradients anyway), the
# others' on Numba `full`; every port's on hostcuda against the interpreter (g++ builds one in a tenth of Numba's
# compile: docs/testing.md "Test time", session 55). At least 31 derivatives per gradient.
globals().update(round_tests(cases, (), NUMBA_SAMPLE, references=False, least_checked=31))


@pytest.mark.parametrize("name", NAMES)
def test_race_freedom(name):
    _, kernel, args, dim, _ = _case(name)
    primal = gk.inspect(kernel, *primal_values(args), dim=dim)
    reverse = gk.inspect(kernel, *args, dim=dim, mode=gk.Reverse)
    assert primal.parallel and reverse.parallel
    assert primal.atomic_targets == ()
    if name in PROVED:
        assert not primal.race_check and not reverse.race_check, name
    else:  # not proved statically: the exact check runs, and passes (on the interpreter: no compile)
        assert primal.race_check
        gk.launch(kernel, dim, *primal_values(args), backend="interp")


def test_corr_symm_mutated_to_race_is_refused(rng):
    """correlation's mirrored write with the mirror taken from the wrong row: threads share elements."""
    @gk.kernel
    def corr_symm_racy(data, symmat, m, n):
        j1 = gk.tid()
        if j1 < m - 1:
            for j2 in range(j1, m):
                acc = 0.0
                for i in range(n):
                    acc += data[i, j1] * data[i, j2]
                symmat[j1, j2] = acc
                symmat[j2, j1 + 1] = acc
    data, symmat = rng.random((5, 4)), np.zeros((4, 4))
    assert gk.inspect(corr_symm_racy, data, symmat, 4, 5, dim=4).race_check
    with pytest.raises(gk.RaceError):
        gk.launch(corr_symm_racy, 4, data, symmat, 4, 5)
    np.testing.assert_array_equal(symmat, 0.0)
