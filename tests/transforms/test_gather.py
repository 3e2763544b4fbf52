"""The scatter → gather rewrite of affine-stencil adjoints (transforms/gather.py)
on launches that cover only part of their arrays: every element the accesses
reach gets its contributions (the gather runs over the union of the shifted
domains, not the launch domain), in 1-D, 2-D and 3-D, with positive and
negative offsets, several gathered arrays with different offsets, fused,
split and vector mode, and never outside an array (the interpreter raises
IndexError on any out-of-bounds access). Periodic stencils, whose wrap-around
indices are the thread index plus an offset in every branch
(`i + 1 if i < n - 1 else i + 1 - n`), are gathered too: full, partial and
over-long launches, 1-D and 2-D, and arrays so small that two offsets land on
one element (n = 1, 2)."""

import math

import numpy as np
import pytest
from support.interp_params import interp_and_numba

import gradkern as gk
from gradkern.testing import check_grad

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


@gk.kernel
def interior(u, un):  # issue 14.1's reproducer: u read at offsets 0, 1, 2
    i = gk.tid()
    un[i + 1] = u[i] + u[i + 1] + u[i + 2]


@gk.kernel
def interior_nonlinear(u, un):
    i = gk.tid()
    un[i + 1] = u[i] * u[i + 2] + math.sin(u[i + 1])


@gk.kernel
def two_arrays(u, v, out):  # u gathered at offsets 0 and 4, v at 1 and 3
    i = gk.tid()
    out[i + 2] = u[i] * v[i + 1] + math.tanh(u[i + 4] - v[i + 3])


@gk.kernel
def behind(u, un):  # negative offsets, kept in bounds by a guard
    i = gk.tid()
    if i >= 2:
        un[i] = u[i - 2] * u[i - 1] + u[i]
    else:
        un[i] = 2.0 * u[i]


@gk.kernel
def guarded_ahead(u, un):  # the guard keeps u[i + 3] inside u: the gather must not write past u's end
    i = gk.tid()
    if i + 3 < u.shape[0]:
        un[i] = u[i] * u[i + 3]
    else:
        un[i] = u[i]


@gk.kernel
def shifted_index(u, un):  # the launch is offset by one through a local
    t = gk.tid()
    i = t + 1
    un[i] = u[i - 1] + u[i] * u[i + 1]


@gk.kernel
def interior_2d(u, un):
    i, j = gk.tid()
    un[i + 1, j + 1] = u[i + 1, j + 1] + 0.1 * (u[i, j + 1] + u[i + 2, j + 1] + u[i + 1, j] + u[i + 1, j + 2]
                                                - 4.0 * u[i + 1, j + 1]) + u[i, j] * u[i + 2, j + 2]


@gk.kernel
def interior_3d(u, un):
    i, j, k = gk.tid()
    un[i + 1, j + 1, k + 1] = (u[i, j + 1, k + 1] * u[i + 2, j + 1, k + 1] + u[i + 1, j, k + 1]
                               - u[i + 1, j + 2, k + 1] + math.sin(u[i + 1, j + 1, k] * u[i + 1, j + 1, k + 2]))


@gk.kernel
def interior_taped(u, un, n):  # each neighbour is replayed from its tape (a run-time loop)
    i = gk.tid()
    s = u[i] + u[i + 2]
    for k in range(n):
        s = math.sin(s) * 0.9
    un[i + 1] = s * u[i + 1]


@gk.kernel
def periodic(u, un):  # wrap-around in both directions, through a local n
    i = gk.tid()
    n = u.shape[0]
    im = i - 1 if i > 0 else i - 1 + n
    ip = i + 1 if i < n - 1 else i + 1 - n
    un[i] = u[im] * u[ip] + math.sin(u[i])


@gk.kernel
def periodic_guarded(u, un):  # launched past u's end: threads i >= n do nothing
    i = gk.tid()
    if i < u.shape[0]:
        im = i - 2 if i > 1 else i - 2 + u.shape[0]
        ip = i + 1 if i < u.shape[0] - 1 else i + 1 - u.shape[0]
        un[i] = u[im] * u[ip] + u[i]


@gk.kernel
def mirrored(u, un):  # a select of two constant offsets: both land on u[1 - i] when n = 2
    i = gk.tid()
    k = i + 1 if i == 0 else i - 1
    un[i] = u[i] * u[k] + math.cos(u[k])


@gk.kernel
def periodic_2d(u, un):  # wraps on both axes, a diagonal neighbour wrapping on both at once
    i, j = gk.tid()
    im = i - 1 if i > 0 else i - 1 + u.shape[0]
    jp = j + 1 if j < u.shape[1] - 1 else j + 1 - u.shape[1]
    un[i, j] = u[im, j] * u[i, jp] + math.sin(u[im, jp]) * u[i, j]


def rand(rng, *shape):
    return rng.uniform(0.2, 1.0, shape)


def dup(x, rng):
    return gk.Duplicated(x, rand(rng, *x.shape))


# name -> (kernel, annotated arguments, dim): every launch covers part of its arrays
CASES = {
    "interior": lambda r: (interior, (dup(rand(r, 8), r), dup(rand(r, 8), r)), 6),
    "interior_nonlinear": lambda r: (interior_nonlinear, (dup(rand(r, 9), r), dup(rand(r, 9), r)), 5),
    "two_arrays": lambda r: (two_arrays, (dup(rand(r, 11), r), dup(rand(r, 9), r), dup(rand(r, 10), r)), 6),
    "behind": lambda r: (behind, (dup(rand(r, 10), r), dup(rand(r, 10), r)), 7),
    "guarded_ahead": lambda r: (guarded_ahead, (dup(rand(r, 9), r), dup(rand(r, 9), r)), 9),
    "shifted_index": lambda r: (shifted_index, (dup(rand(r, 9), r), dup(rand(r, 9), r)), 6),
    "interior_2d": lambda r: (interior_2d, (dup(rand(r, 7, 6), r), dup(rand(r, 7, 6), r)), (4, 3)),
    "interior_3d": lambda r: (interior_3d, (dup(rand(r, 5, 6, 5), r), dup(rand(r, 5, 6, 5), r)), (3, 2, 3)),
    "interior_taped": lambda r: (interior_taped, (dup(rand(r, 9), r), dup(rand(r, 9), r), 3), 6),
    "periodic": lambda r: (periodic, (dup(rand(r, 9), r), dup(rand(r, 9), r)), 9),
    "periodic_partial": lambda r: (periodic, (dup(rand(r, 9), r), dup(rand(r, 9), r)), 5),
    "periodic_n2": lambda r: (periodic, (dup(rand(r, 2), r), dup(rand(r, 2), r)), 2),
    "periodic_n1": lambda r: (periodic, (dup(rand(r, 1), r), dup(rand(r, 1), r)), 1),
    "periodic_guarded": lambda r: (periodic_guarded, (dup(rand(r, 6), r), dup(rand(r, 9), r)), 9),
    "mirrored_n2": lambda r: (mirrored, (dup(rand(r, 2), r), dup(rand(r, 2), r)), 2),
    "mirrored": lambda r: (mirrored, (dup(rand(r, 7), r), dup(rand(r, 7), r)), 7),
    "periodic_2d": lambda r: (periodic_2d, (dup(rand(r, 5, 4), r), dup(rand(r, 5, 4), r)), (5, 4)),
    "periodic_2d_partial": lambda r: (periodic_2d, (dup(rand(r, 5, 4), r), dup(rand(r, 5, 4), r)), (3, 2)),
}


def test_issue_reproducer_gets_every_element_it_reads():
    """Issue 14.1: with dim=6 on 8 elements, u[6] and u[7] are read (by threads
    4, 5 and 5) and their adjoints were dropped; dun's written elements 1..6 end 0."""
    for backend in ("cpu", "interp"):
        u, un, du, dun = np.arange(1.0, 9.0), np.zeros(8), np.zeros(8), np.ones(8)
        gk.autodiff(interior, gk.Duplicated(u, du), gk.Duplicated(un, dun), dim=6, backend=backend)
        np.testing.assert_array_equal(du, [1, 2, 3, 3, 3, 3, 2, 1])  # sums of ones: exact
        np.testing.assert_array_equal(dun, [1, 0, 0, 0, 0, 0, 0, 1])
        assert gk.inspect(interior, gk.Duplicated(u, du), gk.Duplicated(un, dun), dim=6,
                          mode=gk.Reverse).adjoint_forms["u"] == "gather"


@pytest.mark.parametrize("name", sorted(CASES))
def test_partial_domain_stencils_match_finite_differences(name):
    """check_grad's default criterion (central differences in float64, rtol 1e-5)
    per coordinate and the dot-product test, forward mode included."""
    kernel, args, dim = CASES[name](np.random.default_rng(11))
    report = check_grad(kernel, *args, dim=dim, max_coords=200)
    assert report.ok and report.checked > 1


def _run(kernel, args, dim, backend="cpu"):
    """Fused reverse on copies of `args`: the arrays and shadows afterwards."""
    copies = tuple(gk.Duplicated(a.val.copy(), a.dval.copy()) if isinstance(a, gk.Duplicated) else a for a in args)
    gk.autodiff(kernel, *copies, dim=dim, backend=backend)
    return [x for a in copies if isinstance(a, gk.Duplicated) for x in (a.val, a.dval)]


@pytest.mark.numba
@pytest.mark.parametrize("name", sorted(CASES))
def test_interpreter_stays_in_bounds_and_agrees_with_numba(name):
    """The interpreter raises IndexError on any access outside an array, so the
    gather (which runs past the launch domain) touches only the arrays' reach."""
    kernel, args, dim = CASES[name](np.random.default_rng(5))
    # the same operations in another order: rounding differences of a few ulps
    for a, b in zip(_run(kernel, args, dim, "interp"), _run(kernel, args, dim, "cpu")):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("name", sorted(CASES))
def test_split_and_vector_mode_match_the_fused_gradient(name):
    """autodiff_thunk (augmented primal, tape, gather, reverse) and BatchDuplicated
    (two lanes, each seeded as one fused call) give the fused call's shadows."""
    kernel, args, dim = CASES[name](np.random.default_rng(9))
    fused = _run(kernel, args, dim)

    split = tuple(gk.Duplicated(a.val.copy(), a.dval.copy()) if isinstance(a, gk.Duplicated) else a for a in args)
    forward, reverse = gk.autodiff_thunk(kernel, *(type(a) if isinstance(a, gk.Annotation) else gk.Const
                                                   for a in args), dim=dim)
    tape = forward(*split)
    reverse(*split, tape)
    got = [x for a in split if isinstance(a, gk.Duplicated) for x in (a.val, a.dval)]
    for a, b in zip(fused, got):  # the same operations in the same order per element; sums may reassociate
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-15)

    rng = np.random.default_rng(4)
    seeds = [[rand(rng, *a.val.shape) for _ in range(2)] if isinstance(a, gk.Duplicated) else None for a in args]
    batch = tuple(gk.BatchDuplicated(a.val.copy(), tuple(s.copy() for s in seed)) if seed else a
                  for a, seed in zip(args, seeds))
    gk.autodiff(kernel, *batch, dim=dim)
    for lane in range(2):
        one = tuple(gk.Duplicated(a.val, seed[lane]) if seed else a for a, seed in zip(args, seeds))
        want = _run(kernel, one, dim)[1::2]
        have = [a.dvals[lane] for a in batch if isinstance(a, gk.BatchDuplicated)]
        for a, b in zip(want, have):
            np.testing.assert_allclose(b, a, rtol=1e-14, atol=1e-15)


def test_write_only_shadow_is_zeroed_after_every_gather_read_it(rng):
    """docs/adjoint-forms.md over the larger domain: the gather reads dun at i + 1 for
    every neighbour, including those of threads past the launch domain; the
    reverse zeroes the written elements only afterwards, and leaves the rest."""
    u, un = rand(rng, 12), rand(rng, 12)
    dun0 = rand(rng, 12)
    du, dun = np.zeros(12), dun0.copy()
    gk.autodiff(interior_nonlinear, gk.Duplicated(u, du), gk.Duplicated(un, dun), dim=9)
    want = np.zeros(12)
    for i in range(9):  # un[i+1] = u[i] u[i+2] + sin(u[i+1])
        g = dun0[i + 1]
        want[i] += u[i + 2] * g
        want[i + 2] += u[i] * g
        want[i + 1] += math.cos(u[i + 1]) * g
    np.testing.assert_allclose(du, want, rtol=1e-14)  # a few additions in another order
    np.testing.assert_array_equal(dun[1:10], 0.0)
    np.testing.assert_array_equal(dun[[0, 10, 11]], dun0[[0, 10, 11]])


def test_gather_runs_over_the_reach_of_its_arrays():
    """Its domain per axis is the launch extent plus the largest positive offset
    (u's 4 along the only axis here; 2 along both axes of interior_2d)."""
    from gradkern.runtime.call import prepare

    x = np.ones(11)
    args = (gk.Duplicated(x, x.copy()), gk.Duplicated(x[:9].copy(), x[:9].copy()),
            gk.Duplicated(x[:10].copy(), x[:10].copy()))
    pr, _ = prepare(two_arrays, args, 6, None, "reverse")
    assert dict(pr.spec.adjoint_forms)["u"] == dict(pr.spec.adjoint_forms)["v"] == "gather"
    assert pr.spec.gather_extents((6,)) == (10,)
    y = np.ones((7, 6))
    pr, _ = prepare(interior_2d, (gk.Duplicated(y, y.copy()), gk.Duplicated(y.copy(), y.copy())), (4, 3), None,
                    "reverse")
    assert pr.spec.gather_extents((4, 3)) == (6, 5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_case_is_gathered(name):
    """No atomics left for the read arrays: the periodic and selected offsets are gathered too."""
    kernel, args, dim = CASES[name](np.random.default_rng(1))
    forms = gk.inspect(kernel, *args, dim=dim, mode=gk.Reverse).adjoint_forms
    assert forms["u"] == "gather", forms


def test_periodic_gather_covers_the_whole_modulus():
    """A wrap lands anywhere in its axis: a launch over 5 of 9 elements reads u[8] (thread 0's
    left neighbour), so the gather runs over all 9; a launch past u's end runs over the launch."""
    from gradkern.runtime.call import prepare

    x = np.linspace(0.5, 1.0, 9)
    pr, _ = prepare(periodic, (gk.Duplicated(x, x.copy()), gk.Duplicated(x.copy(), x.copy())), 5, None, "reverse")
    assert pr.spec.gather_extents((5,), {"u": (9,), "un": (9,)}) == (9,)
    assert pr.spec.gather_extents((9,), {"u": (9,), "un": (9,)}) == (10,)
    u, un, du, dun = x.copy(), np.zeros(9), np.zeros(9), np.zeros(9)
    dun[0] = 1.0  # un[0] = u[8] u[1] + sin(u[0])
    gk.autodiff(periodic, gk.Duplicated(u, du), gk.Duplicated(un, dun), dim=5)
    want = np.zeros(9)
    want[8], want[1], want[0] = x[1], x[8], math.cos(x[0])
    np.testing.assert_array_equal(du, want)


@pytest.mark.numba
@pytest.mark.parametrize("kernel, shape, kept", [(periodic, (9,), 3), (periodic_2d, (7, 6), 4)])
def test_periodic_gather_interior_replays_no_wrapped_candidate(kernel, shape, kept):
    """In the interior of the gather's domain a wrapped candidate (s != 0) is no thread: interior splitting
    folds its test (`tid < gn - M + c`, whose extents cancel, is a lower edge) and its copy goes (periodic:
    3 of 5 copies left, periodic_2d: 4 of 9), and the CPU prints the interior under a test of its constant
    lower edge (docs/adjoint-forms.md, section 7)."""
    import re

    from gradkern.ir import nodes as ir
    from gradkern.runtime.annotate import annotated_binding
    from gradkern.runtime.specialize import reverse_specialization
    from gradkern.transforms.dce import eliminate_dead
    from gradkern.transforms.split import split_interior

    rng = np.random.default_rng(3)
    args = (dup(rand(rng, *shape), rng), dup(rand(rng, *shape), rng))
    ann, b, shadows = annotated_binding(kernel, args, shape, None)
    rs = reverse_specialization(kernel, b, shadows, ann.active, ann.no_need, ann.lanes)
    g = split_interior(eliminate_dead(rs.gather.typed))
    assert g.interior is not None and len(g.interior.ranges) == len(shape)
    copies = {m.group(1) for s in ir.walk_stmts(g.interior.body) if isinstance(s, ir.Assign)
              for m in [re.search(r"_n(\d+)(__\d+)?$", s.name)] if m}
    everywhere = {m.group(1) for s in ir.walk_stmts(g.body) if isinstance(s, ir.Assign)
                  for m in [re.search(r"_n(\d+)(__\d+)?$", s.name)] if m}
    assert len(copies) == kept and len(everywhere) > kept
    source = gk.inspect(kernel, *args, dim=shape, mode=gk.Reverse).sources["gather"]
    assert re.search(r"\n +if _gkb_t\d >= [12]:\n", source)
    assert check_grad(kernel, *args, dim=shape).ok


# The three cases whose compiles cost most (session 55's CI: interior_3d 15.6 s, two_arrays 9.0 s, behind 8.0 s of
# CPU, half of this test's) compare the looped and unrolled gathers on the interpreter in CI (the transforms' output;
# the printed CPU sources still checked for the interior), their Numba runs `full`; the other cases run on Numba,
# interior_2d and interior the 2-D and 1-D interiors (docs/testing.md, "What CI runs").
LOOPED_ON_INTERP = {"interior_3d", "two_arrays", "behind"}


@pytest.mark.parametrize(("name", "interp"), interp_and_numba(sorted(CASES), sorted(CASES), LOOPED_ON_INTERP,
                                                              set(CASES) - LOOPED_ON_INTERP))
def test_a_looped_gather_takes_its_unrolled_twins_interior(name, interp, monkeypatch):
    """Past LOOP_STATEMENTS a gather replays its neighbours in a loop over the offsets; it carries its unrolled
    twin (the same sums in the same order), whose split interior the CPU prints beside the looped body
    (docs/adjoint-forms.md, section 7). Forced for every case: the looped gather's shadows bit for bit the
    unrolled one's, fused and in vector mode, and its interior there wherever the unrolled gather has one. Bit for
    bit with the interior replayed: by its coefficients (section 11) an element's sum is associated otherwise in
    the interior than in the general body, and which elements the interior takes differs where one gather folds
    the reverse in (chunked rows) and the other does not."""
    import gradkern.pipeline as pipeline
    from gradkern.transforms import gather

    monkeypatch.setattr(pipeline, "COEFFICIENTS", False)
    kernel, args, dim = CASES[name](np.random.default_rng(11))
    rng = np.random.default_rng(4)
    seeds = [[rand(rng, *a.val.shape) for _ in range(2)] if isinstance(a, gk.Duplicated) else None for a in args]

    def run(backend):
        kernel._specs.clear()
        batch = tuple(gk.BatchDuplicated(a.val.copy(), tuple(x.copy() for x in seed)) if seed else a
                      for a, seed in zip(args, seeds))
        gk.autodiff(kernel, *batch, dim=dim, backend=backend)
        source = gk.inspect(kernel, *args, dim=dim, mode=gk.Reverse, backend="cpu").sources["gather"]
        lanes = [x for a in batch if isinstance(a, gk.BatchDuplicated) for x in a.dvals]
        return _run(kernel, args, dim, backend) + lanes, source

    # the unrolled reference on the interpreter (the same sums in the same order), the looped gather on Numba
    # where it runs there: one compile of each mode, not two (session 59)
    unrolled, plain = run("interp")
    monkeypatch.setattr(gather, "LOOP_STATEMENTS", 0)
    looped, source = run("interp" if interp else "cpu")
    kernel._specs.clear()
    assert "_gk_gnb" in source and "_gk_gnb" not in plain
    assert ("_gkb_lo" in source) == ("_gkb_lo" in plain)  # the split ranges' bounds: an interior printed
    for a, b_ in zip(unrolled, looped):
        np.testing.assert_array_equal(b_, a)


def test_index_wrapped_to_a_constant_is_not_gathered_but_right():
    """`else 0` is no thread-plus-offset branch: the adjoint stays an atomic add (still exact)."""
    @gk.kernel
    def wrap_to_zero(u, un):
        i = gk.tid()
        ip = i + 1 if i < u.shape[0] - 1 else 0
        un[i] = u[i] * u[ip]

    r = np.random.default_rng(3)
    args = (dup(rand(r, 7), r), dup(rand(r, 7), r))
    assert gk.inspect(wrap_to_zero, *args, mode=gk.Reverse).adjoint_forms["u"] == "atomic add"
    assert check_grad(wrap_to_zero, *args).ok


# -- loop-variable offsets (issue 29.3, transforms/unroll.py, docs/adjoint-forms.md) ---------------------------------
@gk.kernel
def loop_offsets(x, y, n):  # the issue's kernel: x at ti + 0 and ti + 1 through ip, y at ti + 1
    ti, tj = gk.tid()
    i = ti + 1
    s = 0.0
    for ip in range(2):
        s += x[i + ip - 1, tj] * x[i, tj]
    y[i, tj] = s


@gk.kernel
def loop_offsets_3(u, un, c):  # a 3-point stencil as a loop; k is read after it (its last value, 1)
    i = gk.tid()
    s = 0.0
    k = 0
    for k in range(-1, 2):
        s += c * u[i + 1 + k] * u[i + 1 + k]
    un[i] = s * (k + 1.0)


@gk.kernel
def loop_run_time(u, un, m):  # a run-time trip count: not unrolled, the adjoint of u stays atomic
    i = gk.tid()
    s = 0.0
    for k in range(m):
        s += u[i + k]
    un[i] = s


@gk.kernel
def loop_flat_row(c, x):  # c[i * 4 + k]: a flattened own row while k is a loop variable, so not unrolled
    i = gk.tid()
    for k in range(4):
        c[i * 4 + k] = c[i * 4 + k] * x[k]


def test_constant_loops_whose_variable_offsets_tid_are_unrolled_and_gathered():
    r = np.random.default_rng(7)
    x, y = rand(r, 7, 4), rand(r, 7, 4)
    args = (dup(x, r), dup(y, r), 7)
    assert gk.inspect(loop_offsets, *args, dim=(5, 4), mode=gk.Reverse).adjoint_forms == {"x": "gather",
                                                                                           "y": "plain add"}
    assert check_grad(loop_offsets, *args, dim=(5, 4)).ok
    u, un = rand(r, 9), rand(r, 8)
    args = (dup(u, r), dup(un, r), gk.Active(0.7))
    assert gk.inspect(loop_offsets_3, *args, dim=7, mode=gk.Reverse).adjoint_forms == {"u": "gather",
                                                                                        "un": "plain add"}
    assert check_grad(loop_offsets_3, *args, dim=7).ok


def test_loops_that_gain_nothing_from_unrolling_stay_loops():
    r = np.random.default_rng(8)
    args = (dup(rand(r, 12), r), dup(rand(r, 8), r), 3)
    assert gk.inspect(loop_run_time, *args, dim=8, mode=gk.Reverse).adjoint_forms["u"] == "atomic add"
    assert check_grad(loop_run_time, *args, dim=8).ok
    args = (dup(rand(r, 20), r), dup(rand(r, 4), r))
    assert gk.inspect(loop_flat_row, *args, dim=5, mode=gk.Reverse).adjoint_forms["c"] == "plain add"


# -- a thread's writes to distinct elements do not block the gather (transforms/gather.py, `_Written`) ------------
@gk.kernel
def slopes(r, dz, A, K):  # Veros' slope kernel's shape: A[i, j, k, ip, kr] written per unrolled copy, r gathered
    ti, tj, k = gk.tid()
    i = ti + 1
    s = 0.0
    for kr in range(2):
        if k == 0 and kr == 0:
            continue
        for ip in range(2):
            g = r[i + ip, tj, k] * dz[i + ip, tj, k + kr - 1]
            t = math.tanh(g)
            s += t * g
            A[i, tj, k, ip, kr] = t * r[i, tj, k]
    K[i, tj, k] = s


@gk.kernel
def reread(u, v, w):  # v[i, 0] written, then read back by the same thread: the gather must not replay it
    i = gk.tid()
    v[i, 0] = u[i] * u[i + 1]
    v[i, 1] = v[i, 0] * u[i + 2]
    w[i] = v[i, 1] + math.sin(v[i, 0])


def test_unrolled_copies_writing_own_elements_are_still_gathered():
    r = np.random.default_rng(9)
    nx, ny, nz = 6, 3, 3
    args = (dup(rand(r, nx, ny, nz), r), dup(rand(r, nx, ny, nz), r), dup(rand(r, nx, ny, nz, 2, 2), r),
            dup(rand(r, nx, ny, nz), r))
    dim = (nx - 2, ny, nz - 1)
    forms = gk.inspect(slopes, *args, dim=dim, mode=gk.Reverse).adjoint_forms
    assert forms == {"r": "gather", "dz": "gather", "A": "plain add", "K": "plain add"}
    assert check_grad(slopes, *args, dim=dim).ok


def test_a_thread_reading_back_what_it_wrote_is_not_gathered_and_right():
    r = np.random.default_rng(10)
    args = (dup(rand(r, 9), r), dup(rand(r, 7, 2), r), dup(rand(r, 7), r))
    forms = gk.inspect(reread, *args, dim=7, mode=gk.Reverse).adjoint_forms
    # its reverse reads dv[i, 0] after adding into it: no replay gather; a pull, which replays nothing, takes it
    # (transforms/pull.py)
    assert forms["u"] == "pull"
    assert check_grad(reread, *args, dim=7).ok


def _reread_source(rng: np.random.Generator, name: str) -> str:
    """A kernel that writes its own row of v at constant columns and reads columns back, beside a stencil
    read of u: the gather may replay it only where no read sees the thread's own earlier write."""
    lines = [f"def {name}(u, v, w):", "    i = gk.tid()", "    s = 0.0"]
    for _ in range(int(rng.integers(2, 5))):
        (c, c2), (o, o2) = (int(x) for x in rng.integers(0, 5, 2)), (int(x) for x in rng.integers(0, 3, 2))
        lines.append(["    v[i, {c}] = u[i + {o}] * u[i + {o2}] + s",
                      "    s += math.sin(v[i, {c}]) * u[i + {o}]",
                      "    v[i, {c}] = v[i, {c2}] * u[i + {o}]",
                      "    v[i, {c} + 1 - 1] = s * u[i + {o2}]"][int(rng.integers(4))].format(c=c, c2=c2, o=o, o2=o2))
    lines.append("    w[i] = s + v[i, 0] * u[i + 1]")
    return "\n".join(lines) + "\n"


def test_gather_of_kernels_rereading_their_own_writes_passes_the_dot_product_test(tmp_path):
    """Fuzz of `_Written` (transforms/gather.py) against forward mode, which has no gathers: a gather that
    replayed a read of the thread's own earlier write would fail <w, J v> = <J^T w, v>."""
    import importlib.util
    import sys

    rng = np.random.default_rng(11)
    names = [f"reread_{k}" for k in range(40)]
    path = tmp_path / "reread_kernels.py"
    path.write_text("import math\n\nimport gradkern as gk\n\n" +
                    "".join("\n@gk.kernel\n" + _reread_source(rng, n) for n in names))
    spec = importlib.util.spec_from_file_location("reread_kernels", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["reread_kernels"] = module
    spec.loader.exec_module(module)
    gathered = 0
    for n in names:
        kernel, dim = getattr(module, n), 5
        u, v, w = rng.uniform(0.5, 1.5, 7), rng.uniform(0.5, 1.5, (5, 5)), rng.uniform(0.5, 1.5, 5)

        def run(seeds, mode, kernel=kernel, dim=dim, primals=(u, v, w)):
            gk.autodiff(kernel, *(gk.Duplicated(a.copy(), s) for a, s in zip(primals, seeds)), dim=dim, mode=mode,
                        backend="interp")
        vs = [rng.standard_normal(x.shape) for x in (u, v, w)]
        ws = [rng.standard_normal(x.shape) for x in (u, v, w)]
        tangents, adjoints = [x.copy() for x in vs], [x.copy() for x in ws]
        run(tangents, gk.Forward)
        run(adjoints, gk.Reverse)
        forward = sum(float((a * b).sum()) for a, b in zip(ws, tangents))
        reverse = sum(float((a * b).sum()) for a, b in zip(adjoints, vs))
        # the same products summed in other orders: float64 rounding, ~1e-16 per term of the scale
        scale = sum(float(np.abs(a * b).sum()) for a, b in zip(ws, tangents)) + \
            sum(float(np.abs(a * b).sum()) for a, b in zip(adjoints, vs))
        assert abs(forward - reverse) <= 1e-12 * scale, (n, _reread_source.__name__, forward, reverse)
        forms = gk.inspect(kernel, *(gk.Duplicated(x.copy(), np.zeros_like(x)) for x in (u, v, w)), dim=dim,
                           mode=gk.Reverse).adjoint_forms
        gathered += forms["u"] == "gather"
    assert 10 <= gathered <= len(names) - 5  # both outcomes reached


def test_the_gathers_offsets_agree_with_the_index_analysis_on_every_corpus_access():
    """The gather's recogniser (transforms/gather.py: `_Offsets`) extends the kernel's index analysis
    (ir/indices.py): wherever the analysis finds tid[pos] + c at index position pos, the gather finds offset c
    there, and nothing at a position holding another axis's tid."""
    from support.corpus import CORPUS

    from gradkern.ir import nodes as ir
    from gradkern.ir.indices import indices
    from gradkern.ir.infer import infer_types
    from gradkern.runtime.binding import bind
    from gradkern.transforms.gather import _Offsets

    rng = np.random.default_rng(0)
    seen = 0
    for case in CORPUS:
        args = case.make(rng, np.float64)
        k = case.kernel.ir
        typed = infer_types(k, bind(k, case.dim(args), args).type_map(k))
        ix, at = indices(typed), _Offsets(typed)
        accesses = [s.indices for s in ir.walk_stmts(typed.body) if isinstance(s, (ir.Store, ir.AtomicAdd))]
        accesses += [e.indices for e in ir.all_exprs(typed.body) if isinstance(e, ir.Load)]
        for idx in accesses:
            for pos, e in enumerate(idx):
                found = ix.offset(e)
                if found is None or pos >= typed.tid_ndim:
                    continue
                seen += 1
                axis, c = found
                assert at.axis(e, pos) == ({(c, 0)} if axis == pos else None), (case.name, str(e))
    assert seen > 50
