"""Kernels in the style of PolyBench and HPC codes (linear algebra, stencils,
solvers, particle and sparse updates), each differentiated in reverse mode and
checked by check_grad: float64 finite differences and the dot-product test.
These found a real bug (syrk: a loop's trip count clobbered a launch extent)."""

import math

import numpy as np
import pytest
from support.corpus import syrk

import gradkern as gk
from gradkern.testing import check_grad

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


@gk.kernel
def atax_tmp(A, x, tmp, n):
    i = gk.tid()
    s = 0.0
    for j in range(n):
        s += A[i, j] * x[j]
    tmp[i] = s

@gk.kernel
def atax_y(A, tmp, y, m):
    j = gk.tid()
    s = 0.0
    for i in range(m):
        s += A[i, j] * tmp[i]
    y[j] = s

@gk.kernel
def gesummv(A, B, x, y, alpha, beta, n):
    i = gk.tid()
    t = 0.0
    s = 0.0
    for j in range(n):
        t += A[i, j] * x[j]
        s += B[i, j] * x[j]
    y[i] = alpha * t + beta * s

@gk.kernel
def jacobi2d(A, B):
    i, j = gk.tid()
    if 0 < i < A.shape[0] - 1 and 0 < j < A.shape[1] - 1:
        B[i, j] = 0.2 * (A[i, j] + A[i, j - 1] + A[i, j + 1] + A[i + 1, j] + A[i - 1, j])

@gk.kernel
def fdtd_ey(ey, hz, t):
    i, j = gk.tid()
    if i == 0:
        ey[0, j] = float(t)
    else:
        ey[i, j] = ey[i, j] - 0.5 * (hz[i, j] - hz[i - 1, j])

@gk.kernel
def heat3d(A, B):
    i, j, k = gk.tid()
    if 0 < i < A.shape[0] - 1 and 0 < j < A.shape[1] - 1 and 0 < k < A.shape[2] - 1:
        B[i, j, k] = (0.125 * (A[i + 1, j, k] - 2.0 * A[i, j, k] + A[i - 1, j, k])
                      + 0.125 * (A[i, j + 1, k] - 2.0 * A[i, j, k] + A[i, j - 1, k])
                      + 0.125 * (A[i, j, k + 1] - 2.0 * A[i, j, k] + A[i, j, k - 1]) + A[i, j, k])

@gk.kernel
def covariance_mean(data, mean, n, m):
    j = gk.tid()
    if j < m:
        s = 0.0
        for i in range(n):
            s += data[i * m + j]
        mean[j] = s / n

@gk.kernel
def trisolv(L, x, b, n):
    # sequential: one thread does it all
    for i in range(n):
        s = b[i]
        for j in range(i):
            s -= L[i, j] * x[j]
        x[i] = s / L[i, i]

@gk.kernel
def softmax_rows(X, Y, m):
    i = gk.tid()
    mx = X[i, 0]
    for j in range(1, m):
        mx = max(mx, X[i, j])
    z = 0.0
    for j in range(m):
        z += math.exp(X[i, j] - mx)
    for j in range(m):
        Y[i, j] = math.exp(X[i, j] - mx) / z

@gk.kernel
def lud_col(A, k, n):
    i = gk.tid()
    if i > k and i < n:
        A[i, k] = A[i, k] / A[k, k]

@gk.kernel
def particle_push(x, v, f, dt, n):
    p = gk.tid()
    if p < n:
        vn = v[p] + dt * f[p] * math.cos(x[p])
        v[p] = vn
        x[p] = x[p] + dt * vn

@gk.kernel
def spmv_csr(rowptr, col, val, x, y):
    i = gk.tid()
    s = 0.0
    for k in range(rowptr[i], rowptr[i + 1]):
        s += val[k] * x[col[k]]
    y[i] = s

@gk.func
def smooth_relu(v, k):
    if v > 0.0:
        return v + math.log(1.0 + math.exp(-k * v)) / k
    return math.log(1.0 + math.exp(k * v)) / k

@gk.kernel
def mlp_layer(W, x, b, y, n, k):
    i = gk.tid()
    s = b[i]
    for j in range(n):
        s += W[i, j] * x[j]
    y[i] = smooth_relu(s, k)

@gk.kernel
def nested_taped(x, out, n, m):
    i, j = gk.tid()
    s = x[i, j]
    for a in range(n):
        for b in range(a, m):
            s = math.sin(s) + 0.1 * s * b
    out[i, j] = s

@gk.kernel
def neg_step_2d(x, out, n):
    i, j = gk.tid()
    s = x[i, j]
    for k in range(n, 0, -1):
        s = s * s * 0.3 + 0.1 * k
    out[i, j] = s

@gk.kernel
def while_index(x, idx_out, y):
    i = gk.tid()
    k = 0
    while k < 3 and x[i] > 0.1 * k:
        k += 1
    y[i] = x[i] * k + x[i] ** 2

@gk.kernel
def volume_loop(u, out, m):
    i, j, k = gk.tid()
    acc = 0.0
    for q in range(m):
        acc += u[i, j, k] * math.cos(acc + q)
    out[i, j, k] = acc

@gk.kernel
def active_in_loop(x, y, c, n):
    i = gk.tid()
    s = x[i]
    for k in range(n):
        s = s + c * math.sin(s)
    y[i] = s

@gk.kernel
def inplace_2d(A, w):
    i, j = gk.tid()
    A[i, j] = A[i, j] * w + A[i, j] ** 2 * 0.1

@gk.kernel
def tri_solve_rows(L, B, X, n):
    # one thread per right-hand side column: forward substitution
    c = gk.tid()
    for i in range(n):
        s = B[i, c]
        for j in range(i):
            s -= L[i, j] * X[j, c]
        X[i, c] = s / L[i, i]

@gk.kernel
def select_min_max(x, y):
    i = gk.tid()
    a = x[i]
    y[i] = max(a * 2.0, 1.5) - min(a, 0.7) + (a * a if a > 1.0 else -a)

@gk.kernel
def strided_read(x, out):
    i = gk.tid()
    out[i] = x[2 * i] * x[2 * i + 1]



# A D2Q9 lattice-Boltzmann step (BGK collision, pull streaming on a periodic grid), 50 lines of straight-line
# code: issue 14.11 measured 118 s to the first launch of such a kernel; its gradient now compiles in seconds.
@gk.kernel
def d2q9_bgk(f, fn, omega, nx, ny):
    i, j = gk.tid()
    ip = (i + 1) % nx
    im = (i - 1 + nx) % nx
    jp = (j + 1) % ny
    jm = (j - 1 + ny) % ny
    f0 = f[0, i, j]
    f1 = f[1, im, j]
    f2 = f[2, i, jm]
    f3 = f[3, ip, j]
    f4 = f[4, i, jp]
    f5 = f[5, im, jm]
    f6 = f[6, ip, jm]
    f7 = f[7, ip, jp]
    f8 = f[8, im, jp]
    rho = f0 + f1 + f2 + f3 + f4 + f5 + f6 + f7 + f8
    ux = (f1 - f3 + f5 - f6 - f7 + f8) / rho
    uy = (f2 - f4 + f5 + f6 - f7 - f8) / rho
    usq = 1.5 * (ux * ux + uy * uy)
    w0 = 4.0 / 9.0
    ws = 1.0 / 9.0
    wd = 1.0 / 36.0
    cu = 0.0
    feq = w0 * rho * (1.0 - usq)
    fn[0, i, j] = f0 + omega * (feq - f0)
    cu = 3.0 * ux
    feq = ws * rho * (1.0 + cu + 0.5 * cu * cu - usq)
    fn[1, i, j] = f1 + omega * (feq - f1)
    cu = 3.0 * uy
    feq = ws * rho * (1.0 + cu + 0.5 * cu * cu - usq)
    fn[2, i, j] = f2 + omega * (feq - f2)
    cu = -3.0 * ux
    feq = ws * rho * (1.0 + cu + 0.5 * cu * cu - usq)
    fn[3, i, j] = f3 + omega * (feq - f3)
    cu = -3.0 * uy
    feq = ws * rho * (1.0 + cu + 0.5 * cu * cu - usq)
    fn[4, i, j] = f4 + omega * (feq - f4)
    cu = 3.0 * (ux + uy)
    feq = wd * rho * (1.0 + cu + 0.5 * cu * cu - usq)
    fn[5, i, j] = f5 + omega * (feq - f5)
    cu = 3.0 * (-ux + uy)
    feq = wd * rho * (1.0 + cu + 0.5 * cu * cu - usq)
    fn[6, i, j] = f6 + omega * (feq - f6)
    cu = 3.0 * (-ux - uy)
    feq = wd * rho * (1.0 + cu + 0.5 * cu * cu - usq)
    fn[7, i, j] = f7 + omega * (feq - f7)
    cu = 3.0 * (ux - uy)
    feq = wd * rho * (1.0 + cu + 0.5 * cu * cu - usq)
    fn[8, i, j] = f8 + omega * (feq - f8)


def _cases(rng):
    R = lambda *s: rng.uniform(0.5, 1.5, s)  # noqa: E731
    D = lambda a: gk.Duplicated(a, np.zeros_like(a))  # noqa: E731
    return [
        ("atax_tmp", atax_tmp, (D(R(5, 4)), D(R(4)), D(R(5)), 4), 5),
        ("atax_y", atax_y, (D(R(5, 4)), D(R(5)), D(R(4)), 5), 4),
        ("gesummv", gesummv, (D(R(4, 4)), D(R(4, 4)), D(R(4)), D(R(4)), gk.Active(1.5), gk.Active(1.2), 4), 4),
        ("syrk", syrk, (D(R(4, 4)), D(R(4, 3)), gk.Active(1.5), gk.Active(1.2), 3), (4, 4)),
        ("jacobi2d", jacobi2d, (D(R(5, 6)), D(R(5, 6))), (5, 6)),
        ("fdtd_ey", fdtd_ey, (D(R(4, 5)), D(R(4, 5)), 3), (4, 5)),
        ("heat3d", heat3d, (D(R(4, 4, 5)), D(R(4, 4, 5))), (4, 4, 5)),
        ("covariance_mean", covariance_mean, (D(R(12)), D(R(4)), 3, 4), 6),
        ("trisolv", trisolv, (D(R(4, 4) + 3 * np.eye(4)), D(R(4)), D(R(4)), 4), 1),
        ("softmax_rows", softmax_rows, (D(R(3, 5)), D(R(3, 5)), 5), 3),
        ("lud_col", lud_col, (D(R(5, 5) + 4 * np.eye(5)), 1, 5), 6),
        ("particle_push", particle_push, (D(R(7)), D(R(7)), D(R(7)), gk.Active(0.1), 7), 9),
        ("spmv_csr", spmv_csr, (gk.Const(np.array([0, 2, 3, 5])), gk.Const(np.array([0, 2, 1, 0, 2])), D(R(5)),
                                D(R(3)), D(R(3))), 3),
        ("mlp_layer", mlp_layer, (D(R(4, 3)), D(R(3)), D(R(4)), D(R(4)), 3, 2.0), 4),
        ("nested_taped", nested_taped, (D(R(3, 2)), D(R(3, 2)), 3, 4), (3, 2)),
        ("neg_step_2d", neg_step_2d, (D(R(2, 3)), D(R(2, 3)), 4), (2, 3)),
        ("while_index", while_index, (D(R(6)), gk.Const(np.zeros(6)), D(R(6))), 6),
        ("volume_loop", volume_loop, (D(R(2, 3, 2)), D(R(2, 3, 2)), 3), (2, 3, 2)),
        ("active_in_loop", active_in_loop, (D(R(5)), D(R(5)), gk.Active(0.4), 4), 5),
        ("inplace_2d", inplace_2d, (D(R(3, 4)), gk.Active(0.8)), (3, 4)),
        ("tri_solve_rows", tri_solve_rows, (D(R(4, 4) + 3 * np.eye(4)), D(R(4, 3)), D(R(4, 3)), 4), 3),
        ("select_min_max", select_min_max, (D(rng.uniform(0.2, 2.0, 12)), D(R(12))), 12),
        ("strided_read", strided_read, (D(R(10)), D(R(5))), 5),
        ("d2q9_bgk", d2q9_bgk, (D(R(9, 5, 4) * 0.1), D(R(9, 5, 4)), gk.Active(1.2), 5, 4), (5, 4)),
    ]


NAMES = [c[0] for c in _cases(np.random.default_rng(0))]


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_hpc_kernel_gradient(name):
    _, kernel, args, dim = next(c for c in _cases(np.random.default_rng(5)) if c[0] == name)
    report = check_grad(kernel, *args, dim=dim)
    assert report.ok and report.checked > 5
