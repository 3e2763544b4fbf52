"""Session 55's ported kernels (tests/support/ported_hpc8.py, ported_hpc8_more.py): each kernel's small random
inputs and its NumPy reference (ported_hpc8_refs.py). Used by tests/library/test_ported_hpc8.py.

`cases(rng)` gives (name, kernel or program, annotated args, dim, check_grad options, reference), as
ported_hpc7_cases.py does."""

import numpy as np

from support import ported_hpc8 as A
from support import ported_hpc8_more as B
from support import ported_hpc8_refs as ref
from support.ported_harness import case_makers

PROGRAMS = {"stencil2d", "fwt", "blelloch_scan", "three_mm", "jacobi_1d", "pennant_ctrs_vols"}
# finite differences for 16 input elements drawn (each two runs of the kernel or program; the default 64 doubled
# the interpreter's CPU in CI), the dot-product test over every element as always
OPT = {"max_coords": 16}


def _hex_mesh(rng, dtype):
    """Two LULESH hexahedra side by side on a 3 x 2 x 2 grid of nodes (node n = x + 3 y + 6 z, LULESH's local
    order: the bottom face counter-clockwise, then the top), the nodes moved by up to 0.1."""
    g = np.stack(np.meshgrid(np.arange(3.0), np.arange(2.0), np.arange(2.0), indexing="ij"), -1)
    pos = (g.transpose(2, 1, 0, 3).reshape(-1, 3) + rng.uniform(-0.1, 0.1, (12, 3))).astype(dtype)
    corners = np.array([0, 1, 4, 3, 6, 7, 10, 9])
    nodelist = np.concatenate([corners, corners + 1]).astype(np.int32)
    return pos, nodelist


def _polygons():
    """PENNANT's side maps for two quadrilaterals and a triangle on seven points (each zone counter-clockwise;
    side s runs from point mapsp1[s] to mapsp2[s] of zone mapsz[s])."""
    zones = [[0, 1, 4, 3], [1, 2, 5, 4], [2, 6, 5]]
    p1 = np.array([p for z in zones for p in z], np.int32)
    p2 = np.array([z[(k + 1) % len(z)] for z in zones for k in range(len(z))], np.int32)
    sz = np.array([i for i, z in enumerate(zones) for _ in z], np.int32)
    return p1, p2, sz, np.array([len(z) for z in zones], np.int32)


def _region(rng):
    """Six LULESH elements, five of them in the region's list (out of order); per element and face a random
    boundary case (none, SYMM, FREE or COMM: 0, 1, 2, 4 in the face's three bits) and random neighbours."""
    bc = sum(rng.choice([0, 1, 2, 4], 6) << (3 * face) for face in range(6)).astype(np.int32)
    return (np.array([4, 0, 2, 5, 1], np.int32), bc) + tuple(rng.integers(0, 6, 6).astype(np.int32) for _ in range(6))


def cases(rng, dtype=np.float64):
    R, D, act = case_makers(rng, dtype)

    pos, nodelist = _hex_mesh(rng, dtype)
    vel = R(12, 3, lo=-1, hi=1)
    p1, p2, sz, znump = _polygons()
    points = np.array([[0, 0], [1, 0], [2, 0], [0, 1], [1, 1], [2, 1], [3, 0.6]]) + rng.uniform(-0.1, 0.1, (7, 2))
    tokens = np.array([2, 0, 2, 3, 1, 2], np.int32)  # token 2 three times: the backward's atomics meet
    spd = R(4, 4, lo=-0.5, hi=0.5)
    spd = spd @ spd.T + 2.0 * np.eye(4, dtype=dtype)
    region = _region(rng)
    fdtd_shape = (3 + 8) * (2 + 8) * (2 + 8)
    return [
        ("hotspot_step", A.hotspot_step, (D(R(20)), D(R(20, lo=320, hi=340)), D(R(20)), 5, 4, dtype(0.5),
                                          act(0.8), act(1.2), act(4.0), dtype(0.1)), (4, 5), OPT,
         ref.hotspot_step),
        ("stencil2d", A.stencil2d, (D(R(5, 6)), D(R(5, 6)), act(0.5), act(0.1), act(0.05), 2), None, OPT,
         ref.stencil2d),
        ("fwt", A.fwt, (D(R(64, lo=-1, hi=1)), 6), None, OPT, ref.fwt),
        ("fdtd3d_step", A.fdtd3d_step, (D(R(fdtd_shape)), D(R(fdtd_shape)), D(R(5, lo=-1, hi=1)), 2, 2, 4),
         (3, 2, 2), OPT, ref.fdtd3d_step),
        ("box_filter_x", A.box_filter_x, (D(R(21)), D(R(21)), 7, 3, 2), 3, OPT, ref.box_filter_x),
        ("blelloch_scan", A.blelloch_scan, (D(R(16)),), None, OPT, ref.blelloch_scan),
        ("monotonic_q_gradients", A.monotonic_q_gradients,
         (D(pos[:, 0]), D(pos[:, 1]), D(pos[:, 2]), D(vel[:, 0]), D(vel[:, 1]), D(vel[:, 2]), D(R(2)), D(R(2)),
          nodelist) + tuple(D(R(2)) for _ in range(6)), 2, OPT, ref.monotonic_q_gradients),
        ("monotonic_q_region", A.monotonic_q_region,
         region + tuple(D(R(6, lo=-1, hi=1)) for _ in range(3)) + tuple(D(R(6)) for _ in range(3))
         + (D(R(6, lo=-1, hi=1)), D(R(6)), D(R(6)), D(R(6)), D(R(6)), D(R(6)), dtype(1.8), dtype(1.2), dtype(0.5),
            dtype(2.0 / 3.0), dtype(1e-36)), 5, OPT, ref.monotonic_q_region),
        ("encoder_forward", A.encoder_forward, (D(R(12)), tokens, D(R(8)), D(R(6)), 2, 3, 2), 14, OPT,
         ref.encoder_forward),
        ("encoder_backward", A.encoder_backward, (D(R(8)), D(R(6)), D(R(12, lo=-1, hi=1)), tokens, 2, 3, 2), 14, OPT,
         ref.encoder_backward),
        ("three_mm", B.three_mm, (D(R(9)), D(R(6)), D(R(4)), D(R(6)), D(R(6)), D(R(6)), D(R(9)), 3, 2, 3, 3, 2),
         None, OPT, ref.three_mm),
        ("syrk_kernel", B.syrk_kernel, (act(1.3), act(0.7), D(R(12)), D(R(9)), 3, 4), (3, 3), OPT, ref.syrk_kernel),
        ("conv2d_polybench", B.conv2d_polybench, (D(R(20)), D(R(20)), 5, 4), (5, 4), OPT, ref.conv2d_polybench),
        ("jacobi_1d", B.jacobi_1d, (D(R(8)), D(R(8)), 2), None, OPT, ref.jacobi_1d),
        ("cholesky", B.cholesky, (D(spd),), 1, OPT, ref.cholesky),
        ("pennant_ctrs_vols", B.pennant_ctrs_vols,
         (D(points[:, 0]), D(points[:, 1]), D(R(11)), D(R(11)), D(R(3)), D(R(3)), D(R(11)), D(R(11)), D(R(3)),
          D(R(3)), p1, p2, sz, znump), None, OPT, ref.pennant_ctrs_vols),
    ]
