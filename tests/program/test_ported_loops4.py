"""A fourth round of third-party host loops as programs (docs/programs.md, "Ported host loops", session 51): the
ports in tests/support/ported_loops4*.py (NPB 3.4 CG, LU-SSOR and SP-ADI; Mantevo miniFE 2.0 and miniGhost 1.0.1;
TeaLeaf 1.0's Chebyshev solver; HPGMG-FV 0.4's red-black smoother on strided views; a Kripke-like sweep; LULESH
2.0's TimeIncrement; SPEC CPU2000 swim; a Lorenz-96 RK4 driver; an SU2-like pseudo-time loop), leaning on the
host-code patterns drivers use between launches: convergence loops on a derived norm, boundary conditions set on
views, three-buffer rotations, launches on transposed and strided views, host reductions that a kernel must
compute instead, early exits, periodic output, restarts. Each port's store-all gradient is checked against float64
central differences and by the dot-product test (random non-zero inputs; test_ported_loops.py's checks, which also
compare the primals after the gradient with a primal run bit for bit), its checkpointed gradient against the
store-all one where its loop has a fixed count; the spellings gradkern refuses are refused naming the line and the
spelling that works, which is ported too."""

from __future__ import annotations

import numpy as np
import pytest
from support import ported_loops3_apps as p3a
from support import ported_loops4 as p4
from support import ported_loops4_apps as pa
from support.ported_harness import on_interpreter
from support.ported_loops_checks import port_tests

import gradkern as gk
from gradkern.testing import check_grad

from .test_ported_loops import _check_against_differences, _gradient, _refused, _u, checkpointed, plain
from .test_ported_loops3 import _gradients_agree, _weights
from .test_ported_solvers import _same_gradients

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample

_CSR = p3a.laplacian_csr(3, 3)[:3]
_FE = p4.minife_structure(6)


def _nodes(rng, n):
    """LULESH's node positions: increasing, spacing 1/(n-1) within 20%."""
    return np.cumsum(np.concatenate([[0.0], rng.uniform(0.8, 1.2, n - 1) / (n - 1)]))


def _specs(rng):
    """name -> (program factory taking `loop`, arguments as (kind, value)), as test_ported_loops.py's _ports."""
    return {
        "npb_cg": (lambda loop: p4.npb_cg(loop, _CSR), [("dup", _u(rng, 9)), ("dup", _u(rng, 1)), ("active", 0.5),
                                                         ("int", 2)]),
        "tealeaf_cheby": (p4.tealeaf_cheby, [("dup", _u(rng, 5, 6)), ("dup", _u(rng, 5, 6, lo=0.8, hi=1.2)),
                                             ("active", 0.3), ("int", 3)]),
        "npb_lu_ssor": (p4.npb_lu_ssor, [("dup", _u(rng, 5, 5)), ("dup", _u(rng, 5, 5)), ("active", 1.2),
                                         ("int", 3)]),
        "npb_sp_adi": (p4.sp_adi, [("dup", _u(rng, 5, 6)), ("active", 0.4), ("int", 2)]),
        "hpgmg_zebra": (p4.hpgmg_zebra, [("dup", _u(rng, 5, 7)), ("active", 0.25), ("int", 2)]),
        "minighost": (pa.minighost, [("dup", _u(rng, 5, 6)), ("dup", _u(rng, 5, 6)), ("active", 0.2), ("int", 4)]),
        "lulesh": (lambda loop: pa.lulesh(1.0e9, [], loop),
                   [("dup", _nodes(rng, 7)), ("dup", _u(rng, 7, lo=-0.3, hi=0.3)),
                    ("const", _u(rng, 6, lo=0.1, hi=0.2)), ("active", 1.0), ("int", 4)]),
        "swim": (pa.swim, [("dup", _u(rng, 8, lo=-0.2, hi=0.2)), ("dup", _u(rng, 8, lo=0.9, hi=1.1)), ("active", 1.0),
                           ("int", 5)]),
        "lorenz96": (lambda loop: pa.lorenz96(loop, {"every": 2, "max_steps": 4}),
                     [("dup", _u(rng, 8, lo=7.0, hi=9.0)), ("dup", _u(rng, 1)),
                      ("const", _u(rng, 4, 8, lo=7.0, hi=9.0)), ("active", 8.0), ("int", 8)]),
    }


PORTS = list(_specs(np.random.default_rng(0)))


# Every port's gradient (finite differences, the dot-product test) and its checkpointed twin run in CI on the
# interpreter: the transforms' output and the program layer, which never looks at a kernel's body, without a compile
# (the Numba kernels of these ports cost 3-10 s of CPU each to compile, the interpreter's check of every port a few
# seconds: docs/testing.md "Test time", session 52). The Numba backend's gradient runs in CI for NUMBA_SAMPLE
# (npb_lu_ssor), the others' under `full`.
NUMBA_SAMPLE = {"npb_lu_ssor"}
# The checkpointed twin: gk.checkpointed_loop(step, nsteps, snapshots=2) around the port's fixed-count loop (Lorenz-96:
# around each segment between kept states): the store-all gradient and primals.
globals().update(port_tests(_specs, NUMBA_SAMPLE, _check_against_differences, _same_gradients, loop=plain))


# -- convergence loops: the host reads a derived norm for control flow; the gradient is that of the iterations run --
def test_minife_cg_while_normr_above_tolerance_differentiates_the_iterations_run():
    """cg_solve's `for (k = 1; k <= max_iter && normr > tolerance; ++k)` with normr = np.sqrt(rtrans[0]), a
    derived scalar the host compares: the loop stops early (after 4 of 8 iterations), central differences agree (a
    small perturbation keeps the path), and the gradient equals the one of the same loop with max_iter 4."""
    rng = np.random.default_rng(30)
    rowp, cols, slots = _FE
    spec = [("dup", _u(rng, 6)), ("dup", _u(rng, 6)), ("active", 0.7), ("int", 8)]
    taken = []
    stop, program = _with_tolerance(rowp, cols, slots, spec, taken)
    assert 2 <= stop < 8
    _check_against_differences(program, spec, np.random.default_rng(31))
    assert taken and all(n == stop for n in _runs(taken)), taken
    weights = _weights(spec, 32)
    want = _gradient(p4.minife(rowp, cols, slots, 0.0, []), [*spec[:3], ("int", stop)], weights)
    _gradients_agree(want, _gradient(program, spec, weights))


def _with_tolerance(rowp, cols, slots, spec, taken):
    """The iteration `stop` and miniFE's program with a tolerance between the norm after it and the smallest
    before it (of a primal run with tolerance 0, which runs max_iter), so that the loop stops after `stop`."""
    probe = []
    p4.minife(rowp, cols, slots, 0.0, probe)(*[v.copy() if isinstance(v, np.ndarray) else v for _, v in spec])
    norms = [normr for _, normr in probe]
    assert len(norms) == spec[3][1] + 1
    # CG's residual norm need not decrease: the first iteration k >= 2 whose norm is below all before it
    stop = next(k for k in range(2, len(norms) - 1) if norms[k] < min(norms[:k]))
    return stop, p4.minife(rowp, cols, slots, float(np.sqrt(norms[stop] * min(norms[:stop]))), taken)


def _runs(taken):
    """The iterations of each run recorded in `taken` (each run records 0, 1, 2, ...)."""
    out = []
    for k, _ in taken:
        if k == 0:
            out.append(0)
        else:
            out[-1] += 1
    return out


def test_kripke_source_iteration_until_max_change_below_tol():
    """The host's `if np.abs(phi - phi_old).max() < tol: break` (derived values, compared): the iterations run
    are differentiated; central differences agree; the run stops before niter."""
    rng = np.random.default_rng(33)
    spec = [("dup", _u(rng, 6, lo=0.1, hi=0.3)), ("dup", _u(rng, 6)), ("const", _u(rng, 6, lo=1.0, hi=2.0)),
            ("active", 0.5), ("int", 12)]
    probe = []
    p4.kripke(0.0, probe)(*[v.copy() if isinstance(v, np.ndarray) else v for _, v in spec])
    assert len(probe) == 12
    # the changes fall geometrically (sigma_s / sigma_t < 1): a tolerance between the 4th and the 5th change
    deltas = []
    run = [v.copy() if isinstance(v, np.ndarray) else v for _, v in spec]
    for k in range(6):
        before = run[0].copy()
        p4.kripke(0.0, [])(run[0], *run[1:4], 1)
        deltas.append(float(np.abs(run[0] - before).max()))
    assert deltas[4] < deltas[3] < min(deltas[:3])
    taken = []
    _check_against_differences(p4.kripke(float(np.sqrt(deltas[3] * deltas[4])), taken), spec,
                               np.random.default_rng(34))
    assert taken and len(taken) % 5 == 0 and taken[:5] == [0, 1, 2, 3, 4], taken


def test_npb_lu_ssor_reports_a_norm_every_inorm_steps_and_exits_below_tolrsd():
    """ssor.f's `if (mod(istep, inorm) == 0)`: l2norm in a kernel, the host's float() of it appended to a list
    (periodic output, a constant on purpose) and `if (rsdnm < tolrsd) exit` on the derived value; the gradient
    is that of the steps run, as the fixed-count program's with as many steps."""
    make, spec = _specs(np.random.default_rng(35))["npb_lu_ssor"]
    spec[3] = ("int", 12)
    probe = []
    p4.npb_lu_ssor(plain, tolrsd=0.0, norms=probe)(*[v.copy() if isinstance(v, np.ndarray) else v for _, v in spec])
    assert len(probe) == 6 and probe[2] < probe[1] < probe[0]
    norms = []
    program = p4.npb_lu_ssor(plain, tolrsd=float(np.sqrt(probe[1] * probe[2])), norms=norms)
    _check_against_differences(program, spec, np.random.default_rng(36))
    assert norms and len(norms) % 3 == 0
    weights = _weights(spec, 37)
    _gradients_agree(_gradient(make(plain), [*spec[:3], ("int", 6)], weights), _gradient(program, spec, weights))


def test_lulesh_while_time_below_stoptime_differentiates_the_cycles_run():
    """lulesh.cc's `while (time < stoptime && cycle < its)` with time the kernel-written st[1] (a derived value
    compared on the host): it stops on the time; the gradient (TimeIncrement's clamps and the last step cut to
    the stop time included) matches central differences and the fixed-count program's with as many cycles."""
    _, spec = _specs(np.random.default_rng(38))["lulesh"]
    spec[4] = ("int", 40)
    taken = []
    stoptime = 0.02
    _check_against_differences(pa.lulesh(stoptime, taken), spec, np.random.default_rng(39))
    steps = taken.index(0, 1) if taken.count(0) > 1 else len(taken)
    assert 2 < steps < 40, taken
    weights = _weights(spec, 40)
    _gradients_agree(_gradient(pa.lulesh(stoptime, [], plain), [*spec[:4], ("int", steps)], weights),
                     _gradient(pa.lulesh(stoptime, []), spec, weights))


def test_su2_pseudo_time_until_the_residual_falls_an_order():
    """SU2's convergence monitor: math.log10(math.sqrt(rms[0] / n)) (a derived scalar through the math module's
    wrappers) compared with the start's minus `orders`; local time steps in a kernel; it stops before max_iter,
    and central differences agree."""
    rng = np.random.default_rng(41)
    spec = [("dup", _u(rng, 8)), ("dup", _u(rng, 8)), ("active", 0.1), ("int", 60)]
    taken = []
    _check_against_differences(pa.su2(1.0, taken), spec, np.random.default_rng(42))
    steps = taken.index(0, 1) if taken.count(0) > 1 else len(taken)
    assert 3 < steps < 60, steps


# -- three-buffer rotation, restarts, periodic output ---------------------------------------------------------------
def test_swim_rotating_three_names_gives_the_t_mod_3_spelling_gradient():
    """shallow.f's three time levels as `old, cur, new = cur, new, old` after each cycle (a plain loop): the
    gradient of the t % 3 spelling a checkpointed step needs, and central differences."""
    make, spec = _specs(np.random.default_rng(43))["swim"]
    weights = _weights(spec, 44)
    _gradients_agree(_gradient(make(plain), spec, weights), _gradient(pa.swim_rotate, spec, weights))
    _check_against_differences(pa.swim_rotate, spec, np.random.default_rng(45))


def _ghost_spec(rng, nsteps=4):
    return [("dup", _u(rng, 5, 6)), ("dup", _u(rng, 5, 6)), ("active", 0.2), ("int", nsteps)]


def test_minighost_reports_the_grid_sum_every_k_steps():
    """MG_SUM_GRID every 2 steps: a kernel sum read with float() into a report (a constant on purpose) and the
    error check on the derived sum (control flow): the gradient of the program without them."""
    spec = _ghost_spec(np.random.default_rng(46))
    report = []
    weights = _weights(spec, 47)
    _gradients_agree(_gradient(pa.minighost(plain), spec, weights),
                     _gradient(pa.minighost(plain, report=report), spec, weights))
    assert len(report) == 2 and all(isinstance(s, float) and s > 0 for s in report)
    _check_against_differences(pa.minighost(checkpointed, report=[]), spec, np.random.default_rng(48))


def test_minighost_restart_kept_in_memory_is_differentiated():
    """A restart written at step 2 (`saved = a.copy()`), the state cleared and read back (`gk.copy(a, saved)`): the
    gradient flows through the saved copy (central differences), and equals the run without a restart."""
    spec = _ghost_spec(np.random.default_rng(49)) + [("int", 2)]
    _check_against_differences(pa.minighost_restart, spec, np.random.default_rng(50))
    weights = _weights(spec, 51)
    _gradients_agree(_gradient(pa.minighost(plain), spec[:4], weights),
                     _gradient(pa.minighost_restart, spec, weights))


def test_minighost_restart_through_np_save_and_np_load_is_refused_naming_the_line():
    """Before: np.save of the state and np.load of it mid-program ran, and the state read back was a constant: the
    gradient lost every step before the restart, with no error. Now np.save of an array that depends on an active
    one is refused at the user's line, before writing, naming the in-memory spelling (docs/host-code.md, "Files
    and restarts")."""
    rng = np.random.default_rng(52)
    args = [gk.Duplicated(_u(rng, 5, 6), rng.random((5, 6))), gk.Duplicated(_u(rng, 5, 6), rng.random((5, 6))),
            gk.Active(0.2), 4, 2]
    shadows, error = _refused(gk.ProgramError, r"`np\.save` of '(a|grid)' at .*ported_loops4_apps\.py:\d+ "
                                               r"\(`np\.save\(f, a\) +# write_restart`", pa.minighost_file_restart,
                              *args)
    assert "gk.copy(u, saved)" in str(error) and "u.view(np.ndarray)" in str(error)
    for a, s in zip(args[:2], shadows):
        np.testing.assert_array_equal(a.dval, s)


def test_minighost_periodic_output_to_a_file_of_a_plain_view_is_accepted():
    """np.save(f, b.view(np.ndarray)) every step: output with no derivative through the file, by the user's word;
    the gradient is the program's without it."""
    spec = _ghost_spec(np.random.default_rng(53))
    files = []
    weights = _weights(spec, 54)
    _gradients_agree(_gradient(pa.minighost(plain), spec, weights),
                     _gradient(lambda *a: pa.minighost_file_output(*a, files), spec, weights))
    assert len(files) == 4 and np.load(__import__("io").BytesIO(files[-1])).shape == (5, 6)


@pytest.mark.parametrize("kind, line", [("zero", r"a\[:, -1\] = 0\.0"), ("copy", r"a\[0\] = a\[1\]"),
                                        ("scale", r"a\[\.\.\.\] \*= 0\.5")])
def test_minighost_boundary_written_with_numpy_is_refused_naming_the_line(kind, line):
    """`u[:, -1] = 0`, `u[0] = u[1]`, `u[...] *= 0.5` into an array a launch has taken: refused at the line, before
    writing, naming gk.fill / gk.copy (the port's _ghost_boundary spelling)."""
    rng = np.random.default_rng(55)
    args = [gk.Duplicated(_u(rng, 5, 6), rng.random((5, 6))), gk.Duplicated(_u(rng, 5, 6), rng.random((5, 6))),
            gk.Active(0.2), 3]
    # (the in-place multiply is refused by the host-write guard since session 56, which names the line's text: an
    # elementwise operation that fits is a launch only into an array no launch has taken, docs/host-code.md)
    match = r"host write to '[ab]' at .*ported_loops4_apps\.py:\d+ \(`" + line
    shadows, error = _refused(gk.ProgramError, match, pa.minighost_host_boundary(kind), *args)
    assert "gk.copy(dst, src) or gk.fill(dst, value)" in str(error)
    for a, s in zip(args[:2], shadows):
        np.testing.assert_array_equal(a.dval, s)


# -- host arithmetic a kernel must do ------------------------------------------------------------------------------
def _l96_args(rng):
    return [gk.Duplicated(_u(rng, 8, lo=7.0, hi=9.0), rng.random(8)), gk.Duplicated(_u(rng, 1), rng.random(1)),
            gk.Const(_u(rng, 4, 8, lo=7.0, hi=9.0)), gk.Active(8.0), 2]


def test_lorenz96_rk_stage_combined_on_the_host_is_differentiated(monkeypatch):
    """`x1 = x + 0.5 * dt * k1` on the host, then a launch taking x1: refused until session 56; now two launches of
    generated kernels (program/hostufuncs.py), whose gradient matches central differences and the dot-product
    test (docs/host-code.md, "Elementwise NumPy")."""
    on_interpreter(monkeypatch)
    rng = np.random.default_rng(56)
    spec = [("dup", _u(rng, 8, lo=7.0, hi=9.0)), ("dup", _u(rng, 1)), ("const", _u(rng, 4, 8, lo=7.0, hi=9.0)),
            ("active", 8.0), ("plain", 2)]
    _check_against_differences(pa.lorenz96_host_stage, spec, rng)


def test_su2_global_time_step_from_a_host_max_is_differentiated():
    """`dt = 0.4 * dx / (np.abs(u).max() + 1.0)`: refused naming the reduction until session 57; now a read
    (program/hostreads.py), the derivative through dt included: central differences agree."""
    rng = np.random.default_rng(57)
    check_grad(pa.su2_global_dt, gk.Duplicated(_u(rng, 8), np.zeros(8)), gk.Duplicated(_u(rng, 8), np.zeros(8)),
               gk.Active(0.1), 2)


def test_su2_inlet_reimposed_on_the_host_is_refused_naming_the_line():
    rng = np.random.default_rng(58)
    args = [gk.Duplicated(_u(rng, 8), rng.random(8)), gk.Duplicated(_u(rng, 8), rng.random(8)), gk.Active(0.1), 2]
    _refused(gk.ProgramError, r"host write to 'u' at .*ported_loops4_apps\.py:\d+ \(`u\[0\] = 1\.0`\)",
             pa.su2_host_inlet, *args)


def test_npb_cg_zeta_from_a_host_dot_product_is_differentiated():
    """cg.f's `zeta = shift + 1.0d0 / norm_temp1` with norm_temp1 = np.dot(x, z): the Active shift plus a scalar
    reduced from an active array, refused until session 57; now np.dot is a read (program/hostreads.py) and zeta
    carries both derivatives: central differences agree (the port computes zeta in npb_cg_zeta)."""
    rng = np.random.default_rng(59)
    check_grad(p4.npb_cg_host_zeta(_CSR), gk.Duplicated(_u(rng, 9), np.zeros(9)),
               gk.Duplicated(_u(rng, 1), np.zeros(1)), gk.Active(0.5), 2)


def test_lorenz96_state_kept_inside_a_checkpointed_step_is_refused():
    """`kept.append(x.copy())` inside a checkpointed loop's step: the kept copy outlives the loop, and a recomputed
    step makes another. Refused when the reverse recomputes the step (as any step that is not a function of t
    and the state). Before, the hint named ping-pong buffers chosen from t, which has nothing to do with it; now
    it names the spelling the port uses: the state kept between checkpointed segments (checked above)."""
    args = _l96_args(np.random.default_rng(60))
    args[4] = 4
    with pytest.raises(gk.ProgramError, match=r"step 1 of the checkpointed loop \(launch 9 of the step, '_copy1'\) "
                                              r"took an array that the step made .*`kept\.append\(u\.copy\(\)\)`"
                       ) as info:
        gk.autodiff(pa.lorenz96_kept_in_checkpointed_step, *args)
    assert "gk.checkpointed_loop(step, k, ...); kept.append(u.copy())" in str(info.value)


@pytest.mark.parametrize("name", ["npb_sp_adi", "swim"])
def test_forward_mode_agrees_with_reverse_on_transposed_views_and_rotations(name):
    """SP's column solves on transposed views and swim's three-level rotation: forward mode's <w, J v> equals
    reverse mode's <J^T w, v> (the same derivatives summed in another order: 1e-12 relative)."""
    make, spec = _specs(np.random.default_rng(61))[name]
    rng = np.random.default_rng(62)
    weights = _weights(spec, 63)
    tangents = {n: rng.standard_normal(np.shape(v)) for n, (kind, v) in enumerate(spec) if kind in ("dup", "active")}
    args = [gk.Duplicated(v.copy(), tangents[n].copy()) if kind == "dup"
            else gk.Duplicated(v, float(tangents[n])) if kind == "active" else v for n, (kind, v) in enumerate(spec)]
    gk.autodiff(make(plain), *args, mode=gk.Forward)
    forward = sum(float(np.sum(weights[n] * args[n].dval)) for n in weights)
    grads, dscalar, _ = _gradient(make(plain), spec, weights)
    reverse = sum(float(np.sum(grads[n] * tangents[n])) for n in grads)
    reverse += sum(dscalar * float(t) for n, t in tangents.items() if n not in grads)
    assert abs(forward - reverse) <= 1e-12 * max(1.0, abs(reverse)), (forward, reverse)
