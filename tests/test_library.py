"""The shipped kernel library, gradkern.kernels (kernels/ at the top level):
each kernel launched on small random float64 inputs against NumPy, and its
reverse- and forward-mode derivatives checked by check_grad. A kernel added to
kernels/ without a case here fails test_every_library_kernel_is_covered, as
does a function with a custom rule without a case in test_rules_library.py
(RULES), or a kernel only such a rule launches (not exported) without one
there (RULE_KERNELS)."""

import importlib
import pkgutil

import numpy as np
import pytest
from test_rules_library import RULE_KERNELS, RULES

import gradkern as gk
import gradkern.kernels as library
from gradkern.rules import CustomRule
from gradkern.testing import check_grad


def _saxpy(a, x, y):
    return [a, x, a * x + y]


def _matvec(A, x, y):
    return [A, x, A @ x]


def _allen_cahn_step(u, un, c, dt):
    un = u.copy()  # Dirichlet ends kept
    ui = u[1:-1]
    un[1:-1] = ui + c * (u[:-2] - 2.0 * ui + u[2:]) + dt * (ui - ui ** 3)
    return [u, un, c, dt]


def _laplace_2d(u, out):
    out = np.zeros_like(u)
    out[1:-1, 1:-1] = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1]
    return [u, out]


def _heat_step_2d(u, un, c):
    un = u.copy()  # edges kept
    un[1:-1, 1:-1] += c * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1])
    return [u, un, c]


# name: (arguments from a generator, launch extent, NumPy reference giving every argument after the launch)
CASES = {
    "saxpy": (lambda r: [r.uniform(0.5, 1.5), r.uniform(-1, 1, 7), r.uniform(-1, 1, 7)], 7, _saxpy),
    "matvec": (lambda r: [r.uniform(-1, 1, (5, 3)), r.uniform(-1, 1, 3), r.uniform(-1, 1, 5)], 5, _matvec),
    "allen_cahn_step": (lambda r: [r.uniform(-1, 1, 9), r.uniform(-1, 1, 9), 0.3, 0.05], 9, _allen_cahn_step),
    "laplace_2d": (lambda r: [r.uniform(-1, 1, (5, 6)), r.uniform(-1, 1, (5, 6))], (5, 6), _laplace_2d),
    "heat_step_2d": (lambda r: [r.uniform(-1, 1, (5, 6)), r.uniform(-1, 1, (5, 6)), 0.2], (5, 6), _heat_step_2d),
}


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
    exported = {name: k for name, k in kernels.items() if name in library.__all__}
    assert sorted(exported) == sorted(CASES)
    assert sorted(set(kernels) - set(exported)) == sorted(RULE_KERNELS)  # launched only inside rules
    assert sorted(rules) == sorted(RULES)
    assert sorted(library.__all__) == sorted([*CASES, *RULES])
    assert all(getattr(library, name) is f for name, f in (exported | rules).items())
    assert all(RULE_KERNELS[name][0] is k for name, k in kernels.items() if name in RULE_KERNELS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_launch_matches_numpy(name, rng):
    make, dim, reference = CASES[name]
    args = make(rng)
    expected = reference(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    gk.launch(getattr(library, name), dim, *args)
    for k, (got, want) in enumerate(zip(args, expected)):
        if isinstance(got, np.ndarray):
            np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15, err_msg=f"{name}: argument {k}")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_gradient(name, rng):
    make, dim, _ = CASES[name]
    args = [gk.Duplicated(a, np.empty_like(a)) if isinstance(a, np.ndarray) else gk.Active(a) for a in make(rng)]
    report = check_grad(getattr(library, name), *args, dim=dim)
    assert report.ok, str(report)
    assert report.checked > 10
    assert report.dot_analytic != 0.0
