"""Launches whose atomic targets are also loaded or stored plainly ("mixed"), on the
CPU in parallel (backends/numba_cpu.py, PrivatizedSyntax; off by default, on in
these tests through GRADKERN_MIXED_PRIVATE_BYTES's variable): a thread's plain load
sees its own earlier atomic adds, its plain store discards them, and adds by
other threads to elements nobody accesses plainly are summed over the chunks.

Values are small integers and dyadic rationals, so every sum is exact whatever
its order: the parallel results must equal the serial ones (the interpreter,
or the CPU entry's serial path, `_gkb_chunks` = 0) bit for bit. The chunk
count is forced (many more chunks than the machine's threads, one per outer
index, and the serial path) by replacing `private_chunks`."""

from __future__ import annotations

import os

import numpy as np
import pytest
from corpus import lu_update
from test_hpc_kernels import fdtd_ey, lud_col, trisolv
from test_race_fuzz import load_kernels

import gradkern as gk
from gradkern.backends import numba_cpu
from gradkern.testing import check_grad


@gk.kernel
def add_read_store(x, y, w, spread, m):
    i = gk.tid()
    gk.atomic_add(x, i, w[i])
    y[i] = x[i]  # sees the add just made
    gk.atomic_add(x, i, 2.0)
    x[i] = x[i] * 3.0  # reads both adds; the store discards them
    gk.atomic_add(x, i, 1.0)  # lands on the stored value
    y[i] += x[i]
    gk.atomic_add(x, m + spread[i], w[i])  # elements no thread accesses plainly


@gk.kernel
def store_then_add_2d(x, y, w):
    i, j = gk.tid()
    x[i, j] = w[i, j]
    gk.atomic_add(x, (i, j), 0.5)
    y[i, j] = x[i, j]


@gk.kernel
def own_column_2d(x, y, w):
    """Thread (i, j) adds into row i's element x[i, n1 + j] only; x[i, :n1] is stored plainly."""
    i, j = gk.tid()
    x[i, j] = w[i, j]
    gk.atomic_add(x, (i, j), 1.0)
    y[i, j] = x[i, j] * 2.0
    gk.atomic_add(x, (i, x.shape[1] - 1), w[i, j])  # row i's last column: added to by the row's threads only


@gk.kernel
def index_reads_target(x, y, n):
    i = gk.tid()
    gk.atomic_add(x, i, n)
    x[x[i] - n] = x[i] * 2  # the index reads x: evaluated once, before the store
    gk.atomic_add(x, i, 1)
    y[i] = x[i]


@pytest.fixture(autouse=True)
def mixed_in_parallel(monkeypatch):
    """The parallel form of mixed launches, off by default (GRADKERN_MIXED_PRIVATE_BYTES = 0), on here."""
    monkeypatch.setattr(numba_cpu, "MIXED_PRIVATE_LIMIT", 1 << 30)


def _chunks(monkeypatch, chunks):
    """Run privatised launches with min(chunks, n0) private copies (0: the serial path)."""
    monkeypatch.setattr(numba_cpu, "private_chunks", lambda copy_bytes, n0, mixed=False: min(chunks, n0))


def _both(kernel, dim, make, monkeypatch, chunks):
    """The arrays after a CPU launch with `chunks` and after an interpreter launch, from fresh copies."""
    _chunks(monkeypatch, chunks)
    cpu, interp = make(), make()
    gk.launch(kernel, dim, *cpu)
    gk.launch(kernel, dim, *interp, backend="interp")
    return cpu, interp


def _assert_same(a, b):
    for x, y in zip(a, b):
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)


CHUNKS = [0, 1, 2, 5, 10**6]


@pytest.mark.parametrize("chunks", CHUNKS)
def test_a_thread_sees_its_own_adds_and_its_store_overwrites_them(monkeypatch, chunks):
    n, extra = 37, 4
    rng = np.random.default_rng(7)
    x0 = rng.integers(-4, 5, n + extra).astype(np.float64)
    w = rng.integers(-8, 9, n).astype(np.float64) / 4
    spread = rng.integers(0, extra, n)

    def make():
        return [x0.copy(), np.zeros(n), w.copy(), spread.copy(), n]

    assert gk.inspect(add_read_store, *make()).parallel
    cpu, interp = _both(add_read_store, n, make, monkeypatch, chunks)
    _assert_same(cpu, interp)
    expect = (x0[:n] + w + 2.0) * 3.0 + 1.0
    np.testing.assert_array_equal(cpu[0][:n], expect)
    np.testing.assert_array_equal(cpu[1], x0[:n] + w + expect)
    np.testing.assert_array_equal(cpu[0][n:], x0[n:] + np.bincount(spread, w, extra))


@pytest.mark.parametrize("chunks", CHUNKS)
@pytest.mark.parametrize("kernel", [store_then_add_2d, own_column_2d], ids=lambda k: k.name)
def test_2d_launches_split_axis_0_into_chunks(monkeypatch, chunks, kernel):
    rng = np.random.default_rng(8)
    shape = (9, 6)
    w = rng.integers(-8, 9, shape).astype(np.float64) / 2

    def make():
        return [np.full(shape, 0.25), np.zeros(shape), w.copy()]

    dim = (9, 5) if kernel is own_column_2d else shape
    assert gk.inspect(kernel, *make(), dim=dim).parallel
    cpu, interp = _both(kernel, dim, make, monkeypatch, chunks)
    _assert_same(cpu, interp)


@pytest.mark.parametrize("chunks", CHUNKS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_a_store_whose_index_reads_the_target(monkeypatch, chunks, dtype):
    n = 23
    make = lambda: [np.arange(n, dtype=dtype), np.zeros(n, dtype), n]  # noqa: E731
    source = gk.inspect(index_reads_target, *make()).source
    assert "_gkb_s0 = " in source  # the store's index is bound once
    cpu, interp = _both(index_reads_target, n, make, monkeypatch, chunks)
    _assert_same(cpu, interp)
    np.testing.assert_array_equal(cpu[0], 2 * (np.arange(n) + n) + 1)


def test_outlined_and_bounds_checked_bodies(monkeypatch):
    """The same through an outlined thread body, and through the bounds-checked code."""
    n, extra = 31, 3
    make = lambda: [np.arange(n + extra, dtype=np.float64), np.zeros(n), np.full(n, 0.5),  # noqa: E731
                    np.arange(n) % extra, n]
    monkeypatch.setattr(numba_cpu, "OUTLINE_STATEMENTS", -1)
    outlined = gk.kernel(add_read_store.fn)
    assert "def _gkb_body_private" in gk.inspect(outlined, *make()).source
    _assert_same(*_both(outlined, n, make, monkeypatch, 4))
    monkeypatch.setattr(numba_cpu, "OUTLINE_STATEMENTS", 96)
    monkeypatch.setenv("GRADKERN_BOUNDSCHECK", "1")
    checked = gk.kernel(add_read_store.fn)
    assert "_gkb_check(" in gk.inspect(checked, *make()).source
    _assert_same(*_both(checked, n, make, monkeypatch, 4))


def test_a_race_between_an_add_and_another_threads_read_is_still_refused():
    @gk.kernel
    def neighbour_add(x, y):
        i = gk.tid()
        gk.atomic_add(x, i + 1, 1.0)
        y[i] = x[i]

    x, y = np.zeros(9), np.zeros(8)
    with pytest.raises(gk.RaceError):
        gk.launch(neighbour_add, 8, x, y)
    assert not x.any() and not y.any()


# ---- the suite's kernels whose gradients are mixed ----------------------------------------------------------

@gk.kernel
def red_black_sweep(u, f, colour, h2):
    """One colour of a red-black Gauss-Seidel sweep for -Δu = f: in place, race-free by parity."""
    i, j = gk.tid()
    if 0 < i < u.shape[0] - 1 and 0 < j < u.shape[1] - 1 and (i + j) % 2 == colour:
        u[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] + h2 * f[i, j])


def _dyadic(rng, *shape, scale=4):
    return rng.integers(-8, 9, shape).astype(np.float64) / scale


def _mixed_cases(rng):
    """(kernel, args builder, dim): gradients whose atomically updated shadow is also read and zeroed."""
    def lu():  # pivot 2: every quotient is dyadic
        A = rng.integers(-4, 5, (14, 14)).astype(np.float64)
        A[2, 2] = 2.0
        return [gk.Duplicated(A, _dyadic(rng, 14, 14)), 2]

    def lud():
        A = rng.integers(-4, 5, (13, 13)).astype(np.float64)
        A[1, 1] = 4.0
        return [gk.Duplicated(A, _dyadic(rng, 13, 13)), 1, 13]

    def fdtd():
        return [gk.Duplicated(_dyadic(rng, 12, 7), _dyadic(rng, 12, 7)),
                gk.Duplicated(_dyadic(rng, 12, 7), _dyadic(rng, 12, 7)), 3]

    def tri():
        L = np.tril(rng.integers(-2, 3, (6, 6))).astype(np.float64)
        np.fill_diagonal(L, 1.0)
        return [gk.Duplicated(L, _dyadic(rng, 6, 6)), gk.Duplicated(np.zeros(6), _dyadic(rng, 6)),
                gk.Duplicated(_dyadic(rng, 6), _dyadic(rng, 6)), 6]

    def gs():
        return [gk.Duplicated(_dyadic(rng, 15, 12), _dyadic(rng, 15, 12)),
                gk.Duplicated(_dyadic(rng, 15, 12), _dyadic(rng, 15, 12)), 1, 0.5]

    return [("lu_update", lu_update, lu, (14, 14)), ("lud_col", lud_col, lud, 13),
            ("fdtd_ey", fdtd_ey, fdtd, (12, 7)), ("trisolv", trisolv, tri, 1),
            ("red_black_sweep", red_black_sweep, gs, (15, 12))]


def _copies(args):
    return [gk.Duplicated(a.val.copy(), a.dval.copy()) if isinstance(a, gk.Duplicated) else a for a in args]


def _arrays(args):
    return [x for a in args if isinstance(a, gk.Duplicated) for x in (a.val, a.dval)]


@pytest.mark.parametrize("name", [c[0] for c in _mixed_cases(np.random.default_rng(0))])
def test_mixed_gradients_run_in_parallel_and_equal_the_serial_ones(monkeypatch, name):
    _, kernel, make, dim = next(c for c in _mixed_cases(np.random.default_rng(11)) if c[0] == name)
    args = make()
    ins = gk.inspect(kernel, *_copies(args), dim=dim, mode=gk.Reverse)
    assert ins.parallel and "_gkb_priv_" in ins.source and "atomic add" in ins.adjoint_forms.values()
    assert ins.private_bytes > 0
    runs = {}
    for chunks in (0, 3, 10**6):  # the serial path, and private copies
        _chunks(monkeypatch, chunks)
        mine = _copies(args)
        gk.autodiff(kernel, *mine, dim=dim)
        runs[chunks] = _arrays(mine)
        fwd, rev = gk.autodiff_thunk(kernel, *(type(a) if isinstance(a, gk.Duplicated) else gk.Const for a in args),
                                     dim=dim)
        split = _copies(args)
        rev(*split, fwd(*split))
        _assert_same(_arrays(split), runs[chunks])
    _assert_same(runs[3], runs[0])
    _assert_same(runs[10**6], runs[0])
    interp = _copies(args)
    gk.autodiff(kernel, *interp, dim=dim, backend="interp")
    _assert_same(_arrays(interp), runs[0])


def test_mixed_launches_above_the_size_limit_run_serially_with_the_same_results(monkeypatch):
    """GRADKERN_MIXED_PRIVATE_BYTES (0 by default): mixed launches whose private copies would exceed it take
    the serial path (gk.inspect reports no private bytes), and give what the parallel form gives, bit for
    bit."""
    _, kernel, make, dim = next(c for c in _mixed_cases(np.random.default_rng(11)) if c[0] == "red_black_sweep")
    args = make()
    parallel = _copies(args)
    gk.autodiff(kernel, *parallel, dim=dim)
    assert gk.inspect(kernel, *_copies(args), dim=dim, mode=gk.Reverse).private_bytes > 0
    monkeypatch.setattr(numba_cpu, "MIXED_PRIVATE_LIMIT", 0)
    assert gk.inspect(kernel, *_copies(args), dim=dim, mode=gk.Reverse).private_bytes == 0
    serial = _copies(args)
    gk.autodiff(kernel, *serial, dim=dim)
    _assert_same(_arrays(serial), _arrays(parallel))
    assert numba_cpu.private_chunks(1 << 20, 8) > 0  # the limit of launches that are not mixed is untouched


def test_red_black_gradient_passes_finite_differences_and_the_dot_product_test():
    rng = np.random.default_rng(12)
    u, f = rng.uniform(0.5, 1.5, (11, 10)), rng.uniform(-1, 1, (11, 10))
    for colour in (0, 1):
        report = check_grad(red_black_sweep, gk.Duplicated(u, np.zeros_like(u)), gk.Duplicated(f, np.zeros_like(f)),
                            colour, gk.Active(0.3), dim=(11, 10))
        assert report.ok and report.checked > 5, str(report)


# ---- a small fuzz: random per-thread sequences of adds, loads and stores of one's own element ------------------

FUZZ_KERNELS = int(os.environ.get("GRADKERN_FUZZ_MIXED", "3"))


def _mixed_source(rng, name: str) -> str:
    """A kernel whose thread i adds to, loads and stores x[i] in a random order (and adds to x[n + s[i]],
    which nobody accesses plainly): race-free, every value a dyadic rational."""
    lines = [f"def {name}(x, y, s, n):", "    i = gk.tid()", "    t = 0.0"]
    for _ in range(int(rng.integers(4, 9))):
        c = int(rng.integers(-4, 5)) / 2
        lines.append(str(rng.choice([
            f"    gk.atomic_add(x, i, {c})",
            "    t = t + x[i]",
            f"    x[i] = x[i] * 0.5 + {c}",
            f"    x[i] = t + {c}",
            f"    gk.atomic_add(x, n + s[i], {c})",
            "    if i % 3 == 1:\n        gk.atomic_add(x, i, t)",
        ])))
    return "\n".join(lines + ["    y[i] = t + x[i]", ""])


def test_fuzz_random_orders_of_adds_loads_and_stores(tmp_path, monkeypatch):
    rng = np.random.default_rng(int(os.environ.get("GRADKERN_FUZZ_SEED", "0")))
    names = [f"mixed_fuzz_{k}" for k in range(FUZZ_KERNELS)]
    sources = [_mixed_source(rng, name) for name in names]
    module = load_kernels(str(tmp_path / "mixed_fuzz_module.py"), sources)
    n, extra = 29, 3
    for name, src in zip(names, sources):
        x0 = rng.integers(-4, 5, n + extra).astype(np.float64)
        s = rng.integers(0, extra, n)
        make = lambda: [x0.copy(), np.zeros(n), s.copy(), n]  # noqa: E731, B023
        cpu, interp = _both(getattr(module, name), n, make, monkeypatch, int(rng.integers(2, 8)))
        for a, b in zip(cpu, interp):
            if isinstance(a, np.ndarray):
                np.testing.assert_array_equal(a, b, err_msg=src)
