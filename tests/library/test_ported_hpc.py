"""Session 49's second round of kernels ported from public GPU and HPC codes (tests/support/ported_hpc.py and
ported_hpc_cases.py: LULESH's element volume and stress integration with its nodelist gather and atomic scatter,
Rodinia's CFD flux, kmeans, nn, particlefilter and gaussian elimination, HPCG's SpMV and symmetric Gauss-Seidel
in one thread, NAS MG's resid and psinv, SHOC's Lennard-Jones MD, Parboil's D3Q19 lbm and mri-q, miniFE's CSR
assembly by atomics, a 2-D cloud-in-cell charge deposition, a Smith-Waterman wavefront, softmax (two-pass and
online) and layernorm rows, a bitonic compare-exchange step, Smith-Waterman's serial reference), checked as
tests/library/test_ported_kernels.py checks the first round:

* the primal agrees on the Numba backend, hostcuda (the CUDA backend's source under g++) and the IR interpreter
  within 8 ulps of the largest value: every backend evaluates the same operations in the same order, except an
  elementary function's last bit (libm, Numba and the C library round their own) and the order of atomic adds
  (lulesh_stress, kmeans_accumulate, minife_assemble, pic_deposit sum at most 8 terms into an element); on Numba
  in CI for NUMBA_SAMPLE, `full` for the others, whose hostcuda runs CI checks against the interpreter;
* check_grad in float64, reverse and forward mode, against central differences and the dot-product test, on
  random inputs away from kinks (kmeans' argmin wins by 0.05, SHOC's pairs are 0.02 from the cutoff, the
  particles' positions and the CDF's draws are not at a rounding or comparison boundary at x +- h);
* the race analysis: PROVED launches are proved race-free statically, in their primal and reverse; the others
  (flattened indices with a run-time row length and no guard bounding the column, the bitonic partner i ^ j) run
  the exact run-time check, which passes; four mutations that do race are refused before anything is written.

What porting them found is in docs/kernel-language.md ("Second round (session 49)")."""

import numpy as np
import pytest
from support import ported_hpc as P
from support.ported import primal_values
from support.ported_harness import round_tests
from support.ported_hpc_cases import cases, gauss_fan1, gauss_fan2

import gradkern as gk

NAMES = [c[0] for c in cases(np.random.default_rng(0))]
PROGRAMS = {"smith_waterman", "gaussian"}
# launches proved race-free statically, primal and reverse (the programs' kernels by their own names)
PROVED = {"lulesh_volume", "lulesh_stress", "kmeans_point", "kmeans_accumulate", "nn_euclid", "pf_likelihood",
          "hpcg_spmv", "hpcg_symgs", "mg_resid", "mg_psinv", "shoc_md", "lbm", "minife_assemble", "pic_deposit",
          "softmax_rows", "layernorm_rows", "kmeans_objective", "softmax_online", "pf_resample", "mri_q",
          "sw_diagonal", "sw_serial"}
D3Q19 = P.D3Q19  # a table is indexed by a name of the kernel's module (tests/frontend/test_assign_forms.py)
# the primal's sanctioned shared writes
ATOMIC = {"lulesh_stress": ("fx", "fy", "fz"), "kmeans_accumulate": ("new_centers", "new_sizes"),
          "minife_assemble": ("rhs", "vals"), "pic_deposit": ("rho",)}


def _case(name, seed=5):
    return next(c for c in cases(np.random.default_rng(seed)) if c[0] == name)


def _launches(name):
    """(kernel, dim, annotated args) of each launch whose race analysis is checked: a program's kernels at a
    few of its steps."""
    _, kernel, args, dim, _ = _case(name)
    if name == "smith_waterman":
        h, sim, gap = args
        return [(P.sw_diagonal, 4, (h, sim, gap, d, 4, 5)) for d in (2, 5, 9)]
    if name == "gaussian":
        m, a, b = args
        return [launch for t in range(3) for launch in ((gauss_fan1, 4, (m, a, 4, t)),
                                                        (gauss_fan2, (4, 4), (m, a, b, 4, t)))]
    return [(kernel, dim, args)]


# Every port's derivative is checked in CI on the interpreter: the transforms' output, run without a compile (a
# Numba gradient compiles a reverse and a forward kernel, 3-27 s of CPU each here; the interpreter's check of all of
# them costs what three of those do: docs/testing.md "Test time", session 52). The Numba backend's gradients run in
# CI for NUMBA_SAMPLE, chosen to cover what its printing of the reverse meets here: a sequential sweep reading what
# it wrote (hpcg_symgs), atomics into centres (kmeans_accumulate), a neighbour-list force loop (shoc_md); the others
# are marked `full` (pytest -m full runs them).
NUMBA_SAMPLE = {"hpcg_symgs", "kmeans_accumulate", "shoc_md"}
# The primal on Numba, the interpreter and hostcuda for NUMBA_SAMPLE (compiled for its gradients anyway), the
# others' on Numba `full`; every port's on hostcuda against the interpreter (g++ builds one in a tenth of Numba's
# compile: docs/testing.md "Test time", session 55). At least 31 derivatives per gradient.
globals().update(round_tests(cases, PROGRAMS, NUMBA_SAMPLE, references=False, least_checked=31))



@pytest.mark.parametrize("name", NAMES)
def test_race_freedom(name):
    for kernel, dim, args in _launches(name):
        primal = gk.inspect(kernel, *primal_values(args), dim=dim)
        reverse = gk.inspect(kernel, *args, dim=dim, mode=gk.Reverse)
        assert primal.parallel and reverse.parallel
        assert primal.atomic_targets == ATOMIC.get(kernel.name, ()), kernel.name
        if kernel.name in PROVED or name in PROVED:
            assert not primal.race_check and not reverse.race_check, kernel.name
        else:  # not proved statically: the exact check runs, and passes (on the interpreter: no compile)
            assert primal.race_check and reverse.race_check, kernel.name
            gk.launch(kernel, dim, *primal_values(args), backend="interp")


# ---- mutations that race: refused before anything is written ----------------------------------------------------


@gk.kernel
def sw_reads_its_own_diagonal(h, sim, gap, d, m, n):
    t = gk.tid()
    i = t + 1
    j = d - i
    if j >= 1 and j <= n and i <= m:
        h[i, j] = max(0.0, max(h[i - 1, j - 1] + sim[i - 1, j - 1], h[i - 1, j + 1] - gap))


@gk.kernel
def bitonic_unguarded(a, j, k):
    i = gk.tid()
    partner = i ^ j
    if (a[i] > a[partner]) == ((i & k) == 0):
        a[i], a[partner] = a[partner], a[i]


@gk.kernel
def lbm_one_plane(src, dst, omega):
    z, y, x = gk.tid()
    z += 1
    y += 1
    x += 1
    for q in range(3):
        dst[0, z + D3Q19[q][2], y + D3Q19[q][1], x + D3Q19[q][0]] = \
            omega * src[q, z, y, x]


@gk.kernel
def symgs_every_thread(row_ptr, cols, vals, r, x, n):
    t = gk.tid()
    for i in range(n):
        s = r[i]
        for k in range(row_ptr[i], row_ptr[i + 1]):
            s -= vals[k] * x[cols[k]]
        x[i] = s + t


def test_racy_mutations_are_refused(rng):
    ptr, cols = np.array([0, 2, 4, 6], np.int32), np.array([0, 1, 0, 1, 1, 2], np.int32)
    launches = [
        (sw_reads_its_own_diagonal, 4, (rng.uniform(size=(5, 6)), rng.uniform(size=(4, 5)), 0.3, 4, 4, 5)),
        (bitonic_unguarded, 8, (rng.uniform(size=8), 2, 4)),
        (lbm_one_plane, (2, 2, 3), (rng.uniform(size=(19, 4, 4, 5)), rng.uniform(size=(19, 4, 4, 5)), 1.2)),
        (symgs_every_thread, 2, (ptr, cols, rng.uniform(size=6), rng.uniform(size=3), rng.uniform(size=3), 3)),
    ]
    for kernel, dim, args in launches:
        before = primal_values(args)
        with pytest.raises(gk.RaceError, match="the same element"):
            gk.launch(kernel, dim, *args)
        for a, b in zip(args, before):
            if isinstance(a, np.ndarray):
                np.testing.assert_array_equal(a, b)


def test_racy_wavefront_is_launched_where_it_does_not_race(rng):
    """At d = 2 only thread 0 passes the guard: the exact check finds no shared element and the launch runs."""
    h, sim = rng.uniform(size=(5, 6)), rng.uniform(size=(4, 5))
    want = h.copy()
    want[1, 1] = max(0.0, max(h[0, 0] + sim[0, 0], h[0, 2] - 0.3))
    gk.launch(sw_reads_its_own_diagonal, 4, h, sim, 0.3, 2, 4, 5)
    np.testing.assert_array_equal(h, want)
