"""The checks the ported-kernel rounds share (tests/library/test_ported_hpc3.py to test_ported_hpc8.py): a case's
primal against its NumPy reference (in float32 too) and across backends, its gradient, its race verdicts, its
reverse on hostcuda against Numba's. A case
is (name, kernel, args, dim, options, reference);
`programs` names the cases whose kernel is a program (called, not launched)."""

import numpy as np
import pytest

import gradkern as gk
from gradkern import backends
from support.ported import assert_backends_agree, primal_values


def case_makers(rng, dtype):
    """The rounds' input makers, in `dtype`: R(*shape, lo, hi) uniform values, D(a) a Duplicated with a zero shadow,
    act(x) an Active scalar."""
    def R(*s, lo=0.5, hi=1.5):
        return rng.uniform(lo, hi, s).astype(dtype)

    def D(a):
        return gk.Duplicated(np.asarray(a, dtype), np.zeros(np.shape(a), dtype))

    def act(x):
        return gk.Active(dtype(x))
    return R, D, act


def run_case(name, kernel, dim, values, backend, programs):
    if name in programs:
        kernel(*values, backend=backend)
    else:
        gk.launch(kernel, dim, *values, backend=backend)


def assert_primal_matches_numpy(case, programs, backend="cpu"):
    """The backend's arrays (Numba's unless told; the interpreter's costs no compile) within 1e-12 of the largest
    value of the reference's (the callers' docstrings say why); integer arrays equal."""
    name, kernel, args, dim, _, reference = case
    values = primal_values(args)
    want = reference(primal_values(args))
    run_case(name, kernel, dim, values, backend, programs)
    assert want
    for k, expected in want.items():
        got = values[k]
        scale = float(np.max(np.abs(expected)))
        assert scale > 0.0, (name, k)
        if np.asarray(expected).dtype.kind == "f":
            np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * scale, err_msg=f"{name} argument {k}")
        else:
            np.testing.assert_array_equal(got, expected, err_msg=f"{name} argument {k}")


def assert_primal_agrees_across_backends(case, programs):
    """Numba, the interpreter and hostcuda (where g++ is) within assert_backends_agree's 8-ulp bound."""
    name, kernel, args, dim, _, _ = case
    runs = {}
    for backend in ("cpu", "interp", "hostcuda"):
        values = primal_values(args)
        try:
            run_case(name, kernel, dim, values, backend, programs)
        except gk.BackendUnavailableError:
            continue
        runs[backend] = values
    assert_backends_agree(name, runs)


def assert_float32_primal(case, programs):
    """A float32 case (`cases(..., dtype=np.float32)`) on the interpreter: outputs stay float32 and within 1e-5 of
    the largest value of the float64 reference (the callers' docstrings say why)."""
    name, kernel, args, dim, _, reference = case
    values = primal_values(args)
    want = reference([np.float64(v) if isinstance(v, np.float32) else
                      v.astype(np.float64) if isinstance(v, np.ndarray) and v.dtype == np.float32 else v
                      for v in primal_values(args)])
    run_case(name, kernel, dim, values, "interp", programs)
    for k, expected in want.items():
        assert values[k].dtype == np.float32, (name, k)
        np.testing.assert_allclose(values[k], expected, rtol=0, atol=1e-5 * float(np.max(np.abs(expected))),
                                   err_msg=f"{name} argument {k}")


def check_case_gradient(case, checked=20):
    """gk.testing.check_grad of the case (finite differences, the dot-product test), at least `checked`
    derivatives drawn (fewer where the case has fewer), the dot product non-zero."""
    from gradkern.testing import check_grad
    _, kernel, args, dim, options, _ = case
    report = check_grad(kernel, *args, dim=dim, **options)
    assert report.ok and report.checked >= checked, str(report)
    assert report.dot_analytic != 0.0


def assert_race_verdicts(case, atomic, runtime_checked, backend=None):
    """The race analysis' verdicts, primal and reverse: parallel, the atomic targets `atomic` names (none
    otherwise), the run-time check exactly where `runtime_checked` says. `backend`: the one whose specialisations
    are asked (the interpreter's may be those the gradient tests built already; Numba's by default)."""
    name, kernel, args, dim, _, _ = case
    primal = gk.inspect(kernel, *primal_values(args), dim=dim, backend=backend)
    reverse = gk.inspect(kernel, *args, dim=dim, mode=gk.Reverse, backend=backend)
    assert primal.parallel and reverse.parallel
    assert primal.atomic_targets == atomic.get(name, ())
    checked = name in runtime_checked
    assert primal.race_check == checked and reverse.race_check == checked, name


def numba_sampled(names, sample):
    """`names` (plain or pytest.param) as parameters of a Numba-backend twin: those in `sample` run in CI, the
    others are marked `full` (docs/testing.md "Test time": each port's check runs in CI on the interpreter)."""
    plain = [p.values[0] if hasattr(p, "values") else p for p in names]
    assert set(sample) <= set(plain), set(sample) - set(plain)
    return [n if n in sample else pytest.param(n, marks=pytest.mark.full) for n in plain]


def on_interpreter(monkeypatch):
    """This test's NumPy launches on the interpreter (docs/testing.md "Test time"), undone after it. Through the
    backends' default, not $GRADKERN_BACKEND: the variable is read once per process (backends/__init__.py), so
    `monkeypatch.setenv("GRADKERN_BACKEND", "interp")` (sessions 52-53) switched nothing in a worker whose earlier
    tests had launched (CI's: these checks compiled their Numba kernels), and where it was the process's first read
    it made every later test there run on the interpreter, the Numba twins included."""
    monkeypatch.setattr(backends, "_default", ["interp"])


def assert_reverse_on_hostcuda_agrees_with_numba(case, programs):
    """Each reverse (the same random output adjoints) on hostcuda, the CUDA backend's source under g++, against
    Numba's: primals, shadows and Active scalars' derivatives within 1e-14 of each array's largest value (the two
    compilers may order the atomics' and the Active scalars' sums differently; session 54 saw at most 4e-16). The
    CUDA printer sums constant-index float atomics per block (backends/cuda.py `block_summed`); hostcuda adds
    each thread's sum, so this checks the printed reverse, not the block sums themselves (docs/hostcuda.md)."""
    pytest.importorskip("gradkern.backends.hostcuda")
    name, kernel, args, dim, _, _ = case
    runs = {}
    for backend in ("cpu", "hostcuda"):
        rng = np.random.default_rng(11)
        copies = [gk.Duplicated(a.val.copy(), rng.uniform(-1, 1, a.val.shape)) if isinstance(a, gk.Duplicated)
                  else a.copy() if isinstance(a, np.ndarray) else a for a in args]
        try:
            if name in programs:
                result = gk.autodiff(lambda *a, b=backend, f=kernel: f(*a, backend=b), *copies)
            else:
                result = gk.autodiff(kernel, *copies, dim=dim, backend=backend)
        except gk.BackendUnavailableError:
            pytest.skip("no g++ for hostcuda")
        runs[backend] = (copies, result)
    (numba_args, numba_result), (host_args, host_result) = runs["cpu"], runs["hostcuda"]
    for k, (a, h) in enumerate(zip(numba_args, host_args)):
        if isinstance(a, gk.Duplicated):
            for x, y in ((a.val, h.val), (a.dval, h.dval)):
                np.testing.assert_allclose(y, x, rtol=0, atol=1e-14 * float(np.max(np.abs(x))), err_msg=f"{name} {k}")
    for x, y in zip(numba_result, host_result):
        if x is not None:
            assert abs(float(y) - float(x)) <= 1e-14 * abs(float(x)), (name, x, y)
