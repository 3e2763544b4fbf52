"""The hand-written references the kernels/ benchmarks (and the library's stencil rows) time gradkern
against, in one place (benchmarks/README.md): Numba `@njit(parallel=True)` with `prange` over the outer
index. `primal_cpu.py` times the primals (`saxpy_hand`, `stencils_hand(dtype)`), `reverse_cpu.py` the
primal + adjoint pairs (`*_primal`, `*_adjoint`; `hand_module_source` reads the Allen-Cahn pair's source
from here), `library/library_stencils.py` the Allen-Cahn and heat pairs. The references kept beside their
script are those only it uses: the library rows' per family, realcode.py's, overhead.py's, programs.py's
and rules.py's, and gpu.py's CUDA."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numba
import numpy as np
from numba import prange

# ---------------------------------------------------------------- primals (primal_cpu.py)


@numba.njit(parallel=True)
def saxpy_hand(a, x, y):
    for i in prange(x.shape[0]):
        y[i] = a * x[i] + y[i]


@functools.cache
def stencils_hand(dtype: np.dtype) -> tuple[Callable, Callable]:
    """The hand-written stencils for `dtype`: their constants have that dtype
    (as gradkern's weak literals do), so float32 stays float32 arithmetic."""
    two, four, zero = dtype.type(2.0), dtype.type(4.0), dtype.type(0.0)

    @numba.njit(parallel=True)
    def allen_cahn_hand(u, un, c, dt):
        n = u.shape[0]
        un[0] = u[0]
        un[n - 1] = u[n - 1]
        for i in prange(1, n - 1):
            ui = u[i]
            un[i] = ui + c * (u[i - 1] - two * ui + u[i + 1]) + dt * (ui - ui ** 3)

    @numba.njit(parallel=True)
    def laplace_hand(u, out):
        n0, n1 = u.shape
        for i in prange(n0):
            if i == 0 or i == n0 - 1:
                for j in range(n1):
                    out[i, j] = zero
            else:
                out[i, 0] = zero
                out[i, n1 - 1] = zero
                for j in range(1, n1 - 1):
                    out[i, j] = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - four * u[i, j]

    return allen_cahn_hand, laplace_hand


# ---------------------------------------------------------------- primal + adjoint pairs (reverse_cpu.py)


@numba.njit(parallel=True)
def saxpy_primal(a, x, y):
    for i in prange(x.shape[0]):
        y[i] = a * x[i] + y[i]


@numba.njit(parallel=True)
def saxpy_adjoint(a, x, dx, dy):
    da = 0.0
    for i in prange(x.shape[0]):
        g = dy[i]
        dx[i] += a * g
        da += x[i] * g
    return da


@numba.njit(parallel=True)
def allen_cahn_primal(u, un, c, dt):
    n = u.shape[0]
    un[0] = u[0]
    un[n - 1] = u[n - 1]
    for i in prange(1, n - 1):
        ui = u[i]
        un[i] = ui + c * (u[i - 1] - 2.0 * ui + u[i + 1]) + dt * (ui - ui ** 3)


@numba.njit(parallel=True)
def allen_cahn_adjoint(u, du, dun, c, dt):
    """du += J^T dun (gather), then dun = 0; needs n >= 5. un[0], un[n-1] are copies of u's ends, so
    du[0] gets dun[0] and c*dun[1], du[1] gets nothing from dun[0], and alike at the other end."""
    n = u.shape[0]
    k0 = 1.0 - 2.0 * c
    du[0] += dun[0] + c * dun[1]
    du[n - 1] += dun[n - 1] + c * dun[n - 2]
    u1 = u[1]
    du[1] += (k0 + dt * (1.0 - 3.0 * u1 * u1)) * dun[1] + c * dun[2]
    u2 = u[n - 2]
    du[n - 2] += (k0 + dt * (1.0 - 3.0 * u2 * u2)) * dun[n - 2] + c * dun[n - 3]
    for i in prange(2, n - 2):
        ui = u[i]
        du[i] += (k0 + dt * (1.0 - 3.0 * ui * ui)) * dun[i] + c * (dun[i - 1] + dun[i + 1])
    for i in prange(n):
        dun[i] = 0.0


@numba.njit(parallel=True)
def heat_primal(u, un, c):
    n0, n1 = u.shape
    for i in prange(n0):
        if i == 0 or i == n0 - 1:
            for j in range(n1):
                un[i, j] = u[i, j]
        else:
            un[i, 0] = u[i, 0]
            un[i, n1 - 1] = u[i, n1 - 1]
            for j in range(1, n1 - 1):
                un[i, j] = u[i, j] + c * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j])


@numba.njit(inline="always")
def _interior(i, j, n0, n1):
    return 1 <= i <= n0 - 2 and 1 <= j <= n1 - 2


@numba.njit(inline="always")
def _heat_gather_point(du, dun, c, i, j, n0, n1):
    """The full gather at one point of the frame: only interior points have stencil terms."""
    s = (1.0 - 4.0 * c) * dun[i, j] if _interior(i, j, n0, n1) else dun[i, j]
    if _interior(i - 1, j, n0, n1):
        s += c * dun[i - 1, j]
    if _interior(i + 1, j, n0, n1):
        s += c * dun[i + 1, j]
    if _interior(i, j - 1, n0, n1):
        s += c * dun[i, j - 1]
    if _interior(i, j + 1, n0, n1):
        s += c * dun[i, j + 1]
    du[i, j] += s


@numba.njit(parallel=True)
def heat_adjoint(du, dun, c):
    n0, n1 = du.shape
    k0 = 1.0 - 4.0 * c
    for i in prange(n0):
        if i < 2 or i > n0 - 3:
            for j in range(n1):
                _heat_gather_point(du, dun, c, i, j, n0, n1)
        else:
            _heat_gather_point(du, dun, c, i, 0, n0, n1)
            _heat_gather_point(du, dun, c, i, 1, n0, n1)
            for j in range(2, n1 - 2):
                du[i, j] += k0 * dun[i, j] + c * (dun[i - 1, j] + dun[i + 1, j] + dun[i, j - 1] + dun[i, j + 1])
            _heat_gather_point(du, dun, c, i, n1 - 2, n0, n1)
            _heat_gather_point(du, dun, c, i, n1 - 1, n0, n1)
    for i in prange(n0):
        for j in range(n1):
            dun[i, j] = 0.0


@numba.njit(parallel=True)
def matvec_primal(A, x, y):
    n, m = A.shape
    for i in prange(n):
        acc = 0.0
        for j in range(m):
            acc += A[i, j] * x[j]
        y[i] = acc


@numba.njit(parallel=True)
def matvec_adjoint(A, x, dA, dx, dy, blocks):
    n, m = A.shape
    part = np.zeros((blocks, m))
    for b in prange(blocks):
        for i in range(b * n // blocks, (b + 1) * n // blocks):
            g = dy[i]
            dy[i] = 0.0
            for j in range(m):
                dA[i, j] += g * x[j]
                part[b, j] += g * A[i, j]
    for j in prange(m):
        s = dx[j]
        for b in range(blocks):
            s += part[b, j]
        dx[j] = s
