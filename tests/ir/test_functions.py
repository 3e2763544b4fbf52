"""The elementary functions added for issue 19 (asin, acos, atan, sinh, cosh,
asinh, acosh, atanh, erf, expm1, log1p, atan2, hypot, copysign, fmod) and
gk.clamp / gk.sign: their conventions at singular points and kinks (the table
in transforms/derivatives.py), reverse and forward mode, interpreter and
Numba; away from them, check_grad against finite differences; vector mode
against separate calls. Values against NumPy run in the corpus
(tests/support/corpus.py `special_functions`), with every other corpus kernel."""

import math

import numpy as np
import pytest
from support.corpus import special_functions
from transforms.test_kinks import forward_partial, reverse_partial

import gradkern as gk
from gradkern.testing import check_grad

inf, nan = math.inf, math.nan
BACKENDS = ("interp", "cpu")
UNARY = ("asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "expm1", "log1p", "sign")
BINARY = ("atan2", "hypot", "copysign", "fmod", "clamp_lo", "clamp_hi")


@gk.kernel
def unary(x, which, y):
    """y = f(x) for the function numbered `which` in UNARY (one kernel: one compile per mode)."""
    i = gk.tid()
    u = x[i]
    v = u
    if which == 0:
        v = gk.asin(u)
    elif which == 1:
        v = math.acos(u)
    elif which == 2:
        v = np.arctan(u)
    elif which == 3:
        v = gk.sinh(u)
    elif which == 4:
        v = math.cosh(u)
    elif which == 5:
        v = np.arcsinh(u)
    elif which == 6:
        v = gk.acosh(u)
    elif which == 7:
        v = math.atanh(u)
    elif which == 8:
        v = gk.erf(u)
    elif which == 9:
        v = np.expm1(u)
    elif which == 10:
        v = math.log1p(u)
    elif which == 11:
        v = gk.sign(u)
    y[i] = v


@gk.kernel
def binary(a, b, which, y):
    """y = f(a, b) for the function numbered `which` in BINARY; clamp takes b as its lower or upper bound."""
    i = gk.tid()
    u = a[i]
    w = b[i]
    v = u
    if which == 0:
        v = gk.atan2(u, w)
    elif which == 1:
        v = math.hypot(u, w)
    elif which == 2:
        v = np.copysign(u, w)
    elif which == 3:
        v = gk.fmod(u, w)
    elif which == 4:
        v = gk.clamp(u, w, 10.0)
    elif which == 5:
        v = np.clip(u, -10.0, w)
    y[i] = v


def f(*v, dtype=np.float64):
    return np.array(v, dtype)


# (function, its inputs (the kernel's arrays before the output), operand, the expected partial per element)
KINKS = [
    ("asin", (f(1, -1),), 0, [inf, inf]),
    ("acos", (f(1, -1),), 0, [-inf, -inf]),
    ("acosh", (f(1),), 0, [inf]),
    ("atanh", (f(1, -1),), 0, [inf, inf]),
    ("sign", (f(0, -0.0, 2, -3, nan),), 0, [0, 0, 0, 0, 0]),
    ("atan2", (f(0), f(0)), 0, [nan]),
    ("atan2", (f(0), f(0)), 1, [nan]),
    ("hypot", (f(0, -0.0), f(0, 0)), 0, [0, 0]),
    ("hypot", (f(0, -0.0), f(0, 0)), 1, [0, 0]),
    # copysign(a, s) = |a| sign(s): d/da = sign(a) sign(s), sign(a) = +1 at 0 and -0.0 (as abs); d/ds = 0
    ("copysign", (f(0, -0.0, -1, 2, 0), f(-2, 3, -1, -0.0, 0)), 0, [-1, 1, 1, -1, 1]),
    ("copysign", (f(0, -1, 2), f(-2, -1, 5)), 1, [0, 0, 0]),
    # fmod(a, b): d/db = -trunc(a/b)
    ("fmod", (f(7, -7, 1, 6), f(2, 2, 3, -4)), 1, [-3, 3, 0, 1]),
    ("fmod", (f(7, -7, 1), f(2, 2, 3)), 0, [1, 1, 1]),
    # clamp = min(max(x, lo), hi): x gets the derivative on ties with a bound, lo and hi do not
    ("clamp_lo", (f(1, 0.5, 2), f(1, 1, 1)), 0, [1, 0, 1]),
    ("clamp_lo", (f(1, 0.5, 2), f(1, 1, 1)), 1, [0, 1, 0]),
    ("clamp_hi", (f(1, 0.5, 2), f(1, 1, 1)), 0, [1, 1, 0]),
    ("clamp_hi", (f(1, 0.5, 2), f(1, 1, 1)), 1, [0, 0, 1]),
]


def _call(name: str, inputs: tuple, dtype) -> tuple:
    inputs = tuple(a.astype(dtype) for a in inputs)
    which = (UNARY if name in UNARY else BINARY).index(name)
    return (*inputs, which, np.zeros_like(inputs[0]))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", range(len(KINKS)), ids=[f"{k[0]}-d{k[2]}" for k in KINKS])
def test_convention_at_the_kinks(case, dtype, backend):
    name, inputs, wrt, want = KINKS[case]
    kernel = unary if name in UNARY else binary
    args = _call(name, inputs, dtype)
    rev = reverse_partial(kernel, args, wrt, backend)
    fwd = forward_partial(kernel, args, wrt, backend)
    # the expected partials are exact (0, ±1, ±3, ±inf, NaN)
    np.testing.assert_array_equal(rev, np.array(want, dtype))
    np.testing.assert_array_equal(fwd, rev)  # the same partial from the same table: identical bits


# inputs away from every kink by far more than check_grad's difference step (1e-6), random signs where the
# function takes both
DOMAINS = {
    "asin": (-0.9, 0.9), "acos": (-0.9, 0.9), "atan": (-3, 3), "sinh": (-2, 2), "cosh": (-2, 2), "asinh": (-3, 3),
    "acosh": (1.2, 4), "atanh": (-0.9, 0.9), "erf": (-2, 2), "expm1": (-2, 2), "log1p": (-0.8, 3),
}


@pytest.mark.parametrize("name", [*DOMAINS, *BINARY])
def test_derivatives_match_finite_differences(name):
    """check_grad's criterion: central differences in float64 (rtol 1e-5), the dot-product test, and
    forward mode against reverse. Binary operands: atan2 and hypot away from the origin (|b| >= 0.3);
    copysign's a away from 0; fmod's a/b at least 0.05 from an integer (its d/db jumps there); clamp's
    operand at least 0.1 from the bound."""
    r = np.random.default_rng(sum(map(ord, name)))
    n = 16
    if name in DOMAINS:
        lo, hi = DOMAINS[name]
        args = (gk.Duplicated(r.uniform(lo, hi, n), np.zeros(n)), gk.Const(UNARY.index(name)),
                gk.Duplicated(np.zeros(n), r.uniform(0.2, 1.5, n)))
        report = check_grad(unary, *args)
    else:
        b = r.uniform(0.3, 1.5, n) * r.choice([-1.0, 1.0], n)
        a = r.uniform(0.2, 1.5, n) * r.choice([-1.0, 1.0], n)
        if name == "fmod":
            a = b * (r.integers(-4, 4, n) + r.uniform(0.05, 0.95, n))
        if name.startswith("clamp"):
            a = b + r.choice([-1.0, 1.0], n) * r.uniform(0.1, 1.0, n)
        args = (gk.Duplicated(a, np.zeros(n)), gk.Duplicated(b, np.zeros(n)), gk.Const(BINARY.index(name)),
                gk.Duplicated(np.zeros(n), r.uniform(0.2, 1.5, n)))
        report = check_grad(binary, *args)
    assert report.ok and report.checked > 1, report


@pytest.mark.parametrize("mode", [gk.Reverse, gk.Forward])
def test_vector_mode_equals_separate_calls(mode, rng):
    """BatchDuplicated over the corpus kernel that uses every function: lane by lane, the one-lane calls'
    shadows bit for bit (each lane runs the same statements)."""
    n = 24
    x, y = rng.uniform(-0.9, 0.9, n), rng.uniform(0.3, 1.5, n) * rng.choice([-1.0, 1.0], n)
    out = rng.uniform(-1, 1, (n, 7))
    seeds = [[rng.uniform(-1, 1, a.shape) for a in (x, y, out)] for _ in range(3)]
    batch = [[s.copy() for s in lane] for lane in seeds]
    primals = [a.copy() for a in (x, y, out)]
    gk.autodiff(special_functions, *(gk.BatchDuplicated(p, tuple(lane[k] for lane in batch))
                                     for k, p in enumerate(primals)), mode=mode)
    for lane, seed in enumerate(seeds):
        one = [s.copy() for s in seed]
        gk.autodiff(special_functions, *(gk.Duplicated(a.copy(), d) for a, d in zip((x, y, out), one)), mode=mode)
        for got, want in zip(batch[lane], one):
            np.testing.assert_array_equal(got, want)


def test_functions_work_outside_kernels():
    assert gk.clamp(2.0, 0.0, 1.0) == 1.0 and gk.clamp(-1, 0, 3) == 0 and gk.clamp(0.5, 1.0, 0.0) == 0.0
    assert gk.sign(-2.5) == -1.0 and gk.sign(0) == 0 and gk.sign(3) == 1 and math.isnan(gk.sign(nan))
    assert gk.atan2(1.0, 1.0) == math.atan2(1.0, 1.0) and gk.erf(0.5) == math.erf(0.5)


def test_wrong_argument_counts_are_refused_by_name():
    with pytest.raises(gk.KernelSyntaxError, match=r"clamp\(\) takes three arguments"):
        @gk.kernel
        def bad_clamp(x):
            i = gk.tid()
            x[i] = gk.clamp(x[i], 0.0)

        gk.launch(bad_clamp, 2, np.zeros(2))
    with pytest.raises(gk.KernelSyntaxError, match=r"atan2\(\) takes 2 arguments"):
        @gk.kernel
        def bad_atan2(x):
            i = gk.tid()
            x[i] = gk.atan2(x[i])

        gk.launch(bad_atan2, 2, np.zeros(2))
