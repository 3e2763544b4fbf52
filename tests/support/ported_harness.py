"""The checks the ported-kernel rounds share (tests/library/test_ported_hpc3.py, test_ported_hpc4.py): a case's
primal against its NumPy reference and across backends. A case is (name, kernel, args, dim, options, reference);
`programs` names the cases whose kernel is a program (called, not launched)."""

import numpy as np
import pytest

import gradkern as gk
from gradkern import backends
from support.ported import assert_backends_agree, primal_values


def run_case(name, kernel, dim, values, backend, programs):
    if name in programs:
        kernel(*values, backend=backend)
    else:
        gk.launch(kernel, dim, *values, backend=backend)


def assert_primal_matches_numpy(case, programs, backend="cpu"):
    """The backend's arrays (Numba's unless told; the interpreter's costs no compile) within 1e-12 of the largest
    value of the reference's (the callers' docstrings say why); integer arrays equal."""
    name, kernel, args, dim, _, reference = case
    values = primal_values(args)
    want = reference(primal_values(args))
    run_case(name, kernel, dim, values, backend, programs)
    assert want
    for k, expected in want.items():
        got = values[k]
        scale = float(np.max(np.abs(expected)))
        assert scale > 0.0, (name, k)
        if np.asarray(expected).dtype.kind == "f":
            np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * scale, err_msg=f"{name} argument {k}")
        else:
            np.testing.assert_array_equal(got, expected, err_msg=f"{name} argument {k}")


def assert_primal_agrees_across_backends(case, programs):
    """Numba, the interpreter and hostcuda (where g++ is) within assert_backends_agree's 8-ulp bound."""
    name, kernel, args, dim, _, _ = case
    runs = {}
    for backend in ("cpu", "interp", "hostcuda"):
        values = primal_values(args)
        try:
            run_case(name, kernel, dim, values, backend, programs)
        except gk.BackendUnavailableError:
            continue
        runs[backend] = values
    assert_backends_agree(name, runs)


def numba_sampled(names, sample):
    """`names` (plain or pytest.param) as parameters of a Numba-backend twin: those in `sample` run in CI, the
    others are marked `full` (docs/testing.md "Test time": each port's check runs in CI on the interpreter)."""
    plain = [p.values[0] if hasattr(p, "values") else p for p in names]
    assert set(sample) <= set(plain), set(sample) - set(plain)
    return [n if n in sample else pytest.param(n, marks=pytest.mark.full) for n in plain]


def on_interpreter(monkeypatch):
    """This test's NumPy launches on the interpreter (docs/testing.md "Test time"), undone after it. Through the
    backends' default, not $GRADKERN_BACKEND: the variable is read once per process (backends/__init__.py), so
    `monkeypatch.setenv("GRADKERN_BACKEND", "interp")` (sessions 52-53) switched nothing in a worker whose earlier
    tests had launched (CI's: these checks compiled their Numba kernels), and where it was the process's first read
    it made every later test there run on the interpreter, the Numba twins included."""
    monkeypatch.setattr(backends, "_default", ["interp"])
