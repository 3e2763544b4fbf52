"""A third round of third-party host loops as programs (docs/programs.md, "Ported host loops", session 50): the
ports in tests/support/ported_loops3*.py (PolyBench/C 4.2 gramschmidt, cholesky, durbin, deriche; PolyBench/GPU
lu; Rodinia 3.1 backprop and cfd; Parboil lbm; CloverLeaf 1.3's hydro cycle; HPCG 3.1's preconditioned CG).
Each port's store-all gradient is checked against float64 central differences and by the dot-product test
(random non-zero inputs; w.r.t. the initial arrays and the Active scalar where the original has a parameter),
its primals after the gradient against a primal run bit for bit (test_ported_loops.py's checks), and its
checkpointed gradient against the store-all one; the natural spellings gradkern refuses are refused, naming the
line and the spelling that works."""

from __future__ import annotations

import numpy as np
import pytest
from support import ported_loops3 as p3
from support import ported_loops3_apps as pa
from support.ported_harness import on_interpreter
from support.ported_loops_checks import port_tests

import gradkern as gk
from gradkern.testing import check_grad

from .test_ported_loops import _check_against_differences, _gradient, _refused, _u, checkpointed, plain
from .test_ported_solvers import _same_gradients

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


def _spd(rng, n):
    m = rng.uniform(-1.0, 1.0, (n, n))
    return m @ m.T + n * np.eye(n)


def _lbm_grids(rng, ny, nx):
    """Two D2Q9 grids (near the rest state, every distribution positive) and the flags: the margin rows, two
    obstacle cells inside."""
    size = (ny + 2) * nx + 2
    weights = np.array(pa.LBM_W)[:, None]
    grids = [weights * rng.uniform(0.9, 1.1, (9, size)) for _ in range(2)]
    flags = np.zeros(size, np.int64)
    margin = nx + 1
    flags[margin + rng.choice(ny * nx, size=2, replace=False)] = 1
    return grids, flags


def _specs(rng):
    """name -> (program factory, arguments as (kind, value)), as test_ported_loops.py's _ports."""
    esue, normals = pa.cfd_mesh(rng, 6)
    cfd_state = np.stack([rng.uniform(1.0, 1.4, 6), rng.uniform(0.2, 0.5, 6), rng.uniform(2.4, 2.8, 6)])
    (src, dst), flags = _lbm_grids(rng, 3, 4)
    backprop_in = _u(rng, 4)
    backprop_in[0] = 1.0  # the bias unit
    csr = pa.laplacian_csr(3, 3)
    return {
        "gramschmidt": (p3.gramschmidt, [("dup", rng.uniform(-1.0, 1.0, (5, 4))), ("dup", _u(rng, 4, 4)),
                                         ("dup", _u(rng, 5, 4))]),
        "lu": (p3.lu, [("dup", rng.uniform(-1.0, 1.0, (5, 5)) + 5.0 * np.eye(5))]),
        "cholesky": (p3.cholesky, [("dup", _spd(rng, 5))]),
        "durbin": (p3.durbin, [("dup", _u(rng, 6, lo=0.05, hi=0.25)), ("dup", _u(rng, 6))]),
        "deriche": (p3.deriche, [("dup", _u(rng, 5, 6)), ("dup", _u(rng, 5, 6)), ("active", 0.25), ("int", 2)]),
        "backprop": (pa.backprop, [("const", backprop_in), ("dup", rng.uniform(-0.5, 0.5, (4, 4))),
                                   ("dup", rng.uniform(-0.5, 0.5, (4, 3))), ("const", _u(rng, 3, lo=0.1, hi=0.9)),
                                   ("active", 0.3), ("int", 3)]),
        "cfd": (pa.cfd, [("dup", cfd_state), ("int", esue), ("const", normals), ("const", _u(rng, 6, lo=4.0, hi=9.0)),
                         ("active", 0.2), ("int", 2)]),
        "lbm": (pa.lbm, [("dup", src), ("dup", dst), ("int", flags), ("active", 1.2), ("int", 4), ("int", 3)]),
        "cloverleaf": (pa.cloverleaf, [("dup", _u(rng, 8, lo=0.8, hi=1.2)), ("dup", _u(rng, 8, lo=2.0, hi=3.0)),
                                       ("dup", np.concatenate([[0.0], rng.uniform(-0.1, 0.1, 7), [0.0]])),
                                       ("active", 1.4), ("int", 3)]),
        "hpcg": (lambda loop: pa.hpcg(loop, csr), [("dup", _u(rng, 9)), ("dup", _u(rng, 9)), ("active", 0.5),
                                                   ("int", 3)]),
    }


PORTS = list(_specs(np.random.default_rng(0)))


# Every port's gradient (finite differences, the dot-product test) and its checkpointed twin run in CI on the
# interpreter: the transforms' output and the program layer, which never looks at a kernel's body, without a compile
# (the Numba kernels of these ports cost 3-10 s of CPU each to compile, the interpreter's check of every port a few
# seconds: docs/testing.md "Test time", session 52). The Numba backend's gradient runs in CI for NUMBA_SAMPLE (cfd,
# gramschmidt), the others' under `full`.
NUMBA_SAMPLE = {"cfd", "gramschmidt"}
# The checkpointed twin: gk.checkpointed_loop(step, nsteps, snapshots=2) around the port's host loop (the time loop, or
# the k-loop of a factorisation: each step a function of k and the state): the store-all gradient and primals.
globals().update(port_tests(_specs, NUMBA_SAMPLE, _check_against_differences, _same_gradients, loop=plain))


def _gradients_agree(want, got):
    """Two store-all gradients of the same launches on the same values (an atomic sum may add in another order: a
    few ulps), and the same primals."""
    for n in want[0]:
        np.testing.assert_allclose(got[0][n], want[0][n], rtol=1e-12, atol=1e-14)
        np.testing.assert_array_equal(got[2][n], want[2][n])
    assert (got[1] is want[1] is None) or abs(got[1] - want[1]) <= 1e-12 * abs(want[1])


def _weights(spec, seed):
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal(np.shape(v)) for n, (kind, v) in enumerate(spec) if kind == "dup"}


# -- the spellings a porting user writes first: accepted ones give the port's gradient, refused ones say why ---------
@pytest.mark.parametrize("program", [p3.deriche_numpy_exp, p3.deriche_math_exp])
def test_deriche_coefficients_from_exp_of_the_active_alpha_on_the_host_are_differentiated(monkeypatch, program):
    """Before session 57 `np.exp(-alpha)` and `math.exp(-alpha)` of the Active alpha were refused naming the line
    (before session 50 NumPy's TypeError, and a float() refusal without the line); now each is a one-thread launch
    of the kernel-language exp and a read (program/hostreads.py, docs/host-code.md "Elementary functions of an Active
    scalar"): the coefficient's derivative w.r.t. alpha agrees with central differences and the dot-product test."""
    on_interpreter(monkeypatch)
    rng = np.random.default_rng(13)
    check_grad(program, gk.Duplicated(_u(rng, 4, 5), np.zeros((4, 5))), gk.Duplicated(_u(rng, 4, 5), np.zeros((4, 5))),
               gk.Active(0.25), 1)


@gk.kernel
def _scale(x, a, b):
    i = gk.tid()
    x[i] = a * x[i] + b


def test_numpy_scalar_arithmetic_with_an_active_scalar_is_differentiated():
    """`np.float64(2.0) ** -alpha` (deriche's powf(2, -alpha)), `h = np.float64(1) / n * alpha` and comparisons with
    NumPy scalars go through ActiveScalar.__array_ufunc__ now: the operators' derivatives, reverse and forward,
    checked against central differences (h = 1e-6 on values of order 1: truncation ~1e-12, rounding ~1e-10; 1e-7
    bounds both)."""
    x0 = np.random.default_rng(14).uniform(0.5, 1.5, 5)

    def program(x, alpha):
        assert np.float64(0.0) < alpha and not np.float64(9.0) <= alpha  # comparisons read the value
        b1 = np.float64(2.0) ** -alpha
        h = np.float64(1.0) / np.float64(x.shape[0]) * alpha
        gk.launch(_scale, x.shape[0], x, b1, np.negative(h) + np.float64(3.0) * alpha)

    w = np.random.default_rng(15).standard_normal(5)
    x = x0.copy()
    (_, dalpha) = gk.autodiff(program, gk.Duplicated(x, w.copy()), gk.Active(0.7))

    def loss(alpha):
        y = x0.copy()
        program(y, alpha)
        return float(w @ y)
    fd = (loss(0.7 + 1e-6) - loss(0.7 - 1e-6)) / 2e-6
    assert abs(dalpha - fd) <= 1e-7 * max(1.0, abs(fd)), (dalpha, fd)
    x = x0.copy()  # forward mode: the same arithmetic carries alpha's tangent
    tangent = gk.Duplicated(x, np.zeros(5))
    gk.autodiff(program, tangent, gk.Duplicated(0.7, 1.0), mode=gk.Forward)
    assert abs(float(w @ tangent.dval) - fd) <= 1e-7 * max(1.0, abs(fd)), (float(w @ tangent.dval), fd)


def test_durbin_updating_y_in_place_is_a_race_refused_naming_both_accesses():
    """durbin.c writes z, then copies it to y: thread i of an in-place y update reads y[k-i-1], which thread k-i-1
    writes. gk.RaceError names both lines and double buffering (the port's spelling) before anything is written."""
    rng = np.random.default_rng(16)
    args = (gk.Duplicated(_u(rng, 6, lo=0.05, hi=0.25), rng.random(6)), gk.Duplicated(_u(rng, 6), rng.random(6)))
    shadows, error = _refused(gk.RaceError, r"durbin_y_in_place.*reads y\[.*ported_loops3\.py:\d+.*writes y\[i\]",
                              p3.durbin_in_place, *args)
    assert "double buffering" in str(error)
    for a, s in zip(args, shadows):
        np.testing.assert_array_equal(a.dval, s)


def test_durbin_with_alpha_computed_by_numpy_on_the_host_is_differentiated():
    """`alpha = -(r[k] + np.dot(r[k - 1::-1], y[:k])) / beta` passed to a launch: refused naming the line until
    session 57; now `r[k]` and the dot product are reads (program/hostreads.py): central differences agree (the
    port keeps alpha and beta in a two-element array)."""
    rng = np.random.default_rng(17)
    check_grad(p3.durbin_host_scalars, gk.Duplicated(_u(rng, 6, lo=0.05, hi=0.25), np.zeros(6)),
               gk.Duplicated(_u(rng, 6), np.zeros(6)))


def test_gramschmidt_norm_written_on_the_host_is_refused_naming_the_reduction():
    rng = np.random.default_rng(18)
    args = (gk.Duplicated(rng.uniform(-1.0, 1.0, (5, 4)), rng.random((5, 4))),
            gk.Duplicated(_u(rng, 4, 4), rng.random((4, 4))), gk.Duplicated(_u(rng, 5, 4), rng.random((5, 4))))
    # since session 57 the norm is a read and np.sqrt of it a launch: `R[k, k] = ...` is then a refused host write
    # into R, which a launch has taken (until then the launch taking the derived norm was refused)
    shadows, _ = _refused(gk.ProgramError,
                          r"host write to 'R' at .*ported_loops3\.py:\d+ \(`R\[k, k\] = np\.sqrt\(nrm\)`",
                          p3.gramschmidt_host_norm, *args)
    for a, s in zip(args, shadows):
        np.testing.assert_array_equal(a.dval, s)


def test_lbm_swapping_local_names_gives_the_parity_spelling_gradient():
    """main.c's `LBM_swapGrids(&srcGrid, &dstGrid)` as a swap of local names (a plain loop): the same gradient as
    the parity spelling a checkpointed step needs, checked against central differences as well."""
    make, spec = _specs(np.random.default_rng(19))["lbm"]
    weights = _weights(spec, 20)
    _gradients_agree(_gradient(make(plain), spec, weights), _gradient(pa.lbm_swap, spec, weights))
    _check_against_differences(pa.lbm_swap, spec, np.random.default_rng(21))


def test_cfd_old_variables_copied_on_the_host_gives_the_gk_copy_gradient():
    """`old_variables = variables.copy()` inside each step (a temporary the step allocates, a gk.copy launch): the
    gradient of the port's gk.copy into a buffer allocated once, store-all and checkpointed."""
    make, spec = _specs(np.random.default_rng(22))["cfd"]
    weights = _weights(spec, 23)
    want = _gradient(make(plain), spec, weights)
    _gradients_agree(want, _gradient(pa.cfd_host_copy(plain), spec, weights))
    _gradients_agree(want, _gradient(pa.cfd_host_copy(checkpointed), spec, weights))


@pytest.mark.parametrize("name", ["gramschmidt", "cholesky", "deriche"])
def test_views_ports_forward_mode_agrees_with_reverse_and_vector_mode_with_single_lanes(name):
    """The ports whose launches take views (shrinking with k, or transposed): forward mode's <w, J v> equals reverse
    mode's <J^T w, v> (the same derivatives summed in another order: 1e-12 relative), and reverse vector mode
    (two shadows a argument) gives each lane's single gradient."""
    make, spec = _specs(np.random.default_rng(24))[name]
    rng = np.random.default_rng(25)
    lanes = [_weights(spec, 26), _weights(spec, 27)]
    tangents = {n: rng.standard_normal(np.shape(v)) for n, (kind, v) in enumerate(spec) if kind in ("dup", "active")}
    args = []
    for n, (kind, v) in enumerate(spec):
        if kind == "dup":
            args.append(gk.Duplicated(v.copy(), tangents[n].copy()))
        elif kind == "active":
            args.append(gk.Duplicated(v, float(tangents[n])))
        else:
            args.append(v)
    gk.autodiff(make(plain), *args, mode=gk.Forward)
    forward = sum(float(np.sum(lanes[0][n] * args[n].dval)) for n in lanes[0])
    grads, dscalar, _ = _gradient(make(plain), spec, lanes[0])
    reverse = sum(float(np.sum(grads[n] * tangents[n])) for n in grads)
    reverse += sum(dscalar * float(t) for n, t in tangents.items() if n not in grads)
    assert abs(forward - reverse) <= 1e-12 * max(1.0, abs(reverse)), (forward, reverse)
    batch = [gk.BatchDuplicated(v.copy(), tuple(w[n].copy() for w in lanes)) if kind == "dup"
             else gk.Active(v) if kind == "active" else v for n, (kind, v) in enumerate(spec)]
    got = gk.autodiff(make(plain), *batch)
    for lane, w in enumerate(lanes):
        single = _gradient(make(plain), spec, w)
        for n in w:
            np.testing.assert_allclose(batch[n].dval[lane], single[0][n], rtol=1e-12, atol=1e-14)
        if single[1] is not None:
            assert abs(got[[n for n, (kind, _) in enumerate(spec) if kind == "active"][0]][lane] - single[1]) <= \
                1e-12 * abs(single[1])
