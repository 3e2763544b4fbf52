"""Session 54's seventh round of kernels ported from public GPU and HPC codes (tests/support/ported_hpc7.py,
ported_hpc7_more.py; inputs in ported_hpc7_cases.py, NumPy references in ported_hpc7_refs.py). For each:

* the primal on the interpreter matches its NumPy reference within 1e-12 of the largest value (the reference
  evaluates the same formulas in float64, in another order where NumPy sums or solves, and calls NumPy's libm);
* the primal in float32 on the interpreter stays float32 and within 1e-5 of the float64 reference;
* the primal agrees on Numba, hostcuda and the IR interpreter within the shared 8-ulp bound;
* check_grad in float64, reverse and forward, against central differences and the dot-product test, on random
  non-zero inputs away from kinks, on the interpreter (no compile) in CI, on Numba for NUMBA_SAMPLE;
* the race analysis' verdicts, primal and reverse;
* (`full`) each reverse on hostcuda against Numba's, the same output adjoints.

CI: 15 primals (in float32 too) and interpreter gradients, race verdicts, and three kernels' Numba gradients and
backend agreement (NUMBA_SAMPLE); the other 12 are marked `full` (docs/testing.md). Cold-cache CPU for the file,
one process: see the session-54 report (docs/kernel-language.md "Seventh round").

What porting them found is in docs/kernel-language.md ("Seventh round (session 54)")."""

import numpy as np
import pytest
from support.ported_harness import (
    assert_float32_primal,
    assert_primal_agrees_across_backends,
    assert_primal_matches_numpy,
    assert_race_verdicts,
    assert_reverse_on_hostcuda_agrees_with_numba,
    check_case_gradient,
    numba_sampled,
    on_interpreter,
)
from support.ported_hpc7_cases import PROGRAMS, cases

NAMES = [c[0] for c in cases(np.random.default_rng(0))]
# Numba's sample (each costs a few Numba compiles; the cheapest of the interesting shapes: field_summary's,
# selective_scan's and ludcmp's reverses took 15, 21 and 13 s to compile, session 54): an Active step whose terms are
# summed into one element by an atomic (pi_atomic), a program choosing its path by a comparison, ping-ponged by the
# host (floyd_warshall), one thread substituting in place, the inner bound the outer index (trisolv)
NUMBA_SAMPLE = {"pi_atomic", "floyd_warshall", "trisolv"}


def _case(name, seed=5):
    return next(c for c in cases(np.random.default_rng(seed)) if c[0] == name)


@pytest.mark.parametrize("name", NAMES)
def test_primal_matches_numpy(name):
    assert_primal_matches_numpy(_case(name), PROGRAMS, backend="interp")


@pytest.mark.parametrize("name", NAMES)
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
    # pi_atomic has one output and two inputs (one an Active scalar), so six derivatives are all check_grad draws
    check_case_gradient(_case(name), 6 if name == "pi_atomic" else 20)


@pytest.mark.parametrize("name", NAMES)
def test_gradient_interp(name, monkeypatch):
    on_interpreter(monkeypatch)
    _check_gradient(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", numba_sampled(NAMES, NUMBA_SAMPLE))
def test_gradient(name):
    _check_gradient(name)


# launches not proved race-free statically: DIFF_PREDICT's px[i + offset * r] read and written in place (offset a
# run-time scalar); the exact run-time check runs for it, and passes. Reverses of the one-thread kernels (seidel_2d,
# trisolv, ludcmp) add their shadows by atomics, as the reverse of any kernel whose reads it cannot pair with one
# thread does
RUNTIME_CHECKED = {"diff_predict"}
ATOMIC = {"pi_atomic": ("pi",), "daxpy_atomic": ("y",), "field_summary": ("sums",)}


@pytest.mark.parametrize("name", [n for n in NAMES if n not in PROGRAMS])
def test_race_verdicts(name):
    assert_race_verdicts(_case(name), ATOMIC, RUNTIME_CHECKED)


@pytest.mark.full
@pytest.mark.parametrize("name", NAMES)
def test_reverse_on_hostcuda_agrees_with_numba(name):
    assert_reverse_on_hostcuda_agrees_with_numba(_case(name), PROGRAMS)
