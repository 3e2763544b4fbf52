"""Session 53's sixth round of kernels ported from public GPU and HPC codes (tests/support/ported_hpc6.py,
ported_hpc6_more.py; inputs in ported_hpc6_cases.py, NumPy references in ported_hpc6_refs.py). For each:

* the primal on the interpreter matches its NumPy reference within 1e-12 of the largest value (the reference
  evaluates the same formulas in float64, in another order where NumPy sums, and calls NumPy's libm);
* the primal in float32 on the interpreter stays float32 and within 1e-5 of the float64 reference;
* the primal agrees on Numba, hostcuda and the IR interpreter within the shared 8-ulp bound;
* check_grad in float64, reverse and forward, against central differences and the dot-product test, on random
  non-zero inputs away from kinks, on the interpreter (no compile) in CI, on Numba for NUMBA_SAMPLE;
* the race analysis' verdicts, primal and reverse.

CI: 24 primals (23 in float32 too, every one on hostcuda against the interpreter) and interpreter gradients, race
verdicts, and three kernels' Numba gradients and backend agreement (NUMBA_SAMPLE); the other 21's are marked `full`
(docs/testing.md). Cold-cache CPU for the file, one process: 14 s (13.7 user + 0.5 system at load 3.6, session 53).
The tests are support/ported_harness.py's `round_tests`.

What porting them found is in docs/kernel-language.md ("Sixth round (session 53)")."""

from support.ported_harness import round_tests
from support.ported_hpc6_cases import PROGRAMS, cases

# Numba's sample (each costs a few Numba compiles): a `while` whose trip count depends on the data
# (kepler_position), a reduction into one shared scalar by an atomic through a device function (trap_int), a
# program whose loops branch on data and zero values below cut-offs (energy)
NUMBA_SAMPLE = {"kepler_position", "trap_int", "energy"}
# launches not proved race-free statically, primal and reverse: DEL_DOT_VEC_2D's div[i] for i = real_zones[ii]
# (an index read from an int array) and INT_PREDICT's px[i] written while px[i + offset * k] is read (offset a
# run-time scalar); the exact run-time check runs for them, and passes
RUNTIME_CHECKED = {"del_dot_vec_2d", "int_predict"}
ATOMIC = {"nodal_accumulation_3d": ("x",), "trap_int": ("sumx",), "tealeaf_cg_calc_w": ("pw",),
          "layernorm_backward": ("dbias", "dweight")}
# float32, on the interpreter: Kepler's Newton loop runs until |dE| <= 1e-13, below float32's resolution, and would
# never end (as in C). trap_int has one output and six inputs (five scalars), so ten derivatives are all check_grad
# draws there.
globals().update(round_tests(cases, PROGRAMS, NUMBA_SAMPLE, ATOMIC, RUNTIME_CHECKED, float32=True,
                             float32_except={"kepler_position"}, checked={"trap_int": 10}))
