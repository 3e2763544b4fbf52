"""An eleventh round of third-party host loops as programs (docs/programs.md, "Ported host loops", session 58): the
ports in tests/support/ported_loops11*.py (NAS CG's conj_grad and power iteration, SciPy's BiCGStab and GMRES,
TeaLeaf's CG driver reading `out[0]`, SciPy's Armijo line search over a host-summed misfit, CloverLeaf's calc_dt
MINVAL and timestep clamp, LULESH's Courant and hydro constraints with TimeIncrement, Rodinia's SRAD with q0sqr
from host ROI sums, IterativeSolvers.jl's power method bounding a Chebyshev iteration), their host reductions spelled
as the originals spell them since session 58's host reads (docs/host-code.md, "Reductions and element reads").
Each port's primal is checked against a NumPy reference of the same loop, its gradient by check_grad (central
differences in float64, the dot-product test and forward tangents, random non-zero inputs, w.r.t. the state and an
Active parameter); the host decisions each port exists for are taken on these inputs and stay put under a
perturbation larger than check_grad's step. Reads inside a checkpointed loop's step stay refused, so no port here
has a checkpointed twin."""

from __future__ import annotations

import numpy as np
import pytest
from support import ported_loops11 as p11
from support import ported_loops11_apps as pa
from support.ported_harness import on_interpreter
from support.ported_loops import round_tests

import gradkern as gk


def _u(rng, *shape, lo=0.5, hi=1.5):
    return rng.uniform(lo, hi, shape)


def _dup(a):
    return gk.Duplicated(a, np.zeros_like(a))


def _gas(rng, n=4):
    """A 1-D gas at rest but for interior velocities (the end nodes walls): density, specific energy, velocity."""
    return [_dup(_u(rng, n, lo=0.9, hi=1.1)), _dup(_u(rng, n, lo=0.9, hi=1.1)),
            _dup(np.r_[0.0, _u(rng, n - 1, lo=-0.2, hi=0.2), 0.0])]


def _specs(rng, trace=None):
    """name -> (program, its arguments, None: no checkpointed twin); `trace` collects the host decisions."""
    def t(make):
        return make(trace)
    return {
        "nas_cg": (p11.nas_cg(), [_dup(_u(rng, 6)), _dup(_u(rng, 6, lo=3.0, hi=3.5)), _dup(np.zeros(1)),
                                  gk.Active(0.7)], None),
        "bicgstab": (t(p11.bicgstab), [_dup(_u(rng, 6, lo=-0.5, hi=0.5)), _dup(_u(rng, 6)),
                                       _dup(_u(rng, 6, lo=3.0, hi=3.5)), gk.Active(0.8)], None),
        "gmres": (t(p11.gmres), [_dup(_u(rng, 6, lo=-0.5, hi=0.5)), _dup(_u(rng, 6)),
                                 _dup(_u(rng, 6, lo=3.0, hi=3.5)), gk.Active(0.8)], None),
        "tealeaf_cg": (t(p11.tealeaf_cg), [_dup(_u(rng, 6)), _dup(_u(rng, 6)), _dup(_u(rng, 6, lo=2.5, hi=3.0)),
                                           gk.Active(0.6)], None),
        "armijo_descent": (t(p11.armijo_descent), [_dup(_u(rng, 3, lo=-0.5, hi=0.5)),
                                                   _dup(_u(rng, 5, 3, lo=-1.0, hi=1.0)),
                                                   _dup(_u(rng, 5, lo=-1.0, hi=1.0)), gk.Active(1.0)], None),
        "cloverleaf_hydro": (t(pa.cloverleaf_hydro), _gas(rng) + [gk.Active(1.4)], None),
        "lulesh_hydro": (t(pa.lulesh_hydro), _gas(rng) + [gk.Active(1.4)], None),
        "rodinia_srad": (t(pa.rodinia_srad), [_dup(_u(rng, 3, 4, lo=80.0, hi=160.0)), _dup(np.zeros((3, 4))),
                                              gk.Active(0.5)], None),
        "power_chebyshev": (pa.power_chebyshev(), [_dup(_u(rng, 6, lo=-0.5, hi=0.5)), _dup(_u(rng, 6)),
                                                   _dup(_u(rng, 6, lo=2.5, hi=3.0)), gk.Active(0.6)], None),
    }


REFERENCES = {"nas_cg": p11.nas_cg_reference, "bicgstab": p11.bicgstab_reference, "gmres": p11.gmres_reference,
              "tealeaf_cg": p11.tealeaf_cg_reference, "armijo_descent": p11.armijo_reference,
              "cloverleaf_hydro": pa.cloverleaf_hydro_reference, "lulesh_hydro": pa.lulesh_hydro_reference,
              "rodinia_srad": pa.rodinia_srad_reference, "power_chebyshev": pa.power_chebyshev_reference}

# Every port's check runs in CI on the interpreter (docs/testing.md "Test time"); the Numba twins all run under
# `full`: each compiles its kernels' primal, augmented primal, reverse and tangent and the reads' generated
# kernels, LULESH's (the fewest launches a step) 80 s of wall time on the loaded 2 cores, beyond the round's 8 s
# (tests/program/test_host_reductions.py's test_on_numba runs reads on Numba in CI).
FULL = set()
NUMBA_SAMPLE = set()
globals().update(round_tests(_specs, FULL, NUMBA_SAMPLE))


def _values(args):
    return [a.val.copy() if isinstance(a, gk.Duplicated) else a.val for a in args]


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_primal_matches_the_numpy_reference(name, monkeypatch):
    """The program run plainly on the interpreter against the same loop in NumPy, each output within 1e-12 of its
    largest value: a few dozen roundings a value, the reference's sums pairwise (NumPy's) where the program's
    host reductions sum in order (docs/host-code.md), GMRES's reference a dense least-squares solve."""
    on_interpreter(monkeypatch)
    program, args, _ = _specs(np.random.default_rng(4))[name]
    values = _values(args)
    want = REFERENCES[name](*_values(args))
    program(*values)
    for k, expected in want.items():
        scale = float(np.max(np.abs(expected)))
        assert scale > 0.0, (name, k)
        np.testing.assert_allclose(values[k], expected, rtol=0, atol=1e-12 * scale, err_msg=f"{name} {k}")


# what each port's host decisions must include on check_grad's inputs (round_tests' rng seed 1)
PATHS = {
    "bicgstab": lambda tr: tr[0][0] in ("r", "s") and tr[0][1] < p11.BICG["maxiter"],  # an early exit
    "gmres": lambda tr: not any(tr),  # no step below atol (SciPy would stop)
    "tealeaf_cg": lambda tr: tr[0] < p11.TEA_CG["max_iters"],  # stopped on its error
    "armijo_descent": lambda tr: set(tr) == {0, 1},  # alpha0 accepted on some steps, interpolated on others
    "cloverleaf_hydro": lambda tr: set(tr) == {"cell", "clamp"},  # MINVAL and the dtrise clamp both bind
    # a step whose dt is the Courant constraint's (the host min), one the ratio bounds, the last cut to stoptime
    "lulesh_hydro": lambda tr: ("courant",) in tr and any(len(s) > 1 and s[1] in ("lb", "ub") for s in tr)
    and "stop" in tr[-1],
    "rodinia_srad": lambda tr: any(tr),  # the coefficient clamp sets some cells
}


@pytest.mark.parametrize("name", sorted(PATHS))
def test_host_decisions_are_taken_and_stay_put_under_perturbation(name, monkeypatch):
    """Each port's data-driven path (an early exit, a branch of a line search or time-step controller, the
    clamped cells) is taken on the inputs check_grad differentiates at, and is the same at inputs moved by 1e-6
    relative in a random direction (check_grad's central differences step less), so the gradient checked is the
    derivative of one branch."""
    on_interpreter(monkeypatch)
    rng = np.random.default_rng(11)
    paths = []
    for move in (0.0, 1e-6, -1e-6):
        trace = []
        program, args, _ = _specs(np.random.default_rng(1), trace)[name]
        values = [v * (1.0 + move * rng.uniform(0.5, 1.0, np.shape(v))) for v in _values(args)]
        program(*[v if isinstance(v, np.ndarray) else float(v) for v in values])
        paths.append(trace)
    assert PATHS[name](paths[0]), paths[0]
    assert paths[1] == paths[0] == paths[2], paths


def test_gmres_dense_hessenberg_is_refused_naming_the_line(monkeypatch):
    """SciPy's spelling of GMRES's small problem, the rotated Hessenberg copied into an array element by element
    and `np.linalg.solve`d: the first element's write is a fill launch into a fresh array, the second a host write
    to an array a launch wrote, refused at its line before any shadow changed (NumPy's solve would make a derived
    array anyway). The port keeps the Hessenberg as Python lists of Active scalars and back-substitutes."""
    on_interpreter(monkeypatch)
    _, args, _ = _specs(np.random.default_rng(2))["gmres"]
    rng = np.random.default_rng(6)
    args = [gk.Duplicated(a.val.copy(), rng.standard_normal(a.val.shape)) if isinstance(a, gk.Duplicated) else a
            for a in args]
    before = [a.dval.copy() for a in args if isinstance(a, gk.Duplicated)]
    with pytest.raises(gk.ProgramError, match=r"a host write to 'big' at .*ported_loops11\.py:\d+ "
                                              r"\(`big\[i, k\] = h\[i\]\[k\]`\)(?s:.*)gk\.fill"):
        gk.autodiff(p11.gmres(dense=True), *args)
    for a, dval in zip([a for a in args if isinstance(a, gk.Duplicated)], before):
        np.testing.assert_array_equal(a.dval, dval)


def _red_team(u, e):
    """Spellings the round's red-teaming met in drivers, in one program: a lag product `np.dot(v[1:], v[:-1])`
    (overlapping views of one array: the generated dot kernel's shadows overlapped, refused with an AliasingError
    naming neither the line nor a spelling), `np.square(np.linalg.norm(v))`, `np.reciprocal(s)` and
    `math.fabs(s)` (derived, refused where a launch took them), `np.mean(v, 0)` of a vector (an axis naming every
    axis, by position: derived). Since session 58 the first copies its second operand by a launch before the dot,
    the next three are one-thread launches as `np.sqrt(s)` is, the last the whole reduction (program/
    hostreads.py)."""
    import math
    n = u.shape[0]
    v, w = np.zeros(n), np.zeros(n)
    gk.launch(p11.scal_into, n, v, u, 1.5)
    lag = np.dot(v[1:], v[:-1])
    scale = np.square(np.linalg.norm(v)) * np.reciprocal(lag) + math.fabs(v[2] - 3.0) + np.mean(v, 0)
    gk.launch(p11.axpy, n, w, u, scale)
    gk.launch(p11.sum_into, n, w, w, e)


def test_lag_products_squares_reciprocals_fabs_and_axis_means_of_reads_are_differentiated(monkeypatch):
    """check_grad (central differences in float64, the dot-product test, forward tangents) of _red_team on random
    non-zero inputs; each of its five spellings was refused before session 58's change."""
    from gradkern.testing import check_grad
    on_interpreter(monkeypatch)
    rng = np.random.default_rng(5)
    report = check_grad(_red_team, _dup(_u(rng, 6)), gk.Duplicated(np.zeros(1), np.ones(1)))
    assert report.ok and report.checked > 0, str(report)
