"""NumPy's shape and joining operations on active arrays inside programs (program/hostshapes.py,
docs/host-code.md, "Joins, pads, rolls and reshaped copies"): each one that is a set of copies becomes gk.copy /
gk.fill launches, differentiated (central differences in float64, the dot-product test, forward mode: check_grad);
what is not stays refused at the launch that takes it, before anything runs."""

import numpy as np
import pytest
from support.ported_harness import on_interpreter

import gradkern as gk
from gradkern.testing import check_grad


@pytest.fixture(autouse=True)
def _interpreter(monkeypatch):
    on_interpreter(monkeypatch)  # no compile (docs/testing.md, "Test time")


@gk.kernel
def weigh1(w, E):
    i = gk.tid()
    gk.atomic_add(E, 0, w[i] * w[i] * (1.0 + 0.1 * i))


@gk.kernel
def weigh2(w, E):
    i, j = gk.tid()
    gk.atomic_add(E, 0, w[i, j] * w[i, j] * (1.0 + 0.1 * i + 0.01 * j))


@gk.kernel
def weigh3(w, E):
    i, j, k = gk.tid()
    gk.atomic_add(E, 0, w[i, j, k] * w[i, j, k] * (1.0 + 0.1 * i + 0.01 * j + 0.001 * k))


WEIGH = {1: weigh1, 2: weigh2, 3: weigh3}


def through(op):
    """A program whose output depends on every element of op(u, v) at its position (a weight per position)."""
    def prog(u, v, E):
        w = op(u, v)
        gk.launch(WEIGH[w.ndim], w.shape, w, E)
    return prog


# (name, op of u and v, both 3 x 4): every element of the result is an element of u or v or a constant
OPS = [
    ("concatenate", lambda u, v: np.concatenate([u, v])),
    ("concatenate_axis1_mixed", lambda u, v: np.concatenate([u, v[:, :2], np.ones((3, 1))], axis=1)),
    ("concatenate_list_constant", lambda u, v: np.concatenate([u[0], [1.5, 2.5], v[:, 1]])),
    ("concatenate_axis_none", lambda u, v: np.concatenate([u.T, v], axis=None)),
    ("stack_axis1", lambda u, v: np.stack([u[0], v[1], u[2]], axis=1)),
    ("hstack", lambda u, v: np.hstack([u, v.T[:2].T])),
    ("vstack", lambda u, v: np.vstack([u, v, u[0]])),
    ("dstack", lambda u, v: np.dstack([u, v])),
    ("column_stack", lambda u, v: np.column_stack([u[0], v[1], u[2]])),
    ("block", lambda u, v: np.block([[u, v], [v, u]])),
    ("append", lambda u, v: np.append(u, v[::-1], axis=0)),
    ("pad_constant", lambda u, v: np.pad(u, ((1, 2), (0, 1)), constant_values=0.5)),
    ("pad_edge", lambda u, v: np.pad(u, ((1, 2), (2, 1)), mode="edge")),
    ("pad_edge_3d", lambda u, v: np.pad(v.reshape(3, 2, 2), 2, mode="edge")),
    ("pad_wrap", lambda u, v: np.pad(u, 5, mode="wrap")),  # wider than an axis: several periods
    ("pad_reflect", lambda u, v: np.pad(u, 2, mode="reflect")),
    ("pad_symmetric", lambda u, v: np.pad(u.T, ((1, 2), (3, 1)), mode="symmetric")),
    ("roll", lambda u, v: np.roll(u, 1, axis=0)),
    ("roll_two_axes", lambda u, v: np.roll(u, (1, -2), axis=(0, 1))),
    ("roll_flattened", lambda u, v: np.roll(u.T, 5)),
    ("flip_copy", lambda u, v: np.flip(u).copy()),
    ("reversed_copy", lambda u, v: u[::-1, 1:].copy()),
    ("transposed_copy", lambda u, v: u.T.copy()),
    ("ascontiguousarray", lambda u, v: np.ascontiguousarray(u.T)),
    ("asfortranarray", lambda u, v: np.asfortranarray(v)),
    ("reshape_copy", lambda u, v: u.T.reshape(2, 6)),
    ("np_reshape_copy_fortran", lambda u, v: np.reshape(u.T, (6, 2), order="F")),
    ("ravel_copy", lambda u, v: v.T.ravel()),
    ("flatten", lambda u, v: u[:, ::2].flatten()),
    ("tile", lambda u, v: np.tile(u, (2, 1))),
    ("tile_new_axis", lambda u, v: np.tile(u[0], (3, 2))),
    ("repeat", lambda u, v: np.repeat(u, 2, axis=1)),
    ("repeat_method_flattened", lambda u, v: u.T.repeat(3)),
    ("repeat_counts", lambda u, v: np.repeat(u, [1, 3, 2], axis=0)),
    ("resize", lambda u, v: np.resize(u, (4, 5))),
]


@pytest.mark.parametrize("op", [o for _, o in OPS], ids=[n for n, _ in OPS])
def test_shape_operation_is_differentiated(rng, op):
    u, v = rng.random((3, 4)) + 0.5, rng.random((3, 4)) + 0.5  # away from zero: every derivative nonzero
    check_grad(through(op), gk.Duplicated(u, np.zeros_like(u)), gk.Duplicated(v, np.zeros_like(v)),
               gk.Duplicated(np.zeros(1), np.zeros(1)))


def test_shape_operations_launch_copies_and_give_numpys_values(rng):
    """The result is NumPy's, the class a program's arrays have, and was written by launches (one per piece)."""
    from gradkern.program import hostshapes

    launched, seen = [], []

    def prog(u, E):
        w = np.pad(u, 1, mode="wrap")
        seen.append((type(w).__name__, np.array(w.view(np.ndarray))))
        gk.launch(weigh2, w.shape, w, E)
    original = hostshapes.gk_copy
    try:
        hostshapes.gk_copy = lambda dst, src: (launched.append(dst.shape), original(dst, src))
        u = rng.random((3, 4))
        gk.autodiff(prog, gk.Duplicated(u.copy(), np.zeros_like(u)), gk.Duplicated(np.zeros(1), np.ones(1)))
    finally:
        hostshapes.gk_copy = original
    assert seen[0][0] == "TrackedArray"
    np.testing.assert_array_equal(seen[0][1], np.pad(u, 1, mode="wrap"))
    assert len(launched) == 9  # the centre, four sides, four corners


def test_pad_with_an_active_constant_sums_its_adjoint(rng):
    """The pad value an Active scalar: its regions are gk.fill launches, whose adjoints it sums."""
    def prog(u, c, E):
        w = np.pad(u, ((2, 1), (1, 0)), constant_values=c)
        gk.launch(weigh2, w.shape, w, E)
    u = rng.random((3, 4)) + 0.5
    check_grad(prog, gk.Duplicated(u, np.zeros_like(u)), gk.Active(0.7), gk.Duplicated(np.zeros(1), np.zeros(1)))


def test_join_cast_to_float32_follows_astype(rng):
    """dtype=np.float32 casts in the copy kernels, as u.astype(np.float32) does."""
    def prog(u, v, E):
        w = np.concatenate([u, v], dtype=np.float32)
        gk.launch(weigh1, w.shape, w, E)
    u, v = rng.random(4) + 0.5, rng.random(3) + 0.5
    du, dv = np.zeros(4), np.zeros(3)
    gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Duplicated(np.zeros(1, np.float32),
                                                                               np.ones(1, np.float32)))
    w = np.concatenate([u, v]).astype(np.float32).astype(np.float64)
    want = 2 * w * (1.0 + 0.1 * np.arange(7))
    # float32 values and a float32 adjoint: a few float32 ulps
    np.testing.assert_allclose(np.concatenate([du, dv]), want, rtol=1e-6)


N = 8


@gk.kernel
def heat_halo(up, un, c):
    """One step of 1-D heat on a padded copy (one ghost cell each side)."""
    i = gk.tid()
    un[i] = up[i + 1] + c * (up[i] - 2.0 * up[i + 1] + up[i + 2])


def periodic_step(u, un, c):
    up = np.pad(u, 1, mode="wrap")  # the halo: u, taken by the last step's gk.copy, is read (not written)
    gk.launch(heat_halo, N, up, un, c)
    gk.copy(u, un)


def test_pad_in_a_checkpointed_loop_is_recomputed(rng):
    """A recomputed step makes the same launches: the pad's copies are recomputed, not taped."""
    def looped(u, E, c):
        un = np.zeros_like(u)
        gk.checkpointed_loop(lambda t: periodic_step(u, un, c), 6, snapshots=2)
        gk.launch(weigh1, N, u, E)

    def plain(u, E, c):
        un = np.zeros_like(u)
        for _ in range(6):
            periodic_step(u, un, c)
        gk.launch(weigh1, N, u, E)
    u = rng.random(N) + 0.5
    check_grad(looped, gk.Duplicated(u, np.zeros(N)), gk.Duplicated(np.zeros(1), np.zeros(1)), gk.Active(0.2))
    grads = []
    for prog in (looped, plain):
        du = np.zeros(N)
        g = gk.autodiff(prog, gk.Duplicated(u.copy(), du), gk.Duplicated(np.zeros(1), np.ones(1)), gk.Active(0.2))
        grads.append((du, g[2]))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-13)  # the same operations in the same order
    assert grads[0][1] == pytest.approx(grads[1][1], rel=1e-13)


def test_forward_mode(rng):
    u, v = rng.random((3, 4)) + 0.5, rng.random((3, 4)) + 0.5
    check_grad(through(lambda u, v: np.vstack([np.roll(u, 2, axis=1), np.pad(v, ((0, 0), (1, 1)))[:, 1:-1]])),
               gk.Duplicated(u, np.zeros_like(u)), gk.Duplicated(v, np.zeros_like(v)),
               gk.Duplicated(np.zeros(1), np.zeros(1)), mode=gk.Forward)


# -- what stays refused: not a set of copies -----------------------------------------------------------------------

REFUSED = [
    ("np.pad", lambda u, v: np.pad(u, 1, mode="linear_ramp")),  # computes values
    ("np.pad", lambda u, v: np.pad(u, 1, mode="reflect", reflect_type="odd")),  # 2 * edge - u
    ("np.pad", lambda u, v: np.pad(u, 1, mode="mean")),
    ("np.sort", lambda u, v: np.sort(u, axis=0)),  # where an element goes depends on the values
    ("indexing with an index array", lambda u, v: u[:, [2, 0, 1]]),  # along axis 1: not a gather (hostgather.py)
    # an input computed on the host (u * 2.0 and, since session 57, u % 2.0 are launches; np.logaddexp is not)
    ("np.concatenate", lambda u, v: np.concatenate([np.logaddexp(u, 2.0), v])),
    ("np.resize", lambda u, v: np.resize(u.T, (40, 40))),  # more than MAX_PIECES copies
    # a pad value computed on the host from a derived array, around an inactive array (a silent constant before
    # session 53; `constant_values=u.sum()` of an active u is a read since session 57, its fill differentiated)
    ("np.add.reduce", lambda u, v: np.pad(np.ones_like(u), 1, constant_values=np.sort(u, axis=None).sum())),
]


@pytest.mark.parametrize("op", [o for _, o in REFUSED], ids=[f"{n}-{k}" for k, (n, _) in enumerate(REFUSED)])
@pytest.mark.parametrize("mode", [gk.Reverse, gk.Forward])
def test_what_is_not_a_set_of_copies_stays_refused(rng, op, mode):
    name = dict((id(o), n) for n, o in REFUSED)[id(op)]
    u, v = rng.random((3, 4)) + 0.5, rng.random((3, 4)) + 0.5
    du, dv, E, dE = np.full((3, 4), 0.25), np.full((3, 4), 0.5), np.zeros(1), np.ones(1)
    kept = [x.copy() for x in (u, v, du, dv, E, dE)]
    with pytest.raises(gk.ProgramError) as info:
        gk.autodiff(through(op), gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Duplicated(E, dE), mode=mode)
    msg = str(info.value)
    assert f"`{name}`" in msg and "derivative would be lost" in msg and "gk.Const" in msg
    assert f"test_host_shapes.py:{op.__code__.co_firstlineno}" in msg  # the user's line that computed it
    assert "gradkern/program" not in msg
    for got, want in zip((u, v, du, dv, E, dE), kept):  # nothing ran: primals and shadows as they were
        np.testing.assert_array_equal(got, want)
