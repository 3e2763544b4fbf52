"""Kernels in the shape of an ocean model's hot spots (issue 29): the code of
benchmarks/compile/compile_time.py's real-code rows and of benchmarks/compile/realcode_check.py.

Written for gradkern in the *shape* of the three Veros kernels that
pyhpc-benchmarks times (nothing is copied from either; the coefficients and
formulas are this file's own):

* `eos`: a seawater-like equation of state, a 50-term polynomial in three
  variables (a square root of salinity, temperature, pressure) in a `@gk.func`,
  called from a kernel over a 3-D launch;
* `isoneutral`: a "slope and taper" program, 7 launches over 24 3-D arrays
  (and 9 1-D grid arrays), loop nests starting at 1 (`i = ti + 1`), small
  constant-range inner loops, `continue` guards at the vertical edges, min/max
  tapers, several outputs;
* `superbee`: a flux-limited advection step, three superbee-limited fluxes
  with early returns at the boundaries, over a 3-D launch.

Each comes with a hand-written Numba version of its primal
(`numba.njit(parallel=True)`, `prange` over the outer axis, no fastmath) and a
JAX version (for `jax.jit(jax.grad(...))`, imported only when asked for).

The slopes of the isoneutral program are 5-D, `(x, y, z, 2, 2)`, indexed
`Ai_ez[i, j, k, ip, kr]` as in the original.
"""

from __future__ import annotations

import math

import numba
import numpy as np

import gradkern as gk

# ---- (a) equation of state ---------------------------------------------------------------------------------------


def _density_polynomial(xs, ys, z):
    """50 terms in xs (a square root of salinity), ys (temperature) and z (pressure), Horner in xs and z."""
    v00 = 1024.5 + xs * (3.4 + xs * (1.3 + xs * (-1.0 + xs * (0.4 + xs * (0.15)))))
    v01 = 2.6 + xs * (-2.0 + xs * (0.8 + xs * (0.3 + xs * (-0.2375))))
    v02 = 1.6 + xs * (0.6 + xs * (-0.475 + xs * (0.1875)))
    v03 = -0.95 + xs * (0.375 + xs * (0.1375))
    v04 = 0.275 + xs * (-0.225)
    v05 = 0.175
    v10 = 3.0 + xs * (1.1 + xs * (-0.9 + xs * (0.35 + xs * (0.125))))
    v11 = -1.8 + xs * (0.7 + xs * (0.25 + xs * (-0.2125)))
    v12 = 0.5 + xs * (-0.425 + xs * (0.1625))
    v13 = 0.325 + xs * (0.25)
    v14 = -0.2
    v20 = 2.0 + xs * (-0.8 + xs * (0.3 + xs * (0.2375)))
    v21 = 0.6 + xs * (0.475 + xs * (-0.1875))
    v22 = -0.375 + xs * (0.1375)
    v23 = 0.225
    v30 = -0.7 + xs * (0.25)
    v31 = 0.425
    v40 = 0.475
    p0 = v00 + v01 * ys + v02 * ys ** 2 + v03 * ys ** 3 + v04 * ys ** 4 + v05 * ys ** 5
    p1 = v10 + v11 * ys + v12 * ys ** 2 + v13 * ys ** 3 + v14 * ys ** 4
    p2 = v20 + v21 * ys + v22 * ys ** 2 + v23 * ys ** 3
    p3 = v30 + v31 * ys
    p4 = v40
    return p0 + z * (p1 + z * (p2 + z * (p3 + z * p4)))


density_polynomial = gk.func(_density_polynomial)


@gk.func
def density(sa, ct, p):
    xs = math.sqrt(0.025 * sa + 0.6)
    return density_polynomial(xs, ct * 0.025, p * 1e-4)


@gk.kernel
def eos_density(sa, ct, p, rho):
    i, j, k = gk.tid()
    rho[i, j, k] = density(sa[i, j, k], ct[i, j, k], p[k])


def eos(sa, ct, p, rho):
    gk.launch(eos_density, sa.shape, sa, ct, p, rho)


_density_polynomial_nb = numba.njit(_density_polynomial)


@numba.njit
def _density_nb(sa, ct, p):
    xs = math.sqrt(0.025 * sa + 0.6)
    return _density_polynomial_nb(xs, ct * 0.025, p * 1e-4)


@numba.njit(parallel=True)
def eos_numba(sa, ct, p, rho):
    nx, ny, nz = sa.shape
    for i in numba.prange(nx):
        for j in range(ny):
            for k in range(nz):
                rho[i, j, k] = _density_nb(sa[i, j, k], ct[i, j, k], p[k])


def eos_inputs(shape, seed=0):
    """Salinity, temperature, pressure (per level) and the output, in ocean-like ranges."""
    rng = np.random.default_rng(seed)
    nx, ny, nz = shape
    return (rng.uniform(30.0, 38.0, shape), rng.uniform(-2.0, 30.0, shape), rng.uniform(0.0, 5000.0, nz),
            np.zeros(shape))


def eos_jax_loss():
    """loss(sa, ct, p, w) = Σ w ρ(sa, ct, p) in JAX."""
    import jax.numpy as jnp

    def loss(sa, ct, p, w):
        xs = jnp.sqrt(0.025 * sa + 0.6)
        return jnp.sum(w * _density_polynomial(xs, ct * 0.025, p[None, None, :] * 1e-4))
    return loss


# ---- (b) isoneutral slopes and tapers: a 7-launch program ------------------------------------------------------

EPSLN = 1e-20
K_ISO_STEEP = 50.0
SLOPE_MAX = 1e-3  # the taper's critical slope
SLOPE_WIDTH = 1e-3  # and its width


def _taper(slope):
    """1 for flat slopes, 0 for steep ones, a tanh in between."""
    return 0.5 * (1.0 + math.tanh((SLOPE_MAX - abs(slope)) / SLOPE_WIDTH))


taper = gk.func(_taper)
_taper_nb = numba.njit(_taper)


@gk.kernel
def density_derivatives(salt, temp, zt, maskT, drdT, drdS):
    """∂ρ/∂T and ∂ρ/∂S of a quadratic equation of state with pressure dependence, masked."""
    i, j, k = gk.tid()
    t = temp[i, j, k] - 10.0
    s = salt[i, j, k] - 35.0
    z = abs(zt[k])
    drdT[i, j, k] = maskT[i, j, k] * -1024.0 * (1.67e-4 + 1.0e-5 * t + 2.2e-8 * z - 1.0e-6 * s)
    drdS[i, j, k] = maskT[i, j, k] * 1024.0 * (7.6e-4 - 1.0e-6 * t + 2.0e-7 * s)


@gk.kernel
def horizontal_gradients(temp, salt, maskU, maskV, dxu, dyu, cost, cosu, dTdx, dSdx, dTdy, dSdy):
    i, j, k = gk.tid()
    fx = maskU[i, j, k] / (cost[j] * dxu[i])
    dTdx[i, j, k] = fx * (temp[i + 1, j, k] - temp[i, j, k])
    dSdx[i, j, k] = fx * (salt[i + 1, j, k] - salt[i, j, k])
    fy = maskV[i, j, k] * cosu[j] / dyu[j]
    dTdy[i, j, k] = fy * (temp[i, j + 1, k] - temp[i, j, k])
    dSdy[i, j, k] = fy * (salt[i, j + 1, k] - salt[i, j, k])


@gk.kernel
def vertical_gradients(temp, salt, maskW, dzw, dTdz, dSdz):
    i, j, k = gk.tid()
    fz = maskW[i, j, k] / dzw[k]
    dTdz[i, j, k] = fz * (temp[i, j, k + 1] - temp[i, j, k])
    dSdz[i, j, k] = fz * (salt[i, j, k + 1] - salt[i, j, k])


@gk.kernel
def slopes_east(drdT, drdS, dTdx, dSdx, dTdz, dSdz, maskU, K_iso, dzw, dzt, K_11, Ai_ez):
    """Slopes at the eastern faces from the neighbouring vertical gradients, tapered; K_11."""
    ti, tj, k = gk.tid()
    i = ti + 1
    j = tj + 2
    diffloc = 0.5 * (K_iso[i, j, k] + K_iso[i + 1, j, k])
    sumz = 0.0
    for kr in range(2):
        if k == 0 and kr == 0:
            continue
        for ip in range(2):
            drodxe = drdT[i + ip, j, k] * dTdx[i, j, k] + drdS[i + ip, j, k] * dSdx[i, j, k]
            drodze = drdT[i + ip, j, k] * dTdz[i + ip, j, k + kr - 1] + drdS[i + ip, j, k] * dSdz[i + ip, j, k + kr - 1]
            sxe = -drodxe / (min(0.0, drodze) - EPSLN)
            t = taper(sxe)
            sumz += dzw[k + kr - 1] * maskU[i, j, k] * max(K_ISO_STEEP, diffloc * t)
            Ai_ez[i, j, k, ip, kr] = t * sxe * maskU[i, j, k]
    K_11[i, j, k] = sumz / (4.0 * dzt[k])


@gk.kernel
def slopes_north(drdT, drdS, dTdy, dSdy, dTdz, dSdz, maskV, K_iso, dzw, dzt, K_22, Ai_nz):
    ti, tj, k = gk.tid()
    i = ti + 1
    j = tj + 2
    diffloc = 0.5 * (K_iso[i, j, k] + K_iso[i, j + 1, k])
    sumz = 0.0
    for kr in range(2):
        if k == 0 and kr == 0:
            continue
        for jp in range(2):
            drodyn = drdT[i, j + jp, k] * dTdy[i, j, k] + drdS[i, j + jp, k] * dSdy[i, j, k]
            drodzn = drdT[i, j + jp, k] * dTdz[i, j + jp, k + kr - 1] + drdS[i, j + jp, k] * dSdz[i, j + jp, k + kr - 1]
            syn = -drodyn / (min(0.0, drodzn) - EPSLN)
            t = taper(syn)
            sumz += dzw[k + kr - 1] * maskV[i, j, k] * max(K_ISO_STEEP, diffloc * t)
            Ai_nz[i, j, k, jp, kr] = t * syn * maskV[i, j, k]
    K_22[i, j, k] = sumz / (4.0 * dzt[k])


@gk.kernel
def slopes_bottom_x(drdT, drdS, dTdx, dSdx, dTdz, dSdz, maskW, K_iso, dxu, dxt, K_33, Ai_bx):
    """Slopes at the bottom faces from the neighbouring zonal gradients, tapered; K_33's zonal part."""
    ti, tj, k = gk.tid()
    i = ti + 1
    j = tj + 2
    nz = drdT.shape[2]
    sumx = 0.0
    for ip in range(2):
        for kr in range(2):
            if k == nz - 1 and kr == 1:
                continue
            drodzb = drdT[i, j, k + kr] * dTdz[i, j, k] + drdS[i, j, k + kr] * dSdz[i, j, k]
            drodxb = drdT[i, j, k + kr] * dTdx[i - 1 + ip, j, k + kr] + drdS[i, j, k + kr] * dSdx[i - 1 + ip, j, k + kr]
            sxb = -drodxb / (min(0.0, drodzb) - EPSLN)
            t = taper(sxb)
            sumx += dxu[i - 1 + ip] * K_iso[i, j, k] * t * sxb * sxb * maskW[i, j, k]
            Ai_bx[i, j, k, ip, kr] = t * sxb * maskW[i, j, k]
    K_33[i, j, k] = sumx / (4.0 * dxt[i])


@gk.kernel
def slopes_bottom_y(drdT, drdS, dTdy, dSdy, dTdz, dSdz, maskW, K_iso, dyu, dyt, cost, K_33, Ai_by):
    """The meridional part, added to K_33 (an in-place update); K_33 vanishes at the last level."""
    ti, tj, k = gk.tid()
    i = ti + 1
    j = tj + 2
    nz = drdT.shape[2]
    sumy = 0.0
    for jp in range(2):
        for kr in range(2):
            if k == nz - 1 and kr == 1:
                continue
            drodzb = drdT[i, j, k + kr] * dTdz[i, j, k] + drdS[i, j, k + kr] * dSdz[i, j, k]
            drodyb = drdT[i, j, k + kr] * dTdy[i, j - 1 + jp, k + kr] + drdS[i, j, k + kr] * dSdy[i, j - 1 + jp, k + kr]
            syb = -drodyb / (min(0.0, drodzb) - EPSLN)
            t = taper(syb)
            sumy += dyu[j - 1 + jp] * K_iso[i, j, k] * t * syb * syb * maskW[i, j, k]
            Ai_by[i, j, k, jp, kr] = t * syb * maskW[i, j, k]
    if k == nz - 1:
        K_33[i, j, k] = 0.0
    else:
        K_33[i, j, k] += sumy / (4.0 * dyt[j] * cost[j])


def isoneutral(maskT, maskU, maskV, maskW, dxt, dxu, dyt, dyu, dzt, dzw, cost, cosu, salt, temp, zt, K_iso,
               K_11, K_22, K_33, Ai_ez, Ai_nz, Ai_bx, Ai_by):
    """The program: 7 launches; 8 temporaries allocated here (internal shadows in a gradient)."""
    nx, ny, nz = temp.shape
    drdT, drdS, dTdx, dSdx, dTdy, dSdy, dTdz, dSdz = (np.zeros_like(temp) for _ in range(8))
    gk.launch(density_derivatives, (nx, ny, nz), salt, temp, zt, maskT, drdT, drdS)
    gk.launch(horizontal_gradients, (nx - 1, ny - 1, nz), temp, salt, maskU, maskV, dxu, dyu, cost, cosu,
              dTdx, dSdx, dTdy, dSdy)
    gk.launch(vertical_gradients, (nx, ny, nz - 1), temp, salt, maskW, dzw, dTdz, dSdz)
    inner = (nx - 3, ny - 4, nz)
    gk.launch(slopes_east, inner, drdT, drdS, dTdx, dSdx, dTdz, dSdz, maskU, K_iso, dzw, dzt, K_11, Ai_ez)
    gk.launch(slopes_north, inner, drdT, drdS, dTdy, dSdy, dTdz, dSdz, maskV, K_iso, dzw, dzt, K_22, Ai_nz)
    gk.launch(slopes_bottom_x, inner, drdT, drdS, dTdx, dSdx, dTdz, dSdz, maskW, K_iso, dxu, dxt, K_33, Ai_bx)
    gk.launch(slopes_bottom_y, inner, drdT, drdS, dTdy, dSdy, dTdz, dSdz, maskW, K_iso, dyu, dyt, cost, K_33, Ai_by)


ISONEUTRAL_OUTPUTS = ("K_11", "K_22", "K_33", "Ai_ez", "Ai_nz", "Ai_bx", "Ai_by")
ISONEUTRAL_ARGS = ("maskT", "maskU", "maskV", "maskW", "dxt", "dxu", "dyt", "dyu", "dzt", "dzw", "cost", "cosu",
                   "salt", "temp", "zt", "K_iso", *ISONEUTRAL_OUTPUTS)


def isoneutral_inputs(shape, seed=0) -> dict:
    """The program's 23 arguments by name: a stratified ocean (level 0 at the bottom, temperature rising
    upwards, so that most vertical density gradients are stable and the slopes near the taper's critical
    slope), land masks, a stretched grid; outputs zero."""
    rng = np.random.default_rng(seed)
    nx, ny, nz = shape
    height = np.linspace(0.0, 1.0, nz)
    a = {f"mask{c}": (rng.uniform(size=shape) > 0.1).astype(np.float64) for c in "TUVW"}
    a.update(dxt=rng.uniform(0.9e4, 1.1e4, nx), dxu=rng.uniform(0.9e4, 1.1e4, nx), dyt=rng.uniform(0.9e4, 1.1e4, ny),
             dyu=rng.uniform(0.9e4, 1.1e4, ny), dzt=rng.uniform(40.0, 60.0, nz), dzw=rng.uniform(40.0, 60.0, nz),
             cost=rng.uniform(0.5, 1.0, ny), cosu=rng.uniform(0.5, 1.0, ny),
             salt=35.0 + rng.uniform(-0.5, 0.5, shape), temp=5.0 + 15.0 * height + rng.uniform(-0.5, 0.5, shape),
             zt=-5000.0 * (1.0 - height), K_iso=rng.uniform(500.0, 1500.0, shape))
    for name in ("K_11", "K_22", "K_33"):
        a[name] = np.zeros(shape)
    for name in ("Ai_ez", "Ai_nz", "Ai_bx", "Ai_by"):
        a[name] = np.zeros((nx, ny, nz, 2, 2))
    return a


@numba.njit(parallel=True)
def isoneutral_numba(maskT, maskU, maskV, maskW, dxt, dxu, dyt, dyu, dzt, dzw, cost, cosu, salt, temp, zt, K_iso,
                     K_11, K_22, K_33, Ai_ez, Ai_nz, Ai_bx, Ai_by):
    """The same program as one Numba function of 7 parallel loop nests."""
    nx, ny, nz = temp.shape
    drdT = np.zeros_like(temp)
    drdS = np.zeros_like(temp)
    dTdx = np.zeros_like(temp)
    dSdx = np.zeros_like(temp)
    dTdy = np.zeros_like(temp)
    dSdy = np.zeros_like(temp)
    dTdz = np.zeros_like(temp)
    dSdz = np.zeros_like(temp)
    for i in numba.prange(nx):
        for j in range(ny):
            for k in range(nz):
                t = temp[i, j, k] - 10.0
                s = salt[i, j, k] - 35.0
                z = abs(zt[k])
                drdT[i, j, k] = maskT[i, j, k] * -1024.0 * (1.67e-4 + 1.0e-5 * t + 2.2e-8 * z - 1.0e-6 * s)
                drdS[i, j, k] = maskT[i, j, k] * 1024.0 * (7.6e-4 - 1.0e-6 * t + 2.0e-7 * s)
    for i in numba.prange(nx - 1):
        for j in range(ny - 1):
            for k in range(nz):
                fx = maskU[i, j, k] / (cost[j] * dxu[i])
                dTdx[i, j, k] = fx * (temp[i + 1, j, k] - temp[i, j, k])
                dSdx[i, j, k] = fx * (salt[i + 1, j, k] - salt[i, j, k])
                fy = maskV[i, j, k] * cosu[j] / dyu[j]
                dTdy[i, j, k] = fy * (temp[i, j + 1, k] - temp[i, j, k])
                dSdy[i, j, k] = fy * (salt[i, j + 1, k] - salt[i, j, k])
    for i in numba.prange(nx):
        for j in range(ny):
            for k in range(nz - 1):
                fz = maskW[i, j, k] / dzw[k]
                dTdz[i, j, k] = fz * (temp[i, j, k + 1] - temp[i, j, k])
                dSdz[i, j, k] = fz * (salt[i, j, k + 1] - salt[i, j, k])
    for i in numba.prange(1, nx - 2):
        for j in range(2, ny - 2):
            for k in range(nz):
                diffloc = 0.5 * (K_iso[i, j, k] + K_iso[i + 1, j, k])
                sumz = 0.0
                for kr in range(2):
                    if k == 0 and kr == 0:
                        continue
                    for ip in range(2):
                        drodxe = drdT[i + ip, j, k] * dTdx[i, j, k] + drdS[i + ip, j, k] * dSdx[i, j, k]
                        drodze = (drdT[i + ip, j, k] * dTdz[i + ip, j, k + kr - 1]
                                  + drdS[i + ip, j, k] * dSdz[i + ip, j, k + kr - 1])
                        sxe = -drodxe / (min(0.0, drodze) - EPSLN)
                        t = _taper_nb(sxe)
                        sumz += dzw[k + kr - 1] * maskU[i, j, k] * max(K_ISO_STEEP, diffloc * t)
                        Ai_ez[i, j, k, ip, kr] = t * sxe * maskU[i, j, k]
                K_11[i, j, k] = sumz / (4.0 * dzt[k])
    for i in numba.prange(1, nx - 2):
        for j in range(2, ny - 2):
            for k in range(nz):
                diffloc = 0.5 * (K_iso[i, j, k] + K_iso[i, j + 1, k])
                sumz = 0.0
                for kr in range(2):
                    if k == 0 and kr == 0:
                        continue
                    for jp in range(2):
                        drodyn = drdT[i, j + jp, k] * dTdy[i, j, k] + drdS[i, j + jp, k] * dSdy[i, j, k]
                        drodzn = (drdT[i, j + jp, k] * dTdz[i, j + jp, k + kr - 1]
                                  + drdS[i, j + jp, k] * dSdz[i, j + jp, k + kr - 1])
                        syn = -drodyn / (min(0.0, drodzn) - EPSLN)
                        t = _taper_nb(syn)
                        sumz += dzw[k + kr - 1] * maskV[i, j, k] * max(K_ISO_STEEP, diffloc * t)
                        Ai_nz[i, j, k, jp, kr] = t * syn * maskV[i, j, k]
                K_22[i, j, k] = sumz / (4.0 * dzt[k])
    for i in numba.prange(1, nx - 2):
        for j in range(2, ny - 2):
            for k in range(nz):
                sumx = 0.0
                for ip in range(2):
                    for kr in range(2):
                        if k == nz - 1 and kr == 1:
                            continue
                        drodzb = drdT[i, j, k + kr] * dTdz[i, j, k] + drdS[i, j, k + kr] * dSdz[i, j, k]
                        drodxb = (drdT[i, j, k + kr] * dTdx[i - 1 + ip, j, k + kr]
                                  + drdS[i, j, k + kr] * dSdx[i - 1 + ip, j, k + kr])
                        sxb = -drodxb / (min(0.0, drodzb) - EPSLN)
                        t = _taper_nb(sxb)
                        sumx += dxu[i - 1 + ip] * K_iso[i, j, k] * t * sxb * sxb * maskW[i, j, k]
                        Ai_bx[i, j, k, ip, kr] = t * sxb * maskW[i, j, k]
                K_33[i, j, k] = sumx / (4.0 * dxt[i])
    for i in numba.prange(1, nx - 2):
        for j in range(2, ny - 2):
            for k in range(nz):
                sumy = 0.0
                for jp in range(2):
                    for kr in range(2):
                        if k == nz - 1 and kr == 1:
                            continue
                        drodzb = drdT[i, j, k + kr] * dTdz[i, j, k] + drdS[i, j, k + kr] * dSdz[i, j, k]
                        drodyb = (drdT[i, j, k + kr] * dTdy[i, j - 1 + jp, k + kr]
                                  + drdS[i, j, k + kr] * dSdy[i, j - 1 + jp, k + kr])
                        syb = -drodyb / (min(0.0, drodzb) - EPSLN)
                        t = _taper_nb(syb)
                        sumy += dyu[j - 1 + jp] * K_iso[i, j, k] * t * syb * syb * maskW[i, j, k]
                        Ai_by[i, j, k, jp, kr] = t * syb * maskW[i, j, k]
                if k == nz - 1:
                    K_33[i, j, k] = 0.0
                else:
                    K_33[i, j, k] += sumy / (4.0 * dyt[j] * cost[j])


def isoneutral_jax_loss():
    """loss(salt, temp, consts, weights) = Σ_o ⟨w_o, o⟩ over the program's 7 outputs, in JAX (whole-array
    slices; the same arithmetic as the kernels). consts: the other inputs by name; weights: by output name."""
    import jax.numpy as jnp

    def taper_j(s):
        return 0.5 * (1.0 + jnp.tanh((SLOPE_MAX - jnp.abs(s)) / SLOPE_WIDTH))

    def program(salt, temp, c):
        nx, ny, nz = temp.shape
        t, s, z = temp - 10.0, salt - 35.0, jnp.abs(c["zt"])[None, None, :]
        drdT = c["maskT"] * -1024.0 * (1.67e-4 + 1.0e-5 * t + 2.2e-8 * z - 1.0e-6 * s)
        drdS = c["maskT"] * 1024.0 * (7.6e-4 - 1.0e-6 * t + 2.0e-7 * s)
        zero = jnp.zeros_like(temp)
        fx = c["maskU"][:-1, :-1] / (c["cost"][None, :-1, None] * c["dxu"][:-1, None, None])
        fy = c["maskV"][:-1, :-1] * (c["cosu"] / c["dyu"])[None, :-1, None]
        dTdx = zero.at[:-1, :-1].set(fx * (temp[1:, :-1] - temp[:-1, :-1]))
        dSdx = zero.at[:-1, :-1].set(fx * (salt[1:, :-1] - salt[:-1, :-1]))
        dTdy = zero.at[:-1, :-1].set(fy * (temp[:-1, 1:] - temp[:-1, :-1]))
        dSdy = zero.at[:-1, :-1].set(fy * (salt[:-1, 1:] - salt[:-1, :-1]))
        fz = c["maskW"][:, :, :-1] / c["dzw"][None, None, :-1]
        dTdz = zero.at[:, :, :-1].set(fz * (temp[:, :, 1:] - temp[:, :, :-1]))
        dSdz = zero.at[:, :, :-1].set(fz * (salt[:, :, 1:] - salt[:, :, :-1]))
        II, JJ = slice(1, nx - 2), slice(2, ny - 2)
        kk = jnp.arange(nz)[None, None, :]
        out = {}

        def shift(a, di, dj, dk):  # a[i + di, j + dj, k + dk] over the inner block (k + dk clipped, masked later)
            k = jnp.clip(jnp.arange(nz) + dk, 0, nz - 1)
            return a[1 + di:nx - 2 + di, 2 + dj:ny - 2 + dj][:, :, k]

        # east and north faces: kr in (0, 1) uses level k + kr - 1, skipped at k == 0, kr == 0
        for name, ai, dXdT, dXdS, mask, di, dj in (("K_11", "Ai_ez", dTdx, dSdx, "maskU", 1, 0),
                                                          ("K_22", "Ai_nz", dTdy, dSdy, "maskV", 0, 1)):
            m = c[mask][II, JJ]
            diffloc = 0.5 * (c["K_iso"][II, JJ] + shift(c["K_iso"], di, dj, 0))
            sumz = jnp.zeros_like(m)
            a = jnp.zeros((nx - 3, ny - 4, nz, 2, 2))
            for kr in range(2):
                valid = (kk > 0) | (kr == 1)
                for p in range(2):
                    rT, rS = shift(drdT, di * p, dj * p, 0), shift(drdS, di * p, dj * p, 0)
                    drodh = rT * dXdT[II, JJ] + rS * dXdS[II, JJ]
                    drodz = rT * shift(dTdz, di * p, dj * p, kr - 1) + rS * shift(dSdz, di * p, dj * p, kr - 1)
                    sl = -drodh / (jnp.minimum(0.0, drodz) - EPSLN)
                    tp = taper_j(sl)
                    dzw = c["dzw"][jnp.clip(jnp.arange(nz) + kr - 1, 0, nz - 1)][None, None, :]
                    sumz = sumz + jnp.where(valid, dzw * m * jnp.maximum(K_ISO_STEEP, diffloc * tp), 0.0)
                    a = a.at[:, :, :, p, kr].set(jnp.where(valid, tp * sl * m, 0.0))
            out[name] = zero.at[II, JJ].set(sumz / (4.0 * c["dzt"][None, None, :]))
            out[ai] = jnp.zeros((nx, ny, nz, 2, 2)).at[II, JJ].set(a)
        # bottom faces: kr in (0, 1) uses level k + kr, skipped at k == nz - 1, kr == 1
        K_33 = zero
        for ai, dXdT, dXdS, di, dj in (("Ai_bx", dTdx, dSdx, 1, 0), ("Ai_by", dTdy, dSdy, 0, 1)):
            m = c["maskW"][II, JJ]
            ssum = jnp.zeros_like(m)
            a = jnp.zeros((nx - 3, ny - 4, nz, 2, 2))
            for p in range(2):
                for kr in range(2):
                    valid = (kk < nz - 1) | (kr == 0)
                    rT, rS = shift(drdT, 0, 0, kr), shift(drdS, 0, 0, kr)
                    drodz = rT * dTdz[II, JJ] + rS * dSdz[II, JJ]
                    drodh = rT * shift(dXdT, di * (p - 1), dj * (p - 1), kr) + rS * shift(dXdS, di * (p - 1),
                                                                                          dj * (p - 1), kr)
                    sl = -drodh / (jnp.minimum(0.0, drodz) - EPSLN)
                    tp = taper_j(sl)
                    h = (c["dxu"][jnp.arange(1, nx - 2) - 1 + p][:, None, None] if di else
                         c["dyu"][jnp.arange(2, ny - 2) - 1 + p][None, :, None])
                    ssum = ssum + jnp.where(valid, h * c["K_iso"][II, JJ] * tp * sl * sl * m, 0.0)
                    a = a.at[:, :, :, p, kr].set(jnp.where(valid, tp * sl * m, 0.0))
            part = ssum / (4.0 * c["dxt"][II][:, None, None]) if di else \
                ssum / (4.0 * (c["dyt"] * c["cost"])[JJ][None, :, None])
            K_33 = K_33.at[II, JJ].add(part)
            out[ai] = jnp.zeros((nx, ny, nz, 2, 2)).at[II, JJ].set(a)
        out["K_33"] = K_33.at[:, :, nz - 1].set(0.0)
        return out

    def loss(salt, temp, consts, weights):
        out = program(salt, temp, consts)
        return sum(jnp.sum(weights[n] * out[n]) for n in ISONEUTRAL_OUTPUTS)
    loss.program = program
    return loss


# ---- (c) superbee flux-limited advection -----------------------------------------------------------------------


def _superbee(cr):
    return max(0.0, max(min(1.0, 2.0 * cr), min(2.0, cr)))


superbee = gk.func(_superbee)
_superbee_nb = numba.njit(_superbee)


def _limited_flux(vel, vm1, v0, vp1, vp2, mm1, m0, mp1, cfl):
    """The flux through the face between v0 and vp1: centred, limited towards upwind by superbee."""
    rjp = (vp2 - vp1) * mp1
    rj = (vp1 - v0) * m0
    rjm = (v0 - vm1) * mm1
    denom = rj
    if abs(rj) < 1e-20:
        denom = 1e-20
    if vel > 0.0:
        cr = rjm / denom
    else:
        cr = rjp / denom
    cr = superbee(cr)
    return vel * (vp1 + v0) * 0.5 - abs(vel) * ((1.0 - cr) + cfl * cr) * rj * 0.5


limited_flux = gk.func(_limited_flux)


@gk.kernel
def superbee_fluxes(var, u, v, w, maskT, dxt, dyt, dzw, cost, cosu, dt, flux_e, flux_n, flux_t):
    """The east, north and top fluxes of `var` at every inner cell; the top one down to the last level."""
    i, j, k = gk.tid()
    nx = var.shape[0]
    ny = var.shape[1]
    nz = var.shape[2]
    if i < 1 or i > nx - 3 or j < 1 or j > ny - 3:
        return
    vel = u[i, j, k]
    flux_e[i, j, k] = limited_flux(vel, var[i - 1, j, k], var[i, j, k], var[i + 1, j, k], var[i + 2, j, k],
                                   maskT[i, j, k] * maskT[i - 1, j, k], maskT[i + 1, j, k] * maskT[i, j, k],
                                   maskT[i + 2, j, k] * maskT[i + 1, j, k], abs(vel * dt / (cost[j] * dxt[i])))
    vel = v[i, j, k]
    flux_n[i, j, k] = cosu[j] * limited_flux(vel, var[i, j - 1, k], var[i, j, k], var[i, j + 1, k], var[i, j + 2, k],
                                             maskT[i, j, k] * maskT[i, j - 1, k], maskT[i, j + 1, k] * maskT[i, j, k],
                                             maskT[i, j + 2, k] * maskT[i, j + 1, k],
                                             abs(vel * dt / (cosu[j] * dyt[j])))
    if k == nz - 1:
        return
    km1 = max(k - 1, 0)
    kp2 = min(k + 2, nz - 1)
    vel = w[i, j, k]
    flux_t[i, j, k] = limited_flux(vel, var[i, j, km1], var[i, j, k], var[i, j, k + 1], var[i, j, kp2],
                                   maskT[i, j, k] * maskT[i, j, km1], maskT[i, j, k + 1] * maskT[i, j, k],
                                   maskT[i, j, kp2] * maskT[i, j, k + 1], abs(vel * dt / dzw[k]))


def superbee_step(var, u, v, w, maskT, dxt, dyt, dzw, cost, cosu, dt, flux_e, flux_n, flux_t):
    gk.launch(superbee_fluxes, var.shape, var, u, v, w, maskT, dxt, dyt, dzw, cost, cosu, dt, flux_e, flux_n, flux_t)


@numba.njit
def _flux_nb(vel, vm1, v0, vp1, vp2, mm1, m0, mp1, cfl):
    """_limited_flux with the Numba limiter (each compiler resolves the name `superbee` itself)."""
    rjp = (vp2 - vp1) * mp1
    rj = (vp1 - v0) * m0
    rjm = (v0 - vm1) * mm1
    denom = rj
    if abs(rj) < 1e-20:
        denom = 1e-20
    if vel > 0.0:
        cr = rjm / denom
    else:
        cr = rjp / denom
    cr = _superbee_nb(cr)
    return vel * (vp1 + v0) * 0.5 - abs(vel) * ((1.0 - cr) + cfl * cr) * rj * 0.5


@numba.njit(parallel=True)
def superbee_numba(var, u, v, w, maskT, dxt, dyt, dzw, cost, cosu, dt, flux_e, flux_n, flux_t):
    nx, ny, nz = var.shape
    for i in numba.prange(1, nx - 2):
        for j in range(1, ny - 2):
            for k in range(nz):
                vel = u[i, j, k]
                flux_e[i, j, k] = _flux_nb(vel, var[i - 1, j, k], var[i, j, k], var[i + 1, j, k], var[i + 2, j, k],
                                           maskT[i, j, k] * maskT[i - 1, j, k], maskT[i + 1, j, k] * maskT[i, j, k],
                                           maskT[i + 2, j, k] * maskT[i + 1, j, k], abs(vel * dt / (cost[j] * dxt[i])))
                vel = v[i, j, k]
                flux_n[i, j, k] = cosu[j] * _flux_nb(vel, var[i, j - 1, k], var[i, j, k], var[i, j + 1, k],
                                                     var[i, j + 2, k], maskT[i, j, k] * maskT[i, j - 1, k],
                                                     maskT[i, j + 1, k] * maskT[i, j, k],
                                                     maskT[i, j + 2, k] * maskT[i, j + 1, k],
                                                     abs(vel * dt / (cosu[j] * dyt[j])))
                if k == nz - 1:
                    continue
                km1 = max(k - 1, 0)
                kp2 = min(k + 2, nz - 1)
                vel = w[i, j, k]
                flux_t[i, j, k] = _flux_nb(vel, var[i, j, km1], var[i, j, k], var[i, j, k + 1], var[i, j, kp2],
                                           maskT[i, j, k] * maskT[i, j, km1], maskT[i, j, k + 1] * maskT[i, j, k],
                                           maskT[i, j, kp2] * maskT[i, j, k + 1], abs(vel * dt / dzw[k]))


SUPERBEE_ARGS = ("var", "u", "v", "w", "maskT", "dxt", "dyt", "dzw", "cost", "cosu", "dt", "flux_e", "flux_n",
                 "flux_t")


def superbee_inputs(shape, seed=0) -> dict:
    rng = np.random.default_rng(seed)
    nx, ny, nz = shape
    return dict(var=rng.uniform(10.0, 20.0, shape), u=rng.uniform(-1.0, 1.0, shape), v=rng.uniform(-1.0, 1.0, shape),
                w=rng.uniform(-1e-2, 1e-2, shape), maskT=(rng.uniform(size=shape) > 0.1).astype(np.float64),
                dxt=rng.uniform(0.9e4, 1.1e4, nx), dyt=rng.uniform(0.9e4, 1.1e4, ny), dzw=rng.uniform(40.0, 60.0, nz),
                cost=rng.uniform(0.5, 1.0, ny), cosu=rng.uniform(0.5, 1.0, ny), dt=3600.0,
                flux_e=np.zeros(shape), flux_n=np.zeros(shape), flux_t=np.zeros(shape))


def superbee_jax_loss():
    """loss(var, u, v, w, consts, weights) = Σ_o ⟨w_o, flux_o⟩ in JAX (whole-array slices)."""
    import jax.numpy as jnp

    def flux(vel, vm1, v0, vp1, vp2, mm1, m0, mp1, cfl):
        rjp, rj, rjm = (vp2 - vp1) * mp1, (vp1 - v0) * m0, (v0 - vm1) * mm1
        denom = jnp.where(jnp.abs(rj) < 1e-20, 1e-20, rj)
        cr = jnp.where(vel > 0.0, rjm, rjp) / denom
        cr = jnp.maximum(0.0, jnp.maximum(jnp.minimum(1.0, 2.0 * cr), jnp.minimum(2.0, cr)))
        return vel * (vp1 + v0) * 0.5 - jnp.abs(vel) * ((1.0 - cr) + cfl * cr) * rj * 0.5

    def loss(var, u, v, w, c, weights):
        nx, ny, nz = var.shape
        m, dt = c["maskT"], c["dt"]
        II, JJ = slice(1, nx - 2), slice(1, ny - 2)
        zero = jnp.zeros_like(var)

        def x(a, d):
            return a[1 + d:nx - 2 + d, 1:ny - 2]

        def y(a, d):
            return a[1:nx - 2, 1 + d:ny - 2 + d]
        dx = c["cost"][JJ][None, :, None] * c["dxt"][II][:, None, None]
        fe = flux(u[II, JJ], x(var, -1), x(var, 0), x(var, 1), x(var, 2), x(m, 0) * x(m, -1), x(m, 1) * x(m, 0),
                  x(m, 2) * x(m, 1), jnp.abs(u[II, JJ] * dt / dx))
        cu = c["cosu"][JJ][None, :, None]
        fn = cu * flux(v[II, JJ], y(var, -1), y(var, 0), y(var, 1), y(var, 2), y(m, 0) * y(m, -1), y(m, 1) * y(m, 0),
                       y(m, 2) * y(m, 1), jnp.abs(v[II, JJ] * dt / (cu * c["dyt"][JJ][None, :, None])))
        k = jnp.arange(nz - 1)
        km1, kp2 = jnp.maximum(k - 1, 0), jnp.minimum(k + 2, nz - 1)
        vi, mi = var[II, JJ], m[II, JJ]
        wt = w[II, JJ][:, :, :-1]
        ft = flux(wt, vi[:, :, km1], vi[:, :, k], vi[:, :, k + 1], vi[:, :, kp2], mi[:, :, k] * mi[:, :, km1],
                  mi[:, :, k + 1] * mi[:, :, k], mi[:, :, kp2] * mi[:, :, k + 1],
                  jnp.abs(wt * dt / c["dzw"][:-1][None, None, :]))
        out = {"flux_e": zero.at[II, JJ].set(fe), "flux_n": zero.at[II, JJ].set(fn),
               "flux_t": zero.at[II, JJ, :-1].set(ft)}
        return sum(jnp.sum(weights[n] * out[n]) for n in out), out
    return loss
