"""The CPU printer's index arithmetic casts each value once (docs/compile-time.md, finding 15): a literal operand of
a wrapping + - * is a module-level uint64 constant, a name with an unsigned copy reads it, and an index that is a
wrapping op reads its uint64 value; the results are the interpreter's, wrap-around included."""

import re

import numpy as np

import gradkern as gk

BIG = 9223372036854775807  # 2**63 - 1: i + BIG + 1 + BIG + 1 wraps back to i


@gk.kernel
def shifted(u, out):
    i = gk.tid()
    k = i + 2
    j = i + BIG + 1 + BIG + 1  # == i after two wraps of int64
    m = k - (i + 1)  # 1: the inner op's value must stay grouped
    out[i] = u[k - 1] * u[k - 2] + u[k] - u[j] * 3.0 + u[i + 1] * u[i - 1 + 1] + u[k - (i + m)] * u[(i + m) * m - 1] \
        + u[k] * 0.5


def _args(n=9):
    rng = np.random.default_rng(3)
    return rng.uniform(0.5, 1.5, n + 2), np.zeros(n)


def test_no_call_casts_a_literal_or_a_wrapping_result():
    u, out = _args()
    source = gk.inspect(shifted, u, out, dim=out.size).source
    assert not re.search(r"(?<!= )_gk_uint64\(\d+\)", source), "a literal operand is cast by a call"
    assert "_gk_uint64(_gk_int64(" not in source, "an index casts a wrapping op's result back"
    assert "_gkb_U1 = _gk_uint64(1)" in source and "_gkb_U2 = _gk_uint64(2)" in source
    assert re.search(r"u\[\(_gkb_u_k - _gkb_U1\)\]", source), source


def test_the_compiled_index_arithmetic_is_the_interpreters():
    u, out = _args()
    want = out.copy()
    gk.launch(shifted, out.size, u, want, backend="interp")
    gk.launch(shifted, out.size, u, out, backend="cpu")
    np.testing.assert_array_equal(out, want)  # the same operations on the same values: bit for bit
    i = np.arange(out.size)
    np.testing.assert_allclose(want, u[i + 1] * u[i] + u[i + 2] - u[i] * 3.0 + u[i + 1] * u[i]
                               + u[1] * u[i] + u[i + 2] * 0.5, rtol=1e-15)
