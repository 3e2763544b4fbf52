"""Host reductions and element reads of active arrays as differentiated scalars (program/hostreads.py,
docs/host-code.md, "Reductions and element reads"): `v[3]`, `out[0]`, `v.sum()`, `np.dot(p, ap)`,
`np.linalg.norm(v)`, `v.max()` inside a program are launches of generated one-thread kernels followed by a read
whose adjoint the sweep adds back at the read's position. Each is checked by `check_grad` (central differences in
float64, the dot-product test, forward tangents) on the interpreter backend, one on Numba; what stays refused is
refused before anything changed."""

import numpy as np
import pytest
from support.host_scalar_kernels import axpy, energy, matvec, scale_into, square, through, xpay
from support.ported_harness import on_interpreter

import gradkern as gk
from gradkern.testing import check_grad

N = 6


def _args(rng, n=N):
    return (gk.Duplicated(rng.random(n) + 0.5, np.zeros(n)), gk.Duplicated(np.zeros(1), np.ones(1)))




READS = {
    "v[3]": lambda u, v: v[3],
    "v[-1]": lambda u, v: v[-1],
    "v.sum()": lambda u, v: v.sum(),
    "np.sum(v)": lambda u, v: np.sum(v),
    "v.mean()": lambda u, v: v.mean(),
    "np.mean(v)": lambda u, v: np.mean(v),
    "np.dot(v, u)": lambda u, v: np.dot(v, u),
    "v.dot(v)": lambda u, v: v.dot(v),
    "v @ u": lambda u, v: v @ u,
    "np.vdot(u, v)": lambda u, v: np.vdot(u, v),
    "np.linalg.norm(v)": lambda u, v: np.linalg.norm(v),
    "v.max()": lambda u, v: v.max(),
    "np.max(v)": lambda u, v: np.max(v),
    "v.min()": lambda u, v: v.min(),
    "np.min(v)": lambda u, v: np.min(v),
    "np.abs(v - 1).max()": lambda u, v: np.abs(v - 1.0).max(),
    "c * u.sum()": lambda u, v: 2.5 * u.sum(),
    "two levels of arithmetic": lambda u, v: (v[0] + 1.0) * v.sum() / (1.0 + v.max() ** 2),
    "sum of reads": lambda u, v: sum(v[k] * v[k + 1] for k in range(N - 1)),
    "v[1, 2] of a 2-D view": lambda u, v: v.reshape(2, 3)[1, 2],
    "np.sum of a 2-D view": lambda u, v: np.sum(v.reshape(3, 2)),
}


@pytest.mark.parametrize("name", list(READS))
def test_a_read_or_reduction_is_differentiated(monkeypatch, rng, name):
    on_interpreter(monkeypatch)
    check_grad(through(READS[name]), *_args(rng))


def _cg(iterations=3, checkpoints=None):
    """Conjugate gradients on A x = b with the host's scalars, as a real driver writes them."""
    def prog(d, b, E):
        x = np.zeros_like(b)
        r = b.copy()
        p = r.copy()
        ap = np.zeros_like(b)
        rr = np.dot(r, r)
        for _ in range(iterations):
            gk.launch(matvec, N, d, p, ap, 1.0)
            alpha = rr / np.dot(p, ap)
            gk.launch(axpy, N, x, p, alpha)
            gk.launch(axpy, N, r, ap, -alpha)
            rr_new = np.dot(r, r)
            beta = rr_new / rr
            gk.launch(xpay, N, p, r, beta)
            rr = rr_new
        gk.launch(energy, N, x, E)
    return prog


def test_a_conjugate_gradient_loop_with_host_scalars_is_differentiated(monkeypatch, rng):
    """alpha = rr / np.dot(p, Ap), beta = rr_new / rr on the host: the gradient w.r.t. the matrix diagonal and the
    right-hand side (central differences, the dot-product test and forward tangents agree)."""
    on_interpreter(monkeypatch)
    d, b = rng.random(N) + 3.0, rng.standard_normal(N)
    check_grad(_cg(), gk.Duplicated(d, np.zeros(N)), gk.Duplicated(b, np.zeros(N)),
               gk.Duplicated(np.zeros(1), np.ones(1)))


def test_a_read_gets_the_adjoint_of_the_value_it_read_not_of_a_later_one(monkeypatch, rng):
    """v is overwritten after the read: the derivative of the read goes to u through v's values at read time
    (2 u[2]), not through what v holds later (3 u); and the read's scalar reaches the output only through a launch
    after the overwrite, so a read-back before that launch's reverse (or after the read launch's) loses it."""
    on_interpreter(monkeypatch)

    def prog(u, E):
        v = np.zeros_like(u)
        gk.launch(square, N, u, v)
        s = v[2]
        gk.launch(scale_into, N, u, v, 3.0)  # overwrites v
        w = np.zeros_like(u)
        gk.launch(scale_into, N, u, w, s * s)
        gk.launch(energy, N, w, E)
        gk.launch(energy, N, v, E)
    u = rng.random(N) + 0.5
    du = np.zeros(N)
    gk.autodiff(prog, gk.Duplicated(u.copy(), du), gk.Duplicated(np.zeros(1), np.ones(1)))
    # E = s^4 sum u^2 + 9 sum u^2, s = u2^2: dE/du = 2 u (s^4 + 9) + e_2 4 s^3 (2 u2) sum u^2
    s = u[2] ** 2
    want = 2 * u * (s ** 4 + 9)
    want[2] += 4 * s ** 3 * 2 * u[2] * np.sum(u * u)
    np.testing.assert_allclose(du, want, rtol=1e-13)  # a handful of float64 operations
    check_grad(prog, *_args(rng))


def test_tealeafs_out0_read_of_a_scratch_sum_is_differentiated(monkeypatch, rng):
    """TeaLeaf's spelling: `out = np.zeros(1)` summed into by a launch, `out[0]` read and scaled on the host
    (before session 57 refused; before session 56 a silent constant)."""
    on_interpreter(monkeypatch)

    def prog(u, E):
        out = np.zeros(1)
        gk.launch(energy, N, u, out)
        alphas = [out[0], out[0] / 3.0]
        w = np.zeros_like(u)
        gk.launch(scale_into, N, u, w, max(alphas) * min(alphas))
        gk.launch(energy, N, w, E)
    check_grad(prog, *_args(rng))


def test_an_active_argument_and_a_read_mix(monkeypatch, rng):
    on_interpreter(monkeypatch)

    def prog(u, c, E):
        v = np.zeros_like(u)
        gk.launch(square, N, u, v)
        w = np.zeros_like(u)
        gk.launch(scale_into, N, u, w, c * v.sum() + v[1] / c)
        gk.launch(energy, N, w, E)
    u = rng.random(N) + 0.5
    check_grad(prog, gk.Duplicated(u, np.zeros(N)), gk.Active(1.3), gk.Duplicated(np.zeros(1), np.ones(1)))


def test_fills_take_a_read(monkeypatch, rng):
    """`w[:] = s`, `w.fill(s)`, `w[2] = s` into a fresh array: fill launches taking the read's scalar."""
    on_interpreter(monkeypatch)

    def prog(u, E):
        v = np.zeros_like(u)
        gk.launch(square, N, u, v)
        w, y, z = np.zeros_like(u), np.zeros_like(u), np.zeros_like(u)
        w[:] = v.sum()
        y[2] = v[0]
        z.fill(v.max())
        for a in (w, y, z):
            gk.launch(energy, N, a, E)
    check_grad(prog, *_args(rng))


def test_vector_mode_carries_each_lane(monkeypatch, rng):
    """BatchDuplicated: the reads' adjoints and tangents per lane, each the single-lane run's."""
    on_interpreter(monkeypatch)
    prog = through(READS["two levels of arithmetic"])
    u = rng.random(N) + 0.5
    seeds = [np.ones(1), np.array([0.5])]
    lanes = [np.zeros(N), np.zeros(N)]
    gk.autodiff(prog, gk.BatchDuplicated(u.copy(), tuple(lanes)), gk.BatchDuplicated(np.zeros(1), tuple(seeds)))
    for lane, seed in zip(lanes, seeds):
        one = np.zeros(N)
        gk.autodiff(prog, gk.Duplicated(u.copy(), one), gk.Duplicated(np.zeros(1), seed.copy()))
        np.testing.assert_allclose(lane, one, rtol=1e-14)  # the same operations per lane


def test_a_read_of_a_const_sharing_memory_with_an_active_array_has_no_derivative(monkeypatch, rng):
    """A Const column interleaved with an active one is tracked (its bytes lie near it), so its sum is a launch and
    a read, but an inactive one (no shadow): in reverse its adjoint is dropped, in forward its tangent is 0, in
    every mode and lane count; the active column's derivative is the constant sum. Failed with a TypeError
    (the read looked up a shadow or tangent that does not exist) before."""
    on_interpreter(monkeypatch)

    def prog(x, y):
        gk.launch(scale_into, N, x.copy(), x, y.sum())

    P = rng.random((N, 2)) + 0.5
    s = P[:, 1].sum()
    for mode in (gk.Reverse, gk.Forward):
        dP = rng.random((N, 2)) + 0.5
        before = dP.copy()
        gk.autodiff(prog, gk.Duplicated(P[:, 0], dP[:, 0]), gk.Const(P[:, 1]), mode=mode)
        np.testing.assert_array_equal(dP[:, 1], before[:, 1])
        want = s * before[:, 0] if mode is gk.Forward else before[:, 0] * s
        np.testing.assert_allclose(dP[:, 0], want, rtol=1e-15)  # one product each way: exact up to one rounding
    lanes = (rng.random(N) + 0.5, rng.random(N) + 0.5)
    seeds = tuple(x.copy() for x in lanes)
    gk.autodiff(prog, gk.BatchDuplicated(P[:, 0].copy(), lanes), gk.Const(P[:, 1]))
    for lane, seed in zip(lanes, seeds):
        np.testing.assert_allclose(lane, seed * s, rtol=1e-15)


def test_a_sum_is_numpys_within_the_recursive_summation_bound(monkeypatch, rng):
    """The generated reduction sums in element order (one thread): |s - numpy's| <= 2 (n - 1) eps sum |x| (each
    within (n - 1) eps sum |x| of the exact sum; NumPy's pairwise sum is tighter)."""
    on_interpreter(monkeypatch)
    n = 1000
    seen = []

    def prog(u, E):
        v = np.zeros_like(u)
        gk.launch(scale_into, n, u, v, 1.0)
        seen.append((float(v.sum()), float(np.dot(v, v)), float(v.mean())))
        gk.launch(energy, n, v, E)
    u = rng.standard_normal(n) * 1e3
    gk.autodiff(prog, gk.Duplicated(u.copy(), np.zeros(n)), gk.Duplicated(np.zeros(1), np.ones(1)))
    eps = np.finfo(np.float64).eps
    total, dot, mean = seen[0]
    assert abs(total - np.sum(u)) <= 2 * (n - 1) * eps * np.sum(np.abs(u))
    assert abs(dot - np.dot(u, u)) <= 2 * n * eps * np.dot(u, u)  # n - 1 additions and a product each
    assert abs(mean - np.mean(u)) <= 2 * n * eps * np.mean(np.abs(u))


def test_max_ties_go_to_the_first_index(monkeypatch):
    """The derivative of v.max() goes to the first index of the maximum (the kernel's max gives ties to its first
    operand, the running maximum), as np.argmax chooses."""
    on_interpreter(monkeypatch)

    def prog(u, E):
        w = np.zeros_like(u)
        gk.launch(scale_into, N, u, w, u.max())
        gk.launch(energy, N, w, E)
    u = np.array([1.0, 3.0, 2.0, 3.0, 0.5, 3.0])
    du = np.zeros(N)
    gk.autodiff(prog, gk.Duplicated(u.copy(), du), gk.Duplicated(np.zeros(1), np.ones(1)))
    want = 2 * 9.0 * u  # E = m^2 sum u^2, m = 3: d/du = 2 m^2 u + e_argmax 2 m sum u^2
    want[1] += 2 * 3.0 * np.sum(u * u)
    np.testing.assert_allclose(du, want, rtol=1e-14)


def test_elementary_functions_of_active_scalars_are_launches(monkeypatch, rng):
    """`np.sqrt(s)` of a read, `np.exp(c)`, `math.log(c)`, `np.arctan2(s, c)` of an Active argument: one-thread
    launches of the kernel-language functions and reads (before session 57 refused: docs/host-code.md)."""
    import math
    on_interpreter(monkeypatch)

    def prog(u, c, E):
        v = np.zeros_like(u)
        gk.launch(square, N, u, v)
        s = v.sum()
        w = np.zeros_like(u)
        gk.launch(scale_into, N, u, w, np.sqrt(s) * np.exp(c) + math.log(c) - np.arctan2(s, c) + math.sqrt(v[1]))
        gk.launch(energy, N, w, E)
    u = rng.random(N) + 0.5
    check_grad(prog, gk.Duplicated(u, np.zeros(N)), gk.Active(0.7), gk.Duplicated(np.zeros(1), np.ones(1)))


def test_reads_inside_a_checkpointed_loops_step_stay_refused(monkeypatch, rng):
    """The CG loop's body as a checkpointed loop's step: a recomputed step re-runs its host code but the scalar tape
    of a segment is not replayed, so a read there stays a derived scalar and the launch taking it is refused naming
    the line, before anything changed (docs/host-code.md, "Reductions and element reads")."""
    on_interpreter(monkeypatch)

    def prog(d, b, E):
        x, r, ap = np.zeros_like(b), b.copy(), np.zeros_like(b)
        p = r.copy()

        def step(t):
            gk.launch(matvec, N, d, p, ap, 1.0)
            alpha = np.dot(r, r) / np.dot(p, ap)
            gk.launch(axpy, N, x, p, alpha)
            gk.launch(axpy, N, r, ap, -alpha)
        gk.checkpointed_loop(step, 3, snapshots=2)
        gk.launch(energy, N, x, E)
    d, b = rng.random(N) + 3.0, rng.standard_normal(N)
    dd, db, E, dE = np.zeros(N), np.zeros(N), np.zeros(1), np.ones(1)
    before = [a.copy() for a in (d, b, dd, db, E, dE)]
    with pytest.raises(gk.ProgramError, match=r"np\.dot.*test_host_reductions\.py:\d+"):
        gk.autodiff(prog, gk.Duplicated(d, dd), gk.Duplicated(b, db), gk.Duplicated(E, dE))
    for a, x in zip(before, (d, b, dd, db, E, dE)):
        np.testing.assert_array_equal(a, x)


STILL_REFUSED = {
    # (session 58: `v.sum(axis=0)` of a vector names every axis, the whole sum, differentiated: test_ported_loops11)
    "v.sum(axis=0, dtype=np.float32)": (lambda u, v: v.sum(axis=0, dtype=np.float32), "np.add.reduce"),
    "np.median(v)": (lambda u, v: np.median(v), "test_host_reductions.py"),
    "v.std()": (lambda u, v: v.std(), "np.std"),
    "a reduction of a derived array": (lambda u, v: np.sort(v).sum(), "np.add.reduce"),
}


@pytest.mark.parametrize("name", list(STILL_REFUSED))
def test_what_stays_refused_changes_nothing(monkeypatch, rng, name):
    on_interpreter(monkeypatch)
    read, says = STILL_REFUSED[name]
    u, E = rng.random(N) + 0.5, np.zeros(1)
    du, dE = rng.random(N), np.ones(1)
    before = [a.copy() for a in (u, du, E, dE)]
    with pytest.raises(gk.ProgramError, match="test_host_reductions.py") as info:
        gk.autodiff(through(read), gk.Duplicated(u, du), gk.Duplicated(E, dE))
    assert says in str(info.value)
    for a, b in zip(before, (u, du, E, dE)):
        np.testing.assert_array_equal(a, b)


def test_float_of_a_read_is_the_constant_and_a_conversion_inside_numpy_is_refused(monkeypatch, rng):
    """DESIGN.md §6: `float(s)` on the user's line is the constant (the gradient of the program with s frozen);
    `np.linspace(0, s, n)` would convert it inside NumPy: refused naming the line (session 58: `np.full_like(u, s)`,
    this test's spelling before, is a fill launch, test_host_numpy_oracle.py's row)."""
    on_interpreter(monkeypatch)

    def frozen(u, E):
        v = np.zeros_like(u)
        gk.launch(square, N, u, v)
        w = np.zeros_like(u)
        gk.launch(scale_into, N, u, w, float(v.sum()))
        gk.launch(energy, N, w, E)
    u = rng.random(N) + 0.5
    du = np.zeros(N)
    gk.autodiff(frozen, gk.Duplicated(u.copy(), du), gk.Duplicated(np.zeros(1), np.ones(1)))
    np.testing.assert_allclose(du, 2 * np.sum(u * u) ** 2 * u, rtol=1e-13)  # d/du of c^2 sum u^2, c fixed

    def converted(u, E):
        v = np.zeros_like(u)
        gk.launch(square, N, u, v)
        gk.launch(energy, N, np.linspace(0.0, v.sum(), N), E)
    E, dE = np.zeros(1), np.ones(1)
    before = [a.copy() for a in (u, du, E, dE)]
    with pytest.raises(gk.ProgramError, match="test_host_reductions.py"):
        gk.autodiff(converted, gk.Duplicated(u, du), gk.Duplicated(E, dE))
    for a, b in zip(before, (u, du, E, dE)):
        np.testing.assert_array_equal(a, b)


def test_on_numba(rng):
    """One case on the default backend (Numba), the reverse only (its compile time: three kernels): two element
    reads whose product a fill writes, E = u0^2 u4^2."""
    def prog(u, E):
        v = np.zeros_like(u)
        gk.launch(square, N, u, v)
        gk.fill(E, v[4] * v[0])
    u = rng.random(N) + 0.5
    du = np.zeros(N)
    gk.autodiff(prog, gk.Duplicated(u.copy(), du), gk.Duplicated(np.zeros(1), np.ones(1)))
    want = np.zeros(N)
    want[0], want[4] = 2 * u[0] * u[4] ** 2, 2 * u[4] * u[0] ** 2
    np.testing.assert_allclose(du, want, rtol=1e-14)  # two products
