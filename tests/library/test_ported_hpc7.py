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

CI: 15 primals (in float32 too, and on hostcuda against the interpreter) and interpreter gradients, race verdicts,
and three kernels' Numba gradients and backend agreement (NUMBA_SAMPLE); the other 12's are marked `full`
(docs/testing.md). Cold-cache CPU for the file, one process: see the session-54 report (docs/kernel-language.md
"Seventh round"). The tests but the last are support/ported_harness.py's `round_tests`.

What porting them found is in docs/kernel-language.md ("Seventh round (session 54)")."""

import numpy as np
import pytest
from support.ported_harness import assert_reverse_on_hostcuda_agrees_with_numba, round_tests
from support.ported_hpc7_cases import PROGRAMS, cases

# Numba's sample (each costs a few Numba compiles; the cheapest of the interesting shapes: field_summary's,
# selective_scan's and ludcmp's reverses took 15, 21 and 13 s to compile, session 54): an Active step whose terms are
# summed into one element by an atomic (pi_atomic), a program choosing its path by a comparison, ping-ponged by the
# host (floyd_warshall), one thread substituting in place, the inner bound the outer index (trisolv)
NUMBA_SAMPLE = {"pi_atomic", "floyd_warshall", "trisolv"}
# launches not proved race-free statically: DIFF_PREDICT's px[i + offset * r] read and written in place (offset a
# run-time scalar); the exact run-time check runs for it, and passes. Reverses of the one-thread kernels (seidel_2d,
# trisolv, ludcmp) add their shadows by atomics, as the reverse of any kernel whose reads it cannot pair with one
# thread does
RUNTIME_CHECKED = {"diff_predict"}
ATOMIC = {"pi_atomic": ("pi",), "daxpy_atomic": ("y",), "field_summary": ("sums",)}
# pi_atomic has one output and two inputs (one an Active scalar), so six derivatives are all check_grad draws
globals().update(round_tests(cases, PROGRAMS, NUMBA_SAMPLE, ATOMIC, RUNTIME_CHECKED, float32=True,
                             checked={"pi_atomic": 6}))
NAMES = [c[0] for c in cases(np.random.default_rng(0))]


def _case(name, seed=5):
    return next(c for c in cases(np.random.default_rng(seed)) if c[0] == name)


@pytest.mark.full
@pytest.mark.parametrize("name", NAMES)
def test_reverse_on_hostcuda_agrees_with_numba(name):
    assert_reverse_on_hostcuda_agrees_with_numba(_case(name), PROGRAMS)
