"""Tape minimality (transforms/tape.py, docs/adjoint-forms.md; issue 14.12): the augmented
primal tapes only what the reverse needs and cannot recompute from memory the
kernel leaves intact, within RECOMPUTE_LIMIT operations. Each kernel here
asserts its tape bytes per thread, and its gradient against finite
differences in float64 and the dot-product test, fused (check_grad) and
split (autodiff_thunk)."""

import importlib.util
import math
import re
import shutil

import numpy as np
import pytest
from library import test_hpc_kernels

import gradkern as gk
from gradkern.testing import check_grad
from gradkern.transforms.tape import RECOMPUTE_LIMIT
from transforms import test_reverse

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


@gk.kernel
def layernorm(inp, weight, bias, out, C, eps):
    i = gk.tid()
    m = 0.0
    for c in range(C):
        m += inp[i * C + c]
    m = m / C
    v = 0.0
    for c in range(C):
        xshift = inp[i * C + c] - m
        v += xshift * xshift
    v = v / C
    s = 1.0 / math.sqrt(v + eps)
    for c in range(C):
        n = s * (inp[i * C + c] - m)
        out[i * C + c] = n * weight[c] + bias[c]


@gk.kernel
def layernorm_inplace(x, weight, bias, C, eps):
    i = gk.tid()
    m = 0.0
    for c in range(C):
        m += x[i * C + c]
    m = m / C
    v = 0.0
    for c in range(C):
        xshift = x[i * C + c] - m
        v += xshift * xshift
    v = v / C
    s = 1.0 / math.sqrt(v + eps)
    for c in range(C):
        n = s * (x[i * C + c] - m)
        x[i * C + c] = n * weight[c] + bias[c]


@gk.kernel
def carried(x, out, n):
    i = gk.tid()
    a = x[i] * x[i]  # from intact memory: recomputed, never taped
    s = x[i]
    for k in range(n):
        s = math.sin(s) * a  # carried from one iteration to the next, and overwritten: taped per iteration
    out[i] = s


@gk.kernel
def overwrite_in_loop(A, w, m):
    i = gk.tid()
    for j in range(m - 1):
        a = A[i, j + 1] * w[j]  # A[i, j + 1] is overwritten by the next iteration
        s = math.sin(w[j]) + 0.5  # intact memory only: recomputed
        A[i, j] = math.sin(a) * s + A[i, j] * a  # A[i, j] is read and overwritten here


@gk.kernel
def branch_in_loop(x, y, out, n):
    i = gk.tid()
    m = 0
    for k in range(n):
        if x[k] > 0.5:
            m += 1  # fixed after this loop: the next loop's bound, taped once (integer)
    acc = 0.0
    for k in range(m + 1):
        t = x[i] * y[k]
        if t > 0.4:  # recomputed from x and y
            t = t * t
        acc += math.sin(t) * acc * 0.5  # acc carried (taped per iteration); t fixed after the branch (popped)
    out[i] = acc


def chain_kernel(tmp_path, statements: int):
    """`s = x[i]`, then `s = sin(s) * c` repeated: one reassigned local, straight-line."""
    lines = ["import math", "", "import gradkern as gk", "", "", "@gk.kernel", "def chain(x, out, c):",
             "    i = gk.tid()", "    s = x[i]", *["    s = math.sin(s) * c"] * (statements - 1), "    out[i] = s", ""]
    path = tmp_path / f"chain_{statements}.py"
    path.write_text("\n".join(lines))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.chain


def rand(rng, *shape):
    return rng.uniform(0.3, 1.2, shape)


def dup(x, rng):
    return gk.Duplicated(x, rng.uniform(-1, 1, x.shape))  # non-zero seeds: every accumulation shows


def layernorm_args(rng, C, rows=3):
    return (dup(rng.standard_normal(rows * C), rng), dup(rand(rng, C), rng), dup(rand(rng, C), rng),
            dup(np.zeros(rows * C), rng), C, 1e-5)


CASES = {
    "layernorm": lambda r: (layernorm, layernorm_args(r, 8), 3),
    "layernorm_inplace": lambda r: (layernorm_inplace, layernorm_args(r, 8)[:3] + (8, 1e-5), 3),
    "carried": lambda r: (carried, (dup(rand(r, 5), r), dup(rand(r, 5), r), 6), 5),
    "overwrite_in_loop": lambda r: (overwrite_in_loop, (dup(rand(r, 4, 6), r), dup(rand(r, 6), r), 6), 4),
    "branch_in_loop": lambda r: (branch_in_loop, (dup(np.linspace(0.3, 0.9, 6), r), dup(rand(r, 7), r),
                                                  dup(rand(r, 6), r), 6), 6),
}


def tape_bytes(kernel, *args, dim=None) -> int:
    return gk.inspect(kernel, *args, dim=dim, mode=gk.Reverse).tape_bytes_per_thread


def copies(args):
    return tuple(type(a)(a.val.copy(), a.dval.copy()) if isinstance(a, gk.Duplicated) else a for a in args)


def split(kernel, args, dim):
    """autodiff_thunk: the augmented primal, then the reverse from its tape (args changed in place)."""
    forward, reverse = gk.autodiff_thunk(kernel, *(type(a) if isinstance(a, gk.Annotation) else gk.Const
                                                   for a in args), dim=dim)
    return reverse(*args, forward(*args))


def split_dot_product(kernel, args, dim, seed=0, eps=1e-6):
    """⟨w, J v⟩ by central differences in float64 against ⟨Jᵀ w, v⟩ from split mode,
    for random non-zero w and v (L = Σ ⟨w_a, a_after⟩ over the Duplicated arrays)."""
    rng = np.random.default_rng(seed)
    vals = [a.val if isinstance(a, gk.Annotation) else a for a in args]
    dups = [k for k, a in enumerate(args) if isinstance(a, gk.Duplicated)]
    acts = [k for k, a in enumerate(args) if isinstance(a, gk.Active)]
    w = {k: rng.standard_normal(vals[k].shape) for k in dups}
    v = {k: rng.standard_normal(np.shape(vals[k])) for k in dups + acts}

    def loss(sign):
        xs = [x.copy() if isinstance(x, np.ndarray) else x for x in vals]
        for k in v:
            xs[k] = xs[k] + sign * eps * v[k]
        gk.launch(kernel, dim, *xs)
        return sum(np.sum(w[k] * xs[k]) for k in dups)

    numeric = (loss(1) - loss(-1)) / (2 * eps)
    run = tuple(gk.Duplicated(a.val.copy(), w[k].copy()) if k in dups else a for k, a in enumerate(args))
    grads = split(kernel, run, dim)
    analytic = sum(np.sum(run[k].dval * v[k]) for k in dups) + sum(grads[k] * v[k] for k in acts)
    assert analytic == pytest.approx(numeric, rel=1e-6, abs=1e-8), (kernel.name, analytic, numeric)


def assert_split_equals_fused(kernel, args, dim):
    fused, apart = copies(args), copies(args)
    want = gk.autodiff(kernel, *fused, dim=dim)
    got = split(kernel, apart, dim)
    for a, b in zip(fused, apart):
        if isinstance(a, gk.Duplicated):
            np.testing.assert_allclose(b.val, a.val, rtol=1e-14)
            np.testing.assert_allclose(b.dval, a.dval, rtol=1e-12, atol=1e-14)
    for e, g in zip(want, got):
        assert (e is None and g is None) or g == pytest.approx(e, rel=1e-12)


@pytest.mark.parametrize("C", [8, 768])
def test_layernorm_tapes_its_mean_and_variance_once(C):
    """The mean m and variance v are each summed in a loop (not recomputable
    within the bound) and read after it: each taped once, at the end of the
    kernel. Everything else is recomputed from them and the intact input:
    s = 1/sqrt(v + eps) and, per reverse iteration, xshift and n. Before: s,
    xshift, inp - m and n every iteration, 4C + 2 values."""
    assert tape_bytes(layernorm, *layernorm_args(np.random.default_rng(0), C), dim=3) == 2 * 8


@pytest.mark.numba
def test_layernorm_fused_kernel_keeps_its_values_in_registers():
    ins = gk.inspect(layernorm, *layernorm_args(np.random.default_rng(0), 8), dim=3, mode=gk.Reverse)
    assert re.search(r"_gk_tape\[", ins.sources["augmented_primal"])
    assert not re.search(r"_gk_tape\[", ins.sources["fused"])  # m, v are never reassigned: nothing to push


@gk.kernel
def square_then_loop(x, n):
    i = gk.tid()
    x[i] = x[i] * x[i]  # its old value taped outside any loop: the fused kernel holds it in a register
    for k in range(n):
        x[i] = 0.75 * x[i] * x[i]  # taped per iteration: pushed, in the fused kernel too


@pytest.mark.numba
@pytest.mark.parametrize("n", [1, 3, 257])
def test_fused_kernel_holds_what_it_tapes_outside_loops_in_registers(n):
    """Split mode tapes scal's old x (x <- a x in place, Active a); the fused kernel reads it from a
    register and touches no tape, and gets the split gradients bit for bit (the same values)."""
    from gradkern.kernels import scal

    r = np.random.default_rng(n)
    args = (gk.Active(0.7), dup(rand(r, n), r))
    ins = gk.inspect(scal, *args, mode=gk.Reverse)
    assert ins.tape_bytes_per_thread == 8 and re.search(r"_gk_tape\[", ins.sources["augmented_primal"])
    assert not re.search(r"_gk_tape\[", ins.sources["fused"])
    assert check_grad(scal, *args).ok
    fused, apart = copies(args), copies(args)
    assert gk.autodiff(scal, *fused) == split(scal, apart, None)
    np.testing.assert_array_equal(fused[1].dval, apart[1].dval)
    loop_args = (dup(rand(r, n), r), 3)
    fused_source = gk.inspect(square_then_loop, *loop_args, mode=gk.Reverse).sources["fused"]
    # the loop's push and pop only, in each entry that tapes (the parallel entry and its one-thread serial twin:
    # docs/performance.md, "Loop bodies: one thread")
    entries = [f for f in fused_source.split("\ndef ")[1:] if re.search(r"_gk_tape\[", f)]
    assert entries and all(len(re.findall(r"_gk_tape\[", f)) == 2 for f in entries)
    assert check_grad(square_then_loop, *loop_args).ok
    fused, apart = copies(loop_args), copies(loop_args)
    gk.autodiff(square_then_loop, *fused)
    split(square_then_loop, apart, None)
    np.testing.assert_array_equal(fused[0].dval, apart[0].dval)


def test_in_place_layernorm_tapes_what_it_overwrites():
    """In place, the input row is gone by the reverse: per element, xshift (variance
    loop), the input (its reverse of n = s * (x - m)) and n (the output's partial in
    weight) are taped; m and v once. Nothing is recomputed from overwritten memory."""
    r = np.random.default_rng(0)
    for C in (8, 768):
        assert tape_bytes(layernorm_inplace, *layernorm_args(r, C)[:3], C, 1e-5, dim=3) == (3 * C + 2) * 8


def test_reassigned_local_chain_tapes_nothing(tmp_path):
    """`s = sin(s) * c + ...` 25 times: reverse mode transforms the kernel with
    versioned locals (pipeline's "versions" stage), so each s_k is a local of
    its own, assigned once, and the reverse restores it by replaying its
    definition from s_(k-1) (4 operations, within RECOMPUTE_LIMIT = 8): no tape.
    Before versioning it tapes s per statement (8 B, not 16: sin(s) is
    recomputed from it), 192 B at the start of this issue."""
    assert RECOMPUTE_LIMIT == 8
    chain = chain_kernel(tmp_path, 25)
    x = np.ones(4)
    for c in (1.1, gk.Active(1.1)):
        assert tape_bytes(chain, gk.Duplicated(x, x.copy()), gk.Duplicated(x.copy(), x.copy()), c) == 0


def test_loop_carried_value_is_taped_per_iteration():
    x = np.ones(5)
    for n in (1, 6, 40):
        assert tape_bytes(carried, gk.Duplicated(x, x.copy()), gk.Duplicated(x.copy(), x.copy()), n) == n * 8


def test_values_read_from_memory_the_loop_overwrites_are_taped_not_recomputed():
    """Per iteration: A[i, j + 1] (the partial in w of the first line), a (read by
    the store's partials; its definition reads A) and A[i, j] (the partial of
    A[i, j] * a in a); s is replayed from w."""
    A, w = np.ones((4, 6)), np.ones(6)
    assert tape_bytes(overwrite_in_loop, gk.Duplicated(A, A.copy()), gk.Duplicated(w, w.copy()), 6, dim=4) == \
        5 * 3 * 8
    assert tape_bytes(overwrite_in_loop, gk.Duplicated(A, A.copy()), gk.Const(w), 6, dim=4) == 5 * 2 * 8


def test_branch_in_loop_tapes_the_carried_sum_and_the_branch_result():
    """Per iteration acc (carried) and t (its last assignment is a branch: popped
    at the end of each iteration, not recomputed); the bound m + 1 once, in the
    integer tape. x[k] > 0.5 for 4 of the 6 x: 5 iterations."""
    kernel, args, dim = CASES["branch_in_loop"](np.random.default_rng(0))
    assert tape_bytes(kernel, *args, dim=dim) == 5 * 2 * 8 + 8


def suite_case(label):
    """A reverse-mode case of test_reverse.py ("reverse/name") or test_hpc_kernels.py ("hpc/name")."""
    suite, name = label.split("/")
    if suite == "reverse":
        return test_reverse.CASES[name](np.random.default_rng(7))
    return next(c[1:] for c in test_hpc_kernels._cases(np.random.default_rng(7)) if c[0] == name)


# The suite's kernels whose tape shrank (bytes per thread before -> now), and why.
SHRUNK = {
    # mx per iteration of the max loop (m - 1 = 4), then mx and z once each (not exp(X - mx) per element)
    "hpc/softmax_rows": 6 * 8,  # 192 ->
    # s, summed in the loop, once: the inlined smooth_relu recomputes the rest from it
    "hpc/mlp_layer": 8,  # 24 ->
    # x[p] (cos(x[p]) recomputed from it) and vn, restored once
    "hpc/particle_push": 2 * 8,  # 24 ->
    # acc per iteration; cos(acc + q) recomputed from it
    "hpc/volume_loop": 3 * 8,  # 48 ->
    # s per iteration; sin(s) recomputed from it
    "hpc/active_in_loop": 4 * 8,  # 64 ->
    # A[i, j - 1] per iteration; w * A[i, j - 1] recomputed from it
    "reverse/prefix_row": 4 * 8,  # 64 ->
    # the three loads A[i, k], A[k, j], A[k, k] (the kernel writes A); their quotient recomputed
    "reverse/lu_update": 3 * 8,  # 32 ->
}


@pytest.mark.parametrize("label", sorted(SHRUNK))
def test_suite_kernels_tape_less(label):
    kernel, args, dim = suite_case(label)
    assert tape_bytes(kernel, *args, dim=dim) == SHRUNK[label]


@pytest.mark.slow
@pytest.mark.parametrize("label", sorted(SHRUNK))
def test_suite_kernels_split_mode(label):
    """Their fused gradients are checked in test_reverse.py and test_hpc_kernels.py; split mode here."""
    kernel, args, dim = suite_case(label)
    split_dot_product(kernel, args, dim)
    assert_split_equals_fused(kernel, args, dim)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_fused_and_split(name):
    kernel, args, dim = CASES[name](np.random.default_rng(3))
    report = check_grad(kernel, *args, dim=dim)
    assert report.ok and report.checked > 5
    split_dot_product(kernel, args, dim)
    assert_split_equals_fused(kernel, args, dim)


@pytest.mark.slow
def test_reassigned_local_gradient_fused_and_split(tmp_path):
    chain = chain_kernel(tmp_path, 25)
    r = np.random.default_rng(4)
    args = (dup(rand(r, 6), r), dup(rand(r, 6), r), gk.Active(1.1))
    assert check_grad(chain, *args, dim=6).ok
    split_dot_product(chain, args, 6)
    assert_split_equals_fused(chain, args, 6)


@gk.kernel
def linear_local(u, un, c):
    i = gk.tid()
    if i == 0 or i == u.shape[0] - 1:
        un[i] = u[i]
    else:
        s = (u[i - 1] + u[i + 1] + u[i - 1] * u[i + 1] - 2.0 * u[i]) * 0.5  # 11 operations, no call or division
        un[i] = u[i] + c * s * u[i]


@gk.kernel
def divided_local(u, un, c):
    i = gk.tid()
    if i == 0 or i == u.shape[0] - 1:
        un[i] = u[i]
    else:
        s = (u[i - 1] + u[i + 1] + u[i - 1] * u[i + 1] - 2.0 * u[i]) / 3.0  # 11 operations, one a division
        un[i] = u[i] + c * s * u[i]


def test_linear_locals_are_recomputed_up_to_linear_limit():
    """A local of loads, + - * and negation only is recomputed up to LINEAR_LIMIT operations (a stencil's
    Laplacian: allen_cahn_step_2d's `lap`, 10), one of the same length with a division is taped (past
    RECOMPUTE_LIMIT); both gradients right, split as fused (docs/programs.md#program-shapes)."""
    from gradkern.kernels import allen_cahn_step_2d
    from gradkern.transforms.tape import LINEAR_LIMIT
    assert RECOMPUTE_LIMIT < 10 < 11 <= LINEAR_LIMIT
    r = np.random.default_rng(5)
    for kernel, taped in ((linear_local, 0), (divided_local, 8)):
        args = (dup(rand(r, 9), r), dup(rand(r, 9), r), gk.Active(0.3))
        assert tape_bytes(kernel, *args, dim=9) == taped
        assert check_grad(kernel, *args, dim=9).ok
        split_dot_product(kernel, args, 9)
        assert_split_equals_fused(kernel, args, 9)
    s2 = (6, 7)
    args2 = (dup(rand(r, *s2), r), dup(rand(r, *s2), r), gk.Active(0.2), 1e-3)
    assert tape_bytes(allen_cahn_step_2d, *args2, dim=s2) == 0
    assert_split_equals_fused(allen_cahn_step_2d, args2, s2)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
def test_generated_cuda_of_these_kernels_compiles(tmp_path):
    from backends.test_cuda import (  # not at the top: test_cuda imports this module's CASES through signatures
        bundle,
        nvcc,
    )
    sources = {}
    for name, make in sorted(CASES.items()):
        kernel, args, dim = make(np.random.default_rng(0))
        ins = gk.inspect(kernel, *args, dim=dim, mode=gk.Reverse, backend="cuda")
        sources |= {f"{name}/{role}": src for role, src in ins.sources.items()}
    assert {"layernorm/augmented_primal", "layernorm/reverse", "overwrite_in_loop/count"} <= set(sources)
    result = nvcc(tmp_path, bundle(sources), "-arch=sm_80", "-cubin", "-o", "k.cubin")
    assert result.returncode == 0, result.stderr[-4000:]
