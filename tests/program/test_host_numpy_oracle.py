"""A brute-force oracle for host NumPy / math code inside a program (docs/host-code.md, "Verdicts, operation by
operation"): for each host operation, a small program in which the operation's result flows into a later launch
(a scalar argument, a fill value, an array's contents, a branch condition). Each row of `ROWS` states a verdict and
the test checks it against central differences in float64 of the whole program's output w.r.t. its Active input:

* GRAD: gradkern's gradient (reverse) and tangent (forward) match central differences: the derivative flows.
* REFUSED: a `gk.GradkernError` names the user's line (this file) and a spelling that works, before the launch
  that would lose the derivative runs (no shadow or output changed).
* CONST: an explicit "constant" spelling (`float(s)`, `s.item()`, ...): the gradient is that of the program with
  the value frozen where it was computed (central differences of that program agree), by the user's word.
* TYPE_ERROR: Python's own constructor refuses the object with a TypeError (`fractions.Fraction(s)` of a read's
  Active scalar, which is no `numbers.Rational`), before any launch, nothing changed: not silent, though not a
  gradkern message.
* OBJECT_ARRAY: NumPy made an object array holding a read's Active scalars where no gradkern code sees it (a list
  given to a NumPy function beside no tracked array); the launch taking it refuses its dtype (a `gk.LaunchError`
  naming the argument, not the line), before anything ran.
* NOT_SEEN: what gradkern cannot see (docs/host-code.md, "What is not seen"): the value is a constant as with
  CONST, though the user did not say so. These rows pin the known holes; closing one turns its row into
  REFUSED or GRAD.

A gradient that differs from the oracle without an error is the bug this file exists to catch. A new operation
is one line of `ROWS`."""

from __future__ import annotations

import copy
import ctypes
import decimal
import fractions
import math
import pickle
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from math import sqrt as bound_sqrt  # bound before any program records: not seen
from typing import Any

import numpy as np
import pytest

import gradkern as gk

N = 6
GRAD, REFUSED, CONST, NOT_SEEN = "gradient", "refused", "constant", "not seen"
TYPE_ERROR = "Python's TypeError"  # Python refuses the object before any launch (a read's Active scalar: session 57)
OBJECT_ARRAY = "refused by the launch"  # NumPy made an object array of Active scalars; the launch refuses its dtype


@gk.kernel
def square(u, v):
    i = gk.tid()
    v[i] = u[i] * u[i]


@gk.kernel
def scale_into(u, x, c):
    i = gk.tid()
    x[i] = c * u[i]


@gk.kernel
def mul_into(u, a, x):
    i = gk.tid()
    x[i] = a[i] * u[i]


@gk.kernel
def energy(x, E):
    i = gk.tid()
    gk.atomic_add(E, 0, x[i] * x[i])


@dataclass(frozen=True)
class Row:
    name: str  # the host spelling, as the docs' table shows it
    flow: str  # how its result reaches a launch: scalar | array | fill | branch
    op: Callable[[Any, Any], Any]  # (u, v) -> the value; u is the Active input, v = u*u written by a launch
    verdict: str


def _ptr(v):  # a launched array's memory read through ctypes
    return np.ctypeslib.as_array(v.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), (N,))


def _copyto_fresh(u, v):
    w = np.zeros_like(u)
    np.copyto(w, v)
    return w


def _assign_fresh(u, v):
    w = np.zeros_like(u)
    w[...] = v
    return w


def _copyto_launched(u, v):
    np.copyto(v, u)
    return v


def _assign_launched(u, v):
    v[...] = 2.0 * u
    return v


def _slice_launched(u, v):
    v[1:4] = 0.5
    return v


def _out_launched(u, v):
    np.multiply(u, 2.0, out=v)
    return v


def _flat_fresh(u, v):
    w = np.zeros_like(u)
    w.flat[:] = v
    return w


def _flat_launched(u, v):
    v.flat[1] = 0.5
    return v


def _out_fresh(u, v):
    w = np.zeros_like(u)
    np.multiply(v, 2.0, out=w)
    return w


# NumPy writing into its first argument without out= (session 57: these left w a constant, silently)
_INTO = [0, 2, 2, 5]  # a repeated index: np.add.at's unbuffered sum


def _add_at_fresh(u, v):
    w = np.zeros_like(u)
    np.add.at(w, _INTO, v[:4])
    return w


def _put_fresh(u, v):
    w = np.zeros_like(u)
    np.put(w, _INTO[1:], v[:3])
    return w


def _put_method_fresh(u, v):
    w = np.zeros_like(u)
    w.put(_INTO[1:], v[:3])
    return w


def _place_fresh(u, v):
    w = np.zeros_like(u)
    np.place(w, np.arange(N) % 2 == 0, v[:3])
    return w


def _putmask_fresh(u, v):
    w = np.zeros_like(u)
    np.putmask(w, np.arange(N) % 2 == 0, v)
    return w


def _put_along_axis_fresh(u, v):
    w = np.zeros_like(u)
    np.put_along_axis(w, np.array([0, 2, 5]), v[:3], axis=0)
    return w


def _sort_launched(u, v):
    v.sort()
    return v


s = lambda v: v.sum()  # noqa: E731  a scalar host code reduced from a launched array
t = lambda v: v[3]  # noqa: E731  an element read


ROWS = [
    # -- math of a derived scalar
    Row("math.sqrt(s)", "scalar", lambda u, v: math.sqrt(s(v)), GRAD),  # session 57: a launch
    Row("math.exp(t)", "scalar", lambda u, v: math.exp(t(v)), GRAD),  # session 57: a launch
    Row("math.log(s)", "scalar", lambda u, v: math.log(s(v)), GRAD),  # session 57: a launch
    Row("math.sin(t)", "scalar", lambda u, v: math.sin(t(v)), GRAD),  # session 57: a launch
    Row("math.pow(s, 2)", "scalar", lambda u, v: math.pow(s(v), 2), REFUSED),
    Row("math.fsum([v[0], v[1]])", "scalar", lambda u, v: math.fsum([v[0], v[1]]), REFUSED),
    Row("math.hypot(v[0], v[1])", "scalar", lambda u, v: math.hypot(v[0], v[1]), GRAD),  # session 57: a launch
    Row("math.fsum(x for x in v)", "scalar", lambda u, v: math.fsum(x for x in v), REFUSED),
    Row("math.fsum(v)", "scalar", lambda u, v: math.fsum(v), REFUSED),
    Row("math.sqrt(v[3, ...])", "scalar", lambda u, v: math.sqrt(v[3, ...]), REFUSED),  # a 0-d view
    Row("math.prod([v[0], v[1]])", "scalar", lambda u, v: math.prod([v[0], v[1]]), REFUSED),
    Row("math.sqrt(s) in a fill", "fill", lambda u, v: math.sqrt(s(v)), GRAD),  # session 57: a launch
    Row("math.sqrt(s) > 1 in a branch", "branch", lambda u, v: math.sqrt(s(v)) > 1.0, GRAD),
    Row("sqrt(s) after `from math import sqrt`", "scalar", lambda u, v: bound_sqrt(s(v)), NOT_SEEN),
    Row("math.floor(s)", "scalar", lambda u, v: math.floor(s(v)), GRAD),  # piecewise constant: d = 0
    # -- NumPy array constructors given a derived scalar
    Row("np.array([s] * N)", "array", lambda u, v: np.array([s(v)] * N), REFUSED),
    Row("np.array([[s] * N])[0]", "array", lambda u, v: np.array([[s(v)] * N])[0], REFUSED),
    Row("np.concatenate([[s], [t]] * 3)", "array", lambda u, v: np.concatenate([[s(v)], [t(v)]] * 3), REFUSED),
    Row("np.hstack([[s], [t]] * 3)", "array", lambda u, v: np.hstack([[s(v)], [t(v)]] * 3), REFUSED),
    Row("np.append([s] * 5, t)", "array", lambda u, v: np.append([s(v)] * 5, t(v)), REFUSED),
    Row("np.where(v > 0, [s] * N, 0.0)", "array", lambda u, v: np.where(v > 0, [s(v)] * N, 0.0),
        OBJECT_ARRAY),
    Row("np.asarray(s) * ones", "array", lambda u, v: np.asarray(s(v)) * np.ones(N), REFUSED),
    Row("np.full(N, s)", "array", lambda u, v: np.full(N, s(v)), REFUSED),
    Row("np.full(N, s, dtype=float)", "array", lambda u, v: np.full(N, s(v), dtype=float), REFUSED),
    Row("np.full_like(u, s)", "array", lambda u, v: np.full_like(u, s(v)), GRAD),  # session 58: a fill launch
    Row("np.ones(N) * s", "array", lambda u, v: np.ones(N) * s(v), GRAD),  # session 57: a read
    # -- explicit conversions and rounding
    Row("float(s)", "scalar", lambda u, v: float(s(v)), CONST),
    Row("s.item()", "scalar", lambda u, v: s(v).item(), CONST),
    Row("s.tolist()", "scalar", lambda u, v: s(v).tolist(), CONST),
    Row("np.float64(s)", "scalar", lambda u, v: np.float64(s(v)), CONST),
    Row("np.float32(s)", "scalar", lambda u, v: np.float32(s(v)), CONST),
    Row("type(s)(s)", "scalar", lambda u, v: type(s(v))(s(v)), CONST),  # a constructor, as np.float64(s)
    Row("int(s)", "scalar", lambda u, v: int(s(v)), GRAD),  # piecewise constant: d = 0 where it exists
    Row("round(s)", "scalar", lambda u, v: round(s(v)), GRAD),
    Row("round(s, 2)", "scalar", lambda u, v: round(s(v), 2), GRAD),
    Row("fractions.Fraction(s)", "scalar", lambda u, v: float(fractions.Fraction(s(v))), TYPE_ERROR),
    Row("decimal.Decimal(s)", "scalar", lambda u, v: float(decimal.Decimal(s(v))), TYPE_ERROR),
    Row("statistics.mean([v[0], v[1]])", "scalar", lambda u, v: statistics.mean([v[0], v[1]]), REFUSED),
    Row("statistics.fmean([v[0], v[1]])", "scalar", lambda u, v: statistics.fmean([v[0], v[1]]), REFUSED),
    # -- Python arithmetic and builtins on derived scalars
    Row("list comprehension + sum()", "scalar", lambda u, v: sum([2.0 * x for x in v[:3]]), GRAD),  # reads
    Row("sum([v[0], v[1]])", "scalar", lambda u, v: sum([v[0], v[1]]), GRAD),  # session 57: a read
    Row("max(v[0], v[1])", "scalar", lambda u, v: max(v[0], v[1]), GRAD),  # session 57: a read
    Row("min(s, 100.0)", "scalar", lambda u, v: min(s(v), 100.0), GRAD),  # session 57: a read
    Row("max(s, 100.0) (the constant chosen)", "scalar", lambda u, v: max(s(v), 100.0), GRAD),
    Row("abs(-s)", "scalar", lambda u, v: abs(-s(v)), GRAD),  # session 57: a read
    Row("divmod(s, 1.5)[1]", "scalar", lambda u, v: divmod(s(v), 1.5)[1], GRAD),  # session 57: a read
    Row("divmod(s, 1.5)[0]", "scalar", lambda u, v: divmod(s(v), 1.5)[0], GRAD),  # floor: d = 0
    Row("pow(s, 2)", "scalar", lambda u, v: pow(s(v), 2), GRAD),  # session 57: a read
    Row("s % 1.5", "scalar", lambda u, v: s(v) % 1.5, GRAD),  # session 57: a read
    Row("s // 1.5", "scalar", lambda u, v: s(v) // 1.5, GRAD),  # floor: d = 0
    Row("2.0 ** s", "scalar", lambda u, v: 2.0 ** s(v), GRAD),  # session 57: a read
    Row("s > 1 in a branch", "branch", lambda u, v: s(v) > 1.0, GRAD),
    Row("v[0] < v[1] in a branch", "branch", lambda u, v: v[0] < v[1], GRAD),
    # -- NumPy functions and ndarray methods of a launched array, on the host
    Row("np.linalg.norm(v)", "scalar", lambda u, v: np.linalg.norm(v), GRAD),  # session 57: a read
    Row("np.dot(v, u)", "scalar", lambda u, v: np.dot(v, u), GRAD),  # session 57: a read
    Row("v @ u", "scalar", lambda u, v: v @ u, GRAD),  # session 57: a read
    Row("v.sum()", "scalar", lambda u, v: v.sum(), GRAD),  # session 57: a read
    Row("v.mean()", "scalar", lambda u, v: v.mean(), GRAD),  # session 57: a read
    Row("v.max()", "scalar", lambda u, v: v.max(), GRAD),  # session 57: a read
    Row("np.median(v)", "scalar", lambda u, v: np.median(v), REFUSED),
    Row("v[3]", "scalar", lambda u, v: v[3], GRAD),  # session 57: a read
    Row("v[-1]", "scalar", lambda u, v: v[-1], GRAD),  # session 57: a read
    Row("v.flat[3]", "scalar", lambda u, v: v.flat[3], GRAD),  # session 58: a read (v[3]'s), refused before
    Row("v.take(3)", "scalar", lambda u, v: v.take(3), GRAD),  # session 58: a read; a silent constant before
    Row("v.flat.copy()[3]", "scalar", lambda u, v: v.flat.copy()[3], REFUSED),  # session 58: a constant before
    Row("np.array(v.flat)", "array", lambda u, v: np.array(v.flat), REFUSED),  # session 58: a constant before
    Row("v.item(3)", "scalar", lambda u, v: v.item(3), CONST),
    Row("v.tolist()[3]", "scalar", lambda u, v: v.tolist()[3], CONST),
    Row("np.frombuffer(v.tobytes())", "array", lambda u, v: np.frombuffer(v.tobytes()), REFUSED),
    Row("np.asarray(memoryview(v))", "array", lambda u, v: np.asarray(memoryview(v)), REFUSED),  # stricter
    Row("np.asarray(memoryview(v)) * 2.0", "array", lambda u, v: np.asarray(memoryview(v)) * 2.0, REFUSED),
    Row("ctypes pointer of v", "array", lambda u, v: _ptr(v).copy(), REFUSED),
    Row("v.copy()", "array", lambda u, v: v.copy(), GRAD),
    Row("np.copy(v)", "array", lambda u, v: np.copy(v), GRAD),
    Row("v.astype(np.float64)", "array", lambda u, v: v.astype(np.float64), GRAD),
    Row("v.reshape(N)", "array", lambda u, v: v.reshape(N), GRAD),
    Row("v.T", "array", lambda u, v: v.T, GRAD),
    Row("v.view()", "array", lambda u, v: v.view(), GRAD),
    Row("v.ravel()", "array", lambda u, v: v.ravel(), GRAD),
    Row("v[::-1][::-1]", "array", lambda u, v: v[::-1][::-1], GRAD),
    # elementwise arithmetic is a launch (program/hostufuncs.py, session 56; refused before)
    Row("v * 2.0", "array", lambda u, v: v * 2.0, GRAD),
    Row("np.sqrt(v)", "array", lambda u, v: np.sqrt(v), GRAD),
    # the kernel's %, and broadcasting (session 57: refused before, derived)
    Row("v % 1.5", "array", lambda u, v: v % 1.5, GRAD),
    Row("(v + np.ones((2, N)))[0]", "array", lambda u, v: (v + np.ones((2, N)))[0], GRAD),
    Row("v[[0, 1, 2, 3, 4, 5]]", "array", lambda u, v: v[[0, 1, 2, 3, 4, 5]], GRAD),  # a gather (hostgather.py)
    Row("v[[[0, 1, 2], [3, 4, 5]]][0]", "array", lambda u, v: v[[[0, 1, 2], [3, 4, 5]]][0], REFUSED),
    Row("np.asarray(v)", "array", lambda u, v: np.asarray(v), GRAD),  # a view: the launch takes v
    Row("np.asarray(v) * 2.0", "array", lambda u, v: np.asarray(v) * 2.0, GRAD),
    Row("np.asarray(v)[3]", "scalar", lambda u, v: np.asarray(v)[3], GRAD),  # session 57: a read
    # a copy by a launch, as v.copy() (session 62; refused before)
    Row("np.array(v)", "array", lambda u, v: np.array(v), GRAD),
    Row("np.array(v)[3]", "scalar", lambda u, v: np.array(v)[3], GRAD),
    Row("np.array(v, np.float64, ndmin=2)[0]", "array", lambda u, v: np.array(v, np.float64, ndmin=2)[0], GRAD),
    Row("copy.deepcopy(v)", "array", lambda u, v: copy.deepcopy(v), GRAD),
    Row("copy.deepcopy(v.sum())", "scalar", lambda u, v: copy.deepcopy(v.sum()), GRAD),
    Row("pickle of v.sum()", "scalar", lambda u, v: pickle.loads(pickle.dumps(v.sum())), REFUSED),
    Row("v.view(np.ndarray) * 2.0", "array", lambda u, v: v.view(np.ndarray) * 2.0, NOT_SEEN),
    Row("v[1:4] into a fresh array", "array", lambda u, v: np.concatenate([v[:1], v[1:4], v[4:]]), GRAD),
    Row("np.roll(v, 2)", "array", lambda u, v: np.roll(v, 2), GRAD),  # copies of views (program/hostshapes.py)
    Row("np.stack([v, u])[0]", "array", lambda u, v: np.stack([v, u])[0], GRAD),
    Row("np.pad(v, 1, mode='wrap')[1:]", "array", lambda u, v: np.pad(v, 1, mode="wrap")[1:], GRAD),
    Row("np.pad(v, 1, mode='linear_ramp')[1:]", "array", lambda u, v: np.pad(v, 1, mode="linear_ramp")[1:], REFUSED),
    # -- writes
    Row("np.copyto(w, v), w fresh", "array", _copyto_fresh, GRAD),
    Row("w[...] = v, w fresh", "array", _assign_fresh, GRAD),
    Row("np.multiply(v, 2, out=w), w fresh", "array", _out_fresh, GRAD),
    Row("w.flat[:] = v, w fresh", "array", _flat_fresh, GRAD),
    Row("v.flat[1] = 0.5, v launched", "array", _flat_launched, REFUSED),
    Row("np.copyto(v, u), v launched", "array", _copyto_launched, REFUSED),
    Row("v[...] = 2 * u, v launched", "array", _assign_launched, REFUSED),
    Row("v[1:4] = 0.5, v launched", "array", _slice_launched, REFUSED),
    Row("np.multiply(u, 2, out=v), v launched", "array", _out_launched, REFUSED),  # a host write (the guard)
    Row("np.add.at(w, idx, v), w fresh", "array", _add_at_fresh, REFUSED),  # w remembers v's origin
    Row("np.put(w, idx, v), w fresh", "array", _put_fresh, REFUSED),
    Row("w.put(idx, v), w fresh", "array", _put_method_fresh, REFUSED),
    Row("np.place(w, mask, v), w fresh", "array", _place_fresh, REFUSED),
    Row("np.putmask(w, mask, v), w fresh", "array", _putmask_fresh, REFUSED),
    Row("np.put_along_axis(w, idx, v, 0), w fresh", "array", _put_along_axis_fresh, REFUSED),
    Row("v.sort(), v launched", "array", _sort_launched, REFUSED),
]

_FROZEN: list = []  # CONST rows: the values the base point's run computed, which the bumped runs reuse
_MODE = ["off"]  # off | record | replay


def _freeze(x: Any) -> Any:
    if _MODE[0] == "record":
        _FROZEN.append(x)
    elif _MODE[0] == "replay":
        return _FROZEN[0]  # each run computes one value
    return x


def program(row: Row) -> Callable:
    """The program in which `row`'s operation's result reaches a launch, as `row.flow` says."""
    def prog(u, E):
        v = np.zeros_like(u)
        gk.launch(square, N, u, v)  # v is active: a launch wrote it from u
        x = np.zeros_like(u)
        if row.flow == "branch":
            gk.launch(scale_into, N, u, x, 2.0 if row.op(u, v) else 3.0)
        else:
            value = row.op(u, v)
            if row.verdict in (CONST, NOT_SEEN):
                value = _freeze(value)
            if row.flow == "scalar":
                gk.launch(scale_into, N, u, x, value)
            elif row.flow == "fill":
                w = np.zeros_like(u)
                w.fill(value)
                gk.launch(mul_into, N, u, w, x)
            else:
                gk.launch(mul_into, N, u, value, x)
        gk.launch(energy, N, x, E)
    return prog


def _run(row: Row, u: np.ndarray) -> float:
    """The program's output, run as plain NumPy and launches (no program recording)."""
    E = np.zeros(1)
    program(row)(u.copy(), E)
    return float(E[0])


def _oracle(row: Row, u: np.ndarray) -> np.ndarray:
    """Central differences in float64 of the program's output w.r.t. u (CONST rows: with the frozen value the
    base point computed)."""
    _FROZEN.clear()
    _MODE[0] = "record"
    try:
        _run(row, u)
        _MODE[0] = "replay"
        grad = np.empty(N)
        for i in range(N):
            h = 1e-6 * max(1.0, abs(u[i]))
            up, down = u.copy(), u.copy()
            up[i] += h
            down[i] -= h
            grad[i] = (_run(row, up) - _run(row, down)) / (2 * h)
        return grad
    finally:
        _MODE[0] = "off"
        _FROZEN.clear()


# central differences with h = 1e-6 on outputs of size ~1e3: truncation ~h^2 f''' ~1e-10 and round-off
# ~eps |E| / h ~ 2e-7 absolute, relative to gradients of size ~1e2..1e3: rtol 1e-6 covers both with margin
RTOL, ATOL = 1e-6, 1e-6


def _inputs(rng):
    u = rng.random(N) + 0.5  # every u_i in [0.5, 1.5): v = u^2, s = sum v in [1.5, 13.5); no branch is near
    return u


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_host_operation_flows_or_is_refused(rng, row, mode):
    u = _inputs(rng)
    direction = rng.random(N) + 0.1
    du = np.zeros(N) if mode == "reverse" else direction.copy()
    E, dE = np.zeros(1), (np.ones(1) if mode == "reverse" else np.zeros(1))
    before = [a.copy() for a in (u, du, E, dE)]
    call = lambda: gk.autodiff(program(row), gk.Duplicated(u, du), gk.Duplicated(E, dE),  # noqa: E731
                               mode=gk.Forward if mode == "forward" else gk.Reverse)
    if row.verdict in (TYPE_ERROR, OBJECT_ARRAY):
        with pytest.raises(TypeError if row.verdict == TYPE_ERROR else gk.LaunchError):
            call()
        for a, b in zip(before, (u, du, E, dE)):
            np.testing.assert_array_equal(a, b)  # raised before the launch: nothing changed
        return
    if row.verdict == REFUSED:
        with pytest.raises(gk.GradkernError) as info:
            call()
        msg = str(info.value)
        assert "test_host_numpy_oracle.py" in msg, msg  # names the user's line
        assert "gradkern/program" not in msg, msg
        assert any(fix in msg for fix in ("float(", "gk.Const", "kernel", "gk.copy")), msg  # a spelling that works
        for a, b in zip(before, (u, du, E, dE)):
            np.testing.assert_array_equal(a, b)  # refused before the launch: nothing changed
        return
    call()
    oracle = _oracle(row, u)
    if mode == "reverse":
        np.testing.assert_allclose(du, oracle, rtol=RTOL, atol=ATOL)
    else:
        np.testing.assert_allclose(dE[0], oracle @ direction, rtol=RTOL, atol=ATOL)


def outcome(row: Row, seed: int = 1234) -> str:
    """What gradkern does with `row` today (reverse mode), whatever the row expects: gradient, refused,
    constant (the gradient with the value frozen), LOST (a wrong gradient, no error) or a crash. Used to
    write docs/host-code.md's table."""
    rng = np.random.default_rng(seed)
    u = _inputs(rng)
    du, E, dE = np.zeros(N), np.zeros(1), np.ones(1)
    try:
        gk.autodiff(program(row), gk.Duplicated(u, du), gk.Duplicated(E, dE))
    except gk.GradkernError as e:
        return REFUSED + ("" if "test_host_numpy_oracle.py" in str(e) else " (no line)")
    except Exception as e:  # noqa: BLE001
        return f"crash: {type(e).__name__}: {str(e).splitlines()[0][:80]}"
    if np.allclose(du, _oracle(Row(row.name, row.flow, row.op, GRAD), u), rtol=RTOL, atol=ATOL):
        return GRAD
    if np.allclose(du, _oracle(Row(row.name, row.flow, row.op, CONST), u), rtol=RTOL, atol=ATOL):
        return CONST if row.verdict == CONST else "LOST (a constant, silently)"
    return "LOST (wrong gradient)"


@gk.kernel
def wave(u, x):
    i = gk.tid()
    x[i] = gk.sin(u[i]) * gk.exp(u[i]) + gk.sqrt(gk.abs(u[i])) + gk.tanh(u[i])


def test_kernels_compiled_inside_a_program_see_the_math_module_and_plain_calls_are_unchanged():
    """A kernel compiled at its first launch inside a program (its `_gk_math.sin` typed by Numba) and an @njit
    function compiled before it run with the wrappers in place; plain math and NumPy calls return what they always
    did; recording ends with the originals back, a refused program's too; and an @njit function compiled after
    calls math.fabs and np.concatenate (Numba declared the originals, not the wrappers: hostcalls._numba_ready;
    before it, a first compile inside a program left them untyped for the rest of the process)."""
    numba = pytest.importorskip("numba")

    @numba.njit
    def host_norm(a):
        return math.sqrt(np.sum(a * a))

    host_norm(np.array([3.0, 4.0]))  # compiled before the program: Numba cannot type a wrapper
    seen = []

    def prog(u, E):
        x = np.zeros_like(u)
        gk.launch(wave, N, u, x)
        gk.launch(energy, N, x, E)
        seen.append((host_norm(np.array([3.0, 4.0])), type(math.sqrt(2.0)), math.sqrt(2.0) == bound_sqrt(2.0),
                     type(np.array([1.0])), math.sqrt is bound_sqrt))

    u = np.linspace(0.5, 1.5, N)
    du, dE = np.zeros(N), np.ones(1)
    gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(np.zeros(1), dE))
    assert seen == [(5.0, float, True, np.ndarray, False)]
    assert math.sqrt is bound_sqrt
    x = np.sin(u) * np.exp(u) + np.sqrt(u) + np.tanh(u)
    dx = np.cos(u) * np.exp(u) + np.sin(u) * np.exp(u) + 0.5 / np.sqrt(u) + 1 - np.tanh(u) ** 2
    np.testing.assert_allclose(du, 2 * x * dx, rtol=1e-12)  # E = sum x^2: a few roundings of float64 apart
    with pytest.raises(gk.ProgramError):
        gk.autodiff(program(next(r for r in ROWS if r.verdict == REFUSED)), gk.Duplicated(u, np.zeros(N)),
                    gk.Duplicated(np.zeros(1), np.ones(1)))
    assert math.sqrt is bound_sqrt and type(np.array) is type(np.empty)

    @numba.njit
    def after(a):  # Numba declared math.fabs and np.concatenate, not their wrappers (hostcalls._numba_ready)
        return math.fabs(a[0]) + np.concatenate((np.array([a[1]]), a))[0] + np.full(2, 1.0)[0]
    assert after(np.array([-2.0, 9.0])) == 12.0


def test_an_njit_helper_first_compiled_while_a_program_records_types_the_wrapped_functions():
    """A user's @njit helper first called from a program's host code compiles while `math.sqrt`, `math.pow`,
    `np.full` and `np.concatenate` are wrappers: Numba types each wrapper as the function it wraps
    (hostcalls._numba_ready), and `a[1] ** 2` compiles Numba's own `int_power`, which reads `math.pow`. Before,
    both were TypingErrors (the second also in a checkpointed loop's recomputed segment, compiled outside any
    launch). The helper's value is the plain function's; the gradient is u^2 + u^3's."""
    numba = pytest.importorskip("numba")

    @numba.njit
    def helper(a):
        return math.sqrt(np.sum(a * a)) + math.pow(a[0], 2.0) + np.full(2, 1.0)[0] + np.concatenate((a, a))[0] \
            + a[1] ** 2

    @gk.kernel
    def cubic(u, x):
        i = gk.tid()
        x[i] = u[i] * u[i] + u[i] ** 3

    seen = []

    def prog(u, x):
        gk.launch(cubic, N, u, x)
        seen.append(helper(np.arange(3.0) + 1))

    u = np.linspace(0.5, 1.5, N)
    du, dx = np.zeros(N), np.ones(N)
    gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(np.zeros(N), dx))
    a = np.arange(3.0) + 1
    assert seen == [helper.py_func(a)]
    np.testing.assert_allclose(du, 2 * u + 3 * u ** 2, rtol=1e-14)  # two roundings of float64 apart
