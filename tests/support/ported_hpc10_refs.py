"""NumPy references for session 57's ported kernels (tests/support/ported_hpc10.py, ported_hpc10_more.py): each
takes the arguments' primal values before the launch (a list, by position) and returns {position: expected value
after}. Written from the same algorithms in NumPy: Python's complex numbers for RSBench, `einsum` for axhelm,
slices for NAS MG and FT, every pair tested against the 27 wrapped cells for the particles."""

import math

import numpy as np

from support import ported_hpc10 as A
from support import ported_hpc10_more as B


def _sw_two(p, rsq):
    r = math.sqrt(rsq)
    rp, rq = r ** -p[A.POWERP], r ** -p[A.POWERQ]
    rainv = 1.0 / (r - p[A.CUT])
    e = math.exp(p[A.SIGMA] * rainv)
    fforce = (p[A.C1] * rp - p[A.C2] * rq + (p[A.C3] * rp - p[A.C4] * rq) * rainv * rainv * r) * e / rsq
    return fforce, (p[A.C5] * rp - p[A.C6] * rq) * e


def _sw_three(pij, pik, pijk, d1, d2):
    r1, r2 = np.linalg.norm(d1), np.linalg.norm(d2)
    g1 = pij[A.SIGMA_GAMMA] / (r1 - pij[A.CUT])
    g2 = pik[A.SIGMA_GAMMA] / (r2 - pik[A.CUT])
    cs = d1 @ d2 / (r1 * r2)
    delcs = cs - pijk[A.COSTHETA]
    facexp = math.exp(g1) * math.exp(g2)
    facrad = pijk[A.LAMBDA_EPSILON] * facexp * delcs * delcs
    facang = pijk[A.LAMBDA_EPSILON2] * facexp * delcs
    fj = d1 * (facrad * g1 / (r1 - pij[A.CUT]) / r1 + cs * facang / r1 ** 2) - d2 * facang / (r1 * r2)
    fk = d2 * (facrad * g2 / (r2 - pik[A.CUT]) / r2 + cs * facang / r2 ** 2) - d1 * facang / (r1 * r2)
    return fj, fk, facrad


def stillinger_weber(a):
    x, atype, tag, e3, params, neigh, numneigh, short, numshort, f, eng, cutmax_sq = a
    f, eng, short, numshort = f.copy(), eng.copy(), short.copy(), numshort.copy()
    for i in range(x.shape[0]):
        js = [int(neigh[i, jj]) for jj in range(numneigh[i])]
        inside = [j for j in js if np.sum((x[i] - x[j]) ** 2) < cutmax_sq]
        short[i, :len(inside)] = inside
        numshort[i] = len(inside)
        for j in js:
            d = x[i] - x[j]
            rsq = d @ d
            p = params[e3[atype[i], atype[j], atype[j]]]
            if rsq >= p[A.CUTSQ] or (tag[i] > tag[j] and (tag[i] + tag[j]) % 2 == 0) or (
                    tag[i] < tag[j] and (tag[i] + tag[j]) % 2 == 1):
                continue
            fpair, e = _sw_two(p, rsq)
            f[i] += d * fpair
            f[j] -= d * fpair
            eng[0] += e
        for jj, j in enumerate(inside):
            for k in inside[jj + 1:]:
                fj, fk, e = _sw_three(params[e3[atype[i], atype[j], atype[j]]],
                                      params[e3[atype[i], atype[k], atype[k]]],
                                      params[e3[atype[i], atype[j], atype[k]]], x[j] - x[i], x[k] - x[i])
                f[i] -= fj + fk
                f[j] += fj
                f[k] += fk
                eng[0] += e
    return {7: short, 8: numshort, 9: f, 10: eng}


def xs_lookup(a):
    (energies, mats, num_nucs, mat_nucs, concs, n_windows, windows, w_start, w_end, poles, l_value, k0rs,
     macro, verification) = a
    macro, verification = np.zeros_like(macro), verification.copy()
    for lk, (E, mat) in enumerate(zip(energies, mats)):
        for n in range(num_nucs[mat]):
            nuc = mat_nucs[mat, n]
            factors = []
            for i in range(A.NUM_L):
                phi = k0rs[nuc, i] * math.sqrt(E)
                phi = [phi, phi + math.atan(phi), phi - math.atan(3 * phi / (3 - phi * phi)),
                       phi - math.atan(phi * (15 - phi * phi) / (15 - 6 * phi * phi))][i]
                factors.append(complex(math.cos(2 * phi), -math.sin(2 * phi)))
            w = min(int(E * n_windows[nuc]), n_windows[nuc] - 1)
            sig = E * windows[nuc, w].astype(complex)
            for p in range(w_start[nuc, w], w_end[nuc, w]):
                pole = poles[nuc, p, 0::2] + 1j * poles[nuc, p, 1::2]
                cdum = 1j / (pole[0] - math.sqrt(E)) / E
                sig += [pole[1] * cdum * factors[l_value[nuc, p]], pole[2] * cdum, pole[3] * cdum]
            sig = sig.real
            macro[lk] += np.array([sig[0], sig[1], sig[2], sig[0] - sig[1]]) * concs[mat, n]
        verification[lk] = int(np.argmax(macro[lk])) + 1
    return {12: macro, 13: verification}


def _bspline(c, r, cutoff, dinv):
    if r >= cutoff:
        return 0.0
    t, ip = math.modf(r * dinv)
    i = int(ip)
    basis = np.array(A.A) @ np.array([t ** 3, t ** 2, t, 1.0])
    return float(c[i:i + 4] @ basis)


def j2_uat(a):
    pos, group, n_groups, coefs, cutoff, dinv, n, uat = a
    out = np.array([sum(_bspline(coefs[group[i] * n_groups + group[j]], np.linalg.norm(pos[j] - pos[i]), cutoff,
                                 dinv) for j in range(n) if j != i) for i in range(n)])
    return {7: out}


def axhelm(a):
    ne, nq, offset, ggeo, s, lam, q, gqr, gqs, gqt, aq = a
    S = s.reshape(nq, nq)
    G = ggeo.reshape(ne, A.NGGEO, nq, nq, nq)
    L = lam.reshape(2, ne, nq, nq, nq)
    Q = q.reshape(ne, nq, nq, nq)
    qr = np.einsum("mi,ekjm->ekji", S, Q)
    qs = np.einsum("mj,ekmi->ekji", S, Q)
    qt = np.einsum("mk,emji->ekji", S, Q)
    g = [G[:, c] for c in range(7)]
    r = L[0] * (g[A.G00ID] * qr + g[A.G01ID] * qs + g[A.G02ID] * qt)
    s_ = L[0] * (g[A.G01ID] * qr + g[A.G11ID] * qs + g[A.G12ID] * qt)
    t = L[0] * (g[A.G02ID] * qr + g[A.G12ID] * qs + g[A.G22ID] * qt)
    out = (np.einsum("im,ekjm->ekji", S, r) + np.einsum("jm,ekmi->ekji", S, s_)
           + np.einsum("km,emji->ekji", S, t) + g[A.GWJID] * L[1] * Q)
    return {7: r.ravel(), 8: s_.ravel(), 9: t.ravel(), 10: out.ravel()}


def _poly6(s, h=B.H_):
    return B.POLY6_FACTOR * ((h * h - s * s) / h ** 3) ** 3 if 0 < s < h else 0.0


def _spiky(r, h=B.H_):
    n = np.linalg.norm(r)
    return r * B.SPIKY_GRAD_FACTOR * ((h - n) / h ** 3) ** 2 / n if 0 < n < h else np.zeros(2)


def pbf_substeps(a):
    pos, num, nb, lambdas, deltas, iters = a
    pos = pos.copy()
    for _ in range(iters):
        lists = [[int(j) for j in nb[i, :num[i]] if j >= 0] for i in range(len(pos))]
        # the -1 padding ends a row (break): no real neighbour follows it in these tables
        lambdas = np.array([-(sum(_poly6(np.linalg.norm(pos[i] - pos[j])) for j in js) * B.MASS / B.RHO0 - 1.0)
                            / (sum(_spiky(pos[i] - pos[j]) @ _spiky(pos[i] - pos[j]) for j in js)
                               + np.sum(sum((_spiky(pos[i] - pos[j]) for j in js), np.zeros(2)) ** 2)
                               + B.LAMBDA_EPSILON) for i, js in enumerate(lists)])
        scorr = [[-B.CORRK * (_poly6(np.linalg.norm(pos[i] - pos[j])) / _poly6(B.CORR_DELTAQ_COEFF * B.H_)) ** 4
                  for j in js] for i, js in enumerate(lists)]
        deltas = np.array([sum(((lambdas[i] + lambdas[j] + c) * _spiky(pos[i] - pos[j])
                                for j, c in zip(js, scorr[i])), np.zeros(2)) / B.RHO0 for i, js in enumerate(lists)])
        pos = pos + deltas
    return {0: pos, 3: lambdas, 4: deltas}


def _force(pa, pb, va, vb, ra, rb, attraction, p):
    rel = pb - pa
    dist = np.linalg.norm(rel)
    if dist >= ra + rb:
        return np.zeros(3)
    norm = rel / dist
    rv = vb - va
    return (-p[B.SPRING] * (ra + rb - dist) * norm + p[B.DAMPING] * rv + p[B.SHEAR] * (rv - (rv @ norm) * norm)
            + attraction * rel)


def collide_d(a):
    new_vel, pos, vel, order, start, end, n, p, gsize = a
    new_vel = new_vel.copy()
    cell = np.floor((pos[:, :3] - p[B.ORIGIN_X:B.ORIGIN_Z + 1]) / p[B.CELL_X:B.CELL_Z + 1]).astype(int)
    for i in range(n):
        near = {tuple((cell[i] + (dx, dy, dz)) % gsize) for dx in (-1, 0, 1) for dy in (-1, 0, 1) for dz in (-1, 0, 1)}
        force = sum((_force(pos[i, :3], pos[j, :3], vel[i, :3], vel[j, :3], p[B.PARTICLE_RADIUS],
                            p[B.PARTICLE_RADIUS], p[B.ATTRACTION], p)
                     for j in range(n) if j != i and tuple(cell[j] % gsize) in near), np.zeros(3))
        force = force + _force(pos[i, :3], p[B.COLLIDER_X:B.COLLIDER_Z + 1], vel[i, :3], np.zeros(3),
                               p[B.PARTICLE_RADIUS], p[B.COLLIDER_RADIUS], 0.0, p)
        new_vel[order[i]] = np.append(vel[i, :3] + force, 0.0)
    return {0: new_vel}


def integrate_system(a):
    pos, vel, dt, p = a
    pos, vel = pos.copy(), vel.copy()
    v = (vel[:, :3] + p[B.GRAVITY_X:B.GRAVITY_Z + 1] * dt) * p[B.GLOBAL_DAMPING]
    x = pos[:, :3] + v * dt
    r = p[B.PARTICLE_RADIUS]
    for c in range(3):
        for over, wall in ((x[:, c] > 1 - r, 1 - r), (x[:, c] < -1 + r, -1 + r)):
            x[over, c] = wall
            v[over, c] *= p[B.BOUNDARY_DAMPING]
    pos[:, :3], vel[:, :3] = x, v
    return {0: pos, 1: vel}


def rprj3(a):
    r, m1k, m2k, m3k, s = a
    s = s.copy()
    d = [2 if m == 3 else 1 for m in (m3k, m2k, m1k)]
    m3j, m2j, m1j = s.shape
    for j3 in range(1, m3j - 1):
        for j2 in range(1, m2j - 1):
            for j1 in range(1, m1j - 1):
                c = (2 * j3 + 1 - d[0], 2 * j2 + 1 - d[1], 2 * j1 + 1 - d[2])
                w = 0.0
                for o3 in (-1, 0, 1):
                    for o2 in (-1, 0, 1):
                        for o1 in (-1, 0, 1):  # trilinear weights 1/2 ** (1 + number of non-zero offsets)
                            w += r[c[0] + o3, c[1] + o2, c[2] + o1] * 0.5 ** (1 + abs(o3) + abs(o2) + abs(o1))
                s[j3, j2, j1] = w
    return {4: s}


def interp(a):
    z, u = a
    u = u.copy()
    m3, m2, m1 = z.shape
    fine = np.zeros((2 * m3 - 1, 2 * m2 - 1, 2 * m1 - 1))
    fine[::2, ::2, ::2] = z  # trilinear prolongation of the whole coarse grid, then the part interp adds
    fine[1::2] = 0.5 * (fine[:-1:2] + fine[2::2])
    fine[:, 1::2] = 0.5 * (fine[:, :-1:2] + fine[:, 2::2])
    fine[:, :, 1::2] = 0.5 * (fine[:, :, :-1:2] + fine[:, :, 2::2])
    n3, n2, n1 = 2 * (m3 - 1), 2 * (m2 - 1), 2 * (m1 - 1)
    u[:n3, :n2, :n1] += fine[:n3, :n2, :n1]
    return {1: u}


def ft_evolve(a):
    u0, u1, twiddle, alpha, niter = a
    nz, ny, nx = twiddle.shape
    k, j, i = np.meshgrid(*[(np.arange(n) + n // 2) % n - n // 2 for n in (nz, ny, nx)], indexing="ij")
    tw = np.exp(-4.0 * alpha * math.pi ** 2 * (i * i + j * j + k * k))
    u = (u0[..., 0] + 1j * u0[..., 1]) * tw ** niter
    out = np.stack([u.real, u.imag], axis=-1)
    return {0: out, 1: out, 2: tw}
