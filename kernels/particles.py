"""Particles: n-body forces, leapfrog push, cloud-in-cell deposit."""

import gradkern as gk  # noqa: F401

__all__: list[str] = []
