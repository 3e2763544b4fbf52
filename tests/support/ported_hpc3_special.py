"""Session 50's third round of ported kernels, last part: a P1 finite-element apply scattered by atomics,
polynomial and special-function kernels (Giles' erfinv, HACCmk's short-range force, a Clenshaw Chebyshev
series), Rodinia's dwt2d CDF 9/7 lifting and lud. Each cites its source and was written here from the
algorithm. Used by tests/library/test_ported_hpc3.py through ported_hpc3_cases.py."""

import math

import gradkern as gk

# ---- P1 triangles, the Laplacian applied element by element (Alberty, Carstensen, Funken, "Remarks around 50
# lines of Matlab", stima3; the GPU form of Cecka, Lew, Darve 2011: each element's product scattered by
# atomicAdd): y += K x with K from the active vertex coordinates ------------------------------------------------


@gk.kernel
def fem_p1_apply(coords, tris, x, y):
    e = gk.tid()
    px = gk.local((3,), gk.float64)
    py = gk.local((3,), gk.float64)
    xe = gk.local((3,), gk.float64)
    for a in range(3):
        nd = tris[e, a]
        px[a] = coords[nd, 0]
        py[a] = coords[nd, 1]
        xe[a] = x[nd]
    area2 = (px[1] - px[0]) * (py[2] - py[0]) - (px[2] - px[0]) * (py[1] - py[0])
    bs = gk.local((3,), gk.float64)
    cs = gk.local((3,), gk.float64)
    for a in range(3):
        bs[a] = py[(a + 1) % 3] - py[(a + 2) % 3]
        cs[a] = px[(a + 2) % 3] - px[(a + 1) % 3]
    for a in range(3):
        s = 0.0
        for b in range(3):
            s += (bs[a] * bs[b] + cs[a] * cs[b]) * xe[b]
        gk.atomic_add(y, tris[e, a], s / (2.0 * area2))


# ---- erfinv in single precision as GPU codes write it (M. Giles, "Approximating the erfinv function", GPU
# Computing Gems Jade, 2011: the central and tail polynomials in w = -log((1 - x)(1 + x)), by Horner) ----------


@gk.func
def erfinv_giles(x):
    w = -math.log((1.0 - x) * (1.0 + x))
    if w < 5.0:
        w = w - 2.5
        p = 2.81022636e-08
        p = 3.43273939e-07 + p * w
        p = -3.5233877e-06 + p * w
        p = -4.39150654e-06 + p * w
        p = 0.00021858087 + p * w
        p = -0.00125372503 + p * w
        p = -0.00417768164 + p * w
        p = 0.246640727 + p * w
        p = 1.50140941 + p * w
    else:
        w = math.sqrt(w) - 3.0
        p = -0.000200214257
        p = 0.000100950558 + p * w
        p = 0.00134934322 + p * w
        p = -0.00367342844 + p * w
        p = 0.00573950773 + p * w
        p = -0.0076224613 + p * w
        p = 0.00943887047 + p * w
        p = 1.00167406 + p * w
        p = 2.83297682 + p * w
    return p * x


@gk.kernel
def erfinv_kernel(x, y, n):
    i = gk.tid()
    if i < n:
        y[i] = erfinv_giles(x[i])


# ---- HACCmk (CORAL HACCmk, Step10_orig: the short-range gravity of one particle against a list): the softened
# inverse-square force minus the long-range part's degree-5 polynomial fit in r^2, cut by ternaries ------------
MA0 = 0.269327
MA1 = -0.0750978
MA2 = 0.0114808
MA3 = -0.00109313
MA4 = 0.0000605491
MA5 = -0.00000147177


@gk.kernel
def haccmk_step10(xx, yy, zz, mass, vx, vy, vz, fsrrmax2, mp_rsm2, fcoeff, count):
    i = gk.tid()
    xi = 0.0
    yi = 0.0
    zi = 0.0
    for j in range(count):
        dxc = xx[j] - xx[i]
        dyc = yy[j] - yy[i]
        dzc = zz[j] - zz[i]
        r2 = dxc * dxc + dyc * dyc + dzc * dzc
        m = mass[j] if r2 < fsrrmax2 else 0.0
        f = math.pow(r2 + mp_rsm2, -1.5) - (MA0 + r2 * (MA1 + r2 * (MA2 + r2 * (MA3 + r2 * (MA4 + r2 * MA5)))))
        f = m * f if r2 > 0.0 else 0.0
        xi = xi + f * dxc
        yi = yi + f * dyc
        zi = zi + f * dzc
    vx[i] = vx[i] + xi * fcoeff
    vy[i] = vy[i] + yi * fcoeff
    vz[i] = vz[i] + zi * fcoeff


# ---- Chebyshev series by Clenshaw's recurrence (Numerical Recipes 3rd ed. section 5.8, Chebyshev::eval, as
# special-function kernels evaluate their fits), the coefficients an input array --------------------------------


@gk.kernel
def chebev(c, x, out, m, a, b):
    i = gk.tid()
    d = 0.0
    dd = 0.0
    y = (2.0 * x[i] - a - b) / (b - a)
    y2 = 2.0 * y
    for j in range(m - 1, 0, -1):
        sv = d
        d = y2 * d - dd + c[j]
        dd = sv
    out[i] = y * d - dd + 0.5 * c[0]


# ---- Rodinia dwt2d's CDF 9/7 forward transform (yuhc/gpu-rodinia cuda/dwt2d/dwt_cuda/fdwt97.cu: the four
# lifting steps and the scaling, symmetric extension at the row's ends), a row a thread, lifted in place, then
# split into the low and high halves -----------------------------------------------------------------------------
F97_PREDICT1 = -1.586134342
F97_UPDATE1 = -0.05298011854
F97_PREDICT2 = 0.8829110762
F97_UPDATE2 = 0.4435068522
SCALE97 = 1.23017410491400


@gk.kernel
def dwt97_rows(x, out, n):
    row = gk.tid()
    for i in range(1, n - 1, 2):
        x[row, i] += F97_PREDICT1 * (x[row, i - 1] + x[row, i + 1])
    x[row, n - 1] += 2.0 * F97_PREDICT1 * x[row, n - 2]
    x[row, 0] += 2.0 * F97_UPDATE1 * x[row, 1]
    for i in range(2, n, 2):
        x[row, i] += F97_UPDATE1 * (x[row, i - 1] + x[row, i + 1])
    for i in range(1, n - 1, 2):
        x[row, i] += F97_PREDICT2 * (x[row, i - 1] + x[row, i + 1])
    x[row, n - 1] += 2.0 * F97_PREDICT2 * x[row, n - 2]
    x[row, 0] += 2.0 * F97_UPDATE2 * x[row, 1]
    for i in range(2, n, 2):
        x[row, i] += F97_UPDATE2 * (x[row, i - 1] + x[row, i + 1])
    for i in range(0, n, 2):
        out[row, i // 2] = x[row, i] / SCALE97
        out[row, n // 2 + i // 2] = x[row, i + 1] * SCALE97


# ---- Rodinia lud's sequential reference (rodinia openmp/lud/base/lud_base.c: lud_base): Doolittle in place,
# U's row then L's column for each i, one thread --------------------------------------------------------------


@gk.kernel
def lud_base(a, size):
    for i in range(size):
        for j in range(i, size):
            s = a[i * size + j]
            for k in range(i):
                s -= a[i * size + k] * a[k * size + j]
            a[i * size + j] = s
        for j in range(i + 1, size):
            s = a[j * size + i]
            for k in range(i):
                s -= a[j * size + k] * a[k * size + i]
            a[j * size + i] = s / a[i * size + i]
