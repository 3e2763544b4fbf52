"""Session 52's ported kernels (tests/support/ported_hpc5.py, ported_hpc5_fluids.py, ported_hpc5_nets.py): each
kernel's small random inputs, away from kinks, and its NumPy reference (ported_hpc5_refs.py, ported_hpc5_refs2.py).
Used by tests/library/test_ported_hpc5.py.

`cases(rng)` gives (name, kernel or program, annotated args, dim, check_grad options, reference), as
ported_hpc4_cases.py does."""

import numpy as np

import gradkern as gk
from support import ported_hpc5 as A
from support import ported_hpc5_fluids as B
from support import ported_hpc5_nets as C
from support import ported_hpc5_refs as ref
from support import ported_hpc5_refs2 as ref2

PROGRAMS = {"smoke_project", "virieux_steps", "maccormack", "pcr_solve"}


def _csr(n, rng, degree=3):
    """A random graph's in-neighbour lists as CSR (row_ptr, col), `degree` distinct neighbours each, no self loop."""
    rows = [rng.choice([u for u in range(n) if u != v], degree, replace=False) for v in range(n)]
    return np.arange(0, n * degree + 1, degree, dtype=np.int32), np.concatenate(rows).astype(np.int32)


def _tets(rng):
    """Two positively oriented tetrahedra sharing the face (1, 2, 3), their rest Dm^-1 and volumes; positions
    perturbed from rest."""
    rest = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]], float)
    idx = np.array([[0, 1, 2, 3], [4, 1, 3, 2]], np.int32)
    dms = [np.stack([rest[t[c + 1]] - rest[t[0]] for c in range(3)], 1) for t in idx]
    vol = np.array([np.linalg.det(d) / 6 for d in dms])
    assert (vol > 0).all()
    return rest + rng.uniform(-0.08, 0.08, rest.shape), idx, np.stack([np.linalg.inv(d) for d in dms]), vol


def _euler_states(u, rng):
    rho = rng.uniform(0.8, 1.2, len(u))
    p = rng.uniform(0.8, 1.2, len(u))
    return np.stack([rho, rho * u, p / 0.4 + 0.5 * rho * u * u], 1)


def cases(rng, dtype=np.float64):
    def R(*s, lo=0.5, hi=1.5):
        return rng.uniform(lo, hi, s).astype(dtype)

    def D(a):
        return gk.Duplicated(np.asarray(a, dtype), np.zeros(np.shape(a), dtype))

    def K(a):
        return gk.Const(a)

    def act(x):
        return gk.Active(dtype(x))

    dx = 0.25
    cells = rng.integers(1, 5, (6, 2))
    xp = (cells + 0.5 + rng.uniform(0.2, 0.8, (6, 2))) * dx
    sprx = R(5, 2, lo=0.0, hi=2.0)
    anchor_a = np.array([0, 1, 2, 3, 0, 1], np.int32)
    anchor_b = np.array([1, 2, 3, 4, 2, 4], np.int32)
    tx, tidx, dm_inv, vol = _tets(rng)
    aim = np.stack([R(6, lo=-0.35, hi=0.35), np.r_[R(4, lo=-0.2, hi=0.2), R(2, lo=-0.9, hi=-0.7)], np.full(6, -3.0)], 1)
    rays = aim / np.sqrt((aim ** 2).sum(1))[:, None]
    dem_x = np.stack([0.9 * np.arange(5), np.zeros(5), np.zeros(5)], 1) + rng.uniform(-0.02, 0.02, (5, 3))
    t_col = R(5, 3, lo=280.0, hi=300.0)
    p_col = R(5, 3, lo=8e4, hi=1e5)
    qvs = 380.0 / p_col * np.exp(17.27 * (t_col - 273.0) / (t_col - 36.0))
    u_hllc = np.array([0.4, 0.5, 0.45, -0.4, -0.5, -0.45, 2.5, 2.6, 2.7, -2.5, -2.6, -2.7])
    spd = rng.uniform(-0.5, 0.5, (3, 4, 4))
    spd = spd @ np.swapaxes(spd, 1, 2) + 2.0 * np.eye(4)
    q3 = np.linalg.qr(rng.standard_normal((3, 3, 3)))[0]
    sym3 = q3 @ (np.array([1.0, 2.2, 3.7])[:, None] * np.swapaxes(q3, 1, 2)) + rng.uniform(-0.1, 0.1, (3, 1, 1))
    sym3 = 0.5 * (sym3 + np.swapaxes(sym3, 1, 2))
    row_ptr, col = _csr(6, rng)
    out_deg = np.bincount(col, minlength=6).astype(dtype) + 1.0
    bags = np.array([0, 2, 5, 6, 9], np.int32)
    Z = rng.uniform(-1.5, 1.5, (4, 6))
    return [
        ("mpm88_p2g", A.mpm88_p2g, (D(xp), D(R(6, 2, lo=-1, hi=1)), D(R(6, 2, 2, lo=-1, hi=1)), D(R(6, lo=0.9, hi=1.1)),
                                    D(R(8, 8, 2)), D(R(8, 8)), dx, 1e-2, 0.02, act(0.9), act(40.0)), 6, {},
         ref.mpm88_p2g),
        ("mpm88_g2p", A.mpm88_g2p, (D(xp), D(R(6, 2)), D(R(6, 2, 2)), D(R(6, lo=0.9, hi=1.1)),
                                    D(R(8, 8, 2, lo=-1, hi=1)), dx, act(1e-2)), 6, {}, ref.mpm88_g2p),
        ("mass_spring_force", A.mass_spring_force, (D(sprx), D(R(5, 2)), K(anchor_a), K(anchor_b), D(R(6)),
                                                    D(R(6, lo=-0.5, hi=0.5)), D(R(6, lo=-1, hi=1)), act(10.0),
                                                    act(0.01)), 6, {}, ref.mass_spring_force),
        ("warp_springs", A.warp_springs, (D(R(5, 3, lo=0.0, hi=2.0)), D(R(5, 3, lo=-1, hi=1)),
                                          K(np.stack([anchor_a, anchor_b], 1).ravel()), D(R(6)), D(R(6)),
                                          D(R(6, lo=0.01, hi=0.1)), D(R(5, 3))), 6, {}, ref.warp_springs),
        ("wave_solve", A.wave_solve, (D(R(20)), D(R(20)), 5, 4, 2.0, act(0.8), act(0.1), 0.05), 20, {},
         ref.wave_solve),
        ("neo_hookean_tet", A.neo_hookean_tet, (D(tx), K(tidx), D(dm_inv), D(vol), act(1.0), act(2.0), D(R(5, 3)),
                                                D(R(2))), 2, {}, ref.neo_hookean_tet),
        ("sdf_raymarch", A.sdf_raymarch, (D(rays), D(np.array([0.1, 0.0, -3.0]) + R(3, lo=-0.05, hi=0.05)),
                                          act(0.8), act(-1.0), D(R(6)), D(R(6)), 30), 6, {}, ref.sdf_raymarch),
        ("nbody_integrate", A.nbody_integrate, (D(R(8, 4)), D(R(8, 4)), D(np.c_[R(8, 3, lo=-1, hi=1), R(8, 1)]),
                                                D(R(8, 4, lo=-0.1, hi=0.1)), act(0.01), act(0.995), 0.01, 2), 8,
         {}, ref.nbody_integrate),
        ("dem_hertz", A.dem_hertz, (D(dem_x), D(R(5, 3, lo=-0.2, hi=0.2)), D(R(5, lo=0.48, hi=0.52)), D(R(5)),
                                    K(np.array([0, 1, 2, 3, 0, 1], np.int32)),
                                    K(np.array([1, 2, 3, 4, 2, 3], np.int32)),
                                    act(100.0), act(0.5), D(R(5, 3))), 6, {}, ref.dem_hertz),
        ("smoke_project", A.smoke_project, (D(R(5, 5, lo=-1, hi=1)), D(R(5, 5, lo=-1, hi=1)), D(R(5, 5)), D(R(5, 5)),
                                            D(R(5, 5)), 2), None, {}, ref.smoke_project),
        ("kessler_column", B.kessler_column, (D(t_col), D(qvs * R(5, 3, lo=0.85, hi=0.95)),
                                              D(R(5, 3, lo=1.5e-3, hi=3e-3)), D(R(5, 3, lo=5e-4, hi=2e-3)),
                                              D(R(5, 3, lo=1.0, hi=1.2)), D(p_col),
                                              10.0, 100.0), 3, {"relative": True}, ref2.kessler_column),
        ("ppm_flux", B.ppm_flux, (D(R(10)), D(R(10)), act(0.4)), 10, {}, ref2.ppm_flux),
        ("virieux_steps", B.virieux_steps, (*[D(R(6, 5, lo=-1, hi=1)) for _ in range(5)], D(R(6, 5, lo=1, hi=2)),
                                            D(R(6, 5)), D(R(6, 5)), D(R(6, 5, lo=0.9, hi=1.0)), act(0.1), 1.0, 2),
         None, {}, ref2.virieux_steps),
        ("roe_flux", B.roe_flux, (D(_euler_states(R(7, lo=0.2, hi=0.5), rng)), D(R(6, 3))), 6, {}, ref2.roe_flux),
        ("hllc_flux", B.hllc_flux, (D(_euler_states(u_hllc, rng)), D(R(11, 3))), 11, {}, ref2.hllc_flux),
        ("maccormack", B.maccormack, (D(R(8)), D(R(8)), act(0.3), 2), None, {}, ref2.maccormack),
        ("pcr_solve", B.pcr_solve, (D(R(8)), D(R(8, lo=3, hi=4)), D(R(8)), D(R(8)), *[D(R(8)) for _ in range(4)],
                                    D(R(8))), None, {}, ref2.pcr_solve),
        ("cholesky4_solve", B.cholesky4_solve, (D(spd), D(R(3, 4)), D(R(3, 4))), 3, {}, ref2.cholesky4_solve),
        ("jacobi_eigen3", B.jacobi_eigen3, (D(sym3), D(R(3, 3)), 3), 3, {}, ref2.jacobi_eigen3),
        ("heston_paths", B.heston_paths, (D(Z), D(rng.uniform(-1.5, 1.5, (4, 6))), act(1.0), act(0.04), act(1.5),
                                          act(0.04), act(0.3), act(-0.5), act(0.02), 0.1, act(0.8), D(R(4))), 4, {},
         ref2.heston_paths),
        ("asian_call", B.asian_call, (D(rng.uniform(-1.5, 1.5, (4, 8))), act(1.0), act(0.03), act(0.2), 0.05,
                                      act(0.8), D(R(4))), 4, {}, ref2.asian_call),
        ("american_put", B.american_put, (D(R(4, lo=20, hi=30)), D(R(4, lo=20, hi=30)), D(R(4, lo=0.5, hi=2.0)),
                                          act(0.05), act(0.3), D(R(4))), 4, {"relative": True}, ref2.american_put),
        ("pagerank_pull", C.pagerank_pull, (K(row_ptr), K(col), D(out_deg), D(R(6)), D(R(6)), act(0.85)), 6, {},
         ref2.pagerank_pull),
        ("gcn_aggregate", C.gcn_aggregate, (K(row_ptr), K(col), D(R(18)), D(R(6, lo=1, hi=3)), D(R(6, 3)), D(R(6, 3))),
         (6, 3), {}, ref2.gcn_aggregate),
        ("gat_aggregate", C.gat_aggregate, (K(row_ptr), K(col), D(R(6, 2, lo=-1, hi=1)), D(R(6, 2, lo=-1, hi=1)),
                                            D(R(6, 2, 3)), D(R(6, 2, 3)), 0.2), (6, 2), {}, ref2.gat_aggregate),
        ("rope_rotate", C.rope_rotate, (D(R(3, 8, lo=-1, hi=1)), D(R(3, 8, lo=-1, hi=1)), 4, 10000.0), (3, 2, 2), {},
         ref2.rope_rotate),
        ("depthwise_conv2d", C.depthwise_conv2d, (D(R(2, 5, 5)), D(R(2, 3, 3, lo=-1, hi=1)), D(R(2)), D(R(2, 3, 3)),
                                                  2, 1), (2, 3, 3), {}, ref2.depthwise_conv2d),
        ("embedding_bag_sum", C.embedding_bag_sum, (D(R(7, 3)), K(rng.integers(0, 7, 9).astype(np.int32)), K(bags),
                                                    D(R(9)), D(R(4, 3))), (4, 3), {}, ref2.embedding_bag_sum),
        ("group_norm", C.group_norm, (D(R(2, 4, 5)), D(R(4)), D(R(4, lo=-1, hi=1)), D(R(2, 4, 5)), 2, 1e-5), (2, 2), {},
         ref2.group_norm),
        ("cross_entropy", C.cross_entropy, (D(R(4, 6, lo=-2, hi=2)), K(rng.integers(0, 6, 4).astype(np.int32)),
                                            D(R(4))), 4, {}, ref2.cross_entropy),
        ("bilateral_filter", C.bilateral_filter, (D(R(5, 6)), D(R(5, 6)), 1, act(1.0), act(0.3)), (5, 6), {},
         ref2.bilateral_filter),
        ("tv_step", C.tv_step, (D(R(5, 6)), D(R(5, 6)), D(R(5, 6)), act(0.5), act(0.1), 1e-2), (5, 6), {},
         ref2.tv_step),
        ("sobel_magnitude", C.sobel_magnitude, (D(R(5, 6)), D(R(5, 6)), act(0.5)), (5, 6), {},
         ref2.sobel_magnitude),
    ]
