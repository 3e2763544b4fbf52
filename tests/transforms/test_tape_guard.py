"""The tape guard (transforms/tape_count.py: guard_pushes, runtime/reverse.py: check_tape, docs/adjoint-forms.md
section 13): a tape sized by the count kernel is pushed onto only within each thread's slots, and a thread that
would push more is reported as gk.TapeOverflowError after the launch. The mismatch is forced with the test hook
`COUNT_SHORTFALL` (the tape sized one slot short of the count); the normal path's gradients are checked against
central differences and the dot-product test (float64) and against their closed form (float32, with a bound
derived from the trip count)."""

import numpy as np
import pytest

import gradkern as gk
from gradkern.backends.cuda import FMAD_OFF_MARK
from gradkern.runtime import reverse as runtime_reverse
from gradkern.testing import check_grad


@gk.kernel
def halve_sum(x, y, c):
    """A data-dependent trip count (how often x[i] halves before it falls below 1), `t` taped per iteration."""
    i = gk.tid()
    t = x[i]
    s = t * 0.0
    while t >= 1.0:
        t = t * 0.5
        s = s + t * t * c
    y[i] = s


def _inputs(rng, n=23, dtype=np.float64):
    x = rng.uniform(1.0, 40.0, n).astype(dtype)
    x[3] = 37.5  # the largest trip count (6 halvings) is reached by a few threads only
    return x, rng.uniform(-1.0, 1.0, n).astype(dtype), rng.uniform(-1.0, 1.0, n).astype(dtype)


def _trips(x):
    return np.floor(np.log2(x)).astype(int) + 1  # t = x / 2^k for k = 1..K, K the first with x / 2^K < 1


def _launched(x, y, c):
    """y after a plain launch (the primal the guarded kernels must leave too)."""
    y = y.copy()
    gk.launch(halve_sum, len(x), x.copy(), y, c)
    return y


@pytest.fixture
def short(monkeypatch):
    monkeypatch.setattr(runtime_reverse, "COUNT_SHORTFALL", 1)


def _fused_overflow(monkeypatch, rng, backend):
    """gk.autodiff with the tape one slot short: the error, the primal as launched, the shadows of the threads
    that overflowed untouched and the others' as a correct call leaves them."""
    x, y, dy = _inputs(rng)
    c, n = 0.7, len(x)
    want_dx, want_dy = np.zeros_like(x), dy.copy()
    gk.autodiff(halve_sum, gk.Duplicated(x.copy(), want_dx), gk.Duplicated(y.copy(), want_dy), gk.Active(c),
                dim=n, backend=backend)
    monkeypatch.setattr(runtime_reverse, "COUNT_SHORTFALL", 1)
    dx0 = np.full_like(x, 0.25)
    got_y, got_dx, got_dy = y.copy(), dx0.copy(), dy.copy()
    with pytest.raises(gk.TapeOverflowError, match="pushed 6 float values onto a tape the count kernel sized for 5"
                       ".*shadows hold the contributions of the threads that did not overflow"):
        gk.autodiff(halve_sum, gk.Duplicated(x.copy(), got_dx), gk.Duplicated(got_y, got_dy), gk.Active(c), dim=n,
                    backend=backend)
    np.testing.assert_array_equal(got_y, _launched(x, y, c))
    over = _trips(x) == _trips(x).max()
    assert over.sum() >= 1 and (~over).sum() >= 10
    np.testing.assert_array_equal(got_dx[over], dx0[over])
    np.testing.assert_array_equal(got_dy[over], dy[over])
    # the other threads ran the same reverse as a correct call: the same operations, bit for bit
    np.testing.assert_array_equal(got_dx[~over], dx0[~over] + want_dx[~over])
    np.testing.assert_array_equal(got_dy[~over], want_dy[~over])


@pytest.mark.parametrize("backend", ["cpu", "hostcuda"])
def test_fused_overflow_is_reported_and_the_overflowing_threads_skip_their_reverse(rng, monkeypatch, backend):
    _needs(backend)
    _fused_overflow(monkeypatch, rng, backend)


def _needs(backend):
    if backend == "hostcuda":
        from gradkern.backends.hostcuda import compiler
        if compiler() is None:
            pytest.skip("hostcuda needs g++")


@pytest.mark.parametrize("backend", ["cpu", "hostcuda"])
def test_split_overflow_is_reported_before_any_shadow_is_touched(rng, short, backend):
    _needs(backend)
    x, y, dy = _inputs(rng)
    fwd, _ = gk.autodiff_thunk(halve_sum, gk.Duplicated, gk.Duplicated, gk.Active, dim=len(x), backend=backend)
    yy, dx = y.copy(), np.full_like(x, 0.25)
    dyy = dy.copy()
    with pytest.raises(gk.TapeOverflowError, match="sized for 5.*no shadow was touched"):
        fwd(gk.Duplicated(x.copy(), dx), gk.Duplicated(yy, dyy), gk.Active(0.7))
    np.testing.assert_array_equal(yy, _launched(x, y, 0.7))
    np.testing.assert_array_equal(dx, np.full_like(x, 0.25))
    np.testing.assert_array_equal(dyy, dy)


def test_vector_mode_overflow_leaves_the_overflowing_threads_untouched_in_every_lane(rng, short):
    """Two lanes run in one fused launch on the CPU: the threads that overflowed skip every lane's reverse."""
    x, y, dy = _inputs(rng)
    lanes = (dy.copy(), 2.0 * dy)
    dxs = (np.zeros_like(x), np.ones_like(x))
    with pytest.raises(gk.TapeOverflowError, match="shadows hold the contributions"):
        gk.autodiff(halve_sum, gk.BatchDuplicated(x.copy(), dxs), gk.BatchDuplicated(y.copy(), lanes), gk.Active(0.7),
                    dim=len(x), backend="cpu")
    over = _trips(x) == _trips(x).max()
    for lane, (dx0, seed) in enumerate(((0.0, dy), (1.0, 2.0 * dy))):
        np.testing.assert_array_equal(dxs[lane][over], dx0)
        np.testing.assert_array_equal(lanes[lane][over], seed[over])
        assert np.all(lanes[lane][~over] == 0.0)  # the others' reverse ran: each store's shadow is cleared


def test_gradients_with_the_guard_float64(rng):
    x, y, _ = _inputs(rng)
    report = check_grad(halve_sum, gk.Duplicated(x, np.zeros_like(x)), gk.Duplicated(y, np.zeros_like(y)),
                        gk.Active(0.7), dim=len(x))
    assert report.ok and report.checked >= 10


@pytest.mark.parametrize("backend", ["cpu", "hostcuda"])
def test_gradients_with_the_guard_float32_against_the_closed_form(rng, backend):
    """y = c Σ_k t_k², t_k = x / 2^k (k = 1..K): dy/dx = 2 c x Σ 4^-k, dy/dc = x² Σ 4^-k. In float32 every t_k
    is exact (a halving) and each of the K terms takes at most 3 roundings (t*t, *c, the add) in the primal and 4
    in its reverse (the products of the adjoint chain and the add into the adjoint), all of terms of one sign, so
    each result is within (4K + 4) u of its exact value, u = 2^-24 (Higham's γ_n bound, n u < 1). dc sums
    the threads' float32 contributions in float64: within Σ_i |dy_i| (4K + 4) u x_i² Σ 4^-k, plus the float64
    sum's n 2^-53 of the same, far smaller."""
    _needs(backend)
    x, y, dy = _inputs(rng, dtype=np.float32)
    c = np.float32(0.7)
    dx, dyy = np.zeros_like(x), dy.copy()
    (_, _, dc) = gk.autodiff(halve_sum, gk.Duplicated(x.copy(), dx), gk.Duplicated(y.copy(), dyy), gk.Active(c),
                             dim=len(x), backend=backend)
    x64, dy64, c64, k = x.astype(np.float64), dy.astype(np.float64), float(c), _trips(x)
    geometric = np.array([sum(4.0 ** -j for j in range(1, n + 1)) for n in k])
    want_dx = dy64 * 2.0 * c64 * x64 * geometric
    want_dc = float(np.sum(dy64 * x64 * x64 * geometric))
    u = 2.0 ** -24
    bound = (4 * k + 4) * u
    assert np.all(np.abs(dx - want_dx) <= bound * np.abs(want_dx))
    assert abs(dc - want_dc) <= float(np.sum(bound * np.abs(dy64) * x64 * x64 * geometric)) + \
        len(x) * 2.0 ** -53 * float(np.sum(np.abs(dy64 * x64 * x64 * geometric)))
    np.testing.assert_array_equal(dyy, 0.0)


def test_the_kernels_that_push_a_counted_tape_compile_without_fma_contraction(rng):
    """On CUDA the count kernel, the augmented primal and the fused kernel of a counted tape are compiled with
    --fmad=false (backends/cuda.py: FMAD_OFF_MARK); the reverse, which only pops, keeps NVRTC's default."""
    _needs("hostcuda")
    x, y, dy = _inputs(rng)
    seen = gk.inspect(halve_sum, gk.Duplicated(x, np.zeros_like(x)), gk.Duplicated(y, dy), gk.Active(0.7),
                      dim=len(x), mode=gk.Reverse, backend="hostcuda")
    marked = {role for role, source in seen.sources.items() if source.startswith(FMAD_OFF_MARK)}
    assert marked == {"fused", "augmented_primal", "count"}
