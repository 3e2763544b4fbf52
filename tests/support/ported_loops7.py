"""A seventh round of third-party host loops ported as programs (session 54; docs/programs.md, "Ported host loops"),
part 1: the Parallel Research Kernels' iteration loops (synch_p2p's wavefront with the corner fed back, stencil's
`in += 1.0` between sweeps, nstream, transpose on a transposed view), Parboil's stencil driver with its swap of
names, and PolyBench's floyd-warshall k loop over ping-pong buffers. Written here from the algorithms, as a user
porting the C/C++ driver writes it: a kernel per loop body, swaps by name, the host's scalars as plain numbers.
Used by tests/program/test_ported_loops7.py. Factories taking `loop(step, nsteps)` run a plain loop or a
checkpointed one."""

import numpy as np

import gradkern as gk


# -- PRK synch_p2p (Parallel Research Kernels, SYNCH_P2P/p2p.c: per iteration the pipelined sweep
# `vector[i][j] = vector[i-1][j] + vector[i][j-1] - vector[i-1][j-1]`, then `vector[0][0] = -vector[m-1][n-1]`, the
# corner fed back so the next iteration depends on this one): the sweep a launch per anti-diagonal i + j = d from
# the host, the corner a one-thread kernel (p2p_host_corner is the C's assignment in NumPy) ---------------------
@gk.kernel
def p2p_diagonal(a, i0, d):
    i = gk.tid() + i0
    j = d - i
    a[i, j] = a[i - 1, j] + a[i, j - 1] - a[i - 1, j - 1]


@gk.kernel
def p2p_corner(a):
    a[0, 0] = -a[a.shape[0] - 1, a.shape[1] - 1]


def _p2p_sweep(a):
    m, n = a.shape
    for d in range(2, m + n - 1):
        i0, i1 = max(1, d - n + 1), min(m - 1, d - 1)
        gk.launch(p2p_diagonal, i1 - i0 + 1, a, i0, d)


def prk_p2p(loop):
    def program(a):
        def iteration(t):
            _p2p_sweep(a)
            gk.launch(p2p_corner, 1, a)
        loop(iteration, 3)
    return program


def p2p_host_corner(a):
    """The corner as p2p.c writes it, a NumPy assignment into the launched array."""
    for _ in range(2):
        _p2p_sweep(a)
        a[0, 0] = -a[-1, -1]


# -- PRK stencil (STENCIL/stencil.c, radius 2 star: `out[i][j] += sum of weight[ii][jj] * in[...]` over the interior
# `RADIUS..n-RADIUS`, then `in[i][j] += 1.0` everywhere "to force refresh of neighbour data", `iterations` times);
# the weights `1 / (2 j R)` times an Active scale (host arithmetic), the add-one a kernel (prk_stencil_host_add is
# the C's loop as NumPy's `in_ += 1.0`) -------------------------------------------------------------------------
@gk.kernel
def prk_star(inp, out, w1, w2):
    i, j = gk.tid()
    i += 2
    j += 2
    out[i, j] = out[i, j] + w1 * (inp[i, j + 1] - inp[i, j - 1] + inp[i + 1, j] - inp[i - 1, j]) \
        + w2 * (inp[i, j + 2] - inp[i, j - 2] + inp[i + 2, j] - inp[i - 2, j])


@gk.kernel
def prk_add_one(a):
    i, j = gk.tid()
    a[i, j] = a[i, j] + 1.0


def prk_stencil(loop, radius=2):
    def program(inp, out, scale):
        n = inp.shape[0]
        w1, w2 = scale / (2.0 * 1 * radius), scale / (2.0 * 2 * radius)  # Active scalar arithmetic

        def iteration(t):
            gk.launch(prk_star, (n - 2 * radius, n - 2 * radius), inp, out, w1, w2)
            gk.launch(prk_add_one, inp.shape, inp)
        loop(iteration, 3)
    return program


def prk_stencil_host_add(inp, out, scale):
    """The add-one as PRK's Python port writes it, `in_ += 1.0` in NumPy."""
    n = inp.shape[0]
    for _ in range(2):
        gk.launch(prk_star, (n - 4, n - 4), inp, out, scale / 4.0, scale / 8.0)
        inp += 1.0


# -- PRK nstream (NSTREAM/nstream.c: `for iter: a[j] += b[j] + scalar * c[j]`), the scalar Active --------------
@gk.kernel
def prk_triad(a, b, c, scalar):
    j = gk.tid()
    a[j] = a[j] + b[j] + scalar * c[j]


def prk_nstream(loop):
    def program(a, b, c, scalar):
        loop(lambda t: gk.launch(prk_triad, a.shape[0], a, b, c, scalar), 4)
    return program


# -- PRK transpose (TRANSPOSE/transpose.c: `for iter: B[i][j] += A[j][i]; A[j][i] += 1.0`): the kernel launched on
# the transposed view `A.T`, so its thread (i, j) reads A[j, i]; A's add-one after it ---------------------------
@gk.kernel
def prk_accumulate(at, b, scale):
    i, j = gk.tid()
    b[i, j] = b[i, j] + scale * at[i, j] * at[i, j]


def prk_transpose(loop):
    """B += scale A^T o A^T (squared, so the loop is not linear in A), A += 1; the scale Active."""
    def program(a, b, scale):
        def iteration(t):
            gk.launch(prk_accumulate, b.shape, a.T, b, scale)
            gk.launch(prk_add_one, a.shape, a)
        loop(iteration, 3)
    return program


# -- Parboil stencil (stencil/src/cuda/main.cu: `cudaMemcpy(d_A0, h_A0)`, `cudaMemcpy(d_Anext, h_A0)` (the boundary
# in both), then `for t < iteration: block2D_hybrid_coarsen_x(c0, c1, d_A0, d_Anext); swap(d_A0, d_Anext)`, the
# result read back from d_A0): a 3-D seven-point step, `Anext = A0.copy()` on the host, the swap of names and the
# copy back into the argument after an odd count; c0 Active, c1 = c0 / 6 host arithmetic ----------------------
@gk.kernel
def parboil_7pt(a0, anext, c0, c1):
    i, j, k = gk.tid()
    i += 1
    j += 1
    k += 1
    anext[i, j, k] = c1 * (a0[i - 1, j, k] + a0[i + 1, j, k] + a0[i, j - 1, k] + a0[i, j + 1, k] + a0[i, j, k - 1]
                           + a0[i, j, k + 1]) - c0 * a0[i, j, k]


def parboil_stencil(iterations=3):
    def program(a0, c0):
        inner = tuple(s - 2 for s in a0.shape)
        c1 = c0 / 6.0
        cur, nxt = a0, a0.copy()
        for _ in range(iterations):
            gk.launch(parboil_7pt, inner, cur, nxt, c0, c1)
            cur, nxt = nxt, cur
        if cur is not a0:
            gk.copy(a0, cur)
    return program


def parboil_stencil_parity(loop, iterations=3):
    """The checkpointable spelling: the buffers chosen from t's parity, both made before the loop."""
    def program(a0, c0):
        inner = tuple(s - 2 for s in a0.shape)
        bufs = (a0, a0.copy())

        def step(t):
            gk.launch(parboil_7pt, inner, bufs[t % 2], bufs[(t + 1) % 2], c0, c0 / 6.0)
        loop(step, iterations)
        if iterations % 2:
            gk.copy(a0, bufs[1])
    return program


# -- PolyBench/C 4.2 medley/floyd-warshall (`for k: for i: for j: path[i][j] = path[i][j] < path[i][k] +
# path[k][j] ? path[i][j] : path[i][k] + path[k][j]`), as a GPU port launches it: a launch per k over (i, j); in place
# the launch reads row and column k while threads write them, so the port ping-pongs two buffers by k's parity and
# copies back after an odd count; every edge's weight shifted by the Active c ---------------------------------
@gk.kernel
def fw_relax(src, dst, k, c):
    i, j = gk.tid()
    via = src[i, k] + src[k, j] + c
    dst[i, j] = min(src[i, j], via)


@gk.kernel
def fw_in_place(path, k, c):
    i, j = gk.tid()
    path[i, j] = min(path[i, j], path[i, k] + path[k, j] + c)


def floyd_warshall(loop):
    def program(path, c):
        n = path.shape[0]
        bufs = (path, np.zeros_like(path))

        def step(k):
            gk.launch(fw_relax, (n, n), bufs[k % 2], bufs[(k + 1) % 2], k, c)
        loop(step, n)
        if n % 2:
            gk.copy(path, bufs[1])
    return program


def floyd_warshall_in_place(path, c):
    """PolyBench's loop nest as it stands, a launch per k updating `path` in place."""
    n = path.shape[0]
    for k in range(n):
        gk.launch(fw_in_place, (n, n), path, k, c)
