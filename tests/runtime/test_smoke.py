import numpy as np

import gradkern as gk
from gradkern.kernels import allen_cahn_step, saxpy


def test_saxpy_matches_numpy(rng):
    x = rng.standard_normal(1000)
    y = rng.standard_normal(1000)
    expected = 2.5 * x + y
    gk.launch(saxpy, 1000, 2.5, x, y)
    np.testing.assert_allclose(y, expected, rtol=1e-15)


def test_allen_cahn_step_float32_stays_float32(rng):
    u = rng.uniform(-1, 1, 257).astype(np.float32)
    un = np.zeros_like(u)
    gk.launch(allen_cahn_step, u.size, u, un, 0.2, 0.01)
    ref = u.copy()
    ref[1:-1] = u[1:-1] + np.float32(0.2) * (u[:-2] - 2 * u[1:-1] + u[2:]) + np.float32(0.01) * (u[1:-1] - u[1:-1] ** 3)
    assert un.dtype == np.float32
    np.testing.assert_allclose(un, ref, rtol=1e-5, atol=1e-6)
