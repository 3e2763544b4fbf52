"""`gk.interop.torch_function` (docs/interop.md): a kernel or program as a PyTorch operation.

Where torch has `torch.library.custom_op` with `register_fake` and `register_autograd` (torch >= 2.4),
the operation is three custom ops in the `gradkern` namespace, so that `torch.compile(fullgraph=True)`
traces it: `primal` (no derivative wanted), `forward` (the augmented primal; it also returns a handle, a
one-element int64 tensor whose memory owns the split-mode Call: adapter.Pending.tie) and `backward`
(takes the handle, the saved inputs and the incoming gradients). Elsewhere, or when a constant argument
is not a number (a custom op's schema has no place for it), a `torch.autograd.Function` keeps the Call
in its ctx. Tensors cross by DLPack without copies (NumPy for CPU tensors, CuPy for CUDA ones); on CUDA
gradkern launches on torch's current stream.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..errors import InteropError
from . import adapter as A

CUSTOM_OPS = all(hasattr(torch.library, n) for n in ("custom_op", "register_fake", "register_autograd"))
_NUMBERS = (bool, int, float)
_numbers = itertools.count()


def _host(t: torch.Tensor) -> Any:
    """The NumPy (CPU) or CuPy (CUDA) array on `t`'s memory: no copy, strides kept."""
    t = t.detach()
    if t.device.type == "cuda":
        import cupy
        return cupy.from_dlpack(t)
    if t.device.type != "cpu":
        raise InteropError(f"gradkern runs on CPU and CUDA tensors; got a tensor on {t.device}")
    return t.resolve_conj().resolve_neg().numpy()


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _transformed(tensors: Sequence[torch.Tensor]) -> bool:
    """Whether a torch.func transform (grad, vjp, vmap, jacrev, ...) wraps one of the tensors: their
    autograd.Functions need a vmap rule and a setup_context that a gradkern operation has not
    (docs/interop.md). Not asked while torch.compile traces (nothing is wrapped there)."""
    if torch.compiler.is_compiling():
        return False
    wrapped = getattr(getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor", None)
    if wrapped is None:
        return False
    return any(wrapped(t) for t in tensors)


def _tensor(a: Any, like: torch.Tensor) -> torch.Tensor:
    """A torch tensor on the memory of a NumPy or CuPy array (no copy); a number as a 0-d tensor."""
    if isinstance(a, float):
        return torch.tensor(a, dtype=like.dtype, device=like.device)
    return torch.from_numpy(a) if like.device.type == "cpu" else torch.from_dlpack(a)


def _stream(tensors: Sequence[torch.Tensor]):
    """gradkern's launches on torch's current stream of the tensors' device (CUDA), else nothing."""
    device = next((t.device for t in tensors if t.device.type == "cuda"), None)
    if device is None:
        return contextlib.nullcontext()
    import cupy
    stack = contextlib.ExitStack()
    stack.enter_context(cupy.cuda.Device(device.index))
    stack.enter_context(cupy.cuda.ExternalStream(torch.cuda.current_stream(device).cuda_stream))
    return stack


class _Layout:
    """Which argument positions hold tensors ('t') and which constants ('c'), as the custom ops'
    `layout` string carries it."""

    def __init__(self, op: A.Operation, layout: str, constants: Sequence):
        self.op, self.layout = op, layout
        self.positions = tuple(n for n, c in enumerate(layout) if c == "t")
        self.constants = list(constants)

    def roles(self, tensors: Sequence[torch.Tensor]) -> tuple[str, ...]:
        out, it = [], iter(tensors)
        for n, c in enumerate(self.layout):
            if c == "t":
                t = next(it)
                out.append(A.role(t.dim(), _dtype(t), self.op.where(n)))
            else:
                out.append(A.CONST)
        return tuple(out)

    def values(self, tensors: Sequence[torch.Tensor], roles: Sequence[str]) -> list:
        out, it, constants = [], iter(tensors), iter(self.constants)
        for n, c in enumerate(self.layout):
            out.append(A.host_value(roles[n], _host(next(it))) if c == "t" else next(constants))
        return out

    def check(self, tensors: Sequence[torch.Tensor]) -> tuple[str, ...]:
        roles = self.roles(tensors)
        it = iter(self.constants)
        self.op.check(roles, ["a tensor" if c == "t" else type(next(it)).__name__ for c in self.layout])
        A.check_devices(self.op, {n: str(t.device) for n, t in zip(self.positions, tensors)
                                  if roles[n] != A.ACTIVE})
        return roles

    def wanted(self, roles: Sequence[str]) -> list[int]:
        """Indices into the tensors of those that get a gradient."""
        return [k for k, n in enumerate(self.positions) if roles[n] in (A.ARRAY, A.ACTIVE)]


def _outputs(layout: _Layout, tensors: Sequence, arrays: Sequence, copy: bool) -> list[torch.Tensor]:
    """The outputs as tensors on the arrays' memory (copies of a program's: its reverse rewinds them)."""
    by_position = dict(zip(layout.positions, tensors))
    out = [_tensor(a, by_position[n]) for n, a in zip(layout.op.outputs, arrays)]
    return [t.clone() for t in out] if copy else out


def _gradients(layout: _Layout, tensors: Sequence[torch.Tensor], grads: Sequence, call: A.Call | None):
    """The gradients of the tensors that get one (wanted order), the forward run again without `call`."""
    roles = layout.roles(tensors)
    with _stream(tensors):
        host = [None if g is None else _host(g) for g in grads]
        got = A.gradients(layout.op, roles, layout.values(tensors, roles), host, call)
    return [_tensor(got[layout.positions[k]], tensors[k]) for k in layout.wanted(roles)]


def _refuse_batched(op: A.Operation, grads: Sequence) -> None:
    """Batched incoming gradients (torch.autograd.grad(is_grads_batched=True), jacobian(vectorize=True))
    come wrapped by torch's vmap: refused by name, as the transforms are (docs/interop.md)."""
    grads = [g for g in grads if isinstance(g, torch.Tensor)]
    # the legacy vmap's BatchedTensor (torch.autograd.grad's) has a dispatch key torch._C does not name
    if _transformed(grads) or any("Batched" in str(torch._C._dispatch_keys(g)) for g in grads):
        raise InteropError(f"{op.name}: batched gradients (is_grads_batched=True, jacobian(vectorize=True)) go "
                           "through torch's vmap, which a gradkern operation does not support",
                           hint="one backward per gradient (jacobian(vectorize=False))")


def _refused(*_):
    raise InteropError("a second derivative through a gradkern operation: its backward is not differentiable "
                       "(gradkern's split mode gives first derivatives)",
                       hint="differentiate once; for Hessian-vector products use forward mode over gradkern")


class _CustomOps:
    """The three custom ops of one operation (registered at its first call with number constants)."""

    def __init__(self, op: A.Operation):
        self.op = op
        stem = re.sub(r"\W", "_", getattr(op.f, "__name__", getattr(op.f, "name", "f")))
        name = f"gradkern::{stem}_{next(_numbers)}"
        args = "Tensor[] tensors, Scalar[] constants, str layout"

        def primal(tensors, constants, layout):
            lay = _Layout(op, layout, constants)
            roles = lay.roles(tensors)
            with _stream(tensors):
                outs = A.primal(op, roles, lay.values(tensors, roles))
            return _outputs(lay, tensors, outs, copy=False)

        def forward(tensors, constants, layout):
            lay = _Layout(op, layout, constants)
            roles = lay.roles(tensors)
            with _stream(tensors):
                call = A.forward(op, roles, lay.values(tensors, roles))
                outs = _outputs(lay, tensors, call.outputs(), copy=op.program)
            return [*outs, torch.from_numpy(A.PENDING.tie(call))]

        def backward(handle, tensors, constants, layout, grads):
            return _gradients(_Layout(op, layout, constants), tensors, grads, A.PENDING.take(int(handle[0])))

        def fake_outputs(tensors, constants, layout):
            by_position = dict(zip(_Layout(op, layout, constants).positions, tensors))
            return [torch.empty_like(by_position[n], memory_format=torch.contiguous_format) for n in op.outputs]

        def fake_backward(handle, tensors, constants, layout, grads):
            lay = _Layout(op, layout, constants)
            return [torch.empty_like(tensors[k]) for k in lay.wanted(lay.roles(tensors))]

        self.primal = torch.library.custom_op(f"{name}_primal", primal, mutates_args=(),
                                              schema=f"({args}) -> Tensor[]")
        self.forward = torch.library.custom_op(f"{name}_forward", forward, mutates_args=(),
                                               schema=f"({args}) -> Tensor[]")
        self.backward = torch.library.custom_op(f"{name}_backward", backward, mutates_args=(),
                                                schema=f"(Tensor handle, {args}, Tensor?[] grads) -> Tensor[]")
        self.primal.register_fake(fake_outputs)
        self.forward.register_fake(lambda *a: [*fake_outputs(*a), torch.empty(1, dtype=torch.int64)])
        self.backward.register_fake(fake_backward)

        def setup_context(ctx, inputs, output):
            tensors, constants, layout = inputs
            ctx.constants, ctx.layout, ctx.count = constants, layout, len(tensors)
            ctx.save_for_backward(*tensors, *output)  # version counters: inputs and outputs unchanged since

        def backward_rule(ctx, grads):
            _refuse_batched(op, grads)
            saved = ctx.saved_tensors
            tensors, handle = saved[:ctx.count], saved[-1]
            lay = _Layout(op, ctx.layout, ctx.constants)
            got = self.backward(handle, list(tensors), ctx.constants, ctx.layout, list(grads[:-1]))
            out: list = [None] * len(tensors)
            for k, g in zip(lay.wanted(lay.roles(tensors)), got):
                out[k] = g
            return out, (None if ctx.constants else []), None  # a list of numbers is one leaf, unless empty

        self.forward.register_autograd(backward_rule, setup_context=setup_context)
        self.backward.register_autograd(_refused, setup_context=lambda ctx, inputs, output: None)

    def __call__(self, tensors: list, constants: list, layout: str, grad: bool) -> list:
        if grad:
            return list(self.forward(tensors, constants, layout)[:-1])
        return list(self.primal(tensors, constants, layout))


class _Refuse(torch.autograd.Function):
    """The gradients a backward run with create_graph=True returns, as functions of the operation's
    inputs that refuse to be differentiated."""

    @staticmethod
    def forward(ctx, count, *grads_and_inputs):
        return tuple(g.view_as(g) for g in grads_and_inputs[:count])

    @staticmethod
    def backward(ctx, *_):
        _refused()


class _Function(torch.autograd.Function):
    """The operation as an autograd.Function: the Call in ctx, the inputs and outputs saved."""

    @staticmethod
    def forward(ctx, lay: _Layout, *tensors):
        roles = lay.roles(tensors)
        ctx.lay = lay
        with _stream(tensors):
            if not any(ctx.needs_input_grad[1:]):
                return tuple(_outputs(lay, tensors, A.primal(lay.op, roles, lay.values(tensors, roles)), False))
            ctx.call = A.forward(lay.op, roles, lay.values(tensors, roles))
            outs = _outputs(lay, tensors, ctx.call.outputs(), copy=lay.op.program)
        ctx.save_for_backward(*tensors, *outs)
        ctx.count = len(tensors)
        ctx.mark_non_differentiable(*(t for t in outs if not t.is_floating_point()))
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        _refuse_batched(ctx.lay.op, grads)
        lay, tensors = ctx.lay, ctx.saved_tensors[:ctx.count]
        call, ctx.call = ctx.call, None
        with torch.no_grad():
            got = _gradients(lay, tensors, grads, call)
        if torch.is_grad_enabled():  # create_graph=True: a second derivative would go through these
            got = list(_Refuse.apply(len(got), *got, *tensors))
        out: list = [None] * len(tensors)
        for k, g in zip(lay.wanted(lay.roles(tensors)), got):
            out[k] = g
        return (None, *out)


def torch_function(f: Any, outputs: str | Sequence[str], dim: Any = None):
    """`f` (a kernel or program) as a PyTorch operation (docs/interop.md): takes every argument of `f` in its
    order (tensors, CPU or CUDA, or Python numbers) and returns the final values of `outputs` (one tensor,
    or a tuple), changing no input; differentiable at its float tensors and 0-d float tensors (Active
    scalars); a custom op that torch.compile traces where torch has them."""
    op = A.operation(f, outputs, dim)
    ops: list = []

    def call(*args, **kwargs):
        args = A.bind(op, args, kwargs)
        args = tuple(a.item() if isinstance(a, np.generic) else a for a in args)  # NumPy scalars: numbers
        layout = "".join("t" if isinstance(a, torch.Tensor) else "c" for a in args)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        constants = [a for a in args if not isinstance(a, torch.Tensor)]
        lay = _Layout(op, layout, constants)
        for n, a in enumerate(args):
            if layout[n] == "c" and (hasattr(a, "__array__") or hasattr(a, "__dlpack__")):
                raise InteropError(f"{op.where(n)} is a {type(a).__name__}: pass arrays as torch tensors")
            if layout[n] == "t" and a.layout is not torch.strided:  # a TypeError from .numpy() in the op
                raise InteropError(f"{op.where(n)} is a tensor of layout {a.layout}; gradkern takes dense "
                                   f"(strided) tensors", hint="pass t.to_dense()")
            if layout[n] == "c":
                op.check_constant(n, a)
        if _transformed(tensors):
            raise InteropError(f"{op.name} under a torch.func transform (grad, vjp, vmap, jacrev, ...): a gradkern "
                               "operation is differentiable by torch.autograd only",
                               hint="use torch.autograd.grad, or loop over the batch in place of torch.vmap")
        lay.check(tensors)
        grad = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
        if CUSTOM_OPS and all(type(c) in _NUMBERS for c in constants):
            if not ops:
                ops.append(_CustomOps(op))
            outs = ops[0](tensors, constants, layout, grad)
        else:
            outs = _Function.apply(lay, *tensors)
        return outs[0] if len(outs) == 1 else tuple(outs)

    call.__name__ = getattr(f, "__name__", getattr(f, "name", "operation"))
    call.__doc__ = f"{op.name} as a PyTorch operation returning {[op.params[n] for n in op.outputs]} (gk.interop)"
    return call
