"""Session 51's fourth round of ported kernels, part two: Rodinia (streamcluster's cost, leukocyte's GICOV,
myocyte's gating right-hand side, particlefilter's likelihood), the CUDA samples' binomialOptions, LAMMPS pair
styles (Morse, Buckingham, coul/long with its erfc polynomial and with math.erfc), an OpenFOAM-like face loop
and libCEED-like element kernels. Written here from the algorithms of the files cited; used by
tests/library/test_ported_hpc4.py (inputs and NumPy references in ported_hpc4_cases.py)."""

import math

import gradkern as gk

# ---- Rodinia streamcluster (yuhc/gpu-rodinia cuda/streamcluster/streamcluster_cuda.cu: kernel_compute_cost):
# coordinates stored transposed (coord[l * num + i]), a bool switch written, the point's own row of work_mem
# updated at a column read from two index tables ----------------------------------------------------------------


@gk.kernel
def sc_compute_cost(num, dim, x, coord, weight, cost, assign, center_table, switch_membership, work_mem, k1):
    i = gk.tid()
    if i < num:
        d = 0.0
        for ll in range(dim):
            diff = coord[ll * num + i] - coord[ll * num + x]
            d += diff * diff
        x_cost = d * weight[i]
        current_cost = cost[i]
        base = i * k1
        if x_cost < current_cost:
            switch_membership[i] = 1
            work_mem[base + k1 - 1] += x_cost - current_cost
        else:
            work_mem[base + center_table[assign[i]]] += current_cost - x_cost


# ---- Rodinia leukocyte (cuda/leukocyte/find_ellipse_kernel.cu: GICOV_kernel): for each pixel, each circle's
# sample points (integer offset tables tX, tY) projected on the normal; Welford's running mean and M2, the
# largest mean^2 / var over circles kept by a branch -------------------------------------------------------------

NCIRCLES = 3
NPOINTS = 6


@gk.kernel
def gicov(grad_x, grad_y, sin_angle, cos_angle, t_x, t_y, gicov_out, max_r):
    ii, jj = gk.tid()
    i = ii + max_r
    j = jj + max_r
    max_gicov = 0.0
    for k in range(NCIRCLES):
        total = 0.0
        m2 = 0.0
        mean = 0.0
        for n in range(NPOINTS):
            y = j + t_y[k, n]
            x = i + t_x[k, n]
            p = grad_x[x, y] * cos_angle[n] + grad_y[x, y] * sin_angle[n]
            total += p
            delta = p - mean
            mean = mean + delta / (n + 1)
            m2 = m2 + delta * (p - mean)
        mean = total / NPOINTS
        var = m2 / (NPOINTS - 1)
        if mean * mean / var > max_gicov:
            max_gicov = mean * mean / var
    gicov_out[i, j] = math.sqrt(max_gicov)


# ---- Rodinia myocyte (cuda/myocyte/kernel_ecc.cu: the fast sodium current's gates, Hodgkin-Huxley form of the
# Shannon-Bers model): state read at a thread's offset in a flat array, many scalar temporaries, the h and j rates
# chosen by the membrane voltage, pow and exp and the Nernst potential's log ---------------------------------------

NSTATE = 4


@gk.kernel
def myocyte_ina(initvalu, finavalu, params):
    cell = gk.tid()
    off = cell * NSTATE
    m = initvalu[off + 0]
    h = initvalu[off + 1]
    jg = initvalu[off + 2]
    v = initvalu[off + 3]
    frdy = 96485.0
    temp = 310.0
    r = 8314.0
    fo_rt = frdy / r / temp
    g_ina = params[0]
    na_o = params[1]
    na_i = params[2]
    ena = (1.0 / fo_rt) * math.log(na_o / na_i)
    am = 0.32 * (v + 47.13) / (1.0 - math.exp(-0.1 * (v + 47.13)))
    bm = 0.08 * math.exp(-v / 11.0)
    if v >= -40.0:
        ah = 0.0
        aj = 0.0
        bh = 1.0 / (0.13 * (1.0 + math.exp(-(v + 10.66) / 11.1)))
        bj = 0.3 * math.exp(-2.535e-7 * v) / (1.0 + math.exp(-0.1 * (v + 32.0)))
    else:
        ah = 0.135 * math.exp((80.0 + v) / -6.8)
        bh = 3.56 * math.exp(0.079 * v) + 3.1e5 * math.exp(0.35 * v)
        aj = ((-127140.0 * math.exp(0.2444 * v) - 3.474e-5 * math.exp(-0.04391 * v)) * (v + 37.78)
              / (1.0 + math.exp(0.311 * (v + 79.23))))
        bj = 0.1212 * math.exp(-0.01052 * v) / (1.0 + math.exp(-0.1378 * (v + 40.14)))
    i_na = g_ina * math.pow(m, 3) * h * jg * (v - ena)
    finavalu[off + 0] = am * (1.0 - m) - bm * m
    finavalu[off + 1] = ah * (1.0 - h) - bh * h
    finavalu[off + 2] = aj * (1.0 - jg) - bj * jg
    finavalu[off + 3] = -i_na


# ---- Rodinia particlefilter (cuda/particlefilter/ex_particle_CUDA_float_seq.cu: likelihood_kernel with
# calcLikelihoodSum): each particle's disk of pixel offsets rounded from its position, the likelihood of the
# foreground/background intensities, the weight multiplied by exp of it ------------------------------------------

NDISK = 5


@gk.kernel
def pf_likelihood(array_x, array_y, objxy, image, likelihood, weights, max_x, max_y):
    i = gk.tid()
    total = 0.0
    for y in range(NDISK):
        ix = int(math.floor(array_x[i])) + objxy[y, 1]
        iy = int(math.floor(array_y[i])) + objxy[y, 0]
        ix = min(max(ix, 0), max_x - 1)
        iy = min(max(iy, 0), max_y - 1)
        v = image[ix, iy]
        total += ((v - 100.0) * (v - 100.0) - (v - 228.0) * (v - 228.0)) / 50.0
    likelihood[i] = total / NDISK
    weights[i] = weights[i] * math.exp(likelihood[i])


# ---- CUDA samples binomialOptions (NVIDIA/cuda-samples Samples/5_Domain_Specific/binomialOptions/
# binomialOptions_gold.cpp: BlackScholesBinomialCPU / expiryCallValue): the call's values at expiry in a local
# array, then backward induction over the tree overwriting it in place ------------------------------------------

NSTEPS = 8


@gk.func
def expiry_call_value(s, x, vdt, i):
    d = s * math.exp(vdt * (2.0 * i - NSTEPS)) - x
    return d if d > 0.0 else 0.0


@gk.kernel
def binomial_options(call_value, s_arr, x_arr, t_arr, r, v):
    opt = gk.tid()
    t = t_arr[opt]
    dt = t / NSTEPS
    vdt = v * math.sqrt(dt)
    r_dt = r * dt
    if_ = math.exp(r_dt)
    df = math.exp(-r_dt)
    u = math.exp(vdt)
    d = math.exp(-vdt)
    pu = (if_ - d) / (u - d)
    pu_by_df = pu * df
    pd_by_df = (1.0 - pu) * df
    call = gk.local((NSTEPS + 1,), gk.float64)
    for i in range(NSTEPS + 1):
        call[i] = expiry_call_value(s_arr[opt], x_arr[opt], vdt, i)
    for i in range(NSTEPS, 0, -1):
        for j in range(i):
            call[j] = pu_by_df * call[j + 1] + pd_by_df * call[j]
    call_value[opt] = call[0]


# ---- LAMMPS pair_style morse (lammps/lammps src/KOKKOS/pair_morse_kokkos.cpp, compute_fpair; src/pair_morse.cpp):
# a full neighbour list in CSR form, the cutoff tested on r^2, the force along each axis ---------------------------


@gk.kernel
def morse_force(x, f, numneigh, firstneigh, neighbors, d0, alpha, r0, cutsq):
    i = gk.tid()
    xtmp = x[i, 0]
    ytmp = x[i, 1]
    ztmp = x[i, 2]
    fx = 0.0
    fy = 0.0
    fz = 0.0
    for jj in range(numneigh[i]):
        j = neighbors[firstneigh[i] + jj]
        delx = xtmp - x[j, 0]
        dely = ytmp - x[j, 1]
        delz = ztmp - x[j, 2]
        rsq = delx * delx + dely * dely + delz * delz
        if rsq < cutsq:
            r = math.sqrt(rsq)
            dr = r - r0
            dexp = math.exp(-alpha * dr)
            fpair = 2.0 * d0 * alpha * (dexp * dexp - dexp) / r
            fx += delx * fpair
            fy += dely * fpair
            fz += delz * fpair
    f[i, 0] = fx
    f[i, 1] = fy
    f[i, 2] = fz


# ---- LAMMPS pair_style buck (src/pair_buck.cpp: compute; KOKKOS pair_buck_kokkos.cpp): A exp(-r/rho) - C/r^6,
# per-type coefficients indexed by the pair's types, the energy summed with the force --------------------------


@gk.kernel
def buck_force(x, types, f, eng, numneigh, neighbors, maxneigh, buck_a, buck_rho, buck_c, cutsq):
    i = gk.tid()
    itype = types[i]
    fx = 0.0
    fy = 0.0
    e = 0.0
    for jj in range(numneigh[i]):
        j = neighbors[i * maxneigh + jj]
        jtype = types[j]
        delx = x[i, 0] - x[j, 0]
        dely = x[i, 1] - x[j, 1]
        rsq = delx * delx + dely * dely
        if rsq < cutsq[itype, jtype]:
            r2inv = 1.0 / rsq
            r6inv = r2inv * r2inv * r2inv
            r = math.sqrt(rsq)
            rexp = math.exp(-r / buck_rho[itype, jtype])
            forcebuck = buck_a[itype, jtype] / buck_rho[itype, jtype] * rexp * r - 6.0 * buck_c[itype, jtype] * r6inv
            fpair = forcebuck * r2inv
            fx += delx * fpair
            fy += dely * fpair
            e += 0.5 * (buck_a[itype, jtype] * rexp - buck_c[itype, jtype] * r6inv)
    f[i, 0] = fx
    f[i, 1] = fy
    eng[i] = e


# ---- LAMMPS pair_style coul/long (src/pair_coul_long.cpp: compute, no table): erfc by the Abramowitz-Stegun
# polynomial LAMMPS inlines (EWALD_P, A1..A5 times exp(-grij^2)); the twin below calls math.erfc as the GPU
# package's coul/long does with the C library's erfc ---------------------------------------------------------------

EWALD_P = 0.3275911
A1 = 0.254829592
A2 = -0.284496736
A3 = 1.421413741
A4 = -1.453152027
A5 = 1.061405429
EWALD_F = 1.12837917


@gk.kernel
def coul_long(x, q, f, numneigh, neighbors, maxneigh, g_ewald, qqrd2e, cut_coulsq):
    i = gk.tid()
    qtmp = q[i]
    fx = 0.0
    fz = 0.0
    for jj in range(numneigh[i]):
        j = neighbors[i * maxneigh + jj]
        delx = x[i, 0] - x[j, 0]
        delz = x[i, 2] - x[j, 2]
        rsq = delx * delx + (x[i, 1] - x[j, 1]) ** 2 + delz * delz
        if rsq < cut_coulsq:
            r2inv = 1.0 / rsq
            r = math.sqrt(rsq)
            grij = g_ewald * r
            expm2 = math.exp(-grij * grij)
            t = 1.0 / (1.0 + EWALD_P * grij)
            erfc = t * (A1 + t * (A2 + t * (A3 + t * (A4 + t * A5)))) * expm2
            prefactor = qqrd2e * qtmp * q[j] / r
            forcecoul = prefactor * (erfc + EWALD_F * grij * expm2)
            fpair = forcecoul * r2inv
            fx += delx * fpair
            fz += delz * fpair
    f[i, 0] = fx
    f[i, 1] = fz


@gk.kernel
def coul_long_erfc(x, q, f, numneigh, neighbors, maxneigh, g_ewald, qqrd2e, cut_coulsq):
    i = gk.tid()
    fx = 0.0
    fz = 0.0
    for jj in range(numneigh[i]):
        j = neighbors[i * maxneigh + jj]
        delx = x[i, 0] - x[j, 0]
        delz = x[i, 2] - x[j, 2]
        rsq = delx * delx + (x[i, 1] - x[j, 1]) ** 2 + delz * delz
        if rsq < cut_coulsq:
            r = math.sqrt(rsq)
            grij = g_ewald * r
            prefactor = qqrd2e * q[i] * q[j] / r
            forcecoul = prefactor * (math.erfc(grij) + EWALD_F * grij * math.exp(-grij * grij))
            fx += delx * forcecoul / rsq
            fz += delz * forcecoul / rsq
    f[i, 0] = fx
    f[i, 1] = fz


# ---- OpenFOAM-like face loop (OpenFOAM src/finiteVolume/interpolation/surfaceInterpolation/schemes/upwind and
# fvm::div's owner/neighbour sweep, as GPU ports write it): a thread per internal face, the upwind value chosen by
# the flux's sign, the face flux added to the owner and taken from the neighbour by atomics ---------------------


@gk.kernel
def face_flux_scatter(owner, neighbour, phi, psi, sf_mag, gamma, delta_coeff, res):
    face = gk.tid()
    own = owner[face]
    nei = neighbour[face]
    psi_f = psi[own] if phi[face] >= 0.0 else psi[nei]
    conv = phi[face] * psi_f
    diff = gamma * sf_mag[face] * delta_coeff[face] * (psi[nei] - psi[own])
    flux = conv - diff
    gk.atomic_add(res, own, flux)
    gk.atomic_add(res, nei, -flux)


# ---- libCEED-like mass and diffusion apply (CEED/libCEED backends/ref: CeedBasisApply's interp and grad with
# the tensor basis of one 1-D element, interface qfunctions Mass and Diff): a thread per element gathers its
# nodes by the restriction's offsets, interpolates to Q points in a local array, weights, applies the transpose,
# and scatters by atomics (elements share their end nodes) ---------------------------------------------------------

P = 3
Q = 4


@gk.kernel
def ceed_mass_apply(offsets, interp, qweight, jac, u, v):
    e = gk.tid()
    ue = gk.local((P,), gk.float64)
    uq = gk.local((Q,), gk.float64)
    for p in range(P):
        ue[p] = u[offsets[e, p]]
    for q in range(Q):
        s = 0.0
        for p in range(P):
            s += interp[q, p] * ue[p]
        uq[q] = s * qweight[q] * jac[e]
    for p in range(P):
        acc = 0.0
        for q in range(Q):
            acc += interp[q, p] * uq[q]
        gk.atomic_add(v, offsets[e, p], acc)


@gk.kernel
def ceed_diff_apply(offsets, grad, qweight, xnodes, kappa, u, v):
    e = gk.tid()
    ue = gk.local((P,), gk.float64)
    duq = gk.local((Q,), gk.float64)
    for p in range(P):
        ue[p] = u[offsets[e, p]]
    for q in range(Q):
        dxdxi = 0.0
        du = 0.0
        for p in range(P):
            dxdxi += grad[q, p] * xnodes[offsets[e, p]]
            du += grad[q, p] * ue[p]
        duq[q] = kappa[e] * qweight[q] * du / dxdxi
    for p in range(P):
        acc = 0.0
        for q in range(Q):
            acc += grad[q, p] * duq[q]
        gk.atomic_add(v, offsets[e, p], acc)
