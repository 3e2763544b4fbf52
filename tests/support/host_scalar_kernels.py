"""The small kernels the host-scalar tests launch around a scalar host code computes (tests/program/
test_derived_scalars.py, test_host_reductions.py, test_host_reads_redteam.py; the CG kernels also
tests/support/ported_loops11.py): one definition each."""

import numpy as np

import gradkern as gk


@gk.kernel
def square(u, w):
    i = gk.tid()
    w[i] = u[i] * u[i]


@gk.kernel
def scale_into(u, w, c):
    i = gk.tid()
    w[i] = c * u[i]


@gk.kernel
def energy(u, E):
    i = gk.tid()
    gk.atomic_add(E, 0, u[i] * u[i])


@gk.kernel
def matvec(d, p, ap, off):
    """ap = A p, A = diag(d) + off on the first off-diagonals (symmetric, positive definite for d > 2 off)."""
    i = gk.tid()
    s = d[i] * p[i]
    if i > 0:
        s = s + off * p[i - 1]
    if i < p.shape[0] - 1:
        s = s + off * p[i + 1]
    ap[i] = s


@gk.kernel
def axpy(x, y, a):
    i = gk.tid()
    x[i] = x[i] + a * y[i]


@gk.kernel
def xpay(p, r, beta):
    i = gk.tid()
    p[i] = r[i] + beta * p[i]


def through(read, n=6):
    """A program in which `read(u, v)`, a scalar host code takes from `v = u * u` (written by a launch), scales a
    later launch."""
    def prog(u, E):
        v = np.zeros_like(u)
        gk.launch(square, n, u, v)
        w = np.zeros_like(u)
        gk.launch(scale_into, n, u, w, read(u, v))
        gk.launch(energy, n, w, E)
    return prog
