"""A checkpointed step's launches are recomputed with the scalar arguments they were recorded with, or refused
(program/loopstate.py `scalars`; docs/checkpointed-loops.md#how-it-works): a step drawing a random scalar from a
generator it does not reseed from t took another trajectory when recomputed, silently (session 54's ported
Langevin loop). Interpreter launches (on_interpreter): the check is the program layer's."""

from __future__ import annotations

import numpy as np
import pytest
from support.ported_harness import on_interpreter

import gradkern as gk


@gk.kernel
def _langevin(x, kick, c):
    i = gk.tid()
    x[i] = x[i] - c * x[i] * x[i] * x[i] + kick


def _program(loop, reseeded):
    def program(x, c):
        rng = np.random.default_rng(3)

        def step(t):
            draw = np.random.default_rng((3, t)).standard_normal() if reseeded else rng.standard_normal()
            gk.launch(_langevin, x.shape[0], x, 0.1 * draw, c)
        if loop:
            gk.checkpointed_loop(step, 6, snapshots=2)
        else:
            for t in range(6):
                step(t)
    return program


def _gradient(loop, reseeded):
    x0 = np.random.default_rng(0).uniform(0.5, 1.0, 5)
    x = gk.Duplicated(x0.copy(), np.ones(5))
    dc = gk.autodiff(_program(loop, reseeded), x, gk.Active(0.3))[1]
    return x.dval, dc, x.val


def test_a_random_scalar_drawn_in_a_checkpointed_step_is_refused(monkeypatch):
    on_interpreter(monkeypatch)
    with pytest.raises(gk.ProgramError, match=r"launched '_langevin' \(launch 1 of the step\) with other scalar "
                                              r"arguments than when it was recorded \(.*, 0\.3 then, .*, 0\.3 "
                                              r"recomputed\), at .*test_checkpoint_scalars\.py"):
        _gradient(True, False)


def test_a_step_reseeded_from_t_equals_the_plain_loop(monkeypatch):
    """The same draws recomputed: the checkpointed gradient and primals are the plain loop's (the same
    interpreter arithmetic in the same order: 1e-12 is room for none but the sweep's other grouping of adds)."""
    on_interpreter(monkeypatch)
    want, got = _gradient(False, True), _gradient(True, True)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    np.testing.assert_array_equal(got[2], want[2])


def test_scalar_signatures_compare_numbers_by_value_and_nan_equal():
    from gradkern.program.loopstate import scalars
    a = scalars((np.float64(0.5), np.arange(3.0), 3, np.float32(np.nan), True, "x"))
    assert a == (0.5, 3, ("nan",), True, "str")
    assert a == scalars((0.5, np.zeros(2), np.int64(3), float("nan"), np.bool_(True), "y"))
    assert a != scalars((np.nextafter(0.5, 1.0), np.zeros(2), 3, np.nan, True, "x"))
