"""NumPy references for session 52's ported kernels, parts two and three (ported_hpc5_fluids.py,
ported_hpc5_nets.py), in the form of ported_hpc5_refs.py."""

import math

import numpy as np

GAMMA = 1.4


def kessler_column(a):
    t, qv, qc, qr, rho, p, dt, dz = (x.copy() if isinstance(x, np.ndarray) else x for x in a)
    nz = t.shape[0]
    for k in range(nz):
        vt = 36.34 * (0.001 * rho[k] * qr[k]) ** 0.1364
        flux_in = np.zeros_like(vt)
        if k < nz - 1:
            flux_in = 36.34 * (0.001 * rho[k + 1] * qr[k + 1]) ** 0.1364 * rho[k + 1] * qr[k + 1]
        qr[k] += dt * (flux_in - vt * rho[k] * qr[k]) / (rho[k] * dz)
        prod = np.minimum(dt * (0.001 * np.maximum(0.0, qc[k] - 0.001) + 2.2 * qc[k] * qr[k] ** 0.875), qc[k])
        qc[k] -= prod
        qr[k] += prod
        qvs = 380.0 / p[k] * np.exp(17.27 * (t[k] - 273.0) / (t[k] - 36.0))
        ern = dt * (1.6 + 124.9 * (0.001 * rho[k] * qr[k]) ** 0.2046) * (0.001 * rho[k] * qr[k]) ** 0.525 / \
            (5.4e5 + 2.55e8 / (p[k] * qvs)) * np.maximum(0.0, qvs - qv[k]) / (rho[k] * qvs)
        ern = np.minimum(ern, qr[k])
        qr[k] -= ern
        qv[k] += ern
        t[k] -= 2500.0 * ern
        excess = np.maximum((qv[k] - qvs) / (1.0 + 4093.0 * 2500.0 * qvs / (t[k] - 36.0) ** 2), -qc[k])
        qv[k] -= excess
        qc[k] += excess
        t[k] += 2500.0 * excess
    return {0: t, 1: qv, 2: qc, 3: qr}


def ppm_flux(a):
    q, flux, c = a
    out = np.empty_like(q)
    for i in range(len(q)):
        am2, am1, a0, ap1, ap2 = (q[(i + s) % len(q)] for s in (-2, -1, 0, 1, 2))
        al = 7 / 12 * (am1 + a0) - 1 / 12 * (am2 + ap1)
        ar = 7 / 12 * (a0 + ap1) - 1 / 12 * (am1 + ap2)
        if (ar - a0) * (a0 - al) <= 0:
            al = ar = a0
        elif (ar - al) * (a0 - 0.5 * (al + ar)) > (ar - al) ** 2 / 6:
            al = 3 * a0 - 2 * ar
        elif -(ar - al) ** 2 / 6 > (ar - al) * (a0 - 0.5 * (al + ar)):
            ar = 3 * a0 - 2 * al
        a6 = 6 * (a0 - 0.5 * (al + ar))
        out[i] = c * (ar - 0.5 * c * (ar - al - (1 - 2 / 3 * c) * a6))
    return {1: out}


def virieux_steps(a):
    vx, vz, sxx, szz, sxz, rho, lam, mu, damp, dt, h, nsteps = (x.copy() if isinstance(x, np.ndarray) else x
                                                                for x in a)
    s = (slice(1, -1), slice(1, -1))
    for _ in range(nsteps):
        c = dt / (rho[s] * h)
        vx[s] += c * (sxx[2:, 1:-1] - sxx[s] + sxz[s] - sxz[1:-1, :-2])
        vz[s] += c * (sxz[s] - sxz[:-2, 1:-1] + szz[1:-1, 2:] - szz[s])
        vx[s] *= damp[s]
        vz[s] *= damp[s]
        exx, ezz = (vx[s] - vx[:-2, 1:-1]) / h, (vz[s] - vz[1:-1, :-2]) / h
        sxx[s] += dt * ((lam[s] + 2 * mu[s]) * exx + lam[s] * ezz)
        szz[s] += dt * (lam[s] * exx + (lam[s] + 2 * mu[s]) * ezz)
        sxz[s] += dt * mu[s] * ((vx[1:-1, 2:] - vx[s] + vz[2:, 1:-1] - vz[s]) / h)
        for arr in (sxx, szz, sxz):
            arr[s] *= damp[s]
    return {0: vx, 1: vz, 2: sxx, 3: szz, 4: sxz}


def _prim(q):
    r = q[:, 0]
    u = q[:, 1] / r
    p = (GAMMA - 1) * (q[:, 2] - 0.5 * r * u * u)
    return r, u, p, q[:, 2]


def roe_flux(a):
    q, flux = a
    r, u, p, e = _prim(q)
    h = (e + p) / r
    sl, sr = np.sqrt(r[:-1]), np.sqrt(r[1:])
    uu = (sl * u[:-1] + sr * u[1:]) / (sl + sr)
    hh = (sl * h[:-1] + sr * h[1:]) / (sl + sr)
    c = np.sqrt((GAMMA - 1) * (hh - 0.5 * uu * uu))
    dr, du, dp, rho = np.diff(r), np.diff(u), np.diff(p), sl * sr
    w = [(dp - rho * c * du) / (2 * c * c), dr - dp / (c * c), (dp + rho * c * du) / (2 * c * c)]
    lam = [np.abs(uu - c), np.abs(uu), np.abs(uu + c)]
    k = [np.stack([np.ones_like(uu), uu - c, hh - uu * c], 1), np.stack([np.ones_like(uu), uu, 0.5 * uu * uu], 1),
         np.stack([np.ones_like(uu), uu + c, hh + uu * c], 1)]
    f = np.stack([r * u, r * u * u + p, r * u * h], 1)
    return {1: 0.5 * (f[:-1] + f[1:]) - 0.5 * sum(lam[m][:, None] * w[m][:, None] * k[m] for m in range(3))}


def hllc_flux(a):
    q, flux = a
    r, u, p, e = _prim(q)
    c = np.sqrt(GAMMA * p / r)
    f = np.stack([r * u, r * u * u + p, u * (e + p)], 1)
    out = np.empty((len(q) - 1, 3))
    for i in range(len(q) - 1):
        L, R = i, i + 1
        s_l, s_r = min(u[L] - c[L], u[R] - c[R]), max(u[L] + c[L], u[R] + c[R])
        s_m = (p[R] - p[L] + r[L] * u[L] * (s_l - u[L]) - r[R] * u[R] * (s_r - u[R])) / \
            (r[L] * (s_l - u[L]) - r[R] * (s_r - u[R]))
        if s_l >= 0:
            out[i] = f[L]
        elif s_r <= 0:
            out[i] = f[R]
        else:
            K, s = (L, s_l) if s_m >= 0 else (R, s_r)
            fs = r[K] * (s - u[K]) / (s - s_m)
            star = fs * np.array([1.0, s_m, e[K] / r[K] + (s_m - u[K]) * (s_m + p[K] / (r[K] * (s - u[K])))])
            out[i] = f[K] + s * (star - q[K])
    return {1: out}


def maccormack(a):
    u, u_star, r, nsteps = a
    u = u.copy()
    for _ in range(nsteps):
        us = u.copy()
        us[:-1] = u[:-1] - r * (0.5 * u[1:] ** 2 - 0.5 * u[:-1] ** 2)
        u[1:] = 0.5 * (u[1:] + us[1:] - r * (0.5 * us[1:] ** 2 - 0.5 * us[:-1] ** 2))
    return {0: u, 1: us}


def pcr_solve(a):
    A, b, c, d = a[:4]
    M = np.diag(b) + np.diag(A[1:], -1) + np.diag(c[:-1], 1)
    return {8: np.linalg.solve(M, d)}


def cholesky4_solve(a):
    A, rhs, x = a
    L = np.linalg.cholesky(np.tril(A) + np.swapaxes(np.tril(A, -1), 1, 2))
    y = np.stack([np.linalg.solve(Lt, bt) for Lt, bt in zip(L, rhs)])
    return {2: np.stack([np.linalg.solve(Lt.T, yt) for Lt, yt in zip(L, y)])}


def jacobi_eigen3(a):
    A, eig, sweeps = a
    out = eig.copy()
    for t in range(len(A)):
        m = A[t].copy()
        for _ in range(sweeps):
            for p, r in ((0, 1), (0, 2), (1, 2)):
                th = 0.5 * math.atan2(2 * m[p, r], m[r, r] - m[p, p])
                c, s = math.cos(th), math.sin(th)
                m[:, [p, r]] = np.stack([c * m[:, p] - s * m[:, r], s * m[:, p] + c * m[:, r]], 1)
                m[[p, r], :] = np.stack([c * m[p] - s * m[r], s * m[p] + c * m[r]])
        out[t] = np.diag(m)
    return {1: out}


def heston_paths(a):
    z1, z2, s0, v0, kappa, theta, xi, rho, r, dt, strike, payoff = a
    s, v = np.full(len(z1), s0), np.full(len(z1), v0)
    for k in range(z1.shape[1]):
        vp = np.maximum(v, 0.0)
        sq = np.sqrt(vp * dt)
        w2 = rho * z1[:, k] + math.sqrt(1 - rho * rho) * z2[:, k]
        s = s * np.exp((r - 0.5 * vp) * dt + sq * z1[:, k])
        v = v + kappa * (theta - vp) * dt + xi * sq * w2
    return {11: math.exp(-r * dt * z1.shape[1]) * np.maximum(s - strike, 0.0)}


def asian_call(a):
    z, s0, r, sigma, dt, strike, payoff = a
    s = s0 * np.exp(np.cumsum((r - 0.5 * sigma ** 2) * dt + sigma * math.sqrt(dt) * z, axis=1))
    return {6: math.exp(-r * dt * z.shape[1]) * np.maximum(s.mean(1) - strike, 0.0)}


def american_put(a):
    S, X, T, R, V, price, nsteps = *a, 12
    out = price.copy()
    for o in range(len(S)):
        dt = T[o] / nsteps
        u = math.exp(V * math.sqrt(dt))
        d = 1 / u
        pu = (math.exp(R * dt) - d) / (u - d)
        val = np.maximum(X[o] - S[o] * u ** (2.0 * np.arange(nsteps + 1) - nsteps), 0.0)
        for i in range(nsteps, 0, -1):
            cont = math.exp(-R * dt) * (pu * val[1:i + 1] + (1 - pu) * val[:i])
            val[:i] = np.maximum(cont, X[o] - S[o] * u ** (2.0 * np.arange(i) - i + 1))
        out[o] = val[0]
    return {5: out}


def pagerank_pull(a):
    row_ptr, col, out_degree, rank, new_rank, damping = a
    s = np.array([(rank[col[row_ptr[v]:row_ptr[v + 1]]] / out_degree[col[row_ptr[v]:row_ptr[v + 1]]]).sum()
                  for v in range(len(rank))])
    return {4: (1 - damping) / len(rank) + damping * s}


def gcn_aggregate(a):
    row_ptr, col, w, deg, h, out = a
    res = np.stack([(w[row_ptr[v]:row_ptr[v + 1], None] * h[col[row_ptr[v]:row_ptr[v + 1]]]
                     / np.sqrt(deg[col[row_ptr[v]:row_ptr[v + 1]]])[:, None]).sum(0) for v in range(len(out))])
    return {5: res / np.sqrt(deg)[:, None]}


def gat_aggregate(a):
    row_ptr, col, a_src, a_dst, h, out, slope = a
    res = np.empty_like(out)
    for v in range(len(out)):
        nb = col[row_ptr[v]:row_ptr[v + 1]]
        z = a_src[nb] + a_dst[v]
        z = np.where(z > 0, z, slope * z)
        alpha = np.exp(z - z.max(0))
        alpha /= alpha.sum(0)
        res[v] = (alpha[:, :, None] * h[nb]).sum(0)
    return {5: res}


def rope_rotate(a):
    q, k, head_size, base = (x.copy() if isinstance(x, np.ndarray) else x for x in a)
    npos, dim = q.shape
    i = (np.arange(dim) % head_size) // 2
    ang = np.arange(npos)[:, None] * (1.0 / base ** (2.0 * i / head_size))[None, ::2]
    c, s = np.cos(ang), np.sin(ang)
    for x in (q, k):
        x0, x1 = x[:, 0::2].copy(), x[:, 1::2].copy()
        x[:, 0::2], x[:, 1::2] = x0 * c - x1 * s, x0 * s + x1 * c
    return {0: q, 1: k}


def depthwise_conv2d(a):
    inp, w, bias, out, stride, pad = a
    k = w.shape[1]
    xp = np.pad(inp, ((0, 0), (pad, pad), (pad, pad)))
    res = np.empty_like(out)
    for oy in range(out.shape[1]):
        for ox in range(out.shape[2]):
            win = xp[:, oy * stride:oy * stride + k, ox * stride:ox * stride + k]
            res[:, oy, ox] = bias + (win * w).sum((1, 2))
    return {3: res}


def embedding_bag_sum(a):
    table, idx, offsets, psw, out = a
    return {4: np.stack([(psw[offsets[b]:offsets[b + 1], None] * table[idx[offsets[b]:offsets[b + 1]]]).sum(0)
                         for b in range(len(out))])}


def group_norm(a):
    x, gamma, beta, y, groups, eps = a
    n, c, hw = x.shape
    g = x.reshape(n, groups, -1)
    norm = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)).reshape(n, c, hw)
    return {3: norm * gamma[None, :, None] + beta[None, :, None]}


def cross_entropy(a):
    logits, targets, losses = a
    m = logits.max(1)
    lse = m + np.log(np.exp(logits - m[:, None]).sum(1))
    return {2: lse - logits[np.arange(len(targets)), targets]}


def bilateral_filter(a):
    img, out, radius, ss, sr = a
    h, w = img.shape
    res = np.empty_like(img)
    for y in range(h):
        for x in range(w):
            tot = ws = 0.0
            for dy in range(-radius, radius + 1):
                for dx in range(-radius, radius + 1):
                    v = img[min(max(y + dy, 0), h - 1), min(max(x + dx, 0), w - 1)]
                    wt = math.exp(-(dx * dx + dy * dy) / (2 * ss * ss) - (v - img[y, x]) ** 2 / (2 * sr * sr))
                    tot += wt * v
                    ws += wt
            res[y, x] = tot / ws
    return {1: res}


def tv_step(a):
    u, f, un, lam, tau, eps = a
    gx = np.zeros_like(u)
    gy = np.zeros_like(u)
    gx[:, :-1] = np.diff(u, axis=1)
    gy[:-1] = np.diff(u, axis=0)
    norm = np.sqrt(eps + gx * gx + gy * gy)
    px, py = gx / norm, gy / norm
    div = px + py
    div[:, 1:] -= px[:, :-1]
    div[1:] -= py[:-1]
    return {2: u + tau * (div - lam * (u - f))}


def sobel_magnitude(a):
    img, mag, scale = a
    res = np.zeros_like(img)
    gx = (img[:-2, 2:] + 2 * img[1:-1, 2:] + img[2:, 2:]) - (img[:-2, :-2] + 2 * img[1:-1, :-2] + img[2:, :-2])
    gy = (img[:-2, :-2] + 2 * img[:-2, 1:-1] + img[:-2, 2:]) - (img[2:, :-2] + 2 * img[2:, 1:-1] + img[2:, 2:])
    res[1:-1, 1:-1] = scale * np.sqrt(gx * gx + gy * gy)
    return {1: res}
