"""NumPy references for session 56's ported kernels (tests/support/ported_hpc9.py, ported_hpc9_more.py): each takes
the arguments' primal values before the launch (a list, by position) and returns {position: expected value after}.
Written from the same algorithms in NumPy (vectorised where the order of updates does not matter, loops where it
does)."""

import math

import numpy as np


def wkv_forward(a):
    B, T, C, w, u, k, v, y = a
    k3, v3, y3 = k.reshape(B, T, C), v.reshape(B, T, C), y.reshape(B, T, C).copy()
    for b in range(B):  # the unstabilised recurrence: exp(-1e38) rescaling is exact in float64 at these sizes
        num = np.zeros(C)
        den = np.zeros(C)
        for t in range(T):
            e = np.exp(u + k3[b, t])
            y3[b, t] = (num + e * v3[b, t]) / (den + e)
            num = np.exp(w) * num + np.exp(k3[b, t]) * v3[b, t]
            den = np.exp(w) * den + np.exp(k3[b, t])
    return {7: y3.ravel()}


def _bilinear(img, height, width, y, x):
    if not (-1.0 <= y <= height and -1.0 <= x <= width):
        return 0.0
    y, x = max(y, 0.0), max(x, 0.0)
    y_low, x_low = int(y), int(x)
    if y_low >= height - 1:
        y_low = y_high = height - 1
        y = float(y_low)
    else:
        y_high = y_low + 1
    if x_low >= width - 1:
        x_low = x_high = width - 1
        x = float(x_low)
    else:
        x_high = x_low + 1
    ly, lx = y - y_low, x - x_low
    return ((1 - ly) * (1 - lx) * img[y_low, x_low] + (1 - ly) * lx * img[y_low, x_high]
            + ly * (1 - lx) * img[y_high, x_low] + ly * lx * img[y_high, x_high])


def roi_align_forward(a):
    inp, scale, channels, height, width, ph_n, pw_n, ratio, aligned, rois, out = a
    img = inp.reshape(-1, channels, height, width)
    r = rois.reshape(-1, 5)
    res = np.zeros((r.shape[0], channels, ph_n, pw_n))
    off = 0.5 if aligned else 0.0
    for n in range(r.shape[0]):
        sw, sh, ew, eh = r[n, 1:] * scale - off
        rw, rh = ew - sw, eh - sh
        if not aligned:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / ph_n, rw / pw_n
        gh = ratio if ratio > 0 else math.ceil(rh / ph_n)
        gw = ratio if ratio > 0 else math.ceil(rw / pw_n)
        for c in range(channels):
            for ph in range(ph_n):
                for pw in range(pw_n):
                    vals = [_bilinear(img[int(r[n, 0]), c], height, width, sh + ph * bh + (iy + 0.5) * bh / gh,
                                      sw + pw * bw + (ix + 0.5) * bw / gw) for iy in range(gh) for ix in range(gw)]
                    res[n, c, ph, pw] = sum(vals) / max(gh * gw, 1)
    return {10: res.ravel()}


def bpnn_adjust_weights(a):
    delta, hid, ly, inp, w, oldw = a
    W, Wold = w.reshape(inp + 1, hid + 1).copy(), oldw.reshape(inp + 1, hid + 1).copy()
    new_dw = 0.3 * np.outer(ly[1:inp + 1], delta[1:hid + 1]) + 0.3 * Wold[1:, 1:]
    W[1:, 1:] += new_dw
    Wold[1:, 1:] = new_dw
    bias = 0.3 * delta[1:hid + 1] + 0.3 * Wold[0, 1:]  # ly[0] taken as 1, as the host sets it
    W[0, 1:] += bias
    Wold[0, 1:] = bias
    return {4: W.ravel(), 5: Wold.ravel()}


def lud_cuda(a):
    m, dim = a
    A = m.reshape(dim, dim).copy()
    for k in range(dim - 1):  # Doolittle without pivoting: the unit lower and upper factors in place
        A[k + 1:, k] /= A[k, k]
        A[k + 1:, k + 1:] -= np.outer(A[k + 1:, k], A[k, k + 1:])
    return {0: A.ravel()}


def _half_k_space():
    """The wave vectors (rx, ry, rz) both Ewald kernels visit, in the forces kernel's order, with the flat index."""
    out = []
    lowry, lowrz = 0, 1
    for rx in range(2):
        for ry in range(lowry, 2):
            for rz in range(lowrz, 2):
                out.append((rx, ry, rz, rx * 9 + (ry + 1) * 3 + rz + 1))
                lowrz = -1
            lowry = -1
    return out


def ewald(a):
    posq, css, energy, forces, bx, by, bz, expc, gsize = a
    css, energy, forces = css.copy(), energy.copy(), forces.copy()
    coef = 138.935456 * 4 * math.pi / (bx * by * bz)
    kv = {}
    for idx in range(5, 27):  # every index the sums kernel visits: rx up to 2 KMAX_X - 2, as ksizex allows
        rx, ry, rz = idx // 9, idx % 9 // 3 - 1, idx % 3 - 1
        k = np.array([rx * 2 * math.pi / bx, ry * 2 * math.pi / by, rz * 2 * math.pi / bz])
        phase = posq[:, :3] @ k
        s = np.array([np.sum(posq[:, 3] * np.cos(phase)), np.sum(posq[:, 3] * np.sin(phase))])
        css[idx] = s
        k2 = k @ k
        ak = math.exp(k2 * expc) / k2
        energy[idx % gsize] += coef * ak * (s @ s)
        kv[idx] = (k, ak, s)
    kv = {idx: kv[idx] for *_, idx in _half_k_space()}  # the forces kernel's wave vectors: rx < KMAX_X
    for atom in range(posq.shape[0]):
        f = np.zeros(3)
        for _, (k, ak, s) in kv.items():
            phase = posq[atom, :3] @ k
            f += 2 * coef * ak * posq[atom, 3] * (s[0] * math.sin(phase) - s[1] * math.cos(phase)) * k
        forces[atom] += f
    return {1: css, 2: energy, 3: forces}


def spmv_jds(a):
    dst, data, index, perm, x, dim, ptr, zcnt = a
    dst = dst.copy()
    for ix in range(dim):
        js = ptr[:zcnt[ix >> 2]] + ix
        dst[perm[ix]] = np.sum(data[js] * x[index[js]])
    return {0: dst}


def gauss_seidel(a):
    u, f, n, sweeps = a
    U, F = u.reshape(n, n).copy(), f.reshape(n, n)
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    inner = (i > 0) & (j > 0) & (i < n - 1) & (j < n - 1)
    for _ in range(sweeps):
        for colour in (i % 2 != j % 2, i % 2 == j % 2):  # each colour reads only the other's points
            p = np.pad(U, 1)
            new = 0.25 * (p[1:-1, :-2] + p[1:-1, 2:] + p[:-2, 1:-1] + p[2:, 1:-1] + F)
            U = np.where(inner & colour, new, U)
    return {0: U.ravel()}


def pdv_fluxes(predict, dt, xarea, yarea, xvel0, yvel0, xvel1, yvel1):
    """The four face fluxes of every cell (interior and halo alike: the caller takes the interior)."""
    half = 0.5 if predict else 1.0
    xv = (xvel0, xvel0) if predict else (xvel0, xvel1)
    yv = (yvel0, yvel0) if predict else (yvel0, yvel1)
    xs = sum(v[:-1, :] + v[1:, :] for v in xv)  # per x face: the two nodes at two time levels
    ys = sum(v[:, :-1] + v[:, 1:] for v in yv)
    xflux = xarea * xs * 0.25 * dt * half
    yflux = yarea * ys * 0.25 * dt * half
    return xflux[:, :-1], xflux[:, 1:], yflux[:-1, :], yflux[1:, :]


def pdv_kernel(a):
    predict, x_max, y_max, dt, err, xarea, yarea, volume, rho0, rho1, e0, e1, p, q, xv0, yv0, xv1, yv1 = a
    left, right, bottom, top = pdv_fluxes(predict, dt, xarea, yarea, xv0, yv0, xv1, yv1)
    total = right - left + top - bottom
    change = volume / (volume + total)
    minv = np.minimum(volume + total, np.minimum(volume + right - left, volume + top - bottom))
    flag = np.where(minv <= 0.0, 2, np.where(change <= 0.0, 1, 0))
    new_e = e0 - (p / rho0 + q / rho0) * total / volume
    new_rho = rho0 * change
    s = np.s_[2:y_max + 2, 2:x_max + 2]
    err, e1, rho1 = err.copy(), e1.copy(), rho1.copy()
    err[s], e1[s], rho1[s] = flag[s], new_e[s], new_rho[s]
    return {4: err, 9: rho1, 11: e1}


def generate_spectrum(a):
    h0, ht, in_width, out_width, out_height, t, patch = a
    ht = ht.copy()
    for y in range(out_height):
        for x in range(out_width):
            kx = (-out_width / 2.0 + x) * (2.0 * math.pi / patch)
            ky = (-out_width / 2.0 + y) * (2.0 * math.pi / patch)
            w = math.sqrt(9.81 * math.sqrt(kx * kx + ky * ky))
            hk = complex(*h0[y * in_width + x])
            hmk = complex(*h0[(out_height - y) * in_width + out_width - x])
            v = hk * complex(math.cos(w * t), math.sin(w * t)) + hmk.conjugate() * complex(math.cos(w * t),
                                                                                          -math.sin(w * t))
            ht[y * out_width + x] = (v.real, v.imag)
    return {1: ht}


def fasten_main(a):
    (natlig, natpro, pxyz, ptype, lxyz, ltype, t0, t1, t2, t3, t4, t5, etotals, hbt, rad, hphb, elsc, nposes,
     _) = a
    out = etotals.copy()
    for pose in range(nposes):
        sx, cx, sy, cy, sz, cz = (f(t[pose]) for t in (t0, t1, t2) for f in (math.sin, math.cos))
        rot = np.array([[cy * cz, sx * sy * cz - cx * sz, cx * sy * cz + sx * sz],
                        [cy * sz, sx * sy * sz + cx * cz, cx * sy * sz - sx * cz],
                        [-sy, sx * cy, cx * cy]])
        lpos = lxyz @ rot.T + np.array([t3[pose], t4[pose], t5[pose]])
        e = 0.0
        for il in range(natlig):
            lt = ltype[il]
            for ip in range(natpro):
                pt = ptype[ip]
                radij = rad[pt] + rad[lt]
                both_f = hbt[pt] == 70 and hbt[lt] == 70
                elcdst, elcdst1 = (4.0, 0.25) if both_f else (2.0, 0.5)
                type_e = hbt[pt] == 69 or hbt[lt] == 69
                p_h = hphb[pt] * (-1.0 if hphb[pt] < 0 and hphb[lt] > 0 else 1.0)
                l_h = hphb[lt] * (-1.0 if hphb[pt] > 0 and hphb[lt] < 0 else 1.0)
                if hphb[pt] < 0:
                    distdslv = 5.5 if hphb[lt] < 0 else 1.0
                else:
                    distdslv = 1.0 if hphb[lt] < 0 else -3.4028234663852886e38
                d = float(np.linalg.norm(lpos[il] - pxyz[ip]))
                bb = d - radij
                zone1 = bb < 0
                e += (1.0 - d / radij) * (76.0 if zone1 else 0.0)
                chrg = elsc[lt] * elsc[pt] * ((1.0 if zone1 else 1.0 - bb * elcdst1) * (1.0 if bb < elcdst else 0.0))
                e += (-abs(chrg) if type_e else chrg) * 45.0
                dslv = (p_h + l_h) * (1.0 if bb < distdslv and hphb[pt] != 0 else 0.0)
                e += dslv * (1.0 if zone1 else 1.0 - bb / distdslv)
        out[pose] = 0.5 * e
    return {12: out}


def halo_packing(a):
    var0, var1, pack0, pack1, unpack0, unpack1, plist0, plist1, ulist0, ulist1 = a
    v = [var0.copy(), var1.copy()]
    packs = [np.concatenate([x[lst] for x in (var0, var1)]) for lst in (plist0, plist1)]
    for buf, lst in zip(packs[::-1], (ulist0, ulist1)):
        for k in range(2):
            v[k][lst] = buf[k * lst.shape[0]:(k + 1) * lst.shape[0]]
    return {0: v[0], 1: v[1], 2: packs[0], 3: packs[1], 4: packs[1], 5: packs[0]}


def attention_backward(a):
    dinp, dpreatt, datt, dout, inp, att, B, T, C, NH = a
    hs = C // NH
    scale = 1.0 / math.sqrt(hs)
    di = dinp.reshape(B, T, 3, NH, hs).copy()
    dp, da = dpreatt.reshape(B, NH, T, T).copy(), datt.reshape(B, NH, T, T).copy()
    x = inp.reshape(B, T, 3, NH, hs)
    at, do = att.reshape(B, NH, T, T), dout.reshape(B, T, NH, hs)
    for b in range(B):
        for t in range(T):
            for h in range(NH):
                n = t + 1
                da[b, h, t, :n] += x[b, :n, 2, h] @ do[b, t, h]
                di[b, :n, 2, h] += np.outer(at[b, h, t, :n], do[b, t, h])
                p = at[b, h, t, :n]
                dp[b, h, t, :n] += (np.diag(p) - np.outer(p, p)).T @ da[b, h, t, :n]
                di[b, t, 0, h] += scale * dp[b, h, t, :n] @ x[b, :n, 1, h]
                di[b, :n, 1, h] += scale * np.outer(dp[b, h, t, :n], x[b, t, 0, h])
    return {0: di.ravel(), 1: dp.ravel(), 2: da.ravel()}
