"""Matrix products of active arrays inside a program (program/hostmatmul.py, docs/host-code.md, "Matrix products"):
`A @ B`, `np.matmul`, `np.dot`, `A.dot(x)` of a matrix and a matrix or vector, and `np.outer(u, v)`, are launches of
a generated kernel (a thread per result element, the contracted axis looped in order) into a fresh array,
differentiated by the pipeline. Each is checked by `check_grad` (central differences in float64, the dot-product
test, forward tangents) on the interpreter, one on Numba; its values against NumPy's within the summation bound;
PolyBench's GEMM, ATAX, BICG, MVT and GEMVER as NPBench's NumPy versions write them (spcl/npbench, rewritten
here), and a dense layer; one in a checkpointed loop's step against store-all; what stays refused is refused before
anything changed. Until session 63 each was a derived array, refused by a launch taking it."""

import numpy as np
import pytest
from support.ported_harness import on_interpreter

import gradkern as gk
from gradkern.testing import check_grad

from .test_host_axes import run_steps
from .test_host_shapes import weigh1, weigh2

SHAPES = {"A": (3, 4), "B": (4, 5), "x": (4,), "y": (3,)}

FORMS = {
    "A @ B": lambda A, B, x, y: A @ B,
    "np.matmul(A, x)": lambda A, B, x, y: np.matmul(A, x),
    "y @ A": lambda A, B, x, y: y @ A,
    "np.dot(A, B)": lambda A, B, x, y: np.dot(A, B),
    "A.dot(x)": lambda A, B, x, y: A.dot(x),
    "np.dot(y, A)": lambda A, B, x, y: np.dot(y, A),
    # overlapping views of one array: the second is copied by a launch first
    "A.T @ A": lambda A, B, x, y: A.T @ A,
    "A @ A.T": lambda A, B, x, y: A @ A.T,
    # one view twice: no copy needed, both reads' adjoints go into the one shadow
    "S @ S of one square view": lambda A, B, x, y: A[:, :3] @ A[:, :3],
    "strided and transposed views": lambda A, B, x, y: B[::2, ::-2].T @ A[:, 1::2].T,
    "x @ B.T.T after host arithmetic": lambda A, B, x, y: (2.0 * x + 1.0) @ np.sin(B),
    "np.outer(x, y)": lambda A, B, x, y: np.outer(x, y),
    "np.outer of a matrix (flattened)": lambda A, B, x, y: np.outer(A[:, :2], y),
    "a product of products": lambda A, B, x, y: (A @ B) @ (B.T @ x),
}


def _bound(form, A, B, x, y):
    """Each side's sum is within gamma_n sum |a_k b_k| of the exact one (n the contracted length, recursive or
    blocked), so they differ by at most twice that: the same form of |operands| bounds the sum of |a_k b_k|. The
    two products of products round twice: four times it. Elementwise host arithmetic before a product is
    correctly rounded on both sides (the same bits)."""
    eps, n = np.finfo(np.float64).eps, 5
    gamma = n * eps / (1 - n * eps)
    return 4 * gamma * np.abs(form(*(np.abs(v) for v in (A, B, x, y)))) + 1e-300


def through(form):
    """(A, B, x, y) -> form(...) written into `out`, then a weighted energy of it into E (launches)."""
    def program(A, B, x, y, out, E):
        out[...] = form(A, B, x, y)
        gk.launch(weigh2 if out.ndim == 2 else weigh1, out.shape, out, E)
    return program


def _args(rng, form):
    values = {k: rng.random(s) + 0.5 for k, s in SHAPES.items()}
    shape = np.shape(form(*values.values()))
    return [gk.Duplicated(v, np.zeros(v.shape)) for v in values.values()] + \
        [gk.Duplicated(np.zeros(shape), np.zeros(shape)), gk.Duplicated(np.zeros(1), np.zeros(1))]


@pytest.mark.parametrize("name", list(FORMS))
def test_a_matrix_product_is_differentiated_and_numpys_value(monkeypatch, rng, name):
    on_interpreter(monkeypatch)
    form = FORMS[name]
    args = _args(rng, form)
    values = [a.val for a in args[:4]]
    out = args[4].val
    gk.autodiff(through(form), *[gk.Duplicated(a.val.copy(), np.zeros(a.val.shape)) for a in args[:4]],
                gk.Duplicated(out, np.ones(out.shape)), gk.Duplicated(np.zeros(1), np.ones(1)))
    want = form(*values)
    assert np.all(np.abs(out - want) <= _bound(form, *values)), (out, want)
    report = check_grad(through(form), *_args(rng, form))
    assert report.checked > 0


def test_a_matrix_product_on_numba(rng):
    """The generated kernels compiled (the default backend): a GEMM and a GEMV."""
    report = check_grad(through(lambda A, B, x, y: A @ B + np.outer(y, B.T @ x)), *_args(rng, FORMS["A @ B"]))
    assert report.checked > 0


# PolyBench's linear-algebra kernels as NPBench's NumPy versions write them (spcl/npbench,
# npbench/benchmarks/polybench/*/*_numpy.py; their in-place updates of arguments no launch has taken are launches)
def gemm(alpha, beta, C, A, B):
    """NPBench writes `C[:] = alpha * A @ B + beta * C`: a host write into C after a launch took it (`beta * C`),
    refused by the contract's host-write rule (test_gemm_as_npbench_writes_it_is_refused); the copy is a launch."""
    gk.copy(C, alpha * A @ B + beta * C)


def atax(A, x, out):
    out[...] = (A @ x) @ A


def bicg(A, p, r, q, s):
    q[...] = A @ p
    s[...] = r @ A


def mvt(x1, x2, y_1, y_2, A):
    x1 += A @ y_1
    x2 += y_2 @ A


def gemver(alpha, beta, A, u1, v1, u2, v2, w, x, y, z):
    A += np.outer(u1, v1) + np.outer(u2, v2)
    x += beta * y @ A + z
    w += alpha * A @ x


def dense_relu(x, W, b, out):
    """One layer of NPBench's mlp: relu(x @ W + b), the bias broadcast along the batch."""
    out[...] = np.maximum(x @ W + b, 0.0)


def test_polybench_numpy_kernels_are_differentiated(monkeypatch, rng):
    on_interpreter(monkeypatch)

    def dup(*shape):
        return gk.Duplicated(rng.random(shape) + 0.5, np.zeros(shape))

    n, m = 4, 3
    cases = [
        (gemm, [gk.Active(1.5), gk.Active(1.2), dup(m, 5), dup(m, n), dup(n, 5)]),
        (atax, [dup(m, n), dup(n), dup(n)]),
        (bicg, [dup(m, n), dup(n), dup(m), dup(m), dup(n)]),
        (mvt, [dup(n), dup(n), dup(n), dup(n), dup(n, n)]),
        (gemver, [gk.Active(1.5), gk.Active(1.2), dup(n, n)] + [dup(n) for _ in range(8)]),
        (dense_relu, [dup(m, n), dup(n, 5), gk.Duplicated(rng.random(5) - 0.2, np.zeros(5)), dup(m, 5)]),
    ]
    for program, args in cases:
        report = check_grad(program, *args)
        assert report.checked > 0, program.__name__


def test_gemm_as_npbench_writes_it_is_refused(monkeypatch, rng):
    """`C[:] = alpha * A @ B + beta * C` writes C on the host after `beta * C`'s launch took it: refused naming the
    line and gk.copy, before any shadow changed (docs/host-code.md: writes into an array a launch has taken)."""
    on_interpreter(monkeypatch)

    def npbench_gemm(alpha, beta, C, A, B):
        C[:] = alpha * A @ B + beta * C

    C, dC, A, dA = rng.random((3, 5)), rng.random((3, 5)), rng.random((3, 4)), rng.random((3, 4))
    before = [a.copy() for a in (C, dC, A, dA)]
    with pytest.raises(gk.ProgramError, match=r"host write to 'C' at .*test_host_matmul.py:\d+ "
                                              r"\(`C\[:\] = alpha \* A @ B \+ beta \* C`\)(?s:.*)gk.copy"):
        gk.autodiff(npbench_gemm, gk.Active(1.5), gk.Active(1.2), gk.Duplicated(C, dC), gk.Duplicated(A, dA),
                    gk.Const(rng.random((4, 5))))
    for a, b in zip((C, dC, A, dA), before):
        np.testing.assert_array_equal(a, b)


def test_a_product_in_a_checkpointed_step_equals_store_all(monkeypatch, rng):
    """The step's product is a launch in every run of the step (first forward and recomputations), so the
    checkpointed gradient is the store-all one: the same launches on the same values."""
    on_interpreter(monkeypatch)

    def program(u, M, E, checkpointed):
        def step(t):
            gk.copy(u, np.tanh(u @ M))
        run_steps(step, 4, checkpointed)
        gk.launch(weigh2, u.shape, u, E)

    u0, M0 = rng.random((3, 4)) - 0.5, (rng.random((4, 4)) - 0.5) / 2
    grads = []
    for checkpointed in (False, True):
        du, dM = np.zeros(u0.shape), np.zeros(M0.shape)
        gk.autodiff(program, gk.Duplicated(u0.copy(), du), gk.Duplicated(M0.copy(), dM),
                    gk.Duplicated(np.zeros(1), np.ones(1)), checkpointed)
        grads.append((du, dM))
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a, b)  # the same kernels on the same values in the same order
    check_grad(program, gk.Duplicated(u0.copy(), np.zeros(u0.shape)), gk.Duplicated(M0.copy(), np.zeros(M0.shape)),
               gk.Duplicated(np.zeros(1), np.zeros(1)), True)


REFUSED = {
    "a stack of matrices": lambda A, B: np.matmul(np.stack([A, A]), np.stack([B, B]))[0],
    "out= into a fresh array": lambda A, B: np.dot(A, B, out=np.zeros((3, 5))),
    "an integer operand": lambda A, B: A @ np.ones((4, 5), dtype=np.int64),
    "np.einsum": lambda A, B: np.einsum("ik,kj->ij", A, B),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_what_does_not_fit_stays_refused(monkeypatch, rng, name):
    on_interpreter(monkeypatch)
    form = REFUSED[name]

    def program(A, B, E):
        r = form(A, B)
        gk.launch(weigh2, r.shape, r, E)

    A, dA, B, dB = rng.random((3, 4)), rng.random((3, 4)), rng.random((4, 5)), rng.random((4, 5))
    E, dE = np.zeros(1), np.ones(1)
    before = [a.copy() for a in (A, dA, B, dB, E, dE)]
    with pytest.raises(gk.ProgramError, match="test_host_matmul.py"):
        gk.autodiff(program, gk.Duplicated(A, dA), gk.Duplicated(B, dB), gk.Duplicated(E, dE))
    for a, b in zip((A, dA, B, dB, E, dE), before):
        np.testing.assert_array_equal(a, b)
