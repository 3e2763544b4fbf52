"""Bitwise operators on integers (issue 19 item 3): Python's semantics,
shifts by amounts outside [0, 64) defined (0 for <<, the sign for >>) where C
leaves them undefined, the same on the interpreter, Numba and (compiled by
nvcc in test_cuda.py) CUDA; floats refused by name; guards made of them keep
derivatives exact. Values against NumPy: the corpus's `bitwise` case."""

import numpy as np
import pytest

import gradkern as gk
from gradkern.testing import check_grad


@gk.kernel
def shifts(a, b, out):
    i = gk.tid()
    out[i, 0] = a[i] << b[i]
    out[i, 1] = a[i] >> b[i]
    out[i, 2] = a[i] & b[i] | ~a[i] ^ b[i]


def python_shift(a: int, b: int, left: bool) -> int:
    """The documented semantics, from Python's unbounded ints wrapped to int64."""
    if not 0 <= b < 64:
        return 0 if left else (-1 if a < 0 else 0)
    v = (a << b) if left else (a >> b)
    return (v + 2**63) % 2**64 - 2**63


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_shifts_at_every_edge(backend):
    a = np.array([1, -1, 5, -5, 2**62, -(2**62), 3, -3, 7, 7, 123456789], np.int64)
    b = np.array([0, 1, 63, 63, 1, 2, 64, 64, -1, 70, 17], np.int64)
    out = np.zeros((a.size, 3), np.int64)
    gk.launch(shifts, a.size, a, b, out, backend=backend)
    for k in range(a.size):
        x, s = int(a[k]), int(b[k])
        assert out[k, 0] == python_shift(x, s, True), (x, s)
        assert out[k, 1] == python_shift(x, s, False), (x, s)
        assert out[k, 2] == (x & s | ~x ^ s)


def test_int32_operands_compute_in_int64():
    a = np.array([2**30, -7], np.int32)
    b = np.array([4, 1], np.int32)
    out = np.zeros((2, 3), np.int64)
    gk.launch(shifts, 2, a, b, out)
    assert out[0, 0] == 2**34 and out[1, 1] == -4


@gk.kernel
def red_black(u, un, colour, c):
    i = gk.tid()
    n = u.shape[0]
    if ((i & 1) ^ colour) == 1 and i > 0 and i < n - 1:
        un[i] = u[i] + c * (u[i - 1] - 2.0 * u[i] + u[i + 1])
    else:
        un[i] = u[i] * ((i >> 1) & 3)


@pytest.mark.parametrize("colour", [0, 1])
def test_bitwise_guards_keep_derivatives_exact(colour, rng):
    n = 17
    report = check_grad(red_black, gk.Duplicated(rng.uniform(0.5, 1.5, n), np.zeros(n)),
                        gk.Duplicated(np.zeros(n), rng.uniform(-1, 1, n)), colour, gk.Active(0.3))
    assert report.ok and report.checked > 1


def test_float_operands_are_refused_by_name():
    @gk.kernel
    def float_and(x, y):
        i = gk.tid()
        y[i] = x[i] & 1

    x, y = np.ones(2), np.zeros(2)
    with pytest.raises(gk.KernelTypeError, match="the operator '&' takes integers, got float64"):
        gk.launch(float_and, 2, x, y)
    np.testing.assert_array_equal(y, 0)


def test_bool_operands_stay_bool_and_invert_is_pythons():
    @gk.kernel
    def bools(x, out):
        i = gk.tid()
        a = x[i] > 0.0
        b = i > 1
        out[i, 0] = (a & b) + 10 * (a | b) + 100 * (a ^ b)
        out[i, 1] = ~a

    x = np.array([1.0, -1.0, 1.0, -1.0])
    out = np.zeros((4, 2), np.int64)
    gk.launch(bools, 4, x, out)
    a, b = x > 0, np.arange(4) > 1
    np.testing.assert_array_equal(out[:, 0], (a & b) + 10 * (a | b) + 100 * (a ^ b))
    np.testing.assert_array_equal(out[:, 1], [~bool(v) for v in a])  # Python's ~True == -2, not NumPy's False


@pytest.mark.parametrize("mode", [gk.Reverse, gk.Forward])
def test_vector_mode_through_bitwise_guards(mode, rng):
    n = 15
    u = rng.uniform(0.5, 1.5, n)
    seeds = [(rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)) for _ in range(3)]
    du, dun = tuple(s[0].copy() for s in seeds), tuple(s[1].copy() for s in seeds)
    c = gk.Const(0.3)
    gk.autodiff(red_black, gk.BatchDuplicated(u.copy(), du), gk.BatchDuplicated(np.zeros(n), dun), 1, c, mode=mode)
    for lane, (su, sun) in enumerate(seeds):
        one_u, one_un = su.copy(), sun.copy()
        gk.autodiff(red_black, gk.Duplicated(u.copy(), one_u), gk.Duplicated(np.zeros(n), one_un), 1, c, mode=mode)
        np.testing.assert_array_equal(du[lane], one_u)
        np.testing.assert_array_equal(dun[lane], one_un)


@gk.kernel
def negated_thread_index(out, m):
    i = gk.tid()
    s = 0.0
    for p in range(m):  # a loop in the body: the launch runs the parallel entry, whose index is a prange's
        s += 1.0
    out[i, 0] = float(-i >> 1)
    out[i, 1] = float(~i)
    out[i, 2] = float(abs(-i)) + 0.0 * s


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_negated_and_inverted_thread_index_is_signed(backend):
    """Found by the language fuzzer (tests/fuzz/test_language_fuzz.py): on the CPU backend's parallel entry the
    thread index is a `prange` loop's unsigned index, and Numba negated and inverted it unsigned: -i >> 1 gave
    2**63 - 1 for i = 1, ~i 2**64 - 1 (backends/numba_syntax.py: NumbaSyntax.apply casts the operand)."""
    out = np.zeros((4, 3))
    gk.launch(negated_thread_index, 4, out, 2, backend=backend)
    i = np.arange(4)
    np.testing.assert_array_equal(out, np.stack([-i >> 1, ~i, i], axis=1).astype(float))
