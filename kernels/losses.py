"""Losses that end a simulation: sums of squares, misfits at sensors."""

import gradkern as gk  # noqa: F401

__all__: list[str] = []
