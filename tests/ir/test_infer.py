"""Type inference (ir/infer.py): promotion, weak literals, explicit casts."""

import math

import numpy as np

import gradkern as gk
from gradkern.ir import nodes as ir
from gradkern.ir.ops import Op
from gradkern.ir.types import F32, F64, I32, I64, Array
from gradkern.runtime.binding import bind


def typed(kernel, *args, dim=4):
    from gradkern.ir.infer import infer_types
    b = bind(kernel.ir, dim, args)
    return infer_types(kernel.ir, b.type_map(kernel.ir))


def store_value(k: ir.Kernel) -> ir.Expr:
    return next(s for s in ir.walk_stmts(k.body) if isinstance(s, ir.Store)).value


@gk.kernel
def scale(x, out, c):
    i = gk.tid()
    out[i] = x[i] * 2.0 + c


def test_float32_kernel_stays_float32_with_python_literals_and_scalars():
    x = np.ones(4, np.float32)
    k = typed(scale, x, x.copy(), 0.5)
    v = store_value(k)
    assert v.type == F32
    assert {e.type for e in ir.walk_expr(v)} == {F32, I64}  # the index is int64, all arithmetic float32
    assert k.param("c").type == F32


def test_float64_array_makes_python_float_scalars_float64():
    k = typed(scale, np.ones(4), np.ones(4), 0.5)
    assert k.param("c").type == F64 and store_value(k).type == F64


def test_numpy_scalar_is_strong_and_widens():
    k = typed(scale, np.ones(4, np.float32), np.ones(4, np.float32), np.float64(0.5))
    v = store_value(k)
    # float32 array * literal stays float32; + float64 scalar widens; stored back to float32 by a cast
    assert isinstance(v, ir.Apply) and v.op is Op.CAST and v.type == F32
    assert v.args[0].type == F64


@gk.kernel
def int_mix(a, out):
    i = gk.tid()
    out[i] = a[i] * 3 + a[i] / 2


def test_int32_arithmetic_widens_to_int64_and_true_division_gives_float():
    a = np.arange(4, dtype=np.int32)
    k = typed(int_mix, a, np.zeros(4))
    v = store_value(k)
    add = v if v.op is Op.ADD else v.args[0]
    assert add.op is Op.ADD and add.type == F64
    mul, div = add.args
    assert mul.type == F64 and mul.args[0].type == I64  # int64 product converted for the float add
    assert div.op is Op.DIV and div.type == F64
    assert div.args[0].op is Op.CAST and isinstance(div.args[0].args[0], ir.Load)  # int32 load -> float64
    assert isinstance(div.args[1], ir.Const) and div.args[1].type == F64 and div.args[1].value == 2.0


@gk.kernel
def accumulate(A, x, y):
    i = gk.tid()
    s = 0
    for j in range(A.shape[1]):
        s += A[i, j] * x[j]
    y[i] = s


def test_local_widened_by_a_later_assignment_is_typed_at_the_join():
    A = np.ones((4, 3), np.float32)
    k = typed(accumulate, A, np.ones(3, np.float32), np.zeros(4, np.float32))
    assert k.local_types["s"] == F32  # int 0, then float32: the join (not float64)
    init = next(s for s in ir.walk_stmts(k.body) if isinstance(s, ir.Assign) and s.name == "s")
    assert isinstance(init.value, ir.Const) and init.value.type == F32 and init.value.value == 0.0
    assert k.local_types["j"] == I64


@gk.kernel
def powers(x, out):
    i = gk.tid()
    out[i] = x[i] ** 3 + x[i] ** 0.5 + math.sqrt(i)


def test_pow_keeps_integer_exponent_and_int_argument_to_sqrt_becomes_float():
    k = typed(powers, np.ones(4, np.float32), np.ones(4, np.float32))
    pows = [e for e in ir.all_exprs(k.body) if isinstance(e, ir.Apply) and e.op is Op.POW]
    assert [p.args[1].type for p in pows] == [I64, F32]
    sqrt = next(e for e in ir.all_exprs(k.body) if isinstance(e, ir.Apply) and e.op is Op.SQRT)
    assert sqrt.type == F32 and sqrt.args[0].op is Op.CAST


@gk.kernel
def cmp_int32(a, out):
    i = gk.tid()
    if a[i] > 2:
        out[i] = 1


def test_weak_int_literal_adopts_int32_in_comparisons():
    k = typed(cmp_int32, np.arange(4, dtype=np.int32), np.zeros(4, np.int32))
    cond = next(s for s in ir.walk_stmts(k.body) if isinstance(s, ir.If)).cond
    assert cond.args[0].type == I32 and cond.args[1].type == I32


@gk.kernel
def reassign_param(x, n):
    i = gk.tid()
    n = n * 0.5
    x[i] = n


def test_reassigned_param_becomes_a_per_thread_local_that_may_widen():
    k = typed(reassign_param, np.ones(4), 3)
    assert k.param("n").type == I64
    assert k.local_types["_gk_n"] == F64  # the private copy widens like any local (Python semantics)
    first = k.body[0]
    assert isinstance(first, ir.Assign) and first.name == "_gk_n" and first.value.args[0] == ir.Var("n", type=I64)


@gk.kernel
def int_powers(a, out):
    i = gk.tid()
    out[i] = a[i] ** 2 + a[i] ** i


def test_int_pow_is_int_only_for_a_known_non_negative_exponent():
    k = typed(int_powers, np.arange(4), np.zeros(4))
    pows = [e for e in ir.all_exprs(k.body) if isinstance(e, ir.Apply) and e.op is Op.POW]
    assert [p.type for p in pows] == [I64, F64]


def test_array_param_types_carry_ndim():
    k = typed(accumulate, np.ones((4, 3)), np.ones(3), np.zeros(4))
    assert k.param("A").type == Array(F64, 2)
