"""Dense linear-algebra kernels."""

import gradkern as gk


@gk.kernel
def saxpy(a, x, y):
    """y <- a*x + y, in place."""
    i = gk.tid()
    y[i] = a * x[i] + y[i]


@gk.kernel
def matvec(A, x, y):
    """y = A @ x for a 2-D A: one thread per row."""
    i = gk.tid()
    acc = 0.0
    for j in range(A.shape[1]):
        acc += A[i, j] * x[j]
    y[i] = acc
