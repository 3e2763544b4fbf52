"""Our own passes do work linear in a kernel's size (docs/compile-time.md, finding 12): counted in expression
nodes visited (every `ir.walk_expr` step calls `ir.nodes.children` once), not timed, on tests/support/big_kernel.py's
synthetic big kernel at two sizes, and on the reverse sweep's peephole over a long straight-line block (the pass
that was quadratic: it scanned the block back, walking each statement, for every accumulation)."""

import pytest
from support.big_kernel import annotated, arguments, load

import gradkern as gk
from gradkern.ir import build as b
from gradkern.ir import nodes as ir
from gradkern.ir.ops import Op
from gradkern.ir.types import F64, I64
from gradkern.transforms.peephole import peephole


@pytest.fixture
def visits(monkeypatch):
    """A counter of the expression nodes visited by ir.walk_expr (nodes.children is called once per node)."""
    count = [0]
    children = ir.children

    def counted(e):
        count[0] += 1
        return children(e)
    monkeypatch.setattr(ir, "children", counted)
    return count


def _work(count, call) -> int:
    count[0] = 0
    call()
    return count[0]


# doubling the kernel doubles the work: 1.95-1.99x measured for every mode at 4 -> 8 -> 16 -> 32 blocks; the
# quadratic peephole made the reverse 2.17x, 2.27x, 2.38x. 2.1 leaves room for a constant part of the work
# (the launch's own statements) shrinking in proportion, and refuses any pass quadratic in the body.
@pytest.mark.parametrize("mode", ["primal", "reverse", "forward"])
def test_pipeline_work_is_linear_in_kernel_size(mode, visits, tmp_path):
    work = []
    for blocks in (4, 8):
        kernel = load(blocks, str(tmp_path))
        args, n = arguments()
        if mode == "primal":
            call = (kernel, *args)
            options = {}
        else:
            call = (kernel, *annotated(args, mode == "forward"))
            options = {"mode": gk.Forward if mode == "forward" else gk.Reverse}
        work.append(_work(visits, lambda: gk.inspect(*call, dim=n, **options)))  # noqa: B023  called at once
    assert work[1] < 2.1 * work[0], work


def _accumulations(n: int) -> list:
    """A reverse body's shape: n adjoint locals each zeroed, then n accumulations into them, each reading a
    product of two others' adjoints (so that every earlier statement could touch the target)."""
    zeros = [ir.Assign(f"d{k}", b.const(0.0, F64)) for k in range(n)]
    adds = [ir.Assign(f"d{k}", b.apply(Op.ADD, b.var(f"d{k}", F64),
                                       b.apply(Op.MUL, b.var(f"g{k}", F64), b.var(f"g{k + 1}", F64))))
            for k in range(n)]
    return zeros + adds


def test_peephole_folds_zeroed_accumulations_in_linear_work(visits):
    out = peephole(_accumulations(8))
    assert out == [ir.Assign(f"d{k}", b.apply(Op.MUL, b.var(f"g{k}", F64), b.var(f"g{k + 1}", F64)))
                   for k in range(8)]
    small, large = (_work(visits, lambda n=n: peephole(_accumulations(n))) for n in (200, 400))
    assert large < 2.1 * small, (small, large)  # exactly 2x: 5 nodes per statement, each visited once


def test_peephole_keeps_what_a_touch_between_needs():
    """`d = 0; ...; d = d + e` is not folded when a statement between reads d, writes d inside a block, or
    writes the array element's array inside a block (the pass looks back to the last statement touching d)."""
    d, e = b.var("d", F64), b.var("e", F64)
    acc = ir.Assign("d", b.apply(Op.ADD, d, e))
    between = [ir.Assign("x", b.apply(Op.MUL, d, e)),
               ir.If(b.var("c", F64), (ir.Assign("d", e),)),
               ir.If(b.var("c", F64), (ir.Store("a", (b.const(0, I64),), e),))]
    for stmt in between[:2]:
        body = [ir.Assign("d", b.const(0.0, F64)), stmt, acc]
        assert peephole(body) == body
    i0 = (b.const(0, I64),)
    store_acc = ir.Store("a", i0, b.apply(Op.ADD, ir.Load("a", i0, type=F64), e))
    body = [ir.Store("a", i0, b.const(0.0, F64)), between[2], store_acc]
    assert peephole(body) == body
    assert peephole([ir.Store("a", i0, b.const(0.0, F64)), between[0], store_acc]) == \
        [between[0], ir.Store("a", i0, e)]


def test_peephole_drops_a_round_trip_only_when_nothing_between_writes():
    """`g = d; ...; d = g` loses its last statement unless d or g is written between, or a loop lies between."""
    d, g = b.var("d", F64), b.var("g", F64)
    save, back = ir.Assign("g", d), ir.Assign("d", g)
    other = ir.Assign("x", b.apply(Op.MUL, g, g))
    assert peephole([save, other, back]) == [save, other]
    for stmt in (ir.Assign("d", b.apply(Op.MUL, g, g)), ir.Assign("g", b.const(1.0, F64)),
                 ir.For("r", b.const(0, I64), b.const(2, I64), b.const(1, I64), (other,))):
        assert peephole([save, stmt, back]) == [save, stmt, back]
