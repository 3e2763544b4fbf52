"""The interpreter's float32 elementary functions (ir/interp.py): the float64 value rounded once to float32, the
correctly rounded result C's expf gives on the compiled backends. Found porting PolyBench's deriche in float32
(session 53): NumPy's float32 exp(-0.25) is an ulp low, and the filter's recurrences carried it to 11 ulps between
the interpreter and Numba/hostcuda, the interpreter the farther from the float64 value."""

import math

import numpy as np

import gradkern as gk


@gk.kernel
def functions32(x, out):
    i = gk.tid()
    v = x[i]
    out[i, 0] = math.exp(-v)
    out[i, 1] = math.log(v)
    out[i, 2] = math.sin(v)
    out[i, 3] = math.cos(v)
    out[i, 4] = math.tanh(v)
    out[i, 5] = math.atan2(v, 0.75)


REFERENCE = (lambda v: math.exp(-v), math.log, math.sin, math.cos, math.tanh, lambda v: math.atan2(v, 0.75))


def test_float32_functions_are_the_float64_values_rounded_once():
    x = np.array([0.25, 0.1, 0.5, 0.9, 1.7, 3.3], np.float32)
    out = np.zeros((6, 6), np.float32)
    gk.launch(functions32, 6, x, out, backend="interp")
    want = np.array([[f(float(v)) for f in REFERENCE] for v in x]).astype(np.float32)
    np.testing.assert_array_equal(out, want)
    assert np.exp(-np.float32(0.25)) != out[0, 0]  # NumPy's own float32 loop: the ulp this fixed


def test_exp_of_float32_matches_the_compiled_backend_bit_for_bit():
    x = np.random.default_rng(0).uniform(0.05, 3.0, 64).astype(np.float32)
    runs = []
    for backend in ("interp", "cpu"):
        out = np.zeros((64, 6), np.float32)
        gk.launch(functions32, 64, x, out, backend=backend)
        runs.append(out[:, 0])
    np.testing.assert_array_equal(runs[0], runs[1])  # glibc's expf is correctly rounded
