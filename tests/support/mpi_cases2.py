"""More cases of gradkern.mpi (red team, session 51), run by tests/support/mpi_cases.py's jobs (its CASES take these
too, so `mpiexec -n P python -m mpi4py tests/support/mpi_cases.py OUT [NAME...]` runs both files' cases on P = 1 … 4
in tests/mpi/test_mpi.py's four jobs, no new job): wider stencils (ghosts = 2 and 3, a fourth-order Laplacian, a
27-point 3-D stencil whose gradient needs the corners), `dims=` given, one cell per rank, a periodic axis of one
rank, float32, non-contiguous blocks, the same array exchanged twice, a Const array exchanged inside a program,
checkpointed loops under five schedules; every mode against the single-process derivatives of the global problem;
finite differences and the dot-product test on P ranks; docs/distributed.md's code blocks run verbatim on P ranks;
refusals on every rank (schedules that differ in a loop that only allreduces, an op refused on one rank, an
exchange differentiated on some ranks only).
"""

from __future__ import annotations

import os
import re

import mpi_cases as mc
import numpy as np
from checkpoint_schedules import (
    MixedCheckpointSchedule,
    MultistageCheckpointSchedule,
    SingleMemoryStorageSchedule,
    TwoLevelCheckpointSchedule,
)
from mpi4py import MPI

import gradkern as gk
import gradkern.mpi as gkm

WORLD = MPI.COMM_WORLD
RANK, SIZE = WORLD.rank, WORLD.size
T = 3  # time steps


@gk.kernel
def lap4_1d(u, v, c, s0):
    """ghosts = 2: the fourth-order 5-point Laplacian, u[i +- 2]."""
    i = gk.tid()
    a = i + 2
    w = 1.0 + 0.3 * gk.sin(0.7 * (i + s0))
    uc = u[a]
    lap = (-u[a - 2] + 16.0 * u[a - 1] - 30.0 * uc + 16.0 * u[a + 1] - u[a + 2]) / 12.0
    v[a] = uc + c * w * lap - 0.1 * uc * uc * uc


@gk.kernel
def lap4_2d(u, v, c, s0, s1):
    """ghosts = 2: the fourth-order 9-point cross Laplacian in 2-D."""
    i, j = gk.tid()
    a = i + 2
    b = j + 2
    w = 1.0 + 0.3 * gk.sin(0.7 * (i + s0) + 0.4 * (j + s1))
    uc = u[a, b]
    lx = -u[a - 2, b] + 16.0 * u[a - 1, b] - 30.0 * uc + 16.0 * u[a + 1, b] - u[a + 2, b]
    ly = -u[a, b - 2] + 16.0 * u[a, b - 1] - 30.0 * uc + 16.0 * u[a, b + 1] - u[a, b + 2]
    v[a, b] = uc + c * w * (lx + ly) / 12.0 - 0.1 * uc * uc * uc


@gk.kernel
def box27(u, v, c, s0, s1, s2):
    """ghosts = 1: all 26 neighbours, the 8 corners among them (three hops of the exchange)."""
    i, j, k = gk.tid()
    a = i + 1
    b = j + 1
    e = k + 1
    w = 1.0 + 0.3 * gk.sin(0.7 * (i + s0) + 0.4 * (j + s1) + 0.2 * (k + s2))
    uc = u[a, b, e]
    acc = 0.0
    for m in range(-1, 2):
        for n in range(-1, 2):
            for q in range(-1, 2):
                acc += (u[a + m, b + n, e + q] - uc) / (1.0 + m * m + n * n + q * q)
    v[a, b, e] = uc + c * w * acc - 0.1 * uc * uc * uc


@gk.kernel
def heat_kappa(u, v, kap, c, s0):
    """ghosts = 1, a conductivity field read at the neighbour (kap[a + 1]): exchanged, and Const."""
    i = gk.tid()
    a = i + 1
    uc = u[a]
    v[a] = uc + c * (kap[a + 1] * (u[a + 1] - uc) - kap[a] * (uc - u[a - 1])) - 0.05 * (i + s0) * uc * uc


def _heat1(grid, a, b, c):
    gk.launch(mc.heat1, grid.local_shape, a, b, c, *grid.start, grid.ghosts)


def _heat2(grid, a, b, c):  # the 9-point stencil (corners in two hops)
    gk.launch(mc.heat2, grid.local_shape, a, b, c, 0.5, *grid.start, grid.ghosts)


def _launcher(kernel):
    def launch(grid, a, b, c):
        gk.launch(kernel, grid.local_shape, a, b, c, *grid.start)
    return launch


CONFIGS = {  # name: (shape, ghosts, periodic, dims, step)
    "1d-5point-g2": ((11,), 2, False, None, _launcher(lap4_1d)),
    "1d-g3": ((13,), 3, True, None, _heat1),
    "1d-one-cell": ((SIZE,), 1, True, None, _heat1),  # every rank owns one cell; P = 1: the rank its own neighbour
    "2d-lap4-g2": ((9, 10), 2, (False, True), None, _launcher(lap4_2d)),
    "2d-dims-row": ((7, 9), 1, (True, False), (1, SIZE), _heat2),  # a periodic axis of one rank, dims given
    "3d-27point": ((5, 4, 6), 1, (False, True, False), None, _launcher(box27)),
    "3d-dims-slabs": ((4, 5, 8), 1, True, (1, 1, SIZE), _launcher(box27)),  # two periodic axes of one rank
}

LOOPS = {  # name: (snapshots, the schedule, made fresh for every loop: schedules are single-use)
    "binomial": (2, lambda: None),
    "mixed": (2, lambda: MixedCheckpointSchedule(T, 2)),
    "multistage": (2, lambda: MultistageCheckpointSchedule(T, 2, 0)),
    "two-level": (2, lambda: TwoLevelCheckpointSchedule(2, 2)),
    "store-all": (T, lambda: SingleMemoryStorageSchedule()),
}


def simulate(u, v, E, c, grid, step, loop=None, twice=False):
    """T steps u -> v -> u, each half step exchanging then stepping (`twice`: exchanging twice), then this
    rank's part of the energy."""
    def half(a, b):
        grid.exchange(a)
        if twice:
            grid.exchange(a)
        step(grid, a, b, c)

    def one(t):
        half(u, v)
        half(v, u)
    if loop is not None:
        snapshots, schedule = LOOPS[loop]
        gk.checkpointed_loop(one, T, snapshots=snapshots, schedule=schedule())
    else:
        for t in range(T):
            one(t)
    mc.energy(grid, u, E)


def derivatives(gr, name, modes, dtype=np.float64, layout="C", loop=None, twice=False):
    """The derivatives of `simulate` on grid `gr` (arrays gathered padded on its rank 0, scalars summed)."""
    shape, ghosts, periodic, dims, step = CONFIGS[name]
    u0, v0 = (a.astype(dtype) for a in mc.initial(shape, ghosts, 7))
    u, v = gr.zeros(dtype), gr.zeros(dtype)
    gr.scatter(u0 if gr.comm.rank == 0 else None, u)
    gr.scatter(v0 if gr.comm.rank == 0 else None, v)
    rng = np.random.default_rng(11)
    tu_all = rng.standard_normal(u0.shape).astype(dtype)

    def block(a):  # the layout under test: C order, Fortran order, or a strided view of a wider array
        if layout == "F":
            return np.asfortranarray(a)
        if layout == "strided":
            wide = np.zeros(a.shape + (2,), dtype=a.dtype)
            wide[..., 1] = a
            return wide[..., 1]
        return a.copy()
    inner = np.ones(gr.padded_shape, bool)
    mc.edges(gr, inner)[...] = False
    out, c = {}, 0.15
    if "reverse" in modes:
        du, dv, E = block(gr.zeros(dtype)), block(gr.zeros(dtype)), np.zeros(1, dtype)
        got = gk.autodiff(simulate, gk.Duplicated(block(u), du), gk.Duplicated(block(v), dv),
                          gk.Duplicated(E, np.ones(1, dtype)), gk.Active(c), gr, step, loop, twice)
        for key, a in (("du", du), ("dv", dv)):
            assert not np.any(a[inner]), f"{name}: {key} is non-zero on interior ghosts on rank {RANK}"
            out[key] = gr.gather(a, padded=True)
        out["dc"] = gr.comm.allreduce(got[3])
        out["E"] = gr.comm.allreduce(float(E[0]))
    if "split" in modes:
        du, dv = gr.zeros(dtype), gr.zeros(dtype)
        args = (gk.Duplicated(u.copy(), du), gk.Duplicated(v.copy(), dv),
                gk.Duplicated(np.zeros(1, dtype), np.ones(1, dtype)), gk.Active(c), gr, step, loop, twice)
        forward, reverse = gk.autodiff_thunk(simulate, *(type(a) if isinstance(a, gk.Annotation) else gk.Const
                                                         for a in args))
        got = reverse(*args, forward(*args))
        out["split du"] = gr.gather(du, padded=True)
        out["split dc"] = gr.comm.allreduce(got[3])
    if "forward" in modes:
        tE = np.zeros(1, dtype)
        gk.autodiff(simulate, gk.Duplicated(block(u), block(mc.window(gr, tu_all))),
                    gk.Duplicated(block(v), block(gr.zeros(dtype))), gk.Duplicated(np.zeros(1, dtype), tE),
                    gk.Duplicated(c, 0.5), gr, step, None, twice, mode=gk.Forward)
        out["tE"] = gr.comm.allreduce(float(tE[0]))
    if "vector" in modes:
        lanes = [(gr.zeros(dtype), gr.zeros(dtype), np.array([1.0 + k], dtype)) for k in range(2)]
        got = gk.autodiff(simulate, gk.BatchDuplicated(u.copy(), tuple(x[0] for x in lanes)),
                          gk.BatchDuplicated(v.copy(), tuple(x[1] for x in lanes)),
                          gk.BatchDuplicated(np.zeros(1, dtype), tuple(x[2] for x in lanes)), gk.Active(c), gr, step,
                          loop, twice)
        for k in range(2):
            out[f"du lane {k}"] = gr.gather(lanes[k][0], padded=True)
            out[f"dc lane {k}"] = gr.comm.allreduce(float(got[3][k]))
    return out


def grid_of(name, comm):
    shape, ghosts, periodic, dims, _ = CONFIGS[name]
    return gkm.Cartesian(comm, shape, ghosts=ghosts, periodic=periodic,
                         dims=dims if comm.size == SIZE else None)


def reference(name, modes, how):
    """The single-process derivatives, computed by the first job that needs them (P = 1) and kept in
    mc.REFERENCE for the later ones (the global shape is in the key: one configuration's depends on P)."""
    key = re.sub(r"[^A-Za-z0-9.=-]+", "_", f"{name}-{CONFIGS[name][0]}-{'-'.join(modes)}-{sorted(how.items())}")
    path = os.path.join(mc.REFERENCE, f"cases2-{key}.npz")
    if os.path.exists(path):
        with np.load(path) as data:
            return {k: data[k] for k in data.files}
    whole = grid_of(name, MPI.COMM_SELF)
    ref = derivatives(whole, name, modes, **how)
    whole.free()
    np.savez(path, **{k: np.asarray(v) for k, v in ref.items()})
    return ref


def against_one_process(name, modes=("reverse", "forward"), rtol=1e-11, **how):
    """The P-rank derivatives against those of the global problem on one process (a grid over MPI.COMM_SELF,
    computed on rank 0); rank 0's verdict is every rank's."""
    grid = grid_of(name, WORLD)
    mine = derivatives(grid, name, modes, **how)
    verdict = None
    if RANK == 0:
        ref = reference(name, modes, how)
        try:
            for key in ref:
                mc.close(mine[key], ref[key], f"{name} {how}: {key}", rtol=rtol)
        except AssertionError as e:
            verdict = str(e)
    verdict = WORLD.bcast(verdict)
    grid.free()
    assert verdict is None, verdict


# -- cases ------------------------------------------------------------------------------------------------------------
def case_wide_and_corners():
    """ghosts = 2 and 3, one cell per rank, dims given, periodic axes of one rank, the 27-point stencil: reverse
    (and forward) mode on P ranks equal the single-process derivatives (mc.close's float64 bound)."""
    for name in CONFIGS:  # forward mode on three (tests/support/mpi_cases.py tests it on every one of its own)
        against_one_process(name, modes=("reverse", "forward") if name in FORWARD else ("reverse",))


FORWARD = ("1d-g3", "2d-lap4-g2", "3d-27point")


def case_modes_and_layouts():
    """Vector and split modes; Fortran-order and strided (non-contiguous) blocks; the same array exchanged
    twice in a step; float32 (against float32 on one process)."""
    against_one_process("3d-27point", modes=("vector", "split"))
    against_one_process("2d-lap4-g2", modes=("reverse",), layout="F")
    against_one_process("3d-27point", modes=("reverse",), layout="strided")
    against_one_process("1d-g3", twice=True)
    # float32: the P ranks add a cell's adjoint terms in another order than one process. Each adjoint is a
    # chain of 2T = 6 half steps of at most 27 terms each, so at most ~160 roundings of 2^-24 relative to the
    # largest value (1e-5); 5e-5 leaves a margin of 5, while a lost or doubled halo term is O(1).
    against_one_process("3d-27point", modes=("reverse",), rtol=5e-5, dtype=np.float32)


def case_checkpointed_schedules():
    """A checkpointed loop whose steps exchange, under five schedules: the single-process gradient."""
    for loop in LOOPS:
        against_one_process("1d-5point-g2", modes=("reverse",), loop=loop)
    against_one_process("3d-dims-slabs", modes=("reverse",), loop="mixed")


def case_fd_and_dot():
    """The P-rank gradient of the 27-point code against central differences of the loss summed over ranks
    (float64, a random direction); the dot-product test of the exchange for every configuration."""
    name = "3d-27point"
    grid = grid_of(name, WORLD)
    shape, ghosts, _, _, step = CONFIGS[name]
    u0, v0 = mc.initial(shape, ghosts, 3)
    u, v = mc.window(grid, u0).copy(), mc.window(grid, v0).copy()
    rng = np.random.default_rng(40 + RANK)
    pu, pv, pc = rng.standard_normal(u.shape), rng.standard_normal(v.shape), 0.7

    def loss(eps):
        E = np.zeros(1)
        simulate(u + eps * pu, v + eps * pv, E, 0.15 + eps * pc, grid, step)
        return WORLD.allreduce(E[0])
    du, dv = grid.zeros(), grid.zeros()
    got = gk.autodiff(simulate, gk.Duplicated(u.copy(), du), gk.Duplicated(v.copy(), dv),
                      gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.15), grid, step)
    analytic = WORLD.allreduce(float(np.vdot(du, pu) + np.vdot(dv, pv) + got[3] * pc))
    eps = 1e-6
    numeric = (loss(eps) - loss(-eps)) / (2 * eps)
    # central differences: truncation O(eps^2 |f'''|) ~ 1e-12 and cancellation ~ 1e-16 |L| / eps ~ 1e-9 here
    # (L ~ 1e2 summed over ~10^2 cells); 1e-6 relative leaves a margin of 10^2 and catches any missing term
    assert abs(analytic - numeric) <= 1e-6 * max(1.0, abs(numeric)), f"FD {numeric!r} vs analytic {analytic!r}"
    grid.free()
    for name in CONFIGS:
        grid = grid_of(name, WORLD)
        rng = np.random.default_rng(100 + RANK)
        x, y = rng.standard_normal(grid.padded_shape), rng.standard_normal(grid.padded_shape)
        hx = x.copy()
        grid.exchange(hx)
        hty = y.copy()
        gk.autodiff(mc.exchange, gk.Duplicated(x.copy(), hty), grid)
        lhs, rhs = WORLD.allreduce(float(np.vdot(hx, y))), WORLD.allreduce(float(np.vdot(x, hty)))
        # both sides sum the same ~10^3 products in different orders: ~1e-13 relative (mc.case_dot_test)
        assert abs(lhs - rhs) <= 1e-13 * max(1.0, abs(lhs)), f"{name}: dot test {lhs!r} vs {rhs!r}"
        grid.free()


def kappa_program(u, v, kap, E, c, grid):
    """A Const conductivity exchanged inside the program, every step."""
    for t in range(T):
        for a, b in ((u, v), (v, u)):
            grid.exchange(kap)
            grid.exchange(a)
            gk.launch(heat_kappa, grid.local_shape, a, b, kap, c, *grid.start)
    mc.energy(grid, u, E)


def case_const_exchange():
    """A shadow-less (Const) array exchanged inside a reverse-mode program: the gradient of the others is the
    single-process one; the Const array's ghosts are filled as by a plain exchange."""
    shape, ghosts = (10,), 1
    results = []
    for comm in (WORLD, MPI.COMM_SELF) if RANK == 0 else (WORLD,):
        grid = gkm.Cartesian(comm, shape, ghosts=ghosts, periodic=False)
        u0, v0 = mc.initial(shape, ghosts, 5)
        k0 = 1.0 + np.random.default_rng(9).random(u0.shape)
        u, v, kap = grid.zeros(), grid.zeros(), grid.zeros()
        for a, b in ((u0, u), (v0, v), (k0, kap)):
            grid.scatter(a if grid.comm.rank == 0 else None, b)
        du, dv = grid.zeros(), grid.zeros()
        got = gk.autodiff(kappa_program, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Const(kap),
                          gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.1), grid)
        assert np.array_equal(kap, mc.window(grid, k0)), f"rank {RANK}: the Const array's block after exchanges"
        results.append((grid.gather(du, padded=True), grid.comm.allreduce(got[4])))
        grid.free()
    if RANK == 0:
        (du_p, dc_p), (du_1, dc_1) = results
        mc.close(du_p, du_1, "Const exchange: du")
        mc.close(dc_p, dc_1, "Const exchange: dc")


def case_docs_examples():
    """docs/distributed.md's Python blocks, verbatim, on P ranks (its own assert checks the seeding example);
    the heat example's dL/dc and gathered dL/du0 equal those of the P = 1 job (kept in mc.REFERENCE), and the
    interior ghosts' adjoints are zero, as the page says."""
    page = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "docs", "distributed.md")
    with open(page, encoding="utf-8") as f:
        blocks = re.findall(r"^```python\n(.*?)^```", f.read(), re.MULTILINE | re.DOTALL)
    namespace: dict = {"__name__": "distributed"}
    folder = os.path.join(mc.REFERENCE, f"docs-rank{RANK}-of-{SIZE}")
    os.makedirs(folder, exist_ok=True)
    for number, code in enumerate(blocks, 1):
        path = os.path.join(folder, f"distributed_block_{number}.py")  # gk.kernel reads the source from a file
        with open(path, "w", encoding="utf-8") as f:
            f.write(code)
        exec(compile(code, path, "exec"), namespace)
    grid, du = namespace["grid"], namespace["du"]
    inner = np.ones(grid.padded_shape, bool)
    mc.edges(grid, inner)[...] = False
    assert not np.any(du[inner]), f"rank {RANK}: du non-zero on interior ghosts"
    verdict = None
    if RANK == 0:
        path = os.path.join(mc.REFERENCE, "docs-heat.npz")
        if SIZE == 1:
            np.savez(path, dc=namespace["dc"], du0=namespace["dL_du0"])
        elif os.path.exists(path):
            with np.load(path) as ref:
                try:
                    mc.close(namespace["dc"], ref["dc"], "docs: dc")
                    mc.close(namespace["dL_du0"], ref["du0"], "docs: dL_du0")
                except AssertionError as e:
                    verdict = str(e)
        else:
            verdict = f"no P = 1 reference at {path} (run the P = 1 job first)"
    verdict = WORLD.bcast(verdict)
    assert verdict is None, verdict
    grid.free()


@gk.kernel
def zero_first(s):
    s[0] = 0.0


@gk.kernel
def square_sum(v, s):
    i = gk.tid()
    gk.atomic_add(s, 0, v[i + 1] * v[i + 1])


@gk.kernel
def rescale(v, S, u):
    i = gk.tid()
    u[i + 1] = v[i + 1] / (1.0 + 0.01 * S[0])


def normalised(u, v, s, S, E, c, grid, loop):
    """Each step: exchange, a heat step, then the field rescaled by its global norm (an allreduce in the step)."""
    def step(t):
        grid.exchange(u)
        _heat1(grid, u, v, c)
        gk.launch(zero_first, 1, s)
        gk.launch(square_sum, grid.local_shape, v, s)
        gkm.allreduce(s, S, comm=grid)
        gk.launch(rescale, grid.local_shape, v, S, u)
    if loop is None:
        for t in range(T):
            step(t)
    else:
        gk.checkpointed_loop(step, T, snapshots=LOOPS[loop][0], schedule=LOOPS[loop][1]())
    mc.energy(grid, u, E)


def case_allreduce_in_loop():
    """A checkpointed loop whose steps exchange and allreduce (recomputed by the schedule): the P-rank gradient
    equals the single-process gradient of the plain loop, under two schedules and in split mode; forward vector
    mode too."""
    shape = (10,)
    u0, v0 = mc.initial(shape, 1, 13)
    results = {}
    for label, comm, loop in (("binomial", WORLD, "binomial"), ("mixed", WORLD, "mixed"),
                              ("one process", MPI.COMM_SELF, None)):
        if comm is MPI.COMM_SELF and RANK != 0:
            continue
        grid = gkm.Cartesian(comm, shape, ghosts=1, periodic=False)
        u, v = grid.zeros(), grid.zeros()
        grid.scatter(u0 if grid.comm.rank == 0 else None, u)
        grid.scatter(v0 if grid.comm.rank == 0 else None, v)
        du, dv = grid.zeros(), grid.zeros()
        got = gk.autodiff(normalised, gk.Duplicated(u, du), gk.Duplicated(v, dv),
                          gk.Duplicated(np.zeros(1), np.zeros(1)), gk.Duplicated(np.zeros(1), np.zeros(1)),
                          gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.2), grid, loop)
        results[label] = [grid.gather(du, padded=True), grid.comm.allreduce(got[5])]
        if loop == "binomial":  # split mode: the augmented forward, then the reverse from its tape
            u, v, du = grid.zeros(), grid.zeros(), grid.zeros()
            grid.scatter(u0 if grid.comm.rank == 0 else None, u)
            grid.scatter(v0 if grid.comm.rank == 0 else None, v)
            args = (gk.Duplicated(u, du), gk.Duplicated(v, grid.zeros()), gk.Duplicated(np.zeros(1), np.zeros(1)),
                    gk.Duplicated(np.zeros(1), np.zeros(1)), gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.2),
                    grid, loop)
            forward, reverse = gk.autodiff_thunk(normalised, *(type(a) if isinstance(a, gk.Annotation) else gk.Const
                                                               for a in args))
            got = reverse(*args, forward(*args))
            results["split"] = [grid.gather(du, padded=True), grid.comm.allreduce(got[5])]
        if loop != "mixed":  # forward vector mode: two tangents through the exchanges and allreduces
            t0 = np.random.default_rng(3).standard_normal(u0.shape)
            u, v, tE = grid.zeros(), grid.zeros(), (np.zeros(1), np.zeros(1))
            grid.scatter(u0 if grid.comm.rank == 0 else None, u)
            grid.scatter(v0 if grid.comm.rank == 0 else None, v)
            lanes = tuple(mc.window(grid, k * t0).copy() for k in (1.0, 2.0))
            gk.autodiff(normalised, gk.BatchDuplicated(u, lanes), gk.BatchDuplicated(v, (grid.zeros(), grid.zeros())),
                        *(gk.BatchDuplicated(np.zeros(1), (np.zeros(1), np.zeros(1))) for _ in range(2)),
                        gk.BatchDuplicated(np.zeros(1), tE), gk.Const(0.2), grid, None, mode=gk.Forward)
            results[label].append([grid.comm.allreduce(float(t[0])) for t in tE])
        grid.free()
    if RANK == 0:
        one = results["one process"]
        for label in ("binomial", "mixed", "split"):
            mc.close(results[label][0], one[0], f"allreduce in a {label} loop: du")
            mc.close(results[label][1], one[1], f"allreduce in a {label} loop: dc")
        mc.close(results["binomial"][2], one[2], "allreduce in a loop: forward vector mode")


def reducing_loop(x, nsteps):
    """A checkpointed loop whose steps only allreduce (no exchange)."""
    def step(t):
        gkm.allreduce(x)
    gk.checkpointed_loop(step, nsteps, snapshots=2)


def case_refusals2():
    """Refused on every rank, before any buffer changes (ProgramError / RuleError / DistributedError)."""
    last = SIZE - 1
    grid = gkm.Cartesian(WORLD, (8,), ghosts=1, periodic=True)
    u, du = np.random.default_rng(RANK).random(grid.padded_shape), np.zeros(grid.padded_shape)
    x, dx = np.ones(2), np.zeros(2)
    if SIZE > 1:
        nsteps = 3 if RANK != last else 4
        message = mc.expect_refusal("a loop of allreduces whose nsteps differ", lambda: gk.autodiff(
            reducing_loop, gk.Duplicated(x, dx), nsteps), [x, dx])
        assert "different schedules" in message and isinstance(mc.REFUSED[-1], gk.ProgramError), message

        def exchanging(u, nsteps, schedule):
            gk.checkpointed_loop(lambda t: grid.exchange(u), nsteps, snapshots=2, schedule=schedule)
        message = mc.expect_refusal("a loop of exchanges whose nsteps differ", lambda: gk.autodiff(
            exchanging, gk.Duplicated(u, du), nsteps, None), [u, du])
        assert "different schedules" in message and isinstance(mc.REFUSED[-1], gk.ProgramError), message
        schedule = MixedCheckpointSchedule(3, 2) if RANK == last else None
        message = mc.expect_refusal("a loop of exchanges whose schedule classes differ", lambda: gk.autodiff(
            exchanging, gk.Duplicated(u, du), 3, schedule), [u, du])
        assert "MixedCheckpointSchedule" in message and isinstance(mc.REFUSED[-1], gk.ProgramError), message
        op = MPI.SUM if RANK != last else MPI.MAX
        message = mc.expect_refusal("allreduce with op=MPI.MAX on one rank", lambda op=op: gkm.allreduce(x, op=op), [x])
        want = gk.RuleError if RANK == last else gkm.DistributedError
        assert isinstance(mc.REFUSED[-1], want), (type(mc.REFUSED[-1]), message)

        def program(v, u):
            grid.exchange(v)
            grid.exchange(u)
        v, dv = u.copy(), du.copy()
        kind = gk.Const(v) if RANK == last else gk.Duplicated(v, dv)  # differentiated on some ranks only
        message = mc.expect_refusal("an exchange differentiated on some ranks only", lambda: gk.autodiff(
            program, kind, gk.Duplicated(u, du)), [v, dv, u, du])
        assert "some ranks only" in message, message

        def summed(x, out, E):
            gkm.allreduce(x, out)
            gk.launch(mc.weighted_sum, 2, out, 1.0, E)
        out, dout = np.zeros(2), np.zeros(2)
        kinds = (gk.Const(x), gk.Const(out)) if RANK == last else (gk.Duplicated(x, dx), gk.Duplicated(out, dout))
        message = mc.expect_refusal("an allreduce differentiated on some ranks only", lambda: gk.autodiff(
            summed, *kinds, gk.Duplicated(np.zeros(1), np.ones(1))), [x, dx, out, dout])
        assert "some ranks only" in message, message
    frozen = u.copy()  # read-only on the last rank: each call would write it there after its first messages
    frozen.flags.writeable = RANK != last
    mc.expect_refusal("exchange of a read-only block", lambda: grid.exchange(frozen), [frozen])
    mc.expect_refusal("allreduce into a read-only array", lambda: gkm.allreduce(u, frozen), [u, frozen])
    mc.expect_refusal("allreduce of a read-only array in place", lambda: gkm.allreduce(frozen), [frozen])
    mc.expect_refusal("scatter into a read-only block", lambda: grid.scatter(
        np.zeros(8) if RANK == 0 else None, frozen), [frozen])
    for op in (MPI.PROD, MPI.MAX, "sum"):
        mc.expect_refusal(f"allreduce with op={op!r}", lambda op=op: gkm.allreduce(x, op=op), [x])
        assert isinstance(mc.REFUSED[-1], gk.RuleError), type(mc.REFUSED[-1])
    assert np.array_equal(gkm.allreduce(x.copy(), op=MPI.SUM), np.full(2, float(SIZE)))
    mc.expect_refusal("ghosts larger than a block of a given dims", lambda: gkm.Cartesian(
        WORLD, (3 * SIZE, 8), ghosts=4, dims=(SIZE, 1)), [])
    grid.free()


CASES = {name[5:]: f for name, f in globals().items() if name.startswith("case_")}
