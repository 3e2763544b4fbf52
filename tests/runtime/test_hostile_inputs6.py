"""Hostile inputs, round six (docs/errors.md, "Hostile inputs"): the APIs of session 52. Each refusal is a
GradkernError naming the argument, what was expected and what came, with every buffer as it was.

Found this round: check_grad ran its finite differences on an infinite Active value (RuntimeWarnings, then the
refusal), divided by eps=0, failed every comparison for a NaN eps, rtol or atol or a NaN in an input, and let NumPy
raise for a string or negative seed or a fractional max_coords; a non-callable `kernel` was a TypeError. A
@gk.func with a bare `return` beside `return a, b` crashed the frontend with an AttributeError; `g(*f(x))` said
"'g' takes 2 arguments, got 1". torch_function raised a TypeError for a sparse tensor and an OverflowError for an
int constant past int64; jax_function let a BCOO array, a string or complex constant and an int past int64 reach
its callback (a JaxRuntimeError around the launch's error), and jax.grad at a Python float failed in the backward
(an AttributeError: JAX hands that residual back as a literal without `.shape`).

Probed this round and already right (kept out of the suite): the prepared call's fast path (a signature
prepared, then each verb called with NaN/inf/bool/complex/str/None/huge scalars, numpy scalar subclasses,
float16/longdouble, big-endian/object/complex/float16/bool/0-d arrays, read-only outputs and shadows, negative
strides, shadows that are the primal, a reversed view of it, an overlapping slice, `np.frombuffer` or
`as_strided` of it): refused by name or right, nothing changed; gk.launch of NaN/inf scalars runs as written;
@gk.func values unpacked into one name twice, into vector components, of mixed int/float types: right;
torch_function of NaN/inf 0-d Active tensors (refused), an output that is an input or overlaps one (copies:
right), strided and flipped views, Parameters, inference tensors, empty tensors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from support.ported_harness import on_interpreter

import gradkern as gk
from gradkern.kernels import allen_cahn_step
from gradkern.testing import check_grad

N = 5


@gk.kernel
def scale_into(k, x, y):
    i = gk.tid()
    y[i] = y[i] + k * x[i] * x[i]


def arrays():
    rng = np.random.default_rng(6)
    return [rng.uniform(0.5, 1.0, N) for _ in range(4)]


def unchanged(*arrays):
    before = [a.copy() for a in arrays]
    return lambda: all(np.array_equal(a, b, equal_nan=True) for a, b in zip(arrays, before))


@pytest.mark.parametrize("option, value, expected", [
    ("eps", 0.0, "a finite number > 0"), ("eps", float("nan"), "a finite number > 0"),
    ("eps", "1e-6", "a finite number > 0"), ("rtol", -1.0, "None or a finite number >= 0"),
    ("atol", float("nan"), "None or a finite number >= 0"), ("seed", -1, "an int >= 0"),
    ("seed", "a", "an int >= 0"), ("max_coords", 2.5, "an int >= 0"), ("max_coords", True, "an int >= 0")])
def test_check_grad_refuses_an_option_it_cannot_use(option, value, expected):
    x, dx, y, dy = arrays()
    same = unchanged(x, dx, y, dy)
    with pytest.raises(gk.AnnotationError, match=rf"check_grad: {option} must be {expected}; got {value!r}"):
        check_grad(scale_into, gk.Active(2.0), gk.Duplicated(x, dx), gk.Duplicated(y, dy), **{option: value})
    assert same()


@pytest.mark.parametrize("k", [np.inf, "2", 1j, True], ids=["inf", "str", "complex", "bool"])
def test_check_grad_refuses_an_active_value_before_any_finite_difference(k):
    x, dx, y, dy = arrays()
    same = unchanged(x, dx, y, dy)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # inf ran both finite differences first: RuntimeWarnings of inf - inf
        with pytest.raises(gk.AnnotationError, match=r"argument 'k' is Active with .*expected a finite real number"):
            check_grad(scale_into, gk.Active(k), gk.Duplicated(x, dx), gk.Duplicated(y, dy))
    assert same()


def test_check_grad_refuses_a_non_finite_input_and_a_kernel_that_is_none():
    x, dx, y, dy = arrays()
    x[3] = np.nan
    same = unchanged(x, dx, y, dy)
    with pytest.raises(gk.AnnotationError, match=r"argument 'x' holds nan at \[3\]; expected finite values"):
        check_grad(scale_into, gk.Active(2.0), gk.Duplicated(x, dx), gk.Duplicated(y, dy))
    assert same()
    with pytest.raises(gk.AnnotationError, match=r"kernel must be a @gk.kernel or a program .*; got int"):
        check_grad(42, gk.Active(2.0))


def test_check_grad_still_checks_what_it_accepts(monkeypatch):
    """The edges of the ranges are accepted: max_coords 0 (the dot-product tests alone), a NumPy integer seed,
    a float64 subclass as the Active value."""
    on_interpreter(monkeypatch)
    x, dx, y, dy = arrays()
    report = check_grad(scale_into, gk.Active(type("F", (np.float64,), {})(2.0)), gk.Duplicated(x, dx),
                        gk.Duplicated(y, dy), max_coords=0, seed=np.int64(3))
    assert report.ok and report.checked == 3 and report.dot_analytic != 0.0, str(report)


def _refusal(source: str, tmp_path) -> str:
    """The message of the KernelSyntaxError that defining `source`'s kernel raises (in a file: the frontend
    reads the source)."""
    path = tmp_path / "hostile_func.py"
    path.write_text(source)
    with pytest.raises(gk.KernelSyntaxError) as err:
        exec(compile(source, str(path), "exec"), {"gk": gk})
    return str(err.value)


def test_a_bare_return_beside_several_values_is_refused(tmp_path):
    text = _refusal("@gk.func\ndef f(a):\n    if a > 0.7:\n        return\n    return a, a\n", tmp_path)
    assert "'f' returns 2 values on another path but none here" in text and "same number" in text


def test_a_starred_argument_says_so(tmp_path):
    text = _refusal("@gk.func\ndef f(a):\n    return a, 2.0 * a\n\n@gk.func\ndef g(a, b):\n    return a + b\n\n"
                    "@gk.kernel\ndef k(x, y):\n    i = gk.tid()\n    y[i] = g(*f(x[i]))\n", tmp_path)
    assert "starred arguments are not supported in a call of device function 'g'" in text and "a, b = f(" in text


def test_torch_function_refuses_a_sparse_tensor_and_a_huge_int_by_name(monkeypatch):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'gradkern[torch]')")
    on_interpreter(monkeypatch)
    step = gk.interop.torch_function(allen_cahn_step, "un")
    u = torch.rand(8, dtype=torch.float64, requires_grad=True)
    un = torch.zeros(8, dtype=torch.float64)
    with pytest.raises(gk.InteropError, match=r"argument 'u' is a tensor of layout torch.sparse_coo; .*dense"):
        step(u.detach().to_sparse().requires_grad_(), un, 0.2, 0.01)
    with pytest.raises(gk.InteropError, match=r"argument 'dt' = 1180591620717411303424 does not fit in int64"):
        step(u, un, 0.2, 2**70)
    with pytest.raises(gk.InteropError, match=r"argument 'c' is a scalar of the kernel: pass a real number .*got str"):
        step(u, un, "0.2", 0.01)
    assert torch.equal(un, torch.zeros(8, dtype=torch.float64))


def test_jax_function_refuses_at_the_call_and_differentiates_at_a_python_float(monkeypatch):
    jax = pytest.importorskip("jax", reason="JAX is not installed (pip install 'gradkern[jax]')")
    from jax.experimental import sparse
    on_interpreter(monkeypatch)
    step = gk.interop.jax_function(allen_cahn_step, "un")
    u = jax.numpy.asarray(np.random.default_rng(6).uniform(0.5, 1.0, 8), dtype=np.float32)
    un = jax.numpy.zeros(8, dtype=np.float32)
    with pytest.raises(gk.InteropError, match=r"argument 'u' is a BCOO; gradkern takes dense"):
        step(sparse.BCOO.fromdense(u), un, 0.2, 0.01)
    for bad, what in ((2**70, "= 1180591620717411303424 does not fit in int64"), ("0.2", "is a scalar .*got str"),
                      (0.2 + 1j, "is a scalar .*got complex")):
        with pytest.raises(gk.InteropError, match=f"argument 'dt' {what}"):
            jax.jit(lambda a, bad=bad: step(a, un, 0.2, bad))(u)
    # d/d(dt) of sum(un), un_i = u_i + c (u_{i-1} - 2 u_i + u_{i+1}) + dt (u_i - u_i^3) inside, u_i at the ends:
    # the sum of u_i - u_i^3 over the inside points
    got = jax.grad(lambda dt: step(u, un, 0.2, dt).sum())(0.01)  # a Python float: a literal residual
    x = np.asarray(u, np.float64)
    want = float(np.sum((x - x ** 3)[1:-1]))
    # float32: each of the 6 terms rounded a few times (~2e-7 relative each), summed: 1e-5 bounds it with margin
    assert abs(float(got) - want) <= 1e-5 * abs(want)


def test_gkm_check_grad_refuses_on_every_rank_before_anything_runs(monkeypatch):
    """The same checks as check_grad's, settled by the ranks together (one rank raising alone would leave the
    others waiting): here a world of one rank."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (pip install 'gradkern[mpi]')")
    import gradkern.mpi as gkm
    on_interpreter(monkeypatch)
    ran = []

    def program(u, un, c):
        ran.append(1)
        gk.launch(allen_cahn_step, u.size, u, un, c, 0.01)
    u, un = np.linspace(0.5, 1.0, 8), np.zeros(8)
    same = unchanged(u, un)
    with pytest.raises(gk.GradkernError, match=r"refused on every rank: rank 0: rtol must be None or a finite"):
        gkm.check_grad(program, gk.Duplicated(u, np.zeros(8)), gk.Duplicated(un, np.zeros(8)), gk.Active(0.2),
                       rtol=float("nan"))
    with pytest.raises(gk.GradkernError, match=r"rank 0: argument 2 is Active with inf \(float\)"):
        gkm.check_grad(program, gk.Duplicated(u, np.zeros(8)), gk.Duplicated(un, np.zeros(8)), gk.Active(np.inf))
    assert ran == [] and same()
