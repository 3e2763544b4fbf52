"""Session 50's third round of kernels ported from public GPU and HPC codes (tests/support/ported_hpc3.py,
ported_hpc3_more.py, ported_hpc3_special.py; inputs and NumPy references in ported_hpc3_cases.py and
ported_hpc3_refs.py), chosen to differ in shape from the first two rounds: deep-learning operators (llm.c's GELU,
fused classifier, attention and AdamW, llama2.c's rmsnorm, PyTorch's log_softmax, pooling, bilinear upsampling,
grid_sample and batch norm, Caffe's reference convolution and im2col), LULESH's hourglass force and
characteristic length, CoMD's EAM passes, miniMD's half-neighbour LJ, GADGET-2's SPH density and pressure force,
a Kokkos tutorial reduction, the CUDA samples' tiled matrixMul, two Numba CUDA examples (the heat equation as a
program), Nek5000's local_grad3, an HLL shallow-water flux, a P1 FEM apply by atomics, Giles' erfinv, HACCmk's
force polynomial, Clenshaw's Chebyshev sum, Rodinia's dwt2d lifting and lud. For each:

* the primal on the Numba backend matches its NumPy reference within 1e-12 of the largest value: the reference
  evaluates the same formulas in float64 but may sum in another order (NumPy's pairwise sums and einsum, at most
  a few dozen terms here) and calls NumPy's libm, which is a few ulps (~1e-15 relative) per operation;
* the primal agrees on Numba, hostcuda (the CUDA backend's source under g++) and the IR interpreter within the
  shared 8-ulp bound (support/ported.py: assert_backends_agree);
* check_grad in float64, reverse and forward, against central differences and the dot-product test, on random
  non-zero inputs away from kinks (max/min ties, the pooling argmax, grid points of interpolation tables, the
  cutoffs and the HLL wave-speed signs are not within a step of the inputs);
* the race analysis: every launch is parallel; all but six are proved race-free statically, primal and
  reverse; those six run the exact run-time check, which passes; miniMD, Kokkos and the P1 apply are the ones
  whose primal adds by atomics.

What porting them found is in docs/kernel-language.md ("Third round (session 50)")."""

import math

import numpy as np
import pytest
from support.ported_harness import round_tests
from support.ported_hpc3_cases import cases

import gradkern as gk
from gradkern.testing import check_grad

PROGRAMS = {"solve_heat_equation"}
# Every port's primal and derivative is checked in CI on the interpreter (against NumPy; the gradient by finite
# differences and the dot-product test): the transforms' output, run without a compile (a Numba gradient compiles a
# reverse and a forward kernel, 3-27 s of CPU each here; the interpreter's check of all of them costs what three of
# those do: docs/testing.md "Test time", sessions 52 and 55), and every primal on hostcuda against the interpreter. The
# Numba backend's gradients and primals run in CI for NUMBA_SAMPLE, chosen to cover what its printing of the reverse
# meets here: atomics with a cutoff branch (minimd_lj_half), local arrays in nested loops (nek_local_grad3), indices
# split by // and % (im2col), an inner reduction loop (kokkos_yax); the others are marked `full` (pytest -m full runs
# them).
NUMBA_SAMPLE = {"minimd_lj_half", "nek_local_grad3", "im2col", "kokkos_yax"}
# launches not proved race-free statically, primal and reverse: flat indices decomposed by // and % (conv2d's
# (n, o) from one axis, im2col, upsampling, grid_sample, matrixMul's blocks) and attention's preatt[b, h, t, t2]
# with the thread axes permuted; the exact run-time check runs for them, and passes
RUNTIME_CHECKED = {"attention_forward", "conv2d_direct", "im2col", "upsample_bilinear", "grid_sample_bilinear",
                   "matrix_mul_tiled"}
ATOMIC = {"minimd_lj_half": ("f",), "kokkos_yax": ("result",), "fem_p1_apply": ("y",)}
# at least 21 derivatives each
globals().update(round_tests(cases, PROGRAMS, NUMBA_SAMPLE, ATOMIC, RUNTIME_CHECKED, least_checked=21))
NAMES = [c[0] for c in cases(np.random.default_rng(0))]


def _case(name, seed=5):
    return next(c for c in cases(np.random.default_rng(seed)) if c[0] == name)


# ---- GADGET's self pair: sqrt at r2 = 0 (docs/kernel-language.md, "Third round") --------------------------------


@gk.kernel
def spline_sum_unguarded(p, out, n):
    i = gk.tid()
    s = 0.0
    for j in range(n):
        d = p[i] - p[j]
        u = math.sqrt(d * d)
        s += (1.0 - u) * (1.0 - u) * u * u + 1.0
    out[i] = s


@gk.kernel
def spline_sum_ternary(p, out, n):
    i = gk.tid()
    s = 0.0
    for j in range(n):
        d = p[i] - p[j]
        u = math.sqrt(d * d) if d * d > 0.0 else 0.0
        s += (1.0 - u) * (1.0 - u) * u * u + 1.0
    out[i] = s


@gk.kernel
def spline_sum_if(p, out, n):
    i = gk.tid()
    s = 0.0
    for j in range(n):
        d = p[i] - p[j]
        u = 0.0
        if d * d > 0.0:
            u = math.sqrt(d * d)
        s += (1.0 - u) * (1.0 - u) * u * u + 1.0
    out[i] = s


@pytest.mark.slow
def test_a_guarded_root_keeps_the_self_pair_out_of_the_derivative(rng):
    """The self pair's sqrt(0) has partial +inf and a zero adjoint: NaN unguarded (the documented convention, as
    JAX and PyTorch), the right derivative when a ternary or an if guards the root, in both modes."""
    p = rng.uniform(0.1, 0.4, 5)

    def args():
        return gk.Duplicated(p.copy(), np.zeros(5)), gk.Duplicated(np.zeros(5), np.zeros(5)), 5
    for kernel in (spline_sum_ternary, spline_sum_if):
        report = check_grad(kernel, *args(), dim=5)
        assert report.ok and report.checked > 5 and report.dot_analytic != 0.0, str(report)
    x, out, n = args()
    gk.autodiff(spline_sum_unguarded, x, gk.Duplicated(out.val, np.ones(5)), n, dim=5)
    assert np.isnan(x.dval).all()
