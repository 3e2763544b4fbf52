"""A sixth round of third-party host loops ported as programs (session 53; docs/programs.md, "Ported host loops"),
part 1: factorisations and wavefronts whose host loop walks blocks, pivots or anti-diagonals (Rodinia's lud and
gaussian, Rodinia's nw), a parallel cyclic reduction whose stride doubles each step, and drivers whose loop stops on
a value a kernel computed (NVIDIA's single-GPU Jacobi with its norm checked every few iterations, TeaLeaf's CG).
Written here from the algorithms, as a user porting the C/C++/Fortran driver writes it: a kernel per loop body, one-
element arrays for the host scalars a later launch reads, plain comparisons where the host only decides. Used by
tests/program/test_ported_loops6.py. Factories taking `loop(step, nsteps)` run a plain loop or a checkpointed one."""

import numpy as np

import gradkern as gk


# -- Rodinia 3.1 lud (cuda/lud_kernel.cu: the host's `for (i = 0; i < matrix_dim - BLOCK_SIZE; i += BLOCK_SIZE)`
# calling lud_diagonal, lud_perimeter and lud_internal, then lud_diagonal on the last block): blocked LU in place,
# each kernel on views of the one matrix (the diagonal block, the row strip right of it, the column strip below it,
# the trailing block), all shrinking with the block offset ---------------------------------------------------------
@gk.kernel
def lud_diagonal(d):
    """One thread: Doolittle's LU of the block in place (lud_diagonal's shared-memory loop, serially)."""
    bs = d.shape[0]
    for i in range(bs):
        for j in range(i, bs):
            for k in range(i):
                d[i, j] = d[i, j] - d[i, k] * d[k, j]
        for j in range(i + 1, bs):
            for k in range(i):
                d[j, i] = d[j, i] - d[j, k] * d[k, i]
            d[j, i] = d[j, i] / d[i, i]


@gk.kernel
def lud_perimeter_row(d, row):
    """A thread a column of the row strip: L^-1 of the diagonal block applied (unit lower triangle)."""
    c = gk.tid()
    for i in range(1, d.shape[0]):
        for k in range(i):
            row[i, c] = row[i, c] - d[i, k] * row[k, c]


@gk.kernel
def lud_perimeter_col(d, col):
    """A thread a row of the column strip: U^-1 of the diagonal block applied from the right."""
    r = gk.tid()
    for i in range(d.shape[0]):
        for k in range(i):
            col[r, i] = col[r, i] - col[r, k] * d[k, i]
        col[r, i] = col[r, i] / d[i, i]


@gk.kernel
def lud_internal(row, col, inner):
    i, j = gk.tid()
    s = 0.0
    for k in range(row.shape[0]):
        s += col[i, k] * row[k, j]
    inner[i, j] = inner[i, j] - s


def lud(loop, bs=2):
    def program(A):
        n = A.shape[0]

        def block(t):
            o, e = t * bs, t * bs + bs
            gk.launch(lud_diagonal, 1, A[o:e, o:e])
            gk.launch(lud_perimeter_row, n - e, A[o:e, o:e], A[o:e, e:])
            gk.launch(lud_perimeter_col, n - e, A[o:e, o:e], A[e:, o:e])
            gk.launch(lud_internal, (n - e, n - e), A[o:e, e:], A[e:, o:e], A[e:, e:])
        loop(block, n // bs - 1)
        gk.launch(lud_diagonal, 1, A[n - bs:, n - bs:])
    return program


# -- Rodinia 3.1 gaussian (cuda/gaussian.cu: ForwardSub's `for (t = 0; t < Size - 1; t++) { Fan1; Fan2; }`, then
# BackSub on the host): Fan1 the multipliers of column t, Fan2 the trailing update of a and b; the back substitution
# the host does in C is a one-thread kernel here (gaussian_host_backsub is the C's loop in NumPy) ----------------
@gk.kernel
def gauss_fan1(m, a, t):
    i = gk.tid() + t + 1
    m[i, t] = a[i, t] / a[t, t]


@gk.kernel
def gauss_fan2(m, a, b, t):
    i, j = gk.tid()
    i += t + 1
    j += t
    a[i, j] = a[i, j] - m[i, t] * a[t, j]
    if j == t:
        b[i] = b[i] - m[i, t] * b[t]


@gk.kernel
def gauss_backsub(a, b, x):
    n = b.shape[0]
    for r in range(n):
        i = n - 1 - r
        s = b[i]
        for j in range(i + 1, n):
            s -= a[i, j] * x[j]
        x[i] = s / a[i, i]


def gaussian(loop):
    def program(a, b, x):
        n = b.shape[0]
        m = np.zeros_like(a)

        def forward(t):
            gk.launch(gauss_fan1, n - 1 - t, m, a, t)
            gk.launch(gauss_fan2, (n - 1 - t, n - t), m, a, b, t)
        loop(forward, n - 1)
        gk.launch(gauss_backsub, 1, a, b, x)
    return program


def gaussian_host_backsub(a, b, x):
    """BackSub as the C writes it, in NumPy on the host after the kernels."""
    n = b.shape[0]
    m = np.zeros_like(a)
    for t in range(n - 1):
        gk.launch(gauss_fan1, n - 1 - t, m, a, t)
        gk.launch(gauss_fan2, (n - 1 - t, n - t), m, a, b, t)
    final = np.zeros_like(b)
    for i in range(n):
        final[n - i - 1] = b[n - i - 1]
        for j in range(i):
            final[n - i - 1] -= a[n - i - 1, n - j - 1] * final[n - j - 1]
        final[n - i - 1] = final[n - i - 1] / a[n - i - 1, n - i - 1]
    gk.copy(x, final)


# -- Rodinia 3.1 nw (cuda/needle.cu: the host's two loops over block anti-diagonals, growing then shrinking, each a
# launch of needle_cuda_shared_1 / _2), at a cell a thread: score[i, j] = max(score[i-1, j-1] + ref[i, j],
# score[i-1, j] - penalty, score[i, j-1] - penalty) on the anti-diagonal i + j = d; the gap penalty Active ---------
@gk.kernel
def nw_diagonal(score, ref, penalty, i0, d):
    t = gk.tid()
    i = i0 + t
    j = d - i
    score[i, j] = max(score[i - 1, j - 1] + ref[i, j], max(score[i - 1, j] - penalty, score[i, j - 1] - penalty))


def nw(score, ref, penalty):
    """score's first row and column hold the gaps (initialised by the caller, as needle.cpp does)."""
    n = score.shape[0] - 1
    for d in range(2, n + 2):  # the upper-left triangle: diagonals growing
        gk.launch(nw_diagonal, d - 1, score, ref, penalty, 1, d)
    for d in range(n + 2, 2 * n + 1):  # the lower-right triangle: shrinking
        gk.launch(nw_diagonal, 2 * n + 1 - d, score, ref, penalty, d - n, d)


# -- parallel cyclic reduction (Zhang, Cohen and Owens, "Fast tridiagonal solvers on the GPU", PPoPP 2010: PCR's
# log2(n) steps, the stride doubling each step, every equation reduced against its neighbours at +-stride; then
# x = d / b): the four coefficient arrays ping-pong between two sets; the diagonal shift sigma Active -------------
@gk.kernel
def pcr_shift(b, sigma):
    i = gk.tid()
    b[i] = b[i] + sigma


@gk.kernel
def pcr_step(a, b, c, d, a2, b2, c2, d2, stride):
    i = gk.tid()
    n = b.shape[0]
    k1 = 0.0
    k2 = 0.0
    na = 0.0
    nc = 0.0
    nb = b[i]
    nd = d[i]
    if i - stride >= 0:
        k1 = a[i] / b[i - stride]
        na = -a[i - stride] * k1
        nb = nb - c[i - stride] * k1
        nd = nd - d[i - stride] * k1
    if i + stride < n:
        k2 = c[i] / b[i + stride]
        nc = -c[i + stride] * k2
        nb = nb - a[i + stride] * k2
        nd = nd - d[i + stride] * k2
    a2[i] = na
    b2[i] = nb
    c2[i] = nc
    d2[i] = nd


@gk.kernel
def pcr_solve(b, d, x):
    i = gk.tid()
    x[i] = d[i] / b[i]


def pcr(loop):
    def program(a, b, c, d, x, sigma):
        n = b.shape[0]
        sets = [(a, b, c, d), tuple(np.zeros_like(b) for _ in range(4))]
        gk.launch(pcr_shift, n, b, sigma)
        nsteps = int(np.ceil(np.log2(n)))

        def step(t):
            cur, nxt = sets[t % 2], sets[(t + 1) % 2]
            gk.launch(pcr_step, n, *cur, *nxt, 2 ** t)
        loop(step, nsteps)
        last = sets[nsteps % 2]
        gk.launch(pcr_solve, n, last[1], last[3], x)
    return program


def pcr_swapped(a, b, c, d, x, sigma):
    """The swap as a port writes it: `cur, nxt = nxt, cur` and `stride *= 2` in a while loop."""
    n = b.shape[0]
    cur, nxt = (a, b, c, d), tuple(np.zeros_like(b) for _ in range(4))
    gk.launch(pcr_shift, n, b, sigma)
    stride = 1
    while stride < n:
        gk.launch(pcr_step, n, *cur, *nxt, stride)
        cur, nxt = nxt, cur
        stride *= 2
    gk.launch(pcr_solve, n, cur[1], cur[3], x)


# -- NVIDIA multi-gpu-programming-models (single_gpu/jacobi.cu: `while (l2_norm > tol && iter < iter_max)`, the norm
# zeroed by cudaMemsetAsync, summed by jacobi_kernel only when `calculate_norm = (iter % nccheck) == 0`, the
# periodic top and bottom rows copied with cudaMemcpyAsync, `std::swap(a_new, a)`, the result copied back):
# Dirichlet left and right columns as the caller set them; the relaxation weight w Active ------------------------
@gk.kernel
def nv_jacobi(a_new, a, l2, w, calculate_norm):
    iy, ix = gk.tid()
    iy += 1
    ix += 1
    v = (1.0 - w) * a[iy, ix] + w * 0.25 * (a[iy, ix + 1] + a[iy, ix - 1] + a[iy + 1, ix] + a[iy - 1, ix])
    a_new[iy, ix] = v
    if calculate_norm == 1:
        r = v - a[iy, ix]
        gk.atomic_add(l2, 0, r * r)


def nv_jacobi_loop(tol, iter_max=12, nccheck=3, checked=None):
    def program(a, a_new, w):
        ny, nx = a.shape
        l2 = np.zeros_like(a, shape=(1,))
        cur, new = a, a_new
        l2_norm, it = 1.0, 0
        while l2_norm > tol and it < iter_max:
            gk.fill(l2, 0.0)
            calculate_norm = it % nccheck == 0
            gk.launch(nv_jacobi, (ny - 2, nx - 2), new, cur, l2, w, 1 if calculate_norm else 0)
            gk.copy(new[0, 1:-1], new[-2, 1:-1])  # the periodic halo rows
            gk.copy(new[-1, 1:-1], new[1, 1:-1])
            if calculate_norm:
                l2_norm = np.sqrt(l2[0])  # a derived scalar, compared only
                if checked is not None:
                    checked.append(it)
            it += 1
            cur, new = new, cur
        if cur is not a:
            gk.copy(a, cur)
    return program


# -- TeaLeaf 1.0 CG (tea_leaf_cg.f90: tea_leaf_cg_init_kernel, _calc_w, _calc_ur, _calc_p; tea_solve.f90's loop:
# `alpha = rro / pw`, `beta = rrn / rro`, `rro = rrn`, `IF (ABS(error) < eps * initial_residual) EXIT`), 2-D five-
# point with face coefficients Kx, Ky from the density (tea_leaf_common's `Kx = (w(j-1) + w(j)) / (2 w(j-1) w(j))`,
# times rx): alpha and beta divided in the kernels from one-element arrays, `rro = rrn` a gk.copy; rx Active ------
@gk.kernel
def tl_coefficients(density, kx, ky, rx):
    k, j = gk.tid()
    k += 1
    j += 1
    kx[k, j] = rx * (density[k, j - 1] + density[k, j]) / (2.0 * density[k, j - 1] * density[k, j])
    ky[k, j] = rx * (density[k - 1, j] + density[k, j]) / (2.0 * density[k - 1, j] * density[k, j])


@gk.func
def tl_apply(v, kx, ky, k, j):
    diag = 1.0 + kx[k, j + 1] + kx[k, j] + ky[k + 1, j] + ky[k, j]
    return (diag * v[k, j] - kx[k, j + 1] * v[k, j + 1] - kx[k, j] * v[k, j - 1] - ky[k + 1, j] * v[k + 1, j]
            - ky[k, j] * v[k - 1, j])


@gk.kernel
def tl_init(u, u0, r, p, kx, ky, rro):
    k, j = gk.tid()
    k += 1
    j += 1
    res = u0[k, j] - tl_apply(u, kx, ky, k, j)
    r[k, j] = res
    p[k, j] = res
    gk.atomic_add(rro, 0, res * res)


@gk.kernel
def tl_calc_w(p, w, kx, ky, pw):
    k, j = gk.tid()
    k += 1
    j += 1
    wv = tl_apply(p, kx, ky, k, j)
    w[k, j] = wv
    gk.atomic_add(pw, 0, p[k, j] * wv)


@gk.kernel
def tl_calc_ur(u, r, p, w, rro, pw, rrn):
    k, j = gk.tid()
    k += 1
    j += 1
    alpha = rro[0] / pw[0]
    u[k, j] = u[k, j] + alpha * p[k, j]
    rv = r[k, j] - alpha * w[k, j]
    r[k, j] = rv
    gk.atomic_add(rrn, 0, rv * rv)


@gk.kernel
def tl_calc_p(p, r, rro, rrn):
    k, j = gk.tid()
    k += 1
    j += 1
    p[k, j] = r[k, j] + rrn[0] / rro[0] * p[k, j]


def tl_cg_iteration(inner, u, r, p, w, kx, ky, rro, pw, rrn):
    """tea_leaf_cg_calc_w, _calc_ur, _calc_p: one CG iteration (TeaLeaf's PPCG presteps too, ported_loops9.py)."""
    gk.fill(pw, 0.0)
    gk.launch(tl_calc_w, inner, p, w, kx, ky, pw)
    gk.fill(rrn, 0.0)
    gk.launch(tl_calc_ur, inner, u, r, p, w, rro, pw, rrn)
    gk.launch(tl_calc_p, inner, p, r, rro, rrn)


def tealeaf_cg(eps=1e-3, max_iters=10, iterations=None):
    def program(u, density, rx):
        ny, nx = u.shape[0] - 2, u.shape[1] - 2
        inner = (ny, nx)
        u0 = u.copy()  # tea_leaf's u0 = u (the energy times density, here the state itself)
        kx, ky, r, p, w = (np.zeros_like(u) for _ in range(5))
        rro, pw, rrn = (np.zeros_like(u, shape=(1,)) for _ in range(3))
        gk.launch(tl_coefficients, inner, density, kx, ky, rx)
        gk.launch(tl_init, inner, u, u0, r, p, kx, ky, rro)
        initial_residual = np.sqrt(abs(rro[0]))  # a derived scalar, compared only
        for n in range(max_iters):
            tl_cg_iteration(inner, u, r, p, w, kx, ky, rro, pw, rrn)
            error = rrn[0]
            gk.copy(rro, rrn)
            if np.sqrt(abs(error)) < eps * initial_residual:
                break
        if iterations is not None:
            iterations.append(n + 1)
    return program
