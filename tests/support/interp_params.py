"""Parametrisations that check a transform's output on the interpreter in CI and on Numba for a sample, the other
Numba runs `full` (docs/testing.md, "Test time"): a backend only prints what the transforms made, and the Numba
compiles of these checks were most of their cost. The test takes the parameter `interp` and, when it is true, calls
`support.ported_harness.on_interpreter(monkeypatch)` before it launches."""

import pytest


def interp_and_numba(values, ids, interp, numba_in_ci):
    """pytest params (value, interp) for each of `values` (named by `ids`): (value, True), id "<id>-interp", where
    the id is in `interp`; always (value, False), id "<id>", marked `full` unless the id is in `numba_in_ci`."""
    assert set(interp) | set(numba_in_ci) == set(ids) and set(numba_in_ci) <= set(ids), "every id runs in CI"
    params = []
    for value, name in zip(values, ids):
        if name in interp:
            params.append(pytest.param(value, True, id=f"{name}-interp"))
        params.append(pytest.param(value, False, id=name, marks=() if name in numba_in_ci else [pytest.mark.full]))
    return params
