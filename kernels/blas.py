"""Dense linear algebra (BLAS levels 1 and 2)."""

import gradkern as gk

__all__ = ["saxpy", "matvec", "axpy", "scal", "dot", "gemv", "gemv_t", "ger"]


@gk.kernel
def axpy(a, x, y):
    """y ← a·x + y, in place (BLAS axpy).

    `a`: scalar, read; `x`: (n,), read; `y`: (n,), updated in place.
    Launch: n threads, one per element."""
    i = gk.tid()
    y[i] = a * x[i] + y[i]


@gk.kernel
def matvec(A, x, y):
    """y = A x for a dense A.

    `A`: (m, n), read; `x`: (n,), read; `y`: (m,), written.
    Launch: m threads, one per row."""
    i = gk.tid()
    acc = 0.0
    for j in range(A.shape[1]):
        acc += A[i, j] * x[j]
    y[i] = acc


@gk.kernel
def scal(a, x):
    """x ← a·x, in place (BLAS scal).

    `a`: scalar, read; `x`: (n,), updated in place.
    Launch: n threads, one per element."""
    i = gk.tid()
    x[i] = a * x[i]


@gk.kernel
def dot(x, y, out):
    """out[0] ← out[0] + Σᵢ xᵢ yᵢ (BLAS dot, accumulated: zero out[0] first for the plain dot product).

    `x`: (n,), read; `y`: (n,), read; `out`: (1,) or longer, element 0 updated in place by
    gk.atomic_add (every thread adds its term to it).
    Launch: n threads, one per term."""
    i = gk.tid()
    gk.atomic_add(out, 0, x[i] * y[i])


@gk.kernel
def gemv(alpha, A, x, beta, y):
    """y ← α A x + β y for a dense A (BLAS gemv, no transpose).

    `alpha`, `beta`: scalars, read; `A`: (m, n), read; `x`: (n,), read; `y`: (m,), updated in place.
    Launch: m threads, one per row of A (each sums its row: no atomics)."""
    i = gk.tid()
    acc = 0.0
    for j in range(A.shape[1]):
        acc += A[i, j] * x[j]
    y[i] = alpha * acc + beta * y[i]


@gk.kernel
def gemv_t(alpha, A, x, beta, y):
    """y ← α Aᵀ x + β y for a dense A (BLAS gemv, transposed).

    `alpha`, `beta`: scalars, read; `A`: (m, n), read; `x`: (m,), read; `y`: (n,), updated in place.
    Launch: n threads, one per column of A (each gathers its column: no atomics)."""
    j = gk.tid()
    acc = 0.0
    for i in range(A.shape[0]):
        acc += A[i, j] * x[i]
    y[j] = alpha * acc + beta * y[j]


@gk.kernel
def ger(alpha, x, y, A):
    """A ← A + α x yᵀ (BLAS ger, rank-1 update).

    `alpha`: scalar, read; `x`: (m,), read; `y`: (n,), read; `A`: (m, n), updated in place.
    Launch: (m, n) threads, one per element of A."""
    i, j = gk.tid()
    A[i, j] = A[i, j] + alpha * x[i] * y[j]


saxpy = axpy  # the library's first name for axpy, kept for compatibility
