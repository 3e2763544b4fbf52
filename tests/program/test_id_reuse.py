"""Python id() reuse in programs (docs/programs.md#objects-keyed-by-identity): CPython gives a freed object's id to
the next object of its size, so a table keyed by id(array) must hold the array (or forget the key when it is freed)
for as long as the key is used. Each test forces the reuse (a step's temporary freed just before a new array is
made: the ndarray objects are of one size), asserts that the ids did collide, and checks the gradient: bit for bit
store-all's (the same program with a plain loop), and against central finite differences in float64 and the
dot-product test (check_grad)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gradkern as gk
from gradkern.testing import check_grad


@gk.kernel
def square_into(tmp, u):
    i = gk.tid()
    tmp[i] = u[i] * u[i]


@gk.kernel
def nudge(u, tmp):
    i = gk.tid()
    u[i] = u[i] + 0.1 * math.sin(tmp[i])


@gk.kernel
def mix(acc, u):
    i = gk.tid()
    acc[i] = 0.5 * acc[i] + u[i]


@gk.kernel
def feed(u, acc, c):
    i = gk.tid()
    u[i] = u[i] + c * math.sin(acc[i])


@gk.kernel
def energy(u, E):
    i = gk.tid()
    gk.atomic_add(E, 0, u[i] * u[i])


def accumulating(loop, first, ids):
    """A loop whose steps from `first` on accumulate into `acc`, a state buffer made by step `first` (once: a
    recomputed step finds it) right after that step's temporary `tmp` is freed, so that it is given tmp's id. Every
    step first overwrites its `tmp` whole unread (a snapshot open before it skips it) and `acc`'s first launch reads
    it (a snapshot open before step `first` must copy it: its contents there, zeros, are read again when the steps
    from the snapshot are recomputed). `ids` gets the first (tmp, acc) ids."""
    def program(u, E, c, nsteps):
        n = u.shape[0]
        kept = {}

        def step(t):
            tmp = np.empty(n)
            gk.launch(square_into, n, tmp, u)
            gk.launch(nudge, n, u, tmp)
            if t >= first:
                if "acc" not in kept:
                    freed = id(tmp)
                    del tmp
                    kept["acc"] = np.zeros(n)
                    ids.setdefault("ids", (freed, id(kept["acc"])))
                gk.launch(mix, n, kept["acc"], u)
                gk.launch(feed, n, u, kept["acc"], c)
        loop(step, nsteps)
        gk.launch(energy, n, u, E)
    return program


def plain(step, nsteps):
    for t in range(nsteps):
        step(t)


def checkpointed(snapshots):
    return lambda step, nsteps: gk.checkpointed_loop(step, nsteps, snapshots=snapshots)


def _args(n, nsteps):
    u = np.random.default_rng(11).uniform(0.2, 0.9, n)
    return [gk.Duplicated(u, np.zeros(n)), gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.3), nsteps]


def _gradient(program, args):
    got = gk.autodiff(program, *args)
    return [args[0].dval, args[0].val, args[1].val, got[2]]


@pytest.mark.parametrize("snapshots", [2, 3])
@pytest.mark.parametrize("first", [1, 3])
def test_a_snapshot_that_skipped_a_freed_temporary_copies_the_buffer_given_its_id(snapshots, first):
    """OpenSnapshots (program/snapshots.py) kept a freed temporary's id as seen (and, in a snapshot that skipped it,
    as skipped): a state buffer given that id later was neither copied nor skipped by the snapshots open before, so
    restoring one left it holding its final contents and the recomputed steps accumulated onto them (gradients off
    by O(1) before the fix). (The tail snapshot, opened for the last step, cannot meet a freed temporary: the first
    forward tapes that step, and the tape holds its temporaries.)"""
    n, nsteps = 10, 8
    want = _gradient(accumulating(plain, first, {}), _args(n, nsteps))
    ids: dict = {}
    got = _gradient(accumulating(checkpointed(snapshots), first, ids), _args(n, nsteps))
    freed, made = ids["ids"]
    assert freed == made  # the state buffer was given the freed temporary's id: the hazard was exercised
    for a, b in zip(want, got, strict=True):
        np.testing.assert_array_equal(np.asarray(b), np.asarray(a))


def test_the_checkpointed_gradient_with_a_reused_id_passes_check_grad():
    """The same program against central finite differences (float64) and the dot-product test; check_grad's
    default tolerances (its docstring: they bound the O(eps**2) truncation and rounding of FD at eps=1e-6)."""
    ids: dict = {}
    check_grad(accumulating(checkpointed(2), 2, ids), *_args(6, 6))
    assert ids["ids"][0] == ids["ids"][1]
