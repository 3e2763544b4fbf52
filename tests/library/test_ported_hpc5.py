"""Session 52's fifth round of kernels ported from public GPU and HPC codes (tests/support/ported_hpc5.py,
ported_hpc5_fluids.py, ported_hpc5_nets.py; inputs in ported_hpc5_cases.py, NumPy references in
ported_hpc5_refs.py and ported_hpc5_refs2.py). For each:

* the primal on the Numba backend matches its NumPy reference within 1e-12 of the largest value (the reference
  evaluates the same formulas in float64, in another order where NumPy sums or solves, and calls NumPy's libm);
* the primal agrees on Numba, hostcuda and the IR interpreter within the shared 8-ulp bound;
* check_grad in float64, reverse and forward, against central differences and the dot-product test, on random
  non-zero inputs away from kinks;
* the race analysis' verdicts, primal and reverse.

CI runs every kernel's primal (on the interpreter) and race verdicts, and backend agreement and gradients for
SAMPLE (below): 25 s + 3 s of CPU from a cold cache (one process, load ~3). The other 30 kernels' agreement and
gradients are marked `full` (docs/testing.md); all passed when last run (session 52). american_put's gradient
compiles for 319 s of CPU (its unrolled triangular sweep: docs/kernel-language.md, "Fifth round").

What porting them found is in docs/kernel-language.md ("Fifth round (session 52)")."""

import numpy as np
import pytest
from support.ported import primal_values
from support.ported_harness import assert_primal_agrees_across_backends, assert_primal_matches_numpy
from support.ported_hpc5_cases import PROGRAMS, cases

import gradkern as gk
from gradkern.testing import check_grad

NAMES = [c[0] for c in cases(np.random.default_rng(0))]
# CI's sample (the file's CI budget is 45 s of CPU from a cold cache; each gradient costs a few Numba and g++
# compiles): the features this round added: floor()-based weights in a local array scattered by atomics to a
# 3 x 3 node stencil (mpm88_p2g), a device function returning two values (tv_step), a run-time loop of max, sqrt
# and exp with taped locals (heston_paths). The other kernels' gradients and backend agreement are marked `full`.
SAMPLE = {"mpm88_p2g", "tv_step", "heston_paths"}
SAMPLED = [n if n in SAMPLE else pytest.param(n, marks=pytest.mark.full) for n in NAMES]


def _case(name, seed=5):
    return next(c for c in cases(np.random.default_rng(seed)) if c[0] == name)


@pytest.mark.parametrize("name", NAMES)
def test_primal_matches_numpy(name):
    """Every kernel, on the interpreter (no compile); the backends agree with it below."""
    assert_primal_matches_numpy(_case(name), PROGRAMS, backend="interp")


@pytest.mark.parametrize("name", SAMPLED)
def test_primal_agrees_across_backends(name):
    assert_primal_agrees_across_backends(_case(name), PROGRAMS)


@pytest.mark.slow
@pytest.mark.parametrize("name", SAMPLED)
def test_gradient(name):
    _, kernel, args, dim, options, _ = _case(name)
    report = check_grad(kernel, *args, dim=dim, **options)
    assert report.ok and report.checked > 20, str(report)
    assert report.dot_analytic != 0.0


# launches not proved race-free statically, primal and reverse: RoPE's q[pos, h * head_size + 2 i] (the column
# linear in a run-time head size) and group norm's y[n, c, p] for c in range(g * cpg, (g + 1) * cpg) (the group's
# channels bounded by a run-time count); the exact run-time check runs for them, and passes
RUNTIME_CHECKED = {"rope_rotate", "group_norm"}
ATOMIC = {"mpm88_p2g": ("grid_m", "grid_v"), "mass_spring_force": ("v_inc",), "warp_springs": ("f",),
          "neo_hookean_tet": ("f",), "dem_hertz": ("f",)}


@pytest.mark.parametrize("name", [n for n in NAMES if n not in PROGRAMS])
def test_race_verdicts(name):
    _, kernel, args, dim, _, _ = _case(name)
    primal = gk.inspect(kernel, *primal_values(args), dim=dim)
    reverse = gk.inspect(kernel, *args, dim=dim, mode=gk.Reverse)
    assert primal.parallel and reverse.parallel
    assert primal.atomic_targets == ATOMIC.get(name, ())
    checked = name in RUNTIME_CHECKED
    assert primal.race_check == checked and reverse.race_check == checked, name
