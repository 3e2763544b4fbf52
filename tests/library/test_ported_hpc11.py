"""Session 58's eleventh round of kernels ported from public GPU and HPC codes (tests/support/ported_hpc11.py,
ported_hpc11_more.py; inputs in ported_hpc11_cases.py, NumPy references in ported_hpc11_refs.py). For each, as
test_ported_hpc10.py does:

* the primal on the interpreter matches its NumPy reference within 1e-12 of the largest value;
* the primal in float32 on the interpreter stays float32 and within 1e-5 of the float64 reference;
* check_grad in float64, reverse and forward, against central differences and the dot-product test, on random
  non-zero inputs, on the interpreter in CI, on Numba for NUMBA_SAMPLE (its primal against the interpreter's
  and hostcuda's too);
* the race analysis' verdicts, primal and reverse.

What porting them found is in docs/kernel-language.md ("Eleventh round (session 58)")."""

import numpy as np
from support.ported_harness import round_tests
from support.ported_hpc11_cases import PROGRAMS, cases

NAMES = [c[0] for c in cases(np.random.default_rng(0))]
NUMBA_SAMPLE = set()
HOSTCUDA_FULL = set(NAMES)
RUNTIME_CHECKED = {"su3_mat_nn"}
ATOMIC = {"nbnxn_rf_lj": ("energies", "f"), "angle_harmonic": ("energy", "f"), "bond_fene": ("f",),
          "mc_call": ("price",)}

globals().update(round_tests(cases, PROGRAMS, NUMBA_SAMPLE, ATOMIC, RUNTIME_CHECKED, float32=True,
                             float32_except=set(NAMES) - {"mc_call", "xc_lda_pz", "nbnxn_rf_lj"},
                             race_backend="interp", hostcuda_full=HOSTCUDA_FULL, least_checked=9))
