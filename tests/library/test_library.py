"""The shipped kernel library, gradkern.kernels (kernels/ at the top level).
Every exported kernel has a LibraryCase (tests/support/cases_<family>.py) and is:
launched on small random float64 inputs against a NumPy reference; launched
in float32 against the float64 reference within a forward error bound;
differentiated by check_grad in float64 (reverse and forward mode, finite
differences and the dot-product test); proved race-free at compile time in
its primal and reverse launches, or, for a kernel that accumulates by atomic
adds, run with repeated indices. A kernel added to kernels/ without a case
fails test_every_library_kernel_is_covered, as does a function with a custom
rule without a case in test_rules_library.py (RULES), or a kernel only such a
rule launches (not exported) without one there (RULE_KERNELS). An exported
alias of a kernel (`saxpy = axpy`, listed in a cases module's ALIASES) is
covered by its target's case.

Tolerances. float64 launches against NumPy: rtol 1e-12 plus 1e-13 of the
largest magnitude involved (both evaluate the same few-term formulas, in
other orders: their difference is a few ulps of the largest term). float32:
see LibraryCase (γ_k bound). Derivatives: check_grad's float64 defaults
(rtol 1e-5, atol 1e-7; central differences with h = 1e-6 on smooth O(1)
maps err by ~1e-10)."""

import importlib
import pkgutil

import numpy as np
import pytest
from support.library_cases import ALIASES, CASES

import gradkern as gk
import gradkern.kernels as library
from gradkern.rules import CustomRule
from gradkern.testing import check_grad
from library.test_rules_library import RULE_KERNELS, RULES

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


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_gradient(name, rng):
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
