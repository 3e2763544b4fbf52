"""A sixth round of third-party host loops as programs (docs/programs.md, "Ported host loops", session 53): the ports
in tests/support/ported_loops6*.py (Rodinia's lud, gaussian, nw, kmeans and bfs drivers, a parallel cyclic
reduction, NVIDIA's single-GPU Jacobi, TeaLeaf's CG, GAP's PageRank, miniWeather's main loop), leaning on host loops
that walk blocks, pivots, anti-diagonals or doubling strides, and on loops that stop on a value a kernel computed.
Each port's store-all gradient is checked against float64 central differences and by the dot-product test (random
non-zero inputs; test_ported_loops.py's checks, which also compare the primals after the gradient with a primal run
bit for bit), its checkpointed gradient against the store-all one where its loop is checkpointable; the spellings
gradkern refuses are refused naming the line and the spelling that works, which is ported too."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support import ported_loops6 as p6
from support import ported_loops6_apps as pa
from support.ported_harness import on_interpreter
from support.ported_loops_checks import port_tests

import gradkern as gk

from .test_ported_loops import _check_against_differences, _gradient, _refused, _u, checkpointed, plain
from .test_ported_loops3 import _gradients_agree, _weights
from .test_ported_solvers import _same_gradients


def _dominant(rng, n):
    """A diagonally dominant matrix (no pivoting needed: lud and gaussian pivot on the diagonal)."""
    return _u(rng, n, n, lo=-0.5, hi=0.5) + np.diag(_u(rng, n, lo=3.0, hi=4.0))


def _graph(rng, n, degree):
    """Each vertex's in-neighbours (no self loops), a fixed in-degree."""
    return np.array([rng.choice([u for u in range(n) if u != v], degree, replace=False) for v in range(n)])


def _nw_score(rng, n):
    score = np.zeros((n + 1, n + 1))
    score[0, :] = -np.arange(n + 1) * 0.7
    score[:, 0] = -np.arange(n + 1) * 0.7
    score[1:, 1:] = _u(rng, n, n, lo=-1.0, hi=1.0)
    return score


def _specs(rng):
    """name -> (program, arguments as (kind, value)), as test_ported_loops.py's _ports; `loop` factories are
    bound to the plain loop (CHECKPOINTABLE lists those whose checkpointed twin is checked)."""
    src = _graph(rng, 6, 2)
    out_degree = np.maximum(np.bincount(src.ravel(), minlength=6), 1).astype(np.float64)
    tri = [("dup", _u(rng, 7, lo=-0.5, hi=0.5)), ("dup", _u(rng, 7, lo=3.0, hi=4.0)),
           ("dup", _u(rng, 7, lo=-0.5, hi=0.5)), ("dup", _u(rng, 7)), ("dup", np.zeros(7)), ("active", 0.3)]
    start = np.full(6, 50.0)
    start[0] = 0.0
    jac = _u(rng, 6, 7)
    q = _u(rng, 8)
    feats = np.concatenate([_u(rng, 5, 2, lo=0.0, hi=1.0), _u(rng, 5, 2, lo=2.0, hi=3.0)])  # two clusters
    return {
        "lud": (p6.lud(plain), [("dup", _dominant(rng, 6))]),
        "gaussian": (p6.gaussian(plain), [("dup", _dominant(rng, 5)), ("dup", _u(rng, 5)), ("dup", np.zeros(5))]),
        "nw": (p6.nw, [("dup", _nw_score(rng, 5)), ("dup", _u(rng, 6, 6, lo=-1.0, hi=1.0)), ("active", 0.4)]),
        "pcr": (p6.pcr(plain), tri),
        "nv_jacobi": (p6.nv_jacobi_loop(tol=0.1), [("dup", jac), ("dup", jac.copy()), ("active", 0.9)]),
        "tealeaf_cg": (p6.tealeaf_cg(), [("dup", _u(rng, 6, 6)), ("dup", _u(rng, 6, 6)), ("active", 0.4)]),
        "kmeans": (pa.kmeans(), [("dup", feats), ("dup", feats[[0, 1]] + 0.01)]),
        "sssp": (pa.sssp(), [("dup", start), ("dup", _u(rng, 6, 2)), ("int", src), ("active", 0.2)]),
        "pagerank": (pa.pagerank(), [("dup", np.full(6, 1 / 6.0) + _u(rng, 6, lo=-0.01, hi=0.01)), ("int", src),
                                     ("const", out_degree), ("active", 0.85)]),
        "miniweather_main": (pa.miniweather_main(), [("dup", q), ("dup", np.zeros((3, 6))), ("active", 1.3)]),
        "miniweather_fixed": (pa.miniweather_main(fixed=True), [("dup", q), ("dup", np.zeros((3, 6))),
                                                                ("active", 1.3)]),
    }


PORTS = list(_specs(np.random.default_rng(0)))
CHECKPOINTABLE = {"lud": p6.lud, "gaussian": p6.gaussian, "pcr": p6.pcr}
# Every port's gradient and the fixed-count loops' checkpointed twins run in CI on the interpreter (the transforms'
# output and the program layer without a compile: docs/testing.md "Test time"), and so do the path and refusal
# checks below; the Numba backend's gradient runs in CI for NUMBA_SAMPLE (pcr: branches on the thread id and a
# stride from the host; kmeans: loops, atomic adds through an index array the host computed), the others' under
# `full`.
NUMBA_SAMPLE = {"pcr", "kmeans"}
globals().update(port_tests(_specs, NUMBA_SAMPLE, _check_against_differences, _same_gradients,
                             checkpointable=CHECKPOINTABLE))


# -- the loops' paths: counts read from what the kernels computed (primal runs, the specs of the gradient checks) ---
def test_loops_stop_where_the_kernels_values_say(monkeypatch):
    """The data-driven exits the gradient checks differentiate along: kmeans moves 10, 1, then 0 points; the
    relaxation settles after 4 rounds; PageRank's error falls below 1e-4 after 20 iterations; TeaLeaf's CG
    converges in 6 iterations of 10; NVIDIA's Jacobi checks its norm at 0, 3, 6 and stops after 7 iterations (an odd
    count: the result is copied back from a_new); miniWeather writes 3 outputs, its last step cut to the end, and
    reports each step's time (an f-string of an Active scalar: before, Python's TypeError)."""
    on_interpreter(monkeypatch)
    specs = _specs(np.random.default_rng(1))
    seen = {}

    def run(name, program):
        program(*[v.copy() if isinstance(v, np.ndarray) else v for _, v in specs[name][1]])

    run("kmeans", pa.kmeans(moved=seen.setdefault("kmeans", [])))
    run("sssp", pa.sssp(rounds=seen.setdefault("sssp", [])))
    run("pagerank", pa.pagerank(iterations=seen.setdefault("pagerank", [])))
    run("tealeaf_cg", p6.tealeaf_cg(iterations=seen.setdefault("tealeaf_cg", [])))
    run("nv_jacobi", p6.nv_jacobi_loop(tol=0.1, checked=seen.setdefault("nv_jacobi", [])))
    log = []
    for fixed in (False, True):
        run("miniweather_main", pa.miniweather_main(fixed=fixed, outputs=seen.setdefault("miniweather", []), log=log))
    assert seen == {"kmeans": [10, 1, 0], "sssp": [4], "pagerank": [20], "tealeaf_cg": [6], "nv_jacobi": [0, 3, 6],
                    "miniweather": [3, 3]}, seen
    assert log[-1] == "Elapsed Time: 1.000000 / 1.000000" and len(log) == 20, log  # 10 steps each


# -- the spellings a porting user writes first ------------------------------------------------------------------------
def test_gaussian_back_substitution_on_the_host_is_refused_naming_the_line(monkeypatch):
    """gaussian.cu's BackSub in NumPy after the kernels (`final[i] = b[i]`, `final[i] -= a[i, j] * final[j]`):
    element reads of launched arrays written into a fresh array make it derived; the gk.copy into x is refused
    naming the last such line, before it ran. The port's one-thread gauss_backsub kernel is the spelling that works
    (test_port_gradient_matches_finite_differences[gaussian])."""
    on_interpreter(monkeypatch)
    rng = np.random.default_rng(30)
    args = [gk.Duplicated(_dominant(rng, 4), rng.random((4, 4))), gk.Duplicated(_u(rng, 4), rng.random(4)),
            gk.Duplicated(np.zeros(4), rng.random(4))]
    # (since session 57 the element reads are launches, which take `final`: the write back into it is a refused host
    # write naming the line; until then the copy of the derived `final` was refused)
    shadows, _ = _refused(gk.ProgramError, r"host write to 'final' at .*ported_loops6\.py:\d+ "
                                           r"\(`final\[n - i - 1\] = final\[n - i - 1\] / a",
                          p6.gaussian_host_backsub, *args)
    for a, s in zip(args, shadows):
        np.testing.assert_array_equal(a.dval, s)


def test_kmeans_centres_summed_on_the_host_are_refused_naming_the_line(monkeypatch):
    """kmeans_clustering.c's `new_centers[index] += feature[i]` then the division, on the host: refused naming the
    line; the port's atomic_add through the membership works. (Until session 56 refused at the copy into the
    centres naming the division; now the first `+=` into the fresh array is a launch, and the next one writes
    into the array that launch took: a host write, refused at the sum's line.)"""
    on_interpreter(monkeypatch)
    rng = np.random.default_rng(31)
    feats = _u(rng, 6, 2)
    args = [gk.Duplicated(feats, rng.random((6, 2))), gk.Duplicated(feats[[0, 3]] + 0.01, rng.random((2, 2)))]
    shadows, _ = _refused(gk.ProgramError, r"host write to 'new_centers' at .*ported_loops6_apps\.py:\d+ "
                                           r"\(`new_centers\[membership\[i\]\] \+= features\[i\]`\)",
                          pa.kmeans_host_centers, *args)
    for a, s in zip(args, shadows):
        np.testing.assert_array_equal(a.dval, s)


def test_pcr_swap_of_names_and_doubled_stride_is_the_parity_spelling(monkeypatch):
    """PCR as a port writes it (`cur, nxt = nxt, cur`, `stride *= 2` in a while loop): the same launches as the
    checkpointable spelling (buffers and stride from t), so the same gradient and primals."""
    on_interpreter(monkeypatch)
    spec = _specs(np.random.default_rng(32))["pcr"][1]
    weights = _weights(spec, 33)
    _gradients_agree(_gradient(p6.pcr(plain), spec, weights), _gradient(p6.pcr_swapped, spec, weights))


def test_pcr_swap_kept_outside_a_checkpointed_step_is_refused_naming_the_launch(monkeypatch):
    """The swap in a checkpointed step, kept in a host dict between steps: a recomputed step launches on the
    buffers the forward left; refused naming pcr_step's line and the t % 2 spelling."""
    on_interpreter(monkeypatch)
    spec = _specs(np.random.default_rng(34))["pcr"][1]
    rng = np.random.default_rng(35)

    def program(a, b, c, d, x, sigma):
        n = b.shape[0]
        state = {"cur": (a, b, c, d), "nxt": tuple(np.zeros_like(b) for _ in range(4))}
        gk.launch(p6.pcr_shift, n, b, sigma)

        def step(t):
            gk.launch(p6.pcr_step, n, *state["cur"], *state["nxt"], 2 ** t)
            state["cur"], state["nxt"] = state["nxt"], state["cur"]
        checkpointed(step, 3)
        gk.launch(p6.pcr_solve, n, state["cur"][1], state["cur"][3], x)

    args = [gk.Duplicated(v.copy(), rng.random(v.shape)) for _, v in spec[:5]] + [gk.Active(0.3)]
    _, error = _refused(gk.ProgramError, r"launched 'pcr_step' .*at .*test_ported_loops6\.py:\d+ "
                                         r"\(`gk\.launch\(p6\.pcr_step", program, *args)
    assert "t % 2" in str(error)


# -- Active scalars in the host's control flow (program/scalars.py) -------------------------------------------------
@gk.kernel
def _scaled(x, y, c):
    i = gk.tid()
    y[i] = c * x[i]


def _branch_on_equality(x, y, theta):
    """A theta-scheme's `if theta == 1.0` (implicit) on the Active weight: the branch a plain run takes."""
    gk.launch(_scaled, x.shape[0], x, y, 2.0 * theta if theta == 1.0 else theta)


@pytest.mark.parametrize("theta", [1.0, 0.5])
def test_equality_of_an_active_scalar_compares_its_value(theta, monkeypatch):
    """Before: ActiveScalar had no __eq__, so `theta == 1.0` fell back to identity, False for theta = 1.0: the
    differentiated run took the other branch than a plain run, silently (y = theta x, d/dtheta 3 instead of 6).
    Now == and != compare the value, as < and > did."""
    on_interpreter(monkeypatch)
    x, dy = np.ones(3), np.ones(3)
    plain_y = np.zeros(3)
    _branch_on_equality(x.copy(), plain_y, theta)
    y = np.zeros(3)
    got = gk.autodiff(_branch_on_equality, gk.Duplicated(x.copy(), np.zeros(3)), gk.Duplicated(y, dy.copy()),
                      gk.Active(theta))
    np.testing.assert_array_equal(y, plain_y)
    assert got[2] == (6.0 if theta == 1.0 else 3.0), got  # d/dtheta sum(k theta x), k = 2 or 1: exact


def _rounded(x, y, c):
    """Roundings of the Active c as host code writes them (constants) and a remainder (differentiated)."""
    n = int(c) + round(c) + math.floor(c) + math.ceil(c) + int(c // 0.5) + int(np.floor(c)) + int(np.ceil(c))
    n += int(np.round(c, 0))
    assert f"{c:.1f}" == format(c, ".1f") == "1.3"  # a report formats the value
    frac = c % 0.5  # c - 0.5 floor(2c): d/dc 1
    gk.launch(_scaled, x.shape[0], x, y, n * frac + np.minimum(c, 2.0) + np.maximum(c, 0.5) * np.float64(0.25))


def test_roundings_of_an_active_scalar_are_constants_and_its_remainder_is_differentiated(monkeypatch):
    """Before: int(c) and math.floor(c) / math.ceil(c) (through float()) were refused, np.floor(c) refused as a
    ufunc, round(c), c // p and c % p raised Python's TypeError (not a gradkern error), np.minimum(c, p) was
    refused; np.round(c, 1) and f"{c:.3f}" raised TypeErrors. Roundings are piecewise constant (as for a derived
    scalar: docs/host-code.md), the remainder is c - p floor(c / p), np.minimum / np.maximum the operand chosen. The
    gradient matches central differences (c = 1.3: no rounding boundary within the step), forward mode agrees."""
    on_interpreter(monkeypatch)
    x = np.random.default_rng(36).uniform(0.5, 1.5, 4)
    w = np.random.default_rng(37).standard_normal(4)

    def loss(c):
        y = np.zeros(4)
        _rounded(x.copy(), y, c)
        return float(w @ y)

    y = np.zeros(4)
    got = gk.autodiff(_rounded, gk.Duplicated(x.copy(), np.zeros(4)), gk.Duplicated(y, w.copy()), gk.Active(1.3))[2]
    h = 1e-6
    fd = (loss(1.3 + h) - loss(1.3 - h)) / (2 * h)
    assert abs(got - fd) <= 1e-8 * abs(fd), (got, fd)  # piecewise linear in c: central differences exact to rounding
    ty = np.zeros(4)
    gk.autodiff(_rounded, gk.Duplicated(x.copy(), np.zeros(4)), gk.Duplicated(np.zeros(4), ty), gk.Duplicated(1.3, 1.0),
                mode=gk.Forward)
    assert abs(float(w @ ty) - got) <= 1e-14 * abs(got), (float(w @ ty), got)  # the same partials, summed alike


def test_on_interpreter_switches_the_default_backend_whatever_was_read_before(monkeypatch):
    """The harness's switch (tests/support/ported_harness.py): the interpreter for one test, after an earlier test
    of the process read the default, and the default as it was afterwards. Before, the ported files set
    $GRADKERN_BACKEND, which the backends read once per process: in CI's workers (a launch first) every such
    "interpreter" check compiled Numba kernels, and run alone the file's Numba twins ran on the interpreter."""
    from gradkern.backends import default_name

    before = default_name()  # what a launch of an earlier test read
    with monkeypatch.context() as m:
        on_interpreter(m)
        assert default_name() == "interp"
    assert default_name() == before
