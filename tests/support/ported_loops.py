"""The check every ported host loop takes (tests/program/test_ported_loops8.py; docs/programs.md, "Ported host
loops"): its gradient against gradkern.testing.check_grad (central differences in float64 and the dot-product test),
and, for a loop written as `make(loop)`, the gk.checkpointed_loop gradient equal to the store-all one."""

import numpy as np
import pytest

import gradkern as gk
from gradkern.testing import check_grad
from support.ported_harness import numba_sampled, on_interpreter


def plain(step, nsteps):
    for t in range(nsteps):
        step(t)


def checkpointed(step, nsteps):
    gk.checkpointed_loop(step, nsteps, snapshots=2)


def _fresh(args, rng):
    """Copies of the annotated arguments, every Duplicated shadow a random seed (the same draws for each call with
    the same rng state)."""
    out = []
    for a in args:
        if isinstance(a, gk.Duplicated):
            out.append(gk.Duplicated(a.val.copy(), rng.standard_normal(a.val.shape)))
        elif isinstance(a, gk.Const) and isinstance(a.val, np.ndarray):
            out.append(gk.Const(a.val.copy()))
        else:
            out.append(a)
    return out


def autodiff_fresh(program, args, seed):
    """gk.autodiff of `program` on fresh copies of `args` seeded by `seed`: (what it returned, the arguments)."""
    fresh = _fresh(args, np.random.default_rng(seed))
    return gk.autodiff(program, *fresh), fresh


def assert_same_gradient(want_program, got_program, args, seed=9):
    """Two programs making the same launches on the same values: the same shadows and Active derivatives (an atomic
    sum may add in another order: a few ulps, rtol 1e-12) and the same primals after them (bit for bit)."""
    want, want_args = autodiff_fresh(want_program, args, seed)
    got, got_args = autodiff_fresh(got_program, args, seed)
    for w, g in zip(want_args, got_args):
        if isinstance(w, gk.Duplicated):
            np.testing.assert_allclose(g.dval, w.dval, rtol=1e-12, atol=1e-14)
            np.testing.assert_array_equal(g.val, w.val)
    for w, g in zip(want, got):
        assert (w is g is None) or abs(g - w) <= 1e-12 * abs(w), (g, w)


def check_loop_gradient(program, *args, make=None, max_coords=24, seed=0):
    """check_grad of `program` at `args` (reverse mode; central differences on up to `max_coords` coordinates of
    each input and the dot-product test, check_grad's float64 tolerances) with at least one derivative checked and
    a non-zero dot product; with `make` (loop -> program, the loop checkpointable), make(checkpointed)'s gradient
    equals make(plain)'s. Returns check_grad's report."""
    report = check_grad(program, *args, max_coords=max_coords, seed=seed)
    assert report.ok and report.checked > 0 and report.dot_analytic != 0.0, str(report)
    if make is not None:
        assert_same_gradient(make(plain), make(checkpointed), args)
    return report


def round_tests(specs, full, numba_sample):
    """The two gradient tests of a round's file (test_ported_loops8.py on), for its namespace
    (`globals().update(round_tests(...))`). `specs(rng)` -> {name: (program, args, make or None)}: every port's
    check_loop_gradient on the interpreter, in CI but for `full`'s names (docs/testing.md "Test time"), with its
    checkpointed twin where `make` is given; on the Numba backend for `numba_sample` in CI, the others `full`."""
    ports = list(specs(np.random.default_rng(0)))

    def check(name, checkpoint=True):
        program, args, make = specs(np.random.default_rng(1))[name]
        # central differences on 3 coordinates of each input (each costs two runs of the whole loop on the
        # interpreter); the dot-product test and forward-against-reverse take every coordinate along random
        # directions
        check_loop_gradient(program, *args, make=make if checkpoint else None, max_coords=3)

    @pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.full) if n in full else n for n in ports])
    def test_port_gradient_matches_finite_differences_and_checkpoints(name, monkeypatch):
        on_interpreter(monkeypatch)
        check(name)

    @pytest.mark.parametrize("name", numba_sampled(ports, numba_sample))
    def test_port_gradient_on_numba_matches_finite_differences(name):
        check(name, checkpoint=False)

    return {f.__name__: f for f in (test_port_gradient_matches_finite_differences_and_checkpoints,
                                    test_port_gradient_on_numba_matches_finite_differences)}
