"""Dense linear solves (numpy.linalg.solve or cupy.linalg.solve), single or
batched, with a custom rule (docs/custom-rules.md).

For x = A^{-1} b, differentiating A x = b gives A ẋ + Ȧ x = ḃ, so

    forward:  ẋ = A^{-1} (ḃ - Ȧ x);
    reverse:  ⟨x̄, ẋ⟩ = ⟨λ, ḃ⟩ - ⟨λ x^T, Ȧ⟩_F,  λ = A^{-T} x̄,

so b̄ += λ and Ā -= λ x^T (per batch entry), with the new x. The old x does
not reach x's new value, so x̄ becomes 0 — unless x is b (an in-place solve),
when the buffer's shadow becomes λ = ∂L/∂b_old.
"""

from __future__ import annotations

from typing import Any

import gradkern as gk

from ._arguments import array_module, check_float_arrays, check_output, lanes, same_memory, value

__all__ = ["dense_solve"]


def _solve(xp: Any, A: Any, rhs: Any) -> Any:
    """A^{-1} rhs for A (..., n, n) and rhs (..., n), as a new array. rhs is
    passed as (..., n, 1), which means the same to every version of NumPy and
    CuPy: a batched rhs (..., n) is a stack of vectors to NumPy < 2 but a
    matrix to NumPy >= 2."""
    return xp.linalg.solve(A, rhs[..., None])[..., 0]


def _check(A: Any, b: Any, x: Any) -> None:
    """Validate a call (x may be b exactly, or share no memory with the inputs)."""
    check_float_arrays("dense_solve", A=A, b=b, x=x)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise gk.LaunchError(f"dense_solve: argument 'A' must have shape (n, n) or (..., n, n), got {A.shape}")
    if A.shape[-1] < 1:
        raise gk.LaunchError("dense_solve: the systems are empty (n = 0); n must be at least 1")
    for name, arr in (("b", b), ("x", x)):
        if arr.shape != A.shape[:-1]:
            raise gk.LaunchError(f"dense_solve: argument '{name}' has shape {arr.shape} but 'A' has {A.shape}; "
                                 f"'{name}' must have shape {A.shape[:-1]}")
    check_output("dense_solve", "x", x, dict(A=A, b=b), in_place="b")


@gk.custom_rule(reads=("A", "x"), writes=("x",))
def dense_solve(A: Any, b: Any, x: Any) -> None:
    """Solve A x = b: A of shape (n, n) or (..., n, n) (a batch of systems),
    b and x of shape A.shape[:-1], NumPy or CuPy, one float dtype. Overwrites
    x, which may be b itself. Raises gk.LaunchError before touching any
    buffer on bad input (and the library's LinAlgError for a singular A)."""
    _check(A, b, x)
    x[...] = _solve(array_module(A, "dense_solve", "A"), A, b)


@dense_solve.reverse
def _(config: Any, tape: Any, A: Any, b: Any, x: Any) -> tuple:
    Av, xv = value(A), value(x)
    xp = array_module(Av, "dense_solve", "A")
    in_place = same_memory(value(b), xv)
    At = xp.swapaxes(Av, -1, -2)
    k = config.width
    for xbar, bbar, Abar in zip(lanes(x, k), lanes(b, k), lanes(A, k)):
        if xbar is None:
            continue  # x constant: no derivative flows
        lam = _solve(xp, At, xbar)
        if Abar is not None:
            Abar -= lam[..., :, None] * xv[..., None, :]  # λ x^T per batch entry
        if in_place:
            xbar[...] = lam
            continue
        if bbar is not None:
            bbar += lam
        xbar.fill(0)
    return (None,) * 3


@dense_solve.forward
def _(config: Any, A: Any, b: Any, x: Any) -> None:
    Av, xv = value(A), value(x)
    dense_solve.primal(Av, value(b), xv)  # ẋ needs the new x
    xp = array_module(Av, "dense_solve", "A")
    k = config.width
    for xdot, bdot, Adot in zip(lanes(x, k), lanes(b, k), lanes(A, k)):
        if xdot is None:
            continue
        rhs = bdot.copy() if bdot is not None else xp.zeros_like(xv)  # ḃ - Ȧ x
        if Adot is not None:
            rhs -= (Adot @ xv[..., None])[..., 0]
        xdot[...] = _solve(xp, Av, rhs)
