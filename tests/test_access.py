"""Access analysis (analysis/access.py): when the launch loop may run in parallel."""

import numpy as np

import gradkern as gk
from gradkern.kernels import allen_cahn_step, heat_step_2d, matvec, saxpy


@gk.kernel
def inplace_stencil(u):
    i = gk.tid()
    if 0 < i < u.shape[0] - 1:
        u[i] = u[i - 1] + u[i + 1]


@gk.kernel
def shifted_write(u, v):
    i = gk.tid()
    v[i + 1] = u[i]


@gk.kernel
def row_write(A, x):
    i = gk.tid()
    for j in range(A.shape[1]):
        A[i, j] = A[i, j] * x[j]


@gk.kernel
def partial_slab_2d(a):
    i, j = gk.tid()
    a[i] = 1.0


@gk.kernel
def swapped_axes(a, b):
    i, j = gk.tid()
    b[j, i] = a[i, j]


@gk.kernel
def scatter(h, idx):
    i = gk.tid()
    gk.atomic_add(h, idx[i], 1.0)


def facts(kernel, *args, dim=None):
    r = gk.inspect(kernel, *args, dim=dim)
    return r.parallel, r.serial_reason


def test_thread_own_writes_run_in_parallel():
    x = np.ones(8)
    assert facts(saxpy, 2.0, x, x.copy())[0]
    assert facts(allen_cahn_step, x, x.copy(), 0.1, 0.1)[0]
    assert facts(heat_step_2d, np.ones((4, 4)), np.ones((4, 4)), 0.1)[0]
    assert facts(matvec, np.ones((4, 3)), np.ones(3), np.ones(4), dim=4)[0]
    assert facts(row_write, np.ones((4, 3)), np.ones(3), dim=4)[0]  # thread i owns row i
    assert facts(swapped_axes, np.ones((3, 4)), np.ones((4, 3)))[0]


def test_conflicting_or_unproven_writes_run_serially():
    x = np.ones(8)
    par, why = facts(inplace_stencil, x)
    assert not par and "'u'" in why
    assert not facts(shifted_write, x, np.ones(9), dim=8)[0]
    assert not facts(partial_slab_2d, np.ones(4), dim=(4, 3))[0]  # threads (i, 0), (i, 1) write a[i]
    assert facts(scatter, np.ones(3), np.zeros(8, np.int64), dim=8) == (False, "gk.atomic_add")


def test_unproven_kernels_get_a_run_time_race_check_and_proven_ones_do_not():
    from gradkern.pipeline import specialize
    from gradkern.runtime.binding import bind

    def spec(kernel, *args, dim):
        b = bind(kernel.ir, dim, args)
        return specialize(kernel.ir, b.type_map(kernel.ir), len(b.dim), "cpu")

    x = np.ones(8)
    assert spec(saxpy, 2.0, x, x.copy(), dim=8).race_check is None
    rc = spec(inplace_stencil, x, dim=8).race_check
    assert rc is not None and rc.tracked == ("u",) and not rc.copies
    assert {s.kind for s in rc.sites} == {"read", "write"}
