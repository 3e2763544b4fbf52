"""Sparse linear algebra in CSR format."""

import gradkern as gk  # noqa: F401

__all__: list[str] = []
