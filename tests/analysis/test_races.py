"""Race detection (analysis/races.py, runtime/race_check.py): racy launches
are refused with both accesses named and every buffer unchanged; race-free
kernels that write some elements and read others are accepted."""

import numpy as np
import pytest
from support.corpus import correlation_mirror, lu_update

import gradkern as gk

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


@gk.kernel
def inplace_stencil(u):
    i = gk.tid()
    if 0 < i < u.shape[0] - 1:
        u[i] = 0.5 * (u[i - 1] + u[i + 1])


@gk.kernel
def stencil(u, un):
    i = gk.tid()
    if 0 < i < u.shape[0] - 1:
        un[i] = 0.5 * (u[i - 1] + u[i + 1])
    else:
        un[i] = u[i]


@gk.kernel
def adi_rows(x, a, b):
    i = gk.tid()
    for j in range(1, x.shape[1]):
        x[i, j] = x[i, j] - a[i, j] * x[i, j - 1] / b[i, j - 1]


@gk.kernel
def scatter(x, idx, y):
    i = gk.tid()
    y[idx[i]] = x[i]


@gk.kernel
def atomic_then_read(h, idx, out):
    i = gk.tid()
    gk.atomic_add(h, idx[i], 1.0)
    out[i] = h[i]


@gk.kernel
def histogram(h, idx, w):
    i = gk.tid()
    gk.atomic_add(h, idx[i], w[i])


@gk.kernel
def row_broadcast(a, v):
    i, j = gk.tid()
    a[i] = v[j]


@gk.kernel
def first_thread_writes(x, out):
    i = gk.tid()
    if i == 0:
        out[0] = x[0] + x[1]


@gk.kernel
def data_dependent_target(x, idx, y):
    i = gk.tid()
    x[i] = x[i] * 2.0
    if x[i] > 1.0:
        y[idx[i]] = x[i]


def rand(rng, *shape):
    return rng.uniform(0.5, 1.5, shape)


def assert_refused(kernel, dim, *args, words=()):
    before = [a.copy() for a in args if isinstance(a, np.ndarray)]
    with pytest.raises(gk.RaceError) as info:
        gk.launch(kernel, dim, *args)
    after = [a for a in args if isinstance(a, np.ndarray)]
    for a, b in zip(after, before):
        np.testing.assert_array_equal(a, b)
    msg = str(info.value)
    assert "test_races.py:" in msg and msg.count("thread (") == 2
    for w in words:
        assert w in msg
    return msg


def test_in_place_stencil_is_refused(rng):
    msg = assert_refused(inplace_stencil, 8, rand(rng, 8), words=("reads u[(i - 1)]", "writes u[i]"))
    assert "no buffer was changed" in msg


def test_stencil_launched_with_its_input_as_its_output_is_refused(rng):
    u = rand(rng, 8)
    # the sites print the merged kernel (`un[...]` for the source's u reads): the message says which were one array
    # (session 55: CUDA samples' fwtBatch2Kernel(d_Data, d_Data, ...) read as racing on d_output alone)
    assert_refused(stencil, 8, u, u, words=("reads u[", "('un' passed the same array as 'u', named 'u' here)"))


def test_separate_output_stencil_is_accepted(rng):
    u, un = rand(rng, 8), np.zeros(8)
    gk.launch(stencil, 8, u, un)
    np.testing.assert_allclose(un[1:-1], 0.5 * (u[:-2] + u[2:]))


def test_guarded_and_mirrored_writes_are_proven_statically():
    """The affine analysis under guards proves LU's update (column j > k never
    meets the read of column k) and the correlation kernel's mirrored write."""
    assert not gk.inspect(lu_update, np.ones((5, 5)), 1, dim=(5, 5)).race_check
    assert not gk.inspect(correlation_mirror, np.ones(16), np.ones(12), 4, 3, dim=4).race_check
    assert not gk.inspect(first_thread_writes, np.ones(4), np.ones(1), dim=4).race_check
    assert gk.inspect(inplace_stencil, np.ones(8), dim=8).race_check


def test_lu_guarded_update_is_accepted_and_correct(rng):
    A = rand(rng, 5, 5) + 5 * np.eye(5)
    ref = A.copy()
    k = 1
    for i in range(k + 1, 5):
        for j in range(k + 1, 5):
            ref[i, j] -= A[i, k] * A[k, j] / A[k, k]
    gk.launch(lu_update, (5, 5), A, k)
    np.testing.assert_allclose(A, ref, rtol=1e-14)


def test_correlation_mirrored_write_is_accepted_and_correct(rng):
    m, n = 5, 4
    data = rand(rng, n * m)
    s = np.zeros(m * m)
    gk.launch(correlation_mirror, m + 2, s, data, m, n)
    D = data.reshape(n, m)
    ref = D.T @ D
    np.fill_diagonal(ref, 1.0)
    np.testing.assert_allclose(s.reshape(m, m), ref, rtol=1e-14)


def test_adi_row_recurrence_is_proven_statically(rng):
    x, a, b = rand(rng, 4, 6), rand(rng, 4, 6), rand(rng, 4, 6)
    assert gk.inspect(adi_rows, x, a, b, dim=4).parallel
    ref = x.copy()
    for j in range(1, 6):
        ref[:, j] = ref[:, j] - a[:, j] * ref[:, j - 1] / b[:, j - 1]
    gk.launch(adi_rows, 4, x, a, b)
    np.testing.assert_allclose(x, ref, rtol=1e-14)


def test_indirect_scatter_is_checked_at_run_time(rng):
    x, y = rand(rng, 4), np.zeros(4)
    gk.launch(scatter, 4, x, np.array([3, 1, 0, 2]), y)
    np.testing.assert_array_equal(y[[3, 1, 0, 2]], x)
    assert_refused(scatter, 4, x, np.array([3, 1, 1, 2]), np.zeros(4), words=("writes y[idx[i]]",))


def test_atomics_may_share_but_not_with_plain_accesses(rng):
    h, w = np.zeros(3), rand(rng, 6)
    gk.launch(histogram, 6, h, np.array([0, 2, 2, 1, 0, 2]), w)
    np.testing.assert_allclose(h, [w[0] + w[4], w[3], w[1] + w[2] + w[5]])
    assert_refused(atomic_then_read, 4, np.zeros(4), np.array([1, 1, 2, 3]), np.zeros(4),
                   words=("atomically adds to h[idx[i]] (",))  # the element, not the statement (session 54)


def test_threads_of_a_2d_launch_writing_one_row_element_race(rng):
    assert_refused(row_broadcast, (3, 2), np.zeros(3), rand(rng, 2))


@gk.kernel
def add_at(u, i, j, amp):
    u[i, j] += amp


def test_a_one_thread_launch_needs_no_race_check_and_more_threads_are_checked(rng):
    """No thread index: every thread writes u[i, j]. One thread cannot race (proved by the launch's extent,
    no run-time check, primal and reverse); two threads writing one element are refused."""
    u = rand(rng, 3, 4)
    assert not gk.inspect(add_at, u, 1, 2, 0.5, dim=1).race_check
    reverse = gk.inspect(add_at, gk.Duplicated(u, np.ones_like(u)), 1, 2, gk.Active(0.5), dim=1, mode=gk.Reverse)
    assert reverse.parallel and not reverse.race_check
    u0 = u.copy()
    gk.launch(add_at, 1, u, 1, 2, 0.5)
    assert u[1, 2] == u0[1, 2] + 0.5
    assert gk.inspect(add_at, u, 1, 2, 0.5, dim=2).race_check
    assert_refused(add_at, 2, u, 1, 2, 0.5)


def test_a_single_writer_among_readers_of_other_elements_is_accepted(rng):
    x, out = rand(rng, 4), np.zeros(1)
    gk.launch(first_thread_writes, 4, x, out)
    assert out[0] == x[0] + x[1]


def test_check_follows_values_the_kernel_writes(rng):
    """The target index depends on a value the kernel itself writes: the check
    runs the kernel on scratch copies and sees the same branches."""
    x = np.array([0.3, 0.8, 0.9, 0.2])  # doubled: 0.6, 1.6, 1.8, 0.4 -> threads 1 and 2 write
    x0 = x.copy()
    y = np.zeros(4)
    gk.launch(data_dependent_target, 4, x, np.array([0, 3, 2, 3]), y)
    np.testing.assert_allclose(x, 2 * x0)
    np.testing.assert_allclose(y, [0, 0, 1.8, 1.6])
    x = x0.copy()
    assert_refused(data_dependent_target, 4, x, np.array([0, 3, 3, 1]), np.zeros(4))


def test_racy_kernel_is_refused_by_autodiff_too(rng):
    u, du = rand(rng, 8), rand(rng, 8)
    before = (u.copy(), du.copy())
    with pytest.raises(gk.RaceError):
        gk.autodiff(stencil, gk.Duplicated(u, du), gk.Duplicated(u, du))
    np.testing.assert_array_equal(u, before[0])
    np.testing.assert_array_equal(du, before[1])


def test_exactly_aliased_arguments_are_merged(rng):
    from gradkern.kernels import saxpy
    y = rand(rng, 5)
    y0, dy = y.copy(), rand(rng, 5)
    dy0 = dy.copy()
    g = gk.autodiff(saxpy, gk.Active(3.0), gk.Duplicated(y, dy), gk.Duplicated(y, dy))
    np.testing.assert_allclose(y, 4 * y0, rtol=1e-15)  # y <- (a + 1) y
    np.testing.assert_allclose(dy, 4 * dy0, rtol=1e-15)
    np.testing.assert_allclose(g[0], np.dot(y0, dy0), rtol=1e-14)
    with pytest.raises(gk.AliasingError, match="shadows are different buffers"):
        gk.autodiff(saxpy, gk.Active(3.0), gk.Duplicated(y, dy), gk.Duplicated(y, dy.copy()))


def _verdicts(kernel, dim, *args):
    """(serial, parallel) race verdicts of the interpreter's run-time check:
    None or the (site, other site) pair found."""
    from gradkern.pipeline import specialize
    from gradkern.runtime.binding import bind
    from gradkern.runtime.race_check import _parallel_check
    from gradkern.transforms.aliasing import merge_aliases

    b = bind(kernel.ir, dim, args, "interp")
    spec = specialize(merge_aliases(kernel.ir, dict(b.aliases)), b.type_map(kernel.ir), len(b.dim), "interp")
    assert spec.race_check is not None and spec.race_parallel is not None
    try:
        gk.launch(kernel, dim, *[a.copy() if isinstance(a, np.ndarray) else a for a in args], backend="interp")
        serial = None
    except gk.RaceError as e:
        serial = str(e)
    found = _parallel_check(spec, b, list(b.kernel_values), np)
    return serial, found


@pytest.mark.numba
@pytest.mark.parametrize("seed", range(12))
def test_parallel_two_launch_check_agrees_with_the_serial_one(seed):
    """The GPU's check (note stamps, then look for another thread's) finds a race
    exactly when the serial check does, on random index patterns."""
    r = np.random.default_rng(seed)
    n = 7
    perm = r.permutation(n)
    dup = r.integers(0, n, n)
    cases = [
        (scatter, n, rand(r, n), perm, rand(r, n)),
        (scatter, n, rand(r, n), dup, rand(r, n)),
        (atomic_then_read, n, rand(r, n), dup, rand(r, n)),
        (row_broadcast, (3, 1 + seed % 3), rand(r, 3), rand(r, 1 + seed % 3)),
        (inplace_stencil, n, rand(r, n)),
    ]
    for kernel, dim, *args in cases:
        serial, found = _verdicts(kernel, dim, *args)
        assert (serial is None) == (found is None), (kernel.name, serial, found)
        if found is not None:
            site, other_site, thread, other_thread = found
            assert thread != other_thread


# -- soundness: every binding of a name counts; index arithmetic that wraps is not exact (issue 14.2) ---------------

@gk.kernel
def loop_variable_outlives_loop(a, m):
    i = gk.tid()
    k = i
    for k in range(m):
        pass
    a[k] += 1.0  # every thread: a[m - 1]


@gk.kernel
def loop_variable_outlives_guarded_loop(a, m):
    i = gk.tid()
    k = i
    if i < a.shape[0]:
        for k in range(m):
            a[i] += 0.0
    a[k] = 1.0


@gk.kernel
def loop_variable_outlives_loop_2d(a, m):
    i, j = gk.tid()
    k = j
    for k in range(m):
        pass
    a[i, k] = 1.0  # threads (i, *) share a[i, m - 1]


@gk.kernel
def thread_index_rebound_by_loop(a, m):
    i = gk.tid()
    for i in range(m):
        pass
    a[i] += 1.0  # i == m - 1 after the loop, or still the thread index when m <= 0


@gk.kernel
def thread_index_rebound_by_while(a, m):
    i = gk.tid()
    while i < m:
        i += 1
    a[i] = 1.0


@gk.kernel
def thread_index_rebound_in_branch(a, m):
    i = gk.tid()
    if i > m:
        i = m
    a[i] = 1.0


@gk.kernel
def thread_index_shifted(a, b):
    i = gk.tid()
    i += 1
    i = i - 1
    a[i] = b[i] * 2.0


@gk.kernel
def swapped_thread_indices(a):
    i, j = gk.tid()
    i, j = j, i
    a[i, j] = a[i, j] + 1.0


@gk.kernel
def scalar_rebound_by_loop(a, m):
    i = gk.tid()
    for m in range(m):  # noqa: B020 - the point: the loop rebinds the parameter
        pass
    a[i] = m * 1.0


@gk.kernel
def wraps_int32(a):
    i = gk.tid()
    a[np.int32(i * 4294967296)] = 1.0  # int32 keeps the low 32 bits: 0 for every thread


@gk.kernel
def wraps_int64(a):
    i = gk.tid()
    a[i * 4611686018427387904 * 4] = 1.0  # i * 2**64 is 0 modulo 2**64: every thread writes a[0]


@gk.kernel
def wraps_back_to_own(a):
    i = gk.tid()
    a[i * 4611686018427387904 * 4 + i] = 1.0  # i * 2**64 + i wraps to i: race-free, but not provably so


@gk.kernel
def strided_rows(a, m):
    i = gk.tid()
    if m > 1 and i % 4 == 0:
        a[i * m + 1] = 1.0  # row i, column 1 < m: a row of its own, unless i * m wraps


@gk.kernel
def lower_triangle_backwards(a, n):
    i = gk.tid()
    if i < n:
        for k in range(i, -1, -1):  # n > i >= k > -1: row i, column k
            a[i * n + k] = a[i * n + k] * 2.0


def test_a_downward_loop_constrains_its_variable(rng):
    a = rand(rng, 16)
    assert not gk.inspect(lower_triangle_backwards, a, 4, dim=6).race_check
    ref = a.reshape(4, 4).copy()
    ref[np.tril_indices(4)] *= 2.0
    gk.launch(lower_triangle_backwards, 6, a, 4)
    np.testing.assert_array_equal(a, ref.reshape(-1))


def test_a_loop_variable_that_outlives_its_loop_is_not_the_thread_index(rng):
    for kernel in (loop_variable_outlives_loop, loop_variable_outlives_guarded_loop):
        assert gk.inspect(kernel, np.zeros(8), 4, dim=8).race_check
        assert_refused(kernel, 8, rand(rng, 8), 4)
    assert gk.inspect(loop_variable_outlives_loop_2d, np.zeros((3, 4)), 2, dim=(3, 4)).race_check
    assert_refused(loop_variable_outlives_loop_2d, (3, 4), rand(rng, 3, 4), 2)
    a = np.zeros(8)
    gk.launch(loop_variable_outlives_loop, 8, a, 0)  # the loop runs no iteration: k is still i
    np.testing.assert_array_equal(a, np.ones(8))


def test_a_thread_index_rebound_by_a_loop_is_refused_when_it_races_and_runs_when_not(rng):
    """Numba refuses a write to a copy of its parallel loop index; the CPU backend
    copies the thread index into such a local with int64(tid)."""
    assert gk.inspect(thread_index_rebound_by_loop, np.zeros(8), 4, dim=8).race_check
    assert_refused(thread_index_rebound_by_loop, 8, rand(rng, 8), 4)
    u, du = rand(rng, 8), rand(rng, 8)
    before = (u.copy(), du.copy())
    with pytest.raises(gk.RaceError):
        gk.autodiff(thread_index_rebound_by_loop, gk.Duplicated(u, du), gk.Const(4))
    np.testing.assert_array_equal(u, before[0])
    np.testing.assert_array_equal(du, before[1])
    for backend in ("cpu", "interp"):
        a = np.zeros(8)
        gk.launch(thread_index_rebound_by_loop, 8, a, 0, backend=backend)
        np.testing.assert_array_equal(a, np.ones(8))
        a = np.zeros(8)
        gk.launch(thread_index_rebound_by_loop, 1, a, 3, backend=backend)  # one thread: no race
        np.testing.assert_array_equal(a, [0, 0, 1, 0, 0, 0, 0, 0])


def test_every_other_binding_of_the_thread_index_counts(rng):
    assert_refused(thread_index_rebound_by_while, 8, rand(rng, 8), 5)
    assert_refused(thread_index_rebound_in_branch, 8, rand(rng, 8), 5)
    a = np.zeros(8)
    gk.launch(thread_index_rebound_by_while, 4, a, 0)  # no thread enters the loop
    np.testing.assert_array_equal(a, [1, 1, 1, 1, 0, 0, 0, 0])


def test_rebindings_that_keep_the_thread_index_are_proven_and_run(rng):
    b = rand(rng, 8)
    assert not gk.inspect(thread_index_shifted, np.zeros(8), b, dim=8).race_check
    a = np.zeros(8)
    gk.launch(thread_index_shifted, 8, a, b)
    np.testing.assert_array_equal(a, 2 * b)
    assert not gk.inspect(swapped_thread_indices, np.zeros((4, 3)), dim=(3, 4)).race_check
    a = rand(rng, 4, 3)
    ref = a + 1.0
    gk.launch(swapped_thread_indices, (3, 4), a)
    np.testing.assert_array_equal(a, ref)


def test_a_scalar_parameter_rebound_by_a_loop_is_private_to_each_thread():
    for backend in ("cpu", "interp"):
        a = np.zeros(6)
        gk.launch(scalar_rebound_by_loop, 6, a, 5, backend=backend)
        np.testing.assert_array_equal(a, np.full(6, 4.0))


def test_index_arithmetic_that_wraps_is_not_treated_as_exact(rng):
    for kernel in (wraps_int32, wraps_int64):
        assert gk.inspect(kernel, np.zeros(8), dim=8).race_check
        assert_refused(kernel, 8, rand(rng, 8))
    a = np.zeros(8)
    gk.launch(wraps_back_to_own, 8, a)  # checked at run time, found race-free
    np.testing.assert_array_equal(a, np.ones(8))


def test_a_proof_relying_on_exact_arithmetic_holds_only_where_the_launch_bounds_it():
    """`a[i * m + 1]` (1 < m) is thread i's own element at every launch where
    i * m + 1 cannot wrap; with m = 2**62, threads 0 and 4 meet at a[1], and that
    launch is checked at run time."""
    assert not gk.inspect(strided_rows, np.zeros(16), 3, dim=8).race_check
    assert gk.inspect(strided_rows, np.zeros(16), 2**62, dim=5).race_check
    a = np.zeros(16)
    gk.launch(strided_rows, 8, a, 3)
    np.testing.assert_array_equal(np.flatnonzero(a), [1, 13])
    for backend in ("cpu", "interp"):
        with pytest.raises(gk.RaceError):
            gk.launch(strided_rows, 5, np.zeros(16), 2**62, backend=backend)


@gk.kernel
def flat_in_a_local(x, y, rows, cols):
    i, j = gk.tid()
    if i >= rows or j >= cols:
        return
    k = i * cols + j  # as C ports write it (Rodinia's SRAD)
    y[k] = x[k] * 2.0


@gk.kernel
def flat_in_a_local_rebound(x, y, rows, cols):
    i, j = gk.tid()
    k = i * cols + j
    if i >= rows or j >= cols:
        return
    if x[0] > 0.5:
        k = 0  # every thread may write element 0
    y[k] = x[k] * 2.0


@gk.kernel
def flat_in_a_local_unguarded(x, y, rows, cols):
    i, j = gk.tid()
    k = i * cols + j
    y[k] = x[k] * 2.0


def test_a_flattened_index_bound_to_a_local_is_proven_as_the_sum(rng):
    """`k = i * cols + j; y[k]` is the pair (i, j) as `y[i * cols + j]` is (analysis/affine.py: RowDef);
    rebinding the local, or no guard bounding the column, leaves the launch to the run-time check."""
    x, y = rand(rng, 20), np.zeros(20)
    assert not gk.inspect(flat_in_a_local, x, y, 4, 5, dim=(4, 5)).race_check
    gk.launch(flat_in_a_local, (4, 5), x, y, 4, 5)
    np.testing.assert_array_equal(y, 2.0 * x)
    assert gk.inspect(flat_in_a_local_rebound, x, y, 4, 5, dim=(4, 5)).race_check
    x[0] = 0.9
    assert_refused(flat_in_a_local_rebound, (4, 5), x, y, 4, 5)
    assert gk.inspect(flat_in_a_local_unguarded, x, y, 4, 5, dim=(4, 5)).race_check
    y = np.zeros(20)
    assert_refused(flat_in_a_local_unguarded, (4, 5), x, y, 4, 4)  # j = 4 reaches the next row's j = 0


@gk.kernel
def two_phases_without_a_barrier(a, n):
    i = gk.tid()
    a[i] = a[i] * 2.0
    if i > 0:
        a[n + i] = a[i - 1]  # the source reads a[i - 1] after a __syncthreads(): another thread's first phase


def test_the_hint_names_a_launch_boundary_where_the_source_had_a_barrier(rng):
    """Session 56 (porting Rodinia's LU): a race between phases a GPU kernel separates by __syncthreads() needs a
    launch boundary, the hint's third fix, beside double buffering and atomics."""
    with pytest.raises(gk.RaceError) as info:
        gk.launch(two_phases_without_a_barrier, 4, rand(rng, 8), 4, backend="interp")
    hint = info.value.hint
    assert "double buffering" in hint and "gk.atomic_add" in hint and "__syncthreads()" in hint
    assert "end the launch there" in hint
