"""Index-set splitting (transforms/split.py): the interior body has the
boundary tests folded, and the split launch gives exactly what the unsplit
body gives (the interpreter ignores the split) for every launch shape."""

import numpy as np
import pytest

import gradkern as gk
from gradkern.kernels import allen_cahn_step, heat_step_2d, laplace_2d
from gradkern.testing import check_grad


@gk.kernel
def guards(u, out, m):
    i, j = gk.tid()
    if i < out.shape[0] and j < out.shape[1]:
        v = u[i, j]
        if j == 2:
            v = -v
        if 0 < j < m - 1:
            v += u[i, j - 1] * u[i, j + 1]
        elif j + 1 >= m:
            v *= 3.0
        out[i, j] = v if j != 0 else 7.0


@gk.kernel
def shifted(a, b):
    i = gk.tid()
    if i - 1 >= 0 and i + 2 <= a.shape[0] - 1:
        b[i] = a[i - 1] + a[i + 2]
    else:
        b[i] = a[i]


def run(kernel, dim, *args, backend):
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    gk.launch(kernel, dim, *args, backend=backend)
    return args


@pytest.mark.parametrize("shape", [(1, 1), (3, 1), (2, 2), (4, 3), (5, 8), (6, 17)])
def test_split_launch_equals_interpreter(shape, rng):
    u = rng.uniform(0.5, 1.5, shape)
    for kernel, args in ((laplace_2d, (u, np.zeros(shape))), (heat_step_2d, (u, np.zeros(shape), 0.2))):
        got, want = run(kernel, shape, *args, backend="cpu"), run(kernel, shape, *args, backend="interp")
        np.testing.assert_allclose(got[1], want[1], rtol=1e-15, atol=0)
    n = shape[0] * shape[1]
    x = rng.uniform(0.5, 1.5, n)
    for kernel, args in ((allen_cahn_step, (x, np.zeros(n), 0.1, 0.01)), (shifted, (x, np.zeros(n)))):
        got, want = run(kernel, n, *args, backend="cpu"), run(kernel, n, *args, backend="interp")
        np.testing.assert_allclose(got[1], want[1], rtol=1e-15, atol=0)


@pytest.mark.parametrize("launch, m", [((4, 9), 6), ((3, 12), 12), ((2, 5), 2), ((5, 3), 9)])
def test_guards_mid_domain_constants_and_launches_larger_than_arrays(launch, m, rng):
    u = rng.uniform(0.5, 1.5, (4, 10))
    out = np.zeros((3, 9))
    got, want = run(guards, launch, u, out, m, backend="cpu"), run(guards, launch, u, out, m, backend="interp")
    np.testing.assert_array_equal(got[1], want[1])
    assert "_gkb_lo" in gk.inspect(guards, u, out, m, dim=launch).source


@pytest.mark.slow
def test_interior_of_a_gradient_kernel_keeps_its_reverse_sweep(rng):
    x = np.ones((6, 5))
    src = gk.inspect(heat_step_2d, gk.Duplicated(x, x.copy()), gk.Duplicated(x.copy(), x.copy()),
                     gk.Active(0.1), mode=gk.Reverse).source
    interior = src.split("range(1, _gkb_hi):")[1].split("for _gkb_t1 in range(_gkb_hi")[0]  # literal start
    assert "_gk_d_un[i, j] = 0.0" in interior and "j == 0" not in interior
    u = rng.uniform(0.5, 1.5, (6, 5))
    assert check_grad(heat_step_2d, gk.Duplicated(u, np.zeros_like(u)), gk.Duplicated(u.copy(), np.zeros_like(u)),
                      gk.Active(0.1)).ok


def test_no_split_without_boundary_tests():
    from gradkern.kernels import saxpy
    assert "_gkb_lo" not in gk.inspect(saxpy, 2.0, np.ones(4), np.ones(4)).source
