"""`return` inside a loop (frontend/loop_returns.py, docs/language.md): a kernel's thread ends, a @gk.func
returns its value, from nested loops, while loops, a for loop with an else, and a loop inside a branch. The
primal against the Python run of the kernel's own text (thread by thread, gk.tid patched) on the interpreter,
Numba and hostcuda backends; derivatives by check_grad (float64 central differences and the dot-product test)
in reverse and forward mode; split reverse equal to fused; vector lanes equal to separate calls."""

import numpy as np
import pytest
from support.interp_params import interp_and_numba
from support.ported_harness import on_interpreter

import gradkern as gk
from gradkern.testing import check_grad

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


@gk.kernel
def first_crossing(x, t, y, n):
    """A thread iterates until its value crosses a threshold, then stores and ends."""
    i = gk.tid()
    s = x[i]
    for k in range(n):
        s = gk.sin(s) * 1.3 + 0.2 * x[i]
        if s > t[k]:
            y[i] = s * 2.0
            return
    y[i] = s


@gk.func
def bucket(v, t, n):
    """The first k with v < t[k] (a search returning the loop variable), n if none."""
    for k in range(n):
        if v < t[k]:
            return k
    return n


@gk.func
def damped(v, t, n):
    """A value computed in the loop is returned from inside it."""
    acc = v
    for k in range(n):
        acc = acc * 0.9 + gk.sin(v) * t[k]
        if acc > 1.2:
            return acc * 0.5
    return acc + 1.0


@gk.kernel
def helpers(x, t, w, y, n):
    i = gk.tid()
    b = bucket(x[i], t, n)
    y[i] = w[b] * x[i] + damped(x[i] * w[b], t, n)


@gk.kernel
def nested(x, a, y, n, m):
    """The return leaves two loops; the outer loop's tail and the code after it are skipped."""
    i = gk.tid()
    s = x[i]
    for k in range(n):
        for j in range(m):
            s = s * a[j] + 0.3 * gk.cos(s + k)
            if s > 1.4:
                y[i] = s
                return
        s = s * 0.5
    y[i] = s + 1.0


@gk.kernel
def halve_to(x, y, lim, m):
    """A return inside a while loop (the trip count depends on the data)."""
    i = gk.tid()
    t = x[i]
    q = 0
    while q < m:
        t = t * 0.5 + 0.1
        q += 1
        if t < lim:
            y[i] = t * 3.0
            return
    y[i] = t


@gk.kernel
def with_else(x, t, y, n, m):
    """A for ... else: the else runs only when the loop finished without returning; a return in an inner
    loop's else leaves the outer loop."""
    i = gk.tid()
    s = x[i]
    for k in range(n):
        s = s * 1.1 + t[k]
        if s > 1.0:
            y[i] = s
            return
    else:
        s = s * s
    for k in range(m):
        for j in range(2):
            s = gk.tanh(s) + t[j] * 0.5
            if s > 3.0:
                break
        else:
            if s < x[i]:
                y[i] = s - 4.0
                return
    y[i] = s * 0.5


@gk.kernel
def in_branch(x, t, y, n):
    """The loop with the return sits inside a branch on the thread index."""
    i = gk.tid()
    s = x[i]
    if i % 2 == 0:
        for k in range(n):
            s = gk.tanh(s) + t[k]
            if s > 1.2:
                y[i] = s
                return
        s = s * 2.0
    y[i] = s - 1.0


def _cases(rng):
    """(kernel, arguments (arrays float64 where active, ints), dim, positions of differentiable arrays)."""
    n = 20
    x = rng.uniform(-1.0, 1.5, n)
    t = np.sort(rng.uniform(-0.5, 1.5, 6))
    return [
        (first_crossing, (x, rng.uniform(0.3, 1.6, 6), np.zeros(n), 6), n, (0, 2)),
        (helpers, (rng.uniform(-1.0, 2.5, n), t, rng.uniform(0.5, 1.5, 7), np.zeros(n), 6), n, (0, 2, 3)),
        (nested, (x, rng.uniform(0.6, 1.4, 4), np.zeros(n), 3, 4), n, (0, 1, 2)),
        (halve_to, (rng.uniform(0.5, 20.0, n), np.zeros(n), 0.31, 5), n, (0, 1)),
        (with_else, (x, rng.uniform(-1.0, 1.0, 6), np.zeros(n), 6, 3), n, (0, 1, 2)),
        (in_branch, (x, rng.uniform(-0.2, 0.8, 6), np.zeros(n), 6), n, (0, 1, 2)),
    ]


IDS = ["first_crossing", "helpers", "nested", "halve_to", "with_else", "in_branch"]


def python_run(kernel, args, dim, monkeypatch):
    """The kernel's own Python text run thread by thread on copies of `args`: the arrays after the launch."""
    out = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    for i in range(dim):
        monkeypatch.setattr(gk, "tid", lambda i=i: i)
        kernel.fn(*out)
    monkeypatch.undo()
    return out


@pytest.mark.parametrize("case", range(len(IDS)), ids=IDS)
def test_primal_matches_the_python_run(rng, case, monkeypatch):
    kernel, args, dim, _ = _cases(rng)[case]
    want = python_run(kernel, args, dim, monkeypatch)
    for backend in ("interp", "cpu"):
        got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        gk.launch(kernel, dim, *got, backend=backend)
        for g, w in zip(got, want):
            if isinstance(w, np.ndarray):
                np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-14)  # sin/cos/tanh may differ by an ulp


def test_primal_on_the_devices(rng, device, monkeypatch):
    for kernel, args, dim, _ in _cases(rng):
        want = python_run(kernel, args, dim, monkeypatch)
        got = [device.to(a) for a in args]
        with device.running():
            gk.launch(kernel, dim, *got)
        for g, w in zip(got, want):
            if isinstance(w, np.ndarray):
                np.testing.assert_allclose(device.host(g), w, rtol=1e-13, atol=1e-14)  # libm vs CUDA math: ulps


def _annotated(args, active):
    return tuple(gk.Duplicated(a, np.zeros_like(a)) if k in active else a for k, a in enumerate(args))


@pytest.mark.parametrize("mode", [gk.Reverse, gk.Forward], ids=["reverse", "forward"])
@pytest.mark.parametrize("case", range(len(IDS)), ids=IDS)
def test_gradients(rng, case, mode):
    kernel, args, dim, active = _cases(rng)[case]
    report = check_grad(kernel, *_annotated(args, active), dim=dim, mode=mode)
    assert report.ok and report.checked >= 10


# Split mode and vector lanes against the fused reverse: what the transforms made, on the interpreter in CI; on Numba
# for first_crossing (its split and lane kernels compiled and run), the other cases' Numba runs `full` (their compiles
# were this test's CI time; test_gradients compiles every case's reverse on Numba: docs/testing.md, "Test time")
@pytest.mark.parametrize(("case", "interp"), interp_and_numba(range(len(IDS)), IDS, IDS, ["first_crossing"]))
def test_split_equals_fused_and_lanes_equal_separate_calls(rng, case, interp, monkeypatch):
    if interp:
        on_interpreter(monkeypatch)
    kernel, args, dim, active = _cases(rng)[case]
    seeds = [{k: rng.uniform(-1.0, 1.0, args[k].shape) for k in active} for _ in range(2)]
    separate = []
    for seed in seeds:
        fused = {k: seed[k].copy() for k in active}
        gk.autodiff(kernel, *(gk.Duplicated(a.copy(), fused[k]) if k in active else a for k, a in enumerate(args)),
                    dim=dim)
        split = {k: seed[k].copy() for k in active}
        prim = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        call = [gk.Duplicated(prim[k], split[k]) if k in active else gk.Const(a) for k, a in enumerate(prim)]
        fwd, rev = gk.autodiff_thunk(kernel, *(type(a) for a in call), dim=dim)
        rev(*call, fwd(*call))
        for k in active:
            np.testing.assert_array_equal(split[k], fused[k])
        separate.append(fused)
    batch = [{k: s[k].copy() for k in active} for s in seeds]
    gk.autodiff(kernel, *(gk.BatchDuplicated(a.copy(), tuple(b[k] for b in batch)) if k in active else a
                          for k, a in enumerate(args)), dim=dim)
    for lane in range(2):
        for k in active:
            np.testing.assert_array_equal(batch[lane][k], separate[lane][k])


def test_function_returning_a_value_and_nothing_is_refused():
    with pytest.raises(gk.KernelSyntaxError, match="value on some paths and nothing on others"):
        @gk.func
        def f(a, n):
            for _j in range(n):
                if a > 1.0:
                    return
            return a
