"""`A[i][j]` on an array parameter is `A[i, j]` (session 51: C and CUDA code index `float A[N][M]` that way, and
so does NumPy code; it was refused as "only array parameters can be indexed, not 'A[i]'", though A is one).
frontend/lower.py, docs/kernel-language.md."""

import numpy as np
import pytest

import gradkern as gk
from gradkern.testing import check_grad


@gk.kernel
def chained(A, B, out):
    i, j = gk.tid()
    out[i][j] = A[i][j] * B[i][j][1] + A[i][0]
    out[i][j] += B[i][j][0]


@gk.kernel
def tupled(A, B, out):
    i, j = gk.tid()
    out[i, j] = A[i, j] * B[i, j, 1] + A[i, 0]
    out[i, j] += B[i, j, 0]


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_chained_indices_are_the_tuple_index(backend, rng):
    A, B = rng.uniform(0.5, 1.5, (3, 4)), rng.uniform(0.5, 1.5, (3, 4, 2))
    got, want = np.zeros((3, 4)), np.zeros((3, 4))
    gk.launch(chained, (3, 4), A, B, got, backend=backend)
    gk.launch(tupled, (3, 4), A, B, want, backend=backend)
    np.testing.assert_array_equal(got, want)  # the same IR: identical bits
    assert str(chained.ir).replace("chained", "tupled") == str(tupled.ir)
    np.testing.assert_array_equal(want, A * B[..., 1] + A[:, :1] + B[..., 0])  # each one product and two sums


def test_chained_indices_differentiate(rng):
    A, B = rng.uniform(0.5, 1.5, (3, 4)), rng.uniform(0.5, 1.5, (3, 4, 2))
    report = check_grad(chained, gk.Duplicated(A, np.zeros_like(A)), gk.Duplicated(B, np.zeros_like(B)),
                        gk.Duplicated(np.zeros((3, 4)), np.zeros((3, 4))), dim=(3, 4))
    assert report.ok and report.checked > 20 and report.dot_analytic != 0.0, str(report)


def test_too_many_chained_indices_name_the_array():
    @gk.kernel
    def one_d(x, out):
        i = gk.tid()
        out[i] = x[i][0]
    with pytest.raises(gk.GradkernError, match="'x'"):
        gk.launch(one_d, 3, np.ones(3), np.zeros(3))
