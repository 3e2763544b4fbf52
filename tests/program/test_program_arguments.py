"""A program's arguments checked against its function's signature before anything runs, and named by its
parameters in every message (program/signature.py, docs/programs.md#arguments-of-a-program)."""

import numpy as np
import pytest

import gradkern as gk
from gradkern.testing import check_grad

N = 6


@gk.kernel
def energy(u, E):
    i = gk.tid()
    gk.atomic_add(E, 0, u[i] * u[i])


@gk.kernel
def scale_into(u, w, c):
    i = gk.tid()
    w[i] = c * u[i]


def prog(u, E, c):
    w = np.zeros_like(u)
    gk.launch(scale_into, N, u, w, c)
    gk.launch(energy, N, w, E)


def _buffers(rng):
    u = rng.random(N) + 0.5
    return u, rng.random(N) + 0.5, np.zeros(1), np.ones(1)


def _unchanged(before, after):
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)


def _call(way, *args, **keywords):
    if way == "reverse":
        return gk.autodiff(prog, *args, **keywords)
    if way == "forward":
        return gk.autodiff(prog, *args, mode=gk.Forward, **keywords)
    if way == "inspect":
        return gk.inspect(prog, *args, **keywords)
    forward, _ = gk.autodiff_thunk(prog, *(type(a) if isinstance(a, gk.Annotation) else gk.Const for a in args),
                                   **keywords)
    return forward(*args)


@pytest.mark.parametrize("way", ["reverse", "forward", "inspect", "thunk"])
@pytest.mark.parametrize("count", [2, 4])
def test_too_few_or_too_many_arguments_are_refused_before_anything_runs(rng, way, count):
    """Before: the user function's own TypeError (`prog() missing 1 required positional argument`), raised from
    inside the recording. Now a ProgramError naming the signature, what it takes and what came."""
    u, du, E, dE = _buffers(rng)
    before = [x.copy() for x in (u, du, E, dE)]
    c = gk.Active(0.5) if way != "forward" else gk.Duplicated(0.5, 1.0)
    args = (gk.Duplicated(u, du), gk.Duplicated(E, dE), c, 1.0)[:count]
    with pytest.raises(gk.ProgramError) as info:
        _call(way, *args)
    msg = str(info.value)
    assert "prog(u, E, c)" in msg and f"was given {count} arguments" in msg and "takes 3 arguments" in msg
    assert ("'c' is missing" in msg) == (count == 2)
    assert "nothing ran" in msg
    _unchanged(before, (u, du, E, dE))  # no primal or shadow changed


@pytest.mark.parametrize("way", ["reverse", "inspect", "thunk"])
def test_keyword_arguments_are_refused_naming_the_parameters(rng, way):
    """Before: gk.autodiff's LaunchError ('takes no keyword'), which did not say that c is the program's own
    parameter. Now a ProgramError: its arguments are passed by position, with the spelling to use."""
    u, du, E, dE = _buffers(rng)
    before = [x.copy() for x in (u, du, E, dE)]
    with pytest.raises(gk.ProgramError, match=r"got 'c' as a keyword; a program's arguments are passed by "
                                              r"position \(program prog\(u, E, c\)\)") as info:
        _call(way, gk.Duplicated(u, du), gk.Duplicated(E, dE), c=gk.Active(0.5))
    assert "(prog, u, E, c)" in str(info.value)
    with pytest.raises(gk.ProgramError, match="the keyword 'steps', which is neither"):
        _call(way, gk.Duplicated(u, du), gk.Duplicated(E, dE), gk.Active(0.5), steps=3)
    _unchanged(before, (u, du, E, dE))


def test_defaults_and_star_args_are_taken(rng):
    """What the signature accepts is accepted: a defaulted parameter left out, extra arguments into *args."""
    def with_default(u, E, c=2.0):
        prog(u, E, c)

    def with_star(u, E, *rest):
        prog(u, E, rest[0])
    u, _, E, dE = _buffers(rng)
    du = np.zeros(N)
    gk.autodiff(with_default, gk.Duplicated(u, du), gk.Duplicated(E, dE))
    np.testing.assert_allclose(du, 2 * 2.0 ** 2 * u, rtol=1e-13)  # d/du sum (c u)^2 = 2 c^2 u
    u, du, E, dE = _buffers(rng)
    assert gk.autodiff(with_star, gk.Duplicated(u, du), gk.Duplicated(E, dE), gk.Active(0.5))[2] == \
        pytest.approx(2 * 0.5 * np.sum(u * u), rel=1e-13)  # d/dc sum (c u)^2 = 2 c sum u^2
    with pytest.raises(gk.ProgramError, match=r"with_star\(u, E, \*rest\) was given 1 argument; it takes at "
                                              r"least 2 arguments; 'E' is missing"):
        gk.autodiff(with_star, gk.Duplicated(u, du))


def test_keyword_only_parameter_without_default_is_refused(rng):
    def needs_keyword(u, E, *, c):
        prog(u, E, c)
    u, du, E, dE = _buffers(rng)
    with pytest.raises(gk.ProgramError, match=r"keyword-only parameter 'c' without a default"):
        gk.autodiff(needs_keyword, gk.Duplicated(u, du), gk.Duplicated(E, dE))


def test_annotation_errors_name_the_parameter(rng):
    """Before: 'argument 0', 'shadow of 'argument 0''. Now the program's parameter names, as kernels' messages."""
    u, du, E, dE = _buffers(rng)
    with pytest.raises(gk.AnnotationError, match=r"shadow of 'u' must be .*\nhint: e\.g\. gk\.Duplicated\(u, "):
        gk.autodiff(prog, gk.Duplicated(u, np.zeros(N - 1)), gk.Duplicated(E, dE), gk.Active(0.5))
    with pytest.raises(gk.AnnotationError, match=r"argument 'E' is Active but is ndarray"):
        gk.autodiff(prog, gk.Duplicated(u, du), gk.Active(E), gk.Active(0.5))
    with pytest.raises(gk.AnnotationError, match=r"argument 'u' of the program is Duplicated but is not a float "
                                                 r"array \(got an array of dtype int64\)"):
        gk.autodiff(prog, gk.Duplicated(np.arange(N), np.zeros(N, np.int64)), gk.Duplicated(E, dE), gk.Active(0.5))
    with pytest.raises(gk.AnnotationError, match=r"argument 'c' is Active, a reverse-mode annotation"):
        gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(E, dE), gk.Active(0.5), mode=gk.Forward)
    forward, reverse = gk.autodiff_thunk(prog, gk.Duplicated, gk.Duplicated, gk.Active)
    with pytest.raises(gk.AnnotationError, match=r"argument 'c' was declared Active in autodiff_thunk but is "
                                                 "Const here"):
        forward(gk.Duplicated(u, du), gk.Duplicated(E, dE), 0.5)
    with pytest.raises(gk.ProgramError, match=r"'E' overlaps another annotated array"):
        gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(u[:1], dE), gk.Active(0.5))


@pytest.mark.parametrize("activity", [0.5, 6, float, None])
def test_autodiff_thunk_of_a_program_refuses_activities_that_are_no_annotation(activity):
    """As for a kernel (tests/runtime/test_hostile_inputs.py): a plain value (the argument itself, as `autodiff`
    takes it) is not an activity. Session 56 (porting): a program's autodiff_thunk took 6 as the class `int`,
    then refused the same 6 at forward(), "argument 'c' was declared int in autodiff_thunk but is Const here"."""
    with pytest.raises(gk.AnnotationError, match=r"autodiff_thunk: the activity of 'c' must be an annotation class "
                                                 r"\(gk.Const, gk.Active, gk.Duplicated, ...\) or an annotated "
                                                 r"example; got "):
        gk.autodiff_thunk(prog, gk.Duplicated, gk.Duplicated, activity)
    forward, reverse = gk.autodiff_thunk(prog, gk.Duplicated, gk.Duplicated, gk.Const(0.5))
    u, E = np.linspace(0.5, 1.5, N), np.zeros(1)
    du, dE = np.zeros(N), np.ones(1)
    tape = forward(gk.Duplicated(u, du), gk.Duplicated(E, dE), 0.5)
    reverse(gk.Duplicated(u, du), gk.Duplicated(E, dE), 0.5, tape)
    np.testing.assert_allclose(du, 2 * 0.25 * u, rtol=1e-14)  # E = sum (c u)^2: dE/du = 2 c^2 u


def test_refused_launch_argument_is_named_by_the_kernel_parameter(rng):
    """A launch taking a scalar host code reduced from an active array names the kernel's parameter."""
    def reduced(u, E, c):
        # a median stays derived (u.sum() of an active u is a read since session 57, differentiated)
        gk.launch(scale_into, N, u, np.zeros_like(u), np.median(u))
    u, du, E, dE = _buffers(rng)
    with pytest.raises(gk.ProgramError, match=r"kernel 'scale_into'\) takes a scalar \(argument 'c'\)"):
        gk.autodiff(reduced, gk.Duplicated(u, du), gk.Duplicated(E, dE), gk.Active(0.5))


def test_check_grad_of_a_program_names_its_parameters(rng):
    """check_grad's failure lines name a program's arguments by its parameters (were arg0, arg1, ...)."""
    def constant_scale(u, E, c):  # float(): no derivative through the scale wanted, so d/du is not the loss's
        w = np.zeros_like(u)
        gk.launch(scale_into, N, u, w, c * float(u.sum()))
        gk.launch(energy, N, w, E)
    u, du, E, dE = _buffers(rng)
    report = check_grad(constant_scale, gk.Duplicated(u, du), gk.Duplicated(E, dE), gk.Active(0.5),
                        raise_on_failure=False)
    assert not report.ok and any(line.startswith("d loss / d u[") for line in report.failures)


def test_check_grad_of_a_program_checks_its_arguments_first(rng):
    """Before: the program's TypeError from check_grad's first primal call."""
    u, du, E, dE = _buffers(rng)
    with pytest.raises(gk.ProgramError, match=r"check_grad of program prog\(u, E, c\) was given 2 arguments"):
        check_grad(prog, gk.Duplicated(u, du), gk.Duplicated(E, dE))
