"""gradkern.testing.check_grad: its relative step option (docs/testing.md)."""

import numpy as np
import pytest

import gradkern as gk
from gradkern.testing import check_grad


@gk.kernel
def fast_sine(x, y):
    i = gk.tid()
    y[i] = gk.sin(x[i] * 3.0e4)


def _small(seed):
    return np.random.default_rng(seed).uniform(1e-4, 2e-4, 16)  # inputs far below 1


def test_absolute_step_is_too_coarse_for_small_inputs():
    """h = 1e-6 moves sin's argument by 3e-2: truncation h^2 f'''/6f' ~ 1.5e-4 relative, 15x rtol."""
    report = check_grad(fast_sine, gk.Duplicated(_small(0), np.zeros(16)), gk.Duplicated(np.zeros(16), np.zeros(16)),
                        raise_on_failure=False)
    assert not report.ok


def test_relative_step_checks_small_inputs():
    """h = 1e-6 |x| moves the argument by ~5e-6: truncation ~4e-12 relative, rounding ~eps|f|/h ~ 1e-6
    absolute against derivatives of order 1e4: both far inside rtol 1e-5."""
    report = check_grad(fast_sine, gk.Duplicated(_small(0), np.zeros(16)), gk.Duplicated(np.zeros(16), np.zeros(16)),
                        relative=True)
    assert report.ok and report.checked >= 16


@gk.kernel
def cube(x, y):
    i = gk.tid()
    y[i] = x[i] * x[i] * x[i]


@pytest.mark.parametrize("mode", [gk.Reverse, gk.Forward])
def test_relative_step_with_zeros_and_mixed_magnitudes(mode):
    """A zero element takes the absolute step eps (a relative one would be 0); magnitudes from 1e-3 to 1e3."""
    x = np.array([0.0, 1e-3, -2e-2, 0.5, -3.0, 40.0, 1e3])
    report = check_grad(cube, gk.Duplicated(x, np.zeros(7)), gk.Duplicated(np.zeros(7), np.zeros(7)),
                        relative=True, mode=mode)
    assert report.ok
