"""A tenth round of third-party host loops ported as programs (session 57; docs/programs.md, "Ported host loops"),
part 1: optimiser-driven inverse problems whose update is the library's own NumPy arithmetic between launches
(PyTorch's Adam and SGD with Nesterov momentum, minibatches gathered on the host), a particle-in-cell loop
(deposit, field solve, push) and TeaLeaf's Jacobi solver. Written here from the drivers cited, as a user porting
them writes them; each port has a NumPy reference of the same loop. Used by tests/program/test_ported_loops10.py.
A factory taking `loop(step, nsteps)` gets a plain loop or a checkpointed one (support/ported_loops.py)."""

import math

import numpy as np

import gradkern as gk
from support.ported_loops6 import tl_coefficients, tl_init

# -- PyTorch torch/optim/adam.py (`_single_tensor_adam`: `exp_avg.lerp_(grad, 1 - beta1)`,
# `exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)`, `bias_correction1 = 1 - beta1 ** step`,
# `step_size = lr / bias_correction1`, `denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)`,
# `param.addcdiv_(exp_avg, denom, value=-step_size)`) driving a least-squares fit min |A x - b|^2, the loss's
# gradient 2 A^T (A x - b) a kernel (loss.backward()'s). The moments and the parameter are NumPy expressions
# rebound each step (the in-place `exp_avg *= beta1` into an array a launch took is a refused host write: a test
# pins it); the checkpointable spelling keeps them in buffers written by gk.copy. lr Active: a hypergradient --------
ADAM = dict(beta1=0.9, beta2=0.999, eps=1e-8, steps=3)


@gk.kernel
def lsq_grad(a, x, b, g):
    j = gk.tid()
    s = 0.0
    for i in range(a.shape[0]):
        r = -b[i]
        for k in range(a.shape[1]):
            r += a[i, k] * x[k]
        s += a[i, j] * r
    g[j] = 2.0 * s


def _adam_coefficients(lr, step):
    c = ADAM
    bias_correction1 = 1.0 - c["beta1"] ** step
    bias_correction2 = 1.0 - c["beta2"] ** step
    return lr / bias_correction1, math.sqrt(bias_correction2)


def adam_fit(loop=None):
    """`loop` None: PyTorch's names rebound each step (`param = param - ...`), the result copied into `x` at the
    end; else `loop(step, steps)` over buffers written by gk.copy (checkpointable)."""
    c = ADAM

    def program(x, a, b, lr):
        g = np.zeros_like(x)
        exp_avg, exp_avg_sq = np.zeros_like(x), np.zeros_like(x)
        if loop is None:
            param = x
            for step in range(1, c["steps"] + 1):
                gk.launch(lsq_grad, x.shape[0], a, param, b, g)
                exp_avg = exp_avg + (1.0 - c["beta1"]) * (g - exp_avg)  # lerp: self + weight * (end - self)
                exp_avg_sq = c["beta2"] * exp_avg_sq + (1.0 - c["beta2"]) * g * g
                step_size, bias_correction2_sqrt = _adam_coefficients(lr, step)
                denom = np.sqrt(exp_avg_sq) / bias_correction2_sqrt + c["eps"]
                param = param - step_size * exp_avg / denom
            gk.copy(x, param)
            return

        def step(t):
            gk.launch(lsq_grad, x.shape[0], a, x, b, g)
            gk.copy(exp_avg, exp_avg + (1.0 - c["beta1"]) * (g - exp_avg))
            gk.copy(exp_avg_sq, c["beta2"] * exp_avg_sq + (1.0 - c["beta2"]) * g * g)
            step_size, bias_correction2_sqrt = _adam_coefficients(lr, t + 1)
            denom = np.sqrt(exp_avg_sq) / bias_correction2_sqrt + c["eps"]
            gk.copy(x, x - step_size * exp_avg / denom)
        loop(step, c["steps"])
    return program


def adam_in_place(x, a, b, lr):
    """PyTorch's in-place spelling: `exp_avg.mul_(beta1).add_(grad, ...)` (into fresh moments: launches, or NumPy's
    own while nothing active is involved), then `param.addcdiv_(exp_avg, denom, value=-step_size)` as `x -= ...`
    into the parameter the gradient's launch took: a refused host write."""
    c = ADAM
    g, exp_avg, exp_avg_sq = np.zeros_like(x), np.zeros_like(x), np.zeros_like(x)
    for step in range(1, c["steps"] + 1):
        gk.launch(lsq_grad, x.shape[0], a, x, b, g)
        exp_avg *= c["beta1"]
        exp_avg += (1.0 - c["beta1"]) * g
        exp_avg_sq *= c["beta2"]
        exp_avg_sq += (1.0 - c["beta2"]) * g * g
        step_size, bias_correction2_sqrt = _adam_coefficients(lr, step)
        x -= step_size * exp_avg / (np.sqrt(exp_avg_sq) / bias_correction2_sqrt + c["eps"])


def adam_reference(x, a, b, lr):
    c = ADAM
    x = x.copy()
    m, v = np.zeros_like(x), np.zeros_like(x)
    for step in range(1, c["steps"] + 1):
        g = 2.0 * a.T @ (a @ x - b)
        m = m + (1.0 - c["beta1"]) * (g - m)
        v = c["beta2"] * v + (1.0 - c["beta2"]) * g * g
        step_size, bc2 = _adam_coefficients(lr, step)
        x = x - step_size * m / (np.sqrt(v) / bc2 + c["eps"])
    return {0: x}


# -- PyTorch torch/optim/sgd.py (`_single_tensor_sgd`: `d_p = d_p.add(param, alpha=weight_decay)`; the momentum
# buffer `torch.clone(d_p).detach()` the first step, then `buf.mul_(momentum).add_(d_p, alpha=1 - dampening)`;
# Nesterov's `d_p = d_p.add(buf, alpha=momentum)`; `param.add_(d_p, alpha=-lr)`) training a logistic regression
# over shuffled minibatches (a DataLoader with a seeded generator: `perm = rng.permutation(n)`, the batch
# `X[idx]`, `y[idx]` gathered on the host). The loss's gradient a kernel; lr Active, the features Duplicated ---
SGD = dict(momentum=0.9, dampening=0.1, weight_decay=0.01, epochs=2, batch=4, seed=57)


@gk.kernel
def logistic_grad(xb, yb, w, g):
    j = gk.tid()
    s = 0.0
    for i in range(xb.shape[0]):
        z = 0.0
        for k in range(xb.shape[1]):
            z += xb[i, k] * w[k]
        s += (1.0 / (1.0 + gk.exp(-z)) - yb[i]) * xb[i, j]
    g[j] = s / xb.shape[0]


def sgd_nesterov(w, features, labels, lr):
    c = SGD
    rng = np.random.default_rng(c["seed"])
    n = features.shape[0]
    param, buf = w, None
    for _ in range(c["epochs"]):
        perm = rng.permutation(n)
        for start in range(0, n, c["batch"]):
            idx = perm[start:start + c["batch"]]
            xb, yb = features[idx], labels[idx]  # the host gathers: launches
            d_p = np.zeros_like(w)
            gk.launch(logistic_grad, w.shape[0], xb, yb, param, d_p)
            d_p = d_p + c["weight_decay"] * param
            buf = d_p.copy() if buf is None else c["momentum"] * buf + (1.0 - c["dampening"]) * d_p
            d_p = d_p + c["momentum"] * buf
            param = param - lr * d_p
    gk.copy(w, param)


def sgd_reference(w, features, labels, lr):
    c = SGD
    rng = np.random.default_rng(c["seed"])
    w, buf = w.copy(), None
    for _ in range(c["epochs"]):
        perm = rng.permutation(features.shape[0])
        for start in range(0, features.shape[0], c["batch"]):
            idx = perm[start:start + c["batch"]]
            xb, yb = features[idx], labels[idx]
            d_p = xb.T @ (1.0 / (1.0 + np.exp(-(xb @ w))) - yb) / len(idx) + c["weight_decay"] * w
            buf = d_p.copy() if buf is None else c["momentum"] * buf + (1.0 - c["dampening"]) * d_p
            w = w - lr * (d_p + c["momentum"] * buf)
    return {0: w}


# -- pmocz/pic-python pic.py (Mocz 2020, the 1-D two-stream instability: `main`'s loop `vel += acc * dt / 2.0`,
# `pos += vel * dt`, `pos = np.mod(pos, boxsize)`, `acc = getAcc(...)`, `vel += acc * dt / 2.0`; getAcc's
# cloud-in-cell weights and `np.bincount` deposit scaled by `n0 * boxsize / N / dx`, `spsolve(Lmtx, n - n0)` with
# the periodic three-point Laplacian, `E_grid = -Gmtx @ phi_grid` (periodic central differences), the field
# interpolated back with the same weights and `a = -E`). The deposit by atomic_add, the direct solve of the periodic
# system (its zero-mean solution) a one-thread kernel, the kick and the drift with its wrap kernels (`vel +=`
# into the argument a launch took is a refused host write; `np.mod` is not one of the host ufuncs); dt Active -----
PIC = dict(nx=8, boxsize=1.0, n0=1.0, nt=4)


@gk.func
def pic_cell(x, dx):
    return int(math.floor(x / dx))


@gk.kernel
def pic_deposit(pos, n, dx, scale):
    p = gk.tid()
    nx = n.shape[0]
    j = pic_cell(pos[p], dx)
    gk.atomic_add(n, j % nx, scale * ((j + 1) * dx - pos[p]) / dx)
    gk.atomic_add(n, (j + 1) % nx, scale * (pos[p] - j * dx) / dx)


@gk.kernel
def pic_field(n, e, d, phi, n0, dx):
    """Lmtx phi = n - n0 (periodic, singular: its zero-mean solution), then E = -Gmtx phi."""
    nx = n.shape[0]
    s = 0.0
    tot = 0.0
    for j in range(nx):  # d[j] = phi[j + 1] - phi[j] up to a constant: d[j] - d[j - 1] = dx^2 (n[j] - n0)
        s += n[j] - n0
        d[j] = dx * dx * s
        tot += d[j]
    p = 0.0
    mean = 0.0
    for j in range(nx):
        phi[j] = p
        mean += p
        p += d[j] - tot / nx
    for j in range(nx):
        phi[j] = phi[j] - mean / nx
    for j in range(nx):
        e[j] = -(phi[(j + 1) % nx] - phi[(j + nx - 1) % nx]) / (2.0 * dx)


@gk.kernel
def pic_accel(pos, e, acc, dx):
    p = gk.tid()
    nx = e.shape[0]
    j = pic_cell(pos[p], dx)
    acc[p] = -(((j + 1) * dx - pos[p]) / dx * e[j % nx] + (pos[p] - j * dx) / dx * e[(j + 1) % nx])


@gk.kernel
def pic_kick(vel, acc, half_dt):
    p = gk.tid()
    vel[p] = vel[p] + acc[p] * half_dt


@gk.kernel
def pic_drift(pos, vel, dt, boxsize):
    p = gk.tid()
    x = pos[p] + vel[p] * dt
    pos[p] = x - boxsize * math.floor(x / boxsize)


def pic_two_stream(loop):
    c = PIC

    def program(pos, vel, dt):
        npart = pos.shape[0]
        dx = c["boxsize"] / c["nx"]
        n, e, d, phi = (np.zeros(c["nx"]) for _ in range(4))
        acc = np.zeros_like(pos)

        def get_acc():
            gk.fill(n, 0.0)
            gk.launch(pic_deposit, npart, pos, n, dx, c["n0"] * c["boxsize"] / npart / dx)
            gk.launch(pic_field, 1, n, e, d, phi, c["n0"], dx)
            gk.launch(pic_accel, npart, pos, e, acc, dx)

        get_acc()

        def step(t):
            gk.launch(pic_kick, npart, vel, acc, dt / 2.0)
            gk.launch(pic_drift, npart, pos, vel, dt, c["boxsize"])
            get_acc()
            gk.launch(pic_kick, npart, vel, acc, dt / 2.0)
        loop(step, c["nt"])
    return program


def pic_reference(pos, vel, dt):
    c = PIC
    nx, box = c["nx"], c["boxsize"]
    dx, npart = box / nx, pos.shape[0]
    lap = (np.diag(-2.0 * np.ones(nx)) + np.diag(np.ones(nx - 1), 1) + np.diag(np.ones(nx - 1), -1))
    lap[0, -1] = lap[-1, 0] = 1.0
    lap /= dx * dx
    grad = (np.diag(np.ones(nx - 1), 1) - np.diag(np.ones(nx - 1), -1))
    grad[0, -1], grad[-1, 0] = -1.0, 1.0
    grad /= 2.0 * dx

    def get_acc(pos):
        j = np.floor(pos / dx).astype(int)
        wj, wjp1 = ((j + 1) * dx - pos) / dx, (pos - j * dx) / dx
        jp1 = np.mod(j + 1, nx)
        dens = (np.bincount(j, weights=wj, minlength=nx) + np.bincount(jp1, weights=wjp1, minlength=nx))
        dens *= c["n0"] * box / npart / dx
        phi = np.linalg.lstsq(lap, dens - c["n0"], rcond=None)[0]  # the minimum-norm (zero-mean) solution
        e = -grad @ phi
        return -(wj * e[j] + wjp1 * e[jp1])

    pos, vel = pos.copy(), vel.copy()
    acc = get_acc(pos)
    for _ in range(c["nt"]):
        vel += acc * dt / 2.0
        pos = np.mod(pos + vel * dt, box)
        acc = get_acc(pos)
        vel += acc * dt / 2.0
    return {0: pos, 1: vel}


# -- TeaLeaf (UK-MAC/TeaLeaf_ref tea_leaf_jacobi.f90: tea_leaf_jacobi_solve_kernel's `un = u1` copy, then
# `u1 = (u0 + rx (Kx(j+1) un(j+1) + Kx(j) un(j-1)) + ry (...)) / (1 + rx (Kx(j) + Kx(j+1)) + ry (...))` and
# `error = error + ABS(u1 - un)`; tea_solve.f90's `DO n = 1, max_iters` with `IF (ABS(error) < eps *
# initial_residual) EXIT`, the initial residual from calc_residual and its 2-norm). Round 6's face coefficients
# (rx folded in) and residual kernel; the change's sum by atomic_add into `error[0]`, read on the host only to
# stop. rx Active --------------------------------------------------------------------------------------------------
TEA_JACOBI = dict(eps=0.05, max_iters=8)


@gk.kernel
def tl_jacobi_solve(u, un, u0, kx, ky, error):
    k, j = gk.tid()
    k += 1
    j += 1
    u[k, j] = ((u0[k, j] + kx[k, j + 1] * un[k, j + 1] + kx[k, j] * un[k, j - 1] + ky[k + 1, j] * un[k + 1, j]
                + ky[k, j] * un[k - 1, j]) / (1.0 + kx[k, j] + kx[k, j + 1] + ky[k, j] + ky[k + 1, j]))
    gk.atomic_add(error, 0, abs(u[k, j] - un[k, j]))


def tealeaf_jacobi(loop=None, iterations=None):
    """`loop` None: tea_solve's loop with its exit on the change; else `loop(step, max_iters)` runs every
    iteration (checkpointable)."""
    c = TEA_JACOBI

    def program(u, density, rx):
        inner = (u.shape[0] - 2, u.shape[1] - 2)
        u0 = u.copy()
        kx, ky, r, p, un = (np.zeros_like(u) for _ in range(5))
        rro, error = np.zeros(1), np.zeros(1)
        gk.launch(tl_coefficients, inner, density, kx, ky, rx)
        gk.launch(tl_init, inner, u, u0, r, p, kx, ky, rro)
        initial_residual = np.sqrt(abs(rro[0]))  # a derived scalar, compared only

        def iteration(n):
            gk.copy(un, u)
            gk.fill(error, 0.0)
            gk.launch(tl_jacobi_solve, inner, u, un, u0, kx, ky, error)

        if loop is not None:
            loop(iteration, c["max_iters"])
            return
        for n in range(1, c["max_iters"] + 1):
            iteration(n)
            if abs(error[0]) < c["eps"] * initial_residual:
                break
        if iterations is not None:
            iterations.append(n)
    return program


def tealeaf_jacobi_reference(u, density, rx, iterations=None):
    c = TEA_JACOBI
    u, u0 = u.copy(), u.copy()
    kx, ky = np.zeros_like(u), np.zeros_like(u)
    d = density
    kx[1:-1, 1:-1] = rx * (d[1:-1, :-2] + d[1:-1, 1:-1]) / (2.0 * d[1:-1, :-2] * d[1:-1, 1:-1])
    ky[1:-1, 1:-1] = rx * (d[:-2, 1:-1] + d[1:-1, 1:-1]) / (2.0 * d[:-2, 1:-1] * d[1:-1, 1:-1])
    kc, kw, ke, ks, kn = kx[1:-1, 1:-1], kx[1:-1, 1:-1], kx[1:-1, 2:], ky[1:-1, 1:-1], ky[2:, 1:-1]
    diag = 1.0 + kw + ke + ks + kn
    au = diag * u[1:-1, 1:-1] - ke * u[1:-1, 2:] - kc * u[1:-1, :-2] - kn * u[2:, 1:-1] - ks * u[:-2, 1:-1]
    initial_residual = np.sqrt(np.sum((u0[1:-1, 1:-1] - au) ** 2))
    for n in range(1, c["max_iters"] + 1):
        un = u.copy()
        u[1:-1, 1:-1] = (u0[1:-1, 1:-1] + ke * un[1:-1, 2:] + kw * un[1:-1, :-2] + kn * un[2:, 1:-1]
                         + ks * un[:-2, 1:-1]) / diag
        if np.sum(np.abs(u - un)) < c["eps"] * initial_residual:
            break
    if iterations is not None:
        iterations.append(n)
    return {0: u}


__all__ = ["adam_fit", "adam_in_place", "adam_reference", "sgd_nesterov", "sgd_reference", "pic_two_stream",
           "pic_reference", "tealeaf_jacobi", "tealeaf_jacobi_reference"]
