"""The annotations of a derivative call (docs/getting-started.md, docs/launches.md, docs/errors.md), checked for every
mode: each annotation against its argument, vector-mode widths, and the
aliasing of shadows with each other and with the primals. Nothing is touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..annotations import Active, Annotation, BatchDuplicated, Const, Duplicated, DuplicatedNoNeed
from ..backends import backend as backend_object
from ..errors import AliasingError, AnnotationError, LaunchError
from ..ir.types import ARRAY_DTYPES
from ..kernel import KernelFunction
from .arrays import (
    byte_bounds,
    describe,
    is_array,
    is_cupy_array,
    misaligned_on_device,
    outside_its_memory,
    overlap_reason,
    overlapping_elements,
    shares_elements,
)
from .binding import (
    Binding,
    bind,
    check_count,
    default_dim,
    dtype_hint,
    exactly_aliased,
)


@dataclass(frozen=True)
class Annotated:
    """Validated annotations: primals, shadows (one per lane) by parameter, Active scalars."""

    primals: tuple
    shadows: dict[str, tuple]  # parameter -> its shadows (tangents), one per lane
    active: tuple[str, ...]
    no_need: tuple[str, ...] = ()  # DuplicatedNoNeed: the new primal values are not wanted
    lanes: int = 1  # k of BatchDuplicated (vector mode)


def _is_real(v: Any) -> bool:
    # np.timedelta64 is an np.integer subclass but a duration with a unit, no number (docs/errors.md#hostile-inputs)
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_, np.timedelta64))


def _is_integer(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_, np.timedelta64))


def _check_differentiable(name: str, annotation: str, x: Any) -> None:
    """Only floats carry derivatives: an integer (or bool) primal would be
    typed as one, and its derivative silently dropped. (Other dtypes are the
    binding's to refuse.)"""
    if is_array(x) and x.dtype.kind in "iub":
        raise AnnotationError(f"argument '{name}' is {annotation} but is {describe(x)}: an integer or bool array "
                              "carries no derivative", hint=f"pass it plain or as gk.Const({name})")
    if _is_integer(x):
        raise AnnotationError(f"argument '{name}' is {annotation} but is the integer {int(x)}: an integer carries no "
                              "derivative", hint=f"pass a float (e.g. {x}.0), or gk.Const for an integer")


def check_shadow(name: str, x: Any, dx: Any, what: str) -> None:
    """A shadow is a buffer the derivative owns: an array like its primal,
    every element its own writable memory. One rule for both modes: a reverse
    shadow is accumulated into, a tangent is written whenever its primal is."""
    if is_array(x) and x.dtype not in ARRAY_DTYPES:  # the primal's fault, not its shadow's: said first
        raise LaunchError(f"argument '{name}' has dtype {x.dtype}; kernels take arrays of float32, float64, int32 or "
                          "int64", hint=dtype_hint(name, x.dtype))
    if (not is_array(dx) or is_cupy_array(dx) != is_cupy_array(x) or dx.shape != x.shape
            or dx.dtype != x.dtype):
        raise AnnotationError(f"{what} of '{name}' must be {describe(x)} like its primal; got {describe(dx)}",
                              hint=f"e.g. gk.Duplicated({name}, zeros_like({name})) on the same device")
    if isinstance(dx, np.ma.MaskedArray):
        raise AnnotationError(f"{what} of '{name}' is a masked array; shadows are updated at every element",
                              hint=f"pass np.zeros_like({name}) (a plain array)")
    if isinstance(dx, np.ndarray) and not dx.flags.writeable:
        raise AnnotationError(f"{what} of '{name}' is read-only; shadows are updated in place")
    if outside_its_memory(dx):
        raise AnnotationError(f"{what} of '{name}' (shape {tuple(dx.shape)}, strides {tuple(dx.strides)}) reaches "
                              "outside the memory it is a view of", hint="check the shape and strides given to "
                              "as_strided")
    if misaligned_on_device(dx):
        raise AnnotationError(f"{what} of '{name}' starts at a device address that is not a multiple of its item "
                              f"size {dx.itemsize}: the GPU cannot load it", hint=f"pass zeros_like({name})")
    if overlapping_elements(dx):
        raise AliasingError(f"{what} of '{name}' has elements that overlap in memory ({overlap_reason(dx)}); "
                            "every element of a shadow needs its own memory, since derivatives are accumulated "
                            "into each", hint=f"pass np.zeros_like({name})")


def annotate(kernel: KernelFunction, args: tuple, forward: bool = False) -> Annotated:
    """Check each annotation against its argument; nothing is touched."""
    params = kernel.ir.params
    if len(args) != len(params):
        check_count(kernel.ir, tuple(a.val if isinstance(a, Annotation) else a for a in args))
    primals, shadows, active, no_need = [], {}, [], []
    widths: dict[str, int] = {}
    for p, a in zip(params, args):
        if isinstance(a, (Duplicated, BatchDuplicated)):
            x = a.val
            if isinstance(a, BatchDuplicated):
                dxs = tuple(a.dvals) if isinstance(a.dvals, (tuple, list)) else None
                if not dxs:
                    raise AnnotationError(f"argument '{p.name}': gk.BatchDuplicated takes a tuple of k >= 1 "
                                          f"shadows; got {describe(a.dvals)}")
            else:
                dxs = (a.dval,)
            widths[p.name] = len(dxs) if isinstance(a, BatchDuplicated) else 0
            what = "tangent" if forward else "shadow"
            if is_array(x):
                _check_differentiable(p.name, type(a).__name__, x)
                for dx in dxs:
                    check_shadow(p.name, x, dx, what)
            elif not forward:
                raise AnnotationError(f"argument '{p.name}' is Duplicated but its primal is {describe(x)}",
                                      hint="in reverse mode a scalar's derivative is returned: use gk.Active(s)")
            elif not _is_real(x) or not all(_is_real(dx) for dx in dxs):
                raise AnnotationError(f"argument '{p.name}' is Duplicated: a scalar's value and tangent must be "
                                      f"real numbers; got {describe(x)} and {', '.join(describe(d) for d in dxs)}")
            elif p.is_array:
                raise AnnotationError(f"argument '{p.name}' is a scalar but the kernel indexes it as an array")
            else:
                _check_differentiable(p.name, type(a).__name__, x)
            shadows[p.name] = dxs
            primals.append(x)
            if isinstance(a, DuplicatedNoNeed):
                no_need.append(p.name)
        elif isinstance(a, Active):
            if forward:
                raise AnnotationError(f"argument '{p.name}' is Active, a reverse-mode annotation; in forward mode a "
                                      "scalar takes a tangent", hint=f"gk.Duplicated({p.name}, 1.0)")
            if is_array(a.val):
                raise AnnotationError(f"argument '{p.name}' is Active but is an array; Active is for scalars",
                                      hint=f"use gk.Duplicated({p.name}, d{p.name}) for arrays")
            if not _is_real(a.val):
                raise AnnotationError(f"argument '{p.name}' is Active but is {describe(a.val)}; expected a real "
                                      "number")
            _check_differentiable(p.name, "Active", a.val)
            if not np.isfinite(a.val):
                raise AnnotationError(f"argument '{p.name}' is Active with the non-finite value {a.val}")
            if p.is_array:
                raise AnnotationError(f"argument '{p.name}' is Active but the kernel indexes it as an array")
            active.append(p.name)
            primals.append(a.val)
        elif isinstance(a, Const):
            primals.append(a.val)
        elif isinstance(a, Annotation):
            raise AnnotationError(f"argument '{p.name}': unknown annotation {type(a).__name__}")
        else:
            primals.append(a)
    batch = {n: w for n, w in widths.items() if w}
    if batch and (len(set(batch.values())) > 1 or len(batch) != len(widths)):
        desc = ", ".join(f"'{n}': {w or 'Duplicated'}" for n, w in widths.items())
        raise AnnotationError(f"a vector-mode call needs every differentiated argument to be BatchDuplicated with the "
                              f"same number of shadows; got {desc}")
    lanes = next(iter(batch.values())) if batch else 1
    return Annotated(tuple(primals), shadows, tuple(active), tuple(no_need), lanes)


def lane_groups(lanes: int, size: int) -> list[tuple[int, int]]:
    """Vector mode's launches: (first lane, end lane) of each group of at most
    `size` lanes (one group of all when `size` is 0)."""
    size = size or lanes
    return [(lo, min(lo + size, lanes)) for lo in range(0, lanes, size)]


# overlapping read-only views of one differentiated array (a stencil's `a[:-2], a[1:-1], a[2:]`): each thread's
# adjoint would add into elements other threads' adds reach through the other view
_OVERLAP_HINT = ("two arguments overlap in memory, as shifted views of one array do (a[:-2], a[1:-1], a[2:]), and "
                 "their shadows would too: pass the array once and index its neighbours in the kernel (a[i - 1], "
                 "a[i], a[i + 1]), or pass gk.Const(view) where no derivative through a view is wanted")


def merge_shadows(params, ann: Annotated, aliases: dict[str, str]) -> dict[str, tuple]:
    """Shadows of exactly aliased primals must alias the same way (docs/launches.md);
    returns the shadows (one per lane) by parameter of the merged kernel. Any
    other overlap of a shadow with a primal or another shadow is refused."""
    for m, rep in aliases.items():
        if (m in ann.shadows) != (rep in ann.shadows):
            raise AliasingError(f"'{m}' and '{rep}' are the same array, so both need a shadow or neither has one")
        if m in ann.shadows and not all(exactly_aliased(a, b) for a, b in zip(ann.shadows[m], ann.shadows[rep])):
            raise AliasingError(f"'{m}' and '{rep}' are the same array but their shadows are different buffers",
                                hint="pass the same shadow for both")
    shadows = {n: dx for n, dx in ann.shadows.items() if n not in aliases}
    buffers = [(p.name, -1, x) for p, x in zip(params, ann.primals) if is_array(x) and p.name not in aliases]
    buffers += [(n, lane, dx) for n, dxs in shadows.items() for lane, dx in enumerate(dxs) if is_array(dx)]
    bounds: dict[int, tuple[int, int]] = {}

    def overlap(i: int, a: Any, j: int, b: Any) -> bool:
        (alo, ahi), (blo, bhi) = (bounds.setdefault(n, byte_bounds(x)) for n, x in ((i, a), (j, b)))
        return alo < bhi and blo < ahi and shares_elements(a, b)

    may_share, share = np.may_share_memory, shares_elements
    for i, (na, la, a) in enumerate(buffers):
        numpy_a = type(a) is np.ndarray
        for j in range(i + 1, len(buffers)):
            nb, lb, b = buffers[j]
            if la < 0 and lb < 0:
                continue  # primal/primal overlap is the binding's business
            # NumPy arrays: may_share_memory first, the same test on NumPy's extents, without reading addresses
            if (may_share(a, b) and share(a, b)) if numpy_a and type(b) is np.ndarray else overlap(i, a, j, b):
                def what(n, lane):
                    if lane < 0:
                        return f"'{n}'"
                    return f"the shadow of '{n}'" if ann.lanes == 1 else f"shadow {lane} of '{n}'"
                raise AliasingError(f"{what(nb, lb)} shares memory with {what(na, la)}; every shadow needs its "
                                    "own buffer", hint=_OVERLAP_HINT if la >= 0 and lb >= 0 else None)
    return shadows


def annotated_binding(f: KernelFunction, args: tuple, dim: Any, backend: str | None, forward: bool = False,
                      inspect_only: bool = False) -> tuple[Annotated, Binding, dict[str, tuple]]:
    """Validate a call of either mode, every check in order: annotations, arguments, aliasing of the
    shadows. Returns them with the binding and the merged shadows; touches no buffer. A call whose
    signature was prepared before is not validated again (runtime/call.py, docs/prepared-call.md).
    `inspect_only` (gk.inspect): as `bind`'s, and a Duplicated scalar is not refused here."""
    ann = annotate(f, args, forward)
    b = bind(f.ir, default_dim(f.ir, ann.primals) if dim is None else dim, ann.primals, backend, inspect_only)
    if backend_object(b.backend).aligned_only:  # as bind refuses an unaligned primal there (backends/base.py)
        for name, dxs in ann.shadows.items():
            if any(isinstance(dx, np.ndarray) and not dx.flags.aligned for dx in dxs):
                raise LaunchError(f"the {'tangent' if forward else 'shadow'} of '{name}' is not aligned: its elements "
                                  "start at addresses that are not multiples of their size; backend "
                                  f"'{b.backend}' runs C++ that loads whole aligned elements",
                                  hint=f"pass np.zeros_like({name}), which is aligned, or launch on the CPU backend")
    if not forward and not inspect_only:
        for name in ann.shadows:
            param = f.ir.param(name)
            if param.used and not param.is_array:
                raise AnnotationError(f"argument '{name}' is Duplicated but the kernel uses it as a scalar",
                                      hint="use gk.Active for scalars")
    return ann, b, merge_shadows(f.ir.params, ann, dict(b.aliases))
