"""Lattice Boltzmann: D2Q9 BGK collide-and-stream."""

import gradkern as gk  # noqa: F401

__all__: list[str] = []
