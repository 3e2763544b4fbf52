"""gradkern.mpi red team, session 53: real distributed patterns ported the way a user writes them, each gradient on P
ranks checked against the single-process gradient of the same global problem (computed by rank 0 alone, on a grid
over MPI.COMM_SELF, as docs/distributed.md's example does) and, for a sample, against finite differences across
ranks (gkm.check_grad); then hostile inputs at the distributed API, refused on every rank.

`mpiexec -n P python -m mpi4py tests/support/mpi_cases6.py OUT [NAME...]` (tests/mpi/test_mpi_redteam6.py runs it on
the interpreter, GRADKERN_BACKEND=interp: no compile per rank) writes OUT/rank<r>.json, {case: "ok" or the failure};
a failing rank re-raises, so the job aborts instead of hanging.

Patterns: a damped 2-D Jacobi solve whose weight is steered by an allreduce'd residual, on a non-square grid that does
not divide evenly; a 3-D 7-point heat step on a 2x2x1 process grid (faces, edges, corners); 1-D upwind advection with
a periodic wrap across ranks, in float64 and float32; conjugate gradients (two allreduces per iteration) inside
gk.checkpointed_loop, in vector reverse and vector forward mode; two grids of different sizes alive at once (a
two-grid cycle); an exchange of one component of a wider field (a strided view) inside a checkpointed loop, and of
u[1:-1] and u[::2] passed as the program's arguments; a Const field exchanged where another is Duplicated.
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


def close(got, want, what, rtol=1e-11):
    # P ranks add the same float64 terms in another order than one process (block by block; the allreduce's
    # partial sums; ghost adjoints added into their owners): reassociation of at most ~10^3 terms of ~2^-53
    # each, ~1e-13 relative to the largest value; 1e-11 leaves a hundredfold margin, a lost or doubled halo
    # term is O(1e-2) or more. float32 callers pass 1e-5: the same reassociation at 2^-24 (~1e-7 per term,
    # a few hundred terms).
    scale = max(1.0, float(np.max(np.abs(want))))
    err = float(np.max(np.abs(np.asarray(got, dtype=np.float64) - np.asarray(want, dtype=np.float64)))) / scale
    assert err <= rtol, f"{what}: relative error {err:.3e} > {rtol:.0e} on rank {RANK}"


def window(grid, a):
    """This rank's padded block of the global padded array `a` (a copy)."""
    return a[tuple(slice(s, s + n + 2 * grid.ghosts) for s, n in zip(grid.start, grid.local_shape))].copy()


def against_one_process(what, make, run, rtol=1e-11):
    """run(grid) on a grid over every rank (make(WORLD)) against run on rank 0 alone (make(COMM_SELF)); run returns
    values gathered on its grid's rank 0 (None elsewhere) or summed over its ranks. Returns the world grid."""
    grid = make(WORLD)
    got = run(grid)
    if RANK == 0:
        one = make(MPI.COMM_SELF)
        want = run(one)
        one.free()
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want)):
            close(g, w, f"{what}: value {k}", rtol)
    return grid


# -- a damped Jacobi solve steered by an allreduce'd residual ----------------------------------------------------
@gk.kernel
def residual(u, f, s):
    i, j = gk.tid()
    a = i + 1
    b = j + 1
    r = f[a, b] + u[a - 1, b] + u[a + 1, b] + u[a, b - 1] + u[a, b + 1] - 4.0 * u[a, b]
    gk.atomic_add(s, 0, 0.01 * r * r)


@gk.kernel
def jacobi(u, v, f, s):
    i, j = gk.tid()
    a = i + 1
    b = j + 1
    w = 1.0 / (1.0 + s[0])  # the damping: steered by the global residual
    v[a, b] = u[a, b] + w * (0.25 * (u[a - 1, b] + u[a + 1, b] + u[a, b - 1] + u[a, b + 1] + f[a, b]) - u[a, b])


@gk.kernel
def cube_sum2(u, E, s1):
    i, j = gk.tid()
    x = u[i + 1, j + 1]
    gk.atomic_add(E, 0, (1.0 + 0.1 * (j + s1)) * x * x * x)  # a weight of the *global* column


def jacobi_solve(u, v, f, s, E, grid, sweeps):
    grid.exchange(f)
    for _ in range(sweeps):
        grid.exchange(u)
        gk.fill(s, 0.0)
        gk.launch(residual, grid.local_shape, u, f, s)
        gkm.allreduce(s, comm=grid)
        gk.launch(jacobi, grid.local_shape, u, v, f, s)
        u, v = v, u
    gk.launch(cube_sum2, grid.local_shape, u, E, grid.start[1])


def case_jacobi():
    """11 x 7 cells (blocks of 6/5 by 4/3 on a 2x2 grid), Dirichlet ghosts; reverse mode against one process, then
    finite differences across ranks."""
    rng = np.random.default_rng(1)
    u0, v0, f0 = (rng.random((13, 9)) for _ in range(3))

    def run(grid):
        arrays = [window(grid, a) for a in (u0, v0, f0)]
        shadows = [np.zeros_like(a) for a in arrays]
        E = np.zeros(1)
        gk.autodiff(jacobi_solve, *map(gk.Duplicated, arrays, shadows), gk.Duplicated(np.zeros(1), np.zeros(1)),
                    gk.Duplicated(E, np.ones(1)), grid, 3)
        return [grid.gather(d, padded=True) for d in shadows] + [grid.comm.allreduce(float(E[0]))]
    grid = against_one_process("jacobi", lambda comm: gkm.Cartesian(comm, (11, 7)), run)
    rng = np.random.default_rng(5 + RANK)
    u, v, f = (rng.random(grid.padded_shape) for _ in range(3))
    report = gkm.check_grad(jacobi_solve, *(gk.Duplicated(a, np.zeros_like(a)) for a in (u, v, f)),
                            *(gk.Duplicated(np.zeros(1), np.zeros(1)) for _ in range(2)), grid, 2, comm=grid,
                            max_coords=3)  # each entry costs two runs on every rank: a sample
    assert report.checked == 3 + 2, report
    grid.free()


# -- a 3-D 7-point heat step on a 2x2x1 process grid ---------------------------------------------------------
@gk.kernel
def heat7(u, v, c):
    i, j, k = gk.tid()
    a = i + 1
    b = j + 1
    e = k + 1
    x = u[a, b, e]
    v[a, b, e] = x + c * (u[a - 1, b, e] + u[a + 1, b, e] + u[a, b - 1, e] + u[a, b + 1, e] + u[a, b, e - 1]
                          + u[a, b, e + 1] - 6.0 * x) - 0.1 * x * x * x


@gk.kernel
def energy3(u, E, s0):
    i, j, k = gk.tid()
    x = u[i + 1, j + 1, k + 1]
    gk.atomic_add(E, 0, (1.0 + 0.1 * (i + s0)) * x * x)


def heat3(u, v, E, c, grid):
    for _ in range(2):
        grid.exchange(u)
        gk.launch(heat7, grid.local_shape, u, v, c)
        u, v = v, u
    gk.launch(energy3, grid.local_shape, u, E, grid.start[0])


def reverse_and_forward(program, globals_, c, rtol=1e-11, dtype=np.float64):
    """run(grid) for against_one_process: reverse mode (the arrays' gradients gathered, the Active scalar's and
    the loss summed over ranks), then vector forward mode of width 2 (the loss's two tangents, summed)."""
    def run(grid):
        arrays = [window(grid, a).astype(dtype) for a in globals_]
        shadows = [np.zeros_like(a) for a in arrays]
        E = np.zeros(1, dtype)
        got = gk.autodiff(program, *map(gk.Duplicated, [a.copy() for a in arrays], shadows),
                          gk.Duplicated(E, np.ones(1, dtype)), gk.Active(c), grid)
        out = [grid.gather(d, padded=True) for d in shadows]
        out += [grid.comm.allreduce(float(got[len(arrays) + 1])), grid.comm.allreduce(float(E[0]))]
        rng = np.random.default_rng(21)  # global tangents, the same on both grids
        tangents = [[window(grid, rng.standard_normal(a.shape)).astype(dtype) for a in globals_] for _ in range(2)]
        tE = (np.zeros(1, dtype), np.zeros(1, dtype))
        gk.autodiff(program, *(gk.BatchDuplicated(a, (t0, t1)) for a, t0, t1 in zip(arrays, *tangents)),
                    gk.BatchDuplicated(np.zeros(1, dtype), tE), gk.BatchDuplicated(c, (1.0, -0.5)), grid,
                    mode=gk.Forward)
        return out + [grid.comm.allreduce(float(t[0])) for t in tE]
    return run


def case_heat3():
    """5 x 6 x 3 cells on dims (2, 2, 1) (P = 4; Compute_dims otherwise), periodic along axis 1 only: reverse and
    vector forward mode against one process."""
    rng = np.random.default_rng(4)
    fields = [rng.random((7, 8, 5)), rng.random((7, 8, 5))]
    dims = (2, 2, 1) if SIZE == 4 else None
    grid = against_one_process("heat3", lambda comm: gkm.Cartesian(
        comm, (5, 6, 3), periodic=(False, True, False), dims=dims if comm is WORLD else None),
        reverse_and_forward(heat3, fields, 0.1))
    grid.free()


# -- 1-D upwind advection with a periodic wrap across ranks --------------------------------------------------
@gk.kernel
def upwind(u, v, vel):
    i = gk.tid()
    a = i + 1
    v[a] = u[a] - vel * (u[a] - u[a - 1]) + 0.05 * u[a] * u[a + 1]


@gk.kernel
def cube_sum1(u, E):
    i = gk.tid()
    x = u[i + 1]
    gk.atomic_add(E, 0, x * x * x)


def advect(u, v, E, vel, grid):
    for _ in range(4):
        grid.exchange(u)
        gk.launch(upwind, grid.local_shape, u, v, vel)
        u, v = v, u
    gk.launch(cube_sum1, grid.local_shape, u, E)


def case_advection():
    """4 steps over 11 cells (P ranks, uneven), periodic: float64 and float32 against one process of the same
    dtype (both modes); float32 finite differences across ranks."""
    rng = np.random.default_rng(5)
    fields = [rng.random(13), rng.random(13)]
    for dtype, rtol in ((np.float64, 1e-11), (np.float32, 1e-5)):  # close() says why
        grid = against_one_process(f"advection {np.dtype(dtype)}", lambda comm: gkm.Cartesian(comm, (11,),
                                   periodic=True), reverse_and_forward(advect, fields, 0.3, rtol, dtype), rtol)
        grid.free()
    grid = gkm.Cartesian(WORLD, (2 * SIZE + 3,), periodic=True)
    rng = np.random.default_rng(50 + RANK)
    u, v = (rng.random(grid.padded_shape).astype(np.float32) for _ in range(2))
    gkm.check_grad(advect, gk.Duplicated(u, np.zeros_like(u)), gk.Duplicated(v, np.zeros_like(v)),
                   gk.Duplicated(np.zeros(1, np.float32), np.zeros(1, np.float32)), gk.Active(0.3), grid, comm=grid,
                   max_coords=4)
    grid.free()


# -- conjugate gradients in a checkpointed loop: two allreduces per iteration --------------------------------
@gk.kernel
def apply_a(p, q, c):
    i, j = gk.tid()
    a = i + 1
    b = j + 1
    q[a, b] = p[a, b] + c * (4.0 * p[a, b] - p[a - 1, b] - p[a + 1, b] - p[a, b - 1] - p[a, b + 1])


@gk.kernel
def dot(x, y, s):
    i, j = gk.tid()
    gk.atomic_add(s, 0, x[i + 1, j + 1] * y[i + 1, j + 1])


@gk.kernel
def cg_xr(x, r, p, q, rr, pq):
    i, j = gk.tid()
    a = i + 1
    b = j + 1
    alpha = rr[0] / pq[0]
    x[a, b] = x[a, b] + alpha * p[a, b]
    r[a, b] = r[a, b] - alpha * q[a, b]


@gk.kernel
def cg_p(p, r, rr, rrn):
    i, j = gk.tid()
    a = i + 1
    b = j + 1
    p[a, b] = r[a, b] + rrn[0] / rr[0] * p[a, b]


@gk.kernel
def square_sum(u, E, s1):
    i, j = gk.tid()
    x = u[i + 1, j + 1]
    gk.atomic_add(E, 0, (1.0 + 0.1 * (j + s1)) * x * x)


def cg(b, x, r, p, q, rr, rrn, pq, E, c, grid, iterations):
    """Solve (I - c Laplacian) x = b by CG from x = 0; E = a weighted |x|^2."""
    gk.copy(r, b)
    gk.copy(p, b)
    gk.launch(dot, grid.local_shape, r, r, rr)
    gkm.allreduce(rr, comm=grid)

    def step(t):
        grid.exchange(p)
        gk.launch(apply_a, grid.local_shape, p, q, c)
        gk.fill(pq, 0.0)
        gk.launch(dot, grid.local_shape, p, q, pq)
        gkm.allreduce(pq, comm=grid)
        gk.launch(cg_xr, grid.local_shape, x, r, p, q, rr, pq)
        gk.fill(rrn, 0.0)
        gk.launch(dot, grid.local_shape, r, r, rrn)
        gkm.allreduce(rrn, comm=grid)
        gk.launch(cg_p, grid.local_shape, p, r, rr, rrn)
        gk.copy(rr, rrn)
    gk.checkpointed_loop(step, iterations, snapshots=2)
    gk.launch(square_sum, grid.local_shape, x, E, grid.start[1])


def case_cg():
    """3 CG iterations on 7 x 5 periodic cells: reverse mode (Active c), vector reverse (two seeds of E) and vector
    forward (two tangents) against one process; finite differences across ranks."""
    b0 = 0.5 + np.random.default_rng(3).random((9, 7))

    def run(grid):
        b = window(grid, b0)
        def work():  # x, r, p, q; rr, rrn, pq
            return [grid.zeros() for _ in range(4)] + [np.zeros(1) for _ in range(3)]
        db, E = np.zeros_like(b), np.zeros(1)
        got = gk.autodiff(cg, gk.Duplicated(b.copy(), db), *(gk.Duplicated(a, np.zeros_like(a)) for a in work()),
                          gk.Duplicated(E, np.ones(1)), gk.Active(0.2), grid, 3)
        out = [grid.gather(db, padded=True), grid.comm.allreduce(float(got[9])), grid.comm.allreduce(float(E[0]))]
        seeds = (np.ones(1), np.full(1, 0.5))
        vb = gk.BatchDuplicated(b.copy(), (np.zeros_like(b), np.zeros_like(b)))
        gk.autodiff(cg, vb, *(gk.BatchDuplicated(a, (np.zeros_like(a), np.zeros_like(a))) for a in work()),
                    gk.BatchDuplicated(np.zeros(1), seeds), gk.Const(0.2), grid, 3)
        out += [grid.gather(d, padded=True) for d in vb.dval]
        rng = np.random.default_rng(77)
        tb = tuple(window(grid, rng.standard_normal(b0.shape)) for _ in range(2))
        tE = (np.zeros(1), np.zeros(1))
        gk.autodiff(cg, gk.BatchDuplicated(b.copy(), tb),
                    *(gk.BatchDuplicated(a, (np.zeros_like(a), np.zeros_like(a))) for a in work()),
                    gk.BatchDuplicated(np.zeros(1), tE), gk.BatchDuplicated(0.2, (0.0, 1.0)), grid, 3, mode=gk.Forward)
        return out + [grid.comm.allreduce(float(t[0])) for t in tE]
    grid = against_one_process("cg", lambda comm: gkm.Cartesian(comm, (7, 5), periodic=True), run)
    rng = np.random.default_rng(9 + RANK)
    b = 0.5 + rng.random(grid.padded_shape)
    work = [grid.zeros() for _ in range(4)] + [np.zeros(1) for _ in range(4)]
    gkm.check_grad(cg, gk.Duplicated(b, np.zeros_like(b)), *(gk.Duplicated(a, np.zeros_like(a)) for a in work),
                   gk.Active(0.2), grid, 1, comm=grid, max_coords=2)
    grid.free()


# -- two grids alive: a two-grid cycle -------------------------------------------------------------------------
@gk.kernel
def smooth(u, v, k):
    i = gk.tid()
    v[i + 1] = u[i + 1] + k * (u[i] + u[i + 2] - 2.0 * u[i + 1])


@gk.kernel
def restrict(f, c):
    i = gk.tid()
    c[i + 1] = 0.25 * f[2 * i] + 0.5 * f[2 * i + 1] + 0.25 * f[2 * i + 2]


@gk.kernel
def prolong(c, f):
    i = gk.tid()
    f[2 * i + 1] = f[2 * i + 1] + c[i + 1] * c[i + 1]
    f[2 * i + 2] = f[2 * i + 2] + 0.5 * (c[i + 1] + c[i + 2])


def two_grid(f, fv, c, cv, E, k, fine, coarse):
    """Two cycles in a checkpointed loop, whose entry agrees on the coarse grid (the most recent) and whose first
    exchange on the fine one agrees again (docs/distributed.md#deadlocks-and-how-gradkern-prevents-them)."""
    def cycle(t):
        fine.exchange(f)
        gk.launch(smooth, fine.local_shape, f, fv, k)
        fine.exchange(fv)
        gk.launch(restrict, coarse.local_shape, fv, c)
        coarse.exchange(c)
        gk.launch(smooth, coarse.local_shape, c, cv, k)
        coarse.exchange(cv)
        gk.launch(prolong, coarse.local_shape, cv, fv)
        fine.exchange(fv)  # (without it the smoothing would read ghosts from before the prolongation)
        gk.launch(smooth, fine.local_shape, fv, f, k)
    gk.checkpointed_loop(cycle, 2, snapshots=1)
    gk.launch(cube_sum1, fine.local_shape, fv, E)


def case_two_grids():
    """A fine grid of 8P cells and a coarse one of 4P, both alive, both periodic: two-grid cycles in a checkpointed
    loop, reverse mode against one process."""
    n = 4 * SIZE
    rng = np.random.default_rng(8)
    fine0 = [rng.random(2 * n + 2) for _ in range(2)]
    coarse0 = [rng.random(n + 2) for _ in range(2)]

    def run(comm):
        fine = gkm.Cartesian(comm, (2 * n,), periodic=True)
        coarse = gkm.Cartesian(comm, (n,), periodic=True)
        arrays = [window(fine, a) for a in fine0] + [window(coarse, a) for a in coarse0]
        shadows = [np.zeros_like(a) for a in arrays]
        E = np.zeros(1)
        got = gk.autodiff(two_grid, *map(gk.Duplicated, arrays, shadows), gk.Duplicated(E, np.ones(1)),
                          gk.Active(0.2), fine, coarse)
        out = [g.gather(d, padded=True) for g, d in zip((fine, fine, coarse, coarse), shadows)]
        out += [fine.comm.allreduce(float(got[5])), fine.comm.allreduce(float(E[0]))]
        coarse.free()
        fine.free()
        return out
    got = run(WORLD)
    if RANK == 0:
        for k, (g, w) in enumerate(zip(got, run(MPI.COMM_SELF))):
            close(g, w, f"two grids: value {k}")


# -- exchanges of views ----------------------------------------------------------------------------------------
@gk.kernel
def mix(U, v, k):
    i, j = gk.tid()
    a = i + 1
    b = j + 1
    v[a, b] = U[a, b, 0] * (1.0 + k * (U[a - 1, b, 1] + U[a + 1, b, 1] + U[a, b - 1, 1] + U[a, b + 1, 1]
                                       + U[a - 1, b - 1, 1]))


@gk.kernel
def feed(v, U, k):
    i, j = gk.tid()
    a = i + 1
    b = j + 1
    U[a, b, 1] = U[a, b, 1] + k * v[a - 1, b + 1] * v[a, b]


def component_loop(U, v, E, k, grid):
    """Exchanges component 1 of U (a strided view made inside the program) in a checkpointed loop."""
    def step(t):
        grid.exchange(U[..., 1])
        gk.launch(mix, grid.local_shape, U, v, k)
        grid.exchange(v)
        gk.launch(feed, grid.local_shape, v, U, k)
    gk.checkpointed_loop(step, 3, snapshots=1)
    gk.launch(square_sum, grid.local_shape, v, E, grid.start[1])


def sliced(u, v, E, k, grid):
    grid.exchange(u)
    gk.launch(smooth, grid.local_shape, u, v, k)
    grid.exchange(v)
    gk.launch(smooth, grid.local_shape, v, u, k)
    gk.launch(cube_sum1, grid.local_shape, u, E)


def case_views():
    """A component view exchanged in a checkpointed loop (checks="first"; dims (1, P) too: a periodic axis of one
    rank), and u[1:-1] and u[::2] of longer arrays passed as the blocks: the gradients of plain blocks."""
    rng = np.random.default_rng(2)
    U0, v0 = rng.random((9, 8, 2)), rng.random((9, 8))

    def run(grid):
        U, v = window(grid, U0), window(grid, v0)
        dU, dv = np.zeros_like(U), np.zeros_like(v)
        got = gk.autodiff(component_loop, gk.Duplicated(U, dU), gk.Duplicated(v, dv),
                          gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.3), grid)
        return [grid.gather(dU, padded=True), grid.gather(dv, padded=True), grid.comm.allreduce(float(got[3]))]
    for dims in (None, (1, SIZE)):
        grid = against_one_process(f"component view, dims {dims}", lambda comm, dims=dims: gkm.Cartesian(
            comm, (7, 6), periodic=(True, False), checks="first", dims=dims if comm is WORLD else None), run)
        grid.free()
    u0, v0 = rng.random(3 * SIZE + 3), rng.random(3 * SIZE + 3)

    def run_1d(how):
        def run(grid):
            n = grid.padded_shape[0]
            view = slice(1, -1) if how == "slice" else slice(None, None, 2)
            big, dbig = np.zeros(2 * n), np.zeros(2 * n)
            u, du = big[view], dbig[view]
            if how == "slice":
                u, du = u[:n], du[:n]
            u[...] = window(grid, u0)
            v = window(grid, v0)
            dv = np.zeros_like(v)
            got = gk.autodiff(sliced, gk.Duplicated(u, du), gk.Duplicated(v, dv),
                              gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.3), grid)
            outside = dbig.copy()
            outside[view][:n] = 0.0
            assert not outside.any(), f"{how}: a shadow outside the view was written"
            return [grid.gather(du, padded=True), grid.gather(dv, padded=True), grid.comm.allreduce(float(got[3]))]
        return run
    for how in ("slice", "strided"):
        against_one_process(f"u {how}", lambda comm: gkm.Cartesian(comm, (3 * SIZE + 1,)), run_1d(how)).free()


# -- a Const field exchanged where another is Duplicated ---------------------------------------------------------
@gk.kernel
def conduct(u, v, kap, c):
    i = gk.tid()
    a = i + 1
    v[a] = u[a] + c * (kap[a] * (u[a + 1] - u[a]) - kap[a - 1] * (u[a] - u[a - 1]))


def conduction(u, v, kap, E, c, grid):
    grid.exchange(kap)
    for _ in range(2):
        grid.exchange(u)
        gk.launch(conduct, grid.local_shape, u, v, kap, c)
        u, v = v, u
        grid.exchange(kap)
    gk.launch(cube_sum1, grid.local_shape, u, E)


def case_const_field():
    """kap Const, u and v Duplicated, each exchanged; checks "every" and "first": against one process."""
    rng = np.random.default_rng(4)
    u0, v0, k0 = (rng.random(2 * SIZE + 3) for _ in range(3))

    def run(grid):
        u, v, kap = window(grid, u0), window(grid, v0), window(grid, k0)
        du, dv = np.zeros_like(u), np.zeros_like(v)
        got = gk.autodiff(conduction, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Const(kap),
                          gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.2), grid)
        return [grid.gather(du, padded=True), grid.gather(dv, padded=True), grid.comm.allreduce(float(got[4]))]
    for checks in ("every", "first"):
        against_one_process(f"const field, checks={checks}", lambda comm, checks=checks: gkm.Cartesian(
            comm, (2 * SIZE + 1,), periodic=True, checks=checks), run).free()


# -- hostile inputs: refused on every rank, nothing changed ------------------------------------------------------
def refused(what, call, arrays=(), kind=gk.GradkernError):
    return mpi_report.refused(what, call, list(arrays), [], RANK, kind)


def case_hostile():
    """Bad arguments on every rank or on the last alone: a DistributedError on every rank naming what was wrong,
    before any message (so no rank waits), no buffer changed."""
    other = RANK == LAST and SIZE > 1
    for what, kwargs, word in (("a float shape", {"shape": (8.5, 4)}, "shape"),
                               ("a bool shape", {"shape": True}, "shape"),
                               ("float dims", {"shape": (8, 4), "dims": (SIZE + 0.5, 1)}, "dims"),
                               ("a string for periodic", {"shape": (8, 4), "periodic": "no"}, "periodic"),
                               ("dims of the wrong length", {"shape": (8, 4), "dims": (SIZE,)}, "dims"),
                               ("ghosts wider than a block", {"shape": (2 * SIZE, 4), "ghosts": 3}, "ghosts")):
        message = refused(what, lambda kwargs=kwargs: gkm.Cartesian(WORLD, **kwargs))
        assert word in message, (what, message)
    refused("COMM_NULL", lambda: gkm.Cartesian(MPI.COMM_NULL, (8,)), kind=gkm.DistributedError)
    refused("allreduce over COMM_NULL", lambda: gkm.allreduce(np.ones(2), comm=MPI.COMM_NULL),
            kind=gkm.DistributedError)
    grid = gkm.Cartesian(WORLD, (2 * SIZE + 1, 3))
    u = np.random.default_rng(RANK).random(grid.padded_shape)
    for dtype in (object, np.bool_, "U3"):  # one rank's odd dtype; MPI cannot sum or (object, str) move them
        odd = u.astype(dtype) if other or SIZE == 1 else u
        if dtype is not np.bool_:
            message = refused(f"exchange of {dtype}", lambda odd=odd: grid.exchange(odd), [odd],
                              gkm.DistributedError)
        x = np.ones(2, dtype=dtype) if other or SIZE == 1 else np.ones(2)
        message = refused(f"allreduce of {dtype}", lambda x=x: gkm.allreduce(x), [x], gkm.DistributedError)
        assert "refused on every rank" in message, message
    if SIZE > 1:
        odd = u.astype(np.float32) if other else u
        message = refused("a rank's float32 block", lambda: grid.exchange(odd), [odd], gkm.DistributedError)
        assert "dtype" in message, message
    # scatter of a global array whose trailing axes (or dtype) do not fit the blocks: root alone would fail
    for glob in (np.ones((2 * SIZE + 1, 3, 2)), np.ones((2 * SIZE + 1, 3), complex)):
        message = refused("scatter of a global array that does not fit", lambda glob=glob: grid.scatter(
            glob if RANK == 0 else None, u), [u], gkm.DistributedError)
        assert "global array" in message, message
    # allreduce(x, x) is the sum in place (its gradient was zero); out overlapping x otherwise is refused
    x, dx = np.array([1.0 + RANK, 2.0]), np.array([1.0, 1.0 + 0.5 * RANK])
    want = WORLD.allreduce(dx)
    gk.autodiff(lambda a: gkm.allreduce(a, a), gk.Duplicated(x, dx))
    close(dx, want, "allreduce(x, x)'s gradient", 1e-15)  # sums of small dyadic numbers: exact
    y = np.arange(4.0)
    refused("out overlapping x", lambda: gkm.allreduce(y[:3], y[1:]), [y], gkm.DistributedError)
    gkm.allreduce(y[::2], y[1::2])  # interleaved, disjoint: allowed
    assert np.array_equal(y, [0.0, 0.0, 2.0, 2.0 * SIZE]), y
    # gkm.check_grad's options: each failed unclearly (a division by zero, NumPy's error, "the ranks disagree")
    for what, kwargs in (("eps=0", {"eps": 0.0}), ("eps=nan", {"eps": float("nan")}),
                         ("max_coords=-1", {"max_coords": -1}), ("rtol=-1", {"rtol": -1.0})):
        message = refused(f"check_grad with {what}", lambda kwargs=kwargs: gkm.check_grad(
            lambda a: gkm.allreduce(a), gk.Duplicated(np.ones(2), np.zeros(2)), **kwargs), kind=gkm.DistributedError)
        assert what.split("=")[0] in message, message
    refused("check_grad over a string", lambda: gkm.check_grad(lambda a: None, gk.Duplicated(np.ones(2), np.zeros(2)),
                                                               comm="world"))
    # scatter and gather are not differentiated: inside a program, on an array with a derivative, refused (a gathered
    # u scattered into v gave dE/du = 0, silently); a Const array's gather is allowed
    def through_rank0(a, b, E, k, g):
        g.scatter(g.gather(a), b)
        gk.launch(cube_sum1, g.local_shape, b, E)
    one = gkm.Cartesian(WORLD, (2 * SIZE + 1,), periodic=True)
    w, dw = np.random.default_rng(RANK).random(one.padded_shape), np.zeros(one.padded_shape)
    for mode in (gk.Reverse, gk.Forward):
        message = refused(f"gather and scatter in a program ({mode})", lambda mode=mode: gk.autodiff(
            through_rank0, gk.Duplicated(w, dw), gk.Duplicated(np.zeros_like(w), np.zeros_like(w)),
            gk.Duplicated(np.zeros(1), np.ones(1)), 0.0, one, mode=mode), [w, dw], gkm.DistributedError)
        assert "not differentiated" in message, message
    seen = []
    gk.autodiff(lambda a, b, g: seen.append(g.gather(a)), gk.Const(w), gk.Duplicated(w.copy(), dw), one)
    assert (seen[0] is not None) == (RANK == 0), seen
    one.free()
    # free() inside a reverse-mode program (its reverse exchanges on the grid) is refused; the reverse of a split
    # program after free() says the grid was freed (both failed with MPI's 'Invalid communicator')
    def freeing(a, g):
        g.exchange(a)
        g.free()
    one = gkm.Cartesian(WORLD, (2 * SIZE + 1,), periodic=True)
    w = np.random.default_rng(RANK).random(one.padded_shape)
    message = refused("free() in a reverse-mode program", lambda: gk.autodiff(freeing, gk.Duplicated(
        w, np.ones_like(w)), one), kind=gkm.DistributedError)
    assert "inside a reverse-mode program" in message, message
    forward, reverse = gk.autodiff_thunk(lambda a, g: g.exchange(a), gk.Duplicated, gk.Const)
    args = (gk.Duplicated(w, np.ones_like(w)), one)
    tape = forward(*args)
    one.free()
    message = refused("a split reverse after free()", lambda: reverse(*args, tape), kind=gkm.DistributedError)
    assert "freed" in message, message
    grid.free()
    grid.free()  # freeing twice does nothing
    for what, call in (("allreduce", lambda: gkm.allreduce(np.ones(2), comm=grid)),
                       ("Cartesian", lambda: gkm.Cartesian(grid.comm, (8,))),
                       ("check_grad", lambda: gkm.check_grad(lambda a: None, gk.Duplicated(np.ones(1), np.zeros(1)),
                                                             comm=grid))):
        message = refused(f"{what} over a freed grid", call)
        assert "freed" in message, message
    message = refused("exchange on a freed grid", lambda: grid.exchange(u), [u], gkm.DistributedError)
    assert "freed" in message, message


CASES = {name[5:]: f for name, f in globals().items() if name.startswith("case_")}


def main(out_dir: str, names: list[str]) -> None:
    run_cases(CASES, out_dir, names, RANK)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
