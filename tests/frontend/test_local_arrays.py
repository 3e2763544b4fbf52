"""Local arrays, constant tables (frontend/unroll.py) and break/continue
(frontend/jumps.py), lowered to scalars, literals and flags before the IR, so
every mode, both backends and the analyses see nothing new. Values against
NumPy run in the corpus (`local_tables`, `break_continue`); here: the issue's
two worked kernels (a D2Q9 collide-and-stream step with local arrays and
tables, a particle push with gk.clamp and break) through check_grad in both
modes and vector mode, active computations through overwritten local-array
elements, continue, break in unrolled and in nested loops, while with break,
and the errors (issue 19, items 1, 2 and 6)."""

import math

import numpy as np
import pytest
from library.test_hpc_kernels import d2q9_bgk

import gradkern as gk
from gradkern.testing import check_grad

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


# the D2Q9 lattice: velocities and weights, as a user writes them at module level
E = ((0, 0), (1, 0), (0, 1), (-1, 0), (0, -1), (1, 1), (-1, 1), (-1, -1), (1, -1))
W = (4.0 / 9.0, 1.0 / 9.0, 1.0 / 9.0, 1.0 / 9.0, 1.0 / 9.0, 1.0 / 36.0, 1.0 / 36.0, 1.0 / 36.0, 1.0 / 36.0)


@gk.kernel
def d2q9_local(f, fn, omega, nx, ny):
    """BGK collision after pull streaming on a periodic grid: test_hpc_kernels.d2q9_bgk with loops."""
    i, j = gk.tid()
    g = gk.local((9,), gk.float64)
    rho = 0.0
    ux = 0.0
    uy = 0.0
    for q in range(9):
        g[q] = f[q, (i - E[q][0] + nx) % nx, (j - E[q][1] + ny) % ny]
        rho += g[q]
        ux += E[q][0] * g[q]
        uy += E[q][1] * g[q]
    ux /= rho
    uy /= rho
    usq = 1.5 * (ux * ux + uy * uy)
    for q in range(len(W)):
        cu = 3.0 * (E[q][0] * ux + E[q][1] * uy)
        feq = W[q] * rho * (1.0 + cu + 0.5 * cu * cu - usq)
        fn[q, i, j] = g[q] + omega * (feq - g[q])


@gk.kernel
def push(x, v, efield, dt, nsteps, length):
    """Particles in a 1-D field, linearly interpolated from its cells; a particle that leaves [0, length] is
    absorbed at the wall and stops."""
    p = gk.tid()
    ncell = efield.shape[0]
    xp = x[p]
    vp = v[p]
    for _ in range(nsteps):
        c = gk.clamp(int(math.floor(xp)), 0, ncell - 2)
        w = xp - c
        vp += dt * ((1.0 - w) * efield[c] + w * efield[c + 1])
        xp += dt * vp
        if xp < 0.0 or xp > length:
            xp = gk.clamp(xp, 0.0, length)
            break
    x[p] = xp
    v[p] = vp


def _push_reference(x, v, efield, dt, nsteps, length):
    x, v = x.copy(), v.copy()
    for p in range(x.size):
        for _ in range(nsteps):
            c = min(max(math.floor(x[p]), 0), efield.size - 2)
            w = x[p] - c
            v[p] += dt * ((1.0 - w) * efield[c] + w * efield[c + 1])
            x[p] += dt * v[p]
            if x[p] < 0.0 or x[p] > length:
                x[p] = min(max(x[p], 0.0), length)
                break
    return x, v


W5 = (0.5, 1.0, 1.5, 2.0, 2.5)


@gk.kernel
def local_overwrite(x, y, n, thr):
    """Local-array elements overwritten in a run-time loop (taped per iteration), a break inside an unrolled
    loop, a continue."""
    i = gk.tid()
    f = gk.local((5,), gk.float64)
    for q in range(5):
        f[q] = x[i, q] * W5[q]
    for _ in range(n):
        for q in range(5):
            f[q] = gk.sin(f[q] + 0.5 * f[(q + 1) % 5])
    acc = 0.0
    for q in range(5):
        if f[q] < -0.9:
            continue
        acc += f[q] * f[q]
        if acc > thr:
            break
    y[i] = acc


def _local_overwrite_reference(x, n, thr):
    y = np.zeros(x.shape[0])
    for i in range(x.shape[0]):
        f = [x[i, q] * W5[q] for q in range(5)]
        for _ in range(n):
            for q in range(5):
                f[q] = math.sin(f[q] + 0.5 * f[(q + 1) % 5])
        acc = 0.0
        for q in range(5):
            if f[q] < -0.9:
                continue
            acc += f[q] * f[q]
            if acc > thr:
                break
        y[i] = acc
    return y


@gk.kernel
def skip_sum(x, w, y, n):
    """A loop-carried active local through continue and a data-dependent break, nested loops."""
    i = gk.tid()
    s = x[i]
    for k in range(n):
        if w[k] < 0.0:
            continue
        for m in range(n):
            if m > k:
                break
            s = gk.sin(s) * w[k] + x[i] * w[m]
        if s > 2.5:
            break
    y[i] = s


def _skip_sum_reference(x, w, n):
    y = np.zeros_like(x)
    for i in range(x.size):
        s = x[i]
        for k in range(n):
            if w[k] < 0.0:
                continue
            for m in range(n):
                if m > k:
                    break
                s = math.sin(s) * w[k] + x[i] * w[m]
            if s > 2.5:
                break
        y[i] = s
    return y


@gk.kernel
def halve_until(x, y):
    """A while loop left by break (differentiated in both modes: the reverse counts its iterations)."""
    i = gk.tid()
    t = x[i]
    while True:
        t = t * 0.5 + 0.1
        if t < 1.0:
            break
    y[i] = t


def _d2q9_args(rng, nx=5, ny=4):
    return rng.uniform(0.5, 1.5, (9, nx, ny)) * 0.1, np.zeros((9, nx, ny))


def test_d2q9_with_local_arrays_matches_the_hand_unrolled_kernel(rng):
    f, _ = _d2q9_args(rng, 7, 6)
    want = np.zeros_like(f)
    gk.launch(d2q9_bgk, (7, 6), f, want, 1.2, 7, 6)
    for backend in ("interp", "cpu"):
        got = np.zeros_like(f)
        gk.launch(d2q9_local, (7, 6), f, got, 1.2, 7, 6, backend=backend)
        np.testing.assert_array_equal(got, want)  # the same IEEE operations: a table's 0 or 1 times x is exact
    grads, dfn = [], rng.uniform(-1, 1, f.shape)
    for kernel in (d2q9_bgk, d2q9_local):
        df = np.zeros_like(f)
        domega = gk.autodiff(kernel, gk.Duplicated(f.copy(), df), gk.Duplicated(want.copy(), dfn.copy()),
                             gk.Active(1.2), 7, 6, dim=(7, 6))[2]
        grads.append((df, domega))
    np.testing.assert_array_equal(grads[0][0], grads[1][0])
    assert grads[0][1] == grads[1][1]


@pytest.mark.parametrize("mode", [gk.Reverse, gk.Forward])
def test_d2q9_with_local_arrays_gradient(rng, mode):
    f, fn = _d2q9_args(rng)
    report = check_grad(d2q9_local, gk.Duplicated(f, np.zeros_like(f)), gk.Duplicated(fn, np.zeros_like(fn)),
                        gk.Active(1.2), 5, 4, dim=(5, 4), mode=mode)
    assert report.ok and report.checked > 5


def _push_args(rng, n=12):
    return (rng.uniform(0.5, 6.5, n), rng.uniform(-3.0, 3.0, n), rng.uniform(-2.0, 2.0, 8))


def test_particle_push_matches_python(rng):
    x, v, e = _push_args(rng)
    want_x, want_v = _push_reference(x, v, e, 0.1, 30, 7.0)
    assert ((want_x == 0.0) | (want_x == 7.0)).sum() >= 2, "some particles must hit the wall and break"
    for backend in ("interp", "cpu"):
        gx, gv = x.copy(), v.copy()
        gk.launch(push, x.size, gx, gv, e, 0.1, 30, 7.0, backend=backend)
        np.testing.assert_allclose(gx, want_x, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(gv, want_v, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("mode", [gk.Reverse, gk.Forward])
def test_particle_push_gradient(rng, mode):
    x, v, e = _push_args(rng)
    report = check_grad(push, gk.Duplicated(x, np.zeros_like(x)), gk.Duplicated(v, np.zeros_like(v)),
                        gk.Duplicated(e, np.zeros_like(e)), gk.Active(0.1), 30, 7.0, dim=x.size, mode=mode)
    assert report.ok and report.checked > 5


def test_local_overwrite_and_skip_sum_match_python(rng):
    x = rng.uniform(-1.0, 1.0, (9, 5))
    for backend in ("interp", "cpu"):
        y = np.zeros(9)
        gk.launch(local_overwrite, 9, x, y, 3, 1.2, backend=backend)
        np.testing.assert_allclose(y, _local_overwrite_reference(x, 3, 1.2), rtol=1e-13, atol=1e-14)
    xs, w = rng.uniform(-1.0, 1.0, 11), rng.uniform(-1.0, 1.5, 6)
    for backend in ("interp", "cpu"):
        y = np.zeros(11)
        gk.launch(skip_sum, 11, xs, w, y, 6, backend=backend)
        np.testing.assert_allclose(y, _skip_sum_reference(xs, w, 6), rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("mode", [gk.Reverse, gk.Forward])
def test_active_local_arrays_break_and_continue_gradients(rng, mode):
    x = rng.uniform(-1.0, 1.0, (9, 5))
    report = check_grad(local_overwrite, gk.Duplicated(x, np.zeros_like(x)), gk.Duplicated(np.zeros(9), np.zeros(9)),
                        3, 1.2, dim=9, mode=mode)
    assert report.ok and report.checked > 5
    xs, w = rng.uniform(-1.0, 1.0, 11), rng.uniform(-1.0, 1.5, 6)
    report = check_grad(skip_sum, gk.Duplicated(xs, np.zeros(11)), gk.Duplicated(w, np.zeros(6)),
                        gk.Duplicated(np.zeros(11), np.zeros(11)), 6, dim=11, mode=mode)
    assert report.ok and report.checked > 5


def test_while_with_break_in_both_modes(rng):
    x = rng.uniform(1.0, 20.0, 7)
    y = np.zeros(7)
    gk.launch(halve_until, 7, x, y)
    want = []
    for t in x:
        t = t * 0.5 + 0.1
        while t >= 1.0:
            t = t * 0.5 + 0.1
        want.append(t)
    np.testing.assert_allclose(y, want, rtol=1e-15)
    for mode in (gk.Forward, gk.Reverse):  # the reverse counts the iterations (docs/adjoint-forms.md section 13)
        report = check_grad(halve_until, gk.Duplicated(x, np.zeros(7)), gk.Duplicated(y, np.zeros(7)), dim=7,
                            mode=mode)
        assert report.ok


def _lanes_equal_separate_calls(kernel, args, dim, rng):
    """autodiff with BatchDuplicated (2 lanes) gives each lane's separate-call shadows, bit for bit."""
    dup = [k for k, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    seeds = [{k: rng.uniform(-1, 1, args[k].shape) for k in dup} for _ in range(2)]
    batch = [{k: s[k].copy() for k in dup} for s in seeds]
    gk.autodiff(kernel, *(gk.BatchDuplicated(a.copy(), tuple(b[k] for b in batch)) if k in dup else a
                          for k, a in enumerate(args)), dim=dim)
    for lane, seed in enumerate(seeds):
        one = {k: seed[k].copy() for k in dup}
        gk.autodiff(kernel, *(gk.Duplicated(a.copy(), one[k]) if k in dup else a for k, a in enumerate(args)),
                    dim=dim)
        for k in dup:
            np.testing.assert_array_equal(batch[lane][k], one[k])


def test_vector_mode_equals_separate_calls(rng):
    f, fn = _d2q9_args(rng)
    _lanes_equal_separate_calls(d2q9_local, (f, fn, gk.Const(1.2), 5, 4), (5, 4), rng)
    x, v, e = _push_args(rng)
    _lanes_equal_separate_calls(push, (x, v, e, gk.Const(0.1), 30, 7.0), x.size, rng)
    _lanes_equal_separate_calls(local_overwrite, (rng.uniform(-1, 1, (9, 5)), np.zeros(9), 3, 1.2), 9, rng)


# -- tables found at launch, errors at launch leave buffers unchanged -----------------------------------------


@gk.kernel
def late_table(x, y):
    i = gk.tid()
    for q in range(3):
        y[i] += LATE[q] * x[i]


@gk.kernel
def late_bad_table(x, y):
    i = gk.tid()
    for q in range(2):
        y[i] += LATE_BAD[q] * x[i]


LATE = (1.0, 2.0, 3.5)
LATE_BAD = [1.0, 2.0]  # a list: mutable, so not a table


def test_table_defined_after_the_kernel_is_found_at_launch(rng):
    x, y = rng.random(4), np.zeros(4)
    gk.launch(late_table, 4, x, y)
    np.testing.assert_allclose(y, 6.5 * x, rtol=1e-15)


def test_list_table_refused_at_launch_buffers_unchanged(rng):
    x, y = rng.random(4), rng.random(4)
    before = (x.copy(), y.copy())
    with pytest.raises(gk.KernelSyntaxError) as info:
        gk.launch(late_bad_table, 4, x, y)
    msg = str(info.value)
    assert "LATE_BAD" in msg and "list" in msg and "tuple" in msg
    np.testing.assert_array_equal(x, before[0])
    np.testing.assert_array_equal(y, before[1])


def _duplicated(a):
    return gk.Duplicated(a, np.zeros_like(a))


# the reverse-mode cases of this file, for tests/support/signatures.py: nvcc compiles their primal, reverse, forward and
# vector-mode CUDA (test_cuda.py), test_forward / test_lanes / test_gpu run them
CASES = {
    "d2q9_local": lambda r: (d2q9_local, (*map(_duplicated, _d2q9_args(r)), gk.Active(1.2), 5, 4), (5, 4)),
    "push": lambda r: (push, (*map(_duplicated, _push_args(r)), gk.Active(0.1), 30, 7.0), 12),
    "local_overwrite": lambda r: (local_overwrite, (_duplicated(r.uniform(-1, 1, (9, 5))), _duplicated(np.zeros(9)),
                                                    3, 1.2), 9),
    "skip_sum": lambda r: (skip_sum, (_duplicated(r.uniform(-1, 1, 11)), _duplicated(r.uniform(-1, 1.5, 6)),
                                      _duplicated(np.zeros(11)), 6), 11),
}


@gk.kernel
def branch_after_own_store(x, y, n):
    i = gk.tid()
    x[i] = x[i] * 2.0
    s = y[i]
    for _ in range(n):
        if x[i] > 1.0:  # this thread stored x[i] above: a count kernel without the store would see the old value
            s = gk.sin(s) * 1.5
    y[i] = s


@gk.kernel
def bound_after_own_store(x, y, n):
    i = gk.tid()
    x[i] = x[i] * 2.0
    s = y[i]
    m = 1
    if x[i] > 1.0:  # decides the loop's bound, which the count needs
        m = n
    for _ in range(m):
        s = gk.sin(s) * 1.5
    y[i] = s


@gk.kernel
def bound_through_a_local(x, y, n):
    i = gk.tid()
    x[i] = x[i] * 2.0
    s = y[i]
    v = x[i] + 1.0  # the stale value reaches the branch through a local: the message still names x
    m = 1
    if v > 2.0:
        m = n
    for _ in range(m):
        s = gk.sin(s) * 1.5
    y[i] = s


def test_tape_count_bounds_a_branch_on_the_threads_own_store(rng):
    """A branch that reads what the thread itself stored is counted with its pushes taken (an upper bound: the
    reverse starts from the pointer the augmented primal reached; docs/shadows-and-modes.md, session 49); one
    whose arm sets a loop bound the count needs is still refused, buffers unchanged."""
    x, y = rng.uniform(0.2, 1.0, 5), rng.uniform(-1, 1, 5)
    report = check_grad(branch_after_own_store, gk.Duplicated(x, np.zeros(5)), gk.Duplicated(y, np.zeros(5)), 4,
                        dim=5)
    assert report.ok and report.dot_analytic != 0.0, str(report)
    dx, dy = np.zeros(5), np.ones(5)
    before = [a.copy() for a in (x, y, dx, dy)]
    for kernel in (bound_after_own_store, bound_through_a_local):
        with pytest.raises(gk.NotDifferentiableError, match="tape size depends on 'x'"):
            gk.autodiff(kernel, gk.Duplicated(x, dx), gk.Duplicated(y, dy), 4, dim=5)
        for a, b in zip((x, y, dx, dy), before):
            np.testing.assert_array_equal(a, b)


@gk.kernel
def first_above(x, thr, out):
    """Where a row first exceeds its threshold: the loop variable read after a break."""
    i = gk.tid()
    k = 0
    for k in range(x.shape[1]):
        if x[i, k] > thr[i]:
            break
    out[i] = x[i, k] * 2.0 + k


def _first_above_python(x, thr):
    out = np.zeros(x.shape[0])
    for i in range(x.shape[0]):
        k = 0
        for k in range(x.shape[1]):
            if x[i, k] > thr[i]:
                break
        out[i] = x[i, k] * 2.0 + k
    return out


@pytest.mark.parametrize("backend", ["cpu", "interp"])
def test_loop_variable_after_break_is_its_value_at_the_break(rng, backend):
    """The remaining iterations run as no-ops (frontend/jumps.py) but leave k where the break left it
    (found by the race fuzzer's break templates: k used to end at its last iteration's value)."""
    x, thr, out = rng.random((9, 6)), rng.random(9), np.zeros(9)
    thr[0] = 2.0  # a row that never breaks: k ends at its last value, as in Python
    gk.launch(first_above, 9, x, thr, out, backend=backend)
    np.testing.assert_array_equal(out, _first_above_python(x, thr))


@pytest.mark.parametrize("mode", [gk.Reverse, gk.Forward])
def test_loop_variable_after_break_gradient(rng, mode):
    x, thr = rng.random((5, 4)), rng.random(5)
    check_grad(first_above, gk.Duplicated(x, np.zeros_like(x)), thr, gk.Duplicated(np.zeros(5), np.zeros(5)),
               dim=5, mode=mode)


W27 = (-6.0, 0.5, 0.25, 0.125)  # a 27-point operator's weights by distance class: centre, faces, edges, corners


@gk.kernel
def class_weighted(u, out):
    i, j = gk.tid()
    acc = 0.0
    for di in range(-1, 2):
        for dj in range(-1, 2):
            cls = abs(di) + abs(dj)  # a local assigned once from unrolled loop variables indexes the table
            acc += W27[cls] * u[i + di + 1, j + dj + 1]
    out[i, j] = acc + W27[min(2, 3) + 1]


@pytest.mark.parametrize("backend", ["cpu", "interp"])
def test_table_index_through_a_local_of_unrolled_variables(rng, backend):
    """`cls = abs(di) + abs(dj); W[cls]` (the 27-point pattern): the loops are unrolled and the index folds
    (frontend/unroll.py); a local bound more than once is still refused, naming the access."""
    u = rng.random((5, 6))
    out = np.zeros((3, 4))
    gk.launch(class_weighted, (3, 4), u, out, backend=backend)
    w = np.array([[W27[abs(a) + abs(b)] for b in (-1, 0, 1)] for a in (-1, 0, 1)])
    want = np.array([[np.sum(w * u[i:i + 3, j:j + 3]) for j in range(4)] for i in range(3)]) + W27[3]
    np.testing.assert_allclose(out, want, rtol=1e-14)
    check_grad(class_weighted, gk.Duplicated(u, np.zeros_like(u)), gk.Duplicated(out, np.zeros_like(out)),
               dim=(3, 4))
    with pytest.raises(gk.KernelSyntaxError) as info:
        @gk.kernel
        def class_index_rebound(u, out):
            i = gk.tid()
            cls = 0
            for d in range(3):
                cls = d  # bound twice: not a constant, even though each unrolled copy could fold
                out[i] += W27[cls] * u[i]
    msg = str(info.value)
    assert "W27[cls]" in msg and "not a constant" in msg and "'cls' is bound 2 times" in msg
