"""The memoised feasibility test (analysis/fourier_motzkin.py): a remembered answer is the answer computing it
again gives, for the system exactly as asked; a system changed after it was asked is a new question."""

import random

from gradkern.analysis import fourier_motzkin as fm


def _system(rng: random.Random) -> list[dict]:
    names = ["a:i", "b:i", "n", "k"]
    rows = []
    for _ in range(rng.randint(1, 7)):
        row = {n: rng.randint(-3, 3) for n in rng.sample(names, rng.randint(1, 3))}
        row[""] = rng.randint(-6, 6)
        rows.append(row)
    return rows


def test_remembered_answers_equal_fresh_ones_and_the_memo_stays_bounded(monkeypatch):
    monkeypatch.setattr(fm, "MEMO_SIZE", 50)
    monkeypatch.setattr(fm, "_memo", type(fm._memo)())
    rng = random.Random(57)
    systems = [_system(rng) for _ in range(120)]
    answers = {False: 0, True: 0}
    for _ in range(3):  # asked again: from the memo, then (evicted) computed again
        for s in systems:
            for integers in (False, True):
                got = fm.feasible(s, integers)
                assert got == fm._feasible(s, integers)
                answers[got] += 1
    assert len(fm._memo) <= 50
    assert answers[False] and answers[True]  # the sample holds both verdicts


def test_a_system_changed_after_it_was_asked_is_asked_afresh():
    rows = [{"x": 1, "": -1}, {"x": -1, "": 0}]  # 0 <= x <= 1: feasible
    assert fm.feasible(rows)
    rows[1][""] = 2  # x >= 2 and x <= 1: infeasible
    assert not fm.feasible(rows)
