"""Session 58's eleventh round of kernels ported from public GPU and HPC codes (tests/support/ported_hpc11.py,
ported_hpc11_more.py; inputs in ported_hpc11_cases.py, NumPy references in ported_hpc11_refs.py). For each, as
test_ported_hpc10.py does:

* the primal on the interpreter matches its NumPy reference within 1e-12 of the largest value;
* the primal in float32 on the interpreter stays float32 and within 1e-5 of the float64 reference;
* check_grad in float64, reverse and forward, against central differences and the dot-product test, on random
  non-zero inputs, on the interpreter;
* the race analysis' verdicts, primal and reverse;
* (`full`) Numba's gradients and primals, hostcuda's primals against the interpreter's: a cold Numba build of a
  check_grad costs 4-9 s on the CI machine, the file's whole budget (segment_csr_max, xc_lda_pz and mc_call
  checked on Numba, all ten on hostcuda, in session 58).

CI (float32 primals for three): 33 tests, one process, cold caches (session 58): 5.4 s CPU (the run's user time,
8.9 s, less that of collecting them, 3.5 s); --durations summed 7-11 s of wall time at a load of 7-9 on 2 cores.

The LDA's zero branch below rho_threshold has a test of its own (check_grad cannot straddle it).

What porting them found is in docs/kernel-language.md ("Eleventh round (session 58)")."""

import numpy as np
import pytest
from support.ported_harness import assert_reverse_on_hostcuda_agrees_with_numba, round_tests
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


def test_lda_below_the_density_threshold_is_zero_with_zero_derivatives(monkeypatch):
    """QE's xc_lda below rho_threshold: every output 0 and, in reverse, no adjoint reaches those densities (the
    case cannot hold such a density: check_grad's step would carry it across the threshold); the others' outputs
    and adjoints as the reference and the branch's derivative (d ex / d rho = ex / (3 rho))."""
    from support import ported_hpc11_more as B
    from support import ported_hpc11_refs as ref
    from support.ported_harness import on_interpreter

    import gradkern as gk

    on_interpreter(monkeypatch)
    rho = np.array([0.0, 1e-12, 0.5, 2.0])
    outs = [gk.Duplicated(np.zeros(4), np.ones(4) if k == 0 else np.zeros(4)) for k in range(4)]
    drho = np.zeros(4)
    gk.autodiff(B.xc_lda_pz, gk.Duplicated(rho.copy(), drho), *outs, dim=4)
    want = ref.xc_lda_pz([rho] + [np.zeros(4)] * 4)
    for k in range(4):
        np.testing.assert_allclose(outs[k].val, want[k + 1], rtol=1e-14, atol=0)
    assert (outs[0].val[:2] == 0.0).all() and (drho[:2] == 0.0).all()
    np.testing.assert_allclose(drho[2:], want[1][2:] / (3.0 * rho[2:]), rtol=1e-12)


@pytest.mark.full
@pytest.mark.parametrize("name", NAMES)
def test_reverse_on_hostcuda_agrees_with_numba(name):
    case = next(c for c in cases(np.random.default_rng(5)) if c[0] == name)
    assert_reverse_on_hostcuda_agrees_with_numba(case, PROGRAMS)
