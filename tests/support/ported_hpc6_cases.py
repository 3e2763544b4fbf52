"""Session 53's ported kernels (tests/support/ported_hpc6.py, ported_hpc6_more.py): each kernel's small random
inputs, away from kinks, and its NumPy reference (ported_hpc6_refs.py). Used by tests/library/test_ported_hpc6.py.

`cases(rng)` gives (name, kernel or program, annotated args, dim, check_grad options, reference), as
ported_hpc5_cases.py does."""

import numpy as np

import gradkern as gk
from support import ported_hpc6 as A
from support import ported_hpc6_more as B
from support import ported_hpc6_refs as ref

PROGRAMS = {"energy", "pressure", "hydro_2d", "fdtd_2d", "heat_3d", "adi", "gramschmidt", "deriche", "pathfinder"}


def _energy_args(rng, R):
    """ENERGY's inputs: delvc of both signs, so both branches of every loop run. With seed 5 (the tests'), e_cut =
    0.4 zeroes one zone in loop 4 which emin = 1.2 then raises, and q_cut = 0.5 zeroes two zones' q in loop 6; no
    value comes within 0.08 of a threshold (the kinks; central differences step 1e-6)."""
    n = 10
    delvc = np.r_[R(5, lo=0.05, hi=0.3), -R(5, lo=0.05, hi=0.3)]
    rng.shuffle(delvc)
    return [R(n), R(n, lo=1.0, hi=3.0), delvc, R(n), R(n), R(n), R(n), R(n, lo=-1, hi=1), R(n, lo=-0.2, hi=0.2),
            R(n), R(n, lo=0.5, hi=1.0), R(n, lo=0.5, hi=1.0), R(n, lo=0.1, hi=0.5), R(n, lo=0.1, hi=0.5),
            R(n, lo=0.8, hi=1.2)]


def _hex_nodes(rng, nz, ny, nx):
    """A perturbed regular grid of (nz + 1) x (ny + 1) x (nx + 1) nodes, flattened; jp, kp its strides."""
    k, j, i = np.meshgrid(np.arange(nz + 1), np.arange(ny + 1), np.arange(nx + 1), indexing="ij")
    pts = [c.ravel() + rng.uniform(-0.15, 0.15, c.size) for c in (i, j, k)]
    return pts, nx + 1, (nx + 1) * (ny + 1)


def cases(rng, dtype=np.float64):
    def R(*s, lo=0.5, hi=1.5):
        return rng.uniform(lo, hi, s).astype(dtype)

    def D(a):
        return gk.Duplicated(np.asarray(a, dtype), np.zeros(np.shape(a), dtype))

    def K(a):
        return gk.Const(a)

    def act(x):
        return gk.Active(dtype(x))

    en = _energy_args(rng, R)
    (hx, hy, hz), jp, kp = _hex_nodes(rng, 2, 3, 3)
    (qx, qy, _), qjp, _ = _hex_nodes(rng, 1, 3, 4)
    zones = np.array([0, 1, 2, 3, 5, 6, 8, 11, 13], np.int32)
    t_kep = rng.uniform(0.3, 2.8, 6)
    ln_inp = R(2, 3, 5, lo=-1, hi=1)
    mean = ln_inp.mean(-1)
    rstd = 1.0 / np.sqrt(ln_inp.var(-1) + 1e-5)
    probs = np.exp(R(3, 5, lo=-1, hi=1))
    probs /= probs.sum(1, keepdims=True)
    return [
        ("energy", A.energy, (*[D(x) for x in en], act(1.1), 0.4, 1.2, 0.5), None, {}, ref.energy),
        ("pressure", A.pressure, (D(R(8)), D(R(8)), D(R(8, lo=-0.3, hi=0.3)), D(R(8, lo=-1.5, hi=1.5)),
                                  D(np.r_[R(6, lo=0.5, hi=0.9), R(2, lo=1.1, hi=1.5)]), act(0.9), 0.05, 1.0, -0.8),
         None, {}, ref.pressure),
        ("vol3d", A.vol3d, (D(hx), D(hy), D(hz), D(R(2, 3, 3)), jp, kp, act(1.0 / 12.0)), (2, 3, 3), {}, ref.vol3d),
        ("nodal_accumulation_3d", A.nodal_accumulation_3d, (D(R(2, 3, 3)), D(R(hx.size)), jp, kp), (2, 3, 3), {},
         ref.nodal_accumulation_3d),
        ("del_dot_vec_2d", A.del_dot_vec_2d, (D(qx), D(qy), D(R(qx.size, lo=-1, hi=1)), D(R(qx.size, lo=-1, hi=1)),
                                              D(R(qx.size)), K(zones), qjp, 1e-20), zones.size, {},
         ref.del_dot_vec_2d),
        ("hydro_2d", A.hydro_2d, (*[D(R(5, 6)) for _ in range(11)], act(0.0041), act(0.0037)), None, {},
         ref.hydro_2d),
        ("lcals_eos", A.lcals_eos, (D(R(8)), D(R(8)), D(R(8)), D(R(14)), act(0.5), act(0.48), act(0.47)), 8, {},
         ref.lcals_eos),
        ("int_predict", A.int_predict, (D(R(13 * 5)), 5, *[act(x) for x in R(7, lo=-1, hi=1)], act(0.3)), 5, {},
         ref.int_predict),
        ("planckian", A.planckian, (D(R(8)), D(R(8)), D(R(8)), D(R(8)), D(R(8))), 8, {}, ref.planckian),
        ("fir", A.fir, (D(R(24)), D(R(9))), 9, {}, ref.fir),
        ("ltimes", A.ltimes, (D(R(3, 2, 4)), D(R(3, 5)), D(R(5, 2, 4)), 5), (3, 2, 4), {}, ref.ltimes),
        ("trap_int", A.trap_int, (D(R(1)), act(0.0), act(0.1), act(0.5), act(-0.3), act(-0.4)), ref.TRAP_N, {},
         ref.trap_int),
        ("fdtd_2d", B.fdtd_2d, (D(R(3)), D(R(4, 5)), D(R(4, 5)), D(R(4, 5)), 3), None, {}, ref.fdtd_2d),
        ("heat_3d", B.heat_3d, (D(R(5, 5, 5)), D(R(5, 5, 5)), 2), None, {}, ref.heat_3d),
        ("adi", B.adi, (D(R(6, 6)), D(R(6, 6)), D(R(6, 6)), D(R(6, 6)), 2), None, {}, ref.adi),
        ("gramschmidt", B.gramschmidt, (D(R(5, 4)), D(R(4, 4)), D(R(5, 4))), None, {}, ref.gramschmidt),
        ("deriche", B.deriche, (D(R(4, 5)), D(R(4, 5)), D(R(4, 5)), D(R(4, 5)), act(0.25)), None, {}, ref.deriche),
        ("pathfinder", B.pathfinder, (D(R(4, 7)), D(R(7)), D(R(7))), None, {}, ref.pathfinder),
        ("cloverleaf_viscosity", B.cloverleaf_viscosity, (D(R(6)), D(R(5)), D(R(5, 6)), D(R(5, 6)), D(R(5, 6)),
                                                          D(R(5, 6, lo=-1, hi=1)), D(R(5, 6, lo=-1, hi=1))),
         (3, 4), {}, ref.cloverleaf_viscosity),
        ("tealeaf_cg_calc_w", B.tealeaf_cg_calc_w, (D(R(5, 6)), D(R(5, 6)), D(R(5, 6)), D(R(5, 6)), D(R(1))), (3, 4),
         {}, ref.tealeaf_cg_calc_w),
        ("layernorm_backward", B.layernorm_backward, (D(R(2, 3, 5)), D(R(5)), D(R(5)), D(R(2, 3, 5, lo=-1, hi=1)),
                                                      D(ln_inp), D(R(5)), D(mean), D(rstd)), (2, 3), {},
         ref.layernorm_backward),
        ("gelu_backward", B.gelu_backward, (D(R(9)), D(R(9, lo=-2, hi=2)), D(R(9, lo=-1, hi=1))), 9, {},
         ref.gelu_backward),
        ("softmax_backward", B.softmax_backward, (D(R(3, 5)), D(probs), D(R(3, 5, lo=-1, hi=1))), 3, {},
         ref.softmax_backward),
        ("kepler_position", B.kepler_position, (D(t_kep), D(R(6, lo=0.1, hi=0.9)), D(R(6)), D(R(6)), D(R(6)), 1e-13),
         6, {}, ref.kepler_position),
    ]
