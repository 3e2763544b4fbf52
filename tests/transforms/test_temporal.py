"""Temporal blocking of a stencil step (transforms/temporal.py, runtime/blocked.py): k launches over
ping-pong buffers as one blocked pass give both buffers bit for bit what the k launches give, for reaches 0 to 3
and different boundary rules, on tiles smaller than the state; everything that is not a pure stencil step
is refused with its reason (2-D and 3-D steps: test_temporal_2d.py)."""

import numpy as np
import pytest
from support.temporal import blocked_ping_pong, check_bit_identical

import gradkern as gk
from gradkern.blocking import specialize_blocked
from gradkern.kernels import allen_cahn_step as allen_cahn
from gradkern.runtime import blocked
from gradkern.runtime.binding import bind
from gradkern.runtime.specialize import primal_specialization
from gradkern.transforms.temporal import blocked_kernel


@gk.kernel
def pointwise(u, un, c):
    i = gk.tid()
    un[i] = c * u[i] - 0.1 * u[i] * u[i]


@gk.kernel
def wide(u, un, w, c):
    # reach 3, zero ends, a coefficient array read at the thread's index, offsets through aliases
    i = gk.tid()
    n = u.shape[0]
    j = i + 1
    if i < 3 or i >= n - 3:
        un[i] = 0.0
    else:
        acc = 0.0
        for k in range(-2, 3):
            acc += 0.1 * u[i + k]
        un[i] = acc + w[i] * (u[i - 3] - u[i + 3]) + c * u[j] * u[j]


@gk.kernel
def one_sided(u, un, c):
    # reach 2, one-sided differences at the ends, a select
    i = gk.tid()
    n = u.shape[0]
    if i == 0:
        un[i] = u[i] + c * (u[i + 1] - u[i])
    elif i == n - 1:
        un[i] = u[i] - c * (u[i] - u[i - 1])
    elif i == 1 or i == n - 2:
        un[i] = 0.5 * (u[i - 1] + u[i + 1])
    else:
        up = u[i - 2] if c > 0.0 else u[i + 2]
        un[i] = u[i] - c * (u[i] - up) * 0.5


@pytest.mark.parametrize("backend", ["cpu", "interp"])
@pytest.mark.parametrize("k", [4, 5, 6, 9, 33, 37])
@pytest.mark.parametrize("tile", [13, 2])
def test_allen_cahn_bit_identical(backend, k, tile, monkeypatch):
    # many tiles; a pass takes at most tile / 2r + 1 launches but never fewer than 4 (runtime/blocked.py `_most`):
    # tiles of 13 points have halos of up to 6, tiles of 2 points halos of 3, wider than the tile
    monkeypatch.setattr(blocked, "TILE", tile)
    n = 301 if backend == "cpu" else 67
    u0 = np.random.default_rng(k).uniform(-0.9, 0.9, n)
    assert check_bit_identical(allen_cahn, u0, (0.2, 0.01), k, backend) == 1


@pytest.mark.parametrize("step, rest, reach", [(pointwise, (0.9,), 0), (one_sided, (0.3,), 2),
                                               (one_sided, (-0.3,), 2)])
@pytest.mark.parametrize("k", [4, 7])
def test_reaches_and_boundaries(step, rest, reach, k, monkeypatch):
    monkeypatch.setattr(blocked, "TILE", 10)
    u0 = np.random.default_rng(reach).uniform(-1, 1, 157)
    assert check_bit_identical(step, u0, rest, k, "cpu") == reach


@pytest.mark.parametrize("k", [4, 8, 11])
def test_wide_with_coefficients(k, monkeypatch):
    monkeypatch.setattr(blocked, "TILE", 9)
    rng = np.random.default_rng(5)
    u0, w = rng.uniform(-1, 1, 200), rng.uniform(-0.2, 0.2, 200)
    assert check_bit_identical(wide, u0, (w, 0.05), k, "cpu") == 3


def test_float32_and_one_tile(monkeypatch):
    u0 = np.random.default_rng(3).uniform(-0.9, 0.9, 64).astype(np.float32)
    assert check_bit_identical(allen_cahn, u0, (0.2, 0.01), 6, "cpu") == 1  # tile = the whole state


def _reason(step, args, dim, backend="cpu"):
    b = bind(step.ir, dim, args, backend)
    typed = primal_specialization(step, b).typed
    names = [p.name for p in typed.params]
    return blocked_kernel(typed, names[0], names[1]).reason


@gk.kernel
def reads_written(u, un):
    i = gk.tid()
    un[i] = u[i]
    un[i] = un[i] + 1.0


@gk.kernel
def atomic(u, un, s):
    i = gk.tid()
    un[i] = u[i]
    gk.atomic_add(s, 0, u[i])


@gk.kernel
def indirect(u, un, idx):
    i = gk.tid()
    un[i] = u[idx[i]]


@gk.kernel
def two_outputs(u, un, other):
    i = gk.tid()
    un[i] = u[i]
    other[i] = 2.0 * u[i]


@gk.kernel
def shifted_write(u, un):
    i = gk.tid()
    if i < un.shape[0] - 1:
        un[i + 1] = u[i]


@gk.kernel
def some_paths(u, un):
    i = gk.tid()
    if i > 0:
        un[i] = u[i - 1]


@gk.kernel
def periodic(u, un):
    i = gk.tid()
    n = u.shape[0]
    un[i] = u[i + 1 if i < n - 1 else i + 1 - n]


@gk.kernel
def writes_input(u, un):
    i = gk.tid()
    un[i] = u[i]
    u[i] = 0.0


def test_refusals():
    x, y = np.zeros(8), np.zeros(8)
    assert "reads 'un'" in _reason(reads_written, (x, y), 8)
    assert "atomically" in _reason(atomic, (x, y, np.zeros(1)), 8)
    assert "not at a constant offset" in _reason(indirect, (x, y, np.zeros(8, np.int64)), 8)
    assert "writes 'other'" in _reason(two_outputs, (x, y, np.zeros(8)), 8)
    assert "not only its own element" in _reason(shifted_write, (x, y), 8)
    assert "does not store" in _reason(some_paths, (x, y), 8)
    assert "not at a constant offset" in _reason(periodic, (x, y), 8)
    assert "writes 'u'" in _reason(writes_input, (x, y), 8)


def test_refused_where_not_printed():
    """The GPU backends print no blocked step: refused with the reason, before the transform runs."""
    b = bind(allen_cahn.ir, 8, (np.zeros(8), np.zeros(8), 0.2, 0.01), "cpu")
    typed = primal_specialization(allen_cahn, b).typed
    found = specialize_blocked(allen_cahn.ir, typed, "u", "un", "hostcuda")
    assert found.spec is None and "hostcuda" in found.reason
    assert "GRADKERN_BOUNDSCHECK" in specialize_blocked(allen_cahn.ir, typed, "u", "un", "cpu",
                                                        boundscheck=True).reason


def test_runtime_refusals():
    """The launch itself: buffers of the launch's extent, no array passed twice."""
    assert "shapes" in blocked_ping_pong(allen_cahn, np.zeros(10), np.zeros(12), 4, (0.2, 0.01), "cpu")
    u = np.zeros(10)
    assert "one array for two" in blocked.blocked_step(
        pointwise, _bound(pointwise, (u, u, 0.5)), 0, 1)


def _bound(step, args):
    from gradkern.runtime.call import prepare
    return prepare(step, args, args[0].shape[0], "cpu", "launch")[1]
