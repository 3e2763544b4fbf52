"""Bad input at launch (DESIGN §9).

Every case checks three things: the exception is the right `gk.GradkernError`
subclass, its message names the offending argument (or `dim`) and says what was
expected, and every array passed is exactly as it was before the call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import gradkern as gk

N = 8


@gk.kernel
def saxpy(alpha, x, y):
    i = gk.tid()
    y[i] = alpha * x[i] + y[i]


@gk.kernel
def scale_2d(a, b):
    i, j = gk.tid()
    b[i, j] = 2.0 * a[i, j]


@gk.kernel
def read_only_sum(x, y, out):
    i = gk.tid()
    gk.atomic_add(out, 0, 0.0 * (x[i] + y[i]))  # reads x and y, writes only out


class FakeCupyArray:
    """Looks like a CuPy array to gradkern: its class lives in module 'cupy' and
    it exposes `__cuda_array_interface__`. It wraps a NumPy array so the test can
    check that the data behind it is not touched."""

    __module__ = "cupy"

    def __init__(self, host: np.ndarray):
        self.host = host
        self.shape = host.shape
        self.ndim = host.ndim
        self.dtype = host.dtype

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (0, False), "version": 3}


# -- helpers -----------------------------------------------------------------------


def _arrays_in(args) -> list[np.ndarray]:
    """Every NumPy array reachable from the arguments (also inside fake CuPy arrays)."""
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            out.append(a)
        elif isinstance(a, FakeCupyArray):
            out.append(a.host)
    return out


def snapshot(args) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(a, a.copy()) for a in _arrays_in(args)]


def assert_unchanged(snap: list[tuple[np.ndarray, np.ndarray]]):
    for k, (now, before) in enumerate(snap):
        assert now.dtype == before.dtype and now.shape == before.shape, f"array #{k} changed type or shape"
        assert np.array_equal(now, before), f"array #{k} was modified by a launch that failed"


def rand(rng, shape, dtype=np.float64) -> np.ndarray:
    """Random non-zero values (so a kernel writing zeros or copies would show)."""
    return rng.uniform(0.5, 2.0, shape).astype(dtype)


def check_failed_launch(kernel, dim, args, exc: type[gk.GradkernError], fragments: tuple[str, ...]):
    snap = snapshot(args)
    with pytest.raises(exc) as info:
        gk.launch(kernel, dim, *args)
    err = info.value
    assert isinstance(err, gk.GradkernError)
    msg = str(err)
    for f in fragments:
        assert f in msg, f"{f!r} not in message:\n{msg}"
    assert_unchanged(snap)
    return err


# -- the table of bad launches ------------------------------------------------------


@dataclass
class Case:
    kernel: Any
    dim: Any
    args: tuple
    exc: type
    fragments: tuple[str, ...]  # the offending argument's name and what was expected


def _cases() -> dict[str, Callable[[np.random.Generator], Case]]:
    def xy(rng, n=N):
        return rand(rng, n), rand(rng, n)

    c: dict[str, Callable[[np.random.Generator], Case]] = {}

    # wrong dtype
    c["complex-array"] = lambda r: Case(
        saxpy, N, (2.0, rand(r, N) + 1j * rand(r, N), rand(r, N)), gk.LaunchError,
        ("'x'", "complex128", "float32, float64, int32 or int64"))
    c["int16-array"] = lambda r: Case(
        saxpy, N, (2.0, rand(r, N), r.integers(1, 100, N).astype(np.int16)), gk.LaunchError,
        ("'y'", "int16", "float32, float64, int32 or int64"))
    c["bool-array"] = lambda r: Case(
        saxpy, N, (2.0, rand(r, N) > 1.0, rand(r, N)), gk.LaunchError,
        ("'x'", "bool", "float32, float64, int32 or int64"))
    # wrong ndim: caught by type inference, before anything runs
    c["2d-array-for-1-index"] = lambda r: Case(
        saxpy, N, (2.0, rand(r, (2, N // 2)), rand(r, N)), gk.KernelTypeError,
        ("'x'", "1 index", "2 dimensions", "1-D"))
    c["1d-array-for-2-indices"] = lambda r: Case(
        scale_2d, (2, 4), (rand(r, N), rand(r, (2, 4))), gk.KernelTypeError,
        ("'a'", "2 indices", "1 dimension", "2-D"))
    c["6d-array"] = lambda r: Case(
        saxpy, N, (2.0, rand(r, (2, 2, 1, 2, 1, 1)), rand(r, N)), gk.LaunchError,
        ("'x'", "6 dimensions", "1-D to 5-D", "x.reshape("))
    c["4d-array-for-1-index"] = lambda r: Case(
        saxpy, N, (2.0, rand(r, (2, 2, 1, 2)), rand(r, N)), gk.KernelTypeError,
        ("'x'", "1 index", "4 dimensions", "x[i, j, k, l]"))
    c["0d-array"] = lambda r: Case(
        saxpy, N, (2.0, np.array(1.5), rand(r, N)), gk.LaunchError,
        ("'x'", "0 dimensions", "1-D to 5-D", "x.reshape(1)"))
    # argument count
    c["too-few-args"] = lambda r: Case(
        saxpy, N, (2.0, rand(r, N)), gk.LaunchError,
        ("takes 3 arguments", "(alpha, x, y)", "got 2", "missing 'y'"))
    c["too-many-args"] = lambda r: Case(
        saxpy, N, (2.0, *xy(r), rand(r, N)), gk.LaunchError,
        ("takes 3 arguments", "(alpha, x, y)", "got 4"))
    # dim
    c["negative-dim"] = lambda r: Case(
        saxpy, -1, (2.0, *xy(r)), gk.LaunchError, ("dim", "non-negative", "-1"))
    c["float-dim"] = lambda r: Case(
        saxpy, 8.0, (2.0, *xy(r)), gk.LaunchError, ("dim", "int", "8.0"))
    c["bool-dim"] = lambda r: Case(
        saxpy, True, (2.0, *xy(r)), gk.LaunchError, ("dim", "int", "True"))
    c["4d-dim"] = lambda r: Case(
        saxpy, (2, 2, 2, 1), (2.0, *xy(r)), gk.LaunchError, ("dim", "1 to 3", "(2, 2, 2, 1)"))
    c["empty-dim"] = lambda r: Case(
        saxpy, (), (2.0, *xy(r)), gk.LaunchError, ("dim", "1 to 3", "()"))
    c["float-entry-in-2d-dim"] = lambda r: Case(
        scale_2d, (2, 4.0), (rand(r, (2, 4)), rand(r, (2, 4))), gk.LaunchError, ("dim", "int", "(2, 4.0)"))
    c["1-entry-dim-for-2d-tid"] = lambda r: Case(
        scale_2d, 8, (rand(r, (2, 4)), rand(r, (2, 4))), gk.LaunchError,
        ("scale_2d", "2 indices", "dim needs 2 entries", "dim=8"))
    c["3-entry-dim-for-2d-tid"] = lambda r: Case(
        scale_2d, (2, 4, 1), (rand(r, (2, 4)), rand(r, (2, 4))), gk.LaunchError,
        ("scale_2d", "dim needs 2 entries", "dim=(2, 4, 1)"))
    # array / scalar kind
    c["list-for-array"] = lambda r: Case(
        saxpy, N, (2.0, list(rand(r, N)), rand(r, N)), gk.LaunchError,
        ("'x'", "indexed", "NumPy array", "list"))
    c["scalar-for-array"] = lambda r: Case(
        saxpy, N, (2.0, 3.0, rand(r, N)), gk.LaunchError, ("'x'", "indexed", "NumPy array", "float"))
    c["array-for-scalar"] = lambda r: Case(
        saxpy, N, (rand(r, N), *xy(r)), gk.LaunchError, ("'alpha'", "scalar", "array of shape (8,)"))
    c["string-scalar"] = lambda r: Case(
        saxpy, N, ("2.0", *xy(r)), gk.LaunchError, ("'alpha'", "must be a number", "str"))
    c["none-scalar"] = lambda r: Case(
        saxpy, N, (None, *xy(r)), gk.LaunchError, ("'alpha'", "must be a number", "NoneType"))
    c["complex-scalar"] = lambda r: Case(
        saxpy, N, (2.0 + 1.0j, *xy(r)), gk.LaunchError, ("'alpha'", "must be a number", "complex"))
    c["int-scalar-overflow"] = lambda r: Case(
        saxpy, N, (2**70, *xy(r)), gk.LaunchError, ("'alpha'", "int64"))

    # memory
    def read_only(r):
        x, y = xy(r)
        y.flags.writeable = False
        return Case(saxpy, N, (2.0, x, y), gk.LaunchError, ("'y'", "written", "read-only"))

    def overlapping(r):
        buf = rand(r, N + 1)
        return Case(saxpy, N, (2.0, buf[:N], buf[1:]), gk.AliasingError,
                    ("'x'", "'y'", "overlap in memory", "writes 'y'"))

    def overlapping_2d_view(r):
        a = rand(r, (4, 4))
        return Case(scale_2d, (2, 4), (a[:2], a[1:3]), gk.AliasingError,
                    ("'a'", "'b'", "overlap in memory", "writes 'b'"))

    c["read-only-written"] = read_only
    c["overlapping-written"] = overlapping
    c["overlapping-2d-views"] = overlapping_2d_view

    # devices
    c["cupy-mixed-with-numpy"] = lambda r: Case(
        saxpy, N, (2.0, FakeCupyArray(rand(r, N)), rand(r, N)), gk.LaunchError,
        ("GPU arrays (x)", "NumPy arrays (y)"))
    c["cupy-only"] = lambda r: Case(
        saxpy, N, (2.0, FakeCupyArray(rand(r, N)), FakeCupyArray(rand(r, N))), gk.BackendUnavailableError,
        ("CuPy", "x, y", "gradkern[cuda12]"))
    return c


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_launch_is_refused_and_touches_nothing(name, rng):
    case = CASES[name](rng)
    check_failed_launch(case.kernel, case.dim, case.args, case.exc, case.fragments)


def test_read_only_array_that_is_only_read_is_accepted(rng):
    x, y = rand(rng, N), rand(rng, N)
    x.flags.writeable = y.flags.writeable = False
    out = np.zeros(1)
    gk.launch(read_only_sum, N, x, y, out)
    assert out[0] == 0.0


def test_overlapping_arrays_that_are_only_read_are_accepted(rng):
    buf = rand(rng, N + 1)
    out = np.zeros(1)
    gk.launch(read_only_sum, N, buf[:N], buf[1:], out)
    assert out[0] == 0.0


def test_non_kernel_passed_to_launch(rng):
    def plain(alpha, x, y):
        y[:] = alpha * x + y

    x, y = rand(rng, N), rand(rng, N)
    err = check_failed_launch(plain, N, (2.0, x, y), gk.LaunchError, ("first argument", "@gk.kernel", "function"))
    assert err.hint and "@gk.kernel" in err.hint


def test_device_function_passed_to_launch(rng):
    @gk.func
    def twice(v):
        return 2.0 * v

    check_failed_launch(twice, N, (rand(rng, N),), gk.LaunchError, ("first argument", "@gk.kernel", "DeviceFunction"))


def test_calling_a_kernel_directly(rng):
    x, y = rand(rng, N), rand(rng, N)
    snap = snapshot((x, y))
    with pytest.raises(gk.LaunchError) as info:
        saxpy(2.0, x, y)
    assert isinstance(info.value, gk.GradkernError)
    msg = str(info.value)
    assert "'saxpy'" in msg and "called directly" in msg
    assert "gk.launch(saxpy" in msg  # says what to do instead
    assert_unchanged(snap)


def test_inspect_validates_like_launch(rng):
    args = (2.0, rand(rng, N).astype(np.int16), rand(rng, N))
    snap = snapshot(args)
    with pytest.raises(gk.LaunchError, match="'x' has dtype int16"):
        gk.inspect(saxpy, *args)
    with pytest.raises(gk.KernelTypeError, match="'x' is indexed with 1 index"):
        gk.inspect(saxpy, 2.0, rand(rng, (2, 4)), rand(rng, N), dim=N)
    assert_unchanged(snap)


def test_kernel_still_works_after_failed_launches(rng):
    """A refused launch must not poison the kernel's specialisation cache."""
    x, y = rand(rng, N), rand(rng, N)
    for bad in ((2.0, x.astype(np.int16), y), (2.0, rand(rng, (2, 4)), y), ("2", x, y), (None, x, y)):
        with pytest.raises(gk.GradkernError):
            gk.launch(saxpy, N, *bad)
    expected = 2.0 * x + y
    gk.launch(saxpy, N, 2.0, x, y)
    np.testing.assert_allclose(y, expected, rtol=1e-15)
