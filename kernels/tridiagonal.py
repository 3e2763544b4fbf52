"""Batched tridiagonal solves: the Thomas algorithm as gradkern kernels, and a
custom rule (docs/custom-rules.md) whose reverse is the transposed solve.

For A tridiagonal (sub-diagonal a, diagonal b, super-diagonal c) and
x = A^{-1} d, differentiating A x = d gives A ẋ + Ȧ x = ḋ, so

    forward:  ẋ = A^{-1} (ḋ - Ȧ x),  (Ȧ x)_i = ȧ_i x_{i-1} + ḃ_i x_i + ċ_i x_{i+1};
    reverse:  ⟨x̄, ẋ⟩ = ⟨λ, ḋ⟩ - Σ_i λ_i (ȧ_i x_{i-1} + ḃ_i x_i + ċ_i x_{i+1}),  λ = A^{-T} x̄,

so d̄ += λ, ā_i -= λ_i x_{i-1}, b̄_i -= λ_i x_i, c̄_i -= λ_i x_{i+1}, with the
new x. The old x does not reach x's new value, so x̄ becomes 0 — unless x is
d (an in-place solve), when the buffer's shadow becomes λ = ∂L/∂d_old. A^T is
tridiagonal too, with sub-diagonal c_{i-1} and super-diagonal a_{i+1}: the
same elimination with the off-diagonals swapped, done in place in x̄.
"""

from __future__ import annotations

from typing import Any

import gradkern as gk

from ._arguments import array_module, check_float_arrays, check_output, lanes, same_memory, value

__all__ = ["tridiagonal_solve", "implicit_heat_rows", "implicit_heat_rows_batched"]


@gk.kernel
def thomas(lower, diag, upper, rhs, x, scratch):
    """Solve T x = rhs for every column j of the (n, m) arrays, one thread per
    column (consecutive threads read consecutive memory). T has diagonal
    `diag`, T[i, i-1] = lower[i-1] and T[i-1, i] = upper[i-1] (lower and upper
    have n-1 rows). x may be rhs (solved in place); the first n-1 rows of
    `scratch` are overwritten. No pivoting: for diagonally dominant systems."""
    # elimination: row i becomes x_i + g_i x_{i+1} = y_i (g_i = upper_i / w_i, y_i in x), with the pivot
    # w_i = diag_i - lower_{i-1} g_{i-1} and y_i = (rhs_i - lower_{i-1} y_{i-1}) / w_i
    j = gk.tid()
    n = diag.shape[0]
    w = diag[0, j]
    x[0, j] = rhs[0, j] / w
    for i in range(1, n):
        g = upper[i - 1, j] / w
        scratch[i - 1, j] = g
        w = diag[i, j] - lower[i - 1, j] * g
        x[i, j] = (rhs[i, j] - lower[i - 1, j] * x[i - 1, j]) / w
    # back substitution: x_i = y_i - g_i x_{i+1}
    for i in range(n - 2, -1, -1):
        x[i, j] -= scratch[i, j] * x[i + 1, j]


@gk.kernel
def multiply_subtract(u, v, out):
    """out -= u * v, elementwise over 2-D arrays."""
    i, j = gk.tid()
    out[i, j] -= u[i, j] * v[i, j]


# The three bands of A x, as (rows of the band and of the product, rows of x):
# (A x)_i = a_i x_{i-1} + b_i x_i + c_i x_{i+1}.
_BANDS = ((slice(1, None), slice(None, -1)), (slice(None), slice(None)), (slice(None, -1), slice(1, None)))


def _columns(x: Any) -> Any:
    """An (n, m) view: a single system (n,) is one column."""
    return x[:, None] if x.ndim == 1 else x


def _solve(lower: Any, diag: Any, upper: Any, rhs: Any, x: Any) -> None:
    """x = T^{-1} rhs on (n, m) views (see `thomas`); x may be rhs. Allocates one (n, m) scratch array."""
    if diag.shape[1]:
        scratch = array_module(diag, "tridiagonal_solve", "b").empty_like(diag)
        gk.launch(thomas, diag.shape[1], lower, diag, upper, rhs, x, scratch)


def _subtract(u: Any, v: Any, out: Any) -> None:
    if out.size:
        gk.launch(multiply_subtract, out.shape, u, v, out)


def _check(a: Any, b: Any, c: Any, d: Any, x: Any) -> None:
    """Validate a call (x may be d exactly, or share no memory with the inputs)."""
    arrays = dict(a=a, b=b, c=c, d=d, x=x)
    check_float_arrays("tridiagonal_solve", **arrays)
    if b.ndim not in (1, 2):
        raise gk.LaunchError(f"tridiagonal_solve: argument 'b' must have shape (n,) or (n, m), got {b.shape}")
    for name, arr in arrays.items():
        if arr.shape != b.shape:
            raise gk.LaunchError(f"tridiagonal_solve: argument '{name}' has shape {arr.shape} but 'b' has "
                                 f"{b.shape}; a, b, c, d and x must have one shape, (n,) or (n, m)")
    if b.shape[0] < 1:
        raise gk.LaunchError("tridiagonal_solve: the systems are empty (n = 0); n must be at least 1")
    check_output("tridiagonal_solve", "x", x, dict(a=a, b=b, c=c, d=d), in_place="d")


@gk.custom_rule(reads=("a", "b", "c", "x"), writes=("x",))
def tridiagonal_solve(a: Any, b: Any, c: Any, d: Any, x: Any) -> None:
    """Solve A x = d for tridiagonal A, one system per column: a (sub-diagonal,
    a[0] unused), b (diagonal), c (super-diagonal, c[n-1] unused), d and x of
    shape (n,) or (n, m), NumPy or CuPy, one float dtype. Overwrites x, which
    may be d itself (an in-place solve). No pivoting: A should be diagonally
    dominant. Raises gk.LaunchError before touching any buffer on bad input."""
    _check(a, b, c, d, x)
    a, b, c, d, x = (_columns(t) for t in (a, b, c, d, x))
    _solve(a[1:], b, c[:-1], d, x)


# the default augmented primal (run the primal, tape None) is this rule's: its
# reverse reads a, b, c and the new x, which the runtime keeps (`reads`)


@tridiagonal_solve.reverse
def _(config: Any, tape: Any, a: Any, b: Any, c: Any, d: Any, x: Any) -> tuple:
    in_place = same_memory(value(d), value(x))
    av, bv, cv, xv = (_columns(value(t)) for t in (a, b, c, x))
    k = config.width
    for xbar, dbar, *bands in zip(*(lanes(t, k) for t in (x, d, a, b, c))):
        if xbar is None:
            continue  # x constant: no derivative flows
        lam = _columns(xbar)
        _solve(cv[:-1], bv, av[1:], lam, lam)  # A^T λ = x̄, in place
        if dbar is not None and not in_place:
            dbar += xbar
        for band, (rows, xrows) in zip(bands, _BANDS):
            if band is not None:
                _subtract(lam[rows], xv[xrows], _columns(band)[rows])
        if not in_place:
            xbar.fill(0)
    return (None,) * 5


@tridiagonal_solve.forward
def _(config: Any, a: Any, b: Any, c: Any, d: Any, x: Any) -> None:
    # the tangent needs the new x, so the primal runs even when not needed
    tridiagonal_solve.primal(value(a), value(b), value(c), value(d), value(x))
    in_place = same_memory(value(d), value(x))
    av, bv, cv, xv = (_columns(value(t)) for t in (a, b, c, x))
    k = config.width
    for xdot, ddot, *bands in zip(*(lanes(t, k) for t in (x, d, a, b, c))):
        if xdot is None:
            continue
        r = _columns(xdot)  # ḋ - Ȧ x, then solved in place
        if not in_place:
            if ddot is None:
                r.fill(0)
            else:
                r[...] = _columns(ddot)
        for band, (rows, xrows) in zip(bands, _BANDS):
            if band is not None:
                _subtract(_columns(band)[rows], xv[xrows], r[rows])
        _solve(av[1:], bv, cv[:-1], r, r)


# -- the matrices of implicit (backward-Euler) heat steps, the systems tridiagonal_solve takes ----------------------


@gk.kernel
def implicit_heat_rows(a, b, c, r):
    """The rows of A = I - r L, the matrix of one backward-Euler step of the
    1-D heat equation u_t = kappa u_xx with fixed (Dirichlet) ends: L is the
    3-point second difference on the interior rows and r = kappa dt / h^2, so

        A[i, i-1] = a[i] = -r,  A[i, i] = b[i] = 1 + 2 r,  A[i, i+1] = c[i] = -r   (0 < i < n-1),
        a[i] = 0, b[i] = 1, c[i] = 0                                                  (i = 0, n-1):

    the end rows are identity rows, so `tridiagonal_solve(a, b, c, u, u)`
    (u_new = A^{-1} u_old) keeps the boundary values. A is strictly
    diagonally dominant for every r >= 0 (the step is unconditionally stable).

    `a` (written, shape (n,)): the sub-diagonal, in tridiagonal_solve's layout (a[0] unused, 0).
    `b` (written, shape (n,)): the diagonal.
    `c` (written, shape (n,)): the super-diagonal (c[n-1] unused, 0).
    `r` (read, scalar): kappa dt / h^2; the derivatives of a, b and c with respect to it are
    (0 or -1, 0 or 2, 0 or -1), so an Active r (or kappa, through host arithmetic) gets its
    derivative back through tridiagonal_solve's rule.

    Launch: n threads, one per row (n = b.shape[0]).
    """
    i = gk.tid()
    if i == 0 or i == b.shape[0] - 1:
        a[i] = 0.0
        b[i] = 1.0
        c[i] = 0.0
    else:
        a[i] = -r
        b[i] = 1.0 + 2.0 * r
        c[i] = -r


@gk.kernel
def implicit_heat_rows_batched(a, b, c, r):
    """implicit_heat_rows for m systems at once, one per column of (n, m)
    arrays (tridiagonal_solve's batched layout): every column holds the rows
    of A = I - r L (identity rows at i = 0 and i = n-1, (-r, 1 + 2r, -r)
    between them), the matrix of a backward-Euler heat step of m independent
    1-D problems with fixed ends, r = kappa dt / h^2.

    `a` (written, shape (n, m)): the sub-diagonals (row 0 unused, 0).
    `b` (written, shape (n, m)): the diagonals.
    `c` (written, shape (n, m)): the super-diagonals (row n-1 unused, 0).
    `r` (read, scalar): kappa dt / h^2, one for every system.

    Launch: (n, m) threads, one per row i of each system j (b.shape).
    """
    i, j = gk.tid()
    if i == 0 or i == b.shape[0] - 1:
        a[i, j] = 0.0
        b[i, j] = 1.0
        c[i, j] = 0.0
    else:
        a[i, j] = -r
        b[i, j] = 1.0 + 2.0 * r
        c[i, j] = -r
