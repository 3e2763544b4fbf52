"""Python id() reuse in programs (docs/programs.md#objects-keyed-by-identity): CPython gives a freed object's id to
the next object of its size, so a table keyed by id(array) must hold the array (or forget the key when it is freed)
for as long as the key is used. Each test forces the reuse (a step's temporary freed just before a new array is
made: the ndarray objects are of one size), asserts that the ids did collide, and checks the gradient: bit for bit
store-all's (the same program with a plain loop), and against central finite differences in float64 and the
dot-product test (check_grad)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

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
    """The same program against central finite differences (float64) and the dot-product test, at check_grad's
    default tolerances (gradkern/testing.py: rtol 1e-5, those of central differences with h ~ 1e-6 in float64)."""
    ids: dict = {}
    check_grad(accumulating(checkpointed(2), 2, ids), *_args(6, 6))
    assert ids["ids"][0] == ids["ids"][1]


_GRIDS = """
import json, sys
import numpy as np
from mpi4py import MPI
import gradkern as gk
import gradkern.mpi as gkm
from gradkern.mpi import agreement

agreed, ids = [], []
agree = agreement.agree_schedule  # called by agreement.agree_schedule_once, once per loop and grid
agreement.agree_schedule = lambda comm, entry: (agreed.append(1), agree(comm, entry))


@gk.kernel
def relax(u, c):
    i = gk.tid()
    u[i + 1] = u[i + 1] + c * u[i + 1] * u[i + 1]


@gk.kernel
def energy(u, E):
    i = gk.tid()
    gk.atomic_add(E, 0, u[i] * u[i])


def program(u, E, c, nsteps):
    def step(t):
        for _ in range(2):  # two grids a step, the first freed before the second is made
            grid = gkm.Cartesian(MPI.COMM_SELF, (8,), ghosts=1, periodic=True)
            ids.append(id(grid))
            grid.exchange(u)
            del grid
        gk.launch(relax, 8, u, c)
    gk.checkpointed_loop(step, nsteps, snapshots=2)
    gk.launch(energy, 10, u, E)


made, reused = set(), False
for _ in range(200):  # outside a loop nothing holds a grid: one made later is given a freed one's id
    grid = gkm.Cartesian(MPI.COMM_SELF, (8,), ghosts=1, periodic=True)
    if id(grid) in made:
        reused = True
        break
    made.add(id(grid))
    del grid
nsteps = int(sys.argv[1])
u = np.random.default_rng(3).uniform(0.2, 0.5, 10)
gk.autodiff(program, gk.Duplicated(u, np.zeros(10)), gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.1), nsteps)
print(json.dumps({"reused": reused, "agreed": len(agreed), "distinct": len(set(ids[:2 * nsteps]))}))
"""


def test_every_grid_a_checkpointed_loop_exchanges_on_agrees_on_the_schedule(tmp_path):
    """gradkern.mpi.Cartesian.exchange agrees on the loop's schedule with every rank (a collective) once per loop and
    grid, noted by id(grid) in the loop's entry: a grid freed inside the loop passed its id on to a grid made later,
    which then skipped the collective (on the ranks where the allocator did reuse the id: a hang). Now the entry
    holds each grid. One rank (COMM_SELF), in a process of its own (as tests/mpi: MPI is never initialised in the
    test process): the agreements are counted."""
    pytest.importorskip("mpi4py")
    nsteps = 4
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(os.path.dirname(gk.__file__)),
                                                        os.environ.get("PYTHONPATH", "")])}
    script = tmp_path / "grids.py"  # a file: gradkern reads a kernel's source
    script.write_text(_GRIDS)
    job = subprocess.run([sys.executable, str(script), str(nsteps)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert job.returncode == 0, job.stderr[-3000:]
    got = json.loads(job.stdout.strip().splitlines()[-1])
    assert got["reused"]  # outside a loop, a grid was given a freed grid's id
    # the loop's first forward made 2 * nsteps grids, each agreeing once; without the entry holding them, some were
    # given a freed one's id and did not agree (4 to 6 of the 8 agreements made on 704a0bd)
    assert got["agreed"] == 2 * nsteps
    assert got["distinct"] == 2 * nsteps


@gk.kernel
def twice_into(w, x):
    i = gk.tid()
    w[i] = 2.0 * x[i]


def test_a_launch_on_a_buffer_given_a_wanted_temporarys_id_makes_no_shadow(monkeypatch):
    """LoopState.wants_shadows (program/loopstate.py) notes, in the first forward's untaped steps, the buffers a
    launch taking shadowed arrays writes (`wanted`, by id), and any launch taking a wanted buffer wants its outputs
    shadowed too. It looked the key up without the buffer: a launch on an inactive array given a freed temporary's
    id had its output `w`, which nothing active reaches, given a zero shadow at the end of the first forward (never a
    wrong gradient; a shadow and reverse work the program does not need). Now the wanted buffer must be the same
    object. Store-all makes no shadow of `w` either."""
    from gradkern.program.shadows import ShadowMap
    shadowed = []
    internal = ShadowMap.internal
    monkeypatch.setattr(ShadowMap, "internal", lambda self, a, *k: (shadowed.append(a), internal(self, a, *k))[1])
    n, nsteps, ids = 8, 6, []
    w = np.zeros(n)

    def program(u, E, c, nsteps):
        def step(t):
            tmp = np.empty(n)
            gk.launch(square_into, n, tmp, u)  # takes the shadowed u: tmp is wanted
            gk.launch(nudge, n, u, tmp)
            freed = id(tmp)
            del tmp
            x = np.ones(n)  # inactive, given tmp's id
            ids.append((freed, id(x)))
            gk.launch(twice_into, n, w, x)
            gk.launch(feed, n, u, x, c)
        gk.checkpointed_loop(step, nsteps, snapshots=2)
        gk.launch(energy, n, u, E)

    gk.autodiff(program, *_args(n, nsteps)[:3], nsteps)
    assert any(freed == made for freed, made in ids)  # the hazard was exercised
    assert not any(a is w for a in shadowed)
