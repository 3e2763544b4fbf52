"""NumPy references of session 51's ported kernels (tests/support/ported_hpc4.py, ported_hpc4_more.py,
ported_hpc4_pde.py): each takes the arguments' primal values before the launch and returns {argument position:
expected value after}. Written from the algorithms, vectorised where that is natural; used by
tests/support/ported_hpc4_cases.py."""

import math

import numpy as np

from support import ported_hpc4 as A
from support import ported_hpc4_more as B
from support import ported_hpc4_pde as C


def polybench_2mm(v):
    _, a, b, c, d, alpha, beta, ni, nj, nk, nl = v
    tmp = alpha * a.reshape(ni, nk) @ b.reshape(nk, nj)
    return {0: tmp.ravel(), 4: (beta * d.reshape(ni, nl) + tmp @ c.reshape(nj, nl)).ravel()}


def polybench_atax(v):
    a, x, _, _, nx, ny = v
    tmp = a.reshape(nx, ny) @ x
    return {2: a.reshape(nx, ny).T @ tmp, 3: tmp}


def polybench_bicg(v):
    a, r, _, p, _, nx, ny = v
    return {2: a.reshape(nx, ny).T @ r, 4: a.reshape(nx, ny) @ p}


def polybench_mvt(v):
    a, x1, x2, y1, y2, n = v
    return {1: x1 + a.reshape(n, n) @ y1, 2: x2 + a.reshape(n, n).T @ y2}


def gesummv(v):
    a, b, x, y, tmp, alpha, beta, n = v
    t = tmp + a.reshape(n, n) @ x
    return {3: alpha * t + beta * (y + b.reshape(n, n) @ x), 4: t}


def syr2k(v):
    a, b, c, alpha, beta, n, m = v
    am, bm = a.reshape(n, m), b.reshape(n, m)
    return {2: (beta * c.reshape(n, n) + alpha * (am @ bm.T + bm @ am.T)).ravel()}


def polybench_covariance(v):
    data, _, _, float_n, m, n = v
    mean = data.reshape(n, m).sum(axis=0) / float_n
    centred = data.reshape(n, m) - mean
    return {0: centred.ravel(), 1: (centred.T @ centred).ravel(), 2: mean}


def sgemm_nt(v):
    a, lda, b, ldb, c, ldc, k, alpha, beta = v
    am = a.reshape(k, lda).T                      # A[m + kk * lda]
    bm = b.reshape(k, ldb).T                      # B[n + kk * ldb]
    cm = c.reshape(-1, ldc).T                     # C[m + n * ldc]
    return {4: (beta * cm + alpha * am @ bm.T).T.ravel()}


def stencil7_z(v):
    c0, c1, a0, anext, nx, ny, nz = v
    a = a0.reshape(nz, ny, nx)
    out = anext.reshape(nz, ny, nx).copy()
    out[1:-1, 1:-1, 1:-1] = (a[2:, 1:-1, 1:-1] + a[:-2, 1:-1, 1:-1] + a[1:-1, 2:, 1:-1] + a[1:-1, :-2, 1:-1]
                             + a[1:-1, 1:-1, 2:] + a[1:-1, 1:-1, :-2]) * c1 - a[1:-1, 1:-1, 1:-1] * c0
    return {3: out.ravel()}


def mri_fhd(v):
    num_k, phi_r, phi_i, d_r, d_i, kx, ky, kz, x, y, z, _, _, out_r, out_i = v
    rr = phi_r * d_r + phi_i * d_i
    ri = phi_r * d_i - phi_i * d_r
    arg = A.PI2 * (np.outer(x, kx) + np.outer(y, ky) + np.outer(z, kz))
    return {11: rr, 12: ri, 13: out_r + (rr * np.cos(arg) - ri * np.sin(arg)).sum(axis=1),
            14: out_i + (ri * np.cos(arg) + rr * np.sin(arg)).sum(axis=1)}


def shoc_reduce(v):
    x, partial, total, n, bs = v
    nb, nt = partial.shape
    out = np.empty_like(partial)
    for b in range(nb):
        for t in range(nt):
            idx = np.arange(b * 2 * bs + t, n, 2 * bs * nb)
            out[b, t] = (x[idx] + x[idx + bs]).sum()
    return {1: out, 2: total + out.sum()}


def s3d_rates(v):
    t, a, b, e, nasa, _, _, _, patm, rgas = v
    alogt = np.log(t)[:, None]
    tk = t[:, None]
    smh = nasa[:, 0] * (alogt - 1.0) + nasa[:, 1] * tk / 2.0 + nasa[:, 2] * tk ** 2 / 6.0 - nasa[:, 3] / tk + nasa[:, 4]
    rf = np.exp(a + b * alogt - e / tk)
    pfac = patm / (rgas * t)
    rb = np.empty_like(rf)
    for r, (sa, sb, sc, sd) in enumerate(A.RXN):
        eqk = np.exp(smh[:, sa] + smh[:, sb] - smh[:, sc] - smh[:, sd]) * pfac ** A.DN[r]
        rb[:, r] = rf[:, r] / eqk
    return {5: rf, 6: rb, 7: smh}


def cutcp_lattice(v):
    atoms, lattice, natoms, h, cutoff2, inv_cutoff2 = v
    grid = np.stack(np.meshgrid(*[np.arange(s) * h for s in lattice.shape], indexing="ij"), axis=-1)
    d = atoms[None, None, None, :, :3] - grid[..., None, :]
    r2 = (d ** 2).sum(axis=-1)
    s = 1.0 - r2 * inv_cutoff2
    e = np.where(r2 < cutoff2, atoms[:, 3] / np.sqrt(r2) * s * s, 0.0).sum(axis=-1)
    return {1: lattice + e}


def sc_compute_cost(v):
    num, dim, x, coord, weight, cost, assign, center_table, switch, work_mem, k1 = v
    c = coord.reshape(dim, num)
    x_cost = ((c - c[:, x:x + 1]) ** 2).sum(axis=0) * weight
    sw = switch.copy()
    wm = work_mem.reshape(num, k1).copy()
    for i in range(num):
        if x_cost[i] < cost[i]:
            sw[i] = 1
            wm[i, k1 - 1] += x_cost[i] - cost[i]
        else:
            wm[i, center_table[assign[i]]] += cost[i] - x_cost[i]
    return {8: sw, 9: wm.ravel()}


def gicov(v):
    gx, gy, sin_a, cos_a, t_x, t_y, out, max_r = v
    res = out.copy()
    for i in range(max_r, max_r + out.shape[0] - 2 * max_r):
        for j in range(max_r, max_r + out.shape[1] - 2 * max_r):
            best = 0.0
            for k in range(B.NCIRCLES):
                p = gx[i + t_x[k], j + t_y[k]] * cos_a + gy[i + t_x[k], j + t_y[k]] * sin_a
                best = max(best, p.mean() ** 2 / p.var(ddof=1))
            res[i, j] = math.sqrt(best)
    return {6: res}


def myocyte_ina(v):
    init, _, params = v
    m, h, j, vm = init.reshape(-1, B.NSTATE).T
    fo_rt = 96485.0 / 8314.0 / 310.0
    ena = math.log(params[1] / params[2]) / fo_rt
    am = 0.32 * (vm + 47.13) / (1.0 - np.exp(-0.1 * (vm + 47.13)))
    bm = 0.08 * np.exp(-vm / 11.0)
    hi = vm >= -40.0
    ah = np.where(hi, 0.0, 0.135 * np.exp((80.0 + vm) / -6.8))
    bh = np.where(hi, 1.0 / (0.13 * (1.0 + np.exp(-(vm + 10.66) / 11.1))),
                  3.56 * np.exp(0.079 * vm) + 3.1e5 * np.exp(0.35 * vm))
    aj = np.where(hi, 0.0, (-127140.0 * np.exp(0.2444 * vm) - 3.474e-5 * np.exp(-0.04391 * vm)) * (vm + 37.78)
                  / (1.0 + np.exp(0.311 * (vm + 79.23))))
    bj = np.where(hi, 0.3 * np.exp(-2.535e-7 * vm) / (1.0 + np.exp(-0.1 * (vm + 32.0))),
                  0.1212 * np.exp(-0.01052 * vm) / (1.0 + np.exp(-0.1378 * (vm + 40.14))))
    ina = params[0] * m ** 3 * h * j * (vm - ena)
    return {1: np.stack([am * (1 - m) - bm * m, ah * (1 - h) - bh * h, aj * (1 - j) - bj * j, -ina], 1).ravel()}


def pf_likelihood(v):
    ax, ay, objxy, image, _, weights, max_x, max_y = v
    ix = np.clip(np.floor(ax).astype(int)[:, None] + objxy[:, 1], 0, max_x - 1)
    iy = np.clip(np.floor(ay).astype(int)[:, None] + objxy[:, 0], 0, max_y - 1)
    px = image[ix, iy]
    lk = (((px - 100.0) ** 2 - (px - 228.0) ** 2) / 50.0).sum(axis=1) / B.NDISK
    return {4: lk, 5: weights * np.exp(lk)}


def binomial_options(v):
    _, s, x, t, r, sig = v
    out = np.empty_like(s)
    for o in range(s.size):
        dt = t[o] / B.NSTEPS
        vdt = sig * math.sqrt(dt)
        u, d = math.exp(vdt), math.exp(-vdt)
        pu = (math.exp(r * dt) - d) / (u - d)
        df = math.exp(-r * dt)
        call = np.maximum(s[o] * np.exp(vdt * (2.0 * np.arange(B.NSTEPS + 1) - B.NSTEPS)) - x[o], 0.0)
        for i in range(B.NSTEPS, 0, -1):
            call = pu * df * call[1:i + 1] + (1.0 - pu) * df * call[:i]
        out[o] = call[0]
    return {0: out}


def _csr_pairs(numneigh, first, neigh):
    return [(i, neigh[first[i] + k]) for i in range(numneigh.size) for k in range(numneigh[i])]


def morse_force(v):
    x, f, numneigh, first, neigh, d0, alpha, r0, cutsq = v
    out = np.zeros_like(f)
    for i, j in _csr_pairs(numneigh, first, neigh):
        d = x[i] - x[j]
        rsq = d @ d
        if rsq < cutsq:
            r = math.sqrt(rsq)
            dexp = math.exp(-alpha * (r - r0))
            out[i] += d * 2.0 * d0 * alpha * (dexp * dexp - dexp) / r
    return {1: out}


def _padded_pairs(numneigh, neigh, maxneigh):
    return [(i, neigh[i * maxneigh + k]) for i in range(numneigh.size) for k in range(numneigh[i])]


def buck_force(v):
    x, types, f, eng, numneigh, neigh, maxneigh, ba, brho, bc, cutsq = v
    out, e = np.zeros_like(f), np.zeros_like(eng)
    for i, j in _padded_pairs(numneigh, neigh, maxneigh):
        ti, tj = types[i], types[j]
        d = x[i] - x[j]
        rsq = d @ d
        if rsq < cutsq[ti, tj]:
            r = math.sqrt(rsq)
            rexp = math.exp(-r / brho[ti, tj])
            out[i] += d * (ba[ti, tj] / brho[ti, tj] * rexp * r - 6.0 * bc[ti, tj] / rsq ** 3) / rsq
            e[i] += 0.5 * (ba[ti, tj] * rexp - bc[ti, tj] / rsq ** 3)
    return {2: out, 3: e}


def erfc_polynomial(g):
    """LAMMPS' inlined erfc (Abramowitz and Stegun 7.1.26, |error| <= 1.5e-7)."""
    t = 1.0 / (1.0 + B.EWALD_P * g)
    return t * (B.A1 + t * (B.A2 + t * (B.A3 + t * (B.A4 + t * B.A5)))) * math.exp(-g * g)


def coul_long(v, erfc=erfc_polynomial):
    x, q, f, numneigh, neigh, maxneigh, g_ewald, qqrd2e, cut = v
    out = np.zeros_like(f)
    for i, j in _padded_pairs(numneigh, neigh, maxneigh):
        d = x[i] - x[j]
        rsq = d @ d
        if rsq < cut:
            r = math.sqrt(rsq)
            g = g_ewald * r
            fc = qqrd2e * q[i] * q[j] / r * (erfc(g) + B.EWALD_F * g * math.exp(-g * g))
            out[i] += d[[0, 2]] * fc / rsq
    return {2: out}


def coul_long_erfc(v):
    return coul_long(v, math.erfc)


def face_flux_scatter(v):
    owner, neighbour, phi, psi, sf, gamma, dc, res = v
    psi_f = np.where(phi >= 0.0, psi[owner], psi[neighbour])
    flux = phi * psi_f - gamma * sf * dc * (psi[neighbour] - psi[owner])
    out = res.copy()
    np.add.at(out, owner, flux)
    np.add.at(out, neighbour, -flux)
    return {7: out}


def ceed_mass_apply(v):
    offsets, interp, qw, jac, u, vv = v
    out = vv.copy()
    for e in range(offsets.shape[0]):
        np.add.at(out, offsets[e], interp.T @ (qw * jac[e] * (interp @ u[offsets[e]])))
    return {5: out}


def ceed_diff_apply(v):
    offsets, grad, qw, xn, kappa, u, vv = v
    out = vv.copy()
    for e in range(offsets.shape[0]):
        dxdxi = grad @ xn[offsets[e]]
        np.add.at(out, offsets[e], grad.T @ (kappa[e] * qw * (grad @ u[offsets[e]]) / dxdxi))
    return {6: out}


def brusselator_rhs(v):
    x, f, alpha, a, b, hx = v
    u, w = x[:, 0], x[:, 1]
    out = np.zeros_like(f)
    uxx = (u[:-2] - 2.0 * u[1:-1] + u[2:]) / hx ** 2
    vxx = (w[:-2] - 2.0 * w[1:-1] + w[2:]) / hx ** 2
    uc, vc = u[1:-1], w[1:-1]
    out[1:-1, 0] = alpha * uxx + a - (b + 1.0) * uc + uc * uc * vc
    out[1:-1, 1] = alpha * vxx + b * uc - uc * uc * vc
    return {1: out}


def gray_scott_rhs(v):
    x, _, d1, d2, gamma, kappa, hx, hy = v

    def lap(a):
        return ((np.roll(a, 1, 1) + np.roll(a, -1, 1) - 2 * a) / hx ** 2
                + (np.roll(a, 1, 0) + np.roll(a, -1, 0) - 2 * a) / hy ** 2)
    u, w = x[..., 0], x[..., 1]
    return {1: np.stack([d1 * lap(u) - u * w * w + gamma * (1.0 - u),
                         d2 * lap(w) + u * w * w - (gamma + kappa) * w], axis=-1)}


def column_implicit_diffusion(v):
    tr, kappa, dz, dt = v
    out = np.empty_like(tr)
    for c in range(tr.shape[1]):
        mat = np.zeros((C.NZ, C.NZ))
        for k in range(C.NZ):
            if k > 0:
                mat[k, k - 1] = -dt * kappa[k, c] / dz[k] ** 2
            if k < C.NZ - 1:
                mat[k, k + 1] = -dt * kappa[k + 1, c] / dz[k] ** 2
            mat[k, k] = 1.0 - mat[k].sum()
        out[:, c] = np.linalg.solve(mat, tr[:, c])
    return {0: out}


def sl_advect(v):
    q, _, u, w, dt, dx = v
    nx, ny = q.shape
    i, j = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    xd, yd = i - u * dt / dx, j - w * dt / dx
    x0, y0 = np.floor(xd), np.floor(yd)
    wx, wy = xd - x0, yd - y0
    i0, j0 = x0.astype(int) % nx, y0.astype(int) % ny
    i1, j1 = (i0 + 1) % nx, (j0 + 1) % ny
    return {1: ((1 - wx) * (1 - wy) * q[i0, j0] + wx * (1 - wy) * q[i1, j0] + (1 - wx) * wy * q[i0, j1]
                + wx * wy * q[i1, j1])}


def muscl_faces(v):
    u, mm, sb, vl = v
    dl, dr = u[1:-1] - u[:-2], u[2:] - u[1:-1]
    mm, sb, vl = mm.copy(), sb.copy(), vl.copy()
    mm[1:-1] = u[1:-1] + 0.5 * np.where(dl * dr <= 0.0, 0.0, np.where(np.abs(dl) < np.abs(dr), dl, dr))
    r = np.where(dr != 0.0, dl / dr, 0.0)
    sb[1:-1] = u[1:-1] + 0.5 * np.maximum(0.0, np.maximum(np.minimum(2 * r, 1.0), np.minimum(r, 2.0))) * dr
    vl[1:-1] = u[1:-1] + 0.5 * (r + np.abs(r)) / (1.0 + np.abs(r)) * dr
    return {1: mm, 2: sb, 3: vl}


def black_scholes_erf(v):
    _, _, _, _, s, x, t, r, sig = v
    erf = np.vectorize(math.erf)
    d1 = (np.log(s / x) + (r + 0.5 * sig * sig) * t) / (sig * np.sqrt(t))
    d2 = d1 - sig * np.sqrt(t)

    def n(d):
        return 0.5 * (1.0 + erf(d / math.sqrt(2.0)))
    disc = np.exp(-r * t)
    return {0: s * n(d1) - x * disc * n(d2), 1: x * disc * n(-d2) - s * n(-d1), 2: n(d1),
            3: s * np.sqrt(t) * np.exp(-0.5 * d1 * d1) / math.sqrt(2.0 * math.pi)}


def ikeda_orbit(v):
    a, b, _, mu = v
    for _ in range(C.STEPS):
        t = 0.4 - 6.0 / (1.0 + a * a + b * b)
        a, b = 1.0 + mu * (a * np.cos(t) - b * np.sin(t)), mu * (a * np.sin(t) + b * np.cos(t))
    return {2: np.stack([a, b], axis=1)}
