"""Access analysis (analysis/access.py): when the launch loop may run in parallel."""

import math
from dataclasses import replace

import numpy as np
import pytest
from support.corpus import gemm_flat

import gradkern as gk
from gradkern.kernels import allen_cahn_step, heat_step_2d, matvec, saxpy
from gradkern.testing import check_grad

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


@gk.kernel
def inplace_stencil(u):
    i = gk.tid()
    if 0 < i < u.shape[0] - 1:
        u[i] = u[i - 1] + u[i + 1]


@gk.kernel
def shifted_write(u, v):
    i = gk.tid()
    v[i + 1] = u[i]


@gk.kernel
def square_index(x, out):
    i = gk.tid()
    out[i * i] = x[i]


@gk.kernel
def row_write(A, x):
    i = gk.tid()
    for j in range(A.shape[1]):
        A[i, j] = A[i, j] * x[j]


@gk.kernel
def partial_slab_2d(a):
    i, j = gk.tid()
    a[i] = 1.0


@gk.kernel
def swapped_axes(a, b):
    i, j = gk.tid()
    b[j, i] = a[i, j]


@gk.kernel
def scatter(h, idx):
    i = gk.tid()
    gk.atomic_add(h, idx[i], 1.0)


def proven(kernel, *args, dim=None):
    """Race-freedom proven statically (no run-time check before the launch)."""
    r = gk.inspect(kernel, *args, dim=dim)
    assert r.parallel
    return not r.race_check


def own(kernel, *args, dim=None):
    from gradkern.analysis.access import own_arrays
    from gradkern.ir.infer import infer_types
    from gradkern.runtime.binding import bind
    b = bind(kernel.ir, dim if dim is not None else next(a.shape for a in args if hasattr(a, "shape")), args)
    return own_arrays(infer_types(kernel.ir, b.type_map(kernel.ir)))


def test_thread_own_writes_are_proven_race_free():
    x = np.ones(8)
    assert proven(saxpy, 2.0, x, x.copy())
    assert proven(allen_cahn_step, x, x.copy(), 0.1, 0.1)
    assert proven(heat_step_2d, np.ones((4, 4)), np.ones((4, 4)), 0.1)
    assert proven(matvec, np.ones((4, 3)), np.ones(3), np.ones(4), dim=4)
    assert proven(row_write, np.ones((4, 3)), np.ones(3), dim=4)  # thread i owns row i
    assert proven(swapped_axes, np.ones((3, 4)), np.ones((4, 3)))
    assert proven(shifted_write, x, np.ones(9), dim=8)  # v[i + 1]: affine, distinct per thread


def test_own_arrays():
    x = np.ones(8)
    assert own(saxpy, 2.0, x, x.copy()) == {"x", "y"}
    assert own(allen_cahn_step, x, x.copy(), 0.1, 0.1) == {"un"}  # u is read at neighbours
    assert own(matvec, np.ones((4, 3)), np.ones(3), np.ones(4), dim=4) == {"A", "y"}  # x[j] is shared
    assert own(row_write, np.ones((4, 3)), np.ones(3), dim=4) == {"A"}


def test_conflicting_or_unproven_writes_get_the_run_time_check():
    x = np.ones(8)
    assert not proven(inplace_stencil, x)
    assert not proven(square_index, x, np.ones(64), dim=8)  # race-free, but i*i is not affine
    assert not proven(partial_slab_2d, np.ones(4), dim=(4, 3))  # threads (i, 0), (i, 1) write a[i]


@pytest.mark.numba
def test_atomic_targets_are_reported_and_proven_when_only_atomically_touched():
    r = gk.inspect(scatter, np.ones(3), np.zeros(8, np.int64), dim=8)
    assert r.atomic_targets == ("h",) and r.parallel and not r.race_check
    assert "_gkb_priv_h" in r.source  # private copies per chunk on the CPU


@pytest.mark.numba
def test_parallel_histogram_equals_bincount(rng):
    idx = rng.integers(0, 7, 5000)
    h = np.zeros(7)
    gk.launch(scatter, idx.size, h, idx)
    np.testing.assert_allclose(h, np.bincount(idx, minlength=7), rtol=1e-15)


def test_unproven_kernels_get_a_run_time_race_check_and_proven_ones_do_not():
    from gradkern.pipeline import specialize
    from gradkern.runtime.binding import bind

    def spec(kernel, *args, dim):
        b = bind(kernel.ir, dim, args)
        return specialize(kernel.ir, b.type_map(kernel.ir), len(b.dim), "cpu")

    x = np.ones(8)
    assert spec(saxpy, 2.0, x, x.copy(), dim=8).race_check is None
    rc = spec(inplace_stencil, x, dim=8).race_check
    assert rc is not None and rc.tracked == ("u",) and not rc.copies
    assert {s.kind for s in rc.sites} == {"read", "write"}


@gk.kernel
def own_and_indirect(u, out, idx):
    i = gk.tid()
    out[i] = u[i] * 2.0  # out: each thread its own element, proved
    u[idx[i]] = 1.0  # u: undecided statically


def test_the_run_time_check_tracks_only_the_arrays_the_static_analysis_could_not_decide():
    """Issue 14.11: accesses to proven arrays are neither instrumented nor tracked; the check still finds the race."""
    from gradkern.pipeline import specialize
    from gradkern.runtime.binding import bind

    u, out = np.random.default_rng(0).uniform(1, 2, 8), np.zeros(8)
    own = np.arange(8)
    b = bind(own_and_indirect.ir, 8, (u, out, own))
    rc = specialize(own_and_indirect.ir, b.type_map(own_and_indirect.ir), 1, "cpu").race_check
    assert rc.tracked == ("u",)
    assert all("out" not in s.text for s in rc.sites)
    want = 2.0 * u
    gk.launch(own_and_indirect, 8, u, out, own)  # each thread writes the element it reads: race-free
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(u, np.ones(8))
    u2, out2 = np.random.default_rng(0).uniform(1, 2, 8), np.zeros(8)
    before = (u2.copy(), out2.copy())
    with pytest.raises(gk.RaceError, match=r"u\[idx\[i\]\]"):
        gk.launch(own_and_indirect, 8, u2, out2, np.zeros(8, np.int64))
    np.testing.assert_array_equal(u2, before[0])
    np.testing.assert_array_equal(out2, before[1])


@gk.kernel
def flat_off_by_one(c, n):
    i = gk.tid()
    for j in range(n + 1):
        c[i * n + j] = 1.0


@gk.kernel
def flat_two_strides(c, n, m):
    i = gk.tid()
    for j in range(n):
        c[i * n + j] = c[i * m + j] + 1.0


def test_flattened_own_rows_are_proven():
    x = np.ones(9)
    assert proven(gemm_flat, x, x.copy(), x.copy(), 3, 1.0, 0.5, dim=3)
    assert own(gemm_flat, x, x.copy(), x.copy(), 3, 1.0, 0.5, dim=3) == {"c", "A"}  # B[k*n + j] is shared
    r = gk.inspect(gemm_flat, gk.Duplicated(x, x.copy()), gk.Duplicated(x.copy(), x.copy()),
                   gk.Duplicated(x.copy(), x.copy()), 3, 1.0, 0.5, dim=3, mode=gk.Reverse)
    assert r.adjoint_forms == {"A": "plain add", "B": "atomic add", "c": "plain add"} and r.parallel


def test_flattened_rows_that_may_overlap_are_not_proven(rng):
    assert not proven(flat_off_by_one, np.ones(12), 3, dim=3)  # j reaches n: row i's last is row i+1's first
    assert not proven(flat_two_strides, np.ones(20), 3, 4, dim=3)
    c = rng.uniform(0.5, 1.5, 12)
    before = c.copy()
    with pytest.raises(gk.RaceError):
        gk.launch(flat_off_by_one, 3, c, 3)
    np.testing.assert_array_equal(c, before)


def test_race_check_verdict_is_cached_when_it_reads_no_array_contents():
    from gradkern.pipeline import specialize
    from gradkern.runtime.binding import bind
    from gradkern.runtime.race_check import check_races

    x = np.ones(10)
    b = bind(square_index.ir, 8, (x, np.ones(64)))
    spec = specialize(square_index.ir, b.type_map(square_index.ir), 1, "cpu")
    assert spec.race_check.data_independent and not spec.race_check.race_free
    check_races(spec, b, "square_index")
    assert len(spec.race_check.race_free) == 1


# -- flattened rows are the thread's own only where tid * stride + r cannot wrap (issue 14.2) -------------------------

@gk.kernel
def flat_row_tail(c, x, n):
    i = gk.tid()
    for j in range(max(n - 2, 0), n):
        c[i * n + j] = c[i * n + j] * x[i]


def _facts(kernel, *args, dim):
    from gradkern.analysis.access import launch_facts
    from gradkern.ir.infer import infer_types
    from gradkern.runtime.binding import bind
    b = bind(kernel.ir, dim, args)
    return launch_facts(infer_types(kernel.ir, b.type_map(kernel.ir)))


def test_own_rows_carry_the_checks_that_keep_them_exact():
    x = np.ones(9)
    facts = _facts(gemm_flat, x, x.copy(), x.copy(), 3, 1.0, 0.5, dim=3)
    assert {a for a, _ in facts.row_exactness} == {"A", "c"}
    exact = facts.exactness({"c"})
    shapes = {"c": (9,), "A": (9,), "B": (9,)}
    assert exact.holds((3,), {"n": 3}, shapes)
    assert exact.holds((2**31,), {"n": 2**31}, shapes)  # i * n + j <= 2**62 - 1
    assert not exact.holds((5,), {"n": 2**62}, shapes)  # thread 4's row 4 * 2**62 wraps to row 0
    assert not exact.holds_always({"n": 64})  # n is a run-time value
    assert exact.holds_always({"n": 1})  # a bool "stride" (0 or 1): i * n + j < 2**63
    plain = _facts(saxpy, 2.0, x, x.copy(), dim=8)
    assert plain.row_exactness == () and plain.exactness({"x", "y"}).trivial


def test_a_gradient_whose_own_rows_may_wrap_is_refused_and_one_whose_rows_cannot_runs(rng):
    c, dc, x = rng.uniform(0.5, 1.5, 12), rng.uniform(0.5, 1.5, 12), rng.uniform(0.5, 1.5, 4)
    before = (c.copy(), dc.copy())
    r = gk.inspect(flat_row_tail, gk.Duplicated(c, dc), gk.Const(x), 3, dim=4, mode=gk.Reverse)
    assert r.adjoint_forms == {"c": "plain add"} and not r.race_check
    with pytest.raises(gk.LaunchError, match="flattened index of 'c'"):
        gk.autodiff(flat_row_tail, gk.Duplicated(c, dc), gk.Const(x), 2**62, dim=4)
    np.testing.assert_array_equal(c, before[0])
    np.testing.assert_array_equal(dc, before[1])
    gk.autodiff(flat_row_tail, gk.Duplicated(c, dc), gk.Const(x), 3, dim=4)
    scale = np.where(np.arange(12) % 3 >= 1, np.repeat(x, 3), 1.0)
    np.testing.assert_allclose(c, before[0] * scale, rtol=1e-15)
    np.testing.assert_allclose(dc, before[1] * scale, rtol=1e-15)


def test_interval_bounds_of_index_polynomials():
    from gradkern.analysis.overflow import Check, Exactness, Loop, add, const, interval, linear, mul, unknown
    t = unknown("tid:0")
    p = add(mul(t, unknown("param:n")), const(-3))  # tid * n - 3
    assert interval(p, {"tid:0": (0, 7), "param:n": (-2, 5)}.__getitem__) == (-17, 32)
    k = Loop("loop:k", ((const(1), linear({"param:n": 1, "": 1}), 1),))  # k in range(1, n + 1)
    e = Exactness(frozenset({Check(mul(unknown("loop:k"), t), 32)}), (k,))
    assert e.holds((2**10,), {"n": 2**20}, {})  # k * tid <= 2**20 * 1023 < 2**31
    assert not e.holds((2**12,), {"n": 2**20}, {})


# -- overwritten: stored at every thread's own element on every path, never read ------------------------------
@gk.kernel
def _over_both_branches(x, y):
    i = gk.tid()
    if x[i] > 0.5:
        y[i] = x[i]
    else:
        y[i] = 2.0 * x[i]


@gk.kernel
def _over_one_branch(x, y):
    i = gk.tid()
    if x[i] > 0.5:
        y[i] = x[i]


@gk.kernel
def _over_in_loop(x, y, m):
    i = gk.tid()
    for k in range(m):
        y[i] = x[i] + k


@gk.kernel
def _over_read_too(x, y):
    i = gk.tid()
    y[i] = x[i]
    y[i] = y[i] * 2.0


@gk.kernel
def _over_shifted(x, y):
    i = gk.tid()
    y[i + 1] = x[i]


@gk.kernel
def _over_2d(x, y):
    i, j = gk.tid()
    y[i, j] = x[j, i]


@pytest.mark.parametrize("kernel,args,claimed", [
    (_over_both_branches, lambda r: (r.random(9), np.zeros(9)), {"y"}),
    (_over_one_branch, lambda r: (r.random(9), np.zeros(9)), set()),
    (_over_in_loop, lambda r: (r.random(9), np.zeros(9), 2), set()),
    (_over_read_too, lambda r: (r.random(9), np.zeros(9)), set()),
    (_over_shifted, lambda r: (r.random(10), np.zeros(11)), set()),
    (_over_2d, lambda r: (r.random((4, 4)), np.zeros((4, 4))), {"y"}),
])
def test_overwritten_is_claimed_only_where_every_element_is_written_unread(kernel, args, claimed):
    """The fact checkpointed loops rely on to skip dead buffers, against a brute-force oracle: each claimed
    array, filled with NaN and launched over its shape, holds no NaN afterwards (every element written)."""
    from gradkern.runtime.call import prepare
    values = args(np.random.default_rng(0))
    dim = values[0].shape
    prepared, _ = prepare(kernel, values, dim, None, "launch")
    assert set(prepared.spec.facts.overwritten) == claimed
    for name in claimed:
        pos = [p.name for p in kernel.ir.params].index(name)
        values[pos][...] = np.nan
        gk.launch(kernel, dim, *values)
        assert not np.isnan(values[pos]).any()


@gk.kernel
def csr_rows(indptr, indices, data, x, y):
    i = gk.tid()
    acc = 0.0
    for k in range(indptr[i], indptr[i + 1]):
        acc += data[k] * x[indices[k]]
    y[i] = acc


@gk.kernel
def csr_scale_rows(indptr, data, s):
    i = gk.tid()
    for k in range(indptr[i], indptr[i + 1]):
        data[k] = data[k] * s[i]


@gk.kernel
def two_pointer_arrays(lo, hi, data, y):
    i = gk.tid()
    acc = 0.0
    for k in range(lo[i], hi[i + 1]):
        acc += data[k]
    y[i] = acc


@gk.kernel
def skipping_a_row(indptr, data, y):
    i = gk.tid()
    acc = 0.0
    for k in range(indptr[i], indptr[i + 2]):
        acc += data[k]
    y[i] = acc


@gk.kernel
def pointer_written(indptr, data, y):
    i = gk.tid()
    acc = 0.0
    for k in range(indptr[i], indptr[i + 1]):
        acc += data[k]
    indptr[i] = indptr[i]
    y[i] = acc


def _csr(rng):
    indptr = np.array([0, 3, 3, 7, 9], dtype=np.int64)  # row 1 empty
    return indptr, np.array([2, 0, 2, 1, 3, 0, 3, 2, 2]), rng.uniform(0.5, 1.5, 9), rng.uniform(0.5, 1.5, 4)


def test_an_array_read_in_csr_segments_is_own_under_a_non_decreasing_pointer(rng):
    """data[k], k in range(indptr[i], indptr[i + 1]): thread i's own entries if indptr is non-decreasing."""
    indptr, indices, data, x = _csr(rng)
    facts = _facts(csr_rows, indptr, indices, data, x, np.zeros(4), dim=4)
    assert facts.segments == (("data", "indptr", 0), ("indices", "indptr", 0))
    assert {"data", "indices", "y"} <= facts.own and "x" not in facts.own
    i32 = _facts(csr_rows, indptr.astype(np.int32), indices, data, x, np.zeros(4), dim=4)  # casts to int64
    assert ("data", "indptr", 0) in i32.segments
    r = gk.inspect(csr_rows, gk.Const(indptr), gk.Const(indices), gk.Duplicated(data, np.zeros(9)),
                   gk.Duplicated(x, np.zeros(4)), gk.Duplicated(np.zeros(4), np.ones(4)), dim=4, mode=gk.Reverse)
    assert r.adjoint_forms["data"] == "plain add" and r.adjoint_forms["x"] == "atomic add"
    # not segments: a written array (a race proof cannot rest on the data), two pointer arrays, a range
    # spanning two rows, a pointer array the kernel writes
    assert _facts(csr_scale_rows, indptr, data, x, dim=4).segments == ()
    assert "data" not in _facts(csr_scale_rows, indptr, data, x, dim=4).own
    assert "data" not in _facts(two_pointer_arrays, indptr, indptr.copy(), data, np.zeros(4), dim=4).own
    assert "data" not in _facts(skipping_a_row, np.append(indptr, 9), data, np.zeros(4), dim=4).own
    assert "data" not in _facts(pointer_written, indptr, data, np.zeros(4), dim=4).own


def test_a_gradient_over_overlapping_segments_is_refused_before_anything_changes(rng):
    indptr, indices, data, x = _csr(rng)
    bad = np.array([0, 3, 2, 7, 9])  # row 1 = range(3, 2) is empty but row 2 = range(2, 7) overlaps row 0
    y, ddata, dx, dy = np.zeros(4), np.zeros(9), np.zeros(4), rng.uniform(0.5, 1.5, 4)
    before = [a.copy() for a in (data, x, y, ddata, dx, dy)]
    args = (gk.Duplicated(data, ddata), gk.Duplicated(x, dx), gk.Duplicated(y, dy))
    with pytest.raises(gk.LaunchError, match=r"'indptr' decreases at this launch \(indptr\[1\] > indptr\[2\]\)"):
        gk.autodiff(csr_rows, gk.Const(bad), gk.Const(indices), *args, dim=4)
    for a, b in zip((data, x, y, ddata, dx, dy), before):
        np.testing.assert_array_equal(a, b)
    gk.launch(csr_rows, 4, bad, indices, data, x, y)  # the primal only reads data: it runs
    # only the launched rows' pointers count: rows 0..1 of the same array are in order
    gk.autodiff(csr_rows, gk.Const(np.array([0, 3, 9, 2, 1])), gk.Const(indices), gk.Duplicated(data, np.zeros(9)),
                gk.Duplicated(x, np.zeros(4)), gk.Duplicated(y, dy.copy()), dim=2)
    gk.autodiff(csr_rows, gk.Const(indptr), gk.Const(indices), *args, dim=4)
    want = np.zeros(9)
    for i in range(4):  # d y_i / d data_k = x[indices[k]] for k in row i
        want[indptr[i]:indptr[i + 1]] += before[5][i] * x[indices[indptr[i]:indptr[i + 1]]]
    np.testing.assert_allclose(ddata, want, rtol=1e-15)


# -- thread-own at an offset (issue 29.3, docs/adjoint-forms.md) ----------------------------------------------------
@gk.kernel
def offset_own(x, y, K):  # Veros's loop nests start at 1: every access of K, x and y is at (ti + 1, tj)
    ti, tj = gk.tid()
    i = ti + 1
    K[i, tj] = x[i, tj] * x[i, tj]
    y[1 + ti, tj] = K[i, tj] * math.sin(x[i, tj]) + y[i, tj]


@gk.kernel
def offset_mixed(x, y):  # x at ti + 1 and at ti + 2: element t + 2 is read by threads t and t + 1
    ti = gk.tid()
    i = ti + 1
    y[i] = x[i] * x[i + 1]


@gk.kernel
def offset_rebound(x, y, n):  # i is ti + 1 or ti + 2: no one offset, so x and y are not own
    ti = gk.tid()
    i = ti + 1
    if ti < n:
        i = ti + 2
    y[i] = x[i] * 2.0


def test_the_offset_recogniser_follows_copies_and_offsets_but_no_other_binding():
    from gradkern.ir.indices import indices
    from gradkern.ir.infer import infer_types
    from gradkern.runtime.binding import bind

    @gk.kernel
    def aliases(x, n):
        ti, tj = gk.tid()
        i = ti + 1
        im = i - 2
        j = 3 + tj
        k = ti
        k = ti + 1  # two bindings, two offsets: none
        a = ti
        for a in range(2):  # a loop variable never is one
            x[a, 0] = 0.0
        c = n
        c = c + 1
        x[i, j] = x[im + 1, k] + x[c, 0]

    args = (np.ones((8, 8)), 3)
    typed = infer_types(aliases.ir, bind(aliases.ir, (4, 4), args).type_map(aliases.ir))
    assert indices(typed).offsets == {"ti": (0, 0), "tj": (1, 0), "i": (0, 1), "im": (0, -1), "j": (1, 3)}
    # computed once per kernel object, kept on it; a rewritten kernel is a new object with its own
    assert indices(typed) is indices(typed)
    assert indices(replace(typed, body=typed.body[:1])).offsets == {"ti": (0, 0)}
    assert typed == replace(typed) and hash(typed) == hash(replace(typed))  # the memo is no field


def test_arrays_accessed_at_one_constant_offset_of_tid_are_own_and_plain_added(rng):
    x, y, K = (rng.uniform(0.5, 1.5, (6, 3)) for _ in range(3))
    assert own(offset_own, x, y, K, dim=(5, 3)) == {"x", "y", "K"}
    assert proven(offset_own, x, y, K, dim=(5, 3))
    args = [gk.Duplicated(a, np.ones_like(a)) for a in (x, y, K)]
    r = gk.inspect(offset_own, *args, dim=(5, 3), mode=gk.Reverse)
    assert r.adjoint_forms == {"K": "plain add", "x": "plain add", "y": "plain add"}
    assert r.atomic_targets == () and "_gkb_priv" not in r.source
    assert check_grad(offset_own, *args, dim=(5, 3)).ok


def test_different_offsets_or_a_rebound_offset_alias_are_not_own(rng):
    x, y = rng.uniform(0.5, 1.5, 8), rng.uniform(0.5, 1.5, 8)
    assert own(offset_mixed, x, y, dim=6) == {"y"}
    assert gk.inspect(offset_mixed, gk.Duplicated(x, np.ones(8)), gk.Duplicated(y, np.ones(8)), dim=6,
                      mode=gk.Reverse).adjoint_forms == {"x": "gather", "y": "plain add"}
    assert own(offset_rebound, x, y, 3, dim=6) == set()
    forms = gk.inspect(offset_rebound, gk.Duplicated(x, np.ones(8)), gk.Duplicated(y, np.ones(8)), 3, dim=6,
                       mode=gk.Reverse).adjoint_forms
    assert forms["x"] != "plain add", forms
