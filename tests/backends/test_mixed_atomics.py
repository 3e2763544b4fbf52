"""Launches whose atomic targets are also loaded or stored plainly ("mixed"), on the CPU in parallel
(backends/numba_syntax.py PrivatizedSyntax, numba_plan.py MixedPlan; on by default up to GRADKERN_MIXED_PRIVATE_BYTES):
an add marked as landing in the thread's own row plus a constant goes straight to the target (chunks that
run at once never reach a common row that way), every other one to the running slot's copy, which a plain
load reads through and a plain store zeroes; adds by other threads to elements nobody accesses plainly are
summed over the slots.

Values are small integers and dyadic rationals, so every sum is exact whatever
its order: the parallel results must equal the serial ones (the interpreter,
or the CPU entry's serial path, `_gkb_chunks` = 0) bit for bit. The chunk
count is forced (many more chunks than the machine's threads, one per outer
index, and the serial path) by replacing `private_chunks`. With values that are not dyadic, the
parallel entry and its serial twin must still agree bit for bit (the same chunks in the same order)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from fuzz.test_race_fuzz import load_kernels
from library.test_hpc_kernels import fdtd_ey, lud_col, trisolv
from support.corpus import lu_update

import gradkern as gk
from gradkern.backends import numba_cpu, numba_loops, numba_plan
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


@gk.kernel
def index_reads_target_shared(x, y, n, z):
    """The same, its first add at `i + z` (z = 0): not a row the pipeline marks, so x gets slot copies."""
    i = gk.tid()
    gk.atomic_add(x, i + z, n)
    x[x[i] - n] = x[i] * 2
    gk.atomic_add(x, i, 1)
    y[i] = x[i]


@pytest.fixture(autouse=True)
def mixed_in_parallel(monkeypatch):
    """The parallel form of mixed launches, whatever GRADKERN_MIXED_PRIVATE_BYTES the environment sets."""
    monkeypatch.setattr(numba_plan, "MIXED_PRIVATE_LIMIT", 1 << 30)


def _chunks(monkeypatch, chunks):
    """Run privatised launches with min(chunks, n0) private copies (0: the serial path)."""
    monkeypatch.setattr(numba_plan, "private_chunks", lambda copy_bytes, n0, mixed=False, width=0: min(chunks, n0))


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
@pytest.mark.parametrize("shared", [False, True])
def test_a_store_whose_index_reads_the_target(monkeypatch, chunks, dtype, shared):
    n = 23
    kernel = index_reads_target_shared if shared else index_reads_target
    make = lambda: [np.arange(n, dtype=dtype), np.zeros(n, dtype), n] + [0] * shared  # noqa: E731
    source = gk.inspect(kernel, *make()).source
    if shared:
        assert "_gkb_s0 = " in source  # the store's index is bound once
    else:  # both adds land in the thread's own row: straight into x, no copies, no bound index
        assert "_gkb_pb_" not in source and "_gkb_priv_" not in source and "_gkb_s0 = " not in source
    cpu, interp = _both(kernel, n, make, monkeypatch, chunks)
    _assert_same(cpu, interp)
    np.testing.assert_array_equal(cpu[0], 2 * (np.arange(n) + n) + 1)


def test_outlined_and_bounds_checked_bodies(monkeypatch):
    """The same through an outlined thread body, and through the bounds-checked code."""
    n, extra = 31, 3
    make = lambda: [np.arange(n + extra, dtype=np.float64), np.zeros(n), np.full(n, 0.5),  # noqa: E731
                    np.arange(n) % extra, n]
    monkeypatch.setattr(numba_loops, "OUTLINE_STATEMENTS", -1)
    monkeypatch.setattr(numba_loops, "STRAIGHT_STATEMENTS", -1)
    outlined = gk.kernel(add_read_store.fn)
    assert "def _gkb_body_private" in gk.inspect(outlined, *make()).source
    _assert_same(*_both(outlined, n, make, monkeypatch, 4))
    monkeypatch.setattr(numba_loops, "OUTLINE_STATEMENTS", 96)
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
    assert ins.parallel and "_gk_prange(" in ins.source and "atomic add" in ins.adjoint_forms.values()
    # adds at a parameter's or a loop variable's row (LU's pivot row dA[k, j]; trisolv, one thread looping
    # over i) take slot copies; the others land in rows tid[0] + c and go straight to the shadow, in two
    # phases where c varies (red-black: c = -1, 0, 1)
    assert ("_gkb_pb_" in ins.source) == (name in ("lu_update", "lud_col", "trisolv"))
    assert ("for _gkb_ph in range(2):" in ins.source) == (name == "red_black_sweep")
    copies = "_gkb_pb_" in ins.source or "_gkb_priv_" in ins.source
    assert (ins.private_bytes > 0) == copies
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
    """GRADKERN_MIXED_PRIVATE_BYTES (by default GRADKERN_PRIVATE_BYTES'): mixed launches whose private copies
    would exceed it take the serial path (gk.inspect reports no private bytes), and give what the parallel
    form gives, bit for bit."""
    _, kernel, make, dim = next(c for c in _mixed_cases(np.random.default_rng(11)) if c[0] == "lu_update")
    args = make()
    parallel = _copies(args)
    gk.autodiff(kernel, *parallel, dim=dim)
    assert gk.inspect(kernel, *_copies(args), dim=dim, mode=gk.Reverse).private_bytes > 0
    monkeypatch.setattr(numba_plan, "MIXED_PRIVATE_LIMIT", 0)
    assert gk.inspect(kernel, *_copies(args), dim=dim, mode=gk.Reverse).private_bytes == 0
    serial = _copies(args)
    gk.autodiff(kernel, *serial, dim=dim)
    _assert_same(_arrays(serial), _arrays(parallel))
    assert numba_plan.private_chunks(1 << 20, 8) > 0  # the limit of launches that are not mixed is untouched


def _parallel_vs_twin_vs_serial(monkeypatch, kernel, args, dim, chunks):
    """The arrays after the parallel entry, its serial twin and the serial path, from copies of `args`."""
    out = []
    for threads, forced in ((0, chunks), (1 << 40, chunks), (0, 0)):  # SERIAL_THREADS: 0 never takes the twin
        monkeypatch.setattr(numba_cpu, "SERIAL_THREADS", threads)
        _chunks(monkeypatch, forced)
        mine = _copies(args)
        gk.autodiff(kernel, *mine, dim=dim)
        out.append(_arrays(mine))
    return out


@pytest.mark.parametrize("name", ["red_black_sweep", "lu_update"])
def test_every_chunk_count_and_extent_gives_the_serial_result(monkeypatch, name):
    """Chunk counts 1..5 (more chunks than rows included: the entry makes them at least `width` rows wide)
    on n x n, n = 1..9: dyadic values equal the serial path's bit for bit; values that are not dyadic equal
    between the parallel entry and its serial twin bit for bit, and the serial path's to rounding."""
    kernel = red_black_sweep if name == "red_black_sweep" else lu_update
    for n in range(1, 10):
        for dyadic in (True, False):
            rng = np.random.default_rng(100 * n + dyadic)

            def val(*shape, rng=rng, dyadic=dyadic):
                return _dyadic(rng, *shape) if dyadic else rng.uniform(-1, 1, shape)
            if kernel is red_black_sweep:
                args = [gk.Duplicated(val(n, n), val(n, n)), gk.Duplicated(val(n, n), val(n, n)), n % 2, 0.5]
            else:  # pivot 2 at k = 0: every quotient of dyadic values is dyadic
                A = val(n, n)
                A[0, 0] = 2.0
                args = [gk.Duplicated(A, val(n, n)), 0]
            for chunks in range(1, 6):
                par, twin, serial = _parallel_vs_twin_vs_serial(monkeypatch, kernel, args, (n, n), chunks)
                _assert_same(par, twin)
                if dyadic:
                    _assert_same(par, serial)
                else:  # sums in another order: a few ulps of the largest magnitude involved
                    for a, b in zip(par, serial):
                        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


def test_the_slot_copies_are_cached_zero_and_dropped_when_a_launch_raises(monkeypatch):
    """LU's slot copies come back all zero after a launch (only the flagged rows were summed), are reused by
    the next launch, and a launch that raises drops them: the next one allocates fresh zeroed ones."""
    _, kernel, make, dim = next(c for c in _mixed_cases(np.random.default_rng(11)) if c[0] == "lu_update")
    args = make()
    monkeypatch.setattr(numba_cpu, "SERIAL_THREADS", 0)
    numba_plan.SLOTS.buffers.clear()
    first = _copies(args)
    gk.autodiff(kernel, *first, dim=dim)
    assert len(numba_plan.SLOTS.buffers) == 1
    (key, (copies, flags)), = numba_plan.SLOTS.buffers.items()
    assert copies.shape[1:] == args[0].val.shape and not copies.any() and not flags.any()
    again = _copies(args)
    gk.autodiff(kernel, *again, dim=dim)
    assert numba_plan.SLOTS.buffers[key][0] is copies  # reused
    _assert_same(_arrays(again), _arrays(first))

    real = numba_plan.SLOTS.take

    def take_and_dirty(k):
        pair = real(k)
        pair[0][...] = 1.0  # a launch that dies half-way leaves its copies dirty
        raise RuntimeError("launch failed")

    monkeypatch.setattr(numba_plan.SLOTS, "take", take_and_dirty)
    with pytest.raises(RuntimeError, match="launch failed"):
        gk.autodiff(kernel, *_copies(args), dim=dim)
    assert key not in numba_plan.SLOTS.buffers  # dropped
    monkeypatch.setattr(numba_plan.SLOTS, "take", real)
    after = _copies(args)
    gk.autodiff(kernel, *after, dim=dim)
    _assert_same(_arrays(after), _arrays(first))
    assert not numba_plan.SLOTS.buffers[key][0].any()


def test_an_active_scalar_beside_a_phased_mixed_target_sums_in_a_register(monkeypatch):
    """red-black with Active h2: du is mixed (two phases, no copies), h2's derivative a per-chunk register
    sum flushed into its per-chunk copy; gk.inspect says so, and the results equal the serial path's."""
    rng = np.random.default_rng(13)
    args = [gk.Duplicated(_dyadic(rng, 11, 10), _dyadic(rng, 11, 10)),
            gk.Duplicated(_dyadic(rng, 11, 10), _dyadic(rng, 11, 10)), 1, gk.Active(0.5)]
    ins = gk.inspect(red_black_sweep, *_copies(args), dim=(11, 10), mode=gk.Reverse)
    assert "for _gkb_ph in range(2):" in ins.source and "_gkb_pb_" not in ins.source
    assert "into a register" in ins.active_sums["h2"]
    assert ins.private_bytes > 0  # the Active scalar's per-chunk copies
    runs = []
    for chunks in (0, 4):
        monkeypatch.setattr(numba_cpu, "SERIAL_THREADS", 0)
        _chunks(monkeypatch, chunks)
        mine = _copies(args)
        runs.append((_arrays(mine), gk.autodiff(red_black_sweep, *mine, dim=(11, 10))))
    _assert_same(runs[0][0], runs[1][0])
    assert runs[0][1] == runs[1][1]


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
