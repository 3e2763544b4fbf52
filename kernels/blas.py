"""Dense linear algebra (BLAS levels 1 and 2)."""

import gradkern as gk

__all__ = ["saxpy", "matvec"]


@gk.kernel
def saxpy(a, x, y):
    """y ← a·x + y, in place.

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
