"""Pure moves in a program's sweep (analysis/moves.py, docs/programs.md "Renamed shadows"): a user's own copy
kernel is renamed like the library's copy, bit for bit; a near-copy (a value plus 0.0, a shifted index) is not;
the library's copies are pure moves at every rank and its fills are not."""

from __future__ import annotations

import numpy as np
import pytest

import gradkern as gk
from gradkern.program import hostops
from gradkern.program.record import moved_positions
from gradkern.runtime.call import prepare
from program import test_renames
from program.test_programs import energy
from program.test_renames import N, T, _inputs, _same_floats, _step, copy_then_step

count = test_renames.count  # how many copies' reverses were renamings
mapped_temporaries = test_renames.mapped_temporaries  # autouse: every temporary's shadow mapped


@gk.kernel
def my_copy(out, inp):
    t = gk.tid()
    out[t] = inp[t]


@gk.kernel
def plus_zero(out, inp):
    t = gk.tid()
    out[t] = inp[t] + 0.0


@gk.kernel
def shifted(out, inp):
    t = gk.tid()
    out[t] = inp[(t + 1) % inp.shape[0]]


def _copies_with(kernel):
    """copy_then_step (test_renames.py) with `kernel` for `u_old = u.copy()`."""
    def program(u, E, c):
        for _ in range(T):
            u_old = np.zeros(N)
            gk.launch(kernel, N, u_old, u)
            _step(u_old, u, c)
        gk.launch(energy, N, u, E)
    return program


def test_a_users_copy_kernel_is_renamed_like_the_librarys(monkeypatch, count):
    library = _same_floats(copy_then_step, monkeypatch, *_inputs())
    assert count["moved"] == T
    got = _same_floats(_copies_with(my_copy), monkeypatch, *_inputs())
    assert count["moved"] == 2 * T
    for a, b in zip(got, library):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kernel", [plus_zero, shifted], ids=["plus_zero", "shifted"])
def test_a_near_copy_is_not_renamed(monkeypatch, count, kernel):
    _same_floats(_copies_with(kernel), monkeypatch, *_inputs())
    assert count["moved"] == 0


@pytest.mark.parametrize("nd", [1, 2, 3, 4, 5])
def test_the_librarys_copies_are_pure_moves_and_its_fills_are_not(nd):
    a, b = np.zeros((3,) * nd), np.ones((3,) * nd)
    dim = (3,) * min(nd, 3)
    for kernel, other, want in ((hostops._COPY[nd - 1], gk.Duplicated(b, b.copy()), (0, 1)),
                                (hostops._FILL[nd - 1], gk.Const(1.0), None)):
        call, bound = prepare(kernel, (gk.Duplicated(a, a.copy()), other), dim, "interp", "reverse")
        assert moved_positions(kernel.ir.params, bound.b, call.primal.facts) == want
