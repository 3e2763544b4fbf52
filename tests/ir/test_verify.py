"""The IR verifier (ir/verify.py) catches broken invariants and names them."""

from dataclasses import replace

import numpy as np
import pytest

import gradkern as gk
from gradkern.ir import nodes as ir
from gradkern.ir.infer import infer_types
from gradkern.ir.types import F32, I64
from gradkern.ir.verify import verify
from gradkern.kernels import allen_cahn_step
from gradkern.runtime.binding import bind


def typed_step():
    x = np.ones(8)
    b = bind(allen_cahn_step.ir, 8, (x, x.copy(), 0.1, 0.1))
    return infer_types(allen_cahn_step.ir, b.type_map(allen_cahn_step.ir))


def test_typed_kernel_verifies():
    assert verify(typed_step(), "test") is not None


def map_stores(k, f):
    def block(body):
        out = []
        for s in body:
            if isinstance(s, ir.Store):
                s = f(s)
            elif isinstance(s, ir.If):
                s = replace(s, then=block(s.then), orelse=block(s.orelse))
            out.append(s)
        return tuple(out)
    return replace(k, body=block(k.body))


@pytest.mark.parametrize("breakage, message", [
    (lambda s: replace(s, value=replace(s.value, type=F32)), "type"),
    (lambda s: replace(s, indices=s.indices + s.indices), "indices"),
    (lambda s: replace(s, array="nope"), "unknown array"),
    (lambda s: replace(s, value=ir.Var("ghost", type=I64)), "ghost"),
])
def test_broken_ir_is_reported_with_the_stage(breakage, message):
    broken = map_stores(typed_step(), breakage)
    with pytest.raises(gk.InternalError, match=f"after my-pass.*{message}|{message}.*"):
        verify(broken, "my-pass")


def test_untyped_ir_is_rejected():
    with pytest.raises(gk.InternalError, match="untyped"):
        verify(allen_cahn_step.ir, "frontend")


def split_step():
    from gradkern.transforms.split import split_interior
    k = split_interior(typed_step())
    assert k.interior is not None and [r.axis for r in k.interior.ranges] == [0]
    return k


def test_split_kernel_verifies_with_its_interior():
    assert verify(split_step(), "interior splitting").interior is not None


@pytest.mark.parametrize("breakage, message", [
    (lambda r: replace(r, axis=1), "axes"),  # allen_cahn_step has a 1-D tid
    (lambda r: replace(r, lo=ir.Tid(0, type=I64)), "varies"),  # a bound must be known before its axis's loop
    (lambda r: replace(r, hi=ir.Var("i", type=I64)), "varies"),  # a local: its value is a thread's
    (lambda r: replace(r, hi=ir.Const(1.5, type=F32)), "int64|type"),
])
def test_broken_interior_ranges_are_reported(breakage, message):
    k = split_step()
    broken = replace(k, interior=replace(k.interior, ranges=(breakage(k.interior.ranges[0]),)))
    with pytest.raises(gk.InternalError, match=message):
        verify(broken, "interior splitting")


def test_broken_interior_body_is_reported():
    k = split_step()
    broken = replace(k, interior=replace(k.interior, body=map_stores(
        replace(k, body=k.interior.body), lambda s: replace(s, array="nope")).body))
    with pytest.raises(gk.InternalError, match="unknown array"):
        verify(broken, "interior splitting")
