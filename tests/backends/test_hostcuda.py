"""The hostcuda backend (backends/hostcuda.py, docs/hostcuda.md): the CUDA backend's generated CUDA C, byte
for byte, compiled by g++ and run on the host through the CUDA backend's own argument marshalling. The corpus
of tests/support/signatures.py runs on it against the Numba backend in every mode; a CUDA backend broken on purpose
fails that comparison (so it runs the code); blocks and threads run in shuffled orders and on host threads;
the disk cache heals; GRADKERN_BACKEND=hostcuda makes it the default of NumPy launches. Skipped where g++ is
missing (with that reason)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import zlib

import numpy as np
import pytest
from support.signatures import all_signatures

import gradkern as gk
from gradkern.backends import backend, set_default
from gradkern.backends.hostcuda import compiler

pytestmark = pytest.mark.skipif(compiler() is None, reason="g++ is not on the PATH: backend hostcuda is unavailable")



@functools.cache
def signatures(copy: int) -> dict:
    """label -> Signature, with arrays of their own: the n-th call of all_signatures() (seeded, so every copy
    holds the same values, views and aliases as the others)."""
    return {s.label: s for s in all_signatures()}


LABELS = sorted(signatures(0))


def _reverse(label: str) -> bool:
    s = signatures(0)[label]
    return s.mode is gk.Reverse and not any(isinstance(a, gk.BatchDuplicated) for a in s.args)


def _sampled(label: str) -> bool:
    """The signatures CI runs: every tenth by a stable hash, plus every racy launch and every signature of the
    families where the CUDA path has code of its own (4-D/5-D arrays, local arrays, tapes), and the vector-lane
    signatures of the small test kernels. The lanes of the library's and the HPC ports' kernels (d2q9, 2-D/3-D
    stencils, syrk...) are `full`: the same lane code on bodies whose Numba references cost 10-40 s of CPU
    each, 480 s of the sample's 970 (session 37, under load); like the rest of the corpus they run with -m full."""
    family = label.split("/")[0]
    lanes = label.endswith("/batch") or label.endswith("/batch-tangent")
    if label == "library/d2q9_step":  # drawn by the hash; its Numba reference 28 s of CPU cold (session 53): `full`
        return False
    return (zlib.crc32(label.encode()) % 10 == 0 or family in ("racy", "dims", "local", "tape")
            or (lanes and family not in ("library", "hpc")))


# The rest of the corpus is marked `full` and deselected by default (pyproject.toml's addopts; run it with
# `python -m pytest -m full tests/backends/test_hostcuda.py`): its Numba references alone (split mode for every
# reverse case, which no other test file compiles) took over 40 minutes on the 2-core CI machine from a cold
# cache, past CI's budget (docs/hostcuda.md, "CI time").
_REST = [pytest.mark.full]


def _params(labels, sampled=_sampled):
    return [pytest.param(label, marks=() if sampled(label) else _REST) for label in labels]


def _split_sampled(label: str) -> bool:
    """The split-mode signatures CI runs: the taped families (where split mode's tape crosses from the augmented
    primal to the reverse) and one in forty of the rest. Split mode's Numba references are compiled by no other
    test file: each costs seconds cold, and the whole sample's took most of this file's CI time."""
    return label.split("/")[0] in ("tape", "local") or zlib.crc32(label.encode()) % 40 == 0


def _bounds_sampled(label: str) -> bool:
    """The signatures CI runs bounds-checked (GRADKERN_BOUNDSCHECK=1): one in fifty by a stable hash, outside
    the library's and the HPC ports' long bodies, whose checked Numba references cost the most to compile."""
    return zlib.crc32(label.encode()) % 50 == 7 and label.split("/")[0] not in ("library", "hpc")


# ---- running a signature on a backend ---------------------------------------------------------------------------

def run(s, backend_name: str, split: bool = False):
    """Run signature `s` as its test does, on `backend_name`: returns (its arguments after, the call's result)."""
    if s.mode is None:
        # no dim: the shape of the first array argument (docs/getting-started.md), as autodiff takes it
        dim = s.dim if s.dim is not None else next(a.shape for a in s.args if isinstance(a, np.ndarray))
        gk.launch(s.kernel, dim, *s.args, backend=backend_name)
        return s.args, None
    if split:
        forward, reverse = gk.autodiff_thunk(s.kernel, *(type(a) if isinstance(a, gk.Annotation) else gk.Const
                                                         for a in s.args), dim=s.dim, backend=backend_name)
        args = tuple(a if isinstance(a, gk.Annotation) else gk.Const(a) for a in s.args)
        return args, reverse(*args, forward(*args))
    return s.args, gk.autodiff(s.kernel, *s.args, dim=s.dim, mode=s.mode, backend=backend_name)


def outputs(args: tuple, result) -> list[tuple[str, object]]:
    """Every array a call may change and every number it returns, named."""
    out = []
    for n, a in enumerate(args):
        if isinstance(a, np.ndarray):
            out.append((f"argument {n}", a))
        elif isinstance(a, gk.BatchDuplicated):
            out.append((f"argument {n}", a.val))
            out += [(f"argument {n} lane {k}", d) for k, d in enumerate(a.dvals) if isinstance(d, np.ndarray)]
        elif isinstance(a, gk.Annotation) and isinstance(getattr(a, "val", None), np.ndarray):
            out.append((f"argument {n}", a.val))
            dval = getattr(a, "dval", None)
            if isinstance(dval, np.ndarray):
                out.append((f"argument {n} shadow", dval))
    if result is not None:
        for n, r in enumerate(result):
            if r is not None:
                out.append((f"result {n}", np.asarray(r)))
    return out


def sums_in_another_order(s, backend_name: str = "hostcuda") -> bool:
    """Whether the call adds into shared elements atomically (an atomic target, an Active scalar's sum): then
    the order of those sums is the schedule's, on a GPU as on hostcuda, and differs from the CPU backend's
    per-chunk privatised sums."""
    ins = gk.inspect(s.kernel, *s.args, dim=s.dim, mode=s.mode, backend=backend_name)
    return any("_gkb_atomic_add(" in src for src in ins.sources.values())


# Tolerance where sums run in another order. Two orders of the same n terms t_k differ by at most
# 2 (n - 1) u Σ|t_k| (u the unit roundoff: 2^-53 in float64, 2^-24 in float32). The corpus adds at most a few
# hundred terms into one element, each no larger than a few times the largest result: (n - 1) u Σ|t_k| stays
# below 1e-12 max|result| in float64 and 1e-5 max|result| in float32 (n <= 80: the float32 cases are the
# corpus's small ones). The same criterion as tests/gpu/test_gpu.py's CuPy comparison.
RTOL = {"float32": 1e-5, "float64": 1e-12}


def assert_same(got_out, want_out, reordered: bool, label: str) -> None:
    assert [w for w, _ in got_out] == [w for w, _ in want_out], label
    for (what, got), (_, want) in zip(got_out, want_out):
        got, want = np.asarray(got), np.asarray(want)
        where = f"{label}: {what}"
        assert got.dtype == want.dtype and got.shape == want.shape, where
        if got.dtype.kind != "f" or not reordered:
            # bit for bit: the same operations in the same order (-0.0 and NaN payloads included)
            same = got.view(f"u{got.itemsize}") == want.view(f"u{want.itemsize}")
            bad = np.flatnonzero(~same.reshape(-1))
            assert bad.size == 0, (f"{where}: {bad.size} of {got.size} elements differ in their bits, first at "
                                   f"{bad[0]}: {got.reshape(-1)[bad[0]]!r} (hostcuda) vs {want.reshape(-1)[bad[0]]!r}")
            continue
        rtol = RTOL[got.dtype.name]
        atol = rtol * float(np.max(np.abs(want))) if want.size else 0.0
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=where)


# The reference hostcuda's outputs must equal: the reference interpreter (backends/interp.py), which runs the same
# typed IR as every backend, each operation in IEEE double or single precision in the threads' order, and needs no
# compile. Numba's compile of each reference was two thirds of this file's CI time (session 59: 21 signatures,
# 58 s of CPU against Numba, 17 s against the interpreter, every one bit for bit); Numba's agreement with the
# interpreter is tested on its own (tests/ir/test_property.py, the fuzzers, tests/backends/test_kernels.py).
# GRADKERN_HOSTCUDA_REFERENCE=cpu compares with the Numba backend instead, as before session 59 (docs/hostcuda.md).
REFERENCE = os.environ.get("GRADKERN_HOSTCUDA_REFERENCE", "interp")


def differential(label: str, split: bool = False, copies: tuple[int, int] | None = None) -> None:
    """Signature `label` on hostcuda equals it on REFERENCE (racy ones: both refuse, nothing changed),
    each run on a copy of its arguments no other test runs."""
    host, cpu = (signatures(n)[label] for n in (copies or ((3, 4) if split else (1, 2))))
    if label.startswith("racy/"):
        before = [a.copy() for a in host.args if isinstance(a, np.ndarray)]
        with pytest.raises(gk.RaceError):
            run(host, "hostcuda")
        with pytest.raises(gk.RaceError):
            run(cpu, REFERENCE)
        for a, b in zip([a for a in host.args if isinstance(a, np.ndarray)], before):
            np.testing.assert_array_equal(a, b)
        return
    got = outputs(*run(host, "hostcuda", split))
    want = outputs(*run(cpu, REFERENCE, split))
    assert_same(got, want, sums_in_another_order(signatures(0)[label]), label + (" (split)" if split else ""))


@pytest.mark.parametrize("label", _params(LABELS))
def test_signature_on_hostcuda_equals_cpu(label):
    differential(label)


@pytest.mark.parametrize("label", _params([label for label in LABELS if _reverse(label)], _split_sampled))
def test_split_reverse_on_hostcuda_equals_cpu(label):
    differential(label, split=True)


# ---- the source is the CUDA backend's ----------------------------------------------------------------------------

@pytest.mark.parametrize("label", _params(LABELS, _bounds_sampled))
def test_bounds_checked_signature_on_hostcuda_equals_cpu(label, monkeypatch):
    """Every access checked in the generated code, on the CUDA path as on the CPU: the same results, and the
    same refusals with nothing changed."""
    monkeypatch.setenv("GRADKERN_BOUNDSCHECK", "1")
    differential(label, copies=(5, 6))


@pytest.mark.parametrize("label", [label for label in LABELS if _sampled(label)][::4])
def test_source_is_the_cuda_backends_byte_for_byte(label):
    """What hostcuda compiles is the text NVRTC gets: every role's source equals the cuda backend's, and the
    file g++ compiled beside each library run for the call holds those bytes (the bounds-checked variants the
    runtime generates on demand, not among gk.inspect's roles, come from the same inherited generate)."""
    from gradkern.backends.cuda import CudaBackend
    from gradkern.backends.hostcuda import HostCudaBackend
    assert HostCudaBackend.generate is CudaBackend.generate
    s = signatures(0)[label]
    host = gk.inspect(s.kernel, *s.args, dim=s.dim, mode=s.mode, backend="hostcuda")
    cuda = gk.inspect(s.kernel, *s.args, dim=s.dim, mode=s.mode, backend="cuda")
    assert host.sources == cuda.sources and host.source == cuda.source
    assert (host.backend, cuda.backend) == ("hostcuda", "cuda")
    hc = backend("hostcuda")
    seen = len(hc._libraries)
    if not label.startswith("racy/"):
        run(signatures(5)[label], "hostcuda")
    texts = set(cuda.sources.values())
    compiled = list(hc._libraries.values())[seen:]
    for lib in compiled:
        text = lib.path.with_suffix(".cu").read_bytes().decode()
        assert text in texts or "_gk_oob" in text, lib.entry


# ---- proof that it runs the code: a broken CUDA backend fails the differential test ---------------------------

def _fresh_call(make, split: bool = False):
    """(hostcuda's outputs, the CPU's) for two calls built by `make()`."""
    host, cpu = make(), make()
    return outputs(*run(host, "hostcuda", split)), outputs(*run(cpu, REFERENCE, split))


def test_swapped_abi_entries_fail_the_differential_test(monkeypatch):
    """The kernel's arguments marshalled in another order than its signature lists them (the launcher and
    the kernel disagreeing, as a wrong `abi` would make them): hostcuda runs the code, so the results differ."""
    from support.signatures import Signature

    from gradkern.backends.cuda import CudaBackend
    from gradkern.kernels.blas import saxpy

    def make():
        rng = np.random.default_rng(2)
        return Signature("saxpy", saxpy, (1.5, rng.uniform(-1, 1, 40), rng.uniform(-1, 1, 40)), 40)

    saxpy._specs.clear()
    got, want = _fresh_call(make)
    assert_same(got, want, False, "saxpy, intact")
    original = CudaBackend._marshalling

    def swapped(self, typed, code):
        items = list(original(self, typed, code))
        arrays = [n for n, (kind, i, _, _) in enumerate(items) if kind == 1 and i < len(typed.params)
                  and typed.params[i].type.__class__.__name__ == "Array"]
        a, b = arrays[:2]  # saxpy's x and y: the same shape and dtype, so the swap stays inside both
        items[a], items[b] = items[b], items[a]
        return tuple(items)

    monkeypatch.setattr(CudaBackend, "_marshalling", swapped)
    got, want = _fresh_call(make)
    with pytest.raises(AssertionError, match="differ in their bits"):
        assert_same(got, want, False, "saxpy, x and y swapped")


def test_broken_index_arithmetic_fails_the_differential_test(monkeypatch):
    """Row-major offsets printed transposed (i * n1 + j becomes j * n1 + i: inside a square array, so nothing
    is touched outside it): the differential test sees it, in the primal and in the gradient."""
    from support.signatures import Signature

    from gradkern.backends.cuda import CudaSyntax

    @gk.kernel
    def smooth(u, out):
        i, j = gk.tid()
        out[i, j] = u[i, j] * u[i, j] + 0.5 * u[i, (j + 1) % 6]

    def make(mode=None):
        rng = np.random.default_rng(3)
        u, out = rng.uniform(-1, 1, (6, 6)), np.zeros((6, 6))
        if mode is None:
            return Signature("smooth", smooth, (u, out), (6, 6))
        return Signature("smooth", smooth, (gk.Duplicated(u, rng.uniform(-1, 1, (6, 6))),
                                            gk.Duplicated(out, rng.uniform(-1, 1, (6, 6)))), (6, 6), gk.Reverse)

    for mode in (None, gk.Reverse):
        got, want = _fresh_call(lambda mode=mode: make(mode))
        assert_same(got, want, sums_in_another_order(make(mode)), "smooth, intact")
    original = CudaSyntax.index

    def transposed(self, array, indices):
        return original(self, array, indices[::-1] if len(indices) == 2 else indices)

    monkeypatch.setattr(CudaSyntax, "index", transposed)
    smooth._specs.clear()
    for mode in (None, gk.Reverse):
        got, want = _fresh_call(lambda mode=mode: make(mode))
        with pytest.raises(AssertionError):
            assert_same(got, want, sums_in_another_order(make(mode)), "smooth, transposed")
    monkeypatch.undo()
    smooth._specs.clear()


# ---- schedules: shuffled blocks and threads, host threads -------------------------------------------------------

@gk.kernel
def ordered_sum(x, acc):
    i = gk.tid()
    gk.atomic_add(acc, 0, x[i])


def _sum_on_hostcuda(x, shuffle, threads=1) -> float:
    hc = backend("hostcuda")
    before = (hc.shuffle, hc.threads)
    hc.schedule(shuffle, threads)
    try:
        acc = np.zeros(1)
        gk.launch(ordered_sum, x.shape[0], x, acc, backend="hostcuda")
        return float(acc[0])
    finally:
        hc.schedule(*before)


def test_blocks_and_threads_run_in_shuffled_orders():
    """A float sum by atomic adds depends on the order of the adds (its terms span 16 orders of magnitude):
    in order, hostcuda adds thread after thread, block after block, as a serial loop does; shuffled, every
    seed gives an order of its own, the same one each time."""
    rng = np.random.default_rng(0)
    n = 1000  # four blocks of 256 threads
    x = rng.choice([-1, 1], n) * 10.0 ** rng.uniform(-8, 8, n)
    in_order = 0.0
    for v in x:
        in_order += v
    assert _sum_on_hostcuda(x, None) == in_order
    shuffled = [_sum_on_hostcuda(x, seed) for seed in range(4)]
    assert shuffled[0] == _sum_on_hostcuda(x, 0)  # reproducible from its seed
    assert len(set(shuffled) | {in_order}) >= 4, shuffled
    assert all(v == pytest.approx(in_order, abs=1e-8 * np.abs(x).sum()) for v in shuffled)


@pytest.mark.parametrize("threads", [1, 3])
def test_every_thread_runs_once_in_any_schedule(threads):
    """More threads than the grid holds (the grid-stride loop runs several times per CUDA thread), shuffled,
    on host threads: every element is written once, with its own value."""
    from gradkern.kernels.blas import saxpy
    n = 40_000  # > 64 blocks of 256 threads: the grid-stride loop turns about three times
    x, y = np.arange(n, dtype=np.float64), np.ones(n)
    hc = backend("hostcuda")
    hc.schedule(7, threads)
    try:
        gk.launch(saxpy, n, 2.0, x, y, backend="hostcuda")
    finally:
        hc.schedule(None, 1)
    np.testing.assert_array_equal(y, 2.0 * np.arange(n) + 1.0)


@pytest.mark.parametrize("label", ["reverse/scatter_hist", "reverse/matvec", "hpc/lud_col", "library/spmv_t",
                                   "library/cic_deposit", "gather/periodic_2d", "racy/scatter",
                                   "racy/data_dependent_target", "reverse/scatter_hist/tangent"])
def test_shuffled_schedules_on_host_threads_equal_cpu(label):
    """Signatures with atomics and run-time checks, their blocks shuffled and run on three host threads (the
    atomics contend for real) and their race checks' two-launch form included: still the CPU's results."""
    hc = backend("hostcuda")
    hc.schedule(11, 3)
    try:
        differential(label, copies=(6, 7))
    finally:
        hc.schedule(None, 1)


# ---- choosing it --------------------------------------------------------------------------------------------------

def test_set_default_makes_hostcuda_the_backend_of_numpy_launches(monkeypatch):
    """The default of NumPy launches (GRADKERN_BACKEND, or set_default in a process) is part of every cache key:
    a signature launched on the CPU before runs on hostcuda after the switch, and back."""
    from gradkern.kernels.blas import saxpy
    x, y = np.arange(8.0), np.ones(8)
    gk.launch(saxpy, 8, 2.0, x, y)
    assert gk.inspect(saxpy, 2.0, x, y).backend == "cpu"
    hc = backend("hostcuda")
    grids = []
    launch = hc.launch
    monkeypatch.setattr(hc, "launch", lambda lib, grid, block, args: (grids.append(grid),
                                                                      launch(lib, grid, block, args)))
    before = set_default("hostcuda")
    try:
        gk.launch(saxpy, 8, 2.0, x, y)
        assert gk.inspect(saxpy, 2.0, x, y).backend == "hostcuda"
        assert grids == [1]  # one block of the CUDA C ran
    finally:
        set_default(before)
    np.testing.assert_array_equal(y, 4.0 * np.arange(8) + 1.0)
    assert gk.inspect(saxpy, 2.0, x, y).backend == "cpu"
    with pytest.raises(gk.LaunchError, match="must be one of"):
        set_default("cuda")


PROGRAM = r'''
import json, os, sys
import numpy as np
import gradkern as gk
from gradkern.backends import backend, set_default
from gradkern.kernels.stencils import allen_cahn_step
from gradkern.testing import check_grad

def steps(u, un, c, dt):
    for _ in range(3):
        gk.launch(allen_cahn_step, u.shape[0], u, un, c, dt)
        gk.launch(allen_cahn_step, u.shape[0], un, u, c, dt)

rng = np.random.default_rng(0)
u = rng.uniform(0.2, 1.0, 32)
du, dun = np.zeros(32), rng.uniform(-1, 1, 32)
grads = gk.autodiff(steps, gk.Duplicated(u.copy(), du), gk.Duplicated(np.zeros(32), dun), gk.Active(0.2), 0.01)
check_grad(steps, gk.Duplicated(u.copy(), np.zeros(32)), gk.Duplicated(np.zeros(32), np.zeros(32)), gk.Active(0.2),
           0.01)
print(json.dumps({"inspect": gk.inspect(allen_cahn_step, u, np.zeros(32), 0.2, 0.01).backend,
                  "libraries": sorted({lib.entry for lib in backend("hostcuda")._libraries.values()}),
                  "grad": grads[2]}))
'''


def test_gradkern_backend_runs_programs_on_hostcuda(tmp_path):
    """GRADKERN_BACKEND=hostcuda: a program's launches, its reverse sweep and check_grad all run the CUDA C."""
    import json
    env = {**os.environ, "GRADKERN_BACKEND": "hostcuda"}  # the installed gradkern (its kernels/ is gradkern.kernels)
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["inspect"] == "hostcuda"
    assert {"allen_cahn_step_1d", "allen_cahn_step_grad_1d"} & set(out["libraries"]), out["libraries"]
    bad = subprocess.run([sys.executable, "-c", "import gradkern as gk, numpy as np\n"
                          "from gradkern.kernels.blas import saxpy\ngk.launch(saxpy, 2, 1.0, np.ones(2), np.ones(2))"],
                         capture_output=True, text=True, env={**env, "GRADKERN_BACKEND": "gpu"}, timeout=600)
    assert bad.returncode != 0 and "GRADKERN_BACKEND='gpu'" in bad.stderr


def test_without_gpp_the_backend_says_so_by_name(monkeypatch):
    import gradkern.backends.hostcuda as hostcuda

    @gk.kernel
    def twice(x):
        i = gk.tid()
        x[i] = 2.0 * x[i]

    monkeypatch.setattr(hostcuda, "compiler", lambda: None)
    x = np.ones(4)
    with pytest.raises(gk.BackendUnavailableError, match=r"g\+\+, which is not on the PATH"):
        gk.launch(twice, 4, x, backend="hostcuda")
    np.testing.assert_array_equal(x, 1.0)
    assert gk.inspect(twice, x, backend="hostcuda").source  # generating needs no compiler


# ---- the disk cache heals -----------------------------------------------------------------------------------------

def _flipped(data: bytes) -> bytes:
    """`data` with one bit flipped in its first executable segment (PT_LOAD with PF_X): machine code."""
    import struct
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for k in range(phnum):
        kind, flags, offset, _, _, filesz = struct.unpack_from("<IIQQQQ", data, phoff + k * phentsize)
        if kind == 1 and flags & 1 and filesz:
            out = bytearray(data)
            out[offset + filesz // 2] ^= 0x10
            return bytes(out)
    raise AssertionError("no executable segment")


def test_damaged_libraries_are_rebuilt_with_one_warning(tmp_path, monkeypatch):
    """A library that does not load, or loads but was built from another source, or is cut short, or a directory
    in its place, is discarded and rebuilt with one CacheWarning; so is a source file that is not what gradkern
    wrote. Each damage is made in a copy of the cache no library of this process was loaded from (the dynamic
    loader hands back a loaded library by its path, and writing over a mapped one would crash the process)."""
    import shutil

    from gradkern.backends.hostcuda import HostCudaBackend
    from gradkern.ir.types import F64, Array
    from gradkern.kernels.blas import saxpy, scal
    from gradkern.pipeline import specialize

    a = specialize(saxpy.ir, {"a": F64, "x": Array(F64, 1), "y": Array(F64, 1)}, 1, "hostcuda")
    b = specialize(scal.ir, {"a": F64, "x": Array(F64, 1)}, 1, "hostcuda")

    def works(cache):
        x, y = np.arange(5.0), np.ones(5)
        lib = HostCudaBackend().compile(a.code, cache)  # a fresh object: nothing kept in memory
        HostCudaBackend.run(backend("hostcuda"), a.typed, a.code, lib, True, (5,), [np.float64(2.0), x, y])
        np.testing.assert_array_equal(y, 2.0 * x + 1.0)
        return lib.path

    built = works(tmp_path / "built").name
    other = HostCudaBackend().compile(b.code, tmp_path / "built").path.name

    def copy(n):
        cache = tmp_path / f"copy{n}"
        shutil.copytree(tmp_path / "built", cache)
        return cache, cache / "hostcuda" / built

    damages = [lambda path: path.write_bytes(b"not a library"),  # does not load
               lambda path: shutil.copy(path.with_name(other), path),  # loads, but is another source's
               lambda path: (path.unlink(), path.mkdir()),  # a directory where the file goes
               # cut short (a killed write): loading it crashed the process with SIGBUS; cut in its tail, it loaded
               lambda path: path.write_bytes(path.read_bytes()[: path.stat().st_size // 2]),
               lambda path: path.write_bytes(path.read_bytes()[:-1]),
               # one bit flipped in its code, the size kept: it loaded and ran (docs/caching.md#checksums)
               lambda path: path.write_bytes(_flipped(path.read_bytes())),
               lambda path: path.write_bytes(b""),  # zero bytes
               lambda path: (path.unlink(), path.symlink_to(path.name))]  # a symbolic link to itself
    for n, damage in enumerate(damages):
        cache, path = copy(n)
        damage(path)
        with pytest.warns(gk.CacheWarning, match="damaged"):
            assert works(cache) == path
    cache, path = copy(len(damages))
    path.unlink()
    path.with_suffix(".cu").write_text("garbage")  # rewritten before it is compiled
    with pytest.warns(gk.CacheWarning, match="not the source gradkern wrote"):
        works(cache)

    # a library without read permission; root reads whatever the mode, so for root the read fails as a user's would
    from pathlib import Path
    cache, path = copy(len(damages) + 1)
    path.chmod(0)
    if os.access(path, os.R_OK):
        from gradkern.backends import hostcuda
        real, denied = hostcuda.read_file, [path]

        def read_file(file):  # every cache file is read through cache_files.read_file
            if denied and Path(file) == denied[0]:
                denied.clear()
                raise PermissionError(13, "Permission denied", str(file))
            return real(file)
        monkeypatch.setattr(hostcuda, "read_file", read_file)
    with pytest.warns(gk.CacheWarning, match="PermissionError"):
        assert works(cache) == path


def test_a_full_disk_is_a_clear_error_not_an_oserror(tmp_path, monkeypatch):
    """Where neither the cache directory nor a private temporary one can take the library (a full disk), the
    launch raised the OSError of a file write; a library must be a file to be loaded, so there is no memory
    fallback: BackendUnavailableError names both directories, after the one CacheWarning, nothing touched."""
    import errno

    from gradkern.backends import hostcuda

    @gk.kernel
    def thrice_on_a_full_disk(x):
        i = gk.tid()
        x[i] = 3.0 * x[i]

    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(hostcuda, "write_exact", full)
    monkeypatch.setattr(hostcuda, "_memory_dir", [])
    monkeypatch.setenv("GRADKERN_CACHE_DIR", str(tmp_path / "cache"))
    x = np.ones(4)
    with pytest.warns(gk.CacheWarning, match="cannot use the cache directory"):
        with pytest.raises(gk.BackendUnavailableError, match="No space left on device") as info:
            gk.launch(thrice_on_a_full_disk, 4, x, backend="hostcuda")
    assert str(tmp_path / "cache") in str(info.value) and "GRADKERN_CACHE_DIR" in info.value.hint
    np.testing.assert_array_equal(x, 1.0)


INTEGER_DIVISION = r'''
import numpy as np
import gradkern as gk


@gk.kernel
def divide(idx, out, m):
    i = gk.tid()
    out[i] = float(idx[i] // m) + 0.5 * float(idx[i] % m) + float(i // m)


for m in (0, -1):
    for backend in ("interp", "hostcuda"):
        idx, out = np.array([7, -7, -2 ** 63]), np.zeros(3)
        gk.launch(divide, 3, idx, out, m, backend=backend)
        print(backend, m, out.tolist())
'''


def test_integer_division_by_zero_and_minus_one_does_not_trap(tmp_path):
    """Found by the language fuzzer (tests/fuzz/test_language_fuzz.py): `idx[i] // m` with m = 0 killed the
    process with SIGFPE on hostcuda (C's integer division traps), as did INT64_MIN // -1. They now give the
    interpreter's (NumPy's) values: 0 for // 0 and % 0, the wrapped negation for // -1 and 0 for % -1."""
    script = tmp_path / "divide.py"
    script.write_text(INTEGER_DIVISION)
    result = subprocess.run([sys.executable, "-W", "ignore", str(script)], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, (result.returncode, result.stderr[-3000:])
    rows = {tuple(line.split(" ", 2)[:2]): line.split(" ", 2)[2] for line in result.stdout.splitlines()}
    for m in ("0", "-1"):
        assert rows["hostcuda", m] == rows["interp", m], (m, rows)
    assert rows["hostcuda", "0"] == "[0.0, 0.0, 0.0]"


RACER = r'''
import sys
import warnings

import numpy as np

import gradkern as gk


@gk.kernel
def raced(x, y):
    i = gk.tid()
    y[i] = 3.0 * x[i] + 0.5


with warnings.catch_warnings():
    warnings.simplefilter("error", gk.CacheWarning)  # a race must never look like damage
    x, y = np.arange(8.0), np.zeros(8)
    gk.launch(raced, 8, x, y, backend="hostcuda")
print("ok" if y.tolist() == (3.0 * x + 0.5).tolist() else f"wrong {y.tolist()}")
'''


def test_processes_building_one_library_at_once_share_it(tmp_path):
    """Four processes compile the same kernel into an empty hostcuda cache at the same moment: each builds into
    a temporary file of its own and moves it in place, so every one loads a whole, sealed library (no
    CacheWarning, no crash), and a fifth process loads the one left behind without building."""
    import concurrent.futures

    from gradkern.backends.cache_files import unseal

    script = tmp_path / "racer.py"
    script.write_text(RACER)
    env = {**os.environ, "GRADKERN_CACHE_DIR": str(tmp_path / "cache")}

    def race(_):
        return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(race, range(4)))
    for run in runs:
        assert run.returncode == 0 and run.stdout.strip() == "ok", (run.stdout, run.stderr[-3000:])
    (library,) = (tmp_path / "cache").rglob("gk_*.so")
    unseal(library.read_bytes())  # whole: raises if not
    assert not list((tmp_path / "cache").rglob(".*.tmp")), "a temporary file was left behind"
    built = library.stat().st_mtime_ns
    last = race(None)
    assert last.returncode == 0 and last.stdout.strip() == "ok", last.stderr[-3000:]
    assert library.stat().st_mtime_ns == built
