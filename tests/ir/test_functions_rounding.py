"""The elementary functions added in session 57 for NumPy's ufuncs between launches (docs/host-code.md
"Elementwise NumPy"): cbrt, exp2, log2, log10 and the roundings ceil, trunc, rint (floor's kin). Their values
against NumPy on the interpreter and Numba (the roundings bit for bit, halves and signed zeros included), their
conventions at singular points (transforms/derivatives.py's table: cbrt and the logarithms at 0, the roundings 0
everywhere), and away from them check_grad against central differences."""

import math

import numpy as np
import pytest
from support.ported_harness import on_interpreter
from transforms.test_kinks import forward_partial, reverse_partial

import gradkern as gk
from gradkern.testing import check_grad

inf = math.inf
NAMES = ("cbrt", "exp2", "log2", "log10", "ceil", "trunc", "rint")
NUMPY = (np.cbrt, np.exp2, np.log2, np.log10, np.ceil, np.trunc, np.rint)


@gk.kernel
def unary(x, which, y):
    """y = f(x) for the function numbered `which` in NAMES (one kernel: one compile per mode)."""
    i = gk.tid()
    u = x[i]
    v = u
    if which == 0:
        v = np.cbrt(u)
    elif which == 1:
        v = np.exp2(u)
    elif which == 2:
        v = math.log2(u)
    elif which == 3:
        v = np.log10(u)
    elif which == 4:
        v = math.ceil(u)  # a float of u's type, as math.floor in a kernel (docs/kernel-language.md)
    elif which == 5:
        v = np.trunc(u)
    elif which == 6:
        v = np.rint(u)
    y[i] = v


# halves both ways (rint rounds them to even), signed zeros, just below a half, large and negative values
ROUNDED = np.array([2.5, 3.5, -2.5, -0.5, 0.5, -0.3, 0.3, -0.0, 0.0, 0.49999999999999994, -1.7, 1.7, 4503599627370497.0,
                    -1e300, 7.0])
POSITIVE = np.array([8.0, 1000.0, 0.001, 2.5, 1e-300, 3.75, 1e300, 0.5])


# Numba in float64 only (one compile; float32 is the same printed call with float32 types): the test budget
@pytest.mark.parametrize("backend, dtype", [("interp", np.float64), ("interp", np.float32), ("cpu", np.float64)])
def test_values_match_numpy(backend, dtype):
    # float32: 1e300 overflows to inf and 1e-300 to 0 (log2(0) = -inf): values, as NumPy's
    with np.errstate(over="ignore", divide="ignore"):
        _compare(backend, dtype)


def _compare(backend, dtype):
    rounded, positive = ROUNDED.astype(dtype), POSITIVE.astype(dtype)
    for which, (name, fn) in enumerate(zip(NAMES, NUMPY, strict=True)):
        x = positive if name in ("log2", "log10") else rounded
        if name == "exp2":
            x = np.clip(x, -30, 30)
        y = np.zeros_like(x)
        gk.launch(unary, x.shape[0], x, which, y, backend=backend)
        want = fn(x)
        if which >= 4 or (backend == "interp" and dtype == np.float64):
            # roundings are exact; the interpreter calls NumPy's own (float64: bit for bit on every VM so far)
            np.testing.assert_array_equal(y, want, err_msg=name)
            assert (np.signbit(y) == np.signbit(want)).all(), name  # -0.0 where NumPy gives it
        else:
            # Numba's libm against NumPy's; and in float32 NumPy is not one algorithm on AVX-512 CPUs (a SIMD loop
            # beside the scalar one): on session 61's VM the interpreter's cbrt differed from the array's by an
            # ulp in 5 of 15 values. Two ulps of the type, as for Numba's libm
            np.testing.assert_allclose(y, want, rtol=2 * np.finfo(dtype).eps, err_msg=name)


def _args(name, x):
    return x, NAMES.index(name), np.zeros_like(x)


# (function, inputs, the expected partial per element): exact values (0, +inf)
KINKS = [
    ("cbrt", np.array([0.0, -0.0]), [inf, inf]),
    ("log2", np.array([0.0]), [inf]),
    ("log10", np.array([0.0]), [inf]),
    *((name, ROUNDED[:8], [0.0] * 8) for name in ("ceil", "trunc", "rint")),
]


@pytest.mark.parametrize("case", range(len(KINKS)), ids=[k[0] for k in KINKS])
def test_convention_at_the_kinks(case):
    """On the interpreter: the partials are the table's IR, which both backends print with the existing ops."""
    name, x, want = KINKS[case]
    rev = reverse_partial(unary, _args(name, x), 0, "interp")
    np.testing.assert_array_equal(rev, want)
    np.testing.assert_array_equal(forward_partial(unary, _args(name, x), 0, "interp"), rev)


DOMAINS = {"cbrt": (0.2, 3.0), "exp2": (-3.0, 3.0), "log2": (0.2, 5.0), "log10": (0.2, 5.0)}


@pytest.mark.parametrize("name", DOMAINS)
def test_derivatives_match_finite_differences(name, monkeypatch):
    """check_grad's criterion (central differences in float64, rtol 1e-5; the dot-product test; forward against
    reverse) on the interpreter; cbrt on both signs, away from 0."""
    on_interpreter(monkeypatch)
    r = np.random.default_rng(sum(map(ord, name)))
    lo, hi = DOMAINS[name]
    x = r.uniform(lo, hi, 8) * (r.choice([-1.0, 1.0], 8) if name == "cbrt" else 1.0)
    report = check_grad(unary, gk.Duplicated(x, np.zeros(8)), gk.Const(NAMES.index(name)),
                        gk.Duplicated(np.zeros(8), r.uniform(0.2, 1.5, 8)))
    assert report.ok and report.checked > 1, report
