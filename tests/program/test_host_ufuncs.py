"""Elementwise NumPy on a program's active arrays (program/hostufuncs.py, docs/host-code.md "Elementwise NumPy"):
each operation below is a launch of a generated kernel, differentiated by the pipeline. Each runs in a small
program whose output depends on the result through a later launch; `check_grad` compares the reverse gradient with
central differences of the whole program in float64 (per coordinate), runs the dot-product test and checks the
forward tangents. The interpreter runs them (docs/testing.md "Test time"); one runs on Numba. What stays refused
names the user's line, with nothing changed."""

import numpy as np
import pytest
from support.ported_harness import on_interpreter
from support.ported_loops import checkpointed, plain

import gradkern as gk
from gradkern.program import ufunctable
from gradkern.testing import check_grad

N = 6


@gk.kernel
def square(u, v):
    i = gk.tid()
    v[i] = u[i] * u[i]


@gk.kernel
def energy(x, E):
    i = gk.tid()
    gk.atomic_add(E, 0, x[i] * x[i])


def _inplace(f):
    def op(u, v, w, c):
        f(u, v, w, c)
        return w
    return op


def _into_w(u, v, w, c):
    np.multiply(u, v, out=w)  # w: a Duplicated argument, overwritten
    return w


# in place: into w, a Duplicated argument no launch has taken yet (into v or u, which a launch took, NumPy's write
# is a host write the tape cannot see: refused, REFUSALS below)
def _sin_in_place(u, v, w, c):
    np.sin(w, out=w)
    return w


def _slice_scaled(u, v, w, c):
    w[1:-1] *= 0.5  # a launch on the view, then `w[1:-1] = view`: its values onto themselves, no host write
    return w


def _shifted_sum(u, v, w, c):
    np.add(w[1:], w[:-1], out=w[1:])  # out overlaps the second input: NumPy reads both first (a copy here)
    return w


# (name, op(u, v, w, c) -> the array the next launch reads); u, w Duplicated in [0.5, 1.5), v = u * u written by a
# launch, c an Active scalar 0.7; no value is within 1e-3 of a kink (maximum, clip, abs, where): central differences
# with h = 1e-6 see one branch
CASES = [
    ("u + v", lambda u, v, w, c: u + v),
    ("v - 2.0", lambda u, v, w, c: v - 2.0),
    ("2.0 - v", lambda u, v, w, c: 2.0 - v),
    ("u * v", lambda u, v, w, c: u * v),
    ("3.0 * v", lambda u, v, w, c: 3.0 * v),
    ("v / u", lambda u, v, w, c: v / u),
    ("2.0 / v", lambda u, v, w, c: 2.0 / v),
    ("-v", lambda u, v, w, c: -v),
    ("abs(v - 1.0)", lambda u, v, w, c: abs(v - 1.0)),
    ("np.sqrt(v)", lambda u, v, w, c: np.sqrt(v)),
    ("np.exp(v)", lambda u, v, w, c: np.exp(v)),
    ("np.log(v)", lambda u, v, w, c: np.log(v)),
    ("np.sin(v)", lambda u, v, w, c: np.sin(v)),
    ("np.cos(v)", lambda u, v, w, c: np.cos(v)),
    ("np.tanh(v)", lambda u, v, w, c: np.tanh(v)),
    ("v ** 3", lambda u, v, w, c: v ** 3),
    ("v ** 0.5", lambda u, v, w, c: v ** 0.5),
    ("v ** c", lambda u, v, w, c: v ** c),
    ("np.maximum(v, 1.0)", lambda u, v, w, c: np.maximum(v, 1.0)),
    ("np.minimum(w, v)", lambda u, v, w, c: np.minimum(w, v)),
    ("np.where(u > 1.0, v, w)", lambda u, v, w, c: np.where(u > 1.0, v, w)),
    ("np.where(w > 1.0, c, v)", lambda u, v, w, c: np.where(w > 1.0, c, v)),
    ("np.clip(v, 0.8, 1.5)", lambda u, v, w, c: np.clip(v, 0.8, 1.5)),
    ("v.clip(0.8, None)", lambda u, v, w, c: v.clip(0.8, None)),
    ("c * v + w / c", lambda u, v, w, c: c * v + w / c),
    ("v * (u > 1.0)", lambda u, v, w, c: v * (u > 1.0)),  # a boolean mask: a constant array
    ("w *= 2.0", _inplace(lambda u, v, w, c: w.__imul__(2.0))),
    ("w += c * v", _inplace(lambda u, v, w, c: w.__iadd__(c * v))),
    ("np.clip(w, 0.8, 1.5, out=w)", _inplace(lambda u, v, w, c: np.clip(w, 0.8, 1.5, out=w))),
    ("np.multiply(u, v, out=w)", _into_w),
    ("np.sin(w, out=w)", _sin_in_place),
    ("w[1:-1] *= 0.5", _slice_scaled),
    ("u[1:] - u[:-1]", lambda u, v, w, c: u[1:] - u[:-1]),  # overlapping views: one copied first
    ("np.add(w[1:], w[:-1], out=w[1:])", _shifted_sum),
    ("u[::-1] * v", lambda u, v, w, c: u[::-1] * v),
    ("w[::2] + v[1::2]", lambda u, v, w, c: w[::2] + v[1::2]),
    ("2-D: v.reshape(2, 3) * w.reshape(3, 2).T", lambda u, v, w, c: (v.reshape(2, 3) * w.reshape(3, 2).T).ravel()),
    ("4-D: np.exp(v.reshape(1, 2, 1, 3))", lambda u, v, w, c: np.exp(v.reshape(1, 2, 1, 3)).reshape(-1)),
]


def program(op):
    def prog(u, w, c, E):
        v = np.zeros_like(u)
        gk.launch(square, N, u, v)  # v is active: a launch wrote it from u
        r = op(u, v, w, c)
        gk.launch(energy, r.shape[0], r, E)
    return prog


def _inputs(rng):
    return rng.random(N) + 0.5, rng.random(N) + 0.5


@pytest.mark.parametrize("name, op", CASES, ids=[c[0] for c in CASES])
def test_elementwise_operation_is_differentiated(rng, monkeypatch, name, op):
    on_interpreter(monkeypatch)
    u, w = _inputs(rng)
    # check_grad's defaults: rtol 1e-5 for central differences with h ~ 1e-6 in float64 (gradkern/testing.py)
    check_grad(program(op), gk.Duplicated(u, np.zeros(N)), gk.Duplicated(w, np.zeros(N)), gk.Active(0.7),
               gk.Duplicated(np.zeros(1), np.zeros(1)))


def test_float32_arrays_with_python_scalars(rng, monkeypatch):
    """float32 arrays and Python numbers (weak scalars: NumPy's result is float32) are a float32 launch."""
    on_interpreter(monkeypatch)
    u, w = (x.astype(np.float32) for x in _inputs(rng))

    def op(u, v, w, c):
        r = np.sqrt(v) * 0.5 + w / 3.0
        assert r.dtype == u.dtype  # (check_grad runs the program in float64 too)
        return r
    # check_grad's float32 defaults (rtol 2e-3: float32 rounding against a float64 run, gradkern/testing.py)
    check_grad(program(op), gk.Duplicated(u, np.zeros(N, np.float32)), gk.Duplicated(w, np.zeros(N, np.float32)),
               gk.Active(0.7), gk.Duplicated(np.zeros(1, np.float32), np.zeros(1, np.float32)))


def test_maximum_and_minimum_propagate_nan_as_numpy_does(rng, monkeypatch):
    """A NaN operand of np.maximum / np.minimum (or np.clip with a None bound) gives NaN in either position, as
    NumPy's do, where the kernel's max/min (Python's) return the first operand when the second is NaN."""
    on_interpreter(monkeypatch)
    u = rng.random(N) + 0.5
    q = rng.random(N) + 0.5
    q[[1, 4]] = np.nan  # a NaN second operand at 1 and 4, a NaN first operand at 2 and 4 (u * v below)
    mask = np.ones(N)
    mask[[2, 4]] = np.nan
    got = {}

    def prog(u, q, mask, out):
        v = np.zeros_like(u)
        gk.launch(square, N, u, v)
        a = v * mask
        got["r"] = [np.maximum(v, q), np.minimum(v, q), np.maximum(a, v), np.minimum(a, v),
                    np.clip(a, 0.6, None), np.clip(a, None, 0.6)]
        gk.copy(out, got["r"][0] + got["r"][1] + got["r"][2] + got["r"][3])

    gk.autodiff(prog, gk.Duplicated(u, np.zeros(N)), gk.Const(q), gk.Const(mask),
                gk.Duplicated(np.zeros(N), rng.random(N) + 0.5))
    v = u * u
    a = v * mask
    want = [np.maximum(v, q), np.minimum(v, q), np.maximum(a, v), np.minimum(a, v), np.clip(a, 0.6, None),
            np.clip(a, None, 0.6)]
    for r, w in zip(got["r"], want, strict=True):
        np.testing.assert_array_equal(np.asarray(r), w)  # NaN in the same places, the rest exact (no arithmetic)


def test_one_generated_kernel_per_operation_axes_and_operands(rng, monkeypatch):
    """The same operation on other values, or in another program, reuses its kernel; another operand pattern or
    number of axes is another kernel."""
    on_interpreter(monkeypatch)
    u, w = _inputs(rng)
    for _ in range(2):
        gk.autodiff(program(lambda u, v, w, c: u * v + 2.0 * w), gk.Duplicated(u.copy(), np.zeros(N)),
                    gk.Duplicated(w.copy(), np.zeros(N)), gk.Active(0.7), gk.Duplicated(np.zeros(1), np.ones(1)))
    keys = [k for k in ufunctable._KERNELS if k[0] == "multiply"]
    assert ("multiply", 1, "aa") in keys and ("multiply", 1, "sa") in keys
    assert ufunctable._kernel("multiply", 1, "aa") is ufunctable._kernel("multiply", 1, "aa")
    assert ufunctable._kernel("multiply", 2, "aa") is not ufunctable._kernel("multiply", 1, "aa")


def test_inactive_arithmetic_stays_numpy(rng, monkeypatch):
    """Outside a checkpointed loop, arithmetic on arrays no derivative reaches is NumPy's, as before: no launch,
    and its result stays writable on the host."""
    on_interpreter(monkeypatch)
    u, w = _inputs(rng)

    def prog(u, w, c, E):
        h = w * 2.0  # w Const: no launch
        h[0] = 1.0  # a host write into it: fine (a launch's result would be read-only)
        gk.launch(energy, N, h, E)
        gk.launch(energy, N, u, E)
    du = np.zeros(N)
    gk.autodiff(prog, gk.Duplicated(u, du), gk.Const(w), gk.Active(0.7), gk.Duplicated(np.zeros(1), np.ones(1)))
    np.testing.assert_allclose(du, 2 * u, rtol=1e-15)  # one launch's derivative, exact in float64


@gk.kernel
def rhs(u, f):
    i = gk.tid()
    f[i] = u[i] * (1.5 - u[i])


def _stepper(loop):
    def prog(u, c, E):
        def step(t):
            f = np.zeros_like(u)
            gk.launch(rhs, N, u, f)
            un = u + c * f  # a launch
            gk.copy(u, np.clip(un, 0.0, 2.0))
            gk.copy(u, u * 0.98)  # (np.multiply(u, 0.98, out=u) into the state a launch took: a refused host write)
            gk.copy(u, np.where(u > 0.9, u, 0.9 + 0.1 * u))  # (`u[...] = ` would be a host write: refused)
        loop(step, 5)
        gk.launch(energy, N, u, E)
    return prog


def test_inside_a_checkpointed_loop_recomputed_steps_replay_the_launches(rng, monkeypatch):
    """A recomputed step makes the launches its first forward made (inside a step every elementwise operation is a
    launch): the gradient is the plain loop's, and central differences agree."""
    on_interpreter(monkeypatch)
    u = rng.random(N) + 0.5
    got, want = [], []
    for loop, out in ((checkpointed, got), (plain, want)):
        du = np.zeros(N)
        g = gk.autodiff(_stepper(loop), gk.Duplicated(u.copy(), du), gk.Active(0.3),
                        gk.Duplicated(np.zeros(1), np.ones(1)))
        out += [du, g[1]]
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13)  # the same launches in the same order
    assert got[1] == pytest.approx(want[1], rel=1e-13)
    check_grad(_stepper(checkpointed), gk.Duplicated(u, np.zeros(N)), gk.Active(0.3),
               gk.Duplicated(np.zeros(1), np.zeros(1)))


def test_on_numba(rng):
    """One operation on Numba (the others run on the interpreter): u + dt * f into u, reverse against central
    differences."""
    u, w = _inputs(rng)

    def prog(u, w, E):
        u += 0.3 * w
        gk.launch(energy, N, u, E)
    du, dw = np.zeros(N), np.zeros(N)
    gk.autodiff(prog, gk.Duplicated(u.copy(), du), gk.Duplicated(w, dw), gk.Duplicated(np.zeros(1), np.ones(1)))
    x = u + 0.3 * w
    np.testing.assert_allclose(du, 2 * x, rtol=1e-14)  # d/du sum (u + 0.3 w)^2, exact but for rounding
    np.testing.assert_allclose(dw, 0.6 * x, rtol=1e-14)


def _refuse_derived_scalar(u, v, w, c):
    return v * np.sort(v).sum()  # of a derived array (v.sum() is a read since session 57: test_host_reductions.py)


def _refuse_derived_operand(u, v, w, c):
    return np.cumsum(v) * 2.0  # (v.astype(np.float32) + np.float64(2.0), refused until session 57, is a launch)


def _refuse_where_kw(u, v, w, c):
    return np.multiply(v, 2.0, where=u > 1.0)  # no out=: NumPy leaves the other elements uninitialised


def _refuse_inplace_remainder(u, v, w, c):
    v %= 2.0
    return v


def _refuse_broadcast_into_launched(u, v, w, c):
    v += w[:1]
    return v


def _refuse_inplace_into_launched(u, v, w, c):
    v *= 2.0
    return v


def _refuse_out_launched(u, v, w, c):
    np.sin(u, out=u)
    return u


# (broadcasting, `v % 1.5` and `v ** u` are launches since session 57: test_host_broadcast.py)
REFUSALS = [
    ("derived scalar", _refuse_derived_scalar, "np.add.reduce"),  # a reduction: its derivative is lost already
    ("derived operand", _refuse_derived_operand, "np.multiply"),  # (the message names np.cumsum's line)
    ("complex", lambda u, v, w, c: (v * (1.0 + 0.5j)).real, "np.multiply"),
    ("where= without out=", _refuse_where_kw, "np.multiply"),
    ("broadcast into a launched array", _refuse_broadcast_into_launched, "v += w[:1]"),
    ("in place remainder", _refuse_inplace_remainder, "v %= 2.0"),  # a host write into v, which a launch took
    # NumPy writing into an array a launch took, even an operation that fits: a host write the tape cannot see
    # (docs/host-code.md, "Elementwise NumPy"; the contract's host-write rule)
    ("in place into a launched array", _refuse_inplace_into_launched, "v *= 2.0"),
    ("out= a launched array", _refuse_out_launched, "np.sin(u, out=u)"),
]


@pytest.mark.parametrize("name, op, what", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_what_does_not_fit_stays_refused(rng, monkeypatch, name, op, what):
    on_interpreter(monkeypatch)
    u, w = _inputs(rng)
    du, dw, dE = rng.random(N), rng.random(N), np.ones(1)
    before = [a.copy() for a in (u, w, du, dw, dE)]
    with pytest.raises(gk.ProgramError) as info:
        gk.autodiff(program(op), gk.Duplicated(u, du), gk.Duplicated(w, dw), gk.Active(0.7),
                    gk.Duplicated(np.zeros(1), dE))
    msg = str(info.value)
    assert "test_host_ufuncs.py" in msg and f"`{what}" in msg, msg  # the user's line, the operation or the line
    assert "gradkern/program" not in msg, msg
    for a, b in zip(before, (u, w, du, dw, dE)):
        np.testing.assert_array_equal(a, b)  # nothing changed
