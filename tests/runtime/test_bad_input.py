"""Bad input (docs/errors.md, issue 14.3 and 14.8), refused before anything runs.

At launch: every case checks three things: the exception is the right `gk.GradkernError`
subclass, its message names the offending argument (or `dim`) and says what was
expected, and every array passed is exactly as it was before the call.

Through every verb: each case is
refused by gk.launch, gk.autodiff in reverse, forward and vector mode,
gk.autodiff_thunk, gk.inspect and gk.jacobian alike (where the case applies to
the verb) with a `gk.GradkernError` subclass whose message names the argument,
and every primal and shadow is bitwise what it was. The cases are the hostile
inputs of the issue and their kin: derivatives of integers, masked arrays,
thread counts past int64, 0-d arrays, overlapping or escaping views, byte
order, read-only and object arrays."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
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


def rand(rng, *shape, dtype=np.float64) -> np.ndarray:
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
class LaunchCase:
    kernel: Any
    dim: Any
    args: tuple
    exc: type
    fragments: tuple[str, ...]  # the offending argument's name and what was expected


def _launch_cases() -> dict[str, Callable[[np.random.Generator], LaunchCase]]:
    def xy(rng, n=N):
        return rand(rng, n), rand(rng, n)

    c: dict[str, Callable[[np.random.Generator], LaunchCase]] = {}

    # wrong dtype
    c["complex-array"] = lambda r: LaunchCase(
        saxpy, N, (2.0, rand(r, N) + 1j * rand(r, N), rand(r, N)), gk.LaunchError,
        ("'x'", "complex128", "float32, float64, int32 or int64"))
    c["int16-array"] = lambda r: LaunchCase(
        saxpy, N, (2.0, rand(r, N), r.integers(1, 100, N).astype(np.int16)), gk.LaunchError,
        ("'y'", "int16", "float32, float64, int32 or int64"))
    c["bool-array"] = lambda r: LaunchCase(
        saxpy, N, (2.0, rand(r, N) > 1.0, rand(r, N)), gk.LaunchError,
        ("'x'", "bool", "float32, float64, int32 or int64"))
    # wrong ndim: caught by type inference, before anything runs
    c["2d-array-for-1-index"] = lambda r: LaunchCase(
        saxpy, N, (2.0, rand(r, 2, N // 2), rand(r, N)), gk.KernelTypeError,
        ("'x'", "1 index", "2 dimensions", "1-D"))
    c["1d-array-for-2-indices"] = lambda r: LaunchCase(
        scale_2d, (2, 4), (rand(r, N), rand(r, 2, 4)), gk.KernelTypeError,
        ("'a'", "2 indices", "1 dimension", "2-D"))
    c["6d-array"] = lambda r: LaunchCase(
        saxpy, N, (2.0, rand(r, 2, 2, 1, 2, 1, 1), rand(r, N)), gk.LaunchError,
        ("'x'", "6 dimensions", "1-D to 5-D", "x.reshape("))
    c["4d-array-for-1-index"] = lambda r: LaunchCase(
        saxpy, N, (2.0, rand(r, 2, 2, 1, 2), rand(r, N)), gk.KernelTypeError,
        ("'x'", "1 index", "4 dimensions", "x[i, j, k, l]"))
    c["0d-array"] = lambda r: LaunchCase(
        saxpy, N, (2.0, np.array(1.5), rand(r, N)), gk.LaunchError,
        ("'x'", "0 dimensions", "1-D to 5-D", "x.reshape(1)"))
    # argument count
    c["too-few-args"] = lambda r: LaunchCase(
        saxpy, N, (2.0, rand(r, N)), gk.LaunchError,
        ("takes 3 arguments", "(alpha, x, y)", "got 2", "missing 'y'"))
    c["too-many-args"] = lambda r: LaunchCase(
        saxpy, N, (2.0, *xy(r), rand(r, N)), gk.LaunchError,
        ("takes 3 arguments", "(alpha, x, y)", "got 4"))
    # dim
    c["negative-dim"] = lambda r: LaunchCase(
        saxpy, -1, (2.0, *xy(r)), gk.LaunchError, ("dim", "non-negative", "-1"))
    c["float-dim"] = lambda r: LaunchCase(
        saxpy, 8.0, (2.0, *xy(r)), gk.LaunchError, ("dim", "int", "8.0"))
    c["bool-dim"] = lambda r: LaunchCase(
        saxpy, True, (2.0, *xy(r)), gk.LaunchError, ("dim", "int", "True"))
    c["4d-dim"] = lambda r: LaunchCase(
        saxpy, (2, 2, 2, 1), (2.0, *xy(r)), gk.LaunchError, ("dim", "1 to 3", "(2, 2, 2, 1)"))
    c["empty-dim"] = lambda r: LaunchCase(
        saxpy, (), (2.0, *xy(r)), gk.LaunchError, ("dim", "1 to 3", "()"))
    c["float-entry-in-2d-dim"] = lambda r: LaunchCase(
        scale_2d, (2, 4.0), (rand(r, 2, 4), rand(r, 2, 4)), gk.LaunchError, ("dim", "int", "(2, 4.0)"))
    c["1-entry-dim-for-2d-tid"] = lambda r: LaunchCase(
        scale_2d, 8, (rand(r, 2, 4), rand(r, 2, 4)), gk.LaunchError,
        ("scale_2d", "2 indices", "dim needs 2 entries", "dim=8"))
    c["3-entry-dim-for-2d-tid"] = lambda r: LaunchCase(
        scale_2d, (2, 4, 1), (rand(r, 2, 4), rand(r, 2, 4)), gk.LaunchError,
        ("scale_2d", "dim needs 2 entries", "dim=(2, 4, 1)"))
    # array / scalar kind
    c["list-for-array"] = lambda r: LaunchCase(
        saxpy, N, (2.0, list(rand(r, N)), rand(r, N)), gk.LaunchError,
        ("'x'", "indexed", "NumPy array", "list"))
    c["scalar-for-array"] = lambda r: LaunchCase(
        saxpy, N, (2.0, 3.0, rand(r, N)), gk.LaunchError, ("'x'", "indexed", "NumPy array", "float"))
    c["array-for-scalar"] = lambda r: LaunchCase(
        saxpy, N, (rand(r, N), *xy(r)), gk.LaunchError, ("'alpha'", "scalar", "array of shape (8,)"))
    c["string-scalar"] = lambda r: LaunchCase(
        saxpy, N, ("2.0", *xy(r)), gk.LaunchError, ("'alpha'", "must be a number", "str"))
    c["none-scalar"] = lambda r: LaunchCase(
        saxpy, N, (None, *xy(r)), gk.LaunchError, ("'alpha'", "must be a number", "NoneType"))
    c["complex-scalar"] = lambda r: LaunchCase(
        saxpy, N, (2.0 + 1.0j, *xy(r)), gk.LaunchError, ("'alpha'", "must be a number", "complex"))
    c["int-scalar-overflow"] = lambda r: LaunchCase(
        saxpy, N, (2**70, *xy(r)), gk.LaunchError, ("'alpha'", "int64"))

    # memory
    def read_only(r):
        x, y = xy(r)
        y.flags.writeable = False
        return LaunchCase(saxpy, N, (2.0, x, y), gk.LaunchError, ("'y'", "written", "read-only"))

    def overlapping(r):
        buf = rand(r, N + 1)
        return LaunchCase(saxpy, N, (2.0, buf[:N], buf[1:]), gk.AliasingError,
                    ("'x'", "'y'", "overlap in memory", "writes 'y'"))

    def overlapping_2d_view(r):
        a = rand(r, 4, 4)
        return LaunchCase(scale_2d, (2, 4), (a[:2], a[1:3]), gk.AliasingError,
                    ("'a'", "'b'", "overlap in memory", "writes 'b'"))

    c["read-only-written"] = read_only
    c["overlapping-written"] = overlapping
    c["overlapping-2d-views"] = overlapping_2d_view

    # devices
    c["cupy-mixed-with-numpy"] = lambda r: LaunchCase(
        saxpy, N, (2.0, FakeCupyArray(rand(r, N)), rand(r, N)), gk.LaunchError,
        ("GPU arrays (x)", "NumPy arrays (y)"))
    c["cupy-only"] = lambda r: LaunchCase(
        saxpy, N, (2.0, FakeCupyArray(rand(r, N)), FakeCupyArray(rand(r, N))), gk.BackendUnavailableError,
        ("CuPy", "x, y", "gradkern[cuda12]"))
    return c


LAUNCH_CASES = _launch_cases()


@pytest.mark.parametrize("name", sorted(LAUNCH_CASES))
def test_bad_launch_is_refused_and_touches_nothing(name, rng):
    case = LAUNCH_CASES[name](rng)
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
        gk.inspect(saxpy, 2.0, rand(rng, 2, 4), rand(rng, N), dim=N)
    assert_unchanged(snap)


def test_kernel_still_works_after_failed_launches(rng):
    """A refused launch must not poison the kernel's specialisation cache."""
    x, y = rand(rng, N), rand(rng, N)
    for bad in ((2.0, x.astype(np.int16), y), (2.0, rand(rng, 2, 4), y), ("2", x, y), (None, x, y)):
        with pytest.raises(gk.GradkernError):
            gk.launch(saxpy, N, *bad)
    expected = 2.0 * x + y
    gk.launch(saxpy, N, 2.0, x, y)
    np.testing.assert_allclose(y, expected, rtol=1e-15)


# -- every verb: the table of bad input and the calls that take it ------------------------------------


@gk.kernel
def increment(k, y):
    i = gk.tid()
    y[i] = y[i] + k


@gk.kernel
def scale_rows(a, b):
    i = gk.tid()
    b[i, 0] = 2.0 * a[i, 0]
    b[i, 1] = 2.0 * a[i, 1]


def as_strided(base, shape, strides, writeable=True):
    return np.lib.stride_tricks.as_strided(base, shape, strides, writeable=writeable)


VERBS = ("launch", "reverse", "forward", "vector", "split", "inspect", "inspect-reverse", "inspect-forward", "jacobian")
DERIVATIVES = ("reverse", "forward", "vector", "split", "inspect-reverse", "inspect-forward")


@dataclass
class Case:
    kernel: Any
    args: tuple  # annotated as for reverse mode; the verbs convert them
    exc: type
    fragments: tuple[str, ...]
    dim: Any = None
    wrt: str = ""  # for jacobian: the input (an array the case does not spoil, when it can)
    verbs: tuple[str, ...] = VERBS
    watch: list = field(default_factory=list)  # memory behind views that must not be read (escaping views)


def _to_forward(a):
    return gk.Duplicated(a.val, 1.0) if isinstance(a, gk.Active) else a


def _to_vector(a):
    """Reverse-mode annotations in vector mode, each shadow in lane 1 beside a clean lane 0."""
    if isinstance(a, gk.Duplicated) and hasattr(a.dval, "shape"):
        clean = np.zeros(a.dval.shape, a.dval.dtype) if a.dval.dtype != object else a.dval
        return gk.BatchDuplicated(a.val, (clean, a.dval))
    return a


def call(verb: str, c: Case):
    plain = tuple(a.val if isinstance(a, gk.Annotation) else a for a in c.args)
    if verb == "launch":  # launch takes no default dim
        return gk.launch(c.kernel, N if c.dim is None else c.dim, *plain)
    if verb == "reverse":
        return gk.autodiff(c.kernel, *c.args, dim=c.dim)
    if verb == "forward":
        return gk.autodiff(c.kernel, *map(_to_forward, c.args), dim=c.dim, mode=gk.Forward)
    if verb == "vector":
        return gk.autodiff(c.kernel, *map(_to_vector, c.args), dim=c.dim)
    if verb == "split":
        forward, _ = gk.autodiff_thunk(c.kernel, *(type(a) if isinstance(a, gk.Annotation) else gk.Const
                                                   for a in c.args), dim=c.dim)
        return forward(*c.args)
    if verb == "inspect":
        return gk.inspect(c.kernel, *plain, dim=c.dim)
    if verb == "inspect-reverse":
        return gk.inspect(c.kernel, *c.args, dim=c.dim, mode=gk.Reverse)
    if verb == "inspect-forward":
        return gk.inspect(c.kernel, *map(_to_forward, c.args), dim=c.dim, mode=gk.Forward)
    assert verb == "jacobian"
    return gk.jacobian(c.kernel, *plain, wrt=c.wrt, dim=c.dim)


def _cases() -> dict[str, Callable[[np.random.Generator], Case]]:
    c: dict[str, Callable[[np.random.Generator], Case]] = {}

    def dup(r, x):
        return gk.Duplicated(x, np.zeros_like(x) if x.dtype != object else x)

    # derivatives of integers (14.8): typed as integers, their derivative was silently dropped
    c["int-array-duplicated"] = lambda r: Case(
        saxpy, (gk.Active(2.0), dup(r, r.integers(1, 9, N)), dup(r, rand(r, N))), gk.AnnotationError,
        ("'x'", "int64 array", "carries no derivative", "gk.Const(x)"), verbs=DERIVATIVES)
    c["int-array-updated-in-place"] = lambda r: Case(
        increment, (1, gk.Duplicated(r.integers(1, 9, N), r.integers(1, 9, N))), gk.AnnotationError,
        ("'y'", "int64 array", "carries no derivative"), verbs=DERIVATIVES)
    c["int32-array-duplicated"] = lambda r: Case(
        increment, (1, gk.Duplicated(r.integers(1, 9, N).astype(np.int32), r.integers(1, 9, N).astype(np.int32))),
        gk.AnnotationError, ("'y'", "int32 array", "carries no derivative"), verbs=DERIVATIVES)
    c["bool-array-duplicated"] = lambda r: Case(
        saxpy, (gk.Active(2.0), gk.Duplicated(rand(r, N) > 1, np.zeros(N, bool)), dup(r, rand(r, N))),
        gk.AnnotationError, ("'x'", "bool array", "carries no derivative"), verbs=DERIVATIVES)
    c["int-scalar-active"] = lambda r: Case(
        saxpy, (gk.Active(2), dup(r, rand(r, N)), dup(r, rand(r, N))), gk.AnnotationError,
        ("'alpha'", "the integer 2", "carries no derivative", "2.0"), verbs=DERIVATIVES)
    c["numpy-int-scalar-active"] = lambda r: Case(
        saxpy, (gk.Active(np.int64(3)), dup(r, rand(r, N)), dup(r, rand(r, N))), gk.AnnotationError,
        ("'alpha'", "the integer 3", "carries no derivative"), verbs=DERIVATIVES)

    # masked arrays (14.8): the kernel would ignore the mask
    def masked(r, which):
        x, y = rand(r, N), rand(r, N)
        mx = np.ma.masked_array(x, mask=np.arange(N) % 2 == 0)
        if which == "primal":
            return Case(saxpy, (2.0, dup(r, mx), dup(r, y)), gk.LaunchError, ("'x'", "masked array"), wrt="y")
        shadow = np.ma.masked_array(np.zeros(N), mask=np.arange(N) % 2 == 0)
        return Case(saxpy, (2.0, gk.Duplicated(x, shadow), dup(r, y)), gk.AnnotationError,
                    ("of 'x'", "masked array"), verbs=DERIVATIVES)
    c["masked-primal"] = lambda r: masked(r, "primal")
    c["masked-shadow"] = lambda r: masked(r, "shadow")

    # thread counts (14.8): past int64 NumPy and Numba failed, or nothing ran
    for label, dim in (("2**64", 2**64), ("2**63", 2**63), ("uint64-max", np.uint64(2**64 - 1)),
                       ("2**32-squared", (2**32, 2**32))):
        c[f"dim-{label}"] = lambda r, dim=dim: Case(
            saxpy if not isinstance(dim, tuple) else scale_rows,
            (2.0, dup(r, rand(r, N)), dup(r, rand(r, N))) if not isinstance(dim, tuple)
            else (dup(r, rand(r, N, 2)), dup(r, rand(r, N, 2))),
            gk.LaunchError, ("dim=", "threads", "2**63 - 1"), dim=dim, wrt="y" if not isinstance(dim, tuple) else "a")
    # a 0-d array with the default dim: the array is the problem, not dim (14.8)
    c["0d-array-default-dim"] = lambda r: Case(
        saxpy, (2.0, dup(r, np.array(1.5)), dup(r, rand(r, N))), gk.LaunchError,
        ("argument 'x' has 0 dimensions", "1-D to 5-D", "first array argument"), wrt="y",
        verbs=tuple(v for v in VERBS if v != "launch"))
    c["default-dim-with-the-wrong-entries"] = lambda r: Case(
        scale_rows, (dup(r, rand(r, N, 2)), dup(r, rand(r, N, 2))), gk.LaunchError,
        ("'scale_rows'", "1 index", "shape (8, 2) of 'a'", "first array argument"), wrt="a",
        verbs=tuple(v for v in VERBS if v != "launch"))
    c["0d-array-explicit-dim"] = lambda r: Case(
        saxpy, (2.0, dup(r, rand(r, N)), dup(r, np.array(1.5))), gk.LaunchError,
        ("argument 'y' has 0 dimensions", "1-D to 5-D"), dim=N, wrt="x")

    # overlapping elements (14.3): written arrays and every shadow
    def overlap(r, which):
        base, a, b = rand(r, N + 1), rand(r, N, 2), rand(r, N, 2)
        rows = as_strided(base, (N, 2), (8, 8))
        if which == "written":
            return Case(scale_rows, (dup(r, a), gk.Duplicated(rows, np.zeros((N, 2)))), gk.AliasingError,
                        ("'b'", "written", "elements overlap", "strides (8, 8)"), dim=N, wrt="a",
                        watch=[base])
        return Case(scale_rows, (gk.Duplicated(a, rows), dup(r, b)), gk.AliasingError,
                    ("of 'a'", "elements that overlap", "strides (8, 8)"), dim=N, verbs=DERIVATIVES, watch=[base])
    c["overlapping-written-primal"] = lambda r: overlap(r, "written")
    c["overlapping-shadow"] = lambda r: overlap(r, "shadow")

    def zero_stride(r, which):
        z, x, y = rand(r, 1), rand(r, N), rand(r, N)
        if which == "written":
            return Case(saxpy, (2.0, dup(r, x), gk.Duplicated(as_strided(z, (N,), (0,)), np.zeros(N))),
                        gk.AliasingError, ("'y'", "written", "broadcast view"), dim=N, wrt="x", watch=[z])
        return Case(saxpy, (gk.Active(2.0), gk.Duplicated(x, as_strided(z, (N,), (0,))), dup(r, y)),
                    gk.AliasingError, ("of 'x'", "broadcast view"), verbs=DERIVATIVES, watch=[z])
    c["zero-stride-written-primal"] = lambda r: zero_stride(r, "written")
    c["zero-stride-shadow"] = lambda r: zero_stride(r, "shadow")

    # views that reach outside their memory: reading them crashed the process (SIGSEGV)
    def escaping(r, which):
        base, x, y = rand(r, 4), rand(r, 4), rand(r, 4)
        far = as_strided(base, (4,), (-2**62,))
        if which == "primal":
            return Case(saxpy, (2.0, dup(r, x), gk.Duplicated(far, np.zeros(4))), gk.LaunchError,
                        ("'y'", "outside the memory"), wrt="x", watch=[base])
        past_the_end = as_strided(base, (4,), (16,))[::-1]  # a view of a view: elements 0, 2, 4, 6 of 4
        return Case(saxpy, (2.0, gk.Duplicated(x, past_the_end), dup(r, y)),
                    gk.AnnotationError, ("of 'x'", "outside the memory"), verbs=DERIVATIVES, watch=[base])
    c["huge-negative-stride-primal"] = lambda r: escaping(r, "primal")
    c["view-past-its-buffer-shadow"] = lambda r: escaping(r, "shadow")

    # dtypes and flags
    c["big-endian-primal"] = lambda r: Case(
        saxpy, (2.0, dup(r, rand(r, N).astype(">f8")), dup(r, rand(r, N))), gk.LaunchError,
        ("'x'", ">f8", "non-native byte order", "astype(np.float64)"), wrt="y")
    c["big-endian-shadow"] = lambda r: Case(
        saxpy, (2.0, gk.Duplicated(rand(r, N), np.zeros(N, ">f8")), dup(r, rand(r, N))), gk.AnnotationError,
        ("of 'x'", ">f8"), verbs=DERIVATIVES)
    c["object-array"] = lambda r: Case(
        saxpy, (2.0, rand(r, N).astype(object), dup(r, rand(r, N))), gk.LaunchError, ("'x'", "object"), wrt="y")

    def read_only_shadow(r):
        d = np.zeros(N)
        d.flags.writeable = False
        return Case(saxpy, (2.0, gk.Duplicated(rand(r, N), d), dup(r, rand(r, N))), gk.AnnotationError,
                    ("of 'x'", "read-only"), verbs=DERIVATIVES)
    c["read-only-shadow"] = read_only_shadow

    def read_only_written(r):
        y = rand(r, N)
        y.flags.writeable = False
        return Case(saxpy, (2.0, dup(r, rand(r, N)), gk.Duplicated(y, np.zeros(N))), gk.LaunchError,
                    ("'y'", "written", "read-only"), wrt="x")
    c["read-only-written-primal"] = read_only_written
    return c


CASES = _cases()


def _arrays(c: Case) -> list[np.ndarray]:
    """Every array the call could change: primals, shadows (all lanes) and what views watch."""
    out = list(c.watch)
    for a in c.args:
        for v in (a.val, getattr(a, "dval", None)) if isinstance(a, gk.Annotation) else (a,):
            if isinstance(v, np.ndarray) and not any(np.shares_memory(v, w) for w in c.watch):
                out.append(v)
    return out


# only the verbs each case applies to (a bad shadow means nothing to gk.launch), so nothing is skipped
APPLICABLE = [(name, verb) for name in sorted(CASES) for verb in VERBS
              if verb in CASES[name](np.random.default_rng(0)).verbs]


@pytest.mark.parametrize("name, verb", APPLICABLE)
def test_bad_input_is_refused_by_every_verb_and_touches_nothing(name, verb, rng):
    c = CASES[name](rng)
    assert verb in c.verbs
    arrays = _arrays(c)
    before = [(a, a.dtype, a.shape, a.tobytes()) for a in arrays]  # bitwise: NaNs and signed zeros too
    with pytest.raises(c.exc) as info:
        call(verb, c)
    err = info.value
    assert isinstance(err, gk.GradkernError)
    msg = str(err)
    for f in c.fragments:
        assert f in msg, f"{f!r} not in message:\n{msg}"
    assert "gradkern/" not in msg and "site-packages" not in msg  # blames the user's argument, not our files
    for k, (now, dtype, shape, raw) in enumerate(before):
        assert now.dtype == dtype and now.shape == shape and now.tobytes() == raw, f"array #{k} changed"


def test_a_kernel_works_after_every_refusal(rng):
    """No refusal leaves a half-built specialisation behind."""
    for name in sorted(CASES):
        c = CASES[name](rng)
        for verb in c.verbs:
            with pytest.raises(gk.GradkernError):
                call(verb, c)
    x, y, dx, dy = rand(rng, N), rand(rng, N), np.zeros(N), np.ones(N)
    y0 = y.copy()
    g = gk.autodiff(saxpy, gk.Active(2.0), gk.Duplicated(x, dx), gk.Duplicated(y, dy))
    np.testing.assert_allclose(y, 2 * x + y0, rtol=1e-15)
    np.testing.assert_allclose(dx, 2.0, rtol=1e-15)
    assert g[0] == pytest.approx(x.sum(), rel=1e-14)


def test_integer_arrays_are_fine_as_const(rng):
    """The fix an integer refusal names works: an integer array passed plain or as gk.Const."""
    k = rng.integers(1, 9, N)
    y, dy = rand(rng, N), np.ones(N)
    y0 = y.copy()
    gk.autodiff(increment, gk.Const(2.0), gk.Duplicated(y, dy))
    np.testing.assert_allclose(y, y0 + 2.0, rtol=1e-15)
    yi = k.copy()
    gk.launch(increment, N, 3, yi)
    np.testing.assert_array_equal(yi, k + 3)


def test_ndarray_subclasses_other_than_masked_arrays_are_their_memory(rng, tmp_path):
    """np.memmap (and other subclasses) run as the plain array they view; a masked array is refused
    because the kernel would ignore its mask."""
    mm = np.memmap(tmp_path / "y.dat", dtype=np.float64, mode="w+", shape=(N,))
    x = rand(rng, N)
    mm[:] = 1.0
    gk.launch(saxpy, N, 2.0, x, mm)
    np.testing.assert_allclose(np.asarray(mm), 2 * x + 1.0, rtol=1e-15)
    dx = np.zeros(N)
    gk.autodiff(saxpy, gk.Const(2.0), gk.Duplicated(x, dx), gk.Duplicated(mm, np.ones(N)))
    np.testing.assert_allclose(dx, 2.0, rtol=1e-15)


def test_unaligned_numpy_arrays_run_on_the_cpu(rng):
    """Not hostile on the CPU: NumPy arrays at odd addresses (views into byte buffers) are read
    and written correctly, as primals and as shadows."""
    raw = np.zeros(3 * 8 * N + 3, np.uint8)
    x, y, dx = (raw[1 + k * 8 * N: 1 + (k + 1) * 8 * N].view(np.float64) for k in range(3))
    assert not (x.flags.aligned or y.flags.aligned or dx.flags.aligned)
    x[:], y[:], dx[:] = rand(rng, N), rand(rng, N), 0.0
    x0, y0 = x.copy(), y.copy()
    g = gk.autodiff(saxpy, gk.Active(2.0), gk.Duplicated(x, dx), gk.Duplicated(y, np.ones(N)))
    np.testing.assert_allclose(y, 2 * x0 + y0, rtol=1e-15)
    np.testing.assert_allclose(dx, 2.0, rtol=1e-15)
    assert g[0] == pytest.approx(x0.sum(), rel=1e-14)
