"""Bounds proved at launch, by default (docs/kernel-language.md; analysis/bounds.py,
runtime/bounds_check.py): every affine access is decided from the launch's
dim, scalars and shapes; a launch that would leave an array raises
gk.LaunchError naming the access, a thread and the array's shape before
anything is written, in every mode. Where the proof decides neither way, the
bounds-checked kernel runs first on scratch copies. Indirect accesses are
checked only with GRADKERN_BOUNDSCHECK=1 (tests/transforms/test_boundscheck.py)."""

from __future__ import annotations

import numpy as np
import pytest
from runtime.test_bad_input import saxpy  # the same small kernel, defined once

import gradkern as gk
from gradkern.analysis.bounds import BoundsProof, Outside
from gradkern.runtime.binding import bind
from gradkern.runtime.specialize import primal_specialization
from gradkern.testing import check_grad

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


@gk.kernel
def bp_stencil(u, un):
    i = gk.tid()
    un[i + 1] = u[i] + u[i + 1] + u[i + 2]


@gk.kernel
def bp_guarded(x, y, n):
    i = gk.tid()
    if i < n:
        y[i] = 2.0 * x[i]


@gk.kernel
def bp_diff2d(A, out):
    i, j = gk.tid()
    out[i, j] = A[i, j + 1] - A[i, j]


@gk.kernel
def bp_rowsum(A, out, m):
    i = gk.tid()
    s = 0.0
    for j in range(m):
        s += A[i, j]
    out[i] = s


@gk.kernel
def bp_last(A, out):
    i = gk.tid()
    out[i] = A[i, -1]


@gk.kernel
def bp_data_guard(x, y):
    i = gk.tid()
    if x[i] > 10.0:
        y[i + 1] = x[i]  # past y's end in the last thread, where the guard lets it run


@gk.kernel
def bp_gather(x, idx, out):
    i = gk.tid()
    out[i] = x[idx[i]] * 2.0


@gk.kernel
def bp_heat(u, un, c):
    i = gk.tid()
    if i == 0 or i == u.shape[0] - 1:
        un[i] = u[i]
    else:
        un[i] = u[i] + c * (u[i - 1] - 2.0 * u[i] + u[i + 1])


@gk.kernel
def bp_upwind(u, out):
    i = gk.tid()
    out[i] = u[i - 1] if i > 0 else u[i]


@gk.kernel
def bp_flat(a, out, n):
    i = gk.tid()
    s = 0.0
    for j in range(n):
        s += a[i * n + j]
    out[i] = s


@gk.kernel
def bp_after_while(a, out, m):
    i = gk.tid()
    k = 0
    while k < m:
        k += 1
    out[i] = a[i + 1]  # reached only if the loop ends: the proof cannot name a thread


@gk.kernel
def bp_while_in_loop(a, out, m):
    i = gk.tid()
    s = 0.0
    for k in range(m):
        s += a[k]  # in iteration k only if the while of iteration k - 1 ended
        w = 0
        while w < i:
            w += 1
    out[i] = s


@gk.kernel
def bp_step2(a, out, m):
    i = gk.tid()
    s = 0.0
    for j in range(1, m, 2):  # j = 1 + 2q: the constraints give j an integer q of its own
        s += a[j]
    out[i] = s


@gk.kernel
def bp_boundary(u, un, n):
    i = gk.tid()
    if i >= 1 and i < n - 1:
        un[i] = u[i - 1] + u[i + 1]
    else:  # i < 1 or i >= n - 1: one of the two holds
        un[i] = u[2 * i]


@gk.kernel
def bp_wraps_back(a):
    i = gk.tid()
    a[i * 4611686018427387904 * 4 + i] = 1.0  # i * 2**64 + i wraps to i: inside, though not as integers


def proof_of(kernel, dim, *args, backend="interp"):
    """The bounds proof of the specialisation a launch would use, and its binding."""
    b = bind(kernel.ir, dim, args, backend)
    return primal_specialization(kernel, b), b


def decide(kernel, dim, *args):
    spec, b = proof_of(kernel, dim, *args)
    return spec.bounds.decide(b.dim, b.kernel_values)


def unchanged(*pairs):
    for after, before in pairs:
        np.testing.assert_array_equal(after, before)


@pytest.mark.parametrize("backend", ["cpu", "interp"])
def test_a_launch_past_its_views_is_refused_before_anything_is_written(backend, rng):
    """Issue 14.7: dim 13 on 8-element views of 16-element buffers wrote elements 8-12 of the buffer."""
    xbuf, ybuf = rng.uniform(0.5, 1.5, 16), rng.uniform(0.5, 1.5, 16)
    before = xbuf.copy(), ybuf.copy()
    with pytest.raises(gk.LaunchError) as e:
        gk.launch(saxpy, 13, 2.0, xbuf[:8], ybuf[:8], backend=backend)
    msg = str(e.value)
    assert "kernel 'saxpy': thread (8,) reads x[i] (" in msg and "test_bad_input.py:" in msg
    assert "outside 'x' of shape (8,)" in msg and "no buffer was changed" in msg
    assert "bounds.py" not in msg and "bounds_check.py" not in msg
    unchanged((xbuf, before[0]), (ybuf, before[1]))
    spec, _ = proof_of(saxpy, 13, 2.0, xbuf[:8], ybuf[:8], backend=backend)
    assert spec.bounds_checked.cache_info().currsize == 0  # decided by the proof: nothing ran
    gk.launch(saxpy, 8, 2.0, xbuf[:8], ybuf[:8], backend=backend)
    np.testing.assert_array_equal(ybuf[:8], 2.0 * before[0][:8] + before[1][:8])
    np.testing.assert_array_equal(ybuf[8:], before[1][8:])


def test_a_huge_launch_is_refused_without_running_anything(rng):
    x, y = rng.uniform(0.5, 1.5, 8), rng.uniform(0.5, 1.5, 8)
    before = y.copy()
    with pytest.raises(gk.LaunchError, match=r"thread \(8,\) reads x\[i\].*index 8 on axis 0 at dim=100000000"):
        gk.launch(saxpy, 10**8, 2.0, x, y)
    unchanged((y, before))


@pytest.mark.numba
def test_a_stencil_is_inside_exactly_up_to_its_reach(rng):
    n = 12
    u = rng.uniform(0.5, 1.5, n)
    un = np.zeros(n)
    gk.launch(bp_stencil, n - 2, u, un)
    np.testing.assert_allclose(un[1:-1], u[:-2] + u[1:-1] + u[2:], rtol=1e-15)
    spec, b = proof_of(bp_stencil, n - 2, u, un, backend="cpu")
    assert spec.bounds.verdicts[spec.bounds.key(b.dim, b.kernel_values)] is True
    before = un.copy()
    with pytest.raises(gk.LaunchError, match=rf"thread \({n - 2},\) reads u\[\(i \+ 2\)\].*shape \({n},\)"):
        gk.launch(bp_stencil, n - 1, u, un)
    unchanged((un, before))


def test_a_guard_keeps_a_long_launch_inside(rng):
    x, y = rng.uniform(0.5, 1.5, 8), np.zeros(8)
    gk.launch(bp_guarded, 20, x, y, 8)
    np.testing.assert_array_equal(y, 2.0 * x)
    assert decide(bp_guarded, 20, x, y, 6) is True
    with pytest.raises(gk.LaunchError, match=r"thread \(8,\) reads x\[i\]"):
        gk.launch(bp_guarded, 20, x, y, 9)


def test_two_dimensional_launches(rng):
    A = rng.uniform(0.5, 1.5, (3, 4))
    out = np.zeros((3, 3))
    gk.launch(bp_diff2d, (3, 3), A, out)
    np.testing.assert_array_equal(out, np.diff(A, axis=1))
    with pytest.raises(gk.LaunchError, match=r"thread \(0, 3\) reads A\[i, \(j \+ 1\)\].*index 4 on axis 1"):
        gk.launch(bp_diff2d, (3, 4), A, np.zeros((3, 4)))
    with pytest.raises(gk.LaunchError, match=r"thread \(3, 0\) writes out\[i, j\]"):
        gk.launch(bp_diff2d, (4, 3), np.zeros((4, 4)), out)


def test_a_loop_bound_past_the_shape_is_refused(rng):
    A, out = rng.uniform(0.5, 1.5, (3, 4)), np.zeros(3)
    gk.launch(bp_rowsum, 3, A, out, 4)
    np.testing.assert_allclose(out, A.sum(axis=1), rtol=1e-15)
    before = out.copy()
    with pytest.raises(gk.LaunchError, match=r"thread \(0,\) reads A\[i, j\].*index 4 on axis 1"):
        gk.launch(bp_rowsum, 3, A, out, 5)
    unchanged((out, before))


@pytest.mark.numba
@pytest.mark.parametrize("backend", ["cpu", "interp"])
def test_a_negative_index_is_outside_even_where_numba_would_wrap_it(backend, rng):
    A, out = rng.uniform(0.5, 1.5, (3, 4)), np.zeros(3)
    with pytest.raises(gk.LaunchError, match=r"thread \(0,\) reads A\[i, -1\].*index -1 on axis 1"):
        gk.launch(bp_last, 3, A, out, backend=backend)
    unchanged((out, np.zeros(3)))


@pytest.mark.parametrize("backend", ["cpu", "interp"])
def test_a_data_dependent_guard_is_decided_by_the_exact_check(backend, rng):
    x, y = rng.uniform(0.5, 1.5, 8), np.zeros(8)
    gk.launch(bp_data_guard, 8, x, y, backend=backend)  # the guard is never taken: nothing leaves y
    unchanged((y, np.zeros(8)))
    spec, b = proof_of(bp_data_guard, 8, x, y, backend=backend)
    assert spec.bounds.verdicts[spec.bounds.key(b.dim, b.kernel_values)] is False  # the proof cannot tell
    assert spec.bounds_checked.cache_info().currsize == 1 and not spec.bounds.data_independent
    x[3] = x[7] = 11.0
    before = x.copy()
    with pytest.raises(gk.LaunchError, match=r"thread \(7,\) writes y\[\(i \+ 1\)\].*at dim=8; no buffer was changed"):
        gk.launch(bp_data_guard, 8, x, y, backend=backend)
    unchanged((x, before), (y, np.zeros(8)))  # y[4] = x[3] was not written either


@pytest.mark.numba
def test_an_indirect_index_is_not_checked_by_default(rng, monkeypatch):
    """Documented (docs/kernel-language.md, README): indirect indices are checked only with
    GRADKERN_BOUNDSCHECK=1. Here idx points one past the view x, into its buffer."""
    buf, out = rng.uniform(0.5, 1.5, 16), np.zeros(4)
    idx = np.array([0, 3, 9, 7])
    gk.launch(bp_gather, 4, buf[:8], idx, out)
    np.testing.assert_array_equal(out, 2.0 * buf[idx])  # read buf[9], outside x: not refused
    spec, _ = proof_of(bp_gather, 4, buf[:8], idx, out, backend="cpu")
    assert spec.bounds.unaffine == 1
    monkeypatch.setenv("GRADKERN_BOUNDSCHECK", "1")

    @gk.kernel
    def checked_gather(x, idx, out):
        i = gk.tid()
        out[i] = x[idx[i]] * 2.0

    with pytest.raises(gk.LaunchError, match=r"thread \(2,\) reads x\[idx\[i\]\]"):
        gk.launch(checked_gather, 4, buf[:8], idx, out)
    spec, _ = proof_of(checked_gather, 4, buf[:8], idx, out, backend="cpu")
    assert spec.bounds is None  # the generated code checks every access: nothing to prove


@pytest.mark.parametrize("mode", ["fused", "split", "forward"])
def test_every_gradient_mode_refuses_before_touching_primals_or_shadows(mode, rng):
    x, y = rng.uniform(0.5, 1.5, 8), rng.uniform(0.5, 1.5, 8)
    dx, dy = rng.uniform(0.5, 1.5, 8), rng.uniform(0.5, 1.5, 8)
    before = [v.copy() for v in (x, y, dx, dy)]
    args = (gk.Active(2.0), gk.Duplicated(x, dx), gk.Duplicated(y, dy))
    with pytest.raises(gk.LaunchError, match=r"saxpy': thread \(8,\) reads x\[i\]"):
        if mode == "fused":
            gk.autodiff(saxpy, *args, dim=9)
        elif mode == "split":
            forward, _ = gk.autodiff_thunk(saxpy, gk.Active, gk.Duplicated, gk.Duplicated, dim=9)
            forward(*args)
        else:
            gk.autodiff(saxpy, gk.Const(2.0), gk.Duplicated(x, dx), gk.Duplicated(y, dy), mode=gk.Forward, dim=9)
    unchanged(*zip((x, y, dx, dy), before))


def test_a_gathered_stencil_gradient_is_checked_on_the_primal(rng):
    """The gather kernel runs past the launch domain by the stencil's reach; it is
    inside by construction wherever the primal is (transforms/gather.py)."""
    n = 10
    u, un = rng.uniform(0.5, 1.5, n), np.zeros(n)
    du, dun = np.zeros(n), rng.uniform(0.5, 1.5, n)
    before = [v.copy() for v in (u, un, du, dun)]
    with pytest.raises(gk.LaunchError, match="bp_stencil"):
        gk.autodiff(bp_stencil, gk.Duplicated(u, du), gk.Duplicated(un, dun), dim=n - 1)
    unchanged(*zip((u, un, du, dun), before))
    ins = gk.inspect(bp_stencil, gk.Duplicated(u, du), gk.Duplicated(un, dun), dim=n - 2, mode=gk.Reverse)
    assert ins.adjoint_forms["u"] == "gather"
    check_grad(bp_stencil, gk.Duplicated(u, du), gk.Duplicated(un, dun), dim=n - 2)


def test_guards_conditional_expressions_and_flattened_rows_are_proved(rng):
    u = rng.uniform(0.5, 1.5, 9)
    for kernel, dim, args in ((bp_heat, 9, (u, np.zeros(9), 0.1)),  # `i == 0 or i == n - 1`: its else has i != 0
                              (bp_upwind, 9, (u, np.zeros(9))),
                              (bp_flat, 3, (u, np.zeros(3), 3))):
        spec, b = proof_of(kernel, dim, *args, backend="cpu")
        assert spec.bounds.decide(b.dim, b.kernel_values) is True, kernel.name
        gk.launch(kernel, dim, *args)
        assert spec.bounds_checked.cache_info().currsize == 0  # the checked kernel was never built
    assert isinstance(decide(bp_flat, 4, u, np.zeros(4), 3), Outside)  # a[i * 3 + j] reaches 11 > 8


def test_after_a_while_loop_the_proof_names_no_thread(rng):
    """A `while` may never end: a solution of the constraints of an access after
    it need not be an access. The exact check decides."""
    a, out = rng.uniform(0.5, 1.5, 8), np.zeros(8)
    assert decide(bp_after_while, 8, a, out, 3) is False
    assert decide(bp_after_while, 7, a, out, 3) is True
    with pytest.raises(gk.LaunchError, match=r"thread \(7,\) reads a\[\(i \+ 1\)\].*at dim=8; no buffer"):
        gk.launch(bp_after_while, 8, a, out, 3)
    assert decide(bp_while_in_loop, 2, a, np.zeros(2), 9) is False  # k = 8 follows a while
    assert decide(bp_while_in_loop, 2, a, np.zeros(2), 8) is True
    with pytest.raises(gk.LaunchError, match=r"reads a\[k\].*at dim=2; no buffer"):
        gk.launch(bp_while_in_loop, 2, a, np.zeros(2), 9)


def test_a_loop_of_step_two_and_a_disjunction_are_decided_exactly(rng):
    a, out = rng.uniform(0.5, 1.5, 8), np.zeros(1)
    assert decide(bp_step2, 1, a, out, 9) is True  # j = 1, 3, 5, 7
    verdict = decide(bp_step2, 1, a, out, 10)
    assert isinstance(verdict, Outside) and verdict.index == 9
    gk.launch(bp_step2, 1, a, out, 9)
    assert out[0] == a[1] + a[3] + a[5] + a[7]
    u = rng.uniform(0.5, 1.5, 12)
    assert decide(bp_boundary, 6, u, np.zeros(6), 6) is True  # un[2 * i] for i in {0, 5}: u[10]
    verdict = decide(bp_boundary, 7, u, np.zeros(7), 6)  # thread 6 takes the else branch: u[12]
    assert isinstance(verdict, Outside) and verdict.thread == (6,) and verdict.index == 12


def test_index_arithmetic_that_wraps_is_left_to_the_exact_check(rng):
    """As integers, i * 2**64 + i leaves a for i >= 1; as int64 it is i: the proof
    relies on exact arithmetic only where the launch bounds it (analysis/overflow.py)."""
    a = np.zeros(8)
    assert decide(bp_wraps_back, 8, a) is False
    gk.launch(bp_wraps_back, 8, a)
    np.testing.assert_array_equal(a, np.ones(8))


def test_a_repeated_launch_looks_its_verdict_up(rng, monkeypatch):
    x, y = rng.uniform(0.5, 1.5, 8), rng.uniform(0.5, 1.5, 8)
    spec, b = proof_of(saxpy, 8, 2.0, x, y)
    spec.bounds.verdicts.clear()
    gk.launch(saxpy, 8, 2.0, x, y, backend="interp")
    assert spec.bounds.verdicts == {spec.bounds.key(b.dim, b.kernel_values): True}

    def no_proof(*args):
        raise AssertionError("decided again")

    monkeypatch.setattr(BoundsProof, "decide", no_proof)
    gk.launch(saxpy, 8, 3.0, x.copy(), y.copy(), backend="interp")  # another float scalar: the same key
    assert len(spec.bounds.verdicts) == 1
    with pytest.raises(AssertionError, match="decided again"):
        gk.launch(saxpy, 7, 2.0, x, y, backend="interp")


def test_integer_elimination_and_witnesses():
    """The pieces of analysis/bounds.py on small systems (forms f mean f <= 0)."""
    from gradkern.analysis.bounds import _point, _possible
    from gradkern.analysis.fourier_motzkin import feasible

    odd = [{"j": 1, "q": -2, "": -1}, {"j": -1, "q": 2, "": 1}, {"q": -1}]  # j = 1 + 2q, q >= 0
    system = odd + [{"j": 1, "": -8}, {"j": -1, "": 8}]  # j == 8
    assert feasible(system)  # over the rationals: q = 3.5
    assert not feasible(system, integers=True)
    i_range = [{"tid:0": -1}, {"tid:0": 1, "": -9}]  # 0 <= i <= 9
    nonzero = [[{"tid:0": 1, "": 1}], [{"tid:0": -1, "": 1}]]  # i != 0: i <= -1 or i >= 1
    at_most_zero = i_range + [{"tid:0": 1}]
    assert _possible(at_most_zero, []) and not _possible(at_most_zero, [nonzero])
    assert _point(i_range + [{"tid:0": -1, "": 4}], [nonzero]) == {"tid:0": 4}  # the least thread with i >= 4
    assert _point(odd + [{"j": -1, "": 6}, {"j": 1, "": -9}], [])["j"] == 7  # j >= 6, j <= 9, odd
    assert _point(system, []) is None


@gk.kernel
def bp_csr(indptr, indices, data, x, y):
    i = gk.tid()
    acc = 0.0
    for k in range(indptr[i], indptr[i + 1]):
        acc += data[k] * x[indices[k]]
    y[i] = acc


@gk.kernel
def bp_lazy_rows(p, data, y):
    i = gk.tid()
    acc = 0.0
    for k in range(p[i], p[i + 1]):
        acc += data[k] if data[k] > 0.0 else data[k + 100]  # k + 100 is past data's end: read only if data[k] <= 0
        acc += 1.0 if data[k] < 0.0 and data[k + 100] > 0.0 else 0.0
    y[i] = acc


@pytest.mark.numba
def test_the_exact_check_of_loop_bounds_read_from_data_checks_indices_without_the_values(rng):
    """CSR rows: the loop bounds come from indptr, so the proof cannot decide data[k] and the exact check runs
    at every launch. It evaluates the indices alone (transforms/boundscheck.py, index_skeleton): no load of
    data, x or y, no store, yet every access checked."""
    indptr, indices = np.array([0, 3, 3, 7, 9]), np.array([2, 0, 2, 1, 3, 0, 3, 2, 2])
    data, x, y = rng.uniform(0.5, 1.5, 9), rng.uniform(0.5, 1.5, 4), np.zeros(4)
    gk.launch(bp_csr, 4, indptr, indices, data, x, y)
    spec, b = proof_of(bp_csr, 4, indptr, indices, data, x, y, backend="cpu")
    assert spec.bounds.verdicts[spec.bounds.key(b.dim, b.kernel_values)] is False
    source = spec.bounds_checked().code.source
    assert "indices[" in source and not any(f"{a}[" in source for a in ("data", "x", "y"))
    after = y.copy()
    past_x = indices.copy()
    past_x[8] = 4
    for pointers, columns, site in ((np.array([0, 3, 3, 7, 10]), indices, r"reads data\[k\]"),  # k = 9
                                    (indptr, past_x, r"reads x\[indices\[k\]\]")):
        with pytest.raises(gk.LaunchError, match=r"thread \(3,\) " + site):
            gk.launch(bp_csr, 4, pointers, columns, data, x, y)
        unchanged((y, after))


@pytest.mark.parametrize("backend", ["cpu", "interp"])
def test_the_exact_check_evaluates_conditional_accesses_only_where_the_kernel_does(backend, rng):
    p, data, y = np.array([0, 2, 2, 5]), rng.uniform(0.5, 1.5, 5), np.zeros(3)
    gk.launch(bp_lazy_rows, 3, p, data, y, backend=backend)  # data[k + 100] is never read
    np.testing.assert_allclose(y, [data[0] + data[1], 0.0, data[2:].sum()], rtol=1e-15)
    data[3] = -1.0
    with pytest.raises(gk.LaunchError, match=r"thread \(2,\) reads data\[\(k \+ 100\)\]"):
        gk.launch(bp_lazy_rows, 3, p, data, y, backend=backend)


@gk.kernel
def bp_heat3d(u, un, c):
    i, j, k = gk.tid()
    if i == 0 or j == 0 or k == 0 or i == u.shape[0] - 1 or j == u.shape[1] - 1 or k == u.shape[2] - 1:
        un[i, j, k] = u[i, j, k]
    else:
        un[i, j, k] = u[i, j, k] + c * (u[i - 1, j, k] + u[i + 1, j, k] + u[i, j - 1, k] + u[i, j + 1, k]
                                        + u[i, j, k - 1] + u[i, j, k + 1] - 6.0 * u[i, j, k])


def test_a_guard_of_more_disjunctions_than_the_split_takes_is_still_proved(rng):
    """The 3-D stencil's else holds six disjunctions (i != 0, ...), past MAX_SPLITS: each access is proved by
    its own (before: the exact check ran, and compiling it cost ~50 s); a launch one past the end is never
    proved (no thread is named past MAX_SPLITS: the exact check decides it)."""
    u = rng.uniform(0.5, 1.5, (5, 6, 7))
    spec, b = proof_of(bp_heat3d, u.shape, u, np.zeros_like(u), 0.1, backend="cpu")
    assert spec.bounds.decide(b.dim, b.kernel_values) is True
    assert decide(bp_heat3d, (5, 6, 8), u, np.zeros_like(u), 0.1) is not True  # k reaches 7 = the extent
    assert decide(bp_heat3d, (5, 6, 7), u[:, :, :6], np.zeros((5, 6, 6)), 0.1) is not True


@gk.kernel
def bp_isoneutral(a, dz, out):
    """The shape of Veros' isoneutral mixing, ported (issue 29): each cell's vertical half-cells k + kr - 1
    skip the top and bottom by `continue`, the horizontal neighbours i - 1, i + 1 the edges by `continue` and
    `break`. Before, the proof ignored what the jumps establish, and compiling the two bounds-checked kernels
    took 136 s of a 292 s first gradient."""
    i, k = gk.tid()
    nz = a.shape[1]
    s = 0.0
    for kr in range(2):
        if k == 0 and kr == 0:
            continue
        if k == nz - 1 and kr == 1:
            continue
        for ip in range(2):
            if i == 0 and ip == 0:
                continue
            if i == a.shape[0] - 1 and ip == 1:
                break
            s += (a[i + 2 * ip - 1, k + kr - 1] - a[i, k]) * dz[k + kr - 1]
    out[i, k] = s


@gk.func
def bp_left(u, i):
    if i == 0:
        return u[i]
    return u[i - 1]


@gk.kernel
def bp_returns(u, un, n, m):
    i = gk.tid()
    if i >= n - 1:
        return
    s = 0.0
    for k in range(m):
        if i + k >= n - 1:
            break
        s += u[i + k + 1] + bp_left(u, i + k)
    inside = i > 0 and i < n - 2
    if not inside:
        un[i] = s
        return
    un[i] = s + u[i - 1] + u[i + 2]


def test_continue_break_and_return_guards_are_proved(rng):
    """After `if c: continue` (or break) the rest of the body runs under `not c`, after `if c: return` the
    rest of the kernel: the proof knows it (the lowered jump flags, bool locals in general: analysis/
    conditions.py), so no bounds-checked kernel is built, in any mode (docs/bounds.md)."""
    a, dz = rng.uniform(0.5, 1.5, (5, 6)), rng.uniform(0.5, 1.5, 6)
    u = rng.uniform(0.5, 1.5, 9)
    for kernel, dim, args in (((bp_isoneutral, (5, 6), (a, dz, np.zeros((5, 6))))),
                              (bp_returns, 9, (u, np.zeros(9), 9, 3))):
        spec, b = proof_of(kernel, dim, *args)
        assert spec.bounds.decide(b.dim, b.kernel_values) is True, kernel.name
        assert not gk.inspect(kernel, *args, dim=dim, backend="interp").bounds_check
        gk.launch(kernel, dim, *args, backend="interp")
        assert spec.bounds_checked.cache_info().currsize == 0  # the checked kernel was never built
    out, dout = np.zeros((5, 6)), rng.uniform(0.5, 1.5, (5, 6))
    da, ddz = np.zeros_like(a), np.zeros_like(dz)
    ins = gk.inspect(bp_isoneutral, gk.Duplicated(a, da), gk.Duplicated(dz, ddz), gk.Duplicated(out, dout),
                     mode=gk.Reverse)
    assert not ins.bounds_check  # the primal's proof covers every mode
    # dz one short: dz[k + kr - 1] reaches 4 (k = 4, kr = 1 or k = 5, kr = 0)
    with pytest.raises(gk.LaunchError, match=r"dz\[\(\(k \+ kr\) - 1\)\].*outside 'dz' of shape \(4,\)"):
        gk.launch(bp_isoneutral, (5, 6), a, dz[:4], np.zeros((5, 6)), backend="interp")
    assert decide(bp_returns, 9, u[:8], np.zeros(9), 9, 3) is not True  # u[i + k + 1] reaches 8
    assert decide(bp_returns, 9, u, np.zeros(9), 10, 3) is not True  # n past u's end


def test_bool_locals_carry_what_their_value_implies():
    """A bool local's value stands for the condition it was computed from, through branches that change it:
    `ok` below is `i < n - 1 and not (i == 0)`; soundness is fuzzed (tests/fuzz/test_bounds_fuzz.py)."""

    @gk.kernel
    def bp_flag(u, out, n):
        i = gk.tid()
        ok = i < n - 1
        if i == 0:
            ok = False
        if ok:
            out[i] = u[i - 1] + u[i + 1]

    u = np.ones(8)
    assert decide(bp_flag, 8, u, np.zeros(8), 8) is True
    assert isinstance(decide(bp_flag, 8, u, np.zeros(8), 9), Outside)  # thread 7 reads u[8]
