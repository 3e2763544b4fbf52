"""The derivative table's conventions at kinks and singular points
(transforms/derivatives.py documents them), in one place: pow at 0 with
integer and float exponents, abs at 0, min/max ties, floor, sqrt and log at 0.
Each is checked in reverse and forward mode, on the interpreter and on Numba,
and forward and reverse must agree exactly (the kernels are elementwise, so
both give the diagonal of the Jacobian). Away from the kinks, the same kernels
are checked against finite differences on random non-zero inputs."""

import math

import numpy as np
import pytest

import gradkern as gk
from gradkern.testing import check_grad

inf, nan = math.inf, math.nan
BACKENDS = ("interp", "cpu")


@gk.kernel
def power(x, p, y):
    i = gk.tid()
    y[i] = x[i] ** p[i]


@gk.kernel
def power_int(x, n, y):
    i = gk.tid()
    y[i] = x[i] ** n[i]


@gk.kernel
def power_scalar(x, p, y):
    i = gk.tid()
    y[i] = x[i] ** p


@gk.kernel
def power_zero_float(x, y):
    i = gk.tid()
    y[i] = x[i] ** 0.0


@gk.kernel
def power_zero_int(x, y):
    i = gk.tid()
    y[i] = x[i] ** 0


@gk.kernel
def absolute(x, y):
    i = gk.tid()
    y[i] = abs(x[i])


@gk.kernel
def minimum(a, b, y):
    i = gk.tid()
    y[i] = min(a[i], b[i])


@gk.kernel
def maximum(a, b, y):
    i = gk.tid()
    y[i] = max(a[i], b[i])


@gk.kernel
def floor_(x, y):
    i = gk.tid()
    y[i] = math.floor(x[i])


@gk.kernel
def sqrt_(x, y):
    i = gk.tid()
    y[i] = math.sqrt(x[i])


@gk.kernel
def log_(x, y):
    i = gk.tid()
    y[i] = math.log(x[i])


def reverse_partial(kernel, args, wrt, backend):
    """∂y_i/∂args[wrt]_i by reverse mode (dy = 1; the other inputs Const)."""
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    ann = [gk.Const(a) for a in args[:-1]] + [gk.Duplicated(args[-1], np.ones_like(args[-1]))]
    if isinstance(args[wrt], np.ndarray):
        ann[wrt] = gk.Duplicated(args[wrt], np.zeros_like(args[wrt]))
        gk.autodiff(kernel, *ann, backend=backend)
        return ann[wrt].dval
    ann[wrt] = gk.Active(args[wrt])
    return gk.autodiff(kernel, *ann, backend=backend)[wrt]


def forward_partial(kernel, args, wrt, backend):
    """∂y_i/∂args[wrt]_i by forward mode (tangent 1 on args[wrt]; the other inputs Const)."""
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    ann = [gk.Const(a) for a in args[:-1]] + [gk.Duplicated(args[-1], np.zeros_like(args[-1]))]
    one = np.ones_like(args[wrt]) if isinstance(args[wrt], np.ndarray) else 1.0
    ann[wrt] = gk.Duplicated(args[wrt], one)
    gk.autodiff(kernel, *ann, mode=gk.Forward, backend=backend)
    return ann[-1].dval


def f(*v, dtype=np.float64):
    return np.array(v, dtype)


# (label, kernel, arguments (the output last), operand, the expected partial per element)
KINKS = [
    # x ** p, float p: d/dx = p x^(p-1) but 0 where p == 0 (0 * 0^-1 would be NaN)
    ("pow d/dx", power, lambda t: (f(0, 0, 0, 0, 0, -2, 3, dtype=t), f(0, 2, 0.5, 1, -1, 2, 0, dtype=t),
                                   f(0, 0, 0, 0, 0, 0, 0, dtype=t)), 0, [0, 0, inf, 1, -inf, -4, 0]),
    # d/dp = log(x) x^p but 0 where x == 0 and p >= 0 (log 0 * 0^p); -inf for p < 0; NaN for x < 0
    ("pow d/dp", power, lambda t: (f(0, 0, 0, 0, -2, 2, dtype=t), f(0, 2, 0.5, -1, 2, 0, dtype=t),
                                   f(0, 0, 0, 0, 0, 0, dtype=t)), 1, [0, 0, 0, -inf, nan, math.log(2)]),
    # integer n: d/dx = n x^(n-1), 0 where n == 0
    ("pow_int d/dx", power_int, lambda t: (f(0, 0, 0, -2, 0, 5, dtype=t), np.array([0, 1, 2, 3, -1, 0]),
                                           f(0, 0, 0, 0, 0, 0, dtype=t)), 0, [0, 1, 0, 12, -inf, 0]),
    ("pow 0.0 d/dx", power_zero_float, lambda t: (f(0, -0.0, 2, -3, dtype=t), f(0, 0, 0, 0, dtype=t)), 0,
     [0, 0, 0, 0]),
    ("pow 0 d/dx", power_zero_int, lambda t: (f(0, -0.0, 2, -3, dtype=t), f(0, 0, 0, 0, dtype=t)), 0, [0, 0, 0, 0]),
    # abs: +1 at 0 and -0.0 (JAX's subgradient)
    ("abs", absolute, lambda t: (f(0, -0.0, 2, -3, dtype=t), f(0, 0, 0, 0, dtype=t)), 0, [1, 1, 1, -1]),
    # min/max return their first argument on ties, which gets the derivative
    ("min d/da", minimum, lambda t: (f(1, 1, 2, dtype=t), f(1, 2, 1, dtype=t), f(0, 0, 0, dtype=t)), 0, [1, 1, 0]),
    ("min d/db", minimum, lambda t: (f(1, 1, 2, dtype=t), f(1, 2, 1, dtype=t), f(0, 0, 0, dtype=t)), 1, [0, 0, 1]),
    ("max d/da", maximum, lambda t: (f(1, 1, 2, dtype=t), f(1, 2, 1, dtype=t), f(0, 0, 0, dtype=t)), 0, [1, 0, 1]),
    ("max d/db", maximum, lambda t: (f(1, 1, 2, dtype=t), f(1, 2, 1, dtype=t), f(0, 0, 0, dtype=t)), 1, [0, 1, 0]),
    ("floor", floor_, lambda t: (f(0, 1, -1, 1.5, -2.5, dtype=t), f(0, 0, 0, 0, 0, dtype=t)), 0, [0, 0, 0, 0, 0]),
    # IEEE: 0.5 / sqrt(0) and 1 / 0 are +inf
    ("sqrt", sqrt_, lambda t: (f(0, 4, dtype=t), f(0, 0, dtype=t)), 0, [inf, 0.25]),
    ("log", log_, lambda t: (f(0, 4, dtype=t), f(0, 0, dtype=t)), 0, [inf, 0.25]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("label", [k[0] for k in KINKS])
def test_kink_convention_in_forward_and_reverse(label, dtype, backend):
    _, kernel, make, wrt, want = next(k for k in KINKS if k[0] == label)
    args = make(dtype)
    rev = reverse_partial(kernel, args, wrt, backend)
    fwd = forward_partial(kernel, args, wrt, backend)
    # exact values at the kinks; elsewhere a few float32 ulps (log 2, 12, 0.25 are not all exact in x^(n-1) paths)
    np.testing.assert_allclose(rev, np.array(want, dtype), rtol=1e-6, atol=0)
    np.testing.assert_array_equal(fwd, rev)  # the same partial from the same table: identical bits


@pytest.mark.parametrize("backend", BACKENDS)
def test_pow_with_an_active_scalar_exponent_at_zero(backend):
    """d/dp Σ x_i^p at x = 0: 0 for p >= 0 (summed over threads, not NaN)."""
    for p in (0.0, 2.0):
        args = (np.zeros(5), p, np.zeros(5))
        assert reverse_partial(power_scalar, args, 1, backend) == 0.0
        np.testing.assert_array_equal(forward_partial(power_scalar, args, 1, backend), 0.0)
    x = np.array([0.0, 0.5, 2.0])
    # d/dp Σ x^p = Σ log(x) x^p over the non-zero x; summed in another order: a few ulps
    np.testing.assert_allclose(reverse_partial(power_scalar, (x, 1.5, np.zeros(3)), 1, backend),
                               math.log(0.5) * 0.5 ** 1.5 + math.log(2.0) * 2.0 ** 1.5, rtol=1e-14)


def _dup(rng, n, lo=0.2, hi=1.5):
    """A Duplicated array of n values in [lo, hi), with a random shadow."""
    return gk.Duplicated(rng.uniform(lo, hi, n), rng.uniform(0.2, 1.5, n))


SMOOTH = {  # away from the kinks: random non-zero inputs
    "power": lambda r: (power, (_dup(r, 8), _dup(r, 8, -1.5, 1.5), _dup(r, 8))),
    "power_int": lambda r: (power_int, (_dup(r, 6, -1.5, -0.2), gk.Const(np.array([0, 1, 2, 3, -1, -2])),
                                        _dup(r, 6))),
    "power_scalar": lambda r: (power_scalar, (_dup(r, 6), gk.Active(1.7), _dup(r, 6))),
    "power_zero_float": lambda r: (power_zero_float, (_dup(r, 4), _dup(r, 4))),
    "absolute": lambda r: (absolute, (_dup(r, 6, -1, 1), _dup(r, 6))),
    "minimum": lambda r: (minimum, (_dup(r, 6), _dup(r, 6), _dup(r, 6))),
    "maximum": lambda r: (maximum, (_dup(r, 6), _dup(r, 6), _dup(r, 6))),
    "floor": lambda r: (floor_, (gk.Duplicated(r.uniform(0.1, 0.9, 6) + np.arange(6), r.uniform(0.2, 1.5, 6)),
                                 _dup(r, 6))),
    "sqrt": lambda r: (sqrt_, (_dup(r, 6), _dup(r, 6))),
    "log": lambda r: (log_, (_dup(r, 6), _dup(r, 6))),
}


@pytest.mark.parametrize("name", sorted(SMOOTH))
def test_away_from_the_kinks_derivatives_match_finite_differences(name):
    """check_grad's default criterion: central differences in float64 (rtol 1e-5),
    the dot-product test, and forward mode against reverse. The inputs (a fixed
    seed) keep clear of the kinks by far more than the difference step 1e-6:
    pow's and sqrt's and log's bases are >= 0.2 in magnitude, abs's argument is
    uniform in (-1, 1), min/max operands are independent uniforms, floor's
    argument sits 0.1 or more from an integer."""
    kernel, args = SMOOTH[name](np.random.default_rng(17))
    report = check_grad(kernel, *args)
    assert report.ok and report.checked > 1
