"""Learn the heat source of a 1-D gradkern time loop in JAX with optax, or in PyTorch with torch.optim.

The heat equation with a source s(x), explicit steps on a rod with fixed ends,

    u_{t+1}[i] = u_t[i] + r (u_t[i-1] - 2 u_t[i] + u_t[i+1]) + dt s[i],

runs as a gradkern program (a ping-pong time loop of one kernel) wrapped as an
operation returning the final temperature (docs/interop.md):
`gk.interop.jax_function(simulate, "u")` (the default, `--framework jax`) or
`gk.interop.torch_function(simulate, "u")` (`--framework torch`). The loss is
written in the framework around it: the misfit at a few sensors plus a
smoothness penalty on s. JAX: `jax.jit(jax.value_and_grad(loss))`
differentiates through gradkern's reverse (split mode under a
`jax.custom_vjp`) and `optax.adam` fits s from a zero start; PyTorch:
`loss.backward()` through gradkern's custom ops and `torch.optim.Adam`. The
gradient is checked first against central differences of the same loss along
a random direction. Writes learn_source.png (the true and learned sources, the
final temperatures, the loss curve) into --out; exits 1 if the check fails or
the misfit did not fall.

Needs JAX and optax, or torch (`pip install "gradkern[examples]"`, `"gradkern[torch]"`).

    python -m gradkern demo learn_source                       # JAX: n = 64, 200 steps, 300 Adam steps
    python -m gradkern demo learn_source --framework torch     # the same loop in PyTorch
    python -m gradkern demo learn_source --quick --out /tmp    # smaller (the smoke test), the PNG in /tmp
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import gradkern as gk


@gk.kernel
def heat_source_step(u, un, s, r, dt):
    """One explicit step with a source; the two ends keep their values."""
    i = gk.tid()
    if i == 0 or i == u.shape[0] - 1:
        un[i] = u[i]
    else:
        un[i] = u[i] + r * (u[i - 1] - 2.0 * u[i] + u[i + 1]) + dt * s[i]


def simulate(u, v, s, r, dt, steps):
    """The program: 2 * steps explicit steps, ping-pong between u and v; u holds the final temperature."""
    for _ in range(steps):
        gk.launch(heat_source_step, u.size, u, v, s, r, dt)
        gk.launch(heat_source_step, u.size, v, u, s, r, dt)


def true_source(x: np.ndarray) -> np.ndarray:
    return 4.0 * np.exp(-((x - 0.3) / 0.08) ** 2) - 2.5 * np.exp(-((x - 0.7) / 0.1) ** 2)


def plot(path: Path, optimiser: str, x, s_true, s_learned, u_true, u_learned, sensors, history) -> None:
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no PNG written")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax0, ax1, ax2) = plt.subplots(1, 3, figsize=(15, 4.2), layout="constrained")
    fig.suptitle(f"heat source learned with {optimiser} through a gradkern time loop")
    ax0.plot(x, s_true, "k-", lw=2, label="true")
    ax0.plot(x, s_learned, "C0-", label="learned")
    ax0.set(title="source s(x)", xlabel="x")
    ax0.legend()
    ax1.plot(x, u_true, "k-", lw=2, label="true")
    ax1.plot(x, u_learned, "C0--", label="learned")
    ax1.plot(x[sensors], u_true[sensors], "k.", ms=8, label="sensors")
    ax1.set(title="final temperature", xlabel="x")
    ax1.legend()
    ax2.semilogy(range(len(history)), history)
    ax2.set(title="loss", xlabel="Adam step")
    ax2.grid(True, which="both", alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"wrote {path}")


def train_jax(simulate_args, s_true, sensors, alpha, h, iterations) -> tuple:
    """The loop in JAX with optax.adam: (gradient check ok, learned source, final temperature, losses)."""
    import jax
    import jax.numpy as jnp
    import optax
    jax.config.update("jax_enable_x64", True)
    n = s_true.size
    final = gk.interop.jax_function(simulate, "u")

    def temperature(s):
        return final(jnp.zeros(n), jnp.zeros(n), s, *simulate_args)

    obs = temperature(jnp.asarray(s_true))[sensors]

    def loss(s):
        misfit = 0.5 * jnp.sum((temperature(s)[sensors] - obs) ** 2)
        return misfit + 0.5 * alpha * jnp.sum(jnp.diff(s) ** 2) / h

    value_and_grad = jax.jit(jax.value_and_grad(loss))
    v = np.random.default_rng(0).standard_normal(n)
    ok = check(lambda s: float(loss(jnp.asarray(s))), lambda s: np.asarray(value_and_grad(jnp.asarray(s))[1]),
               0.5 * v, v)
    optimiser = optax.adam(learning_rate=0.2)
    s = jnp.zeros(n)
    state, history = optimiser.init(s), []
    for k in range(iterations + 1):
        value, grad = value_and_grad(s)
        report(history, k, float(value), iterations)
        if k < iterations:
            updates, state = optimiser.update(grad, state)
            s = optax.apply_updates(s, updates)
    return ok, np.asarray(s), np.asarray(temperature(s)), history


def train_torch(simulate_args, s_true, sensors, alpha, h, iterations) -> tuple:
    """The loop in PyTorch with torch.optim.Adam: (gradient check ok, learned source, final temperature,
    losses)."""
    import torch
    n = s_true.size
    final = gk.interop.torch_function(simulate, "u")
    zeros = torch.zeros(n, dtype=torch.float64)

    def temperature(s):
        return final(zeros, zeros, s, *simulate_args)

    with torch.no_grad():
        obs = temperature(torch.from_numpy(s_true))[sensors]

    def loss(s):
        misfit = 0.5 * torch.sum((temperature(s)[sensors] - obs) ** 2)
        return misfit + 0.5 * alpha * torch.sum(torch.diff(s) ** 2) / h

    def gradient(s):
        s = torch.from_numpy(s).requires_grad_()
        loss(s).backward()
        return s.grad.numpy()
    v = np.random.default_rng(0).standard_normal(n)
    ok = check(lambda s: float(loss(torch.from_numpy(s))), gradient, 0.5 * v, v)  # no gradient wanted: plain runs
    s = torch.zeros(n, dtype=torch.float64, requires_grad=True)
    optimiser, history = torch.optim.Adam([s], lr=0.2), []
    for k in range(iterations + 1):
        optimiser.zero_grad()
        value = loss(s)
        report(history, k, value.item(), iterations)
        if k < iterations:
            value.backward()
            optimiser.step()
    with torch.no_grad():
        return ok, s.detach().numpy().copy(), temperature(s).numpy().copy(), history


def check(loss, gradient, p: np.ndarray, v: np.ndarray) -> bool:
    """The gradient along v against central differences of the loss."""
    eps = 1e-6
    fd = (loss(p + eps * v) - loss(p - eps * v)) / (2 * eps)
    got = float(gradient(p) @ v)
    rel = abs(got - fd) / max(abs(fd), 1e-300)
    print(f"gradient check: dL/ds . v  through gradkern {got: .10e}  finite differences {fd: .10e}  "
          f"relative difference {rel:.1e}")
    return rel <= 1e-6


def report(history: list, k: int, value: float, iterations: int) -> None:
    history.append(value)
    if k % max(1, iterations // 6) == 0 or k == iterations:
        print(f"  Adam step {k:4d}  loss {value:.6e}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("."), help="folder of learn_source.png (default: .)")
    parser.add_argument("--framework", choices=("jax", "torch"), default="jax")
    parser.add_argument("--n", type=int, default=64, help="grid points")
    parser.add_argument("--steps", type=int, default=100, help="pairs of time steps")
    parser.add_argument("--iterations", type=int, default=300, help="Adam steps")
    parser.add_argument("--quick", action="store_true", help="n = 32, 40 pairs of steps, 60 Adam steps")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.steps, args.iterations = 32, 40, 60
    t0 = time.perf_counter()
    x = np.linspace(0.0, 1.0, args.n)
    h = x[1] - x[0]
    dt = 0.4 * h**2  # r = dt / h^2 = 0.4: stable
    sensors = np.arange(2, args.n - 2, 3)
    train = train_jax if args.framework == "jax" else train_torch
    try:
        ok, s, u, history = train((dt / h**2, dt, args.steps), true_source(x), sensors, 1e-9, h, args.iterations)
    except ImportError as e:
        print(f"--framework {args.framework} needs {e.name} (pip install 'gradkern[examples]' or "
              "'gradkern[torch]')", file=sys.stderr)
        return 1
    print(f"misfit fell: {history[0]:.6e} -> {history[-1]:.6e} ({time.perf_counter() - t0:.1f} s)")
    s_true = true_source(x)
    u_true = np.zeros(args.n)
    simulate(u_true, np.zeros(args.n), s_true, dt / h**2, dt, args.steps)
    plot(args.out / "learn_source.png", "optax.adam" if args.framework == "jax" else "torch.optim.Adam", x,
         s_true, s, u_true, u, sensors, history)
    if not ok:
        print("FAILED: the gradient does not match finite differences", file=sys.stderr)
        return 1
    return 0 if history[-1] < history[0] else 1


if __name__ == "__main__":
    sys.exit(main())
