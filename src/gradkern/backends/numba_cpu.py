"""CPU backend: typed IR → Python source → `numba.njit`, the backend object.

numba_loops.py prints a kernel's module (the loop nest, the chunks and their private copies, the sibling
functions), numba_plan.py decides its chunks and keeps the mixed targets' slot copies, numba_syntax.py
spells the IR. Here: the module compiled (`compile_source`), and the launch run through its entry or one of
its siblings: the serial twin for launches of fewer than SERIAL_THREADS threads (and for larger ones where it
measures faster: numba_choice.py; of one thread where the thread body loops, LOOP_SERIAL_THREADS),
`<entry>_atomics_serial` when the private copies would exceed the memory limit (`numba_plan.private_chunks`
returns 0, the entry returns False), `<entry>_edges` when a 1-D launch's edges are too wide to run serially.
Generated modules are
written to the cache directory under a content hash and executed from there, so Numba's own `cache=True`
finds them again in the next process (the file never changes, so its stamp stays valid); numba_cache.py
keeps that cache healthy.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..environment import env_int
from ..errors import InternalError
from ..ir import names
from ..ir import nodes as ir
from . import numba_choice, numba_loops, numba_plan
from .base import Backend, Generated, LaunchInfo
from .numba_loops import LoopPrinter, NumbaOptions
from .numba_plan import MixedPlan, mixed_plan, owned_rows, sparse_pays, spilled

# A parallel launch of fewer threads than this runs the serial twin of its entry (numba_loops.py): waking the
# worker threads costs more than a few hundred threads of a loop-free body (benchmarks/runtime/overhead.py).
# 0 turns the twins off.
SERIAL_THREADS = env_int("GRADKERN_SERIAL_THREADS", 256)
# A launch of a kernel whose thread body loops runs its serial twin only below this many threads (and below
# SERIAL_THREADS: 0 turns these twins off too), never by measurement: a launch of one thread gains nothing from a
# parallel region whatever its body does (a one-thread Gauss-Seidel sweep: 20 ms a launch as a parallel region
# with 2 Numba threads on the loaded machine, ~0.1 ms serially), but two threads of a loop body may each be long
# and then pay on two cores (docs/performance.md, "Loop bodies: one thread").
LOOP_SERIAL_THREADS = 2
# Vector mode runs its k lanes in launches of at most this many lanes, the primal once (Backend.lane_group;
# 0: all k in one launch). The 2-D heat step's gather costs about the same per launch for 1 to 4 lanes at
# 1024^2, and a parallel launch on a loaded machine can stall at its barrier: on the 2-core Intel Xeon (260 MiB
# L3) 4 was the fastest group of 1/2/4/8 in both modes at 256^2 and 1024^2 (1 and 2 threads), 8 about as fast.
# 2 was chosen on a 2-core AMD EPYC (32 MiB L3), whose 8-lane gather's equally aligned rows collided in cache
# sets; 4 measured within 16% of 2 there (benchmarks/kernels/batch.py --lane-group, RESULTS.md).
LANE_GROUP = env_int("GRADKERN_LANE_GROUP", 4)

# Set in a child forked (os.fork, multiprocessing's "fork") from a process whose Numba ran a parallel region on
# its OpenMP threading layer: GNU OpenMP terminates such a child (SIGTERM) at its first parallel region, so a
# Pool's workers died and its map hung. The child runs every launch serially instead: each entry's serial twin,
# or the function compiled again without parallel=True (`_serial_of`), siblings too (docs/launches.md).
_FORKED_FROM_OMP = [False]


def _after_fork_in_child() -> None:
    import sys
    numba = sys.modules.get("numba")
    try:
        layer = numba.threading_layer() if numba is not None else None
    except ValueError:  # no parallel region has run: the child starts OpenMP afresh
        layer = None
    _FORKED_FROM_OMP[0] = layer == "omp"


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

_SERIAL: dict[int, tuple[Any, Any]] = {}


def _serial_of(fn: Any) -> Any:
    """`fn` (a Numba dispatcher) compiled without parallel=True, in this process only (prange runs as range):
    what a forked child of an OpenMP process runs in place of a parallel function."""
    if not fn.targetoptions.get("parallel"):
        return fn
    hit = _SERIAL.get(id(fn))
    if hit is None or hit[0] is not fn:
        import numba
        options = {k: v for k, v in fn.targetoptions.items() if k not in ("parallel", "cache", "nopython")}
        hit = _SERIAL[id(fn)] = (fn, numba.njit(**options)(fn.py_func))
    return hit[1]


@dataclass(frozen=True)
class CpuLaunch(LaunchInfo):
    """What a CPU launch of a generated module needs beside its entry: the atomic targets privatised per
    chunk (a parallel launch's; the entry then takes `_gkb_chunks`), the serial twin's name (run for
    launches of fewer than SERIAL_THREADS threads), the 1-D parallel loop over edges too wide to run
    serially (`<entry>_edges`), the privatised targets the kernel also loads or stores plainly and the
    plan they run by (numba_plan.MixedPlan, None without them), the targets whose rows the chunks own
    (numba_plan.owned_rows: no copy), and those `<entry>_sparse` spills, with their bound of adds per
    thread (numba_plan.spilled; empty without that sibling). `loops`: the thread body has a loop, so the twin
    runs only below `_twin_threads(info)` threads (LOOP_SERIAL_THREADS)."""

    private: tuple[str, ...] = ()
    serial: str | None = None
    edges: str | None = None
    mixed: tuple[str, ...] = ()
    plan: MixedPlan | None = None
    owned: tuple[str, ...] = ()
    spilled: tuple[tuple[str, int], ...] = ()
    chunked: bool = False  # the entry takes `_gkb_chunks` without private copies (deferred statements)
    # sums whose adds LLVM may reassociate (`_gkb_radd`, as the printer recorded): the serial twin may group their
    # terms otherwise than the parallel loop, so numba_choice never measures the two against each other
    # (docs/performance.md)
    reassociated: bool = False
    # privatised targets whose chunks sum in a register (numba_syntax.register_accumulators)
    registers: tuple[str, ...] = ()
    loops: bool = False  # a loop in the thread body: the twin for launches of fewer than LOOP_SERIAL_THREADS threads

    def chunk_bytes(self, sizes: dict[str, int]) -> int:
        """Bytes of private copies per chunk (`sizes`: bytes per array): of every privatised target, or in
        a mixed launch of those that are not mixed and of the shared ones (one copy per slot, at most one
        per chunk)."""
        shared = self.plan.shared if self.plan is not None else ()
        return sum(sizes[a] for a in self.private if a not in self.mixed and a not in self.owned) + \
            sum(sizes[a] for a in shared)


_modules: dict[str, Any] = {}
_lock = threading.Lock()


def compile_source(source: str, entry: str, directory: Path) -> Callable[..., Any]:
    """Load the generated module from `directory` (writing it once) and return
    its njit entry. Numba compiles lazily on the first call, or loads its cache;
    a damaged cache entry is rebuilt, an unusable directory falls back to
    memory (numba_cache.py)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    name = f"gradkern_gen_{digest}"
    with _lock:
        mod = _modules.get(name)
        if mod is None:
            from .numba_cache import load_module  # imports Numba: generating source needs none

            mod = _modules[name] = load_module(name, source, directory)
    return getattr(mod, entry)


def _threads(dim: tuple[int, ...]) -> int:
    n = 1
    for d in dim:
        n *= d
    return n


_SIBLINGS: dict[tuple[int, str], tuple[Any, Any]] = {}


def _sibling(entry: Any, name: str) -> Any:
    """The function `name` printed beside `entry` in its generated module. Numba compiles it on its
    first call, not when the module loads: a launch that never needs it never compiles it."""
    hit = _SIBLINGS.get((id(entry), name))
    if hit is None or hit[0] is not entry:
        hit = _SIBLINGS[id(entry), name] = (entry, entry.py_func.__globals__[name])
    return _serial_of(hit[1]) if _FORKED_FROM_OMP[0] else hit[1]


_COPIED: dict[int, tuple[Any, Any, tuple[int, ...]]] = {}


def _copied(typed: ir.Kernel, info: Any) -> tuple[int, ...]:
    """The positions of the privatised targets copied whole per chunk (neither mixed nor row-owned), kept per
    kernel and launch info (asked at every privatised launch)."""
    entry = _COPIED.get(id(info))
    if entry is not None and entry[0] is info and entry[1] is typed:
        return entry[2]
    private, mixed, owned = info.private, info.mixed, info.owned
    got = tuple(n for n, p in enumerate(typed.params) if p.name in private and p.name not in mixed
                and p.name not in owned)
    if len(_COPIED) >= 4096:
        _COPIED.clear()
    _COPIED[id(info)] = (info, typed, got)
    return got


def _twin_threads(info: CpuLaunch) -> int:
    """A launch of fewer threads than this runs `info`'s serial twin (given one)."""
    return min(SERIAL_THREADS, LOOP_SERIAL_THREADS) if info.loops else SERIAL_THREADS


def _serial_twin(entry: Any, name: str) -> Any:
    """The serial twin printed beside `entry` in its generated module."""
    return _sibling(entry, name)


class NumbaBackend(Backend):
    """The CPU: every race-free launch a `prange` loop nest, atomics privatised per chunk."""

    name = "cpu"
    splits_interior = True
    blocks_steps = True
    private_rows = True
    row_lagged = True
    lane_group = LANE_GROUP

    def keeps_interior(self, k: ir.Kernel) -> bool:
        return numba_loops.keeps_interior(k)

    def workers(self) -> int:
        return numba_plan.thread_count()

    def generate(self, k: ir.Kernel, launch_ndim: int, *, parallel: bool, strided: frozenset[str],
                 header: str) -> Generated:
        atomic = tuple(sorted({s.array for s in ir.walk_stmts(k.body) if isinstance(s, ir.AtomicAdd)}))
        bodies = k.body + (k.interior.body if k.interior is not None else ())
        plain = {s.array for s in ir.walk_stmts(bodies) if isinstance(s, ir.Store)} | \
            {e.array for e in ir.all_exprs(bodies) if isinstance(e, ir.Load)}
        # a serial twin for tiny launches; where the body loops (each thread's work unbounded), for one thread only.
        # A looped gather's loop over its offsets is not such a loop: it is the unrolled gather's copies folded
        # (transforms/gather.py), each thread's work that of the unrolled gather, which has no loop (docs/launches.md)
        twin = parallel
        loops = any(isinstance(s, ir.While) or (isinstance(s, ir.For) and s.var != names.GATHER_NEIGHBOUR)
                    for s in ir.walk_stmts(k.body + (k.deferred.body if k.deferred is not None else ())))
        mixed = tuple(a for a in atomic if a in plain)
        plan = mixed_plan(k, mixed) if parallel and mixed else None
        # owned rows and sparse lists not beside deferred rows (a gather's clearing: transforms/fold.py)
        plain_chunks = parallel and k.deferred is None
        owned = owned_rows(k, atomic, mixed) if plain_chunks else {}
        # an Active scalar's sums (every add at constant indices) keep their copy of a few elements
        variable = {s.array for s in ir.walk_stmts(bodies) if isinstance(s, ir.AtomicAdd)
                    and not all(isinstance(i, ir.Const) for i in s.indices)}
        spill = spilled(k, atomic, set(mixed) | set(owned) | (set(atomic) - variable)) \
            if plain_chunks and not mixed else {}
        options = NumbaOptions(parallel=parallel, privatized=atomic, mixed=mixed, plan=plan, serial_twin=twin,
                               owned=tuple(owned.items()), spilled=tuple(spill.items()))
        printer = LoopPrinter(k, launch_ndim, options, header)
        source, entry = printer.module(), printer.entry
        edges = f"{entry}_edges" if printer.edges else None
        sparse = tuple(spill.items()) if printer.spilled else ()
        return Generated(source, entry, CpuLaunch(atomic if parallel else (), f"{entry}_serial" if twin else None,
                                                  edges, mixed if parallel else (), plan, tuple(owned), sparse,
                                                  parallel and k.deferred is not None, printer.reassociated,
                                                  tuple(sorted(printer.registers)), loops))

    def compile(self, code: Generated, cache: Path) -> Any:
        return compile_source(code.source, code.entry, cache / "numba")

    def run(self, typed: ir.Kernel, code: Generated, entry: Any, parallel: bool, dim: tuple[int, ...],
            values: list) -> None:
        if 0 in dim:
            return
        if entry is None:
            raise InternalError(f"kernel '{typed.name}' was run before it was compiled")
        info: CpuLaunch = code.info
        main = entry
        if _FORKED_FROM_OMP[0] and parallel:
            serial = _serial_twin(entry, info.serial) if info.serial is not None else _serial_of(entry)
            self._launch(typed, code, serial, entry, dim, values)
            return
        if info.serial is not None:
            threads = _threads(dim)
            if threads < (min(SERIAL_THREADS, LOOP_SERIAL_THREADS) if info.loops else SERIAL_THREADS):
                entry = _serial_twin(entry, info.serial)
            elif numba_choice.ENABLED and SERIAL_THREADS and not info.reassociated and not info.loops:
                # by measurement (numba_choice.py)
                serial, trial = numba_choice.CHOICE.pick(entry, threads)
                t0 = time.perf_counter()
                self._launch(typed, code, _serial_twin(entry, info.serial) if serial else entry, entry, dim, values)
                if trial is not None:
                    numba_choice.CHOICE.report(trial, serial, time.perf_counter() - t0)
                return
        self._launch(typed, code, entry, main, dim, values)

    def launcher(self, typed: ir.Kernel, code: Generated, entry: Any, parallel: bool, dim: tuple[int, ...],
                 values: list) -> Any:
        """`run`'s choices for this dim and these values' geometry made once (Backend.launcher): the entry or its
        serial twin, the privatised copies' bytes; the chunks still follow Numba's thread count at each launch.
        None where `run` decides more at each launch: an empty dim, a choice by timing, mixed or sparse targets."""
        info: CpuLaunch = code.info
        if 0 in dim or entry is None or (info.private and info.plan is not None) or info.spilled or _FORKED_FROM_OMP[0]:
            return None
        # what `run` reads at each launch besides the values: changed (tests patch them), the launch is `run`'s
        main, threshold, choosing, twin_of = entry, SERIAL_THREADS, numba_choice.ENABLED, _serial_twin
        loop_threshold = LOOP_SERIAL_THREADS
        if info.serial is not None:
            if _threads(dim) < _twin_threads(info):
                entry = _serial_twin(entry, info.serial)
            elif numba_choice.ENABLED and SERIAL_THREADS and not info.reassociated and not info.loops:
                return None
        chunked = info.private or info.chunked
        copy_bytes = sum([values[n].nbytes for n in _copied(typed, info)]) if chunked else 0
        n0, mixed = dim[0], bool(info.mixed)

        def launch(values: list) -> None:
            if SERIAL_THREADS != threshold or numba_choice.ENABLED != choosing or _serial_twin is not twin_of \
                    or LOOP_SERIAL_THREADS != loop_threshold or _FORKED_FROM_OMP[0]:  # made before a fork
                self.run(typed, code, main, parallel, dim, values)
            elif not chunked:
                if entry(*dim, *values) is False:
                    _sibling(main, info.edges)(*dim, *values)
            else:
                chunks = numba_plan.private_chunks(copy_bytes, n0, mixed)
                if entry(*dim, *values, chunks) is False:
                    _sibling(main, f"{code.entry}_atomics_serial")(*dim, *values, chunks)
        return launch

    def _launch(self, typed: ir.Kernel, code: Generated, entry: Any, main: Any, dim: tuple[int, ...],
                values: list) -> None:
        """Run `entry` (the generated entry `main` or its serial twin) and the siblings it hands over to."""
        info: CpuLaunch = code.info
        twin = entry is not main
        if info.private and info.plan is not None:
            self._run_mixed(typed, code, entry, dim, values)
        elif info.private or info.chunked:  # privatised atomic targets: how many private copies fit the limit
            # info.chunk_bytes without a plan (no shared targets), inline: this is every privatised launch's path
            copy_bytes = sum([values[n].nbytes for n in _copied(typed, info)])
            mixed = info.mixed
            chunks = numba_plan.private_chunks(copy_bytes, dim[0], bool(mixed))
            if info.spilled and self._sparse(typed, info, main, code.entry + ("_sparse_serial" if twin else "_sparse"),
                                             dim, values):
                return
            if entry(*dim, *values, chunks) is False:  # no chunks: the serial path
                _sibling(main, f"{code.entry}_atomics_serial")(*dim, *values, chunks)
        elif entry(*dim, *values) is False:  # edges too wide to run serially: their parallel loop
            _sibling(main, info.edges)(*dim, *values)

    def _sparse(self, typed: ir.Kernel, info: CpuLaunch, main: Any, name: str, dim: tuple[int, ...],
                values: list) -> bool:
        """Run the launch as `name` (`<entry>_sparse`, or its serial twin) when sparse privatisation pays
        (numba_plan.sparse_pays): the copies of the other targets within the memory limit, the spilled
        targets' bound of adds against the elements of the copies they save. Whether it ran."""
        spill = dict(info.spilled)
        arrays = {p.name: values[n] for n, p in enumerate(typed.params) if p.name in info.private}
        others = sum(x.nbytes for a, x in arrays.items() if a not in spill and a not in info.owned)
        chunks = numba_plan.private_chunks(others, dim[0])
        reserved = (dim[0] // max(chunks, 1) + 1) * _threads(dim[1:]) * chunks  # the lists' room, in adds
        adds = sum(bound * _threads(dim) for bound in spill.values())
        pairs = sum(bound * reserved * (8 * arrays[a].ndim + arrays[a].itemsize) for a, bound in spill.items())
        if not sparse_pays(adds, sum(arrays[a].size for a in spill), chunks, pairs):
            return False
        _sibling(main, name)(*dim, *values, chunks)
        return True

    def ahead(self, code: Generated, entry: Any, dim: tuple[int, ...], values: list) -> Any:
        """The function `run` calls for this launch, to compile ahead (numba_cache.ahead); none for the
        rarer paths (mixed targets, the serial fallbacks), which compile at their first call."""
        info: CpuLaunch = code.info
        if 0 in dim or entry is None or info.plan is not None:
            return None
        if info.serial is not None and _threads(dim) < _twin_threads(info):
            entry = _serial_twin(entry, info.serial)
        from .numba_cache import ahead
        return ahead(entry, (*dim, *values, *((0,) if info.private or info.chunked else ())))

    def compile_here(self, ahead: Any) -> None:
        from .numba_cache import compile_here
        compile_here(ahead)

    def _run_mixed(self, typed: ir.Kernel, code: Generated, entry: Any, dim: tuple[int, ...], values: list) -> None:
        """A launch with mixed targets (`MixedPlan`): the shared targets' slot copies come from the cache
        and go back to it, all zero, after a launch that returns; a launch that raises drops them."""
        import numpy

        info: CpuLaunch = code.info
        plan: MixedPlan = info.plan
        arrays = {p.name: values[n] for n, p in enumerate(typed.params) if p.name in info.private}
        copy_bytes = info.chunk_bytes({a: x.nbytes for a, x in arrays.items()})
        chunks = plan.chunks(numba_plan.private_chunks(copy_bytes, dim[0], True, plan.width), dim[0])
        if chunks == 0 or not plan.shared:
            # the serial branch: empty buffers of the cached ones' types (no other specialisation to compile)
            empty = [x for a in plan.shared for x in (numpy.zeros((0,) * (arrays[a].ndim + 1), arrays[a].dtype),
                                                      numpy.zeros((0, 0), numpy.uint8))]
            if entry(*dim, *values, chunks, *empty) is False:
                _sibling(entry, f"{code.entry}_atomics_serial")(*dim, *values, chunks, *empty)
            return
        slots = plan.slots(chunks)
        keys = [(arrays[a].shape, arrays[a].dtype.str, slots, a) for a in plan.shared]
        spare = numba_plan.SLOTS
        buffers = [spare.take(key) for key in keys]
        entry(*dim, *values, chunks, *[x for pair in buffers for x in pair])  # raises: the buffers are dropped
        for key, pair in zip(keys, buffers):
            spare.keep(key, pair)

    def array_module(self) -> Any:
        import numpy
        return numpy

    def summation(self, code: Generated, accumulator: str, parallel: bool) -> str:
        if parallel and accumulator in code.info.private:
            how = ("into a register whose adds may be reassociated, so that the loop vectorises (partial sums in "
                   "vector lanes, combined at the chunk's end)" if accumulator in code.info.registers
                   else "in order into its own slot")
            return (f"per-chunk partial sums: each Numba thread's chunk sums its threads' terms {how}, "
                    "and the chunks' sums are added once after the loop (no atomics)")
        return super().summation(code, accumulator, parallel)

    def private_bytes(self, code: Generated, sizes: dict[str, int], dim: tuple[int, ...]) -> int:
        info: CpuLaunch = code.info
        if not info.private or 0 in dim:
            return 0
        if info.plan is not None:  # the per-chunk copies of the targets that are not mixed, the shared slots
            plan = info.plan
            chunks = plan.chunks(numba_plan.private_chunks(info.chunk_bytes(sizes), dim[0], True, plan.width), dim[0])
            copied = sum(sizes[a] for a in info.private if a not in info.mixed and a not in info.owned)
            return chunks * copied + plan.slots(chunks) * sum(sizes[a] for a in plan.shared) if chunks else 0
        copy = info.chunk_bytes(sizes)
        return numba_plan.private_chunks(copy, dim[0], bool(info.mixed)) * copy
