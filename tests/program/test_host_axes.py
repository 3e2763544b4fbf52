"""Reductions along one axis of active arrays inside a program (program/hostaxes.py, docs/host-code.md, "Reductions
along an axis"): `np.sum(F, 2)`, `F.sum(axis=0)`, `np.mean`, `max`, `min`, `keepdims=True` are launches of a
generated kernel (a thread per result element, the axis looped in order) into a fresh array, differentiated by the
pipeline. Each is checked by `check_grad` (central differences in float64, the dot-product test, forward tangents)
on the interpreter, one on Numba; its values against NumPy's; a lattice-Boltzmann density and velocity as a NumPy
code writes them (`rho = np.sum(F, 2)`); inside a checkpointed loop's step against store-all; what stays refused
is refused before anything changed. Until session 62 each was a derived array, refused by a launch taking it."""

import numpy as np
import pytest
from support.ported_harness import on_interpreter

import gradkern as gk
from gradkern.testing import check_grad

from .test_host_shapes import weigh2, weigh3

SHAPE = (3, 4, 5)  # every reduced axis shorter than 8: NumPy adds it in order too (its pairwise sum starts at 8)


@gk.kernel
def square3(u, w):
    i, j, k = gk.tid()
    w[i, j, k] = u[i, j, k] * u[i, j, k]


def _weights(shape):
    idx = np.indices(shape)
    return 1.0 + 0.1 * idx[0] + 0.01 * idx[1] + (0.001 * idx[2] if len(shape) == 3 else 0.0)


FORMS = {
    "np.sum(w, 2)": lambda w: np.sum(w, 2),
    "np.sum(w, axis=0)": lambda w: np.sum(w, axis=0),
    "w.sum(1)": lambda w: w.sum(1),
    "w.sum(axis=-1)": lambda w: w.sum(axis=-1),
    "np.mean(w, axis=1)": lambda w: np.mean(w, axis=1),
    "w.mean(0)": lambda w: w.mean(0),
    "w.max(axis=2)": lambda w: w.max(axis=2),
    "np.max(w, 0)": lambda w: np.max(w, 0),
    "np.amin(w, axis=1)": lambda w: np.amin(w, axis=1),
    "w.min(-1)": lambda w: w.min(-1),
    "w.sum(2, keepdims=True)": lambda w: w.sum(2, keepdims=True),
    "np.mean(w, axis=1, keepdims=True)": lambda w: np.mean(w, axis=1, keepdims=True),
    "a strided view's w[:, ::-2].sum(0)": lambda w: w[:, ::-2].sum(0),
    "a transposed view's w.T.max(1)": lambda w: w.T.max(1),
    "(2 w).sum(2) / w.sum(2)": lambda w: (w * 2.0).sum(2) / w.sum(2),
    # NumPy's two passes of launches: the mean along the axis, the squared deviations, their sum / (n - ddof)
    "np.std(w, axis=2)": lambda w: np.std(w, axis=2),
    "w.var(0, ddof=1)": lambda w: w.var(0, ddof=1),
    "np.std(w, 1, keepdims=True)": lambda w: np.std(w, 1, keepdims=True),
    # several axes (session 63): a window's sum, a pool's max, their moments
    "np.sum(w, axis=(0, 2))": lambda w: np.sum(w, axis=(0, 2))[:, None],
    "w.max(axis=(2, 0))": lambda w: w.max(axis=(2, 0))[:, None],
    "np.mean(w, (0, 1), keepdims=True)": lambda w: np.mean(w, (0, 1), keepdims=True),
    "w.min(axis=(-1, 1), keepdims=True)": lambda w: w.min(axis=(-1, 1), keepdims=True),
    "np.var(w, axis=(0, 2))": lambda w: np.var(w, axis=(0, 2))[None, :],
    # NPBench's conv2d: a 5-D product of windows and weights summed over three axes
    "a 5-D window product's sum over three axes": lambda w: np.sum(
        w[:, :2, :2, None, None] * w[None, :2, :2, :, None] * np.ones((1, 1, 1, 5, 2)), axis=(1, 2, 3)),
}


def through(form):
    """u -> w = u * u (a launch) -> form(w) -> a weighted energy of it (a launch: test_host_shapes.py's)."""
    def program(u, E):
        w = np.zeros_like(u)
        gk.launch(square3, SHAPE, u, w)
        r = form(w)
        gk.launch(weigh2 if r.ndim == 2 else weigh3, r.shape, r, E)
    return program


def _args(rng):
    return gk.Duplicated(rng.random(SHAPE) + 0.5, np.zeros(SHAPE)), gk.Duplicated(np.zeros(1), np.zeros(1))


@pytest.mark.parametrize("name", list(FORMS))
def test_a_reduction_along_an_axis_is_differentiated_and_numpys_value(monkeypatch, rng, name):
    on_interpreter(monkeypatch)
    form = FORMS[name]
    u = rng.random(SHAPE) + 0.5
    E = np.zeros(1)
    gk.autodiff(through(form), gk.Duplicated(u.copy(), np.zeros(SHAPE)), gk.Duplicated(E, np.ones(1)))
    r = form(u * u)
    # the same operations in the same order (each axis < 8 long), then the energy's: its own rounding order only
    np.testing.assert_allclose(E[0], np.sum(r * r * _weights(r.shape)), rtol=1e-14)
    report = check_grad(through(form), *_args(rng))
    assert report.checked > 0


def test_a_reduction_along_an_axis_on_numba(rng):
    """The generated kernel compiled (the default backend), with keepdims."""
    report = check_grad(through(lambda w: w.max(axis=1, keepdims=True) + np.mean(w, 1, keepdims=True)), *_args(rng))
    assert report.checked > 0


def test_max_along_an_axis_gives_ties_to_the_first_index(monkeypatch):
    """As np.argmax chooses: the kernel's running max keeps its first operand on ties."""
    on_interpreter(monkeypatch)
    u = np.full(SHAPE, 0.75)
    u[:, 2, :] = 1.25  # the max of every column along axis 1, twice in the even columns
    u[:, 3, ::2] = 1.25
    du, E = np.zeros(SHAPE), np.zeros(1)
    gk.autodiff(through(lambda w: w.max(axis=1)), gk.Duplicated(u, du), gk.Duplicated(E, np.ones(1)))
    r = (u * u).max(axis=1)
    want = np.zeros(SHAPE)
    want[:, 2, :] = 2 * r * _weights(r.shape) * 2 * u[:, 2, :]  # dE/dr * dr/dw * dw/du, at the first maximum
    np.testing.assert_allclose(du, want, rtol=1e-14)


# D2Q9 lattice-Boltzmann macroscopic moments as Philip Mocz's latticeboltzmann.py writes them in NumPy
CX = np.array([0, 0, 1, 1, 1, 0, -1, -1, -1], dtype=np.float64)
CY = np.array([0, 1, 1, 0, -1, -1, -1, 0, 1], dtype=np.float64)


@gk.kernel
def relax(F, rho, ux, uy, out, tau):
    i, j, q = gk.tid()
    cu = 3.0 * ((q % 3 - 1) * ux[i, j] + (q // 3 - 1) * uy[i, j])  # a stand-in equilibrium in the moments
    feq = rho[i, j] * (1.0 + cu + 0.5 * cu * cu) / 9.0
    out[i, j, q] = F[i, j, q] - (F[i, j, q] - feq) / tau


@gk.kernel
def misfit(F, E):
    i, j, q = gk.tid()
    gk.atomic_add(E, 0, F[i, j, q] * F[i, j, q] * (1.0 + 0.05 * q))


def lbm(F, E, tau):
    for _ in range(2):
        rho = np.sum(F, 2)
        ux = np.sum(F * CX, 2) / rho
        uy = np.sum(F * CY, 2) / rho
        out = np.zeros_like(F)
        gk.launch(relax, F.shape, F, rho, ux, uy, out, tau)
        F = out
    gk.launch(misfit, F.shape, F, E)


def test_lattice_boltzmann_moments_as_numpy_writes_them(monkeypatch, rng):
    on_interpreter(monkeypatch)
    F = 1.0 + 0.1 * rng.random((4, 3, 9))
    report = check_grad(lbm, gk.Duplicated(F, np.zeros(F.shape)), gk.Duplicated(np.zeros(1), np.zeros(1)),
                        gk.Active(0.8))
    assert report.checked > 0


def run_steps(step, nsteps, checkpointed):
    """`step(t)` for t < nsteps: a checkpointed loop of two snapshots, or a plain loop (store-all)."""
    if checkpointed:
        gk.checkpointed_loop(step, nsteps, snapshots=2)
    else:
        for t in range(nsteps):
            step(t)


def test_a_reduction_along_an_axis_in_a_checkpointed_step_equals_store_all(monkeypatch, rng):
    """The step's reduction is a launch in every run of the step (first forward and recomputations), so the
    checkpointed gradient is the store-all one: the same launches on the same values."""
    on_interpreter(monkeypatch)

    @gk.kernel
    def spread(u, s, v, c):
        i, j = gk.tid()
        v[i, j] = u[i, j] + c * u[i, j] * s[j]

    def program(u, v, E, checkpointed):
        def step(t):
            s = u.mean(axis=0)  # a column mean, (5,)
            gk.launch(spread, u.shape, u, s, v, 0.3)
            gk.copy(u, v)
        run_steps(step, 4, checkpointed)
        gk.launch(weigh2, u.shape, u, E)

    u0 = rng.random((3, 5)) + 0.5
    grads = []
    for checkpointed in (False, True):
        du = np.zeros(u0.shape)
        gk.autodiff(program, gk.Duplicated(u0.copy(), du), gk.Duplicated(np.zeros(u0.shape), np.zeros(u0.shape)),
                    gk.Duplicated(np.zeros(1), np.ones(1)), checkpointed)
        grads.append(du)
    np.testing.assert_array_equal(grads[1], grads[0])  # the same kernels on the same values in the same order
    check_grad(program, gk.Duplicated(u0.copy(), np.zeros(u0.shape)),
               gk.Duplicated(np.zeros(u0.shape), np.zeros(u0.shape)), gk.Duplicated(np.zeros(1), np.zeros(1)), True)


REFUSED = {
    "a result of four axes": lambda w: (w[:, :, :, None, None] * np.ones((1, 1, 1, 2, 2))).sum(axis=0)[..., 0],
    "dtype=": lambda w: np.sum(w, 2, dtype=np.float64),
    "np.var along every axis": lambda w: np.full((2, 2), np.var(w, axis=(0, 1, 2))),
    "np.std with ddof the axis' length": lambda w: np.std(w, axis=0, ddof=3),
}


@pytest.mark.filterwarnings("ignore:Degrees of freedom:RuntimeWarning", "ignore:divide by zero:RuntimeWarning")
@pytest.mark.parametrize("name", list(REFUSED))
def test_what_does_not_fit_stays_refused(monkeypatch, rng, name):
    on_interpreter(monkeypatch)
    u, du, E, dE = rng.random(SHAPE) + 0.5, rng.random(SHAPE), np.zeros(1), np.ones(1)
    before = [a.copy() for a in (u, du, E, dE)]
    with pytest.raises(gk.ProgramError, match="test_host_axes.py"):
        gk.autodiff(through(REFUSED[name]), gk.Duplicated(u, du), gk.Duplicated(E, dE))
    for a, b in zip((u, du, E, dE), before):
        np.testing.assert_array_equal(a, b)
