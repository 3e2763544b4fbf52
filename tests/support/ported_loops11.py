"""Round 11 of ported host loops (tests/program/test_ported_loops11.py; docs/programs.md, "Ported host loops",
session 58): solver drivers and time-step controllers whose scalars the host reduces, spelled as the originals
spell them (`np.dot`, `.sum()`, `.min()`, `np.linalg.norm`, `out[0]`) since session 58's host reductions
(docs/host-code.md, "Reductions and element reads"). The loops' per-element work is in kernels, as the
originals' loops are; the host reductions and the scalar arithmetic between them are the originals'. Each driver
takes a list `trace` (or None) into which it appends the host decisions it took (iteration counts, branches), so a
test can check they stay put under the finite-difference perturbation."""

import math

import numpy as np

import gradkern as gk
from support.host_scalar_kernels import axpy, matvec, xpay


@gk.kernel
def scal_into(x, z, a):
    i = gk.tid()
    x[i] = a * z[i]


@gk.kernel
def sum_into(a, b, out):
    """TeaLeaf's reductions: each thread adds its product into out[0] (the Fortran `rro = rro + ...` REDUCTION)."""
    i = gk.tid()
    gk.atomic_add(out, 0, a[i] * b[i])


def tri_dense(d, off):
    n = d.shape[0]
    return np.diag(d) + off * (np.eye(n, k=1) + np.eye(n, k=-1))


# -- NAS Parallel Benchmarks 3.4 CG (NPB3.4-OMP/CG/cg.f: `conj_grad` with its rho, d, alpha, beta, rnorm, and the
# main program's inverse power iteration `norm_temp1 = sum x z`, `norm_temp2 = 1 / sqrt(sum z z)`, `zeta = shift +
# 1 / norm_temp1`, `x = norm_temp2 z`); the sums are Fortran loops on the host: np.dot here. The matrix the diagonal
# `d` (Duplicated) and -1 beside it, `shift` Active; zeta filled into `out` -----------------------------------
NAS = dict(niter=2, cgitmax=3)


def nas_cg():
    def program(x, d, out, shift):
        n = x.shape[0]
        z, r, p, q = (np.zeros(n) for _ in range(4))
        zeta = None
        for _ in range(NAS["niter"]):
            # conj_grad
            gk.fill(q, 0.0)
            gk.fill(z, 0.0)
            gk.copy(r, x)
            gk.copy(p, r)
            rho = np.dot(r, r)
            for _ in range(NAS["cgitmax"]):
                gk.launch(matvec, n, d, p, q, -1.0)
                dd = np.dot(p, q)
                alpha = rho / dd
                rho0 = rho
                gk.launch(axpy, n, z, p, alpha)
                gk.launch(axpy, n, r, q, -alpha)
                rho = np.dot(r, r)
                beta = rho / rho0
                gk.launch(xpay, n, p, r, beta)
            gk.launch(matvec, n, d, z, r, -1.0)
            rnorm = math.sqrt(np.dot(x - r, x - r))  # conj_grad's residual norm, which NPB prints only
            assert rnorm > 0.0
            norm_temp1 = np.dot(x, z)
            norm_temp2 = 1.0 / np.sqrt(np.dot(z, z))
            zeta = shift + 1.0 / norm_temp1
            gk.launch(scal_into, n, x, z, norm_temp2)
        gk.fill(out, zeta)
    return program


def nas_cg_reference(x, d, out, shift):
    a = tri_dense(d, -1.0)
    x = x.copy()
    for _ in range(NAS["niter"]):
        z, r = np.zeros_like(x), x.copy()
        p, rho = r.copy(), r @ r
        for _ in range(NAS["cgitmax"]):
            q = a @ p
            alpha = rho / (p @ q)
            z, r = z + alpha * p, r - alpha * q
            rho0, rho = rho, r @ r
            p = r + rho / rho0 * p
        zeta = shift + 1.0 / (x @ z)
        x = z / np.sqrt(z @ z)
    return {0: x, 2: np.array([zeta])}


# -- BiCGStab as SciPy writes it (scipy/sparse/linalg/_isolve/iterative.py, `bicgstab`, SciPy 1.12's pure-Python
# loop, no preconditioner: psolve the identity): `rho = dotprod(rtilde, r)`, `beta = (rho / rho_prev) * (alpha /
# omega)`, `alpha = rho / dotprod(rtilde, v)`, the early exit `if np.linalg.norm(s) < atol`, `omega =
# dotprod(t, s) / dotprod(t, t)`, the stop `if np.linalg.norm(r) < atol`. The updates (`p -= omega * v` ...) are
# axpy kernels: NumPy writing an array a launch took is refused (docs/host-code.md). A nonsymmetric band matrix,
# its diagonal Duplicated, the off-diagonal `c` Active -----------------------------------------------------------
BICG = dict(maxiter=4, atol=1e-3)


@gk.kernel
def nonsym_matvec(d, p, q, c):
    i = gk.tid()
    s = d[i] * p[i]
    if i > 0:
        s = s + c * p[i - 1]
    if i < p.shape[0] - 1:
        s = s - 0.5 * p[i + 1]
    q[i] = s


def bicgstab(trace=None):
    def program(x, b, d, c):
        n = x.shape[0]
        r, v, t, p = (np.zeros(n) for _ in range(4))
        gk.launch(nonsym_matvec, n, d, x, v, c)
        gk.copy(r, b)
        gk.launch(axpy, n, r, v, -1.0)  # r = b - A x
        rtilde = r.copy()
        rho_prev = omega = alpha = None
        exit = ("maxiter", BICG["maxiter"])
        for iteration in range(BICG["maxiter"]):
            if np.linalg.norm(r) < BICG["atol"]:
                exit = ("r", iteration)
                break
            rho = np.dot(rtilde, r)
            if iteration > 0:
                beta = (rho / rho_prev) * (alpha / omega)
                gk.launch(axpy, n, p, v, -omega)
                gk.launch(xpay, n, p, r, beta)
            else:
                gk.copy(p, r)
            gk.launch(nonsym_matvec, n, d, p, v, c)
            alpha = rho / np.dot(rtilde, v)
            gk.launch(axpy, n, r, v, -alpha)  # s = r - alpha v, kept in r as SciPy does
            if np.linalg.norm(r) < BICG["atol"]:
                gk.launch(axpy, n, x, p, alpha)
                exit = ("s", iteration)
                break
            gk.launch(nonsym_matvec, n, d, r, t, c)
            omega = np.dot(t, r) / np.dot(t, t)
            gk.launch(axpy, n, x, p, alpha)
            gk.launch(axpy, n, x, r, omega)
            gk.launch(axpy, n, r, t, -omega)
            rho_prev = rho
        if trace is not None:
            trace.append(exit)
    return program


def bicgstab_reference(x, b, d, c):
    n = x.shape[0]
    a = np.diag(d) + c * np.eye(n, k=-1) - 0.5 * np.eye(n, k=1)
    x = x.copy()
    r = b - a @ x
    rtilde = r.copy()
    p = v = np.zeros_like(x)
    rho_prev = alpha = omega = 1.0
    for iteration in range(BICG["maxiter"]):
        if np.linalg.norm(r) < BICG["atol"]:
            break
        rho = rtilde @ r
        p = r.copy() if iteration == 0 else r + (rho / rho_prev) * (alpha / omega) * (p - omega * v)
        v = a @ p
        alpha = rho / (rtilde @ v)
        s = r - alpha * v
        if np.linalg.norm(s) < BICG["atol"]:
            x = x + alpha * p
            break
        t = a @ s
        omega = (t @ s) / (t @ t)
        x, r, rho_prev = x + alpha * p + omega * s, s - omega * t, rho
    return {0: x}


# -- TeaLeaf's CG driver (UK-MAC/TeaLeaf tea_solve.f90 and tea_leaf_cg.f90 `tea_leaf_cg_init_kernel`,
# `tea_leaf_cg_calc_w`, `tea_leaf_cg_calc_ur`, `tea_leaf_cg_calc_p`): each kernel REDUCTIONs into a scalar the
# driver reads (`rro`, `pw`, `rrn`): here a launch summing into `out = np.zeros(1)` and the host's `out[0]`, as
# round 4 could not spell it (its tealeaf_cg divides inside the kernels); `alpha = rro / pw`, `beta = rrn / rro`,
# `error = rrn`, the loop `IF (ABS(error) < eps * initial_residual) EXIT`. The matrix's diagonal Duplicated, the
# coupling `rx` Active ---------------------------------------------------------------------------------------------
TEA_CG = dict(max_iters=6, eps=1e-4)


def tealeaf_cg(trace=None):
    def program(u, rhs, d, rx):
        n = u.shape[0]
        r, p, w = (np.zeros(n) for _ in range(3))

        def reduce(a, b):
            out = np.zeros(1)
            gk.launch(sum_into, n, a, b, out)
            return out[0]
        # tea_leaf_cg_init_kernel: r = rhs - A u, p = r, rro = r.r
        gk.launch(matvec, n, d, u, w, -rx)
        gk.copy(r, rhs)
        gk.launch(axpy, n, r, w, -1.0)
        gk.copy(p, r)
        rro = reduce(r, r)
        initial_residual = abs(rro)
        error = initial_residual
        it = 0
        for it in range(1, TEA_CG["max_iters"] + 1):
            gk.launch(matvec, n, d, p, w, -rx)  # tea_leaf_cg_calc_w: w = A p, pw = p.w
            pw = reduce(p, w)
            alpha = rro / pw
            gk.launch(axpy, n, u, p, alpha)  # tea_leaf_cg_calc_ur
            gk.launch(axpy, n, r, w, -alpha)
            rrn = reduce(r, r)
            beta = rrn / rro
            gk.launch(xpay, n, p, r, beta)  # tea_leaf_cg_calc_p
            error = rrn
            rro = rrn
            if abs(error) < TEA_CG["eps"] * initial_residual:
                break
        if trace is not None:
            trace.append(it)
    return program


def tealeaf_cg_reference(u, rhs, d, rx):
    a = tri_dense(d, -rx)
    u = u.copy()
    r = rhs - a @ u
    p, rro = r.copy(), r @ r
    initial = abs(rro)
    for _ in range(TEA_CG["max_iters"]):
        w = a @ p
        alpha = rro / (p @ w)
        u, r = u + alpha * p, r - alpha * w
        rrn = r @ r
        p, rro = r + rrn / rro * p, rrn
        if abs(rrn) < TEA_CG["eps"] * initial:
            break
    return {0: u}


# -- SciPy's backtracking line search (scipy/optimize/_linesearch.py `scalar_search_armijo`: `phi_a0 <= phi0 + c1 *
# alpha0 * derphi0` accepts, else the quadratic interpolation `alpha1 = -(derphi0) * alpha0**2 / 2.0 / (phi_a0 -
# phi0 - derphi0 * alpha0)`) driving steepest descent on a least-squares misfit summed on the host (`0.5 *
# np.dot(res, res)`, the gradient's `derphi0 = -np.dot(g, g)`): the accepted step is a function of host sums and
# differentiated through. The data Duplicated, the first trial step `alpha0` Active ----------------------------
ARMIJO = dict(iters=3, c1=1e-4)


@gk.kernel
def residual(a, x, b, res):
    """res = A x - b with A (m, n) row-major."""
    i = gk.tid()
    s = -b[i]
    for k in range(x.shape[0]):
        s = s + a[i, k] * x[k]
    res[i] = s


@gk.kernel
def normal_grad(a, res, g):
    k = gk.tid()
    s = 0.0
    for i in range(res.shape[0]):
        s = s + a[i, k] * res[i]
    g[k] = s


@gk.kernel
def trial(xt, x, g, alpha):
    k = gk.tid()
    xt[k] = x[k] - alpha * g[k]


def armijo_descent(trace=None):
    def program(x, a, b, alpha0):
        m, n = a.shape
        res, g, xt = np.zeros(m), np.zeros(n), np.zeros(n)

        def phi(xv):
            gk.launch(residual, m, a, xv, b, res)
            return 0.5 * np.dot(res, res)
        for _ in range(ARMIJO["iters"]):
            phi0 = phi(x)
            gk.launch(normal_grad, n, a, res, g)
            derphi0 = -np.dot(g, g)
            gk.launch(trial, n, xt, x, g, alpha0)
            phi_a0 = phi(xt)
            if phi_a0 <= phi0 + ARMIJO["c1"] * alpha0 * derphi0:
                alpha, branch = alpha0, 0
            else:
                alpha, branch = -derphi0 * alpha0 ** 2 / 2.0 / (phi_a0 - phi0 - derphi0 * alpha0), 1
            if trace is not None:
                trace.append(branch)
            gk.launch(trial, n, xt, x, g, alpha)
            gk.copy(x, xt)
    return program


def armijo_reference(x, a, b, alpha0):
    x = x.copy()
    for _ in range(ARMIJO["iters"]):
        def phi(v):
            return 0.5 * np.sum((a @ v - b) ** 2)
        phi0, g = phi(x), a.T @ (a @ x - b)
        derphi0 = -(g @ g)
        phi_a0 = phi(x - alpha0 * g)
        if phi_a0 <= phi0 + ARMIJO["c1"] * alpha0 * derphi0:
            alpha = alpha0
        else:
            alpha = -derphi0 * alpha0 ** 2 / 2.0 / (phi_a0 - phi0 - derphi0 * alpha0)
        x = x - alpha * g
    return {0: x}


# -- GMRES(m) as SciPy writes it (scipy/sparse/linalg/_isolve/iterative.py `gmres`, SciPy 1.12's pure-Python
# loop: `r = b - matvec(x)`, `v[0] = r / bnrm`, the modified Gram-Schmidt `h[k, j] = dot(v[k], w); w -= h[k, j] *
# v[k]`, `h[j + 1, j] = norm(w)`, `v[j + 1] = w / h[j + 1, j]`, the Givens rotations applied to the new column and
# `lartg` of the last two, `g[j + 1] = -s g[j]; g[j] = c g[j]`, the residual `abs(g[j + 1])` against `atol`, the
# triangular solve and `x += V y`), one restart cycle of `m` steps. The small Hessenberg lives on the host as
# Python lists of Active scalars (np.hypot for lartg's radius, the back substitution scalar arithmetic): SciPy's
# own `h` array and `trsv`/`lstsq` make derived arrays (refused where a launch takes them: a test pins it) -----
GMRES = dict(m=3, atol=1e-8)


def gmres(trace=None, dense=False):
    m = GMRES["m"]

    def program(x, b, d, c):
        n = x.shape[0]
        w, r = np.zeros(n), np.zeros(n)
        gk.launch(nonsym_matvec, n, d, x, w, c)
        gk.copy(r, b)
        gk.launch(axpy, n, r, w, -1.0)
        bnrm = np.linalg.norm(r)
        vs = [r / bnrm]
        h = [[0.0] * m for _ in range(m + 1)]
        cs, sn, g = [], [], [bnrm] + [0.0] * m
        for j in range(m):
            w = np.zeros(n)
            gk.launch(nonsym_matvec, n, d, vs[j], w, c)
            for k in range(j + 1):
                h[k][j] = np.dot(vs[k], w)
                gk.launch(axpy, n, w, vs[k], -h[k][j])
            h[j + 1][j] = np.linalg.norm(w)
            vs.append(w / h[j + 1][j])
            for k in range(j):
                h[k][j], h[k + 1][j] = cs[k] * h[k][j] + sn[k] * h[k + 1][j], -sn[k] * h[k][j] + cs[k] * h[k + 1][j]
            den = np.hypot(h[j][j], h[j + 1][j])
            cs.append(h[j][j] / den)
            sn.append(h[j + 1][j] / den)
            h[j][j], h[j + 1][j] = den, 0.0
            g[j + 1], g[j] = -sn[j] * g[j], cs[j] * g[j]
            if trace is not None:
                trace.append(abs(float(g[j + 1])) < GMRES["atol"])
        if dense:  # SciPy's spelling: the rotated Hessenberg as an array, `y = solve(R, g)`
            big = np.zeros((m, m))
            for i in range(m):
                for k in range(i, m):
                    big[i, k] = h[i][k]
            y = np.linalg.solve(big, np.array(g[:m]))
        else:
            y = [None] * m
            for i in reversed(range(m)):
                y[i] = (g[i] - sum((h[i][k] * y[k] for k in range(i + 1, m)), 0.0)) / h[i][i]
        for k in range(m):
            gk.launch(axpy, n, x, vs[k], y[k])
    return program


def gmres_reference(x, b, d, c):
    n, m = x.shape[0], GMRES["m"]
    a = np.diag(d) + c * np.eye(n, k=-1) - 0.5 * np.eye(n, k=1)
    r = b - a @ x
    vs = [r / np.linalg.norm(r)]
    for _ in range(m - 1):  # the Krylov basis by Gram-Schmidt, the least-squares problem dense
        w = a @ vs[-1]
        for v in vs:
            w = w - (v @ w) * v
        vs.append(w / np.linalg.norm(w))
    basis = np.array(vs).T
    y = np.linalg.lstsq(a @ basis, r, rcond=None)[0]
    return {0: x + basis @ y}
