"""NumPy references for session 58's ported kernels (tests/support/ported_hpc11.py, ported_hpc11_more.py): each
takes the arguments' primal values before the launch (a list, by position) and returns {position: expected value
after}. Written from the same formulas, pair by pair or vectorised, in float64."""

import math

import numpy as np

from support import ported_hpc11 as A
from support import ported_hpc11_more as B


def nbnxn_rf_lj(a):
    x, q, atype, ntype, nbfp, start, cj, excl, ic, f, energies = a
    f, energies = f.copy(), energies.copy()
    rcut2, k_rf, c_rf, rep, disp = ic
    for ci in range(len(start) - 1):
        for cjind in range(start[ci], start[ci + 1]):
            for i in range(A.UNROLL):
                ai = ci * A.UNROLL + i
                for j in range(A.UNROLL):
                    aj = cj[cjind] * A.UNROLL + j
                    if cj[cjind] == ci and j <= i:
                        continue
                    d = x[ai] - x[aj]
                    rsq = d @ d
                    if rsq >= rcut2:
                        continue
                    interact = (int(excl[cjind]) >> (i * A.UNROLL + j)) & 1
                    rinvsq = 1.0 / rsq
                    c6, c12 = nbfp[atype[ai] * ntype + atype[aj]]
                    r6 = interact * rinvsq ** 3
                    qq = q[ai] * q[aj]
                    fscal = (c12 * r6 * r6 - c6 * r6) * rinvsq + qq * (interact * rinvsq ** 1.5 - 2 * k_rf)
                    f[ai] += fscal * d
                    f[aj] -= fscal * d
                    energies[0] += qq * (interact * math.sqrt(rinvsq) + k_rf * rsq - c_rf)
                    energies[1] += ((c12 * r6 * r6 + c12 * rep) / 12 - (c6 * r6 + c6 * disp) / 6) * interact
    return {9: f, 10: energies}


def born_compute(a):
    x, atype, neigh, numneigh, special_lj, p, f, eng = a
    f, eng = f.copy(), eng.copy()
    for i in range(x.shape[0]):
        for jj in range(numneigh[i]):
            jraw = int(neigh[i, jj])
            factor, j = special_lj[jraw >> A.SBBITS & 3], jraw & A.NEIGHMASK
            d = x[i] - x[j]
            rsq = d @ d
            q = p[atype[i], atype[j]]
            if rsq < q[A.B_CUTSQ]:
                r = math.sqrt(rsq)
                rexp = math.exp((q[A.B_SIGMA] - r) * q[A.B_RHOINV])
                force = q[A.B_BORN1] * r * rexp - q[A.B_BORN2] / rsq ** 3 + q[A.B_BORN3] / rsq ** 4
                f[i] += d * factor * force / rsq
                eng[i] += 0.5 * factor * (q[A.B_A] * rexp - q[A.B_C] / rsq ** 3 + q[A.B_D] / rsq ** 4
                                          - q[A.B_OFFSET])
    return {6: f, 7: eng}


def angle_harmonic(a):
    x, angles, k, theta0, f, energy = a
    f, energy = f.copy(), energy.copy()
    for i1, i2, i3, t in angles:
        d1, d2 = x[i1] - x[i2], x[i3] - x[i2]
        r1, r2 = np.linalg.norm(d1), np.linalg.norm(d2)
        c = float(np.clip(d1 @ d2 / (r1 * r2), -1.0, 1.0))
        s = 1.0 / max(math.sqrt(1.0 - c * c), A.SMALL)
        dtheta = math.acos(c) - theta0[t]
        energy[0] += k[t] * dtheta ** 2
        aa = -2.0 * k[t] * dtheta * s
        f1 = aa * c / r1 ** 2 * d1 - aa / (r1 * r2) * d2
        f3 = aa * c / r2 ** 2 * d2 - aa / (r1 * r2) * d1
        f[i1] += f1
        f[i2] -= f1 + f3
        f[i3] += f3
    return {4: f, 5: energy}


def bond_fene(a):
    x, bonds, k, r0, eps, sigma, f, ebond, flags = a
    f, ebond, flags = f.copy(), ebond.copy(), flags.copy()
    for n, (i1, i2, t) in enumerate(bonds):
        d = x[i1] - x[i2]
        rsq = d @ d
        rlogarg = 1.0 - rsq / r0[t] ** 2
        if rlogarg < 0.1:
            flags[n] = 2 if rlogarg <= -3.0 else 1
            rlogarg = 0.1
        fbond, e = -k[t] / rlogarg, -0.5 * k[t] * r0[t] ** 2 * math.log(rlogarg)
        if rsq < 2.0 ** (1.0 / 3.0) * sigma[t] ** 2:
            sr6 = (sigma[t] ** 2 / rsq) ** 3
            fbond += 48.0 * eps[t] * sr6 * (sr6 - 0.5) / rsq
            e += 4.0 * eps[t] * sr6 * (sr6 - 1.0) + eps[t]
        ebond[n] = e
        f[i1] += d * fbond
        f[i2] -= d * fbond
    return {6: f, 7: ebond, 8: flags}


def segment_csr_max(a):
    src, indptr, out, arg_out, n_rows, k = a
    out, arg_out = out.copy(), arg_out.copy()
    s = src.reshape(-1, k)
    for r in range(n_rows):
        lo, hi = indptr[r], indptr[r + 1]
        if hi > lo:
            out[r * k:(r + 1) * k] = s[lo:hi].max(axis=0)
            arg_out[r * k:(r + 1) * k] = lo + s[lo:hi].argmax(axis=0)
        else:
            out[r * k:(r + 1) * k] = 0.0
    return {2: out, 3: arg_out}


def btree_find_k(a):
    """The descent by np.searchsorted over each node's keys (the child whose key range holds the query, none
    below the node's first key: the query stays where it is); the answer from the leaf's matching key."""
    height, keys, indices, knodes_elem, records, curr, offset, query, ans, order = a
    ans, curr, offset = ans.copy(), curr.copy(), offset.copy()
    for b, key in enumerate(query):
        node = int(curr[b])
        for _ in range(height):
            t = int(np.searchsorted(keys[node], key, side="right")) - 1
            if 0 <= t < order and indices[node, t] < knodes_elem:
                node = int(indices[node, t])
        curr[b] = offset[b] = node
        hit = np.nonzero(keys[node, :order] == key)[0]
        if hit.size:
            ans[b] = records[indices[node, hit[0]]]
    return {5: curr, 6: offset, 8: ans}


def _moro(x):
    negate = x >= 0x80000000
    if negate:
        x = 0xFFFFFFFF - x
    p1 = x / 4294967295.0 + 0.5 / 4294967295.0
    p2 = p1 - 0.5
    if p2 > -0.42:
        z = p2 * p2
        z = p2 * np.polyval([B.A4, B.A3, B.A2, B.A1], z) / np.polyval([B.B4, B.B3, B.B2, B.B1, 1.0], z)
    else:
        z = -np.polyval([B.C9, B.C8, B.C7, B.C6, B.C5, B.C4, B.C3, B.C2, B.C1], math.log(-math.log(p1)))
    return -z if negate else z


def mc_call(a):
    opt, path_n, price = a
    price = price.copy()
    distance = 0xFFFFFFFF // (path_n + 1)
    z = np.array([_moro((p + 1) * distance) for p in range(path_n)])
    for o, (s, x, t, r, v) in enumerate(opt):
        end = s * np.exp((r - 0.5 * v * v) * t + v * math.sqrt(t) * z)
        price[o] += math.exp(-r * t) * np.maximum(end - x, 0.0).mean()
    return {2: price}


def xc_lda_pz(a):
    rho, ex, ec, vx, vc = (np.asarray(v, np.float64).copy() for v in a)
    on = np.abs(rho) > B.RHO_THRESHOLD
    rs = np.where(on, B.PI34 / np.cbrt(np.where(on, np.abs(rho), 1.0)), 1.0)
    low = rs < 1.0
    lnrs = np.log(rs)
    rs12 = np.sqrt(rs)
    ox = 1.0 + B.PZ_B1 * rs12 + B.PZ_B2 * rs
    dox = 1.0 + 7.0 / 6.0 * B.PZ_B1 * rs12 + 4.0 / 3.0 * B.PZ_B2 * rs
    ec_low = B.PZ_A * lnrs + B.PZ_B + B.PZ_C * rs * lnrs + B.PZ_D * rs
    vc_low = (B.PZ_A * lnrs + (B.PZ_B - B.PZ_A / 3.0) + 2.0 / 3.0 * B.PZ_C * rs * lnrs
              + (2.0 * B.PZ_D - B.PZ_C) / 3.0 * rs)
    zero = np.zeros_like(rho)
    return {1: np.where(on, B.F_SLATER * B.ALPHA / rs, zero),
            2: np.where(on, np.where(low, ec_low, B.PZ_GC / ox), zero),
            3: np.where(on, 4.0 / 3.0 * B.F_SLATER * B.ALPHA / rs, zero),
            4: np.where(on, np.where(low, vc_low, B.PZ_GC / ox * dox / ox), zero)}


def su3_mat_nn(a):
    am, bm, c, sites = a
    za = am[..., 0] + 1j * am[..., 1]
    zb = bm[..., 0] + 1j * bm[..., 1]
    zc = np.einsum("sjkn,jnm->sjkm", za[:sites], zb)
    c = c.copy()
    c[:sites] = np.stack([zc.real, zc.imag], axis=-1)
    return {2: c}


def jacobi2d(a):
    am, bm, n, tsteps = a
    am, bm = am.copy(), bm.copy()
    for _ in range(tsteps):
        bm[1:-1, 1:-1] = 0.2 * (am[1:-1, 1:-1] + am[1:-1, :-2] + am[1:-1, 2:] + am[2:, 1:-1] + am[:-2, 1:-1])
        am[1:-1, 1:-1] = bm[1:-1, 1:-1]
    return {0: am, 1: bm}
