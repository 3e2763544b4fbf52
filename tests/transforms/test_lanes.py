"""Vector mode (transforms/lanes.py): BatchDuplicated with k shadows equals k
separate calls to 1e-12, in forward and reverse mode, for every reverse-mode
and HPC-style case; the primal work is shared; gk.jacobian against finite
differences."""

from __future__ import annotations

import re

import numpy as np
import pytest
from support.signatures import reverse_cases

import gradkern as gk
from gradkern.kernels.blas import matvec
from gradkern.kernels.stencils import allen_cahn_step, heat_step_2d
from gradkern.transforms.lanes import derivative_entities

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


K = 3
CASES = {label: (kernel, args, dim) for label, kernel, args, dim in reverse_cases(seed=9)}


def _copy(x):
    return x.copy() if isinstance(x, np.ndarray) else x


def batch_vs_separate(kernel, args, dim, mode, rng, backend="cpu", k=K):
    K = k
    seeds = []
    for a in args:
        if isinstance(a, gk.Duplicated):
            seeds.append([rng.uniform(-1, 1, a.val.shape).astype(a.val.dtype) for _ in range(K)])
        elif isinstance(a, gk.Active) and mode is gk.Forward:
            seeds.append([float(rng.uniform(-1, 1)) for _ in range(K)])
        else:
            seeds.append(None)

    def plain(a):
        return gk.Const(_copy(a.val)) if isinstance(a, gk.Const) else a

    separate = []
    for lane in range(K):
        call = [plain(a) if s is None else gk.Duplicated(_copy(a.val), _copy(s[lane])) for a, s in zip(args, seeds)]
        res = gk.autodiff(kernel, *call, dim=dim, mode=mode, backend=backend)
        separate.append((call, res))
    call = [plain(a) if s is None else gk.BatchDuplicated(_copy(a.val), tuple(_copy(x) for x in s))
            if K > 1 else gk.Duplicated(_copy(a.val), _copy(s[0])) for a, s in zip(args, seeds)]
    res = gk.autodiff(kernel, *call, dim=dim, mode=mode, backend=backend)
    changed = 0
    for n, (c, s) in enumerate(zip(call, seeds)):
        if not isinstance(c, (gk.Duplicated, gk.BatchDuplicated)):
            continue
        np.testing.assert_allclose(_copy(c.val), separate[0][0][n].val, rtol=1e-12, atol=1e-14)
        dvals = c.dvals if isinstance(c, gk.BatchDuplicated) else (c.dval,)
        for lane in range(K):
            want = separate[lane][0][n].dval
            if isinstance(want, np.ndarray):
                np.testing.assert_allclose(dvals[lane], want, rtol=1e-12, atol=1e-13,
                                           err_msg=f"{kernel.name} lane {lane} argument {n}")
                changed += not np.array_equal(dvals[lane], s[lane])
    if mode is gk.Reverse:
        for n, r in enumerate(res):
            if r is None:
                assert all(sep[1][n] is None for sep in separate)
            else:
                r = r if K > 1 else (r,)
                assert len(r) == K
                for lane in range(K):
                    assert r[lane] == pytest.approx(separate[lane][1][n], rel=1e-12, abs=1e-13)
                    changed += r[lane] != 0.0
    else:
        assert res is None
    return changed


@pytest.mark.parametrize("mode", [gk.Reverse, gk.Forward], ids=["reverse", "forward"])
@pytest.mark.parametrize("label", sorted(CASES))
def test_batch_equals_separate_calls(label, mode):
    """Every case on the reference interpreter: the lane transform is backend-independent."""
    kernel, args, dim = CASES[label]
    changed = batch_vs_separate(kernel, args, dim, mode, np.random.default_rng(4), backend="interp")
    # reverse mode always updates some shadow or returns some Active derivative (add_source's u[i, j] += amp: du
    # is left as it is, d amp = du[i, j] is returned)
    assert changed > 0 or mode is gk.Forward


NUMBA = ["reverse/allen_cahn", "reverse/heat_2d-float32", "reverse/matvec", "reverse/loop_sin", "hpc/lud_col",
         "reverse/scatter_hist", "reverse/saxpy"]


@pytest.mark.numba
@pytest.mark.slow
@pytest.mark.parametrize("mode", [gk.Reverse, gk.Forward], ids=["reverse", "forward"])
@pytest.mark.parametrize("label", NUMBA)
def test_batch_equals_separate_calls_compiled(label, mode):
    """Gathers, taped loops, privatised atomics and Active scalars, through Numba."""
    kernel, args, dim = CASES[label]
    batch_vs_separate(kernel, args, dim, mode, np.random.default_rng(6))


# one case of each kind: gathers (1-D to 3-D), taped loops, in-place updates, atomics, Active scalars,
# a kernel that reads an array it writes (forward: all lanes in one launch)
GROUPED = ["reverse/allen_cahn", "reverse/heat_2d", "reverse/loop_sin", "reverse/matvec", "reverse/scatter_hist",
           "reverse/square", "reverse/read_after_write", "reverse/saxpy", "reverse/volume_3d", "gather/interior_3d",
           "gather/interior_taped", "hpc/lud_col", "hpc/inplace_2d", "hpc/heat3d", "hpc/particle_push",
           "tape/layernorm_inplace"]


@pytest.fixture
def lane_group(monkeypatch):
    """Set the interpreter's lane group (it runs all lanes in one launch by default)."""
    from gradkern.backends import backend

    def set_to(size: int) -> None:
        monkeypatch.setattr(backend("interp"), "lane_group", size)
    return set_to


@pytest.mark.parametrize("mode", [gk.Reverse, gk.Forward], ids=["reverse", "forward"])
@pytest.mark.parametrize("label", GROUPED)
@pytest.mark.parametrize("group,k", [(1, 3), (2, 3), (2, 1), (3, 7)])
def test_lane_groups_equal_separate_calls(label, mode, group, k, lane_group):
    """Lanes run in groups (the CPU's Backend.lane_group), k not a multiple of the group, or one lane:
    still exactly the k separate calls, the primal run once."""
    lane_group(group)
    kernel, args, dim = CASES[label]
    batch_vs_separate(kernel, args, dim, mode, np.random.default_rng(5), backend="interp", k=k)


def test_lane_groups_launch_the_primal_once(lane_group):
    """A kernel that counts its own runs (an atomic add into a primal array) counts one run per thread
    whatever the grouping, in both modes; forward splits it into tangent-only groups and a last group."""
    from gradkern.runtime.call import prepare

    @gk.kernel
    def counted(x, y, runs):
        i = gk.tid()
        y[i] = x[i] * x[i]
        gk.atomic_add(runs, 0, 1.0)

    lane_group(2)
    x = np.linspace(0.5, 1.5, 6)
    for mode in (gk.Reverse, gk.Forward):
        runs, y = np.zeros(1), np.zeros(6)
        dxs, dys = tuple(np.ones(6) for _ in range(5)), tuple(np.full(6, 2.0) for _ in range(5))
        gk.autodiff(counted, gk.BatchDuplicated(x, dxs), gk.BatchDuplicated(y, dys), gk.Const(runs), mode=mode,
                    backend="interp")
        assert runs[0] == 6 and np.array_equal(y, x * x)
        want = 2 * x * 2.0 if mode is gk.Reverse else 2 * x
        for d in (dxs if mode is gk.Reverse else dys):
            np.testing.assert_allclose(d, want + (1.0 if mode is gk.Reverse else 0.0), rtol=1e-15)
    prepared, _ = prepare(counted, (gk.BatchDuplicated(x, dxs), gk.BatchDuplicated(y, dys), runs), None, "interp",
                          "forward")
    assert [run.spec.typed.name.endswith("_only") for run in prepared.runs] == [True, True, False]


def test_lane_groups_match_finite_differences(rng):
    """On the CPU (groups of Backend.lane_group lanes), k = 5 lanes of the nonlinear Allen-Cahn step:
    forward lanes against central differences along each tangent, reverse lanes (and the Active
    scalar's derivative) against central differences of each lane's loss <w, un>."""
    from gradkern.backends import backend
    assert 1 < backend("cpu").lane_group < 5
    n, k, h = 24, 5, 1e-6
    u = rng.uniform(0.2, 1, n)
    ts, ws = [rng.uniform(-1, 1, n) for _ in range(k)], [rng.uniform(-1, 1, n) for _ in range(k)]

    def step(v, c=0.2):
        out = np.zeros(n)
        gk.launch(allen_cahn_step, n, v, out, c, 0.01)
        return out
    tcs = [float(c) for c in rng.uniform(-1, 1, k)]  # the scalar c's tangent in each lane
    dun = tuple(np.zeros(n) for _ in range(k))
    gk.autodiff(allen_cahn_step, gk.BatchDuplicated(u.copy(), tuple(t.copy() for t in ts)),
                gk.BatchDuplicated(np.zeros(n), dun), gk.BatchDuplicated(0.2, tuple(tcs)), 0.01, mode=gk.Forward)
    for t, tc, d in zip(ts, tcs, dun):
        fd = (step(u + h * t, 0.2 + h * tc) - step(u - h * t, 0.2 - h * tc)) / (2 * h)
        np.testing.assert_allclose(d, fd, rtol=1e-6, atol=1e-8)
    du = tuple(np.zeros(n) for _ in range(k))
    grads = gk.autodiff(allen_cahn_step, gk.BatchDuplicated(u.copy(), du),
                        gk.BatchDuplicated(np.zeros(n), tuple(w.copy() for w in ws)), gk.Active(0.2), 0.01)
    for lane, (w, d) in enumerate(zip(ws, du)):
        for i in range(n):
            e = np.zeros(n)
            e[i] = h
            assert d[i] == pytest.approx(w @ (step(u + e) - step(u - e)) / (2 * h), rel=1e-6, abs=1e-8)
        assert grads[2][lane] == pytest.approx(w @ (step(u, 0.2 + h) - step(u, 0.2 - h)) / (2 * h), rel=1e-6)


@pytest.mark.numba
def test_primal_work_is_shared_between_lanes():
    u = np.ones(16)
    one = gk.inspect(allen_cahn_step, gk.Duplicated(u, u.copy()), gk.Duplicated(u.copy(), u.copy()), 0.2, 0.01,
                     mode=gk.Forward)
    four = gk.inspect(allen_cahn_step, gk.BatchDuplicated(u, (u,) * 0 + tuple(u.copy() for _ in range(4))),
                      gk.BatchDuplicated(u.copy(), tuple(u.copy() for _ in range(4))), 0.2, 0.01, mode=gk.Forward)
    assert one.source.count("_gkb_powi") == four.source.count("_gkb_powi") or \
        one.source.count("** 3") == four.source.count("** 3")
    primal_store = re.compile(r"(?<![\w])un\[")
    assert len(primal_store.findall(four.ir)) == len(primal_store.findall(one.ir)) == 2  # shared by the lanes
    assert "_gk_t_un_l3[" in four.source


@pytest.mark.numba
def test_derivative_entities_follow_the_data_flow():
    u = np.ones(8)
    ins = gk.inspect(heat_step_2d, gk.Duplicated(np.ones((4, 4)), np.ones((4, 4))),
                     gk.Duplicated(np.ones((4, 4)), np.ones((4, 4))), 0.1, mode=gk.Forward)
    assert ins.source
    from gradkern.ir.types import F64, Array
    from gradkern.pipeline import specialize_forward
    spec = specialize_forward(allen_cahn_step.ir, {"u": Array(F64, 1), "un": Array(F64, 1), "c": F64, "dt": F64}, 1,
                              "interp", {"u", "un"}, set())
    lane = derivative_entities(spec.tangent.typed, set(spec.tangents.values()))
    assert {"_gk_t_u", "_gk_t_un", "_gk_t_ui"} <= lane and "ui" not in lane and "u" not in lane
    del u


def test_batch_annotations_are_checked(rng):
    u, un = rng.uniform(0.2, 1, 7), np.zeros(7)
    with pytest.raises(gk.AnnotationError, match="same number of shadows"):
        gk.autodiff(allen_cahn_step, gk.BatchDuplicated(u, (u.copy(), u.copy())),
                    gk.BatchDuplicated(un, (un.copy(),)), 0.2, 0.01)
    with pytest.raises(gk.AnnotationError, match="same number of shadows"):
        gk.autodiff(allen_cahn_step, gk.BatchDuplicated(u, (u.copy(), u.copy())), gk.Duplicated(un, un.copy()),
                    0.2, 0.01)
    with pytest.raises(gk.AnnotationError, match="tuple of k >= 1"):
        gk.autodiff(allen_cahn_step, gk.BatchDuplicated(u, ()), un, 0.2, 0.01)
    with pytest.raises(gk.AliasingError, match="shadow 1 of 'un' shares memory with shadow 0 of 'u'"):
        d = np.zeros(7)
        gk.autodiff(allen_cahn_step, gk.BatchDuplicated(u, (d, np.zeros(7))), gk.BatchDuplicated(un, (np.zeros(7), d)),
                    0.2, 0.01)


@pytest.mark.slow
def test_jacobian_matches_finite_differences(rng):
    A, x, y = rng.uniform(0.5, 1.5, (5, 3)), rng.uniform(0.5, 1.5, 3), np.zeros(5)
    J = gk.jacobian(matvec, A, x, y, wrt="x", dim=5)
    np.testing.assert_allclose(J["y"], A, rtol=1e-14)
    np.testing.assert_array_equal(y, 0.0)  # the user's arrays are not touched
    u, un = rng.uniform(0.2, 1, 11), np.zeros(11)
    J = gk.jacobian(allen_cahn_step, u, un, 0.2, 0.01, wrt="u", chunk=4)["un"]
    fd = np.zeros((11, 11))
    for j in range(11):
        e = np.zeros(11)
        e[j] = 1e-6
        up, um = np.zeros(11), np.zeros(11)
        gk.launch(allen_cahn_step, 11, u + e, up, 0.2, 0.01)
        gk.launch(allen_cahn_step, 11, u - e, um, 0.2, 0.01)
        fd[:, j] = (up - um) / 2e-6
    np.testing.assert_allclose(J, fd, rtol=1e-7, atol=1e-9)
    Jc = gk.jacobian(allen_cahn_step, u, un, 0.2, 0.01, wrt="c")["un"]
    np.testing.assert_allclose(Jc[1:-1], u[:-2] - 2 * u[1:-1] + u[2:], rtol=1e-12)
    with pytest.raises(gk.AnnotationError, match="not a parameter"):
        gk.jacobian(allen_cahn_step, u, un, 0.2, 0.01, wrt="v")


@pytest.mark.slow
def test_split_reverse_in_vector_mode_equals_fused(rng):
    """autodiff_thunk with BatchDuplicated: one tape, k adjoint lanes."""
    u, un = rng.uniform(0.2, 1, 40), rng.uniform(0.2, 1, 40)
    seeds = [rng.uniform(-1, 1, 40) for _ in range(4)]

    def args():
        return (gk.BatchDuplicated(u, (seeds[0].copy(), seeds[1].copy())),
                gk.BatchDuplicated(un.copy(), (seeds[2].copy(), seeds[3].copy())), gk.Active(0.2), gk.Const(0.01))

    fwd, rev = gk.autodiff_thunk(allen_cahn_step, gk.BatchDuplicated, gk.BatchDuplicated, gk.Active, gk.Const)
    split = args()
    g_split = rev(*split, fwd(*split))
    fused = args()
    g_fused = gk.autodiff(allen_cahn_step, *fused)
    assert g_split[2] == pytest.approx(g_fused[2], rel=1e-13) and len(g_split[2]) == 2
    for a, b in zip(split[0].dvals + split[1].dvals, fused[0].dvals + fused[1].dvals):
        np.testing.assert_allclose(a, b, rtol=1e-13)


@gk.kernel
def square_plus_transpose(a, b):
    i, j = gk.tid()
    b[i, j] = a[i, j] * a[i, j] + 3.0 * a[j, i]


def _square_plus_transpose_jacobian(a):
    """J[i, j, k, l] = d b[i, j] / d a[k, l] = 2 a[i, j] [k, l = i, j] + 3 [k, l = j, i]."""
    n = a.shape[0]
    J = np.zeros((n, n, n, n))
    for i in range(n):
        for j in range(n):
            J[i, j, i, j] += 2 * a[i, j]
            J[i, j, j, i] += 3.0
    return J


def test_jacobian_wrt_arrays_of_any_layout(rng):
    """Issue 14.4: with respect to a Fortran-ordered array the unit tangents were written into
    a copy (reshape(-1)) and the Jacobian came out all zeros. Any layout of `wrt` and of the
    outputs gives the same Jacobian, indexed in C order."""
    a = rng.uniform(0.5, 1.5, (4, 4))
    want = _square_plus_transpose_jacobian(a)
    wide = rng.uniform(0.5, 1.5, (8, 12))
    layouts = {"C": a, "F": np.asfortranarray(a), "transposed": np.ascontiguousarray(a.T).T,
               "strided": np.ascontiguousarray(np.repeat(np.repeat(a, 2, 0), 3, 1))[::2, ::3]}
    wide[1::2, 2::3] = a
    layouts["strided-in-a-wider-array"] = wide[1::2, 2::3]
    for name, aa in layouts.items():
        np.testing.assert_array_equal(aa, a)
        for out in (np.zeros((4, 4)), np.zeros((4, 4), order="F"), np.zeros((4, 8))[:, ::2]):
            before = aa.copy(), out.copy()
            J = gk.jacobian(square_plus_transpose, aa, out, wrt="a")["b"]
            assert J.shape == (4, 4, 4, 4)
            np.testing.assert_allclose(J, want, rtol=1e-15, err_msg=f"wrt {name}")
            np.testing.assert_array_equal(aa, before[0])  # the user's arrays are not touched
            np.testing.assert_array_equal(out, before[1])


def test_jacobian_of_matvec_wrt_a_fortran_matrix_and_a_strided_vector(rng):
    A, y = np.asfortranarray(rng.uniform(0.5, 1.5, (5, 3))), np.zeros(5)
    x = rng.uniform(0.5, 1.5, 6)[::2]
    JA = gk.jacobian(matvec, A, x, y, wrt="A", dim=5, chunk=4)["y"]  # dy_i / dA_kl = [i = k] x_l
    np.testing.assert_allclose(JA, np.einsum("ik,l->ikl", np.eye(5), x), rtol=1e-15)
    Jx = gk.jacobian(matvec, A, x, y, wrt="x", dim=5)["y"]
    np.testing.assert_allclose(Jx, A, rtol=1e-15)
    J3 = gk.jacobian(allen_cahn_step, np.asfortranarray(rng.uniform(0.2, 1, 9)[::-1]), np.zeros(9), 0.2, 0.01,
                     wrt="u")["un"]  # a reversed view (negative stride)
    assert np.count_nonzero(J3) == 7 * 3 + 2


def test_jacobian_refuses_what_launch_refuses(rng):
    a = rng.uniform(0.5, 1.5, (4, 4))
    buf = np.zeros(7)
    overlapping = np.lib.stride_tricks.as_strided(buf, (4, 4), (8, 8), writeable=True)
    with pytest.raises(gk.AliasingError, match="'b' is written .* elements overlap"):
        gk.jacobian(square_plus_transpose, a, overlapping, wrt="a")
    np.testing.assert_array_equal(buf, 0.0)
    with pytest.raises(gk.AnnotationError, match="wrt=True"):
        gk.jacobian(square_plus_transpose, a, np.zeros((4, 4)), wrt=True)
    with pytest.raises(gk.LaunchError, match="'a' is a masked array"):
        gk.jacobian(square_plus_transpose, np.ma.masked_array(a), np.zeros((4, 4)), wrt="a")


@pytest.mark.numba
def test_inspect_answers_for_every_signature_on_the_cpu():
    """Found by the race fuzzer's author: inspect in vector reverse mode looked up the
    sizes of lane shadows (`_gk_d_data_l0`) under their un-laned names (KeyError)."""
    from support.signatures import all_signatures
    seen_batch = 0
    for s in all_signatures():
        ins = gk.inspect(s.kernel, *s.args, dim=s.dim, mode=s.mode)
        assert ins.source, s.label
        if any(isinstance(a, gk.BatchDuplicated) for a in s.args) and ins.atomic_targets:
            seen_batch += 1
            assert ins.private_bytes >= 0
    assert seen_batch > 0


def test_grouped_gathers_then_one_fused_launch(lane_group):
    """Lanes in groups with a gather and nothing taped: each group's gather, then one fused launch of all
    lanes (primal and every lane's zeroing), the primal not run apart: ceil(k / group) + 1 launches."""
    from gradkern.runtime.call import observing
    ran = []
    lane_group(2)
    kernel, args, dim = CASES["reverse/heat_2d"]
    with observing(lambda run, dim, seconds: ran.append(run.spec.typed.name)):  # every launch of a call
        batch_vs_separate(kernel, args, dim, gk.Reverse, np.random.default_rng(8), backend="interp", k=5)
    assert ran[-4:] == ["heat_step_2d_gather_x2", "heat_step_2d_gather_x2", "heat_step_2d_gather",
                        "heat_step_2d_grad_x5"]
    assert gk.inspect(kernel, *_lanes(args, 5), dim=dim, mode=gk.Reverse, backend="interp").runs == \
        ("gather", "fused")
    # a taped gather keeps the primal apart: its reverse needs the tape
    kernel, args, dim = CASES["gather/interior_taped"]
    assert gk.inspect(kernel, *_lanes(args, 5), dim=dim, mode=gk.Reverse, backend="interp").runs == \
        ("augmented_primal", "gather", "reverse")


def _lanes(args: tuple, k: int) -> tuple:
    return tuple(gk.BatchDuplicated(a.val, tuple(a.dval.copy() for _ in range(k))) if isinstance(a, gk.Duplicated)
                 else a for a in args)


@pytest.mark.numba
@pytest.mark.parametrize("label", ["reverse/heat_2d", "reverse/allen_cahn", "gather/periodic_2d"])
def test_grouped_gathers_are_exact_compiled(label, monkeypatch):
    """Through Numba, lanes in groups of 2 (k = 5: groups of 2, 2 and 1), gathers then one fused launch: every
    shadow and Active derivative bit for bit what the 5 separate calls give, and the primal's result too."""
    from gradkern.backends import backend
    monkeypatch.setattr(backend("cpu"), "lane_group", 2)
    kernel, args, dim = CASES[label]
    rng = np.random.default_rng(3)
    k = 5
    seeds = [[rng.uniform(-1, 1, a.val.shape) for _ in range(k)] if isinstance(a, gk.Duplicated) else None
             for a in args]

    def plain(a):
        return gk.Const(_copy(a.val)) if isinstance(a, gk.Const) else a
    separate = []
    for lane in range(k):
        call = [plain(a) if s is None else gk.Duplicated(_copy(a.val), s[lane].copy()) for a, s in zip(args, seeds)]
        separate.append((call, gk.autodiff(kernel, *call, dim=dim)))
    call = [plain(a) if s is None else gk.BatchDuplicated(_copy(a.val), tuple(x.copy() for x in s))
            for a, s in zip(args, seeds)]
    got = gk.autodiff(kernel, *call, dim=dim)
    for n, c in enumerate(call):
        if isinstance(c, gk.BatchDuplicated):
            assert np.array_equal(c.val, separate[0][0][n].val)
            for lane in range(k):
                assert np.array_equal(c.dvals[lane], separate[lane][0][n].dval), (label, n, lane)
        if got[n] is not None:
            assert got[n] == tuple(sep[1][n] for sep in separate)
