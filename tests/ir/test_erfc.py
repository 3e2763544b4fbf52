"""erfc, added in session 51 because LAMMPS' coul/long GPU kernels and option-pricing codes call it: the values
on every backend against math.erfc (the far tail too, where 1 - erf(u) would have cancelled to 0), its
derivative -2/sqrt(pi) exp(-u^2) against central differences, forward against reverse, and gk.erfc outside a
kernel (docs/kernel-language.md)."""

import math

import numpy as np
import pytest

import gradkern as gk
from gradkern.testing import check_grad


@gk.kernel
def erfc_both_spellings(x, y, z):
    i = gk.tid()
    y[i] = math.erfc(x[i])
    z[i] = gk.erfc(2.0 * x[i]) * x[i]


@pytest.mark.parametrize("backend", ["interp", "cpu", "hostcuda"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_values_match_math_erfc_into_the_tail(backend, dtype):
    """Within 4 ulps of math.erfc rounded to the dtype, relative: the C library's erfc (g++ and Numba's) and
    Python's are each within an ulp or two of the true value; u up to 5 (erfc(10) = 2e-45 is float64's tail and
    below float32's range, where both round to 0 or a subnormal alike)."""
    x = np.concatenate([np.linspace(-3.0, 3.0, 13), [4.0, 5.0]]).astype(dtype)
    y, z = np.zeros_like(x), np.zeros_like(x)
    try:
        gk.launch(erfc_both_spellings, x.size, x, y, z, backend=backend)
    except gk.BackendUnavailableError:
        pytest.skip("g++ is not installed")
    want_y = np.array([math.erfc(float(v)) for v in x]).astype(dtype)
    want_z = np.array([math.erfc(2.0 * float(v)) * float(v) for v in x]).astype(dtype)
    eps = np.finfo(dtype).eps
    tiny = np.finfo(dtype).tiny
    np.testing.assert_allclose(y, want_y, rtol=4 * eps, atol=tiny)
    np.testing.assert_allclose(z, want_z, rtol=4 * eps, atol=tiny)
    assert y[-1] > 0.0 if dtype == np.float64 else True  # 1 - erf(5) is 0 in float64; erfc(5) = 1.5e-12


def test_derivative_matches_finite_differences_in_both_modes():
    """check_grad's criterion (central differences in float64, the dot-product test, forward against
    reverse) on u in [-2, 2], where erfc is smooth everywhere."""
    r = np.random.default_rng(51)
    n = 12
    x = r.uniform(-2.0, 2.0, n)
    report = check_grad(erfc_both_spellings, gk.Duplicated(x, np.zeros(n)), gk.Duplicated(np.zeros(n), np.zeros(n)),
                        gk.Duplicated(np.zeros(n), np.zeros(n)))
    assert report.ok and report.checked > 10 and report.dot_analytic != 0.0, str(report)


def test_reverse_partial_is_the_closed_form():
    """d erfc(u)/du = -2/sqrt(pi) exp(-u^2), within 2 ulps (one exp and one product)."""
    x = np.array([-1.5, 0.0, 0.3, 2.5])
    dx = np.zeros(4)
    gk.autodiff(erfc_both_spellings, gk.Duplicated(x.copy(), dx), gk.Duplicated(np.zeros(4), np.ones(4)),
                gk.Duplicated(np.zeros(4), np.zeros(4)))
    np.testing.assert_allclose(dx, -2.0 / math.sqrt(math.pi) * np.exp(-x * x), rtol=4e-16, atol=0)


def test_erfc_outside_kernels_is_math_erfc():
    assert gk.erfc is math.erfc and gk.erfc(0.5) == math.erfc(0.5)
