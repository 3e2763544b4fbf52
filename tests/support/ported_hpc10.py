"""Session 57's tenth round of ported kernels, part one: LAMMPS' Stillinger-Weber three-body potential (a short
neighbour list built per atom, the two-body loop halved by the tags' parity, the three-body loop over pairs of the
short list, forces by atomics), RSBench's multipole cross-section lookup (complex arithmetic in pairs, the window
from `int(E / spacing)`, the poles' `l_value` choosing one of four factors), miniQMC's B-spline two-body Jastrow
(`modf` of the scaled distance, a 4 x 4 constant table, the group's coefficients) and nekRS' `axhelm` (the
tensor-product gradient, the geometric factors, then the transposed gradient: the shared arrays and the barrier
as a launch boundary). Written here from the algorithms of the files cited; used by tests/library/
test_ported_hpc10.py (inputs in ported_hpc10_cases.py, NumPy references in ported_hpc10_refs.py)."""

import math

import gradkern as gk

# ---- LAMMPS Stillinger-Weber (lammps/lammps src/MANYBODY/pair_sw.cpp: PairSW::compute, twobody, threebody; the
# short list as pair_sw_kokkos.cpp's TagPairSWComputeShortNeigh keeps it, one row per atom): a full neighbour list,
# a thread per atom; the params table's columns are the Param struct's fields setup_params derives -------------

CUT, CUTSQ, SIGMA, SIGMA_GAMMA, LAMBDA_EPSILON, LAMBDA_EPSILON2, COSTHETA, POWERP, POWERQ = range(9)
C1, C2, C3, C4, C5, C6 = range(9, 15)


@gk.kernel
def sw_short_neighbors(x, neigh, numneigh, cutmax_sq, neighshort, numshort):
    i = gk.tid()
    inside = 0
    for jj in range(numneigh[i]):
        j = neigh[i, jj]
        delx = x[i, 0] - x[j, 0]
        dely = x[i, 1] - x[j, 1]
        delz = x[i, 2] - x[j, 2]
        rsq = delx * delx + dely * dely + delz * delz
        if rsq < cutmax_sq:
            neighshort[i, inside] = j
            inside += 1
    numshort[i] = inside


@gk.func
def sw_twobody(params, m, rsq):
    r = math.sqrt(rsq)
    rinvsq = 1.0 / rsq
    rp = math.pow(r, -params[m, POWERP])
    rq = math.pow(r, -params[m, POWERQ])
    rainv = 1.0 / (r - params[m, CUT])
    rainvsq = rainv * rainv * r
    expsrainv = math.exp(params[m, SIGMA] * rainv)
    fforce = (params[m, C1] * rp - params[m, C2] * rq
              + (params[m, C3] * rp - params[m, C4] * rq) * rainvsq) * expsrainv * rinvsq
    eng = (params[m, C5] * rp - params[m, C6] * rq) * expsrainv
    return fforce, eng


@gk.func
def sw_threebody(params, ij, ik, ijk, rsq1, rsq2, d1x, d1y, d1z, d2x, d2y, d2z):
    r1 = math.sqrt(rsq1)
    rinvsq1 = 1.0 / rsq1
    rainv1 = 1.0 / (r1 - params[ij, CUT])
    gsrainv1 = params[ij, SIGMA_GAMMA] * rainv1
    gsrainvsq1 = gsrainv1 * rainv1 / r1
    expgsrainv1 = math.exp(gsrainv1)

    r2 = math.sqrt(rsq2)
    rinvsq2 = 1.0 / rsq2
    rainv2 = 1.0 / (r2 - params[ik, CUT])
    gsrainv2 = params[ik, SIGMA_GAMMA] * rainv2
    gsrainvsq2 = gsrainv2 * rainv2 / r2
    expgsrainv2 = math.exp(gsrainv2)

    rinv12 = 1.0 / (r1 * r2)
    cs = (d1x * d2x + d1y * d2y + d1z * d2z) * rinv12
    delcs = cs - params[ijk, COSTHETA]
    delcssq = delcs * delcs

    facexp = expgsrainv1 * expgsrainv2
    facrad = params[ijk, LAMBDA_EPSILON] * facexp * delcssq
    frad1 = facrad * gsrainvsq1
    frad2 = facrad * gsrainvsq2
    facang = params[ijk, LAMBDA_EPSILON2] * facexp * delcs
    facang12 = rinv12 * facang
    csfacang = cs * facang
    csfac1 = rinvsq1 * csfacang
    csfac2 = rinvsq2 * csfacang
    return (d1x * (frad1 + csfac1) - d2x * facang12, d1y * (frad1 + csfac1) - d2y * facang12,
            d1z * (frad1 + csfac1) - d2z * facang12, d2x * (frad2 + csfac2) - d1x * facang12,
            d2y * (frad2 + csfac2) - d1y * facang12, d2z * (frad2 + csfac2) - d1z * facang12, facrad)


@gk.kernel
def sw_compute(x, atype, tag, elem3param, params, neigh, numneigh, neighshort, numshort, f, eng):
    i = gk.tid()
    itag = tag[i]
    itype = atype[i]
    xtmp = x[i, 0]
    ytmp = x[i, 1]
    ztmp = x[i, 2]
    fxtmp = 0.0
    fytmp = 0.0
    fztmp = 0.0
    # two-body interactions, skip half of them
    for jj in range(numneigh[i]):
        j = neigh[i, jj]
        delx = xtmp - x[j, 0]
        dely = ytmp - x[j, 1]
        delz = ztmp - x[j, 2]
        rsq = delx * delx + dely * dely + delz * delz
        jtype = atype[j]
        ijparam = elem3param[itype, jtype, jtype]
        if rsq >= params[ijparam, CUTSQ]:
            continue
        jtag = tag[j]
        if itag > jtag:
            if (itag + jtag) % 2 == 0:
                continue
        elif itag < jtag:
            if (itag + jtag) % 2 == 1:
                continue
        else:
            if x[j, 2] < ztmp:
                continue
            if x[j, 2] == ztmp and x[j, 1] < ytmp:
                continue
            if x[j, 2] == ztmp and x[j, 1] == ytmp and x[j, 0] < xtmp:
                continue
        fpair, evdwl = sw_twobody(params, ijparam, rsq)
        fxtmp += delx * fpair
        fytmp += dely * fpair
        fztmp += delz * fpair
        gk.atomic_add(f, (j, 0), -delx * fpair)
        gk.atomic_add(f, (j, 1), -dely * fpair)
        gk.atomic_add(f, (j, 2), -delz * fpair)
        gk.atomic_add(eng, 0, evdwl)
    for jj in range(numshort[i] - 1):
        j = neighshort[i, jj]
        jtype = atype[j]
        ijparam = elem3param[itype, jtype, jtype]
        d1x = x[j, 0] - xtmp
        d1y = x[j, 1] - ytmp
        d1z = x[j, 2] - ztmp
        rsq1 = d1x * d1x + d1y * d1y + d1z * d1z
        fjxtmp = 0.0
        fjytmp = 0.0
        fjztmp = 0.0
        for kk in range(jj + 1, numshort[i]):
            k = neighshort[i, kk]
            ktype = atype[k]
            ikparam = elem3param[itype, ktype, ktype]
            ijkparam = elem3param[itype, jtype, ktype]
            d2x = x[k, 0] - xtmp
            d2y = x[k, 1] - ytmp
            d2z = x[k, 2] - ztmp
            rsq2 = d2x * d2x + d2y * d2y + d2z * d2z
            fj0, fj1, fj2, fk0, fk1, fk2, evdwl = sw_threebody(params, ijparam, ikparam, ijkparam, rsq1, rsq2,
                                                               d1x, d1y, d1z, d2x, d2y, d2z)
            fxtmp -= fj0 + fk0
            fytmp -= fj1 + fk1
            fztmp -= fj2 + fk2
            fjxtmp += fj0
            fjytmp += fj1
            fjztmp += fj2
            gk.atomic_add(f, (k, 0), fk0)
            gk.atomic_add(f, (k, 1), fk1)
            gk.atomic_add(f, (k, 2), fk2)
            gk.atomic_add(eng, 0, evdwl)
        gk.atomic_add(f, (j, 0), fjxtmp)
        gk.atomic_add(f, (j, 1), fjytmp)
        gk.atomic_add(f, (j, 2), fjztmp)
    gk.atomic_add(f, (i, 0), fxtmp)
    gk.atomic_add(f, (i, 1), fytmp)
    gk.atomic_add(f, (i, 2), fztmp)


def stillinger_weber(x, atype, tag, elem3param, params, neigh, numneigh, neighshort, numshort, f, eng,
                     cutmax_sq, backend=None):
    """PairSW::compute on a full neighbour list: the short list (the atoms within the largest cut-off), then the
    forces and the energy."""
    n = x.shape[0]
    gk.launch(sw_short_neighbors, n, x, neigh, numneigh, cutmax_sq, neighshort, numshort, backend=backend)
    gk.launch(sw_compute, n, x, atype, tag, elem3param, params, neigh, numneigh, neighshort, numshort, f, eng,
              backend=backend)


# ---- RSBench (ANL-CESAR/RSBench openmp-threading/xs_kernel.c: calculate_macro_xs, calculate_micro_xs,
# calculate_sig_T; the CUDA port's xs_lookup_kernel_baseline a thread per lookup, its verification the index of
# the largest macroscopic cross-section). Complex numbers as (re, im) pairs through device functions, as the CUDA
# port's RSComplex c_mul / c_div. Each pole is MP_EA, MP_RT, MP_RA, MP_RF (re, im each); the window's T, A, F ----

NUM_L = 4


@gk.func
def c_mul(ar, ai, br, bi):
    return ar * br - ai * bi, ar * bi + ai * br


@gk.func
def c_div(ar, ai, br, bi):
    d = br * br + bi * bi
    return (ar * br + ai * bi) / d, (ai * br - ar * bi) / d


@gk.func
def sig_t_factor(pseudo_k0rs, nuc, i, sqrt_e):
    phi = pseudo_k0rs[nuc, i] * sqrt_e
    if i == 1:
        phi -= -math.atan(phi)
    elif i == 2:
        phi -= math.atan(3.0 * phi / (3.0 - phi * phi))
    elif i == 3:
        phi -= math.atan(phi * (15.0 - phi * phi) / (15.0 - 6.0 * phi * phi))
    phi *= 2.0
    return math.cos(phi), -math.sin(phi)


@gk.kernel
def xs_lookup(energies, mats, num_nucs, mat_nucs, concs, n_windows, windows, w_start, w_end, poles, l_value,
              pseudo_k0rs, macro_xs, verification):
    lookup = gk.tid()
    E = energies[lookup]
    mat = mats[lookup]
    sqrt_e = math.sqrt(E)
    # calculate_sig_T once per nuclide in the source; the four factors in a local array, read back by the pole's
    # l_value through a chain of ifs (a local array takes constant indices: kernel-language.md "Tenth round")
    factors = gk.local((NUM_L, 2), gk.float64)
    for j in range(4):
        macro_xs[lookup, j] = 0.0
    for n in range(num_nucs[mat]):
        nuc = mat_nucs[mat, n]
        for i in range(NUM_L):
            factors[i, 0], factors[i, 1] = sig_t_factor(pseudo_k0rs, nuc, i, sqrt_e)
        spacing = 1.0 / n_windows[nuc]
        window = int(E / spacing)
        if window == n_windows[nuc]:
            window -= 1
        sig_t = E * windows[nuc, window, 0]
        sig_a = E * windows[nuc, window, 1]
        sig_f = E * windows[nuc, window, 2]
        for p in range(w_start[nuc, window], w_end[nuc, window]):
            # PSIIKI = -(0 - 1i) / (MP_EA - sqrt(E)); CDUM = PSIIKI / E
            psr, psi = c_div(0.0, 1.0, poles[nuc, p, 0] - sqrt_e, poles[nuc, p, 1])
            cdr = psr / E
            cdi = psi / E
            lv = l_value[nuc, p]
            if lv == 0:
                fr, fi = factors[0, 0], factors[0, 1]
            elif lv == 1:
                fr, fi = factors[1, 0], factors[1, 1]
            elif lv == 2:
                fr, fi = factors[2, 0], factors[2, 1]
            else:
                fr, fi = factors[3, 0], factors[3, 1]
            tr, ti = c_mul(poles[nuc, p, 2], poles[nuc, p, 3], cdr, cdi)
            sig_t += tr * fr - ti * fi
            ar, ai = c_mul(poles[nuc, p, 4], poles[nuc, p, 5], cdr, cdi)
            sig_a += ar
            fr2, fi2 = c_mul(poles[nuc, p, 6], poles[nuc, p, 7], cdr, cdi)
            sig_f += fr2
        sig_e = sig_t - sig_a
        conc = concs[mat, n]
        macro_xs[lookup, 0] += sig_t * conc
        macro_xs[lookup, 1] += sig_a * conc
        macro_xs[lookup, 2] += sig_f * conc
        macro_xs[lookup, 3] += sig_e * conc
    max_idx = 0
    max_val = -float("inf")
    for j in range(4):
        if macro_xs[lookup, j] > max_val:
            max_val = macro_xs[lookup, j]
            max_idx = j
    verification[lookup] = max_idx + 1


# ---- miniQMC's two-body B-spline Jastrow (QMCPACK/miniqmc src/QMCWaveFunctions/BsplineFunctor.h: evaluate;
# TwoBodyJastrow's per-electron sum Uat[i] = sum over j != i of U_{group(i), group(j)}(r_ij)): the distance scaled
# by DeltaRInv, split by C's modf (`math.modf` here), the cubic B-spline's 4 x 4 basis a constant table ---------

A = ((-1.0 / 6.0, 3.0 / 6.0, -3.0 / 6.0, 1.0 / 6.0),
     (3.0 / 6.0, -6.0 / 6.0, 0.0 / 6.0, 4.0 / 6.0),
     (-3.0 / 6.0, 3.0 / 6.0, 3.0 / 6.0, 1.0 / 6.0),
     (1.0 / 6.0, 0.0 / 6.0, 0.0 / 6.0, 0.0 / 6.0))


@gk.func
def bspline_evaluate(coefs, f, r, cutoff_radius, delta_r_inv):
    if r >= cutoff_radius:
        return 0.0
    r *= delta_r_inv
    t, ipart = math.modf(r)
    i = int(ipart)
    tp = gk.local((4,), gk.float64)
    tp[0] = t * t * t
    tp[1] = t * t
    tp[2] = t
    tp[3] = 1.0
    return (coefs[f, i + 0] * (A[0][0] * tp[0] + A[0][1] * tp[1] + A[0][2] * tp[2] + A[0][3] * tp[3])
            + coefs[f, i + 1] * (A[1][0] * tp[0] + A[1][1] * tp[1] + A[1][2] * tp[2] + A[1][3] * tp[3])
            + coefs[f, i + 2] * (A[2][0] * tp[0] + A[2][1] * tp[1] + A[2][2] * tp[2] + A[2][3] * tp[3])
            + coefs[f, i + 3] * (A[3][0] * tp[0] + A[3][1] * tp[1] + A[3][2] * tp[2] + A[3][3] * tp[3]))


@gk.kernel
def j2_uat(pos, group, n_groups, coefs, cutoff_radius, delta_r_inv, n, uat):
    i = gk.tid()
    u = 0.0
    for j in range(n):
        if j != i:
            dx = pos[j, 0] - pos[i, 0]
            dy = pos[j, 1] - pos[i, 1]
            dz = pos[j, 2] - pos[i, 2]
            r = math.sqrt(dx * dx + dy * dy + dz * dz)
            u += bspline_evaluate(coefs, group[i] * n_groups + group[j], r, cutoff_radius, delta_r_inv)
    uat[i] = u


# ---- nekRS axhelm (Nek5000/nekRS src/kernels/elliptic/axhelmReference.okl: axhelm_v0 for one field): per
# element, the reference gradient by the derivative matrix S, the geometric factors G00..G22 and lambda0 applied,
# then the transposed gradient plus GwJ lambda1 q. The @shared s_Gqr, s_Gqs, s_Gqt are arrays here and the
# barrier between the two loop nests a launch boundary; a thread per (element * Nq + k, j, i) -----------------

G00ID, G01ID, G02ID, G11ID, G12ID, G22ID, GWJID = range(7)
NGGEO = 7


@gk.kernel
def axhelm_gradient(nq, offset, ggeo, s, lam, q, gqr, gqs, gqt):
    ek, j, i = gk.tid()
    element = ek // nq
    k = ek % nq
    np_ = nq * nq * nq
    gbase = element * NGGEO * np_ + k * nq * nq + j * nq + i
    r_g00 = ggeo[gbase + G00ID * np_]
    r_g01 = ggeo[gbase + G01ID * np_]
    r_g02 = ggeo[gbase + G02ID * np_]
    r_g11 = ggeo[gbase + G11ID * np_]
    r_g12 = ggeo[gbase + G12ID * np_]
    r_g22 = ggeo[gbase + G22ID * np_]
    id_ = element * np_ + k * nq * nq + j * nq + i
    r_lam0 = lam[id_ + 0 * offset]
    base = element * np_
    qr = 0.0
    qs = 0.0
    qt = 0.0
    for m in range(nq):
        qr += s[m * nq + i] * q[base + k * nq * nq + j * nq + m]
        qs += s[m * nq + j] * q[base + k * nq * nq + m * nq + i]
        qt += s[m * nq + k] * q[base + m * nq * nq + j * nq + i]
    gqr[id_] = r_lam0 * (r_g00 * qr + r_g01 * qs + r_g02 * qt)
    gqs[id_] = r_lam0 * (r_g01 * qr + r_g11 * qs + r_g12 * qt)
    gqt[id_] = r_lam0 * (r_g02 * qr + r_g12 * qs + r_g22 * qt)


@gk.kernel
def axhelm_divergence(nq, offset, ggeo, s, lam, q, gqr, gqs, gqt, aq):
    ek, j, i = gk.tid()
    element = ek // nq
    k = ek % nq
    np_ = nq * nq * nq
    gbase = element * NGGEO * np_ + k * nq * nq + j * nq + i
    r_gwj = ggeo[gbase + GWJID * np_]
    id_ = element * np_ + k * nq * nq + j * nq + i
    r_lam1 = lam[id_ + 1 * offset]
    r_aq = r_gwj * r_lam1 * q[id_]
    base = element * np_
    r_aqr = 0.0
    r_aqs = 0.0
    r_aqt = 0.0
    for m in range(nq):
        r_aqr += s[i * nq + m] * gqr[base + k * nq * nq + j * nq + m]
        r_aqs += s[j * nq + m] * gqs[base + k * nq * nq + m * nq + i]
        r_aqt += s[k * nq + m] * gqt[base + m * nq * nq + j * nq + i]
    aq[id_] = r_aqr + r_aqs + r_aqt + r_aq


def axhelm(n_elements, nq, offset, ggeo, s, lam, q, gqr, gqs, gqt, aq, backend=None):
    """axhelm_v0: the gradient launch, then (the barrier) the divergence launch."""
    dim = (n_elements * nq, nq, nq)
    gk.launch(axhelm_gradient, dim, nq, offset, ggeo, s, lam, q, gqr, gqs, gqt, backend=backend)
    gk.launch(axhelm_divergence, dim, nq, offset, ggeo, s, lam, q, gqr, gqs, gqt, aq, backend=backend)
