"""Host writes of arrays that host code computed from an active array (derived: docs/host-code.md, "What stays a
constant") into a program's arrays. Session 63's NPBench probe found three dropping the derivative silently, all
from one slip (program/hostcode.py took the written value's plain view, which loses a TrackedArray's origin):
`out[...] = np.cumsum(u)` into a Duplicated output copied it as a constant (NPBench's covariance2, `np.cov`), the
same into a fresh temporary left the temporary unmarked so the next launch took it as a constant (conv2d_bias's
`np.sum(..., axis=(1, 2, 3))`), and doitgen's stacked product written back with `A[:] = ...` gave dA = 0. Each is
now refused before anything is written (into an active array) or marks the temporary derived, so the launch that
takes it is refused, as any derived array; primals and shadows unchanged. Each case gave a wrong gradient before
the fix, with no error.

The same probe's plain temporaries, which took active values unseen: a complex copy (`x.astype(complex)`, a
`np.zeros(n, complex)` written from an active array: NPBench's stockham_fft and contour_integral) and the ranges
and identities (`np.linspace`, `np.eye`) NumPy allocates without `np.empty`. Complex arrays are TrackedArrays now
(derived where they hold an active array's values; no launch takes one), and so are the constructors' results. Also
pinned: an Active scalar compared with an array is a mask (refused before), and an Active scalar times an empty
array is the empty array (refused before: NPBench's symm at i = 0)."""

import re

import numpy as np
import pytest
from support.ported_harness import on_interpreter

import gradkern as gk
from gradkern.testing import check_grad

from .test_host_shapes import weigh1


def into_output(u, out):
    out[...] = np.cumsum(u)


def into_output_slice(u, out):
    out[1:] = np.sort(u)[1:]


def into_output_copyto(u, out):
    np.copyto(out, np.cumsum(u))


def into_the_argument_itself(u, out):
    """NPBench's doitgen: a stacked product (3 or more axes: derived, docs/host-code.md "Matrix products") written
    back into its operand."""
    m = u.reshape(1, 1, 2, 3) @ np.ones((3, 3))
    u[:] = m.reshape(6)
    gk.launch(weigh1, u.shape, u, out[:1])


def into_a_temporary(u, out):
    """NPBench's conv2d_bias: the temporary's values computed on the host, then an elementwise launch."""
    t = np.empty(3)
    t[:] = np.sum(u.reshape(2, 3), axis=(0,)) * np.cumsum(u)[:3]
    gk.launch(weigh1, t.shape, t, out[:1])


def into_a_temporary_by_add_at(u, out):
    t = np.zeros(3)
    np.add.at(t, np.array([0, 2, 2]), np.cumsum(u)[:3])
    gk.launch(weigh1, t.shape, t, out[:1])


def into_a_temporary_by_index(u, out):
    t = np.zeros(3)
    t[[0, 2]] = np.cumsum(u)[:2]
    gk.launch(weigh1, t.shape, t, out[:1])


def into_a_temporary_by_mask(u, out):
    t = np.zeros(6)
    np.copyto(t, np.cumsum(u), where=np.arange(6) % 2 == 0)
    gk.launch(weigh1, t.shape, t, out[:1])


def a_complex_copy(u, out):
    z = u.astype(complex)
    out[...] = (z * z).real


def a_complex_temporary(u, out):
    w = np.zeros(6, dtype=complex)
    w += u * 1.0  # stockham_fft's `y[:] = x[:]`, as an in-place add (a plain write of an active array is refused)
    out[...] = np.fft.fft(w).real


def an_inverse_of_a_complex_temporary(u, out):
    """contour_integral: a complex matrix summed into on the host, then inverted."""
    t = np.zeros((6, 6), dtype=complex)
    t += np.diag(u) * (1.0 + 0.5j)
    out[...] = np.linalg.inv(t).real.diagonal()


def iterating_a_derived_complex_array(u, out):
    for z in u * 1j:
        pass
    out[...] = z.imag * np.ones(6)


def a_float16_copy(u, out):
    out[...] = u.astype(np.float16)


CASES = {f.__name__: f for f in (into_output, into_output_slice, into_output_copyto, into_the_argument_itself,
                                 into_a_temporary, into_a_temporary_by_add_at, into_a_temporary_by_index,
                                 into_a_temporary_by_mask, a_complex_copy, a_complex_temporary,
                                 an_inverse_of_a_complex_temporary, iterating_a_derived_complex_array,
                                 a_float16_copy)}


@pytest.mark.parametrize("name", list(CASES))
def test_a_derived_array_written_on_the_host_is_refused(monkeypatch, rng, name):
    on_interpreter(monkeypatch)
    u, du, out, dout = rng.random(6) + 0.5, rng.random(6), rng.random(6), rng.random(6)
    before = [a.copy() for a in (u, du, out, dout)]
    with pytest.raises(gk.ProgramError, match="computed from an active array") as e:
        gk.autodiff(CASES[name], gk.Duplicated(u, du), gk.Duplicated(out, dout))
    assert "test_host_writes_derived.py:" in str(e.value)  # the user's line
    for a, b in zip((u, du, out, dout), before):
        np.testing.assert_array_equal(a, b)


def test_a_derived_array_into_a_fresh_array_stays_a_constant_where_no_launch_takes_it(monkeypatch, rng):
    """Host code may still compute with derived arrays (a diagnostic printed, a host-side value for a branch):
    only a launch taking one, or a write into an active array, is refused."""
    on_interpreter(monkeypatch)
    seen = []

    def program(u, out):
        t = np.empty(6)
        t[:] = np.cumsum(u)
        seen.append(float(t[-1]))
        gk.launch(weigh1, u.shape, u, out[:1])

    u = rng.random(6) + 0.5
    du = np.zeros(6)
    gk.autodiff(program, gk.Duplicated(u, du), gk.Duplicated(np.zeros(6), np.r_[1.0, np.zeros(5)]))
    assert seen == [pytest.approx(u.sum(), rel=1e-15)]
    np.testing.assert_allclose(du, 2 * u * (1.0 + 0.1 * np.arange(6)), rtol=1e-15)


def test_a_complex_temporary_written_from_an_active_array_is_refused(monkeypatch, rng):
    """`w[:] = u` into a complex array is no copy a launch makes: refused before it writes (a plain write until
    session 63, its derivative dropped)."""
    on_interpreter(monkeypatch)

    def program(u, out):
        w = np.zeros(6, dtype=complex)
        w[:] = u
        out[...] = w.real

    u, du, out, dout = rng.random(6) + 0.5, rng.random(6), rng.random(6), rng.random(6)
    before = [a.copy() for a in (u, du, out, dout)]
    with pytest.raises(gk.ProgramError, match=r"test_host_writes_derived\.py:\d+"):
        gk.autodiff(program, gk.Duplicated(u, du), gk.Duplicated(out, dout))
    for a, b in zip((u, du, out, dout), before):
        np.testing.assert_array_equal(a, b)


def ranges_written_from_active_arrays(u, out, c):
    """Temporaries from np.linspace and np.eye written from active values by copy and fill launches, and an Active
    scalar compared with an array (a mask) and multiplied by an empty array."""
    w = np.linspace(0.0, 1.0, 6)
    w[:] = u * 2.0
    m = np.eye(6)
    m[2] = u
    mask = np.logical_and(c <= w, w < c + 1.0)
    assert (c * w[:0]).shape == (0,)
    r = np.where(mask, w * c, w) + m.sum(axis=0)
    gk.launch(weigh1, r.shape, r, out[:1])


def test_temporaries_of_ranges_and_masks_from_active_scalars_are_differentiated(monkeypatch, rng):
    on_interpreter(monkeypatch)
    report = check_grad(ranges_written_from_active_arrays, gk.Duplicated(rng.random(6) + 0.5, np.zeros(6)),
                        gk.Duplicated(np.zeros(6), np.zeros(6)), gk.Active(1.3))
    assert report.checked > 0


NUMPY_INTERNALS = {
    # Python's function called per element as a plain float (an object array in between): silent before
    "np.vectorize": lambda u: np.vectorize(lambda x: 2.0 * x)(u),
    "np.frompyfunc": lambda u: np.frompyfunc(lambda x: 2.0 * x, 1, 1)(u).astype(float),
    # NumPy copies the array and sorts the copy in place: refused before naming NumPy's internal line
    "np.unique": lambda u: np.unique(u),
    "np.setdiff1d": lambda u: np.setdiff1d(u, [100.0]),
    "np.percentile": lambda u: np.percentile(u, 50.0) * u,
}


@pytest.mark.parametrize("name", list(NUMPY_INTERNALS))
def test_numpy_functions_that_are_no_launch_are_refused_at_the_users_line(monkeypatch, rng, name):
    """What NumPy computes in its own code from an active array is derived: the launch taking it is refused,
    naming the function and the user's line (session 63)."""
    on_interpreter(monkeypatch)
    form = NUMPY_INTERNALS[name]

    def program(u, out):
        q = form(u)
        gk.launch(weigh1, q.shape, q, out[:1])

    u, du, out, dout = rng.random(6) + 0.5, rng.random(6), rng.random(6), rng.random(6)
    before = [a.copy() for a in (u, du, out, dout)]
    op = "ndarray.astype" if name == "np.frompyfunc" else name  # (the object array's conversion is the user's)
    with pytest.raises(gk.ProgramError, match=rf"computed from an active array: `{re.escape(op)}[^`]*` of [^`]* at "
                                              r"[^ ]*test_host_writes_derived\.py:\d+ \(`\"np\."):
        gk.autodiff(program, gk.Duplicated(u, du), gk.Duplicated(out, dout))
    for a, b in zip((u, du, out, dout), before):
        np.testing.assert_array_equal(a, b)


def test_a_percentile_as_a_constant_is_numpys_value(monkeypatch, rng):
    """`float(np.percentile(u, q))` inside a program: NumPy's interpolation writes into a 0-d array that comes
    back as a derived scalar, which cannot be written into (a StopIteration before session 63); the value is the
    same interpolation, rounded by its other form where NumPy takes `b - (b - a)(1 - t)`: within 2 ulps."""
    on_interpreter(monkeypatch)
    got = []

    def program(u, out):
        got.extend(float(np.percentile(u, q)) for q in (10.0, 50.0, 75.0))
        gk.launch(weigh1, u.shape, u, out[:1])

    u = rng.random(6) + 0.5
    gk.autodiff(program, gk.Duplicated(u, np.zeros(6)), gk.Duplicated(np.zeros(6), np.ones(6)))
    want = [np.percentile(u, q) for q in (10.0, 50.0, 75.0)]
    np.testing.assert_allclose(got, want, rtol=2 * np.finfo(np.float64).eps, atol=0)


GRID = np.linspace(0.5, 1.5, 6)  # a module's grid: a plain array the program does not track


def test_an_active_scalar_with_a_plain_array_is_a_launch(monkeypatch, rng):
    """`c * y` of an Active scalar and a grid captured from the module, `np.arange(n) * c`: launches that take the
    array as a constant (session 63; refused by the scalar's operator before: CFDPython's Burgers initial
    condition and Laplace boundary)."""
    on_interpreter(monkeypatch)

    def program(u, c, out):
        w = c * GRID + u * (GRID - 4.0 * c) ** 2 / (4 * c) + np.arange(6) * c
        gk.launch(weigh1, w.shape, w, out[:1])

    report = check_grad(program, gk.Duplicated(rng.random(6) + 0.5, np.zeros(6)), gk.Active(0.7),
                        gk.Duplicated(np.zeros(6), np.zeros(6)))
    assert report.checked > 0


def test_a_reduction_of_a_read_is_the_read(monkeypatch, rng):
    """`np.sum(np.sum(m * v**2))` (Mocz's nbody energy): the outer sum of the read's scalar is the scalar, with its
    derivative (a TypeError from inside gradkern before session 63)."""
    on_interpreter(monkeypatch)

    def program(u, out):
        t = np.sum(np.sum(u * u)) + np.max(np.sum(u[:2])) * np.min(u.max())
        out[...] = u * t

    report = check_grad(program, gk.Duplicated(rng.random(6) + 0.5, np.zeros(6)),
                        gk.Duplicated(np.zeros(6), np.zeros(6)))
    assert report.checked > 0
