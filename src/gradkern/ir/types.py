"""Kernel-language types and the promotion rules of type inference.

Scalars are float32/float64/int32/int64/bool; arrays have a scalar dtype and
1 to MAX_NDIM (5) dimensions (any strides: strides are a run-time property, not a type).
Promotion follows C more than Python so that float32 kernels stay float32:
int op float -> that float; float32 op float64 -> float64; int op int -> int64
(as Numba, so flattened indices never overflow int32).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class Scalar:
    name: str  # "float32", "float64", "int32", "int64", "bool"

    # cached: the runtime asks these on every launch
    @cached_property
    def is_float(self) -> bool:
        return self.name.startswith("float")

    @cached_property
    def is_int(self) -> bool:
        return self.name.startswith("int")

    @cached_property
    def is_bool(self) -> bool:
        return self.name == "bool"

    @cached_property
    def itemsize(self) -> int:
        return np.dtype(self.numpy).itemsize

    @cached_property
    def numpy(self) -> type:
        return np.bool_ if self.is_bool else getattr(np, self.name)

    def __str__(self) -> str:
        return {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64", "bool": "bool"}[self.name]


@dataclass(frozen=True)
class Array:
    dtype: Scalar
    ndim: int

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(':' * self.ndim)}]"


Type = Scalar | Array

MAX_NDIM = 5  # an array's dimensions (docs/kernel-language.md, docs/language.md)
MAX_LAUNCH_NDIM = 3  # a launch's axes (gk.tid())

F32 = Scalar("float32")
F64 = Scalar("float64")
I32 = Scalar("int32")
I64 = Scalar("int64")
BOOL = Scalar("bool")

SCALARS = {t.name: t for t in (F32, F64, I32, I64, BOOL)}
ARRAY_DTYPES = {np.dtype(np.float32): F32, np.dtype(np.float64): F64,
                np.dtype(np.int32): I32, np.dtype(np.int64): I64}
_RANK = {"bool": 0, "int32": 1, "int64": 2, "float32": 3, "float64": 4}


def join(a: Scalar, b: Scalar) -> Scalar:
    """The type both a and b convert to: bool < int32 < int64 < float32 < float64."""
    return a if _RANK[a.name] >= _RANK[b.name] else b


def arithmetic(a: Scalar, b: Scalar) -> Scalar:
    """Result type of + - * // % ** on two typed operands (ints widen to int64)."""
    t = join(a, b)
    return I64 if not t.is_float else t


def scalar_of_dtype(dtype: np.dtype) -> Scalar | None:
    return ARRAY_DTYPES.get(np.dtype(dtype))
