"""Session 54's ported kernels (tests/support/ported_hpc7.py, ported_hpc7_more.py): each kernel's small random
inputs, away from kinks, and its NumPy reference (ported_hpc7_refs.py). Used by tests/library/test_ported_hpc7.py.

`cases(rng)` gives (name, kernel or program, annotated args, dim, check_grad options, reference), as
ported_hpc6_cases.py does."""

import numpy as np

from support import ported_hpc7 as A
from support import ported_hpc7_more as B
from support import ported_hpc7_refs as ref
from support.ported_harness import case_makers

PROGRAMS = {"gen_lin_recur", "tea_jacobi", "floyd_warshall"}
PI_N = 10


def _quad_coefficients(rng, R):
    """a, b, c with the discriminant of either sign and at least 0.3 from zero (the branch's kink)."""
    a, b, c = R(10), R(10, lo=-2.5, hi=2.5), R(10)
    s = b * b - 4.0 * a * c
    keep = np.abs(s) > 0.3
    return a[keep][:8], b[keep][:8], c[keep][:8]


def _advection(rng, R, ny, nx):
    """Volume fluxes of both signs (|f| >= 0.05) and densities whose neighbour differences stay 0.05 from zero, so
    the sign tests and the limiter's min are away from their kinks for the tests' seed."""
    flux = R(ny, nx + 1, lo=0.05, hi=0.4) * rng.choice([-1.0, 1.0], (ny, nx + 1))
    steps = R(ny, nx + 3, lo=0.05, hi=0.6) * rng.choice([-1.0, 1.0], (ny, nx + 3))
    density = 2.0 + np.concatenate([np.zeros((ny, 1)), np.cumsum(steps, 1)], 1)
    return flux, R(ny, nx + 4, lo=1.0, hi=2.0), density, R(nx + 4)


def cases(rng, dtype=np.float64):
    R, D, act = case_makers(rng, dtype)

    qa, qb, qc = _quad_coefficients(rng, R)
    flux, pre_vol, density, vertexdx = _advection(rng, R, 3, 5)
    tri = np.tril(R(5, 5, lo=-0.5, hi=0.5)) + np.diag(R(5, lo=1.5, hi=2.5))
    dom = R(4, 4, lo=-0.5, hi=0.5) + np.diag(R(4, lo=2.0, hi=3.0))
    return [
        ("gen_lin_recur", A.gen_lin_recur, (D(R(9)), D(R(7)), D(R(7)), D(R(7)), 2), None, {}, ref.gen_lin_recur),
        ("diff_predict", A.diff_predict, (D(R(14 * 5)), D(R(14 * 5)), 5), 5, {}, ref.diff_predict),
        ("if_quad", A.if_quad, (D(qa), D(qb), D(qc), D(R(qa.size)), D(R(qa.size))), qa.size, {}, ref.if_quad),
        ("pi_atomic", A.pi_atomic, (D(R(1)), act(1.0 / PI_N)), PI_N, {}, ref.pi_atomic),
        ("daxpy_atomic", A.daxpy_atomic, (D(R(9)), D(R(9)), act(0.7)), 9, {}, ref.daxpy_atomic),
        ("field_summary", A.field_summary, (D(R(3, 4)), D(R(3, 4)), D(R(3, 4)), D(R(3, 4)), D(R(4, 5, lo=-1, hi=1)),
                                            D(R(4, 5, lo=-1, hi=1)), D(R(5))), (3, 4), {}, ref.field_summary),
        ("advec_mass_flux_x", A.advec_mass_flux_x, (D(flux), D(pre_vol), D(density), D(vertexdx), D(R(3, 6))),
         (3, 6), {}, ref.advec_mass_flux_x),
        ("tea_jacobi", A.tea_jacobi, (D(R(4, 5)), D(R(4, 5)), D(R(4, 5)), D(R(4, 5, lo=0.1, hi=0.4)),
                                      D(R(4, 5, lo=0.1, hi=0.4)), D(R(1)), 2), None, {}, ref.tea_jacobi),
        ("floyd_warshall", B.floyd_warshall, (D(R(16, lo=0.5, hi=2.5)), D(R(16)), 4), None, {}, ref.floyd_warshall),
        ("seidel_2d", B.seidel_2d, (D(R(5, 5)), 2), 1, {}, ref.seidel_2d),
        ("trisolv", B.trisolv, (D(tri), D(R(5)), D(R(5))), 1, {}, ref.trisolv),
        ("ludcmp", B.ludcmp, (D(dom), D(R(4)), D(R(4)), D(R(4))), 1, {}, ref.ludcmp),
        ("trmm", B.trmm, (D(R(4, 4)), D(R(4, 3)), act(1.3)), 3, {}, ref.trmm),
        ("symm", B.symm, (D(R(4, 4)), D(R(4, 3)), D(R(4, 3)), act(1.3), act(0.7)), 3, {}, ref.symm),
        ("selective_scan", B.selective_scan, (D(R(2, 2, 4, lo=-1, hi=1)), D(R(2, 2, 4, lo=-1, hi=1)),
                                              D(-R(2, B.SSM_N)), D(R(2, B.SSM_N, 4, lo=-1, hi=1)),
                                              D(R(2, B.SSM_N, 4, lo=-1, hi=1)), D(R(2)), D(R(2, 2, 4, lo=-1, hi=1)),
                                              D(R(2, lo=-0.5, hi=0.5)), D(R(2, 2, 4))), (2, 2), {},
         ref.selective_scan),
    ]
