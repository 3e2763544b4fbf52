"""Session 53's sixth round of ported kernels, part two: PolyBench (fdtd-2d, heat-3d, adi, gramschmidt, deriche;
PolyBench/C 4.2 and PolyBench/GPU's CUDA kernels), Rodinia's pathfinder, CloverLeaf's viscosity, TeaLeaf's CG
w = A p with its p.w reduction, llm.c's backward passes (layernorm, GELU, softmax) and a Kepler-equation Newton
solve in a `while` loop. Written here from the algorithms of the files cited; used by
tests/library/test_ported_hpc6.py (inputs and references in ported_hpc6_cases.py)."""

import math

import gradkern as gk

# ---- PolyBench/GPU FDTD-2D (CUDA/FDTD-2D/fdtd2d.cu: fdtd_step1/2/3_kernel): per time step, ey's first row set
# from the source _fict_[t], ey and ex updated from hz, then hz from both; three launches a step ---------------


@gk.kernel
def fdtd_step1(fict, ex, ey, hz, t):
    i, j = gk.tid()
    if i == 0:
        ey[i, j] = fict[t]
    else:
        ey[i, j] = ey[i, j] - 0.5 * (hz[i, j] - hz[i - 1, j])


@gk.kernel
def fdtd_step2(ex, ey, hz):
    i, j = gk.tid()
    if j > 0:
        ex[i, j] = ex[i, j] - 0.5 * (hz[i, j] - hz[i, j - 1])


@gk.kernel
def fdtd_step3(ex, ey, hz):
    i, j = gk.tid()
    if i < hz.shape[0] - 1 and j < hz.shape[1] - 1:
        hz[i, j] = hz[i, j] - 0.7 * (ex[i, j + 1] - ex[i, j] + ey[i + 1, j] - ey[i, j])


def fdtd_2d(fict, ex, ey, hz, tmax, backend=None):
    n = hz.shape
    for t in range(tmax):
        gk.launch(fdtd_step1, n, fict, ex, ey, hz, t, backend=backend)
        gk.launch(fdtd_step2, n, ex, ey, hz, backend=backend)
        gk.launch(fdtd_step3, n, ex, ey, hz, backend=backend)


# ---- PolyBench/C 4.2 heat-3d (stencils/heat-3d/heat-3d.c): the 7-point explicit step A -> B then B -> A on the
# interior of a cube, a 3-D launch whose boundary threads return -----------------------------------------------


@gk.kernel
def heat3d_step(a, b):
    i, j, k = gk.tid()
    n = a.shape[0]
    if i == 0 or j == 0 or k == 0 or i == n - 1 or j == n - 1 or k == n - 1:
        return
    b[i, j, k] = 0.125 * (a[i + 1, j, k] - 2.0 * a[i, j, k] + a[i - 1, j, k]) + \
        0.125 * (a[i, j + 1, k] - 2.0 * a[i, j, k] + a[i, j - 1, k]) + \
        0.125 * (a[i, j, k + 1] - 2.0 * a[i, j, k] + a[i, j, k - 1]) + a[i, j, k]


def heat_3d(a, b, tsteps, backend=None):
    for _ in range(tsteps):
        gk.launch(heat3d_step, a.shape, a, b, backend=backend)
        gk.launch(heat3d_step, a.shape, b, a, backend=backend)


# ---- PolyBench/C 4.2 adi (stencils/adi/adi.c): alternating-direction implicit, a Thomas sweep per column then per
# row (a thread each), p and q filled forward, v or u solved backward in a loop counting down -----------------


@gk.kernel
def adi_column(u, v, p, q, a, b, c, d, f):
    i = gk.tid() + 1
    n = u.shape[0]
    v[0, i] = 1.0
    p[i, 0] = 0.0
    q[i, 0] = v[0, i]
    for j in range(1, n - 1):
        p[i, j] = -c / (a * p[i, j - 1] + b)
        q[i, j] = (-d * u[j, i - 1] + (1.0 + 2.0 * d) * u[j, i] - f * u[j, i + 1] - a * q[i, j - 1]) / \
            (a * p[i, j - 1] + b)
    v[n - 1, i] = 1.0
    for j in range(n - 2, 0, -1):
        v[j, i] = p[i, j] * v[j + 1, i] + q[i, j]


@gk.kernel
def adi_row(u, v, p, q, a, c, d, e, f):
    i = gk.tid() + 1
    n = u.shape[0]
    u[i, 0] = 1.0
    p[i, 0] = 0.0
    q[i, 0] = u[i, 0]
    for j in range(1, n - 1):
        p[i, j] = -f / (d * p[i, j - 1] + e)
        q[i, j] = (-a * v[i - 1, j] + (1.0 + 2.0 * a) * v[i, j] - c * v[i + 1, j] - d * q[i, j - 1]) / \
            (d * p[i, j - 1] + e)
    u[i, n - 1] = 1.0
    for j in range(n - 2, 0, -1):
        u[i, j] = p[i, j] * u[i, j + 1] + q[i, j]


def adi(u, v, p, q, tsteps, backend=None):
    """PolyBench's coefficients from n and tsteps (host arithmetic), then tsteps column and row sweeps."""
    n = u.shape[0]
    dx, dy, dt = 1.0 / n, 1.0 / n, 1.0 / tsteps
    b1, b2 = 2.0, 1.0
    mul1, mul2 = b1 * dt / (dx * dx), b2 * dt / (dy * dy)
    a, b, c = -mul1 / 2.0, 1.0 + mul1, -mul1 / 2.0
    d, e, f = -mul2 / 2.0, 1.0 + mul2, -mul2 / 2.0
    for _ in range(tsteps):
        gk.launch(adi_column, n - 2, u, v, p, q, a, b, c, d, f, backend=backend)
        gk.launch(adi_row, n - 2, u, v, p, q, a, c, d, e, f, backend=backend)


# ---- PolyBench/GPU GRAMSCHM (CUDA/GRAMSCHM/gramschmidt.cu: gramschmidt_kernel1/2/3): modified Gram-Schmidt, the
# host looping over columns k: one thread forms r[k, k] = |a[:, k]|, a thread per row normalises the column, a
# thread per later column j > k projects it out ----------------------------------------------------------------


@gk.kernel
def gramschmidt_norm(a, r, q, k):
    tid = gk.tid()
    if tid == 0:
        nrm = 0.0
        for i in range(a.shape[0]):
            nrm += a[i, k] * a[i, k]
        r[k, k] = math.sqrt(nrm)


@gk.kernel
def gramschmidt_scale(a, r, q, k):
    i = gk.tid()
    q[i, k] = a[i, k] / r[k, k]


@gk.kernel
def gramschmidt_project(a, r, q, k):
    j = gk.tid()
    if j > k:
        s = 0.0
        for i in range(a.shape[0]):
            s += q[i, k] * a[i, j]
        r[k, j] = s
        for i in range(a.shape[0]):
            a[i, j] = a[i, j] - q[i, k] * r[k, j]


def gramschmidt(a, r, q, backend=None):
    m, n = a.shape
    for k in range(n):
        gk.launch(gramschmidt_norm, 1, a, r, q, k, backend=backend)
        gk.launch(gramschmidt_scale, m, a, r, q, k, backend=backend)
        gk.launch(gramschmidt_project, n, a, r, q, k, backend=backend)


# ---- PolyBench/C 4.2 deriche (medley/deriche/deriche.c): Deriche's recursive edge filter, the causal and
# anti-causal IIR passes along each row (a thread per row, the filter's state carried in locals), then along each
# column of their sum; the coefficients from alpha in the kernel, b1 = 2^-alpha as PolyBench writes it -----------


@gk.func
def deriche_coefficients(alpha):
    k = (1.0 - math.exp(-alpha)) * (1.0 - math.exp(-alpha)) / \
        (1.0 + 2.0 * alpha * math.exp(-alpha) - math.exp(2.0 * alpha))
    a1 = k
    a2 = k * math.exp(-alpha) * (alpha - 1.0)
    a3 = k * math.exp(-alpha) * (alpha + 1.0)
    a4 = -k * math.exp(-2.0 * alpha)
    b1 = math.pow(2.0, -alpha)
    b2 = -math.exp(-2.0 * alpha)
    return a1, a2, a3, a4, b1, b2


@gk.kernel
def deriche_rows(img_in, y1, y2, img_out, alpha):
    i = gk.tid()
    w = img_in.shape[1]
    a1, a2, a3, a4, b1, b2 = deriche_coefficients(alpha)
    ym1 = 0.0
    ym2 = 0.0
    xm1 = 0.0
    for j in range(w):
        y1[i, j] = a1 * img_in[i, j] + a2 * xm1 + b1 * ym1 + b2 * ym2
        xm1 = img_in[i, j]
        ym2 = ym1
        ym1 = y1[i, j]
    yp1 = 0.0
    yp2 = 0.0
    xp1 = 0.0
    xp2 = 0.0
    for j in range(w - 1, -1, -1):
        y2[i, j] = a3 * xp1 + a4 * xp2 + b1 * yp1 + b2 * yp2
        xp2 = xp1
        xp1 = img_in[i, j]
        yp2 = yp1
        yp1 = y2[i, j]
    for j in range(w):
        img_out[i, j] = y1[i, j] + y2[i, j]


@gk.kernel
def deriche_columns(img_out, y1, y2, alpha):
    j = gk.tid()
    h = img_out.shape[0]
    a1, a2, a3, a4, b1, b2 = deriche_coefficients(alpha)
    tm1 = 0.0
    ym1 = 0.0
    ym2 = 0.0
    for i in range(h):
        y1[i, j] = a1 * img_out[i, j] + a2 * tm1 + b1 * ym1 + b2 * ym2
        tm1 = img_out[i, j]
        ym2 = ym1
        ym1 = y1[i, j]
    tp1 = 0.0
    tp2 = 0.0
    yp1 = 0.0
    yp2 = 0.0
    for i in range(h - 1, -1, -1):
        y2[i, j] = a3 * tp1 + a4 * tp2 + b1 * yp1 + b2 * yp2
        tp2 = tp1
        tp1 = img_out[i, j]
        yp2 = yp1
        yp1 = y2[i, j]
    for i in range(h):
        img_out[i, j] = y1[i, j] + y2[i, j]


def deriche(img_in, img_out, y1, y2, alpha, backend=None):
    gk.launch(deriche_rows, img_in.shape[0], img_in, y1, y2, img_out, alpha, backend=backend)
    gk.launch(deriche_columns, img_in.shape[1], img_out, y1, y2, alpha, backend=backend)


# ---- Rodinia pathfinder (cuda/pathfinder/pathfinder.cu: dynproc_kernel, one row a step here): the cheapest path
# down a grid, each cell its wall cost plus the least of the three cells above it, the edges clamped -------------


@gk.kernel
def pathfinder_row(wall, src, dst, row):
    c = gk.tid()
    cols = src.shape[0]
    left = src[c - 1] if c > 0 else src[c]
    right = src[c + 1] if c < cols - 1 else src[c]
    dst[c] = wall[row, c] + min(left, min(src[c], right))


def pathfinder(wall, a, b, backend=None):
    """Rows 1 .. rows - 1, ping-ponging a and b (a holds row 0's cost on entry, the result on exit for an even
    number of steps)."""
    for row in range(1, wall.shape[0]):
        gk.launch(pathfinder_row, a.shape[0], wall, a, b, row, backend=backend)
        a, b = b, a


# ---- CloverLeaf (CloverLeaf_ref kernels/viscosity_kernel.f90): artificial viscosity per cell from the velocity
# gradients and a pressure-gradient limiter, zero where the flow expands or the limiter is positive, SIGN and MAX
# guarding the directions ---------------------------------------------------------------------------------------


@gk.kernel
def cloverleaf_viscosity(celldx, celldy, density0, pressure, viscosity, xvel0, yvel0):
    k, j = gk.tid()
    k = k + 1
    j = j + 1
    ugrad = (xvel0[k, j + 1] + xvel0[k + 1, j + 1]) - (xvel0[k, j] + xvel0[k + 1, j])
    vgrad = (yvel0[k + 1, j] + yvel0[k + 1, j + 1]) - (yvel0[k, j] + yvel0[k, j + 1])
    div = celldx[j] * ugrad + celldy[k] * vgrad
    strain2 = 0.5 * (xvel0[k + 1, j] + xvel0[k + 1, j + 1] - xvel0[k, j] - xvel0[k, j + 1]) / celldy[k] + \
        0.5 * (yvel0[k, j + 1] + yvel0[k + 1, j + 1] - yvel0[k, j] - yvel0[k + 1, j]) / celldx[j]
    pgradx = (pressure[k, j + 1] - pressure[k, j - 1]) / (celldx[j] + celldx[j + 1])
    pgrady = (pressure[k + 1, j] - pressure[k - 1, j]) / (celldy[k] + celldy[k + 1])
    pgradx2 = pgradx * pgradx
    pgrady2 = pgrady * pgrady
    limiter = ((0.5 * ugrad / celldx[j]) * pgradx2 + (0.5 * vgrad / celldy[k]) * pgrady2 +
               strain2 * pgradx * pgrady) / max(pgradx2 + pgrady2, 1.0e-16)
    if limiter > 0.0 or div >= 0.0:
        viscosity[k, j] = 0.0
    else:
        pgradx = math.copysign(max(1.0e-16, abs(pgradx)), pgradx)
        pgrady = math.copysign(max(1.0e-16, abs(pgrady)), pgrady)
        pgrad = math.sqrt(pgradx * pgradx + pgrady * pgrady)
        xgrad = abs(celldx[j] * pgrad / pgradx)
        ygrad = abs(celldy[k] * pgrad / pgrady)
        grad = min(xgrad, ygrad)
        viscosity[k, j] = 2.0 * density0[k, j] * grad * grad * limiter * limiter


# ---- TeaLeaf (TeaLeaf_ref tea_leaf_cg.f90: tea_leaf_cg_calc_w): w = A p for the 5-point conduction operator
# with face coefficients Kx, Ky, and p.w summed into one scalar (OpenMP's REDUCTION, an atomic here) ---------------


@gk.kernel
def tealeaf_cg_calc_w(p, w, kx, ky, pw):
    k, j = gk.tid()
    k = k + 1
    j = j + 1
    smvp = (1.0 + (ky[k + 1, j] + ky[k, j]) + (kx[k, j + 1] + kx[k, j])) * p[k, j] - \
        (ky[k + 1, j] * p[k + 1, j] + ky[k, j] * p[k - 1, j]) - (kx[k, j + 1] * p[k, j + 1] + kx[k, j] * p[k, j - 1])
    w[k, j] = smvp
    gk.atomic_add(pw, 0, smvp * p[k, j])


# ---- llm.c (train_gpt2.c: layernorm_backward): a thread per (b, t) row, two passes over its C channels, dinp
# accumulated in place and dweight, dbias summed over rows by atomics ---------------------------------------------


@gk.kernel
def layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd):
    b, t = gk.tid()
    c_count = inp.shape[2]
    mean_bt = mean[b, t]
    rstd_bt = rstd[b, t]
    dnorm_mean = 0.0
    dnorm_norm_mean = 0.0
    for i in range(c_count):
        norm_bti = (inp[b, t, i] - mean_bt) * rstd_bt
        dnorm_i = weight[i] * dout[b, t, i]
        dnorm_mean += dnorm_i
        dnorm_norm_mean += dnorm_i * norm_bti
    dnorm_mean = dnorm_mean / c_count
    dnorm_norm_mean = dnorm_norm_mean / c_count
    for i in range(c_count):
        norm_bti = (inp[b, t, i] - mean_bt) * rstd_bt
        dnorm_i = weight[i] * dout[b, t, i]
        gk.atomic_add(dbias, i, dout[b, t, i])
        gk.atomic_add(dweight, i, norm_bti * dout[b, t, i])
        dval = dnorm_i - dnorm_mean - norm_bti * dnorm_norm_mean
        dinp[b, t, i] += dval * rstd_bt


# ---- llm.c (train_gpt2.c: gelu_backward): the tanh-approximated GELU's derivative times dout, added in place ----

GELU_SCALING_FACTOR = 0.7978845608028654  # sqrt(2 / pi)


@gk.kernel
def gelu_backward(dinp, inp, dout):
    i = gk.tid()
    x = inp[i]
    cube = 0.044715 * x * x * x
    tanh_arg = GELU_SCALING_FACTOR * (x + cube)
    tanh_out = math.tanh(tanh_arg)
    coshf_out = math.cosh(tanh_arg)
    sech_out = 1.0 / (coshf_out * coshf_out)
    local_grad = 0.5 * (1.0 + tanh_out) + x * 0.5 * sech_out * GELU_SCALING_FACTOR * (1.0 + 3.0 * 0.044715 * x * x)
    dinp[i] += local_grad * dout[i]


# ---- llm.c (dev/cuda/softmax_backward... as train_gpt2.c's attention_backward writes it): the softmax's
# Jacobian-vector product per row, dinp[i] += p[i] (dout[i] - sum_j p[j] dout[j]) ----------------------------------


@gk.kernel
def softmax_backward(dinp, probs, dout):
    r = gk.tid()
    n = probs.shape[1]
    dot = 0.0
    for j in range(n):
        dot += probs[r, j] * dout[r, j]
    for i in range(n):
        dinp[r, i] += probs[r, i] * (dout[r, i] - dot)


# ---- Kepler's equation E - e sin E = M by Newton's iteration until the step is below tol (as orbital codes such as
# REBOUND's reb_M_to_E and Danby's solver write it; a `while` whose trip count depends on the data), then the
# position on the orbit ----------------------------------------------------------------------------------------


@gk.kernel
def kepler_position(mean_anomaly, ecc, a, px, py, tol):
    i = gk.tid()
    m = mean_anomaly[i]
    e = ecc[i]
    big_e = m if e < 0.8 else math.pi
    de = 1.0
    while abs(de) > tol:
        de = (big_e - e * math.sin(big_e) - m) / (1.0 - e * math.cos(big_e))
        big_e -= de
    px[i] = a[i] * (math.cos(big_e) - e)
    py[i] = a[i] * math.sqrt(1.0 - e * e) * math.sin(big_e)
