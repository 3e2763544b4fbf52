"""Assignment forms a porting user writes (session 49, found porting the bitonic compare-exchange, kmeans and lbm,
docs/kernel-language.md): an array-element swap `a[i], a[j] = a[j], a[i]`, a chained assignment
`a[i] = b[i] = v`, and `float("inf")` for C's INFINITY / FLT_MAX. Each was a KernelSyntaxError before.
Python's order is kept: the right-hand side is evaluated once, before any target is bound, and the targets are
bound from left to right, an element target's index evaluated when its turn comes."""

import types

import numpy as np
import pytest

import gradkern as gk
from gradkern.testing import check_grad

BACKENDS = ("interp", "cpu", "hostcuda")
LATTICE = types.SimpleNamespace(C=((0, 1), (1, 0)))  # a table kept in another module


def _run(kernel, dim, *args, backend):
    if backend == "hostcuda":
        pytest.importorskip("gradkern.backends.hostcuda")
    try:
        gk.launch(kernel, dim, *args, backend=backend)
    except gk.BackendUnavailableError:
        pytest.skip("g++ is missing")


@gk.kernel
def compare_exchange(a, j):
    i = gk.tid()
    p = i ^ j
    if p > i and a[i] > a[p]:
        a[i], a[p] = a[p], a[i]


@gk.kernel
def index_then_element(a, x, out):
    i = gk.tid()
    k = 0
    k, out[i, k] = 1, x[i]  # the element's index is read after k is bound: out[i, 1]
    a[i] = k * 1.0


@gk.kernel
def chained(x, y, z):
    i = gk.tid()
    y[i] = z[i] = t = x[i] * x[i]
    z[i] += t


@gk.kernel
def minimum_from_infinity(a, out, n):
    i = gk.tid()
    best = float("inf")
    worst = np.float32("-inf")
    for j in range(n):
        best = min(best, a[i, j])
        worst = max(worst, a[i, j])
    out[i] = best - worst


@pytest.mark.parametrize("backend", BACKENDS)
def test_element_swap_matches_python(backend, rng):
    a = rng.uniform(size=16)
    want = a.copy()
    for i in range(16):
        p = i ^ 2
        if p > i and want[i] > want[p]:
            want[i], want[p] = want[p], want[i]
    got = a.copy()
    _run(compare_exchange, 16, got, 2, backend=backend)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_targets_bound_left_to_right(backend, rng):
    a, x, out = np.zeros(4), rng.uniform(size=4), np.zeros((4, 2))
    _run(index_then_element, 4, a, x, out, backend=backend)
    np.testing.assert_array_equal(out[:, 1], x)
    np.testing.assert_array_equal(out[:, 0], 0.0)
    np.testing.assert_array_equal(a, 1.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_chained_assignment_evaluates_once(backend, rng):
    x, y, z = rng.uniform(0.5, 1.5, 5), np.zeros(5), np.zeros(5)
    _run(chained, 5, x, y, z, backend=backend)
    np.testing.assert_array_equal(y, x * x)
    np.testing.assert_array_equal(z, x * x + x * x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_of_inf(backend, rng):
    a, out = rng.uniform(size=(3, 4)), np.zeros(3)
    _run(minimum_from_infinity, 3, a, out, 4, backend=backend)
    np.testing.assert_array_equal(out, a.min(1) - a.max(1))


def test_swap_and_chain_derivatives(rng):
    """Both modes against central differences: the swap moves each element's derivative with its value."""
    a = rng.permutation(16) / 16.0 + 0.5  # distinct values: no comparison is tied at a +- h
    for kernel, args, dim in ((compare_exchange, (gk.Duplicated(a, np.zeros(16)), 2), 16),
                              (chained, tuple(gk.Duplicated(rng.uniform(0.5, 1.5, 6), np.zeros(6))
                                              for _ in range(3)), 6)):
        report = check_grad(kernel, *args, dim=dim)
        assert report.ok and report.checked >= 30, str(report)


def test_refusals_name_the_spelling():
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k(a):
            a[0], j = gk.tid()
            a[j] = 1.0
    assert "only names can be unpacked" in str(info.value) and "a[i], a[j] = a[j], a[i]" in str(info.value)

    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k2(a):
            i = gk.tid()
            n, m = t = 1, 2
            a[i] = n + m + t
    assert "one assignment per target" in str(info.value)

    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k3(a):
            i = gk.tid()
            a[i] = float("infinite")
    assert "is not a number" in str(info.value) and "math.inf" in str(info.value)

    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k4(a, ix, iy, w):
            p = gk.tid()
            gk.atomic_add(a, iy[p], ix[p], w[p])
    assert "gk.atomic_add(a, (i, j), v)" in str(info.value)

    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def k5(a):
            i = gk.tid()
            for q in range(2):
                a[i] += LATTICE.C[q][0]
    assert "through an attribute" in str(info.value) and "'C = LATTICE.C'" in str(info.value)
