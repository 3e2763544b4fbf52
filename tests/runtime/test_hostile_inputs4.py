"""Hostile inputs, round four (docs/errors.md, "Hostile inputs"; docs/environment.md): GRADKERN_* variables with
values that are no number, threads calling one kernel or program at once (and another thread calling the
functions a recording wraps), an exception raised from inside a custom rule at each phase, kernels and rules
pickled (multiprocessing), and the misuses a newcomer makes of annotations and verbs. Each refusal is a
GradkernError naming what was wrong, with every buffer as it was; each accepted input gives the plain result."""

from __future__ import annotations

import ast
import math
import multiprocessing
import os
import pickle
import subprocess
import sys
import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import gradkern as gk
from gradkern.environment import env_float, env_int

N = 6
SRC = Path(gk.__file__).parent
SQRT, ARRAY, CONCATENATE = math.sqrt, np.array, np.concatenate  # the functions a recording wraps, as imported


@gk.kernel
def square(x, y):
    i = gk.tid()
    y[i] = x[i] * x[i]


@gk.kernel
def scaled(a, x, y):
    i = gk.tid()
    y[i] = a * x[i] + 0.5 * y[i]


@gk.func
def halved(v):
    return 0.5 * v


@gk.custom_rule(reads=("x",), writes=("y",))
def doubled(x, y):
    y[...] = 2.0 * x


@doubled.reverse
def _(config, tape, x, y):
    if isinstance(x, gk.Duplicated):
        x.dval[...] += 2.0 * y.dval
    y.dval[...] = 0.0
    return (None, None)


def snapshot(*arrays):
    """A check that each array holds, bit for bit, what it held when this was called."""
    before = [(a, np.asarray(a).tobytes()) for a in arrays]
    return lambda: all(np.asarray(a).tobytes() == raw for a, raw in before)


def refused(error, match, call, *arrays):
    same = snapshot(*arrays)
    with pytest.raises(error, match=match):
        call()
    assert same()


def unwrapped():
    """No recording's wrapper is left in math or NumPy."""
    return math.sqrt is SQRT and np.array is ARRAY and np.concatenate is CONCATENATE


# ---- environment variables ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["junk", "1.5", "0x10", "-3", "12 apples"])
def test_an_integer_variable_that_is_no_integer_of_its_range_names_itself(monkeypatch, value):
    monkeypatch.setenv("GRADKERN_TEST_INT", value)
    with pytest.raises(gk.ConfigurationError, match=rf"GRADKERN_TEST_INT must be an integer >= 0, got '{value}'"):
        env_int("GRADKERN_TEST_INT", 7)


@pytest.mark.parametrize("value", ["junk", "nan", "-0.5", ""])
def test_a_real_variable_that_is_no_number_of_its_range_names_itself(monkeypatch, value):
    monkeypatch.setenv("GRADKERN_TEST_REAL", value)
    if not value:  # blank: the default
        assert env_float("GRADKERN_TEST_REAL", 2.0) == 2.0
        return
    with pytest.raises(gk.ConfigurationError, match=rf"GRADKERN_TEST_REAL must be a number >= 0, got '{value}'"):
        env_float("GRADKERN_TEST_REAL", 2.0)


def test_good_values_and_blanks_are_taken(monkeypatch):
    for value, want in [(" 12 ", 12), ("", 7), ("  ", 7), ("0", 0), ("1_000", 1000)]:
        monkeypatch.setenv("GRADKERN_TEST_INT", value)
        assert env_int("GRADKERN_TEST_INT", 7) == want
    monkeypatch.setenv("GRADKERN_TEST_INT", "-4")
    assert env_int("GRADKERN_TEST_INT", 7, minimum=None) == -4
    monkeypatch.setenv("GRADKERN_TEST_REAL", "inf")
    assert env_float("GRADKERN_TEST_REAL", 2.0) == math.inf  # GRADKERN_SPARSE_RATIO=inf: always
    monkeypatch.delenv("GRADKERN_TEST_INT")
    assert env_int("GRADKERN_TEST_INT", 7) == 7


def _numbers_read_raw(tree: ast.AST) -> list[int]:
    """Lines where int() or float() is applied straight to an environment read."""
    def is_environ(node):
        text = ast.unparse(node)
        return "os.environ" in text or "getenv" in text
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            and n.func.id in ("int", "float") and n.args and is_environ(n.args[0])]


def test_every_number_read_from_the_environment_goes_through_the_checked_readers():
    """`int(os.environ.get(...))` at import made `import gradkern` fail with `invalid literal for int() with base
    10: 'junk'`, naming no variable (session 51): every GRADKERN_* number is read by environment.env_int/float."""
    raw = {str(p.relative_to(SRC)): lines for p in SRC.rglob("*.py")
           if (lines := _numbers_read_raw(ast.parse(p.read_text("utf-8"))))}
    assert not raw, raw


@pytest.mark.parametrize(("name", "module"), [("GRADKERN_LANE_GROUP", "gradkern.backends.numba_cpu"),
                                              ("GRADKERN_SPARSE_RATIO", "gradkern.backends.numba_plan"),
                                              ("GRADKERN_TEMPORAL_TILE", "gradkern.runtime.blocked")])
def test_importing_with_a_bad_number_is_a_configuration_error_naming_the_variable(name, module):
    """Read at the import of the module that uses it (the CPU backend's at the first launch)."""
    env = {**os.environ, name: "junk"}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC.parent), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", f"import {module}"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0
    assert f"gradkern.errors.ConfigurationError: environment variable {name} must be" in done.stderr
    assert "'junk'" in done.stderr and "invalid literal" not in done.stderr


def test_a_dump_folder_that_cannot_be_made_is_refused_before_anything_runs(tmp_path, monkeypatch, rng):
    """GRADKERN_DUMP naming a file (or a folder under one) raised FileExistsError from inside the pipeline."""
    @gk.kernel
    def cubed(x, y):  # a kernel of its own: its first launch specialises it, which is when stages are dumped
        i = gk.tid()
        y[i] = x[i] * x[i] * x[i]

    (tmp_path / "a-file").write_text("")
    x, y = rng.uniform(0.5, 2.0, N), np.zeros(N)
    for where in (tmp_path / "a-file", tmp_path / "a-file" / "below"):
        monkeypatch.setenv("GRADKERN_DUMP", str(where))
        refused(gk.ConfigurationError, "GRADKERN_DUMP=.* names no folder", lambda: gk.launch(cubed, N, x, y), x, y)
    monkeypatch.setenv("GRADKERN_DUMP", str(tmp_path / "dumps"))
    gk.launch(cubed, N, x, y)
    np.testing.assert_array_equal(y, x * x * x)
    assert any((tmp_path / "dumps").iterdir())


def test_a_negative_hostcuda_shuffle_seed_is_refused_naming_it(monkeypatch):
    """NumPy's `default_rng(-1)` raised its own ValueError (`expected non-negative integer`)."""
    from gradkern.backends.hostcuda import HostCudaBackend

    monkeypatch.setenv("GRADKERN_HOSTCUDA_SHUFFLE", "-1")
    with pytest.raises(gk.LaunchError, match=r"GRADKERN_HOSTCUDA_SHUFFLE='-1'.*a seed >= 0"):
        HostCudaBackend()


# ---- threads ------------------------------------------------------------------------------------------------------

def _program(x, y, a, steps):
    for _ in range(steps):
        gk.launch(square, N, x, y)
        b = np.array(y)  # a derived array: the wrapper acts in this (recording) thread
        assert math.sqrt(4.0) == 2.0
        gk.launch(scaled, N, a, y, x)
        del b


def _gradient(seed):
    r = np.random.default_rng(seed)
    x, y = r.uniform(0.5, 1.0, N), r.uniform(0.5, 1.0, N)
    dx, dy = np.zeros(N), r.uniform(0.5, 2.0, N)
    grads = gk.autodiff(_program, gk.Duplicated(x, dx), gk.Duplicated(y, dy), gk.Active(0.7), gk.Const(3))
    return x, y, dx, dy, grads[2]


def test_programs_recorded_in_threads_at_once_while_another_thread_calls_what_they_wrap():
    """Four threads differentiate one program at once on their own buffers: each gradient is bit for bit the
    one a lone call gives. A fifth thread calls math.sqrt, np.array and np.concatenate all the while: it gets
    plain floats and arrays, the functions' own results, never a derived value (docs/host-code.md); afterwards
    no wrapper is left."""
    alone = [_gradient(seed) for seed in range(4)]
    stop, wrong, calls = threading.Event(), [], [0]

    def bystander():
        while not stop.is_set():
            k = calls[0]
            v, a = math.sqrt(2.0 + k), np.array([1.0, 2.0 + k])
            c = np.concatenate([a, a])
            if type(v) is not float or v != SQRT(2.0 + k) or type(a) is not np.ndarray \
                    or type(c) is not np.ndarray or c[3] != 2.0 + k:
                wrong.append((k, type(v), type(a), type(c)))
            calls[0] += 1

    other = threading.Thread(target=bystander)
    other.start()
    try:
        with ThreadPoolExecutor(4) as pool:
            together = list(pool.map(_gradient, range(4)))
    finally:
        stop.set()
        other.join()
    assert calls[0] > 0 and not wrong, wrong[:3]
    for one, other_ in zip(alone, together, strict=True):
        for a, b in zip(one, other_, strict=True):
            np.testing.assert_array_equal(a, b)
    assert unwrapped()


def test_a_thread_specialising_a_kernel_while_another_launches_one():
    """Thread A's first launches of a kernel (generated, compiled or loaded) while thread B launches an already
    specialised one 200 times on its own buffers: both right, B never blocked into a wrong result."""
    @gk.kernel
    def shifted_square(x, y, s):  # a kernel object of its own: its first specialisation happens in thread A
        i = gk.tid()
        y[i] = x[i] * x[i] + s

    rng = np.random.default_rng(5)
    xa, xb = rng.uniform(0.5, 2.0, N), rng.uniform(0.5, 2.0, N)
    gk.launch(square, N, xb, np.zeros(N))

    def first_launches():
        y, dx = np.zeros(N), np.zeros(N)
        gk.launch(shifted_square, N, xa, y, 0.25)
        gk.autodiff(shifted_square, gk.Duplicated(xa, dx), gk.Duplicated(np.zeros(N), np.ones(N)), 0.25)
        return y, dx

    def launches():
        out = []
        for _ in range(200):
            y = np.zeros(N)
            gk.launch(square, N, xb, y)
            out.append(y)
        return out

    with ThreadPoolExecutor(2) as pool:
        a, b = pool.submit(first_launches), pool.submit(launches)
        (y, dx), ys = a.result(), b.result()
    np.testing.assert_array_equal(y, xa * xa + 0.25)
    np.testing.assert_array_equal(dx, 2.0 * xa)  # d(x^2 + s)/dx = 2x: one rounding, exact for a power of two
    for y in ys:
        np.testing.assert_array_equal(y, xb * xb)


def _gradient_using(s, arr, seed):
    """A program taking `s` and `arr` as constants (captured, unannotated): y = a x + y/2, then x = s arr + x/2.
    Returns (dx, dy, da) from seeds w on y and v on x, against their values by hand."""
    def using(x, y, a):
        gk.launch(scaled, N, a, x, y)
        gk.launch(scaled, N, s, arr, x)

    r = np.random.default_rng(seed)
    x, y, w, v = (r.uniform(0.5, 2.0, N) for _ in range(4))
    x0, dx, dy = x.copy(), v.copy(), w.copy()
    grads = gk.autodiff(using, gk.Duplicated(x, dx), gk.Duplicated(y, dy), gk.Active(0.7))
    # dL/dx0 = a w + v/2, dL/dy0 = w/2, dL/da = w . x0: each a product or two, a sum of N, in float64
    np.testing.assert_allclose(dx, 0.7 * w + 0.5 * v, rtol=1e-15)
    np.testing.assert_array_equal(dy, 0.5 * w)
    np.testing.assert_allclose(grads[2], w @ x0, rtol=1e-14)
    np.testing.assert_allclose(x, float(s) * np.asarray(arr) + 0.5 * x0, rtol=1e-15)


def test_a_derived_value_kept_past_its_call_or_handed_to_another_thread_is_a_constant_there():
    """A value host code computed from an active array inside one program call (`y[1] * 1.0`, `np.array(y)`)
    kept past the call, or handed to another thread's program while the first still records, is a constant to
    any other call: it depends on nothing that call differentiates. Each was refused there as if it were the
    other call's own (`takes a scalar that host code computed from an active array ... its derivative would be
    lost`, session 51)."""
    kept = []

    def making(x, y):
        gk.launch(square, N, x, y)
        kept.extend([y[1] * 1.0, np.array(y)])

    r = np.random.default_rng(8)
    gk.autodiff(making, gk.Duplicated(r.uniform(0.5, 2.0, N), np.zeros(N)), gk.Duplicated(np.zeros(N), np.ones(N)))
    s, arr = kept
    _gradient_using(s, arr, 1)  # a later call, this thread
    with ThreadPoolExecutor(1) as pool:
        pool.submit(_gradient_using, s, arr, 2).result()  # a later call, another thread

    handed, done = [], threading.Event()
    ready = threading.Event()

    def making_slowly(x, y):  # still recording while the other thread's program uses what it made
        gk.launch(square, N, x, y)
        handed.extend([y[2] * 1.0, np.array(y)])
        ready.set()
        assert done.wait(120)

    def other():
        try:
            assert ready.wait(120)
            _gradient_using(*handed, 3)
        finally:
            done.set()

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(gk.autodiff, making_slowly, gk.Duplicated(r.uniform(0.5, 2.0, N), np.zeros(N)),
                            gk.Duplicated(np.zeros(N), np.ones(N)))
        second = pool.submit(other)
        second.result()
        first.result()
    assert unwrapped()


# ---- an exception from inside a custom rule -----------------------------------------------------------------------

class Stop(Exception):
    pass


def _failing_rule(fail):
    """A rule y = 2 x whose primal, reverse or forward raises Stop while `fail[0]` names that phase."""
    @gk.custom_rule(reads=("x",), writes=("y",))
    def twice(x, y):
        if fail[0] == "record":
            raise Stop("in the primal")
        y[...] = 2.0 * x

    @twice.reverse
    def _(config, tape, x, y):
        if fail[0] == "reverse":
            raise Stop("in the reverse")
        if isinstance(x, gk.Duplicated):
            x.dval[...] += 2.0 * y.dval
        y.dval[...] = 0.0
        return (None, None)

    @twice.forward
    def _(config, x, y):
        if fail[0] == "forward":
            raise Stop("in the forward")
        y.val[...] = 2.0 * x.val
        y.dval[...] = 2.0 * x.dval

    def program(x, y, z):
        twice(x, y)
        gk.launch(square, N, y, z)

    return program


def _buffers(seed):
    r = np.random.default_rng(seed)
    x = r.uniform(0.5, 2.0, N)
    return x, np.zeros(N), np.zeros(N), np.zeros(N), np.zeros(N), r.uniform(0.5, 2.0, N)


def _right_afterwards(program, fail):
    """The next call, with nothing failing, is a fresh one: d(sum dz * (2x)^2)/dx = 8 x dz."""
    fail[0] = None
    x, y, z, dx, dy, dz = _buffers(9)
    dz0 = dz.copy()
    gk.autodiff(program, gk.Duplicated(x, dx), gk.Duplicated(y, dy), gk.Duplicated(z, dz))
    np.testing.assert_allclose(dx, 8.0 * x * dz0, rtol=1e-15)  # a few roundings of one product
    assert unwrapped()


@pytest.mark.parametrize("phase", ["record", "forward", "reverse-first", "reverse-later"])
def test_a_rule_that_raises_at_each_phase(phase):
    """record: the rule's primal raises while the program records: nothing ran after it, no shadow changed.
    forward: its forward raises in forward mode: the launches before it (none here) updated their tangents.
    reverse-first: its reverse raises the first time its argument pattern is seen: the program kept its
    shadows and puts them back (docs/custom-rules.md). reverse-later: its reverse raises after the pattern
    passed once: the sweep stops where it was, the shadows hold what it had accumulated (square's reverse:
    dy += 2 y dz, dz cleared), as a checkpointed step raising in a recomputation does (docs/programs.md).
    Each time: the exception is the rule's own, every array writable, no wrapper left, the next call right."""
    fail = [None]
    program = _failing_rule(fail)
    if phase == "reverse-later":
        _right_afterwards(program, fail)  # the pattern passes once
    fail[0] = phase.split("-")[0]
    x, y, z, dx, dy, dz = _buffers(3)
    x0, dz0 = x.copy(), dz.copy()
    kept = snapshot(dx, dy, dz)
    args = gk.Duplicated(x, dx), gk.Duplicated(y, dy), gk.Duplicated(z, dz)
    with pytest.raises(Stop):
        gk.autodiff(program, *args, mode=gk.Forward if phase == "forward" else gk.Reverse)
    np.testing.assert_array_equal(x, x0)
    if phase == "reverse-later":
        np.testing.assert_array_equal(dy, 2.0 * (2.0 * x0) * dz0)  # 2 y dz with y = 2 x: exact scalings
        assert not dz.any() and not dx.any()
    else:
        assert kept()
    if phase in ("record", "forward"):
        assert not y.any() and not z.any()  # the rule raised first: no launch ran
    else:
        np.testing.assert_array_equal(z, (2.0 * x0) ** 2)  # the forward ran whole
    assert all(a.flags.writeable for a in (x, y, z, dx, dy, dz)) and unwrapped()
    _right_afterwards(program, fail)


# ---- pickled kernels, device functions and rules ------------------------------------------------------------------

def test_kernels_device_functions_and_rules_pickle_by_reference():
    """Pickling a kernel raised `PicklingError: Can't pickle <function square>: it's not the same object as
    ...square` (the decorated function inside it): now each pickles by module and name, as a function does."""
    for obj in (square, halved, doubled):
        assert pickle.loads(pickle.dumps(obj)) is obj

    @gk.kernel
    def local(x, y):
        i = gk.tid()
        y[i] = x[i]

    with pytest.raises((pickle.PicklingError, AttributeError), match="local"):
        pickle.dumps(local)  # defined inside a function: as a local function, it cannot be pickled


def _child_gradient(kernel, x):
    """In a spawned process: the gradient of the kernel it was sent (the interpreter backend: no compile)."""
    dx = np.zeros_like(x)
    gk.autodiff(kernel, gk.Duplicated(x, dx), gk.Duplicated(np.zeros_like(x), np.ones_like(x)), backend="interp")
    return dx


def test_a_kernel_sent_to_a_spawned_process_is_differentiated_there(rng):
    x = rng.uniform(0.5, 2.0, N)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        dx = pool.submit(_child_gradient, square, x).result(timeout=120)
    np.testing.assert_array_equal(dx, 2.0 * x)


# ---- misuses a newcomer makes -------------------------------------------------------------------------------------

def test_annotations_nested_or_on_what_they_cannot_hold_are_refused(rng):
    x, y, dx, dy = rng.uniform(0.5, 2.0, N), rng.uniform(0.5, 2.0, N), np.zeros(N), rng.uniform(0.5, 2.0, N)
    everything = (x, y, dx, dy)
    refused(gk.AliasingError, "shadow of 'x' shares memory with 'x'",
            lambda: gk.autodiff(square, gk.Duplicated(x, x), gk.Duplicated(y, dy)), *everything)
    refused(gk.AnnotationError, "argument 'x' is Duplicated but its primal is Duplicated",
            lambda: gk.autodiff(square, gk.Duplicated(gk.Duplicated(x, dx), dx), gk.Duplicated(y, dy)), *everything)
    refused(gk.LaunchError, "argument 'x' is indexed .* got Duplicated",
            lambda: gk.autodiff(square, gk.Const(gk.Duplicated(x, dx)), gk.Duplicated(y, dy)), *everything)
    refused(gk.AnnotationError, "argument 'a' is Active but is Const",
            lambda: gk.autodiff(scaled, gk.Active(gk.Const(2.0)), gk.Const(x), gk.Duplicated(y, dy)), *everything)
    refused(gk.AnnotationError, "argument 'a' is Duplicated but its primal is float",
            lambda: gk.autodiff(scaled, gk.Duplicated(2.0, 1.0), gk.Const(x), gk.Duplicated(y, dy)), *everything)
    refused(gk.LaunchError, "argument 'x' is indexed .* got Duplicated",
            lambda: gk.launch(square, N, gk.Duplicated(x, dx), y), *everything)


def test_verb_options_of_the_wrong_kind_are_refused(rng):
    """mode=, backend= and dim= of gk.autodiff as a newcomer spells them (a string mode, an unknown backend, a
    dim as text, past int64): each names the option, what it takes and what came; nothing changed."""
    x, y, dx, dy = rng.uniform(0.5, 2.0, N), rng.uniform(0.5, 2.0, N), np.zeros(N), rng.uniform(0.5, 2.0, N)

    def grad(**options):
        return lambda: gk.autodiff(square, gk.Duplicated(x, dx), gk.Duplicated(y, dy), **options)

    refused(gk.LaunchError, "mode must be gk.Reverse or gk.Forward, got 'reverse'", grad(mode="reverse"),
            x, y, dx, dy)
    refused(gk.LaunchError, r"backend must be one of .*, got 'gpu'", grad(backend="gpu"), x, y, dx, dy)
    refused(gk.LaunchError, "dim must be a non-negative int .* got '6'", grad(dim="6"), x, y, dx, dy)
    refused(gk.LaunchError, r"asks for 1180591620717411303424 threads; a launch runs at most 2\*\*63 - 1",
            grad(dim=2 ** 70), x, y, dx, dy)


def test_what_is_no_kernel_is_refused_at_decoration_or_by_the_verb(rng):
    x, y = rng.uniform(0.5, 2.0, N), np.zeros(N)
    with pytest.raises(gk.KernelSyntaxError, match="must be defined with a 'def' statement"):
        gk.kernel(lambda x: None)
    for builtin in (math.sqrt, int):
        with pytest.raises(gk.KernelSyntaxError, match="is not a Python function and cannot be a kernel"):
            gk.kernel(builtin)
    refused(gk.LaunchError, "autodiff takes a @gk.kernel or a Python function .* got NoneType",
            lambda: gk.autodiff(None, gk.Duplicated(x, np.zeros(N))), x, y)


def test_what_a_program_or_a_step_returns_is_not_differentiated(rng):
    """A program's (or a checkpointed step's) return value takes no part in the derivative, whatever it is
    (Enzyme's Const return): the derivatives go through the arrays the program writes, and gk.autodiff returns
    one entry per argument (docs/programs.md#arguments-of-a-program)."""
    def plain(x, y, E):
        gk.launch(square, N, x, y)
        gk.launch(scaled, N, 1.0, y, E)

    def returning(x, y, E):
        def step(t):
            gk.launch(square, N, x, y)
            return y  # ignored, as a program's return value
        gk.checkpointed_loop(step, 1, snapshots=1)
        gk.launch(scaled, N, 1.0, y, E)
        return E.sum(), y, "done"

    grads = []
    for program in (plain, returning):
        x = np.random.default_rng(2).uniform(0.5, 2.0, N)
        dx, dE = np.zeros(N), np.random.default_rng(3).uniform(0.5, 2.0, N)
        out = gk.autodiff(program, gk.Duplicated(x, dx), gk.Duplicated(np.zeros(N), np.zeros(N)),
                          gk.Duplicated(np.zeros(N), dE))
        assert out == (None, None, None)
        grads.append(dx)
    np.testing.assert_array_equal(grads[0], grads[1])


@pytest.mark.parametrize("make", [lambda x: gk.Duplicated(x), lambda x: gk.Duplicated(x, x, x),
                                  lambda x: gk.DuplicatedNoNeed(x), lambda x: gk.BatchDuplicated(x),
                                  lambda x: gk.Duplicated()])
def test_an_annotation_without_its_shadow_is_an_annotation_error(make):
    """A newcomer's gk.Duplicated(x) (the shadow left out) is gk.AnnotationError naming what it takes, not Python's
    TypeError from a dataclass constructor (annotations.py)."""
    with pytest.raises(gk.AnnotationError, match=r"takes the primal and .*, got \d arguments?"):
        make(np.ones(3))
