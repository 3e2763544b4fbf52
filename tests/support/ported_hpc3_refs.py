"""NumPy references of session 50's HPC ports (tests/support/ported_hpc3_more.py, ported_hpc3_special.py): each
takes the arguments' primal values before the launch and returns {argument position: expected value after}.
Written from the algorithms, vectorised where that is natural. Used by tests/support/ported_hpc3_cases.py."""

import math

import numpy as np

from support import ported_hpc3_more as B
from support import ported_hpc3_special as S


def lulesh_hourglass(v):
    determ, x8n, y8n, z8n, dvdx, dvdy, dvdz, ss, mass, nodelist, xd, yd, zd, hourg = v[:14]
    gamma = np.array(B.GAMMA)                                        # (mode, corner)
    nodes = nodelist.reshape(-1, 8)
    hourmod = [c @ gamma.T for c in (x8n, y8n, z8n)]                 # (elem, mode)
    hourgam = gamma.T[None] - (dvdx[:, :, None] * hourmod[0][:, None] + dvdy[:, :, None] * hourmod[1][:, None]
                               + dvdz[:, :, None] * hourmod[2][:, None]) / determ[:, None, None]
    coef = -hourg * 0.01 * ss * mass / determ ** (1.0 / 3.0)
    out = {}
    for pos, vel in zip((14, 15, 16), (xd, yd, zd)):
        h = np.einsum("ejm,ej->em", hourgam, vel[nodes])
        out[pos] = coef[:, None] * np.einsum("ejm,em->ej", hourgam, h)
    return out


def _area_face(p, q):
    """AreaFace of faces (corner index tuples) of local node arrays p = (x, y, z), each (elem, 8)."""
    f = [(c[:, q[2]] - c[:, q[0]]) - (c[:, q[3]] - c[:, q[1]]) for c in p]
    g = [(c[:, q[2]] - c[:, q[0]]) + (c[:, q[3]] - c[:, q[1]]) for c in p]
    return sum(a * a for a in f) * sum(a * a for a in g) - sum(a * b for a, b in zip(f, g)) ** 2


def lulesh_char_length(v):
    x, y, z, xd, yd, zd, nodelist, volume, dt, _ = v
    p = [c[nodelist] - 0.5 * dt * cd[nodelist] for c, cd in ((x, xd), (y, yd), (z, zd))]
    area = np.max([_area_face(p, face) for face in B.FACES6], axis=0)
    return {9: 4.0 * volume / np.sqrt(area)}


def _interp(tt, x0, inv_dx, n, r, deriv=False):
    r = max(r, x0)
    r = (r - x0) * inv_dx
    ii = int(math.floor(r))
    if ii > n:
        ii, r = n, float(n)
    r -= math.floor(r)
    g1 = tt[ii + 2] - tt[ii]
    if deriv:
        return 0.5 * (g1 + r * (tt[ii + 3] - tt[ii + 1] - g1)) * inv_dx
    return tt[ii + 1] + 0.5 * r * (g1 + r * (tt[ii + 2] + tt[ii] - 2.0 * tt[ii + 1]))


def eam_density(v):
    pos, neigh, nneigh, phi_t, rho_t, f_t, x0, inv_dx, f_x0, f_inv_dx, ntab, rcut2 = v[:12]
    n = pos.shape[0]
    rho, energy, df = np.zeros(n), np.zeros(n), np.zeros(n)
    for i in range(n):
        for j in neigh[i, :nneigh[i]]:
            r2 = float(np.sum((pos[i] - pos[j]) ** 2))
            if r2 < rcut2:
                energy[i] += 0.5 * _interp(phi_t, x0, inv_dx, ntab, math.sqrt(r2))
                rho[i] += _interp(rho_t, x0, inv_dx, ntab, math.sqrt(r2))
        energy[i] += _interp(f_t, f_x0, f_inv_dx, ntab, rho[i])
        df[i] = _interp(f_t, f_x0, f_inv_dx, ntab, rho[i], deriv=True)
    return {12: rho, 13: df, 14: energy}


def eam_force(v):
    pos, neigh, nneigh, phi_t, rho_t, df, x0, inv_dx, ntab, rcut2, force = v
    force = np.zeros_like(force)
    for i in range(pos.shape[0]):
        for j in neigh[i, :nneigh[i]]:
            d = pos[i] - pos[j]
            r = math.sqrt(float(d @ d))
            if r * r < rcut2:
                s = (_interp(phi_t, x0, inv_dx, ntab, r, True) + (df[i] + df[j])
                     * _interp(rho_t, x0, inv_dx, ntab, r, True)) / r
                force[i] -= s * d
    return {10: force}


def minimd_lj_half(v):
    x, f, neighbors, numneigh, maxneighs, cutforcesq, epsilon, sigma6 = v
    p, f = x.reshape(-1, B.PAD), f.reshape(-1, B.PAD).copy()
    for i in range(p.shape[0]):
        for j in neighbors[i * maxneighs:i * maxneighs + numneigh[i]]:
            d = p[i] - p[j]
            rsq = float(d @ d)
            if rsq < cutforcesq:
                sr6 = sigma6 / rsq ** 3
                fpair = 48.0 * sr6 * (sr6 - 0.5) / rsq * epsilon
                f[i] += d * fpair
                f[j] -= d * fpair
    return {1: f.ravel()}


def _pairs(pos, h):
    d = pos[:, None, :] - pos[None, :, :]
    r = np.sqrt((d ** 2).sum(axis=2))
    return d, r, r / h


def sph_density(v):
    pos, mass, h, _, _ = v
    _, r, u = _pairs(pos, h)
    wk = np.where(u < 0.5, B.KERNEL_COEFF_1 + B.KERNEL_COEFF_2 * (u - 1) * u * u, B.KERNEL_COEFF_5 * (1 - u) ** 3)
    wk = np.where(r < h, wk / h ** 3, 0.0)
    return {3: wk @ mass}


def sph_pressure_force(v):
    pos, mass, rho, entropy, h, _, _ = v
    d, r, u = _pairs(pos, h)
    dwk = np.where(u < 0.5, u * (B.KERNEL_COEFF_3 * u - B.KERNEL_COEFF_4), B.KERNEL_COEFF_6 * (1 - u) ** 2) / h ** 4
    pr = entropy * rho ** B.GAMMA_ADIABATIC / rho ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        hfc = np.where((r < h) & (r > 0), mass[None, :] * (pr[:, None] + pr[None, :]) * dwk / r, 0.0)
    return {5: -(hfc[:, :, None] * d).sum(axis=1)}


def kokkos_yax(v):
    y, a, x, result, _ = v
    return {3: result + y @ a @ x}


def matrix_mul_tiled(v):
    c, a, b, wa, wb = v
    return {0: (a.reshape(-1, wa) @ b.reshape(wa, wb)).ravel()}


def numba_cpu_gpu_compat(v):
    _, x, y, z = v
    return {0: 4 * z * (2 * x - (4 * y) / 2 * math.pi)}


def solve_heat_equation(v):
    bufs, steps, k = [v[0].copy(), v[1].copy()], v[2], v[3]
    for step in range(steps):
        data = bufs[step % 2]
        left = np.concatenate(([0.0], data[:-1]))
        right = np.concatenate((data[1:], [0.0]))
        bufs[1 - step % 2] = data + k * (left + right - 2 * data)
    return {0: bufs[0], 1: bufs[1]}


def nek_local_grad3(v):
    u, d = v[3], v[4]
    return {0: np.einsum("im,ekjm->ekji", d, u), 1: np.einsum("jm,ekmi->ekji", d, u),
            2: np.einsum("km,emji->ekji", d, u)}


def hll_swe_flux(v):
    h, hu, fh, fhu, g = v
    nf = fh.size
    hl, hr, ql, qr = h[:nf], h[1:nf + 1], hu[:nf], hu[1:nf + 1]
    ul, ur = ql / hl, qr / hr
    sl = np.minimum(ul - np.sqrt(g * hl), ur - np.sqrt(g * hr))
    sr = np.maximum(ul + np.sqrt(g * hl), ur + np.sqrt(g * hr))
    out = {}
    for pos, fl, fr, wl, wr in ((2, ql, qr, hl, hr), (3, ql * ul + 0.5 * g * hl * hl, qr * ur + 0.5 * g * hr * hr,
                                                         ql, qr)):
        mid = (sr * fl - sl * fr + sl * sr * (wr - wl)) / (sr - sl)
        out[pos] = np.where(sl >= 0, fl, np.where(sr <= 0, fr, mid))
    return out


def fem_p1_apply(v):
    coords, tris, x, y = v
    y = y.copy()
    for tri in tris:
        p = coords[tri]
        bs = np.array([p[(a + 1) % 3, 1] - p[(a + 2) % 3, 1] for a in range(3)])
        cs = np.array([p[(a + 2) % 3, 0] - p[(a + 1) % 3, 0] for a in range(3)])
        e1, e2 = p[1] - p[0], p[2] - p[0]
        area2 = e1[0] * e2[1] - e1[1] * e2[0]
        y[tri] += (np.outer(bs, bs) + np.outer(cs, cs)) @ x[tri] / (2 * area2)
    return {3: y}


CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
           -0.00417768164, 0.246640727, 1.50140941)
TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
        0.00943887047, 1.00167406, 2.83297682)


def erfinv_kernel(v):
    x, y, n = v
    w = -np.log((1 - x[:n]) * (1 + x[:n]))
    central = np.polyval(CENTRAL, w - 2.5)
    tail = np.polyval(TAIL, np.sqrt(w) - 3.0)
    y = y.copy()
    y[:n] = np.where(w < 5.0, central, tail) * x[:n]
    return {1: y}


def haccmk_step10(v):
    xx, yy, zz, mass, vx, vy, vz, fsrrmax2, mp_rsm2, fcoeff, count = v
    p = np.stack((xx, yy, zz), axis=1)[:count]
    d = p[None, :, :] - p[:, None, :]                                # d[i, j] = p[j] - p[i]
    r2 = (d ** 2).sum(axis=2)
    poly = np.polyval((S.MA5, S.MA4, S.MA3, S.MA2, S.MA1, S.MA0), r2)
    f = np.where(r2 < fsrrmax2, mass[None, :count], 0.0) * ((r2 + mp_rsm2) ** -1.5 - poly)
    f = np.where(r2 > 0, f, 0.0)
    acc = (f[:, :, None] * d).sum(axis=1) * fcoeff
    return {4: vx + acc[:, 0], 5: vy + acc[:, 1], 6: vz + acc[:, 2]}


def chebev(v):
    c, x, _, m, a, b = v
    t = (2 * x - a - b) / (b - a)
    coef = c[:m].copy()
    coef[0] *= 0.5
    return {2: np.polynomial.chebyshev.chebval(t, coef)}


def dwt97_rows(v):
    x, out, n = v
    x = x.copy()
    for coef, odd in ((S.F97_PREDICT1, True), (S.F97_UPDATE1, False), (S.F97_PREDICT2, True),
                      (S.F97_UPDATE2, False)):
        ext = np.concatenate((x[:, 1:2], x, x[:, n - 2:n - 1]), axis=1)   # symmetric extension
        s = 1 if odd else 0
        x[:, s::2] += coef * (ext[:, s:s + n:2] + ext[:, s + 2:s + 2 + n:2])
    res = np.concatenate((x[:, 0::2] / S.SCALE97, x[:, 1::2] * S.SCALE97), axis=1)
    return {0: x, 1: res}


def lud_base(v):
    a, size = v
    a = a.reshape(size, size).copy()
    for i in range(size):
        a[i, i:] -= a[i, :i] @ a[:i, i:]
        a[i + 1:, i] = (a[i + 1:, i] - a[i + 1:, :i] @ a[:i, i]) / a[i, i]
    return {0: a.ravel()}
