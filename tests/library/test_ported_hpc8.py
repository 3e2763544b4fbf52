"""Session 55's eighth round of kernels ported from public GPU and HPC codes (tests/support/ported_hpc8.py,
ported_hpc8_more.py; inputs in ported_hpc8_cases.py, NumPy references in ported_hpc8_refs.py). For each:

* the primal on the interpreter matches its NumPy reference within 1e-12 of the largest value (the reference
  evaluates the same formulas in float64, in another order where NumPy sums, multiplies matrices or factors);
* the primal in float32 on the interpreter stays float32 and within 1e-5 of the float64 reference;
* the primal agrees on Numba, hostcuda and the IR interpreter within the shared 8-ulp bound (NUMBA_SAMPLE), on
  hostcuda and the interpreter (the others);
* check_grad in float64, reverse and forward, against central differences and the dot-product test, on random
  non-zero inputs, on the interpreter (no compile) in CI, on Numba for NUMBA_SAMPLE;
* the race analysis' verdicts, primal and reverse;
* (`full`) each reverse on hostcuda against Numba's, the same output adjoints.

CI: 16 primals (in float32 too) and interpreter gradients, race verdicts, and one kernel's Numba gradient and
backend agreement (NUMBA_SAMPLE); the other 15 are marked `full` (docs/testing.md). The tests but the last two
are support/ported_harness.py's `round_tests`. Cold-cache CPU for the file, one process: 9.8 s (9.1 user + 0.75
system, g++ included, at load 15 to 17, session 55) before the hostcuda agreements of the other 15 were added.

What porting them found is in docs/kernel-language.md ("Eighth round (session 55)")."""

import numpy as np
import pytest
from support import ported_hpc8 as A
from support import ported_hpc8_more as B
from support.ported_harness import assert_reverse_on_hostcuda_agrees_with_numba, round_tests
from support.ported_hpc8_cases import PROGRAMS, cases

import gradkern as gk

NAMES = [c[0] for c in cases(np.random.default_rng(0))]
# Numba's sample (each costs a few Numba compiles and, for the primals' agreement, a g++ compile: LULESH's gathers
# into local arrays took 8 s, boxFilter's and PENNANT's 7 to 8 s, cholesky's 1.6 s and encoder_backward's 2.5 s of
# CPU, session 55, over the file's 12-s budget): radix-4 butterflies in place through `&` and `<<` indices, the same
# array passed as input and output (fwt). Atomics at data-dependent indices are in earlier rounds' samples
NUMBA_SAMPLE = {"fwt"}


def _case(name, seed=5):
    return next(c for c in cases(np.random.default_rng(seed)) if c[0] == name)


# launches not proved race-free statically, primal and reverse, each for its flattened index at a run-time row
# length the launch domain does not bound (hotspot's grid_cols * r + c, FDTD3d's strides from dimx, dimy and the
# radius, boxFilter's y * w + x, SYRK's i * n + j), or at an element read from the region's list (LULESH's
# qq[ielem]): the exact run-time check runs for them, and passes. 2DCONV's i * nj + j is proved: its guard bounds j
# by nj
RUNTIME_CHECKED = {"hotspot_step", "fdtd3d_step", "box_filter_x", "syrk_kernel", "monotonic_q_region"}
ATOMIC = {"encoder_backward": ("dwpe", "dwte")}


# the float32 bound's largest error here (session 55): 3.6e-7, LULESH's gradients (differences of sums of nearby
# coordinates divided by a cross product's length), the others 4e-8 to 1.7e-7; every case has more than 20
# derivatives for check_grad to draw (35 to 131); race verdicts asked of the interpreter's specialisations (the
# gradient tests' own; the verdicts are the analysis', the same for every backend: Numba's were the same for all
# 10 compared, session 55)
globals().update(round_tests(cases, PROGRAMS, NUMBA_SAMPLE, ATOMIC, RUNTIME_CHECKED, float32=True,
                             race_backend="interp"))


@pytest.mark.full
@pytest.mark.parametrize("name", NAMES)
def test_reverse_on_hostcuda_agrees_with_numba(name):
    assert_reverse_on_hostcuda_agrees_with_numba(_case(name), PROGRAMS)


def test_programs_kernels_race_verdicts():
    """The programs' launches, primal verdicts: SHOC's and jacobi-1d's sweeps (a halo offset, separate arrays) and
    PENNANT's zone division proved; the scan's sweeps and fwt's butterflies in place at a run-time offset or stride,
    3MM's i * nj + j at a run-time nj, checked at run time; PENNANT's sides added into zones by atomics. And the
    run-time check refuses fwt's butterflies at a stride that is not a power of two (threads' quadruples overlap),
    naming both parameters the one array was passed as."""
    rng = np.random.default_rng(3)
    u, v, d = rng.uniform(size=(5, 6)), rng.uniform(size=(5, 6)), rng.uniform(size=64)
    i32 = np.array([0, 1, 2, 0], np.int32)
    verdicts = {
        "shoc_stencil2d": (A.shoc_stencil2d, (3, 4), (u, v, 0.5, 0.1, 0.05), (), False),
        "jacobi1d_sweep": (B.jacobi1d_sweep, 6, (d[:8], d[8:16]), (), False),
        "pennant_zone_ctrs": (B.pennant_zone_ctrs, 3, (d[:3], d[3:6], i32[:3] + 3), (), False),
        "scan_up_sweep": (A.scan_up_sweep, 8, (d[:16], 1), (), True),
        "scan_down_sweep": (A.scan_down_sweep, 8, (d[:16], 1), (), True),
        "fwt_batch2": (A.fwt_batch2, (1, 16), (d, d, 64, 16), (), True),
        "mm3_kernel": (B.mm3_kernel, (3, 2), (d[:9], d[9:15], d[15:21], 2, 3), (), True),
        "pennant_side_ctrs": (B.pennant_side_ctrs, 4, (d[:3], d[3:6], d[6:10], d[10:14], d[14:17], d[17:20], i32,
                                                      i32[::-1].copy(), i32), ("zx", "zy"), False),
    }
    for name, (kernel, dim, args, atomic, checked) in verdicts.items():
        found = gk.inspect(kernel, *args, dim=dim)
        assert (found.parallel, found.atomic_targets, found.race_check) == (True, atomic, checked), name
    with pytest.raises(gk.RaceError, match="'d_input' passed the same array as 'd_output'"):
        gk.launch(A.fwt_batch2, (1, 10), d, d, 64, 3, backend="interp")
