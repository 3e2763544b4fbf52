"""NumPy references for session 53's ported kernels (tests/support/ported_hpc6.py, ported_hpc6_more.py): each takes
the arguments' primal values before the launch (a list, by position) and returns {position: expected value after}.
Written from the same algorithms in NumPy (vectorised where the order of updates does not matter, loops where it
does)."""

import math

import numpy as np

from support.ported_hpc6 import FIR_COEFF


def _ssc(pbvc, e, vv, bvc, p, rho0):
    ssc = (pbvc * e + vv * vv * bvc * p) / rho0
    return np.where(ssc <= 0.1111111e-36, 0.3333333e-18, np.sqrt(np.maximum(ssc, 0.0)))


def _cut(e, e_cut, emin):
    e = np.where(np.abs(e) < e_cut, 0.0, e)
    return np.where(e < emin, emin, e)


def energy(a):
    (e_new, e_old, delvc, p_new, p_old, q_new, q_old, work, comp_half, p_half, bvc, pbvc, ql_old, qq_old, vnewc,
     rho0, e_cut, emin, q_cut) = a
    e = e_old - 0.5 * delvc * (p_old + q_old) + 0.5 * work
    vhalf = 1.0 / (1.0 + comp_half)
    q = np.where(delvc > 0.0, 0.0, _ssc(pbvc, e, vhalf, bvc, p_half, rho0) * ql_old + qq_old)
    e = e + 0.5 * delvc * (3.0 * (p_old + q_old) - 4.0 * (p_half + q))
    e = _cut(e + 0.5 * work, e_cut, emin)
    q_tilde = np.where(delvc > 0.0, 0.0, _ssc(pbvc, e, vnewc, bvc, p_new, rho0) * ql_old + qq_old)
    e = _cut(e - (7.0 * (p_old + q_old) - 8.0 * (p_half + q) + (p_new + q_tilde)) * delvc / 6.0, e_cut, emin)
    q6 = _ssc(pbvc, e, vnewc, bvc, p_new, rho0) * ql_old + qq_old
    q6 = np.where(np.abs(q6) < q_cut, 0.0, q6)
    q = np.where(delvc <= 0.0, q6, q)
    return {0: e, 5: q}


def pressure(a):
    bvc, p_new, compression, e_old, vnewc, cls, p_cut, eosvmax, pmin = a
    b = cls * (compression + 1.0)
    p = b * e_old
    p = np.where(np.abs(p) < p_cut, 0.0, p)
    p = np.where(vnewc >= eosvmax, 0.0, p)
    return {0: b, 1: np.where(p < pmin, pmin, p)}


def vol3d(a):
    x, y, z, vol, jp, kp, vnormq = a
    nz, ny, nx = vol.shape
    base = (np.arange(nz)[:, None, None] * kp + np.arange(ny)[None, :, None] * jp + np.arange(nx)[None, None, :])
    corners = [0, 1, jp + 1, jp, kp, kp + 1, kp + jp + 1, kp + jp]
    p = [np.stack([c[base + o] for c in (x, y, z)], -1) for o in corners]
    d71, d72, d74 = p[7] - p[1], p[7] - p[2], p[7] - p[4]
    d30, d50, d60 = p[3] - p[0], p[5] - p[0], p[6] - p[0]

    def term(s, u, w):
        return (s * np.cross(u, w)).sum(-1)
    return {3: vnormq * (term(d71 + d60, d72, d30) + term(d72 + d50, d74, d60) + term(d74 + d30, d71, d50))}


def nodal_accumulation_3d(a):
    vol, x, jp, kp = a
    out = x.copy()
    nz, ny, nx = vol.shape
    base = (np.arange(nz)[:, None, None] * kp + np.arange(ny)[None, :, None] * jp + np.arange(nx)[None, None, :])
    for o in (0, 1, jp, jp + 1, kp, kp + 1, kp + jp, kp + jp + 1):
        np.add.at(out, (base + o).ravel(), 0.125 * vol.ravel())
    return {1: out}


def del_dot_vec_2d(a):
    x, y, xdot, ydot, div, zones, jp, ptiny = a
    out = div.copy()
    i = zones

    def ij(f):
        n1, n2, n3, n4 = f[i + 1], f[i + jp + 1], f[i + jp], f[i]
        return 0.5 * (n1 + n2 - n3 - n4), 0.5 * (n2 + n3 - n4 - n1), n1 + n2 + n3 + n4
    xi, xj, _ = ij(x)
    yi, yj, ysum = ij(y)
    fxi, fxj, _ = ij(xdot)
    fyi, fyj, fysum = ij(ydot)
    rarea = 1.0 / (xi * yj - xj * yi + ptiny)
    out[i] = rarea * (fxi * yj - fxj * yi) + rarea * (fyj * xi - fyi * xj) + fysum / ysum
    return {4: out}


def hydro_2d(a):
    za, zb, zp, zq, zr, zm, zu, zv, zz, zroout, zzout, s, t = a
    za, zb, zu, zv, zro, zzo = za.copy(), zb.copy(), zu.copy(), zv.copy(), zroout.copy(), zzout.copy()
    kn, jn = zp.shape
    for k in range(1, kn - 1):
        for j in range(1, jn - 1):
            za[k, j] = (zp[k + 1, j - 1] + zq[k + 1, j - 1] - zp[k, j - 1] - zq[k, j - 1]) * \
                (zr[k, j] + zr[k, j - 1]) / (zm[k, j - 1] + zm[k + 1, j - 1])
            zb[k, j] = (zp[k, j - 1] + zq[k, j - 1] - zp[k, j] - zq[k, j]) * (zr[k, j] + zr[k - 1, j]) / \
                (zm[k, j] + zm[k, j - 1])
    for k in range(1, kn - 1):
        for j in range(1, jn - 1):
            for out, f in ((zu, zz), (zv, zr)):
                out[k, j] += s * (za[k, j] * (f[k, j] - f[k, j + 1]) - za[k, j - 1] * (f[k, j] - f[k, j - 1])
                                  - zb[k, j] * (f[k, j] - f[k - 1, j]) + zb[k + 1, j] * (f[k, j] - f[k + 1, j]))
    zro[1:-1, 1:-1] = zr[1:-1, 1:-1] + t * zu[1:-1, 1:-1]
    zzo[1:-1, 1:-1] = zz[1:-1, 1:-1] + t * zv[1:-1, 1:-1]
    return {0: za, 1: zb, 6: zu, 7: zv, 9: zro, 10: zzo}


def lcals_eos(a):
    x, y, z, u, q, r, t = a
    n = len(x)

    def U(k):
        return u[k:k + n]
    return {0: U(0) + r * (z + r * y) + t * (U(3) + r * (U(2) + r * U(1)) + t * (U(6) + q * (U(5) + q * U(4))))}


def int_predict(a):
    px, off, dm22, dm23, dm24, dm25, dm26, dm27, dm28, c0 = a
    out = px.copy()

    def P(k):
        return px[off * k:off * (k + 1)]
    out[:off] = dm28 * P(12) + dm27 * P(11) + dm26 * P(10) + dm25 * P(9) + dm24 * P(8) + dm23 * P(7) + \
        dm22 * P(6) + c0 * (P(4) + P(5)) + P(2)
    return {0: out}


def planckian(a):
    x, y, u, v, w = a
    yy = u / v
    return {1: yy, 4: x / np.expm1(yy)}


def fir(a):
    inp, out = a
    c = np.array(FIR_COEFF)
    return {1: np.array([c @ inp[i:i + 16] for i in range(len(out))])}


def ltimes(a):
    phi, ell, psi, num_d = a
    return {0: phi + np.einsum("md,dgz->mgz", ell[:, :num_d], psi[:num_d])}


def trap_int(a):
    sumx, x0, h, y, xp, yp = a
    x = x0 + np.arange(TRAP_N) * h
    return {0: sumx + np.array([(h / np.sqrt((x - xp) ** 2 + (y - yp) ** 2)).sum()])}


TRAP_N = 12


def fdtd_2d(a):
    fict, ex, ey, hz, tmax = a
    ex, ey, hz = ex.copy(), ey.copy(), hz.copy()
    for t in range(tmax):
        ey[1:] = ey[1:] - 0.5 * (hz[1:] - hz[:-1])
        ey[0] = fict[t]
        ex[:, 1:] = ex[:, 1:] - 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] = hz[:-1, :-1] - 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
    return {1: ex, 2: ey, 3: hz}


def _heat_step(a, b):
    b = b.copy()
    c = a[1:-1, 1:-1, 1:-1]
    b[1:-1, 1:-1, 1:-1] = 0.125 * (a[2:, 1:-1, 1:-1] - 2 * c + a[:-2, 1:-1, 1:-1]) + \
        0.125 * (a[1:-1, 2:, 1:-1] - 2 * c + a[1:-1, :-2, 1:-1]) + \
        0.125 * (a[1:-1, 1:-1, 2:] - 2 * c + a[1:-1, 1:-1, :-2]) + c
    return b


def heat_3d(a):
    A, B, tsteps = a
    for _ in range(tsteps):
        B = _heat_step(A, B)
        A = _heat_step(B, A)
    return {0: A, 1: B}


def adi(a):
    u, v, p, q, tsteps = a
    u, v, p, q = u.copy(), v.copy(), p.copy(), q.copy()
    n = u.shape[0]
    dx, dy, dt = 1.0 / n, 1.0 / n, 1.0 / tsteps
    mul1, mul2 = 2.0 * dt / (dx * dx), 1.0 * dt / (dy * dy)
    A, B, C = -mul1 / 2.0, 1.0 + mul1, -mul1 / 2.0
    D, E, F = -mul2 / 2.0, 1.0 + mul2, -mul2 / 2.0
    for _ in range(tsteps):
        for i in range(1, n - 1):
            v[0, i] = 1.0
            p[i, 0] = 0.0
            q[i, 0] = v[0, i]
            for j in range(1, n - 1):
                p[i, j] = -C / (A * p[i, j - 1] + B)
                q[i, j] = (-D * u[j, i - 1] + (1.0 + 2.0 * D) * u[j, i] - F * u[j, i + 1] - A * q[i, j - 1]) / \
                    (A * p[i, j - 1] + B)
            v[n - 1, i] = 1.0
            for j in range(n - 2, 0, -1):
                v[j, i] = p[i, j] * v[j + 1, i] + q[i, j]
        for i in range(1, n - 1):
            u[i, 0] = 1.0
            p[i, 0] = 0.0
            q[i, 0] = u[i, 0]
            for j in range(1, n - 1):
                p[i, j] = -F / (D * p[i, j - 1] + E)
                q[i, j] = (-A * v[i - 1, j] + (1.0 + 2.0 * A) * v[i, j] - C * v[i + 1, j] - D * q[i, j - 1]) / \
                    (D * p[i, j - 1] + E)
            u[i, n - 1] = 1.0
            for j in range(n - 2, 0, -1):
                u[i, j] = p[i, j] * u[i, j + 1] + q[i, j]
    return {0: u, 1: v, 2: p, 3: q}


def gramschmidt(a):
    A, r, q = (x.copy() for x in a)
    n = A.shape[1]
    for k in range(n):
        r[k, k] = np.sqrt((A[:, k] ** 2).sum())
        q[:, k] = A[:, k] / r[k, k]
        for j in range(k + 1, n):
            r[k, j] = q[:, k] @ A[:, j]
            A[:, j] -= q[:, k] * r[k, j]
    return {0: A, 1: r, 2: q}


def _iir(x, alpha):
    """Deriche's two passes along the last axis of x, summed."""
    em = math.exp(-alpha)
    k = (1.0 - em) ** 2 / (1.0 + 2.0 * alpha * em - math.exp(2.0 * alpha))
    a1, a2, a3, a4 = k, k * em * (alpha - 1.0), k * em * (alpha + 1.0), -k * math.exp(-2.0 * alpha)
    b1, b2 = 2.0 ** -alpha, -math.exp(-2.0 * alpha)
    y1, y2 = np.zeros_like(x), np.zeros_like(x)
    w = x.shape[-1]
    for j in range(w):
        y1[..., j] = a1 * x[..., j] + (a2 * x[..., j - 1] + b1 * y1[..., j - 1] if j > 0 else 0.0) + \
            (b2 * y1[..., j - 2] if j > 1 else 0.0)
    for j in range(w - 1, -1, -1):
        y2[..., j] = (a3 * x[..., j + 1] + b1 * y2[..., j + 1] if j < w - 1 else 0.0) + \
            (a4 * x[..., j + 2] + b2 * y2[..., j + 2] if j < w - 2 else 0.0)
    return y1, y2


def deriche(a):
    img_in, img_out, y1, y2, alpha = a
    r1, r2 = _iir(img_in, alpha)
    c1, c2 = _iir((r1 + r2).T, alpha)
    return {1: (c1 + c2).T, 2: c1.T, 3: c2.T}


def pathfinder(a):
    wall, A, B = a
    a, b = A.copy(), B.copy()
    for row in range(1, wall.shape[0]):
        left = np.r_[a[0], a[:-1]]
        right = np.r_[a[1:], a[-1]]
        b = wall[row] + np.minimum(left, np.minimum(a, right))
        a, b = b, a
    return {1: a, 2: b} if wall.shape[0] % 2 == 1 else {1: b, 2: a}


def cloverleaf_viscosity(a):
    celldx, celldy, density0, pressure, viscosity, xvel0, yvel0 = a
    out = viscosity.copy()
    ny, nx = pressure.shape
    for k in range(1, ny - 1):
        for j in range(1, nx - 1):
            ugrad = (xvel0[k, j + 1] + xvel0[k + 1, j + 1]) - (xvel0[k, j] + xvel0[k + 1, j])
            vgrad = (yvel0[k + 1, j] + yvel0[k + 1, j + 1]) - (yvel0[k, j] + yvel0[k, j + 1])
            div = celldx[j] * ugrad + celldy[k] * vgrad
            strain2 = 0.5 * (xvel0[k + 1, j] + xvel0[k + 1, j + 1] - xvel0[k, j] - xvel0[k, j + 1]) / celldy[k] + \
                0.5 * (yvel0[k, j + 1] + yvel0[k + 1, j + 1] - yvel0[k, j] - yvel0[k + 1, j]) / celldx[j]
            gx = (pressure[k, j + 1] - pressure[k, j - 1]) / (celldx[j] + celldx[j + 1])
            gy = (pressure[k + 1, j] - pressure[k - 1, j]) / (celldy[k] + celldy[k + 1])
            limiter = ((0.5 * ugrad / celldx[j]) * gx * gx + (0.5 * vgrad / celldy[k]) * gy * gy +
                       strain2 * gx * gy) / max(gx * gx + gy * gy, 1e-16)
            if limiter > 0.0 or div >= 0.0:
                out[k, j] = 0.0
            else:
                pgrad = math.hypot(gx, gy)
                grad = min(abs(celldx[j] * pgrad / gx), abs(celldy[k] * pgrad / gy))
                out[k, j] = 2.0 * density0[k, j] * grad * grad * limiter * limiter
    return {4: out}


def tealeaf_cg_calc_w(a):
    p, w, kx, ky, pw = a
    out = w.copy()
    c = (slice(1, -1), slice(1, -1))
    smvp = (1.0 + ky[2:, 1:-1] + ky[c] + kx[1:-1, 2:] + kx[c]) * p[c] - \
        (ky[2:, 1:-1] * p[2:, 1:-1] + ky[c] * p[:-2, 1:-1]) - (kx[1:-1, 2:] * p[1:-1, 2:] + kx[c] * p[1:-1, :-2])
    out[c] = smvp
    return {1: out, 4: pw + np.array([(smvp * p[c]).sum()])}


def layernorm_backward(a):
    dinp, dweight, dbias, dout, inp, weight, mean, rstd = a
    norm = (inp - mean[..., None]) * rstd[..., None]
    dnorm = weight * dout
    dval = dnorm - dnorm.mean(-1, keepdims=True) - norm * (dnorm * norm).mean(-1, keepdims=True)
    return {0: dinp + dval * rstd[..., None], 1: dweight + (norm * dout).sum((0, 1)), 2: dbias + dout.sum((0, 1))}


def gelu_backward(a):
    dinp, inp, dout = a
    s = math.sqrt(2.0 / math.pi)
    arg = s * (inp + 0.044715 * inp ** 3)
    local = 0.5 * (1.0 + np.tanh(arg)) + inp * 0.5 / np.cosh(arg) ** 2 * s * (1.0 + 3.0 * 0.044715 * inp ** 2)
    return {0: dinp + local * dout}


def softmax_backward(a):
    dinp, probs, dout = a
    return {0: dinp + probs * (dout - (probs * dout).sum(1, keepdims=True))}


def kepler_position(a):
    m, e, sma, px, py, tol = a
    E = np.where(e < 0.8, m, math.pi)
    for _ in range(60):  # Newton converges quadratically: 60 steps leave it at its fixed point in float64
        E = E - (E - e * np.sin(E) - m) / (1.0 - e * np.cos(E))
    return {3: sma * (np.cos(E) - e), 4: sma * np.sqrt(1.0 - e * e) * np.sin(E)}
