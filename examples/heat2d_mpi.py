"""2-D heat equation on MPI ranks: recover the initial temperature from the final one, the gradient distributed.

A domain-decomposed inverse problem (docs/distributed.md). The global grid of
nx x ny cells, periodic in y and with fixed (zero) temperatures beyond the x
edges, is split over the MPI ranks by `gradkern.mpi.Cartesian`; each rank
owns a block with one ghost layer. Every time step exchanges the halo
(`grid.exchange`, a custom rule) and runs the explicit 5-point step

    u_new = u + c (u[i-1,j] + u[i+1,j] + u[i,j-1] + u[i,j+1] - 4 u)

on the owned cells, inside a `gk.checkpointed_loop`: the library kernel
`gradkern.kernels.heat_step_2d` launched over the padded block steps its
interior (the owned cells) and copies its edge (the ghosts). The misfit
E = 1/2 sum (u_T - obs)^2 is summed over ranks: each rank seeds its own part.
`gk.autodiff` of a rank's program gives that rank's block of dE/du_0: the
reverse sweep sends the ghost cells' adjoints back to their owners.

The gradient on P ranks is checked once against the single-process gradient
of the gathered global problem (rank 0 solves it on a grid over
MPI.COMM_SELF) and against central finite differences along a random
direction; then gradient descent with Barzilai-Borwein steps (their dot
products summed over ranks) recovers u_0 from a zero start. Rank 0 prints,
gathers the fields and writes heat2d_mpi.png (true, recovered initial
temperature, the first gradient, the misfit curve) into --out. Exits 1 if a
check fails or the misfit did not fall below half its first value.

    mpiexec -n 4 python -m mpi4py examples/heat2d_mpi.py       # on 4 ranks (needs the mpi extra)
    python -m gradkern demo heat2d_mpi --quick --out /tmp       # one process (the smoke test)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import gradkern as gk
from gradkern.kernels import heat_step_2d


@gk.kernel
def misfit(u, obs, E):
    """E[0] += 1/2 sum over the owned cells of (u - obs)^2."""
    i, j = gk.tid()
    d = u[i + 1, j + 1] - obs[i, j]
    gk.atomic_add(E, 0, 0.5 * d * d)


def model(u, v, obs, E, grid, c, steps, snapshots):
    """The program: `steps` double steps u -> v -> u, each after a halo exchange, then this rank's misfit."""
    def step(t):
        grid.exchange(u)
        gk.launch(heat_step_2d, grid.padded_shape, u, v, c)  # the owned cells stepped, the ghosts copied
        grid.exchange(v)
        gk.launch(heat_step_2d, grid.padded_shape, v, u, c)
    gk.checkpointed_loop(step, steps, snapshots=snapshots)
    gk.launch(misfit, grid.local_shape, u, obs, E)


class Problem:
    """The forward model and its gradient on one grid (a rank's block of the global problem)."""

    def __init__(self, grid, obs, c: float, steps: int, snapshots: int):
        self.grid, self.obs, self.c, self.steps, self.snapshots = grid, obs, c, steps, snapshots

    def _blocks(self, u0_owned):
        u, v = self.grid.zeros(), self.grid.zeros()
        self.grid.owned(u)[...] = u0_owned
        return u, v

    def misfit(self, u0_owned) -> float:
        u, v = self._blocks(u0_owned)
        E = np.zeros(1)
        model(u, v, self.obs, E, self.grid, self.c, self.steps, self.snapshots)
        return self.grid.comm.allreduce(float(E[0]))

    def gradient(self, u0_owned) -> tuple[float, np.ndarray]:
        """(E summed over ranks, this rank's owned block of dE/du0)."""
        u, v = self._blocks(u0_owned)
        du, dv, E = self.grid.zeros(), self.grid.zeros(), np.zeros(1)
        gk.autodiff(model, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Const(self.obs),
                    gk.Duplicated(E, np.ones(1)), self.grid, self.c, self.steps, self.snapshots)
        return self.grid.comm.allreduce(float(E[0])), self.grid.owned(du).copy()

    def observe(self, u0_owned) -> np.ndarray:
        u, v = self._blocks(u0_owned)
        model(u, v, self.obs, np.zeros(1), self.grid, self.c, self.steps, self.snapshots)
        return self.grid.owned(u).copy()


def true_initial(nx: int, ny: int) -> np.ndarray:
    x, y = np.meshgrid(np.linspace(0, 1, nx), np.linspace(0, 1, ny), indexing="ij")
    return np.exp(-((x - 0.35) ** 2 + (y - 0.4) ** 2) / 0.02) + 0.6 * np.exp(-((x - 0.7) ** 2 + (y - 0.75) ** 2)
                                                                           / 0.01)


def check(problem: Problem, u0: np.ndarray, obs_global: np.ndarray, say) -> bool:
    """The P-rank gradient against rank 0's single-process gradient of the global problem, and against central
    finite differences along a random direction (summed over ranks)."""
    from mpi4py import MPI

    import gradkern.mpi as gkm

    grid = problem.grid
    _, g = problem.gradient(u0)
    gathered = grid.gather(_pad(grid, g))
    u0_global = grid_global(grid, u0)  # collective: every rank, before rank 0 works alone
    ok = True
    if grid.comm.rank == 0:
        whole = gkm.Cartesian(MPI.COMM_SELF, grid.shape, ghosts=1, periodic=grid.periodic)
        single = Problem(whole, obs_global, problem.c, problem.steps, problem.snapshots)
        _, g1 = single.gradient(u0_global)
        err = float(np.max(np.abs(gathered - g1)) / np.max(np.abs(g1)))
        say(f"gradient on {grid.comm.size} rank(s) vs one process: max relative difference {err:.2e}")
        ok = err <= 1e-10
        whole.free()
    ok = grid.comm.bcast(ok)
    rng = np.random.default_rng(100 + grid.comm.rank)
    direction = rng.standard_normal(u0.shape)
    eps = 1e-4
    numeric = (problem.misfit(u0 + eps * direction) - problem.misfit(u0 - eps * direction)) / (2 * eps)
    analytic = grid.comm.allreduce(float(np.vdot(g, direction)))
    rel = abs(numeric - analytic) / max(abs(numeric), 1e-30)
    say(f"finite differences: {numeric:.10e}, gradient: {analytic:.10e} (relative difference {rel:.1e})")
    return ok and rel <= 1e-6


def _pad(grid, owned):
    block = grid.zeros()
    grid.owned(block)[...] = owned
    return block


def grid_global(grid, owned):
    """The global array of every rank's owned block, on every rank (for rank 0's single-process check)."""
    gathered = grid.gather(_pad(grid, owned))
    if gathered is None:
        gathered = np.empty(grid.shape)
    grid.comm.Bcast(gathered)  # a buffer, not a pickle
    return gathered


def descend(problem: Problem, u0, iterations: int, say) -> tuple[np.ndarray, list[float], np.ndarray]:
    """Gradient descent with Barzilai-Borwein steps (dot products summed over ranks)."""
    comm = problem.grid.comm
    E, g = problem.gradient(u0)
    first_gradient, history = g.copy(), [E]
    step = 1.0 / max(np.sqrt(comm.allreduce(float(np.vdot(g, g)))), 1e-30)
    for k in range(iterations):
        u_next = u0 - step * g
        E_next, g_next = problem.gradient(u_next)
        s, y = u_next - u0, g_next - g
        sy = comm.allreduce(float(np.vdot(s, y)))
        ss = comm.allreduce(float(np.vdot(s, s)))
        step = ss / sy if sy > 0 else step
        u0, g, E = u_next, g_next, E_next
        history.append(E)
        if k % 5 == 4 or k == iterations - 1:
            say(f"iteration {k + 1}: misfit {E:.6e}")
    return u0, history, first_gradient


def plot(path: Path, truth, recovered, gradient, history, ranks: int) -> None:
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no PNG written")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(17, 4), layout="constrained")
    fig.suptitle(f"2-D heat equation on {ranks} MPI rank(s): the initial temperature recovered")
    for ax, field, title in ((axes[0], truth, "true u_0"), (axes[1], recovered, "recovered u_0"),
                             (axes[2], gradient, "first gradient dE/du_0")):
        im = ax.imshow(field.T, origin="lower", cmap="RdBu_r" if ax is axes[2] else "inferno")
        fig.colorbar(im, ax=ax, shrink=0.8)
        ax.set(title=title, xlabel="x (fixed ends)", ylabel="y (periodic)")
    axes[3].semilogy(history, "o-")
    axes[3].set(title="misfit", xlabel="iteration")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nx", type=int, default=96, help="cells along x")
    parser.add_argument("--ny", type=int, default=64, help="cells along y")
    parser.add_argument("--steps", type=int, default=20, help="double time steps")
    parser.add_argument("--snapshots", type=int, default=4, help="checkpoints of the time loop")
    parser.add_argument("--iterations", type=int, default=30, help="descent iterations")
    parser.add_argument("--quick", action="store_true", help="24 x 16 cells, 6 steps, 10 iterations (smoke test)")
    parser.add_argument("--out", default=".", help="folder of the PNG")
    args = parser.parse_args(argv)
    if args.quick:
        args.nx, args.ny, args.steps, args.iterations = 24, 16, 6, 10
    from mpi4py import MPI

    import gradkern.mpi as gkm

    grid = gkm.Cartesian(MPI.COMM_WORLD, (args.nx, args.ny), ghosts=1, periodic=(False, True))
    rank0 = grid.comm.rank == 0

    def say(text: str) -> None:
        if rank0:
            print(text, flush=True)
    say(f"{args.nx} x {args.ny} cells on {grid.comm.size} rank(s) (dims {grid.dims}), {args.steps} double steps")
    truth_global = true_initial(args.nx, args.ny)
    truth = truth_global[tuple(slice(s, s + n) for s, n in zip(grid.start, grid.local_shape))].copy()
    problem = Problem(grid, np.zeros(grid.local_shape), 0.2, args.steps, args.snapshots)
    problem.obs = problem.observe(truth)
    obs_global = grid_global(grid, problem.obs)
    start = time.perf_counter()
    ok = check(problem, np.zeros(grid.local_shape) + 0.1, obs_global, say)
    recovered, history, first_gradient = descend(problem, np.zeros(grid.local_shape), args.iterations, say)
    say(f"{args.iterations} iterations in {time.perf_counter() - start:.1f} s")
    say(f"misfit fell: {history[0]:.6e} -> {history[-1]:.6e}")
    recovered_global = grid.gather(_pad(grid, recovered))
    gradient_global = grid.gather(_pad(grid, first_gradient))
    if rank0:
        plot(Path(args.out) / "heat2d_mpi.png", truth_global, recovered_global, gradient_global, history,
             grid.comm.size)
    fell = history[-1] < 0.5 * history[0]
    grid.free()
    return 0 if ok and fell else 1


if __name__ == "__main__":
    sys.exit(main())
