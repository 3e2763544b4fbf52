"""The CPU backend's parallel-or-serial choice by measurement (backends/numba_choice.py): the trial schedule,
the choice kept by median and revisited, and that the choice changes no result: a kernel whose gradient adds
into privatised chunks gives bit-identical shadows whichever form runs, and a kernel whose sums LLVM may
reassociate (an Active scalar's: docs/adjoint-forms.md section 9) is not measured at all, since the two forms
may group its terms differently (docs/performance.md)."""

from __future__ import annotations

import numpy as np

import gradkern as gk
from gradkern.backends import numba_choice
from gradkern.backends.numba_choice import EVERY, TRIALS, WARM, SerialChoice


def test_trials_alternate_after_the_warm_launches_and_keep_the_faster():
    choice, entry = SerialChoice(), object()
    picks = [choice.pick(entry, 1 << 20) for _ in range(WARM)]
    assert all(p == (False, None) for p in picks)  # parallel, untimed
    trial = [choice.pick(entry, 1 << 20) for _ in range(2 * (TRIALS + 1))]
    assert [s for s, _ in trial] == [False, True] * (TRIALS + 1)
    assert [r is None for _, r in trial] == [True, True] + [False] * (2 * TRIALS)  # the first of each untimed
    for serial, record in trial[2:]:
        SerialChoice.report(record, serial, 1.0 if serial else 2.0)  # serial measured faster
    assert choice.pick(entry, 1 << 20) == (True, None)
    assert choice.pick(entry, 1 << 21) == (False, None)  # another size: its own count
    for _ in range(EVERY - 2 * (TRIALS + 1) - 1):  # the rest of this round (one pick made above)
        choice.pick(entry, 1 << 20)
    again = [choice.pick(entry, 1 << 20) for _ in range(2 * (TRIALS + 1))]  # revisited
    assert [s for s, _ in again] == [False, True] * (TRIALS + 1)
    for serial, record in again[2:]:
        SerialChoice.report(record, serial, 2.0 if serial else 1.0)  # now parallel is faster
    assert choice.pick(entry, 1 << 20) == (False, None)


@gk.kernel
def damped(u, un, c):
    i = gk.tid()
    un[i] = u[i] * gk.exp(-c * u[i])


@gk.kernel
def pick(u, idx, un, c):
    i = gk.tid()
    un[i] = u[idx[i]] * gk.exp(-c * u[idx[i]])  # repeated indices: u's shadow takes privatised atomic adds


def _measured(monkeypatch) -> list[bool]:
    """The forms the choice times (serial reported faster), with a fresh choice."""
    monkeypatch.setattr(numba_choice, "CHOICE", SerialChoice())
    forms: list[bool] = []
    real = SerialChoice.report
    monkeypatch.setattr(SerialChoice, "report", staticmethod(
        lambda record, serial, seconds: forms.append(serial) or real(record, serial, 1.0 if serial else 2.0)))
    return forms


def test_the_chosen_form_changes_no_result(monkeypatch):
    n = 4096  # above the serial threshold: every launch is the measured kind
    rng = np.random.default_rng(0)
    u, idx = rng.uniform(0.2, 0.8, n), rng.integers(0, n // 8, n)
    seed = np.random.default_rng(1).uniform(-1.0, 1.0, n)
    forms = _measured(monkeypatch)
    results = []
    for _ in range(WARM + 2 * (TRIALS + 1) + 4):
        du, dun = np.zeros(n), seed.copy()
        gk.autodiff(pick, gk.Duplicated(u, du), gk.Const(idx), gk.Duplicated(np.zeros(n), dun), gk.Const(0.7))
        results.append(du)
    assert True in forms and False in forms  # both forms ran as trials
    assert any(numba_choice.CHOICE.chosen().values())  # and serial was kept
    assert np.abs(results[0]).max() > 0
    for du in results[1:]:
        np.testing.assert_array_equal(du, results[0])


def test_reassociated_sums_are_not_measured(monkeypatch):
    n = 4096
    u = np.random.default_rng(0).uniform(0.2, 0.8, n)
    seed = np.random.default_rng(1).uniform(-1.0, 1.0, n)
    forms = _measured(monkeypatch)
    results = []
    for _ in range(WARM + 2 * (TRIALS + 1) + 4):
        du, dun = np.zeros(n), seed.copy()
        dc = gk.autodiff(damped, gk.Duplicated(u, du), gk.Duplicated(np.zeros(n), dun), gk.Active(0.7))[2]
        results.append((du, dc))
    assert forms == []  # never timed: always the parallel loop
    for du, dc in results[1:]:
        np.testing.assert_array_equal(du, results[0][0])
        assert dc == results[0][1]
