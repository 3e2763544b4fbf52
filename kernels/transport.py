"""Conservative finite-volume transport: upwind advection, Burgers, shallow water.

Every kernel is one explicit step of a finite-volume scheme in flux form,
un_i = u_i − c (F_{i+½} − F_{i−½}) (c = dt/h, the same h along every axis),
on a periodic grid: cell 0's left neighbour is cell n−1. What leaves a cell
through a face enters its neighbour through the same face, so Σ un = Σ u to
rounding (exactly conservative). Each thread computes its own cell from the
fluxes of its faces, recomputing a face's flux in both cells that share it
rather than storing it: a gather, whose primal and reverse are proved
race-free (the reverse is gathered too, docs/adjoint-forms.md).

Wrap-around indices are written with the thread index in every branch
(`ip = i + 1 if i < n - 1 else i + 1 - n`): each branch is the thread index
plus an offset, which the bounds proof, the race proof and the gathered
adjoint follow (`%` is not affine).

Kinks: the upwind choice max(v, 0), the Rusanov speed max(|a_L|, |a_R|) and
|u| are not differentiable at ties and at 0; their derivatives there follow
gradkern's conventions (transforms/derivatives.py)."""

import math

import gradkern as gk

__all__ = ["upwind_1d", "upwind_2d", "burgers_rusanov_1d", "shallow_water_2d"]


@gk.kernel
def upwind_1d(u, un, vel, c):
    """One step of first-order upwind advection u_t + (v u)_x = 0, periodic:
    un_i = u_i − c (F_{i+½} − F_{i−½}), F_{i−½} = max(v_{i−½}, 0) u_{i−1} + min(v_{i−½}, 0) u_i,
    with v_{i−½} = vel_i the velocity at the face between cells i−1 and i (either sign; face
    i−½ of cell 0 is the face between cells n−1 and 0). Stable for c |v| ≤ 1; conservative.

    `u`: (n,), read; `un`: (n,), written; `vel`: (n,) face velocities, read; `c`: dt/h, scalar.
    Launch: n threads, one per cell."""
    i = gk.tid()
    im = i - 1 if i > 0 else i - 1 + u.shape[0]
    ip = i + 1 if i < u.shape[0] - 1 else i + 1 - u.shape[0]
    ui = u[i]
    vl = vel[i]
    vr = vel[ip]
    fl = max(vl, 0.0) * u[im] + min(vl, 0.0) * ui
    fr = max(vr, 0.0) * ui + min(vr, 0.0) * u[ip]
    un[i] = ui - c * (fr - fl)


@gk.kernel
def upwind_2d(u, un, vx, vy, c):
    """One step of first-order upwind advection u_t + (v_x u)_x + (v_y u)_y = 0, periodic in both
    axes (axis 0 is x, axis 1 is y):
    un_ij = u_ij − c (F_{i+½,j} − F_{i−½,j} + G_{i,j+½} − G_{i,j−½}),
    F_{i−½,j} = max(vx_ij, 0) u_{i−1,j} + min(vx_ij, 0) u_ij, G_{i,j−½} = max(vy_ij, 0) u_{i,j−1} + min(vy_ij, 0) u_ij,
    vx_ij the x-velocity at the face between cells (i−1, j) and (i, j), vy_ij the y-velocity at the
    face between (i, j−1) and (i, j) (either sign). Stable for c (|v_x| + |v_y|) ≤ 1; conservative.

    `u`: (nx, ny), read; `un`: (nx, ny), written; `vx`, `vy`: (nx, ny) face velocities, read;
    `c`: dt/h, scalar.
    Launch: (nx, ny) threads, one per cell."""
    i, j = gk.tid()
    im = i - 1 if i > 0 else i - 1 + u.shape[0]
    ip = i + 1 if i < u.shape[0] - 1 else i + 1 - u.shape[0]
    jm = j - 1 if j > 0 else j - 1 + u.shape[1]
    jp = j + 1 if j < u.shape[1] - 1 else j + 1 - u.shape[1]
    uc = u[i, j]
    vw = vx[i, j]
    ve = vx[ip, j]
    vs = vy[i, j]
    vn = vy[i, jp]
    fw = max(vw, 0.0) * u[im, j] + min(vw, 0.0) * uc
    fe = max(ve, 0.0) * uc + min(ve, 0.0) * u[ip, j]
    gs = max(vs, 0.0) * u[i, jm] + min(vs, 0.0) * uc
    gn = max(vn, 0.0) * uc + min(vn, 0.0) * u[i, jp]
    un[i, j] = uc - c * (fe - fw + gn - gs)


@gk.func
def rusanov(fl, fr, ql, qr, a):
    """The Rusanov (local Lax–Friedrichs) flux of one conserved quantity through a face."""
    return 0.5 * (fl + fr) - 0.5 * a * (qr - ql)


@gk.kernel
def burgers_rusanov_1d(u, un, c):
    """One step of the inviscid Burgers equation u_t + (u²/2)_x = 0, periodic, with the Rusanov
    flux F_{i+½} = ½ (u_i²/2 + u_{i+1}²/2) − ½ α (u_{i+1} − u_i), α = max(|u_i|, |u_{i+1}|):
    un_i = u_i − c (F_{i+½} − F_{i−½}). Stable for c max |u| ≤ 1; conservative.

    `u`: (n,), read; `un`: (n,), written; `c`: dt/h, scalar.
    Launch: n threads, one per cell."""
    i = gk.tid()
    im = i - 1 if i > 0 else i - 1 + u.shape[0]
    ip = i + 1 if i < u.shape[0] - 1 else i + 1 - u.shape[0]
    ul = u[im]
    uc = u[i]
    ur = u[ip]
    fl = rusanov(0.5 * ul * ul, 0.5 * uc * uc, ul, uc, max(abs(ul), abs(uc)))
    fr = rusanov(0.5 * uc * uc, 0.5 * ur * ur, uc, ur, max(abs(uc), abs(ur)))
    un[i] = uc - c * (fr - fl)


@gk.kernel
def shallow_water_2d(h, hu, hv, hn, hun, hvn, g, c):
    """One step of the 2-D shallow-water equations, periodic in both axes (axis 0 is x, axis 1 is y),
    for the depth h and the momenta hu, hv:
    q_t + F(q)_x + G(q)_y = 0, q = (h, hu, hv), F = (hu, hu²/h + g h²/2, hu hv/h),
    G = (hv, hu hv/h, hv²/h + g h²/2), with Rusanov fluxes: through the face between cells L and R,
    ½ (F(q_L) + F(q_R)) − ½ a (q_R − q_L), a = max(|u_L| + √(g h_L), |u_R| + √(g h_R)) (u the
    velocity normal to the face); qn_ij = q_ij − c (F_{i+½,j} − F_{i−½,j} + G_{i,j+½} − G_{i,j−½}).
    Stable for c (|u| + |v| + 2√(g h)) ≤ 1; conserves mass and momentum; h must stay positive.

    `h`, `hu`, `hv`: (nx, ny), read; `hn`, `hun`, `hvn`: (nx, ny), written (the new state);
    `g`: gravity, scalar; `c`: dt/h (grid spacing), scalar.
    Launch: (nx, ny) threads, one per cell."""
    i, j = gk.tid()
    im = i - 1 if i > 0 else i - 1 + h.shape[0]
    ip = i + 1 if i < h.shape[0] - 1 else i + 1 - h.shape[0]
    jm = j - 1 if j > 0 else j - 1 + h.shape[1]
    jp = j + 1 if j < h.shape[1] - 1 else j + 1 - h.shape[1]
    # this cell (c) and its west, east, south, north neighbours: depth, momenta, velocities, wave speed
    hc = h[i, j]
    huc = hu[i, j]
    hvc = hv[i, j]
    uc = huc / hc
    vc = hvc / hc
    sc = math.sqrt(g * hc)
    pc = 0.5 * g * hc * hc
    hw = h[im, j]
    huw = hu[im, j]
    hvw = hv[im, j]
    uw = huw / hw
    he = h[ip, j]
    hue = hu[ip, j]
    hve = hv[ip, j]
    ue = hue / he
    hs = h[i, jm]
    hus = hu[i, jm]
    hvs = hv[i, jm]
    vs = hvs / hs
    hN = h[i, jp]
    huN = hu[i, jp]
    hvN = hv[i, jp]
    vN = hvN / hN
    # x faces: west (w | c) and east (c | e)
    aw = max(abs(uw) + math.sqrt(g * hw), abs(uc) + sc)
    ae = max(abs(uc) + sc, abs(ue) + math.sqrt(g * he))
    fw_h = rusanov(huw, huc, hw, hc, aw)
    fw_u = rusanov(huw * uw + 0.5 * g * hw * hw, huc * uc + pc, huw, huc, aw)
    fw_v = rusanov(hvw * uw, hvc * uc, hvw, hvc, aw)
    fe_h = rusanov(huc, hue, hc, he, ae)
    fe_u = rusanov(huc * uc + pc, hue * ue + 0.5 * g * he * he, huc, hue, ae)
    fe_v = rusanov(hvc * uc, hve * ue, hvc, hve, ae)
    # y faces: south (s | c) and north (c | N)
    as_ = max(abs(vs) + math.sqrt(g * hs), abs(vc) + sc)
    an = max(abs(vc) + sc, abs(vN) + math.sqrt(g * hN))
    gs_h = rusanov(hvs, hvc, hs, hc, as_)
    gs_u = rusanov(hus * vs, huc * vc, hus, huc, as_)
    gs_v = rusanov(hvs * vs + 0.5 * g * hs * hs, hvc * vc + pc, hvs, hvc, as_)
    gn_h = rusanov(hvc, hvN, hc, hN, an)
    gn_u = rusanov(huc * vc, huN * vN, huc, huN, an)
    gn_v = rusanov(hvc * vc + pc, hvN * vN + 0.5 * g * hN * hN, hvc, hvN, an)
    hn[i, j] = hc - c * (fe_h - fw_h + gn_h - gs_h)
    hun[i, j] = huc - c * (fe_u - fw_u + gn_u - gs_u)
    hvn[i, j] = hvc - c * (fe_v - fw_v + gn_v - gs_v)
