"""Session 57's ported kernels (tests/support/ported_hpc10.py, ported_hpc10_more.py): each kernel's small random
inputs and its NumPy reference (ported_hpc10_refs.py). Used by tests/library/test_ported_hpc10.py.

`cases(rng, dtype)` gives (name, kernel or program, annotated args, dim, check_grad options, reference), as
ported_hpc9_cases.py does. Inputs are drawn away from every branch's threshold (cut-offs, contact distances,
walls, window edges) by at least 0.02, so that check_grad's central differences (step about 1e-6 relative) never
straddle one."""


import numpy as np

from support import ported_hpc10 as A
from support import ported_hpc10_more as B
from support import ported_hpc10_refs as ref
from support.ported_harness import case_makers

PROGRAMS = {"stillinger_weber", "axhelm", "pbf_substeps", "ft_evolve"}
# finite differences for 3 input elements drawn (each two runs of the kernel or program) and 3 forward tangents,
# the dot-product tests (reverse and forward against central differences along a random direction) over every
# element as always: the interpreter runs each case about 10 times, which is most of the file's CI time
# (docs/testing.md "Test time")
OPT = {"max_coords": 3}
MARGIN = 0.02


def _points(rng, n, dim, lo, hi, keep):
    """n points uniform in [lo, hi]^dim whose pairwise distances all pass `keep(d)` (a rejection loop: at most a
    few hundred tries at these sizes)."""
    while True:
        p = rng.uniform(lo, hi, (n, dim))
        d = np.linalg.norm(p[:, None] - p[None], axis=-1)[np.triu_indices(n, 1)]
        if all(keep(x) for x in d):
            return p


def _away(x, edges):
    return all(abs(x - e) > MARGIN for e in edges)


def _sw(rng, dtype, R, D):
    """Five atoms of two types, a cluster within the cut-offs of most pairs; Si-like parameters (sigma 1, a 1.8,
    lambda 21, gamma 1.2, cos theta0 -1/3, A 7.05, B 0.60, p 4, q 0) the others varied by up to 5% per triplet."""
    n = 5
    x = _points(rng, n, 3, 0.0, 1.7, lambda d: d > 0.9 and _away(d, [1.8]))
    rows = []
    for _ in range(8):
        eps, sigma, a, lam, gamma, cost, bA, bB, p, q = (
            np.array([2.1683, 1.0, 1.8, 21.0, 1.2, -1.0 / 3.0, 7.049556277, 0.6022245584, 4.0, 0.0])
            * rng.uniform(0.95, 1.05, 10))
        sigma = 1.0
        a = 1.8
        cut = sigma * a
        rows.append([cut, cut * cut, sigma, sigma * gamma, lam * eps, 2.0 * lam * eps, cost, p, q,
                     bA * eps * p * bB * sigma ** p, bA * eps * q * sigma ** q, bA * eps * bB * sigma ** (p + 1.0),
                     bA * eps * sigma ** (q + 1.0), bA * eps * bB * sigma ** p, bA * eps * sigma ** q])
    params = np.array(rows)
    dist = np.linalg.norm(x[:, None] - x[None], axis=-1)
    assert all(_away(dist[i, j], np.sqrt(params[:, A.CUTSQ])) for i in range(n) for j in range(i))
    atype = np.array([0, 1, 0, 1, 1], np.int32)
    e3 = np.arange(8, dtype=np.int32).reshape(2, 2, 2)
    neigh = np.array([[j for j in range(n) if j != i] for i in range(n)], np.int32)
    return ("stillinger_weber", A.stillinger_weber,
            (D(x), atype, np.arange(1, n + 1, dtype=np.int32), e3, D(params), neigh, np.full(n, n - 1, np.int32),
             np.zeros((n, n - 1), np.int32), np.zeros(n, np.int32), D(np.zeros((n, 3))), D(np.zeros(1)),
             dtype(np.max(params[:, A.CUTSQ]))), None, OPT, ref.stillinger_weber)


def _rsbench(rng, dtype, R, D):
    """Three nuclides (4, 3 and 5 windows of 2 or 3 poles each), two materials, six lookups away from the windows'
    edges; poles' MP_EA with an imaginary part of at least 0.1 (the denominator EA - sqrt(E) stays away from 0)."""
    n_windows = np.array([4, 3, 5], np.int32)
    counts = [rng.integers(2, 4, w) for w in n_windows]
    w_start = np.zeros((3, 5), np.int32)
    w_end = np.zeros((3, 5), np.int32)
    for nuc, c in enumerate(counts):
        w_end[nuc, :len(c)] = np.cumsum(c)
        w_start[nuc, :len(c)] = np.cumsum(c) - c
    poles = R(3, 15, 8, lo=-1.0, hi=1.0)
    poles[:, :, 1] = rng.uniform(0.1, 0.5, (3, 15)) * rng.choice([-1, 1], (3, 15))
    energies = []
    while len(energies) < 6:
        e = rng.uniform(0.05, 0.95)
        if all(_away(e * w, range(w + 1)) for w in n_windows):
            energies.append(e)
    return ("xs_lookup", A.xs_lookup,
            (D(np.array(energies)), np.array([0, 1, 1, 0, 1, 0], np.int32), np.array([3, 2], np.int32),
             np.array([[0, 1, 2], [2, 0, 0]], np.int32), D(R(2, 3)), n_windows, D(R(3, 5, 3)), w_start, w_end,
             D(poles), rng.integers(0, 4, (3, 15)).astype(np.int32), D(R(3, 4, lo=0.1, hi=0.6)),
             D(np.zeros((6, 4))), np.zeros(6, np.int32)), 6, OPT, ref.xs_lookup)


def _particles(rng, dtype, R, D, n=6):
    """collideD's inputs (a launch of 8 threads, rounded up past n as the sample's grid is): n particles of radius
    0.25 in [-1, 1]^3, a 4^3 grid of cells 0.5 wide (twice the radius, as the sample sets it), sorted by cell hash
    as calcHashD, the radix sort and reorderDataAndFindCellStartD leave them; the collider a sphere of radius 0.4
    at the origin."""
    radius, collider = 0.25, 0.4
    pos = _points(rng, n, 3, -0.95, 0.95, lambda d: _away(d, [2 * radius]))
    while not all(_away(np.linalg.norm(p), [radius + collider]) for p in pos):
        pos = _points(rng, n, 3, -0.95, 0.95, lambda d: _away(d, [2 * radius]))
    params = np.zeros(20)
    params[[B.SPRING, B.DAMPING, B.SHEAR, B.ATTRACTION, B.PARTICLE_RADIUS]] = (0.5, 0.02, 0.1, 0.01, radius)
    params[B.COLLIDER_RADIUS] = collider
    params[B.ORIGIN_X:B.ORIGIN_Z + 1] = -1.0
    params[B.CELL_X:B.CELL_Z + 1] = 2 * radius
    gsize = np.array([4, 4, 4], np.int32)
    cell = np.floor((pos + 1.0) / (2 * radius)).astype(int)
    hashes = (cell[:, 2] * 4 + cell[:, 1]) * 4 + cell[:, 0]
    order = np.argsort(hashes, kind="stable").astype(np.int32)
    start = np.full(64, B.EMPTY, np.int64)
    end = np.zeros(64, np.int64)
    for k, h in enumerate(hashes[order]):
        if start[h] == B.EMPTY:
            start[h] = k
        end[h] = k + 1
    vel = R(n, 4, lo=-0.5, hi=0.5)
    sorted_pos = np.concatenate([pos[order], np.ones((n, 1))], axis=1)
    return ("collide_d", B.collide_d, (D(np.zeros((n, 4))), D(sorted_pos), D(vel[order]), order, start, end, n,
                                       D(params), gsize), 8, OPT, ref.collide_d)


def _integrate(rng, dtype, R, D, n=8):
    """integrate_functor: gravity, damping, a step of 0.5 and bounces off the walls of [-1, 1]^3 (positions near
    the walls, so that most particles cross one); no particle lands within 0.02 of a wall."""
    params = np.zeros(20)
    params[[B.GRAVITY_Y, B.GLOBAL_DAMPING, B.BOUNDARY_DAMPING, B.PARTICLE_RADIUS]] = (-0.3, 0.99, -0.5, 0.1)
    while True:
        pos = R(n, 4, lo=-1.0, hi=1.0)
        vel = R(n, 4, lo=-0.6, hi=0.6)
        v = (vel[:, :3] + params[B.GRAVITY_X:B.GRAVITY_Z + 1] * 0.5) * params[B.GLOBAL_DAMPING]
        x = pos[:, :3] + 0.5 * v
        if all(_away(c, [0.9, -0.9]) for c in x.ravel()) and np.sum(np.abs(x) > 0.9) >= 4:
            return ("integrate_system", B.integrate_system, (D(pos), D(vel), dtype(0.5), D(params)), n, OPT,
                    ref.integrate_system)


def _pbf(rng, dtype, R, D, n=6, max_nb=5):
    """Six particles in a 1.8 x 1.8 box, the neighbour table as prologue builds it (within 1.05 h, -1 padded);
    no pair within 0.02 of h (poly6 and spiky branch there)."""
    pos = _points(rng, n, 2, 0.0, 1.8, lambda d: d > 0.3 and _away(d, [B.H_, B.H_ * 1.05]))
    nb = np.full((n, max_nb), -1, np.int32)
    num = np.zeros(n, np.int32)
    for i in range(n):
        js = [j for j in range(n) if j != i and np.linalg.norm(pos[i] - pos[j]) < B.H_ * 1.05][:max_nb]
        nb[i, :len(js)] = js
        num[i] = len(js)
    assert num.sum() > n
    return ("pbf_substeps", B.pbf_substeps, (D(pos), num, nb, D(np.zeros(n)), D(np.zeros((n, 2))), 2), None, OPT,
            ref.pbf_substeps)


def cases(rng, dtype=np.float64):
    R, D, act = case_makers(rng, dtype)
    rng_sw, rng_xs, rng_p, rng_i, rng_pbf = (np.random.default_rng(s) for s in rng.integers(0, 2 ** 31, 5))
    group = np.array([0, 0, 0, 1, 1, 1], np.int32)
    return [
        _sw(rng_sw, dtype, R, D),
        _rsbench(rng_xs, dtype, R, D),
        ("j2_uat", A.j2_uat, (D(R(6, 3, lo=0.0, hi=1.5)), group, 2, D(R(4, 8, lo=-0.5, hi=0.5)), dtype(2.0),
                              act(5.0 / 2.0), 6, D(np.zeros(6))), 6, OPT, ref.j2_uat),
        ("axhelm", A.axhelm, (1, 3, 27, D(R(7 * 27)), D(R(9, lo=-1, hi=1)), D(R(2 * 27)), D(R(27, lo=-1, hi=1)),
                              D(np.zeros(27)), D(np.zeros(27)), D(np.zeros(27)), D(np.zeros(27))), None, OPT,
         ref.axhelm),
        _pbf(rng_pbf, dtype, R, D),
        _particles(rng_p, dtype, R, D),
        _integrate(rng_i, dtype, R, D),
        ("rprj3", B.rprj3, (D(R(6, 6, 10, lo=-1, hi=1)), 10, 6, 6, D(np.zeros((4, 4, 6)))), (2, 2, 4), OPT,
         ref.rprj3),
        ("interp", B.interp, (D(R(3, 3, 4, lo=-1, hi=1)), D(R(4, 4, 6, lo=-1, hi=1))), (2, 2, 3), OPT, ref.interp),
        ("ft_evolve", B.ft_evolve, (D(R(4, 3, 4, 2, lo=-1, hi=1)), D(np.zeros((4, 3, 4, 2))), D(np.zeros((4, 3, 4))),
                                    act(0.02), 2), None, OPT, ref.ft_evolve),
    ]


