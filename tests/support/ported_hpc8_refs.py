"""NumPy references for session 55's ported kernels (tests/support/ported_hpc8.py, ported_hpc8_more.py): each takes
the arguments' primal values before the launch (a list, by position) and returns {position: expected value after}.
Written from the same algorithms in NumPy (vectorised where the order of updates does not matter, loops where it
does)."""

import numpy as np


def hotspot_step(a):
    power, temp, out, cols, rows, cap, rx, ry, rz, step = a
    t = temp.reshape(rows, cols)
    p = np.pad(t, 1, mode="edge")  # the clamped neighbours
    ns = p[2:, 1:-1] + p[:-2, 1:-1] - 2.0 * t
    ew = p[1:-1, 2:] + p[1:-1, :-2] - 2.0 * t
    new = t + step / cap * (power.reshape(rows, cols) + ns / ry + ew / rx + (80.0 - t) / rz)
    return {2: new.ravel()}


def _nine_point(d, wc, wn, wd):
    return (wc * d[1:-1, 1:-1] + wn * (d[:-2, 1:-1] + d[2:, 1:-1] + d[1:-1, :-2] + d[1:-1, 2:])
            + wd * (d[:-2, :-2] + d[:-2, 2:] + d[2:, :-2] + d[2:, 2:]))


def stencil2d(a):
    data, new, wc, wn, wd, iters = a
    data, new = data.copy(), new.copy()
    for _ in range(iters // 2):
        new[1:-1, 1:-1] = _nine_point(data, wc, wn, wd)
        data[1:-1, 1:-1] = _nine_point(new, wc, wn, wd)
    return {0: data, 1: new}


def fwt(a):
    data, log2n = a
    n = 1 << log2n
    h = np.array([[1.0]])
    while h.shape[0] < n:  # Sylvester's Hadamard matrix: the natural order fwtBatchGPU produces
        h = np.block([[h, h], [h, -h]])
    return {0: h @ data}


def fdtd3d_step(a):
    out, inp, coeff, dimx, dimy, radius = a
    nx, ny = dimx + 2 * radius, dimy + 2 * radius
    v = inp.reshape(-1, ny, nx)
    r = radius
    c = v[r:-r, r:-r, r:-r]
    acc = coeff[0] * c
    for k in range(1, r + 1):
        acc = acc + coeff[k] * (np.roll(v, -k, 2)[r:-r, r:-r, r:-r] + np.roll(v, k, 2)[r:-r, r:-r, r:-r]
                                + np.roll(v, -k, 1)[r:-r, r:-r, r:-r] + np.roll(v, k, 1)[r:-r, r:-r, r:-r]
                                + np.roll(v, -k, 0)[r:-r, r:-r, r:-r] + np.roll(v, k, 0)[r:-r, r:-r, r:-r])
    o = out.reshape(v.shape).copy()
    o[r:-r, r:-r, r:-r] = acc
    return {0: o.ravel()}


def box_filter_x(a):
    src, dst, w, h, r = a
    img = src.reshape(h, w)
    padded = np.concatenate([np.repeat(img[:, :1], r, 1), img, np.repeat(img[:, -1:], r, 1)], 1)
    out = sum(padded[:, k:k + w] for k in range(2 * r + 1)) / (2 * r + 1)
    return {1: out.ravel()}


def blelloch_scan(a):
    (temp,) = a
    return {0: np.concatenate([[0.0], np.cumsum(temp)[:-1]])}


def _cross(a, b):
    return np.stack([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


def monotonic_q_gradients(a):
    x, y, z, xd, yd, zd, volo, vnew, nodelist = a[:9]
    nodes = nodelist.reshape(-1, 8)
    pos = np.stack([x[nodes], y[nodes], z[nodes]])  # (3, elements, 8)
    vel = np.stack([xd[nodes], yd[nodes], zd[nodes]])

    def face_difference(v, plus, minus):
        return 0.25 * (v[:, :, plus].sum(2) - v[:, :, minus].sum(2))

    xi, eta, zeta = ([1, 2, 6, 5], [0, 3, 7, 4]), ([3, 2, 6, 7], [0, 1, 5, 4]), ([4, 5, 6, 7], [0, 1, 2, 3])
    d = {name: face_difference(pos, *faces) for name, faces in (("i", xi), ("j", eta), ("k", zeta))}
    dv = {name: face_difference(vel, *faces) for name, faces in (("i", xi), ("j", eta), ("k", zeta))}
    vol = volo * vnew
    out = {}
    for slot, (u, w, along) in zip((9, 11, 13), (("i", "j", "k"), ("j", "k", "i"), ("k", "i", "j"))):
        n = _cross(d[u], d[w])
        out[slot] = vol / np.sqrt((n * n).sum(0) + 1e-36)
        out[slot + 1] = (n / (vol + 1e-36) * dv[along]).sum(0)
    return out


def encoder_forward(a):
    out, inp, wte, wpe, B, T, C = a
    return {0: (wte.reshape(-1, C)[inp] + wpe.reshape(-1, C)[np.arange(B * T) % T]).ravel()}


def encoder_backward(a):
    dwte, dwpe, dout, inp, B, T, C = a
    dwte, dwpe = dwte.reshape(-1, C).copy(), dwpe.reshape(-1, C).copy()
    rows = dout.reshape(B * T, C)
    np.add.at(dwte, inp, rows)
    np.add.at(dwpe, np.arange(B * T) % T, rows)
    return {0: dwte.ravel(), 1: dwpe.ravel()}


def three_mm(a):
    A, B, C, D, E, F, G, ni, nj, nk, nl, nm = a
    e = A.reshape(ni, nk) @ B.reshape(nk, nj)
    f = C.reshape(nj, nm) @ D.reshape(nm, nl)
    return {4: e.ravel(), 5: f.ravel(), 6: (e @ f).ravel()}


def syrk_kernel(a):
    alpha, beta, A, C, n, m = a
    A = A.reshape(n, m)
    return {3: (beta * C.reshape(n, n) + alpha * A @ A.T).ravel()}


def conv2d_polybench(a):
    A, B, ni, nj = a
    img = A.reshape(ni, nj)
    w = np.array([[0.2, 0.5, -0.8], [-0.3, 0.6, -0.9], [0.4, 0.7, 0.10]])  # w[di + 1, dj + 1] = c(dj+2)(di+2)
    acc = sum(w[di + 1, dj + 1] * img[1 + di:ni - 1 + di, 1 + dj:nj - 1 + dj]
              for di in (-1, 0, 1) for dj in (-1, 0, 1))
    out = B.reshape(ni, nj).copy()
    out[1:-1, 1:-1] = acc
    return {1: out.ravel()}


def jacobi_1d(a):
    A, B, tsteps = a
    A, B = A.copy(), B.copy()
    for _ in range(tsteps):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])
    return {0: A, 1: B}


def cholesky(a):
    (A,) = a
    out = np.triu(A, 1) + np.linalg.cholesky(A)
    return {0: out}


def pennant_ctrs_vols(a):
    px, py, ex, ey, zx, zy, sarea, svol, zarea, zvol, p1, p2, sz, znump = a
    cx, cy = zx.copy(), zy.copy()
    np.add.at(cx, sz, px[p1])
    np.add.at(cy, sz, py[p1])
    cx, cy = cx / znump, cy / znump
    sa = 0.5 * ((px[p2] - px[p1]) * (cy[sz] - py[p1]) - (py[p2] - py[p1]) * (cx[sz] - px[p1]))
    sv = sa * (px[p1] + px[p2] + cx[sz]) / 3.0
    za, zv = zarea.copy(), zvol.copy()
    np.add.at(za, sz, sa)
    np.add.at(zv, sz, sv)
    return {2: 0.5 * (px[p1] + px[p2]), 3: 0.5 * (py[p1] + py[p2]), 4: cx, 5: cy, 6: sa, 7: sv, 8: za, 9: zv}


def monotonic_q_region(a):
    (reg, bc, lxim, lxip, letam, letap, lzetam, lzetap, dv_xi, dv_eta, dv_zeta, dx_xi, dx_eta, dx_zeta, vdov, mass,
     volo, vnew, qq, ql, mult, max_slope, qlc, qqc, ptiny) = a
    qq, ql = qq.copy(), ql.copy()
    directions = ((dv_xi, dx_xi, lxim, lxip, 0), (dv_eta, dx_eta, letam, letap, 6),
                  (dv_zeta, dx_zeta, lzetam, lzetap, 12))

    def face(dv, e, neighbour, bits):  # bits: 0 or COMM -> the neighbour, SYMM -> the element, FREE -> 0
        return {0: dv[neighbour], 4: dv[neighbour], 1: dv[e], 2: 0.0}[bits]
    for e in reg:
        phis, dvx = [], []
        for dv, dx, lm, lp, shift in directions:
            norm = 1.0 / (dv[e] + ptiny)
            m = face(dv, e, lm[e], (bc[e] >> shift) & 7) * norm
            p = face(dv, e, lp[e], (bc[e] >> (shift + 3)) & 7) * norm
            phis.append(min(max(min(0.5 * (m + p), mult * m, mult * p), 0.0), max_slope))
            dvx.append(min(dv[e] * dx[e], 0.0))
        if vdov[e] > 0.0:
            qq[e] = ql[e] = 0.0
            continue
        rho = mass[e] / (volo[e] * vnew[e])
        ql[e] = -qlc * rho * sum(d * (1.0 - f) for d, f in zip(dvx, phis))
        qq[e] = qqc * rho * sum(d * d * (1.0 - f * f) for d, f in zip(dvx, phis))
    return {18: qq, 19: ql}
