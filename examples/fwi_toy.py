"""Full-waveform inversion toy: a 2-D velocity model from receiver traces, gradient through a checkpointed loop.

The forward model is the 2-D acoustic wave equation u_tt = v(x)² Δu with
rigid edges, stepped by leapfrog (`gradkern.kernels.wave_step_2d`) on three
rotating buffers (step t reads buffers t % 3 and (t + 1) % 3 and writes
(t + 2) % 3). Each step injects a Ricker wavelet at the shot's source point
(`add_source`) and adds the misfit of the receivers, a line of points near
the bottom edge, against their observed traces (`l2_misfit_2d`); the shots
(sources along the top edge, one after the other) add up:

    E(v) = 1/2 Σ_shots Σ_t Σ_k (u_t[receiver k] − obs_t[k])².

Each shot's time loop is a `gk.checkpointed_loop`: the reverse keeps a few
snapshots of the state (two of the three buffers) and recomputes the steps between
them, instead of storing every step. `gk.autodiff` of the program gives
dE/dv, the shadow of the velocity model. The observations come from the
"true" model (a background with a faster disc); the inversion starts from the
background and takes a few steps of gradient descent (the gradient scaled to
a fixed largest velocity change, halved until the misfit falls), muting the
gradient next to the sources and the receivers, where it is singular. The
gradient is checked once against central finite differences along a random smooth direction,
and against the same program's gradient without checkpoints.

    python examples/fwi_toy.py               # 48 x 48 grid, 3 shots of 160 steps, 6 iterations
    python examples/fwi_toy.py --quick       # 16 x 16, 2 shots of 40 steps (the smoke test)
    python examples/fwi_toy.py --out plots   # where fwi_toy.png goes
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import gradkern as gk
from gradkern.kernels import add_source, l2_misfit_2d, wave_step_2d


def ricker(nsteps: int, dt: float, peak: float) -> np.ndarray:
    """The Ricker wavelet (the second derivative of a Gaussian) of peak frequency `peak`, delayed by 1 / peak."""
    t = np.arange(nsteps) * dt - 1.0 / peak
    a = (np.pi * peak * t) ** 2
    return (1.0 - 2.0 * a) * np.exp(-a)


def fwi_program(vel, rows, cols, obs, E, c, sources, wavelet, snapshots):
    """The program: for each shot (source point), len(wavelet) leapfrog steps from rest, E[0] += the receivers'
    misfit against obs[shot, t] at every step t. snapshots=None runs plain loops (the reference the checkpointed
    ones are compared with)."""
    for shot, (si, sj) in enumerate(sources):
        fields = tuple(np.zeros(vel.shape) for _ in range(3))  # u_{t-1}, u_t, u_{t+1}, rotating

        def step(t, fields=fields, si=si, sj=sj, shot=shot):
            prev, cur, nxt = fields[t % 3], fields[(t + 1) % 3], fields[(t + 2) % 3]
            gk.launch(wave_step_2d, vel.shape, prev, cur, nxt, vel, c)
            gk.launch(add_source, 1, nxt, si, sj, float(wavelet[t]))
            gk.launch(l2_misfit_2d, rows.shape[0], nxt, rows, cols, obs[shot, t], E)

        if snapshots is None:
            for t in range(len(wavelet)):
                step(t)
        else:
            gk.checkpointed_loop(step, len(wavelet), snapshots=snapshots)


def record(vel, rows, cols, c, sources, wavelet) -> np.ndarray:
    """The traces the receivers record in model `vel`: (shots, nsteps, receivers)."""
    traces = np.zeros((len(sources), len(wavelet), rows.shape[0]))
    for shot, (si, sj) in enumerate(sources):
        fields = [np.zeros(vel.shape) for _ in range(3)]
        for t in range(len(wavelet)):
            prev, cur, nxt = fields[t % 3], fields[(t + 1) % 3], fields[(t + 2) % 3]
            gk.launch(wave_step_2d, vel.shape, prev, cur, nxt, vel, c)
            gk.launch(add_source, 1, nxt, si, sj, float(wavelet[t]))
            traces[shot, t] = nxt[rows, cols]
    return traces


class Survey:
    """The grid, the acquisition (shots along the top, a line of receivers near the bottom) and the data."""

    def __init__(self, n: int, nsteps: int, snapshots: int, wavelength: float, shots: int):
        self.n, self.nsteps, self.snapshots = n, nsteps, snapshots
        self.dt = 0.5  # h = 1: c = dt^2/h^2 = 0.25, stable for velocities up to sqrt(0.5 / c) = 1.41
        self.c = self.dt ** 2
        self.sources = tuple((2, int(n * (k + 1) / (shots + 1))) for k in range(shots))
        self.cols = np.arange(2, n - 2, dtype=np.int64)
        self.rows = np.full(self.cols.shape, n - 3, dtype=np.int64)
        # `wavelength` cells at the background velocity 1; amplitude 10 (the traces are then about 0.1)
        self.wavelet = 10.0 * ricker(nsteps, self.dt, peak=1.0 / wavelength)
        y, x = np.mgrid[0:n, 0:n]
        self.background = np.ones((n, n))
        disc = (y - 0.5 * n) ** 2 + (x - 0.45 * n) ** 2 <= (0.16 * n) ** 2
        self.true = self.background + 0.2 * disc
        self.obs = record(self.true, self.rows, self.cols, self.c, self.sources, self.wavelet)
        # the gradient is singular at the sources and the receivers: mute half a wavelength around the sources
        # and the rows from the receivers down
        self.mute = (y < self.rows[0] - 1).astype(float)
        for si, sj in self.sources:
            self.mute *= (y - si) ** 2 + (x - sj) ** 2 > (0.5 * wavelength) ** 2

    def misfit(self, vel: np.ndarray) -> float:
        E = np.zeros(1)
        fwi_program(vel, self.rows, self.cols, self.obs, E, self.c, self.sources, self.wavelet, self.snapshots)
        return float(E[0])

    def gradient(self, vel: np.ndarray, snapshots: int | None = -1):
        """(E, dE/dvel) by one split-mode gk.autodiff of the program (snapshots=-1: the survey's). Sets
        self.memory to what the reverse held: the snapshots' peak, or the plain loop's saved copies (bytes)."""
        snapshots = self.snapshots if snapshots == -1 else snapshots
        forward, reverse = gk.autodiff_thunk(fwi_program, *(gk.Duplicated, gk.Const, gk.Const, gk.Const,
                                                            gk.Duplicated) + (gk.Const,) * 4)
        args = (gk.Duplicated(vel.copy(), np.zeros_like(vel)), gk.Const(self.rows), gk.Const(self.cols),
                gk.Const(self.obs), gk.Duplicated(np.zeros(1), np.ones(1)), gk.Const(self.c),
                gk.Const(self.sources), gk.Const(self.wavelet), gk.Const(snapshots))
        tape = forward(*args)
        E = float(args[4].val[0])
        saved = tape.saved_bytes  # freed by the reverse as it goes
        reverse(*args, tape)
        self.memory = tape.peak_snapshot_bytes if snapshots else saved
        self.recomputed = tape.steps_recomputed
        return E, args[0].dval


def check_gradient(survey: Survey, vel: np.ndarray, tolerance: float) -> bool:
    """<dE/dvel, d> against a central difference along a smooth random direction d; the checkpointed gradient
    against the plain loop's."""
    E, g = survey.gradient(vel)
    checkpointed, recomputed = survey.memory, survey.recomputed
    _, g_plain = survey.gradient(vel, snapshots=None)
    steps = survey.nsteps * len(survey.sources)
    print(f"reverse memory: {survey.snapshots} snapshots per checkpointed loop (one a shot), {checkpointed / 1e6:.3f} "
          f"MB at the peak ({recomputed} step recomputations for {steps} steps); plain loops save every step's "
          f"overwritten field, {survey.memory / 1e6:.3f} MB ({survey.memory / checkpointed:.1f}x more)")
    rng = np.random.default_rng(1)
    d = rng.standard_normal((4, 4))
    d = np.kron(d, np.ones((survey.n // 4 + 1, survey.n // 4 + 1)))[:survey.n, :survey.n]  # blocky, smooth-ish
    eps = 1e-5
    fd = (survey.misfit(vel + eps * d) - survey.misfit(vel - eps * d)) / (2 * eps)
    got = float(np.sum(g * d))
    rel = abs(got - fd) / max(abs(fd), 1e-300)
    same = float(np.max(np.abs(g - g_plain)) / np.max(np.abs(g_plain)))
    print(f"gradient check: <dE/dvel, d>  gradkern {got: .10e}  finite differences {fd: .10e}  "
          f"relative difference {rel:.1e}")
    print(f"gradient check: checkpointed vs plain loop, largest difference {same:.1e} of max |dE/dvel|")
    return rel <= tolerance and same <= 1e-10


def descend(survey: Survey, vel: np.ndarray, iterations: int, step: float):
    """Gradient descent: vel -= alpha * g / max|g| (g muted at the source), alpha halved until the misfit
    falls and doubled after a success; velocities kept in the stable range [0.5, 1.4]."""
    history, first_gradient = [], None
    for k in range(iterations + 1):
        J, g = survey.gradient(vel)
        g = g * survey.mute
        first_gradient = g if first_gradient is None else first_gradient
        history.append(J)
        print(f"  iteration {k:3d}  misfit {J:.6e}")
        if k == iterations:
            break
        direction = g / np.max(np.abs(g))
        for _ in range(12):
            trial = np.clip(vel - step * direction, 0.5, 1.4)
            if survey.misfit(trial) < J:
                vel, step = trial, min(2.0 * step, 0.2)
                break
            step *= 0.5
        else:
            break  # no descent: at the misfit's minimum to rounding, or the gradient is wrong
    return vel, history, first_gradient


def plot(path: Path, survey: Survey, start, gradient, recovered, history) -> None:
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no PNG written")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 5, figsize=(22, 4.4))
    lo, hi = survey.background.min(), survey.true.max()
    for ax, model, title in ((axes[0], survey.true, "true velocity"), (axes[1], start, "starting model"),
                             (axes[3], recovered, f"recovered after {len(history) - 1} iterations")):
        im = ax.imshow(model, vmin=lo, vmax=hi, cmap="viridis")
        fig.colorbar(im, ax=ax, shrink=0.8)
        ax.set_title(title)
    m = np.max(np.abs(gradient))
    im = axes[2].imshow(-gradient, cmap="RdBu_r", vmin=-m, vmax=m)
    fig.colorbar(im, ax=axes[2], shrink=0.8)
    axes[2].set_title("−dE/dv, first iteration (muted at sources, receivers)")
    for ax in axes[:4]:
        ax.plot(survey.cols, survey.rows, "v", color="w", ms=3, label="receivers")
        ax.plot([s[1] for s in survey.sources], [s[0] for s in survey.sources], "*", color="r", ms=10,
                label="sources")
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0].legend(loc="lower left", fontsize=7)
    axes[4].semilogy(history, "o-")
    axes[4].set_xlabel("iteration")
    axes[4].set_title("misfit E")
    axes[4].grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=48, help="grid side")
    parser.add_argument("--steps", type=int, default=160, help="time steps per shot")
    parser.add_argument("--snapshots", type=int, default=8, help="snapshots of the checkpointed loop")
    parser.add_argument("--iterations", type=int, default=6, help="gradient descent iterations")
    parser.add_argument("--wavelength", type=float, default=6.0, help="the source's peak wavelength, in cells")
    parser.add_argument("--shots", type=int, default=3, help="sources, one after the other")
    parser.add_argument("--quick", action="store_true",
                        help="16 x 16, 2 shots of 40 steps, 3 iterations: the smoke test")
    parser.add_argument("--out", default=".", help="folder for fwi_toy.png")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.steps, args.iterations, args.wavelength, args.shots = 16, 40, 3, 4.0, 2
    t0 = time.perf_counter()

    survey = Survey(args.n, args.steps, args.snapshots, args.wavelength, args.shots)
    print(f"2-D acoustic FWI toy: {args.n} x {args.n} grid, {args.shots} shots of {args.steps} steps, "
          f"{len(survey.cols)} receivers")
    start = survey.background.copy()
    ok = check_gradient(survey, start, tolerance=1e-5)
    print(f"gradient descent on the velocity model ({args.iterations} iterations):")
    recovered, history, gradient = descend(survey, start, args.iterations, step=0.05)
    inside = survey.true != survey.background
    print(f"velocity in the disc: true {survey.true[inside].mean():.3f}, start {start[inside].mean():.3f}, "
          f"recovered {recovered[inside].mean():.3f}")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    plot(Path(args.out) / "fwi_toy.png", survey, start, gradient, recovered, history)
    print(f"misfit fell: {history[0]:.6e} -> {history[-1]:.6e} ({time.perf_counter() - t0:.1f} s)")
    if not ok:
        print("FAILED: the gradient does not match finite differences", file=sys.stderr)
        return 1
    if not history[-1] < history[0]:
        print("FAILED: the misfit did not fall", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
