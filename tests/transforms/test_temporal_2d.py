"""Temporal blocking of a 2-D or 3-D stencil step (transforms/temporal.py, runtime/blocked.py): bands of rows
(planes), k launches over ping-pong buffers as one blocked pass give both buffers bit for bit what the k launches
give, for row reaches 0 to 2, column reaches 0 to 2, different boundary rules, bands narrower than the halo; what
is not a pure stencil step is refused with its reason."""

import numpy as np
import pytest
from support.temporal import check_bit_identical

import gradkern as gk
from gradkern.kernels import allen_cahn_step_2d, heat_step_3d
from gradkern.runtime import blocked
from gradkern.runtime.binding import bind
from gradkern.runtime.call import prepare
from gradkern.runtime.specialize import primal_specialization
from gradkern.transforms.temporal import blocked_kernel


@gk.kernel
def pointwise_2d(u, un, c):
    i, j = gk.tid()
    un[i, j] = c * u[i, j] - 0.1 * u[i, j] * u[i, j]


@gk.kernel
def columns_only(u, un, c):
    # row reach 0, column reach 2, zero columns at the ends
    i, j = gk.tid()
    if j < 2 or j >= u.shape[1] - 2:
        un[i, j] = 0.0
    else:
        un[i, j] = u[i, j] + c * (u[i, j - 2] - u[i, j + 2])


@gk.kernel
def wide_rows(u, un, w, c):
    # row reach 2 through an alias, one-sided rows at the ends, a coefficient array, a select, offset loop
    i, j = gk.tid()
    nx = u.shape[0]
    ny = u.shape[1]
    up = i - 2
    if i == 0 or j == 0 or j == ny - 1:
        un[i, j] = u[i, j]
    elif i == 1 or i >= nx - 2:
        un[i, j] = 0.5 * (u[i - 1, j] + u[i, j + 1])
    else:
        acc = 0.0
        for q in range(-1, 2):
            acc += 0.1 * u[i + q, j]
        side = u[up, j] if c > 0.0 else u[i + 2, j - 1]
        un[i, j] = acc + w[i, j] * side + c * u[i, j + 1]


@pytest.mark.parametrize("backend", ["cpu", "interp"])
@pytest.mark.parametrize("k", [4, 5, 9, 18])
@pytest.mark.parametrize("rows", [1, 3, 16])
def test_allen_cahn_2d_bit_identical(backend, k, rows, monkeypatch):
    # many bands; halos of up to 8 rows on bands of 1 and 3 rows (a pass takes at least 4 launches)
    monkeypatch.setattr(blocked, "BAND_ROWS", rows)
    shape = (61, 19) if backend == "cpu" else (23, 7)
    u0 = np.random.default_rng(k).uniform(-0.9, 0.9, shape)
    assert check_bit_identical(allen_cahn_step_2d, u0, (0.2, 0.01), k, backend) == 1


@pytest.mark.parametrize("step, rest, reach", [(pointwise_2d, (0.9,), 0), (columns_only, (0.3,), 0)])
@pytest.mark.parametrize("k", [4, 7])
def test_row_reach_zero(step, rest, reach, k, monkeypatch):
    monkeypatch.setattr(blocked, "BAND_ROWS", 2)
    u0 = np.random.default_rng(k).uniform(-1, 1, (33, 12))
    assert check_bit_identical(step, u0, rest, k, "cpu") == reach


@pytest.mark.parametrize("c", [0.05, -0.05])
@pytest.mark.parametrize("k", [4, 8, 11])
@pytest.mark.parametrize("rows", [2, 9])
def test_wide_rows_with_coefficients(c, k, rows, monkeypatch):
    monkeypatch.setattr(blocked, "BAND_ROWS", rows)
    rng = np.random.default_rng(k)
    u0, w = rng.uniform(-1, 1, (47, 10)), rng.uniform(-0.2, 0.2, (47, 10))
    assert check_bit_identical(wide_rows, u0, (w, c), k, "cpu") == 2


def test_float32_one_band():
    u0 = np.random.default_rng(3).uniform(-0.9, 0.9, (16, 24)).astype(np.float32)
    assert check_bit_identical(allen_cahn_step_2d, u0, (0.2, 0.01), 6, "cpu") == 1  # one band: the whole state


def test_band_by_bytes(monkeypatch):
    """Default bands are the rows of BAND_BYTES, at least BAND_MIN; a band of fewer than 12 r rows, or a state under
    MIN_BYTES_2D, is not worth a pass."""
    def form_and_bound(shape):
        u, v = np.zeros(shape), np.zeros(shape)
        bound = prepare(allen_cahn_step_2d, (u, v, 0.2, 0.01), shape, "cpu", "launch")[1]
        return blocked.blocked_step(allen_cahn_step_2d, bound, 0, 1), bound
    form, bound = form_and_bound((blocked.MIN_BYTES_2D // 8192, 1024))  # at the threshold (np.zeros: not touched)
    assert blocked._tile(bound.values[0]) == blocked.BAND_BYTES // 8192 and form.pays(bound)
    assert not form.pays(form_and_bound((512, 512))[1])
    ny = blocked.BAND_BYTES // 8 // 4
    wide, bound = form_and_bound((blocked.MIN_BYTES_2D // (8 * ny) + 1, ny))
    assert blocked._tile(bound.values[0]) == blocked.BAND_MIN and wide.pays(bound)
    monkeypatch.setattr(blocked, "BAND_ROWS", 11)
    assert not wide.pays(bound)


def _reason(step, args, dim):
    b = bind(step.ir, dim, args, "cpu")
    typed = primal_specialization(step, b).typed
    names = [p.name for p in typed.params]
    return blocked_kernel(typed, names[0], names[1]).reason


@gk.kernel
def shifted_column(u, un):
    i, j = gk.tid()
    if j < u.shape[1] - 1:
        un[i, j + 1] = u[i, j]
    un[i, j] = 0.0


@gk.kernel
def transposed(u, un):
    i, j = gk.tid()
    un[i, j] = u[j, i]


@gk.kernel
def periodic_columns(u, un):
    i, j = gk.tid()
    un[i, j] = u[i, (j + 1) % u.shape[1]]


@gk.kernel
def from_a_row(u, un):
    i, j = gk.tid()
    un[i, j] = u[j]


@gk.kernel
def planes_ahead(u, un, c):
    # 3-D, plane reach 2 one-sided, the middle axis's reach 1, the last axis read as it is
    i, j, q = gk.tid()
    if i >= u.shape[0] - 2 or j == 0 or j == u.shape[1] - 1:
        un[i, j, q] = c * u[i, j, q]
    else:
        un[i, j, q] = 0.5 * u[i + 2, j, q] + 0.25 * (u[i, j - 1, q] + u[i + 1, j + 1, q]) + 0.01 * q


@pytest.mark.parametrize("backend", ["cpu", "interp"])
@pytest.mark.parametrize("k", [4, 7, 10])
@pytest.mark.parametrize("rows", [1, 5])
def test_3d_bit_identical(backend, k, rows, monkeypatch):
    # bands of planes, narrower than the halo
    monkeypatch.setattr(blocked, "BAND_ROWS", rows)
    shape = (29, 7, 6) if backend == "cpu" else (13, 5, 4)
    u0 = np.random.default_rng(k).uniform(-0.9, 0.9, shape)
    assert check_bit_identical(heat_step_3d, u0, (0.1,), k, backend) == 1
    assert check_bit_identical(planes_ahead, u0, (0.9,), k, backend) == 2


@gk.kernel
def reads_written_2d(u, un):
    i, j = gk.tid()
    un[i, j] = u[i, j]
    un[i, j] = un[i, j] + u[i - 1, j] if i > 0 else un[i, j]


def test_refusals_2d():
    x, y = np.zeros((6, 6)), np.zeros((6, 6))
    assert "not only its own element" in _reason(shifted_column, (x, y), (6, 6))
    assert "not at a constant offset" in _reason(transposed, (x, y), (6, 6))
    assert "not at a constant offset" in _reason(periodic_columns, (x, y), (6, 6))
    assert "not a 2-D array" in _reason(from_a_row, (np.zeros(6), y), (6, 6))
    assert "reads 'un'" in _reason(reads_written_2d, (x, y), (6, 6))


def test_scratch_bytes_bounds_a_pass(monkeypatch):
    """A checkpointed loop's memory= counts `scratch_bytes` (program/checkpoint.py `_sizes`): at least what the
    longest pass over a 2-D state keeps; nothing for a state too small to block."""
    monkeypatch.setattr(blocked, "MIN_BYTES_2D", 16 << 20)  # the 16 MiB state below is blocked
    shape = (2048, 1024)
    u, v = np.random.default_rng(0).uniform(-0.5, 0.5, shape), np.zeros(shape)
    bounds = [prepare(allen_cahn_step_2d, (u, v, 0.2, 0.01) if s % 2 == 0 else (v, u, 0.2, 0.01), shape, "cpu",
                      "launch")[1] for s in range(40)]
    form = blocked.blocked_step(allen_cahn_step_2d, bounds[0], 0, 1)
    form.run(bounds)
    kept = blocked._SCRATCH.rows[(np.dtype(np.float64), "cpu", 3)]
    assert 0 < kept.nbytes <= blocked.scratch_bytes(8, shape)
    assert blocked.scratch_bytes(8, (512, 512)) == 0
