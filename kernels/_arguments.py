"""A library rule's arguments (docs/custom-rules.md): their array module (NumPy or CuPy),
the checks a rule's primal runs before it touches any buffer, how an output
may overlap an input, and each annotated argument's shadows lane by lane."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import gradkern as gk


def value(arg: Any) -> Any:
    """The primal value of a possibly annotated argument."""
    return arg.val if isinstance(arg, gk.Annotation) else arg


def lanes(arg: Any, width: int) -> list:
    """The shadows (reverse) or tangents (forward) of `arg`, one per lane of a
    width-`width` call: Duplicated gives its `.dval`, BatchDuplicated its k
    shadows; Const, Active and plain values give None in every lane."""
    if isinstance(arg, gk.BatchDuplicated):
        shadows = tuple(arg.dvals)
    elif isinstance(arg, gk.Duplicated):
        shadows = (arg.dval,)
    else:
        return [None] * width
    if len(shadows) != width:
        raise gk.LaunchError(f"{len(shadows)} shadows given for a call of width {width}")
    return list(shadows)


def active(arg: Any) -> bool:
    return isinstance(arg, gk.Active)


def per_lane(derivatives: list, width: int) -> Any:
    """A reverse rule's entry for an Active argument: a float, or a tuple of
    `width` floats in vector mode."""
    return float(derivatives[0]) if width == 1 else tuple(float(d) for d in derivatives)


def array_module(x: Any, rule: str, name: str):
    """numpy or cupy, whichever `x` belongs to (cupy is imported only for a CuPy array)."""
    if isinstance(x, np.ndarray):
        return np
    if type(x).__module__.split(".")[0] == "cupy":
        import cupy
        return cupy
    raise gk.LaunchError(f"{rule}: argument '{name}' must be a NumPy or CuPy array, got {type(x).__name__}")


def check_float_arrays(rule: str, **arrays: Any):
    """Check that every array is a floating-point NumPy (or every one a CuPy)
    array of one dtype; returns their array module."""
    names = list(arrays)
    xp = array_module(arrays[names[0]], rule, names[0])
    for name, x in arrays.items():
        if array_module(x, rule, name) is not xp:
            raise gk.LaunchError(f"{rule}: argument '{name}' is a {type(x).__module__.split('.')[0]} array but "
                                 f"'{names[0]}' is a {xp.__name__} one", hint="pass all arrays on one device")
        if x.dtype.kind != "f":
            raise gk.LaunchError(f"{rule}: argument '{name}' must be a float32 or float64 array, got {x.dtype}")
        if x.dtype != arrays[names[0]].dtype:
            raise gk.LaunchError(f"{rule}: argument '{name}' is {x.dtype} but '{names[0]}' is "
                                 f"{arrays[names[0]].dtype}", hint="pass all arrays in one dtype")
    return xp


def check_length(rule: str, length: Any) -> float:
    """A domain length: a finite positive real number."""
    try:
        value = float(length)
    except (TypeError, ValueError):
        raise gk.LaunchError(f"{rule}: argument 'length' must be a real number, got {type(length).__name__}") \
            from None
    if not (math.isfinite(value) and value > 0.0):
        raise gk.LaunchError(f"{rule}: argument 'length' must be finite and positive, got {value}")
    return value


def _address(x: Any) -> int:
    face = getattr(x, "__cuda_array_interface__", None) or x.__array_interface__
    return face["data"][0]


def same_memory(x: Any, y: Any) -> bool:
    """Whether x and y are the same memory viewed the same way (an in-place call)."""
    return x is y or (_address(x) == _address(y) and x.shape == y.shape and x.strides == y.strides
                      and x.dtype == y.dtype)


def check_output(rule: str, out_name: str, out: Any, inputs: dict, in_place: str | None = None) -> None:
    """Check that the output `out` shares no memory with the inputs, except that
    it may be exactly the input named `in_place` (gk.AliasingError otherwise)."""
    xp = array_module(out, rule, out_name)
    for name, x in inputs.items():
        if name == in_place and same_memory(out, x):
            continue
        # bounds first (cheap on both libraries); exact only where the bounds overlap
        if xp.may_share_memory(out, x) and xp.shares_memory(out, x):
            allowed = f" or be exactly '{in_place}' (an in-place call)" if in_place else ""
            raise gk.AliasingError(f"{rule}: output '{out_name}' overlaps input '{name}' in memory; it must "
                                   f"share no memory with the inputs{allowed}",
                                   hint=f"give '{out_name}' its own array")
