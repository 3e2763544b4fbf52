"""Forward mode (transforms/forward.py, runtime/forward.py): tangents against
central differences for every kernel of the suite (corpus, reverse-mode cases,
HPC-style kernels), in-place semantics of docs/shadows-and-modes.md, scalars with tangents,
forward against reverse (⟨Jv, w⟩ = ⟨v, Jᵀw⟩), and bad annotations."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from support.corpus import CORPUS
from support.signatures import corpus_args, reverse_cases

import gradkern as gk
from gradkern.kernels.stencils import allen_cahn_step
from gradkern.testing import check_grad
from transforms.test_reverse import loop_sin, square

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


EPS = 1e-6


def directional_fd(kernel, args: tuple, dim, tangents: dict[int, object], h: float = EPS) -> list:
    """(out(x + h v) - out(x - h v)) / 2h for every argument, in float64."""
    def run(sign):
        vals = []
        for n, a in enumerate(args):
            x = a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a
            x = x.copy() if isinstance(x, np.ndarray) else x
            if n in tangents:
                x = x + sign * h * tangents[n]
            vals.append(x)
        gk.launch(kernel, dim, *vals)
        return vals
    plus, minus = run(1), run(-1)
    return [(p - m) / (2 * h) if isinstance(p, np.ndarray) else None for p, m in zip(plus, minus)]


def forward_matches_fd(kernel, args: tuple, dim, rng, scalars: bool = True):
    """Differentiate w.r.t. every float array (and float scalar) argument along random tangents."""
    if dim is None:
        dim = next(a.shape for a in args if isinstance(a, np.ndarray))
    tangents, call = {}, []
    for n, a in enumerate(args):
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            tangents[n] = rng.standard_normal(a.shape)
            call.append(gk.Duplicated(a.copy(), tangents[n].astype(a.dtype)))
        elif scalars and isinstance(a, float):
            tangents[n] = float(rng.standard_normal())
            call.append(gk.Duplicated(a, tangents[n]))
        else:
            call.append(a.copy() if isinstance(a, np.ndarray) else a)
    assert tangents
    gk.autodiff(kernel, *call, dim=dim, mode=gk.Forward)
    fd = directional_fd(kernel, args, dim, tangents)
    fd_half = directional_fd(kernel, args, dim, tangents, EPS / 2)
    single = any(isinstance(a, np.ndarray) and a.dtype == np.float32 for a in args)
    rtol, atol = (2e-3, 1e-3) if single else (1e-6, 1e-8)
    checked = total = 0
    for n, c in enumerate(call):
        if isinstance(c, gk.Duplicated) and isinstance(c.val, np.ndarray):
            # elements whose differences disagree between h and h/2 sit on a kink or jump
            # (floor, //, %, min/max, branches): no finite difference defines a derivative there
            smooth = np.abs(fd[n] - fd_half[n]) <= 1e-4 * np.maximum(1.0, np.abs(fd[n]))
            total += smooth.size
            checked += int(smooth.sum())
            scale = max(1.0, float(np.max(np.abs(fd[n][smooth]), initial=0.0)))
            np.testing.assert_allclose(c.dval.astype(np.float64)[smooth], fd[n][smooth], rtol=rtol,
                                       atol=atol * scale, err_msg=f"{kernel.name}: tangent of argument {n}")
    assert checked >= 0.75 * total, f"{kernel.name}: only {checked} of {total} elements are smooth here"
    return checked


def _float_args(case) -> tuple:
    """The corpus entry's arguments, in float64 where it has a float variant."""
    return corpus_args(case, np.float64 if np.float64 in case.dtypes else case.dtypes[0])


# every corpus kernel with a float array to differentiate (two take only integer arrays)
DIFFERENTIABLE = [c.name for c in CORPUS
                  if any(isinstance(a, np.ndarray) and a.dtype.kind == "f" for a in _float_args(c))]


def test_the_corpus_has_only_two_integer_only_kernels():
    assert len(CORPUS) - len(DIFFERENTIABLE) == 2


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_forward_mode_of_every_corpus_kernel_matches_finite_differences(name):
    case = next(c for c in CORPUS if c.name == name)
    args = _float_args(case)
    forward_matches_fd(case.kernel, args, case.dim(args), np.random.default_rng(zlib.crc32(name.encode())))


# The reverse-mode and HPC-style kernels get the same forward-mode checks from
# check_grad (tangents against finite differences, forward against reverse) in
# test_reverse.py and test_hpc_kernels.py.
CASES = {label: (kernel, args, dim) for label, kernel, args, dim in reverse_cases(seed=5)}


@pytest.mark.slow
@pytest.mark.parametrize("label", ["reverse/allen_cahn", "reverse/loop_sin", "hpc/lud_col", "hpc/softmax_rows"])
def test_check_grad_compares_forward_with_reverse(label):
    kernel, args, dim = CASES[label]
    report = check_grad(kernel, *args, dim=dim)
    assert report.ok and report.dot_forward == pytest.approx(report.dot_analytic, rel=1e-9)
    report = check_grad(kernel, *args, dim=dim, mode=gk.Forward)
    assert report.ok and report.checked > 3


def test_in_place_update_changes_the_tangent_with_the_primal(rng):
    """docs/shadows-and-modes.md forward: dy holds y's tangent on entry and the new value's after."""
    y = rng.uniform(0.5, 1.5, 6)
    y0, dy0 = y.copy(), rng.standard_normal(6)
    dy = dy0.copy()
    assert gk.autodiff(square, gk.Duplicated(y, dy), mode=gk.Forward) is None
    np.testing.assert_allclose(y, y0 * y0, rtol=1e-15)
    np.testing.assert_allclose(dy, 2 * y0 * dy0, rtol=1e-15)


def test_read_only_tangents_are_unchanged_and_write_only_ones_overwritten(rng):
    u, un = rng.uniform(0.2, 1, 9), rng.uniform(0.2, 1, 9)
    du, dun = rng.standard_normal(9), rng.standard_normal(9)
    du0 = du.copy()
    gk.autodiff(allen_cahn_step, gk.Duplicated(u, du), gk.Duplicated(un, dun), gk.Const(0.2), gk.Const(0.01),
                mode=gk.Forward)
    np.testing.assert_array_equal(du, du0)
    lap = du0[:-2] - 2 * du0[1:-1] + du0[2:]
    interior = du0[1:-1] + 0.2 * lap + 0.01 * (du0[1:-1] - 3 * u[1:-1] ** 2 * du0[1:-1])
    np.testing.assert_allclose(dun[1:-1], interior, rtol=1e-13)
    np.testing.assert_array_equal(dun[[0, -1]], du0[[0, -1]])


def test_scalar_tangents_and_run_time_loops(rng):
    x, out = rng.uniform(0.2, 1, 5), np.zeros(5)
    dx, dout = np.zeros(5), rng.standard_normal(5)
    gk.autodiff(loop_sin, gk.Duplicated(x, dx), gk.Duplicated(out, dout), 4, mode=gk.Forward)
    np.testing.assert_array_equal(dout, 0.0)  # x's tangent is zero: so is out's
    u, un = rng.uniform(0.2, 1, 7), np.zeros(7)
    dun = np.zeros(7)
    gk.autodiff(allen_cahn_step, u, gk.Duplicated(un, dun), gk.Duplicated(0.2, 1.0), 0.01, mode=gk.Forward)
    np.testing.assert_allclose(dun[1:-1], u[:-2] - 2 * u[1:-1] + u[2:], rtol=1e-12)  # d un / d c


def test_forward_mode_annotations_are_checked_before_anything_runs(rng):
    u, un = rng.uniform(0.2, 1, 7), np.zeros(7)
    un0 = un.copy()
    with pytest.raises(gk.AnnotationError, match="Active, a reverse-mode annotation"):
        gk.autodiff(allen_cahn_step, u, un, gk.Active(0.2), 0.01, mode=gk.Forward)
    with pytest.raises(gk.AnnotationError, match="tangent of 'un'"):
        gk.autodiff(allen_cahn_step, u, gk.Duplicated(un, np.zeros(6)), 0.2, 0.01, mode=gk.Forward)
    with pytest.raises(gk.AnnotationError, match="real numbers"):
        gk.autodiff(allen_cahn_step, u, un, gk.Duplicated(0.2, "1"), 0.01, mode=gk.Forward)
    np.testing.assert_array_equal(un, un0)


@pytest.mark.numba
def test_inspect_shows_the_tangent_kernel(rng):
    u = np.ones(8)
    ins = gk.inspect(allen_cahn_step, gk.Duplicated(u, u.copy()), gk.Duplicated(u.copy(), u.copy()), 0.2, 0.01,
                     mode=gk.Forward)
    assert "_gk_t_un[" in ins.source and ins.tape_bytes_per_thread == 0
    cuda = gk.inspect(allen_cahn_step, gk.Duplicated(u, u.copy()), gk.Duplicated(u.copy(), u.copy()), 0.2, 0.01,
                      mode=gk.Forward, backend="cuda")
    assert "forward_mode" in cuda.sources and "_gk_t_un[" in cuda.source


@pytest.mark.numba
def test_inspect_forward_mode_of_atomic_adds_into_a_duplicated_array(rng):
    """Issue 14.9: the tangent of an atomic target is privatised like its primal,
    and inspect counted only the primals' sizes (KeyError '_gk_t_grid')."""
    import numba
    from support.corpus import histogram
    n = 48
    idx, w = rng.integers(0, 6, n).astype(np.int32), rng.uniform(0.5, 1.5, n)
    hist, counts, grid = rng.uniform(0.5, 1.5, 6), np.zeros(6, np.int64), rng.uniform(0.5, 1.5, (3, 2))
    ins = gk.inspect(histogram, idx, gk.Duplicated(w, np.ones(n)), gk.Duplicated(hist, np.ones(6)), counts,
                     gk.Duplicated(grid, np.ones((3, 2))), mode=gk.Forward)
    assert "_gk_t_grid" in ins.atomic_targets and "_gk_t_hist" in ins.atomic_targets
    chunks = min(numba.get_num_threads(), n)
    # private copies per chunk: hist, counts, grid and the tangents of hist and grid
    assert ins.private_bytes == chunks * (2 * hist.nbytes + counts.nbytes + 2 * grid.nbytes)
