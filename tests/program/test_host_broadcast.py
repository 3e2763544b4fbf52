"""Elementwise NumPy between launches, session 57 (program/hostufuncs.py, program/ufunctable.py; docs/host-code.md
"Elementwise NumPy"): broadcasting, mixed float dtypes and integer operands by NumPy's rules, the ufuncs added
(remainder, fmod, the roundings, cbrt, array exponents, ...), `where=` with `out=` and `dtype=`. Each gradient is
check_grad's (central differences of the whole program in float64, the dot-product test, forward tangents) on the
interpreter; the primal values against NumPy's bit for bit where NumPy's rules have signs and NaNs to get right."""

import numpy as np
import pytest
from support.ported_harness import on_interpreter

import gradkern as gk
from gradkern.testing import check_grad
from program.test_host_ufuncs import N, _inputs, energy, program, square


def _into_fresh_where(u, v, w, c):
    r = np.zeros_like(u)  # fresh: where the mask is False it keeps its zeros
    np.multiply(v, c, out=r, where=u > 1.0)
    return r


def _into_w_where(u, v, w, c):
    np.multiply(v, 3.0, out=w, where=u > 1.0)  # w (Duplicated, no launch took it) keeps its values elsewhere
    return w


def _into_fresh_broadcast(u, v, w, c):
    r, q = np.ones((2, 3)), np.full((2, 3), 0.5)
    r *= v[:3]  # in place, a row broadcast over r's rows (r is now an array a launch took: no more host writes)
    np.add(r, w[3:].reshape(1, 3), out=q, where=np.array([True, False, True]))  # the mask broadcast over rows
    return q.ravel()


def _strong_scalar(u, v, w, c):
    return v * np.float64(1.5) + np.int64(2)  # NumPy scalars: strong, cast to the loop's float64


def _float_list(u, v, w, c):
    r = np.zeros(N)
    r[0:2] = [1.5, 2.5]  # constants into an array nothing active reached: NumPy's write, no derivative
    r[2:] = v[2:]  # a copy launch
    return r


def _active_list(u, v, w, c):
    r = np.zeros(N)
    r[1:4] = [c, 2.0, c * c]  # Active scalars: one launch that takes them
    return r + v


def _assigned_broadcast(u, v, w, c):
    """Assignments that broadcast (session 63; refused before, or an internal AliasingError for a broadcast view):
    a row into every row, a keepdims column, NumPy's broadcast view of an active array."""
    r = np.zeros((3, N))
    r[...] = v  # a row into every row: the derivative into v sums the three
    q = np.empty((2, 3))
    q[:, :] = v.reshape(2, 3).max(axis=1, keepdims=True)
    p = np.zeros((2, N))
    p[1:] = np.broadcast_to(w * c, (1, N))
    return r.sum(axis=0) + np.tile(q.ravel(), 1) * w + p[1]


# (name, op(u, v, w, c)): u, w Duplicated in [0.5, 1.5), v = u * u by a launch, c Active 0.7 (test_host_ufuncs);
# no operand within 1e-3 of a jump of floor, %, sign or a kink: central differences with h = 1e-6 see one piece
CASES = [
    # broadcasting: the derivative into the broadcast operand is the sum over the broadcast axes
    ("(2, 3) + row", lambda u, v, w, c: (v.reshape(2, 3) + w[:3]).ravel()),
    ("(2, 1) * (1, 3)", lambda u, v, w, c: (v[:2].reshape(2, 1) * w[3:].reshape(1, 3)).ravel()),
    ("u[:, None] * w[None, :]", lambda u, v, w, c: (u[:, None] * w[None, :]).ravel()),
    ("0-d array * v", lambda u, v, w, c: w[2:3].reshape(()) * v),
    ("negative strides", lambda u, v, w, c: (v.reshape(2, 3)[:, ::-1] - w[::-2] * c).ravel()),
    ("column of a transposed view", lambda u, v, w, c: (v.reshape(3, 2).T / w[::3, None]).ravel()),
    ("np.where broadcast", lambda u, v, w, c: np.where(u[:3] > 1.0, v.reshape(2, 3), w[3:]).ravel()),
    ("in place and where= broadcast", _into_fresh_broadcast),
    # dtypes: integer operands are constants converted as NumPy converts them
    ("v * arange(int64)", lambda u, v, w, c: v * np.arange(1, N + 1)),
    ("np.float64 and np.int64 scalars", _strong_scalar),
    # ufuncs
    ("v % 0.3", lambda u, v, w, c: v % 0.3),
    ("np.remainder(1.0 - 2 v, -w)", lambda u, v, w, c: np.remainder(1.0 - 2 * v, -w)),
    ("np.fmod(1.0 - 2 v, w)", lambda u, v, w, c: np.fmod(1.0 - 2 * v, w)),
    ("roundings", lambda u, v, w, c: np.floor(3 * v) + np.ceil(3 * w) + np.trunc(2 - 3 * v) + np.rint(3 * w) * v),
    ("np.sign(u - 1) * v", lambda u, v, w, c: np.sign(u - 1.0) * v),
    ("np.cbrt(v - 2)", lambda u, v, w, c: np.cbrt(v - 2.0)),
    ("v ** w", lambda u, v, w, c: v ** w),
    ("2.0 ** v + c ** w", lambda u, v, w, c: 2.0 ** v + c ** w),
    ("np.exp2, np.log2, np.log10", lambda u, v, w, c: np.exp2(v) + np.log2(w) * np.log10(v)),
    ("reciprocal, deg2rad, rad2deg", lambda u, v, w, c: np.reciprocal(v) + np.deg2rad(w) * np.rad2deg(v)),
    ("np.fmax(v, w), np.fmin", lambda u, v, w, c: np.fmax(v, w) + 2.0 * np.fmin(w, 1.0)),
    ("np.copysign(v, u - 1)", lambda u, v, w, c: np.copysign(v, u - 1.0)),
    # where= with out=, dtype= naming the operands' type
    ("where= into a fresh array", _into_fresh_where),
    ("where= into w", _into_w_where),
    ("dtype=np.float64", lambda u, v, w, c: np.add(v, w, dtype=np.float64)),
    # lists and tuples assigned into fresh arrays
    ("w[0:2] = [1.5, 2.5]", _float_list),
    ("w[1:4] = [c, 2.0, c * c]", _active_list),
    ("assignments that broadcast", _assigned_broadcast),
    # a whole-array reduction of a broadcast is a launch and a read (program/hostreads.py), taken Active by the next
    ("reduction of a broadcast", lambda u, v, w, c: v * (v.reshape(2, 3) * w[:3]).sum()),
    # along an axis: a launch (program/hostaxes.py, session 62; a derived array, refused, before)
    ("reduction of a broadcast along an axis", lambda u, v, w, c: v * (v.reshape(2, 3) * w[:3]).sum(axis=0)[1]),
]


@pytest.mark.parametrize("name, op", CASES, ids=[c[0] for c in CASES])
def test_operation_is_differentiated(rng, monkeypatch, name, op):
    on_interpreter(monkeypatch)
    u, w = _inputs(rng)
    # check_grad's defaults: rtol 1e-5 for central differences with h ~ 1e-6 in float64 (gradkern/testing.py)
    check_grad(program(op), gk.Duplicated(u, np.zeros(N)), gk.Duplicated(w, np.zeros(N)), gk.Active(0.7),
               gk.Duplicated(np.zeros(1), np.zeros(1)))


def test_values_are_numpys_signs_nans_and_dtypes(rng, monkeypatch):
    """The launches compute what the NumPy lines compute, bit for bit: % and np.remainder take the divisor's sign
    (fmod the dividend's), -0.0 where NumPy gives it, NaN for a zero divisor; the roundings at halves; fmax/fmin
    the operand that is not NaN; broadcasting; a float32 array with a float64 one (float64, as NumPy), a
    np.float64 scalar or an int64 array, or with dtype=np.float32 (each operand cast first, as NumPy)."""
    on_interpreter(monkeypatch)
    a = np.array([-7.5, 7.5, -7.5, 7.5, 0.0, 6.0, 3.0, -3.0, 2.5, -2.5, 1.0, 5.0])
    b = np.array([2.0, -2.0, -2.0, 2.0, 3.0, -3.0, 1.5, 1.5, 0.7, -0.7, 0.0, np.nan])
    x32 = rng.random(12).astype(np.float32) + 0.5
    got = {}

    def prog(u, a, b, x32, out):
        v = np.zeros_like(u)
        gk.launch(square, 12, u, v)  # v = u * u: active
        z = v * 0.0  # an active array of zeros: z + a is a, computed by a launch
        p, q = z + a, z + b
        with np.errstate(invalid="ignore", divide="ignore"):  # NumPy's warnings for the zero divisor
            got["r"] = [p % q, np.remainder(p, q), np.fmod(p, q), np.floor(p / 2), np.ceil(p / 2), np.trunc(p / 2),
                        np.rint(p / 2), np.sign(p), np.fmax(p, q), np.fmin(q, p), p.reshape(3, 4) + q[:4],
                        p[:, None] * q[None, ::-1], (z + x32) * 1.5, (z + x32) + np.float64(1.1),
                        np.multiply(v, p, dtype=np.float32), (z + x32) * np.arange(12)]
        gk.copy(out, got["r"][0] + v)

    u = rng.random(12) + 0.5
    gk.autodiff(prog, gk.Duplicated(u, np.zeros(12)), gk.Const(a), gk.Const(b), gk.Const(x32),
                gk.Duplicated(np.zeros(12), np.ones(12)))
    v = u * u
    a, b = v * 0.0 + a, v * 0.0 + b  # as the program's (0.0 + -0.0 is 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        want = [a % b, np.remainder(a, b), np.fmod(a, b), np.floor(a / 2), np.ceil(a / 2), np.trunc(a / 2),
                np.rint(a / 2), np.sign(a), np.fmax(a, b), np.fmin(b, a), a.reshape(3, 4) + b[:4],
                a[:, None] * b[None, ::-1], x32.astype(np.float64) * 1.5, x32.astype(np.float64) + np.float64(1.1),
                np.multiply(v, a, dtype=np.float32), x32.astype(np.float64) * np.arange(12)]
    for k, (r, w) in enumerate(zip(got["r"], want, strict=True)):
        assert r.dtype == w.dtype, k
        np.testing.assert_array_equal(np.asarray(r), w, err_msg=str(k))  # NaN in the same places, the rest exact
        number = ~np.isnan(w)  # (a NaN's sign bit is the C library's)
        assert (np.signbit(np.asarray(r)[number]) == np.signbit(w[number])).all(), k  # -0.0 where NumPy gives it


def test_float32_and_mixed_dtypes(rng, monkeypatch):
    """float32 arrays broadcast (a float32 launch) and mixed with a float64 array (float64, as NumPy)."""
    on_interpreter(monkeypatch)
    u, w = (x.astype(np.float32) for x in _inputs(rng))

    def op(u, v, w, c):
        r = (v.reshape(2, 3) * w[:3] + v.reshape(2, 3) % 0.3).ravel()
        assert r.dtype == u.dtype  # (check_grad runs the program in float64 too)
        return r + np.cbrt(w) * np.linspace(0.5, 1.5, N)  # a float64 constant array: float64, as NumPy
    # check_grad's float32 defaults (rtol 2e-3: float32 rounding against a float64 run, gradkern/testing.py)
    check_grad(program(op), gk.Duplicated(u, np.zeros(N, np.float32)), gk.Duplicated(w, np.zeros(N, np.float32)),
               gk.Active(0.7), gk.Duplicated(np.zeros(1), np.zeros(1)))


def test_dtype_cast_passes_the_derivative(rng, monkeypatch):
    """dtype=np.float32 on float64 operands: each operand rounded to float32 (as NumPy), the derivative passed
    through the casts: d/du sum (u^2 * w)^2 in float32 arithmetic."""
    on_interpreter(monkeypatch)
    u, w = _inputs(rng)
    du, dw = np.zeros(N), np.zeros(N)
    gk.autodiff(program(lambda u, v, w, c: np.multiply(v, w, dtype=np.float32)), gk.Duplicated(u, du),
                gk.Duplicated(w, dw), gk.Active(0.7), gk.Duplicated(np.zeros(1, np.float32), np.ones(1, np.float32)))
    r = u * u * w
    # float32 products and sums against float64 ones: ~1e-7 relative, 1e-6 leaves margin
    np.testing.assert_allclose(du, 2 * r * 2 * u * w, rtol=1e-6)
    np.testing.assert_allclose(dw, 2 * r * u * u, rtol=1e-6)


def test_broadcast_on_numba_sums_the_broadcast_axes_deterministically(rng):
    """On Numba the reverse of a row broadcast over a (4, 5) array reads the row once per thread row: the pipeline
    gives it per-chunk private partial shadows reduced after the loop (atomics on a GPU), so the row's derivative
    is the sum over rows and a second run gives the same bits."""
    x, row = rng.random((4, 5)) + 0.5, rng.random(5) + 0.5
    runs = []
    for _ in range(2):
        dx, drow = np.zeros((4, 5)), np.zeros(5)

        def prog(x, row, E):
            gk.launch(energy, 20, (x * row).reshape(-1), E)
        gk.autodiff(prog, gk.Duplicated(x.copy(), dx), gk.Duplicated(row, drow),
                    gk.Duplicated(np.zeros(1), np.ones(1)))
        runs.append(drow)
    np.testing.assert_allclose(dx, 2 * x * row * row, rtol=1e-14)  # d/dx sum (x row)^2, exact but for rounding
    np.testing.assert_allclose(runs[0], (2 * x * x * row).sum(axis=0), rtol=1e-14)
    np.testing.assert_array_equal(runs[0], runs[1])


def _list_too_long(u, v, w, c):
    r = np.zeros(N)
    r[0:2] = [c, 1.0, 2.0]
    return r


def _list_into_launched(u, v, w, c):
    v[0:2] = (c, 1.0)
    return v


# what stays refused: the user's line named, nothing changed (test_host_ufuncs.py has the others)
REFUSALS = [
    ("a list of another length", _list_too_long, "r[0:2] = [c, 1.0, 2.0]"),
    ("a list into a launched array", _list_into_launched, "v[0:2] = (c, 1.0)"),  # the host-write rule
]


@pytest.mark.parametrize("name, op, what", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_what_stays_refused(rng, monkeypatch, name, op, what):
    on_interpreter(monkeypatch)
    u, w = _inputs(rng)
    du, dw, dE = rng.random(N), rng.random(N), np.ones(1)
    before = [a.copy() for a in (u, w, du, dw, dE)]
    with pytest.raises(gk.ProgramError) as info:
        gk.autodiff(program(op), gk.Duplicated(u, du), gk.Duplicated(w, dw), gk.Active(0.7),
                    gk.Duplicated(np.zeros(1), dE))
    msg = str(info.value)
    assert "test_host_broadcast.py" in msg and f"`{what}" in msg, msg  # the user's line, the operation or the line
    assert "gradkern/program" not in msg, msg
    for a, b in zip(before, (u, w, du, dw, dE)):
        np.testing.assert_array_equal(a, b)  # nothing changed


def test_broadcast_in_a_checkpointed_loop_replays_its_launches(rng, monkeypatch):
    """Inside a checkpointed loop's step a broadcast, a remainder and where= are launches a recomputed step makes
    again: the gradient is the plain loop's, and central differences agree. (The state is 2-D: a reshaped view of
    a step's temporary passed to gk.copy is refused by the loop as a kept copy, as before this session.)"""
    from support.ported_loops import checkpointed, plain

    on_interpreter(monkeypatch)

    def stepper(loop):
        def prog(u, row, c, E):
            def step(t):
                q = np.zeros((2, 3))
                np.multiply(u, row, out=q, where=np.array([[True], [False]]))  # row 1 of q keeps its 0
                gk.copy(u, 0.9 * u + c * q % 0.5)
            loop(step, 4)
            gk.launch(energy, N, u.reshape(-1), E)
        return prog
    u, row = rng.random((2, 3)) + 0.5, rng.random(3) + 0.5
    got = []
    for loop in (checkpointed, plain):
        du, drow = np.zeros((2, 3)), np.zeros(3)
        g = gk.autodiff(stepper(loop), gk.Duplicated(u.copy(), du), gk.Duplicated(row, drow), gk.Active(0.3),
                        gk.Duplicated(np.zeros(1), np.ones(1)))
        got.append((du, drow, g[2]))
    for a, b in zip(*got, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-13)  # the same launches in the same order
    check_grad(stepper(checkpointed), gk.Duplicated(u, np.zeros((2, 3))), gk.Duplicated(row, np.zeros(3)),
               gk.Active(0.3), gk.Duplicated(np.zeros(1), np.zeros(1)))
