"""Hostile inputs, round three (docs/errors.md, "Hostile inputs"; docs/programs.md, "When a program raises"):
arrays NumPy can make that rounds one and two did not try (record arrays, float16 and long double, 0-d and empty
arrays, negative strides, Fortran order, a shadow shared by two arguments, lists and tuples), numbers at int64's
edges and non-finite constants, and programs that misbehave: generator or async functions (whose body never
runs), a step that raises (an Exception or a BaseException such as KeyboardInterrupt) while recording or while
the reverse recomputes it, a program that calls gk.autodiff inside itself, bad nsteps, snapshots and memory.
Each refusal is a GradkernError naming the argument, with every buffer as it was; each accepted input gives the
plain array's result."""

from __future__ import annotations

import fractions

import numpy as np
import pytest

import gradkern as gk
from gradkern.testing import check_grad

N = 6


@gk.kernel
def scaled_square(x, y, a, n):
    i = gk.tid()
    if i < n:
        y[i] = a * x[i] * x[i]


@gk.kernel
def square(x, y):
    i = gk.tid()
    y[i] = x[i] * x[i]


@gk.kernel
def doubled(A, B):
    i, j = gk.tid()
    B[i, j] = 2.0 * A[i, j]


@gk.kernel
def heat(u, v, c):
    i = gk.tid()
    if i == 0 or i == u.shape[0] - 1:
        v[i] = u[i]
    else:
        v[i] = u[i] + c * (u[i - 1] - 2.0 * u[i] + u[i + 1])


@gk.kernel
def energy(u, E):
    i = gk.tid()
    gk.atomic_add(E, 0, u[i] * u[i])


def snapshot(*arrays):
    """A check that each array holds, bit for bit, what it held when this was called."""
    before = [(a, np.asarray(a).tobytes()) for a in arrays]
    return lambda: all(np.asarray(a).tobytes() == raw for a, raw in before)


def fresh(rng):
    return rng.uniform(0.5, 2.0, N), np.zeros(N), np.zeros(N), rng.uniform(0.5, 2.0, N)


def reverse(x, dx, y, dy, a=2.0, n=N):
    return gk.autodiff(scaled_square, gk.Duplicated(x, dx), gk.Duplicated(y, dy), gk.Const(a), gk.Const(n))


def refused(error, match, call, *arrays):
    same = snapshot(*arrays)
    with pytest.raises(error, match=match):
        call()
    assert same()


# ---- arrays -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float16, np.longdouble], ids=["float16", "longdouble"])
def test_float_dtypes_the_language_has_not_are_refused(rng, dtype):
    x, dx, y, dy = fresh(rng)
    refused(gk.LaunchError, rf"argument 'x' has dtype {np.dtype(dtype)}; kernels take arrays of float32.*\n"
            r"hint: convert with x.astype\(np.float64\)", lambda: reverse(x.astype(dtype), dx, y, dy), dx, y, dy)
    refused(gk.AnnotationError, rf"shadow of 'x' must be a NumPy float64 array .*got a NumPy {np.dtype(dtype)}",
            lambda: reverse(x, dx.astype(dtype), y, dy), x, y, dy)


def test_record_arrays_are_refused_and_their_fields_are_views(rng):
    x, dx, y, dy = fresh(rng)
    records = np.rec.fromarrays([x.copy(), -x], names="a,b")
    refused(gk.LaunchError, r"argument 'x' has dtype \(numpy.record", lambda: gk.launch(scaled_square, N, records, y,
                                                                                          2.0, N), y)
    da = np.zeros(N)
    reverse(records.b, da, y, dy.copy())  # a field: a strided float64 view (stride 16 bytes)
    np.testing.assert_allclose(da, 4.0 * -x * dy, rtol=1e-15)  # d(2 x^2)/dx = 4x: one rounding
    np.testing.assert_array_equal(y, 2.0 * x * x)


def test_0_d_arrays_are_refused_and_empty_ones_run_nothing(rng):
    x, dx, y, dy = fresh(rng)
    refused(gk.LaunchError, r"argument 'x' has 0 dimensions; kernels take 1-D to 5-D arrays \(dim defaults to the "
            r"shape of 'x'", lambda: reverse(np.array(1.0), np.array(0.0), y, dy), y, dy)
    e = np.zeros(0)
    assert reverse(e, e.copy(), e.copy(), e.copy(), n=0) == (None, None, None, None)
    assert gk.autodiff(square, gk.Duplicated(e, e.copy()), gk.Duplicated(e.copy(), e.copy())) == (None, None)
    for shape in ((0, 3), (3, 0)):
        e = np.zeros(shape)
        assert gk.autodiff(doubled, gk.Duplicated(e, e.copy()), gk.Duplicated(e.copy(), e.copy())) == (None, None)


def test_negative_strides_and_fortran_order_are_their_elements(rng):
    x, dx, y, dy = fresh(rng)
    dy0 = dy.copy()
    reverse(x[::-1], dx[::-1], y[::-1], dy[::-1])
    np.testing.assert_allclose(dx, 4.0 * x * dy0, rtol=1e-15)  # one rounding, as above
    np.testing.assert_array_equal(y, 2.0 * x * x)
    assert not dy.any()  # y is only written: its shadow is zeroed (docs/shadows-and-modes.md)

    @gk.kernel
    def rows(A, B):
        i, j = gk.tid()
        B[i, j] = A[i, j] * A[i, j] + A[i, 0]

    for view in (lambda a: a[::-1, ::-1], np.asfortranarray, lambda a: np.asfortranarray(a)[::-1, ::2]):
        A = view(rng.uniform(0.5, 2.0, (4, 6)))
        dA, B, dB = np.zeros_like(A), np.zeros_like(A), view(rng.uniform(0.5, 2.0, (4, 6)))
        dB0 = dB.copy()
        gk.autodiff(rows, gk.Duplicated(A, dA), gk.Duplicated(B, dB), dim=A.shape)
        expected = 2.0 * A * dB0
        expected[:, 0] += dB0.sum(axis=1)
        np.testing.assert_allclose(dA, expected, rtol=1e-14)  # sums of up to 7 positive terms: a few roundings
        np.testing.assert_array_equal(B, A * A + A[:, :1])


def test_arrays_over_bytes_are_read_only_read_and_never_written(rng):
    """np.frombuffer over a bytes object is read-only: refused as a written primal or as any shadow (LaunchError
    / AnnotationError naming it), read like any other array."""
    x, dx, y, dy = fresh(rng)
    frozen = np.frombuffer(x.tobytes(), dtype=np.float64)
    refused(gk.LaunchError, r"argument 'y' is written by kernel 'scaled_square' but the array is read-only",
            lambda: gk.launch(scaled_square, N, x, np.frombuffer(bytes(8 * N)), 2.0, N), x)
    for shadows in ((np.frombuffer(bytes(8 * N)), dy), (dx, np.frombuffer(dy.tobytes()))):
        refused(gk.AnnotationError, r"shadow of '[xy]' is read-only; shadows are updated in place",
                lambda shadows=shadows: reverse(x, shadows[0], y, shadows[1]), x, dx, y, dy)
    gk.launch(scaled_square, N, frozen, y, 2.0, N)
    np.testing.assert_array_equal(y, 2.0 * x * x)


def test_one_shadow_for_two_arguments_or_a_primal_its_own_shadow_is_refused(rng):
    @gk.kernel
    def product(x, z, y):
        i = gk.tid()
        y[i] = x[i] * z[i]

    x, shared, y, dy = fresh(rng)
    z = rng.uniform(0.5, 2.0, N)
    refused(gk.AliasingError, r"the shadow of 'z' shares memory with the shadow of 'x'",
            lambda: gk.autodiff(product, gk.Duplicated(x, shared), gk.Duplicated(z, shared), gk.Duplicated(y, dy)),
            x, z, y, dy, shared)
    refused(gk.AliasingError, r"the shadow of 'x' shares memory with 'x'", lambda: reverse(x, x, y, dy), x, y, dy)


def test_python_sequences_and_numbers_where_arrays_go_are_refused(rng):
    x, dx, y, dy = fresh(rng)
    for bad in (list(x), tuple(x), 1.0):
        refused(gk.LaunchError, rf"argument 'x' is indexed in kernel 'scaled_square', so it must be a NumPy array "
                rf"\(or a CuPy array\); got {type(bad).__name__}\nhint: pass np.asarray\(x\)",
                lambda bad=bad: gk.launch(scaled_square, N, bad, y, 2.0, N), y)
    refused(gk.AnnotationError, r"shadow of 'x' must be a NumPy float64 array of shape \(6,\) like its primal; got "
            r"list", lambda: reverse(x, list(dx), y, dy), x, y, dy)


def test_numbers_at_int64s_edges_and_non_finite_constants(rng):
    x, dx, y, dy = fresh(rng)
    refused(gk.LaunchError, r"argument 'n' = 9223372036854775808 does not fit in int64",
            lambda: gk.launch(scaled_square, N, x, y, 2.0, 2**63), y)
    refused(gk.LaunchError, r"argument 'n' = -9223372036854775809 does not fit in int64",
            lambda: gk.launch(scaled_square, N, x, y, 2.0, -2**63 - 1), y)
    gk.launch(scaled_square, N, x, y, 2.0, -2**63)  # int64's least: `i < n` holds for no thread
    assert not y.any()
    gk.launch(scaled_square, N, x, y, 2.0, np.float64(N))  # a float bound of a comparison: the language's float
    np.testing.assert_array_equal(y, 2.0 * x * x)
    gk.launch(scaled_square, N, x, y, fractions.Fraction(1, 3), N)  # a Rational is a number: float(1/3)
    np.testing.assert_array_equal(y, (1 / 3) * x * x)
    for bad in (2j, "2", None):
        refused(gk.LaunchError, rf"argument 'a' must be a number \(int, float, bool or NumPy scalar\); got "
                rf"{type(bad).__name__}", lambda bad=bad: gk.launch(scaled_square, N, x, y, bad, N), x, y)
    refused(gk.AnnotationError, r"argument 'a' is Active but is complex; expected a real number",
            lambda: gk.autodiff(scaled_square, gk.Duplicated(x, dx), gk.Duplicated(y, dy), gk.Active(2j),
                                gk.Const(N)), x, dx, y, dy)
    with np.errstate(invalid="ignore"):  # inf * 0 in the expectation
        for a in (np.inf, np.nan):
            d = dy.copy()
            reverse(x, dx, y, d, a=a)  # passed as it is: IEEE arithmetic, as the plain code gives
            np.testing.assert_array_equal(y, a * x * x)
            np.testing.assert_array_equal(dx, 2.0 * a * x * dy)  # one product each way: the same roundings
            dx[:] = 0


def test_a_loop_past_its_array_is_refused_before_anything_is_written(rng):
    @gk.kernel
    def gather(x, y, n):
        i = gk.tid()
        for k in range(n):
            y[i] += x[k]

    x, dx, y, dy = fresh(rng)
    for call in (lambda: gk.launch(gather, N, x, y, N + 3),
                 lambda: gk.autodiff(gather, gk.Duplicated(x, dx), gk.Duplicated(y, dy), gk.Const(N + 3))):
        refused(gk.LaunchError, r"thread \(0,\) reads x\[k\] .* outside 'x' of shape \(6,\) \(index 6 on axis 0 at "
                r"dim=6; no buffer was changed\)", call, x, dx, y, dy)


# ---- programs whose body never runs ---------------------------------------------------------------------------------

def generator_program(u, v):
    gk.launch(square, N, u, v)
    yield


async def async_program(u, v):
    gk.launch(square, N, u, v)


class ReturnsAGenerator:
    """A callable object whose call gives a generator: only its result shows that nothing ran."""

    def __call__(self, u, v):
        return generator_program(u, v)


@pytest.mark.parametrize("fn", [generator_program, async_program, ReturnsAGenerator()], ids=["generator", "async",
                                                                                            "returns-generator"])
def test_a_program_whose_body_never_runs_is_refused(rng, fn):
    """A generator or async program returned an object without running its body: gk.autodiff returned (None,
    None) and left du zero, a derivative silently lost. Every verb now refuses it before anything runs."""
    u, du, v, dv = fresh(rng)
    what = r"(is a generator function|is an async function|returned a generator instead of running)"
    for name, call in {
        "reverse": lambda: gk.autodiff(fn, gk.Duplicated(u, du), gk.Duplicated(v, dv)),
        "forward": lambda: gk.autodiff(fn, gk.Duplicated(u, du), gk.Duplicated(v, dv), mode=gk.Forward),
        "split": lambda: gk.autodiff_thunk(fn, gk.Duplicated, gk.Duplicated)[0](gk.Duplicated(u, du),
                                                                                gk.Duplicated(v, dv)),
        "check_grad": lambda: check_grad(fn, gk.Duplicated(u, du), gk.Duplicated(v, dv)),
    }.items():
        same = snapshot(u, du, v, dv)
        with pytest.raises(gk.ProgramError, match=rf"program '\w+' {what}"):
            call()
        assert same(), name
        assert u.flags.writeable and v.flags.writeable


def test_a_step_whose_body_never_runs_is_refused(rng):
    def program(u, v, E, c):
        def step(t):
            gk.launch(heat, N, u, v, c)
            yield

        gk.checkpointed_loop(step, 4, snapshots=2)
        gk.launch(energy, N, u, E)

    u, du, v, dv = fresh(rng)
    E, dE = np.zeros(1), np.ones(1)
    refused(gk.ProgramError, r"gk.checkpointed_loop: step 'step' is a generator function; .* no step ran",
            lambda: gk.autodiff(program, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Duplicated(E, dE),
                                gk.Active(0.1)), u, du, v, dv, E, dE)
    refused(gk.ProgramError, r"step 'step' is a generator function", lambda: program(u, v, E, 0.1), u, v, E)
    refused(gk.ProgramError, r"step '<lambda>' returned a generator", lambda: gk.checkpointed_loop(
        lambda t: generator_program(u, v), 3, snapshots=2), u, v)


# ---- programs that raise --------------------------------------------------------------------------------------------

class Halt(BaseException):
    """Not an Exception: what a KeyboardInterrupt or a SystemExit is to a `except Exception`."""


def _works_afterwards(rng):
    """A plain launch, a host write and a program's gradient, after a failed call: no recording is left behind,
    no array locked."""
    u, du, v, dv = fresh(rng)
    gk.launch(square, N, u, v)
    u[0] = 1.5  # a host write: refused while a program records
    u0, dv0 = u.copy(), dv.copy()

    def program(a, b):
        gk.launch(square, N, a, b)

    gk.autodiff(program, gk.Duplicated(u, du), gk.Duplicated(v, dv))
    np.testing.assert_allclose(du, 2.0 * u0 * dv0, rtol=1e-15)  # d(x^2)/dx = 2x: one rounding


@pytest.mark.parametrize("exc", [ValueError, Halt, KeyboardInterrupt])
@pytest.mark.parametrize("verb", ["reverse", "forward", "split"])
def test_a_program_that_raises_midway_leaves_its_launches_done_and_no_shadow_touched(rng, exc, verb):
    """The first forward runs the program eagerly (docs/programs.md#when-a-program-raises): the launches before
    the raise have run (v holds u**2), none after it; every array writable, the exception the program's own. No
    shadow changed in reverse mode; in forward mode the launches that ran updated their tangents with their
    primals (dv is the tangent of v = u**2), no other."""
    def program(u, v, w):
        gk.launch(square, N, u, v)
        raise exc("midway")
        gk.launch(square, N, v, w)  # never reached: the raise comes first

    u, du, v, dv = fresh(rng)
    du[:] = rng.uniform(0.5, 2.0, N)
    w, dw = np.zeros(N), rng.uniform(0.5, 2.0, N)
    u0, v0, du0 = u.copy(), v.copy(), du.copy()
    shadows = snapshot(du, dw, w) if verb == "forward" else snapshot(du, dv, dw, w)
    args = gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Duplicated(w, dw)
    with pytest.raises(exc, match="midway"):
        if verb == "reverse":
            gk.autodiff(program, *args)
        elif verb == "forward":
            gk.autodiff(program, *args, mode=gk.Forward)
        else:
            gk.autodiff_thunk(program, gk.Duplicated, gk.Duplicated, gk.Duplicated)[0](*args)
    assert shadows()
    if verb == "forward":
        np.testing.assert_array_equal(dv, 2.0 * u0 * du0)  # d(u^2) = 2 u du: the same roundings
    np.testing.assert_array_equal(u, u0)
    assert not np.array_equal(v, v0)
    np.testing.assert_array_equal(v, u0 * u0)
    assert all(a.flags.writeable for a in (u, v, w, du, dv, dw))
    _works_afterwards(rng)


@pytest.mark.parametrize("exc", [ValueError, KeyboardInterrupt])
@pytest.mark.parametrize("when", ["recording", "recomputing"])
def test_a_checkpointed_step_that_raises(rng, exc, when):
    """Raised while the loop records: as any program's raise, the steps before it done, no shadow touched. Raised
    while the reverse recomputes a step (a step that is no function of t and the state): the reverse stops where
    it was, its shadows partly accumulated (documented: they are not restored), every array writable, the loop's
    snapshots freed; the next call is right."""
    calls = []

    def program(u, v, E, c):
        def step(t):
            calls.append(t)
            gk.launch(heat, N, u, v, c)
            if (when == "recording" and t == 2) or (when == "recomputing" and calls.count(t) == 2 and t == 1):
                raise exc("step failed")
            gk.launch(heat, N, v, u, c)

        gk.checkpointed_loop(step, 4, snapshots=2)
        gk.launch(energy, N, u, E)

    u, du, v, dv = fresh(rng)
    E, dE = np.zeros(1), np.ones(1)
    shadows, u0 = snapshot(du, dv, dE), u.copy()
    with pytest.raises(exc, match="step failed"):
        gk.autodiff(program, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Duplicated(E, dE), gk.Active(0.1))
    if when == "recording":
        assert shadows() and calls == [0, 1, 2] and not E.any() and not np.array_equal(u, u0)
    else:
        assert calls[:4] == [0, 1, 2, 3] and 1 in calls[4:] and E[0] > 0
    assert all(a.flags.writeable for a in (u, v, E, du, dv, dE))
    _works_afterwards(rng)


# ---- programs that differentiate inside themselves ----------------------------------------------------------------

def test_gk_autodiff_inside_a_program_is_its_own_call(rng):
    """A program may call gk.autodiff (of a kernel or of another program) on arrays of its own: that call is
    differentiated by itself, not recorded by the outer one, whose derivative is that of its own launches."""
    inner_grads = []

    def inner(p, q):
        gk.launch(square, N, p, q)

    def program(u, v):
        gk.launch(square, N, u, v)
        a = rng.uniform(0.5, 2.0, N)
        da = np.zeros(N)
        # fresh seeds, not `db.copy()`: since session 56 `np.ones(N)` in a program is a TrackedArray, whose copy is
        # the outer program's copy launch, locked against host writes as any launch's output (docs/host-code.md)
        gk.autodiff(square, gk.Duplicated(a, da), gk.Duplicated(np.zeros(N), np.ones(N)))
        gk.autodiff(inner, gk.Duplicated(a, da), gk.Duplicated(np.zeros(N), np.ones(N)))
        inner_grads.append((a, da))

    u, du, v, dv = fresh(rng)
    u0, dv0 = u.copy(), dv.copy()
    gk.autodiff(program, gk.Duplicated(u, du), gk.Duplicated(v, dv))
    np.testing.assert_allclose(du, 2.0 * u0 * dv0, rtol=1e-15)  # one rounding
    ((a, da),) = inner_grads
    np.testing.assert_allclose(da, 4.0 * a, rtol=1e-15)  # two calls of 2a: exact doubling after one rounding


def test_gk_autodiff_inside_a_program_on_the_programs_arrays_is_refused(rng):
    """The nested call writes an array the outer recording has locked (its tape depends on it): refused, the
    outer shadows untouched. The LaunchError says the array is read-only (the host-write guard made it so), and
    its hint, given while a program records, says why: before, it said nothing of the program."""
    def program(u, v):
        gk.launch(square, N, u, v)
        gk.autodiff(square, gk.Duplicated(u, np.zeros(N)), gk.Duplicated(v, np.ones(N)))

    u, du, v, dv = fresh(rng)
    shadows = snapshot(du, dv)
    with pytest.raises(gk.LaunchError, match=r"argument 'y' is written by kernel 'square' but the array is "
                                             r"read-only\nhint: .*the recording program keeps the arrays its "
                                             r"launches took read-only until it returns"):
        gk.autodiff(program, gk.Duplicated(u, du), gk.Duplicated(v, dv))
    assert shadows() and u.flags.writeable and v.flags.writeable
    _works_afterwards(rng)


# ---- a checkpointed loop's numbers ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("options", "message"), [
    ({"nsteps": -1, "snapshots": 2}, r"nsteps must be at least 0, got -1"),
    ({"nsteps": 2.0, "snapshots": 2}, r"nsteps must be an integer, got 2.0"),
    ({"nsteps": True, "snapshots": 2}, r"nsteps must be an integer, got True"),
    ({"nsteps": float("nan"), "snapshots": 2}, r"nsteps must be an integer, got nan"),
    ({"nsteps": "3", "snapshots": 2}, r"nsteps must be an integer, got '3'"),
    ({"nsteps": 4, "snapshots": 0}, r"snapshots must be at least 1, got 0"),
    ({"nsteps": 4, "snapshots": 1.5}, r"snapshots must be an integer, got 1.5"),
    ({"nsteps": 4, "snapshots": True}, r"snapshots must be an integer, got True"),
    ({"nsteps": 4, "memory": -1}, r"memory must be a number of bytes \(an int > 0\), got -1"),
    ({"nsteps": 4, "memory": 0}, r"memory must be a number of bytes \(an int > 0\), got 0"),
    ({"nsteps": 4, "memory": 1.5}, r"memory must be a number of bytes \(an int > 0\), got float 1.5"),
    ({"nsteps": 4, "memory": True}, r"memory must be a number of bytes \(an int > 0\), got True"),
    ({"nsteps": 4, "memory": "100"}, r"memory must be a number of bytes \(an int > 0\), got str '100'"),
    ({"nsteps": 4, "memory": 100, "snapshots": 2}, r"takes memory= or snapshots=, not both"),
], ids=lambda v: repr(v) if not isinstance(v, str) else "")
def test_bad_loop_numbers_are_refused_before_anything_runs(rng, options, message):
    nsteps = options.pop("nsteps")

    def program(u, v, E, c):
        def step(t):
            gk.launch(heat, N, u, v, c)
            gk.launch(heat, N, v, u, c)

        gk.checkpointed_loop(step, nsteps, **options)
        gk.launch(energy, N, u, E)

    u, du, v, dv = fresh(rng)
    E, dE = np.zeros(1), np.ones(1)
    refused(gk.ProgramError, message, lambda: gk.autodiff(program, gk.Duplicated(u, du), gk.Duplicated(v, dv),
                                                          gk.Duplicated(E, dE), gk.Active(0.1)), u, du, v, dv, E, dE)


@pytest.mark.parametrize("options", [{"nsteps": np.int64(3), "snapshots": 2}, {"nsteps": 4, "snapshots": 10**30},
                                     {"nsteps": 4, "memory": 10**30}, {"nsteps": 0, "snapshots": 2}],
                         ids=["int64-nsteps", "huge-snapshots", "huge-memory", "no-steps"])
def test_numbers_past_need_are_taken(rng, options):
    """np.int64 steps, more snapshots or memory than the loop can use, no steps: the gradient is the plain
    loop's, compared with finite differences."""
    nsteps = options.pop("nsteps")

    def program(u, v, E, c):
        def step(t):
            gk.launch(heat, N, u, v, c)
            gk.launch(heat, N, v, u, c)

        gk.checkpointed_loop(step, nsteps, **options)
        gk.launch(energy, N, u, E)

    u, v, E = rng.uniform(0.5, 2.0, N), np.zeros(N), np.zeros(1)
    check_grad(program, gk.Duplicated(u, np.zeros(N)), gk.Duplicated(v, np.zeros(N)),
                          gk.Duplicated(E, np.zeros(1)), gk.Active(0.1))


def test_a_budget_too_small_warns_at_the_users_line(rng):
    """memory=1 byte holds no snapshot: the loop keeps two, with a RuntimeWarning that named checkpoint_schedules'
    schedule.py (the iterator running during the reverse) and now names the gk.autodiff call's line."""
    def program(u, v, E, c):
        def step(t):
            gk.launch(heat, N, u, v, c)
            gk.launch(heat, N, v, u, c)

        gk.checkpointed_loop(step, 4, memory=1)
        gk.launch(energy, N, u, E)

    u, v, E = rng.uniform(0.5, 2.0, N), np.zeros(N), np.zeros(1)
    du, dv, dE = np.zeros(N), np.zeros(N), np.ones(1)
    with pytest.warns(RuntimeWarning, match=r"memory=1 bytes holds fewer than two of this loop's snapshots") as got:
        gk.autodiff(program, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Duplicated(E, dE), gk.Active(0.1))
    assert [w.filename for w in got if "memory=1" in str(w.message)] == [__file__]
    assert du.any()
