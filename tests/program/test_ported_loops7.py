"""A seventh round of third-party host loops as programs (docs/programs.md, "Ported host loops", session 54): the
ports in tests/support/ported_loops7*.py (the Parallel Research Kernels' synch_p2p, stencil, nstream and transpose
iteration loops, Parboil's stencil driver, PolyBench's floyd-warshall, NVIDIA cuda-samples' jacobiCudaGraphs and
nbody drivers, Rodinia's leukocyte MGVF and particlefilter), leaning on a corner fed back between wavefront sweeps,
in-place add-ones between sweeps, launches on transposed views, swaps of names and of a toggled index, `k & 1`
alternation, loops that stop on a sum a kernel computed, and resampling through indices the host found (`x[index]`
on the host). Each port's store-all gradient is checked against float64 central differences and by the dot-product
test (random non-zero inputs; test_ported_loops.py's checks, which also compare the primals after the gradient with
a primal run bit for bit), its checkpointed gradient against the store-all one where its loop is checkpointable;
the spellings gradkern refuses are refused naming the line and the spelling that works, which is ported too."""

from __future__ import annotations

import numpy as np
import pytest
from support import ported_loops7 as p7
from support import ported_loops7_apps as pa
from support.ported_harness import on_interpreter
from support.ported_loops_checks import port_tests

import gradkern as gk

from .test_ported_loops import _check_against_differences, _gradient, _refused, _u, plain
from .test_ported_loops3 import _gradients_agree, _weights
from .test_ported_solvers import _same_gradients


def _p2p_grid(rng, m, n):
    """PRK p2p's start: the first row and column the boundary (i and j), the interior random."""
    a = _u(rng, m, n, lo=-0.5, hi=0.5)
    a[0, :] = np.arange(n) * 0.1
    a[:, 0] = np.arange(m) * 0.1
    return a


def _paths(rng, n):
    """Edge weights away from ties (random in [0.5, 3)), a zero diagonal as PolyBench's init makes."""
    p = _u(rng, n, n, lo=0.5, hi=3.0)
    np.fill_diagonal(p, 0.0)
    return p


def _specs(rng):
    """name -> (program, arguments as (kind, value)), as test_ported_loops.py's _ports; `loop` factories are
    bound to the plain loop (CHECKPOINTABLE lists those whose checkpointed twin is checked)."""
    dominant = _u(rng, 6, 6, lo=-0.5, hi=0.5) + np.diag(_u(rng, 6, lo=3.0, hi=4.0))
    bodies = np.concatenate([_u(rng, 5, 2, lo=-1.0, hi=1.0), _u(rng, 5, 1)], axis=1)  # x, y, mass
    return {
        "prk_p2p": (p7.prk_p2p(plain), [("dup", _p2p_grid(rng, 5, 6))]),
        "prk_stencil": (p7.prk_stencil(plain), [("dup", _u(rng, 8, 8)), ("dup", _u(rng, 8, 8)), ("active", 0.9)]),
        "prk_nstream": (p7.prk_nstream(plain), [("dup", _u(rng, 7)), ("dup", _u(rng, 7)), ("dup", _u(rng, 7)),
                                                ("active", 3.0)]),
        "prk_transpose": (p7.prk_transpose(plain), [("dup", _u(rng, 4, 5)), ("dup", _u(rng, 5, 4)), ("active", 0.7)]),
        "parboil_stencil": (p7.parboil_stencil(), [("dup", _u(rng, 5, 4, 4)), ("active", 0.4)]),
        "floyd_warshall": (p7.floyd_warshall(plain), [("dup", _paths(rng, 5)), ("active", 0.2)]),
        "jacobi_graphs": (pa.jacobi_graphs(), [("dup", dominant), ("dup", _u(rng, 6, lo=3.0, hi=5.0)),
                                               ("dup", _u(rng, 6)), ("dup", np.zeros(6)), ("dup", np.zeros(1)),
                                               ("active", 0.3)]),
        "leukocyte_mgvf": (pa.leukocyte_mgvf(), [("dup", _u(rng, 5, 6)), ("dup", _u(rng, 5, 6)), ("active", 0.5)]),
        "nbody": (pa.nbody(), [("dup", bodies), ("dup", _u(rng, 5, 2, lo=-0.2, hi=0.2)), ("active", 0.3)]),
        "particlefilter": (pa.particlefilter(), _particles(rng)),
        "particlefilter_host_gather": (pa.particlefilter_host_gather(), _particles(rng)),
    }


def _particles(rng):
    """Particles, weights near 1/n, three observations (constants), the estimates written, the drift Active."""
    return [("dup", _u(rng, 8, lo=-1.0, hi=1.0)), ("dup", np.full(8, 1 / 8) + _u(rng, 8, lo=-0.01, hi=0.01)),
            ("const", _u(rng, 3, lo=0.0, hi=2.0)), ("dup", np.zeros(3)), ("active", 0.4)]


PORTS = list(_specs(np.random.default_rng(0)))
CHECKPOINTABLE = {"prk_p2p": p7.prk_p2p, "prk_stencil": p7.prk_stencil, "prk_nstream": p7.prk_nstream,
                  "prk_transpose": p7.prk_transpose, "floyd_warshall": p7.floyd_warshall,
                  "parboil_stencil": p7.parboil_stencil_parity, "nbody": pa.nbody_parity}
# Every port's gradient and the fixed-count loops' checkpointed twins run in CI on the interpreter (docs/testing.md
# "Test time"), and so do the path and refusal checks below; the Numba backend's gradient runs in CI for
# NUMBA_SAMPLE (floyd_warshall: min of a run-time k's row and column, ping-pong by k's parity), the others' under
# `full`.
NUMBA_SAMPLE = {"floyd_warshall"}
globals().update(port_tests(_specs, NUMBA_SAMPLE, _check_against_differences, _same_gradients,
                             checkpointable=CHECKPOINTABLE))


@pytest.mark.parametrize("name, parity", [("parboil_stencil", p7.parboil_stencil_parity(plain)),
                                          ("nbody", pa.nbody_parity(plain))])
def test_swap_of_names_or_a_toggled_index_is_the_parity_spelling(name, parity, monkeypatch):
    """Parboil's `swap(d_A0, d_Anext)` as names and nbody's `read = 1 - read` into a list of buffers: the same
    launches as the checkpointable spelling (buffers from t's parity), so the same gradient and primals."""
    on_interpreter(monkeypatch)
    program, spec = _specs(np.random.default_rng(3))[name]
    weights = _weights(spec, 4)
    _gradients_agree(_gradient(program, spec, weights), _gradient(parity, spec, weights))


# -- the loops' paths: counts read from what the kernels computed --------------------------------------------------
def test_loops_stop_where_the_kernels_sums_say(monkeypatch):
    """The data-driven exits the gradient checks differentiate along: jacobiCudaGraphs' summed change falls to the
    threshold after 5 sweeps (the last at k = 4, even: it wrote x_new, which the final error reads), MGVF's mean
    change after 8 of at most 12."""
    on_interpreter(monkeypatch)
    specs = _specs(np.random.default_rng(1))
    seen = {}

    def run(name, program):
        program(*[v.copy() if isinstance(v, np.ndarray) else v for _, v in specs[name][1]])

    run("jacobi_graphs", pa.jacobi_graphs(iterations=seen.setdefault("jacobi_graphs", [])))
    run("leukocyte_mgvf", pa.leukocyte_mgvf(iterations=seen.setdefault("leukocyte_mgvf", [])))
    assert seen == {"jacobi_graphs": [5], "leukocyte_mgvf": [8]}, seen


# -- the spellings a porting user writes first ------------------------------------------------------------------------
def _refused_unchanged(match, program, *args, error=gk.ProgramError):
    shadows, info = _refused(error, match, program, *args)
    for a, s in zip([a for a in args if isinstance(a, gk.Duplicated)], shadows):
        np.testing.assert_array_equal(a.dval, s)
    return info


def test_p2p_corner_assigned_on_the_host_is_refused_naming_the_line(monkeypatch):
    """p2p.c's `vector[0][0] = -vector[m-1][n-1]` as a NumPy assignment into the launched array: refused naming the
    line, nothing changed; the port's one-thread p2p_corner kernel is the spelling that works."""
    on_interpreter(monkeypatch)
    rng = np.random.default_rng(30)
    _refused_unchanged(r"host write to 'a' at .*ported_loops7\.py:\d+ \(`a\[0, 0\] = -a\[-1, -1\]`\)",
                       p7.p2p_host_corner, gk.Duplicated(_p2p_grid(rng, 4, 5), rng.random((4, 5))))


def test_prk_stencil_add_one_on_the_host_is_refused_naming_the_line(monkeypatch):
    """PRK's `in += 1.0` between sweeps in NumPy, into the array the sweep took: refused naming the line; the port's
    prk_add_one kernel works."""
    on_interpreter(monkeypatch)
    rng = np.random.default_rng(31)
    _refused_unchanged(r"host write to 'inp' at .*ported_loops7\.py:\d+ \(`inp \+= 1\.0`\)", p7.prk_stencil_host_add,
                       gk.Duplicated(_u(rng, 8, 8), rng.random((8, 8))), gk.Duplicated(_u(rng, 8, 8),
                                                                                     rng.random((8, 8))),
                       gk.Active(0.9))


def test_floyd_warshall_in_place_is_refused_as_a_race(monkeypatch):
    """PolyBench's nest in place, a launch per k: thread (i, k) writes what thread (i, j) reads; refused as a race
    naming both accesses and double buffering (the port's ping-pong by k's parity)."""
    on_interpreter(monkeypatch)
    rng = np.random.default_rng(32)
    info = _refused_unchanged(r"'fw_in_place' races", p7.floyd_warshall_in_place,
                              gk.Duplicated(_paths(rng, 4), rng.random((4, 4))), gk.Active(0.2), error=gk.RaceError)
    assert "double buffering" in str(info)


# -- predicates of an Active scalar in the host's control flow (program/scalars.py) ----------------------------------
@gk.kernel
def _kick(v, dt):
    i = gk.tid()
    v[i] = v[i] + dt * v[i] * v[i]


def _guarded(v, dt, damping):
    """A driver's guards on scalars computed from its Active parameters: `if not np.isfinite(dt): raise`, and
    damping applied only `if damping:` (its truth value)."""
    for _ in range(2):
        step = dt * 0.5
        if not np.isfinite(step) or np.isnan(step) or np.isinf(step) or np.signbit(step):
            raise RuntimeError("bad time step")
        gk.launch(_kick, v.shape[0], v, step * (1.0 - damping) if damping else step)


@pytest.mark.parametrize("damping", [0.1, 0.0])
def test_predicates_of_an_active_scalar_are_plain_booleans(damping, monkeypatch):
    """Before: np.isfinite(c), np.isnan, np.isinf, np.signbit and bool(c) of an Active scalar were refused as
    dropping its derivative (a boolean has none: they are comparisons, which gave plain booleans). Now they read the
    value; the gradient matches central differences with the branch `if damping:` took (damping 0.0: the step
    without the factor), forward mode agrees."""
    on_interpreter(monkeypatch)
    rng = np.random.default_rng(33)
    v0, w = _u(rng, 4, lo=0.2, hi=0.4), rng.standard_normal(4)

    def loss(dt, d):
        v = v0.copy()
        _guarded(v, dt, d)
        return float(w @ v)

    v = v0.copy()
    got = gk.autodiff(_guarded, gk.Duplicated(v, w.copy()), gk.Active(0.3), gk.Active(damping))
    h = 1e-6
    fd = [(loss(0.3 + h, damping) - loss(0.3 - h, damping)) / (2 * h),
          (loss(0.3, damping + h) - loss(0.3, damping - h)) / (2 * h) if damping else 0.0]
    for g, f in zip(got[1:], fd):
        assert abs(g - f) <= 1e-7 * max(1.0, abs(f)), (got, fd)  # smooth in dt and damping: central differences
        # agree to O(h^2) and rounding, ~1e-9 here
    tv = np.zeros(4)
    gk.autodiff(_guarded, gk.Duplicated(v0.copy(), tv), gk.Duplicated(0.3, 1.0), gk.Duplicated(damping, 0.0),
                mode=gk.Forward)
    assert abs(float(w @ tv) - got[1]) <= 1e-13 * abs(got[1]), (float(w @ tv), got[1])  # the same partials


def test_math_isfinite_of_an_active_scalar_is_refused_naming_np_isfinite(monkeypatch):
    """math.isfinite(c) converts with float() (CPython), which stays refused; the hint names np.isfinite(c)."""
    on_interpreter(monkeypatch)
    import math

    def program(v, dt):
        if not math.isfinite(dt):
            raise RuntimeError("bad time step")
        gk.launch(_kick, v.shape[0], v, dt)

    info = _refused_unchanged(r"float\(\) of an Active scalar at .*test_ported_loops7\.py:\d+ "
                              r"\(`if not math\.isfinite\(dt\):`\)", program,
                              gk.Duplicated(np.ones(3), np.ones(3)), gk.Active(0.3))
    assert "np.isfinite(c)" in str(info)


# -- gathers through an index array on the host (program/hostgather.py) -------------------------------------------
def test_particlefilter_resampled_by_a_host_gather_is_the_kernel_gather(monkeypatch):
    """The C's `xj[j] = arrayX[findIndex(CDF, u[j])]` as NumPy reads it, `gk.copy(x, x[index])` with the index from
    `np.searchsorted` on the host: before, `x[index]` was a derived array and the copy was refused; now a gather
    launch, the same gradient and primals as the port's pf_resample kernel."""
    on_interpreter(monkeypatch)
    spec = _particles(np.random.default_rng(40))
    weights = _weights(spec, 41)
    _gradients_agree(_gradient(pa.particlefilter(), spec, weights),
                     _gradient(pa.particlefilter_host_gather(), spec, weights))


GATHERS = {
    "rows_repeated": lambda u: u[np.array([2, 0, 2])],
    "negative_and_repeated": lambda u: u[1][np.array([3, -1, 0, 3, -4])],
    "list_of_ints": lambda u: u[[1, 1, 0]],
    "mask": lambda u: u[np.array([True, False, True])],
    "of_a_transposed_view": lambda u: u.T[np.array([3, 1])],
}


@gk.kernel
def _weigh1(w, E):
    i = gk.tid()
    gk.atomic_add(E, 0, (i + 1.5) * w[i] * w[i])


@gk.kernel
def _weigh2(w, E):
    i, j = gk.tid()
    gk.atomic_add(E, 0, (i + 2.0 * j + 1.5) * w[i, j] * w[i, j])


@pytest.mark.parametrize("name", sorted(GATHERS))
@pytest.mark.parametrize("mode", [gk.Reverse, gk.Forward])
def test_a_gather_through_an_index_array_on_the_host_is_differentiated(name, mode, monkeypatch):
    """`u[index]` along axis 0 with a 1-D integer index array (negative and repeated indices included), a list of
    integers or a boolean mask: a gather launch whose reverse adds into the gathered positions (a repeated index
    twice); checked by gradkern.testing.check_grad (central differences and the dot-product test) in both modes.
    Before, a derived array a launch refused (docs/host-code.md)."""
    on_interpreter(monkeypatch)
    from gradkern.testing import check_grad

    def program(u, E):
        w = GATHERS[name](u)
        gk.launch(_weigh1 if w.ndim == 1 else _weigh2, w.shape, w, E)

    u = np.random.default_rng(42).uniform(0.5, 1.5, (3, 4))
    check_grad(program, gk.Duplicated(u, np.zeros_like(u)), gk.Duplicated(np.zeros(1), np.zeros(1)), mode=mode)


def test_a_gather_out_of_bounds_raises_numpys_index_error_before_any_launch(monkeypatch):
    on_interpreter(monkeypatch)

    def program(u, E):
        w = u[np.array([0, 3])]
        gk.launch(_weigh1, 2, w, E)

    with pytest.raises(IndexError):
        gk.autodiff(program, gk.Duplicated(np.ones(3), np.zeros(3)), gk.Duplicated(np.zeros(1), np.ones(1)))


# -- host randomness in a checkpointed step (docs/checkpointed-loops.md, "How it works": not found, open) -----------
@gk.kernel
def _langevin(x, noise, c):
    i = gk.tid()
    x[i] = x[i] - c * x[i] * x[i] * x[i] + noise[i]


def _langevin_loop(loop, seed=3):
    def program(x, c):
        def step(t):
            noise = 0.1 * np.random.default_rng((seed, t)).standard_normal(x.shape[0])  # a function of t
            gk.launch(_langevin, x.shape[0], x, noise, c)
        loop(step, 6)
    return program


def test_noise_drawn_from_a_generator_seeded_by_t_is_recomputed_alike(monkeypatch):
    """The particle filter's and a Langevin step's noise, drawn inside a checkpointed step from a generator seeded
    with (seed, t): recomputed steps draw the same numbers, so the checkpointed gradient equals the store-all one.
    (Drawn from one generator across steps, a recomputed step draws other numbers and the gradient is silently
    wrong: not detected, described in docs/checkpointed-loops.md.)"""
    on_interpreter(monkeypatch)
    _same_gradients(_langevin_loop, [("dup", np.random.default_rng(50).uniform(0.5, 1.0, 5)), ("active", 0.3)])
