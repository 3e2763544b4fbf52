"""Every corpus kernel (tests/support/corpus.py) on the Numba CPU backend against its
NumPy reference, and the reference interpreter against Numba, in each dtype."""

from __future__ import annotations

import ast
import functools
import inspect
import zlib

import numpy as np
import pytest
from support import corpus
from support.corpus import CORPUS, Case

import gradkern as gk

CASES = {c.name: c for c in CORPUS}
PARAMS = [pytest.param(c.name, np.dtype(dt).name, id=f"{c.name}-{np.dtype(dt).name}")
          for c in CORPUS for dt in c.dtypes]
FLOAT32_CASES = [c.name for c in CORPUS if np.float32 in c.dtypes]

RTOL = {"float32": 1e-5, "float64": 1e-12}
# Float32 elementary functions differ between the interpreter (NumPy's SIMD loops) and Numba (the C library), and
# by how much depends on the machine's CPU and libm, so neither is compared with the other bit for bit: both are
# compared with the float64 reference on the same float32 inputs. Documented worst cases: NumPy's float32 SIMD
# sin/cos 1.49 ULP, exp 2.52, log 3.83 (NumPy 1.18/1.19 release notes); glibc's float32 functions <= 2 ULP (its
# manual's "Known Maximum Errors"). An output entry chains at most 3 such functions and 4 rounded operations,
# with inputs of condition number <= 1 on the corpus' ranges: <= 3 * 4 + 4 * 0.5 = 14 ULP, and one ULP is at most
# 2**-23 of the value. Observed: <= 1.7 * 2**-23.
TRANSCENDENTAL_RTOL32 = 16 * 2.0 ** -23


def make_inputs(case: Case, dtype: str) -> tuple:
    """Fresh arguments, identical on every call (same seed), with the same layouts (views included)."""
    seed = zlib.crc32(f"{case.name}/{dtype}".encode())
    return case.make(np.random.default_rng(seed), np.dtype(dtype))


def array_positions(args: tuple) -> list[int]:
    return [n for n, a in enumerate(args) if isinstance(a, np.ndarray)]


@functools.cache
def launched(name: str, dtype: str, backend: str) -> tuple:
    """Launch case `name` once per dtype and backend on fresh inputs; return the arguments afterwards."""
    case = CASES[name]
    args = make_inputs(case, dtype)
    gk.launch(case.kernel, case.dim(args), *args, backend=backend)
    return args


def expected(name: str, dtype: str) -> tuple:
    case = CASES[name]
    args = make_inputs(case, dtype)
    case.reference(*args)
    return args


def reference_in_float64(case: Case, dtype: str) -> tuple:
    """The NumPy reference run in float64 on this dtype's inputs (exact to ~1e-16: the truth for float32)."""
    args = tuple(a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a
                 for a in make_inputs(case, dtype))
    case.reference(*args)
    return args


def assert_identical(got: np.ndarray, want: np.ndarray, what: str):
    """Equal element by element, with the same dtype and shape, and (floats) the same signs of zeros."""
    np.testing.assert_array_equal(got, want, err_msg=what, strict=True)
    if got.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=f"{what}: signs of zeros")


def assert_matches_reference(got: np.ndarray, want: np.ndarray, case: Case, what: str):
    assert got.dtype == want.dtype, what
    if got.dtype.kind == "i" or case.exact:
        assert_identical(got, want, what)
        return
    rtol = RTOL[got.dtype.name]
    # Sums in another order than the reference: errors scale with the largest term, not the result.
    atol = rtol * float(np.max(np.abs(want))) if case.reduction else 0.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what, strict=True)


@pytest.mark.parametrize("name, dtype", PARAMS)
def test_numba_matches_numpy_reference(name, dtype):
    case = CASES[name]
    before = make_inputs(case, dtype)
    got = launched(name, dtype, "cpu")
    want = expected(name, dtype)
    positions = array_positions(before)
    assert set(case.outputs) <= set(positions)
    for n in positions:
        what = f"{name}[{dtype}]: argument {n}"
        assert got[n].dtype == before[n].dtype and got[n].strides == before[n].strides, what
        if n in case.outputs:
            assert not np.array_equal(got[n], before[n]), f"{what} was not written"
            assert not np.array_equal(want[n], before[n]), f"{what}: the reference changes nothing"
            assert_matches_reference(got[n], want[n], case, what)
        else:
            np.testing.assert_array_equal(got[n], before[n], err_msg=f"{what} is only read but changed", strict=True)


@pytest.mark.parametrize("name, dtype", PARAMS)
def test_interpreter_agrees_with_numba(name, dtype):
    case = CASES[name]
    before = make_inputs(case, dtype)
    cpu = launched(name, dtype, "cpu")
    interp = launched(name, dtype, "interp")
    for n in array_positions(before):
        what = f"{name}[{dtype}]: argument {n}"
        if n not in case.outputs:
            np.testing.assert_array_equal(interp[n], before[n], err_msg=f"{what} is only read but changed",
                                          strict=True)
        elif case.reduction and interp[n].dtype.kind == "f":
            assert not np.array_equal(interp[n], before[n]), f"{what} was not written"
            rtol = RTOL[interp[n].dtype.name]
            np.testing.assert_allclose(cpu[n], interp[n], rtol=rtol, atol=rtol * float(np.max(np.abs(interp[n]))),
                                       err_msg=f"{what}: sums in another order")
        elif case.transcendental and interp[n].dtype.kind == "f":
            assert not np.array_equal(interp[n], before[n]), f"{what} was not written"
            if interp[n].dtype == np.float32:
                exact = reference_in_float64(case, dtype)[n]
                for got, backend in ((interp[n], "interpreter"), (cpu[n], "numba")):
                    np.testing.assert_allclose(got.astype(np.float64), exact, rtol=TRANSCENDENTAL_RTOL32,
                                               err_msg=f"{what} ({backend}) against the float64 reference")
            else:
                np.testing.assert_allclose(interp[n], cpu[n], rtol=RTOL["float64"], err_msg=what)
        else:
            assert_identical(interp[n], cpu[n], what)


@pytest.mark.parametrize("name", FLOAT32_CASES)
def test_float32_kernels_compute_in_float32(name):
    case = CASES[name]
    args = make_inputs(case, "float32")
    spec = gk.inspect(case.kernel, *args, dim=case.dim(args))
    assert "f64" not in spec.ir, spec.ir
    body = spec.source.split("def ", 1)[1]
    assert "float64" not in body, spec.source
    got = launched(name, "float32", "cpu")
    for n in case.outputs:
        if args[n].dtype.kind == "f":
            assert got[n].dtype == np.float32
            assert np.all(np.isfinite(got[n]))


def test_corpus_inputs_are_small_random_and_laid_out_as_intended():
    for case in CORPUS:
        for dt in case.dtypes:
            args = make_inputs(case, np.dtype(dt).name)
            again = make_inputs(case, np.dtype(dt).name)
            arrays = [args[n] for n in array_positions(args)]
            assert arrays, case.name
            for n in array_positions(args):
                a = args[n]
                assert 1 <= a.ndim <= 3 and max(a.shape) <= 64, (case.name, n)
                assert np.count_nonzero(a) > a.size // 2, (case.name, n)
                np.testing.assert_array_equal(a, again[n], strict=True)
                if n in case.noncontiguous:
                    assert not a.flags.c_contiguous, (case.name, n)
            if np.dtype(dt).kind == "f":
                assert any(a.dtype == np.dtype(dt) for a in arrays), case.name


def test_corpus_covers_every_array_dtype_and_rank():
    seen = set()
    for case in CORPUS:
        for dt in case.dtypes:
            args = make_inputs(case, np.dtype(dt).name)
            seen |= {(args[n].dtype.name, args[n].ndim) for n in array_positions(args)}
    want = {(d, k) for d in ("float32", "float64", "int32", "int64") for k in (1, 2, 3)}
    assert want <= seen, sorted(want - seen)
    layouts = {(case.name, n) for case in CORPUS for n in case.noncontiguous}
    assert len(layouts) >= 5


def _kernel_defs() -> list[ast.FunctionDef]:
    tree = ast.parse(inspect.getsource(corpus))
    return [f for f in tree.body if isinstance(f, ast.FunctionDef)
            and any(ast.unparse(d) in ("gk.kernel", "gk.func") for d in f.decorator_list)]


def test_corpus_covers_the_kernel_language():
    defs = _kernel_defs()
    nodes = [n for f in defs for n in ast.walk(f)]
    names = {f.name for f in defs}
    binops = {type(n.op) for n in nodes if isinstance(n, ast.BinOp)}
    assert {ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow} <= binops
    assert {type(n.op) for n in nodes if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)} >= \
        {ast.Add, ast.Sub, ast.Mult, ast.Div}
    assert {type(n.op) for n in nodes if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Subscript)} >= \
        {ast.Add, ast.Sub, ast.Mult, ast.Div}
    unary = {type(n.op) for n in nodes if isinstance(n, ast.UnaryOp)}
    assert {ast.USub, ast.Not} <= unary
    assert {type(n.op) for n in nodes if isinstance(n, ast.BoolOp)} == {ast.And, ast.Or}
    cmp_ops = {type(o) for n in nodes if isinstance(n, ast.Compare) for o in n.ops}
    assert {ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq} <= cmp_ops
    assert any(isinstance(n, ast.Compare) and len(n.ops) > 1 for n in nodes), "chained comparison"
    assert any(isinstance(n, ast.IfExp) for n in nodes)
    assert any(isinstance(n, ast.While) for n in nodes)
    assert any(isinstance(n, ast.Break) for n in nodes) and any(isinstance(n, ast.Continue) for n in nodes)
    assert any(isinstance(n, ast.For) and n.orelse for n in nodes), "for-else"
    assert any(isinstance(n, ast.If) and n.orelse and isinstance(n.orelse[0], ast.If) for n in nodes), "elif"
    ranges = [n for n in nodes if isinstance(n, ast.For)]
    assert {len(r.iter.args) for r in ranges} == {1, 2, 3}
    assert any(len(r.iter.args) == 3 and isinstance(r.iter.args[2], ast.UnaryOp) for r in ranges), "negative step"
    assert any(isinstance(b, ast.For) for r in ranges for b in ast.walk(r) if b is not r), "nested loops"
    calls = {ast.unparse(n.func) for n in nodes if isinstance(n, ast.Call)}
    for fn in ("sin", "cos", "tan", "exp", "log", "sqrt", "tanh", "pow", "floor"):
        assert f"math.{fn}" in calls and f"gk.{fn}" in calls, fn
    for fn in ("abs", "min", "max"):
        assert fn in calls and f"gk.{fn}" in calls, fn
    assert {"int", "float", "gk.atomic_add", "gk.tid"} <= calls
    assert {"gk.local", "len"} <= calls
    tids = {len(n.targets[0].elts) if isinstance(n.targets[0], ast.Tuple) else 1 for n in nodes
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and ast.unparse(n.value.func) == "gk.tid"}
    assert tids == {1, 2, 3}
    device = {f.name for f in defs if ast.unparse(f.decorator_list[0]) == "gk.func"}
    assert any(c in device for f in defs if f.name in device for c in
               {ast.unparse(n.func) for n in ast.walk(f) if isinstance(n, ast.Call)}), "device calls device"
    assert any(f.name in device and sum(isinstance(n, ast.Return) for n in ast.walk(f)) > 1 for f in defs)
    kernels_with_guard = [f.name for f in defs if f.name not in device and
                          any(isinstance(n, ast.Return) for n in ast.walk(f))]
    assert len(kernels_with_guard) >= 2
    assert names >= {c.kernel.name for c in CORPUS}
    assert len(CORPUS) >= 18
