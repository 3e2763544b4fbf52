"""Session 58's eleventh round of ported kernels, part one: molecular mechanics. GROMACS' plain-C reference
non-bonded kernel (4-atom clusters, the exclusion mask as bits, Lennard-Jones with potential shifts and a reaction
field, forces by atomics), LAMMPS' Born-Mayer-Huggins pair style (a full neighbour list whose indices carry the
special-bond bits above NEIGHMASK), its harmonic angle (the cosine clamped, `s` floored) and the KOKKOS FENE bond
(the log argument clamped, an int warning flag, the WCA term inside 2^(1/3) sigma^2). Written here from the
algorithms of the files cited; used by tests/library/test_ported_hpc11.py (inputs in ported_hpc11_cases.py, NumPy
references in ported_hpc11_refs.py)."""

import math

import numpy as np

import gradkern as gk

# ---- GROMACS (gromacs/gromacs src/gromacs/nbnxm/kernels_reference/kernel_ref_outer.h and kernel_ref_inner.h:
# nbnxn_kernel_ElecRF_VdwLJ_VF_ref): a thread per i-cluster of UNROLLI = 4 atoms, its j-clusters from the pair
# list with a 16-bit exclusion mask (bit i * UNROLLJ + j), pairs beyond the cut-off or excluded masked by
# multiplying, r^2 floored at c_nbnxnMinDistanceSquared before the inverse square root; nbfp holds 6 C6 and
# 12 C12, ic is (rcut2, k_rf, c_rf, repulsion cpot, dispersion cpot) ----------------------------------------

UNROLL = 4
MIN_DIST_SQ = 3.82e-7  # c_nbnxnMinDistanceSquared in double precision


@gk.kernel
def nbnxn_rf_lj(x, q, atype, ntype, nbfp, ci_cj_start, cj, excl, ic, f, energies):
    ci = gk.tid()
    rcut2 = ic[0]
    k_rf = ic[1]
    c_rf = ic[2]
    for cjind in range(ci_cj_start[ci], ci_cj_start[ci + 1]):
        cjc = cj[cjind]
        for i in range(UNROLL):
            ai = ci * UNROLL + i
            qi = q[ai]
            fix = 0.0
            fiy = 0.0
            fiz = 0.0
            for j in range(UNROLL):
                aj = cjc * UNROLL + j
                interact = (excl[cjind] >> (i * UNROLL + j)) & 1
                skipmask = 0.0 if (cjc == ci and j <= i) else 1.0
                dx = x[ai, 0] - x[aj, 0]
                dy = x[ai, 1] - x[aj, 1]
                dz = x[ai, 2] - x[aj, 2]
                rsq = dx * dx + dy * dy + dz * dz
                skipmask = 0.0 if rsq >= rcut2 else skipmask
                rsq = max(rsq, MIN_DIST_SQ)
                rinv = 1.0 / math.sqrt(rsq)
                rinv = rinv * skipmask
                rinvsq = rinv * rinv
                t = atype[ai] * ntype + atype[aj]
                c6 = nbfp[t, 0]
                c12 = nbfp[t, 1]
                rinvsix = interact * rinvsq * rinvsq * rinvsq
                frlj6 = c6 * rinvsix
                frlj12 = c12 * rinvsix * rinvsix
                frlj = frlj12 - frlj6
                vlj = ((frlj12 + c12 * ic[3]) / 12.0 - (frlj6 + c6 * ic[4]) / 6.0) * interact * skipmask
                qq = skipmask * qi * q[aj]
                fcoul = qq * (interact * rinv * rinvsq - 2.0 * k_rf)
                vcoul = qq * (interact * rinv + k_rf * rsq - c_rf)
                fscal = frlj * rinvsq + fcoul
                fx = fscal * dx
                fy = fscal * dy
                fz = fscal * dz
                gk.atomic_add(f, (aj, 0), -fx)
                gk.atomic_add(f, (aj, 1), -fy)
                gk.atomic_add(f, (aj, 2), -fz)
                fix += fx
                fiy += fy
                fiz += fz
                gk.atomic_add(energies, 0, vcoul)
                gk.atomic_add(energies, 1, vlj)
            gk.atomic_add(f, (ai, 0), fix)
            gk.atomic_add(f, (ai, 1), fiy)
            gk.atomic_add(f, (ai, 2), fiz)


# ---- LAMMPS Born-Mayer-Huggins (lammps/lammps src/pair_born.cpp: PairBorn::compute; a full list with newton off
# as the KOKKOS styles run it, so each pair's energy is halved): j's top two bits select special_lj
# (`sbmask(j) = j >> SBBITS & 3`, pointers.h), `j &= NEIGHMASK` ------------------------------------------------

SBBITS = 30
NEIGHMASK = 0x3FFFFFFF
B_CUTSQ, B_RHOINV, B_SIGMA, B_BORN1, B_BORN2, B_BORN3, B_A, B_C, B_D, B_OFFSET = range(10)


@gk.func
def sbmask(j):
    return j >> SBBITS & 3


@gk.kernel
def born_compute(x, atype, neigh, numneigh, special_lj, params, f, eng):
    i = gk.tid()
    itype = atype[i]
    fxi = 0.0
    fyi = 0.0
    fzi = 0.0
    for jj in range(numneigh[i]):
        j = neigh[i, jj]
        factor_lj = special_lj[sbmask(j)]
        j &= NEIGHMASK
        delx = x[i, 0] - x[j, 0]
        dely = x[i, 1] - x[j, 1]
        delz = x[i, 2] - x[j, 2]
        rsq = delx * delx + dely * dely + delz * delz
        jtype = atype[j]
        if rsq < params[itype, jtype, B_CUTSQ]:
            r2inv = 1.0 / rsq
            r6inv = r2inv * r2inv * r2inv
            r = math.sqrt(rsq)
            rexp = math.exp((params[itype, jtype, B_SIGMA] - r) * params[itype, jtype, B_RHOINV])
            forceborn = (params[itype, jtype, B_BORN1] * r * rexp - params[itype, jtype, B_BORN2] * r6inv
                         + params[itype, jtype, B_BORN3] * r2inv * r6inv)
            fpair = factor_lj * forceborn * r2inv
            fxi += delx * fpair
            fyi += dely * fpair
            fzi += delz * fpair
            evdwl = (params[itype, jtype, B_A] * rexp - params[itype, jtype, B_C] * r6inv
                     + params[itype, jtype, B_D] * r6inv * r2inv - params[itype, jtype, B_OFFSET])
            eng[i] += 0.5 * factor_lj * evdwl
    f[i, 0] += fxi
    f[i, 1] += fyi
    f[i, 2] += fzi


# ---- LAMMPS harmonic angle (src/MOLECULE/angle_harmonic.cpp: AngleHarmonic::compute, newton_bond on): a thread
# per angle (i1, i2, i3, type), forces on the three atoms and the energy by atomics -------------------------

SMALL = 0.001


@gk.kernel
def angle_harmonic(x, anglelist, k, theta0, f, energy):
    n = gk.tid()
    i1 = anglelist[n, 0]
    i2 = anglelist[n, 1]
    i3 = anglelist[n, 2]
    t = anglelist[n, 3]
    delx1 = x[i1, 0] - x[i2, 0]
    dely1 = x[i1, 1] - x[i2, 1]
    delz1 = x[i1, 2] - x[i2, 2]
    rsq1 = delx1 * delx1 + dely1 * dely1 + delz1 * delz1
    r1 = math.sqrt(rsq1)
    delx2 = x[i3, 0] - x[i2, 0]
    dely2 = x[i3, 1] - x[i2, 1]
    delz2 = x[i3, 2] - x[i2, 2]
    rsq2 = delx2 * delx2 + dely2 * dely2 + delz2 * delz2
    r2 = math.sqrt(rsq2)
    c = delx1 * delx2 + dely1 * dely2 + delz1 * delz2
    c /= r1 * r2
    if c > 1.0:
        c = 1.0
    if c < -1.0:
        c = -1.0
    s = math.sqrt(1.0 - c * c)
    if s < SMALL:
        s = SMALL
    s = 1.0 / s
    dtheta = math.acos(c) - theta0[t]
    tk = k[t] * dtheta
    gk.atomic_add(energy, 0, tk * dtheta)
    a = -2.0 * tk * s
    a11 = a * c / rsq1
    a12 = -a / (r1 * r2)
    a22 = a * c / rsq2
    f1x = a11 * delx1 + a12 * delx2
    f1y = a11 * dely1 + a12 * dely2
    f1z = a11 * delz1 + a12 * delz2
    f3x = a22 * delx2 + a12 * delx1
    f3y = a22 * dely2 + a12 * dely1
    f3z = a22 * delz2 + a12 * delz1
    gk.atomic_add(f, (i1, 0), f1x)
    gk.atomic_add(f, (i1, 1), f1y)
    gk.atomic_add(f, (i1, 2), f1z)
    gk.atomic_add(f, (i2, 0), -f1x - f3x)
    gk.atomic_add(f, (i2, 1), -f1y - f3y)
    gk.atomic_add(f, (i2, 2), -f1z - f3z)
    gk.atomic_add(f, (i3, 0), f3x)
    gk.atomic_add(f, (i3, 1), f3y)
    gk.atomic_add(f, (i3, 2), f3z)


# ---- LAMMPS FENE bond, KOKKOS (src/KOKKOS/bond_fene_kokkos.cpp: BondFENEKokkos::operator() for
# TagBondFENECompute, NEWTON_BOND on): the device cannot warn, so it raises flags (here each bond's own: 1 for
# a stretched bond, 2 past the abort threshold) and clamps the log argument; TWO_1_3 by np.cbrt ---------------


@gk.kernel
def bond_fene(x, bondlist, k, r0, epsilon, sigma, f, ebond, flags):
    n = gk.tid()
    i1 = bondlist[n, 0]
    i2 = bondlist[n, 1]
    t = bondlist[n, 2]
    two_1_3 = np.cbrt(2.0)
    delx = x[i1, 0] - x[i2, 0]
    dely = x[i1, 1] - x[i2, 1]
    delz = x[i1, 2] - x[i2, 2]
    rsq = delx * delx + dely * dely + delz * delz
    r0sq = r0[t] * r0[t]
    rlogarg = 1.0 - rsq / r0sq
    if rlogarg < 0.1:
        flags[n] = 1
        if rlogarg <= -3.0:
            flags[n] = 2
        rlogarg = 0.1
    fbond = -k[t] / rlogarg
    sr6 = 0.0
    if rsq < two_1_3 * sigma[t] * sigma[t]:
        sr2 = sigma[t] * sigma[t] / rsq
        sr6 = sr2 * sr2 * sr2
        fbond += 48.0 * epsilon[t] * sr6 * (sr6 - 0.5) / rsq
    e = -0.5 * k[t] * r0sq * math.log(rlogarg)
    if rsq < two_1_3 * sigma[t] * sigma[t]:
        e += 4.0 * epsilon[t] * sr6 * (sr6 - 1.0) + epsilon[t]
    ebond[n] = e
    gk.atomic_add(f, (i1, 0), delx * fbond)
    gk.atomic_add(f, (i1, 1), dely * fbond)
    gk.atomic_add(f, (i1, 2), delz * fbond)
    gk.atomic_add(f, (i2, 0), -delx * fbond)
    gk.atomic_add(f, (i2, 1), -dely * fbond)
    gk.atomic_add(f, (i2, 2), -delz * fbond)
