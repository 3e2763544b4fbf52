"""Session 56's ported kernels (tests/support/ported_hpc9.py, ported_hpc9_more.py): each kernel's small random
inputs and its NumPy reference (ported_hpc9_refs.py). Used by tests/library/test_ported_hpc9.py.

`cases(rng)` gives (name, kernel or program, annotated args, dim, check_grad options, reference), as
ported_hpc8_cases.py does."""

import numpy as np

from support import ported_hpc9 as A
from support import ported_hpc9_more as B
from support import ported_hpc9_refs as ref
from support.ported_harness import case_makers

PROGRAMS = {"lud_cuda", "ewald", "gauss_seidel", "halo_packing"}
# finite differences for 16 input elements drawn (each two runs of the kernel or program), the dot-product test
# over every element as always (as round 8's cases)
OPT = {"max_coords": 16}


def _jds(rng, dtype, rows=10, warp=4):
    """A JDS matrix of `rows` rows (2 to 4 non-zeros each, random columns), Parboil's layout: rows sorted by length
    (perm: JDS row -> matrix row), each warp padded to its longest row (zeros at column 0), jagged diagonal k of
    every warp with a row that long, each `warp` entries."""
    lengths = np.sort(rng.integers(2, 5, rows))[::-1]
    perm = rng.permutation(rows).astype(np.int32)
    zcnt = np.array([lengths[w * warp] for w in range(-(-rows // warp))], np.int32)
    ptr, data, index = [], [], []
    for k in range(int(zcnt[0])):
        ptr.append(len(data))
        for w in range(len(zcnt)):
            if zcnt[w] <= k:
                continue
            for r in range(w * warp, (w + 1) * warp):
                real = r < rows and k < lengths[r]
                data.append(rng.uniform(0.5, 1.5) if real else 0.0)
                index.append(int(rng.integers(0, rows)) if real else 0)
    return (np.array(data, dtype), np.array(index, np.int32), perm, np.array(ptr, np.int32), zcnt)


def _halo_lists():
    """A 3 x 4 block with one ghost cell around it (5 x 6, flat), periodic in x: neighbour 0 (left) is sent the
    first interior column and fills the left ghosts, neighbour 1 (right) the last."""
    rows = np.arange(1, 4) * 6
    return tuple((rows + c).astype(np.int32) for c in (1, 4, 0, 5))


def _pdv(rng, dtype, R, D, predict):
    """PdV on a 3 x 3 interior with two halo cells: cell, x-face, y-face and node arrays; one interior cell's
    volume set to half its flux's magnitude, with the flux negative, so that its error condition is 2."""
    ny = nx = 3
    cell = (ny + 4, nx + 4)
    xarea, yarea = R(ny + 4, nx + 5), R(ny + 5, nx + 4)
    vel = [R(ny + 5, nx + 5, lo=-1, hi=1) for _ in range(4)]
    volume = R(*cell, lo=1.0, hi=2.0)
    left, right, bottom, top = ref.pdv_fluxes(predict, 0.3, xarea, yarea, *vel)
    total = right - left + top - bottom
    inner = total[2:ny + 2, 2:nx + 2]
    r, c = np.unravel_index(np.argmin(inner), inner.shape)
    assert inner[r, c] < -0.05, inner
    volume[r + 2, c + 2] = -0.5 * inner[r, c]
    return (predict, nx, ny, dtype(0.3), np.zeros(cell, np.int32), D(xarea), D(yarea), D(volume), D(R(*cell)),
            D(R(*cell)), D(R(*cell)), D(R(*cell)), D(R(*cell)), D(R(*cell)), D(vel[0]), D(vel[1]), D(vel[2]),
            D(vel[3]))


def cases(rng, dtype=np.float64):
    R, D, act = case_makers(rng, dtype)

    spd = R(6, 6, lo=-0.5, hi=0.5) + 4.0 * np.eye(6, dtype=dtype)  # diagonally dominant: LU without pivoting
    posq = np.concatenate([R(3, 3, lo=0.0, hi=2.0), R(3, 1, lo=-1.0, hi=1.0)], axis=1)
    jds = _jds(rng, dtype)
    halo = _halo_lists()
    rois = np.array([[0, 0.3, 0.6, 3.7, 2.9], [0, 1.2, 0.4, 2.6, 3.8]], dtype)
    att = R(1, 2, 3, 3)
    att = np.tril(att / np.tril(att).sum(-1, keepdims=True))  # a causal softmax's rows
    types = np.array([0, 1, 2, 1], np.int32)
    return [
        ("wkv_forward", A.wkv_forward, (1, 3, 2, D(R(2, lo=-1.0, hi=-0.2)), D(R(2, lo=-0.5, hi=0.5)),
                                        D(R(6, lo=-1, hi=1)), D(R(6, lo=-1, hi=1)), D(R(6))), 2, OPT,
         ref.wkv_forward),
        ("roi_align_forward", A.roi_align_forward, (D(R(2 * 5 * 5)), dtype(0.8), 2, 5, 5, 2, 2, 2, True,
                                                    D(rois.ravel()), D(R(2 * 2 * 2 * 2))), 16, OPT,
         ref.roi_align_forward),
        ("bpnn_adjust_weights", A.bpnn_adjust_weights, (D(R(4)), 3, D(R(5)), 4, D(R(5 * 4)), D(R(5 * 4))),
         (2, A.HEIGHT, 3), OPT, ref.bpnn_adjust_weights),
        ("lud_cuda", A.lud_cuda, (D(spd.ravel()), 6), None, OPT, ref.lud_cuda),
        ("ewald", A.ewald, (D(posq), D(R(27, 2)), D(R(3)), D(R(3, 3)), act(2.5), act(2.7), act(2.9), dtype(-0.3), 3),
         None, OPT, ref.ewald),
        ("spmv_jds", A.spmv_jds, (D(R(10)), D(jds[0]), jds[1], jds[2], D(R(10)), 10, jds[3], jds[4]), 12, OPT,
         ref.spmv_jds),
        ("gauss_seidel", B.gauss_seidel, (D(R(25)), D(R(25)), 5, 2), None, OPT, ref.gauss_seidel),
        ("pdv_corrector", B.pdv_kernel, _pdv(rng, dtype, R, D, 0), (7, 7), OPT, ref.pdv_kernel),
        ("pdv_predictor", B.pdv_kernel, _pdv(rng, dtype, R, D, 1), (7, 7), OPT, ref.pdv_kernel),
        ("generate_spectrum", B.generate_spectrum, (D(R(5 * 8, 2, lo=-1, hi=1)), D(R(16, 2)), 8, 4, 4, act(0.7),
                                                    dtype(40.0)), (4, 4), OPT, ref.generate_spectrum),
        ("fasten_main", B.fasten_main, (2, 3, D(R(3, 3, lo=-2, hi=2)), types[1:].copy(), D(R(2, 3, lo=-1, hi=1)),
                                        types[:2].copy()) + tuple(D(R(8, lo=-1, hi=1)) for _ in range(6))
         + (D(R(8)), np.array([70, 69, 70], np.int32), D(R(3, lo=0.8, hi=1.6)),
            np.array([-0.5, 0.7, 0.0], dtype),
            D(R(3, lo=-1, hi=1)), 8, 2), (2, 2), OPT, ref.fasten_main),
        ("halo_packing", B.halo_packing, (D(R(30)), D(R(30)), D(R(6)), D(R(6)), D(R(6)), D(R(6))) + halo, None, OPT,
         ref.halo_packing),
        ("attention_backward", B.attention_backward, (D(R(1 * 3 * 12)), D(R(18)), D(R(18)), D(R(12, lo=-1, hi=1)),
                                                      D(R(1 * 3 * 12, lo=-1, hi=1)), D(att.ravel()), 1, 3, 4, 2),
         (1, 3, 2), OPT, ref.attention_backward),
    ]
