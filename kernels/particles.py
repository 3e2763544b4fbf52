"""Particles: n-body forces, leapfrog push, cloud-in-cell deposit."""

import math

import gradkern as gk

__all__ = ["nbody_forces", "leapfrog", "cic_deposit"]


@gk.kernel
def nbody_forces(pos, mass, force, eps2):
    """Gravitational forces (G = 1) of all pairs with Plummer softening:

        F_i = m_i Σ_j m_j (x_j − x_i) / (|x_j − x_i|² + ε²)^{3/2}.

    The sum runs over every j, i included: its term vanishes (x_i − x_i = 0),
    which the softening ε² > 0 keeps finite, so no branch is needed.

    `pos`: (n, 3), read (positions); `mass`: (n,), read; `force`: (n, 3),
    written; `eps2`: scalar ε² > 0, the squared softening length.
    Launch: n threads, one per particle; each loops over all n particles
    (a gather: it writes only its own force, no atomics)."""
    i = gk.tid()
    p = gk.load_vec3(pos, i)
    acc = gk.vec3(0.0)
    for j in range(pos.shape[0]):
        d = gk.load_vec3(pos, j) - p
        r2 = gk.dot(d, d) + eps2
        acc += d * (mass[j] / (r2 * gk.sqrt(r2)))
    gk.store_vec3(force, i, acc * mass[i])


@gk.kernel
def leapfrog(pos, vel, force, mass, dt):
    """One kick-drift leapfrog (symplectic Euler) step, in place:
    v ← v + dt F/m, then x ← x + dt v (with the new v).

    `pos`: (n, 3), updated in place; `vel`: (n, 3), updated in place;
    `force`: (n, 3), read; `mass`: (n,), read; `dt`: scalar, the time step.
    Launch: n threads, one per particle."""
    i = gk.tid()
    v = gk.load_vec3(vel, i) + gk.load_vec3(force, i) * (dt / mass[i])
    gk.store_vec3(vel, i, v)
    gk.store_vec3(pos, i, gk.load_vec3(pos, i) + v * dt)


@gk.kernel
def cic_deposit(pos, charge, rho, h):
    """Cloud-in-cell (bilinear) charge deposit on a periodic 2-D grid of nodes
    x = a h, y = b h (0 ≤ a < nx, 0 ≤ b < ny), accumulated into rho:

        rho[a, b] += q_p (1 − |x_p/h − a|)₊ (1 − |y_p/h − b|)₊ / h²  (indices mod nx, ny)

    i.e. with s = x_p/h, a₀ = ⌊s⌋, w = s − a₀, the charge goes (1 − w) to
    node a₀ and w to node a₀ + 1, wrapped at the grid's edge (likewise in y).
    Positions must lie in [0, nx h) × [0, ny h); a node index outside the
    grid (a particle out of the box) is clamped into it. The deposit is
    piecewise linear in the positions: their derivative jumps where a
    particle crosses a grid line.

    `pos`: (n, 2), read (positions); `charge`: (n,), read; `rho`: (nx, ny),
    updated in place by atomic adds (several particles share nodes); `h`:
    scalar, the grid spacing.
    Launch: n threads, one per particle."""
    p = gk.tid()
    nx = rho.shape[0]
    ny = rho.shape[1]
    sx = pos[p, 0] / h
    sy = pos[p, 1] / h
    a0 = gk.clamp(int(math.floor(sx)), 0, nx - 1)
    b0 = gk.clamp(int(math.floor(sy)), 0, ny - 1)
    wx = sx - a0
    wy = sy - b0
    a1 = a0 + 1 if a0 < nx - 1 else 0
    b1 = b0 + 1 if b0 < ny - 1 else 0
    q = charge[p] / (h * h)
    gk.atomic_add(rho, (a0, b0), q * (1.0 - wx) * (1.0 - wy))
    gk.atomic_add(rho, (a1, b0), q * wx * (1.0 - wy))
    gk.atomic_add(rho, (a0, b1), q * (1.0 - wx) * wy)
    gk.atomic_add(rho, (a1, b1), q * wx * wy)
