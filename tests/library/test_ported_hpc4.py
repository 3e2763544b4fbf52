"""Session 51's fourth round of kernels ported from public GPU and HPC codes (tests/support/ported_hpc4.py,
ported_hpc4_more.py, ported_hpc4_pde.py; inputs in ported_hpc4_cases.py, NumPy references in
ported_hpc4_refs.py), chosen to differ in shape and language use from the first three rounds: PolyBench/GPU's
2mm, atax, bicg, mvt, gesummv, syr2k and covariance as their CUDA files write them (flat indices, grids rounded up
past the bounds, products accumulated in global memory, the host's launch sequences as programs), Parboil's
register-tiled sgemm, 7-point stencil marching up z, mri-fhd and cutcp, SHOC's reduction partials and S3D rates,
Rodinia's streamcluster cost, leukocyte GICOV, myocyte sodium gates and particlefilter likelihood, the CUDA
samples' binomialOptions, LAMMPS' Morse, Buckingham and coul/long pair styles (erfc inlined and math.erfc), an
OpenFOAM-like face loop, libCEED-like mass and diffusion apply, PETSc's Brusselator and Gray-Scott RHS, an ocean
column's Thomas solve, semi-Lagrangian advection, MUSCL limiters, Black-Scholes by erf and erfc, and the Ikeda
map. For each:

* the primal on the Numba backend matches its NumPy reference within 1e-12 of the largest value: the reference
  evaluates the same formulas in float64 but may sum in another order (NumPy's matrix products and sums, at most
  a few dozen terms here) and calls NumPy's libm, a few ulps (~1e-15 relative) per operation;
* the primal agrees on Numba, hostcuda (the CUDA backend's source under g++) and the IR interpreter within the
  shared 8-ulp bound (support/ported.py: assert_backends_agree);
* check_grad in float64, reverse and forward, against central differences and the dot-product test, on random
  non-zero inputs away from kinks (the limiters' switches, the cutoffs, streamcluster's comparison, GICOV's
  largest circle, the binomial tree's exercise boundary, the semi-Lagrangian cell edges and the floor of the
  particle positions are not within a step of the inputs);
* the race analysis: every launch is parallel; all but three are proved race-free statically, primal and
  reverse; those three run the exact run-time check, which passes.

What porting them found is in docs/kernel-language.md ("Fourth round (session 51)")."""

import math

import numpy as np
from support.ported import primal_values
from support.ported_harness import round_tests
from support.ported_hpc4_cases import PROGRAMS, cases
from support.ported_hpc4_refs import erfc_polynomial

import gradkern as gk

# Every port's primal and derivative is checked in CI on the interpreter (against NumPy; the gradient by finite
# differences and the dot-product test): the transforms' output, run without a compile (a Numba gradient compiles a
# reverse and a forward kernel, 3-27 s of CPU each here; the interpreter's check of all of them costs what three of
# those do: docs/testing.md "Test time", sessions 52 and 55), and every primal on hostcuda against the interpreter. The
# Numba backend's gradients and primals run in CI for NUMBA_SAMPLE, chosen to cover what its printing of the reverse
# meets here: register-tiled loops (sgemm_nt), sums with sqrt and division (gicov), a triangular induction over a local
# array (binomial_options), a sequential Thomas solve per column (column_implicit_diffusion); the others are marked
# `full` (pytest -m full runs them).
NUMBA_SAMPLE = {"sgemm_nt", "gicov", "binomial_options", "column_implicit_diffusion"}
# launches not proved race-free statically, primal and reverse: indices linear in a run-time leading dimension
# (sgemm's C[m + (nb TB + i) ldc], the stencil's i + nx (j + ny k)) and streamcluster's work_mem column read from
# two index tables; the exact run-time check runs for them, and passes
RUNTIME_CHECKED = {"sgemm_nt", "stencil7_z", "sc_compute_cost"}
ATOMIC = {"shoc_reduce": ("total",), "face_flux_scatter": ("res",), "ceed_mass_apply": ("v",),
          "ceed_diff_apply": ("v",)}
# at least 21 derivatives each
globals().update(round_tests(cases, PROGRAMS, NUMBA_SAMPLE, ATOMIC, RUNTIME_CHECKED, least_checked=21))
NAMES = [c[0] for c in cases(np.random.default_rng(0))]


def _case(name, seed=5):
    return next(c for c in cases(np.random.default_rng(seed)) if c[0] == name)


def test_lammps_erfc_polynomial_is_within_its_bound_of_math_erfc():
    """coul_long inlines Abramowitz-Stegun 7.1.26 (|error| <= 1.5e-7 absolute on erfc); coul_long_erfc calls
    math.erfc. Their forces differ by no more than that bound carried through each pair's prefactor."""
    _, kernel, args, dim, _, _ = _case("coul_long")
    poly, exact = primal_values(args), primal_values(args)
    gk.launch(kernel, dim, *poly, backend="interp")  # the formulas' bound, not a backend's: no compile
    gk.launch(_case("coul_long_erfc")[1], dim, *exact, backend="interp")
    x, q = poly[0], poly[1]
    r = np.sqrt(((x[:, None] - x[None]) ** 2).sum(-1)) + np.eye(len(q))
    bound = 1.5e-7 * (np.abs(np.outer(q, q)) / r ** 2 * np.max(r)).sum()  # |prefactor| / rsq * |del| per pair
    assert 0.0 < np.max(np.abs(poly[2] - exact[2])) <= bound
    g = np.linspace(0.05, 3.0, 60)
    assert np.max(np.abs([erfc_polynomial(v) - math.erfc(v) for v in g])) <= 1.5e-7
