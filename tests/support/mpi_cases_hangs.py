"""gradkern.mpi's hangs that were not caught (issue 32), each now a clear error on every rank before any buffer of the
refused call changes (docs/distributed.md#deadlocks-and-how-gradkern-prevents-them); each was a deadlock before
session 55 (tests/mpi/test_mpi_hangs.py runs the job with a timeout, so a regression fails instead of hanging).

`mpiexec -n P python -m mpi4py tests/support/mpi_cases_hangs.py OUT [NAME...]` writes OUT/rank<r>.json, {case: "ok"
or the failure}; a failing rank re-raises, so the job aborts instead of hanging. P >= 2 (one rank differs).
MPI_HANGS_VERBOSE=1 prints each refusal's message.

(a) a grid that one rank keeps alive while the others drop theirs: a later checkpointed loop's entry agreed over
    different grids; (b) nsteps=0 on one rank of a checkpointed loop that only allreduces, no grid alive; (c) a plain
    Python loop inside a program whose trip count differs between ranks (one rank makes one more exchange, or one
    more allreduce), and ranks whose exchanges go to different grids of the same ranks.
"""

from __future__ import annotations

import sys

import mpi_report
import numpy as np
from mpi4py import MPI
from mpi_report import run_cases

import gradkern as gk
import gradkern.mpi as gkm

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.rank, WORLD.size
LAST = SIZE - 1


@gk.kernel
def square_sum(u, E):
    i = gk.tid()
    gk.atomic_add(E, 0, u[i + 1] * u[i + 1])


def refused(what, call, arrays, words):
    """`call` raises a GradkernError on this rank naming `words`, and leaves `arrays` as they were."""
    return mpi_report.refused(what, call, arrays, words, RANK, gk.GradkernError)


def exchanging_loop(u, E, grid, nsteps):
    gk.checkpointed_loop(lambda t: grid.exchange(u), nsteps, snapshots=1)
    gk.launch(square_sum, grid.local_shape, u, E)


def case_grid_kept_on_one_rank():
    """(a) Rank 0 keeps a second grid over every rank (diagnostics, in a list) that the others dropped: its loops
    agreed over that grid, the others' over the first one, and each waited for the other for ever."""
    grid = gkm.Cartesian(WORLD, (2 * SIZE + 1,), periodic=True)
    kept = [gkm.Cartesian(WORLD, (2 * SIZE + 3,), periodic=True)]
    if RANK != 0:
        kept.clear()  # dropped: the registry holds grids weakly
    u, du = np.random.default_rng(RANK).random(grid.padded_shape), np.zeros(grid.padded_shape)
    E, dE = np.zeros(1), np.ones(1)
    refused("a grid alive on rank 0 alone", lambda: gk.autodiff(
        exchanging_loop, gk.Duplicated(u, du), gk.Duplicated(E, dE), grid, 2), [u, du, E, dE],
        ["checkpointed loop", "rank 0", "grid"])
    kept.clear()  # now every rank agrees on the first grid again, and the loop runs
    gk.autodiff(exchanging_loop, gk.Duplicated(u, du), gk.Duplicated(E, dE), grid, 2)
    assert np.all(np.isfinite(du)) and np.any(du), du
    grid.free()


def reducing_loop(x, nsteps):
    gk.checkpointed_loop(lambda t: gkm.allreduce(x), nsteps, snapshots=2)


def case_allreduce_loop_no_grid():
    """(b) nsteps=0 on the last rank of a loop that only allreduces, while no grid is alive: the loop's entry agrees
    over the communicator of the latest gkm.allreduce (here the world's, used once before the program)."""
    x, dx = np.ones(2), np.ones(2)
    gkm.allreduce(np.ones(1))  # the communicator the loops of this process then agree on
    nsteps = 0 if RANK == LAST else 2
    refused("a loop of allreduces of nsteps=0 on one rank, no grid alive", lambda: gk.autodiff(
        reducing_loop, gk.Duplicated(x, dx), nsteps), [x, dx], ["different schedules"])
    gk.autodiff(reducing_loop, gk.Duplicated(x, dx), 2)  # and alike everywhere, it runs
    assert np.all(dx == SIZE ** 2), dx  # x <- the sum, twice: dx <- the sum of the seeds (1), twice
    if RANK == 0:  # a program rank 0 runs alone: an allreduce over COMM_SELF first makes its loops agree there
        gkm.allreduce(np.ones(1), comm=MPI.COMM_SELF)
        y, dy = np.ones(2), np.ones(2)
        gk.autodiff(lambda a: gk.checkpointed_loop(lambda t: gkm.allreduce(a, comm=MPI.COMM_SELF), 2, snapshots=2),
                    gk.Duplicated(y, dy))
        assert np.all(dy == 1.0), dy  # the sum over one rank is the identity
    gkm.allreduce(np.ones(1))  # every rank's latest allreduce is the world's again


def extra_exchanges(u, E, grid, trips):
    for _ in range(trips):
        grid.exchange(u)
    gk.launch(square_sum, grid.local_shape, u, E)


def extra_allreduces(x, trips):
    for _ in range(trips):
        gkm.allreduce(x)


def two_grids(u, E, grid, other):
    (grid if RANK != 0 else other).exchange(u)
    gk.launch(square_sum, grid.local_shape, u, E)


def case_trip_counts():
    """(c) A plain loop in a program whose trip count differs between ranks: the last rank's extra exchange (or
    allreduce) waited in its check for a call the others never made; and rank 0 exchanging on another grid of the
    same ranks (same block shapes) waited in that grid's check. Refused on every rank: the extra call's check meets
    the others' next one (the reverse's start) and they differ."""
    grid = gkm.Cartesian(WORLD, (2 * SIZE + 1,), periodic=True)
    u, du = np.random.default_rng(RANK).random(grid.padded_shape), np.zeros(grid.padded_shape)
    E, dE = np.zeros(1), np.ones(1)
    trips = 3 if RANK == LAST else 2
    refused("one more exchange on the last rank", lambda: gk.autodiff(
        extra_exchanges, gk.Duplicated(u, du), gk.Duplicated(E, dE), grid, trips), [du, dE], ["rank"])
    tu, tE = np.random.default_rng(RANK + 7).random(grid.padded_shape), np.zeros(1)
    # forward mode: refused at the program's end, where the others meet the extra exchange; its tangents have moved
    # with its primal by then (as the primal has run when a reverse-mode program is refused at its reverse's start)
    refused("one more exchange on the last rank, forward mode", lambda: gk.autodiff(
        extra_exchanges, gk.Duplicated(u, tu), gk.Duplicated(E, tE), grid, trips, mode=gk.Forward), [], ["rank"])
    x, dx = np.ones(2), np.zeros(2)
    refused("one more allreduce on the last rank", lambda: gk.autodiff(
        extra_allreduces, gk.Duplicated(x, dx), trips), [dx], ["rank"])
    other = gkm.Cartesian(WORLD, (2 * SIZE + 1,), periodic=True)  # the same blocks, another grid
    refused("rank 0 exchanging on another grid", lambda: gk.autodiff(
        two_grids, gk.Duplicated(u, du), gk.Duplicated(E, dE), grid, other), [u, du, E, dE], ["grid"])
    other.free()
    grid.free()


CASES = {name[5:]: f for name, f in globals().items() if name.startswith("case_")}


def main(out_dir: str, names: list[str]) -> None:
    run_cases(CASES, out_dir, names, RANK)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
