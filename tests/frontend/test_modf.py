"""`frac, whole = math.modf(x)` in a kernel (frontend/modf.py; docs/kernel-language.md "Tenth round"): C's modf as
QMCPACK's B-spline functors call it, found porting miniQMC's two-body Jastrow in session 57 (refused before as a
tuple assignment of a call)."""

import math

import numpy as np
import pytest
from support.ported_harness import on_interpreter

import gradkern as gk
from gradkern.testing import check_grad


@gk.kernel
def _split(x, frac, whole):
    i = gk.tid()
    r = x[i] * 3.0
    r, ip = math.modf(r)  # the old r is read before either name is bound
    frac[i] = r
    whole[i] = ip


@gk.kernel
def _spline_like(x, c, out):
    i = gk.tid()
    t, ip = np.modf(x[i])
    k = int(ip)
    out[i] = c[k] * (1.0 - t) * (1.0 - t) + c[k + 1] * t * t


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_modf_matches_c_and_keeps_the_type(dtype):
    """The whole part truncates toward zero (-0.6 gives -0.0 and -0.6), both parts exact and of x's type."""
    x = np.array([0.3, 1.7, -2.4, -0.2, 5.0, 0.0, -3.0], dtype)
    frac, whole = np.zeros_like(x), np.zeros_like(x)
    gk.launch(_split, x.size, x, frac, whole, backend="interp")
    want = [math.modf(float(v * dtype(3.0))) for v in x]
    assert frac.dtype == whole.dtype == dtype
    np.testing.assert_array_equal(whole, np.array([w for _, w in want], dtype))
    np.testing.assert_array_equal(frac, np.array([f for f, _ in want], dtype))
    assert np.signbit(whole[3]) and np.signbit(frac[3])


def test_modf_gradient(monkeypatch):
    """d frac / dx = 1 and d whole / dx = 0 (floor's), through an index made from the whole part: check_grad's
    central differences and dot-product test, both modes, away from integers (where the spline jumps)."""
    on_interpreter(monkeypatch)
    x = np.array([0.31, 1.62, 2.45, 0.77])
    c = np.random.default_rng(0).uniform(0.5, 1.5, 5)
    report = check_grad(_spline_like, gk.Duplicated(x, np.zeros(4)), gk.Duplicated(c, np.zeros(5)),
                        gk.Duplicated(np.zeros(4), np.zeros(4)), dim=4)
    assert report.ok and report.checked >= 9, str(report)


def test_modf_as_one_value_is_refused_with_the_unpacking():
    def one_value(x, out):
        i = gk.tid()
        out[i] = math.modf(x[i])

    with pytest.raises(gk.KernelSyntaxError) as e:
        gk.kernel(one_value)
    assert "math.modf" in str(e.value) and "frac, whole = math.modf(x)" in str(e.value)
