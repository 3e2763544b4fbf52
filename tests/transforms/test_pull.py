"""Two-phase gathers, pulls (transforms/pull.py, docs/adjoint-forms.md section 8): stencil reads beside constant
index positions (`f[q, x - e_q]`, `u[i + 1, 0]`), their adjoints taped per site by the reverse and pulled by a
second kernel. Against finite differences, the interpreter (which raises on any access outside an array),
split mode, vector mode (which keeps atomics) and the forms the pipeline picks, on full, partial and tiny
launches (two offsets of one site landing on one element)."""

import math

import numpy as np
import pytest

import gradkern as gk
from gradkern.testing import check_grad
from transforms.test_gather import _run, dup, rand

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


@gk.kernel
def streamed(f, g):  # a D2Q9-like pull: constant directions, periodic neighbours on both axes
    i, j = gk.tid()
    nx = f.shape[1]
    ny = f.shape[2]
    im = i - 1 if i > 0 else i - 1 + nx
    ip = i + 1 if i < nx - 1 else i + 1 - nx
    jp = j + 1 if j < ny - 1 else j + 1 - ny
    a = f[0, i, j]
    b = f[1, im, j]
    c = f[2, ip, jp]
    g[0, i, j] = a * b + math.sin(c)
    g[1, i, j] = a * c
    g[2, i, j] = b * b + f[2, ip, jp] * a


@gk.kernel
def trailing(u, out):  # a constant trailing position, plain offsets ahead of the thread, partial launches
    i = gk.tid()
    out[i] = u[i, 1] * u[i + 1, 0] + math.sin(u[i + 2, 1])


@gk.kernel
def guarded(u, s, out):  # behind the thread, under a guard; a constant middle position; an unpulled shadow
    i, j = gk.tid()
    if i > 0:
        out[i, j] = u[i - 1, 2, j] * u[i - 1, 2, j] + u[i, 0, j] * s[i, j]
    else:
        out[i, j] = u[i, 0, j] * s[i, j]


@gk.kernel
def local_rows(f, g):  # the constant row and the offsets through locals set once, as a local array lowers them
    i = gk.tid()
    n = f.shape[1]
    xs = gk.local((2,), gk.int64)
    xs[0] = i + 1 if i < n - 1 else i + 1 - n
    xs[1] = i
    acc = 0.0
    for q in range(2):
        acc += f[q, xs[q]] * (q + 1.0)
    g[i] = acc * acc


CASES = {
    "streamed": lambda r: (streamed, (dup(rand(r, 3, 5, 4), r), dup(rand(r, 3, 5, 4), r)), (5, 4)),
    "streamed_tiny": lambda r: (streamed, (dup(rand(r, 3, 1, 2), r), dup(rand(r, 3, 1, 2), r)), (1, 2)),
    "streamed_part": lambda r: (streamed, (dup(rand(r, 3, 5, 4), r), dup(rand(r, 3, 5, 4), r)), (3, 2)),
    "trailing": lambda r: (trailing, (dup(rand(r, 9, 2), r), dup(rand(r, 6), r)), 6),
    "guarded": lambda r: (guarded, (dup(rand(r, 6, 3, 4), r), dup(rand(r, 6, 4), r), dup(rand(r, 5, 4), r)),
                          (5, 4)),
    "local_rows": lambda r: (local_rows, (dup(rand(r, 2, 7), r), dup(rand(r, 7), r)), 7),
}
PULLED = {"streamed": "f", "streamed_tiny": "f", "streamed_part": "f", "trailing": "u", "guarded": "u",
          "local_rows": "f"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_pulled_and_right(name):
    """The pulled shadow takes the pull; check_grad's finite differences and dot-product test pass."""
    kernel, args, dim = CASES[name](np.random.default_rng(7))
    forms = gk.inspect(kernel, *args, dim=dim, mode=gk.Reverse).adjoint_forms
    assert forms[PULLED[name]] == "pull", forms
    report = check_grad(kernel, *args, dim=dim, max_coords=200)
    assert report.ok and report.checked > 1


@pytest.mark.parametrize("name", sorted(CASES))
def test_interpreter_split_and_vector_mode_agree(name):
    """The interpreter stays in bounds and agrees with Numba; autodiff_thunk (augmented primal, reverse, pull)
    and two lanes of BatchDuplicated (atomics: a pull takes one lane) give the fused call's shadows."""
    kernel, args, dim = CASES[name](np.random.default_rng(5))
    fused = _run(kernel, args, dim)
    for a, b in zip(_run(kernel, args, dim, "interp"), fused):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
    split = tuple(gk.Duplicated(a.val.copy(), a.dval.copy()) if isinstance(a, gk.Duplicated) else a for a in args)
    forward, reverse = gk.autodiff_thunk(kernel, *(type(a) for a in args), dim=dim)
    reverse(*split, forward(*split))
    for x, y in zip(fused, [v for a in split for v in (a.val, a.dval)]):
        np.testing.assert_allclose(x, y, rtol=1e-14, atol=1e-15)
    rng = np.random.default_rng(4)
    seeds = [[rand(rng, *a.val.shape) for _ in range(2)] for a in args]
    batch = tuple(gk.BatchDuplicated(a.val.copy(), tuple(s.copy() for s in seed)) for a, seed in zip(args, seeds))
    gk.autodiff(kernel, *batch, dim=dim)
    for lane in range(2):
        want = _run(kernel, tuple(gk.Duplicated(a.val, seed[lane]) for a, seed in zip(args, seeds)), dim)[1::2]
        for a, b in zip(want, [a.dvals[lane] for a in batch]):
            np.testing.assert_allclose(b, a, rtol=1e-14, atol=1e-15)


def test_the_plan_runs_the_pull_after_the_kernel_that_tapes_its_sites():
    from gradkern.runtime.call import prepare

    kernel, args, dim = CASES["streamed"](np.random.default_rng(1))
    call, _ = prepare(kernel, args, dim, None, "reverse")
    assert call.roles == ("fused", "gather")
    assert [r.role for r in call.split] == ["augmented_primal", "reverse", "gather"]
    assert call.spec.kernels.static_slots[0] == 3  # one slot per site: f[0, i, j], f[1, im, j], f[2, ip, jp]


def test_what_a_pull_cannot_prove_keeps_atomics_and_is_right():
    """A wrap to a constant (`else 0`), a row read from memory, a thread-dependent row, and the launch axis at two
    positions (two threads would pull into one element): atomics, exact."""
    @gk.kernel
    def to_zero(f, g):
        i = gk.tid()
        ip = i + 1 if i < f.shape[1] - 1 else 0
        g[i] = f[1, ip] * f[0, i]

    @gk.kernel
    def row_from_memory(f, rows, g):
        i = gk.tid()
        r = rows[0]
        g[i] = f[r, i] * f[0, i + 1]

    @gk.kernel
    def crossed(f, g):  # threads 3 and 0 would both pull into f[3, 0]
        i = gk.tid()
        g[i] = f[i, 0] * f[3, i]

    @gk.kernel
    def thread_row(f, g):
        i = gk.tid()
        g[i] = f[i, i + 1] * f[0, i]

    r = np.random.default_rng(3)
    for kernel, args, dim in ((to_zero, (dup(rand(r, 2, 6), r), dup(rand(r, 6), r)), 6),
                              (row_from_memory, (dup(rand(r, 2, 7), r), gk.Const(np.array([1])),
                                                 dup(rand(r, 6), r)), 6),
                              (thread_row, (dup(rand(r, 6, 7), r), dup(rand(r, 6), r)), 6),
                              (crossed, (dup(rand(r, 6, 6), r), dup(rand(r, 6), r)), 6)):
        forms = gk.inspect(kernel, *args, dim=dim, mode=gk.Reverse).adjoint_forms
        assert forms["f"] == "atomic add", forms
        assert check_grad(kernel, *args, dim=dim).ok
