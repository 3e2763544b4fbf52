"""Session 56's ninth round of kernels ported from public GPU and HPC codes (tests/support/ported_hpc9.py,
ported_hpc9_more.py; inputs in ported_hpc9_cases.py, NumPy references in ported_hpc9_refs.py). For each:

* the primal on the interpreter matches its NumPy reference within 1e-12 of the largest value (the reference
  evaluates the same formulas in float64, in another order where NumPy sums or multiplies matrices);
* the primal in float32 on the interpreter stays float32 and within 1e-5 of the float64 reference;
* the primal agrees on Numba, hostcuda and the IR interpreter within the shared 8-ulp bound (NUMBA_SAMPLE), on
  hostcuda and the interpreter (the others);
* check_grad in float64, reverse and forward, against central differences and the dot-product test, on random
  non-zero inputs, on the interpreter (no compile) in CI, on Numba for NUMBA_SAMPLE;
* the race analysis' verdicts, primal and reverse;
* (`full`) each reverse on hostcuda against Numba's, the same output adjoints.

CI: 13 primals (in float32 too), interpreter gradients and race verdicts, the programs' launches' verdicts and
racy mutants, one kernel's Numba gradient and backend agreement (NUMBA_SAMPLE), hostcuda against the interpreter
for the others but HOSTCUDA_FULL. Cold-cache CPU for the file, one process: 12.7 s (11.8 user + 0.8 system, g++
included, at load 8.2, session 56; 12.9 s at load 9.7). `-m full` (Numba gradients of all 13, hostcuda against
Numba): 39 tests, 16 minutes of wall time at load 9, LU's Numba gradient 209 s of it (22 Numba functions for its
four kernels' reverse alone).

What porting them found is in docs/kernel-language.md ("Ninth round (session 56)")."""

import numpy as np
import pytest
from support import ported_hpc9 as A
from support import ported_hpc9_more as B
from support.ported_harness import assert_reverse_on_hostcuda_agrees_with_numba, round_tests
from support.ported_hpc9_cases import PROGRAMS, cases

import gradkern as gk

NAMES = [c[0] for c in cases(np.random.default_rng(0))]
# Numba's sample: the oceanFFT spectrum (a mirrored read of another thread's element, a device function returning
# a complex pair, an Active time), the cheapest to compile (4.6 s of the gradient test's wall time, session 56; RWKV's
# loop-carried state took 16 s, Parboil's JDS 7 s: over the file's 12-s budget). hostcuda builds each of the
# programs' five (LU) and two (Ewald) kernels with g++: 3.8 and 2.3 s, `full`
NUMBA_SAMPLE = {"generate_spectrum"}
HOSTCUDA_FULL = {"lud_cuda", "ewald"}


def _case(name, seed=5):
    return next(c for c in cases(np.random.default_rng(seed)) if c[0] == name)


# launches not proved race-free statically, primal and reverse: RWKV's y[b*T*C + c + i*C] from `//` and `%` of
# the thread index, backprop's and miniBUDE's flat indices at a run-time row length or block size (no guard
# bounds the column), JDS's write through the permutation, and attention's own rows at run-time T beside the
# atomics into dinp. The exact run-time check runs for them, and passes
RUNTIME_CHECKED = {"wkv_forward", "bpnn_adjust_weights", "spmv_jds", "fasten_main", "attention_backward"}
ATOMIC = {"attention_backward": ("dinp",)}

# the float32 bound (1e-5 of the largest value): every case's float32 error 1e-7 to 2e-6 (session 56); every
# case has more than 20 derivatives for check_grad to draw; race verdicts asked of the interpreter's
# specialisations (the gradient tests' own)
globals().update(round_tests(cases, PROGRAMS, NUMBA_SAMPLE, ATOMIC, RUNTIME_CHECKED, float32=True,
                             race_backend="interp", hostcuda_full=HOSTCUDA_FULL))


@pytest.mark.full
@pytest.mark.parametrize("name", NAMES)
def test_reverse_on_hostcuda_agrees_with_numba(name):
    assert_reverse_on_hostcuda_agrees_with_numba(_case(name), PROGRAMS)


@gk.kernel
def _gauss_seidel_uncoloured(u, f, n):
    """gauss_seidel_kernel without its colour test: every interior point updated at once from its neighbours."""
    i, j = gk.tid()
    if j == 0 or i == 0 or j >= n - 1 or i >= n - 1:
        return
    u[j + n * i] = 0.25 * (u[j - 1 + n * i] + u[j + 1 + n * i] + u[j + n * (i - 1)] + u[j + n * (i + 1)]
                           + f[j + n * i])


@gk.kernel
def _bpnn_bias_every_block(delta, hid, w, oldw):
    """bpnn_adjust_weights' bias update guarded by `ty == 0` only: row 0 of every block writes the bias row."""
    by, ty, tx = gk.tid()
    if ty == 0:
        w[tx + 1] += 0.3 * delta[tx + 1] + 0.3 * oldw[tx + 1]


def test_programs_kernels_race_verdicts():
    """The programs' launches, primal verdicts: the halo pack (a gather through a list) proved; LU's, Ewald's and
    the smoother's flat indices at a run-time row length or grid-stride offset, and the unpack's write through a
    list, checked at run time. And the run-time check refuses what races on a GPU: the smoother without its colour
    test, an unpack list naming one ghost twice, the backprop bias row written by every block."""
    rng = np.random.default_rng(3)
    m = rng.uniform(size=36) + 4.0 * np.eye(6).ravel()
    posq, css = rng.uniform(size=(4, 4)), np.zeros((27, 2))
    u, f, v, buf = rng.uniform(size=25), rng.uniform(size=25), rng.uniform(size=30), rng.uniform(size=6)
    interior, ghosts = (np.arange(1, 4) * 6 + 1).astype(np.int32), (np.arange(1, 4) * 6).astype(np.int32)
    verdicts = {
        "lud_diagonal_col": (A.lud_diagonal_col, 3, (m, 6, 0, 1), True),
        "lud_diagonal_row": (A.lud_diagonal_row, 3, (m, 6, 0, 1), True),
        "lud_perimeter": (A.lud_perimeter, (1, 6), (m, 6, 0), True),
        "lud_internal": (A.lud_internal, (3, 3), (m, 6, 0), True),
        "ewald_cos_sin_sums": (A.ewald_cos_sin_sums, 4, (np.zeros(4), posq, css, 2.5, 2.7, 2.9, -0.3, 4), True),
        "ewald_forces": (A.ewald_forces, 4, (np.zeros((4, 3)), posq, css, 2.5, 2.7, 2.9, -0.3, 4), True),
        "gauss_seidel_kernel": (B.gauss_seidel_kernel, (5, 5), (u, f, 5, 0), True),
        "halo_pack": (B.halo_pack, 3, (buf, 3, interior, v, 3), False),
        "halo_unpack": (B.halo_unpack, 3, (buf, 3, ghosts, v, 3), True),
    }
    for name, (kernel, dim, args, checked) in verdicts.items():
        found = gk.inspect(kernel, *args, dim=dim)
        assert (found.parallel, found.atomic_targets, found.race_check) == (True, (), checked), name
    before = u.copy()
    with pytest.raises(gk.RaceError):
        gk.launch(_gauss_seidel_uncoloured, (5, 5), u, f, 5, backend="interp")
    twice = np.array([6, 12, 6], np.int32)
    with pytest.raises(gk.RaceError):
        gk.launch(B.halo_unpack, 3, buf, 3, twice, v, 3, backend="interp")
    w, oldw = rng.uniform(size=20), rng.uniform(size=20)
    with pytest.raises(gk.RaceError):
        gk.launch(_bpnn_bias_every_block, (2, 2, 3), rng.uniform(size=4), 3, w, oldw, backend="interp")
    np.testing.assert_array_equal(u, before)
