"""D2Q9 lattice-Boltzmann channel flow: find the obstacle that shapes the flow at a probe line, by gradient descent.

A periodic nx × ny lattice with solid walls along its top and bottom rows is
driven along x by a body force, starting from a uniform flow. Inside, an
obstacle is a solid-fraction field s ∈ [0, 1] (partial bounce-back,
`gradkern.kernels.d2q9_step`), so the flow is differentiable in s. After
`steps` lattice-Boltzmann steps the velocity u_x on a probe line downstream
is compared with a target, the profile a hidden disc-shaped obstacle makes:

    misfit(s) = 1/2 Σ_y (u_x(probe, y; s) − target_y)².

`gk.autodiff` of the whole run (a program: the steps inside
`gk.checkpointed_loop`, then the moments and the misfit) gives d misfit / ds
in one reverse sweep; it is checked once against central finite differences
along a random direction, then projected gradient descent (s clipped to
[0, 1], walls kept solid) reduces the misfit from an empty channel.
Exits 1 if the gradient check fails or the misfit does not fall.

    python examples/d2q9_flow.py            # 64 x 32 lattice, 240 steps
    python examples/d2q9_flow.py --quick    # 20 x 12 lattice, 30 steps (the smoke test)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import gradkern as gk
from gradkern.kernels import d2q9_equilibrium, d2q9_moments, d2q9_step

OMEGA = 1.6  # BGK relaxation rate: viscosity (1/ω − 1/2)/3 ≈ 0.042
U0 = 0.05  # the initial uniform flow along x
G = 2e-5  # body acceleration along x


@gk.kernel
def probe_misfit(ux, target, E, px):
    """E[0] += 1/2 Σ_y (ux[px, y] − target[y])²; one thread per y."""
    y = gk.tid()
    d = ux[px, y] - target[y]
    gk.atomic_add(E, 0, 0.5 * d * d)


class Channel:
    """The forward model: lattice size, number of steps, probe line."""

    def __init__(self, nx: int, ny: int, steps: int):
        self.nx, self.ny, self.steps = nx, ny, steps - steps % 2  # steps in pairs: f -> fn -> f
        self.probe = (3 * nx) // 4
        self.walls = np.zeros((nx, ny), bool)
        self.walls[:, [0, -1]] = True
        rho, ux, uy = np.ones((nx, ny)), np.where(self.walls, 0.0, U0), np.zeros((nx, ny))
        self.f0 = np.zeros((9, nx, ny))
        gk.launch(d2q9_equilibrium, (nx, ny), rho, ux, uy, self.f0)

    def run(self, f, fn, solid, target, E, rho, ux, uy):
        """The program: the LBM steps (checkpointed), the moments, the probe misfit into E."""
        dim = (self.nx, self.ny)

        def two_steps(t):
            gk.launch(d2q9_step, dim, f, fn, solid, OMEGA, G, 0.0)
            gk.launch(d2q9_step, dim, fn, f, solid, OMEGA, G, 0.0)
        gk.checkpointed_loop(two_steps, self.steps // 2, snapshots=8)
        gk.launch(d2q9_moments, dim, f, rho, ux, uy)
        gk.launch(probe_misfit, self.ny, ux, target, E, self.probe)

    def _buffers(self):
        shape = (self.nx, self.ny)
        return self.f0.copy(), np.zeros_like(self.f0), np.zeros(1), np.zeros(shape), np.zeros(shape), np.zeros(shape)

    def flow(self, solid: np.ndarray) -> np.ndarray:
        """The final velocity field (ux, uy) for an obstacle."""
        f, fn, E, rho, ux, uy = self._buffers()
        self.run(f, fn, solid, np.zeros(self.ny), E, rho, ux, uy)
        return np.stack([ux, uy])

    def misfit(self, solid: np.ndarray, target: np.ndarray) -> float:
        f, fn, E, rho, ux, uy = self._buffers()
        self.run(f, fn, solid, target, E, rho, ux, uy)
        return float(E[0])

    def gradient(self, solid: np.ndarray, target: np.ndarray) -> tuple[float, np.ndarray]:
        """(misfit, d misfit / d solid) from one gk.autodiff of the program."""
        f, fn, E, rho, ux, uy = self._buffers()
        ds = np.zeros_like(solid)
        gk.autodiff(self.run, gk.Duplicated(f, np.zeros_like(f)), gk.Duplicated(fn, np.zeros_like(fn)),
                    gk.Duplicated(solid.copy(), ds), gk.Const(target), gk.Duplicated(E, np.ones(1)),
                    gk.Const(rho), gk.Const(ux), gk.Const(uy))
        return float(E[0]), ds


def disc(channel: Channel, radius: float) -> np.ndarray:
    """The hidden obstacle: a disc a quarter of the way along, off the centre line, with a soft rim."""
    x, y = np.meshgrid(np.arange(channel.nx), np.arange(channel.ny), indexing="ij")
    r = np.hypot(x - channel.nx / 4, y - 0.42 * channel.ny)
    return np.clip(radius + 0.5 - r, 0.0, 1.0)


def check_gradient(channel: Channel, solid: np.ndarray, target: np.ndarray, tolerance: float) -> bool:
    """The derivative along a random interior direction against central differences."""
    _, g = channel.gradient(solid, target)
    v = np.random.default_rng(1).uniform(0.0, 1.0, solid.shape) * ~channel.walls
    eps = 1e-5
    fd = (channel.misfit(solid + eps * v, target) - channel.misfit(solid - eps * v, target)) / (2 * eps)
    got = float(np.sum(g * v))
    rel = abs(got - fd) / max(abs(fd), 1e-300)
    print(f"gradient check: d misfit/d solid . v  gradkern {got: .10e}  finite differences {fd: .10e}  "
          f"relative difference {rel:.1e}")
    return rel <= tolerance


def descend(channel: Channel, solid: np.ndarray, target: np.ndarray, iterations: int):
    """Projected gradient descent: s <- clip(s - a g, 0, 1) on the interior, the step a halved until the
    misfit falls and grown by 1.5 after each success. Returns the last iterate, the misfit history and
    the first gradient."""
    interior = ~channel.walls
    J, g = channel.gradient(solid, target)
    first, history = g.copy(), [J]
    step = 0.5 / max(float(np.abs(g).max()), 1e-300)  # the first trial moves the steepest cell by 0.5
    print(f"  iteration   0  misfit {J:.6e}")
    for k in range(1, iterations + 1):
        for _ in range(20):
            trial = np.where(interior, np.clip(solid - step * g, 0.0, 1.0), solid)
            Jt = channel.misfit(trial, target)
            if Jt < J:
                break
            step *= 0.5
        else:
            print("  no descent along the projected gradient: stopped")
            break
        solid, step = trial, 1.5 * step
        J, g = channel.gradient(solid, target)
        history.append(J)
        print(f"  iteration {k:3d}  misfit {J:.6e}")
    return solid, history, first


def plot(path: Path, channel: Channel, true_solid, solid, first_gradient, velocity, target, initial_profile,
         history) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no PNG written")
        return
    fig, axes = plt.subplots(2, 3, figsize=(15, 7.5))
    kw = dict(origin="lower", aspect="equal")
    inside = np.where(channel.walls, 0.0, solid)  # the walls (1) would hide a faint recovered field
    for ax, field, title, top in ((axes[0, 0], true_solid, "hidden obstacle (solid fraction)", 1.0),
                                  (axes[0, 1], inside, "recovered solid fraction (interior; own scale)",
                                   max(float(inside.max()), 1e-12))):
        im = ax.imshow(field.T, cmap="Greys", vmin=0, vmax=top, **kw)
        ax.axvline(channel.probe, color="tab:red", lw=1)
        ax.set_title(title)
        fig.colorbar(im, ax=ax, shrink=0.7)
    lim = float(np.abs(first_gradient).max()) or 1.0
    im = axes[0, 2].imshow(first_gradient.T, cmap="RdBu_r", vmin=-lim, vmax=lim, **kw)
    axes[0, 2].set_title("d misfit / d solid (empty channel)")
    fig.colorbar(im, ax=axes[0, 2], shrink=0.7)
    im = axes[1, 0].imshow(np.hypot(*velocity).T, cmap="viridis", **kw)
    axes[1, 0].axvline(channel.probe, color="tab:red", lw=1)
    axes[1, 0].set_title("|u| with the recovered obstacle")
    fig.colorbar(im, ax=axes[1, 0], shrink=0.7)
    y = np.arange(channel.ny)
    axes[1, 1].plot(target, y, "k-", lw=2, label="target")
    axes[1, 1].plot(initial_profile, y, "--", label="empty channel")
    axes[1, 1].plot(velocity[0, channel.probe], y, "o", ms=3, label="recovered")
    axes[1, 1].set_xlabel("u_x at the probe line")
    axes[1, 1].set_ylabel("y")
    axes[1, 1].legend()
    axes[1, 2].semilogy(history, "o-")
    axes[1, 2].set_xlabel("iteration")
    axes[1, 2].set_title("misfit")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nx", type=int, default=64)
    parser.add_argument("--ny", type=int, default=32)
    parser.add_argument("--steps", type=int, default=240, help="lattice-Boltzmann steps")
    parser.add_argument("--iterations", type=int, default=12, help="descent iterations")
    parser.add_argument("--quick", action="store_true", help="20 x 12 lattice, 30 steps, 3 iterations")
    parser.add_argument("--out", default=".", help="folder for d2q9_flow.png")
    args = parser.parse_args(argv)
    if args.quick:
        args.nx, args.ny, args.steps, args.iterations = 20, 12, 30, 3
    t0 = time.perf_counter()

    channel = Channel(args.nx, args.ny, args.steps)
    true_solid = np.where(channel.walls, 1.0, disc(channel, radius=args.ny / 6))
    target = channel.flow(true_solid)[0, channel.probe]
    solid = channel.walls.astype(float)  # the guess: an empty channel
    initial_profile = channel.flow(solid)[0, channel.probe]
    print(f"D2Q9 channel: {args.nx} x {args.ny} lattice, {channel.steps} steps, omega = {OMEGA}, "
          f"probe line at x = {channel.probe}")

    ok = check_gradient(channel, np.where(channel.walls, 1.0, 0.3), target, tolerance=1e-5)
    print(f"projected gradient descent on the solid fraction ({args.iterations} iterations):")
    solid, history, first = descend(channel, solid, target, args.iterations)
    print(f"misfit fell: {history[0]:.6e} -> {history[-1]:.6e}")
    print(f"time: {time.perf_counter() - t0:.1f} s")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plot(out / "d2q9_flow.png", channel, true_solid, solid, first, channel.flow(solid), target, initial_profile,
         history)
    fell = history[-1] < history[0]
    if not ok:
        print("the gradient check failed")
    if not fell:
        print("the misfit did not fall")
    return 0 if ok and fell else 1


if __name__ == "__main__":
    sys.exit(main())
