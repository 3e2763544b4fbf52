"""Session 53's sixth round of ported kernels, part one: the LLNL RAJA Performance Suite's apps and LCALS loops
(ENERGY's six loops and PRESSURE's two as programs, VOL3D's hexahedron volume on a 3-D launch over flattened node
arrays, DEL_DOT_VEC_2D gathered through an int zone list, HYDRO_2D, EOS, INT_PREDICT written in place, PLANCKIAN's
two outputs, FIR's constant coefficient table, LTIMES' 3-D accumulate, TRAP_INT's atomic sum through a
`@gk.func`). Written here from the algorithms of the files cited (LLNL/RAJAPerf src/apps/*.hpp, src/lcals/*.hpp,
src/basic/*.hpp); used by tests/library/test_ported_hpc6.py (inputs and references in ported_hpc6_cases.py)."""

import math

import gradkern as gk

# ---- RAJAPerf src/apps/ENERGY.hpp: LULESH's energy update as six loops over zones, each a launch; branches on the
# sign of delvc, the tiny-ssc guard, the cut-offs that zero small values and the floor emin ----------------------


@gk.func
def energy_ssc(pbvc, e, vv, bvc, p, rho0):
    ssc = (pbvc * e + vv * vv * bvc * p) / rho0
    if ssc <= 0.1111111e-36:
        ssc = 0.3333333e-18
    else:
        ssc = math.sqrt(ssc)
    return ssc


@gk.kernel
def energy_1(e_new, e_old, delvc, p_old, q_old, work):
    i = gk.tid()
    e_new[i] = e_old[i] - 0.5 * delvc[i] * (p_old[i] + q_old[i]) + 0.5 * work[i]


@gk.kernel
def energy_2(q_new, e_new, delvc, comp_half, p_half, bvc, pbvc, ql_old, qq_old, rho0):
    i = gk.tid()
    if delvc[i] > 0.0:
        q_new[i] = 0.0
    else:
        vhalf = 1.0 / (1.0 + comp_half[i])
        q_new[i] = energy_ssc(pbvc[i], e_new[i], vhalf, bvc[i], p_half[i], rho0) * ql_old[i] + qq_old[i]


@gk.kernel
def energy_3(e_new, delvc, p_old, q_old, p_half, q_new):
    i = gk.tid()
    e_new[i] = e_new[i] + 0.5 * delvc[i] * (3.0 * (p_old[i] + q_old[i]) - 4.0 * (p_half[i] + q_new[i]))


@gk.kernel
def energy_4(e_new, work, e_cut, emin):
    i = gk.tid()
    e_new[i] += 0.5 * work[i]
    if abs(e_new[i]) < e_cut:
        e_new[i] = 0.0
    if e_new[i] < emin:
        e_new[i] = emin


@gk.kernel
def energy_5(e_new, delvc, p_old, q_old, p_half, q_new, p_new, pbvc, vnewc, bvc, ql_old, qq_old, rho0, e_cut, emin):
    i = gk.tid()
    q_tilde = 0.0
    if delvc[i] <= 0.0:
        q_tilde = energy_ssc(pbvc[i], e_new[i], vnewc[i], bvc[i], p_new[i], rho0) * ql_old[i] + qq_old[i]
    e_new[i] = e_new[i] - (7.0 * (p_old[i] + q_old[i]) - 8.0 * (p_half[i] + q_new[i]) + (p_new[i] + q_tilde)) * \
        delvc[i] / 6.0
    if abs(e_new[i]) < e_cut:
        e_new[i] = 0.0
    if e_new[i] < emin:
        e_new[i] = emin


@gk.kernel
def energy_6(q_new, e_new, delvc, pbvc, vnewc, bvc, p_new, ql_old, qq_old, rho0, q_cut):
    i = gk.tid()
    if delvc[i] <= 0.0:
        q_new[i] = energy_ssc(pbvc[i], e_new[i], vnewc[i], bvc[i], p_new[i], rho0) * ql_old[i] + qq_old[i]
        if abs(q_new[i]) < q_cut:
            q_new[i] = 0.0


def energy(e_new, e_old, delvc, p_new, p_old, q_new, q_old, work, comp_half, p_half, bvc, pbvc, ql_old, qq_old,
           vnewc, rho0, e_cut, emin, q_cut, backend=None):
    """ENERGY's six loops in order, as RAJAPerf's CUDA variant launches them."""
    n = e_new.shape[0]
    gk.launch(energy_1, n, e_new, e_old, delvc, p_old, q_old, work, backend=backend)
    gk.launch(energy_2, n, q_new, e_new, delvc, comp_half, p_half, bvc, pbvc, ql_old, qq_old, rho0, backend=backend)
    gk.launch(energy_3, n, e_new, delvc, p_old, q_old, p_half, q_new, backend=backend)
    gk.launch(energy_4, n, e_new, work, e_cut, emin, backend=backend)
    gk.launch(energy_5, n, e_new, delvc, p_old, q_old, p_half, q_new, p_new, pbvc, vnewc, bvc, ql_old, qq_old, rho0,
              e_cut, emin, backend=backend)
    gk.launch(energy_6, n, q_new, e_new, delvc, pbvc, vnewc, bvc, p_new, ql_old, qq_old, rho0, q_cut,
              backend=backend)


# ---- RAJAPerf src/apps/PRESSURE.hpp: bvc from the compression, then the pressure with its three guards (the
# cut-off, the volume above eosvmax, the floor pmin) ------------------------------------------------------------


@gk.kernel
def pressure_1(bvc, compression, cls):
    i = gk.tid()
    bvc[i] = cls * (compression[i] + 1.0)


@gk.kernel
def pressure_2(p_new, bvc, e_old, vnewc, p_cut, eosvmax, pmin):
    i = gk.tid()
    p_new[i] = bvc[i] * e_old[i]
    if abs(p_new[i]) < p_cut:
        p_new[i] = 0.0
    if vnewc[i] >= eosvmax:
        p_new[i] = 0.0
    if p_new[i] < pmin:
        p_new[i] = pmin


def pressure(bvc, p_new, compression, e_old, vnewc, cls, p_cut, eosvmax, pmin, backend=None):
    n = bvc.shape[0]
    gk.launch(pressure_1, n, bvc, compression, cls, backend=backend)
    gk.launch(pressure_2, n, p_new, bvc, e_old, vnewc, p_cut, eosvmax, pmin, backend=backend)


# ---- RAJAPerf src/apps/VOL3D.hpp: a hexahedral zone's volume from its eight nodes, the nodes at the flattened
# offsets 0, 1, jp + 1, jp, kp, kp + 1, kp + jp + 1, kp + jp of the zone's first node (the NDPTRSET pointers);
# here a thread per zone of a 3-D launch ------------------------------------------------------------------------


@gk.kernel
def vol3d(x, y, z, vol, jp, kp, vnormq):
    k, j, ii = gk.tid()
    i = k * kp + j * jp + ii
    x71 = x[i + kp + jp] - x[i + 1]
    x72 = x[i + kp + jp] - x[i + jp + 1]
    x74 = x[i + kp + jp] - x[i + kp]
    x30 = x[i + jp] - x[i]
    x50 = x[i + kp + 1] - x[i]
    x60 = x[i + kp + jp + 1] - x[i]
    y71 = y[i + kp + jp] - y[i + 1]
    y72 = y[i + kp + jp] - y[i + jp + 1]
    y74 = y[i + kp + jp] - y[i + kp]
    y30 = y[i + jp] - y[i]
    y50 = y[i + kp + 1] - y[i]
    y60 = y[i + kp + jp + 1] - y[i]
    z71 = z[i + kp + jp] - z[i + 1]
    z72 = z[i + kp + jp] - z[i + jp + 1]
    z74 = z[i + kp + jp] - z[i + kp]
    z30 = z[i + jp] - z[i]
    z50 = z[i + kp + 1] - z[i]
    z60 = z[i + kp + jp + 1] - z[i]
    xps = x71 + x60
    yps = y71 + y60
    zps = z71 + z60
    cyz = y72 * z30 - z72 * y30
    czx = z72 * x30 - x72 * z30
    cxy = x72 * y30 - y72 * x30
    vol[k, j, ii] = xps * cyz + yps * czx + zps * cxy
    xps = x72 + x50
    yps = y72 + y50
    zps = z72 + z50
    cyz = y74 * z60 - z74 * y60
    czx = z74 * x60 - x74 * z60
    cxy = x74 * y60 - y74 * x60
    vol[k, j, ii] += xps * cyz + yps * czx + zps * cxy
    xps = x74 + x30
    yps = y74 + y30
    zps = z74 + z30
    cyz = y71 * z50 - z71 * y50
    czx = z71 * x50 - x71 * z50
    cxy = x71 * y50 - y71 * x50
    vol[k, j, ii] += xps * cyz + yps * czx + zps * cxy
    vol[k, j, ii] *= vnormq


# ---- RAJAPerf src/apps/DEL_DOT_VEC_2D.hpp: the divergence of a nodal vector field on the real zones, listed in
# an int array (the _INDEX variant: i = real_zones[ii]); the four nodes at 0, 1, jp + 1, jp -----------------------


@gk.kernel
def del_dot_vec_2d(x, y, xdot, ydot, div, real_zones, jp, ptiny):
    ii = gk.tid()
    i = real_zones[ii]
    half = 0.5
    xi = half * (x[i + 1] + x[i + jp + 1] - x[i + jp] - x[i])
    xj = half * (x[i + jp + 1] + x[i + jp] - x[i] - x[i + 1])
    yi = half * (y[i + 1] + y[i + jp + 1] - y[i + jp] - y[i])
    yj = half * (y[i + jp + 1] + y[i + jp] - y[i] - y[i + 1])
    fxi = half * (xdot[i + 1] + xdot[i + jp + 1] - xdot[i + jp] - xdot[i])
    fxj = half * (xdot[i + jp + 1] + xdot[i + jp] - xdot[i] - xdot[i + 1])
    fyi = half * (ydot[i + 1] + ydot[i + jp + 1] - ydot[i + jp] - ydot[i])
    fyj = half * (ydot[i + jp + 1] + ydot[i + jp] - ydot[i] - ydot[i + 1])
    rarea = 1.0 / (xi * yj - xj * yi + ptiny)
    dfxdx = rarea * (fxi * yj - fxj * yi)
    dfydy = rarea * (fyj * xi - fyi * xj)
    affine = (ydot[i + 1] + ydot[i + jp + 1] + ydot[i + jp] + ydot[i]) / (y[i + 1] + y[i + jp + 1] + y[i + jp] + y[i])
    div[i] = dfxdx + dfydy + affine


# ---- RAJAPerf src/lcals/HYDRO_2D.hpp (LCALS loop 18): three loops over the interior of a (kn, jn) grid, each a
# launch over the whole grid whose boundary threads return early ------------------------------------------------


@gk.kernel
def hydro_2d_1(za, zb, zp, zq, zr, zm):
    k, j = gk.tid()
    if k < 1 or j < 1 or k >= zp.shape[0] - 1 or j >= zp.shape[1] - 1:
        return
    za[k, j] = (zp[k + 1, j - 1] + zq[k + 1, j - 1] - zp[k, j - 1] - zq[k, j - 1]) * (zr[k, j] + zr[k, j - 1]) / \
        (zm[k, j - 1] + zm[k + 1, j - 1])
    zb[k, j] = (zp[k, j - 1] + zq[k, j - 1] - zp[k, j] - zq[k, j]) * (zr[k, j] + zr[k - 1, j]) / \
        (zm[k, j] + zm[k, j - 1])


@gk.kernel
def hydro_2d_2(zu, zv, za, zb, zz, zr, s):
    k, j = gk.tid()
    if k < 1 or j < 1 or k >= zu.shape[0] - 1 or j >= zu.shape[1] - 1:
        return
    zu[k, j] += s * (za[k, j] * (zz[k, j] - zz[k, j + 1]) - za[k, j - 1] * (zz[k, j] - zz[k, j - 1])
                     - zb[k, j] * (zz[k, j] - zz[k - 1, j]) + zb[k + 1, j] * (zz[k, j] - zz[k + 1, j]))
    zv[k, j] += s * (za[k, j] * (zr[k, j] - zr[k, j + 1]) - za[k, j - 1] * (zr[k, j] - zr[k, j - 1])
                     - zb[k, j] * (zr[k, j] - zr[k - 1, j]) + zb[k + 1, j] * (zr[k, j] - zr[k + 1, j]))


@gk.kernel
def hydro_2d_3(zroout, zzout, zr, zz, zu, zv, t):
    k, j = gk.tid()
    if k < 1 or j < 1 or k >= zr.shape[0] - 1 or j >= zr.shape[1] - 1:
        return
    zroout[k, j] = zr[k, j] + t * zu[k, j]
    zzout[k, j] = zz[k, j] + t * zv[k, j]


def hydro_2d(za, zb, zp, zq, zr, zm, zu, zv, zz, zroout, zzout, s, t, backend=None):
    n = zp.shape
    gk.launch(hydro_2d_1, n, za, zb, zp, zq, zr, zm, backend=backend)
    gk.launch(hydro_2d_2, n, zu, zv, za, zb, zz, zr, s, backend=backend)
    gk.launch(hydro_2d_3, n, zroout, zzout, zr, zz, zu, zv, t, backend=backend)


# ---- RAJAPerf src/lcals/EOS.hpp (LCALS loop 7, the equation of state fragment): u read at i .. i + 6 ------------


@gk.kernel
def lcals_eos(x, y, z, u, q, r, t):
    i = gk.tid()
    x[i] = u[i] + r * (z[i] + r * y[i]) + t * (u[i + 3] + r * (u[i + 2] + r * u[i + 1]) +
                                              t * (u[i + 6] + q * (u[i + 5] + q * u[i + 4])))


# ---- RAJAPerf src/lcals/INT_PREDICT.hpp (LCALS loop 9): px read at i + offset * k, k = 2 .. 12, and written at i,
# in place (offset = the run-time length, so no thread reads what another writes) ---------------------------------


@gk.kernel
def int_predict(px, offset, dm22, dm23, dm24, dm25, dm26, dm27, dm28, c0):
    i = gk.tid()
    px[i] = dm28 * px[i + offset * 12] + dm27 * px[i + offset * 11] + dm26 * px[i + offset * 10] + \
        dm25 * px[i + offset * 9] + dm24 * px[i + offset * 8] + dm23 * px[i + offset * 7] + \
        dm22 * px[i + offset * 6] + c0 * (px[i + offset * 4] + px[i + offset * 5]) + px[i + offset * 2]


# ---- RAJAPerf src/lcals/PLANCKIAN.hpp (LCALS loop 22): y written, then read back for w -----------------------------


@gk.kernel
def planckian(x, y, u, v, w):
    i = gk.tid()
    y[i] = u[i] / v[i]
    w[i] = x[i] / (math.exp(y[i]) - 1.0)


# ---- RAJAPerf src/apps/FIR.hpp: a 16-tap filter whose coefficients are a constant table (the CUDA variant keeps
# them in __constant__ memory) ----------------------------------------------------------------------------------

FIR_COEFF = (3.0, -1.0, -1.0, -1.0, -1.0, 3.0, -1.0, -1.0, -1.0, -1.0, 3.0, -1.0, -1.0, -1.0, -1.0, 3.0)


@gk.kernel
def fir(inp, out):
    i = gk.tid()
    s = 0.0
    for j in range(16):
        s += FIR_COEFF[j] * inp[i + j]
    out[i] = s


# ---- RAJAPerf src/apps/LTIMES_NOVIEW.hpp: phi[m, g, z] += sum over d of ell[m, d] psi[d, g, z], a thread per
# (m, g, z) of a 3-D launch, accumulated in place --------------------------------------------------------------


@gk.kernel
def ltimes(phi, ell, psi, num_d):
    m, g, z = gk.tid()
    for d in range(num_d):
        phi[m, g, z] += ell[m, d] * psi[d, g, z]


# ---- RAJAPerf src/basic/TRAP_INT.hpp: the trapezoid rule for 1 / |(x, y) - (xp, yp)| along x, the integrand a
# device function, each thread's term added to one shared sum by an atomic (the CUDA variant's reduction) --------


@gk.func
def trap_int_func(x, y, xp, yp):
    denom = (x - xp) * (x - xp) + (y - yp) * (y - yp)
    return 1.0 / math.sqrt(denom)


@gk.kernel
def trap_int(sumx, x0, h, y, xp, yp):
    i = gk.tid()
    x = x0 + i * h
    gk.atomic_add(sumx, 0, trap_int_func(x, y, xp, yp) * h)


# ---- RAJAPerf src/apps/NODAL_ACCUMULATION_3D.hpp: each zone adds an eighth of its value to its eight nodes, by
# atomics; the add a device function called as a statement (C's `__device__ void` helper) -----------------------


@gk.func
def add_to_node(x, n, v):
    gk.atomic_add(x, n, v)


@gk.kernel
def nodal_accumulation_3d(vol, x, jp, kp):
    k, j, ii = gk.tid()
    i = k * kp + j * jp + ii
    val = 0.125 * vol[k, j, ii]
    add_to_node(x, i, val)
    add_to_node(x, i + 1, val)
    add_to_node(x, i + jp, val)
    add_to_node(x, i + jp + 1, val)
    add_to_node(x, i + kp, val)
    add_to_node(x, i + kp + 1, val)
    add_to_node(x, i + kp + jp, val)
    add_to_node(x, i + kp + jp + 1, val)
