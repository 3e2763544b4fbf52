"""Programs, checkpointed loops and custom rules on a device (tests/support/devices.py; docs/programs.md,
launches.md, checkpointed-loops.md, custom-rules.md): on
CuPy, saves, snapshots and internal shadows on the device, the fingerprint host-write guard, and the shipped
rules over cupy.fft / cupy.linalg / the CUDA Thomas kernel; on hostcuda, every kernel a program launches runs
the CUDA backend's C. Both give the gradients the NumPy run on the Numba backend gives (float64: 1e-10
relative, the backends' kernels and libraries round differently in the last bits and the loops compound it)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from program.test_checkpoint import heat_ping_pong
from program.test_programs import ping_pong
from program.test_rules import implicit_diffusion
from support.devices import CUPY, HAS_GPU, cupy

import gradkern as gk
import gradkern.kernels as library

pytestmark = pytest.mark.gpu

RTOL = 1e-10


def _gradients(prog, arrays, scalars, seeds, device=None):
    """gk.autodiff of prog on `device` (None: NumPy on the Numba backend): the shadows and primals (on the host)
    and the Active derivatives."""
    to = device.to if device else np.copy
    prim, shadows = [to(a) for a in arrays], [to(s) for s in seeds]
    with device.running() if device else contextlib.nullcontext():
        got = gk.autodiff(prog, *[gk.Duplicated(p, d) for p, d in zip(prim, shadows)], *scalars)
    host = device.host if device else np.asarray
    return [host(d) for d in shadows], [g for g in got if g is not None], [host(p) for p in prim]


def _same(device, prog, arrays, scalars, seeds):
    want = _gradients(prog, arrays, scalars, seeds)
    got = _gradients(prog, arrays, scalars, seeds, device)
    for a, b in zip(want[0] + want[2], got[0] + got[2]):
        np.testing.assert_allclose(b, a, rtol=RTOL, atol=1e-13)
    np.testing.assert_allclose(got[1], want[1], rtol=RTOL)


def _inputs(n, seed=0):
    r = np.random.default_rng(seed)
    return [r.uniform(0.2, 0.8, n), r.uniform(0.2, 0.8, n), np.zeros(1)], [np.zeros(n), np.zeros(n), np.ones(1)]


def test_program_on_gpu_equals_cpu(device):
    arrays, seeds = _inputs(64)
    _same(device, ping_pong, arrays, (gk.Active(0.2), 5), seeds)


@pytest.mark.parametrize("storage", ["device", "host"])
def test_checkpointed_loop_on_gpu_equals_cpu(storage, device, monkeypatch):
    """storage="host" snapshots go out of device memory and back (program/snapshots.py), on hostcuda too."""
    import gradkern.program.snapshots as snapshots
    moved = []
    for name in ("to_host", "from_host"):
        real = getattr(snapshots, name)
        monkeypatch.setattr(snapshots, name, lambda *a, real=real, name=name: moved.append(name) or real(*a))
    arrays, seeds = _inputs(64, 1)
    prog = heat_ping_pong(lambda step, nsteps: gk.checkpointed_loop(step, nsteps, snapshots=3, storage=storage))
    _same(device, prog, arrays, (gk.Active(0.2), 9), seeds)
    if storage == "host":
        assert "to_host" in moved and "from_host" in moved
    else:
        assert not moved


def test_host_write_to_a_device_array_is_refused(device):
    """A host write through a view made before the call: device memory's fingerprint finds it before the next
    launch (CuPy has no read-only flag; on hostcuda NumPy's flags, which cannot see such a view, stay too), and
    no shadow changes."""
    r = np.random.default_rng(4)
    u, v, du, dv, E, dE = (device.to(a) for a in (r.random(16), r.random(16), r.random(16), r.random(16),
                                                   np.zeros(1), np.ones(1)))
    alias = v[:]

    def prog(u, v, E, c):
        gk.launch(library.allen_cahn_step, u.shape[0], u, v, c, 0.01)
        alias[0] = 3.0
        gk.launch(library.allen_cahn_step, u.shape[0], v, u, c, 0.01)
    shadows = [device.host(a).copy() for a in (du, dv, dE)]
    with device.running(), pytest.raises(gk.ProgramError, match="host write to .*'v'.*found before launch 2") as err:
        gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Duplicated(E, dE), gk.Active(0.2))
    assert "read-only" not in str(err.value)  # found by the fingerprint, not refused by a NumPy flag
    for before, after in zip(shadows, (du, dv, dE)):
        np.testing.assert_array_equal(device.host(after), before)
    if device.xp is np:
        assert u.flags.writeable and v.flags.writeable


@pytest.mark.parametrize("where", ["read only", "written"])
def test_host_write_between_launches_is_refused_whichever_launch_took_it(where, device):
    """The guard keeps the print `check` took before a launch for the buffers the launch only read (guard.lock's
    `written`): a later host write to such a buffer (`c`), or to one the launch wrote (`v`), is still found before
    the next launch that takes it, with no shadow changed."""
    r = np.random.default_rng(6)
    u, v, c, du, dv, dc, E, dE = (device.to(a) for a in (r.random(16), r.random(16), r.random(16), r.random(16),
                                                         r.random(16), r.random(16), np.zeros(1), np.ones(1)))
    target = (c if where == "read only" else v)[:]  # a view made before the call: found by the fingerprint alone

    def prog(u, v, c, E):
        gk.launch(library.axpy, u.shape[0], 0.5, c, u)  # reads c, writes u
        gk.launch(library.axpy, u.shape[0], 0.5, u, v)  # reads u, writes v
        target[1] = 7.0
        gk.launch(library.axpy, u.shape[0], 0.25, c, v)  # takes both again
        gk.launch(library.sum_squares, v.shape[0], v, E)
    shadows = [device.host(a).copy() for a in (du, dv, dc, dE)]
    name = "c" if where == "read only" else "v"
    with device.running(), pytest.raises(gk.ProgramError, match=f"host write to .*'{name}'.*found before launch 3"):
        gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Duplicated(c, dc), gk.Duplicated(E, dE))
    for before, after in zip(shadows, (du, dv, dc, dE)):
        np.testing.assert_array_equal(device.host(after), before)


@pytest.mark.skipif(CUPY is None or not HAS_GPU, reason="no CUDA GPU (CuPy)")
@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "int8", "float16", "bool"])
@pytest.mark.parametrize("size", [1, 7, 1001, 3_000_001])
def test_device_fingerprint_is_numpys(dtype, size):
    """program/fingerprint.py's fused CUDA kernel gives NumPy's value bit for bit (the same mix, sums mod 2**64),
    also past one grid's stride, and sees a one-bit change anywhere."""
    from gradkern.program.fingerprint import device_print, fingerprint, settle_all
    a = (np.random.default_rng(size).standard_normal(size) * 10).astype(dtype)
    d = cupy.asarray(a)
    assert fingerprint(d) == fingerprint(a)
    assert settle_all([device_print(d), device_print(d[: size // 2 + 1])]) == \
        [fingerprint(a), fingerprint(a[: size // 2 + 1])]
    raw = d.view(cupy.uint8)
    for pos in {0, raw.size // 3, raw.size - 1}:
        raw[pos] ^= 4
        assert fingerprint(d) != fingerprint(a), pos
        raw[pos] ^= 4


def test_rule_writing_outside_its_writes_on_a_device_is_refused(device):
    """A rule call in a program that writes an argument its writes= does not list: RuleError from the
    fingerprint on device memory (NumPy's flag elsewhere: test_rules.py), shadows unchanged."""
    r = np.random.default_rng(5)
    x, dx, y, dy = (device.to(r.random(8)) for _ in range(4))
    alias = y[:]  # made before the call: NumPy's flag (hostcuda) cannot see a write through it, the fingerprint can

    @gk.custom_rule(writes=("x",))
    def sloppy(x, y, c):
        alias[...] = c * x

    @sloppy.reverse
    def _(config, tape, x, y, c):
        return None, None, 0.0

    def prog(x, y, c):
        sloppy(x, y, c)
    before = [device.host(a).copy() for a in (dx, dy)]
    with device.running(), pytest.raises(gk.RuleError, match="writes="):
        gk.autodiff(prog, gk.Duplicated(x, dx), gk.Duplicated(y, dy), gk.Active(2.0))
    for b, a in zip(before, (dx, dy)):
        np.testing.assert_array_equal(device.host(a), b)


@pytest.mark.parametrize("loop", ["plain", "checkpointed"])
def test_implicit_diffusion_with_rules_on_gpu_equals_cpu(loop, device):
    def plain(step, nsteps):
        for t in range(nsteps):
            step(t)
    prog = implicit_diffusion(plain if loop == "plain" else
                              lambda step, nsteps: gk.checkpointed_loop(step, nsteps, snapshots=2))
    r = np.random.default_rng(2)
    n = 33
    arrays = [r.uniform(0.2, 0.8, n), r.uniform(0.2, 0.8, n), r.random(n)]
    _same(device, prog, arrays, (gk.Active(0.8), 4), [np.zeros(n), np.zeros(n), r.random(n)])


@pytest.mark.parametrize("rule", ["tridiagonal_solve", "dense_solve", "poisson_periodic", "spectral_derivative"])
def test_shipped_rules_on_gpu_equal_cpu(rule, device):
    """Each shipped rule alone: primal and reverse on CuPy equal NumPy's."""
    r = np.random.default_rng(3)
    n, m = 16, 3
    if rule == "tridiagonal_solve":
        b = r.uniform(3.0, 4.0, (n, m))
        args = [r.uniform(-1, 1, (n, m)), b, r.uniform(-1, 1, (n, m)), r.random((n, m)), r.random((n, m))]
        scalars = ()
    elif rule == "dense_solve":
        A = r.uniform(-1, 1, (m, n, n)) + 4 * n * np.eye(n)
        args = [A, r.random((m, n)), r.random((m, n))]
        scalars = ()
    else:
        args = [r.random((m, n)), r.random((m, n))]
        scalars = (gk.Active(2.5),)
    fn = getattr(library, rule)
    seeds = [np.zeros_like(a) for a in args[:-1]] + [r.random(args[-1].shape)]

    def prog(*xs):
        fn(*xs)
    _same(device, prog, args, scalars, seeds)


def views_and_temporary(u, v, E, c):
    """Launches on views of an argument (their shadows are views of its shadow: program/shadows.py `_view_at`, a
    `cupy.ndarray` on the device) and on a temporary allocated inside (an internal shadow from its own module),
    filled by a launch: device memory host code makes inside a program is refused until a launch overwrites it
    whole (docs/host-code.md, "Device arrays made by host code"; np.zeros_like was refused on CuPy since)."""
    w = np.empty_like(u)  # CuPy's empty_like for a CuPy array (__array_function__)
    gk.fill(w, 0.0)
    gk.launch(library.axpy, u.shape[0] - 2, c, u[1:-1], w[2:])
    gk.launch(library.allen_cahn_step, u.shape[0], w, v, c, 0.01)
    gk.launch(library.sum_squares, v.shape[0] - 1, v[1:], E)


def _in_mode(mode, u0, v0, device=None):
    """views_and_temporary's derivatives in `mode` on `device` (None: NumPy on the Numba backend), on the host:
    shadows or tangents, primals, and the Active scalar's derivatives (reverse, split: one; vector: two lanes)."""
    to = device.to if device else np.copy
    host = device.host if device else np.asarray
    u, v, E = to(u0), to(v0), to(np.zeros(1))
    r = np.random.default_rng(21)
    with device.running() if device else contextlib.nullcontext():
        if mode == "forward":
            tangents = [to(r.standard_normal(a.shape)) for a in (u0, v0, np.zeros(1))]
            assert gk.autodiff(views_and_temporary, *[gk.Duplicated(a, t) for a, t in zip((u, v, E), tangents)],
                               gk.Duplicated(0.3, 0.5), mode=gk.Forward) is None
            return [host(t) for t in tangents] + [host(a) for a in (u, v, E)], []
        if mode == "vector":
            lanes = [[to(np.zeros_like(u0)), to(np.zeros_like(v0)), to(np.array([1.0 + k]))] for k in range(2)]
            batched = [gk.BatchDuplicated(a, tuple(lane[n] for lane in lanes)) for n, a in enumerate((u, v, E))]
            got = gk.autodiff(views_and_temporary, *batched, gk.Active(0.3))
            return [host(s) for lane in lanes for s in lane] + [host(a) for a in (u, v, E)], [float(x) for x in got[3]]
        shadows = [to(np.zeros_like(u0)), to(np.zeros_like(v0)), to(np.ones(1))]
        args = [*(gk.Duplicated(a, s) for a, s in zip((u, v, E), shadows)), gk.Active(0.3)]
        if mode == "split":
            forward, reverse = gk.autodiff_thunk(views_and_temporary, gk.Duplicated, gk.Duplicated, gk.Duplicated,
                                                 gk.Active)
            got = reverse(*args, forward(*args))
        else:
            got = gk.autodiff(views_and_temporary, *args)
        return [host(s) for s in shadows] + [host(a) for a in (u, v, E)], [float(got[3])]


@pytest.mark.parametrize("mode", ["reverse", "split", "forward", "vector"])
def test_views_and_internal_shadows_on_gpu_equal_cpu_in_every_mode(mode, device):
    r = np.random.default_rng(20)
    u0, v0 = r.uniform(0.2, 0.8, 40), r.uniform(0.2, 0.8, 40)
    got, got_scalars = _in_mode(mode, u0, v0, device)
    want, want_scalars = _in_mode(mode, u0, v0)
    for n, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=1e-13, err_msg=f"{mode}: array {n}")
    assert np.any(got[0] != 0)  # the path through the views and the temporary reached u
    np.testing.assert_allclose(got_scalars, want_scalars, rtol=RTOL)


@pytest.mark.parametrize("how", ["copy", "concatenate"])
def test_host_copies_of_device_arrays_are_differentiated_or_refused(how, device):
    """Host code's copies in a program (docs/host-code.md: `u.copy()` a gk.copy launch, hostcode.py; np.concatenate
    copy launches, hostshapes.py). On NumPy arrays (hostcuda) they are recorded and differentiated. CuPy arrays'
    host operations are not seen (host-code.md, "What is not seen"): then a launch taking their result must be
    refused, with no shadow changed, never differentiated without the copy (a gradient silently missing the
    path through it). E = sum(w^2): dE/du = 2 u, dE/dv = 2 v where w holds v."""
    def prog(u, v, E):
        w = u.copy() if how == "copy" else np.concatenate([u, v])
        gk.launch(library.sum_squares, w.shape[0], w, E)
    r = np.random.default_rng(22)
    u0, v0 = r.uniform(0.2, 0.8, 16), r.uniform(0.2, 0.8, 8)
    u, v, E = device.to(u0), device.to(v0), device.xp.zeros(1)
    du, dv, dE = device.xp.zeros(16), device.xp.zeros(8), device.xp.ones(1)
    try:
        with device.running():
            gk.autodiff(prog, gk.Duplicated(u, du), gk.Duplicated(v, dv), gk.Duplicated(E, dE))
    except gk.GradkernError:
        assert device.xp is not np, "hostcuda's NumPy arrays take the copy launches"
        for a in (du, dv):
            assert not device.host(a).any()
        np.testing.assert_array_equal(device.host(dE), np.ones(1))
        return
    # sum_squares' reverse adds 2 x dE: exact in floating point here (dE = 1); 1e-13 is only room for rounding
    lost = f"taken and differentiated without {how}'s dependence (a host operation on {device.name} arrays not seen)"
    np.testing.assert_allclose(device.host(du), 2 * u0, rtol=1e-13, err_msg=lost)
    np.testing.assert_allclose(device.host(dv), 2 * v0 if how == "concatenate" else np.zeros(8), rtol=1e-13,
                               err_msg=lost)
