"""gradkern.mpi's known gaps closed, and its red team (session 52), run by tests/support/mpi_cases.py's jobs (its
CASES take these too: no new mpiexec job): a checkpointed loop of nsteps=0 on some ranks only, two schedule objects
of one class built with different parameters, checks="first" with a later activity mismatch (reverse and forward
mode), scatter/gather roots that differ, all refused on every rank; gkm.check_grad on a checkpointed step that
exchanges and allreduces with an Active scalar (uneven periodic blocks), and its failure on a rule whose reverse
forgets the sum over ranks; blocks of every memory layout (transposed, reversed, strided) exchanged alike.
"""

from __future__ import annotations

import mpi_cases as mc
import mpi_cases2 as mc2
import numpy as np
from checkpoint_schedules import MixedCheckpointSchedule
from mpi4py import MPI

import gradkern as gk
import gradkern.mpi as gkm
from gradkern.mpi.reduce import _sum

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.rank, WORLD.size
LAST = SIZE - 1


def exchanging(u, grid, nsteps, schedule=None):
    """A checkpointed loop whose steps exchange u."""
    gk.checkpointed_loop(lambda t: grid.exchange(u), nsteps, snapshots=2, schedule=schedule)


def reducing(x, nsteps):
    gk.checkpointed_loop(lambda t: gkm.allreduce(x), nsteps, snapshots=2)


def local_steps(u):
    """A checkpointed loop of memory= whose steps do not communicate (allowed while a grid lives: refused only
    where a loop communicates)."""
    gk.checkpointed_loop(lambda t: None, 3, memory=10**6)


def case_loop_entry():
    """nsteps=0 on one rank (the others run steps that exchange, or only allreduce) raises ProgramError on every
    rank at the loop's entry, no rank waiting; nsteps=0 on every rank runs; a memory= loop that does not
    communicate is allowed while the grid lives; schedule objects of one class built with different parameters
    are refused; a loop refused on one rank alone before its entry is refused on the others too."""
    grid = gkm.Cartesian(WORLD, (2 * SIZE + 1,), ghosts=1, periodic=True)
    u, du = np.random.default_rng(RANK).random(grid.padded_shape), np.zeros(grid.padded_shape)
    gk.autodiff(exchanging, gk.Duplicated(u, du), grid, 0)  # nsteps=0 everywhere: nothing to disagree on
    gk.autodiff(local_steps, gk.Duplicated(u, du))
    if SIZE > 1:
        nsteps = 0 if RANK == LAST else 3
        message = mc.expect_refusal("a loop of exchanges of nsteps=0 on one rank", lambda: gk.autodiff(
            exchanging, gk.Duplicated(u, du), grid, nsteps), [u, du])
        assert "different schedules" in message and isinstance(mc.REFUSED[-1], gk.ProgramError), message
        x, dx = np.ones(2), np.zeros(2)
        message = mc.expect_refusal("a loop of allreduces of nsteps=0 on one rank", lambda: gk.autodiff(
            reducing, gk.Duplicated(x, dx), nsteps), [x, dx])
        assert "different schedules" in message and isinstance(mc.REFUSED[-1], gk.ProgramError), message
        schedule = MixedCheckpointSchedule(4, 2 if RANK != LAST else 3)  # (3, 3) is (3, 2): at most nsteps - 1
        message = mc.expect_refusal("schedules of one class built with different parameters", lambda: gk.autodiff(
            exchanging, gk.Duplicated(u, du), grid, 4, schedule), [u, du])
        assert "built with" in message and isinstance(mc.REFUSED[-1], gk.ProgramError), message
        schedule = MixedCheckpointSchedule(3, 2)  # refused on the rank of nsteps=0 alone, before the loop's entry
        message = mc.expect_refusal("a schedule for 3 steps in a loop of nsteps=0 on one rank", lambda: gk.autodiff(
            exchanging, gk.Duplicated(u, du), grid, nsteps, schedule), [u, du])
        want = "built for 3 steps" if RANK == LAST else "refused on this rank"
        assert want in message and isinstance(mc.REFUSED[-1], gk.ProgramError), message
    grid.free()


def case_checks_first_activity():
    """checks="first": a later exchange differentiated on some ranks only (Const on the last), in reverse and in
    forward mode, is refused on every rank, with no buffer changed; the same program runs when every rank
    differentiates it."""
    grid = gkm.Cartesian(WORLD, (2 * SIZE + 1,), ghosts=1, periodic=True, checks="first")
    u, du = np.random.default_rng(RANK).random(grid.padded_shape), np.zeros(grid.padded_shape)
    grid.exchange(u)  # the grid's first exchange: agreed

    def program(v, u):
        grid.exchange(v)
        grid.exchange(u)
    v, dv = u.copy(), np.ones_like(u)
    gk.autodiff(program, gk.Duplicated(v, dv), gk.Duplicated(u, du))
    if SIZE > 1:
        for mode in (gk.Reverse, gk.Forward):
            kind = gk.Const(v) if RANK == LAST else gk.Duplicated(v, dv)
            message = mc.expect_refusal(f"a later exchange differentiated on some ranks only ({mode})",
                                        lambda kind=kind, mode=mode: gk.autodiff(
                                            program, kind, gk.Duplicated(u, du), mode=mode), [v, dv, u, du])
            assert "some ranks only" in message, message
    grid.free()


def case_roots():
    """scatter and gather with roots that differ between ranks, or a root outside the grid: DistributedError on
    every rank, no block changed."""
    grid = gkm.Cartesian(WORLD, (2 * SIZE + 1,), ghosts=1)
    block = grid.zeros()
    whole = np.arange(2 * SIZE + 1, dtype=np.float64)
    if SIZE > 1:
        root = 0 if RANK != LAST else 1
        message = mc.expect_refusal("scatter with roots that differ", lambda: grid.scatter(whole, block, root=root),
                                    [block])
        assert "disagree" in message, message
        message = mc.expect_refusal("gather with roots that differ", lambda: grid.gather(block, root=root), [block])
        assert "disagree" in message, message
        mc.expect_refusal("gather padded on some ranks only", lambda: grid.gather(block, padded=RANK == LAST),
                          [block])
    mc.expect_refusal("scatter to a root outside the grid", lambda: grid.scatter(whole, block, root=SIZE), [block])
    mc.expect_refusal("gather to a root of another type", lambda: grid.gather(block, root="0"), [block])
    grid.scatter(whole if RANK == LAST else None, block, root=LAST)  # a root other than 0, agreed
    got = grid.gather(block, root=LAST)
    assert RANK != LAST or np.array_equal(got, whole), got
    grid.free()


def case_check_grad():
    """gkm.check_grad (finite differences of the loss summed over ranks, one rank's entry at a time, and the
    dot-product tests across ranks) on a checkpointed step that exchanges, allreduces a norm and takes an
    Active scalar, on uneven periodic blocks (2P+1 cells over P ranks). On P = 1 (which compiles the forward
    kernels into the session's cache) and P = 3 (blocks of 3, 2 and 2 cells) only: each entry costs two runs of
    the program, and case_fd_and_dot covers P = 2 and 4 by hand."""
    if SIZE not in (1, 3):
        return
    grid = gkm.Cartesian(WORLD, (2 * SIZE + 1,), ghosts=1, periodic=True)
    rng = np.random.default_rng(30 + RANK)
    u, v = 0.5 + rng.random(grid.padded_shape), 0.5 + rng.random(grid.padded_shape)
    report = gkm.check_grad(mc2.normalised, gk.Duplicated(u, np.zeros_like(u)), gk.Duplicated(v, np.zeros_like(v)),
                            *(gk.Duplicated(np.zeros(1), np.zeros(1)) for _ in range(3)), gk.Active(0.2), grid,
                            "binomial", comm=grid, max_coords=8)
    assert report.checked == 8 + 1 + 2, report  # 8 entries of the arrays, the scalar, the two dot-product tests
    grid.free()


@gk.custom_rule(reads=(), writes=("x",))
def sum_without_adjoint_sum(x, comm):
    """x = sum over ranks of x, with mpi4jax's transpose (the identity): wrong for P > 1 under L = sum_r L_r."""
    _sum(comm, x)


@sum_without_adjoint_sum.augmented_primal
def _(config, x, comm):
    _sum(comm.val, x.val)


@sum_without_adjoint_sum.reverse
def _(config, tape, x, comm):
    return (None, None)  # dx left as it is: the identity


@sum_without_adjoint_sum.forward
def _(config, x, comm):
    _sum(comm.val, x.val)
    _sum(comm.val, x.dval)


def summed_square(x, E):
    sum_without_adjoint_sum(x, WORLD)
    gk.launch(mc.weighted_sum, 2, x, 1.0, E)


def case_check_grad_finds_a_wrong_adjoint():
    """gkm.check_grad fails, on every rank, a rule whose reverse forgets the sum over ranks (P > 1; on one rank
    the identity is the right transpose and it passes)."""
    x = np.random.default_rng(60 + RANK).standard_normal(2)
    report = gkm.check_grad(summed_square, gk.Duplicated(x, np.zeros(2)), gk.Duplicated(np.zeros(1), np.zeros(1)),
                            raise_on_failure=False)
    assert report.ok == (SIZE == 1), report
    if SIZE > 1:
        assert any("forward vs reverse" in f for f in report.failures), report
        kind = gk.Duplicated(x, np.zeros(2)) if RANK != LAST else gk.Const(x)  # annotations must agree
        message = mc.expect_refusal("check_grad annotated differently on one rank", lambda: gkm.check_grad(
            summed_square, kind, gk.Duplicated(np.zeros(1), np.zeros(1))), [x])
        assert "disagree" in message, message


def case_layouts():
    """A block of any memory layout is exchanged, and its exchange reversed, exactly as a C-order copy: Fortran
    order, a transposed view, reversed strides, a strided component of a wider array (2-D and 3-D, uneven
    periodic blocks)."""
    for shape, periodic in (((2 * SIZE + 3, 5), (True, False)), ((3, SIZE + 2, 4), True)):
        grid = gkm.Cartesian(WORLD, shape, ghosts=1, periodic=periodic)
        rng = np.random.default_rng(70 + RANK)
        x, y = rng.standard_normal(grid.padded_shape), rng.standard_normal(grid.padded_shape)
        want_x, want_y = x.copy(), y.copy()
        grid.exchange(want_x)
        gk.autodiff(mc.exchange, gk.Duplicated(x.copy(), want_y), grid)
        layouts = {
            "F": lambda a: np.asfortranarray(a),
            "transposed": lambda a: np.ascontiguousarray(a.T).T,
            "reversed": lambda a: np.ascontiguousarray(a[::-1])[::-1],
            "strided": lambda a: np.stack([np.zeros_like(a), a], axis=-1)[..., 1],
        }
        for name, make in layouts.items():
            bx, by = make(x), make(y)
            assert not bx.flags.c_contiguous, name
            grid.exchange(bx)
            gk.autodiff(mc.exchange, gk.Duplicated(make(x), by), grid)
            assert np.array_equal(bx, want_x) and np.array_equal(by, want_y), f"{shape} {name}"
        grid.free()


def case_shapes_of_one_size():
    """Arrays of one size but different shapes on one rank (trailing axes (2, 3) against (3, 2); an allreduce of
    (2, 3) against (3, 2) or (6,)) are refused on every rank: the same bytes in another shape would be exchanged or
    summed into the wrong elements, silently."""
    if SIZE == 1:
        return
    grid = gkm.Cartesian(WORLD, (2 * SIZE + 1,), ghosts=1, periodic=True)
    trailing = (2, 3) if RANK != LAST else (3, 2)
    u = np.random.default_rng(RANK).random(grid.padded_shape + trailing)
    message = mc.expect_refusal("exchange of trailing axes of one size", lambda: grid.exchange(u), [u])
    assert "shape" in message, message
    for shape in ((3, 2), (6,)):
        x = np.ones((2, 3) if RANK != LAST else shape)
        message = mc.expect_refusal(f"allreduce of {shape} against (2, 3)", lambda x=x: gkm.allreduce(x), [x])
        assert "shape" in message, message
    grid.free()


def case_vector_widths():
    """A program differentiated in vector mode with 2 shadows on some ranks and 1 on the last (its reverse would
    exchange twice against once), for an exchange, an allreduce in place and one into `out`, and with
    checks="first": refused on every rank."""
    if SIZE == 1:
        return
    def widths(a):
        return gk.BatchDuplicated(a, (np.ones_like(a), np.ones_like(a))) if RANK != LAST else \
            gk.Duplicated(a, np.ones_like(a))
    for checks in ("every", "first"):
        grid = gkm.Cartesian(WORLD, (2 * SIZE + 1,), ghosts=1, periodic=True, checks=checks)
        u = np.random.default_rng(RANK).random(grid.padded_shape)
        grid.exchange(u)  # checks="first": the grid's first exchange agreed
        message = mc.expect_refusal(f"exchange of vector widths 2 and 1 ({checks})", lambda u=u, grid=grid:
                                    gk.autodiff(mc.exchange, widths(u), grid), [u])
        assert "width" in message, message
        grid.free()
    x, out = np.ones(2), np.zeros(2)
    message = mc.expect_refusal("allreduce in place of vector widths 2 and 1", lambda: gk.autodiff(
        lambda a: gkm.allreduce(a), widths(x)), [x])
    assert "width" in message, message
    message = mc.expect_refusal("allreduce into out of vector widths 2 and 1", lambda: gk.autodiff(
        lambda a, b: gkm.allreduce(a, b), widths(x), widths(out)), [x, out])
    assert "width" in message, message


def case_host_reads_over_ranks():
    """A host read combined over ranks (session 62; docs/distributed.md, "Host reads over ranks"): through
    gkm.allreduce of a 1-element array the derivative reaches every rank's elements; through mpi4py's own
    `comm.allreduce(s)` (which pickles s) or of a derived scalar, refused on every rank before anything changes
    (the unpickled value was a constant: the derivative through it dropped, or Python's TypeError)."""
    rng = np.random.default_rng(40 + RANK)
    u0 = rng.uniform(0.5, 1.5, 4)

    def program(u, E):
        b = np.zeros(1)
        b[0] = u.sum()  # this rank's sum, an Active scalar: a fill launch and a read
        gkm.allreduce(b)  # the global sum S, differentiated
        gk.launch(mc.weighted_sum, 4, u, 0.1 * b[0], E)  # E_r = 0.1 S |u_r|^2

    u, du = u0.copy(), np.zeros(4)
    gk.autodiff(program, gk.Duplicated(u, du), gk.Duplicated(np.zeros(1), np.ones(1)))
    total, squares = WORLD.allreduce(float(u0.sum())), WORLD.allreduce(float(np.sum(u0 * u0)))
    # L = sum_r E_r = 0.1 S Q: dL/du_r = 0.2 S u_r + 0.1 Q
    mc.close(du, 0.2 * total * u0 + 0.1 * squares, "a host read summed over ranks by gkm.allreduce", rtol=1e-13)
    assert np.array_equal(u, u0)
    for label, reduce in (("comm.allreduce of a read", lambda u: WORLD.allreduce(u.sum())),
                          ("comm.allreduce of a read, op=MAX", lambda u: WORLD.allreduce(u.max(), op=MPI.MAX)),
                          ("comm.allreduce of a derived scalar", lambda u: WORLD.allreduce(np.median(u)))):
        def refused(u, E, reduce=reduce):
            gk.launch(mc.weighted_sum, 4, u, 0.1 * reduce(u), E)

        arrays = [u0.copy(), np.zeros(4), np.zeros(1), np.ones(1)]
        message = mc.expect_refusal(label, lambda f=refused, a=arrays: gk.autodiff(
            f, gk.Duplicated(a[0], a[1]), gk.Duplicated(a[2], a[3])), arrays)
        assert "pickling" in message and "gkm.allreduce" in message, message
        assert isinstance(mc.REFUSED[-1], gk.ProgramError), type(mc.REFUSED[-1])


CASES = {name[5:]: f for name, f in globals().items() if name.startswith("case_")}
