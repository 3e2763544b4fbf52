"""A third round of third-party host loops ported as programs (session 50; docs/programs.md, "Ported host
loops"), part 1: PolyBench's linear algebra and medley/deriche, written as a user porting the C/CUDA host code
writes it (a kernel per loop body, the host loop launching them over views that shrink with k, one-element arrays
for the C's host scalars), and the spellings such a user writes first. Written here from the algorithms; used by
tests/program/test_ported_loops3.py (part 2, the applications: ported_loops3_apps.py). Each factory takes
`loop(step, nsteps)`: a plain loop or a checkpointed one."""

import math

import numpy as np

import gradkern as gk


# -- PolyBench/C 4.2 linear-algebra/solvers/gramschmidt (kernel_gramschmidt), as PolyBench/GPU's gramschmidt.cu
# splits it: per column k, the norm (one thread), the scaled column, then each later column's projection and
# update (a thread a column); the views A[:, k], R[k, k + 1:] and A[:, k + 1:] shrink with k --------------------
@gk.kernel
def gs_norm(a_col, r_kk):
    nrm = 0.0
    for i in range(a_col.shape[0]):
        nrm += a_col[i] * a_col[i]
    r_kk[0] = math.sqrt(nrm)


@gk.kernel
def gs_scale(a_col, q_col, r_kk):
    i = gk.tid()
    q_col[i] = a_col[i] / r_kk[0]


@gk.kernel
def gs_project(q_col, a_rest, r_row):
    j = gk.tid()
    s = 0.0
    for i in range(q_col.shape[0]):
        s += q_col[i] * a_rest[i, j]
    r_row[j] = s
    for i in range(q_col.shape[0]):
        a_rest[i, j] = a_rest[i, j] - q_col[i] * s


def gramschmidt(loop):
    def program(A, R, Q):
        m, n = A.shape

        def column(k):
            gk.launch(gs_norm, 1, A[:, k], R[k, k:k + 1])
            gk.launch(gs_scale, m, A[:, k], Q[:, k], R[k, k:k + 1])
            if k + 1 < n:
                gk.launch(gs_project, n - k - 1, Q[:, k], A[:, k + 1:], R[k, k + 1:])
        loop(column, n)
    return program


# -- PolyBench/GPU 1.0 linear-algebra/lu (lu.cu: lu_kernel1 scales row k, lu_kernel2 updates the trailing block;
# the host's `for k` passes k): run-time k in the kernels, the whole matrix every launch ---------------------------
@gk.kernel
def lu_scale_row(A, k):
    j = gk.tid() + k + 1
    A[k, j] = A[k, j] / A[k, k]


@gk.kernel
def lu_update(A, k):
    i, j = gk.tid()
    i += k + 1
    j += k + 1
    A[i, j] = A[i, j] - A[i, k] * A[k, j]


def lu(loop):
    def program(A):
        n = A.shape[0]

        def pivot(k):
            gk.launch(lu_scale_row, n - k - 1, A, k)
            gk.launch(lu_update, (n - k - 1, n - k - 1), A, k)
        loop(pivot, n - 1)
    return program


# -- PolyBench/C 4.2 linear-algebra/solvers/cholesky, right-looking as a GPU port runs it: per k, the pivot's square
# root, the column below it scaled, the trailing lower triangle updated; views A[k, k:k+1], A[k+1:, k],
# A[k+1:, k+1:] of one array, shrinking with k ----------------------------------------------------------------------
@gk.kernel
def chol_pivot(d):
    d[0] = math.sqrt(d[0])


@gk.kernel
def chol_column(col, d):
    i = gk.tid()
    col[i] = col[i] / d[0]


@gk.kernel
def chol_trailing(T, col):
    i, j = gk.tid()
    if j <= i:
        T[i, j] = T[i, j] - col[i] * col[j]


def cholesky(loop):
    def program(A):
        n = A.shape[0]

        def pivot(k):
            gk.launch(chol_pivot, 1, A[k, k:k + 1])
            if k + 1 < n:
                gk.launch(chol_column, n - k - 1, A[k + 1:, k], A[k, k:k + 1])
                gk.launch(chol_trailing, (n - k - 1, n - k - 1), A[k + 1:, k + 1:], A[k + 1:, k])
        loop(pivot, n)
    return program


# -- PolyBench/C 4.2 linear-algebra/solvers/durbin (Levinson-Durbin): the C's host scalars alpha and beta live in a
# two-element array that one-thread kernels update; z[i] = y[i] + alpha * y[k-i-1]; y[:k] = z[:k]; y[k] = alpha ----
@gk.kernel
def durbin_init(r, y, ab):
    y[0] = -r[0]
    ab[0] = -r[0]
    ab[1] = 1.0


@gk.kernel
def durbin_alpha(r, y, ab, k):
    beta = (1.0 - ab[0] * ab[0]) * ab[1]
    s = 0.0
    for i in range(k):
        s += r[k - i - 1] * y[i]
    ab[0] = -(r[k] + s) / beta
    ab[1] = beta


@gk.kernel
def durbin_z(y, z, ab, k):
    i = gk.tid()
    z[i] = y[i] + ab[0] * y[k - i - 1]


def durbin(loop):
    def program(r, y):
        n = r.shape[0]
        z = np.zeros_like(y)
        ab = np.zeros_like(r, shape=(2,))  # alpha, beta
        gk.launch(durbin_init, 1, r, y, ab)

        def order(t):
            k = t + 1
            gk.launch(durbin_alpha, 1, r, y, ab, k)
            gk.launch(durbin_z, k, y, z, ab, k)
            gk.copy(y[:k], z[:k])
            gk.copy(y[k:k + 1], ab[0:1])
        loop(order, n - 1)
    return program


# -- PolyBench/C 4.2 medley/deriche: the coefficients from alpha (expf, powf), a causal and an anti-causal IIR pass
# along each row, summed, then the same along each column (the row kernel on transposed views); `passes` runs the
# filter again on its output (an image pipeline's repeated smoothing) ---------------------------------------------
@gk.kernel
def deriche_coefficients(coef, alpha):
    ea = math.exp(-alpha)
    k = (1.0 - ea) * (1.0 - ea) / (1.0 + 2.0 * alpha * ea - math.exp(2.0 * alpha))
    coef[0] = k  # a1 = a5
    coef[1] = k * ea * (alpha - 1.0)  # a2 = a6
    coef[2] = k * ea * (alpha + 1.0)  # a3 = a7
    coef[3] = -k * math.exp(-2.0 * alpha)  # a4 = a8
    coef[4] = 2.0 ** (-alpha)  # b1
    coef[5] = -math.exp(-2.0 * alpha)  # b2


@gk.kernel
def deriche_pass(img, y1, y2, coef):
    i = gk.tid()
    w = img.shape[1]
    xm1 = 0.0
    ym1 = 0.0
    ym2 = 0.0
    for j in range(w):
        y1[i, j] = coef[0] * img[i, j] + coef[1] * xm1 + coef[4] * ym1 + coef[5] * ym2
        xm1 = img[i, j]
        ym2 = ym1
        ym1 = y1[i, j]
    xp1 = 0.0
    xp2 = 0.0
    yp1 = 0.0
    yp2 = 0.0
    for jj in range(w):
        j = w - 1 - jj
        y2[i, j] = coef[2] * xp1 + coef[3] * xp2 + coef[4] * yp1 + coef[5] * yp2
        xp2 = xp1
        xp1 = img[i, j]
        yp2 = yp1
        yp1 = y2[i, j]


@gk.kernel
def deriche_sum(out, y1, y2, c):
    i, j = gk.tid()
    out[i, j] = c * (y1[i, j] + y2[i, j])


def deriche(loop):
    def program(img_in, img_out, alpha, passes):
        h, w = img_in.shape
        y1, y2 = np.zeros_like(img_in), np.zeros_like(img_in)
        coef = np.zeros_like(img_in, shape=(6,))
        gk.launch(deriche_coefficients, 1, coef, alpha)

        def one(t):
            gk.launch(deriche_pass, h, img_in, y1, y2, coef)
            gk.launch(deriche_sum, (h, w), img_out, y1, y2, 1.0)  # c1
            gk.launch(deriche_pass, w, img_out.T, y1.T, y2.T, coef)
            gk.launch(deriche_sum, (h, w), img_out, y1, y2, 1.0)  # c2
            gk.copy(img_in, img_out)  # the next pass filters this one's output
        loop(one, passes)
    return program


# -- the spellings a porting user writes first ----------------------------------------------------------------------
def deriche_numpy_exp(img_in, img_out, alpha, passes):
    """deriche.c's coefficients computed on the host as its C does, with NumPy's exp of the Active alpha (one-thread
    launches since session 57: program/hostreads.py); the coefficient written into img_out[0]."""
    ea = np.exp(-alpha)
    k = (1.0 - ea) * (1.0 - ea) / (1.0 + 2.0 * alpha * ea - np.exp(2.0 * alpha))
    gk.fill(img_out[0:1, 0], k)


def deriche_math_exp(img_in, img_out, alpha, passes):
    """The same with math.exp (the C's expf)."""
    ea = math.exp(-alpha)
    gk.fill(img_out[0:1, 0], ea)


@gk.kernel
def durbin_y_in_place(y, ab, k):
    i = gk.tid()
    y[i] = y[i] + ab[0] * y[k - i - 1]


def durbin_in_place(r, y):
    """durbin with z dropped: y updated in place (thread i reads y[k-i-1], which thread k-i-1 writes)."""
    n = r.shape[0]
    ab = np.zeros_like(r, shape=(2,))
    gk.launch(durbin_init, 1, r, y, ab)
    for k in range(1, n):
        gk.launch(durbin_alpha, 1, r, y, ab, k)
        gk.launch(durbin_y_in_place, k, y, ab, k)
        gk.copy(y[k:k + 1], ab[0:1])


@gk.kernel
def durbin_z_host_alpha(y, z, alpha, k):
    i = gk.tid()
    z[i] = y[i] + alpha * y[k - i - 1]


def durbin_host_scalars(r, y):
    """durbin.c's host scalars as a port first keeps them: alpha, beta and the sum computed with NumPy."""
    n = r.shape[0]
    z = np.zeros_like(y)
    gk.launch(durbin_init, 1, r, y, np.zeros_like(r, shape=(2,)))
    alpha, beta = -r[0], 1.0
    for k in range(1, n):
        beta = (1.0 - alpha * alpha) * beta
        alpha = -(r[k] + np.dot(r[k - 1::-1], y[:k])) / beta
        gk.launch(durbin_z_host_alpha, k, y, z, alpha, k)
        gk.copy(y[:k], z[:k])


def gramschmidt_host_norm(A, R, Q):
    """gramschmidt with the column norm on the host: `R[k][k] = sqrt(nrm)` written with NumPy."""
    m, n = A.shape
    for k in range(n):
        nrm = (A[:, k] * A[:, k]).sum()
        R[k, k] = np.sqrt(nrm)
        gk.launch(gs_scale, m, A[:, k], Q[:, k], R[k, k:k + 1])
        if k + 1 < n:
            gk.launch(gs_project, n - k - 1, Q[:, k], A[:, k + 1:], R[k, k + 1:])
