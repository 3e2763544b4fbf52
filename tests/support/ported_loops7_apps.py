"""A seventh round of third-party host loops ported as programs (session 54; docs/programs.md, "Ported host loops"),
part 2: drivers whose loop stops on a value a kernel summed or that pick buffers by an index the host toggles
(NVIDIA's cuda-samples jacobiCudaGraphs with its `k & 1` alternation and final error, Rodinia's leukocyte MGVF
until the mean change is small, cuda-samples nbody's `m_currentRead` toggle). Written here from the algorithms, as
a user porting the driver writes it. Used by tests/program/test_ported_loops7.py."""

import numpy as np

import gradkern as gk


# -- NVIDIA cuda-samples jacobiCudaGraphs (jacobi.cu JacobiMethodGpuCudaGraphExecKernelSetParams's non-graph twin
# JacobiMethodGpu: `for (k = 0; k < max_iter; k++) { cudaMemsetAsync(d_sum, 0); if ((k & 1) == 0)
# JacobiMethod(A, b, conv_threshold, x, x_new, d_sum); else JacobiMethod(A, b, conv_threshold, x_new, x, d_sum);
# cudaMemcpyAsync(&sum, d_sum); if (sum <= conv_threshold) { finalError(...); break; } }`): a dense Jacobi sweep a row
# a thread, the change summed by atomic_add and read on the host, the final error sum |x - 1| into `err`; the
# diagonal shifted by the Active sigma ------------------------------------------------------------------------
@gk.kernel
def jg_sweep(A, b, x, x_new, sigma, d_sum):
    i = gk.tid()
    s = 0.0
    for j in range(b.shape[0]):
        if j != i:
            s += A[i, j] * x[j]
    v = (b[i] - s) / (A[i, i] + sigma)
    x_new[i] = v
    gk.atomic_add(d_sum, 0, abs(v - x[i]))


@gk.kernel
def jg_final_error(x, err):
    i = gk.tid()
    gk.atomic_add(err, 0, abs(x[i] - 1.0))


def jacobi_graphs(conv_threshold=1e-3, max_iter=12, iterations=None):
    def program(A, b, x, x_new, err, sigma):
        n = b.shape[0]
        d_sum = np.zeros_like(b, shape=(1,))
        for k in range(max_iter):
            gk.fill(d_sum, 0.0)
            if (k & 1) == 0:
                gk.launch(jg_sweep, n, A, b, x, x_new, sigma, d_sum)
            else:
                gk.launch(jg_sweep, n, A, b, x_new, x, sigma, d_sum)
            if d_sum[0] <= conv_threshold:
                break
        gk.fill(err, 0.0)
        gk.launch(jg_final_error, n, x_new if (k & 1) == 0 else x, err)
        if iterations is not None:
            iterations.append(k + 1)
    return program


# -- Rodinia 3.1 leukocyte (OpenMP/find_ellipse.c MGVF: `while ((mean_diff > threshold) && (iter < max_iter)) {
# for each pixel: the eight differences to its neighbours (clamped at the border), each weighted by a smoothed
# Heaviside, IMGVF_new = IMGVF + (MU / LAMBDA) * sum - (1 / LAMBDA) * vI * (IMGVF - vI); total_diff += |new - old|;
# mean_diff = total_diff / (m * n); }`): one kernel a sweep, the buffers swapped by name, the mean change summed by
# atomic_add and divided on the host (a derived scalar, compared only), the result copied back; the Heaviside is
# 0.5 + 0.5 tanh(u / eps) (the C's atan: the kernel language has tanh), isotropic (the C weights by the cell's
# motion direction); MU Active, MU / LAMBDA host arithmetic on it ------------------------------------------------
@gk.kernel
def mgvf_sweep(gvf, gvf_new, img, mu_over_lambda, inv_lambda, inv_eps, total):
    i, j = gk.tid()
    m = gvf.shape[0]
    n = gvf.shape[1]
    c = gvf[i, j]
    s = 0.0
    for di in range(3):
        for dj in range(3):
            ii = min(max(i + di - 1, 0), m - 1)
            jj = min(max(j + dj - 1, 0), n - 1)
            u = gvf[ii, jj] - c
            s += (0.5 + 0.5 * gk.tanh(u * inv_eps)) * u
    v = img[i, j]
    new = c + mu_over_lambda * s - inv_lambda * v * (c - v)
    gvf_new[i, j] = new
    gk.atomic_add(total, 0, abs(new - c))


def leukocyte_mgvf(threshold=1e-2, max_iter=12, lam=8.0, eps=0.5, iterations=None):
    def program(gvf, img, mu):
        m, n = gvf.shape
        total = np.zeros_like(gvf, shape=(1,))
        cur, nxt = gvf, np.zeros_like(gvf)
        mean_diff, it = 1.0, 0
        while mean_diff > threshold and it < max_iter:
            gk.fill(total, 0.0)
            gk.launch(mgvf_sweep, (m, n), cur, nxt, img, mu / lam, 1.0 / lam, 1.0 / eps, total)
            mean_diff = total[0] / (m * n)
            cur, nxt = nxt, cur
            it += 1
        if cur is not gvf:
            gk.copy(gvf, cur)
        if iterations is not None:
            iterations.append(it)
    return program


# -- NVIDIA cuda-samples nbody (bodysystemcuda_impl.h BodySystemCUDA::update: `integrateNbodySystem(m_deviceData,
# m_currentRead, deltaTime, damping, ...)` then `std::swap(m_currentRead, m_currentWrite)`; bodysystemcpu_impl.h's
# force loop: a = sum m_j r / (|r|^2 + softeningSquared)^(3/2)), in 2-D with the mass in column 2: the positions
# read from pos[read] and written to pos[1 - read] (the velocities in place, a thread its own body), `read = 1 -
# read` toggled on the host, the result copied back after an odd count; softeningSquared Active ---------------
@gk.kernel
def nbody_integrate(old, new, vel, dt, damping, eps2):
    i = gk.tid()
    ax = 0.0
    ay = 0.0
    for j in range(old.shape[0]):
        rx = old[j, 0] - old[i, 0]
        ry = old[j, 1] - old[i, 1]
        d2 = rx * rx + ry * ry + eps2
        inv = old[j, 2] / (d2 * gk.sqrt(d2))
        ax += rx * inv
        ay += ry * inv
    vx = (vel[i, 0] + ax * dt) * damping
    vy = (vel[i, 1] + ay * dt) * damping
    vel[i, 0] = vx
    vel[i, 1] = vy
    new[i, 0] = old[i, 0] + vx * dt
    new[i, 1] = old[i, 1] + vy * dt
    new[i, 2] = old[i, 2]


def nbody(steps=3, dt=0.05, damping=0.995):
    def program(pos, vel, eps2):
        n = pos.shape[0]
        bufs = [pos, np.zeros_like(pos)]
        read = 0
        for _ in range(steps):
            gk.launch(nbody_integrate, n, bufs[read], bufs[1 - read], vel, dt, damping, eps2)
            read = 1 - read
        if read == 1:
            gk.copy(pos, bufs[1])
    return program


def nbody_parity(loop, steps=3, dt=0.05, damping=0.995):
    """The checkpointable spelling: the read buffer from t's parity."""
    def program(pos, vel, eps2):
        n = pos.shape[0]
        bufs = (pos, np.zeros_like(pos))
        loop(lambda t: gk.launch(nbody_integrate, n, bufs[t % 2], bufs[(t + 1) % 2], vel, dt, damping, eps2), steps)
        if steps % 2:
            gk.copy(pos, bufs[1])
    return program


# -- Rodinia 3.1 particlefilter (particlefilter_seq.c / ex_particle_OPENMP_seq.c particleFilter: per frame `arrayX[x]
# += 1 + 5 * randn` (the motion model), `likelihood`, `weights[x] = weights[x] * exp(likelihood[x])`, `sumWeights`,
# `weights[x] /= sumWeights`, the estimate `xe += arrayX[x] * weights[x]`, `CDF[x] = CDF[x-1] + weights[x]`,
# `u[j] = u1 + j / Nparticles`, `xj[j] = arrayX[findIndex(CDF, u[j])]`, `weights[x] = 1 / Nparticles`), in 1-D: the
# noise drawn on the host from a seeded generator (constants, as the C's randn), the likelihood a Gaussian of the
# observation, the normalisation summed by atomic_add and divided in a kernel, the CDF `np.cumsum` and the index
# `np.searchsorted(cdf, u)` on the host (integers: no derivative), the resampling a gather through them; each
# frame's estimate into `est[t]`; the drift Active -------------------------------------------------------------
@gk.kernel
def pf_move_weigh(x, w, noise, obs, drift, inv_two_var, total):
    i = gk.tid()
    v = x[i] + drift + noise[i]
    x[i] = v
    e = v - obs
    wi = w[i] * gk.exp(-e * e * inv_two_var)
    w[i] = wi
    gk.atomic_add(total, 0, wi)


@gk.kernel
def pf_normalise_estimate(x, w, total, est):
    i = gk.tid()
    wi = w[i] / total[0]
    w[i] = wi
    gk.atomic_add(est, 0, x[i] * wi)


@gk.kernel
def pf_resample(x, xnew, index):
    j = gk.tid()
    xnew[j] = x[index[j]]


def particlefilter(frames=3, sigma=0.8, seed=5):
    def program(x, w, obs, est, drift):
        n = x.shape[0]
        rng = np.random.default_rng(seed)
        total = np.zeros_like(x, shape=(1,))
        xnew = np.zeros_like(x)
        for t in range(frames):
            noise = 0.3 * rng.standard_normal(n)
            gk.fill(total, 0.0)
            gk.launch(pf_move_weigh, n, x, w, noise, obs[t], drift, 1.0 / (2.0 * sigma * sigma), total)
            gk.launch(pf_normalise_estimate, n, x, w, total, est[t:t + 1])
            cdf = np.cumsum(w)  # the C's CDF loop: read, only compared below
            u = (rng.uniform() + np.arange(n)) / n
            index = np.minimum(np.searchsorted(cdf, u), n - 1)  # findIndex: integers
            gk.launch(pf_resample, n, x, xnew, index)
            gk.copy(x, xnew)
            gk.fill(w, 1.0 / n)
    return program


def particlefilter_host_gather(frames=3, sigma=0.8, seed=5):
    """The resampling as the C's `xj[j] = arrayX[findIndex(CDF, u[j])]` reads in NumPy: `x[index]` on the host, then
    copied back (the port's pf_resample kernel is the same gather)."""
    def program(x, w, obs, est, drift):
        n = x.shape[0]
        rng = np.random.default_rng(seed)
        total = np.zeros_like(x, shape=(1,))
        for t in range(frames):
            noise = 0.3 * rng.standard_normal(n)
            gk.fill(total, 0.0)
            gk.launch(pf_move_weigh, n, x, w, noise, obs[t], drift, 1.0 / (2.0 * sigma * sigma), total)
            gk.launch(pf_normalise_estimate, n, x, w, total, est[t:t + 1])
            u = (rng.uniform() + np.arange(n)) / n
            index = np.minimum(np.searchsorted(np.cumsum(w), u), n - 1)
            gk.copy(x, x[index])
            gk.fill(w, 1.0 / n)
    return program
