"""Initial-condition recovery for 2-D shallow water: find the initial hump from depth gauges.

A Gaussian hump of water, initially at rest, spreads over a periodic basin
(`gradkern.kernels.shallow_water_2d`: Rusanov fluxes, conservative). Gauges on
a regular grid of sensors record the depth h at a few times. Starting from a
flat basin, gradient descent on the misfit

    E(h0) = 1/2 sum over record times and sensors (h(t, sensor) - obs)^2

recovers the initial depth h0. The gradient dE/dh0 is one `gk.autodiff` of
the program "run the time loop, add the misfit at each record time", whose
loop is a `gk.checkpointed_loop` (a few snapshots of the state instead of
every step). It is checked once against central finite differences along a
random direction; the descent uses Barzilai-Borwein steps safeguarded by an
Armijo backtracking line search. Exits 1 if the check fails or the misfit did
not fall to below a tenth of its first value.

    python examples/shallow_water_ic.py              # 64 x 64 cells, 80 steps
    python examples/shallow_water_ic.py --quick      # 24 x 24 cells, 16 steps (the smoke test)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import gradkern as gk
from gradkern.kernels import l2_misfit_2d, shallow_water_2d

G = 9.81


def simulate(h, hu, hv, hn, hun, hvn, rows, cols, obs, E, g, c, records, every, snapshots):
    """The program: `records * every` pairs of steps (h -> hn -> h, ping-pong), adding the misfit of
    h at the sensors against obs[r] after every `every` pairs; h, hu, hv end as the final state."""
    shape = h.shape

    def pair(t):
        gk.launch(shallow_water_2d, shape, h, hu, hv, hn, hun, hvn, g, c)
        gk.launch(shallow_water_2d, shape, hn, hun, hvn, h, hu, hv, g, c)
        if (t + 1) % every == 0:
            gk.launch(l2_misfit_2d, rows.shape[0], h, rows, cols, obs[(t + 1) // every - 1], E)

    gk.checkpointed_loop(pair, records * every, snapshots=snapshots)


class Basin:
    """The forward model on n x n cells of a unit periodic basin, still water initially."""

    def __init__(self, n: int, steps: int, records: int, sensors_every: int, snapshots: int):
        assert steps % (2 * records) == 0, "steps must be a multiple of 2 * records"
        self.n, self.records, self.every, self.snapshots = n, records, steps // (2 * records), snapshots
        self.c = 0.1  # dt/dx: c (|u| + |v| + 2 sqrt(g h)) < 1 for depths up to ~1.5
        idx = np.arange(sensors_every // 2, n, sensors_every)
        self.rows, self.cols = (a.ravel().astype(np.int64) for a in np.meshgrid(idx, idx, indexing="ij"))

    def _arrays(self, h0: np.ndarray) -> list:
        z = np.zeros_like(h0)
        return [h0.copy(), z.copy(), z.copy(), z.copy(), z.copy(), z.copy()]

    def observe(self, h0: np.ndarray) -> np.ndarray:
        """The gauges' records of the true run: (records, sensors)."""
        obs = np.zeros((self.records, self.rows.size))
        state = self._arrays(h0)
        for r in range(self.records):
            simulate(*state, self.rows, self.cols, np.zeros((1, self.rows.size)), np.zeros(1), G, self.c, 1,
                     self.every, self.snapshots)
            obs[r] = state[0][self.rows, self.cols]
        return obs

    def misfit(self, h0: np.ndarray, obs: np.ndarray) -> float:
        E = np.zeros(1)
        simulate(*self._arrays(h0), self.rows, self.cols, obs, E, G, self.c, self.records, self.every,
                 self.snapshots)
        return float(E[0])

    def gradient(self, h0: np.ndarray, obs: np.ndarray) -> tuple[float, np.ndarray]:
        """(E, dE/dh0) from one gk.autodiff of the program."""
        state, dh, E = self._arrays(h0), np.zeros_like(h0), np.zeros(1)
        gk.autodiff(simulate, gk.Duplicated(state[0], dh), *(gk.Const(a) for a in state[1:]), gk.Const(self.rows),
                    gk.Const(self.cols), gk.Const(obs), gk.Duplicated(E, np.ones(1)), gk.Const(G), gk.Const(self.c),
                    gk.Const(self.records), gk.Const(self.every), gk.Const(self.snapshots))
        return float(E[0]), dh


def true_initial_depth(n: int) -> np.ndarray:
    """Depth 1 and a hump of height 0.3 off the centre."""
    x = (np.arange(n) + 0.5) / n
    X, Y = np.meshgrid(x, x, indexing="ij")
    return 1.0 + 0.3 * np.exp(-((X - 0.4) ** 2 + (Y - 0.55) ** 2) / (2 * 0.08**2))


def check_gradient(basin: Basin, h0: np.ndarray, obs: np.ndarray, tolerance: float) -> bool:
    _, dh = basin.gradient(h0, obs)
    v = np.random.default_rng(1).standard_normal(h0.shape)
    eps = 1e-6
    fd = (basin.misfit(h0 + eps * v, obs) - basin.misfit(h0 - eps * v, obs)) / (2 * eps)
    got = float(np.sum(dh * v))
    rel = abs(got - fd) / max(abs(fd), 1e-300)
    print(f"gradient check: dE/dh0 . v  gradkern {got: .10e}  finite differences {fd: .10e}  "
          f"relative difference {rel:.1e}")
    return rel <= tolerance


def descend(basin: Basin, h0: np.ndarray, obs: np.ndarray, iterations: int,
            every: int) -> tuple[np.ndarray, list[float], np.ndarray]:
    """Gradient descent with Barzilai-Borwein steps (the first one a fraction of |h0| / |g|), each
    halved until the Armijo condition holds. Returns the last iterate, the misfit at every iterate
    and the first gradient."""
    p, history = h0.copy(), []
    J, g = basin.gradient(p, obs)
    first_gradient = g.copy()
    step = 0.05 / max(float(np.abs(g).max()), 1e-300)
    for k in range(iterations + 1):
        history.append(J)
        if k % every == 0 or k == iterations:
            print(f"  iteration {k:3d}  misfit {J:.6e}")
        if k == iterations or not g.any():
            break
        for _ in range(40):
            trial = p - step * g
            Jt = basin.misfit(trial, obs)
            if Jt <= J - 1e-4 * step * float(np.sum(g * g)):
                break
            step *= 0.5
        else:
            break  # no descent along -g: at the minimum to rounding
        Jn, gn = basin.gradient(trial, obs)
        s, y = trial - p, gn - g
        sy = float(np.sum(s * y))
        step = float(np.sum(s * s)) / sy if sy > 0 else 2 * step  # BB1
        p, J, g = trial, Jn, gn
    return p, history, first_gradient


def plot(path: Path, truth: np.ndarray, recovered: np.ndarray, gradient: np.ndarray, history: list[float],
         rows: np.ndarray, cols: np.ndarray) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no PNG written")
        return
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))
    lo, hi = float(min(truth.min(), recovered.min())), float(max(truth.max(), recovered.max()))
    for ax, data, title in ((axes[0], truth, "true initial depth h0"),
                            (axes[1], recovered, "recovered initial depth")):
        im = ax.imshow(data.T, origin="lower", vmin=lo, vmax=hi, cmap="viridis")
        ax.plot(rows, cols, "w.", markersize=3)
        ax.set_title(title)
        fig.colorbar(im, ax=ax, shrink=0.8)
    m = float(np.abs(gradient).max())
    im = axes[2].imshow(gradient.T, origin="lower", cmap="RdBu_r", vmin=-m, vmax=m)
    axes[2].set_title("dE/dh0 at the flat start")
    fig.colorbar(im, ax=axes[2], shrink=0.8)
    axes[3].semilogy(history, "o-", markersize=3)
    axes[3].set_xlabel("iteration")
    axes[3].set_title("misfit E")
    axes[3].grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=64, help="cells per side")
    parser.add_argument("--steps", type=int, default=80, help="time steps (a multiple of 2 * records)")
    parser.add_argument("--records", type=int, default=4, help="record times of the gauges")
    parser.add_argument("--iterations", type=int, default=30, help="descent iterations")
    parser.add_argument("--snapshots", type=int, default=6, help="checkpoints of the time loop")
    parser.add_argument("--quick", action="store_true", help="24 x 24 cells, 16 steps, 8 iterations (smoke test)")
    parser.add_argument("--out", default=".", help="folder of the PNG")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.steps, args.records, args.iterations = 24, 16, 2, 8
    t0 = time.perf_counter()

    basin = Basin(args.n, args.steps, args.records, sensors_every=4, snapshots=args.snapshots)
    truth = true_initial_depth(args.n)
    obs = basin.observe(truth)
    print(f"shallow water: {args.n} x {args.n} periodic cells, {args.steps} steps of c = dt/dx = {basin.c}, "
          f"{basin.rows.size} gauges recording h at {args.records} times")
    start = np.ones_like(truth)  # a flat basin at the mean depth of still water
    ok = check_gradient(basin, start + 0.05 * truth, obs, tolerance=1e-5)
    print(f"recovering the initial depth (gradient descent, {args.iterations} iterations):")
    recovered, history, gradient = descend(basin, start, obs, args.iterations, max(1, args.iterations // 8))
    err = np.linalg.norm(recovered - truth) / np.linalg.norm(truth - 1.0)
    print(f"initial hump: relative L2 error {err:.3f} of the hump (the flat start: 1.000)")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    plot(Path(args.out) / "shallow_water_ic.png", truth, recovered, gradient, history, basin.rows, basin.cols)
    print(f"({time.perf_counter() - t0:.1f} s)")
    print(f"misfit fell: {history[0]:.6e} -> {history[-1]:.6e}")
    if not ok:
        print("FAILED: the gradient does not match finite differences", file=sys.stderr)
        return 1
    if not history[-1] < 0.1 * history[0]:
        print("FAILED: the misfit did not fall", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
