"""Session 55's eighth round of ported kernels, part two: PolyBench/GPU's 3MM (three products, a launch each,
flat row-major arrays at run-time sizes), SYRK (C scaled by beta in place, then the rank-k update added to it) and
2DCONV (a fixed 3 x 3 filter, the border threads returning early), PolyBench/C 4.2's jacobi-1d (two launches a
time step) and cholesky (one thread, in place, loops whose bounds are the outer indices), and PENNANT's mesh
centres and volumes (sides scattered into their zones through an int map). Written here from the algorithms of the
files cited; used by tests/library/test_ported_hpc8.py."""

import math

import gradkern as gk

# ---- PolyBench/GPU 3MM (sgrauerg/polybenchGpu CUDA/3MM/3mm.cu: mm3_kernel1, mm3_kernel2, mm3_kernel3):
# E = A B, F = C D, G = E F, a thread per output element, the sum accumulated in the output in place ----------


@gk.kernel
def mm3_kernel(a, b, e, nj, nk):
    i, j = gk.tid()
    e[i * nj + j] = 0.0
    for k in range(nk):
        e[i * nj + j] += a[i * nk + k] * b[k * nj + j]


def three_mm(a, b, c, d, e, f, g, ni, nj, nk, nl, nm, backend=None):
    gk.launch(mm3_kernel, (ni, nj), a, b, e, nj, nk, backend=backend)
    gk.launch(mm3_kernel, (nj, nl), c, d, f, nl, nm, backend=backend)
    gk.launch(mm3_kernel, (ni, nl), e, f, g, nl, nj, backend=backend)


# ---- PolyBench/GPU SYRK (CUDA/SYRK/syrk.cu: syrk_kernel): C = alpha A A^T + beta C, a thread per element of C,
# scaled in place first -------------------------------------------------------------------------------------------


@gk.kernel
def syrk_kernel(alpha, beta, a, c, n, m):
    i, j = gk.tid()
    c[i * n + j] *= beta
    for k in range(m):
        c[i * n + j] += alpha * a[i * m + k] * a[j * m + k]


# ---- PolyBench/GPU 2DCONV (CUDA/2DCONV/2DConvolution.cu: Convolution2D_kernel): the nine constant weights
# c11 .. c33, a thread per pixel, those on the border returning without a write -------------------------------------


@gk.kernel
def conv2d_polybench(a, b, ni, nj):
    i, j = gk.tid()
    c11 = 0.2
    c21 = 0.5
    c31 = -0.8
    c12 = -0.3
    c22 = 0.6
    c32 = -0.9
    c13 = 0.4
    c23 = 0.7
    c33 = 0.10
    if i < ni - 1 and j < nj - 1 and i > 0 and j > 0:
        b[i * nj + j] = (c11 * a[(i - 1) * nj + (j - 1)] + c12 * a[i * nj + (j - 1)]
                         + c13 * a[(i + 1) * nj + (j - 1)] + c21 * a[(i - 1) * nj + j] + c22 * a[i * nj + j]
                         + c23 * a[(i + 1) * nj + j] + c31 * a[(i - 1) * nj + (j + 1)]
                         + c32 * a[i * nj + (j + 1)] + c33 * a[(i + 1) * nj + (j + 1)])


# ---- PolyBench/C 4.2 jacobi-1d (stencils/jacobi-1d/jacobi-1d.c): B from A, then A from B, `tsteps` times; a launch
# per sweep over the interior -----------------------------------------------------------------------------------


@gk.kernel
def jacobi1d_sweep(src, dst):
    i = gk.tid() + 1
    dst[i] = 0.33333 * (src[i - 1] + src[i] + src[i + 1])


def jacobi_1d(a, b, tsteps, backend=None):
    n = a.shape[0]
    for _ in range(tsteps):
        gk.launch(jacobi1d_sweep, n - 2, a, b, backend=backend)
        gk.launch(jacobi1d_sweep, n - 2, b, a, backend=backend)


# ---- PolyBench/C 4.2 cholesky (linear-algebra/solvers/cholesky/cholesky.c): the lower triangle of A replaced by
# its Cholesky factor in place, row by row; one thread --------------------------------------------------------


@gk.kernel
def cholesky(a):
    n = a.shape[0]
    for i in range(n):
        for j in range(i):
            for k in range(j):
                a[i, j] -= a[i, k] * a[j, k]
            a[i, j] /= a[j, j]
        for k in range(i):
            a[i, i] -= a[i, k] * a[i, k]
        a[i, i] = math.sqrt(a[i, i])


# ---- PENNANT (lanl/PENNANT src/Mesh.cc: Mesh::calcCtrs, Mesh::calcVols), the points' x and y as two arrays: each
# side's edge centre, its first point added into its zone's centre (then divided by the zone's point count), its
# triangle's area and volume (rz geometry: the area times the mean radius) added into its zone -----------------


@gk.kernel
def pennant_side_ctrs(px, py, ex, ey, zx, zy, mapsp1, mapsp2, mapsz):
    s = gk.tid()
    p1 = mapsp1[s]
    p2 = mapsp2[s]
    z = mapsz[s]
    ex[s] = 0.5 * (px[p1] + px[p2])
    ey[s] = 0.5 * (py[p1] + py[p2])
    gk.atomic_add(zx, z, px[p1])
    gk.atomic_add(zy, z, py[p1])


@gk.kernel
def pennant_zone_ctrs(zx, zy, znump):
    z = gk.tid()
    zx[z] /= znump[z]
    zy[z] /= znump[z]


@gk.kernel
def pennant_side_vols(px, py, zx, zy, sarea, svol, zarea, zvol, mapsp1, mapsp2, mapsz):
    s = gk.tid()
    third = 1.0 / 3.0
    p1 = mapsp1[s]
    p2 = mapsp2[s]
    z = mapsz[s]
    sa = 0.5 * ((px[p2] - px[p1]) * (zy[z] - py[p1]) - (py[p2] - py[p1]) * (zx[z] - px[p1]))
    sv = third * sa * (px[p1] + px[p2] + zx[z])
    sarea[s] = sa
    svol[s] = sv
    gk.atomic_add(zarea, z, sa)
    gk.atomic_add(zvol, z, sv)


def pennant_ctrs_vols(px, py, ex, ey, zx, zy, sarea, svol, zarea, zvol, mapsp1, mapsp2, mapsz, znump,
                      backend=None):
    nsides, nzones = mapsz.shape[0], znump.shape[0]
    gk.launch(pennant_side_ctrs, nsides, px, py, ex, ey, zx, zy, mapsp1, mapsp2, mapsz, backend=backend)
    gk.launch(pennant_zone_ctrs, nzones, zx, zy, znump, backend=backend)
    gk.launch(pennant_side_vols, nsides, px, py, zx, zy, sarea, svol, zarea, zvol, mapsp1, mapsp2, mapsz,
              backend=backend)
