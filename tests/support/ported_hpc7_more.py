"""Session 54's seventh round of ported kernels, part two: PolyBench/C 4.2's floyd-warshall (as RAJAPerf's
POLYBENCH_FLOYD_WARSHALL writes it: a launch per k reading pin and writing pout, ping-ponged by the host; the path
chosen by a comparison), seidel-2d (Gauss-Seidel in place, one thread), trisolv and ludcmp (one thread, in place,
loops whose bounds depend on the outer index, ludcmp's back substitution counting down), trmm and symm (a thread
per column, rows updated in place: trmm reads rows below it not yet scaled, symm adds into rows above it), and
Mamba's selective scan (state-spaces/mamba mamba_ssm/ops/selective_scan_interface.py selective_scan_ref: a thread
per (batch, channel), the state a `gk.local` array carried through the sequence, softplus on delta, the output
gated by SiLU). Written here from the algorithms of the files cited; used by tests/library/test_ported_hpc7.py."""

import math

import gradkern as gk

# ---- PolyBench floyd-warshall, RAJAPerf src/polybench/POLYBENCH_FLOYD_WARSHALL.hpp (flattened, run-time n) ------


@gk.kernel
def floyd_warshall_step(pin, pout, k, n):
    i, j = gk.tid()
    via = pin[i * n + k] + pin[k * n + j]
    pout[i * n + j] = pin[i * n + j] if pin[i * n + j] < via else via


def floyd_warshall(pin, pout, n, backend=None):
    """n passes ping-ponged (n even, so the last pass writes pin)."""
    a, b = pin, pout
    for k in range(n):
        gk.launch(floyd_warshall_step, (n, n), a, b, k, n, backend=backend)
        a, b = b, a


# ---- PolyBench seidel-2d: nine-point averages in place, rows then columns in order, `tsteps` times -----------


@gk.kernel
def seidel_2d(a, tsteps):
    n = a.shape[0]
    for _ in range(tsteps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                a[i, j] = (a[i - 1, j - 1] + a[i - 1, j] + a[i - 1, j + 1] + a[i, j - 1] + a[i, j] + a[i, j + 1]
                           + a[i + 1, j - 1] + a[i + 1, j] + a[i + 1, j + 1]) / 9.0


# ---- PolyBench trisolv: forward substitution, x written in place ---------------------------------------------


@gk.kernel
def trisolv(lower, x, b):
    n = x.shape[0]
    for i in range(n):
        x[i] = b[i]
        for j in range(i):
            x[i] -= lower[i, j] * x[j]
        x[i] = x[i] / lower[i, i]


# ---- PolyBench ludcmp: Doolittle LU of A in place, then L y = b and U x = y (counting down) ------------------


@gk.kernel
def ludcmp(a, b, x, y):
    n = a.shape[0]
    for i in range(n):
        for j in range(i):
            w = a[i, j]
            for k in range(j):
                w -= a[i, k] * a[k, j]
            a[i, j] = w / a[j, j]
        for j in range(i, n):
            w = a[i, j]
            for k in range(i):
                w -= a[i, k] * a[k, j]
            a[i, j] = w
    for i in range(n):
        w = b[i]
        for j in range(i):
            w -= a[i, j] * y[j]
        y[i] = w
    for i in range(n - 1, -1, -1):
        w = y[i]
        for j in range(i + 1, n):
            w -= a[i, j] * x[j]
        x[i] = w / a[i, i]


# ---- PolyBench trmm: B = alpha A^T B, A unit lower triangular, a thread per column of B --------------------


@gk.kernel
def trmm(a, b, alpha):
    j = gk.tid()
    m = b.shape[0]
    for i in range(m):
        for k in range(i + 1, m):
            b[i, j] += a[k, i] * b[k, j]
        b[i, j] = alpha * b[i, j]


# ---- PolyBench symm: C = alpha A B + beta C, A symmetric stored lower, a thread per column --------------------


@gk.kernel
def symm(a, b, c, alpha, beta):
    j = gk.tid()
    m = c.shape[0]
    for i in range(m):
        temp2 = 0.0
        for k in range(i):
            c[k, j] += alpha * b[i, j] * a[i, k]
            temp2 += b[k, j] * a[i, k]
        c[i, j] = beta * c[i, j] + alpha * b[i, j] * a[i, i] + alpha * temp2


# ---- Mamba's selective scan (selective_scan_ref, delta_softplus=True, real A, B and C per batch) ----------------

SSM_N = 4


@gk.func
def softplus(v):
    return math.log1p(math.exp(v))


@gk.kernel
def selective_scan(u, delta, a, bmat, cmat, d, z, delta_bias, out):
    b, ch = gk.tid()
    seqlen = u.shape[2]
    state = gk.local((SSM_N,), gk.float64)
    for t in range(seqlen):
        dt = softplus(delta[b, ch, t] + delta_bias[ch])
        y = 0.0
        for n in range(SSM_N):
            state[n] = math.exp(dt * a[ch, n]) * state[n] + dt * bmat[b, n, t] * u[b, ch, t]
            y += state[n] * cmat[b, n, t]
        y = y + u[b, ch, t] * d[ch]
        zt = z[b, ch, t]
        out[b, ch, t] = y * zt / (1.0 + math.exp(-zt))
