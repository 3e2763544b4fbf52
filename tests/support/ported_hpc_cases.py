"""Session 49's ported kernels, second part (tests/support/ported_hpc.py has the first): five more kernels, and
every kernel's small random inputs (`cases`), away from kinks. Used by tests/library/test_ported_hpc.py."""

import math

import numpy as np

import gradkern as gk
from support.ported_hpc import (
    NNB,
    bitonic_step,
    cfd_flux,
    hpcg_spmv,
    hpcg_symgs,
    kmeans_accumulate,
    kmeans_point,
    layernorm_rows,
    lbm_collide_stream,
    lulesh_stress,
    lulesh_volume,
    mg_psinv,
    mg_resid,
    minife_assemble,
    nn_euclid,
    pf_likelihood,
    pic_deposit,
    shoc_md,
    smith_waterman,
    softmax_rows,
)

# the bilinear quadrilateral's Laplacian on the unit square, times 6 (minife_assemble divides by 6)
KQ4 = np.array([[4.0, -1.0, -2.0, -1.0], [-1.0, 4.0, -1.0, -2.0], [-2.0, -1.0, 4.0, -1.0], [-1.0, -2.0, -1.0, 4.0]])


# ---- kmeans' chosen centre reused: the argmin index, found by comparisons in a loop, indexes the centre again ---


@gk.kernel
def kmeans_objective(features, clusters, mindist, nfeatures, nclusters):
    point = gk.tid()
    index = 0
    best = math.inf
    for c in range(nclusters):
        dist = 0.0
        for f in range(nfeatures):
            d = features[point * nfeatures + f] - clusters[c * nfeatures + f]
            dist += d * d
        if dist < best:
            best = dist
            index = c
    s = 0.0
    for f in range(nfeatures):
        d = features[point * nfeatures + f] - clusters[index * nfeatures + f]
        s += math.sqrt(d * d + 1.0)
    mindist[point] = s


# ---- online softmax (llm.c dev/cuda/softmax_forward.cu, the single-pass "online" kernel): running max and
# rescaled running sum, both reassigned in the loop ---------------------------------------------------------------


@gk.kernel
def softmax_online(inp, out, c):
    row = gk.tid()
    maxval = -math.inf
    s = 0.0
    for j in range(c):
        mnew = max(maxval, inp[row, j])
        s = s * math.exp(maxval - mnew) + math.exp(inp[row, j] - mnew)
        maxval = mnew
    for j in range(c):
        out[row, j] = math.exp(inp[row, j] - maxval) / s


# ---- Rodinia particlefilter find_index (cuda/particlefilter/ex_particle_CUDA_float_seq.cu: the resampling
# kernel's linear search of the CDF, then the chosen particle's position copied) ------------------------------


@gk.kernel
def pf_resample(cdf, u, array_x, array_y, xj, yj, n):
    j = gk.tid()
    index = n - 1
    for x in range(n):
        if cdf[x] >= u[j]:
            index = x
            break
    xj[j] = array_x[index]
    yj[j] = array_y[index]


# ---- Rodinia gaussian (cuda/gaussian/gaussian.cu: Fan1, Fan2), one elimination step t per launch pair --------


@gk.kernel
def gauss_fan1(m, a, size, t):
    i = gk.tid()
    if i < size - 1 - t:
        m[size * (i + t + 1) + t] = a[size * (i + t + 1) + t] / a[size * t + t]


@gk.kernel
def gauss_fan2(m, a, b, size, t):
    x, y = gk.tid()
    if x < size - 1 - t and y < size - t:
        a[size * (x + 1 + t) + (y + t)] -= m[size * (x + 1 + t) + t] * a[size * t + (y + t)]
        if y == 0:
            b[x + 1 + t] -= m[size * (x + 1 + t) + t] * b[t]


def gaussian_elimination(m, a, b, backend=None):
    """Forward elimination: size - 1 steps of Fan1 and Fan2."""
    size = b.size
    for t in range(size - 1):
        gk.launch(gauss_fan1, size, m, a, size, t, backend=backend)
        gk.launch(gauss_fan2, (size, size), m, a, b, size, t, backend=backend)


# ---- Parboil mri-q (parboil benchmarks/mri-q/src/cuda/computeQ.cu: ComputeQ_GPU): each voxel sums the k-space
# samples' phase terms ---------------------------------------------------------------------------------------------


@gk.kernel
def mri_q(kx, ky, kz, phi_mag, x, y, z, qr, qi, num_k):
    v = gk.tid()
    sr = 0.0
    si = 0.0
    for k in range(num_k):
        arg = 2.0 * math.pi * (kx[k] * x[v] + ky[k] * y[v] + kz[k] * z[v])
        sr += phi_mag[k] * math.cos(arg)
        si += phi_mag[k] * math.sin(arg)
    qr[v] = sr
    qi[v] = si

# ---- Smith-Waterman's serial reference (CUDASW++'s and Rodinia nw's CPU loops): one thread fills the table in
# place and keeps the best score and its cell, as the traceback needs; max() of three predecessors and 0 ---------


@gk.kernel
def sw_serial(h, sim, gap, best, m, n):
    t = gk.tid()
    if t == 0:
        bi = 0
        bj = 0
        bv = 0.0
        for i in range(1, m + 1):
            for j in range(1, n + 1):
                v = max(0.0, h[i - 1, j - 1] + sim[i - 1, j - 1], h[i - 1, j] - gap, h[i, j - 1] - gap)
                h[i, j] = v
                if v > bv:
                    bv = v
                    bi = i
                    bj = j
        best[0] = bv + 0.1 * h[bi - 1, bj - 1]

# ---- inputs ------------------------------------------------------------------------------------------------------


def _hex_mesh(rng, ex, ey, ez):
    """Node coordinates of an ex x ey x ez brick of hexahedra (jittered lattice) and LULESH's nodelist order."""
    nx, ny, nz = ex + 1, ey + 1, ez + 1
    g = np.stack(np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz), indexing="ij"), -1).reshape(-1, 3)
    pos = g + rng.uniform(-0.15, 0.15, g.shape)

    def node(i, j, k):
        return (i * ny + j) * nz + k
    nodes = []
    for i in range(ex):
        for j in range(ey):
            for k in range(ez):
                nodes += [node(i, j, k), node(i + 1, j, k), node(i + 1, j + 1, k), node(i, j + 1, k),
                          node(i, j, k + 1), node(i + 1, j, k + 1), node(i + 1, j + 1, k + 1), node(i, j + 1, k + 1)]
    return pos[:, 0].copy(), pos[:, 1].copy(), pos[:, 2].copy(), np.array(nodes, np.int32)


def _csr(rng, n, extra):
    """A diagonally dominant CSR matrix (sorted columns, the diagonal inside each row) and diag_idx."""
    rows = [{i} | {c for c in (i - 1, i + 1) if 0 <= c < n} | set(rng.choice(n, extra).tolist()) for i in range(n)]
    ptr, cols, vals, diag = [0], [], [], []
    for i, r in enumerate(rows):
        for c in sorted(r):
            if c == i:
                diag.append(len(cols))
            cols.append(c)
            vals.append(rng.uniform(4.0, 5.0) if c == i else rng.uniform(-0.5, 0.5))
        ptr.append(len(cols))
    return (np.array(ptr, np.int32), np.array(cols, np.int32), np.array(vals), np.array(diag, np.int32))


def _quad_mesh(ex, ey):
    """A 2-D ex x ey mesh of quadrilaterals (counter-clockwise nodes) and its nodal graph as CSR."""
    def node(i, j):
        return j * (ex + 1) + i
    elems = []
    for j in range(ey):
        for i in range(ex):
            elems += [node(i, j), node(i + 1, j), node(i + 1, j + 1), node(i, j + 1)]
    n = (ex + 1) * (ey + 1)
    graph = [set() for _ in range(n)]
    for e in range(ex * ey):
        for a in elems[4 * e:4 * e + 4]:
            graph[a] |= set(elems[4 * e:4 * e + 4])
    ptr = np.cumsum([0] + [len(g) for g in graph]).astype(np.int32)
    cols = np.array([c for g in graph for c in sorted(g)], np.int32)
    return np.array(elems, np.int32), ptr, cols


def _kmeans_inputs(rng, npoints, nclusters, nf):
    """Points whose nearest centre wins by at least 0.05 in squared distance: no finite difference flips it."""
    while True:
        feats = rng.uniform(0.0, 1.0, (npoints, nf))
        cl = rng.uniform(0.0, 1.0, (nclusters, nf))
        d = np.sort(((feats[:, None, :] - cl[None]) ** 2).sum(-1), axis=1)
        if np.all(d[:, 1] - d[:, 0] > 0.05):
            return feats.ravel(), cl.ravel()


def _md_inputs(rng, cutsq):
    """8 atoms on a jittered 2x2x2 lattice (spacing 1.2), every pair's r^2 at least 0.02 from the cutoff."""
    g = np.stack(np.meshgrid(*[np.arange(2)] * 3, indexing="ij"), -1).reshape(-1, 3) * 1.2
    while True:
        pos = g + rng.uniform(-0.1, 0.1, g.shape)
        r2 = ((pos[:, None] - pos[None]) ** 2).sum(-1)
        if np.all(np.abs(r2 - cutsq) > 0.02):
            break
    nat, maxn = 8, 6
    neigh = np.zeros((maxn, nat), np.int32)
    for i in range(nat):
        others = [j for j in range(nat) if j != i]
        neigh[:, i] = rng.permutation(others)[:maxn]
    return pos, neigh.ravel(), nat, maxn


def cases(rng):
    """(name, kernel or program, args, dim, check_grad options), float64, small random inputs away from kinks."""
    def R(*s, lo=0.5, hi=1.5):
        return rng.uniform(lo, hi, s)

    def D(a):
        return gk.Duplicated(a, np.zeros_like(a))

    def C(a):
        return gk.Const(a)

    hx, hy, hz, nodelist = _hex_mesh(rng, 2, 2, 1)
    nelem = nodelist.size // 8
    nelr = 6
    neighbours = rng.integers(-2, nelr, NNB * nelr).astype(np.int32)
    neighbours[:3] = (-2, -1, 4)  # every kind of face at least once
    variables = np.concatenate([R(nelr, lo=1.0, hi=2.0), R(3 * nelr, lo=0.1, hi=0.5), R(nelr, lo=2.5, hi=3.5)])
    feats, centres = _kmeans_inputs(rng, 8, 3, 3)
    membership = rng.integers(0, 3, 8).astype(np.int32)
    objxy = rng.integers(-1, 2, 10).astype(np.int32)
    ptr, cols, vals, diag = _csr(rng, 6, 1)
    elems, qptr, qcols = _quad_mesh(2, 2)
    pos, neigh, nat, maxn = _md_inputs(rng, 2.0)
    cdf = np.cumsum(R(7))
    cdf /= cdf[-1]
    return [
        ("lulesh_volume", lulesh_volume, (D(hx), D(hy), D(hz), C(nodelist), D(R(nelem))), nelem, {}),
        ("lulesh_stress", lulesh_stress, (D(hx.copy()), D(hy.copy()), D(hz.copy()), C(nodelist), D(R(nelem)),
                                          D(R(nelem)), D(R(nelem)), D(R(hx.size)), D(R(hx.size)), D(R(hx.size))),
         nelem, {}),
        ("cfd_flux", cfd_flux, (C(neighbours), D(R(3 * NNB * nelr, lo=-1.0, hi=1.0)), D(variables),
                                D(R(5, lo=0.5, hi=1.0)), D(R(5 * nelr)), nelr), nelr, {}),
        ("kmeans_point", kmeans_point, (D(feats), D(centres), C(np.zeros(8, np.int32)), D(R(8)), 3, 3), 8, {}),
        ("kmeans_accumulate", kmeans_accumulate, (D(feats.copy()), C(membership), D(R(9)), D(R(3)), 3), 8, {}),
        ("nn_euclid", nn_euclid, (D(R(9, lo=0.0, hi=5.0)), D(R(9, lo=0.0, hi=5.0)), D(R(9)), 9,
                                  gk.Active(2.5), gk.Active(2.0)), 9, {}),
        ("pf_likelihood", pf_likelihood, (D(R(7, lo=1.0, hi=3.4)), D(R(7, lo=1.0, hi=4.4)), C(objxy),
                                          D(R(60, lo=163.0, hi=165.0)), D(R(7)), D(R(7)), 5, 5, 6, 1), 7, {}),
        ("hpcg_spmv", hpcg_spmv, (C(ptr), C(cols), D(vals), D(R(6)), D(R(6))), 6, {}),
        ("hpcg_symgs", hpcg_symgs, (C(ptr), C(cols), D(vals.copy()), C(diag), D(R(6)), D(R(6)), 6), 1, {}),
        ("mg_resid", mg_resid, (D(R(5, 5, 6)), D(R(5, 5, 6)), D(R(5, 5, 6)), D(R(4, lo=-0.5, hi=0.5))), (3, 3, 4),
         {}),
        ("mg_psinv", mg_psinv, (D(R(5, 5, 6)), D(R(5, 5, 6)), D(R(4, lo=-0.5, hi=0.5))), (3, 3, 4), {}),
        ("shoc_md", shoc_md, (D(R(nat, 3)), D(pos), C(neigh), 2.0, gk.Active(1.5), gk.Active(2.0), nat, maxn),
         nat, {}),
        ("lbm", lbm_collide_stream, (D(R(19, 4, 4, 5, lo=0.02, hi=0.06)), D(R(19, 4, 4, 5)), gk.Active(1.2)),
         (2, 2, 3), {}),
        ("minife_assemble", minife_assemble, (C(elems), D(R(4)), D(R(4)), C(KQ4), C(qptr), C(qcols), D(R(qcols.size)),
                                              D(R(9))), 4, {}),
        ("pic_deposit", pic_deposit, (D(R(10, lo=0.0, hi=1.99)), D(R(10, lo=0.0, hi=1.49)), D(R(10)), D(R(12)),
                                      4, 3, 2.0), 10, {}),
        ("sw_serial", sw_serial, (D(R(5, 6, lo=0.0, hi=0.1)), D(R(4, 5, lo=-1.0, hi=2.0)), gk.Active(0.3),
                                  D(np.zeros(1)), 4, 5), 1, {}),
        ("smith_waterman", smith_waterman, (D(R(5, 6, lo=0.0, hi=0.1)), D(R(4, 5, lo=-1.0, hi=2.0)),
                                            gk.Active(0.3)), None, {}),
        ("softmax_rows", softmax_rows, (D(R(5, 6, lo=-2.0, hi=2.0)), D(R(5, 6)), 6), 5, {}),
        ("layernorm_rows", layernorm_rows, (D(R(4, 6, lo=-2.0, hi=2.0)), D(R(4, 6)), D(R(6)), D(R(6)), D(R(4)),
                                            D(R(4)), 6), 4, {}),
        ("bitonic_step", bitonic_step, (D(R(16)), 2, 8), 16, {}),
        ("kmeans_objective", kmeans_objective, (D(feats.copy()), D(centres.copy()), D(R(8)), 3, 3), 8, {}),
        ("softmax_online", softmax_online, (D(R(5, 6, lo=-2.0, hi=2.0)), D(R(5, 6)), 6), 5, {}),
        ("pf_resample", pf_resample, (C(cdf), C(np.sort(rng.uniform(0.05, 0.95, 7))), D(R(7)), D(R(7)), D(R(7)),
                                      D(R(7)), 7), 7, {}),
        ("gaussian", gaussian_elimination, (D(np.zeros(16)),
                                            D(R(16) + np.eye(4).ravel() * 4.0), D(R(4))), None, {}),
        ("mri_q", mri_q, (D(R(6, lo=-0.5, hi=0.5)), D(R(6, lo=-0.5, hi=0.5)), D(R(6, lo=-0.5, hi=0.5)), D(R(6)),
                          D(R(5)), D(R(5)), D(R(5)), D(R(5)), D(R(5)), 6), 5, {}),
    ]
