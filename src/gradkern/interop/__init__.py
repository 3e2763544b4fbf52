"""A kernel or program as an operation of PyTorch or JAX, differentiable by their autograd
(docs/interop.md). Importing this package imports neither framework: each is imported when its
function is first called (`pip install "gradkern[torch]"` or `"gradkern[jax]"`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import BackendUnavailableError


def _framework(name: str, extra: str) -> None:
    try:
        __import__(name)
    except ImportError as e:
        raise BackendUnavailableError(f"gk.interop.{name}_function needs {name}, which is not installed",
                                      hint=f'pip install "gradkern[{extra}]"') from e


def torch_function(f: Any, outputs: str | Sequence[str], dim: Any = None):
    """`f` (a @gk.kernel or a program) as a PyTorch operation returning the final values of the
    parameters named by `outputs` (docs/interop.md)."""
    _framework("torch", "torch")
    from .torch_op import torch_function as make
    return make(f, outputs, dim)


def jax_function(f: Any, outputs: str | Sequence[str], dim: Any = None):
    """`f` (a @gk.kernel or a program) as a JAX operation (`jax.custom_vjp`) returning the final values
    of the parameters named by `outputs` (docs/interop.md)."""
    _framework("jax", "jax")
    from .jax_op import jax_function as make
    return make(f, outputs, dim)


__all__ = ["torch_function", "jax_function"]
