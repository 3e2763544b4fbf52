"""A @gk.func called as a statement (kernel-language.md, "Expressions and statements"): C's `__device__ void`
helpers and Warp's functions that only write, ported as written. Found porting session 53's kernels: the call was
refused with "returns no value"."""

import numpy as np
import pytest
from support.ported_harness import on_interpreter

import gradkern as gk
from gradkern.testing import check_grad


@gk.func
def deposit(a, i, v):
    gk.atomic_add(a, i, v)


@gk.func
def store_square(a, i, v):
    if v < 0.0:
        a[i] = 0.0
        return
    a[i] = v * v


@gk.func
def doubled(a, i):
    a[i] *= 2.0
    return a[i]


@gk.kernel
def scatter_pairs(x, pairs, squares):
    i = gk.tid()
    deposit(pairs, i // 2, x[i])
    store_square(squares, i, x[i])
    doubled(squares, i)  # a value-returning function as a statement: its value dropped, its write kept


def test_a_statement_call_writes_arrays_on_every_backend():
    x = np.array([0.3, -0.4, 1.2, 0.7, -0.1, 0.9])
    for backend in ("interp", "cpu"):
        pairs, squares = np.zeros(3), np.zeros(6)
        gk.launch(scatter_pairs, 6, x, pairs, squares, backend=backend)
        np.testing.assert_array_equal(pairs, x.reshape(3, 2).sum(1))
        np.testing.assert_array_equal(squares, 2.0 * np.where(x < 0.0, 0.0, x * x))


def test_a_statement_call_is_differentiated(monkeypatch):
    on_interpreter(monkeypatch)
    rng = np.random.default_rng(3)
    x = rng.uniform(0.2, 1.5, 6) * np.array([1, -1, 1, 1, -1, 1])  # both branches, away from the kink at 0
    report = check_grad(scatter_pairs, gk.Duplicated(x, np.zeros(6)), gk.Duplicated(np.zeros(3), np.zeros(3)),
                        gk.Duplicated(np.zeros(6), np.zeros(6)), dim=6)
    assert report.ok and report.checked >= 20 and report.dot_analytic != 0.0, str(report)


@gk.func
def fill_one(a, i):
    a[i] = 1.0


def test_using_a_function_that_returns_nothing_as_a_value_is_refused_with_the_statement_spelling():
    with pytest.raises(gk.KernelSyntaxError, match="returns no value, and its call is used as one") as e:
        @gk.kernel
        def uses_no_value(a):
            i = gk.tid()
            v = fill_one(a, i)
            a[i] = v
    assert "fill_one(...)" in str(e.value) and "test_device_statements.py" in str(e.value)
    assert "gradkern/frontend" not in str(e.value)
