"""`gk.jacobian`: the dense Jacobian of every array a kernel writes with
respect to one input, for small problems, by forward vector mode: the input's
unit directions go through the kernel `chunk` at a time as BatchDuplicated
tangent lanes, each chunk on fresh copies of the arguments (the user's are
never changed)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..annotations import Annotation, BatchDuplicated, Const
from ..errors import AnnotationError, LaunchError
from ..kernel import KernelFunction
from .arrays import array_module, is_array, is_cupy_array
from .binding import bind, default_dim
from .forward import forward


def _copy(x: Any) -> Any:
    return x.copy() if is_array(x) else x


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The index of element `flat` in C order: never through reshape(-1),
    which copies an array that is not C-contiguous."""
    return tuple(int(i) for i in np.unravel_index(flat, shape))


def jacobian(kernel: KernelFunction, *args: Any, wrt: str | int, dim: Any = None, chunk: int = 8,
             backend: str | None = None) -> dict[str, Any]:
    """{output name: J} for every float array `kernel` writes, J[out_index + in_index] =
    ∂ out_after[out_index] / ∂ wrt_before[in_index] (shape out.shape + wrt.shape; out.shape
    for a scalar `wrt`). `wrt` names the input (parameter name or position)."""
    if not isinstance(kernel, KernelFunction):
        raise LaunchError(f"jacobian takes a @gk.kernel; got {type(kernel).__name__}")
    params = kernel.ir.params
    values = [a.val if isinstance(a, Const) else a for a in args]
    if any(isinstance(a, Annotation) for a in values):
        raise AnnotationError("jacobian takes plain arguments (or gk.Const); it annotates them itself")
    names = [p.name for p in params]
    k = wrt if type(wrt) is int else names.index(wrt) if isinstance(wrt, str) and wrt in names else None
    if k is None or not 0 <= k < len(params):
        raise AnnotationError(f"wrt={wrt!r} is not a parameter of kernel '{kernel.name}' ({', '.join(names)})")
    if len(values) != len(params):
        raise LaunchError(f"kernel '{kernel.name}' takes {len(params)} arguments, got {len(values)}")
    x = values[k]
    scalar = not is_array(x)
    if scalar and not isinstance(x, (float, np.floating)):
        raise AnnotationError(f"wrt='{names[k]}' must be a float array or a float scalar; got {type(x).__name__}")
    if not scalar and x.dtype.kind != "f":
        raise AnnotationError(f"wrt='{names[k]}' must be a float array; got dtype {x.dtype}")
    if not isinstance(chunk, (int, np.integer)) or isinstance(chunk, (bool, np.bool_)) or chunk < 1:
        raise AnnotationError(f"chunk must be a positive int, got {chunk!r}")
    bind(kernel.ir, default_dim(kernel.ir, tuple(values)) if dim is None else dim, tuple(values), backend)  # as launch
    outs = [n for n, (p, v) in enumerate(zip(params, values))
            if p.written and is_array(v) and v.dtype.kind == "f"]
    if not outs:
        raise LaunchError(f"kernel '{kernel.name}' writes no float array: it has no outputs to differentiate")
    xp = array_module("cuda" if any(is_cupy_array(v) for v in values) else "cpu")
    size = 1 if scalar else x.size
    shape = () if scalar else x.shape
    jac = {names[n]: xp.zeros(values[n].shape + shape, values[n].dtype) for n in outs}
    lanes = min(int(chunk), size)
    for start in range(0, size, lanes):
        directions = range(start, min(start + lanes, size))
        call = []
        tangents: dict[int, tuple] = {}
        for n, v in enumerate(values):
            if n == k and scalar:
                tangents[n] = tuple(1.0 if j < len(directions) else 0.0 for j in range(lanes))
                call.append(BatchDuplicated(v, tangents[n]))
            elif n == k or n in outs:
                t = []
                for j in range(lanes):
                    e = xp.zeros_like(v)  # v's memory layout (C, Fortran, any axis order)
                    if n == k and j < len(directions):
                        e[_unravel(directions[j], shape)] = 1  # the C-order flat index of J's last axes
                    t.append(e)
                tangents[n] = tuple(t)
                call.append(BatchDuplicated(_copy(v), tangents[n]))
            else:
                call.append(Const(_copy(v)))
        forward(kernel, tuple(call), dim, backend)
        for n in outs:
            flat = jac[names[n]].reshape(values[n].shape + (size,))
            for j, d in enumerate(directions):
                flat[..., d] = tangents[n][j]
    return jac
