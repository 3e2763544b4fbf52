"""Session 52's fifth round of kernels ported from public GPU and HPC codes (tests/support/ported_hpc5.py,
ported_hpc5_fluids.py, ported_hpc5_nets.py; inputs in ported_hpc5_cases.py, NumPy references in
ported_hpc5_refs.py and ported_hpc5_refs2.py). For each:

* the primal on the interpreter matches its NumPy reference within 1e-12 of the largest value (the reference
  evaluates the same formulas in float64, in another order where NumPy sums or solves, and calls NumPy's libm);
* the primal agrees on Numba, hostcuda and the IR interpreter within the shared 8-ulp bound;
* check_grad in float64, reverse and forward, against central differences and the dot-product test, on random
  non-zero inputs away from kinks;
* the race analysis' verdicts, primal and reverse.

CI runs every kernel's primal (on the interpreter against NumPy, and on hostcuda against the interpreter) and race
verdicts, and Numba's backend agreement and gradients for SAMPLE (below): 25 s + 3 s of CPU from a cold cache (one
process, load ~3, session 52). The other 30 kernels' Numba agreement and gradients are marked `full`
(docs/testing.md); all passed when last run (session 52). american_put's gradient compiles for 319 s of CPU (its
unrolled triangular sweep: docs/kernel-language.md, "Fifth round").

What porting them found is in docs/kernel-language.md ("Fifth round (session 52)")."""

from support.ported_harness import round_tests
from support.ported_hpc5_cases import PROGRAMS, cases

# CI's sample of Numba's gradients and backend agreement (the file's CI budget is 45 s of CPU from a cold cache; each
# gradient costs a few Numba and g++ compiles): the features this round added: floor()-based weights in a local
# array scattered by atomics to a 3 x 3 node stencil (mpm88_p2g), a device function returning two values (tv_step),
# a run-time loop of max, sqrt and exp with taped locals (heston_paths). The other kernels' are marked `full`.
SAMPLE = {"mpm88_p2g", "tv_step", "heston_paths"}
# launches not proved race-free statically, primal and reverse: RoPE's q[pos, h * head_size + 2 i] (the column
# linear in a run-time head size) and group norm's y[n, c, p] for c in range(g * cpg, (g + 1) * cpg) (the group's
# channels bounded by a run-time count); the exact run-time check runs for them, and passes
RUNTIME_CHECKED = {"rope_rotate", "group_norm"}
ATOMIC = {"mpm88_p2g": ("grid_m", "grid_v"), "mass_spring_force": ("v_inc",), "warp_springs": ("f",),
          "neo_hookean_tet": ("f",), "dem_hertz": ("f",)}
# the gradients on Numba only (this round has no interpreter twin of them), at least 21 derivatives each
globals().update(round_tests(cases, PROGRAMS, SAMPLE, ATOMIC, RUNTIME_CHECKED, interp_gradients=False,
                             least_checked=21))
