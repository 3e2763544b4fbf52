"""The differentiable host operations a program needs (docs/programs.md):
`gk.copy(dst, src)` and `gk.fill(dst, value)`, launches of small kernels, so
that inside a program they are recorded like any launch (with their
derivatives: a copy passes the adjoint of dst to src, a fill consumes it and,
for an Active value, sums it), and outside one they are plain launches."""

from __future__ import annotations

from typing import Any

from .. import intrinsics as gk
from ..errors import LaunchError
from ..ir.types import MAX_LAUNCH_NDIM, MAX_NDIM
from ..kernel import kernel
from ..runtime.arrays import is_array
from ..runtime.launch import launch


@kernel
def _copy1(dst, src):
    i = gk.tid()
    dst[i] = src[i]


@kernel
def _copy2(dst, src):
    i, j = gk.tid()
    dst[i, j] = src[i, j]


@kernel
def _copy3(dst, src):
    i, j, k = gk.tid()
    dst[i, j, k] = src[i, j, k]


@kernel
def _copy4(dst, src):  # 4-D and 5-D: a launch has at most three axes, the trailing ones are loops (docs/language.md)
    i, j, k = gk.tid()
    for m in range(dst.shape[3]):
        dst[i, j, k, m] = src[i, j, k, m]


@kernel
def _copy5(dst, src):
    i, j, k = gk.tid()
    for m in range(dst.shape[3]):
        for n in range(dst.shape[4]):
            dst[i, j, k, m, n] = src[i, j, k, m, n]


@kernel
def _fill1(dst, value):
    i = gk.tid()
    dst[i] = value


@kernel
def _fill2(dst, value):
    i, j = gk.tid()
    dst[i, j] = value


@kernel
def _fill3(dst, value):
    i, j, k = gk.tid()
    dst[i, j, k] = value


@kernel
def _fill4(dst, value):
    i, j, k = gk.tid()
    for m in range(dst.shape[3]):
        dst[i, j, k, m] = value


@kernel
def _fill5(dst, value):
    i, j, k = gk.tid()
    for m in range(dst.shape[3]):
        for n in range(dst.shape[4]):
            dst[i, j, k, m, n] = value


_COPY = (_copy1, _copy2, _copy3, _copy4, _copy5)  # pure moves (analysis/moves.py): a sweep may rename their
# reverse (program/renames.py)


_FILL = (_fill1, _fill2, _fill3, _fill4, _fill5)


def _check(name: str, dst: Any) -> None:
    if not is_array(dst) or not 1 <= dst.ndim <= MAX_NDIM:
        raise LaunchError(f"gk.{name}: dst must be a 1-D to {MAX_NDIM}-D array; got {type(dst).__name__}"
                          + (f" with {dst.ndim} dimensions" if is_array(dst) else ""))


def copy(dst: Any, src: Any) -> None:
    """dst[...] = src, as a launch (differentiated inside a program)."""
    _check("copy", dst)
    if not is_array(src) or tuple(src.shape) != tuple(dst.shape):
        raise LaunchError(f"gk.copy: src must be an array of dst's shape {tuple(dst.shape)}; got "
                          f"{tuple(src.shape) if is_array(src) else type(src).__name__}")
    launch(_COPY[dst.ndim - 1], tuple(dst.shape[:MAX_LAUNCH_NDIM]), dst, src)


def fill(dst: Any, value: Any) -> None:
    """dst[...] = value, as a launch (differentiated inside a program; value may be an Active scalar)."""
    _check("fill", dst)
    launch(_FILL[dst.ndim - 1], tuple(dst.shape[:MAX_LAUNCH_NDIM]), dst, value)
