"""`gk.interop.jax_function` (docs/interop.md): a kernel or program as a JAX operation with a
`jax.custom_vjp`, whose primal, forward and backward call gradkern through `jax.pure_callback` on fresh
NumPy buffers (JAX arrays are immutable and the callback's are read-only). The forward keeps its split-mode
Call in adapter.PENDING under an int32 handle, a residual; the backward takes it back, or runs the forward
again when it is gone (dropped over the budget, or taken by an earlier backward of the same residuals).
Under `jax.vmap` the primal and the forward run lane by lane (`vmap_method="sequential"`); the backward
takes its lanes at once (`"expand_dims"`): k cotangents of one forward (jax.jacrev) run in gradkern's
vector mode, lanes with inputs of their own one call each.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from ..errors import InteropError
from . import adapter as A

_HANDLE = jax.ShapeDtypeStruct((), np.int32)
_MADE_MAX = 64  # custom_vjp functions kept per operation (one per argument layout and constants)


def _is_array(a: Any) -> bool:
    return not isinstance(a, (bool, int, float)) and hasattr(a, "shape") and hasattr(a, "dtype")


def _dtype(a: Any) -> str:
    """The dtype JAX gives the array (float64 narrowed to float32 unless x64 is on)."""
    return np.dtype(jax.dtypes.canonicalize_dtype(a.dtype)).name


def _roles(op: A.Operation, arrays: dict[int, Any], count: int) -> tuple[str, ...]:
    return tuple(A.role(len(arrays[n].shape), _dtype(arrays[n]), op.where(n)) if n in arrays
                 else A.CONST for n in range(count))


def _constant_key(c: Any) -> tuple:
    """What tells two constants apart for the functions an operation keeps (a constant is part of its
    function): type and value, and a float's sign, since -0.0 == 0.0 but 1 / -0.0 is -inf."""
    return (type(c), c, math.copysign(1.0, c)) if type(c) is float else (type(c), c)


class _Layout:
    """Where the arrays go among the arguments, and the constants in the other places."""

    def __init__(self, op: A.Operation, positions: tuple[int, ...], constants: tuple):
        self.op, self.positions, self.constants = op, positions, constants

    def values(self, arrays: Sequence) -> list:
        """Every argument, for the adapter: host arrays, floats for Active scalars, the constants."""
        out, roles = list(self.constants), self.roles(arrays)
        for n, a in zip(self.positions, arrays):
            out[n] = A.host_value(roles[n], np.asarray(a))
        return out

    def roles(self, arrays: Sequence) -> tuple[str, ...]:
        return _roles(self.op, dict(zip(self.positions, arrays)), len(self.constants))


def _build(layout: _Layout):
    """The custom_vjp function of one layout: takes the array arguments, returns the outputs."""
    op = layout.op

    def specs(arrays):
        by_position = dict(zip(layout.positions, arrays))
        return tuple(jax.ShapeDtypeStruct(by_position[n].shape, by_position[n].dtype) for n in op.outputs)

    def result(outs):
        return outs[0] if len(outs) == 1 else tuple(outs)

    def primal_cb(*arrays):
        outs = A.primal(op, layout.roles(arrays), layout.values(arrays), copy_all=True)
        return tuple(np.asarray(o) for o in outs)

    def forward_cb(*arrays):
        call = A.forward(op, layout.roles(arrays), layout.values(arrays), copy_all=True)
        # copies: the caller's buffers go back to the store, and JAX may keep a returned array without copying
        outs = tuple(np.array(o, copy=True) for o in call.outputs())
        return (*outs, np.int32(A.PENDING.keep(call)))

    @jax.custom_vjp
    def operation(*arrays):
        return result(jax.pure_callback(primal_cb, specs(arrays), *arrays, vmap_method="sequential"))

    def fwd(*arrays):
        *outs, handle = jax.pure_callback(forward_cb, (*specs(arrays), _HANDLE), *arrays,
                                          vmap_method="sequential")
        return result(outs), (arrays, handle)

    def bwd(residuals, cts):
        arrays, handle = residuals
        # a residual JAX made a literal (jax.grad at a Python float: a TypedFloat, no .shape): an array again
        arrays = tuple(a if hasattr(a, "shape") else jax.numpy.asarray(a) for a in arrays)
        cts = (cts,) if len(op.outputs) == 1 else tuple(cts)
        roles = layout.roles(arrays)
        seeded = [k for k, n in enumerate(op.outputs) if roles[n] == A.ARRAY]  # int outputs: no cotangent
        wanted = [k for k, n in enumerate(layout.positions) if roles[n] in (A.ARRAY, A.ACTIVE)]
        out_specs = tuple(jax.ShapeDtypeStruct(arrays[k].shape, arrays[k].dtype) for k in wanted)

        def one(handle, host, given) -> list:
            """One backward: the forward's call if the store has it, else the forward again."""
            grads = [None] * len(op.outputs)
            for k, g in zip(seeded, given):
                grads[k] = np.asarray(g)
            call = A.PENDING.take(int(handle))
            got = A.gradients(op, layout.roles(host), layout.values(host), grads, call, copy_all=True)
            return [np.asarray(got[layout.positions[k]], dtype=arrays[k].dtype) for k in wanted]

        def backward_cb(handle, *rest):
            host, given = rest[:len(arrays)], rest[len(arrays):]
            levels = np.ndim(handle)  # vmap levels: a leading axis each, of size 1 where not batched
            if not levels:
                return tuple(one(handle, host, given))
            batch = np.broadcast_shapes(*(np.shape(a)[:levels] for a in (handle, *host, *given)))
            if vector and all(np.shape(a)[:levels] == (1,) * levels for a in (handle, *host)):
                return vector_mode(handle, host, given, levels, batch)
            results = [np.empty(batch + arrays[k].shape, arrays[k].dtype) for k in wanted]
            for index in np.ndindex(batch):  # different inputs per lane: one call each
                pick = [np.broadcast_to(a, batch + np.shape(a)[levels:])[index] for a in (handle, *host, *given)]
                for r, g in zip(results, one(pick[0], pick[1:1 + len(host)], pick[1 + len(host):])):
                    r[index] = g
            return tuple(results)

        def vector_mode(handle, host, given, levels, batch):
            """k cotangents of one forward's outputs (jax.jacrev, a vmap over a vjp): gradkern's vector mode,
            k shadows per array in one forward and one reverse."""
            A.PENDING.take(int(np.ravel(handle)[0]))  # its call has one shadow per array: not for k lanes
            k = int(np.prod(batch))
            host = [np.asarray(a).reshape(np.shape(a)[levels:]) for a in host]
            grads = [None] * len(op.outputs)
            for j, g in zip(seeded, given):
                grads[j] = np.broadcast_to(g, batch + np.shape(g)[levels:]).reshape(k, *np.shape(g)[levels:])
            got = A.gradients(op, layout.roles(host), layout.values(host), grads, None, copy_all=True, lanes=k)
            return tuple(np.asarray(got[layout.positions[j]], dtype=arrays[j].dtype).reshape(batch + arrays[j].shape)
                         for j in wanted)

        vector = any(r == A.ARRAY for r in roles)  # gradkern's vector mode needs an array to carry the lanes
        ins = jax.pure_callback(backward_cb, out_specs, handle, *arrays, *(cts[k] for k in seeded),
                                vmap_method="expand_dims")
        out = [None] * len(arrays)
        for k, g in zip(wanted, ins):
            out[k] = g
        return tuple(out)

    operation.defvjp(fwd, bwd)
    return operation


def jax_function(f: Any, outputs: str | Sequence[str], dim: Any = None):
    """`f` (a kernel or program) as a JAX operation (docs/interop.md): takes every argument of `f` in its
    order (JAX or NumPy arrays, Python numbers) and returns the final values of `outputs` (one array, or a
    tuple), changing nothing; differentiable in reverse mode (jax.grad, jax.vjp) at its float arrays and
    0-d float arrays (Active scalars); jit- and vmap-able."""
    op = A.operation(f, outputs, dim)
    made: dict = {}

    def call(*args, **kwargs):
        args = A.bind(op, args, kwargs)
        positions = tuple(n for n, a in enumerate(args) if _is_array(a))
        constants = tuple(None if n in positions else a for n, a in enumerate(args))
        roles = _roles(op, {n: args[n] for n in positions}, len(args))
        op.check(roles, [type(a).__name__ for a in args])
        for n, a in enumerate(args):
            if n not in positions:
                op.check_constant(n, a)
            elif not isinstance(a, (jax.Array, np.ndarray, np.generic)):  # a BCOO: a TypeError in the callback
                raise InteropError(f"{op.where(n)} is a {type(a).__name__}; gradkern takes dense JAX or NumPy "
                                   "arrays", hint="pass a.todense()" if hasattr(a, "todense") else None)
        A.check_dim(op, roles, args, {n: tuple(args[n].shape) for n in positions})
        try:
            key = (positions, tuple(_constant_key(c) for c in constants))
            fn = made.get(key)
        except TypeError:  # an unhashable constant: a function for this call alone
            key, fn = None, None
        if fn is None:
            fn = _build(_Layout(op, positions, constants))
            if key is not None:
                if len(made) >= _MADE_MAX:
                    made.clear()
                made[key] = fn
        return fn(*(args[n] for n in positions))

    call.__name__ = getattr(f, "__name__", getattr(f, "name", "operation"))
    call.__doc__ = f"{op.name} as a JAX operation returning {[op.params[n] for n in op.outputs]} (gk.interop)"
    return call
