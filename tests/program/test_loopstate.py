"""A checkpointed loop's bookkeeping (program/loopstate.py, docs/checkpointed-loops.md#how-it-works): what it
keeps per step is a compact series, settled to a head and one period for a loop whose steps repeat, so that
what the loop holds through its reverse does not grow with its number of steps."""

from __future__ import annotations

import numpy as np
import pytest

import gradkern as gk
from gradkern.program.loopstate import TAKEN, TAKEN_DEAD, StepSeries
from program.test_checkpoint import checkpointed, one_launch_per_step
from program.test_programs import D, rng_uniform


def series(codes, start=0):
    s = StepSeries(start)
    for t, c in enumerate(codes):
        s.set(start + t, c)
    return s


@pytest.mark.parametrize("codes, head, period", [
    ([1, 2] * 50, 0, 2),
    ([3] + [1, 2, 2] * 40, 1, 3),
    ([5, 5] * 3 + [1] * 40, 0, 0),  # a run of 6 then another code: not periodic within the heads tried
    ([1, 2, 3, 4], 0, 0),  # too short to show a period twice
])
def test_a_series_settles_to_a_head_and_a_period_and_reads_as_recorded(codes, head, period):
    s = series(codes, start=7)
    s.settle()
    assert (s.head, s.period) == (head, period)
    if period:
        assert len(s.codes) == head + period
    assert [s[t] for t in range(0, len(codes) + 20)] == [0] * 7 + codes + [0] * 13
    for t in range(0, len(codes) + 10):
        want = next((c for c in codes[max(t - 7, 0):] if c), 0)
        assert s.first_from(t) == want


def test_a_series_keeps_gaps_large_codes_and_renumbers():
    s = StepSeries(2)
    s.set(2, 1)
    s.set(5, 300)  # past a byte: the array widens
    s.set(6, 2)
    assert [s[t] for t in range(9)] == [0, 0, 1, 0, 0, 300, 2, 0, 0]
    assert s.first_from(3) == 300 and s.first_from(7) == 0
    s.renumber({0: 0, 1: 2, 2: 1, 300: 3})
    assert [s[t] for t in range(2, 7)] == [2, 0, 0, 3, 1]


def test_the_loop_holds_a_few_bytes_per_buffer_whatever_its_steps():
    """Issue 33 item 2: what the loop holds through its reverse is O(snapshots), not O(steps)."""
    n, program = 64, one_launch_per_step(checkpointed(4))
    for nsteps in (40, 400):
        args = [D(rng_uniform(1, n)), D(rng_uniform(2, n)), gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.3),
                nsteps]
        fwd, rev = gk.autodiff_thunk(program, gk.Duplicated, gk.Duplicated, gk.Duplicated, gk.Active, gk.Const)
        tape = fwd(*args)
        found = next(s for s in tape.steps if s.kernel == "checkpointed_loop").found
        # two step signatures (u -> v, v -> u), alternating
        assert len(found.signatures) == 2 and (found.steps.head, found.steps.period) == (0, 2)
        assert len(found.steps.codes) == 2
        for uses in found.first_use.values():  # every step takes u and v; v first overwritten whole at even steps
            assert uses.period in (1, 2) and len(uses.codes) <= 2
        codes = {id(a.val): [found.first_use[id(a.val)][t] for t in range(4)] for a in args[:2]}
        assert codes[id(args[0].val)] == [TAKEN, TAKEN_DEAD, TAKEN, TAKEN_DEAD]
        assert codes[id(args[1].val)] == [TAKEN_DEAD, TAKEN, TAKEN_DEAD, TAKEN]
        rev(*args, tape)
