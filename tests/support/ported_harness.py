"""The checks the ported-kernel rounds share (tests/library/test_ported_kernels.py, test_ported_hpc.py to
test_ported_hpc8.py): a case's primal against its NumPy reference (in float32 too) and across backends, its
gradient, its race verdicts, its reverse on hostcuda against Numba's; `round_tests` makes a round's whole set of
tests from its cases and tables. A case is (name, kernel, args, dim, options, reference), or (name, kernel, args,
dim, options) in the first two rounds, which have no NumPy references; `programs` names the cases whose kernel is
a program (called, not launched)."""

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


def assert_primal_agrees_across_backends(case, programs, backends=("cpu", "interp", "hostcuda")):
    """Numba, the interpreter and hostcuda (where g++ is) within assert_backends_agree's 8-ulp bound; `backends`
    without "cpu": the others against the interpreter, skipped where hostcuda has no g++ (nothing to compare)."""
    name, kernel, args, dim = case[:4]
    runs = {}
    for backend in backends:
        values = primal_values(args)
        try:
            run_case(name, kernel, dim, values, backend, programs)
        except gk.BackendUnavailableError:
            continue
        runs[backend] = values
    if len(runs) < 2:
        pytest.skip("no g++ for hostcuda")
    assert_backends_agree(name, runs)


def assert_float32_primal(case, programs):
    """A float32 case (`cases(..., dtype=np.float32)`) on the interpreter: outputs stay float32 and within 1e-5 of
    the largest value of the float64 reference (the callers' docstrings say why); int outputs equal."""
    name, kernel, args, dim, _, reference = case
    values = primal_values(args)
    want = reference([np.float64(v) if isinstance(v, np.float32) else
                      v.astype(np.float64) if isinstance(v, np.ndarray) and v.dtype == np.float32 else v
                      for v in primal_values(args)])
    run_case(name, kernel, dim, values, "interp", programs)
    for k, expected in want.items():
        if np.asarray(expected).dtype.kind != "f":  # an int output (an error flag) is the same in both precisions
            np.testing.assert_array_equal(values[k], expected, err_msg=f"{name} argument {k}")
            continue
        assert values[k].dtype == np.float32, (name, k)
        np.testing.assert_allclose(values[k], expected, rtol=0, atol=1e-5 * float(np.max(np.abs(expected))),
                                   err_msg=f"{name} argument {k}")


def check_case_gradient(case, checked=20):
    """gk.testing.check_grad of the case (finite differences, the dot-product test), at least `checked`
    derivatives drawn (fewer where the case has fewer), the dot product non-zero."""
    from gradkern.testing import check_grad
    _, kernel, args, dim, options = case[:5]
    report = check_grad(kernel, *args, dim=dim, **options)
    assert report.ok and report.checked >= checked, str(report)
    assert report.dot_analytic != 0.0


def assert_race_verdicts(case, atomic, runtime_checked, backend=None):
    """The race analysis' verdicts, primal and reverse: parallel, the atomic targets `atomic` names (none
    otherwise), the run-time check exactly where `runtime_checked` says; a checked launch then runs, and passes
    its exact check, on the interpreter (no compile; the CPU's check, a compiled kernel of its own, runs on the
    checked kernels of a round's Numba sample in test_primal_agrees_across_backends). `backend`: the one whose
    specialisations are asked (the interpreter's may be those the gradient tests built already; Numba's by
    default)."""
    name, kernel, args, dim = case[:4]
    primal = gk.inspect(kernel, *primal_values(args), dim=dim, backend=backend)
    reverse = gk.inspect(kernel, *args, dim=dim, mode=gk.Reverse, backend=backend)
    assert primal.parallel and reverse.parallel
    assert primal.atomic_targets == atomic.get(name, ())
    checked = name in runtime_checked
    assert primal.race_check == checked and reverse.race_check == checked, name
    if checked:
        gk.launch(kernel, dim, *primal_values(args), backend="interp")


def numba_sampled(names, sample):
    """`names` (plain or pytest.param) as parameters of a Numba-backend twin: those in `sample` run in CI, marked
    `numba` so that an `interp_in_ci` module keeps them on the default backend (tests/conftest.py), the others are
    marked `full` (docs/testing.md "Test time": each port's check runs in CI on the interpreter)."""
    plain = [p.values[0] if hasattr(p, "values") else p for p in names]
    assert set(sample) <= set(plain), set(sample) - set(plain)
    return [pytest.param(n, marks=pytest.mark.numba if n in sample else pytest.mark.full) for n in plain]


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


def round_tests(cases, programs, numba_sample, atomic=None, runtime_checked=None, *, references=True, float32=False,
                float32_except=(), interp_gradients=True, checked=None, least_checked=20, race_backend=None,
                hostcuda_full=()):
    """A ported round's tests, for its file's namespace (`globals().update(round_tests(...))`), each parametrised
    by the round's kernel names (`cases(rng, dtype)` -> its cases; the tables as the functions above take them):

    * test_primal_matches_numpy: every kernel on the interpreter (no compile) against its NumPy reference;
    * test_float32_primal_on_the_interpreter (`float32`, but for `float32_except`);
    * test_primal_agrees_across_backends: Numba, the interpreter and hostcuda, for `numba_sample` in CI, the others
      `full`; test_primal_on_hostcuda_agrees_with_the_interpreter: those others in CI without Numba (g++ builds
      them in a tenth of Numba's compile: docs/testing.md "Test time", session 55), but for `hostcuda_full`
      (programs of many kernels whose g++ builds take seconds: `full`);
    * test_gradient_interp (`interp_gradients`): every kernel's check_grad on the interpreter; test_gradient: on
      Numba, `numba_sample` in CI, the others `full`; at least `checked.get(name, least_checked)` derivatives;
    * test_race_verdicts: every kernel's launch that is not a program (assert_race_verdicts, asking
      `race_backend`'s specialisations: "interp" reuses those the interpreter's gradients built).

    The first two rounds (`references=False`, no `atomic` table: their files check races their own way) have no
    NumPy references, and their `cases(rng)` no dtype."""
    names = [c[0] for c in cases(np.random.default_rng(0))]
    checked = checked or {}

    def case(name, dtype=None):
        made = cases(np.random.default_rng(5)) if dtype is None else cases(np.random.default_rng(5), dtype=dtype)
        return next(c for c in made if c[0] == name)

    @pytest.mark.parametrize("name", names)
    def test_primal_matches_numpy(name):
        assert_primal_matches_numpy(case(name), programs, backend="interp")

    @pytest.mark.parametrize("name", [n for n in names if n not in float32_except])
    def test_float32_primal_on_the_interpreter(name):
        """Outputs stay float32 and within 1e-5 of the largest value of the float64 reference: float32 rounds each
        of a kernel's at most a few hundred operations by 6e-8 relative (the largest seen: 9e-7, gramschmidt's
        square root of a sum and divisions; adi's and deriche's recurrences 5e-7 and 2e-7)."""
        assert_float32_primal(case(name, np.float32), programs)

    @pytest.mark.parametrize("name", numba_sampled(names, numba_sample))
    def test_primal_agrees_across_backends(name):
        assert_primal_agrees_across_backends(case(name), programs)

    @pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.full) if n in hostcuda_full else n
                                      for n in names if n not in numba_sample])
    def test_primal_on_hostcuda_agrees_with_the_interpreter(name):
        assert_primal_agrees_across_backends(case(name), programs, backends=("interp", "hostcuda"))

    @pytest.mark.parametrize("name", names)
    def test_gradient_interp(name, monkeypatch):
        on_interpreter(monkeypatch)
        check_case_gradient(case(name), checked.get(name, least_checked))

    @pytest.mark.slow
    @pytest.mark.parametrize("name", numba_sampled(names, numba_sample))
    def test_gradient(name):
        check_case_gradient(case(name), checked.get(name, least_checked))

    @pytest.mark.parametrize("name", [n for n in names if n not in programs])
    def test_race_verdicts(name):
        assert_race_verdicts(case(name), atomic, runtime_checked, backend=race_backend)

    tests = {f.__name__: f for f in (test_primal_agrees_across_backends,
                                     test_primal_on_hostcuda_agrees_with_the_interpreter, test_gradient)}
    if references:
        tests["test_primal_matches_numpy"] = test_primal_matches_numpy
    if atomic is not None:
        tests["test_race_verdicts"] = test_race_verdicts
    if float32:
        tests["test_float32_primal_on_the_interpreter"] = test_float32_primal_on_the_interpreter
    if interp_gradients:
        tests["test_gradient_interp"] = test_gradient_interp
    return tests
