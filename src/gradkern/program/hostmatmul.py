"""Matrix products of a program's active arrays as launches (docs/host-code.md, "Matrix products"): `A @ B`,
`np.matmul(A, x)`, `np.dot(x, B)`, `A.dot(B)` of 2-D and 1-D float arrays (one of them 2-D; two vectors are a read,
hostreads.py), and `np.outer(u, v)`, inside a program: the GEMM, GEMV and rank-1 updates of PolyBench's NumPy host
code (NPBench's gemm, 2mm, atax, bicg, mvt, gemver), a dense layer of an MLP. Each product is one launch of a kernel
generated in the kernel language: a thread per element of the result, looping over the contracted axis in order (the
recursive sum, as an axis reduction's: hostaxes.py), into a fresh array. The pipeline differentiates it (the reverse
of a read many threads share: private partial shadows summed after the loop on the CPU, atomics on a GPU); no
derivative is written here. `np.outer` is NumPy's own broadcast product of the two flattened vectors (hostufuncs.py).
Until session 63 each was a derived array, refused by a launch taking it.

As for the other host launches, outside a checkpointed loop's step a product is a launch when an operand is active
and none is derived, and inside a step every one that fits is a launch (a derived operand taken as `gk.Const`, the
result derived), so a recomputed step makes the launches its first forward made. What does not fit stays as it was
(a derived array): stacks of matrices (3 or more axes), `out=`, a scalar operand, integer or complex arrays,
shapes NumPy refuses (its ValueError), an empty result."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..annotations import Const
from ..kernel import KernelFunction
from ..recording import active_recorder
from ..runtime.arrays import shares_elements
from ..runtime.binding import exactly_aliased
from ..runtime.launch import launch
from . import hostaxes  # noqa: F401  (its ufunc method first: the products below go on to it)
from .hostcode import _FLOATS, SHAPES, TrackedArray, _read, plain, tracker
from .hostops import copy as copy_launch
from .hostreads import _source

_KERNELS: dict[tuple[int, int], KernelFunction] = {}
# (a.ndim, b.ndim) -> the result's thread indices, a's and b's index expressions (k the contracted index)
_FORMS = {(2, 2): ("i, j", "i, k", "k, j"), (2, 1): ("i", "i, k", "k"), (1, 2): ("j", "k", "k, j")}


def _product_kernel(na: int, nb: int) -> KernelFunction:
    """`out[...] = sum over k of a[..., k] * b[k, ...]`, a thread per element of out, k in order."""
    key = (na, nb)
    k = _KERNELS.get(key)
    if k is None:
        ids, at_a, at_b = _FORMS[key]
        fname = f"host_matmul_{na}_{nb}"
        k = _KERNELS[key] = _source(fname, [
            f"def {fname}(out, a, b):",
            f"    {ids} = gk.tid()",
            "    acc = 0.0",
            f"    for k in range(a.shape[{na - 1}]):",
            f"        acc = acc + a[{at_a}] * b[{at_b}]",
            f"    out[{ids}] = acc"])
    return k


def product(a: Any, b: Any) -> Any:
    """`a @ b` of a 2-D and a 2-D or 1-D float array (either order) as a launch into a fresh array, or
    NotImplemented when it does not fit or needs none (hostcode.py's derived array then)."""
    host, rec = tracker(), active_recorder()
    if host is None or rec is None or not all(isinstance(x, np.ndarray) and x.dtype in _FLOATS for x in (a, b)) \
            or (a.ndim, b.ndim) not in _FORMS or a.shape[-1] != b.shape[0]:
        return NotImplemented  # (mismatched shapes: NumPy's ValueError)
    views = [host.plain_view(x) if isinstance(x, TrackedArray) else plain(x) for x in (a, b)]
    shape = views[0].shape[:-1] + views[1].shape[1:]
    if 0 in shape:
        return NotImplemented
    origins = [host.origin(x) for x in (a, b)]
    derived, loop = next((o for o in origins if o is not None), None), rec.in_loop
    if derived is not None and not loop:
        return NotImplemented  # its values came from host code the tape does not see
    if not (loop or any(host.active(v) for v in views)):
        return NotImplemented  # no derivative is involved: NumPy computes it
    if not exactly_aliased(*views) and shares_elements(*views):
        if derived is not None:
            return NotImplemented
        # A @ A.T: overlapping views' shadows would overlap in the generated kernel (refused as a kernel's shifted
        # views are); the second is copied by a launch first, so the adjoint flows through it
        second = np.empty(views[1].shape, views[1].dtype)
        copy_launch(second, views[1])
        views[1] = second
    _read()
    dst = np.empty(shape, np.result_type(*views))
    given = [Const(v) if o is not None else v for v, o in zip(views, origins)]
    launch(_product_kernel(views[0].ndim, views[1].ndim), shape, dst, *given)
    result = dst.view(TrackedArray)
    result._gk_origin = derived
    return result


_ufunc = TrackedArray.__array_ufunc__


def _array_ufunc(self: Any, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """`A @ B`, `np.matmul(A, B)`: NumPy's matmul is a ufunc."""
    if method == "__call__" and ufunc.__name__ == "matmul" and len(inputs) == 2 and not kwargs:
        got = product(*inputs)
        if got is not NotImplemented:
            return got
    return _ufunc(self, ufunc, method, *inputs, **kwargs)


def _dot(whole: Any) -> Any:
    """SHAPES' handler of `np.dot` (and `u.dot(v)`, which comes through it): two vectors are a read
    (hostreads.py), a matrix and a matrix or vector a product."""
    def handler(func: Any, args: tuple, kwargs: dict) -> Any:
        got = whole(func, args, kwargs)
        if got is not NotImplemented or len(args) != 2 or kwargs.get("out") is not None \
                or set(kwargs) - {"out"}:
            return got
        return product(*args)
    return handler


def _outer(func: Any, args: tuple, kwargs: dict) -> Any:
    """`np.outer(u, v)` of an active vector: NumPy's own product of the flattened operands, broadcast
    (`u.ravel()[:, None] * v.ravel()[None, :]`), a launch of hostufuncs.py."""
    if len(args) != 2 or kwargs.get("out") is not None or set(kwargs) - {"out"} \
            or not all(isinstance(x, np.ndarray) and x.dtype in _FLOATS for x in args):
        return NotImplemented
    u, v = args
    return np.multiply(u.ravel()[:, None], v.ravel()[None, :])


TrackedArray.__array_ufunc__ = _array_ufunc
SHAPES["dot"] = _dot(SHAPES["dot"])
SHAPES["outer"] = _outer
