"""Hostile inputs, round two (docs/errors.md, "Hostile inputs"): arrays NumPy can make that a kernel cannot take
as they are (byte-swapped, unaligned on the CUDA path, masked, np.matrix, dtypes the language has not), numbers
that do not fit the parameter's type, sizes that are not sizes, outputs and shadows whose elements overlap,
threads sharing a kernel, a kernel redefined under its name. Each refusal is a `gk.GradkernError` subclass naming
the argument, what was expected and what came, through every verb (launch, reverse and forward autodiff, split
thunks, a program), with every buffer bitwise as it was; each accepted input gives the plain array's result."""

from __future__ import annotations

import numpy as np
import pytest

import gradkern as gk
from gradkern.backends import set_default
from gradkern.backends.hostcuda import compiler

N = 6
HOSTCUDA = pytest.param("hostcuda", marks=pytest.mark.skipif(compiler() is None, reason="g++ is not on the PATH"))


@gk.kernel
def scaled_square(x, y, a, n):
    i = gk.tid()
    if i < n:
        y[i] = a * x[i] * x[i]


X, XY = "'x'", "'(x|y)'"  # a kernel's parameter, or a program's (programs name their parameters: docs/programs.md)
SHADOW = "(shadow|tangent)"


def _on(backend: str) -> dict:
    return {} if backend == "numba" else {"backend": backend}


def unchanged(*arrays):
    before = [(a, np.asarray(a).tobytes()) for a in arrays]
    return lambda: all(np.asarray(a).tobytes() == raw for a, raw in before)


@pytest.mark.parametrize("backend", ["numba", HOSTCUDA])
def test_numpy_scalars_as_consts_of_a_split_thunk(backend, rng):
    """np.float32(2.0) as a Const of autodiff_thunk's forward crashed on hostcuda with an AttributeError: a NumPy
    scalar has an __array_interface__, and the tape's record of what it was made from took it for an array."""
    forward, reverse = gk.autodiff_thunk(scaled_square, gk.Duplicated, gk.Duplicated, gk.Const, gk.Const,
                                         **_on(backend))
    for a, n in ((np.float32(2.0), np.int32(N)), (np.float64(2.0), np.int64(N)), (2.0, N)):
        x, dx, y, dy = rng.uniform(0.5, 2.0, N), np.zeros(N), np.zeros(N), rng.uniform(0.5, 2.0, N)
        x0, dy0 = x.copy(), dy.copy()
        args = gk.Duplicated(x, dx), gk.Duplicated(y, dy), gk.Const(a), gk.Const(n)
        tape = forward(*args)
        reverse(*args, tape)
        np.testing.assert_allclose(dx, 2 * 2.0 * x0 * dy0, rtol=1e-15)  # d(a x^2)/dx = 2 a x: one rounding
        np.testing.assert_allclose(y, 2.0 * x0 * x0, rtol=1e-15)


@pytest.fixture(params=["cpu", HOSTCUDA])
def on(request):
    """The backend of every NumPy launch for one test (set_default: programs included)."""
    before = set_default(request.param)
    yield request.param
    set_default(before)


def _program(x, y, a, n):
    gk.launch(scaled_square, N, x, y, a, n)


def _verbs(x, dx, y, dy, a=2.0, n=N) -> dict:
    """One call of each verb on these primals and shadows (each a thunk to run)."""
    def split():
        forward, reverse = gk.autodiff_thunk(scaled_square, gk.Duplicated, gk.Duplicated, gk.Const, gk.Const)
        args = gk.Duplicated(x, dx), gk.Duplicated(y, dy), gk.Const(a), gk.Const(n)
        reverse(*args, forward(*args))
    return {
        "launch": lambda: gk.launch(scaled_square, N, x, y, a, n),
        "reverse": lambda: gk.autodiff(scaled_square, gk.Duplicated(x, dx), gk.Duplicated(y, dy), gk.Const(a),
                                       gk.Const(n)),
        "forward": lambda: gk.autodiff(scaled_square, gk.Duplicated(x, dx), gk.Duplicated(y, dy), gk.Const(a),
                                       gk.Const(n), mode=gk.Forward),
        "split": split,
        "program": lambda: gk.autodiff(_program, gk.Duplicated(x, dx), gk.Duplicated(y, dy), gk.Const(a),
                                       gk.Const(n)),
    }


def _fresh(rng):
    return rng.uniform(0.5, 2.0, N), np.zeros(N), np.zeros(N), rng.uniform(0.5, 2.0, N)


def _refused(error, match, x, dx, y, dy, **scalars):
    """Every verb raises `error` matching `match`, every buffer bitwise as it was."""
    for verb, call in _verbs(x, dx, y, dy, **scalars).items():
        same = unchanged(x, dx, y, dy)
        with pytest.raises(error, match=match):
            call()
        assert same(), verb


def _unaligned(values: np.ndarray) -> np.ndarray:
    a = np.frombuffer(bytearray(values.nbytes + 1), dtype=values.dtype, offset=1, count=values.size)
    a[:] = values
    return a


def test_byte_swapped_arrays_are_refused_with_the_conversion(on, rng):
    x, dx, y, dy = _fresh(rng)
    _refused(gk.LaunchError, rf"argument {X} has dtype >f8(.|\n)*non-native byte order", x.astype(">f8"), dx, y, dy)
    for verb, call in _verbs(x, dx.astype(">f8"), y, dy).items():
        if verb != "launch":
            same = unchanged(x, y, dy)
            with pytest.raises(gk.AnnotationError, match=rf"{SHADOW} of {X} must be a NumPy float64 array.*got a "
                                                          r"NumPy >f8 array"):
                call()
            assert same(), verb


def test_unaligned_arrays_run_on_the_cpu_and_are_refused_on_the_cuda_path(on, rng):
    """An unaligned float64 array (np.frombuffer at offset 1) is undefined behaviour in C++ and faults on a GPU:
    the CUDA backend and hostcuda refuse it, naming the argument and the aligned copy; Numba, which types it as
    an unaligned array, gives the plain array's result."""
    x, dx, y, dy = _fresh(rng)
    ux, udy, dy0 = _unaligned(x), _unaligned(dy), dy.copy()
    assert not ux.flags.aligned
    if on == "cpu":
        for verb, call in _verbs(ux, dx, y, dy).items():
            call()
        gk.launch(scaled_square, N, ux, y, 2.0, N)
        np.testing.assert_array_equal(y, 2.0 * x * x)
        dx[:] = 0
        gk.autodiff(scaled_square, gk.Duplicated(x, dx), gk.Duplicated(y, udy), gk.Const(2.0), gk.Const(N))
        np.testing.assert_allclose(dx, 4.0 * x * dy0, rtol=1e-15)  # d(2 x^2)/dx = 4x: one rounding
        return
    _refused(gk.LaunchError, r"argument 'x' is not aligned.*multiples of 8(.|\n)*x.copy\(\)", ux, dx, y, dy)
    for verb, call in _verbs(x, dx, y, udy).items():
        if verb != "launch":
            same = unchanged(x, dx, y, udy)
            with pytest.raises(gk.GradkernError, match=r"not aligned"):
                call()
            assert same(), verb


def test_masked_arrays_and_matrices_are_refused(on, rng):
    x, dx, y, dy = _fresh(rng)
    _refused(gk.LaunchError, r"argument 'x' is a masked array", np.ma.masked_array(x, mask=[0, 1] * (N // 2)),
             dx, y, dy)
    with pytest.warns(PendingDeprecationWarning):  # NumPy's, on making a matrix
        matrix = np.matrix(x)
    same = unchanged(x, y)
    with pytest.raises(gk.GradkernError, match=r"'x' is indexed with 1 index but the argument passed for it has 2 "
                                               r"dimensions"):
        gk.launch(scaled_square, N, matrix, y, 2.0, N)
    assert same()


@pytest.mark.parametrize("dtype", [object, np.complex128, np.bool_, [("a", "f8")]], ids=str)
def test_dtypes_the_language_has_not_are_refused_as_primals_and_shadows(on, rng, dtype):
    x, dx, y, dy = _fresh(rng)
    _refused(gk.GradkernError, r"argument ('x' has dtype .*; kernels take arrays of float32|'x' is Duplicated but is a "
                               r"NumPy bool array|'x' of the program is Duplicated but is not a float array)",
             np.ones(N, dtype), dx, y, dy)
    for verb, call in _verbs(x, np.ones(N, dtype), y, dy).items():
        if verb != "launch":
            same = unchanged(x, y, dy)
            with pytest.raises(gk.AnnotationError, match=rf"{SHADOW} of {X} must be a NumPy float64 array.*got"):
                call()
            assert same(), verb


def test_a_shadow_of_another_dtype_than_its_primal_is_refused(on, rng):
    x, dx, y, dy = _fresh(rng)
    for verb, call in _verbs(x, dx.astype(np.float32), y, dy).items():
        if verb != "launch":
            same = unchanged(x, y, dy)
            with pytest.raises(gk.AnnotationError, match=rf"{SHADOW} of {X} must be a NumPy float64 array.*"
                                                          r"got a NumPy float32 array"):
                call()
            assert same(), verb


def test_zero_strides_where_a_kernel_writes_are_aliasing_errors(on, rng):
    """np.broadcast_to's view is read-only (refused as such); a writable zero-stride view as an output, or as any
    shadow, would have every thread write one element: an AliasingError naming the argument."""
    x, dx, y, dy = _fresh(rng)
    zero = np.lib.stride_tricks.as_strided(np.zeros(1), (N,), (0,))
    _refused(gk.GradkernError, r"'y'.*read-only|'y'.*overlap", x, dx, np.broadcast_to(np.zeros(1), (N,)), dy)
    _refused(gk.AliasingError, r"'y'.*overlap in memory \(a broadcast view, stride 0", x, dx, zero, dy)
    for shadows in ((zero, dy), (dx, zero)):
        for verb, call in _verbs(x, *shadows[:1], y, *shadows[1:]).items():
            if verb != "launch":
                same = unchanged(x, y)
                with pytest.raises(gk.AliasingError, match=rf"{SHADOW} of {XY} has elements that overlap in memory"):
                    call()
                assert same(), verb


def test_shadows_that_are_views_of_their_primal_are_refused(on, rng):
    x, dx, y, dy = _fresh(rng)
    for shadows in ((x[:], dy), (dx, y[::1])):
        for verb, call in _verbs(x, shadows[0], y, shadows[1]).items():
            if verb != "launch":
                same = unchanged(x, y, dx, dy)
                with pytest.raises(gk.AliasingError, match=r"the shadow of '[xy]' shares memory with '[xy]'"):
                    call()
                assert same(), verb


def test_memmaps_are_arrays_like_any_other(on, rng, tmp_path):
    x, dx, y, dy = _fresh(rng)
    mx = np.memmap(tmp_path / "x", dtype=np.float64, mode="w+", shape=(N,))
    my = np.memmap(tmp_path / "y", dtype=np.float64, mode="w+", shape=(N,))
    mx[:] = x
    gk.launch(scaled_square, N, mx, my, 2.0, N)
    np.testing.assert_array_equal(my, 2.0 * x * x)
    gk.autodiff(scaled_square, gk.Duplicated(mx, dx), gk.Duplicated(my, dy.copy()), gk.Const(2.0), gk.Const(N))
    np.testing.assert_allclose(dx, 4.0 * x * dy, rtol=1e-15)  # d(2 x^2)/dx = 4x: one rounding


def test_numbers_that_are_no_size(on, rng):
    """A size (dim) must be a non-negative int: NaN, inf, a float and a bool are refused. As a kernel's scalar, a
    bool is the language's bool (Python's True == 1: `i < True` holds for thread 0 alone), and an int past int64 is
    refused; a Python int is never bound as int32, so it cannot wrap."""
    x, dx, y, dy = _fresh(rng)
    for dim in (float("nan"), float("inf"), 6.0, True, -1):
        same = unchanged(x, y)
        with pytest.raises(gk.LaunchError, match=r"dim must be a non-negative int.*got"):
            gk.launch(scaled_square, dim, x, y, 2.0, N)
        assert same()
    same = unchanged(x, y)
    with pytest.raises(gk.LaunchError, match=r"argument 'n' = 1180591620717411303424 does not fit in int64"):
        gk.launch(scaled_square, N, x, y, 2.0, 2**70)
    assert same()
    gk.launch(scaled_square, N, x, y, 2.0, True)
    np.testing.assert_array_equal(y, [2.0 * x[0] ** 2] + [0.0] * (N - 1))
    y[:] = 0
    gk.launch(scaled_square, N, x, y, 2.0, np.int32(3))
    gk.launch(scaled_square, N, x, y, 2.0, 2**33)  # int64, not int32 wrapped to 0 (the previous call's type)
    np.testing.assert_array_equal(y, 2.0 * x * x)


@gk.kernel
def repeated_sum(x, y, n):
    i = gk.tid()
    s = 0.0
    for k in range(n):
        s += x[i]
    y[i] = s


def test_a_loop_bound_must_be_an_integer(on):
    """range() of a float (NaN, inf or integral) is refused at the user's line; of a bool, Python's range(True)."""
    x, y = np.linspace(1.0, 2.0, N), np.zeros(N)
    for n in (float("nan"), float("inf"), 3.0):
        with pytest.raises(gk.KernelTypeError, match=r"range\(\) stop 'n' has type float64; it must be an integer"):
            gk.launch(repeated_sum, N, x, y, n)
        assert not y.any()
    gk.launch(repeated_sum, N, x, y, True)
    np.testing.assert_array_equal(y, x)
    gk.launch(repeated_sum, N, x, y, np.int32(3))
    np.testing.assert_array_equal(y, x + x + x)


def test_threads_sharing_one_kernel_compile_it_once(on, rng, monkeypatch):
    """Eight threads launching and differentiating one kernel none had compiled: every result right, and its
    code generated and compiled once (hostcuda: one library built; Numba: each disk-cached function loaded or
    compiled once in this process)."""
    from concurrent.futures import ThreadPoolExecutor

    from gradkern.backends import hostcuda, numba_cache

    @gk.kernel
    def shared_by_threads(x, y, a):
        i = gk.tid()
        y[i] = a * x[i] * x[i] + 0.25

    built = []
    monkeypatch.setattr(hostcuda, "build", lambda *a, _build=hostcuda.build: built.append(a[:2]) or _build(*a))
    before = len(numba_cache.loaded) + len(numba_cache.compiled)
    xs = [rng.uniform(0.5, 2.0, N) for _ in range(16)]

    def work(k):
        x, y, dy, dx = xs[k], np.zeros(N), np.ones(N), np.zeros(N)
        gk.launch(shared_by_threads, N, x, y, float(k))
        gk.autodiff(shared_by_threads, gk.Duplicated(x, dx), gk.Duplicated(np.zeros(N), dy), gk.Const(float(k)))
        return y, dx

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(16)))
    for k, (y, dx) in enumerate(results):
        np.testing.assert_allclose(y, k * xs[k] ** 2 + 0.25, rtol=1e-15)  # two roundings of one formula
        np.testing.assert_allclose(dx, 2.0 * k * xs[k], rtol=1e-15)
    if on == "hostcuda":
        assert len(built) == len(set(built)), built
    else:
        names = (numba_cache.loaded + numba_cache.compiled)[before:]
        assert len(names) == len(set(names)), names


REDEFINED = '''
import gradkern as gk


@gk.kernel
def redefined(x, y):
    i = gk.tid()
    y[i] = {body}
'''


def test_a_kernel_redefined_under_its_name_runs_its_own_body(on, tmp_path, monkeypatch):
    """The same module file, kernel name and line, two bodies, one process: each kernel object runs its own
    code, never the other's from a cache (memory or disk)."""
    import importlib
    import sys

    monkeypatch.syspath_prepend(str(tmp_path))
    module = tmp_path / "redefined_kernel.py"
    x = np.arange(1.0, N + 1.0)
    kernels = []
    for body in ("2.0 * x[i]", "3.0 * x[i]"):
        module.write_text(REDEFINED.format(body=body))
        importlib.invalidate_caches()
        if "redefined_kernel" in sys.modules:
            kernels.append(importlib.reload(sys.modules["redefined_kernel"]).redefined)
        else:
            kernels.append(importlib.import_module("redefined_kernel").redefined)
    monkeypatch.delitem(sys.modules, "redefined_kernel")
    for scale, kernel in ((2.0, kernels[0]), (3.0, kernels[1]), (2.0, kernels[0])):
        y = np.zeros(N)
        gk.launch(kernel, N, x, y)
        np.testing.assert_array_equal(y, scale * x)
        dx = np.zeros(N)
        gk.autodiff(kernel, gk.Duplicated(x, dx), gk.Duplicated(np.zeros(N), np.ones(N)))
        np.testing.assert_array_equal(dx, scale)


def test_a_python_float_past_float32s_range_is_refused_for_a_float32_parameter(on):
    """A Python float takes the kernel's float (float32 here): 1e300 became inf, with NumPy's RuntimeWarning (an
    exception where warnings are errors). It is refused, naming the argument, on the first call of a signature
    and on a prepared one (the refill converts it); NaN and inf are values like any other, FLT_MAX fits."""
    x, y = np.linspace(1.0, 2.0, N, dtype=np.float32), np.zeros(N, np.float32)
    gk.launch(scaled_square, N, x, y, 2.0, N)  # the signature prepared: later calls take the refill
    for a in (1e300, -1e39, 2.0**128 - 2.0**103):
        for verb, call in _verbs(x, np.zeros(N, np.float32), y, np.ones(N, np.float32), a=a).items():
            same = unchanged(x, y)
            with pytest.raises(gk.LaunchError, match=r"argument 'a' = .* does not fit in float32"):
                call()
            assert same(), (verb, a)
    for a in (float(np.finfo(np.float32).max), np.float32(2.0), float("inf")):
        gk.launch(scaled_square, N, x, y, a, N)
        with np.errstate(over="ignore"):  # FLT_MAX * x * x overflows to inf, in the kernel as in NumPy
            np.testing.assert_array_equal(y, np.float32(a) * x * x)
