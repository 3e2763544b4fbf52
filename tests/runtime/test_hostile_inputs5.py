"""Hostile inputs, round five (docs/errors.md, "Hostile inputs"): what rounds one to four did not try. Each refusal
is a GradkernError naming the argument, what was expected and what came, with every buffer as it was.

Probed this round and already right (kept out of the suite; the report of session 52 lists them): shadows that
are overlapping views of one buffer, of another argument's primal, or a Const that is another argument's shadow
(AliasingError, both modes, split reverse too); BatchDuplicated lanes that are one array, overlapping views, its
primal or another argument's lane (AliasingError); memoryview, bytes, bytearray, array.array, range and torch
tensors where an array goes (LaunchError naming `np.asarray`); read-only memmaps as shadows or outputs; np.uint64
past int64, np.datetime64, np.str_, np.void and np.complex128 scalars (refused)."""

from __future__ import annotations

import numpy as np
import pytest

import gradkern as gk

N = 5


@gk.kernel
def scale_into(k, x, y):
    i = gk.tid()
    y[i] = y[i] + k * x[i] * x[i]


def arrays():
    rng = np.random.default_rng(5)
    return [rng.uniform(0.5, 1.0, N) for _ in range(4)]


def unchanged(*arrays):
    before = [a.copy() for a in arrays]
    return lambda: all(np.array_equal(a, b) for a, b in zip(arrays, before))


@pytest.mark.parametrize("value", [np.timedelta64(3, "s"), np.timedelta64("NaT")], ids=["3s", "NaT"])
def test_a_timedelta64_scalar_is_no_number(value):
    """np.timedelta64 is an np.integer subclass (NumPy's hierarchy), so it passed the integer checks and then
    failed int() with a TypeError (`... not 'datetime.timedelta'`); as a Const of a float kernel it would have
    been its count of units. A duration is no number: refused as np.datetime64 is, on the first call and on a
    signature already prepared by an int."""
    x, dx, y, dy = arrays()
    same = unchanged(x, dx, y, dy)
    verbs = [lambda k: gk.launch(scale_into, N, k, x, y, backend="interp"),
             lambda k: gk.autodiff(scale_into, k, gk.Duplicated(x, dx), gk.Duplicated(y, dy), backend="interp"),
             lambda k: gk.autodiff(scale_into, gk.Const(k), gk.Duplicated(x, dx), gk.Duplicated(y, dy),
                                   mode=gk.Forward, backend="interp")]
    for verb in verbs:
        for _ in range(2):  # the second call: after the int below prepared the signature
            with pytest.raises(gk.LaunchError, match=r"argument 'k' must be a number .* got timedelta64"):
                verb(value)
            assert same()
            gk.launch(scale_into, N, 3, x.copy(), y.copy(), backend="interp")
    with pytest.raises(gk.AnnotationError, match=r"argument 'k' is Active but is timedelta64; expected a real"):
        gk.autodiff(scale_into, gk.Active(value), gk.Duplicated(x, dx), gk.Duplicated(y, dy), backend="interp")
    fwd, rev = gk.autodiff_thunk(scale_into, gk.Active, gk.Duplicated, gk.Duplicated, backend="interp")
    tape = fwd(gk.Active(2.0), gk.Duplicated(x, dx), gk.Duplicated(y, dy))
    same = unchanged(x, dx, y, dy)
    with pytest.raises(gk.AnnotationError, match=r"argument 'k' is Active but is timedelta64"):
        rev(gk.Active(value), gk.Duplicated(x, dx), gk.Duplicated(y, dy), tape)
    assert same()


@gk.kernel
def add_square(x, y):
    i = gk.tid()
    y[i] = y[i] + x[i] * x[i]


def reads_first(a, b, y):
    """A program whose launch takes the memory of `a` and `b` (one array) through `a` only."""
    gk.launch(add_square, a.shape[0], a, y, backend="interp")


def test_a_program_given_one_array_twice_with_two_shadows_is_refused():
    """As for a kernel: a program's shadows follow memory, so an array annotated twice has one derivative, and two
    shadow buffers cannot both hold it. The program took the first and left the second untouched, silently; now
    AliasingError naming both, nothing run, every buffer as it was. Twice with one shadow stays accepted."""
    x, dx, y, dy = arrays()
    other = dx.copy()
    for mode in (gk.Reverse, gk.Forward):
        same = unchanged(x, dx, other, y, dy)
        with pytest.raises(gk.AliasingError, match=r"'b' and 'a' are the same array but their shadows are different"):
            gk.autodiff(reads_first, gk.Duplicated(x, dx), gk.Duplicated(x[:], other), gk.Duplicated(y, dy),
                        mode=mode)
        assert same()
    gk.autodiff(reads_first, gk.Duplicated(x, dx), gk.Duplicated(x, dx), gk.Duplicated(y, dy))
    # d(y + x^2)/dx = 2x: one shadow, accumulated once (a second accumulation would double it); rtol: the
    # generated adjoint may round 2*x*dy in another order, a few ulps at most
    np.testing.assert_allclose(dx, other + 2.0 * x * dy, rtol=1e-14)


def test_a_program_refuses_an_active_timedelta64():
    x, dx, y, dy = arrays()
    same = unchanged(x, dx, y, dy)
    with pytest.raises(gk.AnnotationError, match=r"argument 'a' is Active but is timedelta64, not a real number"):
        gk.autodiff(reads_first, gk.Active(np.timedelta64(2, "s")), gk.Duplicated(x, dx), gk.Duplicated(y, dy))
    assert same()
