"""A @gk.func returning several values, unpacked by the caller (`px, py = tv_flux(u, y, x)`), as Warp's functions
and C's out-parameters return them (session 52: porting a total-variation step, it was refused with "tuples are
not supported" and a hint about constant tables). frontend/multi_returns.py, docs/kernel-language.md."""

import math

import numpy as np
import pytest

import gradkern as gk
from gradkern.testing import check_grad


@gk.func
def normalised(u, i, eps):
    g = u[i + 1] - u[i]
    norm = math.sqrt(eps + g * g)
    if g > 1.0:
        return g / norm, norm, 1.0  # an early return of three values
    return g / norm, norm, g


@gk.func
def first_above(u, level):
    """The first index whose value is above `level`, and that value (a return inside a loop)."""
    for k in range(u.shape[0]):
        if u[k] > level:
            return k, u[k]
    return -1, 0.0


@gk.kernel
def unpacks(u, out, eps, level):
    i = gk.tid()
    a, b, c = normalised(u, i, eps)
    k, v = first_above(u, level)
    out[i] = a * b + c + v * (k + 1)


def _want(u, eps, level):
    g = np.diff(u)
    norm = np.sqrt(eps + g * g)
    k = int(np.argmax(u > level))
    return g / norm * norm + np.where(g > 1.0, 1.0, g) + u[k] * (k + 1)


@pytest.mark.parametrize("backend", ["interp", "cpu", "hostcuda"])
def test_values_unpack_on_every_backend(backend, rng):
    u = rng.uniform(0.5, 2.8, 8)
    out = np.zeros(7)
    try:
        gk.launch(unpacks, 7, u, out, 0.1, 1.5, backend=backend)
    except gk.BackendUnavailableError:
        pytest.skip("no g++ for hostcuda")
    # the same formulas in NumPy: a few ulps of rounding per operation
    np.testing.assert_allclose(out, _want(u, 0.1, 1.5), rtol=1e-14)


def test_values_differentiate_in_both_modes(rng):
    u = rng.uniform(0.5, 2.8, 8)
    report = check_grad(unpacks, gk.Duplicated(u, np.zeros(8)), gk.Duplicated(np.zeros(7), np.zeros(7)),
                        gk.Active(0.1), 1.5, dim=7)
    assert report.ok and report.checked > 8 and report.dot_analytic != 0.0, str(report)


def _refusal(body, decorator=gk.kernel):
    """The message of the KernelSyntaxError that decorating `body` raises (lowering runs then)."""
    with pytest.raises(gk.KernelSyntaxError) as err:
        decorator(body)
    text = str(err.value)
    assert "gradkern/" not in text  # the user's line, not gradkern's
    return text


@gk.func
def pair(x):
    return x, 2.0 * x


@gk.func
def single(x):
    return 2.0 * x


def test_counts_that_differ_name_the_function_and_the_fix():
    def ragged(x):
        if x > 0.0:
            return x, x
        return x
    text = _refusal(ragged, gk.func)
    assert "'ragged' returns 1 or 2 values on different paths" in text and "same number" in text


def test_several_values_used_as_one_say_how_to_unpack():
    def as_one(u):
        i = gk.tid()
        u[i] = pair(u[i])

    def into_three(u):
        i = gk.tid()
        a, b, c = pair(u[i])
        u[i] = a + b + c
    text = _refusal(as_one)
    assert "returns 2 values, used as one" in text and "v0, v1 = pair(...)" in text
    assert "returns 2 values, unpacked into 3 names" in _refusal(into_three)


def test_one_value_unpacked_into_two_names_is_refused():
    def into_two(u):
        i = gk.tid()
        a, b = single(u[i])
        u[i] = a + b
    assert "returns 1 value, unpacked into 2 names" in _refusal(into_two)
