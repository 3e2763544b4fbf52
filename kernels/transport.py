"""Conservative finite-volume transport: upwind advection, Burgers, shallow water."""

import gradkern as gk  # noqa: F401

__all__: list[str] = []
