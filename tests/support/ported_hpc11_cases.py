"""Session 58's ported kernels (tests/support/ported_hpc11.py, ported_hpc11_more.py): each kernel's small random
inputs and its NumPy reference (ported_hpc11_refs.py). Used by tests/library/test_ported_hpc11.py.

`cases(rng, dtype)` gives (name, kernel or program, annotated args, dim, check_grad options, reference), as
ported_hpc10_cases.py does. Inputs are drawn away from every branch's threshold (cut-offs, the FENE clamp and WCA
range, the option payoffs' kinks, rs = 1) by at least 0.02, so that check_grad's central differences (step about
1e-6 relative) never straddle one."""

import numpy as np

from support import ported_hpc11 as A
from support import ported_hpc11_more as B
from support import ported_hpc11_refs as ref
from support.ported_harness import case_makers

PROGRAMS = {"jacobi2d"}
# finite differences for 3 input elements drawn and 3 forward tangents, the dot-product tests over every element
# (as round 10: the interpreter's runs are most of the file's CI time, docs/testing.md "Test time")
OPT = {"max_coords": 3}
MARGIN = 0.02

def _points(rng, n, lo, hi, keep):
    """n points uniform in [lo, hi]^3 whose pairwise distances all pass `keep(d)` (a rejection loop)."""
    while True:
        p = rng.uniform(lo, hi, (n, 3))
        d = np.linalg.norm(p[:, None] - p[None], axis=-1)[np.triu_indices(n, 1)]
        if all(keep(x) for x in d):
            return p

def _nbnxn(rng, dtype, R, D):
    """Two clusters of four atoms; cluster 0 lists clusters 0 and 1, cluster 1 itself (the self pairs' halves
    by `j <= i`); random exclusion masks; rc 0.9, no pair within 0.02 of it, none closer than 0.35."""
    x = _points(rng, 8, 0.0, 1.1, lambda d: d > 0.35 and abs(d - 0.9) > MARGIN)
    start = np.array([0, 2, 3], np.int32)
    cj = np.array([0, 1, 1], np.int32)
    excl = rng.integers(0, 1 << 16, 3).astype(np.int32)
    nbfp = np.stack([rng.uniform(0.005, 0.02, 4), rng.uniform(2e-5, 8e-5, 4)], axis=1)
    ic = np.array([0.81, 0.3, 1.4, -1.0 / 0.9 ** 12, -1.0 / 0.9 ** 6])
    return ("nbnxn_rf_lj", A.nbnxn_rf_lj, (D(x), D(R(8, lo=-1.0, hi=1.0)), rng.integers(0, 2, 8).astype(np.int32),
                                           2, D(nbfp), start, cj, excl, D(ic), D(np.zeros((8, 3))),
                                           D(np.zeros(2))), 2, OPT, ref.nbnxn_rf_lj)


def _born(rng, dtype, R, D, n=6):
    """Six atoms of two types, a full list whose entries carry random special-bond bits in the int32's top two
    (the sign bit among them, as in LAMMPS); cut-off 1.5, no pair within 0.02 of it."""
    x = _points(rng, n, 0.0, 1.4, lambda d: d > 0.6 and abs(d - 1.5) > MARGIN)
    neigh = np.zeros((n, n - 1), np.int64)
    for i in range(n):
        js = [j for j in range(n) if j != i]
        neigh[i] = [j | (int(rng.integers(0, 4)) << A.SBBITS) for j in js]
    neigh = neigh.astype(np.uint32).view(np.int32)
    p = np.zeros((2, 2, 10))
    a, rho, sigma, c, d = (rng.uniform(0.8, 1.2, (2, 2)), rng.uniform(0.25, 0.35, (2, 2)),
                           rng.uniform(0.7, 0.9, (2, 2)), rng.uniform(0.02, 0.05, (2, 2)),
                           rng.uniform(0.005, 0.01, (2, 2)))
    p[..., A.B_CUTSQ], p[..., A.B_RHOINV], p[..., A.B_SIGMA] = 2.25, 1.0 / rho, sigma
    p[..., A.B_BORN1], p[..., A.B_BORN2], p[..., A.B_BORN3] = a / rho, 6.0 * c, 8.0 * d
    p[..., A.B_A], p[..., A.B_C], p[..., A.B_D] = a, c, d
    p[..., A.B_OFFSET] = a * np.exp((sigma - 1.5) / rho) - c / 1.5 ** 6 + d / 1.5 ** 8
    return ("born_compute", A.born_compute, (D(x), np.array([0, 1, 0, 1, 1, 0], np.int32), neigh,
                                             np.full(n, n - 1, np.int32), D([1.0, 0.3, 0.5, 0.8]), D(p),
                                             D(np.zeros((n, 3))), D(np.zeros(n))), n, OPT, ref.born_compute)

def _fene(rng, dtype, R, D):
    """A chain of six beads, bond lengths 0.95 and 1.05 (inside the WCA range 2^(1/6) sigma), 1.3 and 1.2
    (outside), 1.5 (past the clamp, r > 0.9^(1/2) r0 = 1.423): one bond raises its flag."""
    x = np.zeros((6, 3))
    for m, length in enumerate([0.95, 1.3, 1.05, 1.5, 1.2]):
        u = rng.normal(size=3)
        x[m + 1] = x[m] + length * u / np.linalg.norm(u)
    bonds = np.array([[m, m + 1, m % 2] for m in range(5)], np.int32)
    return ("bond_fene", A.bond_fene, (D(x), bonds, D([30.0, 25.0]), D([1.5, 1.5]), D([1.0, 0.9]), D([1.0, 1.0]),
                                       D(np.zeros((6, 3))), D(np.zeros(5)), np.zeros(5, np.int32)), 5, OPT,
            ref.bond_fene)

def _btree(rng, dtype, R, D, order=3, height=2):
    """A complete B+ tree of order 3 and height 2 (13 nodes, 27 records stored in shuffled order), eight
    queries: six present, two absent."""
    sentinel = 1 << 30
    k = np.sort(rng.choice(np.arange(1, 300), 27, replace=False))
    keys = np.full((13, order + 1), sentinel, np.int32)
    indices = np.zeros((13, order + 1), np.int32)
    slot = rng.permutation(27)
    for leaf in range(9):
        keys[4 + leaf, :order] = k[3 * leaf:3 * leaf + 3]
        indices[4 + leaf, :order] = slot[3 * leaf:3 * leaf + 3]
    for m in range(3):
        keys[1 + m, :order] = keys[4 + 3 * m:7 + 3 * m, 0]
        indices[1 + m, :order] = np.arange(4 + 3 * m, 7 + 3 * m)
    keys[0, :order] = keys[1:4, 0]
    indices[0, :order] = [1, 2, 3]
    absent = [q for q in range(1, 300) if q not in set(k)]
    query = np.concatenate([rng.choice(k, 6, replace=False), rng.choice(absent, 2, replace=False)]).astype(np.int32)
    return ("btree_find_k", B.btree_find_k, (height, keys, indices, 13, D(R(27)), np.zeros(8, np.int64),
                                            np.zeros(8, np.int64), query, D(R(8)), order), 8, OPT,
            ref.btree_find_k)

def _mc(rng, dtype, R, D, paths=16):
    """Two options, 16 paths each; redrawn until no path ends within 0.02 of its strike (the payoff's kink)."""
    distance = 0xFFFFFFFF // (paths + 1)
    z = np.array([ref._moro((p + 1) * distance) for p in range(paths)])
    while True:
        opt = np.stack([rng.uniform(0.9, 1.1, 2), rng.uniform(0.9, 1.1, 2), rng.uniform(0.5, 1.0, 2),
                        rng.uniform(0.02, 0.06, 2), rng.uniform(0.2, 0.4, 2)], axis=1)
        s, x, t, r, v = opt.T
        end = s[:, None] * np.exp(((r - 0.5 * v * v) * t)[:, None] + (v * np.sqrt(t))[:, None] * z)
        if np.all(np.abs(end - x[:, None]) > MARGIN):
            return ("mc_call", B.mc_call, (D(opt), paths, D(np.zeros(2))), (2, paths), OPT, ref.mc_call)

def _lda(rng, dtype, R, D):
    """Twelve densities in [0.05, 3] away from rs = 1 (rho = 0.2387), one negative (|rho| taken). None below
    rho_threshold: check_grad's absolute step (about 1e-6) would carry it across."""
    rho = rng.uniform(0.05, 3.0, 14)
    rho = np.where(np.abs(rho - B.PI34 ** 3) < MARGIN, rho + 0.1, rho)
    rho[0], rho[1], rho[3] = rng.uniform(0.05, 0.2), rng.uniform(0.3, 3.0), -rho[3]  # both branches of rs < 1
    return ("xc_lda_pz", B.xc_lda_pz, (D(rho),) + tuple(D(np.zeros(14)) for _ in range(4)), 14, OPT, ref.xc_lda_pz)

def cases(rng, dtype=np.float64):
    R, D, act = case_makers(rng, dtype)
    rngs = [np.random.default_rng(s) for s in rng.integers(0, 2 ** 31, 6)]
    return [
        _nbnxn(rngs[0], dtype, R, D),
        _born(rngs[1], dtype, R, D),
        ("angle_harmonic", A.angle_harmonic, (D(_points(rngs[2], 6, 0.0, 1.5, lambda d: d > 0.4)),
                                              np.array([[0, 1, 2, 0], [1, 2, 3, 1], [2, 3, 4, 0], [3, 4, 5, 1],
                                                        [5, 0, 1, 0]], np.int32),
                                              D([1.2, 0.8]), D([1.9, 2.1]), D(np.zeros((6, 3))), D(np.zeros(1))),
         5, OPT, ref.angle_harmonic),
        _fene(rngs[3], dtype, R, D),
        ("segment_csr_max", B.segment_csr_max, (D(R(30, lo=-1.0, hi=1.0)), np.array([0, 3, 3, 7, 10], np.int64),
                                                D(np.zeros(12)), np.full(12, 10, np.int64), 4, 3), 16, OPT,
         ref.segment_csr_max),
        _btree(rngs[4], dtype, R, D),
        _mc(rngs[5], dtype, R, D),
        _lda(rng, dtype, R, D),
        ("su3_mat_nn", B.su3_mat_nn, (D(R(2, 4, 3, 3, 2, lo=-1.0, hi=1.0)), D(R(4, 3, 3, 2, lo=-1.0, hi=1.0)),
                                      D(np.zeros((2, 4, 3, 3, 2))), 2), 96, OPT, ref.su3_mat_nn),
        ("jacobi2d", B.jacobi2d, (D(R(6, 6, lo=-1.0, hi=1.0)), D(R(6, 6, lo=-1.0, hi=1.0)), 6, 2), None, OPT,
         ref.jacobi2d),
    ]

