"""NumPy references for session 52's ported kernels (tests/support/ported_hpc5*.py): each takes the arguments'
primal values before the launch (a list, by position) and returns {position: expected value after}. Written
from the same algorithms in NumPy (loops where the kernel's order of updates matters)."""

import math

import numpy as np

GAMMA = 1.4


def _bspline(fx):
    return np.array([0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2])


def mpm88_p2g(a):
    x, v, C, J, grid_v, grid_m, dx, dt, p_vol, p_mass, E = a
    gv, gm = grid_v.copy(), grid_m.copy()
    for p in range(len(x)):
        base = np.floor(x[p] / dx - 0.5).astype(int)
        fx = x[p] / dx - base
        w = [_bspline(fx[0]), _bspline(fx[1])]
        stress = -dt * 4.0 * E * p_vol * (J[p] - 1.0) / dx ** 2
        affine = stress * np.eye(2) + p_mass * C[p]
        for i in range(3):
            for j in range(3):
                dpos = (np.array([i, j]) - fx) * dx
                weight = w[0][i] * w[1][j]
                gv[base[0] + i, base[1] + j] += weight * (p_mass * v[p] + affine @ dpos)
                gm[base[0] + i, base[1] + j] += weight * p_mass
    return {4: gv, 5: gm}


def mpm88_g2p(a):
    x, v, C, J, grid_v, dx, dt = a
    x, v, C, J = x.copy(), v.copy(), C.copy(), J.copy()
    for p in range(len(x)):
        base = np.floor(x[p] / dx - 0.5).astype(int)
        fx = x[p] / dx - base
        w = [_bspline(fx[0]), _bspline(fx[1])]
        nv, nc = np.zeros(2), np.zeros((2, 2))
        for i in range(3):
            for j in range(3):
                g = grid_v[base[0] + i, base[1] + j]
                weight = w[0][i] * w[1][j]
                nv += weight * g
                nc += 4.0 * weight * np.outer(g, np.array([i, j]) - fx) / dx
        v[p] = nv
        x[p] += dt * nv
        J[p] *= 1.0 + dt * np.trace(nc)
        C[p] = nc
    return {0: x, 1: v, 2: C, 3: J}


def mass_spring_force(a):
    x, v_inc, aa, bb, rest, actuation, act, stiffness, dt = a
    out = v_inc.copy()
    d = x[aa] - x[bb]
    length = np.sqrt((d * d).sum(1)) + 1e-4
    target = rest * (1.0 + actuation * act)
    impulse = (dt * (length - target) * stiffness / length)[:, None] * d
    np.add.at(out, aa, -impulse)
    np.add.at(out, bb, impulse)
    return {1: out}


def warp_springs(a):
    x, v, idx, rest, ke, kd, f = a
    out = f.copy()
    i, j = idx[0::2], idx[1::2]
    xij, vij = x[i] - x[j], v[i] - v[j]
    ell = np.sqrt((xij * xij).sum(1))
    d = xij / ell[:, None]
    fs = d * (ke * (ell - rest) + kd * (d * vij).sum(1))[:, None]
    np.add.at(out, i, -fs)
    np.add.at(out, j, fs)
    return {6: out}


def wave_solve(a):
    hprev, hcur, width, height, inv_cell, k_speed, k_damp, dt = a
    g = hcur.reshape(height, width)
    p = np.pad(g, 1, mode="edge")
    lap = (p[1:-1, 2:] + p[1:-1, :-2] + p[2:, 1:-1] + p[:-2, 1:-1] - 4 * g).ravel() * inv_cell ** 2
    return {0: 2 * hcur - hprev + dt * dt * (k_speed * lap - k_damp * (hcur - hprev))}


def neo_hookean_tet(a):
    x, idx, dm_inv, vol, mu, lam, f, energy = a
    f, energy = f.copy(), energy.copy()
    for t in range(len(idx)):
        ds = np.stack([x[idx[t, c + 1]] - x[idx[t, 0]] for c in range(3)], axis=1)
        F = ds @ dm_inv[t]
        J = np.linalg.det(F)
        finvt = np.linalg.inv(F).T
        P = mu * (F - finvt) + lam * np.log(J) * finvt
        energy[t] = vol[t] * (0.5 * mu * ((F * F).sum() - 3) - mu * np.log(J) + 0.5 * lam * np.log(J) ** 2)
        H = -vol[t] * P @ dm_inv[t].T
        for c in range(3):
            f[idx[t, c + 1]] += H[:, c]
        f[idx[t, 0]] -= H.sum(1)
    return {6: f, 7: energy}


def _sdf(p, c, radius, ground):
    return min(math.sqrt(((p - c) ** 2).sum()) - radius, p[1] - ground)


def sdf_raymarch(a):
    ray_dir, center, radius, ground, depth, shade, steps = a
    depth, shade = depth.copy(), shade.copy()
    for i, d in enumerate(ray_dir):
        t = 0.0
        for _ in range(steps):
            t += _sdf(t * d, center, radius, ground)
        p = t * d
        e = np.eye(3) * 1e-3
        n = np.array([_sdf(p + e[k], center, radius, ground) - _sdf(p - e[k], center, radius, ground)
                      for k in range(3)])
        depth[i] = t
        shade[i] = max(0.0, np.dot([0.3, -0.8, 0.5], n) / np.sqrt((n * n).sum()))
    return {4: depth, 5: shade}


def nbody_integrate(a):
    new_pos, new_vel, pos, vel, dt, damping, soft2, num_tiles = a
    r = pos[None, :, :3] - pos[:, None, :3]
    inv = 1.0 / np.sqrt((r * r).sum(-1) + soft2)
    acc = (r * (pos[None, :, 3] * inv ** 3)[..., None]).sum(1)
    v = (vel[:, :3] + acc * dt) * damping
    return {0: np.concatenate([pos[:, :3] + v * dt, pos[:, 3:]], 1), 1: np.concatenate([v, vel[:, 3:]], 1)}


def dem_hertz(a):
    x, v, radius, mass, pi, pj, kn, gamma_n, f = a
    f = f.copy()
    for i, j in zip(pi, pj):
        d = x[i] - x[j]
        r = np.sqrt((d * d).sum())
        overlap = max(0.0, radius[i] + radius[j] - r)
        reff = radius[i] * radius[j] / (radius[i] + radius[j])
        meff = mass[i] * mass[j] / (mass[i] + mass[j])
        vn = np.dot(v[i] - v[j], d) / r
        fn = kn * overlap ** 1.5 * np.sqrt(reff) - gamma_n * meff * vn * overlap
        f[i] += fn * d / r
        f[j] -= fn * d / r
    return {8: f}


def smoke_project(a):
    vx, vy, div, p, pn, iterations = a

    def roll(u, s, ax):
        return np.roll(u, s, axis=ax)
    div = -0.5 * (roll(vx, -1, 0) - roll(vx, 1, 0) + roll(vy, -1, 1) - roll(vy, 1, 1))
    for _ in range(iterations):
        pn = 0.25 * (roll(p, -1, 0) + roll(p, 1, 0) + roll(p, -1, 1) + roll(p, 1, 1) + div)
        p = 0.25 * (roll(pn, -1, 0) + roll(pn, 1, 0) + roll(pn, -1, 1) + roll(pn, 1, 1) + div)
    return {0: vx - 0.5 * (roll(p, -1, 0) - roll(p, 1, 0)), 1: vy - 0.5 * (roll(p, -1, 1) - roll(p, 1, 1)),
            2: div, 3: p, 4: pn}
