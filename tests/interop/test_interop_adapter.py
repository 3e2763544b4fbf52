"""gradkern/interop/adapter.py without PyTorch or JAX: the logic both frameworks' operations share
(argument roles, what is copied, forward and backward on NumPy arrays, the store of pending forwards),
checked against central differences in float64 (docs/interop.md)."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from support.interop_cases import N, cases, central_differences, differentiable, pingpong, stencil, update

import gradkern as gk
from gradkern.interop import adapter as A

# gc.collect() in these tests scans only what the test made (tests/conftest.py `frozen_heap`; docs/testing.md)
pytestmark = pytest.mark.usefixtures("frozen_heap")


def roles_of(args) -> tuple[str, ...]:
    return tuple(A.role(a.ndim, a.dtype.name, "test") if isinstance(a, np.ndarray) else A.CONST for a in args)


def values_of(args) -> list:
    return [A.host_value(r, a) for r, a in zip(roles_of(args), args)]


def functional(op):
    """The operation as a function of the arguments: the outputs' final values."""
    return lambda *args: A.primal(op, roles_of(args), values_of(args))


@pytest.mark.parametrize("name", ["stencil", "update", "loss", "pingpong", "checkpointed"])
def test_backward_gives_the_gradients_of_the_initial_values(name):
    f, outputs, args, dim = cases()[name]
    op = A.operation(f, outputs, dim)
    before = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    outs = A.primal(op, roles_of(args), values_of(args))
    call = A.forward(op, roles_of(args), values_of(args))
    for o, p in zip(call.outputs(), outs):
        np.testing.assert_array_equal(o, p)
    weights = [np.random.default_rng(3).standard_normal(o.shape) for o in outs]
    incoming = [w.copy() for w in weights]
    got = A.backward(call, incoming)
    for a, b in zip(args, before):  # the operation changes none of its inputs
        np.testing.assert_array_equal(a, b)
    for w, g in zip(weights, incoming):  # the reverse consumed copies, never the caller's gradients
        np.testing.assert_array_equal(w, g)
    reference = central_differences(functional(op), args, weights)
    assert set(differentiable(args)) == {n for n, g in enumerate(got) if g is not None}
    for n in differentiable(args):
        np.testing.assert_allclose(got[n], reference[n], rtol=1e-6, atol=1e-8, err_msg=f"{name}: {op.params[n]}")


def test_the_same_incoming_gradient_twice_gives_the_same_gradients():
    """warp#1732: a gradient buffer used as the output's shadow is zeroed by the reverse, and the next
    backward silently gets zeros. The adapter copies it."""
    f, outputs, args, _ = cases()["stencil"]
    op = A.operation(f, outputs, None)
    dun = np.random.default_rng(4).standard_normal(args[0].shape)
    first = A.backward(A.forward(op, roles_of(args), values_of(args)), [dun])
    second = A.backward(A.forward(op, roles_of(args), values_of(args)), [dun])
    np.testing.assert_array_equal(first[0], second[0])
    assert first[2] == second[2] and np.abs(first[0]).max() > 0


def test_a_call_is_used_once_and_gradients_run_the_forward_again():
    f, outputs, args, _ = cases()["pingpong"]
    op = A.operation(f, outputs, None)
    call = A.forward(op, roles_of(args), values_of(args))
    grads = [np.ones(args[0].shape), np.ones(1)]
    first = A.gradients(op, roles_of(args), values_of(args), grads, call)
    with pytest.raises(gk.InteropError, match="consumed"):
        A.backward(call, grads)
    again = A.gradients(op, roles_of(args), values_of(args), grads, None)
    np.testing.assert_allclose(again[0], first[0], rtol=1e-13)
    assert again[3] == pytest.approx(first[3], rel=1e-13)


def test_a_kernel_runs_on_copies_of_what_it_writes_only():
    roles = roles_of(cases()["stencil"][2])
    assert A.operation(stencil, "un", None).copied(roles, False) == {1}
    assert A.operation(stencil, "un", None).copied(roles, True) == {0, 1}
    assert A.operation(update, "u", None).copied(roles_of(cases()["update"][2]), False) == {0}
    assert A.operation(pingpong, "E", None).copied(roles_of(cases()["pingpong"][2]), False) == {0, 1, 2}


def test_roles():
    assert A.role(1, "float64", "x") == A.ARRAY and A.role(0, "float32", "x") == A.ACTIVE
    assert A.role(2, "int32", "x") == A.DATA and A.role(0, "int64", "x") == A.CONST
    assert A.role(0, "bool", "x") == A.CONST and A.role(0, "uint8", "x") == A.CONST  # numbers
    with pytest.raises(gk.InteropError, match="argument 'z' has dtype complex128; gradkern takes real float"):
        A.role(1, "complex128", "argument 'z'")
    # what gk.launch refuses (runtime/binding.py), refused before anything runs: inside a JAX callback
    # gk.launch's error would arrive wrapped in JAX's
    for dtype in ("bool", "float16", "bfloat16", "int8", "uint32"):
        with pytest.raises(gk.InteropError, match=f"argument 'm' has dtype {dtype}; .*float32, float64, int32"):
            A.role(1, dtype, "argument 'm'")
    assert A.host_value(A.ACTIVE, np.asarray(0.5)) == 0.5 and type(A.host_value(A.CONST, np.asarray(3))) is int


def test_bad_operations_are_refused_by_name():
    with pytest.raises(gk.InteropError, match=r"outputs \['vn'\].*'u', 'un', 'c', 'dt'"):
        A.operation(stencil, "vn", None)
    with pytest.raises(gk.InteropError, match="distinct"):
        A.operation(stencil, ["un", "un"], None)
    with pytest.raises(gk.InteropError, match="dim= belongs"):
        A.operation(pingpong, "u", 5)
    with pytest.raises(gk.InteropError, match="takes a @gk.kernel|wraps a @gk.kernel"):
        A.operation(3, "u", None)
    with pytest.raises(gk.InteropError, match="keyword-only"):
        A.operation(lambda u, *, v: None, "u", None)
    op = A.operation(stencil, ("un", "c"), None)
    with pytest.raises(gk.InteropError, match="argument 'c' is an output"):
        op.check(roles_of(cases()["stencil"][2]))
    with pytest.raises(gk.InteropError, match="takes 4 arguments"):
        op.check((A.ARRAY,))
    with pytest.raises(gk.InteropError, match="'u' is on cpu but 'un' is on cuda:0"):
        A.check_devices(op, {0: "cpu", 1: "cuda:0"})


def test_pending_forwards_are_kept_within_the_budget_and_taken_once():
    f, outputs, args, _ = cases()["stencil"]
    op = A.operation(f, outputs, None)
    pending = A.Pending(budget=1)  # smaller than any call: only the newest is kept
    first = pending.keep(A.forward(op, roles_of(args), values_of(args)))
    second = pending.keep(A.forward(op, roles_of(args), values_of(args)))
    assert pending.take(first) is None and len(pending) == 1
    call = pending.take(second)
    assert call is not None and pending.take(second) is None
    handle = pending.tie(A.forward(op, roles_of(args), values_of(args)))
    assert len(pending) == 1
    del handle
    gc.collect()
    assert len(pending) == 0  # the handle's memory owned the call
    handle = pending.tie(call)
    A.backward(call, [np.ones(args[0].shape)])
    assert pending.take(int(handle[0])) is None  # used: the framework runs the forward again


def test_an_array_passed_twice_has_one_shadow_and_its_gradient_in_its_first_place():
    """dot(u, u, out): d(u . u)/du = 2 u, all of it at the first place (frameworks add the places up)."""
    from gradkern.kernels import dot
    u = np.random.default_rng(5).uniform(-1, 1, N)
    op = A.operation(dot, "out", None)
    args = [u, u, np.zeros(1)]
    call = A.forward(op, roles_of(args), values_of(args))
    assert call.args[0].dval is call.args[1].dval and call.aliases == {1}
    got = A.backward(call, [np.ones(1)])
    np.testing.assert_allclose(got[0], 2 * u, rtol=1e-15)
    assert not got[1].any()
