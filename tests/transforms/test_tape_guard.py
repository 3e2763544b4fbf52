"""The tape guard (transforms/tape_count.py: guard_pushes, runtime/reverse.py: check_tape, docs/adjoint-forms.md
section 13): a tape sized by the count kernel is pushed onto only within each thread's slots, and a thread that
would push more is reported as gk.TapeOverflowError after the launch. The mismatch is forced with the test hook
`COUNT_SHORTFALL` (the tape sized one slot short of the count); the normal path's gradients are checked against
central differences and the dot-product test (float64) and against their closed form (float32, with a bound
derived from the trip count)."""

import contextlib

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


@pytest.fixture
def short(monkeypatch):
    monkeypatch.setattr(runtime_reverse, "COUNT_SHORTFALL", 1)


class _Cpu:
    """The Numba backend, in the `device` fixture's terms (tests/support/devices.py)."""

    backend = "cpu"

    def to(self, a):
        return a.copy()

    def host(self, a):
        return a

    def running(self):
        return contextlib.nullcontext()


def _where(where):
    return (_Cpu(), "cpu") if where == "cpu" else (where, None)


def _reference(x, y, dy, c):
    """A correct call on the CPU backend: y after it, dx, dy. halve_sum computes with + and * only, and the
    kernels of a counted tape are compiled without FMA contraction on every backend (--fmad=false on a GPU,
    -ffp-contract=off on hostcuda), so every backend's results are these, bit for bit."""
    y, dx, dy = y.copy(), np.zeros_like(x), dy.copy()
    gk.autodiff(halve_sum, gk.Duplicated(x.copy(), dx), gk.Duplicated(y, dy), gk.Active(c), dim=len(x),
                backend="cpu")
    return y, dx, dy


def _fused_overflow(monkeypatch, rng, where):
    """gk.autodiff with the tape one slot short: the error, the primal as a correct call leaves it, the
    shadows of the threads that overflowed untouched and the others' as a correct call leaves them."""
    dev, backend = _where(where)
    x, y, dy = _inputs(rng)
    c, n = 0.7, len(x)
    want_y, want_dx, want_dy = _reference(x, y, dy, c)
    monkeypatch.setattr(runtime_reverse, "COUNT_SHORTFALL", 1)
    dx0 = np.full_like(x, 0.25)
    got = [dev.to(a) for a in (x, y, dx0, dy)]
    with pytest.raises(gk.TapeOverflowError, match="pushed 6 float values onto a tape the count kernel sized for 5"
                       ".*shadows hold the contributions of the threads that did not overflow"), dev.running():
        gk.autodiff(halve_sum, gk.Duplicated(got[0], got[2]), gk.Duplicated(got[1], got[3]), gk.Active(c), dim=n,
                    backend=backend)
    got_y, got_dx, got_dy = (dev.host(a) for a in got[1:])
    np.testing.assert_array_equal(got_y, want_y)
    over = _trips(x) == _trips(x).max()
    assert over.sum() >= 1 and (~over).sum() >= 10
    np.testing.assert_array_equal(got_dx[over], dx0[over])
    np.testing.assert_array_equal(got_dy[over], dy[over])
    # the other threads ran the same reverse as a correct call: the same operations, bit for bit
    np.testing.assert_array_equal(got_dx[~over], dx0[~over] + want_dx[~over])
    np.testing.assert_array_equal(got_dy[~over], want_dy[~over])


def _split_overflow(monkeypatch, rng, where):
    dev, backend = _where(where)
    x, y, dy = _inputs(rng)
    want_y = _reference(x, y, dy, 0.7)[0]
    monkeypatch.setattr(runtime_reverse, "COUNT_SHORTFALL", 1)
    got = [dev.to(a) for a in (x, y, np.full_like(x, 0.25), dy)]
    with dev.running():
        fwd, _ = gk.autodiff_thunk(halve_sum, gk.Duplicated, gk.Duplicated, gk.Active, dim=len(x), backend=backend)
        with pytest.raises(gk.TapeOverflowError, match="sized for 5.*no shadow was touched"):
            fwd(gk.Duplicated(got[0], got[2]), gk.Duplicated(got[1], got[3]), gk.Active(0.7))
    np.testing.assert_array_equal(dev.host(got[1]), want_y)
    np.testing.assert_array_equal(dev.host(got[2]), np.full_like(x, 0.25))
    np.testing.assert_array_equal(dev.host(got[3]), dy)


def test_fused_overflow_is_reported_and_the_overflowing_threads_skip_their_reverse(rng, monkeypatch):
    _fused_overflow(monkeypatch, rng, "cpu")


def test_fused_overflow_on_the_device(rng, monkeypatch, device):
    _fused_overflow(monkeypatch, rng, device)


def test_split_overflow_is_reported_before_any_shadow_is_touched(rng, monkeypatch):
    _split_overflow(monkeypatch, rng, "cpu")


def test_split_overflow_on_the_device(rng, monkeypatch, device):
    _split_overflow(monkeypatch, rng, device)


def _needs(backend):
    if backend == "hostcuda":
        from gradkern.backends.hostcuda import compiler
        if compiler() is None:
            pytest.skip("hostcuda needs g++")


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
