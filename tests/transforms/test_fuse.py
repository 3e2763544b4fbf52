"""A reverse loop fused into its forward twin (transforms/fuse.py, docs/adjoint-forms.md section 10): the
legality rule on hand-built loops, refusals included; a fuzz run of random two-loop kernels, fused against
unfused bit for bit; gemv_t's gradient fused and unfused."""

import random

import numpy as np
import pytest
from fuzz.test_tape_fuzz import load_kernels

import gradkern as gk
import gradkern.pipeline as pipeline
from gradkern.backends import numba_plan
from gradkern.ir import build as b
from gradkern.ir import nodes as ir
from gradkern.ir.types import F64, I64
from gradkern.kernels import gemv_t
from gradkern.transforms.fuse import fuse_loops, fuse_pair

pytestmark = pytest.mark.interp_in_ci  # tests/conftest.py: the interpreter in CI, a Numba sample


i, j = b.var("i", I64), b.var("j", I64)
STOP = ir.Shape("A", 0, type=I64)


def ld(a, *ix):
    return ir.Load(a, tuple(ix), type=F64)


def f(name):
    return b.var(name, F64)


def add(a, *ix, value):
    """`a[ix] = a[ix] + value`, as the reverse writes a shadow."""
    return ir.Store(a, tuple(ix), b.add(ld(a, *ix), value))


def loops(forward, reverse, between=(), after=(), start=0, step=1, stop=STOP, **changes):
    """F; between; n = trip count; R; after, with R the reverse of F's iteration space (`changes`: the
    reverse loop's fields, prefixed r_, its count and its first statement's value, replaced to break the
    pairing)."""
    s, d = b.const(start, I64), b.const(step, I64)
    fwd = ir.For("i", s, stop, d, tuple(forward))
    count = ir.Assign("n", changes.pop("count", b.trip_count(s, stop, d)))
    first = ir.Assign("i", changes.pop("value", b.iteration_value(s, d, "r")))
    rev = ir.For("r", b.const(0, I64), b.var("n", I64), b.const(1, I64), (first, *reverse))
    fields = {x: getattr(rev, x) for x in ("var", "start", "stop", "step", "body")}
    rev = ir.For(**{**fields, **{x[2:]: v for x, v in changes.items()}})
    return (fwd, *between, count, rev, *after)


def fused(block):
    k = ir.Kernel("k", (), block, 1)
    out, loops_fused = fuse_loops(k)
    return out.body if loops_fused else None


def reason(block):
    z = max(n for n, s in enumerate(block) if isinstance(s, ir.For))
    return fuse_pair(block, 0, z).reason


GEMV_F = [ir.Assign("acc", b.add(f("acc"), b.mul(ld("A", i, j), ld("x", i))))]
GEMV_R = [add("d_A", i, j, value=b.mul(f("d_acc"), ld("x", i))),
          ir.AtomicAdd("d_x", (i,), b.mul(f("d_acc"), ld("A", i, j)))]
D_ACC = ir.Assign("d_acc", b.mul(ld("d_y", j), f("alpha")))
Y = ir.Store("y", (j,), b.mul(f("alpha"), f("acc")))


def test_gemv_t_shape_fuses_with_the_adjoint_seed_hoisted():
    block = loops(GEMV_F, GEMV_R, between=[Y, D_ACC])
    out = fused(block)
    assert out is not None
    assert out[0] == D_ACC  # what R reads moves above the loop
    loop = out[1]
    assert isinstance(loop, ir.For) and loop.var == "i" and loop.body == tuple(GEMV_F + GEMV_R)
    assert out[2] == Y  # the rest stays after it, in order
    assert not any(isinstance(s, ir.For) for s in out[3:])


def test_element_written_and_read_at_the_same_iteration_fuses():
    fwd = [ir.Store("B", (i, j), b.mul(ld("A", i, j), f("c")))]
    rev = [add("d_A", i, j, value=b.mul(ld("B", i, j), f("d_acc")))]
    assert fused(loops(fwd, rev, between=[D_ACC])) is not None
    # the same offset everywhere separates iterations too
    i1 = b.add(i, b.const(1, I64))
    fwd = [ir.Store("B", (i1, j), b.mul(ld("A", i, j), f("c")))]
    rev = [add("d_A", i, j, value=ld("B", i1, j))]
    assert fused(loops(fwd, rev)) is not None


def test_a_contiguous_walk_is_legal_but_left_as_two_loops():
    # matvec's row: the reverse loop re-reads it from cache and vectorises alone (strided_walk)
    fwd = [ir.Assign("acc", b.add(f("acc"), b.mul(ld("A", j, i), ld("x", i))))]
    rev = [add("d_A", j, i, value=b.mul(f("d_acc"), ld("x", i)))]
    block = loops(fwd, rev, [D_ACC])
    assert reason(block) == "fused"
    assert fused(block) is None


@pytest.mark.parametrize("case, why", [
    # the reverse reads a local the forward loop writes (its value at the end, not at the iteration)
    ("reads_forward_local", "share a local"),
    # the forward loop reads a local the reverse loop writes
    ("forward_reads_reverse_local", "share a local"),
    # a write through an index array: B[idx[i], j] may be B[q, j] read by the reverse at another iteration
    ("index_array", "index"),
    # a loop-carried dependence through memory: iteration i writes B[i + 1, j], which the reverse reads at i + 1
    ("neighbour", "index"),
    # a tape push in F and its pop in R share the tape pointer
    ("tape", "share a local"),
    # what R depends on reads F's result: it cannot move above F
    ("seed_reads_result", "cannot move above"),
    # the loop variable read after the loops
    ("variable_read_after", "read outside"),
    # another iteration space
    ("other_stop", "trip count"),
    ("other_start", "recompute"),
    # the reverse loop running backwards
    ("backwards", "forward from 0"),
    # the body assigns the loop variable
    ("assigns_variable", "writes the loop variable"),
])
def test_refusals(case, why):
    i1 = b.add(i, b.const(1, I64))
    tp = b.var("_gk_tp", I64)
    cases = {
        "reads_forward_local": lambda: loops(GEMV_F, [add("d_A", i, j, value=f("acc"))]),
        "forward_reads_reverse_local": lambda: loops(
            [ir.Assign("acc", b.add(f("acc"), b.mul(f("t"), ld("A", i, j))))],
            [ir.Assign("t", ld("A", i, j)), *GEMV_R], [D_ACC]),
        "index_array": lambda: loops(
            [ir.Store("B", (ir.Load("idx", (i,), type=I64), j), ld("A", i, j))],
            [add("d_A", i, j, value=ld("B", i, j))]),
        "neighbour": lambda: loops(
            [ir.Store("B", (i1, j), b.mul(ld("B", i, j), ld("A", i, j)))],
            [add("d_A", i, j, value=ld("B", i, j))]),
        "tape": lambda: loops(
            [ir.Store("_gk_tape", (j, tp), f("acc")), ir.Assign("_gk_tp", b.add(tp, b.const(1, I64))), *GEMV_F],
            [ir.Assign("_gk_tp", b.sub(tp, b.const(1, I64))), add("d_A", i, j, value=ld("_gk_tape", j, tp))]),
        "seed_reads_result": lambda: loops(GEMV_F, GEMV_R, between=[ir.Assign("d_acc", b.mul(f("acc"), f("c")))]),
        "variable_read_after": lambda: loops(GEMV_F, GEMV_R, between=[D_ACC],
                                             after=[ir.Store("y", (j,), b.cast(i, F64))]),
        "other_stop": lambda: loops(GEMV_F, GEMV_R, [D_ACC], count=b.trip_count(
            b.const(0, I64), ir.Shape("A", 1, type=I64), b.const(1, I64))),
        "other_start": lambda: loops(GEMV_F, GEMV_R, [D_ACC], value=b.iteration_value(b.const(1, I64),
                                                                                     b.const(1, I64), "r")),
        "backwards": lambda: loops(GEMV_F, GEMV_R, [D_ACC], r_start=b.sub(b.var("n", I64), b.const(1, I64)),
                                   r_stop=b.const(-1, I64), r_step=b.const(-1, I64)),
        "assigns_variable": lambda: loops(GEMV_F + [ir.Assign("i", b.add(i, b.const(1, I64)))], GEMV_R, [D_ACC]),
    }
    block = cases[case]()
    assert fused(block) is None
    assert why in reason(block)


# ---- fuzz: random two-loop kernels, fused against unfused ------------------------------------------------------

# loop bodies (thread j owns column j of A and B; x is shared; idx holds rows): what the reverse may share with
# the forward loop (locals, B written and read, index arrays, neighbours, branches, loop-carried nonlinear sums)
BODY = [
    "acc += A[i, j] * x[i]",
    "acc += A[i, j] * A[i, j]",
    "acc += B[i, j] * x[i]",
    "acc += gk.sin(A[i, j]) * c",
    "s = s * 0.5 + A[i, j] * A[i, j]",
    "acc = gk.sin(acc) * 0.5 + A[i, j]",
    "B[i, j] = A[i, j] * x[i]",
    "B[i, j] = B[i, j] * gk.cos(A[i, j])",
    "acc += B[i, j] * A[i, j]",
    "acc += A[idx[i], j] * x[i]",
    "B[idx[i], j] = A[i, j] * c",
    "B[i + 1, j] = B[i, j] * 0.5 + A[i, j]",
    "t = A[i, j] * acc\n        B[i, j] = t",
    "acc += B[i + 1, j] * x[i]",
    "if A[i, j] > 0.5:\n            acc += x[i] * x[i]",
    # with B Const the reverse reads B where the forward loop wrote it: at the same element, through an
    # index array, at a neighbour
    "B[i, j] = x[i] * 0.5\n        acc += B[i, j] * A[i, j]",
    "B[idx[i], j] = x[i] * 0.5\n        acc += B[i, j] * A[i, j]",
    "B[i + 1, j] = x[i] * 0.5\n        acc += B[i, j] * A[i, j]",
]


def _source(rng: random.Random, name: str) -> str:
    body = "\n        ".join(rng.sample(BODY, rng.randint(1, 3)))
    start = rng.choice(["0", "1"])
    tail = rng.choice(["", "\n    B[0, j] = B[0, j] + acc", "\n    s = s + x[j]"])
    return (f"def {name}(c, A, B, x, idx, y):\n    j = gk.tid()\n    acc = 0.0\n    s = 0.0\n    t = 0.0\n"
            f"    for i in range({start}, A.shape[0] - 1):\n        {body}\n"
            f"    y[j] = c * acc + 0.5 * y[j] + s * t{tail}\n")


def _gradient(kernel, seed):
    """Every primal and derivative of a random kernel's gradient on the interpreter: c Active or Const, B
    Duplicated or Const (a Const B written and read makes the reverse read a primal the forward loop writes)."""
    m, n = 6, 3
    g = np.random.default_rng(seed)
    A, B, x, y = g.random((m, n)), g.random((m, n)), g.random(m), g.random(n)
    idx = g.integers(0, m, m)
    c = gk.Active(0.7) if seed % 2 else gk.Const(0.7)
    dB = gk.Const(B) if seed % 3 else gk.Duplicated(B, g.random((m, n)))
    args = [c, gk.Duplicated(A, g.random((m, n))), dB, gk.Duplicated(x, g.random(m)), gk.Const(idx),
            gk.Duplicated(y, g.random(n))]
    out = gk.autodiff(kernel, *args, dim=n, backend="interp")
    shadows = [a.dval for a in args if isinstance(a, gk.Duplicated)]
    return [A, B, x, y, *shadows, out[0]]


def test_fused_and_unfused_gradients_are_equal_on_random_kernels(tmp_path, monkeypatch):
    rng = random.Random(33)
    sources = [_source(rng, f"k{n}") for n in range(30)]
    module = load_kernels(str(tmp_path / "fuse_fuzz_kernels.py"), sources)
    made = []
    monkeypatch.setattr(pipeline, "fuse_loops", lambda k: made.append(fuse_loops(k)[1]) or fuse_loops(k))
    for n, src in enumerate(sources):
        kernel = getattr(module, f"k{n}")
        monkeypatch.setattr(pipeline, "FUSE_LOOPS", True)
        after = _gradient(kernel, n)
        kernel._specs.clear()
        monkeypatch.setattr(pipeline, "FUSE_LOOPS", False)
        before = _gradient(kernel, n)
        for x, y in zip(before, after):
            assert np.array_equal(x, y), src
    assert sum(bool(x) for x in made) >= 4 and sum(not x for x in made) >= 6  # both sides of the rule ran


# ---- the library row --------------------------------------------------------------------------------------------

def _gemv_t(kernel, n, seed):
    g = np.random.default_rng(seed)
    A, x, y = g.random((n + 3, n)), g.random(n + 3), g.random(n)
    args = [gk.Active(1.5), gk.Duplicated(A, g.random(A.shape)), gk.Duplicated(x, g.random(x.shape)),
            gk.Active(0.5), gk.Duplicated(y, g.random(n))]
    out = gk.autodiff(kernel, *args, dim=n)
    return [y, args[1].dval, args[2].dval, args[4].dval, out[0], out[3]]


@pytest.mark.numba
@pytest.mark.parametrize("chunks", [0, 1, 3])
def test_gemv_t_fused_bit_for_bit(monkeypatch, chunks):
    monkeypatch.setattr(numba_plan, "private_chunks", lambda *a, **k: min(chunks, a[1]) if chunks else 0)
    results = []
    for fuse in (False, True):
        monkeypatch.setattr(pipeline, "FUSE_LOOPS", fuse)
        kernel = gk.kernel(gemv_t.fn)
        results.append(_gemv_t(kernel, 37, chunks))
        source = gk.inspect(kernel, gk.Active(1.5), gk.Duplicated(np.ones((4, 3)), np.ones((4, 3))),
                            gk.Duplicated(np.ones(4), np.ones(4)), gk.Active(0.5),
                            gk.Duplicated(np.ones(3), np.ones(3)), dim=3, mode=gk.Reverse)
        loops_printed = str(source).split("\n\n")[0].count("for ")
        assert loops_printed == (1 if fuse else 2)
    for x, y in zip(*results):
        assert np.array_equal(x, y)
