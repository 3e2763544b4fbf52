"""The shipped kernel library, gradkern.kernels (kernels/ at the top level).
Every exported kernel has a LibraryCase (tests/support/cases_<family>.py) and is:
launched on small random float64 inputs against a NumPy reference; launched
in float32 against the float64 reference within a forward error bound;
differentiated by check_grad in float64 (reverse and forward mode, finite
differences and the dot-product test); proved race-free at compile time in
its primal and reverse launches, or, for a kernel that accumulates by atomic
adds, run with repeated indices. A kernel added to kernels/ without a case
fails test_every_library_kernel_is_covered, as does a function with a custom
rule without a case in RULES below, or a kernel only such a
rule launches (not exported) without one in RULE_KERNELS. An exported
alias of a kernel (`saxpy = axpy`, listed in a cases module's ALIASES) is
covered by its target's case.

Tolerances. float64 launches against NumPy: rtol 1e-12 plus 1e-13 of the
largest magnitude involved (both evaluate the same few-term formulas, in
other orders: their difference is a few ulps of the largest term). float32:
see LibraryCase (γ_k bound). Derivatives: check_grad's float64 defaults
(rtol 1e-5, atol 1e-7; central differences with h = 1e-6 on smooth O(1)
maps err by ~1e-10).

Custom rules. The library's functions with custom rules (kernels/, docs/custom-rules.md): each primal
against a NumPy reference that does not share its code path (dense matrices,
residuals, manufactured trigonometric solutions), and its reverse and forward
rules by check_grad (float64 central differences and the dot-product test,
both modes) on small random non-zero inputs: every argument active, some
Const patterns, in-place calls, batched shapes and vector mode. Also the
kernels that only these rules launch (RULE_KERNELS; the coverage test
above takes them and RULES).

Tolerances. Every system here is strictly diagonally dominant by a margin of
at least 0.5 with O(1) entries, so its condition number is below ~10: a solve
is accurate to ~n·cond·eps ≈ 1e-14, and the primal checks use rtol 1e-12.
The FFT operators' round-off is ~eps·log n relative to the largest value, so
they are checked to 1e-12 of it. The derivative checks use check_grad's
float64 defaults (rtol 1e-5, atol 1e-7): central differences with h = 1e-6 on
these O(1) smooth maps err by ~h²·|f'''| ≈ 1e-12 (truncation) plus
~eps·|f|/h ≈ 1e-10 (round-off), far inside them. Vector-mode lanes run the
same arithmetic as single calls, so they are compared to 1e-13.
"""

from __future__ import annotations

import importlib
import math
import pkgutil

import numpy as np
import pytest
from support.interp_params import interp_and_numba
from support.library_cases import ALIASES, CASES
from support.ported_harness import on_interpreter

import gradkern as gk
import gradkern.kernels as library
from gradkern.kernels import dense_solve, poisson_periodic, spectral_derivative, tridiagonal_solve
from gradkern.kernels.tridiagonal import multiply_subtract, thomas
from gradkern.rules import CustomRule
from gradkern.testing import check_grad

EPS32 = float(np.finfo(np.float32).eps)


def _library_objects(kind: type) -> dict:
    """Every @gk.kernel (kind KernelFunction) or function with a custom rule (CustomRule) defined in a
    module of gradkern.kernels, by name."""
    found = {}
    for info in pkgutil.iter_modules(library.__path__):
        module = importlib.import_module(f"{library.__name__}.{info.name}")
        found |= {name: obj for name, obj in vars(module).items()
                  if isinstance(obj, kind) and obj.__wrapped__.__module__ == module.__name__}
    return found


def test_every_library_kernel_is_covered():
    kernels, rules = _library_objects(gk.KernelFunction), _library_objects(CustomRule)
    # an alias (`saxpy = axpy`) is the very object its exported target is, and exported too
    assert all(kernels.get(alias) is kernels.get(target) is not None and target in CASES
               for alias, target in ALIASES.items()), ALIASES
    kernels = {name: k for name, k in kernels.items() if name not in ALIASES}
    exported = {name: k for name, k in kernels.items() if name in library.__all__}
    assert sorted(exported) == sorted(CASES)
    assert sorted(set(kernels) - set(exported)) == sorted(RULE_KERNELS)  # launched only inside rules
    assert sorted(rules) == sorted(RULES)
    assert sorted(library.__all__) == sorted([*CASES, *RULES, *ALIASES])
    assert all(getattr(library, alias) is getattr(library, target) for alias, target in ALIASES.items())
    assert all(getattr(library, name) is f for name, f in (exported | rules).items())
    assert all(CASES[name].kernel is k for name, k in exported.items())
    assert all(RULE_KERNELS[name][0] is k for name, k in kernels.items() if name in RULE_KERNELS)


def test_every_library_kernel_documents_itself():
    """The docstring names every argument and the launch domain (a line "Launch: ...")."""
    for name, case in CASES.items():
        doc = getattr(library, name).__doc__ or ""
        assert "Launch:" in doc, f"{name}: its docstring must state its launch domain ('Launch: ...')"
        for param in case.params():
            assert f"`{param}`" in doc or f"{param}:" in doc or f" {param} " in doc, \
                f"{name}: its docstring does not say what argument '{param}' is"


def _copies(args: list, dtype=None) -> list:
    def c(a):
        if isinstance(a, np.ndarray):
            return a.astype(dtype) if dtype is not None and a.dtype.kind == "f" else a.copy()
        return a
    return [c(a) for a in args]


def _scale(*lists: list) -> float:
    """The largest magnitude among the float arrays and scalars of the lists."""
    return max([1e-300] + [float(np.max(np.abs(a))) for values in lists for a in values
                           if isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.size]
               + [abs(float(a)) for values in lists for a in values if isinstance(a, float)])


def _compare(name: str, case, got: list, want: list, rtol: float, atol: float):
    for param, g, w in zip(case.params(), got, want):
        if isinstance(g, np.ndarray):
            assert g.shape == np.shape(w), f"{name}: argument '{param}'"
            np.testing.assert_allclose(g.astype(np.float64) if g.dtype.kind == "f" else g, w, rtol=rtol, atol=atol,
                                       err_msg=f"{name}: argument '{param}'")


@pytest.mark.parametrize("name", sorted(CASES))
def test_launch_matches_numpy(name, rng):
    case = CASES[name]
    args = case.make(rng, np.dtype(np.float64))
    want = case.reference(*_copies(args))
    assert len(want) == len(args), f"{name}: the reference must give every argument"
    gk.launch(case.kernel, case.dim(args), *args)
    _compare(name, case, args, want, rtol=1e-12, atol=1e-13 * _scale(args, want))


@pytest.mark.parametrize("name", sorted(CASES))
def test_float32_launch_agrees_with_the_float64_reference(name, rng):
    case = CASES[name]
    args = case.make(rng, np.dtype(np.float32))
    assert any(isinstance(a, np.ndarray) and a.dtype == np.float32 for a in args), name
    want = case.reference(*_copies(args, np.float64))
    gk.launch(case.kernel, case.dim(args), *args)
    for a in args:
        assert not isinstance(a, np.ndarray) or a.dtype != np.float64, f"{name}: a float64 array in a float32 case"
    bound = case.float32_terms * case.float32_gain * EPS32 * _scale(args, want)
    _compare(name, case, args, want, rtol=0.0, atol=bound)


# The gradients whose Numba compiles cost the most in CI (session 55's clean-clone run: d2q9_step 24 s, shallow_water_2d
# 16 s, wave_step_2d 11.5 s of CPU, 52 of this file's 112 s) are checked on the interpreter in CI, their Numba twins
# `full`. check_grad tests the transforms' reverse and tangent, which a backend only prints (docs/architecture.md);
# Numba still compiles these kernels' reverses in CI, in the examples that differentiate through them (d2q9_flow,
# shallow_water_ic, fwi_toy: tests/meta/test_examples.py), and their primals here (docs/testing.md, "Test time").
NUMBA_FULL = {"d2q9_step", "shallow_water_2d", "wave_step_2d"}


@pytest.mark.slow
@pytest.mark.parametrize(("name", "interp"),
                         interp_and_numba(sorted(CASES), sorted(CASES), NUMBA_FULL, set(CASES) - NUMBA_FULL))
def test_gradient(name, interp, rng, monkeypatch):
    if interp:
        on_interpreter(monkeypatch)
    case = CASES[name]
    args = case.make(rng, np.dtype(np.float64))
    report = check_grad(case.kernel, *case.annotated(args), dim=case.dim(args), **(case.check_grad_options or {}))
    assert report.ok, str(report)
    assert report.checked > 10
    assert report.dot_analytic != 0.0


@pytest.mark.parametrize("name", sorted(CASES))
def test_race_freedom_is_proved_or_the_kernel_accumulates_atomically(name, rng):
    case = CASES[name]
    args = case.make(rng, np.dtype(np.float64))
    dim = case.dim(args)
    primal = gk.inspect(case.kernel, *args, dim=dim)
    reverse = gk.inspect(case.kernel, *case.annotated(args), dim=dim, mode=gk.Reverse)
    if not case.accumulates:
        assert primal.parallel and not primal.race_check, f"{name}: primal launch not proved race-free"
        assert reverse.parallel and not reverse.race_check, f"{name}: reverse launch not proved race-free"
        assert case.repeated is None
        return
    assert set(case.accumulates) <= set(primal.atomic_targets), (name, primal.atomic_targets)
    assert case.repeated is not None and case.repeated(args), f"{name}: the case must repeat indices"


# -- the library's functions with custom rules, and the kernels only their rules launch --------------


LENGTH = 2.5  # of the periodic domain: wavenumbers 2πk/L are not integers


def D(a):
    return gk.Duplicated(a, np.zeros_like(a))


# -- inputs and references ---------------------------------------------------------------------------------------

def tridiagonal_system(rng, shape):
    """a, b, c, d of one shape: |b_i| >= 2.5 > 2 > |a_i| + |c_i|, entries of both signs."""
    a, c, d = rng.uniform(-1, 1, (3, *shape))
    b = rng.choice([-1.0, 1.0], shape) * rng.uniform(2.5, 3.5, shape)
    return a, b, c, d


def tridiagonal_matrix(a, b, c):
    """The dense (n, n) matrix of one system (a[0] and c[n-1] unused)."""
    return np.diag(b) + np.diag(a[1:], -1) + np.diag(c[:-1], 1)


def tridiagonal_reference(a, b, c, d):
    if b.ndim == 1:
        return np.linalg.solve(tridiagonal_matrix(a, b, c), d)
    return np.stack([tridiagonal_reference(a[:, j], b[:, j], c[:, j], d[:, j]) for j in range(b.shape[1])], axis=1)


def dense_system(rng, shape):
    """A (..., n, n) with diagonal in [n, n+1] and off-diagonal row sums below n-1; b (..., n)."""
    n = shape[-1]
    A = rng.uniform(-1, 1, shape) + rng.uniform(n, n + 1, shape[:-1])[..., None] * np.eye(n)
    return A, rng.uniform(-1, 1, shape[:-1])


def trigonometric_field(rng, shape, length):
    """(f, u, f') for a random f using every Fourier mode of n points (the Nyquist mode (-1)^j for even n,
    and a mean): u = the zero-mean solution of -u'' = f, f' = its derivative with the Nyquist mode's
    (sin(π x n/L), zero at the points) left out, as spectral_derivative defines it."""
    n = shape[-1]
    x = np.arange(n) * (length / n)
    mean = rng.uniform(-1, 1, (*shape[:-1], 1))
    f, u, df = mean + np.zeros(shape), np.zeros(shape), np.zeros(shape)
    for m in range(1, n // 2 + 1):
        kappa = 2 * math.pi * m / length
        alpha = rng.uniform(-1, 1, (*shape[:-1], 1))
        beta = rng.uniform(-1, 1, (*shape[:-1], 1)) if 2 * m < n else 0.0  # sin of the Nyquist mode is 0
        cos, sin = np.cos(kappa * x), np.sin(kappa * x)
        f = f + alpha * cos + beta * sin
        u = u + (alpha * cos + beta * sin) / kappa ** 2
        if 2 * m < n:
            df = df + kappa * (beta * cos - alpha * sin)
    return f, u, df


# -- the rules' cases ---------------------------------------------------------------------------------------------

def _tridiagonal(rng, shape):
    a, b, c, d = tridiagonal_system(rng, shape)
    return [a, b, c, d, rng.uniform(-1, 1, shape)]


def _dense(rng, shape):
    A, b = dense_system(rng, shape)
    return [A, b, rng.uniform(-1, 1, shape[:-1])]


def _spectral(rng, shape):
    return [rng.uniform(-1, 1, shape), rng.uniform(-1, 1, shape), LENGTH]


# name: (rule, arguments from a generator and a shape, the shapes to run, the output's position)
RULES = {
    "tridiagonal_solve": (tridiagonal_solve, _tridiagonal, [(1,), (6,), (5, 3)], 4),
    "dense_solve": (dense_solve, _dense, [(1, 1), (4, 4), (2, 3, 3)], 2),
    "poisson_periodic": (poisson_periodic, _spectral, [(1,), (7,), (8,), (2, 6)], 1),
    "spectral_derivative": (spectral_derivative, _spectral, [(2,), (7,), (8,), (2, 6)], 1),
}
RULE_CASES = [pytest.param(name, shape, id=f"{name}-{'x'.join(map(str, shape))}")
         for name, (_, _, shapes, _) in RULES.items() for shape in shapes]


def _active(args):
    """Every array Duplicated, every scalar Active."""
    return [D(a) if isinstance(a, np.ndarray) else gk.Active(a) for a in args]


# -- primals ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(1,), (6,), (5, 3), (1, 4)])
def test_tridiagonal_solve_matches_dense_solve(shape, rng):
    a, b, c, d = tridiagonal_system(rng, shape)
    x = rng.uniform(-1, 1, shape)
    inputs = [t.copy() for t in (a, b, c, d)]
    tridiagonal_solve(a, b, c, d, x)
    np.testing.assert_allclose(x, tridiagonal_reference(a, b, c, d), rtol=1e-12, atol=1e-14)
    for got, given in zip((a, b, c, d), inputs):
        np.testing.assert_array_equal(got, given)
    tridiagonal_solve(a, b, c, d, d)  # in place
    np.testing.assert_allclose(d, x, rtol=1e-14, atol=0)


@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (2, 3, 3)])
def test_dense_solve_residual(shape, rng):
    A, b = dense_system(rng, shape)
    x = rng.uniform(-1, 1, shape[:-1])
    dense_solve(A, b, x)
    np.testing.assert_allclose(np.einsum("...ij,...j->...i", A, x), b, rtol=1e-12, atol=1e-14)
    for k in np.ndindex(shape[:-2]):  # one system at a time, through the inverse
        np.testing.assert_allclose(x[k], np.linalg.inv(A[k]) @ b[k], rtol=1e-12, atol=1e-14)
    dense_solve(A, b, b)
    np.testing.assert_allclose(b, x, rtol=1e-14, atol=0)


@pytest.mark.parametrize("shape", [(1,), (2,), (7,), (8,), (3, 6)])
def test_spectral_operators_on_trigonometric_fields(shape, rng):
    f, u, df = trigonometric_field(rng, shape, LENGTH)
    got = rng.uniform(-1, 1, shape)
    poisson_periodic(f, got, LENGTH)
    np.testing.assert_allclose(got, u, rtol=0, atol=1e-12 * max(1.0, np.abs(u).max()))
    spectral_derivative(f, got, LENGTH)
    np.testing.assert_allclose(got, df, rtol=0, atol=1e-12 * max(1.0, np.abs(df).max()))
    spectral_derivative(f, f, LENGTH)  # in place
    np.testing.assert_allclose(f, got, rtol=0, atol=1e-14 * max(1.0, np.abs(df).max()))


# -- derivatives --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, shape", RULE_CASES)
def test_gradient_every_argument_active(name, shape, rng):
    rule, make, _, _ = RULES[name]
    report = check_grad(rule, *_active(make(rng, shape)))  # reverse and forward mode
    assert report.ok, str(report)
    assert report.dot_analytic != 0.0


# name: (shape, which arguments are Const)
CONST_PATTERNS = [
    ("tridiagonal_solve", (5, 2), (0, 2)),  # a and c: only the diagonal and the right-hand side active
    ("tridiagonal_solve", (6,), (3,)),  # d: the matrix alone
    ("tridiagonal_solve", (4, 2), (1,)),
    ("dense_solve", (2, 3, 3), (0,)),
    ("dense_solve", (4, 4), (1,)),
    ("poisson_periodic", (8,), (2,)),  # a constant length (a plain float)
    ("poisson_periodic", (2, 5), (0,)),  # only the length's derivative
    ("spectral_derivative", (7,), (2,)),
    ("spectral_derivative", (6,), (0,)),
]


@pytest.mark.parametrize("name, shape, const", CONST_PATTERNS)
def test_gradient_const_patterns(name, shape, const, rng):
    rule, make, _, _ = RULES[name]
    args = make(rng, shape)
    annotated = [(a if not isinstance(a, np.ndarray) else gk.Const(a)) if k in const else ann
                 for k, (a, ann) in enumerate(zip(args, _active(args)))]
    report = check_grad(rule, *annotated)
    assert report.ok, str(report)
    assert report.dot_analytic != 0.0


def _tridiagonal_in_place(a, b, c, d):
    tridiagonal_solve(a, b, c, d, d)


def _dense_in_place(A, b):
    dense_solve(A, b, b)


def _poisson_in_place(f, length):
    poisson_periodic(f, f, length)


def _derivative_in_place(f, length):
    spectral_derivative(f, f, length)


# in-place calls go through a program: check_grad copies each argument of a rule called alone, which would part them
IN_PLACE = {
    "tridiagonal_solve": (_tridiagonal_in_place, lambda r: tridiagonal_system(r, (5, 3))),
    "tridiagonal_solve-single": (_tridiagonal_in_place, lambda r: tridiagonal_system(r, (6,))),
    "dense_solve": (_dense_in_place, lambda r: dense_system(r, (2, 4, 4))),
    "poisson_periodic": (_poisson_in_place, lambda r: [r.uniform(-1, 1, (2, 8)), LENGTH]),
    "spectral_derivative": (_derivative_in_place, lambda r: [r.uniform(-1, 1, (2, 7)), LENGTH]),
}


@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_gradient_in_place(name, rng):
    program, make = IN_PLACE[name]
    report = check_grad(program, *_active(make(rng)))
    assert report.ok, str(report)
    assert report.dot_analytic != 0.0


def test_tridiagonal_in_place_shadow_is_the_transposed_solve(rng):
    """x is d: the buffer's shadow ends as λ = A^{-T} x̄ (∂L/∂d_old), not d̄ + λ, and is not zeroed."""
    a, b, c, d = tridiagonal_system(rng, (6,))
    seed = rng.uniform(-1, 1, 6)
    dd = seed.copy()
    gk.autodiff(_tridiagonal_in_place, gk.Const(a), gk.Const(b), gk.Const(c), gk.Duplicated(d, dd))
    np.testing.assert_allclose(dd, np.linalg.solve(tridiagonal_matrix(a, b, c).T, seed), rtol=1e-12, atol=1e-14)


# -- vector mode ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(RULES))
def test_vector_mode_matches_single_lanes(name, rng):
    """Width 2: forward tangents and reverse shadows, lane by lane, against separate width-1 calls."""
    rule, make, shapes, _ = RULES[name]
    args = make(rng, shapes[-1])
    arrays = [k for k, a in enumerate(args) if isinstance(a, np.ndarray)]
    seeds = {k: [rng.uniform(-1, 1, np.shape(a)) for _ in range(2)] for k, a in enumerate(args)}

    def call(mode, lanes):
        """autodiff at the seeds of `lanes`; returns (the shadows after, the result)."""
        shadows = {k: [seeds[k][lane].copy() for lane in lanes] for k in arrays}
        annotated = []
        for k, a in enumerate(args):
            value = a.copy() if k in arrays else a
            if k in arrays:
                annotated.append(gk.Duplicated(value, shadows[k][0]) if len(lanes) == 1
                                 else gk.BatchDuplicated(value, tuple(shadows[k])))
            elif mode is gk.Reverse:
                annotated.append(gk.Active(value))
            else:
                tangents = [float(seeds[k][lane]) for lane in lanes]
                annotated.append(gk.Duplicated(value, tangents[0]) if len(lanes) == 1
                                 else gk.BatchDuplicated(value, tuple(tangents)))
        return shadows, gk.autodiff(rule, *annotated, mode=mode)

    for mode in (gk.Forward, gk.Reverse):
        both, result = call(mode, [0, 1])
        for lane in (0, 1):
            single, single_result = call(mode, [lane])
            for k in arrays:
                np.testing.assert_allclose(both[k][lane], single[k][0], rtol=1e-13, atol=1e-15,
                                           err_msg=f"{name}, {mode}, argument {k}, lane {lane}")
            if mode is gk.Reverse:
                for k, g in enumerate(single_result):
                    if g is not None:
                        assert result[k][lane] == pytest.approx(g, rel=1e-13, abs=1e-15)


# -- bad input ----------------------------------------------------------------------------------------------------

def _overlapping(rng):
    buffer = rng.uniform(-1, 1, 7)
    a, b, c, d = tridiagonal_system(rng, (6,))
    return tridiagonal_solve, [buffer[:-1], b, c, d, buffer[1:]], "'a'"


BAD = {
    "shape": (lambda r: (tridiagonal_solve, [*tridiagonal_system(r, (5,))[:2], r.uniform(-1, 1, 4),
                                             *tridiagonal_system(r, (5,))[3:], r.uniform(-1, 1, 5)]), "'c'"),
    "dtype": (lambda r: (tridiagonal_solve, [*tridiagonal_system(r, (5,)), np.ones(5, np.int64)]), "'x'"),
    "empty": (lambda r: (tridiagonal_solve, [np.zeros(0)] * 4 + [np.zeros(0)]), "n = 0"),
    "3-d": (lambda r: (tridiagonal_solve, [r.uniform(2, 3, (2, 2, 2)) for _ in range(5)]), "'b'"),
    "overlap": (lambda r: _overlapping(r)[:2], "'a'"),
    "not square": (lambda r: (dense_solve, [r.uniform(-1, 1, (3, 4)), r.uniform(-1, 1, 3), r.uniform(-1, 1, 3)]),
                   "'A'"),
    "rhs shape": (lambda r: (dense_solve, [*dense_system(r, (2, 3, 3))[:1], r.uniform(-1, 1, 3),
                                           r.uniform(-1, 1, (2, 3))]), "'b'"),
    "length": (lambda r: (poisson_periodic, [r.uniform(-1, 1, 4), r.uniform(-1, 1, 4), -1.0]), "'length'"),
    "mixed dtypes": (lambda r: (spectral_derivative, [r.uniform(-1, 1, 4), np.zeros(4, np.float32), 1.0]), "'df'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_raises_before_touching_buffers(case, rng):
    make, named = BAD[case]
    rule, args = make(rng)
    before = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    with pytest.raises(gk.LaunchError) as err:
        rule(*args)
    assert named in str(err.value)
    for a, b in zip(args, before):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)


# -- the kernels the rules launch ---------------------------------------------------------------------------------

def _thomas(rng):
    a, b, c, d = tridiagonal_system(rng, (5, 3))
    return [a[1:], b, c[:-1], d, rng.uniform(-1, 1, (5, 3)), rng.uniform(-1, 1, (5, 3))]


def _thomas_reference(lower, diag, upper, rhs, x, scratch):
    a = np.concatenate([np.zeros((1, diag.shape[1])), lower])
    c = np.concatenate([upper, np.zeros((1, diag.shape[1]))])
    return tridiagonal_reference(a, diag, c, rhs)


def _multiply_subtract(rng):
    return [rng.uniform(-1, 1, (4, 3)) for _ in range(3)]


# name: (kernel, arguments from a generator, launch extent, the written argument's position, its NumPy value)
RULE_KERNELS = {
    "thomas": (thomas, _thomas, 3, 4, _thomas_reference),
    "multiply_subtract": (multiply_subtract, _multiply_subtract, (4, 3), 2, lambda u, v, out: out - u * v),
}


@pytest.mark.parametrize("name", sorted(RULE_KERNELS))
def test_rule_kernel_matches_numpy(name, rng):
    kernel, make, dim, out, reference = RULE_KERNELS[name]
    args = make(rng)
    want = reference(*[a.copy() for a in args])
    gk.launch(kernel, dim, *args)
    np.testing.assert_allclose(args[out], want, rtol=1e-12, atol=1e-14)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RULE_KERNELS))
def test_rule_kernel_gradient(name, rng):
    """gradkern's own derivative of the kernel (not the rule's): a cross-check of the Thomas elimination."""
    kernel, make, dim, _, _ = RULE_KERNELS[name]
    report = check_grad(kernel, *_active(make(rng)), dim=dim)
    assert report.ok, str(report)
    assert report.dot_analytic != 0.0


# -- in programs ------------------------------------------------------------------------------------------------

def _implicit_heat(a, b, c, u):
    """Three backward-Euler steps, each solve in place: its reverse needs u as that solve left it, which
    the next one overwrites (the runtime keeps it because of reads=)."""
    for _ in range(3):
        tridiagonal_solve(a, b, c, u, u)


def _poisson_first(f, g, A, length):
    """Rules whose outputs later calls overwrite: each reverse must still see the output its call left
    (as `reads=` promises); a buffer is kept whole once any reverse reads it, so the two chains put a
    different rule's output first in a buffer of its own."""
    poisson_periodic(f, g, length)
    spectral_derivative(g, f, length)
    dense_solve(A, f, g)


def _dense_first(A, b, x, y, length):
    dense_solve(A, b, x)
    spectral_derivative(x, y, length)
    poisson_periodic(y, x, length)
    dense_solve(A, x, y)


PROGRAMS = {
    "implicit_heat": (_implicit_heat, lambda r: tridiagonal_system(r, (6, 2))),
    "poisson_first": (_poisson_first, lambda r: [r.uniform(-1, 1, 6), r.uniform(-1, 1, 6),
                                                 dense_system(r, (6, 6))[0], LENGTH]),
    "dense_first": (_dense_first, lambda r: [*dense_system(r, (6, 6)), r.uniform(-1, 1, 6), r.uniform(-1, 1, 6),
                                             LENGTH]),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gradient_in_a_program(name, rng):
    program, make = PROGRAMS[name]
    report = check_grad(program, *_active(make(rng)))
    assert report.ok, str(report)
    assert report.dot_analytic != 0.0


@pytest.mark.slow  # compiles the Thomas kernels again for float32
@pytest.mark.parametrize("name", sorted(RULES))
def test_gradient_float32(name, rng):
    """check_grad compares a float32 call with a float64 run, to its float32 tolerances (rtol 2e-3)."""
    rule, make, shapes, _ = RULES[name]
    args = [a.astype(np.float32) if isinstance(a, np.ndarray) else a for a in make(rng, shapes[-1])]
    report = check_grad(rule, *_active(args))
    assert report.ok, str(report)
