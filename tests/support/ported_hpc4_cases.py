"""Session 51's ported kernels (tests/support/ported_hpc4.py, ported_hpc4_more.py, ported_hpc4_pde.py): every
kernel's small random inputs, away from kinks, and its NumPy reference (ported_hpc4_refs.py). Used by
tests/library/test_ported_hpc4.py.

`cases(rng)` gives (name, kernel or program, annotated args, dim, check_grad options, reference); a reference
takes the arguments' primal values before the launch and returns {argument position: expected value after}."""

import numpy as np

import gradkern as gk
from support import ported_hpc4 as A
from support import ported_hpc4_more as B
from support import ported_hpc4_pde as C
from support import ported_hpc4_refs as ref

# the PolyBench host sequences, mri-fhd's two kernels: programs of several launches (check_grad takes them as such)
PROGRAMS = {"polybench_2mm", "polybench_atax", "polybench_bicg", "polybench_mvt", "polybench_covariance",
            "mri_fhd"}


def _gauss_lagrange():
    """The quadratic Lagrange basis on nodes -1, 0, 1 and its derivative at the 4 Gauss points, and the weights."""
    xq, wq = np.polynomial.legendre.leggauss(B.Q)
    interp = np.stack([xq * (xq - 1) / 2, 1 - xq * xq, xq * (xq + 1) / 2], axis=1)
    grad = np.stack([xq - 0.5, -2 * xq, xq + 0.5], axis=1)
    return interp, grad, wq


def _full_lists(n, rng):
    """Every other atom as a neighbour: CSR (numneigh, firstneigh, neighbours) and padded (rows of n - 1)."""
    rows = [np.array([j for j in rng.permutation(n) if j != i], np.int32) for i in range(n)]
    numneigh = np.full(n, n - 1, np.int32)
    first = np.arange(0, n * (n - 1), n - 1, dtype=np.int32)
    return numneigh, first, np.concatenate(rows)


def cases(rng, dtype=np.float64):
    def R(*s, lo=0.5, hi=1.5):
        return rng.uniform(lo, hi, s).astype(dtype)

    def D(a):
        return gk.Duplicated(a, np.zeros_like(a))

    def K(a):
        return gk.Const(a)

    def act(x):
        return gk.Active(dtype(x))

    def signed(*s):
        return (rng.choice([-1.0, 1.0], s) * rng.uniform(0.3, 1.0, s)).astype(dtype)

    ni, nj, nk, nl = 3, 4, 2, 5
    interp, grad, wq = _gauss_lagrange()
    offsets = np.array([[0, 1, 2], [2, 3, 4], [4, 5, 6]], np.int32)
    xnodes = np.cumsum(R(7)).astype(dtype)
    numneigh, first, neigh = _full_lists(6, rng)
    owner = np.array([0, 1, 2, 3, 0, 1], np.int32)
    neighbour = np.array([1, 2, 3, 4, 2, 4], np.int32)
    atoms = np.concatenate([R(5, 3, lo=0.1, hi=1.1), R(5, 1, lo=-1.0, hi=1.0)], axis=1)
    t_off = rng.integers(-2, 3, (2, B.NCIRCLES, B.NPOINTS)).astype(np.int32)
    angles = 2 * np.pi * np.arange(B.NPOINTS) / B.NPOINTS
    volts = np.array([-75.0, -62.0, -25.0, 5.0]) + rng.uniform(-3.0, 3.0, 4)
    init = np.stack([R(4, lo=0.1, hi=0.5), R(4, lo=0.5, hi=0.9), R(4, lo=0.5, hi=0.9), volts], 1).ravel()
    nasa = np.stack([R(4, lo=0.1, hi=0.5), R(4, lo=1e-4, hi=3e-4), R(4, lo=1e-8, hi=3e-8), R(4, lo=50.0, hi=150.0),
                     R(4, lo=-0.5, hi=0.5)], axis=1)
    types = np.array([0, 1, 1, 0, 1, 0], np.int32)
    sym = R(2, 2)
    return [
        ("polybench_2mm", A.polybench_2mm, (D(R(ni * nj)), D(R(ni * nk)), D(R(nk * nj)), D(R(nj * nl)),
                                            D(R(ni * nl)), act(1.5), act(1.2), ni, nj, nk, nl), None, {},
         ref.polybench_2mm),
        ("polybench_atax", A.polybench_atax, (D(R(4 * 3)), D(R(3)), D(R(3)), D(R(4)), 4, 3), None, {},
         ref.polybench_atax),
        ("polybench_bicg", A.polybench_bicg, (D(R(4 * 3)), D(R(4)), D(R(3)), D(R(3)), D(R(4)), 4, 3), None, {},
         ref.polybench_bicg),
        ("polybench_mvt", A.polybench_mvt, (D(R(16)), D(R(4)), D(R(4)), D(R(4)), D(R(4)), 4), None, {},
         ref.polybench_mvt),
        ("gesummv", A.gesummv_kernel, (D(R(16)), D(R(16)), D(R(4)), D(R(4)), D(R(4)), act(1.5), act(1.2), 4), 5,
         {}, ref.gesummv),
        ("syr2k", A.syr2k_kernel, (D(R(4 * 3)), D(R(4 * 3)), D(R(16)), act(1.5), act(1.2), 4, 3), (5, 5), {},
         ref.syr2k),
        ("polybench_covariance", A.polybench_covariance, (D(R(5 * 3)), D(R(9)), D(R(3)), 5.0, 3, 5), None, {},
         ref.polybench_covariance),
        ("sgemm_nt", A.sgemm_nt, (D(R(4 * 8)), 4, D(R(8 * 8)), 8, D(R(4 * 8)), 4, 8, act(1.5), act(0.7)), (4, 2),
         {}, ref.sgemm_nt),
        ("stencil7_z", A.stencil7_z, (act(0.4), act(0.1), D(R(5 * 4 * 5)), D(R(5 * 4 * 5)), 5, 4, 5), (2, 3), {},
         ref.stencil7_z),
        ("mri_fhd", A.mri_fhd, (5, *[D(R(5)) for _ in range(4)], *[D(R(5, lo=-0.5, hi=0.5)) for _ in range(3)],
                                *[D(R(4, lo=-0.5, hi=0.5)) for _ in range(3)], D(R(5)), D(R(5)), D(R(4)), D(R(4))),
         None, {}, ref.mri_fhd),
        ("shoc_reduce", A.shoc_reduce, (D(R(16)), D(R(2, 2)), D(R(1)), 16, 2), (2, 2), {}, ref.shoc_reduce),
        ("s3d_rates", A.s3d_rates, (D(R(5, lo=800.0, hi=1500.0)), D(R(3)), D(R(3)), D(R(3, lo=1000.0, hi=3000.0)),
                                    D(nasa.astype(dtype)), D(R(5, 3)), D(R(5, 3)), D(R(5, 4)), 1.01325e6, 8.314e7),
         5, {"relative": True}, ref.s3d_rates),
        ("cutcp_lattice", A.cutcp_lattice, (D(atoms.astype(dtype)), D(R(3, 3, 3)), 5, 0.5, 0.81, 1.0 / 0.81),
         (3, 3, 3), {}, ref.cutcp_lattice),
        ("sc_compute_cost", B.sc_compute_cost, (6, 3, 2, D(R(3 * 6)), D(R(6)), D(R(6)),
                                                K(np.array([0, 1, 2, 0, 2, 1], np.int32)),
                                                K(np.array([0, 2, 1], np.int32)), np.zeros(6, np.int32),
                                                D(R(6 * 4)), 4), 8, {}, ref.sc_compute_cost),
        ("gicov", B.gicov, (D(R(8, 8, lo=-1.0, hi=1.0)), D(R(8, 8, lo=-1.0, hi=1.0)), K(np.sin(angles)),
                            K(np.cos(angles)), K(t_off[0]), K(t_off[1]), D(R(8, 8)), 2), (4, 4), {}, ref.gicov),
        ("myocyte_ina", B.myocyte_ina, (D(init.astype(dtype)), D(R(16)), D(np.array([16.0, 140.0, 10.0], dtype))),
         4, {"relative": True}, ref.myocyte_ina),
        ("pf_likelihood", B.pf_likelihood, (D(R(6, lo=2.2, hi=6.8)), D(R(6, lo=2.2, hi=6.8)),
                                            K(rng.integers(-1, 2, (B.NDISK, 2)).astype(np.int32)),
                                            D(R(9, 9, lo=162.0, hi=166.0)), D(R(6)), D(R(6)), 9, 9), 6,
         {"relative": True}, ref.pf_likelihood),
        ("binomial_options", B.binomial_options, (D(R(4)), D(R(4, lo=20.0, hi=30.0)), D(R(4, lo=15.0, hi=35.0)),
                                                  D(R(4, lo=0.5, hi=2.0)), act(0.02), act(0.3)), 4,
         {"relative": True}, ref.binomial_options),
        ("morse_force", B.morse_force, (D(R(6, 3, lo=0.0, hi=2.0)), D(R(6, 3)), K(numneigh), K(first), K(neigh),
                                        act(1.0), act(1.3), act(0.9), 2.25), 6, {}, ref.morse_force),
        ("buck_force", B.buck_force, (D(R(6, 2, lo=0.0, hi=2.0)), K(types), D(R(6, 2)), D(R(6)), K(numneigh),
                                      K(neigh), 5, D(R(2, 2)), D(R(2, 2, lo=0.3, hi=0.5)), D(R(2, 2, lo=0.01, hi=0.05)),
                                      K(sym * 0 + 2.0)), 6, {}, ref.buck_force),
        ("coul_long", B.coul_long, (D(R(6, 3, lo=0.0, hi=2.0)), D(R(6, lo=-1.0, hi=1.0)), D(R(6, 2)), K(numneigh),
                                    K(neigh), 5, act(0.8), 1.0, 4.0), 6, {}, ref.coul_long),
        ("coul_long_erfc", B.coul_long_erfc, (D(R(6, 3, lo=0.0, hi=2.0)), D(R(6, lo=-1.0, hi=1.0)), D(R(6, 2)),
                                              K(numneigh), K(neigh), 5, act(0.8), 1.0, 4.0), 6, {}, ref.coul_long_erfc),
        ("face_flux_scatter", B.face_flux_scatter, (K(owner), K(neighbour), D(signed(6)), D(R(5)), D(R(6)),
                                                    act(0.1), D(R(6)), D(R(5))), 6, {}, ref.face_flux_scatter),
        ("ceed_mass_apply", B.ceed_mass_apply, (K(offsets), D(interp.astype(dtype)), D(wq.astype(dtype)), D(R(3)),
                                                D(R(7)), D(R(7))), 3, {}, ref.ceed_mass_apply),
        ("ceed_diff_apply", B.ceed_diff_apply, (K(offsets), D(grad.astype(dtype)), D(wq.astype(dtype)), D(xnodes),
                                                D(R(3)), D(R(7)), D(R(7))), 3, {}, ref.ceed_diff_apply),
        ("brusselator_rhs", C.brusselator_rhs, (D(R(7, 2)), D(R(7, 2)), act(0.1), act(1.0), act(3.0), 1.0 / 6.0), 7,
         {}, ref.brusselator_rhs),
        ("gray_scott_rhs", C.gray_scott_rhs, (D(np.stack([R(4, 5, lo=0.3, hi=1.0), R(4, 5, lo=0.1, hi=0.5)], -1)),
                                              D(R(4, 5, 2)), act(0.1), act(0.05), act(0.024), act(0.06), 0.5, 0.6),
         (4, 5), {}, ref.gray_scott_rhs),
        ("column_implicit_diffusion", C.column_implicit_diffusion, (D(R(C.NZ, 5)), D(R(C.NZ + 1, 5, lo=0.1, hi=1.0)),
                                                                    D(R(C.NZ)), act(0.3)), 5, {},
         ref.column_implicit_diffusion),
        ("sl_advect", C.sl_advect, (D(R(5, 6)), D(R(5, 6)), D(R(5, 6, lo=-1.5, hi=1.5)), D(R(5, 6, lo=-1.5, hi=1.5)),
                                    0.7, 1.0), (5, 6), {}, ref.sl_advect),
        ("muscl_faces", C.muscl_faces, (D(R(9)), D(R(9)), D(R(9)), D(R(9))), 7, {}, ref.muscl_faces),
        ("black_scholes_erf", C.black_scholes_erf, (*[D(R(6)) for _ in range(4)], D(R(6, lo=10.0, hi=30.0)),
                                                    D(R(6, lo=10.0, hi=30.0)), D(R(6, lo=0.25, hi=2.0)), act(0.02),
                                                    act(0.3)), 6, {"relative": True}, ref.black_scholes_erf),
        ("ikeda_orbit", C.ikeda_orbit, (D(R(5, lo=-0.5, hi=0.5)), D(R(5, lo=-0.5, hi=0.5)), D(R(5, 2)), act(0.7)),
         5, {}, ref.ikeda_orbit),
    ]
