"""Helpers for the temporal blocking tests (transforms/temporal.py, runtime/blocked.py): k launches of a step
over ping-pong buffers, run one by one (the oracle) and through the blocked form."""

from __future__ import annotations

import numpy as np

import gradkern as gk
from gradkern.runtime import blocked
from gradkern.runtime.call import prepare


def ping_pong(step, u, v, k: int, rest: tuple, backend: str) -> None:
    """k launches of `step` over u.shape threads (1-D or 2-D): u -> v, v -> u, ..."""
    for s in range(k):
        a, b = (u, v) if s % 2 == 0 else (v, u)
        gk.launch(step, _dim(u), a, b, *rest, backend=backend)


def blocked_ping_pong(step, u, v, k: int, rest: tuple, backend: str) -> blocked.BlockedStep | str:
    """The same k launches prepared, then run through the step's blocked form (or the reason it has none)."""
    bounds = []
    for s in range(k):
        a, b = (u, v) if s % 2 == 0 else (v, u)
        bounds.append(prepare(step, (a, b, *rest), _dim(u), backend, "launch")[1])
    form = blocked.blocked_step(step, bounds[0], 0, 1)
    if not isinstance(form, str):
        form.run(bounds)
    return form


def _dim(u):
    return u.shape[0] if u.ndim == 1 else u.shape


def check_bit_identical(step, u0, rest: tuple, k: int, backend: str, v0=None) -> int:
    """Run k launches both ways from u0 (and v0, the partner's contents) and assert both buffers agree to the
    bit; the blocked form's reach."""
    v0 = np.full_like(u0, 7.0) if v0 is None else v0
    u, v = u0.copy(), v0.copy()
    ping_pong(step, u, v, k, rest, backend)
    bu, bv = u0.copy(), v0.copy()
    form = blocked_ping_pong(step, bu, bv, k, rest, backend)
    assert not isinstance(form, str), form
    assert np.array_equal(u, bu) and np.array_equal(v, bv), (step.name, k, u0.size)
    return form.reach
