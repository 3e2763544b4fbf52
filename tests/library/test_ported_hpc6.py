"""Session 53's sixth round of kernels ported from public GPU and HPC codes (tests/support/ported_hpc6.py,
ported_hpc6_more.py; inputs in ported_hpc6_cases.py, NumPy references in ported_hpc6_refs.py). For each:

* the primal on the interpreter matches its NumPy reference within 1e-12 of the largest value (the reference
  evaluates the same formulas in float64, in another order where NumPy sums, and calls NumPy's libm);
* the primal in float32 on the interpreter stays float32 and within 1e-5 of the float64 reference;
* the primal agrees on Numba, hostcuda and the IR interpreter within the shared 8-ulp bound;
* check_grad in float64, reverse and forward, against central differences and the dot-product test, on random
  non-zero inputs away from kinks, on the interpreter (no compile) in CI, on Numba for NUMBA_SAMPLE;
* the race analysis' verdicts, primal and reverse.

CI: 24 primals (23 in float32 too) and interpreter gradients, race verdicts, and three kernels' Numba gradients
and backend agreement (NUMBA_SAMPLE); the other 21 are marked `full` (docs/testing.md). Cold-cache CPU for the
file, one process: 14 s (13.7 user + 0.5 system at load 3.6, session 53).

What porting them found is in docs/kernel-language.md ("Sixth round (session 53)")."""

import numpy as np
import pytest
from support.ported_harness import (
    assert_float32_primal,
    assert_primal_agrees_across_backends,
    assert_primal_matches_numpy,
    assert_race_verdicts,
    check_case_gradient,
    numba_sampled,
    on_interpreter,
)
from support.ported_hpc6_cases import PROGRAMS, cases

NAMES = [c[0] for c in cases(np.random.default_rng(0))]
# Numba's sample (each costs a few Numba compiles): a `while` whose trip count depends on the data
# (kepler_position), a reduction into one shared scalar by an atomic through a device function (trap_int), a
# program whose loops branch on data and zero values below cut-offs (energy)
NUMBA_SAMPLE = {"kepler_position", "trap_int", "energy"}


def _case(name, seed=5):
    return next(c for c in cases(np.random.default_rng(seed)) if c[0] == name)


@pytest.mark.parametrize("name", NAMES)
def test_primal_matches_numpy(name):
    assert_primal_matches_numpy(_case(name), PROGRAMS, backend="interp")


# float32, on the interpreter: Kepler's Newton loop runs until |dE| <= 1e-13, below float32's resolution, and would
# never end (as in C)
@pytest.mark.parametrize("name", [n for n in NAMES if n != "kepler_position"])
def test_float32_primal_on_the_interpreter(name):
    """Outputs stay float32 and within 1e-5 of the largest value of the float64 reference: float32 rounds each of a
    kernel's at most a few hundred operations by 6e-8 relative (the largest seen: 9e-7, gramschmidt's square root
    of a sum and divisions; adi's and deriche's recurrences 5e-7 and 2e-7)."""
    assert_float32_primal(next(c for c in cases(np.random.default_rng(5), dtype=np.float32) if c[0] == name),
                          PROGRAMS)


@pytest.mark.parametrize("name", numba_sampled(NAMES, NUMBA_SAMPLE))
def test_primal_agrees_across_backends(name):
    assert_primal_agrees_across_backends(_case(name), PROGRAMS)


def _check_gradient(name):
    # trap_int has one output and six inputs (five scalars), so ten derivatives are all check_grad draws there
    check_case_gradient(_case(name), 10 if name == "trap_int" else 20)


@pytest.mark.parametrize("name", NAMES)
def test_gradient_interp(name, monkeypatch):
    on_interpreter(monkeypatch)
    _check_gradient(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", numba_sampled(NAMES, NUMBA_SAMPLE))
def test_gradient(name):
    _check_gradient(name)


# launches not proved race-free statically, primal and reverse: DEL_DOT_VEC_2D's div[i] for i = real_zones[ii]
# (an index read from an int array) and INT_PREDICT's px[i] written while px[i + offset * k] is read (offset a
# run-time scalar); the exact run-time check runs for them, and passes
RUNTIME_CHECKED = {"del_dot_vec_2d", "int_predict"}
ATOMIC = {"nodal_accumulation_3d": ("x",), "trap_int": ("sumx",), "tealeaf_cg_calc_w": ("pw",),
          "layernorm_backward": ("dbias", "dweight")}


@pytest.mark.parametrize("name", [n for n in NAMES if n not in PROGRAMS])
def test_race_verdicts(name):
    assert_race_verdicts(_case(name), ATOMIC, RUNTIME_CHECKED)
