"""gk.autodiff of a kernel whose plan is the fused kernel alone prints (and loads) neither the augmented primal
nor the split reverse (docs/compile-time.md, finding 13): they are made on the prepared call's first use of
its split runs (gk.autodiff_thunk, a program's recording), and then give the fused call's gradient."""

import numpy as np

import gradkern as gk
from gradkern import pipeline


@gk.kernel
def _lazy_split_square(x, y, c):
    i = gk.tid()
    y[i] = c * x[i] * x[i] + gk.sin(x[i])


def test_fused_autodiff_prints_no_split_role(monkeypatch):
    printed = []
    generate = pipeline._generate

    def logged(request, k, role, *args, **kwargs):
        printed.append(role)
        return generate(request, k, role, *args, **kwargs)
    monkeypatch.setattr(pipeline, "_generate", logged)
    rng = np.random.default_rng(3)
    x, y = rng.uniform(0.5, 1.5, 32), np.zeros(32)
    dx, dy = np.zeros(32), rng.uniform(0.5, 1.5, 32)
    got = gk.autodiff(_lazy_split_square, gk.Duplicated(x, dx), gk.Duplicated(y, dy.copy()), gk.Active(0.7))
    assert "fused" in printed and "augmented_primal" not in printed and "reverse" not in printed, printed
    # d/dx (c x^2 + sin x) = 2 c x + cos x; d/dc = x^2, each times the seed dy
    np.testing.assert_allclose(dx, dy * (2 * 0.7 * x + np.cos(x)), rtol=1e-13)  # a few roundings apart
    np.testing.assert_allclose(got[2], np.sum(dy * x * x), rtol=1e-13)

    forward, reverse = gk.autodiff_thunk(_lazy_split_square, gk.Duplicated, gk.Duplicated, gk.Active)
    dx2 = np.zeros(32)
    args = (gk.Duplicated(x, dx2), gk.Duplicated(y, dy.copy()), gk.Active(0.7))
    tape = forward(*args)
    got2 = reverse(*args, tape)
    assert "augmented_primal" in printed and "reverse" in printed, printed
    np.testing.assert_allclose(dx2, dx, rtol=1e-13)
    np.testing.assert_allclose(got2[2], got[2], rtol=1e-13)
