"""The small kernels the host-scalar tests launch around a scalar host code computes (tests/program/
test_derived_scalars.py, test_host_reductions.py, test_host_reads_redteam.py): one definition each."""

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
