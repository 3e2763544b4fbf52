"""Host reads and reductions under hostile and odd inputs (session 58 red team; docs/host-code.md, "Reductions and
element reads", "Hostile and odd inputs"): the ways out of an array that were silent constants (`u.take(i)`,
`u.flat.copy()`, `np.array(u.flat)`, `u.flat.base`) are reads or refusals now; a NaN read taken by a launch is
refused naming the line and the read; a host write after a read names the read's line; the primal of empty,
out-of-range, strided, transposed and Fortran-ordered reads is NumPy's. Each gradient by `check_grad` (central
differences in float64, the dot-product test, forward tangents) on the interpreter; each refusal leaves primals and
shadows as they were."""

import copy
import pickle

import numpy as np
import pytest
from support.host_scalar_kernels import energy, scale_into, square, through
from support.ported_harness import on_interpreter

import gradkern as gk
from gradkern.testing import check_grad

N = 6


def _args(rng):
    return gk.Duplicated(rng.random(N) + 0.5, np.zeros(N)), gk.Duplicated(np.zeros(1), np.ones(1))


def _primal(read, u):
    """The program's E as NumPy computes it."""
    return np.sum((read(u, u * u) * u) ** 2)


def _refused(prog, rng, error, *words):
    """`prog` raises `error` whose message holds `words`; the primals and shadows are as they were."""
    u = rng.random(N) + 0.5
    args = [u, np.zeros(N), np.zeros(1), np.ones(1)]
    before = [a.copy() for a in args]
    with pytest.raises(error) as info:
        gk.autodiff(prog, gk.Duplicated(args[0], args[1]), gk.Duplicated(args[2], args[3]))
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)
    for w in words:
        assert w in str(info.value)
    return info.value


# each a silent constant before (check_grad's forward and reverse derivatives missed the read's share)
WAYS_OUT = {
    "v.take(i)": lambda u, v: v.take(2) + v.take(-1) + v.reshape(2, 3).take(4) + np.take(v, np.int64(1)),
    "v.flat[i] and v.flat.base": lambda u, v: v.flat[2] * v.reshape(3, 2).flat[-1] + v.flat.base[0],
}


# session 62: `copy.deepcopy(v.sum())` was a new scalar whose adjoint no sweep read (the derivative through it
# dropped, no error); pickling a read raised Python's TypeError about a weakref, and a derived scalar's pickle made a
# plain number a launch took as a constant (mpi4py's `comm.allreduce(s)` pickles, even on one rank)
COPIES = {
    "copy.copy(v.sum())": lambda u, v: copy.copy(v.sum()),
    "copy.deepcopy([v[0], v.max()])": lambda u, v: sum(copy.deepcopy([v[0], v.max()])),
}


@pytest.mark.parametrize("name", list(WAYS_OUT) + list(COPIES))
def test_the_ways_out_of_an_array_are_reads(monkeypatch, rng, name):
    on_interpreter(monkeypatch)
    read = {**WAYS_OUT, **COPIES}[name]
    u = rng.random(N) + 0.5
    E = np.zeros(1)
    gk.autodiff(through(read), gk.Duplicated(u.copy(), np.zeros(N)), gk.Duplicated(E, np.ones(1)))
    np.testing.assert_allclose(E[0], _primal(read, u), rtol=1e-14)  # the same few roundings, another order
    check_grad(through(read), *_args(rng))


def test_flat_copies_carry_the_origin_or_are_refused(monkeypatch, rng):
    """`v.flat.copy()` is a derived array (its element read refused where a launch takes it); `np.array(v.flat)`
    cannot carry an origin (NumPy makes the plain array) and is refused on its line."""
    on_interpreter(monkeypatch)
    _refused(through(lambda u, v: v.flat.copy()[2]), rng, gk.ProgramError, "host code computed", "ndarray.flat")
    _refused(through(lambda u, v: np.array(v.flat)[2]), rng, gk.ProgramError, "`.flat`", "u.flatten()")


def test_fromiter_of_reads_is_refused_not_a_silent_constant(monkeypatch, rng):
    """`np.fromiter(v, float)`, `np.fromiter(iter([v[0], ...]), float)`: NumPy's C code calls float() of each read
    with no Python frame between, so the array was a plain one and the launch taking it dropped the reads'
    derivative silently (check_grad's gradient was 0 there). Now the iterator is looked into as a list: refused
    naming the line (the read of an ndarray's own iteration as a float(), a list of reads as a derived array)."""
    on_interpreter(monkeypatch)
    _refused(through(lambda u, v: np.fromiter(v, float)[2]), rng, gk.ProgramError, "float()", "np.fromiter(v")
    _refused(through(lambda u, v: np.fromiter(iter([v[0], v[1]]), float)[1]), rng, gk.ProgramError,
             "host code computed", "an element read")


def test_round_with_decimals_is_a_derived_array(monkeypatch, rng):
    """`v.round(3)`: NumPy's C rounded a fresh output in place after the elementwise launch had locked it, and the
    guard refused a host write to 'u', 'v' after the generated kernel; now np.round's derived array (refused where
    a launch takes an element of it, naming the line), and `v.round()` (NumPy's rint) is still a launch."""
    on_interpreter(monkeypatch)
    e = _refused(through(lambda u, v: v.round(3)[2]), rng, gk.ProgramError, "host code computed", "v.round(3)")
    assert "host write" not in str(e)
    check_grad(through(lambda u, v: 1.0 + v.round()[2]), *_args(rng))


def test_a_non_finite_read_taken_by_a_launch_is_refused_naming_the_read(monkeypatch, rng):
    """`v.max()` of an array holding a NaN is NaN (NumPy's); a launch taking it as an Active scalar is refused as
    gk.Active(nan) is, now naming the launch's line and the read's (before: the runtime's AnnotationError named
    neither)."""
    on_interpreter(monkeypatch)
    seen = []

    def prog(u, E):
        v = np.zeros_like(u)
        gk.launch(square, N, u, v)
        s = v.max()
        seen.append(v.min().value)
        w = np.zeros_like(u)
        gk.launch(scale_into, N, u, w, s)
        gk.launch(energy, N, w, E)

    u = rng.random(N) + 0.5
    u[3] = np.nan
    args = [u, np.zeros(N), np.zeros(1), np.ones(1)]
    before = [a.copy() for a in args]
    with pytest.raises(gk.ProgramError) as info:
        gk.autodiff(prog, gk.Duplicated(args[0], args[1]), gk.Duplicated(args[2], args[3]))
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)
    message = str(info.value)
    assert "launch 4 (kernel 'scale_into')" in message and "gk.launch(scale_into, N, u, w, s)" in message
    assert "non-finite value nan" in message and "s = v.max()" in message
    assert np.isnan(seen[0])  # NumPy's max and min propagate the NaN; so do the reads'


def test_a_read_as_a_launch_dim_is_refused_naming_the_line(monkeypatch, rng):
    """`gk.launch(k, n_read, ...)`: the runtime's LaunchError named no line; the program names it and the spelling
    that works (int(s): an extent has no derivative), in reverse and forward mode, before anything ran."""
    on_interpreter(monkeypatch)

    def prog(u, E):
        n = np.zeros(1)
        gk.launch(energy, N, u / u, n)  # n[0] = N
        gk.launch(energy, n[0], u, E)

    _refused(prog, rng, gk.ProgramError, "launch 4 (kernel 'energy')", "gk.launch(energy, n[0], u, E)", "int(s)")
    u, du = rng.random(N) + 0.5, rng.random(N)
    with pytest.raises(gk.ProgramError, match=r"launch \d \(kernel 'energy'\).*as its dim"):
        gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(np.zeros(1), np.zeros(1)), mode=gk.Forward)


def test_a_host_write_after_a_read_names_the_reads_line(monkeypatch, rng):
    """The guard's error named the generated kernel ('host_sum_1'); it names the user's read now."""
    on_interpreter(monkeypatch)

    def prog(u, E):
        v = np.zeros_like(u)
        gk.launch(square, N, u, v)
        s = v.sum()
        v[1] = 7.0
        gk.launch(scale_into, N, u, v, s)

    e = _refused(prog, rng, gk.ProgramError, "after launch 2 (`sum` of an array", "s = v.sum()", "v[1] = 7.0")
    assert "host_sum" not in str(e)


ODD = {
    # `.real`, `.imag` and `.conjugate()` of a read, as a float has them (AttributeError before)
    "s.real, s.imag, s.conjugate()": lambda u, v: v[1].real * v[2].conjugate() + v[0].imag,
    # empty reductions NumPy defines (0.0) beside odd views: negative strides, transposed and Fortran order
    "empty, strided, transposed, Fortran": lambda u, v: (
        1.0 + v[:0].sum() + np.dot(v[:0], u[:0]) + v[::-2].sum() + v[::3][1] + v.reshape(2, 3).T[2, 1]
        + v.reshape(2, 3)[:, 1].max() + np.asfortranarray(v.reshape(2, 3)).sum() * 0.1 + np.dot(v, v[::-1]) * 0.01),
}


@pytest.mark.parametrize("name", list(ODD))
def test_odd_reads_are_numpys_values_and_differentiated(monkeypatch, rng, name):
    on_interpreter(monkeypatch)
    read = ODD[name]
    u = rng.random(N) + 0.5
    E = np.zeros(1)
    gk.autodiff(through(read), gk.Duplicated(u.copy(), np.zeros(N)), gk.Duplicated(E, np.ones(1)))
    # the reads' recursive sums against NumPy's pairwise ones: a few roundings of values of one magnitude
    np.testing.assert_allclose(E[0], _primal(read, u), rtol=1e-13)
    check_grad(through(read), *_args(rng))


@pytest.mark.parametrize(("read", "error"), [
    (lambda u, v: v[N], IndexError), (lambda u, v: v[-N - 1], IndexError), (lambda u, v: v.take(N), IndexError),
    (lambda u, v: v[:0].max(), ValueError)])
def test_what_numpy_raises_it_raises_before_anything_changed(monkeypatch, rng, read, error):
    """`v[N]`, `v.take(N)`, `v[:0].max()`: NumPy's own IndexError / ValueError (the exception a caller's `except`
    expects), from the user's line, with primals and shadows as they were."""
    on_interpreter(monkeypatch)
    with pytest.raises(error):
        read(None, np.zeros(N))  # NumPy's behaviour, which the program's must be
    _refused(through(read), rng, error)


PICKLED = {
    "a read": lambda u, v: pickle.loads(pickle.dumps(v.sum())),
    "a read's arithmetic": lambda u, v: pickle.loads(pickle.dumps(2.0 * v[1] + 1.0)),
    "a derived scalar": lambda u, v: pickle.loads(pickle.dumps(np.median(v))),
    "a derived scalar in a list": lambda u, v: pickle.loads(pickle.dumps([np.std(v)]))[0],
}


@pytest.mark.parametrize("name", list(PICKLED))
def test_pickling_a_read_or_a_derived_scalar_is_refused_naming_the_line(monkeypatch, rng, name):
    on_interpreter(monkeypatch)
    error = _refused(through(PICKLED[name]), rng, gk.ProgramError, "pickling", "gkm.allreduce", "float(s)",
                     "test_host_reads_redteam.py")
    assert "mpi4py" in str(error)


def test_after_the_program_a_scalar_pickles_as_its_number(monkeypatch, rng):
    """Outside a recording (a value kept past its program) pickling is the number's: nothing to drop."""
    on_interpreter(monkeypatch)
    kept = []
    u = rng.random(N) + 0.5
    gk.autodiff(through(lambda u, v: kept.append((v.sum(), np.median(v))) or kept[-1][0]),
                gk.Duplicated(u, np.zeros(N)), gk.Duplicated(np.zeros(1), np.ones(1)))
    read, median = kept[0]
    assert pickle.loads(pickle.dumps(read)) == read.value
    assert pickle.loads(pickle.dumps(median)) == float(median)
    assert copy.deepcopy(read) is read
