"""The test backend `hostcuda`: the CUDA path without a GPU (docs/hostcuda.md).

It is the CUDA backend in every respect but where the code runs: the source is
the CUDA backend's, unchanged (the very text NVRTC gets), compiled by g++ as
host C++ after `hostcuda_runtime.h`, which supplies what CUDA provides
(`dim3`, `threadIdx`, `atomicAdd`, ...); a launch goes through the CUDA
backend's own `run` (its ABI: extents, strides, scalar types, grid and block)
to a stand-in for `cupy.RawKernel` that lays the arguments out as the CUDA
driver's kernelParams and loops over the grid on the host: block after block,
each block's threads one after another. The generated kernels are grid-stride
loops with no shared memory and no `__syncthreads`, so any order of blocks and
of threads within a block is a schedule a GPU may take: `shuffle` (a seed;
$GRADKERN_HOSTCUDA_SHUFFLE) draws a new order for each launch, and `threads`
($GRADKERN_HOSTCUDA_THREADS) runs blocks on that many host threads, whose
atomics then contend for real. Tapes, counters and accumulators are NumPy
arrays. Compiled libraries are cached on disk by source hash, healed as
Numba's cache is (cache_files.py).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import hashlib
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BackendUnavailableError, InternalError, LaunchError
from .base import Generated
from .cache_files import discard, make_folders, read_file, replace_with, seal, unseal, warn, warn_damaged, write_exact
from .cuda import LIBM, CudaBackend

HEADER = Path(__file__).with_name("hostcuda_runtime.h")
COMPILER = "g++"
# -O1: the suite's kernels run on a few hundred elements, so compile time is what CI pays; -O1 compiles as fast
# as -O0 and runs several times faster (measured in docs/hostcuda.md, "Compile time"). -ffp-contract=off: no FMA
# contraction (the host's results are then those of the CPU backend, operation for operation; a GPU contracts,
# which only a GPU run checks). -fwrapv: int64 arithmetic wraps, as the kernel language defines it.
FLAGS = ("-std=c++20", "-shared", "-fPIC", "-O1", "-fvisibility=hidden", "-ffp-contract=off", "-fwrapv")
# what a cached library is: part of its key, so a library of an earlier format (without its checksum trailer,
# cache_files.seal) is another file, never read: a plain miss, not damage
FORMAT = "gradkern-hostcuda-2"
ENTRY = "gk_hostcuda_launch"  # the launcher every library exports (hostcuda_runtime.h)
# the C library functions of the op table (ir/ops.py) that the CUDA prelude wraps (backends/cuda.py, _MATH), for
# float and double: CUDA's headers declare them; here each launcher does, before the source (no <cmath>: below)
DECLARATIONS = 'extern "C" {\n' + "".join(
    f"double {f}({', '.join(['double'] * n)}) noexcept; float {f}f({', '.join(['float'] * n)}) noexcept;\n"
    for f, n in LIBM) + "}\n"


def compiler() -> str | None:
    """The path of g++, or None where it is not on the PATH."""
    return shutil.which(COMPILER)


def unavailable() -> BackendUnavailableError:
    return BackendUnavailableError(f"backend='hostcuda' compiles the generated CUDA C as host C++ with {COMPILER}, "
                                   f"which is not on the PATH", hint=f"install {COMPILER} (e.g. apt-get install g++), "
                                   "or run on another backend")


_identity: list[str] = []


def _compiler_identity(cxx: str) -> str:
    """The compiler's version and target: part of every library's key, so another g++ rebuilds."""
    if not _identity:
        out = [subprocess.run([cxx, flag], capture_output=True, text=True).stdout.strip()
               for flag in ("-dumpfullversion", "-dumpmachine")]
        _identity.append(f"{cxx} {' '.join(out)}")
    return _identity[0]


class _Damaged(Exception):
    """A cached library that exists but does not load, or is not the one its name promises."""


class Library:
    """One generated kernel compiled for the host; called as CuPy calls a RawKernel:
    `kernel((grid,), (block,), args)`, `args` as the CUDA backend's `run` marshals them."""

    __slots__ = ("backend", "entry", "launcher", "handle", "path")

    def __init__(self, backend: HostCudaBackend, entry: str, launcher: Any, handle: Any, path: Path):
        self.backend, self.entry, self.launcher, self.handle = backend, entry, launcher, handle
        self.path = path  # the shared library; its source, byte for byte the CUDA backend's, is path.with_suffix(".cu")

    def __call__(self, grid: tuple[int], block: tuple[int], args: tuple) -> None:
        self.backend.launch(self, grid[0], block[0], args)


def pack(args: tuple) -> bytes:
    """The arguments in 8-byte slots, in order: an array as the address of its first element (what CuPy
    passes for a cupy.ndarray), a scalar as its bytes at the slot's start, in the type the CUDA backend's
    marshalling converted it to (np.int64 extents and strides, the kernel's np.float32, np.bool_, ...)."""
    slots = bytearray(8 * len(args))
    for k, a in enumerate(args):
        if isinstance(a, np.ndarray):
            struct.pack_into("=Q", slots, 8 * k, a.__array_interface__["data"][0])
        elif isinstance(a, np.generic):
            data = a.tobytes()
            slots[8 * k:8 * k + len(data)] = data
        elif isinstance(a, bool):
            struct.pack_into("=?", slots, 8 * k, a)
        elif isinstance(a, int):
            struct.pack_into("=q", slots, 8 * k, a)
        elif isinstance(a, float):
            struct.pack_into("=d", slots, 8 * k, a)
        else:
            raise LaunchError(f"backend='hostcuda' cannot pass a {type(a).__name__} to a kernel",
                              hint="pass NumPy arrays and numbers")
    return bytes(slots)


class HostCudaBackend(CudaBackend):
    """The CUDA backend's code and marshalling, run on the host (module docstring)."""

    name = "hostcuda"
    #: the CUDA backend's grid size is min(blocks of work, 32 per multiprocessor): two "multiprocessors" cap a
    #: grid at 64 blocks, so a launch past 16384 threads runs the grid-stride loop more than once per thread
    multiprocessors = 2

    def summation(self, code: Generated, accumulator: str, parallel: bool) -> str:
        said = super().summation(code, accumulator, parallel)
        if said.startswith("per-block"):  # the host's threads run one at a time: no block to sum over
            return ("each thread sums its elements' terms in a register and adds its sum once by an atomic add "
                    "(on a GPU, once per block: docs/hostcuda.md)")
        return said

    def __init__(self):
        super().__init__()
        shuffle = os.environ.get("GRADKERN_HOSTCUDA_SHUFFLE", "")
        threads = os.environ.get("GRADKERN_HOSTCUDA_THREADS", "")
        try:
            self.shuffle: int | None = int(shuffle) if shuffle else None
            self.threads = int(threads) if threads else 1
            if self.shuffle is not None and self.shuffle < 0:
                raise ValueError  # NumPy's generators take seeds >= 0
        except ValueError:
            raise LaunchError(f"GRADKERN_HOSTCUDA_SHUFFLE={shuffle!r} and GRADKERN_HOSTCUDA_THREADS={threads!r} "
                              "must be integers (a seed >= 0; a count of host threads)") from None
        self._rng = np.random.default_rng(self.shuffle)
        self._pool: ThreadPoolExecutor | None = None
        self._libraries: dict[tuple[str, str], Library] = {}
        self._lock = threading.Lock()

    def schedule(self, shuffle: int | None = None, threads: int = 1) -> None:
        """Run blocks, and threads within a block, in an order drawn anew for each launch from seed `shuffle`
        (None: in order), on `threads` host threads."""
        self.shuffle, self.threads = shuffle, max(1, int(threads))
        self._rng = np.random.default_rng(shuffle)
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    # generate: CudaBackend's, the same text NVRTC gets; run: CudaBackend's marshalling, which calls a Library

    def compile(self, code, cache: Path) -> Library:
        key = (code.source, code.entry)
        lib = self._libraries.get(key)
        if lib is None:
            with self._lock:
                lib = self._libraries.get(key)
                if lib is None:
                    launcher, handle, path = build(code.source, code.entry, cache / "hostcuda")
                    lib = self._libraries[key] = Library(self, code.entry, launcher, handle, path)
        return lib

    def _multiprocessors(self) -> int:
        return self.multiprocessors

    def array_module(self) -> Any:
        return np

    def launch(self, lib: Library, grid: int, block: int, args: tuple) -> None:
        """Run the grid: blocks in order or shuffled, each one's threads one after another."""
        slots = pack(args)
        if self.shuffle is None:
            blocks = np.arange(grid, dtype=np.int64)
            threads = None
        else:
            blocks = self._rng.permutation(grid).astype(np.int64)
            threads = self._rng.permuted(np.tile(np.arange(block, dtype=np.int64), (grid, 1)), axis=1)
        parts = min(self.threads, grid)
        if parts <= 1:
            lib.launcher(slots, grid, block, blocks.ctypes.data, grid, _address(threads, 0, block))
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="gradkern-hostcuda")
        bounds = np.linspace(0, grid, parts + 1).astype(int)
        futures = [self._pool.submit(lib.launcher, slots, grid, block, blocks.ctypes.data + 8 * int(lo), int(hi - lo),
                                     _address(threads, int(lo), block))
                   for lo, hi in zip(bounds[:-1], bounds[1:])]
        for f in futures:
            f.result()


def _address(threads: np.ndarray | None, first_block: int, block: int) -> int | None:
    return None if threads is None else threads.ctypes.data + 8 * first_block * block


# ---- the disk cache of compiled libraries ---------------------------------------------------------------------

_memory_dir: list[Path] = []  # a private directory, where the cache directory cannot be used


def build(source: str, entry: str, directory: Path) -> tuple[Any, Any, Path]:
    """The launcher of `source`'s `entry`, compiled once per machine: `directory/gk_<hash>.so`, built from
    `gk_<hash>.cu` (the source, byte for byte) and `gk_<hash>.cpp` (the launcher, which includes it); returns
    (launcher, library handle, library path). A damaged
    entry is discarded and rebuilt, with one CacheWarning; an unusable directory falls back to a private one
    for the rest of the process."""
    cxx = compiler()
    if cxx is None:
        raise unavailable()
    header = HEADER.read_bytes()
    digest = hashlib.sha256()
    for part in (FORMAT.encode(), source.encode(), entry.encode(), header, DECLARATIONS.encode(),
                 " ".join(FLAGS).encode(), _compiler_identity(cxx).encode()):
        digest.update(len(part).to_bytes(8, "little") + part)
    key = digest.hexdigest()[:32]
    if not _memory_dir:
        try:
            return _build_in(directory, key, source, entry, cxx)
        except OSError as e:
            _memory_dir.append(_private_dir())
            warn(f"cannot use the cache directory {directory} ({e}); compiled code is kept in {_memory_dir[0]} "
                 "for the rest of this process (set GRADKERN_CACHE_DIR to a writable directory)")
    try:
        return _build_in(_memory_dir[0], key, source, entry, cxx)
    except OSError as e:  # a full disk: a library must be a file to be loaded, so there is no fallback
        raise BackendUnavailableError(f"hostcuda cannot write the library it compiles for '{entry}' into "
                                      f"{directory} nor into {_memory_dir[0]} ({e})",
                                      hint="free disk space, or set GRADKERN_CACHE_DIR (and TMPDIR) to a "
                                      "writable directory") from None


def _private_dir() -> Path:
    """A temporary directory for the rest of the process, removed when it exits (docs/caching.md#temporary-files):
    the libraries loaded from it stay mapped while it runs."""
    path = Path(tempfile.mkdtemp(prefix="gradkern-hostcuda-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def _build_in(directory: Path, key: str, source: str, entry: str, cxx: str) -> tuple[Any, Any, Path]:
    make_folders(directory, owned=2)  # v<version>/hostcuda
    name = f"gk_{key}"
    library = directory / f"{name}.so"
    if os.path.lexists(library):  # a symbolic link that leads nowhere is damage too
        try:
            return _load(library, key)
        except _Damaged as e:
            discard(library)
            warn_damaged(library, str(e))
    write_exact(directory / f"{name}.cu", source.encode())
    wrapper = (f"// the hostcuda launcher of {entry} (gradkern: backends/hostcuda.py)\n{DECLARATIONS}"
               f'#include "{name}.cu"\nGK_HOSTCUDA_LAUNCHER({entry})\n'
               f'extern "C" __attribute__((visibility("default"))) const char gk_hostcuda_key[] = "{key}";\n')
    write_exact(directory / f"{name}.cpp", wrapper.encode())

    def compile_to(tmp: Path) -> None:
        done = run_compiler([cxx, *FLAGS, "-include", str(HEADER), "-o", str(tmp), str(directory / f"{name}.cpp"),
                             "-lm"])
        if done.returncode != 0:
            raise InternalError(f"g++ refused the CUDA C generated for '{entry}' (a gradkern bug: the CUDA printer or "
                                f"backends/hostcuda_runtime.h); {directory / f'{name}.cu'}:\n{done.stderr[-4000:]}")
        tmp.write_bytes(seal(tmp.read_bytes()))  # its checksum after the ELF file's last byte, ignored by the loader

    replace_with(library, compile_to)
    try:
        return _load(library, key)
    except _Damaged as e:
        raise InternalError(f"the library g++ just built for '{entry}' does not load: {e}") from None


def run_compiler(argv: list[str]) -> subprocess.CompletedProcess:
    """Run the compiler `argv` (its output as text) in a process group of its own, with a private TMPDIR removed
    after it (docs/caching.md#temporary-files). Whatever interrupts the wait (Ctrl-C), the whole group is killed:
    subprocess.run killed the g++ driver alone, and its compiler pass (cc1plus) ran on, orphaned, leaving its
    `ccXXXXXX.s` in TMPDIR for good."""
    with tempfile.TemporaryDirectory(prefix="gradkern-gxx-") as private:
        proc = None
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env={**os.environ, "TMPDIR": private}, start_new_session=True)
            out, err = proc.communicate()
        except BaseException:
            if proc is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            else:  # interrupted inside Popen, once the compiler had started: no pid came back (session 62)
                _kill_marked(f"TMPDIR={private}".encode())
            raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _kill_marked(marker: bytes) -> None:
    """SIGKILL every process of ours whose environment holds `marker` (a private TMPDIR: the compiler and its
    passes): the compile a Ctrl-C interrupted inside subprocess.Popen, after the fork, when no Popen object (no
    pid) came back. Linux's /proc; elsewhere nothing (the compiler finishes on its own)."""
    with contextlib.suppress(OSError):
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
        for pid in pids:
            with contextlib.suppress(OSError):
                with open(f"/proc/{pid}/environ", "rb") as f:
                    marked = marker in f.read().split(b"\0")
                if marked:
                    os.kill(pid, signal.SIGKILL)
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(pid, 0)  # our own child (the driver Popen forked): reaped, not left a zombie


def _load(path: Path, key: str) -> tuple[Any, Any, Path]:
    """The launcher of the library at `path`, which must say it was built for `key`."""
    # Checked before the dynamic loader maps it, which trusts the file: a library cut short (a killed write, a full
    # disk) loaded, then crashed the process with SIGBUS at its first touch of a page past the end, before any key
    # could be read; cut in its tail, it loaded without its section headers; a flipped byte in its code ran
    # (docs/caching.md#checksums). The checksum proves it is the file g++ wrote, byte for byte.
    try:
        unseal(read_file(path))
    except (OSError, ValueError) as e:
        raise _Damaged(f"{type(e).__name__}: {e}") from None
    try:
        lib = ctypes.CDLL(str(path))
        found = ctypes.c_char_p(ctypes.addressof(ctypes.c_char.in_dll(lib, "gk_hostcuda_key"))).value
        launcher = getattr(lib, ENTRY)
    except (OSError, ValueError, AttributeError) as e:
        raise _Damaged(f"{type(e).__name__}: {e}") from None
    if found != key.encode():
        _unload(lib)
        raise _Damaged(f"built for another source ({found[:40]!r})")
    launcher.restype = None
    launcher.argtypes = (ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p, ctypes.c_longlong,
                         ctypes.c_void_p)
    return launcher, lib, path


def _unload(lib: Any) -> None:
    """Close a library that is not the one its name promises, so that the rebuilt one loads in its place
    (the dynamic loader would otherwise hand back the loaded one for the same path)."""
    import _ctypes
    _ctypes.dlclose(lib._handle)
