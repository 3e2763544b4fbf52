"""Differential property test: random expression kernels built from the op
table give the same values in the Numba backend and the IR interpreter (the
definition of the IR's meaning). Kernels are built as IR directly, so each
example costs one Numba compile and no source file."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gradkern.backends.numba_cpu import compile_source
from gradkern.backends.numba_loops import NumbaOptions, generate
from gradkern.ir import nodes as ir
from gradkern.ir.infer import infer_types
from gradkern.ir.interp import interpret
from gradkern.ir.ops import Op
from gradkern.ir.types import F32, F64, Array
from gradkern.ir.verify import verify
from gradkern.runtime.cache import cache_dir

BINARY = [Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MIN, Op.MAX]
UNARY = [Op.SIN, Op.COS, Op.TANH, Op.ABS, Op.NEG, Op.FLOOR]
i = ir.Var("i")
LEAVES = [ir.Load("x", (i,)), ir.Load("y", (i,)), ir.Var("c")]


def expressions(depth: int):
    leaf = st.one_of(st.sampled_from(LEAVES),
                     st.floats(-3, 3, allow_nan=False).map(lambda v: ir.Const(round(v, 3), weak=True)))
    if depth == 0:
        return leaf
    sub = expressions(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(st.sampled_from(BINARY), sub, sub).map(lambda t: ir.Apply(t[0], (t[1], t[2]))),
        st.tuples(st.sampled_from(UNARY), sub).map(lambda t: ir.Apply(t[0], (t[1],))),
        st.tuples(sub, sub, sub).map(lambda t: ir.Select(ir.Apply(Op.LT, (t[0], t[1])), t[1], t[2])),
        # sqrt/log/exp on guarded arguments so values stay finite
        sub.map(lambda e: ir.Apply(Op.SQRT, (ir.Apply(Op.ABS, (e,)),))),
        sub.map(lambda e: ir.Apply(Op.EXP, (ir.Apply(Op.TANH, (e,)),))),
        sub.map(lambda e: ir.Apply(Op.POW, (e, ir.Const(2, weak=True)))),
    )


@settings(max_examples=12, deadline=None)
@given(expr=expressions(3), dtype=st.sampled_from([F32, F64]), seed=st.integers(0, 2**16))
def test_numba_backend_agrees_with_interpreter(expr, dtype, seed):
    body = (ir.Assign("i", ir.Tid(0)), ir.Store("out", (i,), expr))
    params = tuple(ir.Param(n, is_array=n != "c", written=n == "out") for n in ("x", "y", "c", "out"))
    untyped = ir.Kernel("prop", params, body, 1)
    arr = Array(dtype, 1)
    typed = verify(infer_types(untyped, {"x": arr, "y": arr, "c": dtype, "out": arr}), "infer")
    source, entry = generate(typed, 1, NumbaOptions(parallel=False))
    fn = compile_source(source, entry, cache_dir() / "numba")
    rng = np.random.default_rng(seed)
    x, y = (rng.uniform(-2, 2, 16).astype(dtype.numpy) for _ in range(2))
    c = dtype.numpy(rng.uniform(0.5, 1.5))
    got, want = np.zeros_like(x), np.zeros_like(x)
    fn(16, x, y, c, got)
    interpret(typed, (16,), [x, y, c, want])
    # same operations in the same order and type: equal up to libm differences in the last bits
    tol = 1e-5 if dtype == F32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True, err_msg=source)
