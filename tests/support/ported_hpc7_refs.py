"""NumPy references for session 54's ported kernels (tests/support/ported_hpc7.py, ported_hpc7_more.py): each takes
the arguments' primal values before the launch (a list, by position) and returns {position: expected value after}.
Written from the same algorithms in NumPy (vectorised where the order of updates does not matter, loops where it
does)."""

import numpy as np

from support.ported_hpc7_more import SSM_N


def gen_lin_recur(a):
    b5, stb5, sa, sb, kb5i = a
    b5, stb5 = b5.copy(), stb5.copy()
    n = sa.size
    for _ in range(2):  # both loops leave each k's values the same whatever the order: each k is its own recurrence
        b5[kb5i:kb5i + n] = sa + stb5 * sb
        stb5 = b5[kb5i:kb5i + n] - stb5
    return {0: b5, 1: stb5}


def diff_predict(a):
    px, cx, offset = a
    p = px.reshape(14, offset).copy()
    c = cx.reshape(-1, offset)
    ar = c[4]
    row = ar
    for r in range(4, 13):
        row, p[r] = row - p[r], row
    p[13] = row
    return {0: p.ravel()}


def if_quad(a):
    a_, b, c, x1, x2 = a
    s = b * b - 4.0 * a_ * c
    r = np.sqrt(np.maximum(s, 0.0))
    ok = s >= 0
    return {3: np.where(ok, (-b - r) / (2.0 * a_), 0.0), 4: np.where(ok, (-b + r) / (2.0 * a_), 0.0)}


def pi_atomic(a):
    pi, dx = a
    n = int(round(1.0 / dx))
    x = (np.arange(n) + 0.5) * dx
    return {0: pi + (dx / (1.0 + x * x)).sum()}


def daxpy_atomic(a):
    x, y, alpha = a
    return {1: y + alpha * x}


def field_summary(a):
    volume, density0, energy0, pressure, xvel0, yvel0, sums = a
    v2 = xvel0 ** 2 + yvel0 ** 2
    vsqrd = 0.25 * (v2[:-1, :-1] + v2[:-1, 1:] + v2[1:, :-1] + v2[1:, 1:])
    mass = volume * density0
    return {6: sums + np.array([volume.sum(), mass.sum(), (mass * energy0).sum(), (mass * 0.5 * vsqrd).sum(),
                                (volume * pressure).sum()])}


def advec_mass_flux_x(a):
    vol_flux_x, pre_vol, density1, vertexdx, mass_flux_x = a
    ny, nf = vol_flux_x.shape
    nx = nf - 1
    out = np.empty_like(mass_flux_x)
    for k in range(ny):
        for j in range(nf):
            f = vol_flux_x[k, j]
            if f > 0.0:
                up, donor, down, dif = j, j + 1, j + 2, j + 1
            else:
                up, donor, down = min(j + 3, nx + 3), j + 2, j + 1
                dif = up
            sigmat = abs(f) / pre_vol[k, donor]
            sigma3 = (1.0 + sigmat) * (vertexdx[j + 2] / vertexdx[dif])
            sigma4 = 2.0 - sigmat
            duw = density1[k, donor] - density1[k, up]
            ddw = density1[k, down] - density1[k, donor]
            lim = 0.0
            if duw * ddw > 0.0:
                lim = (1.0 - sigmat) * np.copysign(1.0, ddw) * min(abs(duw), abs(ddw),
                                                                    (sigma3 * abs(duw) + sigma4 * abs(ddw)) / 6.0)
            out[k, j] = f * (density1[k, donor] + lim)
    return {4: out}


def tea_jacobi(a):
    u, un, u0, kx, ky, error, sweeps = a
    u, error = u.copy(), error.copy()
    for _ in range(sweeps):
        un = u.copy()
        c = np.s_[1:-1, 1:-1]
        u[c] = (u0[c] + kx[1:-1, 2:] * un[1:-1, 2:] + kx[c] * un[1:-1, :-2] + ky[2:, 1:-1] * un[2:, 1:-1]
                + ky[c] * un[:-2, 1:-1]) / (1.0 + kx[c] + kx[1:-1, 2:] + ky[c] + ky[2:, 1:-1])
        error = error + np.abs(u[c] - un[c]).sum()
    return {0: u, 1: un, 5: error}


def floyd_warshall(a):
    """Pass k reads one array and writes the other: with n even, pin holds the n-th pass and pout the one before.
    The kernel's `pin < via` and np.minimum agree, as the inputs draw no ties."""
    pin, pout, n = a
    states = [pin.reshape(n, n).copy()]
    for k in range(n):
        p = states[-1]
        states.append(np.minimum(p, p[:, k:k + 1] + p[k:k + 1, :]))
    return {0: states[n].ravel(), 1: states[n - 1].ravel()}


def seidel_2d(a):
    arr, tsteps = a
    arr = arr.copy()
    n = arr.shape[0]
    for _ in range(tsteps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                arr[i, j] = arr[i - 1:i + 2, j - 1:j + 2].sum() / 9.0
    return {0: arr}


def trisolv(a):
    lower, x, b = a
    return {1: np.linalg.solve(np.tril(lower), b)}


def ludcmp(a):
    aa, b, x, y = a
    n = aa.shape[0]
    lu = aa.copy()
    for k in range(n):  # Doolittle by column elimination: the same factors, another order
        lu[k + 1:, k] /= lu[k, k]
        lu[k + 1:, k + 1:] -= np.outer(lu[k + 1:, k], lu[k, k + 1:])
    lo = np.tril(lu, -1) + np.eye(n)
    yy = np.linalg.solve(lo, b)
    return {0: lu, 2: np.linalg.solve(np.triu(lu), yy), 3: yy}


def trmm(a):
    aa, b, alpha = a
    m = b.shape[0]
    upper = np.tril(aa, -1).T + np.eye(m)  # B[i] += sum_{k > i} A[k, i] B[k]: (I + strict lower of A)^T B
    return {1: alpha * (upper @ b)}


def symm(a):
    aa, b, c, alpha, beta = a
    sym = np.tril(aa) + np.tril(aa, -1).T
    return {2: alpha * sym @ b + beta * c}


def selective_scan(a):
    u, delta, aa, bmat, cmat, d, z, delta_bias, out = a
    dt = np.log1p(np.exp(delta + delta_bias[None, :, None]))
    bsz, ch, seqlen = u.shape
    state = np.zeros((bsz, ch, SSM_N))
    ys = []
    for t in range(seqlen):
        state = np.exp(dt[:, :, t, None] * aa[None]) * state + dt[:, :, t, None] * bmat[:, None, :, t] * \
            u[:, :, t, None]
        ys.append((state * cmat[:, None, :, t]).sum(-1))
    y = np.stack(ys, -1) + u * d[None, :, None]
    return {8: y * z / (1.0 + np.exp(-z))}
