"""Implicit 1-D heat equation: recover its diffusion coefficient or initial temperature from noisy data.

An inverse problem with an implicit time loop: recover the diffusion
coefficient kappa, or the initial temperature, of a 1-D heat equation from
noisy observations of the final temperature.

    u_t = kappa u_xx on [0, 1], u(0, t) and u(1, t) fixed (Dirichlet ends).

Each backward-Euler step solves (I - r L) u_new = u_old, r = kappa dt / h^2,
L the 3-point second difference on the interior (the two end rows of the
matrix are identity rows, so the ends keep their values). The matrix is
tridiagonal: the program builds its bands a, b, c from r with the library
kernel `gradkern.kernels.implicit_heat_rows` and solves with
`gradkern.kernels.tridiagonal_solve`, a custom rule whose reverse is the
transposed solve. The misfit is
E = 1/2 sum_i (u_T[i] - obs[i])^2, summed by a kernel.

`gk.autodiff` of that program gives dE/du0 (the shadow of u) and dE/dkappa
(kappa enters as gk.Active; r = kappa dt / h^2 is host arithmetic on it, and
its derivative comes back through the rule's derivatives for a, b and c).
The gradient is checked once against central finite differences, then
nonlinear conjugate gradients with a simple line search fit kappa (as
log kappa, so it stays positive) or the initial state (its interior: the ends
are boundary data, known; stopped by the discrepancy principle, as fitting
below the noise would fit the noise). Writes heat_inverse.png (the initial
and final temperatures, true, first guess and recovered, the observations,
and the misfit curve) into --out. Exits 1 if the finite-difference check
fails or the misfit did not fall below half its first value.

    python -m gradkern demo heat_inverse                      # recover kappa
    python -m gradkern demo heat_inverse --recover initial    # recover the initial temperature
    python -m gradkern demo heat_inverse --quick --out /tmp   # smaller (the smoke test), the PNG in /tmp
    python examples/heat_inverse.py ...                       # the same, from a checkout
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import gradkern as gk
from gradkern.kernels import implicit_heat_rows, tridiagonal_solve


@gk.kernel
def misfit(u, obs, E):
    """E[0] += 1/2 sum (u - obs)^2."""
    i = gk.tid()
    d = u[i] - obs[i]
    gk.atomic_add(E, 0, 0.5 * d * d)


def heat_misfit(u, obs, E, kappa, dt, h, steps):
    """The program: `steps` backward-Euler steps of u in place, then E += misfit(u, obs)."""
    n = u.shape[0]
    a, b, c = np.empty(n), np.empty(n), np.empty(n)
    gk.launch(implicit_heat_rows, n, a, b, c, kappa * dt / h**2)
    for _ in range(steps):
        tridiagonal_solve(a, b, c, u, u)  # in place: u_new overwrites u_old
    gk.launch(misfit, n, u, obs, E)


class HeatProblem:
    """The forward model on a grid of n points over [0, 1], `steps` steps up to time t_final."""

    def __init__(self, n: int, steps: int, t_final: float):
        self.n, self.steps = n, steps
        self.x = np.linspace(0.0, 1.0, n)
        self.h, self.dt = self.x[1] - self.x[0], t_final / steps

    def final_state(self, u0: np.ndarray, kappa: float) -> np.ndarray:
        u = u0.copy()
        heat_misfit(u, np.zeros_like(u), np.zeros(1), kappa, self.dt, self.h, self.steps)
        return u

    def misfit(self, u0: np.ndarray, kappa: float, obs: np.ndarray) -> float:
        """E alone: the program called plainly, no derivative."""
        E = np.zeros(1)
        heat_misfit(u0.copy(), obs, E, kappa, self.dt, self.h, self.steps)
        return float(E[0])

    def gradient(self, u0: np.ndarray, kappa: float, obs: np.ndarray) -> tuple[float, np.ndarray, float]:
        """(E, dE/du0, dE/dkappa) from one gk.autodiff of the program."""
        u, du, E = u0.copy(), np.zeros_like(u0), np.zeros(1)
        grads = gk.autodiff(heat_misfit, gk.Duplicated(u, du), gk.Const(obs), gk.Duplicated(E, np.ones(1)),
                            gk.Active(kappa), gk.Const(self.dt), gk.Const(self.h), gk.Const(self.steps))
        return float(E[0]), du, float(grads[3])


def true_initial_state(x: np.ndarray) -> np.ndarray:
    """Ends at 1 and 0, a bump and a wave between them."""
    return 1.0 - x + 0.8 * np.exp(-((x - 0.3) / 0.08) ** 2) + 0.4 * np.sin(3 * np.pi * x)


def check_gradient(problem: HeatProblem, u0: np.ndarray, kappa: float, obs: np.ndarray, tolerance: float) -> bool:
    """dE/dkappa and the derivative along a random direction of u0 against central differences."""
    _, du, dkappa = problem.gradient(u0, kappa, obs)
    eps = 1e-6 * kappa
    fd_kappa = (problem.misfit(u0, kappa + eps, obs) - problem.misfit(u0, kappa - eps, obs)) / (2 * eps)
    v = np.random.default_rng(1).standard_normal(u0.size)
    eps = 1e-6
    fd_u0 = (problem.misfit(u0 + eps * v, kappa, obs) - problem.misfit(u0 - eps * v, kappa, obs)) / (2 * eps)
    ok = True
    for what, got, fd in (("dE/dkappa", dkappa, fd_kappa), ("dE/du0 . v", float(du @ v), fd_u0)):
        rel = abs(got - fd) / max(abs(fd), 1e-300)
        ok &= rel <= tolerance
        print(f"gradient check: {what:<11} gradkern {got: .10e}  finite differences {fd: .10e}  "
              f"relative difference {rel:.1e}")
    return ok


def descend(value_and_gradient, value, p: np.ndarray, iterations: int, every: int,
            stop: float = 0.0) -> tuple[np.ndarray, list[float]]:
    """Nonlinear conjugate gradients (Polak-Ribiere+, steepest descent when that is no descent) with a line
    search: a trial step, then the minimiser of the parabola through J(0), J'(0) and J(trial) (exact for a
    quadratic misfit), halving until the Armijo condition holds. Stops early once the misfit is <= `stop`
    or no longer falls. Returns the last iterate and the misfit at every iterate."""
    history, step, g_old, d = [], None, None, None
    for k in range(iterations + 1):
        J, g = value_and_gradient(p)
        history.append(J)
        done = (k == iterations or J <= stop or not g.any()
                or (k > 0 and history[-2] - J <= 1e-12 * history[-2]))
        if k % every == 0 or done:
            print(f"  iteration {k:3d}  misfit {J:.6e}")
        if done:
            return p, history
        beta = 0.0 if g_old is None else max(0.0, float(g @ (g - g_old)) / float(g_old @ g_old))
        d = -g if d is None else -g + beta * d
        slope = float(g @ d)
        if slope >= 0.0:
            d, slope = -g, -float(g @ g)
        if step is None:
            step = 0.1 * max(np.linalg.norm(p), 1.0) / np.linalg.norm(d)
        for _ in range(60):
            Jt = value(p + step * d)
            curvature = Jt - J - slope * step  # the parabola's a * step^2
            if curvature > 0.0:
                best = -slope * step**2 / (2.0 * curvature)
                Jb = value(p + best * d)
                if Jb < Jt:
                    step, Jt = best, Jb
            if Jt <= J + 1e-4 * step * slope:
                break
            step *= 0.5
        else:
            return p, history  # no descent along d: the gradient is wrong, or J is at its minimum to rounding
        p, g_old = p + step * d, g
    return p, history


def plot(path: Path, problem: HeatProblem, recover: str, obs: np.ndarray, history: list[float],
         true: dict, guess: dict, recovered: dict) -> None:
    """heat_inverse.png: the initial temperature (true, first guess, recovered), the final one with the
    observations, and the misfit at every iteration."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no PNG written")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = problem.x
    fig, (ax0, ax1, ax2) = plt.subplots(1, 3, figsize=(15, 4.2), layout="constrained")
    what = "kappa" if recover == "kappa" else "the initial temperature"
    fig.suptitle(f"implicit heat equation, n = {problem.n}, {problem.steps} backward-Euler steps: recovering {what}")
    ax0.plot(x, true["u0"], "k-", lw=2, label="true")
    if recover == "initial":
        ax0.plot(x, guess["u0"], "C1--", label="first guess (the observations)")
        ax0.plot(x, recovered["u0"], "C0-", label="recovered")
    ax0.set(title="initial temperature u_0" + (" (known)" if recover == "kappa" else ""), xlabel="x")
    ax0.legend()
    ax1.plot(x, obs, "k.", ms=4, label="observations (noisy)")
    for d, style, label in ((true, "k-", "true"), (guess, "C1--", "first guess"), (recovered, "C0-", "recovered")):
        if recover == "kappa" or d is not true:
            ax1.plot(x, problem.final_state(d["u0"], d["kappa"]), style, lw=1.5,
                     label=f"{label}" + (f", kappa = {d['kappa']:.4g}" if recover == "kappa" else ""))
    ax1.set(title="final temperature u_T", xlabel="x")
    ax1.legend()
    ax2.semilogy(range(len(history)), history, "o-")
    ax2.set(title="misfit E = 1/2 |u_T - obs|^2", xlabel="iteration", ylabel="E")
    ax2.grid(True, which="both", alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("."), help="folder of heat_inverse.png (default: .)")
    parser.add_argument("--recover", choices=("kappa", "initial"), default="kappa")
    parser.add_argument("--n", type=int, default=101, help="grid points")
    parser.add_argument("--steps", type=int, default=40, help="time steps")
    parser.add_argument("--iterations", type=int, default=20, help="at most this many descent iterations")
    parser.add_argument("--noise", type=float, default=1e-3, help="observation noise, relative to max |u_T|")
    parser.add_argument("--quick", action="store_true", help="n = 41, 10 steps (the smoke test)")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.steps = 41, 10
    t0 = time.perf_counter()

    problem = HeatProblem(args.n, args.steps, t_final=0.4)
    kappa_true, u0_true = 0.1, true_initial_state(problem.x)
    clean = problem.final_state(u0_true, kappa_true)
    sigma = args.noise * np.abs(clean).max()
    obs = clean + sigma * np.random.default_rng(0).standard_normal(args.n)
    print(f"implicit heat equation: n = {args.n}, {args.steps} steps of dt = {problem.dt:g}, "
          f"r = {kappa_true * problem.dt / problem.h**2:.3g} at the true kappa; noise {args.noise:g} of max |u_T|")

    if args.recover == "kappa":
        u0, kappa0 = u0_true, 0.02  # the initial state known; kappa guessed 5x too small
    else:
        u0, kappa0 = obs.copy(), kappa_true  # kappa known; the initial state guessed as the observed final one,
        u0[[0, -1]] = u0_true[[0, -1]]       # with the known boundary values at the ends
    ok = check_gradient(problem, u0, kappa0, obs, tolerance=1e-6)

    every = max(1, args.iterations // 8)
    if args.recover == "kappa":
        print(f"recovering kappa (conjugate gradients on log kappa, at most {args.iterations} iterations):")

        def value_and_gradient(s):  # s = [log kappa]: dE/ds = kappa dE/dkappa
            J, _, dkappa = problem.gradient(u0, np.exp(s[0]), obs)
            return J, np.array([np.exp(s[0]) * dkappa])
        s, history = descend(value_and_gradient, lambda s: problem.misfit(u0, np.exp(s[0]), obs),
                             np.array([np.log(kappa0)]), args.iterations, every)
        kappa = float(np.exp(s[0]))
        recovered = {"u0": u0, "kappa": kappa}
        print(f"kappa: recovered {kappa:.6f}, true {kappa_true:.6f}, first guess {kappa0:.6f} "
              f"(relative error {abs(kappa - kappa_true) / kappa_true:.1e})")
    else:
        # the discrepancy principle: fitting the data closer than the noise would fit the noise
        noise_misfit = 0.5 * (args.n - 2) * sigma**2
        print(f"recovering the initial temperature (conjugate gradients, at most {args.iterations} iterations, "
              f"stopping at the noise's misfit {noise_misfit:.2e}):")

        def with_ends(interior):
            return np.concatenate([u0[:1], interior, u0[-1:]])

        def value_and_gradient(interior):
            J, du, _ = problem.gradient(with_ends(interior), kappa0, obs)
            return J, du[1:-1]
        interior, history = descend(value_and_gradient, lambda p: problem.misfit(with_ends(p), kappa0, obs),
                                    u0[1:-1].copy(), args.iterations, every, stop=noise_misfit)
        recovered = {"u0": with_ends(interior), "kappa": kappa0}
        err = np.linalg.norm(with_ends(interior) - u0_true) / np.linalg.norm(u0_true)
        err0 = np.linalg.norm(u0 - u0_true) / np.linalg.norm(u0_true)
        print(f"initial temperature: relative L2 error {err:.3f}, first guess {err0:.3f} (the backward heat "
              "problem is ill-posed: what diffused below the noise is not recovered)")
    print(f"misfit fell: {history[0]:.6e} -> {history[-1]:.6e} ({time.perf_counter() - t0:.1f} s)")
    plot(args.out / "heat_inverse.png", problem, args.recover, obs, history,
         true={"u0": u0_true, "kappa": kappa_true}, guess={"u0": u0, "kappa": kappa0}, recovered=recovered)
    if not ok:
        print("FAILED: the gradient does not match finite differences", file=sys.stderr)
        return 1
    if not history[-1] < 0.5 * history[0]:
        print("FAILED: the misfit did not fall", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
