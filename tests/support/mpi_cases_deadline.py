"""gradkern.mpi's hangs that no check can see, each caught by the deadline on its waits
(docs/distributed.md#a-deadline-on-every-wait), and the control communicators freed with their last grid.

`mpiexec -n 2 python -m mpi4py tests/support/mpi_cases_deadline.py OUT NAME...` runs the named cases in order and
writes OUT/rank<r>.json, {case: "ok" or the failure}. A wait that passes its deadline leaves the communicators it
waited on out of step (deadline.py: their owners refuse every later call), so a job runs one hanging case, last;
every case runs its gkm calls on its own duplicate of the world, and the job ends on another (SYNC), so nothing
abandoned pairs with the end's barrier. The deadline is GRADKERN_MPI_TIMEOUT's (the test gives 60 s: no legitimate
wait here is near it) but around each call that hangs, where it is `SHORT`.

Each hanging case asserts, on the rank that waits, a DistributedError naming the call it waits in and saying the
other ranks did not arrive, and that the call changed no shadow (it raised before the reverse began); on the other
rank, that its own program ran to its end (it could not see the hang: that is why these cases need a deadline).
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI
from mpi_report import refused, run_cases

import gradkern as gk
import gradkern.mpi as gkm
from gradkern.mpi import control, deadline

WORLD = MPI.COMM_WORLD
RANK = WORLD.rank
SYNC = WORLD.Dup()  # the job's end meets here, never on a communicator a case abandoned a wait on
SHORT = 2.0  # seconds: the deadline of the call that hangs (the thing under test)


@gk.kernel
def square_sum(u, E):
    i = gk.tid()
    gk.atomic_add(E, 0, u[i + 1] * u[i + 1])


def times_out(what, call, arrays, words):
    """`call` raises DistributedError on this rank within the deadline, naming `words` and that the others did not
    arrive, and leaves `arrays` as they were."""
    previous = gkm.set_timeout(SHORT)
    try:
        refused(what, call, arrays, [*words, f"rank {RANK} waited", "did not arrive within the deadline (2 s)"], RANK,
                gkm.DistributedError)
    finally:
        gkm.set_timeout(previous)


def completes(call):
    """`call` returns on this rank (with the short deadline: it must not wait for the rank that hangs)."""
    previous = gkm.set_timeout(SHORT)
    try:
        call()
    finally:
        gkm.set_timeout(previous)


def reducing_loop(x, comm, nsteps):
    gk.checkpointed_loop(lambda t: gkm.allreduce(x, comm=comm), nsteps, snapshots=2)


def case_allreduce_loop_no_grid():
    """nsteps=0 on rank 0 of a loop that only allreduces, with no grid and no allreduce before it: nothing names
    the loop's ranks at its entry, so rank 0 runs no step and ends its program; rank 1 waits in its first step, in
    making the ranks' control communicator (their first gradkern.mpi call)."""
    comm = WORLD.Dup()
    x, dx = np.ones(2), np.ones(2)
    if RANK == 0:
        completes(lambda: gk.autodiff(reducing_loop, gk.Duplicated(x, dx), comm, 0))
        assert np.all(dx == 1.0), dx  # no step: the seed passes through
    else:
        times_out("a loop of allreduces with nsteps=0 on rank 0", lambda: gk.autodiff(
            reducing_loop, gk.Duplicated(x, dx), comm, 2), [x, dx], ["gkm.allreduce", "control communicator"])


def exchanging_loop(u, E, grid, nsteps):
    gk.checkpointed_loop(lambda t: grid.exchange(u), nsteps, snapshots=1)
    gk.launch(square_sum, grid.local_shape, u, E)


def case_rank_sets():
    """Ranks whose most recent grids span different sets of ranks: rank 0 checks a copy of the problem alone on a
    grid over itself, while rank 1 runs the program on the grid over both: rank 0's loop agrees on its own grid and
    runs; rank 1's waits at its entry for rank 0 on the grid over both."""
    comm = WORLD.Dup()
    wide = gkm.Cartesian(comm, (5,), periodic=True)
    alone = comm.Split(RANK)
    E, dE = np.zeros(1), np.ones(1)
    if RANK == 0:
        own = gkm.Cartesian(alone, (5,), periodic=True)
        u, du = np.random.default_rng(1).random(own.padded_shape), np.zeros(own.padded_shape)
        completes(lambda: gk.autodiff(exchanging_loop, gk.Duplicated(u, du), gk.Duplicated(E, dE), own, 2))
        assert np.any(du), du
    else:
        u, du = np.random.default_rng(2).random(wide.padded_shape), np.zeros(wide.padded_shape)
        times_out("a loop agreed over grids of different ranks", lambda: gk.autodiff(
            exchanging_loop, gk.Duplicated(u, du), gk.Duplicated(E, dE), wide, 2), [u, du, dE],
            ["a checkpointed loop's entry, agreed over grid #1 (5,)"])


def exchanges(u, E, grid, trips):
    for _ in range(trips):
        grid.exchange(u)
    gk.launch(square_sum, grid.local_shape, u, E)


def case_no_call_on_one_rank():
    """A plain loop whose trip count is 0 on rank 0: rank 0 makes no call on the ranks, so it has nothing to agree
    on at its program's end; rank 1 waits in its one exchange's check."""
    comm = WORLD.Dup()
    grid = gkm.Cartesian(comm, (5,), periodic=True)
    u, du = np.random.default_rng(RANK).random(grid.padded_shape), np.zeros(grid.padded_shape)
    E, dE = np.zeros(1), np.ones(1)
    if RANK == 0:
        completes(lambda: gk.autodiff(exchanges, gk.Duplicated(u, du), gk.Duplicated(E, dE), grid, 0))
    else:
        times_out("one exchange on rank 1 alone", lambda: gk.autodiff(
            exchanges, gk.Duplicated(u, du), gk.Duplicated(E, dE), grid, 1), [u, du, dE],
            ["grid.exchange on grid #1 (5,)", "control communicator"])


def case_checks_first_extra_exchange():
    """A checks="first" grid's exchanges after its first check on their own rank only: rank 1's third exchange
    waits for rank 0's slab, and rank 0, at its reverse's start, waits in the check of its program's end. Both
    raise; neither reverse begins, so no shadow changes."""
    comm = WORLD.Dup()
    grid = gkm.Cartesian(comm, (5,), periodic=True, checks="first")
    u, du = np.random.default_rng(RANK).random(grid.padded_shape), np.zeros(grid.padded_shape)
    E, dE = np.zeros(1), np.ones(1)
    if RANK == 0:
        times_out("the program's end on rank 0", lambda: gk.autodiff(
            exchanges, gk.Duplicated(u, du), gk.Duplicated(E, dE), grid, 2), [du, dE],
            ["the program's end (its reverse's start)", "control communicator"])
    else:
        times_out("a third exchange on rank 1", lambda: gk.autodiff(
            exchanges, gk.Duplicated(u, du), gk.Duplicated(E, dE), grid, 3), [du, dE],
            ["grid.exchange on grid #", " (5,) (its forward), axis 0: waiting for the slab from rank 0"])


def case_loop_outside_program():
    """A checkpointed loop outside a reverse-mode program has no entry to agree at: rank 0's nsteps=0 runs no
    step, rank 1 waits in its first exchange's check."""
    comm = WORLD.Dup()
    grid = gkm.Cartesian(comm, (5,), periodic=True)
    u = np.random.default_rng(RANK).random(grid.padded_shape)
    if RANK == 0:
        completes(lambda: gk.checkpointed_loop(lambda t: grid.exchange(u), 0, snapshots=1))
    else:
        times_out("a loop outside a program, nsteps=0 on rank 0", lambda: gk.checkpointed_loop(
            lambda t: grid.exchange(u), 2, snapshots=1), [u], ["grid.exchange on grid #1 (5,)"])


def case_controls_freed():
    """200 grids over sub-communicators (each rank alone, or both), each made, exchanged on and freed: the control
    communicator of their ranks is freed with the last grid over them, so the process holds at most the world's
    (kept: the latest gkm.allreduce's) and one more, and its map of communicators stays as small."""
    comm = WORLD.Dup()
    gkm.allreduce(np.ones(1), comm=comm)  # the world's control: the latest allreduce's, never freed by a grid
    for i in range(200):
        sub = comm.Split(RANK if i % 2 else 0)  # each rank alone, then both ranks
        n = 2 * sub.size + 1
        grid = gkm.Cartesian(sub, (n,), periodic=True)
        u = grid.zeros()
        grid.owned(u)[...] = 1.0 + np.arange(grid.local_shape[0]) + grid.start[0]  # cell k holds k + 1
        grid.exchange(u)
        low, high = (grid.start[0] - 1) % n, (grid.start[0] + grid.local_shape[0]) % n  # the neighbouring cells
        assert u[0] == low + 1 and u[-1] == high + 1, (i, u)
        grid.free()
        sub.Free()
        assert len(control._controls) <= 2 and len(control._by_comm) <= 3, (i, len(control._controls),
                                                                           len(control._by_comm))
    assert len(control._controls) == 1, control._controls  # the world's alone


CASES = {name[5:]: f for name, f in globals().items() if name.startswith("case_")}


def main(out_dir: str, names: list[str]) -> None:
    run_cases(CASES, out_dir, names, RANK)
    deadline.wait([SYNC.Ibarrier()], None, lambda: "the job's end")  # both ranks done: the waiting one came back


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
