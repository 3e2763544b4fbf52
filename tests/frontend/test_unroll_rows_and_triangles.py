"""Two things porting real kernels needed of frontend/unroll.py in session 51 (docs/kernel-language.md, "Fourth
round"): a loop whose variable bounds an inner loop over a local array is unrolled with it (the CUDA samples'
binomialOptions sweeps its tree backwards, `for i in range(N, 0, -1): for j in range(i): call[j] = ...`, refused
because `range(i)` did not fold), and a row of a constant table unpacks into names (S3D's reactions,
`sa, sb, sc, sd = RXN[r]`, refused as "a row of constant table, not a number")."""

import numpy as np
import pytest

import gradkern as gk
from gradkern.testing import check_grad

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


N = 5


@gk.kernel
def triangular_sweep(v, out, p):
    t = gk.tid()
    c = gk.local((N + 1,), gk.float64)
    for i in range(N + 1):
        c[i] = v[t, i]
    for i in range(N, 0, -1):
        for j in range(i):
            c[j] = p * c[j + 1] + (1.0 - p) * c[j] * c[j]
    out[t] = c[0]


@gk.kernel
def lower_triangle_sum(v, out):
    """A table-free triangle: the inner loop starts at the outer variable."""
    t = gk.tid()
    c = gk.local((4,), gk.float64)
    for i in range(4):
        c[i] = v[t, i]
    s = 0.0
    for i in range(4):
        for j in range(i, 4):
            s += c[i] * c[j]
    out[t] = s


def _sweep(v, p):
    out = np.empty(v.shape[0])
    for t in range(v.shape[0]):
        c = v[t].copy()
        for i in range(N, 0, -1):
            for j in range(i):
                c[j] = p * c[j + 1] + (1.0 - p) * c[j] * c[j]
        out[t] = c[0]
    return out


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_the_sweep_runs_and_matches_numpy(backend, rng):
    v = rng.uniform(0.2, 0.8, (3, N + 1))
    out = np.zeros(3)
    gk.launch(triangular_sweep, 3, v, out, 0.4, backend=backend)
    # the same operations in the same order: the NumPy loop's float64 arithmetic, bit for bit
    np.testing.assert_array_equal(out, _sweep(v, 0.4))
    tri = np.zeros(3)
    gk.launch(lower_triangle_sum, 3, v[:, :4], tri, backend=backend)
    want = [sum(r[i] * r[j] for i in range(4) for j in range(i, 4)) for r in v[:, :4]]
    np.testing.assert_allclose(tri, want, rtol=1e-15, atol=0)  # summation order differs only by the comprehension


def test_the_sweep_differentiates(rng):
    v = rng.uniform(0.2, 0.8, (3, N + 1))
    report = check_grad(triangular_sweep, gk.Duplicated(v, np.zeros_like(v)), gk.Duplicated(np.zeros(3), np.zeros(3)),
                        gk.Active(0.4), dim=3)
    assert report.ok and report.checked > 10 and report.dot_analytic != 0.0, str(report)


def test_a_runtime_outer_bound_still_names_the_loop():
    """The outer loop must unroll too, so its own bounds must be constants: the error names it."""
    with pytest.raises(gk.KernelSyntaxError, match=r"range\(n, 0, -1\) is not"):
        @gk.kernel
        def runtime_outer(v, out, n):
            t = gk.tid()
            c = gk.local((4,), gk.float64)
            for i in range(n, 0, -1):
                for j in range(i):
                    c[j] = c[j] + v[t]
            out[t] = c[0]


RXN = ((0, 1, 2), (2, 0, 1), (1, 2, 0))
RAGGED = ((0, 1), (2, 0, 1))


W = (0.5, 2.0, -1.0)


@gk.kernel
def unpack_rows(x, out):
    t = gk.tid()
    s = 0.0
    for r in range(3):
        a, b, c = RXN[r]
        s += x[t, a] * x[t, b] - W[c] * x[t, c]
    out[t] = s


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_a_table_row_unpacks(backend, rng):
    x = rng.uniform(0.2, 0.8, (4, 3))
    out = np.zeros(4)
    gk.launch(unpack_rows, 4, x, out, backend=backend)
    want = sum(x[:, a] * x[:, b] - W[c] * x[:, c] for a, b, c in RXN)  # the names index a table too
    np.testing.assert_allclose(out, want, rtol=1e-15, atol=0)  # three terms, the same order: an ulp at most
    report = check_grad(unpack_rows, gk.Duplicated(x, np.zeros_like(x)), gk.Duplicated(out, np.zeros(4)), dim=4)
    assert report.ok and report.checked > 5, str(report)


def test_rows_of_another_length_are_still_refused():
    """Ragged rows, or rows longer than the names: the row is not unpacked and the error says it is a row."""
    with pytest.raises(gk.KernelSyntaxError, match=r"'RAGGED\[r\]' is a row of constant table"):
        @gk.kernel
        def ragged(x, out):
            t = gk.tid()
            for r in range(2):
                a, b = RAGGED[r]
                out[t] += x[t, a] + x[t, b]
    with pytest.raises(gk.KernelSyntaxError, match=r"'RXN\[r\]' is a row of constant table"):
        @gk.kernel
        def too_few_names(x, out):
            t = gk.tid()
            for r in range(2):
                a, b = RXN[r]
                out[t] += x[t, a] + x[t, b]
