"""Learn the heat source of a 1-D time loop with JAX and optax, through gk.interop.jax_function.

The heat equation with a source s(x), explicit steps on a rod with fixed ends,

    u_{t+1}[i] = u_t[i] + r (u_t[i-1] - 2 u_t[i] + u_t[i+1]) + dt s[i],

runs as a gradkern program (a ping-pong time loop of one kernel) wrapped by
`gk.interop.jax_function(simulate, "u")`: a JAX operation returning the final
temperature. The loss is written in JAX around it: the misfit at a few
sensors plus a smoothness penalty on s. `jax.jit(jax.value_and_grad(loss))`
differentiates through gradkern's reverse (split mode under a
`jax.custom_vjp`), and `optax.adam` fits s from a zero start. The gradient is
checked first against central differences of the same loss along a random
direction. Writes jax_source.png (the true and learned sources, the final
temperatures, the loss curve) into --out; exits 1 if the check fails or the
misfit did not fall.

Needs JAX and optax (`pip install "gradkern[examples]"`).

    python -m gradkern demo jax_source                      # n = 64, 200 steps, 300 Adam steps
    python -m gradkern demo jax_source --quick --out /tmp   # smaller (the smoke test), the PNG in /tmp
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


def plot(path: Path, x, s_true, s_learned, u_true, u_learned, sensors, history) -> None:
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no PNG written")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax0, ax1, ax2) = plt.subplots(1, 3, figsize=(15, 4.2), layout="constrained")
    fig.suptitle("heat source learned with optax.adam through a gradkern time loop (gk.interop.jax_function)")
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("."), help="folder of jax_source.png (default: .)")
    parser.add_argument("--n", type=int, default=64, help="grid points")
    parser.add_argument("--steps", type=int, default=100, help="pairs of time steps")
    parser.add_argument("--iterations", type=int, default=300, help="Adam steps")
    parser.add_argument("--quick", action="store_true", help="n = 32, 40 pairs of steps, 60 Adam steps")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.steps, args.iterations = 32, 40, 60
    try:
        import jax
        import jax.numpy as jnp
        import optax
    except ImportError as e:
        print(f"this example needs JAX and optax: {e} (pip install 'gradkern[examples]')", file=sys.stderr)
        return 1
    jax.config.update("jax_enable_x64", True)
    t0 = time.perf_counter()

    n, steps = args.n, args.steps
    x = np.linspace(0.0, 1.0, n)
    h = x[1] - x[0]
    dt = 0.4 * h**2  # r = dt / h^2 = 0.4: stable
    r = dt / h**2
    final = gk.interop.jax_function(simulate, "u")

    def temperature(s):
        return final(jnp.zeros(n), jnp.zeros(n), s, r, dt, steps)

    s_true = true_source(x)
    u_true = np.asarray(temperature(jnp.asarray(s_true)))
    sensors = np.arange(2, n - 2, 3)
    obs = jnp.asarray(u_true[sensors])
    alpha = 1e-9

    def loss(s):
        misfit = 0.5 * jnp.sum((temperature(s)[sensors] - obs) ** 2)
        return misfit + 0.5 * alpha * jnp.sum(jnp.diff(s) ** 2) / h

    value_and_grad = jax.jit(jax.value_and_grad(loss))
    s0 = jnp.zeros(n)

    # the gradient against central differences of the same loss along a random direction
    v = jnp.asarray(np.random.default_rng(0).standard_normal(n))
    probe = s0 + 0.5 * v
    _, g = value_and_grad(probe)
    eps = 1e-6
    fd = (float(loss(probe + eps * v)) - float(loss(probe - eps * v))) / (2 * eps)
    got = float(jnp.vdot(g, v))
    rel = abs(got - fd) / max(abs(fd), 1e-300)
    ok = rel <= 1e-6
    print(f"gradient check: dL/ds . v  JAX through gradkern {got: .10e}  finite differences {fd: .10e}  "
          f"relative difference {rel:.1e}")

    optimiser = optax.adam(learning_rate=0.2)
    s, state = s0, optimiser.init(s0)
    history = []
    every = max(1, args.iterations // 6)
    for k in range(args.iterations + 1):
        value, grad = value_and_grad(s)
        history.append(float(value))
        if k % every == 0 or k == args.iterations:
            print(f"  Adam step {k:4d}  loss {float(value):.6e}")
        if k < args.iterations:
            updates, state = optimiser.update(grad, state)
            s = optax.apply_updates(s, updates)
    print(f"misfit fell: {history[0]:.6e} -> {history[-1]:.6e} ({time.perf_counter() - t0:.1f} s)")
    plot(args.out / "jax_source.png", x, s_true, np.asarray(s), u_true, np.asarray(temperature(s)), sensors,
         history)
    if not ok:
        print("FAILED: the gradient does not match finite differences", file=sys.stderr)
        return 1
    return 0 if history[-1] < history[0] else 1


if __name__ == "__main__":
    sys.exit(main())
