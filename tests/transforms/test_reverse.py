"""Reverse mode (transforms/reverse.py + runtime/autodiff.py): derivatives
against finite differences and the dot-product test, the exact shadow
semantics of docs/shadows-and-modes.md, minimal tape sizes, and bad annotations."""

import math
import re

import numpy as np
import pytest
from support.corpus import correlation_mirror, gemm_flat, lu_update, syrk

import gradkern as gk
from gradkern.kernels import allen_cahn_step, heat_step_2d, matvec, saxpy
from gradkern.testing import check_grad

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


@gk.kernel
def square(y):
    i = gk.tid()
    y[i] = y[i] * y[i]


@gk.kernel
def loop_sin(x, out, n):
    i = gk.tid()
    s = x[i]
    for k in range(n):
        s = math.sin(s) * 1.5
    out[i] = s


@gk.kernel
def branchy(x, y):
    i = gk.tid()
    v = x[i]
    if v > 0.0:
        y[i] = math.exp(v) / (1.0 + v * v)
    elif v > -0.5:
        y[i] = math.tanh(v) ** 3
    else:
        y[i] = math.sqrt(-v) + abs(v) * max(v, -1.0)


@gk.kernel
def read_after_write(x, y):
    i = gk.tid()
    y[i] = x[i] * 2.0
    y[i] = y[i] * y[i] + math.cos(y[i])


@gk.kernel
def triangular(a, out, m):
    i = gk.tid()
    s = 0.0
    for j in range(i + 1, m):
        s += a[j] * a[i] + s * 0.25
    out[i] = s


@gk.kernel
def prefix_row(A, w):
    i = gk.tid()
    for j in range(1, A.shape[1]):
        A[i, j] = A[i, j] - w * A[i, j - 1] * A[i, j - 1]


@gk.func
def softplus(v):
    if v > 20.0:
        return v
    return math.log(1.0 + math.exp(v))


@gk.kernel
def with_device_function(x, y, c):
    i = gk.tid()
    y[i] = softplus(c * x[i]) + x[i] ** 0.5


@gk.kernel
def scatter_hist(idx, w, h):
    i = gk.tid()
    gk.atomic_add(h, idx[i], w[i] * w[i])


@gk.kernel
def gather(x, idx, y):
    i = gk.tid()
    y[i] = x[idx[i]] * x[idx[i]] + x[i]


@gk.kernel
def volume_3d(u, out):
    i, j, k = gk.tid()
    out[i, j, k] = u[i, j, k] * (i + 1) + math.sin(u[i, j, k]) * (j - k)


@gk.kernel
def unused_active(x, y, c):
    i = gk.tid()
    y[i] = x[i]


@gk.kernel
def downward(x, out, n):
    i = gk.tid()
    s = x[i]
    for k in range(n, 0, -2):
        s = s * s * 0.5 + k * 0.01
    out[i] = s


@gk.kernel
def flat_guarded(a, out, rows, cols, w):
    t = gk.tid()
    if t < rows:
        for c in range(cols):
            out[t * cols + c] = a[t * cols + c] * w + math.exp(-a[t * cols + (cols - 1 - c)])


def rand(rng, *shape, lo=0.2, hi=1.0, dtype=np.float64):
    return rng.uniform(lo, hi, shape).astype(dtype)


def dup(x, rng):
    return gk.Duplicated(x, rand(rng, *x.shape, dtype=x.dtype))


CASES = {
    "saxpy": lambda r: (saxpy, (gk.Active(2.0), dup(rand(r, 7), r), dup(rand(r, 7), r)), None),
    "square": lambda r: (square, (dup(rand(r, 7), r),), None),
    "allen_cahn": lambda r: (allen_cahn_step, (dup(rand(r, 9), r), dup(rand(r, 9), r), gk.Active(0.2),
                                               gk.Const(0.01)), None),
    "heat_2d": lambda r: (heat_step_2d, (dup(rand(r, 5, 4), r), dup(rand(r, 5, 4), r), gk.Active(0.1)), None),
    "matvec": lambda r: (matvec, (dup(rand(r, 4, 3), r), dup(rand(r, 3), r), dup(rand(r, 4), r)), 4),
    "loop_sin": lambda r: (loop_sin, (dup(rand(r, 6), r), dup(rand(r, 6), r), 5), None),
    "gemm_flat": lambda r: (gemm_flat, (dup(rand(r, 9), r), dup(rand(r, 9), r), dup(rand(r, 9), r), 3,
                                        gk.Active(1.3), gk.Active(0.7)), 3),
    "branchy": lambda r: (branchy, (dup(rand(r, 40, lo=-2, hi=2), r), dup(rand(r, 40), r)), None),
    "read_after_write": lambda r: (read_after_write, (dup(rand(r, 6), r), dup(rand(r, 6), r)), None),
    "triangular": lambda r: (triangular, (dup(rand(r, 7), r), dup(rand(r, 7), r), 7), None),
    "prefix_row": lambda r: (prefix_row, (dup(rand(r, 3, 5), r), gk.Active(0.3)), 3),
    "device_function": lambda r: (with_device_function, (dup(rand(r, 8), r), dup(rand(r, 8), r),
                                                         gk.Active(1.7)), None),
    "scatter_hist": lambda r: (scatter_hist, (gk.Const(np.array([0, 2, 2, 1, 0, 2])), dup(rand(r, 6), r),
                                              dup(rand(r, 3), r)), 6),
    "gather_repeated": lambda r: (gather, (dup(rand(r, 6), r), gk.Const(np.array([1, 1, 5, 0, 5, 5])),
                                           dup(rand(r, 6), r)), None),
    "volume_3d": lambda r: (volume_3d, (dup(rand(r, 3, 2, 4), r), dup(rand(r, 3, 2, 4), r)), None),
    "downward_loop": lambda r: (downward, (dup(rand(r, 5), r), dup(rand(r, 5), r), 7), None),
    "lu_update": lambda r: (lu_update, (dup(rand(r, 6, 6) + 4 * np.eye(6), r), 1), (6, 6)),
    "correlation": lambda r: (correlation_mirror, (dup(rand(r, 16), r), dup(rand(r, 12), r), 4, 3), 6),
    # a 2-D launch whose reverse has a loop: its trip-count local once clobbered a launch extent
    "syrk": lambda r: (syrk, (dup(rand(r, 5, 5), r), dup(rand(r, 5, 3), r), gk.Active(1.5), gk.Active(1.2), 3),
                       (5, 5)),
    "flat_guarded": lambda r: (flat_guarded, (dup(rand(r, 12), r), dup(rand(r, 12), r), 3, 4, gk.Active(0.7)), 5),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_reverse_matches_finite_differences(name):
    kernel, args, dim = CASES[name](np.random.default_rng(7))
    report = check_grad(kernel, *args, dim=dim)
    assert report.ok and report.checked > 1


@pytest.mark.slow
@pytest.mark.parametrize("name", ["saxpy", "allen_cahn", "heat_2d", "loop_sin", "branchy"])
def test_reverse_float32(name):
    kernel, args, dim = CASES[name](np.random.default_rng(3))
    args32 = tuple(gk.Duplicated(a.val.astype(np.float32), a.dval.astype(np.float32))
                   if isinstance(a, gk.Duplicated) else a for a in args)
    assert check_grad(kernel, *args32, dim=dim).ok


def test_shadow_semantics_read_only_write_only_and_in_place(rng):
    """docs/shadows-and-modes.md: read-only shadows accumulate, write-only shadows end 0 on
    written elements, in-place shadows are transformed from d/d(after) to d/d(before)."""
    x, y = rand(rng, 6), rand(rng, 6)
    dx0, dy0 = rand(rng, 6), rand(rng, 6)
    dx, dy = dx0.copy(), dy0.copy()
    x_before, y_before = x.copy(), y.copy()
    grads = gk.autodiff(saxpy, gk.Active(2.5), gk.Duplicated(x, dx), gk.Duplicated(y, dy))
    np.testing.assert_allclose(dx, dx0 + 2.5 * dy0, rtol=1e-15)  # read-only: accumulated
    np.testing.assert_allclose(dy, dy0, rtol=1e-15)  # in place, d(y_after)/d(y_before) = 1
    np.testing.assert_allclose(grads[0], np.dot(x_before, dy0), rtol=1e-14)
    assert grads[1:] == (None, None)
    np.testing.assert_allclose(y, 2.5 * x_before + y_before, rtol=1e-15)  # primal updated as by launch
    np.testing.assert_array_equal(x, x_before)

    u, un = rand(rng, 8), rand(rng, 8)
    du, dun = np.zeros(8), rand(rng, 8)
    gk.autodiff(allen_cahn_step, gk.Duplicated(u, du), gk.Duplicated(un, dun), 0.1, 0.01)
    np.testing.assert_array_equal(dun, 0.0)  # write-only output: every element written

    y = rand(rng, 5)
    y0, dy = y.copy(), rand(rng, 5)
    dyc = dy.copy()
    gk.autodiff(square, gk.Duplicated(y, dy))
    np.testing.assert_allclose(dy, 2 * y0 * dyc, rtol=1e-15)
    np.testing.assert_allclose(y, y0 * y0, rtol=1e-15)


def test_untouched_elements_of_a_written_array_keep_their_shadow(rng):
    @gk.kernel
    def write_some(x, y):
        i = gk.tid()
        if i % 2 == 0:
            y[i] = x[i] * 3.0

    x, y = rand(rng, 6), rand(rng, 6)
    dx, dy0 = np.zeros(6), rand(rng, 6)
    dy = dy0.copy()
    gk.autodiff(write_some, gk.Duplicated(x, dx), gk.Duplicated(y, dy))
    np.testing.assert_array_equal(dy[0::2], 0.0)
    np.testing.assert_array_equal(dy[1::2], dy0[1::2])
    np.testing.assert_allclose(dx[0::2], 3.0 * dy0[0::2])
    np.testing.assert_array_equal(dx[1::2], 0.0)


def test_unused_active_scalar_gets_zero_and_const_gets_none(rng):
    x, y = rand(rng, 4), rand(rng, 4)
    assert gk.autodiff(unused_active, gk.Duplicated(x, np.zeros(4)), gk.Duplicated(y, np.zeros(4)),
                       gk.Active(3.0)) == (None, None, 0.0)


def test_unused_duplicated_array_keeps_its_shadow(rng):
    @gk.kernel
    def ignores_z(x, z, y):
        i = gk.tid()
        y[i] = x[i] * 2.0

    x, y, z, dz = rand(rng, 4), rand(rng, 4), rand(rng, 4), rand(rng, 4)
    dz0 = dz.copy()
    gk.autodiff(ignores_z, gk.Duplicated(x, np.zeros(4)), gk.Duplicated(z, dz), gk.Duplicated(y, np.ones(4)))
    np.testing.assert_array_equal(dz, dz0)


@pytest.mark.parametrize("kernel, make, dim, expected", [
    (saxpy, lambda x: (gk.Active(2.0), gk.Duplicated(x, x.copy()), gk.Duplicated(x.copy(), x.copy())), None, 0),
    (square, lambda x: (gk.Duplicated(x, x.copy()),), None, 8),
    (loop_sin, lambda x: (gk.Duplicated(x, x.copy()), gk.Duplicated(x.copy(), x.copy()), 7), None, 7 * 8),
    (matvec, lambda x: (gk.Duplicated(np.ones((6, 3)), np.ones((6, 3))), gk.Duplicated(np.ones(3), np.ones(3)),
                        gk.Duplicated(x, x.copy())), 6, 0),
    (gemm_flat, lambda x: (gk.Duplicated(np.ones(9), np.ones(9)), gk.Duplicated(np.ones(9), np.ones(9)),
                           gk.Duplicated(np.ones(9), np.ones(9)), 3, 1.0, 0.5), 3, 0),
    (allen_cahn_step, lambda x: (gk.Duplicated(x, x.copy()), gk.Duplicated(x.copy(), x.copy()), 0.1, 0.1), None, 0),
])
def test_tape_bytes_per_thread(kernel, make, dim, expected):
    r = gk.inspect(kernel, *make(np.ones(6)), dim=dim, mode=gk.Reverse)
    assert r.tape_bytes_per_thread == expected


def test_tape_of_a_run_time_loop_grows_with_its_bound():
    x = np.ones(4)
    sizes = [gk.inspect(loop_sin, gk.Duplicated(x, x.copy()), gk.Duplicated(x.copy(), x.copy()), n,
                        mode=gk.Reverse).tape_bytes_per_thread for n in (1, 10, 33)]
    assert sizes == [8, 80, 264]


def test_interpreter_and_numba_reverse_agree(rng):
    x = rand(rng, 6)
    results = []
    for backend in ("cpu", "interp"):
        dx, dout = np.zeros(6), np.linspace(0.5, 1.5, 6)
        gk.autodiff(loop_sin, gk.Duplicated(x.copy(), dx), gk.Duplicated(np.zeros(6), dout), 4, backend=backend)
        results.append(dx)
    np.testing.assert_allclose(results[0], results[1], rtol=1e-14)


def snapshot(*arrays):
    return [a.copy() for a in arrays]


@pytest.mark.parametrize("make, error, words", [
    (lambda x, y, dx, dy: (gk.Active(x), gk.Duplicated(x, dx), gk.Duplicated(y, dy)), gk.AnnotationError,
     ["'a'", "Active", "array"]),
    (lambda x, y, dx, dy: (2.0, gk.Duplicated(x, dx[:3]), gk.Duplicated(y, dy)), gk.AnnotationError,
     ["shadow of 'x'", "shape (6,)"]),
    (lambda x, y, dx, dy: (2.0, gk.Duplicated(x, dx.astype(np.float32)), gk.Duplicated(y, dy)), gk.AnnotationError,
     ["shadow of 'x'", "float64"]),
    (lambda x, y, dx, dy: (gk.Duplicated(2.0, 1.0), gk.Duplicated(x, dx), gk.Duplicated(y, dy)), gk.AnnotationError,
     ["'a'", "Duplicated", "gk.Active"]),
    (lambda x, y, dx, dy: (gk.Active(float("nan")), gk.Duplicated(x, dx), gk.Duplicated(y, dy)), gk.AnnotationError,
     ["'a'", "non-finite"]),
    (lambda x, y, dx, dy: (2.0, gk.Duplicated(x, dx), gk.Duplicated(y, dx)), gk.AliasingError,
     ["shadow of 'y'", "shadow of 'x'"]),
    (lambda x, y, dx, dy: (2.0, gk.Duplicated(x, x), gk.Duplicated(y, dy)), gk.AliasingError, ["shadow of 'x'"]),
    (lambda x, y, dx, dy: (2.0, gk.Duplicated(x, dx)), gk.LaunchError, ["missing 'y'"]),
    (lambda x, y, dx, dy: (2.0, gk.Duplicated(x, dx), gk.Duplicated(y.astype(np.complex128), dy)), gk.LaunchError,
     ["'y'", "complex128"]),
])
def test_bad_annotations_raise_and_change_nothing(rng, make, error, words):
    x, y, dx, dy = rand(rng, 6), rand(rng, 6), rand(rng, 6), rand(rng, 6)
    before = snapshot(x, y, dx, dy)
    with pytest.raises(error) as info:
        gk.autodiff(saxpy, *make(x, y, dx, dy))
    assert isinstance(info.value, gk.GradkernError)
    for w in words:
        assert w in str(info.value)
    for a, b in zip((x, y, dx, dy), before):
        np.testing.assert_array_equal(a, b)


def test_const_with_a_shadow_is_refused():
    with pytest.raises(gk.AnnotationError, match="shadow"):
        gk.Const(np.ones(3), np.ones(3))


def test_while_loop_with_active_values_counts_its_iterations(rng):
    """Differentiated since session 49 (docs/adjoint-forms.md section 13): x ends as x0 * 0.5**k, k set by x0, so
    the adjoint is multiplied by 0.5 once per iteration the primal ran (one taped count, nothing per iteration)."""
    @gk.kernel
    def halve(x):
        i = gk.tid()
        while x[i] > 1.0:
            x[i] = x[i] * 0.5

    x = rand(rng, 4, lo=2, hi=40)
    k = np.ceil(np.log2(x)).astype(int)  # halvings until x <= 1 (x is no power of two: random)
    dx = rand(rng, 4)
    want = dx * 0.5 ** k
    gk.autodiff(halve, gk.Duplicated(x, dx))
    np.testing.assert_array_equal(dx, want)  # exact: multiplications by 0.5
    assert gk.inspect(halve, gk.Duplicated(x, dx), mode=gk.Reverse).tape_bytes_per_thread == 8


@pytest.mark.slow
@pytest.mark.parametrize("name", ["square", "loop_sin", "gemm_flat", "branchy", "prefix_row", "heat_2d"])
def test_split_mode_equals_autodiff(name):
    """autodiff_thunk: forward then reverse, on the post-forward arrays, gives
    exactly what the fused autodiff gives (primals, shadows and returns)."""
    kernel, args, dim = CASES[name](np.random.default_rng(11))

    def copies():
        return tuple(gk.Duplicated(a.val.copy(), a.dval.copy()) if isinstance(a, gk.Duplicated) else a for a in args)

    fused, split = copies(), copies()
    expected = gk.autodiff(kernel, *fused, dim=dim)
    forward, reverse = gk.autodiff_thunk(kernel, *(type(a) if isinstance(a, gk.Annotation) else gk.Const
                                                   for a in args), dim=dim)
    tape = forward(*split)
    got = reverse(*split, tape)
    for a, b in zip(fused, split):
        if isinstance(a, gk.Duplicated):
            np.testing.assert_array_equal(a.val, b.val)
            np.testing.assert_allclose(a.dval, b.dval, rtol=1e-13, atol=1e-15)
    for e, g in zip(expected, got):
        assert (e is None and g is None) or np.isclose(e, g, rtol=1e-13)


@pytest.mark.numba
def test_split_forward_tapes_what_inspect_reports(rng):
    x = rand(rng, 6)
    forward, _ = gk.autodiff_thunk(loop_sin, gk.Duplicated, gk.Duplicated, gk.Const)
    tape = forward(gk.Duplicated(x, np.zeros(6)), gk.Duplicated(np.zeros(6), np.ones(6)), 9)
    assert tape.values.shape == (6, 9) and (tape.counts[:, 0] == 9).all()
    assert tape.ints.shape == (6, 0) and (tape.counts[:, 1] == 0).all()  # the bound n is recomputed, not taped
    assert gk.inspect(loop_sin, gk.Duplicated(x, x.copy()), gk.Duplicated(x.copy(), x.copy()), 9,
                      mode=gk.Reverse).tape_bytes_per_thread == tape.values[0].nbytes


def test_float32_kernels_tape_float32_and_taped_integers_go_to_the_int_tape(rng):
    x = rand(rng, 6, dtype=np.float32)
    assert gk.inspect(square, gk.Duplicated(x, x.copy()), mode=gk.Reverse).tape_bytes_per_thread == 4
    assert gk.inspect(loop_sin, gk.Duplicated(x, x.copy()), gk.Duplicated(x.copy(), x.copy()), 7,
                      mode=gk.Reverse).tape_bytes_per_thread == 7 * 4

    @gk.kernel
    def data_bound(x, out):
        i = gk.tid()
        m = 2
        if x[i] > 0.5:
            m = 5  # a reassigned local: the reverse cannot recompute the bound, so it is taped
        s = x[i]
        for k in range(m):
            s = math.sin(s)
        out[i] = s

    xs = np.array([0.1, 0.9, 0.2, 0.7, 0.3, 0.4])
    r = gk.inspect(data_bound, gk.Duplicated(xs, xs.copy()), gk.Duplicated(xs.copy(), xs.copy()), mode=gk.Reverse)
    assert r.tape_bytes_per_thread == 5 * 8 + 8  # the longest loop's 5 values, and its bound
    assert check_grad(data_bound, gk.Duplicated(xs, np.zeros(6)), gk.Duplicated(xs.copy(), np.zeros(6))).ok


def test_split_reverse_checks_its_arguments(rng):
    x = rand(rng, 4)
    forward, reverse = gk.autodiff_thunk(square, gk.Duplicated)
    with pytest.raises(gk.AnnotationError, match="declared Duplicated"):
        forward(gk.Const(x))
    tape = forward(gk.Duplicated(x, np.ones(4)))
    with pytest.raises(gk.AnnotationError, match="last argument must be the Tape"):
        reverse(gk.Duplicated(x, np.ones(4)))
    with pytest.raises(gk.AnnotationError, match="another signature or launch shape"):
        reverse(gk.Duplicated(x[:3].copy(), np.ones(3)), tape)


@pytest.mark.numba
def test_adjoint_forms_follow_the_access_analysis():
    """Own arrays accumulate with plain adds; affine-stencil reads are gathered
    by their owners (no atomics); other shared reads (x[j] of a mat-vec) take
    atomic adds, which a parallel CPU launch privatises per chunk."""
    x = np.ones(6)

    def forms(kernel, *args, dim=None):
        return gk.inspect(kernel, *args, dim=dim, mode=gk.Reverse)

    r = forms(saxpy, 2.0, gk.Duplicated(x, x.copy()), gk.Duplicated(x.copy(), x.copy()))
    assert r.adjoint_forms == {"x": "plain add", "y": "plain add"} and r.atomic_targets == ()
    r = forms(allen_cahn_step, gk.Duplicated(x, x.copy()), gk.Duplicated(x.copy(), x.copy()), 0.1, 0.1)
    assert r.adjoint_forms == {"u": "gather", "un": "plain add"}
    assert r.atomic_targets == () and r.parallel and "_gkb_priv" not in r.source
    r = forms(heat_step_2d, gk.Duplicated(np.ones((4, 5)), np.ones((4, 5))), gk.Duplicated(np.ones((4, 5)),
              np.ones((4, 5))), 0.1)
    assert r.adjoint_forms == {"un": "plain add", "u": "gather"}
    r = forms(matvec, gk.Duplicated(np.ones((6, 3)), np.ones((6, 3))), gk.Duplicated(np.ones(3), np.ones(3)),
              gk.Duplicated(x, x.copy()), dim=6)
    assert r.adjoint_forms == {"A": "plain add", "x": "atomic add", "y": "plain add"}
    import numba
    assert r.private_bytes == min(numba.get_num_threads(), 6) * 3 * 8  # one copy of dx per chunk
    assert forms(saxpy, 2.0, gk.Duplicated(x, x.copy()), gk.Duplicated(x.copy(), x.copy())).private_bytes == 0


@pytest.mark.numba
def test_privatised_reverse_equals_serial_reverse(rng, monkeypatch):
    """The parallel reverse (private partial shadows) and the serial path taken
    past the memory limit give the same gradient."""
    from gradkern.backends import numba_plan
    A, x = rand(rng, 400, 30), rand(rng, 30)
    results = []
    for limit in (numba_plan.PRIVATE_LIMIT, 0):
        monkeypatch.setattr(numba_plan, "PRIVATE_LIMIT", limit)
        dx, dy = np.zeros(30), np.linspace(0.5, 1.5, 400)
        gk.autodiff(matvec, gk.Const(A), gk.Duplicated(x.copy(), dx), gk.Duplicated(np.zeros(400), dy), dim=400)
        results.append(dx)
    np.testing.assert_allclose(results[0], results[1], rtol=1e-13)
    np.testing.assert_allclose(results[0], A.T @ np.linspace(0.5, 1.5, 400), rtol=1e-13)


@gk.kernel
def stencil_loop(u, out, n):
    i = gk.tid()
    if 0 < i < u.shape[0] - 1:
        s = u[i - 1] + u[i + 1]
        for k in range(n):
            s = math.sin(s) * 0.9
        out[i] = s * u[i]
    else:
        out[i] = u[i]


@gk.kernel
def stencil_3d(u, out):
    i, j, k = gk.tid()
    if 0 < i < u.shape[0] - 1 and 0 < j < u.shape[1] - 1 and 0 < k < u.shape[2] - 1:
        out[i, j, k] = u[i - 1, j, k] * u[i + 1, j, k] + math.tanh(u[i, j - 1, k] - u[i, j, k + 1])
    else:
        out[i, j, k] = 2.0 * u[i, j, k]


@pytest.mark.slow
def test_gather_with_a_taped_neighbour_matches_finite_differences_and_split_mode(rng):
    """The stencil's neighbours taped a loop: the gather replays each one from
    its tape, between the forward and the reverse."""
    u = rand(rng, 12)
    r = gk.inspect(stencil_loop, gk.Duplicated(u, u.copy()), gk.Duplicated(u.copy(), u.copy()), 4, mode=gk.Reverse)
    assert r.adjoint_forms["u"] == "gather" and r.tape_bytes_per_thread == (4 + 1) * 8  # 4 iterations, final s
    assert check_grad(stencil_loop, gk.Duplicated(u, np.zeros(12)), gk.Duplicated(rand(rng, 12), np.zeros(12)), 4).ok
    fused = (u.copy(), np.zeros(12), np.zeros(12), np.linspace(1, 2, 12))
    split = tuple(a.copy() for a in fused)
    gk.autodiff(stencil_loop, gk.Duplicated(fused[0], fused[1]), gk.Duplicated(fused[2], fused[3]), 4)
    forward, reverse = gk.autodiff_thunk(stencil_loop, gk.Duplicated, gk.Duplicated, gk.Const)
    tape = forward(gk.Duplicated(split[0], split[1]), gk.Duplicated(split[2], split[3]), 4)
    reverse(gk.Duplicated(split[0], split[1]), gk.Duplicated(split[2], split[3]), 4, tape)
    for a, b in zip(fused, split):
        np.testing.assert_allclose(a, b, rtol=1e-14)


@pytest.mark.slow
def test_gather_in_3d(rng):
    u = rand(rng, 4, 5, 3)
    r = gk.inspect(stencil_3d, gk.Duplicated(u, u.copy()), gk.Duplicated(u.copy(), u.copy()), mode=gk.Reverse)
    assert r.adjoint_forms == {"out": "plain add", "u": "gather"}
    assert check_grad(stencil_3d, gk.Duplicated(u, np.zeros_like(u)), gk.Duplicated(u.copy(), np.zeros_like(u)),
                      max_coords=60).ok


@pytest.mark.numba
def test_written_array_with_shared_reads_accumulates_atomically_in_parallel(rng):
    """LU writes A[i, j] but every thread reads the pivot row and column: their
    shadow is shared although A is written, so its adds are atomic; on the CPU
    the launch is parallel: the adds to the thread's own row go straight to the
    shadow, those to the pivot row to per-slot copies that its plain accesses
    read through (backends/numba_cpu.py MixedPlan, tests/backends/test_mixed_atomics.py)."""
    A = rand(rng, 12, 12) + 6 * np.eye(12)
    r = gk.inspect(lu_update, gk.Duplicated(A, np.zeros_like(A)), 2, mode=gk.Reverse)
    assert r.adjoint_forms == {"A": "atomic add"} and r.parallel and "_gkb_pb__gk_d_A" in r.source
    assert check_grad(lu_update, gk.Duplicated(A, np.zeros_like(A)), 2, max_coords=200).ok


def test_duplicated_no_need_skips_the_primal_store_of_a_write_only_output(rng):
    """docs/adjoint-forms.md: DuplicatedNoNeed(un, dun) skips storing un; the shadows are
    exactly those of Duplicated. An array the kernel also reads is still computed."""
    u, un = rand(rng, 9), rand(rng, 9)
    dun = rng.uniform(-1, 1, 9)
    du1, du2, dun1, dun2 = np.zeros(9), np.zeros(9), dun.copy(), dun.copy()
    un1, un2 = un.copy(), un.copy()
    gk.autodiff(allen_cahn_step, gk.Duplicated(u, du1), gk.Duplicated(un1, dun1), 0.2, 0.01)
    gk.autodiff(allen_cahn_step, gk.Duplicated(u, du2), gk.DuplicatedNoNeed(un2, dun2), 0.2, 0.01)
    np.testing.assert_array_equal(du1, du2)
    np.testing.assert_array_equal(dun1, dun2)
    np.testing.assert_array_equal(un2, un)  # not stored
    assert not np.array_equal(un1, un)
    ins = gk.inspect(allen_cahn_step, gk.Duplicated(u, du2), gk.DuplicatedNoNeed(un2, dun2), 0.2, 0.01,
                     mode=gk.Reverse)
    assert re.search(r"(?<!_d_)un\[[^\]]*\] =", ins.source) is None  # no store into un itself

    y = rand(rng, 5)
    y0, dy = y.copy(), rand(rng, 5)
    dyc = dy.copy()
    gk.autodiff(square, gk.DuplicatedNoNeed(y, dy))  # y is read too: its new value is computed as usual
    np.testing.assert_allclose(y, y0 * y0, rtol=1e-15)
    np.testing.assert_allclose(dy, 2 * y0 * dyc, rtol=1e-15)


@gk.kernel
def branch_on_a_rebound_local(a, out, m):
    i = gk.tid()
    k = i
    s = 0.0
    if k > 3:
        s += a[i - 1] * a[i - 1]
    for k in range(m):
        s += 0.5 * s
    out[i] = s


def test_a_branch_on_a_local_that_a_later_loop_rebinds(rng):
    """Found by the race fuzzer: the reverse re-evaluated `k > 3` with k's value after
    `for k in range(m)` (a loop variable was taken as recomputable everywhere): wrong
    gradients, silently. A loop variable that is also assigned is taped like any local."""
    a = rng.uniform(0.5, 1.5, 8)
    da = np.zeros(8)
    gk.autodiff(branch_on_a_rebound_local, gk.Duplicated(a, da), gk.Duplicated(np.zeros(6), np.ones(6)), 6, dim=6)
    want = np.zeros(8)
    want[3:5] = 2.0 * a[3:5] * 1.5 ** 6  # threads 4 and 5 read a[3] and a[4]
    np.testing.assert_allclose(da, want, rtol=1e-13)
    assert check_grad(branch_on_a_rebound_local, gk.Duplicated(a, np.zeros(8)),
                      gk.Duplicated(np.zeros(6), np.zeros(6)), 6, dim=6).ok


N_SUM = 4_000_000  # threads of the float32 Active-sum tests: enough for a float32 running sum to drift


@pytest.mark.numba
def test_float32_active_scalar_is_summed_in_float64():
    """Issue 14.6: an Active float32 scalar's derivative is a sum over every
    thread. Summed naively in float32 it drifts (4e6 terms: ~1e-3 relative);
    in float64 it has the float32 rounding of each term only. dL/da of
    y = a x + y is Σ x_i dy_i: each term is one float32 product (exactly
    numpy's), so against the float64 sum of those products the only error is
    float64 summation, at most n·eps64·Σ|t| = 4e6 · 1.1e-16 ≈ 4.4e-10 relative
    (positive terms); against the float64 products of the same inputs, add each
    product's float32 rounding, at most 2^-24 ≈ 6e-8 relative: 1e-7, not
    growing with n. Fused, split and vector mode, all with float64 accumulators."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0.05, 0.15, N_SUM).astype(np.float32)
    dy = rng.uniform(0.5, 1.5, N_SUM).astype(np.float32)
    terms = (dy * x).astype(np.float64)  # float32 products, as the kernel forms them
    exact = float(np.dot(dy.astype(np.float64), x.astype(np.float64)))
    got = gk.autodiff(saxpy, gk.Active(2.0), gk.Const(x), gk.Duplicated(np.zeros(N_SUM, np.float32), dy.copy()))[0]
    assert abs(got - terms.sum()) <= 4.4e-10 * terms.sum()
    assert abs(got - exact) <= 1e-7 * exact
    running = float(np.cumsum(terms.astype(np.float32), dtype=np.float32)[-1])  # a float32 running sum
    assert abs(running - exact) > 1e-4 * exact  # what the naive float32 accumulation gave

    forward, reverse = gk.autodiff_thunk(saxpy, gk.Active, gk.Const, gk.Duplicated)
    y = np.zeros(N_SUM, np.float32)
    tape = forward(gk.Active(2.0), gk.Const(x), gk.Duplicated(y, dy.copy()))
    assert abs(reverse(gk.Active(2.0), gk.Const(x), gk.Duplicated(y, dy.copy()), tape)[0] - exact) <= 1e-7 * exact

    lanes = gk.autodiff(saxpy, gk.Active(2.0), gk.Const(x),
                        gk.BatchDuplicated(np.zeros(N_SUM, np.float32), (dy.copy(), 2 * dy)))[0]
    # 2 dy is exact in float32, so lane 1's terms are exactly twice lane 0's
    assert abs(lanes[0] - exact) <= 1e-7 * exact and abs(lanes[1] - 2 * exact) <= 2e-7 * exact


@pytest.mark.numba
def test_float32_active_scalar_of_a_gathered_stencil_is_summed_in_float64():
    """The issue's Allen-Cahn dL/dc in float32 at n = 4e6 (its adjoint of u is
    gathered; c's sum stays in the reverse). Each thread's term is one float32
    product dun_i · ((u_{i-1} - 2 u_i) + u_{i+1}), formed exactly as numpy does
    (no contraction on the CPU), so the only error is float64 summation:
    |got - Σ t| <= n · eps64 · Σ|t| (the terms have both signs: the bound is
    relative to Σ|t|, 4.4e-10 of it)."""
    rng = np.random.default_rng(1)
    u = rng.uniform(-1, 1, N_SUM).astype(np.float32)
    dun = rng.uniform(0.5, 1.5, N_SUM).astype(np.float32)
    lap = (u[:-2] - np.float32(2.0) * u[1:-1]) + u[2:]
    terms = (dun[1:-1] * lap).astype(np.float64)
    got = gk.autodiff(allen_cahn_step, gk.Duplicated(u, np.zeros_like(u)), gk.Duplicated(np.zeros_like(u), dun),
                      gk.Active(0.2), gk.Const(0.01))[2]
    assert abs(got - terms.sum()) <= 4.4e-10 * np.abs(terms).sum()


def test_active_accumulators_are_float64_on_every_backend():
    """The interpreter sums as the compiled backends do; the CUDA C holds each
    thread's sum in a double, and each block's in a double added once, atomically, into a double
    (backends/cuda.py block_summed)."""
    rng = np.random.default_rng(2)
    x, dy = rand(rng, 50, dtype=np.float32), rand(rng, 50, dtype=np.float32)
    got = {be: gk.autodiff(saxpy, gk.Active(2.0), gk.Const(x), gk.Duplicated(np.zeros(50, np.float32), dy.copy()),
                           backend=be)[0] for be in ("interp", "cpu")}
    want = (dy * x).astype(np.float64).sum()
    for value in got.values():
        assert abs(value - want) <= 50 * 2.3e-16 * want  # float64 sums of 50 positive terms, in any order
    src = gk.inspect(saxpy, gk.Active(2.0), gk.Const(x), gk.Duplicated(np.zeros(50, np.float32), dy), backend="cuda",
                     mode=gk.Reverse).source
    assert "double* __restrict__ _gk_dacc_a" in src and "double _gk_dsum_a" in src
    assert src.count("_gkb_block_add(&_gk_dacc_a") == 1 and "_gkb_atomic_add(&_gk_dacc_a" not in src
    assert "double _gkb_sum0" in src


@pytest.mark.numba
def test_active_scalar_autodiff_runs_split_on_the_cpu_with_the_fused_result():
    """With Active scalars and nothing taped, the CPU's autodiff runs augmented primal + reverse (their sum
    cannot vectorise the fused loop): the same derivatives as the fused kernel, which a vector-width-1 call
    through autodiff_thunk's pair also computes; equal to float64 rounding of a differently ordered sum."""
    from gradkern.runtime import reverse
    from gradkern.runtime.call import Run, prepare
    r = np.random.default_rng(1)
    n = 1000
    x, y, dy = r.random(n), r.random(n), r.random(n)
    prepared, bound = prepare(saxpy, (gk.Active(0.7), gk.Duplicated(x.copy(), np.zeros(n)),
                                      gk.Duplicated(y.copy(), dy.copy())), n, None, "reverse")
    accs = reverse._accumulators(prepared)
    tapes = reverse._allocate_tape(bound)
    Run("fused", prepared.spec.fused, 0, 1, prepared.spec)(
        prepared.dim, [*bound.values, *reverse._adjoint_values(bound, accs, 0, 1), *tapes])
    fused = reverse._results(prepared, accs)[0]
    dx = np.zeros(n)
    y2 = y.copy()
    split = gk.autodiff(saxpy, gk.Active(0.7), gk.Duplicated(x.copy(), dx), gk.Duplicated(y2, dy.copy()))[0]
    assert split == pytest.approx(fused, rel=1e-13)  # two summation orders of 1000 positive terms
    assert split == pytest.approx(float(x @ dy), rel=1e-13)
    np.testing.assert_array_equal(dx, 0.7 * dy)
    np.testing.assert_allclose(y2, 0.7 * x + y, rtol=1e-15)  # one multiply-add (contracted or not)
