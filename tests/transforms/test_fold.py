"""The reverse folded into a stencil's gather (transforms/fold.py, docs/adjoint-forms.md section 6): the
consumed output shadow cleared row-lagged inside the gather's chunks and the Active scalars summed by its
own copy, so no reverse launch follows the gather; refused where it is not proved."""

import numpy as np
import pytest

import gradkern as gk
import gradkern.pipeline as pipeline
from gradkern.backends import numba_cpu, numba_plan
from gradkern.kernels import allen_cahn_step, allen_cahn_step_2d, heat_step_3d, wave_step_2d
from gradkern.runtime.call import prepare
from gradkern.testing import check_grad


def skew(u, un, c):
    i = gk.tid()
    if i >= 2 and i < u.shape[0] - 1:
        un[i] = u[i] + c * u[i - 2] * u[i + 1]
    else:
        un[i] = u[i]


def shifted_out(u, un, c):
    i = gk.tid()  # launched over n - 1 threads: un[0] is not written
    un[i + 1] = u[i] * u[i + 1] + c * u[i + 1]


def backward(u, un):
    i = gk.tid()  # reads only u[i - 2] and u[i - 1]: the lag is -1
    if i >= 2:
        un[i] = u[i - 1] * u[i - 2]
    else:
        un[i] = 0.0


def mirrored(u, un, c):
    i = gk.tid()  # un written at n - 1 - i: its shadow is read at no constant offset of tid
    n = u.shape[0]
    if i >= 1 and i < n - 1:
        un[n - 1 - i] = c * (u[i - 1] + u[i + 1]) * u[i]
    else:
        un[n - 1 - i] = u[i]


def columns(u, out, c):
    i = gk.tid()  # a 1-D launch clearing a 2-D output: its rows are not tid + z on every axis
    if i >= 1 and i < u.shape[0] - 1:
        out[i, 0] = c * (u[i - 1] + u[i + 1])
        out[i, 1] = u[i] * u[i]
    else:
        out[i, 0] = u[i]
        out[i, 1] = u[i]


def _fresh(f):
    """A new kernel object (its own specialisation cache) of a plain function or a library kernel."""
    return gk.kernel(getattr(f, "fn", f))


def _runs(kernel, args, dim=None):
    call = prepare(kernel, args, dim, None, "reverse")[0]
    return tuple(r.role for r in call.runs), tuple(r.role for r in call.split)


def _both(kernel, make, dim=None, fold=True, backend=None):
    """(fused, split) results of reverse mode on `backend`: (shadows after, Active derivatives) each."""
    out = []
    for mode in ("fused", "split"):
        args, shadows = make()
        if mode == "fused":
            got = gk.autodiff(kernel, *args, dim=dim, backend=backend)
        else:
            aug, rev = gk.autodiff_thunk(kernel, *(type(a) if isinstance(a, gk.Annotation) else gk.Const
                                                   for a in args), dim=dim, backend=backend)
            tape = aug(*args)
            got = rev(*args, tape)
        out.append(([s.copy() for s in shadows], got))
    return out


def _allen_cahn(n, seed=0):
    def make():
        rng = np.random.default_rng(seed)
        u, un = rng.standard_normal(n), np.zeros(n)
        du, dun = rng.standard_normal(n), rng.standard_normal(n)
        return (gk.Duplicated(u, du), gk.Duplicated(un, dun), gk.Active(0.2), gk.Const(0.01)), (du, dun)
    return make


def test_allen_cahn_plan_has_no_reverse_launch():
    roles, split = _runs(allen_cahn_step, _allen_cahn(1000)()[0])
    assert roles == ("gather", "fused") and split == ("augmented_primal", "gather")
    ir = gk.inspect(allen_cahn_step, *_allen_cahn(1000)()[0], mode=gk.Reverse)
    assert "gather" in ir.runs and "reverse" not in ir.runs
    assert "per-chunk partial sums" in ir.active_sums["c"]  # made by the gather now


def _sum_bound(t):
    """How far two float64 sums of the Active terms `t` may be apart. The folded gather sums the same terms
    (the same expression, so the same values) as the reverse did, each chunk in thread order into a
    register and the chunks' partials in chunk order, but its chunks tile the gather's domain (the launch
    plus the stencil's reach), not the launch's: the grouping differs. Any order of summing N terms with at
    most N + C additions (C <= 64 chunk partials and the accumulator's start) is within γ_{N+C} Σ|t_i| of
    the exact sum (Higham, Accuracy and Stability of Numerical Algorithms, (4.4)), γ_k = k u / (1 - k u),
    u = 2^-53; two such sums are within twice that of each other."""
    k = t.size + 64
    return 2 * (k * 2.0**-53 / (1 - k * 2.0**-53)) * np.abs(t).sum()


_BEFORE: dict = {}


def _inputs_key(args) -> tuple:
    """The values of a call's arguments, shadows too, as a key."""
    key = []
    for a in args:
        key.append(type(a).__name__)  # Active or Const: the same value, another call
        for x in (getattr(a, "val", a), getattr(a, "dval", None)):
            key.append((x.shape, x.dtype.str, x.tobytes()) if isinstance(x, np.ndarray) else repr(x))
    return tuple(key)


def _against_before(monkeypatch, f, make, dim=None, terms=None, active=2):
    """`f` folded against the plan before (a kernel object built without the fold), fused and split: the
    shadows bit for bit, the split plan without a reverse launch, the Active derivative (argument `active`) within
    `_sum_bound` of the old one (`terms(u, dun)`: its terms). Returns the folded kernel and the results.
    Both gathers' interiors as replayed: the coefficient form reassociates each differently
    (docs/adjoint-forms.md, section 11; tests/transforms/test_coefficients.py bounds that)."""
    monkeypatch.setattr(pipeline, "COEFFICIENTS", False)
    monkeypatch.setattr(pipeline, "FOLD", False)
    # the plan before on the interpreter: each shadow element's gather the same sums in the same order, the Active
    # sum in thread order (one of the orders _sum_bound covers); Numba compiles only the folded plan (session 59)
    key = (getattr(f, "name", getattr(f, "__name__", "")), repr(dim), _inputs_key(make()[0]))
    if key not in _BEFORE:  # the interpreter has no chunks: one run serves every chunking of the same inputs
        _BEFORE[key] = _both(_fresh(f), make, dim, backend="interp")
    before = _BEFORE[key]
    monkeypatch.setattr(pipeline, "FOLD", True)
    kernel = _fresh(f)
    after = _both(kernel, make, dim)
    args = make()[0]
    assert _runs(kernel, args, dim)[1] == ("augmented_primal", "gather")
    for (old_shadows, old), (new_shadows, new) in zip(before, after):
        for a, b in zip(old_shadows, new_shadows):
            assert np.array_equal(a, b)
        if terms is not None:
            assert abs(new[active] - old[active]) <= _sum_bound(terms(args[0].val, args[1].dval))
    return kernel, after


def _chunks(monkeypatch, chunks):
    """Every CPU launch runs `chunks` chunks (at most one per row; 0: the serial path), None: its own."""
    if chunks is not None:
        monkeypatch.setattr(numba_plan, "private_chunks", lambda *a, **k: min(chunks, a[1]) if chunks else 0)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 17, 257, 4099])
@pytest.mark.parametrize("chunks", [None, 1, 3, 5, 0])
def test_allen_cahn_bit_identical_shadows(monkeypatch, n, chunks):
    """Shadows bit for bit those of the plan before (gather + reverse), for tiny and odd sizes and any
    chunking (more chunks than rows of a window: 5 chunks of 1 to 3 rows), dc within its bound."""
    _chunks(monkeypatch, chunks)
    _, after = _against_before(monkeypatch, allen_cahn_step, _allen_cahn(n),
                               terms=lambda u, dun: dun[1:-1] * (u[:-2] - 2.0 * u[1:-1] + u[2:]))
    for shadows, _ in after:
        assert not shadows[1].any()


TERMS = {skew: lambda u, dun: dun[2:-1] * u[:-3] * u[3:], shifted_out: lambda u, dun: dun[1:] * u[1:],
         backward: None}


@pytest.mark.parametrize("f, n, dim", [(skew, 23, None), (shifted_out, 19, 18), (backward, 21, None), (skew, 3, None),
                                       (shifted_out, 2, 1), (backward, 1, None), (backward, 2, None)])
@pytest.mark.parametrize("chunks", [None, 2, 7, 0])
def test_offsets_and_lags_fold_and_check(monkeypatch, f, n, dim, chunks):
    """Offset sets with a lag of 1 (skew: reads at -2..1), an output at tid + 1 (shifted_out) and a negative
    lag (backward): folded, against the plan before and against finite differences and the dot product."""
    _chunks(monkeypatch, chunks)
    active = (gk.Active(0.3),) if TERMS[f] is not None else ()

    def make():
        rng = np.random.default_rng(3)
        u, un = rng.standard_normal(n), np.zeros(n)
        du, dun = rng.standard_normal(n), rng.standard_normal(n)
        return (gk.Duplicated(u, du), gk.Duplicated(un, dun), *active), (du, dun)
    kernel, _ = _against_before(monkeypatch, f, make, dim, TERMS[f])
    u = np.random.default_rng(5).standard_normal(n)
    check_grad(kernel, gk.Duplicated(u, np.zeros(n)), gk.Duplicated(np.zeros(n), np.zeros(n)), *active, dim=dim)


@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (5, 4), (7, 9), (33, 17)])
@pytest.mark.parametrize("chunks", [None, 3, 0])
def test_2d_stencil_folds(monkeypatch, shape, chunks):
    _chunks(monkeypatch, chunks)

    def make():
        rng = np.random.default_rng(1)
        u, un = rng.standard_normal(shape), np.zeros(shape)
        du, dun = rng.standard_normal(shape), rng.standard_normal(shape)
        return (gk.Duplicated(u, du), gk.Duplicated(un, dun), gk.Active(0.1), gk.Const(0.01)), (du, dun)

    def terms(u, dun):
        lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1]
        return dun[1:-1, 1:-1] * lap
    kernel, after = _against_before(monkeypatch, allen_cahn_step_2d, make, terms=terms)
    assert all(not shadows[1].any() for shadows, _ in after)
    u = np.random.default_rng(2).standard_normal(shape)
    check_grad(kernel, gk.Duplicated(u, np.zeros(shape)), gk.Duplicated(np.zeros(shape), np.zeros(shape)),
               gk.Active(0.1), gk.Const(0.01))


@pytest.mark.parametrize("shape", [(2, 2, 2), (4, 3, 5)])  # the serial twin: the chunks' code, quick to compile
def test_3d_stencil_folds(monkeypatch, shape):
    _chunks(monkeypatch, 3)
    kernel = _fresh(heat_step_3d)
    u = np.random.default_rng(4).standard_normal(shape)
    args = (gk.Duplicated(u, np.zeros(shape)), gk.Duplicated(np.zeros(shape), np.ones(shape)), gk.Active(0.1))
    assert _runs(kernel, args)[1] == ("augmented_primal", "gather")
    check_grad(kernel, *args)
    dun = np.random.default_rng(6).standard_normal(shape)
    gk.autodiff(kernel, gk.Duplicated(u, np.zeros(shape)), gk.Duplicated(np.zeros(shape), dun), gk.Active(0.1))
    assert not dun.any()


@pytest.mark.parametrize("f", [mirrored, columns])
def test_not_constant_offsets_keep_the_reverse(f):
    """An output cleared at n - 1 - i (its shadow read at no constant offset) or a 2-D output of a 1-D
    launch: the fold is refused, the reverse launch stays, and the gradient is right."""
    kernel = gk.kernel(f)
    n = 13
    u = np.random.default_rng(7).standard_normal(n)
    out = np.zeros((n, 2)) if f is columns else np.zeros(n)
    args = (gk.Duplicated(u, np.zeros(n)), gk.Duplicated(out, np.zeros_like(out)), gk.Active(0.4))
    assert "gather" in dict(gk.inspect(kernel, *args, mode=gk.Reverse).adjoint_forms).values()
    assert _runs(kernel, args)[1][-1] == "reverse"
    check_grad(kernel, *args)


def test_vector_mode_folds_each_lane():
    """k lanes: every lane's shadow cleared and Active derivative summed by the gather, the shadow bit for bit
    what its one-lane call gives and the Active derivative within `_sum_bound` of it (tests/transforms/
    test_lanes.py checks the lane groups): the k-lane gather is another compiled loop, whose register sum
    LLVM may group differently (docs/adjoint-forms.md, section 9; with one Numba thread it differs by an ulp)."""
    n, k = 40, 3
    rng = np.random.default_rng(8)
    u, seeds = rng.standard_normal(n), [rng.standard_normal(n) for _ in range(k)]
    kernel = _fresh(allen_cahn_step)
    dus, duns = tuple(np.zeros(n) for _ in range(k)), tuple(s.copy() for s in seeds)
    args = (gk.BatchDuplicated(u, dus), gk.BatchDuplicated(np.zeros(n), duns), gk.Active(0.2), gk.Const(0.01))
    assert "reverse" not in _runs(kernel, args)[1]
    got = gk.autodiff(kernel, *args)
    for lane in range(k):
        du, dun = np.zeros(n), seeds[lane].copy()
        one = gk.autodiff(kernel, gk.Duplicated(u, du), gk.Duplicated(np.zeros(n), dun), gk.Active(0.2), 0.01)
        assert np.array_equal(du, dus[lane]) and not duns[lane].any()
        assert abs(got[2][lane] - one[2]) <= _sum_bound(seeds[lane][1:-1] * (u[:-2] - 2.0 * u[1:-1] + u[2:]))


def _wave(shape, c=gk.Const):
    def make():
        rng = np.random.default_rng(9)
        up, u, vel = (rng.standard_normal(shape) for _ in range(3))
        dup_, du, dun, dvel = (rng.standard_normal(shape) for _ in range(4))
        return (gk.Duplicated(up, dup_), gk.Duplicated(u, du), gk.Duplicated(np.zeros(shape), dun),
                gk.Duplicated(vel, dvel), c(0.1)), (dup_, du, dun, dvel)
    return make


@pytest.mark.parametrize("shape", [(1, 1), (3, 2), (6, 5), (17, 9)])
@pytest.mark.parametrize("chunks", [None, 3, 0])
def test_wave_step_folds_its_thread_own_adds(monkeypatch, shape, chunks):
    """wave_step_2d's reverse adds into d_u_prev and d_vel at the thread's own element (plain adds) beside
    clearing d_u_next: the gather's own copy makes those adds (transforms/fold.py), no reverse launch follows,
    and every shadow is bit for bit the plan before's."""
    _chunks(monkeypatch, chunks)
    kernel, after = _against_before(monkeypatch, wave_step_2d, _wave(shape))
    assert all(not shadows[2].any() for shadows, _ in after)
    rng = np.random.default_rng(2)
    check_grad(kernel, *(gk.Duplicated(rng.standard_normal(shape), np.zeros(shape)) for _ in range(4)),
               gk.Const(0.1))


def test_wave_step_folds_own_adds_beside_an_active_scalar(monkeypatch):
    """c Active too: the own copy makes the adds and sums dc; shadows bit for bit, dc within its bound."""
    _chunks(monkeypatch, 3)

    def terms(u, vel, dun):
        lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1]
        return dun[1:-1, 1:-1] * vel[1:-1, 1:-1] ** 2 * lap
    make = _wave((17, 9), gk.Active)
    args, shadows = make()
    # _against_before's terms(u, dun): here of u, vel and u_next's seed
    _against_before(monkeypatch, wave_step_2d, make,
                    terms=lambda *_: terms(args[1].val, args[3].val, shadows[2]), active=4)


def test_wave_step_own_adds_by_coefficients_within_their_bound(monkeypatch):
    """With the interior by its coefficients (docs/adjoint-forms.md, section 11) d_u_prev's add (a negation)
    is exact and d_vel's, 2 c v g lap as two products summed, is reassociated: within 2 γ_8 S of the replayed
    one, S = |dvel| + 2 |c v g lap| (each form within γ_K S of the exact value, K = 8 bounding the roundings
    along a path and the terms added: Higham (3.4), (4.4)). Its 561 threads run the serial twins, bit for bit the
    parallel entries (tests/backends/test_serial_twin.py): the bound is about the coefficient form's rounding, and
    the parallel entries of these two reverses cost 14 s of CPU to compile (docs/testing.md, "Test time")."""
    monkeypatch.setattr(numba_cpu, "SERIAL_THREADS", 10**9)
    shape = (33, 17)
    make = _wave(shape)
    out = {}
    for coefficients in (False, True):
        monkeypatch.setattr(pipeline, "COEFFICIENTS", coefficients)
        args, shadows = make()
        gk.autodiff(_fresh(wave_step_2d), *args)
        out[coefficients] = [s.copy() for s in shadows]
    (dup_old, _, _, dvel_old), (dup_new, _, _, dvel_new) = out[False], out[True]
    assert np.array_equal(dup_old, dup_new)
    args, shadows = make()
    u, vel, g, dvel = args[1].val, args[3].val, shadows[2], shadows[3]
    lap = np.zeros(shape)
    lap[1:-1, 1:-1] = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1]
    s = np.abs(dvel) + 2 * np.abs(0.1 * vel * g * lap)
    k = 8
    assert np.all(np.abs(dvel_new - dvel_old) <= 2 * (k * 2.0**-53 / (1 - k * 2.0**-53)) * s)


def inplace_from_neighbour(u, q, un):
    i = gk.tid()  # q's adjoint is read by the neighbour's copy (d_u[i - 1] needs it) and updated in place
    if i >= 1:
        un[i] = u[i - 1] * u[i]
        q[i] = q[i] * u[i - 1]
    else:
        un[i] = u[i]


def test_an_own_shadow_a_neighbours_copy_reads_keeps_the_reverse():
    """The own copy may update an own shadow only where no other copy of the gather reads it: here thread
    i + 1's copy reads d_q[i + 1] for d_u[i], so the fold is refused and the reverse launch stays."""
    kernel = gk.kernel(inplace_from_neighbour)
    n = 11
    rng = np.random.default_rng(12)
    args = (gk.Duplicated(rng.standard_normal(n), np.zeros(n)), gk.Duplicated(rng.standard_normal(n), np.zeros(n)),
            gk.Duplicated(np.zeros(n), np.zeros(n)))
    assert gk.inspect(kernel, *args, mode=gk.Reverse).adjoint_forms["u"] == "gather"
    assert _runs(kernel, args)[1][-1] == "reverse"
    check_grad(kernel, *args)
