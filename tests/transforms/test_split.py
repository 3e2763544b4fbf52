"""Index-set splitting (transforms/split.py): the interior body has the
boundary tests folded, and the split launch gives exactly what the unsplit
body gives (the interpreter ignores the split) for every launch shape."""

import itertools

import numpy as np
import pytest

import gradkern as gk
from gradkern.ir import nodes as ir
from gradkern.ir.ops import Op
from gradkern.kernels import allen_cahn_step, heat_step_2d, laplace_2d
from gradkern.testing import check_grad


@gk.kernel
def guards(u, out, m):
    i, j = gk.tid()
    if i < out.shape[0] and j < out.shape[1]:
        v = u[i, j]
        if j == 2:
            v = -v
        if 0 < j < m - 1:
            v += u[i, j - 1] * u[i, j + 1]
        elif j + 1 >= m:
            v *= 3.0
        out[i, j] = v if j != 0 else 7.0


@gk.kernel
def shifted(a, b):
    i = gk.tid()
    if i - 1 >= 0 and i + 2 <= a.shape[0] - 1:
        b[i] = a[i - 1] + a[i + 2]
    else:
        b[i] = a[i]


def run(kernel, dim, *args, backend):
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    gk.launch(kernel, dim, *args, backend=backend)
    return args


@gk.kernel
def near_int64_ends(u, out, m):
    i = gk.tid()
    out[i] = u[i] if i + 1 < m else (2.0 * u[i] if i - 1 > m else -u[i])


@pytest.mark.parametrize("m", [-2**63, -2**63 + 1, 2**63 - 1, 2**62, np.int32(-2**31), np.int32(2**31 - 1), 0, 3])
def test_bounds_from_parameters_near_the_ends_of_int64_do_not_wrap(m):
    """`i + 1 < m` holds for i < m - 1: computed as written, m - 1 wraps to 2**63 - 1 when m = -2**63, and every
    thread ran the interior, the test folded True where it is False (found by tests/fuzz/test_split_fuzz.py)."""
    u = np.arange(1.0, 7.0)
    got = run(near_int64_ends, 6, u, np.zeros(6), m, backend="cpu")
    want = run(near_int64_ends, 6, u, np.zeros(6), m, backend="interp")
    np.testing.assert_array_equal(got[1], want[1])


@gk.kernel
def through_aliases(u, out):
    i = gk.tid()
    im = i - 1
    ip = im + 2
    if im >= 0 and ip < u.shape[0]:
        out[i] = u[im] + u[ip]
    else:
        out[i] = u[i]


def test_aliases_of_aliases_are_folded(rng):
    """`im = i - 1`, `ip = im + 2`: both hold the tid plus a constant wherever they are set, so the tests on them
    are folded (1 <= i < n - 1), and the split launch computes what the interpreter does."""
    src = gk.inspect(through_aliases, np.ones(5), np.ones(5)).source
    # (an integer - printed through uint64: docs/language.md#integer-arithmetic)
    assert "_gkb_hi0 = min(max(_gk_int64(_gk_uint64(u.shape[0]) - _gkb_U1), _gkb_lo0), _gkb_n0)" in src \
        and "_gkb_lo0 = min(1," in src
    for n in (1, 2, 3, 6):
        u = rng.uniform(0.5, 1.5, n + 1)
        got, want = run(through_aliases, n, u, np.zeros(n), backend="cpu"), run(through_aliases, n, u, np.zeros(n),
                                                                                 backend="interp")
        np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("shape", [(1, 1), (3, 1), (2, 2), (4, 3), (5, 8), (6, 17)])
def test_split_launch_equals_interpreter(shape, rng):
    u = rng.uniform(0.5, 1.5, shape)
    for kernel, args in ((laplace_2d, (u, np.zeros(shape))), (heat_step_2d, (u, np.zeros(shape), 0.2))):
        got, want = run(kernel, shape, *args, backend="cpu"), run(kernel, shape, *args, backend="interp")
        np.testing.assert_allclose(got[1], want[1], rtol=1e-15, atol=0)
    n = shape[0] * shape[1]
    x = rng.uniform(0.5, 1.5, n)
    for kernel, args in ((allen_cahn_step, (x, np.zeros(n), 0.1, 0.01)), (shifted, (x, np.zeros(n)))):
        got, want = run(kernel, n, *args, backend="cpu"), run(kernel, n, *args, backend="interp")
        np.testing.assert_allclose(got[1], want[1], rtol=1e-15, atol=0)


@pytest.mark.parametrize("launch, m", [((4, 9), 6), ((3, 12), 12), ((2, 5), 2), ((5, 3), 9)])
def test_guards_mid_domain_constants_and_launches_larger_than_arrays(launch, m, rng):
    u = rng.uniform(0.5, 1.5, (4, 10))
    out = np.zeros((3, 9))
    got, want = run(guards, launch, u, out, m, backend="cpu"), run(guards, launch, u, out, m, backend="interp")
    np.testing.assert_array_equal(got[1], want[1])
    assert "_gkb_lo" in gk.inspect(guards, u, out, m, dim=launch).source


@pytest.mark.slow
def test_interior_of_a_gradient_kernel_keeps_its_reverse_sweep(rng, monkeypatch):
    import gradkern.pipeline
    monkeypatch.setattr(gradkern.pipeline, "FOLD", False)  # the reverse sweep not folded into the gather
    kernel = gk.kernel(heat_step_2d.fn)  # its own specialisations: the library kernel's stay folded
    x = np.ones((6, 5))
    src = gk.inspect(kernel, gk.Duplicated(x, x.copy()), gk.Duplicated(x.copy(), x.copy()),
                     gk.Active(0.1), mode=gk.Reverse).source
    interior = src.split("range(1, _gkb_hi1):")[1].split("for _gkb_t1 in range(_gkb_hi1")[0]  # literal start
    assert "_gk_d_un[_gkb_u_i, _gkb_u_j] = 0.0" in interior and "j == 0" not in interior
    u = rng.uniform(0.5, 1.5, (6, 5))
    assert check_grad(kernel, gk.Duplicated(u, np.zeros_like(u)), gk.Duplicated(u.copy(), np.zeros_like(u)),
                      gk.Active(0.1)).ok


def test_no_split_without_boundary_tests():
    from gradkern.kernels import saxpy
    assert "_gkb_lo" not in gk.inspect(saxpy, 2.0, np.ones(4), np.ones(4)).source


# Every launch axis is split (issue 18): rows, planes and columns inside their ranges run the
# interior body, the rest the general one. The split code must compute exactly what the unsplit
# code computes, bit for bit, on every extent, the tiny ones (1, 2, 3 along an axis) included.

@gk.kernel
def heat_step_3d(u, un, c):
    i, j, k = gk.tid()
    if i == 0 or j == 0 or k == 0 or i == u.shape[0] - 1 or j == u.shape[1] - 1 or k == u.shape[2] - 1:
        un[i, j, k] = u[i, j, k]
    else:
        un[i, j, k] = u[i, j, k] + c * (u[i - 1, j, k] + u[i + 1, j, k] + u[i, j - 1, k] + u[i, j + 1, k]
                                        + u[i, j, k - 1] + u[i, j, k + 1] - 6.0 * u[i, j, k])


@pytest.fixture
def unsplit(monkeypatch):
    """`unsplit(*kernels)`: from now on, these kernels compile without interiors."""
    import gradkern.pipeline as pipeline

    touched = []

    def switch(*kernels):
        monkeypatch.setattr(pipeline, "split_interior", lambda k: k)
        for k in kernels:
            k._specs.clear()
            touched.append(k)

    yield switch
    monkeypatch.undo()
    for k in touched:  # later tests compile them split again
        k._specs.clear()


def _stencil_outcomes(kernel, dims, extra, scalar, seed, backend=None):
    """Primal launch, reverse (c Const and c Active) and forward results on random inputs, for each
    launch extent in `dims` over arrays `extra` larger than the launch along each axis, on `backend`."""
    out = []
    for dim in dims:
        r = np.random.default_rng([seed, *dim])
        shape = tuple(n + e for n, e in zip(dim, extra))
        u, un = r.uniform(0.5, 1.5, shape), r.uniform(0.5, 1.5, shape)
        gk.launch(kernel, dim, u, un, scalar, backend=backend)
        out.append(un.copy())
        for c in (gk.Const(scalar), gk.Active(scalar)):
            x, y, dx, dy = (r.uniform(0.5, 1.5, shape) for _ in range(4))
            grads = gk.autodiff(kernel, gk.Duplicated(x, dx), gk.Duplicated(y, dy), c, dim=dim, backend=backend)
            out += [x, y, dx, dy, np.asarray(grads[2] if grads[2] is not None else 0.0)]
        x, y, dx, dy = (r.uniform(0.5, 1.5, shape) for _ in range(4))
        gk.autodiff(kernel, gk.Duplicated(x, dx), gk.Duplicated(y, dy), gk.Const(scalar), dim=dim, mode=gk.Forward,
                    backend=backend)
        out += [y, dy]
    return out


DIMS = {  # launch extents: 1, 2 and 3 along each axis, and larger ones
    "1-D": [(n,) for n in (1, 2, 3, 4, 5, 9)],
    "2-D": [(a, b) for a in (1, 2, 3, 4, 7) for b in (1, 2, 3, 5, 9)],
    "3-D": [(a, b, c) for a in (1, 2, 3, 5) for b in (1, 2, 3, 4) for c in (1, 2, 3, 6)],
}


@gk.kernel
def allen_cahn_c(u, un, c):  # allen_cahn_step with dt fixed: the same three arguments as the others
    i = gk.tid()
    if i == 0 or i == u.shape[0] - 1:
        un[i] = u[i]
    else:
        ui = u[i]
        un[i] = ui + c * (u[i - 1] - 2.0 * ui + u[i + 1]) + 0.01 * (ui - ui ** 3)


@pytest.mark.slow
@pytest.mark.parametrize("axes", ["1-D", "2-D", "3-D"])
@pytest.mark.parametrize("extra", [0, 2])
def test_split_on_every_axis_equals_unsplit_bit_for_bit(axes, extra, unsplit, monkeypatch):
    import gradkern.pipeline as pipeline

    kernel = {"1-D": allen_cahn_c, "2-D": heat_step_2d, "3-D": heat_step_3d}[axes]
    # the interior as replayed: the coefficient form reassociates it (docs/adjoint-forms.md, section 11;
    # tests/transforms/test_coefficients.py bounds the difference)
    monkeypatch.setattr(pipeline, "COEFFICIENTS", False)
    kernel._specs.clear()
    dims = DIMS[axes]
    ndim = len(dims[0])
    extras = tuple(extra if a % 2 == 0 else extra // 2 for a in range(ndim))  # arrays larger than the launch
    x = np.ones(tuple(5 + e for e in extras))
    sources = gk.inspect(kernel, gk.Duplicated(x, x.copy()), gk.Duplicated(x.copy(), x.copy()), gk.Const(0.2),
                         dim=(4,) * ndim, mode=gk.Reverse).sources
    for role in ("fused", "gather"):  # every axis has its range: the gather's interior has no guard left
        assert all(f"_gkb_hi{a}" in sources[role] for a in range(ndim)), role
    split = _stencil_outcomes(kernel, dims, extras, 0.2, 7)
    unsplit(kernel)
    assert "_gkb_hi" not in gk.inspect(kernel, gk.Duplicated(x, x.copy()), gk.Duplicated(x.copy(), x.copy()),
                                       gk.Const(0.2), dim=(4,) * ndim, mode=gk.Reverse).sources["gather"]
    # the unsplit reference on the interpreter: the same operations in the same order, bit for bit, without a
    # second Numba compile of every mode (session 59: these six tests took 85 s of CI CPU, half of it the twins)
    plain = _stencil_outcomes(kernel, dims, extras, 0.2, 7, backend="interp")
    assert len(split) == len(plain)
    # The Active scalar's gradient (the 0-d outcomes) is a sum carried across threads, which LLVM may regroup
    # (docs/adjoint-forms.md, section 9): the split and the unsplit launch are different loops, so their groupings
    # may differ (they did once integer + - * were printed through uint64). Any grouping of N terms and C chunk
    # partials is within gamma_{N+C} sum|t_i| of the exact sum, twice that between two groupings; each term is
    # dun * d(un)/dc with |dun| <= 1.5 and |d(un)/dc| <= 2 * ndim * 1.5 (a Laplacian or the 1-D second difference
    # of values in [0.5, 1.5]). Every array stays bit for bit.
    n = max(int(np.prod(d)) for d in dims)
    eps = np.finfo(np.float64).eps
    gamma = (2 * n) * eps / (1 - (2 * n) * eps)  # N + C <= 2N terms
    bound = 2 * gamma * n * 1.5 * (2 * ndim * 1.5)
    for got, want in zip(split, plain):
        if np.ndim(got) == 0:
            assert abs(float(got) - float(want)) <= bound, (got, want, bound)
        else:
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kernel, ndim", [(allen_cahn_c, 1), (heat_step_2d, 2), (heat_step_3d, 3)])
def test_interior_loop_of_fused_and_gather_kernels_has_no_branch(kernel, ndim):
    """The innermost interior loop (inside the ranges of the outer axes) runs the body with every
    boundary test and every neighbour guard of the gather folded: straight-line code LLVM vectorises."""
    x = np.ones((6,) * ndim)
    sources = gk.inspect(kernel, gk.Duplicated(x, x.copy()), gk.Duplicated(x.copy(), x.copy()), gk.Const(0.2),
                         mode=gk.Reverse).sources
    last = ndim - 1
    for role in ("fused", "gather"):
        src = sources[role]
        start = src.split(f"_gkb_lo{last} = min(")[1].split(",")[0]  # literal: 1, or 2 for the gather
        header = f"for _gkb_t{last} in {'_gk_prange' if ndim == 1 else 'range'}({start}, _gkb_hi{last}):"
        if role == "gather" and ndim == 1:  # its chunks' interior, bounded by the lagged rows too
            header = "for _gkb_t0 in range(_gkb_ia, _gkb_ib):"
        at = next(line for line in src.splitlines() if line.strip() == header)
        indent = len(at) - len(at.lstrip())
        body = src.split(at + "\n")[1].splitlines()  # the interior loop's body: the lines indented deeper
        deeper = itertools.takewhile(lambda line, indent=indent: len(line) - len(line.lstrip()) > indent, body)
        interior = "\n".join(deeper)
        if role == "gather" and ndim == 1:  # a chunk's range, which LLVM cannot see is >= 0 (backends/numba_loops.py)
            interior = interior.replace("if _gkb_t0 >= 0:", "", 1)
        assert interior.strip(), role
        assert start.isdigit() and "if " not in interior and "_gkb_interior" not in interior, (role, interior)
        # an outer axis's range is a bool the innermost axis reads, not a branch around a copy of the nest
        lo = '1' if role == 'fused' else '2'
        assert all(f"_gkb_in{a} = _gkb_t{a} >= {lo} and _gkb_t{a} < _gkb_hi{a}" in src for a in range(last)), role
        if last:
            assert f"if not _gkb_in{last - 1}:" in src, role


@pytest.mark.parametrize("kernel, ndim", [(heat_step_2d, 2), (heat_step_3d, 3)])
def test_a_split_nest_prints_the_body_twice_whatever_its_axes(kernel, ndim):
    """Race-free parallel launches print the general body once (the edges of every split axis) and the
    interior once: each copy is compiled again (docs/compile-time.md), so 1 + axes copies cost compile time."""
    x = np.ones((6,) * ndim)
    src = gk.inspect(kernel, x, x.copy(), 0.2).source
    assert all(f"_gkb_hi{a}" in src for a in range(ndim))
    entry = src.split("_serial(")[0]  # the parallel entry, not its serial twin (the same text again)
    stores = [line for line in entry.splitlines() if line.strip().startswith("un[")]
    assert len(stores) == 3, stores  # the general body's two (edge cell, stencil), the interior's one


def test_constant_folding_leaves_a_sum_that_would_wrap():
    """simplify folds integer constants only where the result fits the type: a folded 2**63 would print
    as a literal Numba types as uint64, where the arithmetic it replaces wraps to -2**63."""
    from gradkern.ir.types import I64
    from gradkern.transforms.simplify import simplify_expr

    big = ir.Apply(Op.ADD, (ir.Const(2**63 - 1, type=I64), ir.Const(1, type=I64)), type=I64)
    assert simplify_expr(big) == big
    small = ir.Apply(Op.SUB, (ir.Const(3, type=I64), ir.Const(1, type=I64)), type=I64)
    assert simplify_expr(small) == ir.Const(2, type=I64)
