"""Cases of gradkern.mpi run on every rank of `mpiexec -n P python -m mpi4py tests/support/mpi_cases.py OUT [NAME...]`
(tests/mpi/test_mpi.py launches it for P = 1 … 4). Each rank runs every case (or those named), and writes
OUT/rank<r>.json: {case: "ok" or the failure}. A case checks this rank's own results; the P-rank gradients
are compared with the single-process gradient of the same global problem, which every rank computes on
a grid over MPI.COMM_SELF.
"""

from __future__ import annotations

import os
import sys

import numpy as np
from checkpoint_schedules import MixedCheckpointSchedule
from mpi4py import MPI
from mpi_report import run_cases

import gradkern as gk
import gradkern.mpi as gkm

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.rank, WORLD.size
T = 3  # time steps of the simulations


# -- kernels: one per dimension; radius g (= ghosts) stencils with a coefficient of the global index ------------
@gk.kernel
def heat1(u, v, c, s0, g):
    i = gk.tid()
    a = i + g
    w = 1.0 + 0.3 * gk.sin(0.7 * (i + s0))
    uc = u[a]
    acc = 0.0
    for k in range(1, g + 1):
        acc += (u[a - k] + u[a + k] - 2.0 * uc) / k
    v[a] = uc + c * w * acc - 0.1 * uc * uc * uc


@gk.kernel
def heat2(u, v, c, cd, s0, s1, g):
    i, j = gk.tid()
    a = i + g
    b = j + g
    w = 1.0 + 0.3 * gk.sin(0.7 * (i + s0) + 0.4 * (j + s1))
    uc = u[a, b]
    acc = 0.0
    for k in range(1, g + 1):
        acc += (u[a - k, b] + u[a + k, b] + u[a, b - k] + u[a, b + k] - 4.0 * uc) / k
    diag = u[a - 1, b - 1] + u[a - 1, b + 1] + u[a + 1, b - 1] + u[a + 1, b + 1] - 4.0 * uc  # the 9-point corners
    v[a, b] = uc + c * w * (acc + cd * diag) - 0.1 * uc * uc * uc


@gk.kernel
def heat3(u, v, c, s0, s1, s2, g):
    i, j, k = gk.tid()
    a = i + g
    b = j + g
    e = k + g
    w = 1.0 + 0.3 * gk.sin(0.7 * (i + s0) + 0.4 * (j + s1) + 0.2 * (k + s2))
    uc = u[a, b, e]
    acc = 0.0
    for m in range(1, g + 1):
        acc += (u[a - m, b, e] + u[a + m, b, e] + u[a, b - m, e] + u[a, b + m, e] + u[a, b, e - m]
                + u[a, b, e + m] - 6.0 * uc) / m
    v[a, b, e] = uc + c * w * acc - 0.1 * uc * uc * uc


@gk.kernel
def energy1(u, E, s0, g):
    i = gk.tid()
    x = u[i + g]
    gk.atomic_add(E, 0, (1.0 + 0.01 * (i + s0)) * x * x)


@gk.kernel
def energy2(u, E, s0, s1, g):
    i, j = gk.tid()
    x = u[i + g, j + g]
    gk.atomic_add(E, 0, (1.0 + 0.01 * (i + s0) + 0.02 * (j + s1)) * x * x)


@gk.kernel
def energy3(u, E, s0, s1, s2, g):
    i, j, k = gk.tid()
    x = u[i + g, j + g, k + g]
    gk.atomic_add(E, 0, (1.0 + 0.01 * (i + s0) + 0.02 * (j + s1) + 0.03 * (k + s2)) * x * x)


def half_step(grid, u, v, c, cd):
    """Exchange u's halo, then v <- step(u) on the owned cells."""
    grid.exchange(u)
    g = grid.ghosts
    if grid.ndim == 1:
        gk.launch(heat1, grid.local_shape, u, v, c, *grid.start, g)
    elif grid.ndim == 2:
        gk.launch(heat2, grid.local_shape, u, v, c, cd, *grid.start, g)
    else:
        gk.launch(heat3, grid.local_shape, u, v, c, *grid.start, g)


def energy(grid, u, E):
    kernel = (energy1, energy2, energy3)[grid.ndim - 1]
    gk.launch(kernel, grid.local_shape, u, E, *grid.start, grid.ghosts)


def simulate(u, v, E, c, grid, cd, checkpointed):
    """T steps of u -> v -> u (two exchanges each), then this rank's part of the energy."""
    def step(t):
        half_step(grid, u, v, c, cd)
        half_step(grid, v, u, c, cd)
    if checkpointed:
        schedule = MixedCheckpointSchedule(T, 2) if checkpointed == "mixed" else None  # default: binomial
        gk.checkpointed_loop(step, T, snapshots=2, schedule=schedule)
    else:
        for t in range(T):
            step(t)
    energy(grid, u, E)


CONFIGS = {  # name: (shape, ghosts, periodic, 9-point weight)
    "1d": ((13,), 1, False, 0.0),
    "1d-periodic-g2": ((17,), 2, True, 0.0),
    "2d": ((9, 7), 1, (False, True), 0.0),
    "2d-9point": ((8, 9), 1, (True, False), 0.5),
    "2d-9point-closed": ((9, 8), 1, False, 0.5),
    "2d-g2": ((10, 9), 2, (True, True), 0.25),
    "3d": ((6, 5, 7), 1, (True, False, True), 0.0),
}


def initial(shape, ghosts, seed):
    """The global padded fields u, v (the same on every rank)."""
    rng = np.random.default_rng(seed)
    padded = tuple(n + 2 * ghosts for n in shape)
    return 0.5 + 0.5 * rng.random(padded), 0.5 + 0.5 * rng.random(padded)


def window(grid, a):
    """This rank's padded block of the global padded array a."""
    return a[tuple(slice(s, s + n + 2 * grid.ghosts) for s, n in zip(grid.start, grid.local_shape))]


def edges(grid, a, global_too=False):
    """This rank's owned cells plus the ghosts on the global edges it lies on (of its block, or of the global
    padded array): the cells whose derivative this rank holds."""
    g, out = grid.ghosts, []
    for d, (s, n) in enumerate(zip(grid.start, grid.local_shape)):
        lo = 0 if grid.coords[d] == 0 else g
        hi = n + g + (g if grid.coords[d] == grid.dims[d] - 1 else 0)
        out.append(slice(lo + (s if global_too else 0), hi + (s if global_too else 0)))
    return a[tuple(out)]


def close(got, want, what, rtol=1e-11):
    # P ranks sum the same float64 terms in another order than one process (block by block, ghosts added into
    # owners): a reassociation error of at most ~n 2^-52 relative to the largest value, n <= 10^3 terms per
    # element here, so ~2e-13; 1e-11 leaves a fiftyfold margin, while a lost or doubled halo term is O(1).
    # Data movement alone (the exchange; allreduce's sums of small integers) is compared at 1e-13.
    scale = max(1.0, float(np.max(np.abs(want))))
    err = float(np.max(np.abs(np.asarray(got) - np.asarray(want)))) / scale
    assert err <= rtol, f"{what}: relative error {err:.3e} > {rtol:.0e}"


def derivatives(gr, name, modes, checkpointed):
    """The derivatives of `simulate` on grid `gr`: arrays gathered (padded) on its rank 0, scalars summed
    over its ranks. Checks on every rank that the interior ghosts' adjoints were cleared."""
    shape, ghosts, periodic, cd = CONFIGS[name]
    u0, v0 = initial(shape, ghosts, 7)
    u, v = gr.zeros(), gr.zeros()
    gr.scatter(u0 if gr.comm.rank == 0 else None, u)
    gr.scatter(v0 if gr.comm.rank == 0 else None, v)
    rng = np.random.default_rng(11)
    tu_all, tv_all = rng.standard_normal(u0.shape), rng.standard_normal(v0.shape)
    inner = np.ones(gr.padded_shape, bool)  # interior ghosts: cleared by the exchanges' reverse
    edges(gr, inner)[...] = False
    out, c = {}, 0.15
    if "reverse" in modes:
        du, dv, E = gr.zeros(), gr.zeros(), np.zeros(1)
        got = gk.autodiff(simulate, gk.Duplicated(u.copy(), du), gk.Duplicated(v.copy(), dv),
                          gk.Duplicated(E, np.ones(1)), gk.Active(c), gr, cd, checkpointed)
        for key, a in (("du", du), ("dv", dv)):
            assert not np.any(a[inner]), f"{name}: {key} is non-zero on interior ghosts on rank {RANK}"
            out[key] = gr.gather(a, padded=True)
        out["dc"] = gr.comm.allreduce(got[3])
        out["E"] = gr.comm.allreduce(E[0])
    if "split" in modes:  # gk.autodiff_thunk: the augmented forward, then the reverse from its tape
        du, dv = gr.zeros(), gr.zeros()
        args = (gk.Duplicated(u.copy(), du), gk.Duplicated(v.copy(), dv), gk.Duplicated(np.zeros(1), np.ones(1)),
                gk.Active(c), gr, cd, checkpointed)
        forward, reverse = gk.autodiff_thunk(simulate, *(type(a) if isinstance(a, gk.Annotation) else gk.Const
                                                         for a in args))
        tape = forward(*args)
        got = reverse(*args, tape)
        out["split du"] = gr.gather(du, padded=True)
        out["split dc"] = gr.comm.allreduce(got[3])
    if "forward" in modes:
        tE, E = np.zeros(1), np.zeros(1)
        gk.autodiff(simulate, gk.Duplicated(u.copy(), window(gr, tu_all).copy()),
                    gk.Duplicated(v.copy(), window(gr, tv_all).copy()), gk.Duplicated(E, tE),
                    gk.Duplicated(c, 0.5), gr, cd, False, mode=gk.Forward)
        out["tE"] = gr.comm.allreduce(tE[0])
    if "vector" in modes:
        lanes = [(gr.zeros(), gr.zeros(), np.array([1.0 + k])) for k in range(2)]
        got = gk.autodiff(simulate, gk.BatchDuplicated(u.copy(), tuple(x[0] for x in lanes)),
                          gk.BatchDuplicated(v.copy(), tuple(x[1] for x in lanes)),
                          gk.BatchDuplicated(np.zeros(1), tuple(x[2] for x in lanes)), gk.Active(c), gr, cd, False)
        for k in range(2):
            out[f"du lane {k}"] = gr.gather(lanes[k][0], padded=True)
            out[f"dc lane {k}"] = gr.comm.allreduce(float(got[3][k]))
    return out


def reference(name, modes, checkpointed):
    """The single-process derivatives of the global problem (a grid over MPI.COMM_SELF), computed once per
    test session: kept in REFERENCE (the P = 1 job computes them, the later jobs load them)."""
    path = os.path.join(REFERENCE, f"{name}-{checkpointed}-{'-'.join(modes)}.npz") if REFERENCE else None
    if path and os.path.exists(path):
        with np.load(path) as data:
            return {key: data[key] for key in data.files}
    shape, ghosts, periodic, _ = CONFIGS[name]
    whole = gkm.Cartesian(MPI.COMM_SELF, shape, ghosts=ghosts, periodic=periodic)
    ref = derivatives(whole, name, modes, checkpointed)
    whole.free()
    if path:
        np.savez(path, **{key: np.asarray(value) for key, value in ref.items()})
    return ref


def run_modes(name, checkpointed=False, modes=("reverse", "forward"), checks="every"):
    """The P-rank derivatives (every rank's, gathered) against the single-process ones of the global problem,
    computed on rank 0; its verdict is every rank's."""
    shape, ghosts, periodic, _ = CONFIGS[name]
    grid = gkm.Cartesian(WORLD, shape, ghosts=ghosts, periodic=periodic, checks=checks)
    mine = derivatives(grid, name, modes, checkpointed)
    verdict = None
    if RANK == 0:
        ref = reference(name, modes, checkpointed)
        try:
            for key in ref:
                close(mine[key], ref[key], f"{name} ({'checkpointed' if checkpointed else 'plain'}): {key}")
        except AssertionError as e:
            verdict = str(e)
    verdict = WORLD.bcast(verdict)
    grid.free()
    assert verdict is None, verdict


def exchange(u, grid):
    """A program of one exchange."""
    grid.exchange(u)


# -- cases ------------------------------------------------------------------------------------------------------------
def case_dot_test():
    """<H x, y> = <x, H^T y>, each side summed over ranks, for every configuration; the reverse moves the
    bytes of the forward, and runs bit for bit the same twice."""
    for name, (shape, ghosts, periodic, _) in CONFIGS.items():
        grid = gkm.Cartesian(WORLD, shape, ghosts=ghosts, periodic=periodic)
        rng = np.random.default_rng(100 + RANK)
        x, y = rng.standard_normal(grid.padded_shape), rng.standard_normal(grid.padded_shape)
        hx = x.copy()
        grid.exchange(hx)
        hty = y.copy()
        gk.autodiff(exchange, gk.Duplicated(x.copy(), hty), grid)
        again = y.copy()
        gk.autodiff(exchange, gk.Duplicated(x.copy(), again), grid)
        assert np.array_equal(hty, again), f"{name}: the reverse is not deterministic"
        lhs, rhs = WORLD.allreduce(float(np.vdot(hx, y))), WORLD.allreduce(float(np.vdot(x, hty)))
        assert abs(lhs - rhs) <= 1e-13 * max(1.0, abs(lhs)), f"{name}: dot test {lhs!r} vs {rhs!r}"
        sent = grid.halo.sent
        assert sent["reverse"] == 2 * sent["forward"] // 3, f"{name}: bytes {sent}"  # 3 forward, 2 reverse calls
        # every block after an exchange is the window of the global padded array exchanged by one process:
        # faces, edges and corners (whatever the stencil), boundary ghosts of non-periodic edges included
        whole = gkm.Cartesian(MPI.COMM_SELF, shape, ghosts=ghosts, periodic=periodic)
        field = np.random.default_rng(7).standard_normal(whole.padded_shape)
        block = grid.zeros()
        grid.scatter(field if RANK == 0 else None, block)
        held = np.zeros(grid.padded_shape, bool)  # owned cells and the ghosts of non-periodic global edges
        held[tuple(slice(0 if lo == MPI.PROC_NULL else ghosts, n + ghosts + (ghosts if hi == MPI.PROC_NULL else 0))
                   for n, (lo, hi) in zip(grid.local_shape, grid.halo.neighbours))] = True
        block[~held] = np.nan  # what the exchange must overwrite
        grid.exchange(block)
        whole.exchange(field)
        assert np.array_equal(block, window(grid, field)), f"{name}: the block is not the global window"
        whole.free()
        tx = rng.standard_normal(grid.padded_shape)  # forward mode: the tangent exchanged as the primal
        want = tx.copy()
        grid.exchange(want)
        gk.autodiff(exchange, gk.Duplicated(x.copy(), tx), grid, mode=gk.Forward)
        assert np.array_equal(tx, want), f"{name}: forward tangent differs from the exchanged tangent"
        grid.free()


def case_gradients():
    """Reverse and forward mode on P ranks equal the single-process derivatives of the global problem."""
    for name in CONFIGS:
        run_modes(name)


def case_checkpointed():
    for name in ("1d-periodic-g2", "3d"):
        run_modes(name, checkpointed="binomial", modes=("reverse",))
    run_modes("2d-9point", checkpointed="binomial", modes=("reverse", "split"))
    run_modes("2d-g2", checkpointed="mixed", modes=("reverse",))


def case_vector_and_split():
    run_modes("2d-9point-closed", modes=("vector", "split"))


def case_checks_first():
    """checks="first": the same derivatives; the first exchange still refuses on every rank; a later bad block
    is refused on its own rank (shown on one rank: on more, its neighbours would wait until the job aborts)."""
    run_modes("2d-9point", modes=("reverse",), checks="first")
    grid = gkm.Cartesian(WORLD, (9, 8), ghosts=1, checks="first")
    u = grid.zeros()
    bad = u if RANK != SIZE - 1 else np.zeros((3, 3))
    expect_refusal("a first exchange of a wrong shape", lambda: grid.exchange(bad), [u])
    grid.exchange(u)
    if SIZE == 1:
        message = expect_refusal("a later exchange of a wrong shape", lambda: grid.exchange(np.zeros((3, 3))), [])
        assert "alone" in message, message
        message = expect_refusal("a later exchange of another dtype", lambda: grid.exchange(u.astype(np.float32)),
                                 [])
        assert "agreed on float64" in message, message
    expect_refusal("checks that do not exist", lambda: gkm.Cartesian(WORLD, (8,), checks="sometimes"), [])
    grid.free()


def case_finite_differences():
    """The P-rank gradient of L = sum over ranks of E_r against central differences along a random
    direction (float64), summed over ranks."""
    shape, ghosts, periodic, cd = CONFIGS["2d-9point"]
    grid = gkm.Cartesian(WORLD, shape, ghosts=ghosts, periodic=periodic)
    u0, v0 = initial(shape, ghosts, 3)
    u, v = window(grid, u0).copy(), window(grid, v0).copy()
    rng = np.random.default_rng(40 + RANK)
    pu, pv, pc = rng.standard_normal(u.shape), rng.standard_normal(v.shape), 0.7

    def loss(eps):
        E = np.zeros(1)
        simulate(u + eps * pu, v + eps * pv, E, 0.15 + eps * pc, grid, cd, False)
        return WORLD.allreduce(E[0])
    du, dv = grid.zeros(), grid.zeros()
    got = gk.autodiff(simulate, gk.Duplicated(u.copy(), du), gk.Duplicated(v.copy(), dv),
                      gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.15), grid, cd, False)
    analytic = WORLD.allreduce(float(np.vdot(du, pu) + np.vdot(dv, pv) + got[3] * pc))
    eps = 1e-6
    numeric = (loss(eps) - loss(-eps)) / (2 * eps)
    assert abs(analytic - numeric) <= 1e-6 * max(1.0, abs(numeric)), f"FD {numeric!r} vs analytic {analytic!r}"
    grid.free()


@gk.kernel
def weighted_sum(s, w, E):
    i = gk.tid()
    gk.atomic_add(E, 0, w * s[i] * s[i])


def case_allreduce_seeding():
    """The seeding table (docs/distributed.md#seeding): x_r on every rank, s = sum over ranks of x_r,
    E_r = w_r * sum(s^2). Seeded dE_r on each rank, dx_r = 2 s * sum_r(w_r * dE_r), the same on every rank."""
    rng = np.random.default_rng(5)
    xs = rng.standard_normal((SIZE, 4))
    s = xs.sum(axis=0)
    table = {  # (w_r, dE_r) -> expected dx_r
        "replicated loss, seeded on rank 0": (1.0, 1.0 if RANK == 0 else 0.0, 2 * s),
        "replicated loss, seeded on every rank (P times the loss)": (1.0, 1.0, 2 * SIZE * s),
        "per-rank losses, seeded on every rank": (RANK + 1.0, 1.0, 2 * s * SIZE * (SIZE + 1) / 2),
    }
    for label, (w, seed, want) in table.items():
        for in_place in (False, True):
            def program(x, out, E, w=w, in_place=in_place):
                target = gkm.allreduce(x) if in_place else gkm.allreduce(x, out)
                gk.launch(weighted_sum, 4, target, w, E)
            x, dx = xs[RANK].copy(), np.zeros(4)
            out, dout = np.zeros(4), np.zeros(4)
            gk.autodiff(program, gk.Duplicated(x, dx), gk.Duplicated(out, dout), gk.Duplicated(np.zeros(1),
                                                                                            np.array([seed])))
            close(dx, want, f"allreduce {label} (in place: {in_place})", rtol=1e-13)
            assert not np.any(dout), "out's adjoint must be zero after the reverse"
    def replicated(x, out, E):
        gkm.allreduce(x, out)
        gk.launch(weighted_sum, 4, out, 1.0, E)
    lanes = [np.zeros(4), np.zeros(4)]  # vector mode: two seeds on rank 0 (and in place, as a program of it)
    seeds = tuple(np.array([k + 1.0 if RANK == 0 else 0.0]) for k in range(2))
    gk.autodiff(replicated, gk.BatchDuplicated(xs[RANK].copy(), tuple(lanes)),
                gk.BatchDuplicated(np.zeros(4), (np.zeros(4), np.zeros(4))), gk.BatchDuplicated(np.zeros(1), seeds))
    for k in range(2):
        close(lanes[k], 2 * s * (k + 1), f"allreduce vector mode lane {k}", rtol=1e-13)
    x, tx = xs[RANK].copy(), np.full(4, RANK + 1.0)
    gk.autodiff(lambda a: gkm.allreduce(a), gk.Duplicated(x, tx), mode=gk.Forward)
    close(tx, np.full(4, SIZE * (SIZE + 1) / 2), "allreduce in place, forward tangent", rtol=1e-13)
    x, tx, out, tout = xs[RANK].copy(), np.full(4, RANK + 1.0), np.zeros(4), np.zeros(4)
    gk.autodiff(lambda a, b: gkm.allreduce(a, b), gk.Duplicated(x, tx), gk.Duplicated(out, tout), mode=gk.Forward)
    close(out, s, "allreduce forward primal", rtol=1e-13)
    close(tout, np.full(4, SIZE * (SIZE + 1) / 2), "allreduce forward tangent", rtol=1e-13)
    try:
        gkm.allreduce(np.ones(2), op=MPI.MAX)
    except gk.RuleError:
        pass
    else:
        raise AssertionError("allreduce with op=MPI.MAX was not refused")


REFUSED = []  # the errors expect_refusal caught


def exchanging_loop(u, grid, snapshots, memory=None):
    """A checkpointed loop of exchanges (`memory`: memory= instead of snapshots=)."""
    def step(t):
        grid.exchange(u)
    if memory is not None:
        gk.checkpointed_loop(step, 4, memory=memory)
    else:
        gk.checkpointed_loop(step, 4, snapshots=snapshots)


def expect_refusal(what, call, arrays):
    before = [a.copy() for a in arrays]
    try:
        call()
    except gk.GradkernError as e:
        message = str(e)
        REFUSED.append(e)
    else:
        raise AssertionError(f"{what}: not refused on rank {RANK}")
    for a, b in zip(arrays, before):
        assert np.array_equal(a, b), f"{what}: an array changed on rank {RANK}"
    return message


def case_refusals():
    """Every refusal raises a GradkernError on every rank, before any buffer changes."""
    last = SIZE - 1
    grid = gkm.Cartesian(WORLD, (9, 8), ghosts=1, periodic=(True, False))
    u = np.random.default_rng(RANK).random(grid.padded_shape)
    bad = u if RANK != last else np.zeros((3, 3))
    expect_refusal("exchange of a wrong shape", lambda: grid.exchange(bad), [u])
    odd = u if RANK != last else u.astype(np.float32)
    if SIZE > 1:  # one rank's float32 is a mismatch only beside another rank's float64
        expect_refusal("exchange of another dtype", lambda: grid.exchange(odd), [u])
    du = np.random.default_rng(RANK + 9).random(grid.padded_shape)
    arg = u if RANK != last else u[:-1]
    shadow = du if RANK != last else du[:-1]
    expect_refusal("a program's exchange of a wrong shape",
                   lambda: gk.autodiff(lambda a: grid.exchange(a), gk.Duplicated(arg, shadow)), [u, du])
    expect_refusal("ghosts larger than a block", lambda: gkm.Cartesian(WORLD, (2 * SIZE,), ghosts=3), [])
    shape = (9, 7) if RANK != last else (9, 8)
    if SIZE > 1:
        message = expect_refusal("global shapes that differ", lambda: gkm.Cartesian(WORLD, shape), [])
        assert "disagree" in message, message
    expect_refusal("dims that do not fit", lambda: gkm.Cartesian(WORLD, (8, 8), dims=(SIZE + 1, 1)), [])
    expect_refusal("a non-communicator", lambda: gkm.Cartesian("world", (8, 8)), [])
    if SIZE > 1:
        snapshots = 2 if RANK != last else 3
        message = expect_refusal("checkpointed schedules that differ", lambda: gk.autodiff(
            exchanging_loop, gk.Duplicated(u, du), grid, snapshots), [u, du])
        assert "different schedules" in message and isinstance(REFUSED[-1], gk.ProgramError), message
    message = expect_refusal("memory= in a loop that exchanges", lambda: gk.autodiff(
        exchanging_loop, gk.Duplicated(u, du), grid, None, 10**6), [u, du])
    assert "takes memory=" in message and isinstance(REFUSED[-1], gk.ProgramError), message
    x = np.ones(3 if RANK != last else 4)
    if SIZE > 1:
        expect_refusal("allreduce of different sizes", lambda: gkm.allreduce(x), [x])
    expect_refusal("allreduce into a wrong out", lambda: gkm.allreduce(x, np.zeros(7)), [x])
    grid.free()


CASES = {name[5:]: f for name, f in globals().items() if name.startswith("case_")}


REFERENCE = None  # where the single-process derivatives are kept between jobs (main's out_dir/../reference)


def main(out_dir: str, names: list[str]) -> None:
    global REFERENCE
    # the cases of mpi_cases2.py and mpi_cases3.py (which import this module as mpi_cases: the running copy, not a
    # second one) run in these jobs too
    sys.modules.setdefault("mpi_cases", sys.modules[__name__])
    import mpi_cases2
    import mpi_cases3
    CASES.update(mpi_cases2.CASES)
    CASES.update(mpi_cases3.CASES)
    REFERENCE = os.path.join(os.path.dirname(os.path.abspath(out_dir)), "reference")
    if RANK == 0:
        os.makedirs(REFERENCE, exist_ok=True)
    run_cases(CASES, out_dir, names, RANK, timed=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
